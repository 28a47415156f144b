"""Exact, vectorized samplers for differentially private noise.

Why not ``numpy.random.laplace``? Mironov (2012, "On significance of the least significant
bits for differential privacy") showed that a textbook floating-point Laplace sampler
(``-b * log(u)`` with a 53-bit uniform ``u``) produces a porous set of outputs whose
pattern depends on the true value, so a single noisy answer can reveal it; diffprivlib
issues #19 and #94 are that attack on a real library. The samplers here never compute
noise in floating point:

* :func:`sample_geometric` draws ``G`` with ``P(G = g) = (1 - r) r**g``, ``r = exp(-rate)``,
  by its binary expansion. The bits of a geometric variate are independent: bit ``j`` is
  set with probability ``r**(2**j) / (1 + r**(2**j))``, and the part above bit ``J`` is
  itself geometric with ratio ``r**(2**J)``. Each bit is an exact Bernoulli trial (see
  :mod:`ppdm.dp._exact`), so a sample costs about ``log2(23 * scale)`` random
  bytes and a few numpy comparisons -- no loop over samples, no floating point.
* :func:`sample_discrete_laplace` (the two-sided geometric distribution,
  ``P(X = x) ∝ exp(-|x| / scale)``) takes a geometric magnitude and a random sign and
  rejects "negative zero", as in Canonne, Kamath and Steinke (2020, "The discrete Gaussian
  for differential privacy", Algorithm 2).
* :func:`sample_discrete_gaussian` is Canonne-Kamath-Steinke Algorithm 3: a discrete
  Laplace proposal with ``t = floor(sigma) + 1`` accepted with probability
  ``exp(-(|Y| - sigma**2 / t)**2 / (2 sigma**2))``, again an exact Bernoulli trial.
* :func:`sample_exponential_mechanism` draws index ``i`` with probability
  ``∝ exp(-gamma_i)`` by rejection from the uniform proposal with exact
  Bernoulli(``exp(-(gamma_i - min gamma))``) acceptance.

All randomness is raw bytes from :func:`ppdm.randomness.make_rng` (``os.urandom`` unless
an integer seed is given for a reproducible experiment). Parameters are read as exact
rationals (:func:`~ppdm.dp._exact.to_fraction`), so the distribution sampled is
exactly the one the privacy analysis is about.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ppdm.dp._exact import (
    BernoulliTable,
    Expansion,
    exp_neg,
    logistic_neg,
    to_fraction,
    uniform_bytes,
)
from ppdm.randomness import RandomSource, make_rng

__all__ = [
    "sample_discrete_gaussian",
    "sample_discrete_laplace",
    "sample_exponential_mechanism",
    "sample_geometric",
    "sample_uniform_float",
]

_CHUNK = 1 << 20
# 2**J * rate >= 23 makes r**(2**J) < 2**-33, so the top geometric is zero unless the
# first word is zero; below that the expansion's bits are cheap to draw.
_TOP_THRESHOLD = 23
_MAX_SCALE = Fraction(2**40)

RngLike = int | RandomSource | None


class _Geometric:
    """Geometric sampler for one ``rate`` (ratio ``r = exp(-rate)``)."""

    def __init__(self, rate: Fraction) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        j = 0
        while rate * (1 << j) < _TOP_THRESHOLD:
            j += 1
        self.rate = rate
        self.levels = j
        self.bits = BernoulliTable.of([logistic_neg(rate * (1 << i)) for i in range(j)])
        self.top = BernoulliTable.of([exp_neg(rate * (1 << j))])

    def sample(self, n: int, rng: RandomSource) -> np.ndarray:
        out = np.empty(n, dtype=np.int64)
        for start in range(0, n, _CHUNK):
            stop = min(n, start + _CHUNK)
            out[start:stop] = self._sample_chunk(stop - start, rng)
        return out

    def _sample_chunk(self, n: int, rng: RandomSource) -> np.ndarray:
        levels = self.levels
        out = np.zeros(n, dtype=np.int64)
        if levels:
            # One random byte per bit against the leading 8 bits of its probability.
            words = uniform_bytes(rng, n * levels).reshape(levels, n)
            digits = self.bits.first_bytes()
            hit = np.empty(n, dtype=bool)
            term = np.empty(n, dtype=np.int64)
            for j in range(levels):
                row = words[j]
                np.less(row, digits[j], out=hit)
                np.multiply(hit, np.int64(1) << j, out=term)
                out |= term
                tie = np.flatnonzero(row == digits[j])
                if tie.size:
                    won = self.bits.resolve(np.full(tie.size, j, dtype=np.int64), rng)
                    out[tie[won]] |= np.int64(1) << j
        # The part above bit J: count successes of Bernoulli(r**(2**J)) until a failure.
        active = np.arange(n)
        step = np.int64(1) << levels
        while active.size:
            success = self.top.sample(np.zeros(active.size, dtype=np.int64), rng)
            active = active[success]
            out[active] += step
        return out


@lru_cache(maxsize=64)
def _geometric(rate: Fraction) -> _Geometric:
    return _Geometric(rate)


def _check_size(size: int) -> int:
    size = int(size)
    if size < 0:
        raise ValueError("size must be non-negative")
    return size


def _scale_rate(scale: float | Fraction | str) -> Fraction:
    s = to_fraction(scale)
    if s <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    if s > _MAX_SCALE:
        raise ValueError(f"scale {scale} above 2**40 is not supported")
    return 1 / s


def sample_geometric(scale: float | Fraction | str, size: int, rng: RngLike = None) -> np.ndarray:
    """Exact geometric variates ``G >= 0`` with ``P(G = g) ∝ exp(-g / scale)``.

    Parameters
    ----------
    scale : float, int, Fraction or str
        Read as an exact rational (floats by their shortest decimal: ``0.1`` is 1/10).
    size : int
        Number of samples.
    rng : int, RandomSource or None
        ``None`` for ``os.urandom``; an int seeds a reproducible (insecure) source.

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> g = sample_geometric(2.0, 100_000, rng=7)
    >>> bool(g.min() >= 0), round(float(g.mean()), 1)  # mean r / (1 - r) = 1.54
    (True, 1.5)
    """
    rng = make_rng(rng)
    return _geometric(_scale_rate(scale)).sample(_check_size(size), rng)


def _discrete_laplace(rate: Fraction, size: int, rng: RandomSource) -> np.ndarray:
    geo = _geometric(rate)
    r = math.exp(-float(rate))
    accept = (1.0 + r) / 2.0
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        m = min(int(need / accept * 1.02) + 16, max(_CHUNK, need))
        g = geo.sample(m, rng)
        negative = rng.bits(m).astype(bool)
        keep = ~(negative & (g == 0))
        x = np.where(negative, -g, g)[keep][:need]
        out[filled : filled + len(x)] = x
        filled += len(x)
    return out


def sample_discrete_laplace(
    scale: float | Fraction | str, size: int, rng: RngLike = None
) -> np.ndarray:
    """Exact discrete Laplace (two-sided geometric) noise, vectorized.

    ``P(X = x) = (1 - r) / (1 + r) * r**|x|`` with ``r = exp(-1 / scale)``. Adding it to an
    integer query of sensitivity ``Delta`` with ``scale = Delta / epsilon`` is
    ``epsilon``-differentially private (Ghosh, Roughgarden and Sundararajan 2009; Seidl 2016
    "Laplace Noise" is the continuous analogue). Construction: exact geometric magnitude
    by binary expansion, uniform sign, rejection of negative zero
    (Canonne-Kamath-Steinke 2020, Algorithm 2); see the module docstring for why this is
    immune to the floating-point attack of Mironov (2012).

    Parameters
    ----------
    scale : float, int, Fraction or str
        ``Delta / epsilon``; read as an exact rational, at most ``2**40``.
    size : int
        Number of samples.
    rng : int, RandomSource or None
        ``None`` (default) for ``os.urandom``; an int for reproducible experiments only.

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> x = sample_discrete_laplace(1.0, 200_000, rng=1)
    >>> round(float(np.mean(x == 0)), 2)  # (1 - e^-1) / (1 + e^-1) = 0.462
    0.46
    """
    rng = make_rng(rng)
    return _discrete_laplace(_scale_rate(scale), _check_size(size), rng)


def _isqrt_floor(q: Fraction) -> int:
    """``floor(sqrt(q))`` for a rational ``q >= 0``, exactly."""
    return math.isqrt(q.numerator * q.denominator) // q.denominator


class _DiscreteGaussian:
    def __init__(self, sigma2: Fraction) -> None:
        if sigma2 <= 0:
            raise ValueError("sigma must be positive")
        self.sigma2 = sigma2
        self.t = _isqrt_floor(sigma2) + 1
        tau = sigma2 / self.t
        self.accept = BernoulliTable(64, lambda y: exp_neg((Fraction(y) - tau) ** 2 / (2 * sigma2)))

    def sample(self, size: int, rng: RandomSource) -> np.ndarray:
        out = np.empty(size, dtype=np.int64)
        filled = 0
        rate = Fraction(1, self.t)
        while filled < size:
            need = size - filled
            m = min(int(need * 1.6) + 16, max(_CHUNK, need))
            y = _discrete_laplace(rate, m, rng)
            ok = self.accept.sample(np.abs(y), rng)
            y = y[ok][:need]
            out[filled : filled + len(y)] = y
            filled += len(y)
        return out


@lru_cache(maxsize=64)
def _discrete_gaussian(sigma2: Fraction) -> _DiscreteGaussian:
    return _DiscreteGaussian(sigma2)


def sample_discrete_gaussian(
    sigma: float | Fraction | str, size: int, rng: RngLike = None
) -> np.ndarray:
    """Exact discrete Gaussian noise ``P(X = x) ∝ exp(-x**2 / (2 sigma**2))`` on the integers.

    Canonne, Kamath and Steinke (2020), Algorithm 3, with every Bernoulli trial exact.
    Privacy of adding it to a sensitivity-``Delta`` integer query: see
    :func:`ppdm.dp.mechanisms.discrete_gaussian_delta`.

    Examples
    --------
    >>> x = sample_discrete_gaussian(3, 100_000, rng=2)
    >>> round(float(x.var()), 0)  # slightly below sigma**2 = 9
    9.0
    """
    s = to_fraction(sigma)
    if s <= 0 or s > _MAX_SCALE:
        raise ValueError(f"sigma must be in (0, 2**40], got {sigma}")
    rng = make_rng(rng)
    return _discrete_gaussian(s * s).sample(_check_size(size), rng)


def sample_exponential_mechanism(
    gammas: list[Fraction | None], size: int, rng: RngLike = None
) -> np.ndarray:
    """Indices ``i`` drawn with probability ``∝ exp(-gamma_i)``, exactly.

    ``gammas`` are exact rationals (``None`` for an excluded candidate). Rejection
    sampling: propose ``i`` uniformly, accept with probability
    ``exp(-(gamma_i - min gamma))``; the expected number of proposals per sample is
    ``n / sum_i exp(-(gamma_i - min gamma)) <= n``. Used by
    :class:`ppdm.dp.mechanisms.ExponentialMechanism`.
    """
    size = _check_size(size)
    rng = make_rng(rng)
    valid = [g for g in gammas if g is not None]
    if not valid:
        raise ValueError("no candidate with a finite score")
    low = min(valid)
    shifted = [None if g is None else g - low for g in gammas]
    n = len(shifted)
    approx = np.array([0.0 if g is None else math.exp(-float(g)) for g in shifted])
    accept_rate = max(float(approx.mean()), 1e-12)

    def make(i: int) -> Expansion:
        g = shifted[i]
        return Expansion(exact=Fraction(0)) if g is None else exp_neg(g)

    excluded = np.array([g is None for g in shifted])
    table = BernoulliTable(n, make)
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        m = int(min(max(need / accept_rate * 1.1 + 16, 16), 1 << 20))
        proposal = rng.integers(0, n, m)
        proposal = proposal[~excluded[proposal]]
        if proposal.size == 0:
            continue
        ok = table.sample(proposal, rng)
        got = proposal[ok][:need]
        out[filled : filled + len(got)] = got
        filled += len(got)
    return out


def sample_uniform_float(size: int, rng: RngLike = None) -> np.ndarray:
    """Uniform floats on (0, 1) over *all* doubles, each with probability equal to its width.

    The exponent ``e >= 1`` is geometric (``P(e = k) = 2**-k``, counted from trailing zero
    bits) and the 52 mantissa bits are uniform, so ``U = (1 + m / 2**52) * 2**-e``. This is
    the ``U*`` of Mironov's snapping mechanism (2012, section 5.2); a 53-bit
    ``k / 2**53`` uniform would miss most small doubles.

    >>> u = sample_uniform_float(10_000, rng=3)
    >>> bool((u > 0).all() and (u < 1).all()), bool(u.min() < 1e-3)
    (True, True)
    """
    size = _check_size(size)
    rng = make_rng(rng)
    exponent = np.ones(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        w = np.frombuffer(rng.bytes(8 * pending.size), dtype=np.uint64)
        zero = w == 0
        nz = ~zero
        low = w[nz] & (~w[nz] + np.uint64(1))  # lowest set bit, a power of two
        _, e2 = np.frexp(low.astype(np.float64))
        exponent[pending[nz]] += e2.astype(np.int64) - 1
        exponent[pending[zero]] += 64
        pending = pending[zero]
    mantissa = np.frombuffer(rng.bytes(8 * size), dtype=np.uint64) >> np.uint64(12)
    # Exponents past the normal range (probability 2**-1021) are redrawn.
    bad = exponent > 1021
    if bad.any():
        exponent[bad] = np.minimum(exponent[bad], 1021)
        redraw = sample_uniform_float(int(bad.sum()), rng)
        out = np.ldexp(mantissa.astype(np.float64) + 2.0**52, -(52 + exponent).astype(np.int32))
        out[bad] = redraw
        return out
    return np.ldexp(mantissa.astype(np.float64) + 2.0**52, -(52 + exponent).astype(np.int32))
