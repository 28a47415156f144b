"""Differential privacy mechanisms: discrete Laplace, snapping, discrete Gaussian, exponential.

Definitions follow Seidl 2016 ("Differential Privacy"): a randomized mechanism ``A`` is
``epsilon``-differentially private if ``Pr[A(D1) in S] <= exp(epsilon) Pr[A(D2) in S]`` for
all databases ``D1, D2`` differing in one record (added or removed) and all output sets
``S``; ``f(D) + Lap(S(f) / epsilon)`` is ``epsilon``-DP for a query of sensitivity
``S(f)``; the exponential mechanism picks output ``y`` with probability
``∝ exp(epsilon u(X, y) / (2 Delta u))``.

Each mechanism is safe against the floating-point attack of Mironov (2012):

=============================  =========================================================
:class:`DiscreteLaplaceMechanism`  integer queries; exact two-sided geometric noise
                                   (``epsilon``-DP exactly)
:class:`SnappingMechanism`         real-valued queries; Mironov's snapping mechanism
                                   (clamp, Laplace with a correctly rounded log, round
                                   to a power of two, clamp) with his epsilon bound
:class:`DiscreteGaussianMechanism` integer queries; exact discrete Gaussian
                                   (Canonne-Kamath-Steinke 2020), ``(epsilon, delta)``
                                   from the exact privacy-loss tail
:class:`ExponentialMechanism`      selection; exact rejection sampler
=============================  =========================================================
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np

from ppdm.dp._exact import to_fraction
from ppdm.dp.samplers import (
    RngLike,
    _discrete_gaussian,
    _discrete_laplace,
    sample_exponential_mechanism,
    sample_uniform_float,
)
from ppdm.randomness import make_rng

__all__ = [
    "DiscreteGaussianMechanism",
    "DiscreteLaplaceMechanism",
    "ExponentialMechanism",
    "SnappingMechanism",
    "calibrate_discrete_gaussian",
    "discrete_gaussian_delta",
]

Number = float | Fraction | str


def _positive(name: str, value: Number) -> Fraction:
    f = to_fraction(value)  # type: ignore[arg-type]
    if f <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return f


def _as_int_array(value: Any) -> tuple[np.ndarray, bool]:
    arr = np.asarray(value)
    if arr.dtype.kind not in "iub":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.rint(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError("this mechanism takes integer query values")
    return arr.astype(np.int64), arr.ndim == 0


@dataclass(frozen=True)
class DiscreteLaplaceMechanism:
    """``f(D) + X`` with ``P(X = x) ∝ exp(-epsilon |x| / Delta)`` for integer ``f``.

    The integer analogue of Seidl's (2016) Laplace theorem: for ``|f(D1) - f(D2)| <= Delta``
    the output probabilities differ by at most ``exp(epsilon)``, exactly (the sampler
    :func:`~ppdm.dp.samplers.sample_discrete_laplace` is exact). Vector
    queries use the L1 sensitivity.

    >>> m = DiscreteLaplaceMechanism(epsilon=0.5, sensitivity=1)
    >>> m.scale, m.privacy()
    (Fraction(2, 1), (Fraction(1, 2), Fraction(0, 1)))
    >>> int(m.randomise(10, rng=0)) in range(-100, 120)
    True
    """

    epsilon: Number
    sensitivity: Number = 1
    _eps: Fraction = field(init=False, repr=False)
    _delta: Fraction = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_eps", _positive("epsilon", self.epsilon))
        object.__setattr__(self, "_delta", _positive("sensitivity", self.sensitivity))

    @property
    def scale(self) -> Fraction:
        """``Delta / epsilon``, the scale ``b`` of Seidl's (2016) ``Lap(b)``."""
        return self._delta / self._eps

    def privacy(self) -> tuple[Fraction, Fraction]:
        """``(epsilon, delta)`` this mechanism spends."""
        return self._eps, Fraction(0)

    def variance(self) -> float:
        """``2 r / (1 - r)**2`` with ``r = exp(-epsilon / Delta)``."""
        r = math.exp(-float(self._eps / self._delta))
        return 2 * r / (1 - r) ** 2

    def randomise(self, value: Any, *, rng: RngLike = None) -> Any:
        """Noisy copy of an integer or integer array ``value``."""
        arr, scalar = _as_int_array(value)
        noise = _discrete_laplace(self._eps / self._delta, arr.size, make_rng(rng))
        out = arr + noise.reshape(arr.shape)
        return int(out) if scalar else out


def discrete_gaussian_delta(sigma: Number, epsilon: float, sensitivity: int = 1) -> float:
    """Smallest ``delta`` for which ``f(D) + N_Z(0, sigma**2)`` is ``(epsilon, delta)``-DP.

    The hockey-stick divergence between the discrete Gaussian and its shift by
    ``Delta``: ``delta = sum_y max(0, p(y) - exp(epsilon) p(y - Delta))``. Canonne, Kamath
    and Steinke (2020, Theorem 7) give the same number as
    ``P[Y > eps sigma^2/Delta - Delta/2] - e^eps P[Y > eps sigma^2/Delta + Delta/2]``
    (used as the oracle in the tests). For ``sigma <= 5000`` the sum is evaluated term by
    term; above, the two tails are bounded by Gaussian integrals (``int_m^inf f <=
    sum_{y >= m} f(y) <= f(m) + int_m^inf f`` for the decreasing tail) and the
    normalizer from below by ``sigma sqrt(2 pi)`` (Poisson summation), which gives an
    upper bound on ``delta`` -- safe for accounting. Floating-point arithmetic is fine
    here: this is an accounting figure, not a sample.

    >>> f"{discrete_gaussian_delta(4.0, 1.0):.3g}"
    '3.06e-06'
    """
    s = float(to_fraction(sigma))
    d = int(sensitivity)
    if s <= 0 or d <= 0 or epsilon < 0:
        raise ValueError("sigma and sensitivity must be positive, epsilon non-negative")
    if s > _DIRECT_SIGMA:
        return _discrete_gaussian_delta_bound(s, epsilon, d)
    half = math.ceil(40.0 * s) + d + 1
    y = np.arange(-half, half + d + 1, dtype=np.float64)
    logp = -(y**2) / (2 * s * s)
    log_norm = np.logaddexp.reduce(logp)
    p = np.exp(logp - log_norm)
    p_shift = np.exp(-((y - d) ** 2) / (2 * s * s) - log_norm)
    return float(np.maximum(p - math.exp(epsilon) * p_shift, 0.0).sum())


_DIRECT_SIGMA = 5000.0


def _discrete_gaussian_delta_bound(s: float, epsilon: float, d: int) -> float:
    """Upper bound on the discrete Gaussian's delta from Gaussian tail integrals.

    With ``f(y) = exp(-y**2 / (2 s**2))`` and ``T(m) = sum_{y >= m} f(y)``:
    ``delta = (T(m1) - e^eps T(m2)) / Z``. Where ``f`` is convex and decreasing
    (``y >= s``) the midpoint and trapezoid rules bracket the sum:
    ``int_m f + f(m) / 2 <= T(m) <= int_{m - 1/2} f``; elsewhere
    ``int_m f <= T(m) <= f(m) + int_m f``. ``Z >= s sqrt(2 pi)`` by Poisson summation.
    """
    from ppdm.extras import require

    # ndtr(-x) is scipy.stats.norm.sf(x) without importing scipy.stats (a second)
    ndtr = require("scipy.special", "stats", "the Gaussian mechanism's calibration").ndtr

    root = s * math.sqrt(2 * math.pi)

    def integral(m: float) -> float:
        return root * float(ndtr(-(m / s)))

    def f(m: float) -> float:
        return math.exp(-(m * m) / (2 * s * s))

    m1 = math.floor(epsilon * s * s / d - d / 2) + 1
    m2 = math.floor(epsilon * s * s / d + d / 2) + 1
    if m1 - 0.5 >= s:
        upper_t1 = integral(m1 - 0.5)
    else:
        upper_t1 = f(m1) + integral(m1) if m1 >= 0 else root * 2
    lower_t2 = integral(m2) + (f(m2) / 2 if m2 >= s else 0.0)
    return min(1.0, max(0.0, (upper_t1 - math.exp(epsilon) * lower_t2) / root))


@functools.lru_cache(maxsize=256, typed=True)  # a deterministic search of ~50 sums
def calibrate_discrete_gaussian(epsilon: float, delta: float, sensitivity: int = 1) -> Fraction:
    """The smallest ``sigma`` (to 4 significant digits, rounded up) meeting ``(eps, delta)``.

    >>> sigma = calibrate_discrete_gaussian(1.0, 1e-5)
    >>> float(sigma), discrete_gaussian_delta(sigma, 1.0) <= 1e-5
    (3.741, True)
    """
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError("need epsilon > 0 and 0 < delta < 1")
    d = int(sensitivity)
    if d <= 0:
        raise ValueError("sensitivity must be a positive integer")
    hi = d * math.sqrt(2 * math.log(1.25 / delta)) / min(epsilon, 1.0) + d
    while discrete_gaussian_delta(hi, epsilon, d) > delta:
        hi *= 2
    lo = 0.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if discrete_gaussian_delta(mid, epsilon, d) > delta:
            lo = mid
        else:
            hi = mid
    # Round up to 4 significant digits so the rational is short and still safe.
    exp10 = math.floor(math.log10(hi)) - 3
    sigma = Fraction(math.ceil(hi / 10.0**exp10)) * Fraction(10) ** exp10
    while discrete_gaussian_delta(sigma, epsilon, d) > delta:  # pragma: no cover - guard
        sigma += Fraction(10) ** exp10
    return sigma


@dataclass(frozen=True)
class DiscreteGaussianMechanism:
    """``f(D) + N_Z(0, sigma**2)`` for integer ``f`` (Canonne-Kamath-Steinke 2020).

    Build it from ``sigma`` directly or with :meth:`from_privacy` from a target
    ``(epsilon, delta)``; :meth:`privacy` reports the ``(epsilon, delta)`` the accountant
    charges and :attr:`rho` the zero-concentrated DP parameter ``Delta**2 / (2 sigma**2)``.
    For vector queries ``sensitivity`` is the L2 sensitivity; for a histogram under
    add/remove-one neighbours one coordinate moves by 1, so the scalar analysis applies.

    >>> m = DiscreteGaussianMechanism.from_privacy(epsilon=1.0, delta=1e-5)
    >>> float(m.sigma), m.privacy()[1] <= 1e-5
    (3.741, True)
    """

    sigma: Number
    sensitivity: int = 1
    epsilon: float | None = None
    _sigma: Fraction = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_sigma", _positive("sigma", self.sigma))
        if int(self.sensitivity) != self.sensitivity or self.sensitivity <= 0:
            raise ValueError("the discrete Gaussian needs a positive integer sensitivity")

    @classmethod
    def from_privacy(
        cls, *, epsilon: float, delta: float, sensitivity: int = 1
    ) -> DiscreteGaussianMechanism:
        sigma = calibrate_discrete_gaussian(epsilon, delta, sensitivity)
        return cls(sigma=sigma, sensitivity=sensitivity, epsilon=epsilon)

    @property
    def rho(self) -> float:
        return self.sensitivity**2 / (2 * float(self._sigma) ** 2)

    def privacy(self, epsilon: float | None = None) -> tuple[Fraction, Fraction]:
        """``(epsilon, delta)`` at ``epsilon`` (default: the one it was calibrated for)."""
        eps = self.epsilon if epsilon is None else epsilon
        if eps is None:
            raise ValueError("give the epsilon at which to report delta")
        delta = discrete_gaussian_delta(self._sigma, eps, self.sensitivity)
        return to_fraction(eps), Fraction(delta)

    def randomise(self, value: Any, *, rng: RngLike = None) -> Any:
        arr, scalar = _as_int_array(value)
        noise = _discrete_gaussian(self._sigma * self._sigma).sample(arr.size, make_rng(rng))
        out = arr + noise.reshape(arr.shape)
        return int(out) if scalar else out


_ETA = 2.0**-53  # unit roundoff of IEEE double


def _correctly_rounded_log(u: np.ndarray) -> np.ndarray:
    """``log(u)`` correctly rounded to double (MPFR at 53 bits, round to nearest)."""
    with gmpy2.context(precision=53, round=gmpy2.RoundToNearest):
        return np.array([float(gmpy2.log(x)) for x in u.tolist()], dtype=np.float64)


@dataclass(frozen=True)
class SnappingMechanism:
    """Mironov's snapping mechanism: floating-point-safe Laplace noise for real queries.

    ``clamp_B(round_Lambda(clamp_B(f(D)) + S * lambda * LN(U*)))`` where ``U*`` is uniform
    over all doubles in (0, 1), ``S`` a random sign, ``LN`` a correctly rounded logarithm
    (MPFR), ``Lambda`` the smallest power of two ``>= lambda`` and ``B`` the clamping bound
    (Mironov 2012, "On significance of the least significant bits for differential
    privacy", section 5.2). For sensitivity 1 and ``lambda < B < 2**46 lambda`` it is
    ``((1 + 12 B eta) / lambda + 2 eta)``-DP, ``eta = 2**-53``; we use the slightly larger
    ``(1 + 2**-49 B) / lambda + 2**-52``. A query with sensitivity ``Delta`` is divided by
    ``Delta`` first; when ``Delta`` is not a power of two that division rounds, which can
    move the scaled sensitivity by at most ``2**-51 B``, and we add that too. ``lambda`` is
    then chosen so that the total is at most ``epsilon``.

    Parameters
    ----------
    epsilon, sensitivity : float
    bound : float
        ``B`` in the query's units: inputs and outputs are clamped to ``[-bound, bound]``.

    >>> m = SnappingMechanism(epsilon=1.0, sensitivity=1.0, bound=1000.0)
    >>> m.effective_epsilon() <= 1.0, m.granularity
    (True, 2.0)
    >>> float(m.randomise(3.0, rng=0)) % 2.0
    0.0
    """

    epsilon: float
    sensitivity: float = 1.0
    bound: float = 1e6
    lam: float = field(init=False)
    granularity: float = field(init=False)

    def __post_init__(self) -> None:
        eps = float(self.epsilon)
        delta = float(self.sensitivity)
        if not (eps > 2**-40 and delta > 0 and self.bound > 0):
            raise ValueError("need epsilon > 2**-40, sensitivity > 0 and bound > 0")
        b = self.bound / delta
        rounding = 0.0 if _is_power_of_two(delta) else 2.0**-51 * b
        lam = (1.0 + rounding + 2.0**-49 * b) / (eps - 2.0**-52) * (1 + 2**-50)
        if not lam < b < 2.0**46 * lam:
            raise ValueError(
                f"snapping needs lambda < B < 2**46 lambda (lambda={lam:.4g}, B={b:.4g} in "
                "sensitivity units): widen or narrow the bound"
            )
        object.__setattr__(self, "lam", lam)
        object.__setattr__(self, "granularity", 2.0 ** math.ceil(math.log2(lam)) * delta)

    @property
    def scaled_bound(self) -> float:
        return self.bound / float(self.sensitivity)

    def effective_epsilon(self) -> float:
        """Mironov's privacy bound for these parameters (at most ``epsilon``)."""
        b = self.scaled_bound
        rounding = 0.0 if _is_power_of_two(float(self.sensitivity)) else 2.0**-51 * b
        return (1.0 + rounding + 2.0**-49 * b) / self.lam + 2.0**-52

    def privacy(self) -> tuple[Fraction, Fraction]:
        return to_fraction(self.epsilon), Fraction(0)

    def randomise(self, value: Any, *, rng: RngLike = None) -> Any:
        rng = make_rng(rng)
        x = np.asarray(value, dtype=np.float64)
        scalar = x.ndim == 0
        flat = x.ravel() / float(self.sensitivity)
        if not np.all(np.isfinite(flat)):
            raise ValueError("query value must be finite")
        b = self.scaled_bound
        big_lambda = 2.0 ** math.ceil(math.log2(self.lam))
        clamped = np.clip(flat, -b, b)
        u = sample_uniform_float(flat.size, rng)
        noise = self.lam * _correctly_rounded_log(u)  # <= 0
        sign = rng.bits(flat.size).astype(bool)
        y = clamped + np.where(sign, noise, -noise)
        snapped = np.clip(np.rint(y / big_lambda) * big_lambda, -b, b)
        out = (snapped * float(self.sensitivity)).reshape(x.shape)
        return float(out) if scalar else out


def _is_power_of_two(x: float) -> bool:
    m, _ = math.frexp(x)
    return m == 0.5


@dataclass(frozen=True)
class ExponentialMechanism:
    """The exponential mechanism (McSherry-Talwar 2007; Seidl 2016 "Exponential Mechanism").

    Chooses candidate ``i`` with probability ``∝ exp(epsilon u_i / (2 Delta u))`` where
    ``u_i`` is its utility (higher is better) and ``Delta u`` the utility's sensitivity;
    with ``monotonic=True`` (utilities that all move in the same direction between
    neighbours) the factor 2 is dropped. Seidl 2016 writes the same mechanism with a score
    to minimise, ``exp(-epsilon u / (2 Delta u))``: pass ``-score`` as the utility.

    Sampling is exact: utilities (doubles) are read as exact rationals and the draw is a
    rejection sampler with exact Bernoulli(``exp(-gamma)``) trials, so no floating-point
    rounding of ``exp`` can be exploited (unlike Gumbel-max or inverse-CDF on doubles).
    Candidates with utility ``-inf`` are never chosen.

    >>> em = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    >>> [round(float(p), 3) for p in em.probabilities([0.0, 1.0, 2.0])]
    [0.186, 0.307, 0.506]
    """

    epsilon: Number
    sensitivity: Number = 1
    monotonic: bool = False

    def _gammas(self, utilities: Any) -> list[Fraction | None]:
        u = np.asarray(utilities, dtype=np.float64).ravel()
        if u.size == 0:
            raise ValueError("no candidates")
        if np.any(np.isnan(u)) or np.any(u == np.inf):
            raise ValueError("utilities must be finite or -inf")
        finite = u[np.isfinite(u)]
        if finite.size == 0:
            raise ValueError("every candidate has utility -inf")
        eps = _positive("epsilon", self.epsilon)
        factor = eps / (_positive("sensitivity", self.sensitivity) * (1 if self.monotonic else 2))
        top = Fraction(float(finite.max()))
        return [(top - Fraction(float(v))) * factor if np.isfinite(v) else None for v in u.tolist()]

    def probabilities(self, utilities: Any) -> np.ndarray:
        """The selection probabilities (floating point; for reporting and tests)."""
        g = self._gammas(utilities)
        w = np.array([0.0 if x is None else math.exp(-float(x)) for x in g])
        return w / w.sum()

    def privacy(self) -> tuple[Fraction, Fraction]:
        return _positive("epsilon", self.epsilon), Fraction(0)

    def select(self, utilities: Any, *, size: int | None = None, rng: RngLike = None) -> Any:
        """Index of the chosen candidate (an array of ``size`` independent draws if given;
        each draw spends ``epsilon``)."""
        n = 1 if size is None else int(size)
        idx = sample_exponential_mechanism(self._gammas(utilities), n, rng)
        return int(idx[0]) if size is None else idx
