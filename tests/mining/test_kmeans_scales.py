"""k-means is exact or refused at every scale (issue 13, item 7): values at 1e6, 1e9,
1e12 and columns of very different magnitudes give scikit-learn's Lloyd result from the
same initial centres, horizontal and vertical; an explicit precision that would overflow
is refused in one line naming the column and the limit."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from ppdm.mining.kmeans import horizontal_kmeans, vertical_kmeans
from ppdm.parties.local import simulate

PARTIES = ["alice", "bob", "carol"]


def _data(scale: np.ndarray | float) -> np.ndarray:
    x, _ = make_blobs(n_samples=450, n_features=3, centers=4, cluster_std=1.0, random_state=3)
    return x * scale


CASES = {
    "1e6": 1e6,
    "1e9": 1e9,
    "1e12": 1e12,
    "mixed": np.array([1e-3, 1.0, 1e12]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_horizontal_matches_sklearn_at_every_scale(case):
    x = _data(CASES[case])
    parts = {p: x[i::3] for i, p in enumerate(PARTIES)}
    pooled = np.vstack([parts[p] for p in PARTIES])
    ref = KMeans(4, init=pooled[:4], n_init=1, algorithm="lloyd", tol=0).fit(pooled)
    sim = simulate(lambda n, xi: horizontal_kmeans(n, xi, k=4, init="first-k"), parts, timeout=60)
    got = sim.results["alice"]
    assert got.iterations == ref.n_iter_
    scale = np.abs(ref.cluster_centers_).max(axis=0)
    assert np.all(np.abs(got.centers - ref.cluster_centers_) <= 1e-9 * scale + 1e-12)
    assert got.inertia == pytest.approx(ref.inertia_, rel=1e-9)


@pytest.mark.parametrize("case", list(CASES))
def test_vertical_matches_sklearn_at_every_scale(case):
    x = _data(CASES[case])
    ref = KMeans(4, init=x[:4], n_init=1, algorithm="lloyd", tol=0).fit(x)
    parts = {p: x[:, i : i + 1] for i, p in enumerate(PARTIES)}
    sim = simulate(lambda n, xi: vertical_kmeans(n, xi, k=4, init="first-k"), parts, timeout=60)
    assert np.array_equal(sim.results["alice"].labels, ref.labels_)
    centers = np.hstack([sim.results[p].centers for p in PARTIES])
    scale = np.abs(ref.cluster_centers_).max(axis=0)
    assert np.all(np.abs(centers - ref.cluster_centers_) <= 1e-9 * scale + 1e-12)


def test_an_explicit_precision_that_overflows_is_refused():
    x = _data(1e9)
    parts = {p: x[i::3] for i, p in enumerate(PARTIES)}
    with pytest.raises(ValueError, match=r"column 'a[0-9]'.*at most") as info:
        simulate(
            lambda n, xi: horizontal_kmeans(
                n, xi, k=4, fraction_bits=40, column_names=["a0", "a1", "a2"]
            ),
            parts,
            timeout=60,
        )
    assert "\n" not in str(info.value).split("\nparty")[0]
    vparts = {p: x[:, i : i + 1] for i, p in enumerate(PARTIES)}
    with pytest.raises(ValueError, match="at most"):
        simulate(lambda n, xi: vertical_kmeans(n, xi, k=4, fraction_bits=40), vparts, timeout=60)
