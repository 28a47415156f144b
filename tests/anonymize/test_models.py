"""Privacy models against pycanon, the seed's definitions by brute force, and the EMD LP."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pycanon import anonymity
from scipy.optimize import linprog
from scipy.stats import entropy as scipy_entropy

from ppdm.anonymize.hierarchy import Hierarchy
from ppdm.anonymize.models import (
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    ModelSet,
    RecursiveCLDiversity,
    TCloseness,
    make_models,
)
from ppdm.errors import ConfigError


def _table(seed: int, n: int, n_q: int, n_s: int, numeric_s: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    s = rng.integers(0, n_s, n)
    return pd.DataFrame(
        {
            "q1": rng.integers(0, n_q, n).astype(str),
            "q2": rng.integers(0, 2, n).astype(str),
            "s": s * 10 if numeric_s else np.array([f"v{i}" for i in s], dtype=object),
        }
    )


def _class_counts(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[str]]:
    codes, domain = pd.factorize(df["s"], sort=True)
    cls = df.groupby(["q1", "q2"], sort=False).ngroup().to_numpy()
    counts = np.zeros((cls.max() + 1, len(domain)), dtype=np.int64)
    np.add.at(counts, (cls, codes), 1)
    return counts, codes, [str(v) for v in domain]


tables = st.builds(
    _table,
    st.integers(0, 10_000),
    st.integers(4, 80),
    st.integers(1, 5),
    st.integers(1, 6),
)


@given(tables)
def test_k_and_distinct_l_match_pycanon(df):
    counts, _, _ = _class_counts(df)
    k = anonymity.k_anonymity(df, ["q1", "q2"])
    l_value = anonymity.l_diversity(df, ["q1", "q2"], ["s"])
    assert KAnonymity(k).check_classes(counts).all()
    assert not KAnonymity(k + 1).check_classes(counts).all()
    assert DistinctLDiversity(l_value).check_classes(counts).all()
    assert not DistinctLDiversity(l_value + 1).check_classes(counts).all()


@given(tables)
def test_entropy_l_matches_pycanon(df):
    counts, _, _ = _class_counts(df)
    l_value = anonymity.entropy_l_diversity(df, ["q1", "q2"], ["s"])  # floor(exp(min H))
    assert EntropyLDiversity(l_value).check_classes(counts).all()
    effective = math.exp(min(scipy_entropy(row) for row in counts))  # independent oracle
    assert EntropyLDiversity(effective).check_classes(counts).all()
    assert not EntropyLDiversity(effective * 1.0001).check_classes(counts).all()
    # pycanon reports floor(exp(min H)) exactly, except that at an exact integer its float
    # exp(log 2) = 1.999... floors one lower: then (and only then) it may be one below.
    if abs(effective - round(effective)) > 1e-9:
        assert l_value == math.floor(effective)
        assert not EntropyLDiversity(l_value + 1).check_classes(counts).all()
    else:
        assert l_value in (round(effective), round(effective) - 1)
        assert EntropyLDiversity(round(effective)).check_classes(counts).all()


@given(tables)
def test_t_closeness_equal_and_ordered_emd_match_pycanon(df):
    counts, codes, domain = _class_counts(df)
    t_value = anonymity.t_closeness(df, ["q1", "q2"], ["s"])  # equal distance for strings
    for dist in ("variational", "emd"):
        m = TCloseness(t_value, distance=dist, ground="equal" if dist == "emd" else None)
        m.prepare(codes, domain)
        assert m.check_classes(counts).all()
        assert math.isclose(m.distances(counts).max(), t_value, abs_tol=1e-9)
    num = df.assign(s=pd.factorize(df["s"], sort=True)[0] * 10)
    ncounts, ncodes, ndomain = _class_counts(num)
    m = TCloseness(0.0, distance="emd")  # auto: numeric -> ordered
    m.prepare(ncodes, ndomain)
    assert m.ground_used == "ordered"
    if len(ndomain) > 1:
        t_num = anonymity.t_closeness(num, ["q1", "q2"], ["s"])  # ordered EMD for numbers
        assert math.isclose(m.distances(ncounts).max(), t_num, abs_tol=1e-9)


def _recursive_brute(row: np.ndarray, c: float, l: int) -> bool:  # noqa: E741
    # Exact rationals: in floats 3/5 < 1.5 * 2/5 comes out True although the two are equal.
    r = sorted((int(v) for v in row if v > 0), reverse=True)
    p = [Fraction(v, sum(r)) for v in r]
    return p[0] < Fraction(c) * sum(p[l - 1 :])  # eq. 20.11 with 1-based p_l


@given(
    st.lists(st.lists(st.integers(0, 6), min_size=4, max_size=4), min_size=1, max_size=12),
    st.floats(0.5, 4.0),
    st.integers(1, 4),
)
def test_recursive_cl_matches_definition(rows, c, l):  # noqa: E741
    counts = np.array(rows)
    counts[counts.sum(axis=1) == 0, 0] = 1
    got = RecursiveCLDiversity(c, l).check_classes(counts)
    assert got.tolist() == [_recursive_brute(r, c, l) for r in counts]


def _emd_lp(p: np.ndarray, q: np.ndarray, d: np.ndarray) -> float:
    r = len(p)
    a_eq = np.zeros((r, r * r))
    for i in range(r):
        for j in range(r):
            a_eq[i, i * r + j] += 1  # outflow
            a_eq[j, i * r + j] -= 1  # inflow
    res = linprog(d.ravel(), A_eq=a_eq, b_eq=p - q, bounds=(0, None), method="highs")
    return float(res.fun)


SENS_H = Hierarchy.from_rows(
    [
        ["gastric ulcer", "stomach", "digestive", "*"],
        ["gastritis", "stomach", "digestive", "*"],
        ["stomach cancer", "stomach", "digestive", "*"],
        ["colitis", "colon", "digestive", "*"],
        ["colon cancer", "colon", "digestive", "*"],
        ["flu", "respiratory", "respiratory", "*"],
        ["pneumonia", "respiratory", "respiratory", "*"],
        ["bronchitis", "respiratory", "respiratory", "*"],
    ],
    attribute="disease",
)


@given(st.lists(st.integers(0, 7), min_size=1, max_size=30), st.integers(0, 10_000))
def test_emd_closed_forms_solve_the_seed_lp(cls_values, seed):
    """EMD (Aggarwal 2015, §20.3.3 LP) with ordered and hierarchical ground distances."""
    rng = np.random.default_rng(seed)
    domain = [str(v) for v in SENS_H.values]
    table_codes = np.concatenate([rng.integers(0, 8, 40), np.arange(8)])
    counts = np.bincount(np.array(cls_values), minlength=8)[None, :]
    q = np.bincount(table_codes, minlength=8) / len(table_codes)
    p = counts[0] / counts.sum()
    r = len(domain)
    idx = np.arange(r)
    ordered = np.abs(idx[:, None] - idx[None, :]) / (r - 1)
    lca = np.zeros((r, r))
    for i in range(r):
        for j in range(r):
            lca[i, j] = next(
                lv
                for lv in range(SENS_H.height)
                if SENS_H.generalize([domain[i]], lv)[0] == SENS_H.generalize([domain[j]], lv)[0]
            )
    hierarchical = lca / (SENS_H.height - 1)
    for ground, dmat in (("ordered", ordered), ("hierarchical", hierarchical)):
        m = TCloseness(0.1, distance="emd", ground=ground)
        m.prepare(table_codes, domain, hierarchy=SENS_H)
        want = _emd_lp(p, q, dmat)
        assert math.isclose(m.distances(counts)[0], want, abs_tol=1e-7), ground


def test_kl_distance_matches_scipy():
    codes = np.array([0, 0, 1, 2, 2, 2])
    m = TCloseness(0.5, distance="kl")
    m.prepare(codes, ["a", "b", "c"])
    counts = np.array([[1, 0, 2], [1, 1, 1]])
    q = np.bincount(codes) / 6
    want = [scipy_entropy(row / row.sum(), q) for row in counts]
    assert np.allclose(m.distances(counts), want)


def test_seed_table_20_3_is_3_anonymous_but_not_2_diverse():
    counts = np.array([[3, 0, 0], [0, 2, 1]])  # HIV x3; Hepatitis C x2, Diabetes
    assert KAnonymity(3).check_classes(counts).all()
    assert DistinctLDiversity(2).check_classes(counts).tolist() == [False, True]
    assert EntropyLDiversity(2).check_classes(counts).tolist() == [False, False]


def test_model_set_and_factory():
    ms = make_models(k=3, l=2, l_variant="recursive", c=3, t=0.4)
    assert isinstance(ms, ModelSet)
    assert ms.min_class_size == 3 and ms.needs_sensitive
    assert not ms.monotone_with_suppression
    assert make_models(k=3, l=2).monotone_with_suppression
    with pytest.raises(ConfigError, match="needs c"):
        make_models(l=2, l_variant="recursive")
    with pytest.raises(ConfigError, match="no privacy model"):
        make_models()
    with pytest.raises(ConfigError, match="k must be a positive integer"):
        KAnonymity(0)
    with pytest.raises(ConfigError, match="hierarchical EMD needs a hierarchy"):
        TCloseness(0.1, distance="emd", ground="hierarchical").prepare(np.array([0, 1]), ["a", "b"])
