"""Exactness and distribution tests of the DP samplers (chi-square / KS with fixed seeds)."""

from __future__ import annotations

from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from ppdm.dp import (
    sample_discrete_gaussian,
    sample_discrete_laplace,
    sample_exponential_mechanism,
    sample_geometric,
    sample_uniform_float,
)
from ppdm.dp._exact import (
    BernoulliTable,
    Expansion,
    exp_neg,
    logistic_neg,
    to_fraction,
)
from ppdm.dp.samplers import _geometric
from ppdm.randomness import make_rng

N = 200_000
P_MIN = 1e-4  # fixed seeds: a deterministic pass/fail, far from the rejection edge


def chi_square_p(samples: np.ndarray, support: np.ndarray, pmf: np.ndarray) -> float:
    """Chi-square goodness of fit; bins with expected count < 5 are pooled into the tails."""
    pmf = pmf / pmf.sum()
    expected = pmf * len(samples)
    keep = expected >= 5
    lo, hi = support[keep].min(), support[keep].max()
    inner = (support >= lo) & (support <= hi)
    obs = np.array([np.sum(samples == v) for v in support[inner]], dtype=float)
    exp_ = expected[inner]
    below, above = np.sum(samples < lo), np.sum(samples > hi)
    obs = np.concatenate([obs, [below, above]])
    exp_ = np.concatenate([exp_, [expected[support < lo].sum(), expected[support > hi].sum()]])
    mask = exp_ > 0
    obs, exp_ = obs[mask], exp_[mask]
    exp_ *= obs.sum() / exp_.sum()
    return float(stats.chisquare(obs, exp_).pvalue)


def decimal_digits(value: Decimal, count: int) -> list[int]:
    top = int(value * (Decimal(2) ** (32 * count)))
    return [(top >> (32 * (count - 1 - i))) & 0xFFFFFFFF for i in range(count)]


class ScriptedRandom:
    """A RandomSource that replays fixed bytes (to drive the tie-breaking path)."""

    secure = False

    def __init__(self, data: bytes) -> None:
        self.data = data

    def bytes(self, n: int) -> bytes:
        out, self.data = self.data[:n], self.data[n:]
        if len(out) < n:
            raise AssertionError("script exhausted")
        return out


def _u32(*words: int) -> bytes:
    return np.array(words, dtype=np.uint32).tobytes()


def test_to_fraction_reads_decimals() -> None:
    assert to_fraction(0.1) + to_fraction(0.2) == to_fraction(0.3)
    assert to_fraction("2/3") == Fraction(2, 3)
    with pytest.raises(ValueError):
        to_fraction(float("nan"))
    with pytest.raises(TypeError):
        to_fraction(True)


@pytest.mark.parametrize("gamma", [Fraction(1, 10), Fraction(7, 3), Fraction(41, 2)])
def test_exp_neg_digits_match_decimal_oracle(gamma: Fraction) -> None:
    getcontext().prec = 80
    oracle = (-(Decimal(gamma.numerator) / Decimal(gamma.denominator))).exp()
    e = exp_neg(gamma)
    assert [e.digit(k) for k in range(4)] == decimal_digits(oracle, 4)


@pytest.mark.parametrize("x", [Fraction(1, 3), Fraction(5), Fraction(3, 1024)])
def test_logistic_digits_match_decimal_oracle(x: Fraction) -> None:
    getcontext().prec = 80
    ex = (Decimal(x.numerator) / Decimal(x.denominator)).exp()
    oracle = 1 / (1 + ex)
    e = logistic_neg(x)
    assert [e.digit(k) for k in range(3)] == decimal_digits(oracle, 3)


def test_exact_rational_expansion_and_one() -> None:
    e = Expansion(exact=Fraction(1, 3))
    assert e.digit(0) == 0x55555555 and e.digit(5) == 0x55555555
    one = exp_neg(Fraction(0))
    assert one.digit(0) == one.digit(9) == 0xFFFFFFFF
    with pytest.raises(ValueError):
        Expansion(exact=Fraction(3, 2))


def test_tie_on_first_byte_is_resolved_by_later_digits() -> None:
    e = Expansion(exact=Fraction(1, 3))  # digits 0x55555555 ...
    table = BernoulliTable.of([e])
    # Leading byte ties (0x55), the next 24 bits are below 0x555555: success.
    rng = ScriptedRandom(b"\x55" + _u32(0x00555554))
    assert table.sample(np.array([0]), rng).tolist() == [True]
    # Leading byte and 24 bits tie, the second digit is above 0x55555555: failure.
    rng = ScriptedRandom(b"\x55" + _u32(0xAB555555, 0x55555556))
    assert table.sample(np.array([0]), rng).tolist() == [False]
    # A different leading byte decides at once.
    assert table.sample(np.array([0, 0]), ScriptedRandom(b"\x54\x56")).tolist() == [True, False]


@given(num=st.integers(1, 999), den=st.integers(1000, 2000))
def test_bernoulli_table_frequency(num: int, den: int) -> None:
    p = Fraction(num, den)
    table = BernoulliTable.of([Expansion(exact=p)])
    hits = table.sample(np.zeros(20_000, dtype=np.int64), make_rng(num))
    assert stats.binomtest(int(hits.sum()), 20_000, float(p)).pvalue > 1e-6


@pytest.mark.parametrize("scale", [0.3, 1.0, 7.5, 150.0])
def test_geometric_matches_pmf(scale: float) -> None:
    x = sample_geometric(scale, N, rng=11)
    r = np.exp(-1 / scale)
    support = np.arange(0, int(60 * scale) + 60)
    pmf = (1 - r) * r**support
    assert x.min() >= 0
    assert chi_square_p(x, support, pmf) > P_MIN


def test_geometric_decomposition_levels() -> None:
    # 2**J * rate >= 23 with J minimal: the top part is almost never used.
    g = _geometric(Fraction(1, 10))
    assert g.levels == 8 and Fraction(1, 10) * 2**7 < 23 <= Fraction(1, 10) * 2**8


@pytest.mark.parametrize("scale", [0.5, 2.0, 10.0, 333.3])
def test_discrete_laplace_matches_pmf(scale: float) -> None:
    x = sample_discrete_laplace(scale, N, rng=12)
    r = np.exp(-1 / scale)
    k = int(50 * scale) + 50
    support = np.arange(-k, k + 1)
    pmf = (1 - r) / (1 + r) * r ** np.abs(support)
    assert x.dtype == np.int64 and x.shape == (N,)
    assert chi_square_p(x, support, pmf) > P_MIN


def test_discrete_laplace_symmetric_and_secure_default() -> None:
    # Default source is os.urandom: not reproducible, so a loose check only.
    x = sample_discrete_laplace(3.0, 100_000)
    assert abs(x.mean()) < 0.2
    assert stats.binomtest(int((x > 0).sum()), int((x != 0).sum()), 0.5).pvalue > 1e-7


@pytest.mark.parametrize("sigma", [0.8, 3.0, 12.5])
def test_discrete_gaussian_matches_pmf(sigma: float) -> None:
    x = sample_discrete_gaussian(sigma, N, rng=13)
    k = int(12 * sigma) + 5
    support = np.arange(-k, k + 1)
    pmf = np.exp(-(support**2) / (2 * sigma**2))
    assert chi_square_p(x, support, pmf) > P_MIN


def test_exponential_sampler_matches_probabilities() -> None:
    gammas = [Fraction(0), Fraction(1, 2), Fraction(3), None, Fraction(1, 7)]
    idx = sample_exponential_mechanism(gammas, 100_000, rng=14)
    w = np.array([np.exp(-float(g)) if g is not None else 0.0 for g in gammas])
    counts = np.bincount(idx, minlength=5)
    assert counts[3] == 0
    keep = w > 0
    p = stats.chisquare(counts[keep], w[keep] / w.sum() * counts.sum()).pvalue
    assert p > P_MIN


def test_uniform_float_covers_all_binades() -> None:
    u = sample_uniform_float(N, rng=15)
    assert np.all((u > 0) & (u < 1))
    assert stats.kstest(u, "uniform").pvalue > P_MIN
    # P(U < 2**-k) = 2**-k: exponents are geometric, so tiny doubles appear.
    e = -np.floor(np.log2(u)).astype(int)
    counts = np.bincount(e, minlength=20)[1:13]
    expected = 0.5 ** np.arange(1, 13)
    assert stats.chisquare(counts, expected / expected.sum() * counts.sum()).pvalue > P_MIN
    # Mantissas are full 52-bit: values below 2**-53 would be impossible with k / 2**53.
    assert np.unique(u).size == N


def test_samplers_reject_bad_parameters() -> None:
    with pytest.raises(ValueError):
        sample_discrete_laplace(0, 10)
    with pytest.raises(ValueError):
        sample_discrete_laplace(2.0**41, 10)
    with pytest.raises(ValueError):
        sample_discrete_gaussian(-1, 10)
    with pytest.raises(ValueError):
        sample_geometric(1.0, -1)
    with pytest.raises(ValueError):
        sample_exponential_mechanism([None, None], 1)
    assert sample_discrete_laplace(1.0, 0).shape == (0,)


def test_seed_reproducible() -> None:
    a = sample_discrete_laplace(4.0, 1000, rng=5)
    b = sample_discrete_laplace(4.0, 1000, rng=5)
    assert np.array_equal(a, b)
