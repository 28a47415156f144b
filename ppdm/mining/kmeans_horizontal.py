"""Horizontal k-means: every party holds whole records; the per-cluster sums and counts
of every iteration (and of the aggregate starting groups) are added by secure sum.

The model (starting centers, aggregation bounds, leakage and cost) is described in
:mod:`ppdm.mining.kmeans`, which re-exports :func:`horizontal_kmeans`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.mining import fixed_point
from ppdm.mining.kmeans_common import (
    KMeansResult,
    LocalRecords,
    _ArrayRecords,
    _below_floor,
    _check_bound,
    _check_int,
    _check_sizes,
    _floor_error,
    _joint_seed,
)
from ppdm.parties.network import Network
from ppdm.progress import Progress, progress_or_null
from ppdm.protocols.secure_sum import secure_sum
from ppdm.randomness import SecureRandom, SeededRandom

__all__ = ["Init", "horizontal_kmeans"]

Init = Literal["random-partition", "random-slabs", "first-k", "kmeans++"]


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
