"""Exact Bernoulli trials with irrational success probabilities, vectorized.

Every sampler in :mod:`ppdm.dp` reduces to Bernoulli trials whose success
probability is a transcendental number such as ``exp(-gamma)`` or
``1 / (1 + exp(x))``. A trial succeeds when a uniform real ``V`` in [0, 1) is below ``p``.
``V`` is drawn lazily in base-2^32 digits ``u_1, u_2, ...`` (uniform ``uint32`` words from
the random source) and compared digit by digit with the expansion ``p = 0.d_1 d_2 ...``:
the first digit where ``u_k != d_k`` decides the trial (``u_k < d_k`` means success).
One random byte decides all but 1/256 of the trials (against the leading 8 bits of
``p``); the rest draw 24 more bits, then whole 32-bit words, until the digits differ.

The digits ``d_k`` are exact: they are computed with MPFR (gmpy2) under directed
rounding, which gives a rigorous lower and upper bound of ``p``; a digit is accepted only
when both bounds agree on it, otherwise the working precision is doubled. No
floating-point approximation of ``p`` ever decides a trial, so the sampled distribution
is exactly Bernoulli(``p``) given uniform random words -- the property that the
floating-point Laplace samplers attacked by Mironov (2012) lack.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import gmpy2
import numpy as np

from ppdm.randomness import RandomSource

__all__ = [
    "BernoulliTable",
    "Expansion",
    "exp_neg",
    "logistic_neg",
    "to_fraction",
    "uniform_bytes",
    "uniform_words",
]

DIGIT_BITS = 32
_DIGIT_MASK = (1 << DIGIT_BITS) - 1
_MAX_PRECISION = 1 << 16

Bounds = Callable[[int], tuple[gmpy2.mpfr, gmpy2.mpfr]]


def to_fraction(x: float | Fraction | str) -> Fraction:
    """Read a privacy parameter as an exact rational.

    Floats are read as the shortest decimal that prints as them (``0.1`` is 1/10), so
    that budgets add up the way users expect (``0.1 + 0.2 == 0.3``) and the mechanism
    uses the same rational the accountant charges.

    >>> to_fraction(0.1), to_fraction(2), to_fraction("1/3")
    (Fraction(1, 10), Fraction(2, 1), Fraction(1, 3))
    """
    if isinstance(x, Fraction):
        return x
    if isinstance(x, bool):
        raise TypeError("a privacy parameter cannot be a bool")
    if isinstance(x, int | np.integer):
        return Fraction(int(x))
    if isinstance(x, float | np.floating):
        xf = float(x)
        if not np.isfinite(xf):
            raise ValueError(f"privacy parameter must be finite, got {xf}")
        return Fraction(repr(xf))
    if isinstance(x, str):
        return Fraction(x)
    return Fraction(x)  # type: ignore[arg-type]


def uniform_words(rng: RandomSource, n: int) -> np.ndarray:
    """``n`` uniform ``uint32`` words from ``rng`` (its raw bytes, nothing derived)."""
    if n <= 0:
        return np.empty(0, dtype=np.uint32)
    return np.frombuffer(rng.bytes(4 * n), dtype=np.uint32)


def uniform_bytes(rng: RandomSource, n: int) -> np.ndarray:
    """``n`` uniform ``uint8`` values from ``rng``."""
    if n <= 0:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer(rng.bytes(n), dtype=np.uint8)


class Expansion:
    """The base-2^32 digits of a real ``p`` in [0, 1], computed on demand.

    Either ``exact`` (a rational) or ``bounds`` is given; ``bounds(prec)`` must return
    MPFR numbers ``lo <= p <= hi`` that tighten as ``prec`` grows.
    """

    __slots__ = ("_bounds", "_digits", "_exact", "_one")

    def __init__(self, *, bounds: Bounds | None = None, exact: Fraction | None = None) -> None:
        if (bounds is None) == (exact is None):
            raise ValueError("give exactly one of bounds and exact")
        if exact is not None and not 0 <= exact <= 1:
            raise ValueError(f"probability {exact} outside [0, 1]")
        self._bounds = bounds
        self._exact = exact
        # p = 1 is written 0.FFFF... so that the digit comparison accepts with certainty.
        self._one = exact == 1
        self._digits: list[int] = []

    def digit(self, k: int) -> int:
        """Digit ``k`` (0-based): ``floor(p * 2**(32 (k + 1))) mod 2**32``."""
        if self._one:
            return _DIGIT_MASK
        if k >= len(self._digits):
            self._extend(k + 1)
        return self._digits[k]

    def _extend(self, count: int) -> None:
        shift = DIGIT_BITS * count
        if self._exact is not None:
            top = (self._exact.numerator << shift) // self._exact.denominator
        else:
            top = self._top_bits(shift)
        self._digits = [(top >> (DIGIT_BITS * (count - 1 - i))) & _DIGIT_MASK for i in range(count)]

    def _top_bits(self, shift: int) -> int:
        if self._bounds is None:  # pragma: no cover - guarded in __init__
            raise RuntimeError("no bounds")
        prec = shift + 64
        while prec <= _MAX_PRECISION:
            lo, hi = self._bounds(prec)
            # Exact: an MPFR number is a dyadic rational, so scale and floor it in
            # integer arithmetic (MPFR arithmetic here would round to the context's
            # precision).
            a = _floor_scaled(lo, shift)
            b = _floor_scaled(hi, shift)
            if a == b:
                return a
            prec *= 2
        raise ArithmeticError("could not separate the probability from a digit boundary")


def _floor_scaled(x: gmpy2.mpfr, shift: int) -> int:
    """``floor(x * 2**shift)`` computed exactly."""
    q = gmpy2.mpq(x)
    return int((int(q.numerator) << shift) // int(q.denominator))


def _ctx(prec: int, up: bool) -> gmpy2.context:
    return gmpy2.context(precision=prec, round=gmpy2.RoundUp if up else gmpy2.RoundDown)


def exp_neg(gamma: Fraction) -> Expansion:
    """Expansion of ``exp(-gamma)`` for a rational ``gamma >= 0``."""
    if gamma < 0:
        raise ValueError("gamma must be non-negative")
    if gamma == 0:
        return Expansion(exact=Fraction(1))
    g = gmpy2.mpq(gamma.numerator, gamma.denominator)

    def bounds(prec: int) -> tuple[gmpy2.mpfr, gmpy2.mpfr]:
        with _ctx(prec, up=True):
            g_up = gmpy2.mpfr(g)
        with _ctx(prec, up=False):
            g_down = gmpy2.mpfr(g)
            lo = gmpy2.exp(-g_up)
        with _ctx(prec, up=True):
            hi = gmpy2.exp(-g_down)
        return lo, hi

    return Expansion(bounds=bounds)


def logistic_neg(x: Fraction) -> Expansion:
    """Expansion of ``1 / (1 + exp(x))`` for a rational ``x > 0``.

    This is ``r / (1 + r)`` with ``r = exp(-x)``: the probability that bit ``j`` of a
    geometric variate with ratio ``exp(-rate)`` is set, for ``x = 2**j * rate``.
    """
    if x <= 0:
        raise ValueError("x must be positive")
    g = gmpy2.mpq(x.numerator, x.denominator)

    def bounds(prec: int) -> tuple[gmpy2.mpfr, gmpy2.mpfr]:
        # p is decreasing in x: the lower bound uses x rounded up and every later step
        # rounded so that the result can only get smaller; the upper bound mirrors it.
        with _ctx(prec, up=True):
            x_up = gmpy2.mpfr(g)
            den_up = 1 + gmpy2.exp(x_up)
        with _ctx(prec, up=False):
            x_down = gmpy2.mpfr(g)
            lo = 1 / den_up
            den_down = 1 + gmpy2.exp(x_down)
        with _ctx(prec, up=True):
            hi = 1 / den_down
        return lo, hi

    return Expansion(bounds=bounds)


class BernoulliTable:
    """Exact Bernoulli trials for a family of probabilities ``p_0, p_1, ...``.

    ``make(i)`` builds the :class:`Expansion` of ``p_i`` the first time candidate ``i``
    is used; first digits are cached in a numpy array so that a batch of trials costs one
    ``uint32`` word and one comparison per trial.
    """

    def __init__(self, size: int, make: Callable[[int], Expansion]) -> None:
        self._make = make
        self._expansions: list[Expansion | None] = [None] * size
        self._first = np.zeros(size, dtype=np.uint32)
        self._known = np.zeros(size, dtype=bool)

    def _grow(self, size: int) -> None:
        if size <= len(self._expansions):
            return
        size = max(size, 2 * len(self._expansions))
        extra = size - len(self._expansions)
        self._expansions.extend([None] * extra)
        self._first = np.concatenate([self._first, np.zeros(extra, dtype=np.uint32)])
        self._known = np.concatenate([self._known, np.zeros(extra, dtype=bool)])

    @classmethod
    def of(cls, expansions: list[Expansion]) -> BernoulliTable:
        table = cls(len(expansions), lambda i: expansions[i])
        table.prepare(np.arange(len(expansions)))
        return table

    def expansion(self, i: int) -> Expansion:
        e = self._expansions[i]
        if e is None:
            e = self._make(i)
            self._expansions[i] = e
        return e

    def prepare(self, which: np.ndarray) -> None:
        """Compute the first digit of every probability in ``which`` not yet known."""
        if which.size:
            if which.min() < 0:
                raise ValueError("negative probability index")
            self._grow(int(which.max()) + 1)
        need = np.unique(which[~self._known[which]])
        for i in need.tolist():
            self._first[i] = self.expansion(i).digit(0)
        self._known[need] = True

    def first_digits(self) -> np.ndarray:
        return self._first

    def first_bytes(self) -> np.ndarray:
        """The leading 8 bits of each probability (prepared entries only)."""
        return (self._first >> np.uint32(24)).astype(np.uint8)

    def sample(self, which: np.ndarray, rng: RandomSource) -> np.ndarray:
        """One trial per entry of ``which`` (indices of probabilities); boolean array.

        The first comparison uses one random *byte* against the leading 8 bits of ``p``
        (deciding all but 1/256 of the trials); ties go to :meth:`resolve`.
        """
        which = np.asarray(which, dtype=np.int64)
        self.prepare(which)
        u = uniform_bytes(rng, len(which))
        d = self.first_bytes()[which]
        out = u < d
        undecided = np.flatnonzero(u == d)
        if undecided.size:
            out[undecided] = self.resolve(which[undecided], rng)
        return out

    def resolve(self, which: np.ndarray, rng: RandomSource) -> np.ndarray:
        """Finish trials whose first random byte equalled the leading 8 bits of ``p``.

        Compares 24 fresh random bits with bits 9-32 of ``p``, then whole 32-bit digits,
        until they differ (each round leaves a 2**-24 or 2**-32 fraction undecided).
        """
        which = np.asarray(which, dtype=np.int64)
        low = np.uint32(0xFFFFFF)
        u = uniform_words(rng, len(which)) & low
        d = self._first[which] & low
        out = u < d
        pending = np.flatnonzero(u == d)
        k = 1
        while pending.size:
            uniq, inv = np.unique(which[pending], return_inverse=True)
            digits = np.array([self.expansion(int(i)).digit(k) for i in uniq], dtype=np.uint32)
            dk = digits[inv]
            u = uniform_words(rng, len(pending))
            out[pending] = u < dk
            pending = pending[u == dk]
            k += 1
        return out
