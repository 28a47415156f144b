"""Additive noise and distribution reconstruction (Aggarwal 2015, §20.2)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.naive_bayes import GaussianNB

from ppdm.perturb.randomization import (
    Noise,
    RandomizedNaiveBayes,
    add_noise,
    bayes_reconstruct,
    em_reconstruct,
    log_likelihood,
)

EDGES = np.linspace(-4, 4, 17)
TRUE = np.diff(stats.norm.cdf(EDGES))
TRUE = TRUE / TRUE.sum()


def _error(n, noise, method, seed):
    x = np.random.default_rng(seed).normal(0, 1, n)
    z = add_noise(x, noise, rng=seed + 1)
    z_bins = 1000 if n > 10_000 else None  # pre-binning keeps the large case fast
    return np.abs(method(z, noise, bins=EDGES, z_bins=z_bins).probabilities - TRUE).sum()


@pytest.mark.parametrize("method", [bayes_reconstruct, em_reconstruct])
@pytest.mark.parametrize("noise", [Noise("uniform", 2.0), Noise("gaussian", 1.0)])
def test_reconstruction_converges_to_the_truth_as_n_grows(method, noise):
    small = np.mean([_error(500, noise, method, s) for s in range(3)])
    large = _error(100_000, noise, method, 7)
    assert large < 0.08
    assert large < small / 2
    # the perturbed values' own histogram is much further from the truth
    z = add_noise(np.random.default_rng(7).normal(0, 1, 100_000), noise, rng=8)
    naive = np.histogram(z, EDGES)[0] / 100_000
    assert large < np.abs(naive / naive.sum() - TRUE).sum() / 2


@pytest.mark.parametrize("stopping", ["mean-change", "chi2"])
def test_convergence_tests_stop(stopping):
    x = np.random.default_rng(0).exponential(1.0, 20_000)
    noise = Noise("gaussian", 0.5)
    r = bayes_reconstruct(
        add_noise(x, noise, rng=1), noise, bins=10, bounds=(0, 5), stopping=stopping
    )
    assert r.converged and r.iterations < 1000
    assert r.probabilities.sum() == pytest.approx(1.0)
    assert r.probabilities[0] > r.probabilities[5]


def test_em_increases_the_likelihood():
    x = np.random.default_rng(3).beta(2, 5, 5000) * 10
    noise = Noise("uniform", 2.0)
    z = add_noise(x, noise, rng=4)
    few = em_reconstruct(z, noise, bins=10, bounds=(0, 10), max_iter=3)
    many = em_reconstruct(z, noise, bins=10, bounds=(0, 10), max_iter=300)
    assert log_likelihood(z, noise, many) >= log_likelihood(z, noise, few)


def test_noise_distributions():
    u = Noise("uniform", 3.0).sample(100_000, rng=1)
    assert u.min() >= -3 and u.max() <= 3 and u.std() == pytest.approx(3 / np.sqrt(3), rel=0.02)
    assert Noise("gaussian", 2.0).cdf(np.array([0.0]))[0] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        Noise("laplace", 1.0)  # type: ignore[arg-type]


def test_naive_bayes_on_reconstructed_distributions_matches_clear_data():
    g = np.random.default_rng(11)
    n = 20_000
    y = g.random(n) < 0.4
    x = np.column_stack(
        [g.normal(np.where(y, 2.0, 0.0), 1.0), g.normal(np.where(y, -1.0, 1.0), 1.5)]
    )
    noises = [Noise("gaussian", 1.0), Noise("uniform", 2.0)]
    z = np.column_stack([add_noise(x[:, j], noises[j], rng=20 + j) for j in range(2)])
    test_y = g.random(5000) < 0.4
    test_x = np.column_stack(
        [g.normal(np.where(test_y, 2.0, 0.0), 1.0), g.normal(np.where(test_y, -1.0, 1.0), 1.5)]
    )
    clear = (GaussianNB().fit(x, y).predict(test_x) == test_y).mean()
    private = (
        RandomizedNaiveBayes(noises, bins=16, bounds=[(-4, 6), (-6, 6)]).fit(z, y).predict(test_x)
        == test_y
    ).mean()
    assert private > clear - 0.02
    # a model that ignores the noise (histograms of z) is worse than the reconstruction
    ignore = RandomizedNaiveBayes([Noise("gaussian", 1e-3)] * 2, bins=16, bounds=[(-4, 6), (-6, 6)])
    assert private > (ignore.fit(z, y).predict(test_x) == test_y).mean()
