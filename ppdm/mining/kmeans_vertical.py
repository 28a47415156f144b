"""Vertical k-means: every party holds some attributes of the same aligned records; the
closest center of every record comes from a secure argmin of distances shared between
the first two parties (Vaidya & Clifton, KDD 2003).

The aggregation bounds and the starting centers are described in
:mod:`ppdm.mining.kmeans`, which re-exports :func:`vertical_kmeans`; the leakage and cost
in :func:`vertical_kmeans`.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Literal

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.mining import fixed_point
from ppdm.mining.kmeans_common import (
    KMeansResult,
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
from ppdm.randomness import SeededRandom

__all__ = ["vertical_kmeans"]


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
    messages of ``8 n k`` bytes, then a secure argmin with ``k - 1`` comparisons per record
    between the first two parties, on ``value_bits`` = the largest announced scale + the
    fraction bits + ``ceil(log2 n_parties)`` bits (the most the summed distances can
    reach; 56 on scikit-learn's digits), about ``6 value_bits`` bytes each (323 B on
    digits: 7.5 bytes of SoftSpoken 1-out-of-16 ``u`` per 4-bit leaf, the 4-bit leaf
    tables that also carry the first AND level, a triple per node above it and the
    multiplexer; :mod:`ppdm.protocols.comparison`); one more such assignment round at
    the end when ``tol`` or ``max_iter`` stops the run (so that the labels belong to the
    final centers).
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
    # Over the records and the starting centers (explicit ones may lie outside the
    # records' range; later centers are means of records).
    spread = float(max(x.max(), centers.max()) - min(x.min(), centers.min())) if n else 0.0
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
    # The comparisons take only the bits the distances can reach: a party's encoded
    # partial distance is below 2^(exp - 1 + frac_bits), so their sum is below
    # 2^(max(exps) - 1 + frac_bits + ceil(log2 n_parties)); one more bit for rounding
    # (and at least one bit per party's 0-or-1 when fraction_bits is very negative).
    value_bits = min(value_bits, max(max(exps) + frac_bits, 1) + math.ceil(math.log2(len(parties))))
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
