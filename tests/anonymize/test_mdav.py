"""MDAV-generic microaggregation and IL1-IL5 (Xiong n.d.), against a naive transcription
of the algorithm, pycanon, and hand computations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from pycanon import anonymity

from ppdm.anonymize.hierarchy import Hierarchy, load_hierarchies
from ppdm.anonymize.microaggregation import (
    MixedSpace,
    il_measures,
    mdav,
    mdav_generic,
    sse_sst,
)
from ppdm.anonymize.models import KAnonymity, make_models
from ppdm.errors import ConfigError

ADULT_QI = [
    "age",
    "education",
    "marital-status",
    "native-country",
    "race",
    "salary-class",
    "sex",
    "workclass",
]


@pytest.fixture(scope="module")
def adult(adult_dir: Path) -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    table = pd.read_csv(adult_dir / "adult.csv", sep=";")
    return table, load_hierarchies(adult_dir, [*ADULT_QI, "occupation"])


def _naive_mdav(x: np.ndarray, k: int) -> np.ndarray:
    """MDAV-generic for continuous data, written out record by record."""
    remaining = list(range(len(x)))
    labels = np.full(len(x), -1)
    g = 0

    def d(a, b):
        return float(np.sqrt(((a - b) ** 2).sum()))

    def nearest(seed: int, pool: list[int]) -> list[int]:
        others = sorted((d(x[i], x[seed]), i) for i in pool if i != seed)
        return [seed] + [i for _, i in others[: k - 1]]

    while len(remaining) >= 3 * k:
        avg = x[remaining].mean(axis=0)
        xr = max(remaining, key=lambda i: d(x[i], avg))  # max() keeps the first of ties
        cluster = nearest(xr, remaining)
        labels[cluster] = g
        remaining = [i for i in remaining if i not in cluster]
        xs = max(remaining, key=lambda i: d(x[i], x[xr]))
        cluster = nearest(xs, remaining)
        labels[cluster] = g + 1
        remaining = [i for i in remaining if i not in cluster]
        g += 2
    if len(remaining) >= 2 * k:
        avg = x[remaining].mean(axis=0)
        xr = max(remaining, key=lambda i: d(x[i], avg))
        cluster = nearest(xr, remaining)
        labels[cluster] = g
        g += 1
        remaining = [i for i in remaining if i not in cluster]
    if remaining:
        labels[remaining] = g
    return labels


def _partition(labels: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(np.flatnonzero(labels == g).tolist()) for g in np.unique(labels)}


@given(
    arrays(
        np.float64,
        st.tuples(st.integers(2, 40), st.integers(1, 3)),
        elements=st.floats(-100, 100, allow_nan=False, width=32),
        unique=True,
    ),
    st.integers(1, 6),
)
def test_mdav_generic_matches_naive(x: np.ndarray, k: int) -> None:
    if len(x) < k:
        return
    space = MixedSpace(x, np.zeros(x.shape[1], dtype=bool), np.zeros((len(x), 0), int), [])
    fast = mdav_generic(space, k)
    # Both break ties (equal distances) by the lowest row.
    assert _partition(fast) == _partition(_naive_mdav(x, k))
    sizes = np.bincount(fast)
    if len(x) >= 2 * k:
        assert sizes.min() >= k and sizes.max() <= 2 * k - 1
        assert (sizes != k).sum() <= 1  # only the last cluster may be larger
    else:
        assert len(sizes) == 1


def test_mdav_generic_categorical_distances() -> None:
    # ordinal: ranks / |D|; nominal: 0/1. Two obvious groups.
    ranks = np.array([0, 0, 1, 4, 4, 3]) / 5.0
    nominal = np.array([[0], [0], [0], [1], [1], [1]])
    space = MixedSpace(ranks[:, None], np.array([True]), nominal, [2])
    labels = mdav_generic(space, 3)
    assert _partition(labels) == {frozenset({0, 1, 2}), frozenset({3, 4, 5})}
    avg_f, avg_c = space.average(np.arange(3))
    assert avg_f[0] == 0.0 and avg_c.tolist() == [0]  # median rank, mode


def test_il_measures_hand_computed() -> None:
    x = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 40.0], [6.0, 50.0]])
    m = np.array([[1.5, 15.0], [1.5, 15.0], [4.5, 45.0], [4.5, 45.0]])
    il = il_measures(x, m)
    sd = x.std(axis=0, ddof=1)
    assert il["il1"] == pytest.approx((np.abs(x - m) / sd).mean())
    assert il["il2"] == pytest.approx(0.0)
    vx, vm = np.cov(x.T), np.cov(m.T)
    assert il["il3"] == pytest.approx(np.mean(np.abs(np.diag(vx - vm)) / np.diag(vx)))
    assert il["il4"] == pytest.approx(abs(vx[0, 1] - vm[0, 1]) / abs(vx[0, 1]))
    assert il["il5"] == pytest.approx(abs(np.corrcoef(x.T)[0, 1] - np.corrcoef(m.T)[0, 1]))
    assert il["il"] == pytest.approx(100 * np.mean([il[f"il{i}"] for i in range(1, 6)]))
    assert all(v == pytest.approx(0.0) for v in il_measures(x, x).values())
    with pytest.raises(ValueError):
        il_measures(x, m[:3])


def test_sse_sst_bounds() -> None:
    z = np.array([[0.0], [1.0], [10.0], [11.0]])
    assert sse_sst(z, np.array([0, 0, 1, 1])) == pytest.approx(1.0 / 101.0)
    assert sse_sst(z, np.zeros(4, dtype=int)) == pytest.approx(1.0)


def test_mdav_continuous_release_preserves_means() -> None:
    rng = np.random.default_rng(4)
    table = pd.DataFrame(
        {"a": rng.normal(50, 10, 300), "b": rng.normal(0, 1, 300), "s": rng.integers(0, 3, 300)}
    )
    r = mdav(table, qi=["a", "b"], model=KAnonymity(5), rng=1)
    assert anonymity.k_anonymity(r.data, ["a", "b"]) >= 5
    assert r.metrics["il2"] == pytest.approx(0.0, abs=1e-12)
    assert r.data["a"].mean() == pytest.approx(table["a"].mean())
    assert 0 < r.metrics["il1"] < 1 and 0 < r.metrics["sse_sst"] < 1
    assert r.info["n_groups"] == 60 and r.info["merges"] == 0
    assert {"il3", "il4", "il5", "il"} <= set(r.metrics)


def test_mdav_ordinal_uses_the_category_order() -> None:
    levels = ["low", "mid", "high", "top"]
    col = pd.Categorical(
        ["low", "low", "mid", "top", "top", "high"], categories=levels, ordered=True
    )
    table = pd.DataFrame({"grade": col, "x": [0, 0, 0, 0, 0, 0]})
    r = mdav(table, qi=["grade"], model=KAnonymity(3), rng=0)
    assert r.info["attribute_types"]["grade"] == "ordinal"
    # clusters {low, low, mid} and {high, top, top}: lower medians low and top
    assert sorted(r.data["grade"].astype(str)) == ["low", "low", "low", "top", "top", "top"]


def test_mdav_adult_k_and_sensitive_models(adult) -> None:
    table, hierarchies = adult
    sub = table.sample(2000, random_state=3).reset_index(drop=True)
    r = mdav(
        sub,
        qi=ADULT_QI,
        model=KAnonymity(10),
        hierarchies=hierarchies,
        rng=2,
        attribute_types={"education": "ordinal"},
    )
    assert anonymity.k_anonymity(r.data, ADULT_QI) >= 10
    assert r.metrics["il2"] == pytest.approx(0.0, abs=1e-12)
    assert 0 < r.metrics["categorical_change_rate"] < 1
    h = hierarchies["education"]
    assert set(r.data["education"]) <= set(h.values)  # aggregates are real categories

    r = mdav(
        sub,
        qi=ADULT_QI,
        model=make_models(k=5, l=3),
        sensitive="occupation",
        hierarchies=hierarchies,
        rng=2,
    )
    assert anonymity.k_anonymity(r.data, ADULT_QI) >= 5
    assert anonymity.l_diversity(r.data, ADULT_QI, ["occupation"]) >= 3
    assert r.info["merges"] > 0

    r = mdav(
        sub,
        qi=ADULT_QI,
        model=make_models(k=5, t=0.3),
        sensitive="occupation",
        hierarchies=hierarchies,
        rng=2,
    )
    assert anonymity.t_closeness(r.data, ADULT_QI, ["occupation"]) <= 0.3 + 1e-9


@st.composite
def _mixed_tables(draw):
    n = draw(st.integers(4, 40))
    num = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))
    cat = draw(st.lists(st.sampled_from("abc"), min_size=n, max_size=n))
    sens = draw(st.lists(st.sampled_from("xyz"), min_size=n, max_size=n))
    k = draw(st.integers(1, max(1, n // 2)))
    return pd.DataFrame({"num": num, "cat": cat, "s": sens}), k


@given(_mixed_tables())
def test_mdav_generated_tables_are_k_anonymous(case) -> None:
    table, k = case
    r = mdav(table, qi=["num", "cat"], model=KAnonymity(k), rng=0)
    assert anonymity.k_anonymity(r.data, ["num", "cat"]) >= k
    assert len(r.data) == len(table)
    assert r.data["num"].mean() == pytest.approx(table["num"].mean())
    model = make_models(k=k, l=2)
    if table["s"].nunique() >= 2:
        r = mdav(table, qi=["num", "cat"], model=model, sensitive="s", rng=0)
        assert anonymity.l_diversity(r.data, ["num", "cat"], ["s"]) >= 2
    else:
        with pytest.raises(ConfigError):
            mdav(table, qi=["num", "cat"], model=model, sensitive="s", rng=0)


def test_mdav_errors() -> None:
    table = pd.DataFrame({"a": [1.0, 2.0, 3.0], "c": ["x", "y", "z"]})
    with pytest.raises(ConfigError):
        mdav(table, qi=["c"], model=KAnonymity(2), attribute_types={"c": "continuous"})
    with pytest.raises(ConfigError):
        mdav(table, qi=["a"], model=KAnonymity(2), attribute_types={"a": "fuzzy"})
    with pytest.raises(ConfigError):
        mdav(table, qi=["a"], model=KAnonymity(4))
