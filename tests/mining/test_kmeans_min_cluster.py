"""k-means with a minimum aggregation size (``min_cluster_size``, a data-owner policy
rule): no centre over fewer records is ever computed; otherwise the answer is unchanged
and equals scikit-learn's Lloyd from the same initial centres."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans

from ppdm.errors import AggregationTooSmall
from ppdm.mining.kmeans import horizontal_kmeans, vertical_kmeans
from ppdm.parties.local import LocalNetwork, simulate

PARTIES = ["alice", "bob", "carol"]


def _data(seed=3):
    rng = np.random.default_rng(seed)
    big = [rng.normal(c, 0.3, size=(40, 2)) for c in ((0, 0), (6, 6))]
    tiny = rng.normal((20, -20), 0.3, size=(3, 2))  # a cluster of 3 records
    return np.vstack([big[0], big[1], tiny])


def _split_rows(x):
    return {p: x[i :: len(PARTIES)] for i, p in enumerate(PARTIES)}


def test_horizontal_refuses_small_clusters_before_any_sum_is_revealed():
    x = _data()
    init = np.array([[0.0, 0.0], [6.0, 6.0], [20.0, -20.0]])
    net = LocalNetwork(PARTIES, job_id="h", timeout=30)
    with pytest.raises(AggregationTooSmall, match="iteration 1"):
        simulate(
            lambda n, xi: horizontal_kmeans(n, xi, k=3, init=init, min_cluster_size=5),
            _split_rows(x),
            network=net,
            timeout=30,
        )
    # The sizes were summed, the coordinate sums never were.
    steps = {m["step"] for p in PARTIES for m in net.endpoint(p).metrics.as_list()}
    assert any(s.startswith("kmeans/iter1/sizes") for s in steps)
    assert not any(s.startswith("kmeans/iter1/secure-sum") for s in steps), steps


def test_horizontal_with_large_enough_clusters_matches_sklearn():
    x = _data()[:-3]
    init = np.array([[0.0, 0.0], [6.0, 6.0]])
    sim = simulate(
        lambda n, xi: horizontal_kmeans(n, xi, k=2, init=init, min_cluster_size=10),
        _split_rows(x),
        timeout=30,
    )
    ref = KMeans(2, init=init, n_init=1, algorithm="lloyd", tol=0).fit(x)
    for r in sim.results.values():
        assert np.allclose(r.centers, ref.cluster_centers_, atol=1e-6)


def test_vertical_refuses_small_clusters():
    x = _data()
    cols = {"alice": x[:, :1], "bob": x[:, 1:]}
    init = {"alice": np.array([[0.0], [6.0], [20.0]]), "bob": np.array([[0.0], [6.0], [-20.0]])}
    with pytest.raises(AggregationTooSmall):
        simulate(
            lambda n, xi: vertical_kmeans(n, xi, k=3, init=init[n.me], min_cluster_size=4),
            cols,
            timeout=60,
        )
    ok = simulate(
        lambda n, xi: vertical_kmeans(n, xi, k=3, init=init[n.me], min_cluster_size=3),
        cols,
        timeout=60,
    )
    sizes = sorted(np.bincount(ok.results["alice"].labels, minlength=3))
    assert sizes == [3, 40, 40]
