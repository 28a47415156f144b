"""k-means over partitioned data: horizontal (rows split) and vertical (columns split).

Both run Lloyd's algorithm exactly as a centralized run on the pooled data would
(scikit-learn's ``KMeans(algorithm="lloyd", n_init=1, init=<same centers>)``): each
iteration assigns every record to its closest center (ties to the lowest index), recomputes
each center as the mean of its records, and stops when no assignment changes, when the
total squared center shift is at most ``tol`` times the mean per-attribute variance, or
after ``max_iter`` iterations. An empty cluster keeps its previous center (scikit-learn
would relocate it; the tests avoid empty clusters).

Horizontal k-means (:func:`horizontal_kmeans`)
    Every party holds whole records. Per iteration each party assigns its own records and
    computes per-cluster sums and counts; these are added by secure sum
    (:mod:`ppdm.protocols.secure_sum`, fixed-point encoding with ``fraction_bits``), so
    every party learns the new centers and nothing about another party's records beyond
    what the centers and counts reveal. Seed 000 section 20.5; the standard secure-sum
    construction (e.g. Jagannathan & Wright 2005 describe the arbitrarily partitioned
    generalization).

    Leaks: the centers and cluster sizes of every iteration, the number of records that
    changed cluster, the total inertia; with ``init="first-k"`` the first ``k`` records of
    the pooled data (held by the first parties) become the initial centers and so are
    revealed, and every party's record count is revealed to place them; with
    ``init="kmeans++"`` the chosen records and each party's sum of squared distances per
    seeding step are revealed.

    Cost per iteration: one secure sum of ``k*d + k + 1`` values (``n`` ring messages and
    ``n - 1`` result messages of ``8 (k d + k + 1)`` bytes).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.mining import fixed_point
from ppdm.parties.network import Network
from ppdm.progress import Progress, progress_or_null
from ppdm.protocols.secure_sum import secure_sum
from ppdm.randomness import SeededRandom

log = logging.getLogger(__name__)

__all__ = ["KMeansResult", "assign", "horizontal_kmeans", "lloyd_reference"]

Init = Literal["first-k", "kmeans++"]


@dataclass
class KMeansResult:
    """What one party gets from distributed k-means."""

    centers: np.ndarray  # (k, d) for horizontal; (k, d_own) own columns for vertical
    labels: np.ndarray  # this party's records' clusters (horizontal) / all records (vertical)
    iterations: int
    inertia: float
    converged: bool
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "centers": self.centers.tolist(),
            "iterations": self.iterations,
            "inertia": self.inertia,
            "converged": self.converged,
            "cluster_sizes": self.history[-1]["sizes"] if self.history else [],
        }


def assign(x: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closest center of each row (ties to the lowest index) and its squared distance."""
    d2 = ((x[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    labels = np.argmin(d2, axis=1)
    return labels, d2[np.arange(len(x)), labels]


def lloyd_reference(
    x: np.ndarray, centers: np.ndarray, *, max_iter: int = 300, tol: float = 0.0
) -> tuple[np.ndarray, np.ndarray, int]:
    """Centralized Lloyd with the same rules as the distributed versions (for tests)."""
    c = np.array(centers, dtype=np.float64)
    threshold = tol * float(np.mean(np.var(x, axis=0))) if tol > 0 else 0.0
    labels = None
    it = 0
    for it in range(1, max_iter + 1):
        new_labels, _ = assign(x, c)
        sums = np.zeros_like(c)
        np.add.at(sums, new_labels, x)
        counts = np.bincount(new_labels, minlength=len(c))
        new_c = c.copy()
        nz = counts > 0
        new_c[nz] = sums[nz] / counts[nz, None]
        shift = float(((new_c - c) ** 2).sum())
        c = new_c
        if labels is not None and np.array_equal(labels, new_labels):
            break
        labels = new_labels
        if threshold > 0 and shift <= threshold:
            break
    final_labels, _ = assign(x, c)
    return c, final_labels, it


def _check_int(value: Any, frm: str, step: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(frm, step, "expected an integer")
    return value


def _init_first_k(net: Network, x: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` records of the pooled data (parties in consortium order)."""
    net.broadcast("kmeans/init/size", len(x))
    counts = {net.me: len(x)}
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
                part = x[:take].astype(np.float64)
                net.broadcast("kmeans/init/rows", part)
            else:
                part = net.receive(p, "kmeans/init/rows", expect=np.ndarray)
                if part.dtype != np.float64 or part.shape != (take, x.shape[1]):
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


def horizontal_kmeans(
    net: Network,
    x: np.ndarray,
    *,
    k: int,
    init: Init | np.ndarray = "first-k",
    seed: int = 0,
    max_iter: int = 300,
    tol: float = 0.0,
    fraction_bits: int = 32,
    progress: Progress | None = None,
) -> KMeansResult:
    """Lloyd's k-means on the union of the parties' records (module docstring).

    Parameters
    ----------
    net
        This party's network; every party calls with its own records.
    x
        This party's records, ``(n_i, d)`` floats (the same ``d`` everywhere).
    k
        Number of clusters.
    init
        ``"first-k"``, ``"kmeans++"`` (public ``seed``) or a ``(k, d)`` array of initial
        centers known to all parties.
    max_iter, tol
        Stopping rules (``tol`` relative to the mean per-attribute variance, as in
        scikit-learn; ``0`` stops only when no assignment changes).
    fraction_bits
        Fixed-point precision of the secure sums.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError("x must be a 2-D array of records")
    if k < 1:
        raise ValueError("k must be positive")
    n_parties = len(net.parties)
    d = x.shape[1]
    prog = progress_or_null(progress)
    # Agree on the dimension (a mismatch would silently corrupt the sums).
    dims = secure_sum(net.scoped("kmeans/dim"), np.array([d, 1], dtype=np.int64))
    if int(dims[0]) != d * int(dims[1]):
        raise ValueError("parties disagree on the number of attributes")
    if isinstance(init, np.ndarray):
        centers = np.array(init, dtype=np.float64)
        if centers.shape != (k, d):
            raise ValueError(f"initial centers must have shape ({k}, {d})")
    elif init == "first-k":
        centers = _init_first_k(net, x, k)
    elif init == "kmeans++":
        centers = _init_kmeanspp(net, x, k, seed)
    else:
        raise ValueError(f"unknown init {init!r}")
    threshold = 0.0
    if tol > 0:
        stats = np.concatenate([[len(x)], x.sum(axis=0), (x**2).sum(axis=0)])
        tot = fixed_point.decode(
            secure_sum(
                net.scoped("kmeans/variance"),
                fixed_point.encode(stats, fraction_bits=fraction_bits, parties=n_parties),
            ),
            fraction_bits=fraction_bits,
        )
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
        labels, _ = assign(x, centers) if len(x) else (np.zeros(0, np.int64), None)
        sums = np.zeros((k, d))
        if len(x):
            np.add.at(sums, labels, x)
        counts = np.bincount(labels, minlength=k).astype(np.int64)
        changed = len(x) if labels_prev is None else int(np.count_nonzero(labels != labels_prev))
        enc = fixed_point.encode(sums.ravel(), fraction_bits=fraction_bits, parties=n_parties)
        total = secure_sum(
            net.scoped(f"kmeans/iter{it}"),
            np.concatenate([enc, counts, [changed]]).astype(np.int64),
        )
        g_sums = fixed_point.decode(total[: k * d], fraction_bits=fraction_bits).reshape(k, d)
        g_counts = total[k * d : k * d + k]
        g_changed = int(total[-1])
        new_centers = centers.copy()
        nz = g_counts > 0
        new_centers[nz] = g_sums[nz] / g_counts[nz, None]
        shift = float(((new_centers - centers) ** 2).sum())
        centers = new_centers
        history.append({"iteration": it, "changed": g_changed, "shift": shift,
                        "sizes": [int(c) for c in g_counts]})
        prog.advance()
        if labels_prev is not None and g_changed == 0:
            converged = True
            break
        labels_prev = labels
        if threshold > 0 and shift <= threshold:
            converged = True
            break
    prog.finish()
    labels, d2 = assign(x, centers) if len(x) else (np.zeros(0, np.int64), np.zeros(0))
    inertia_enc = fixed_point.encode(
        np.array([float(d2.sum())]), fraction_bits=min(fraction_bits, 20), parties=n_parties
    )
    inertia = float(
        fixed_point.decode(
            secure_sum(net.scoped("kmeans/inertia"), inertia_enc),
            fraction_bits=min(fraction_bits, 20),
        )[0]
    )
    return KMeansResult(centers, labels, it, inertia, converged, history)
