"""Cuckoo hashing with three hash functions, vectorized, and its parameters.

The receiver of the KKRT PSI (:mod:`ppdm.protocols.psi.kkrt`) places each of its ``n``
items into one of ``B = ceil(e * n)`` bins, at one of three positions ``h_0(x), h_1(x),
h_2(x)``, at most one item per bin (Pagh and Rodler, "Cuckoo hashing", J. Algorithms 51,
2004; three functions as in Fotakis et al., "Space efficient hash tables with worst case
constant access time", 2005). No stash.

Parameters: the expansion factor ``e`` for statistical security ``lambda`` follows the
fit of Pinkas, Schneider, Tkachenko and Yanai, "Efficient circuit-based PSI with linear
communication" (EUROCRYPT 2019, section 5; the same fit is cryptoTools'
``CuckooIndex::selectParams``): for ``h = 3`` and no stash, the failure probability is
``2^-(a e + b)`` with ``a = 123.5`` and ``b = -130 - log2 n`` for ``n >= 2^12``
(smaller slopes below, through the fitted error-function terms), so ``e = (lambda - b) /
a``: ``e ~ 1.47`` at ``n = 2^12``, ``1.51`` at ``2^16``, ``1.54`` at ``2^20``, for
``lambda = 40``.

Insertion (:func:`cuckoo_insert`) is the random-walk algorithm run for all pending items
at once: every pending item writes itself into the bin of its current choice (one
writer per bin wins), the evicted occupants and the losers move to another of their
three choices, chosen at random; the loop ends when no item is pending. If a placement
is not found within ``max_rounds`` rounds the insertion fails
(:class:`CuckooFailure`): the protocol stops rather than drop an item.
"""

from __future__ import annotations

import math

import numpy as np

from ppdm.errors import PPDMError
from ppdm.randomness import SecureRandom

__all__ = [
    "HASHES",
    "STAT_SECURITY",
    "CuckooFailure",
    "cuckoo_bins",
    "cuckoo_failure_log2",
    "cuckoo_insert",
]

HASHES = 3
STAT_SECURITY = 40
#: Smallest table (also keeps tiny sets away from the fit's extrapolated region).
MIN_BINS = 64


class CuckooFailure(PPDMError):
    """No cuckoo placement was found (probability below ``2^-STAT_SECURITY``)."""


def _fit(n: int) -> tuple[float, float]:
    """Slope ``a`` and intercept ``b`` of ``lambda = a e + b`` (PSTY19, h = 3, no stash)."""
    nn = math.log2(max(n, 1))
    a = 123.5 / 2 * (1 + math.erf((nn - 6.3) / (2.3 * math.sqrt(2))))
    b = -130 / 2 * (1 + math.erf((nn - 6.45) / (2.18 * math.sqrt(2)))) - nn
    return a, b


def cuckoo_bins(n: int, *, stat_security: int = STAT_SECURITY) -> int:
    """Number of bins for ``n`` items: ``ceil(e * n)`` with the ``e`` above, at least
    :data:`MIN_BINS`, rounded up to a multiple of 64 (the bit transposes work on 64-row
    blocks).

    >>> cuckoo_bins(1 << 20) / (1 << 20)  # doctest: +ELLIPSIS
    1.53...
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    a, b = _fit(n)
    e = (stat_security - b) / a
    bins = max(MIN_BINS, math.ceil(e * n))
    return -(-bins // 64) * 64


def cuckoo_failure_log2(n: int, bins: int) -> float:
    """``log2`` of the fitted failure probability of ``n`` items in ``bins`` bins."""
    if n == 0:
        return -math.inf
    a, b = _fit(n)
    return -(a * bins / n + b)


def cuckoo_insert(
    positions: np.ndarray, bins: int, *, max_rounds: int = 2000
) -> tuple[np.ndarray, np.ndarray]:
    """Place every item in one of its bins.

    ``positions`` is ``(n, 3)`` integer bins per item. Returns ``table`` (``(bins,)``
    int64: the item in each bin, ``-1`` for empty) and ``which`` (``(n,)`` int8: the hash
    function each item was placed with). Items must be distinct (an item twice could
    never be placed when its three bins coincide; callers deduplicate).

    >>> pos = np.array([[0, 1, 2], [0, 1, 2], [0, 1, 2]])
    >>> table, which = cuckoo_insert(pos, 3)
    >>> sorted(table.tolist()), sorted(pos[np.arange(3), which].tolist())
    ([0, 1, 2], [0, 1, 2])
    """
    pos = np.asarray(positions, dtype=np.int64)
    if pos.ndim != 2 or pos.shape[1] != HASHES:
        raise ValueError(f"positions must be (n, {HASHES})")
    n = pos.shape[0]
    if n and (pos.min() < 0 or pos.max() >= bins):
        raise ValueError("positions out of range")
    if n > bins:
        raise CuckooFailure("more items than bins")
    rng = SecureRandom()
    table = np.full(bins, -1, dtype=np.int64)
    which = np.zeros(n, dtype=np.int8)
    pending = np.arange(n, dtype=np.int64)
    for _ in range(max_rounds):
        if pending.size == 0:
            return table, which
        target = pos[pending, which[pending]]
        before = table[target]
        table[target] = pending  # one writer per bin wins
        won = table[target] == pending
        evicted = before[won]
        evicted = evicted[evicted >= 0]
        moved = np.concatenate([pending[~won], evicted])
        if moved.size:
            step = 1 + rng.integers(0, HASHES - 1, moved.size).astype(np.int8)
            which[moved] = (which[moved] + step) % HASHES
        pending = moved
    if pending.size == 0:
        return table, which
    raise CuckooFailure(f"no cuckoo placement within {max_rounds} rounds")
