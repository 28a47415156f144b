"""DP mechanisms: privacy accounting numbers, output distributions, parameter checks."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from ppdm.dp import (
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    ExponentialMechanism,
    SnappingMechanism,
    calibrate_discrete_gaussian,
    discrete_gaussian_delta,
)
from ppdm.dp.mechanisms import _correctly_rounded_log, _discrete_gaussian_delta_bound


def cks_theorem7_delta(sigma: float, eps: float, d: int) -> float:
    """Canonne-Kamath-Steinke Theorem 7, evaluated with an explicit pmf table."""
    k = int(60 * sigma) + 10 * d + 10
    y = np.arange(-k, k + 1)
    p = np.exp(-(y**2) / (2 * sigma**2))
    p /= p.sum()
    t1 = p[y > eps * sigma**2 / d - d / 2].sum()
    t2 = p[y > eps * sigma**2 / d + d / 2].sum()
    return float(t1 - math.exp(eps) * t2)


@pytest.mark.parametrize(
    ("sigma", "eps", "d"), [(1.0, 0.5, 1), (4.0, 1.0, 1), (10.0, 0.3, 3), (25.0, 2.0, 7)]
)
def test_discrete_gaussian_delta_equals_cks_theorem7(sigma: float, eps: float, d: int) -> None:
    assert discrete_gaussian_delta(sigma, eps, d) == pytest.approx(
        cks_theorem7_delta(sigma, eps, d), rel=1e-9, abs=1e-15
    )


@pytest.mark.parametrize(("sigma", "eps"), [(300.0, 0.01), (2000.0, 0.002), (4900.0, 0.001)])
def test_large_sigma_bound_is_an_upper_bound(sigma: float, eps: float) -> None:
    exact = discrete_gaussian_delta(sigma, eps, 1)
    bound = _discrete_gaussian_delta_bound(sigma, eps, 1)
    assert exact <= bound <= exact * 1.05 + 1e-12


def test_calibration_is_tight_and_safe() -> None:
    for eps, delta, d in [(1.0, 1e-5, 1), (0.5, 1e-6, 2), (2.0, 1e-9, 1)]:
        sigma = calibrate_discrete_gaussian(eps, delta, d)
        assert discrete_gaussian_delta(sigma, eps, d) <= delta
        assert discrete_gaussian_delta(float(sigma) * 0.995, eps, d) > delta


def test_discrete_gaussian_mechanism_privacy_and_noise() -> None:
    m = DiscreteGaussianMechanism.from_privacy(epsilon=1.0, delta=1e-5, sensitivity=1)
    eps, delta = m.privacy()
    assert eps == 1 and delta <= Fraction(1, 10**5)
    assert m.rho == pytest.approx(1 / (2 * float(m.sigma) ** 2))
    out = m.randomise(np.full(50_000, 7), rng=1)
    assert out.dtype == np.int64
    assert abs(out.mean() - 7) < 0.1
    assert out.var() == pytest.approx(float(m.sigma) ** 2, rel=0.05)
    with pytest.raises(ValueError):
        DiscreteGaussianMechanism(sigma=1.0, sensitivity=0)
    with pytest.raises(ValueError):
        DiscreteGaussianMechanism(sigma=2.0).privacy()


def test_discrete_laplace_mechanism_output_ratio_is_exp_epsilon() -> None:
    # Neighbouring true answers 0 and 1: the pmfs of the outputs differ by e^eps exactly;
    # check it empirically on the central outputs.
    m = DiscreteLaplaceMechanism(epsilon=0.7, sensitivity=1)
    a = m.randomise(np.zeros(400_000, dtype=np.int64), rng=2)
    b = m.randomise(np.ones(400_000, dtype=np.int64), rng=3)
    for z in (-2, -1, 3, 4):
        ratio = np.mean(a == z) / np.mean(b == z)
        assert ratio == pytest.approx(math.exp(0.7 * (abs(z - 1) - abs(z))), rel=0.05)
    assert m.variance() == pytest.approx(a.var(), rel=0.03)


def test_discrete_laplace_mechanism_scalar_and_validation() -> None:
    m = DiscreteLaplaceMechanism(epsilon="1/2", sensitivity=3)
    assert m.scale == 6
    assert isinstance(m.randomise(5, rng=0), int)
    assert m.randomise(np.array([1.0, 2.0]), rng=0).dtype == np.int64
    with pytest.raises(ValueError):
        m.randomise(1.5)
    with pytest.raises(ValueError):
        DiscreteLaplaceMechanism(epsilon=0)


def test_correctly_rounded_log_matches_high_precision() -> None:
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    u = np.array([0.1, 1e-300, 0.999999999999, 2.0**-1022, 0.5, 0.7310585786300049])
    got = _correctly_rounded_log(u)
    for x, g in zip(u.tolist(), got.tolist(), strict=True):
        exact = Decimal(x).ln()
        # correct rounding: no double is closer to the exact value
        for cand in (np.nextafter(g, -np.inf), np.nextafter(g, np.inf)):
            assert abs(Decimal(g) - exact) <= abs(Decimal(float(cand)) - exact)


def test_snapping_distribution_matches_rounded_laplace() -> None:
    m = SnappingMechanism(epsilon=0.5, sensitivity=1.0, bound=1e4)
    assert m.effective_epsilon() <= 0.5
    lam, grid = m.lam, m.granularity
    x = 3.3
    out = m.randomise(np.full(40_000, x), rng=4)
    assert np.all(np.mod(out, grid) == 0)
    ks = np.arange(-40, 41) * grid
    # Ideal mechanism: round_grid(x + Lap(lam)); bin probabilities from the Laplace cdf.
    cdf = stats.laplace(loc=x, scale=lam).cdf
    pmf = cdf(ks + grid / 2) - cdf(ks - grid / 2)
    obs = np.array([np.sum(out == k) for k in ks])
    keep = pmf * len(out) >= 5
    assert stats.chisquare(obs[keep], pmf[keep] / pmf[keep].sum() * obs[keep].sum()).pvalue > 1e-4


def test_snapping_clamps_and_scales() -> None:
    m = SnappingMechanism(epsilon=1.0, sensitivity=3.0, bound=300.0)
    out = m.randomise(np.array([1e9, -1e9, 0.0]), rng=5)
    assert out[0] <= 300.0 and out[1] >= -300.0
    assert m.effective_epsilon() <= 1.0
    with pytest.raises(ValueError):
        SnappingMechanism(epsilon=1.0, sensitivity=1.0, bound=0.5)  # B below lambda
    with pytest.raises(ValueError):
        m.randomise(float("nan"))


def test_exponential_mechanism_probabilities_and_samples() -> None:
    em = ExponentialMechanism(epsilon=2.0, sensitivity=1.0)
    u = [1.0, 3.0, -np.inf, 2.5]
    p = em.probabilities(u)
    w = np.exp(2.0 * np.array([1.0, 3.0, -np.inf, 2.5]) / 2)
    assert np.allclose(p, w / w.sum())
    draws = em.select(u, size=60_000, rng=6)
    counts = np.bincount(draws, minlength=4)
    assert counts[2] == 0
    keep = p > 0
    assert stats.chisquare(counts[keep], p[keep] * counts.sum()).pvalue > 1e-4
    mono = ExponentialMechanism(epsilon=2.0, sensitivity=1.0, monotonic=True)
    assert mono.probabilities([0.0, 1.0])[1] == pytest.approx(math.exp(2) / (1 + math.exp(2)))
    assert isinstance(em.select(u, rng=7), int)
    with pytest.raises(ValueError):
        em.select([np.nan, 1.0])
    with pytest.raises(ValueError):
        em.select([])


def test_exponential_mechanism_seed_003_cost_form() -> None:
    # Seidl 2016 writes P(y) ∝ exp(-eps u / (2 Δu)) for a cost u: pass -cost as utility.
    cost = np.array([0.0, 1.0, 4.0])
    em = ExponentialMechanism(epsilon=1.0, sensitivity=2.0)
    expected = np.exp(-1.0 * cost / (2 * 2.0))
    assert np.allclose(em.probabilities(-cost), expected / expected.sum())
