"""Randomized response / PRAM (Guo, Ying & Wu 2011): vec trick, estimate, covariance, risk, optimum."""

from __future__ import annotations

import itertools
from functools import reduce

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.errors import ConfigError
from ppdm.perturb._table import contingency, encode
from ppdm.perturb.randomized_response import (
    covariance,
    covariance_diagonal,
    disclosure_risk,
    distortion_inverse,
    distortion_matrix,
    em_estimate_table,
    estimate_table,
    inverse_frobenius_sq,
    kron_apply,
    optimal_parameters,
    qi_reconstruction_probability,
    randomize_codes,
    randomized_response,
    sensitive_reconstruction_probability,
    trace_covariance,
    warner_estimate,
    warner_randomize,
    warner_variance,
)

# Gender x Disease (Guo, Ying & Wu 2011, table 1): rows Male/Female, columns Cancer/Malaria/Diabetes.
# Guo, Ying & Wu's (2011) text keeps only pi_10 = 0.12 (Female, Cancer) of table 1b's 100 tuples; the
# other cells are ours, with the same margins-free structure.
TABLE_1B = np.array([[8.0, 30.0, 22.0], [12.0, 18.0, 10.0]])


def _kron(mats):
    return reduce(np.kron, mats)


dims_strategy = st.lists(st.integers(1, 4), min_size=1, max_size=3)


@given(dims=dims_strategy, seed=st.integers(0, 2**31))
def test_vec_trick_equals_explicit_kronecker(dims, seed):
    g = np.random.default_rng(seed)
    mats = [g.normal(size=(d, d)) for d in dims]
    x = g.normal(size=dims)
    assert np.allclose(kron_apply(mats, x).ravel(), _kron(mats) @ x.ravel())


@given(dims=st.lists(st.integers(2, 4), min_size=1, max_size=3), seed=st.integers(0, 2**31))
def test_estimate_and_covariance_equal_explicit(dims, seed):
    g = np.random.default_rng(seed)
    ps = [float(g.uniform(1 / d + 0.1, 1.0)) for d in dims]
    mats = [distortion_matrix(d, p) for d, p in zip(dims, ps, strict=True)]
    big = _kron(mats)
    inv = np.linalg.inv(big)
    pi = g.dirichlet(np.ones(int(np.prod(dims)))).reshape(dims)
    lam = (big @ pi.ravel()).reshape(dims)
    assert np.allclose(estimate_table(lam, ps).ravel(), inv @ lam.ravel())
    n = 1000
    explicit = (
        inv @ (np.diag(big @ pi.ravel()) - np.outer(big @ pi.ravel(), big @ pi.ravel())) @ inv.T / n
    )
    assert np.allclose(covariance(pi, ps, n), explicit)
    assert np.allclose(covariance_diagonal(pi, ps, n).ravel(), np.diag(explicit))
    # lemmas 4 and 5: trace(Sigma) = (prod ||P_i^-1||_F^2 / d_i - ||pi||^2) / N
    closed = (
        np.prod([inverse_frobenius_sq(d, p) / d for d, p in zip(dims, ps, strict=True)])
        - (pi**2).sum()
    ) / n
    assert trace_covariance(pi, ps, n) == pytest.approx(closed, rel=1e-9)
    assert trace_covariance(pi, ps, n) == pytest.approx(np.trace(explicit), rel=1e-9)


@pytest.mark.parametrize(("d", "p"), [(2, 0.9), (3, 0.6), (5, 0.25), (7, 1.0)])
def test_distortion_matrix_inverse_and_norm(d, p):
    m = distortion_matrix(d, p)
    assert np.allclose(m.sum(axis=0), 1.0)
    assert np.allclose(distortion_inverse(d, p), np.linalg.inv(m))
    assert inverse_frobenius_sq(d, p) == pytest.approx(np.linalg.norm(np.linalg.inv(m)) ** 2)
    with pytest.raises(ValueError):
        distortion_inverse(d, 1 / d)


def test_randomize_codes_keeps_with_probability_p_and_moves_uniformly():
    n = 60_000
    codes = np.zeros((n, 1), dtype=np.int64)
    out = randomize_codes(codes, (4,), [0.4], rng=3)
    freq = np.bincount(out[:, 0], minlength=4) / n
    assert freq == pytest.approx([0.4, 0.2, 0.2, 0.2], abs=0.01)


def test_estimate_is_unbiased_over_repeated_randomizations():
    g = np.random.default_rng(5)
    dims = (3, 2, 4)
    pi = g.dirichlet(np.ones(24) * 2).reshape(dims)
    n = 4000
    codes = np.array(np.unravel_index(g.choice(24, n, p=pi.ravel()), dims)).T
    ps = [0.7, 0.8, 0.5]
    truth = contingency(codes, dims) / n
    reps = 300
    mean = np.zeros(dims)
    for r in range(reps):
        lam = contingency(randomize_codes(codes, dims, ps, rng=100 + r), dims) / n
        mean += estimate_table(lam, ps) / reps
    # the estimate is unbiased for the table that was randomized
    se = np.sqrt(covariance_diagonal(truth, ps, n) / reps)
    assert np.all(np.abs(mean - truth) < 5 * se + 1e-12)
    # a biased estimator (the plain randomized table) fails the same test
    lam_mean = kron_apply([distortion_matrix(d, p) for d, p in zip(dims, ps, strict=True)], truth)
    assert np.any(np.abs(lam_mean - truth) > 5 * se)


def test_em_estimate_is_a_distribution_close_to_inverse_when_inverse_is_valid():
    pi = np.array([[0.2, 0.1, 0.05], [0.1, 0.2, 0.05], [0.05, 0.05, 0.2]])
    ps = [0.7, 0.6]
    lam = kron_apply([distortion_matrix(3, 0.7), distortion_matrix(3, 0.6)], pi) * 1000
    em = em_estimate_table(lam, ps)
    assert em.min() >= 0
    assert em / 1000 == pytest.approx(pi, abs=1e-4)


def test_warner_is_the_two_category_case():
    g = np.random.default_rng(1)
    member = g.random(50_000) < 0.3
    yes = warner_randomize(member, 0.8, rng=2)
    est = warner_estimate(yes, 0.8)
    general = estimate_table(np.bincount(yes.astype(int), minlength=2).astype(float), [0.8])
    assert est == pytest.approx(general[1] / general.sum())
    var = warner_variance(0.3, 0.8, 50_000)
    assert abs(est - 0.3) < 5 * np.sqrt(var)
    assert var == pytest.approx(covariance_diagonal(np.array([0.7, 0.3]), [0.8], 50_000)[1])


def test_qi_reconstruction_probability_equals_brute_force():
    g = np.random.default_rng(2)
    dims = (2, 3)
    pi = g.dirichlet(np.ones(6)).reshape(dims)
    ps = [0.7, 0.5]
    big = _kron([distortion_matrix(d, p) for d, p in zip(dims, ps, strict=True)])
    lam = big @ pi.ravel()
    brute = np.array(
        [sum(big[b, a] ** 2 * pi.ravel()[a] / lam[b] for b in range(6)) for a in range(6)]
    )
    assert np.allclose(qi_reconstruction_probability(pi, ps).ravel(), brute)


def test_sensitive_reconstruction_probability_by_monte_carlo():
    # lemma 1: attacker draws the original from the posterior given the observed value
    pi = np.array([[0.5, 0.3, 0.2]])
    ps_val = 0.6
    m = distortion_matrix(3, ps_val)
    lam = m @ pi[0]
    post = (m * pi[0][None, :]) / lam[:, None]  # post[v, u] = Pr(S = u | S~ = v)
    g = np.random.default_rng(0)
    n = 200_000
    s = np.zeros(n, dtype=int)  # target value u = 0
    obs = randomize_codes(s[:, None], (3,), [ps_val], rng=1)[:, 0]
    guess = (g.random(n)[:, None] > np.cumsum(post[obs], axis=1)).sum(axis=1)
    success = np.mean(guess == 0)
    expected = sensitive_reconstruction_probability(pi, ps_val)[0, 0] / pi[0, 0]  # drop freq factor
    assert success == pytest.approx(expected, abs=0.005)


def test_property_1_minimizers_on_gender_disease():
    pi = TABLE_1B / TABLE_1B.sum()
    female, cancer = 1, 0
    grid = np.linspace(0.0, 1.0, 201)

    def risk(p_qi, p_s):
        return disclosure_risk(pi, p_qi=p_qi, p_s=p_s)[female, cancer]

    unrandomized = risk(None, None)
    assert unrandomized == pytest.approx(0.12 / 0.40)
    rr_s = np.array([risk(None, p) for p in grid])
    assert grid[np.argmin(rr_s)] == pytest.approx(1 / 3, abs=0.005)
    assert risk(None, 1 / 3) == pytest.approx((0.12 / 0.40) ** 2)
    assert rr_s.min() >= risk(None, 1 / 3) - 1e-12
    rr_qi = np.array([risk([p], None) for p in grid])
    assert grid[np.argmin(rr_qi)] == pytest.approx(1 / 2, abs=0.005)
    assert rr_qi.min() == pytest.approx(0.12)  # min Pr(S_r | QI_r) = pi_10 = 0.12
    both = np.array([[risk([pg], ps) for ps in grid[::5]] for pg in grid[::5]])
    i, j = np.unravel_index(np.argmin(both), both.shape)
    assert grid[::5][i] == pytest.approx(0.5, abs=0.01)
    assert grid[::5][j] == pytest.approx(1 / 3, abs=0.03)
    assert risk([0.5], 1 / 3) == pytest.approx(0.12**2 / 0.40)
    assert both.min() >= risk([0.5], 1 / 3) - 1e-12
    assert both.max() <= unrandomized + 1e-12


@pytest.fixture(scope="module")
def esgro(adult_dir):
    df = pd.read_csv(adult_dir / "adult.csv", sep=";")
    enc = encode(df, ["education", "salary-class", "sex", "race", "occupation"])
    return df, enc, contingency(enc.codes, enc.dims)


@pytest.mark.parametrize("scheme", ["rr-both", "rr-qi"])
def test_optimal_parameters_meet_tau_and_beat_random_feasible_points(esgro, scheme):
    _, enc, pi = esgro
    tau = 1 / 3
    res = optimal_parameters(pi, tau=tau, scheme=scheme)
    assert res.success and res.max_risk <= tau * (1 + 1e-6)
    dims = enc.dims
    g = np.random.default_rng(0)
    best = res.trace
    tried = 0
    for _ in range(300):
        ps = [float(g.uniform(1 / d + 0.02, 1.0)) for d in dims]
        if scheme == "rr-qi":
            ps[-1] = None
        risk = disclosure_risk(pi, p_qi=ps[:-1], p_s=ps[-1])
        if np.nanmax(risk) <= tau:
            tried += 1
            assert trace_covariance(pi / pi.sum(), ps, int(pi.sum())) >= best * (1 - 1e-6)
    assert tried > 5


def test_rr_s_infeasible_when_a_group_has_one_value(esgro):
    _, _, pi = esgro
    with pytest.raises(ConfigError, match="least achievable"):
        optimal_parameters(pi, tau=0.5, scheme="rr-s")


def test_randomized_response_release_roundtrip(esgro):
    df, _enc, pi = esgro
    rel = randomized_response(
        df, qi=["education", "salary-class", "sex", "race"], sensitive="occupation", l=3, rng=1
    )
    assert rel.parameters is not None and rel.parameters.max_risk <= 1 / 3 + 1e-9
    est = rel.estimate()
    assert est.sum() == pytest.approx(len(df))
    # marginal of S is recovered well
    assert np.abs(est.sum(axis=(0, 1, 2, 3)) - pi.sum(axis=(0, 1, 2, 3))).max() < 0.05 * len(df)
    with pytest.raises(ConfigError):
        randomized_response(df, qi=["education"], sensitive="occupation")


def test_explicit_ps_and_itertools_cover_all_cells():
    df = pd.DataFrame({"a": list("xyxy"), "s": list("pqqp")})
    rel = randomized_response(df, qi=["a"], sensitive="s", ps=[1.0, None], rng=0)
    assert rel.data.equals(df)
    assert set(itertools.product(*rel.encoded.categories)) == {
        ("x", "p"),
        ("x", "q"),
        ("y", "p"),
        ("y", "q"),
    }
