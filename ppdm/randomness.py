"""Randomness for privacy mechanisms, shuffles and simulations.

Privacy depends on the noise being unpredictable: an attacker who can recover a
pseudo-random generator's state from a release (numpy's PCG64 can be recovered from its
outputs) can subtract the noise or undo a shuffle. So ppdm draws privacy-relevant
randomness from the operating system's CSPRNG (``os.urandom``) through
:class:`SecureRandom`, vectorised with numpy.

For reproducible simulations and tests, :func:`make_rng` accepts an integer seed and then
returns a :class:`SeededRandom` with the same methods, backed by numpy's PCG64; that is
for experiments only, and its ``secure`` attribute says so.

All methods return numpy arrays. Integer draws are exactly uniform (rejection sampling on
whole 64-bit words), never ``x % n``.
"""

from __future__ import annotations

import math
import os
from typing import Protocol

import numpy as np

__all__ = ["RandomSource", "SecureRandom", "SeededRandom", "make_rng"]

_TWO53 = float(1 << 53)


class RandomSource(Protocol):
    """What privacy code needs from a random source."""

    secure: bool

    def random(self, size: int) -> np.ndarray:
        """``size`` floats uniform on [0, 1), 53-bit resolution."""
        ...

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        """``size`` int64 uniform on [low, high) (high - low <= 2**62)."""
        ...

    def permutation(self, n: int) -> np.ndarray:
        """A uniformly random permutation of ``range(n)``."""
        ...

    def normal(self, size: int, loc: float = 0.0, scale: float = 1.0) -> np.ndarray: ...

    def bits(self, size: int) -> np.ndarray:
        """``size`` uniformly random bits as uint8 0/1."""
        ...

    def bytes(self, n: int) -> bytes: ...


class _Common:
    """Derived draws shared by both sources, written in terms of ``_words``."""

    secure: bool = True

    def _words(self, n: int) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def bytes(self, n: int) -> bytes:  # pragma: no cover - overridden
        raise NotImplementedError

    def random(self, size: int) -> np.ndarray:
        return (self._words(size) >> np.uint64(11)).astype(np.float64) / _TWO53

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        span = int(high) - int(low)
        if span <= 0:
            raise ValueError(f"empty range [{low}, {high})")
        if span > (1 << 62):
            raise ValueError("range wider than 2**62")
        if span == 1:
            return np.full(size, low, dtype=np.int64)
        # Rejection sampling on the top bits: accept w < limit where limit is the largest
        # multiple of span that fits in 64 bits; acceptance probability > 1/2.
        limit = ((1 << 64) // span) * span
        out = np.empty(size, dtype=np.int64)
        filled = 0
        while filled < size:
            need = size - filled
            w = self._words(int(need * 1.1) + 8)
            if limit < (1 << 64):
                w = w[w < np.uint64(limit)]
            w = w[:need]
            out[filled : filled + len(w)] = (w % np.uint64(span)).astype(np.int64) + low
            filled += len(w)
        return out

    def permutation(self, n: int) -> np.ndarray:
        # Sort by 64-bit random keys; ties (probability ~ n^2 / 2^65) are re-drawn.
        while True:
            keys = self._words(n)
            order = np.argsort(keys, kind="stable")
            if n < 2 or np.all(np.diff(keys[order]) != 0):
                return order.astype(np.int64)

    def normal(self, size: int, loc: float = 0.0, scale: float = 1.0) -> np.ndarray:
        # Box-Muller on 53-bit uniforms; u1 in (0, 1] so log is finite.
        half = (size + 1) // 2
        u1 = 1.0 - self.random(half)
        u2 = self.random(half)
        r = np.sqrt(-2.0 * np.log(u1))
        z = np.concatenate([r * np.cos(2 * math.pi * u2), r * np.sin(2 * math.pi * u2)])
        return loc + scale * z[:size]

    def bits(self, size: int) -> np.ndarray:
        raw = np.frombuffer(self.bytes((size + 7) // 8), dtype=np.uint8)
        return np.unpackbits(raw)[:size]

    def choice(self, n: int, size: int, p: np.ndarray | None = None) -> np.ndarray:
        """``size`` draws from ``range(n)``, uniform or with probabilities ``p``."""
        if p is None:
            return self.integers(0, n, size)
        cdf = np.cumsum(np.asarray(p, dtype=np.float64))
        cdf /= cdf[-1]
        idx = np.searchsorted(cdf, self.random(size), side="right")
        return np.minimum(idx, n - 1).astype(np.int64)


class SecureRandom(_Common):
    """Randomness from ``os.urandom`` (the OS CSPRNG); the default everywhere."""

    secure = True

    def _words(self, n: int) -> np.ndarray:
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()

    def bytes(self, n: int) -> bytes:
        return os.urandom(n)


class SeededRandom(_Common):
    """Reproducible randomness for simulations and tests only (numpy PCG64)."""

    secure = False

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._gen = np.random.Generator(np.random.PCG64(seed))

    def _words(self, n: int) -> np.ndarray:
        return self._gen.integers(0, 1 << 64, size=n, dtype=np.uint64, endpoint=False)

    def bytes(self, n: int) -> bytes:
        return self._gen.bytes(n)


def make_rng(seed: int | RandomSource | None = None) -> RandomSource:
    """``None`` -> :class:`SecureRandom`; an int -> :class:`SeededRandom` (experiments only);
    an existing source is returned as it is."""
    if seed is None:
        return SecureRandom()
    if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
        return SeededRandom(int(seed))
    if hasattr(seed, "random") and hasattr(seed, "integers"):
        return seed  # type: ignore[return-value]
    raise TypeError(f"seed must be None, an int or a RandomSource, not {type(seed).__name__}")
