"""Fixed-point encoding of reals as int64, for secure sums of real-valued statistics."""

from __future__ import annotations

import numpy as np

__all__ = ["decode", "encode"]


def encode(values: np.ndarray, *, fraction_bits: int, parties: int) -> np.ndarray:
    """Round ``values * 2**fraction_bits`` to int64, refusing values whose sum over
    ``parties`` such contributions could overflow 63 bits."""
    if not 0 <= fraction_bits <= 52:
        raise ValueError("fraction_bits must be in [0, 52]")
    arr = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("cannot encode NaN or infinite values")
    scaled = np.rint(arr * float(1 << fraction_bits))
    limit = float(1 << 62) / max(parties, 1)
    if scaled.size and float(np.max(np.abs(scaled))) >= limit:
        raise OverflowError(
            f"values up to {float(np.max(np.abs(arr))):.3g} overflow fixed point with "
            f"{fraction_bits} fraction bits and {parties} parties; lower fraction_bits"
        )
    return scaled.astype(np.int64)


def decode(values: np.ndarray, *, fraction_bits: int) -> np.ndarray:
    """Inverse of :func:`encode` (as float64)."""
    return np.asarray(values, dtype=np.float64) / float(1 << fraction_bits)
