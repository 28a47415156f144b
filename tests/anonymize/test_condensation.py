"""Condensation, static and streaming (Aggarwal 2015, §20.3.1.4, eqs. 20.6-20.9)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ppdm.anonymize.condensation import (
    CondensationStream,
    GroupStatistics,
    condensation,
    split_group,
    synthesize,
)
from ppdm.errors import ConfigError
from ppdm.randomness import make_rng

_points = arrays(
    np.float64,
    st.tuples(st.sampled_from([2, 4, 6, 8, 12]), st.integers(1, 4)),
    elements=st.floats(-50, 50, allow_nan=False, width=32),
)


def test_covariance_is_equation_20_7() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 3))
    labels = np.repeat([0, 1, 2], 10)
    stats = GroupStatistics.from_records(x, labels)
    for g in range(3):
        np.testing.assert_allclose(stats.means[g], x[labels == g].mean(axis=0))
        np.testing.assert_allclose(
            stats.covariances[g], np.cov(x[labels == g].T, ddof=0), atol=1e-12
        )


@given(_points)
def test_split_keeps_first_and_second_order_sums(x: np.ndarray) -> None:
    n = len(x)
    (n1, s1, p1), (n2, s2, p2), e = split_group(n, x.sum(axis=0), x.T @ x)
    assert n1 == n2 == n // 2
    np.testing.assert_allclose(s1 + s2, x.sum(axis=0), atol=1e-6 * (1 + np.abs(x).sum()))
    np.testing.assert_allclose(p1 + p2, x.T @ x, atol=1e-6 * (1 + (x**2).sum()))
    assert np.linalg.norm(e) == pytest.approx(1.0)


def test_split_along_the_longest_eigenvector() -> None:
    # Uniform data on a segment along (3, 4)/5 plus small noise: the children sit at the
    # means of the true halves, R/4 from the centre (eq. 20.8), and the covariance along
    # e shrinks by 4 while the other eigenvalues stay (eq. 20.9).
    rng = np.random.default_rng(2)
    direction = np.array([3.0, 4.0]) / 5.0
    t = rng.uniform(-6.0, 6.0, 20000)
    x = np.outer(t, direction) + rng.normal(scale=0.05, size=(20000, 2)) + [10.0, -4.0]
    (n1, s1, p1), (n2, s2, p2), e = split_group(len(x), x.sum(axis=0), x.T @ x)
    assert abs(e @ direction) == pytest.approx(1.0, abs=1e-4)
    proj = (x - x.mean(axis=0)) @ direction
    low, high = x[proj < np.median(proj)], x[proj >= np.median(proj)]
    means = sorted([s1 / n1, s2 / n2], key=lambda m: m @ direction)
    np.testing.assert_allclose(means[0], low.mean(axis=0), atol=0.05)
    np.testing.assert_allclose(means[1], high.mean(axis=0), atol=0.05)
    cov = np.cov(x.T, ddof=0)
    lam = np.linalg.eigvalsh(cov)
    child = p1 / n1 - np.outer(s1, s1) / n1**2
    lam_c = np.linalg.eigvalsh(child)
    np.testing.assert_allclose(sorted(lam_c), sorted([lam[0], lam[1] / 4]), rtol=1e-6)
    np.testing.assert_allclose(child, p2 / n2 - np.outer(s2, s2) / n2**2, atol=1e-9)
    with pytest.raises(ValueError):
        split_group(3, x[:3].sum(axis=0), x[:3].T @ x[:3])


def test_synthesize_matches_count_mean_and_covariance() -> None:
    rng = np.random.default_rng(3)
    cov = np.array([[2.0, 0.6], [0.6, 1.0]])
    x = rng.multivariate_normal([1.0, 2.0], cov, size=60000)
    labels = np.repeat([0, 1], 30000)
    x[labels == 1] += 100.0
    stats = GroupStatistics.from_records(x, labels)
    synth, synth_labels = synthesize(stats, make_rng(5))
    assert np.bincount(synth_labels).tolist() == [30000, 30000]
    for g in range(2):
        part = synth[synth_labels == g]
        np.testing.assert_allclose(part.mean(axis=0), stats.means[g], atol=1e-9)
        np.testing.assert_allclose(np.cov(part.T, ddof=0), stats.covariances[g], atol=0.05)
        # uniform along each eigenvector: bounded by sqrt(3 lambda) around the mean
        lam, vec = np.linalg.eigh(stats.covariances[g])
        coords = (part - stats.means[g]) @ vec
        assert np.all(np.abs(coords) <= np.sqrt(3 * lam) * 1.01 + 1e-9)


@given(
    arrays(
        np.float64,
        st.tuples(st.integers(5, 120), st.integers(1, 3)),
        elements=st.floats(-100, 100, allow_nan=False, width=32),
    ),
    st.integers(1, 5),
)
def test_stream_group_sizes_stay_between_k_and_2k_minus_1(x: np.ndarray, k: int) -> None:
    if len(x) < k:
        return
    m0 = k
    stream = CondensationStream(k, x[:m0], track=True)
    for row in x[m0:]:
        stream.add(row)
        sizes = stream.sizes
        assert sizes.min() >= k and sizes.max() <= 2 * k - 1
    assert int(stream.sizes.sum()) == len(x)
    assert [len(m) for m in stream.members] == stream.sizes.tolist()
    assert sorted(i for m in stream.members for i in m) == list(range(len(x)))
    # splits conserve the sums, so the totals over all groups stay exact
    stats = stream.statistics()
    np.testing.assert_allclose(
        stats.sums.sum(axis=0), x.sum(axis=0), atol=1e-6 * (1 + np.abs(x).sum())
    )
    np.testing.assert_allclose(stats.products.sum(axis=0), x.T @ x, atol=1e-6 * (1 + (x**2).sum()))


def test_stream_statistics_exact_before_splits() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(40, 2))
    stream = CondensationStream(10, x[:30], track=True)
    for row in x[30:33]:
        stream.add(row)
    assert stream.splits == 0
    stats = stream.statistics()
    labels = np.empty(33, dtype=int)
    for g, rows in enumerate(stream.members):
        labels[rows] = g
    exact = GroupStatistics.from_records(x[:33], labels)
    np.testing.assert_allclose(stats.sums, exact.sums, atol=1e-12)
    np.testing.assert_allclose(stats.products, exact.products, atol=1e-12)


@pytest.mark.parametrize("streaming", [False, True])
def test_condensation_release(streaming: bool) -> None:
    rng = np.random.default_rng(6)
    cov = [[1.0, 0.8, 0.2], [0.8, 2.0, 0.3], [0.2, 0.3, 1.0]]
    table = pd.DataFrame(
        rng.multivariate_normal([0, 5, 10], cov, size=4000), columns=["a", "b", "c"]
    )
    table["label"] = rng.integers(0, 2, len(table))
    r = condensation(table, qi=["a", "b", "c"], k=20, rng=1, streaming=streaming)
    assert len(r.data) == len(table) and r.suppressed == 0
    assert np.bincount(r.class_ids).min() >= 20
    if not streaming:
        assert np.bincount(r.class_ids).max() <= 39
    assert r.metrics["il2"] == pytest.approx(0.0, abs=1e-9)  # means are kept
    assert r.metrics["il4"] < 0.05 and r.metrics["il5"] < 0.05  # covariances kept
    assert sorted(r.data["label"]) == sorted(table["label"])
    assert not np.isin(r.data["a"].to_numpy(), table["a"].to_numpy()).any()  # synthetic
    assert r.info["streaming"] is streaming
    if streaming:
        assert r.info["splits"] > 0 and r.info["initial"] == 200


def test_condensation_adult_age(adult_dir: Path) -> None:
    table = pd.read_csv(adult_dir / "adult.csv", sep=";").head(3000)
    r = condensation(table, qi=["age"], k=10, rng=2)
    assert r.metrics["il2"] == pytest.approx(0.0, abs=1e-9)
    assert r.data["age"].min() >= table["age"].min() - 5
    assert np.bincount(r.class_ids).min() >= 10


def test_condensation_errors() -> None:
    table = pd.DataFrame({"a": [1.0, 2.0, 3.0], "s": ["x", "y", "z"]})
    with pytest.raises(ConfigError):
        condensation(table, qi=["s"], k=2)
    with pytest.raises(ConfigError):
        condensation(table, qi=["a"], k=4)
    with pytest.raises(ConfigError):
        condensation(table, qi=["a"], k=2, streaming=True, initial=1)
