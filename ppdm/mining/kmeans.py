"""k-means over partitioned data: horizontal (rows split) and vertical (columns split).

Both run Lloyd's algorithm exactly as a centralized run on the pooled data would
(scikit-learn's ``KMeans(algorithm="lloyd", n_init=1, init=<same centers>)``): each
iteration assigns every record to its closest center (ties to the lowest index), recomputes
each center as the mean of its records, and stops when no assignment changes, when the
total squared center shift is at most ``tol`` times the mean per-attribute variance, or
after ``max_iter`` iterations. An empty cluster keeps its previous center (scikit-learn
would relocate it; the tests avoid empty clusters).

Starting centers
    ``init="random-partition"`` (the default; the Random Partition method, Hamerly & Elkan
    2002) deals every record uniformly at random (``secrets``-based) into one of ``k``
    groups and starts from the group means: aggregates over about ``N / k`` records each,
    never a record. Horizontally every party deals its own records (a random balanced
    deal, so its share of every group is about ``n_i / k``; with ``min_party_records``
    it uses only as many randomly chosen groups as it can fill with that many records)
    and the group sums and counts go through the same secure sums as an iteration (no
    party sees another's sums or counts). Vertically the deal must be the same at every
    party for each aligned row: it is expanded (SHAKE-256) from a joint seed that the
    parties draw by commit-then-reveal coin tossing (Blum 1981), so no party chooses it;
    every party then computes its own columns' group means. A random deal reveals
    nothing; the starting centers and group sizes are aggregates.
    Random groups start every center near the pooled mean, so the first iteration's
    cells can be thin and stop the job on the bounds below (measured: a quarter to two
    thirds of runs with the floor at 3 on Gaussian blobs). ``"random-slabs"``
    (horizontal) deals every party's records instead into ``k`` slabs of equal count
    along a direction drawn by the same coin tossing (its own quantiles of ``x @ u``):
    the same release of aggregates over about ``N / k`` records (at least
    ``min_party_records`` of each party's), with centers spread along ``u``. It is not
    offered vertically: a row's projection needs every party's columns.
    ``"first-k"``, ``"kmeans++"`` (horizontal), ``"random"`` (vertical) and explicit
    centers remain available; they start from real records (below).

Aggregation bounds (checked before anything is published)
    The pooled number of records ``N`` comes first (horizontal: by secure sum with the
    dimension, so each party's count stays private; vertical: the common record count).
    If ``k * max(min_cluster_size, 1) > N`` every party stops with
    :class:`~ppdm.errors.ConfigError` before any value derived from the records is sent.
    With ``min_cluster_size > 0`` the sizes of the starting groups and of the clusters
    of every iteration are summed first and the job stops
    (:class:`~ppdm.errors.AggregationTooSmall`) before a center over fewer records is
    computed (an emptied cluster keeps its previous center and is not a new release; an
    empty starting group stops the job). With ``min_party_records = m > 1`` a party
    whose own share of a starting group or cluster is between 1 and ``m - 1`` records
    contributes nothing but a flag to that secure sum, and every party stops with
    :class:`~ppdm.errors.AggregationTooSmall` (a fixed reason, no count): a coalition
    holding the other records of a cluster can never single out one or two of an
    honest party's records by subtracting its own. The stop reveals that *some* party
    fell below the floor (to a coalition of all other parties: that this one did).

Horizontal k-means (:func:`horizontal_kmeans`)
    Every party holds whole records. Per iteration each party assigns its own records and
    computes per-cluster sums and counts; these are added by secure sum
    (:mod:`ppdm.protocols.secure_sum`, fixed-point encoding with ``fraction_bits``), so
    every party learns the new centers and nothing about another party's records beyond
    what the centers and counts reveal. Aggarwal 2015, §20.5; the standard secure-sum
    construction (e.g. Jagannathan & Wright 2005 describe the arbitrarily partitioned
    generalization).

    Leaks: the pooled record count ``N``; the order of magnitude of each party's column
    sums (for the precision); with ``random-partition`` the starting centers and group
    sizes (aggregates); the centers and cluster sizes of every iteration, the number of
    records that changed cluster, the total inertia; whether some party fell below
    ``min_party_records``. With ``init="first-k"`` the first ``k`` records of the pooled
    data (held by the first parties) become the initial centers and so are revealed, and
    every party's record count is revealed to place them; with ``init="kmeans++"`` the
    chosen records and each party's sum of squared distances per seeding step are
    revealed.

    Cost per iteration: one secure sum of ``k*d + k + 1`` values (``n`` ring messages and
    ``n - 1`` result messages of ``8 (k d + k + 1)`` bytes); with ``min_cluster_size`` or
    ``min_party_records`` the ``k + 2`` counts go first in a secure sum of their own.
    ``random-partition`` costs one such round (or pair of rounds) before the first
    iteration.
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from ppdm.errors import AggregationTooSmall, ConfigError, ProtocolError
from ppdm.mining import fixed_point
from ppdm.parties.network import Network
from ppdm.progress import Progress, progress_or_null
from ppdm.protocols.secure_sum import secure_sum
from ppdm.randomness import SecureRandom, SeededRandom

log = logging.getLogger(__name__)

__all__ = ["KMeansResult", "LocalRecords", "assign", "horizontal_kmeans", "vertical_kmeans"]

Init = Literal["random-partition", "random-slabs", "first-k", "kmeans++"]


@dataclass
class KMeansResult:
    """What one party gets from distributed k-means."""

    centers: np.ndarray  # (k, d) for horizontal; (k, d_own) own columns for vertical
    labels: np.ndarray  # this party's records' clusters (horizontal) / all records (vertical)
    iterations: int
    inertia: float
    converged: bool
    history: list[dict[str, Any]] = field(default_factory=list)
    #: The starting centers (vertical: this party's columns of them) and, for
    #: ``init="random-partition"``, the sizes of the random starting groups.
    initial_centers: np.ndarray | None = None
    initial_sizes: list[int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "centers": self.centers.tolist(),
            "iterations": self.iterations,
            "inertia": self.inertia,
            "converged": self.converged,
            "cluster_sizes": self.history[-1]["sizes"] if self.history else [],
        }

    def to_frame(self) -> Any:
        """The clusters as a pandas DataFrame: one row per cluster, the center's
        coordinates (``x0``, ``x1``, ...; vertical: this party's columns) and ``size``."""
        import pandas as pd

        centers = np.asarray(self.centers, dtype=float)
        frame = pd.DataFrame(centers, columns=[f"x{j}" for j in range(centers.shape[1])])
        sizes = self.history[-1]["sizes"] if self.history else None
        if sizes is not None and len(sizes) == len(frame):
            frame["size"] = np.asarray(sizes, dtype=np.int64)
        frame.index.name = "cluster"
        return frame


def assign(x: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closest center of each row (ties to the lowest index) and its squared distance."""
    d2 = ((x[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    labels = np.argmin(d2, axis=1)
    return labels, d2[np.arange(len(x)), labels]


class LocalRecords(Protocol):
    """A party's records for horizontal k-means, when they are not one in-memory array
    (e.g. :class:`ppdm.sources.StreamedRecords`, which scans a data source once per
    iteration in bounded memory): the local work of Lloyd's algorithm behind one seam.

    ``init="random-partition"`` also needs ``group_sums(labels, k)``: the per-group sums
    ``(k, d)`` and counts ``(k,)`` of the records under the given labels (one scan);
    records without it take another ``init``."""

    shape: tuple[int, int]

    def head(self, k: int) -> np.ndarray:
        """The first ``k`` records, ``(k, d)`` float64."""
        ...

    def column_sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per column: the sum of ``|x|``, of ``x`` and of ``x**2``."""
        ...

    def cluster_sums(self, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Lloyd's local step: every record's closest center (ties to the lowest index),
        the per-cluster sums ``(k, d)`` and counts ``(k,)``, and the total squared
        distance of the records to their centers."""
        ...


class _ArrayRecords:
    """:class:`LocalRecords` of an in-memory array (the default path)."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x
        self.shape = (int(x.shape[0]), int(x.shape[1]))

    def head(self, k: int) -> np.ndarray:
        return self.x[:k]

    def column_sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = self.x
        d = x.shape[1]
        return (
            np.abs(x).sum(axis=0) if len(x) else np.zeros(d),
            x.sum(axis=0),
            (x**2).sum(axis=0),
        )

    def cluster_sums(self, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        x = self.x
        k, d = centers.shape
        if not len(x):
            return np.zeros(0, np.int64), np.zeros((k, d)), np.zeros(k, np.int64), 0.0
        labels, d2 = assign(x, centers)
        sums = np.zeros((k, d))
        np.add.at(sums, labels, x)
        counts = np.bincount(labels, minlength=k).astype(np.int64)
        return labels, sums, counts, float(d2.sum())

    def group_sums(self, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        sums = np.zeros((k, self.shape[1]))
        np.add.at(sums, labels, self.x)
        return sums, np.bincount(labels, minlength=k).astype(np.int64)


def _check_int(value: Any, frm: str, step: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(frm, step, "expected an integer")
    return value


def _init_first_k(net: Network, x: np.ndarray | LocalRecords, k: int) -> np.ndarray:
    """The first ``k`` records of the pooled data (parties in consortium order)."""
    n_local, d = x.shape
    net.broadcast("kmeans/init/size", n_local)
    counts = {net.me: n_local}
    for p, v in net.gather("kmeans/init/size").items():
        counts[p] = _check_int(v, p, "kmeans/init/size")
        if counts[p] < 0:
            raise ProtocolError(p, "kmeans/init/size", "negative record count")
    if sum(counts.values()) < k:
        raise ValueError(f"k={k} exceeds the {sum(counts.values())} pooled records")
    need = k
    rows: list[np.ndarray] = []
    for p in net.parties:
        take = min(need, counts[p])
        if take:
            if p == net.me:
                part = (x[:take] if isinstance(x, np.ndarray) else x.head(take)).astype(np.float64)
                net.broadcast("kmeans/init/rows", part)
            else:
                part = net.receive(p, "kmeans/init/rows", expect=np.ndarray)
                if part.dtype != np.float64 or part.shape != (take, d):
                    raise ProtocolError(p, "kmeans/init/rows", "wrong shape of initial rows")
            rows.append(part)
        need -= take
        if need == 0:
            break
    return np.concatenate(rows)


def _init_kmeanspp(net: Network, x: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Distributed k-means++ seeding (D^2 sampling) driven by a public seed.

    The shared generator draws the same uniforms at every party; each party reveals the
    sum of its records' squared distances to the chosen centers, and the party whose share
    of the cumulative sum the draw falls in reveals the chosen record."""
    shared = SeededRandom(seed)
    d = x.shape[1]
    weights = np.ones(len(x), dtype=np.float64)  # first center: uniform over records
    centers: list[np.ndarray] = []
    closest = np.full(len(x), np.inf)
    for j in range(k):
        step = f"kmeans/init/pp{j}"
        local = float(weights.sum())
        net.broadcast(f"{step}/mass", local)
        mass = {net.me: local}
        for p, v in net.gather(f"{step}/mass").items():
            if not isinstance(v, float) or not math.isfinite(v) or v < 0:
                raise ProtocolError(p, f"{step}/mass", "mass must be a finite float >= 0")
            mass[p] = v
        total = sum(mass[p] for p in net.parties)
        if total <= 0:
            raise ValueError("k-means++ seeding found no mass (too few distinct records)")
        u = float(shared.random(1)[0]) * total
        acc = 0.0
        owner = net.parties[-1]
        for p in net.parties:
            if u < acc + mass[p] and mass[p] > 0:
                owner = p
                break
            acc += mass[p]
        if owner == net.me:
            cum = np.cumsum(weights)
            idx = int(np.searchsorted(cum, u - acc, side="right"))
            idx = min(idx, len(x) - 1)
            chosen = x[idx].astype(np.float64)
            net.broadcast(f"{step}/center", chosen)
        else:
            chosen = net.receive(owner, f"{step}/center", expect=np.ndarray)
            if chosen.dtype != np.float64 or chosen.shape != (d,):
                raise ProtocolError(owner, f"{step}/center", "wrong shape of chosen center")
        centers.append(chosen)
        closest = np.minimum(closest, ((x - chosen) ** 2).sum(axis=1))
        weights = closest
    return np.array(centers)


def _check_sizes(sizes: np.ndarray, minimum: int, where: str, *, empty_ok: bool = True) -> None:
    """Stop (at every party alike: the sizes are public to all) if a non-empty cluster
    (with ``empty_ok=False``: any group) holds fewer than ``minimum`` records. The message
    names the step (``where``) only."""
    small = (sizes < minimum) & ((sizes > 0) if empty_ok else True)
    if not empty_ok and np.any(sizes <= 0):
        raise AggregationTooSmall(
            f"{where}: a random starting group is empty; no centre is released (run again "
            "or lower k)"
        )
    if np.any(small):
        raise AggregationTooSmall(
            f"{where}: a cluster holds fewer than min_cluster_size = {minimum} "
            "records; its centre is not released"
        )


def _below_floor(counts: np.ndarray, min_party_records: int) -> bool:
    """Whether this party holds between 1 and ``min_party_records - 1`` records of some
    group or cluster (the per-party floor; module docstring)."""
    return min_party_records > 1 and bool(np.any((counts > 0) & (counts < min_party_records)))


def _floor_error(where: str) -> AggregationTooSmall:
    """The per-party floor's stop: a fixed reason, no count and no party."""
    return AggregationTooSmall(
        f"{where}: a party holds fewer than min_party_records records of a cluster (but "
        "not none); no centre is released"
    )


def _check_bound(k: int, min_cluster_size: int, n_all: int) -> None:
    """Refuse ``k`` that cannot give ``k`` clusters of ``min_cluster_size`` records out
    of the ``n_all`` pooled ones (the text names only the public parameters)."""
    if k * max(min_cluster_size, 1) > n_all:
        what = "k * min_cluster_size" if min_cluster_size > 0 else "k"
        raise ConfigError(
            f"{what} exceeds the pooled number of records (k = {k}, min_cluster_size = "
            f"{min_cluster_size}); nothing derived from the records was sent"
        )


def _release_sums(
    net: Network,
    step: str,
    sums: np.ndarray,
    counts: np.ndarray,
    extra: np.ndarray,
    fbits: np.ndarray,
    *,
    min_cluster_size: int,
    min_party_records: int,
    where: str,
    empty_ok: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pooled per-cluster sums ``(k, d)``, counts ``(k,)`` and ``extra`` integers, by
    secure sum (fixed point with ``fbits`` per column).

    With ``min_cluster_size`` or ``min_party_records`` the counts, the extras and a flag
    (this party is below the floor; it then contributes zeros) are summed first, under
    ``{step}/sizes``, and every party stops before the coordinate sums are computed if
    the flag total is positive or a cluster is too small."""
    k, d = sums.shape
    enc = np.rint(np.ldexp(sums, fbits[None, :])).astype(np.int64).ravel()
    if min_cluster_size > 0 or min_party_records > 1:
        below = _below_floor(counts, min_party_records)
        mine = np.concatenate(
            [np.zeros(k + len(extra)) if below else np.concatenate([counts, extra]), [below]]
        ).astype(np.int64)
        sizes = secure_sum(net.scoped(f"{step}/sizes"), mine)
        if int(sizes[-1]) != 0:
            raise _floor_error(where)
        _check_sizes(sizes[:k], min_cluster_size, where, empty_ok=empty_ok)
        total = np.concatenate([secure_sum(net.scoped(step), enc), sizes[:-1]])
    else:
        total = secure_sum(net.scoped(step), np.concatenate([enc, counts, extra]).astype(np.int64))
    g_sums = np.ldexp(np.asarray(total[: k * d], dtype=np.float64).reshape(k, d), -fbits[None, :])
    g_counts = np.asarray(total[k * d : k * d + k], dtype=np.int64)
    if not empty_ok:
        _check_sizes(g_counts, min_cluster_size, where, empty_ok=False)
    return g_sums, g_counts, np.asarray(total[k * d + k :], dtype=np.int64)


def _random_groups(n: int, k: int, min_party_records: int) -> np.ndarray:
    """This party's random deal of its ``n`` records into ``k`` groups (``secrets``-based):
    a uniformly random balanced deal into ``g`` groups chosen uniformly at random, where
    ``g = k``, or, with a floor ``m = min_party_records > 1``, ``g = min(k, n // m)`` so
    that each used group gets at least ``m`` records. Every record's group is uniform
    over the ``k`` groups."""
    labels = np.zeros(n, dtype=np.int64)
    if n == 0:
        return labels
    g = k if min_party_records <= 1 else max(1, min(k, n // min_party_records))
    rng = SecureRandom()
    groups = rng.permutation(k)[:g]
    labels[rng.permutation(n)] = groups[np.arange(n) % g]
    return labels


def _common_direction(seed: bytes, d: int) -> np.ndarray:
    """A unit vector uniform on the sphere, the same at every party: Box-Muller normals
    from SHAKE-256 of the joint ``seed``."""
    words = np.frombuffer(
        hashlib.shake_256(b"ppdm/kmeans/random-slabs\0" + seed).digest(16 * d), dtype="<u8"
    )
    u1 = 1.0 - (words[:d] >> np.uint64(11)).astype(np.float64) / 2.0**53  # (0, 1]
    u2 = (words[d:] >> np.uint64(11)).astype(np.float64) / 2.0**53
    z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
    norm = float(np.linalg.norm(z))
    return z / norm if norm > 0 else np.eye(d)[0]


def _slab_groups(proj: np.ndarray, k: int, min_party_records: int) -> np.ndarray:
    """This party's records in ``g`` slabs of equal count along a direction ``u`` (its
    own quantiles of ``proj = x @ u``; ``g`` as in :func:`_random_groups`), slab ``s``
    into group ``floor((s + 1/2) k / g)`` so that the groups stay ordered along ``u``."""
    n = len(proj)
    labels = np.zeros(n, dtype=np.int64)
    if n == 0:
        return labels
    g = k if min_party_records <= 1 else max(1, min(k, n // min_party_records))
    order = np.argsort(proj, kind="stable")
    slab = np.arange(n) * g // n
    labels[order] = ((2 * slab + 1) * k) // (2 * g)
    return labels


def _init_random_partition(
    net: Network,
    local: LocalRecords,
    k: int,
    fbits: np.ndarray,
    *,
    min_cluster_size: int,
    min_party_records: int,
    slabs: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Starting centers of ``init="random-partition"`` (horizontal): the means of random
    groups, from secure sums of the parties' group sums and counts; with ``slabs``
    (``init="random-slabs"``) the groups are every party's own quantile slabs along a
    direction drawn by coin tossing (:func:`_joint_seed`). Returns the centers and the
    group sizes."""
    if slabs:
        u = _common_direction(_joint_seed(net, "kmeans/init/coin"), local.shape[1])
        proj = local.x @ u if isinstance(local, _ArrayRecords) else local.project(u)  # type: ignore[attr-defined]
        labels = _slab_groups(proj, k, min_party_records)
    else:
        labels = _random_groups(local.shape[0], k, min_party_records)
    sums, counts = local.group_sums(labels, k)  # type: ignore[attr-defined]
    g_sums, g_counts, _ = _release_sums(
        net,
        "kmeans/init",
        sums,
        counts,
        np.zeros(0, dtype=np.int64),
        fbits,
        min_cluster_size=min_cluster_size,
        min_party_records=min_party_records,
        where="starting groups",
        empty_ok=False,
    )
    return g_sums / g_counts[:, None], g_counts


def horizontal_kmeans(
    net: Network,
    x: np.ndarray,
    *,
    k: int,
    init: Init | np.ndarray = "random-partition",
    seed: int = 0,
    max_iter: int = 300,
    tol: float = 0.0,
    fraction_bits: int | None = None,
    min_cluster_size: int = 0,
    min_party_records: int = 0,
    progress: Progress | None = None,
    column_names: Sequence[str] | None = None,
) -> KMeansResult:
    """Lloyd's k-means on the union of the parties' records (module docstring).

    Semi-honest model; collusion as for the secure-sum ring
    (:mod:`ppdm.protocols.secure_sum`).

    Parameters
    ----------
    net
        This party's network; every party calls with its own records.
    x
        This party's records, ``(n_i, d)`` floats (the same ``d`` everywhere), or a
        :class:`LocalRecords`.
    k
        Number of clusters. Checked against the pooled record count ``N`` (revealed by
        secure sum before anything else): ``k * max(min_cluster_size, 1) > N`` stops every
        party with :class:`~ppdm.errors.ConfigError` before any value derived from the
        records is sent.
    init
        ``"random-partition"`` (default: the means of a random partition of the records,
        aggregates over about ``N / k`` records, released under the same size checks as
        an iteration; leaks those starting centers and group sizes), ``"random-slabs"``
        (the same release, of every party's own ``k`` quantile slabs along a direction
        drawn by coin tossing: aggregates too, with centers spread along it, so the
        first iteration's cells are rarely thin; see the module docstring), ``"first-k"``
        (reveals the first ``k`` pooled records and every party's record count),
        ``"kmeans++"`` (public ``seed``; reveals the chosen records) or a ``(k, d)``
        array of initial centers known to all parties.
    max_iter, tol
        Stopping rules (``tol`` relative to the mean per-attribute variance, as in
        scikit-learn; ``0`` stops only when no assignment changes).
    fraction_bits
        Fixed-point precision of the secure sums (``None``: automatic). Before the first
        iteration every party announces the binary exponent of its largest column sum of
        ``|x|`` (revealed: the order of magnitude of each party's data); the precision is
        the most that cannot overflow (at most 32 bits), negative for huge values, so the
        sums are exact or as precise as float64 up to 1e12 and beyond. An explicit value
        that would overflow is refused, naming the column and the limit.
    column_names
        Names of the columns, for error messages.
    min_cluster_size
        A minimum aggregation size (``0``: off). When positive, the starting groups of
        ``random-partition`` and the clusters of every iteration reveal their sizes
        first, by their own secure sum, and every party stops with
        :class:`~ppdm.errors.AggregationTooSmall` -- before any sum over them is computed
        -- if a (non-empty) one holds fewer records. Costs one more secure sum per
        iteration.
    min_party_records
        The per-party floor ``m`` (``0``: off): a party holding between 1 and ``m - 1``
        of its own records in a starting group or a cluster contributes only a flag to
        the sizes' secure sum and every party stops with
        :class:`~ppdm.errors.AggregationTooSmall` (fixed reason, no count), so that the
        other parties together can never subtract their own records from a released
        center to single out one or two of this party's records.
    """
    local: LocalRecords
    if not isinstance(x, np.ndarray) and hasattr(x, "cluster_sums"):
        local = x  # records behind the local seam (e.g. streamed from a data source)
    else:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2:
            raise ValueError("x must be a 2-D array of records")
        local = _ArrayRecords(x)
    if k < 1:
        raise ValueError("k must be positive")
    if min_cluster_size < 0 or min_party_records < 0:
        raise ValueError("min_cluster_size and min_party_records must be >= 0")
    n_parties = len(net.parties)
    n_local, d = local.shape
    prog = progress_or_null(progress)
    # Local checks of init first: nothing is sent before them.
    centers = np.zeros((k, d))
    if isinstance(init, np.ndarray):
        centers = np.array(init, dtype=np.float64)
        if centers.shape != (k, d):
            raise ValueError(f"initial centers must have shape ({k}, {d})")
    elif init == "random-partition":
        if not hasattr(local, "group_sums"):
            raise ValueError(
                "init='random-partition' needs records that can sum by group (engine = "
                "memory); choose another init for streamed records"
            )
    elif init == "random-slabs":
        if not isinstance(local, _ArrayRecords) and not hasattr(local, "project"):
            raise ValueError(
                "init='random-slabs' needs records that can be projected and summed by group"
            )
    elif init == "kmeans++":
        if not isinstance(local, _ArrayRecords):
            raise ValueError("kmeans++ seeding needs the records in memory (engine = memory)")
    elif init != "first-k":
        raise ValueError(f"unknown init {init!r}")
    # Agree on the dimension (a mismatch would silently corrupt the sums) and learn the
    # pooled record count N -- the first thing sent, before anything record-derived.
    dims = secure_sum(net.scoped("kmeans/dim"), np.array([d, 1, n_local], dtype=np.int64))
    if int(dims[0]) != d * int(dims[1]):
        raise ValueError("parties disagree on the number of attributes")
    if int(dims[2]) < 0:
        raise ProtocolError(net.parties[0], "kmeans/dim", "negative pooled record count")
    _check_bound(k, min_cluster_size, int(dims[2]))
    fbits = _agree_precision(net, local, fraction_bits, n_parties, column_names)
    initial_sizes: list[int] | None = None
    if isinstance(init, np.ndarray):
        pass
    elif init in ("random-partition", "random-slabs"):
        centers, sizes = _init_random_partition(
            net,
            local,
            k,
            fbits,
            min_cluster_size=min_cluster_size,
            min_party_records=min_party_records,
            slabs=init == "random-slabs",
        )
        initial_sizes = [int(c) for c in sizes]
    elif init == "first-k":
        centers = _init_first_k(net, local, k)
    elif isinstance(local, _ArrayRecords):  # kmeans++ (in memory: checked above)
        centers = _init_kmeanspp(net, local.x, k, seed)
    initial_centers = centers.copy()
    threshold = 0.0
    if tol > 0:
        _, col_sum, col_sq = local.column_sums()
        stats = np.concatenate([[n_local], col_sum, col_sq])
        tot = fixed_point.secure_real_sum(net, stats, step="kmeans/variance")
        n_all = tot[0]
        mean = tot[1 : 1 + d] / n_all
        var = tot[1 + d :] / n_all - mean**2
        threshold = tol * float(np.mean(var))
    prog.start("k-means iterations", max_iter)
    labels_prev: np.ndarray | None = None
    history: list[dict[str, Any]] = []
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        labels, sums, counts, _ = local.cluster_sums(centers)
        changed = n_local if labels_prev is None else int(np.count_nonzero(labels != labels_prev))
        g_sums, g_counts, extra = _release_sums(
            net,
            f"kmeans/iter{it}",
            sums,
            counts,
            np.array([changed], dtype=np.int64),
            fbits,
            min_cluster_size=min_cluster_size,
            min_party_records=min_party_records,
            where=f"iteration {it}",
        )
        g_changed = int(extra[0])
        new_centers = centers.copy()
        nz = g_counts > 0
        new_centers[nz] = g_sums[nz] / g_counts[nz, None]
        shift = float(((new_centers - centers) ** 2).sum())
        centers = new_centers
        history.append(
            {
                "iteration": it,
                "changed": g_changed,
                "shift": shift,
                "sizes": [int(c) for c in g_counts],
            }
        )
        prog.advance()
        if labels_prev is not None and g_changed == 0:
            converged = True
            break
        labels_prev = labels
        if threshold > 0 and shift <= threshold:
            converged = True
            break
    prog.finish()
    labels, _, _, d2_sum = local.cluster_sums(centers)
    inertia = float(fixed_point.secure_real_sum(net, np.array([d2_sum]), step="kmeans/inertia")[0])
    return KMeansResult(
        centers, labels, it, inertia, converged, history, initial_centers, initial_sizes
    )


def _agree_precision(
    net: Network,
    x: LocalRecords,
    fraction_bits: int | None,
    n_parties: int,
    column_names: Sequence[str] | None,
) -> np.ndarray:
    """Per column, the fixed-point precision of the cluster sums, agreed before the first
    iteration: every party announces, per column, the binary exponent of its sum of
    ``|x|`` (every cluster sum of the column is bounded by it); a column gets the most
    fraction bits that cannot overflow (at most 32), so columns of very different scales
    each keep their precision. Refuses an explicit precision that would overflow,
    naming the column and the limit."""
    d = x.shape[1]
    col_sums = x.column_sums()[0]
    mine = [fixed_point.magnitude_exponent(np.array([v])) for v in col_sums]
    net.broadcast("kmeans/magnitude", np.array(mine, dtype=np.int64))
    exps = np.array(mine, dtype=np.int64)
    for p, v in net.gather("kmeans/magnitude").items():
        if not isinstance(v, np.ndarray) or v.dtype != np.int64 or v.shape != (d,):
            raise ProtocolError(p, "kmeans/magnitude", f"expected {d} int64 exponents")
        if v.size and (v.min() < fixed_point.MIN_FRACTION_BITS or v.max() > 1100):
            raise ProtocolError(p, "kmeans/magnitude", "not valid binary exponents")
        exps = np.maximum(exps, v)
    allowed = np.array(
        [fixed_point.fraction_bits_for(int(e), n_parties, cap=32) for e in exps], dtype=np.int64
    )
    if fraction_bits is None:
        return allowed
    limit = np.array([fixed_point.fraction_bits_for(int(e), n_parties) for e in exps])
    bad = np.flatnonzero(limit < fraction_bits)
    if bad.size:
        j = int(bad[0])
        name = repr(column_names[j]) if column_names is not None else str(j)
        raise ValueError(
            f"fraction_bits={fraction_bits} overflows the secure sums: column {name} sums to "
            f"about 2^{int(exps[j])}, so at most {int(limit[j])} fraction bits fit (leave "
            "fraction_bits unset to choose the precision automatically)"
        )
    return np.full(d, fraction_bits, dtype=np.int64)


# ---------------------------------------------------------------------------------------
# Vertical k-means


def _share_to_pair(net: Network, mine: np.ndarray, a: str, b: str, step: str) -> np.ndarray | None:
    """Turn every party's uint64 matrix into additive shares held by ``a`` and ``b``:
    each other party sends a uniformly random mask to ``a`` and its value minus the mask
    to ``b``. Returns this party's share (``None`` for parties other than ``a``/``b``)."""
    import secrets

    shape = mine.shape
    if net.me not in (a, b):
        mask = np.frombuffer(secrets.token_bytes(8 * mine.size), dtype=np.uint64).reshape(shape)
        net.send(a, step, mask)
        net.send(b, step, mine - mask)
        return None
    share = mine.copy()
    for p in net.parties:
        if p in (a, b):
            continue
        got = net.receive(p, step, expect=np.ndarray)
        if got.dtype != np.uint64 or got.shape != shape:
            raise ProtocolError(p, step, f"expected a uint64 array of shape {shape}")
        share += got
    return share


def _joint_seed(net: Network, step: str) -> bytes:
    """A 32-byte seed no party chooses: commit-then-reveal coin tossing (Blum 1981).

    Every party draws 32 bytes with ``secrets``, broadcasts a SHA-256 commitment to them
    (bound to its name), and only after receiving every commitment reveals them; a reveal
    that does not open its commitment is a :class:`~ppdm.errors.ProtocolError`. The seed
    is the SHA-256 of all reveals in consortium order, uniform as long as one party's
    draw is. Reveals only the seed (random). Cost: two broadcast rounds of 32 bytes."""

    def commitment(party: str, value: bytes) -> bytes:
        return hashlib.sha256(b"ppdm/kmeans/coin\0" + party.encode() + b"\0" + value).digest()

    mine = secrets.token_bytes(32)
    net.broadcast(f"{step}/commit", commitment(net.me, mine))
    commits: dict[str, bytes] = {}
    for p, v in net.gather(f"{step}/commit").items():
        if not isinstance(v, bytes) or len(v) != 32:
            raise ProtocolError(p, f"{step}/commit", "expected a 32-byte commitment")
        commits[p] = v
    net.broadcast(f"{step}/reveal", mine)
    shares = {net.me: mine}
    for p, v in net.gather(f"{step}/reveal").items():
        if not isinstance(v, bytes) or len(v) != 32 or commitment(p, v) != commits.get(p):
            raise ProtocolError(p, f"{step}/reveal", "the reveal does not open its commitment")
        shares[p] = v
    return hashlib.sha256(b"ppdm/kmeans/seed\0" + b"".join(shares[p] for p in net.parties)).digest()


def _common_random_groups(seed: bytes, n: int, k: int) -> np.ndarray:
    """The random balanced deal of ``n`` aligned rows into ``k`` groups that every party
    expands identically from the joint ``seed`` (SHAKE-256 keys: a random order of the
    rows dealt round-robin into the groups, in a random order of the groups)."""
    stream = hashlib.shake_256(b"ppdm/kmeans/random-partition\0" + seed).digest(8 * (n + k))
    keys = np.frombuffer(stream, dtype="<u8")
    order = np.argsort(keys[:n], kind="stable")
    groups = np.argsort(keys[n:], kind="stable").astype(np.int64)
    labels = np.empty(n, dtype=np.int64)
    labels[order] = groups[np.arange(n) % k]
    return labels


def vertical_kmeans(
    net: Network,
    x: np.ndarray,
    *,
    k: int,
    init: Literal["random-partition", "first-k", "random"] | np.ndarray = "random-partition",
    seed: int = 0,
    max_iter: int = 300,
    tol: float = 0.0,
    min_cluster_size: int = 0,
    min_party_records: int = 0,
    fraction_bits: int | None = None,
    progress: Progress | None = None,
) -> KMeansResult:
    """Lloyd's k-means over vertically partitioned records (Vaidya & Clifton, KDD 2003,
    with the closest-center step done by an OT-based secure argmin instead of their
    permutation protocol).

    Every party holds some attributes (columns) of the same records, in the same order
    (align them on the common record id first). Per iteration, each party computes the
    squared distances of every record to every center *over its own attributes*
    (fixed-point integers); the parties other than the first two split theirs into
    additive shares for the first two, who then hold shares of the full distances and run
    :func:`ppdm.protocols.comparison.secure_argmin`, which reveals only each record's
    closest center. Every party then recomputes its own attributes' center components as
    cluster means.

    Leakage (semi-honest): every party learns every record's cluster in every iteration
    (the assignments are the output) and hence the cluster sizes; the scale (bit length)
    of each party's largest partial distance, to fix the fixed-point precision; with
    ``tol > 0`` the total center shift. No party sees another's distance components or
    attribute values; a party's center components stay with it. Unlike designs that hand
    all distances to an arbiter, no party sees any distance. ``init="kmeans++"`` is not
    offered: D^2 seeding would reveal every record's distance.

    Starting centers: ``init="random-partition"`` (default) deals the aligned rows into
    ``k`` random groups of ``N // k`` or ``N // k + 1`` rows, the same at every party
    (expanded from a joint seed drawn by commit-then-reveal coin tossing,
    :func:`_joint_seed`, so no party chooses the deal; it reveals nothing), and each
    party starts from its own columns' group means; the group sizes are public
    aggregates. ``"first-k"`` (the first ``k`` rows), ``"random"`` (``k`` rows drawn with
    the public ``seed``) and explicit components start from real records.

    Bounds (module docstring): the common record count ``N`` is exchanged first, and
    ``k * max(min_cluster_size, 1) > N`` stops every party with
    :class:`~ppdm.errors.ConfigError` before anything else is sent. The group and
    cluster sizes are public (every party knows every label), so ``min_cluster_size``
    is checked locally, alike at every party, before a center is computed; a party's own
    number of records in a cluster *is* the cluster size here, so ``min_party_records``
    acts as one more size bound.

    Cost per iteration (``n`` records, ``k`` centers): ``(n_parties - 2)`` pairs of
    messages of ``8 n k`` bytes, then a secure argmin with ``k - 1`` comparisons of about
    62-bit values per record between the first two parties; one more such assignment
    round at the end when ``tol`` or ``max_iter`` stops the run (so that the labels
    belong to the final centers).
    """
    from ppdm.protocols.comparison import secure_argmin
    from ppdm.protocols.ot.extension import OTSession

    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError("x must be a 2-D array (records x own attributes)")
    n = len(x)
    parties = net.parties
    if len(parties) < 2:
        raise ValueError("vertical k-means needs at least two parties")
    # Same records everywhere.
    net.broadcast("vkmeans/records", n)
    for p, v in net.gather("vkmeans/records").items():
        if _check_int(v, p, "vkmeans/records") != n:
            raise ProtocolError(p, "vkmeans/records", f"has {v} records, this party has {n}")
    if k < 1:
        raise ValueError("k must be positive")
    _check_bound(k, min_cluster_size, n)
    initial_sizes: list[int] | None = None
    if isinstance(init, np.ndarray):
        centers = np.array(init, dtype=np.float64)
        if centers.shape != (k, x.shape[1]):
            raise ValueError(f"initial center components must have shape ({k}, {x.shape[1]})")
    elif init == "random-partition":
        groups = _common_random_groups(_joint_seed(net, "vkmeans/init"), n, k)
        sizes = np.bincount(groups, minlength=k)
        if _below_floor(sizes, min_party_records):
            raise _floor_error("starting groups")
        _check_sizes(sizes, min_cluster_size, "starting groups", empty_ok=False)
        sums = np.zeros((k, x.shape[1]))
        np.add.at(sums, groups, x)
        centers = sums / sizes[:, None]
        initial_sizes = [int(c) for c in sizes]
    elif init == "first-k":
        centers = x[:k].copy()
    elif init == "random":
        rows = np.sort(SeededRandom(seed).permutation(n)[:k])
        centers = x[rows].copy()
    else:
        raise ValueError(
            f"unknown init {init!r} for vertical k-means (random-partition, first-k or random)"
        )
    initial_centers = centers.copy()
    a, b = parties[0], parties[1]
    session = (
        OTSession(net.scoped("vkmeans/ot"), b if net.me == a else a) if net.me in (a, b) else None
    )
    # Fixed-point precision: the largest total distance must stay below 2^value_bits.
    value_bits = 60
    spread = float(np.max(x, axis=0).max() - np.min(x, axis=0).min()) if n else 0.0
    local_max = spread**2 * max(x.shape[1], 1)
    exp = math.ceil(math.log2(local_max + 1.0)) + 1
    net.broadcast("vkmeans/scale", exp)
    exps = [exp] + [
        _check_int(v, p, "vkmeans/scale") for p, v in net.gather("vkmeans/scale").items()
    ]
    headroom = value_bits - 1 - math.ceil(math.log2(len(parties)))
    # The distances are scaled by 2^frac_bits, which is negative for large values (the
    # argmin is unchanged by a common scale; the relative precision stays about 2^-57):
    # never clamped at 0, where distances above 2^60 used to overflow silently.
    allowed = headroom - max(exps)
    if fraction_bits is not None and fraction_bits > allowed:
        raise ValueError(
            f"fraction_bits={fraction_bits} overflows the distances: they reach about "
            f"2^{max(exps)}, so at most {allowed} fraction bits fit (leave fraction_bits "
            "unset to choose the precision automatically)"
        )
    frac_bits = min(allowed, 40 if fraction_bits is None else fraction_bits)
    scale = math.ldexp(1.0, frac_bits)
    threshold = 0.0
    if tol > 0:
        own_var = np.var(x, axis=0).sum() if n else 0.0
        tot = fixed_point.secure_real_sum(net, np.array([own_var]), step="vkmeans/var")
        d_total = int(secure_sum(net.scoped("vkmeans/dims"), int(x.shape[1])))
        threshold = tol * float(tot[0]) / max(d_total, 1)
    prog = progress_or_null(progress)
    prog.start("vertical k-means iterations", max_iter)
    labels_prev: np.ndarray | None = None
    history: list[dict[str, Any]] = []
    converged = False
    it = 0
    labels = np.zeros(n, dtype=np.int64)

    def secure_assign(sub: Network, centers: np.ndarray) -> np.ndarray:
        """Every record's closest center (secure argmin of the shared distances)."""
        d2 = ((x[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
        enc = np.rint(d2 * scale).astype(np.int64).view(np.uint64)
        share = _share_to_pair(sub, enc, a, b, "shares")
        if share is not None:
            peer = b if net.me == a else a
            got = secure_argmin(
                sub.scoped("argmin"), share, peer=peer, value_bits=value_bits, session=session
            )
            labels = np.asarray(got, dtype=np.int64)
            if net.me == a:
                net.broadcast("vkmeans/labels", labels, to=parties[2:])
            return labels
        labels = net.receive(a, "vkmeans/labels", expect=np.ndarray)
        if (
            labels.dtype != np.int64
            or labels.shape != (n,)
            or (n and (labels.min() < 0 or labels.max() >= k))
        ):
            raise ProtocolError(a, "vkmeans/labels", "invalid cluster labels")
        return labels

    stable = False
    for it in range(1, max_iter + 1):
        sub = net.scoped(f"vkmeans/iter{it}")
        labels = secure_assign(sub, centers)
        counts = np.bincount(labels, minlength=k)
        if min_cluster_size > 0:
            # The labels are public to the parties; stop before any centre over a small
            # cluster is computed (and released in the result).
            _check_sizes(counts, min_cluster_size, f"iteration {it}")
        if _below_floor(counts, min_party_records):
            raise _floor_error(f"iteration {it}")
        sums = np.zeros_like(centers)
        np.add.at(sums, labels, x)
        new_centers = centers.copy()
        nz = counts > 0
        new_centers[nz] = sums[nz] / counts[nz, None]
        own_shift = float(((new_centers - centers) ** 2).sum())
        centers = new_centers
        history.append({"iteration": it, "sizes": [int(c) for c in counts]})
        prog.advance()
        if labels_prev is not None and np.array_equal(labels, labels_prev):
            converged = stable = True
            break
        labels_prev = labels
        if threshold > 0:
            shift = fixed_point.secure_real_sum(sub, np.array([own_shift]), step="shift")[0]
            if shift <= threshold:
                converged = True
                break
    prog.finish()
    if not stable and it:
        # Stopped by tol or max_iter: the labels belong to the previous centers; assign
        # the records to the final centers (as the horizontal version and sklearn do).
        labels = secure_assign(net.scoped("vkmeans/final"), centers)
        final = np.bincount(labels, minlength=k)
        if min_cluster_size > 0:
            _check_sizes(final, min_cluster_size, f"iteration {it + 1}")
        if _below_floor(final, min_party_records):
            raise _floor_error(f"iteration {it + 1}")
    return KMeansResult(
        centers, labels, it, float("nan"), converged, history, initial_centers, initial_sizes
    )
