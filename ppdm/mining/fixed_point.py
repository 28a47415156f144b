"""Fixed-point encoding of reals as int64, for secure sums of real-valued statistics.

:func:`encode` and :func:`decode` use ``fraction_bits`` that may be negative (then values
are scaled *down* by a power of two: large magnitudes keep their relative precision).
:func:`fraction_bits_for` picks the largest precision that cannot overflow a sum over
``parties`` contributions of a known magnitude, and :func:`secure_real_sum` sums real
vectors over the parties with a precision chosen that way from the binary exponents the
parties announce (the one thing it reveals beyond the sum).
"""

from __future__ import annotations

import math

import numpy as np

from ppdm.errors import ProtocolError

__all__ = [
    "MAX_FRACTION_BITS",
    "MIN_FRACTION_BITS",
    "SUM_BITS",
    "decode",
    "encode",
    "fraction_bits_for",
    "magnitude_exponent",
    "secure_real_sum",
]

#: Bits an encoded sum may use (of int64's 63): one more bit of headroom for rounding.
SUM_BITS = 61
MAX_FRACTION_BITS = 52
MIN_FRACTION_BITS = -1000


def encode(values: np.ndarray, *, fraction_bits: int, parties: int) -> np.ndarray:
    """Round ``values * 2**fraction_bits`` to int64, refusing values whose sum over
    ``parties`` such contributions could overflow 63 bits."""
    if not MIN_FRACTION_BITS <= fraction_bits <= MAX_FRACTION_BITS:
        raise ValueError(f"fraction_bits must be in [{MIN_FRACTION_BITS}, {MAX_FRACTION_BITS}]")
    arr = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("cannot encode NaN or infinite values")
    scaled = np.rint(np.ldexp(arr, fraction_bits))
    limit = float(1 << 62) / max(parties, 1)
    if scaled.size and float(np.max(np.abs(scaled))) >= limit:
        raise OverflowError(
            f"values up to {float(np.max(np.abs(arr))):.3g} overflow fixed point with "
            f"{fraction_bits} fraction bits and {parties} parties; lower fraction_bits"
        )
    return scaled.astype(np.int64)


def decode(values: np.ndarray, *, fraction_bits: int) -> np.ndarray:
    """Inverse of :func:`encode` (as float64)."""
    return np.ldexp(np.asarray(values, dtype=np.float64), -fraction_bits)


def magnitude_exponent(values: np.ndarray) -> int:
    """The smallest ``e`` with ``max |values| < 2**e`` (``-1000`` for all zeros)."""
    arr = np.abs(np.asarray(values, dtype=np.float64))
    if not arr.size or not np.all(np.isfinite(arr)):
        if arr.size and not np.all(np.isfinite(arr)):
            raise ValueError("cannot encode NaN or infinite values")
        return MIN_FRACTION_BITS
    top = float(arr.max())
    return MIN_FRACTION_BITS if top == 0 else math.frexp(top)[1]


def fraction_bits_for(exponent: int, parties: int, *, cap: int = MAX_FRACTION_BITS) -> int:
    """The most fraction bits with which ``parties`` contributions below ``2**exponent``
    each sum without overflow (at most ``cap``; negative when the values are huge)."""
    headroom = SUM_BITS - math.ceil(math.log2(max(parties, 1)))
    return max(min(headroom - exponent, cap), MIN_FRACTION_BITS)


def secure_real_sum(net: object, values: np.ndarray, *, step: str) -> np.ndarray:
    """The sum over the parties of real vectors (same length everywhere), exact to about
    ``2**-58`` of the largest magnitude. Every party announces the binary exponent of its
    largest ``|value|`` (revealed: the order of magnitude of each party's values); all
    scale by the power of two that keeps the sum within 61 bits; then one secure sum."""
    from ppdm.protocols.secure_sum import secure_sum

    arr = np.asarray(values, dtype=np.float64).ravel()
    mine = magnitude_exponent(arr)
    net.broadcast(f"{step}/exponent", mine)  # type: ignore[attr-defined]
    exponents = [mine]
    for party, e in net.gather(f"{step}/exponent").items():  # type: ignore[attr-defined]
        if isinstance(e, bool) or not isinstance(e, int) or not MIN_FRACTION_BITS <= e <= 1100:
            raise ProtocolError(party, f"{step}/exponent", "not a valid binary exponent")
        exponents.append(e)
    parties = len(exponents)
    bits = fraction_bits_for(max(exponents), parties, cap=600)
    scaled = np.rint(np.ldexp(arr, bits)).astype(np.int64)
    total = secure_sum(net.scoped(step), scaled)  # type: ignore[attr-defined]
    return np.ldexp(np.asarray(total, dtype=np.float64), -bits)
