"""Anatomy, permutation, count estimators (Yang & Qiao 2010, eq. 12-13) and utility measures."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mlxtend.frequent_patterns import apriori
from pycanon import anonymity
from scipy import stats
from sklearn.metrics import mutual_info_score

from ppdm.errors import ConfigError
from ppdm.perturb._table import contingency, encode
from ppdm.perturb.anatomy import (
    anatomize,
    anatomy,
    count_query_generalized,
    count_query_permuted,
    generalized_table_estimate,
    grouped_table_estimate,
    permute_within_groups,
)
from ppdm.perturb.utility import (
    CountQuery,
    answer_count_queries,
    chi2_distance,
    cube_query_error,
    kl_distance,
    pairwise_uncertainty,
    quasi_sensitive_rules,
    random_count_queries,
    rule_recovery_rate,
    rules_from_table,
    uncertainty_coefficient,
)


@given(
    counts=st.lists(st.integers(1, 12), min_size=2, max_size=8),
    l=st.integers(2, 4),
    seed=st.integers(0, 1000),
)
def test_anatomy_groups_are_l_diverse(counts, l, seed):  # noqa: E741
    s = np.repeat(np.arange(len(counts)), counts)
    if max(counts) * l > len(s):
        with pytest.raises(ConfigError):
            anatomize(s, l=l, rng=seed)
        return
    g = anatomize(s, l=l, rng=seed)
    assert g.min() >= 0
    for gid in np.unique(g):
        vals = s[g == gid]
        assert len(vals) >= l
        assert len(set(vals.tolist())) == len(vals)  # distinct sensitive values


def test_anatomy_on_adult_checked_by_pycanon(adult_dir):
    df = pd.read_csv(adult_dir / "adult.csv", sep=";").head(5000)
    rel = anatomy(df, qi=["age", "sex"], sensitive="occupation", l=4, rng=1)
    tab = pd.DataFrame({"group": rel.groups.astype(str), "occupation": df["occupation"]})
    assert anonymity.l_diversity(tab, ["group"], ["occupation"]) >= 4
    assert rel.st["count"].sum() == len(df)
    # permutation keeps every group's multiset of sensitive values
    orig = pd.crosstab(rel.groups, df["occupation"])
    perm = pd.crosstab(rel.groups, rel.permuted["occupation"])
    assert orig.equals(perm)


def test_permute_within_groups_is_a_permutation_per_group():
    v = np.arange(20)
    g = np.repeat([0, 1, 2, 3], 5)
    out = permute_within_groups(v, g, rng=4)
    for k in range(4):
        assert sorted(out[g == k]) == sorted(v[g == k])
    assert not np.array_equal(out, v)


def _small(seed):
    g = np.random.default_rng(seed)
    n = 400
    codes = np.column_stack([g.integers(0, 3, n), g.integers(0, 4, n), g.integers(0, 5, n)])
    return codes, (3, 4, 5)


def test_equation_13_equals_grouped_estimate_and_brute_force():
    codes, dims = _small(1)
    groups = anatomize(codes[:, -1], l=3, rng=2)
    est = grouped_table_estimate(codes[:, :-1], codes[:, -1], groups, dims)
    assert est.sum() == pytest.approx(len(codes))
    q = {0: [0, 2], 1: [1]}
    rs = [1, 3, 4]
    brute = 0.0
    for gid in np.unique(groups):
        rows = codes[groups == gid]
        match = np.isin(rows[:, 0], q[0]) & np.isin(rows[:, 1], q[1])
        brute += np.isin(rows[:, 2], rs).sum() * match.sum() / len(rows)
    assert count_query_permuted(codes[:, :-1], codes[:, -1], groups, q, rs) == pytest.approx(brute)
    query = CountQuery(((0, 2), (1,), (1, 3, 4)))
    assert answer_count_queries(est, [query])[0] == pytest.approx(brute)


def test_equation_12_equals_generalized_estimate():
    codes, dims = _small(3)
    labels = pd.DataFrame(
        {"a": np.where(codes[:, 0] < 2, "0-1", "2"), "b": np.where(codes[:, 1] < 2, "lo", "hi")}
    )
    s = codes[:, -1]
    est = generalized_table_estimate(codes[:, :-1], labels, s, dims)
    assert est.sum() == pytest.approx(len(codes))
    q = {0: [1], 1: [0, 3]}
    rs = [0, 2]
    direct = count_query_generalized(codes[:, :-1], labels, s, q, rs)
    assert answer_count_queries(est, [CountQuery(((1,), (0, 3), (0, 2)))])[0] == pytest.approx(
        direct
    )
    # brute force: a group 'a=0-1, b=lo' covers a in {0,1}, b in {0,1}
    brute = 0.0
    for (la, lb), part in pd.DataFrame({"la": labels["a"], "lb": labels["b"], "s": s}).groupby(
        ["la", "lb"]
    ):
        cov_a = {"0-1": [0, 1], "2": [2]}[la]
        cov_b = {"lo": [0, 1], "hi": [2, 3]}[lb]
        frac = len(set(cov_a) & {1}) / len(cov_a) * len(set(cov_b) & {0, 3}) / len(cov_b)
        brute += part["s"].isin(rs).sum() * frac
    assert direct == pytest.approx(brute)


def test_distances_against_scipy():
    g = np.random.default_rng(0)
    p, q = g.dirichlet(np.ones(10)), g.dirichlet(np.ones(10))
    assert kl_distance(p, q) == pytest.approx(stats.entropy(p, q))
    assert chi2_distance(p, q) == pytest.approx(np.sum((p - q) ** 2 / (p + q)))
    assert kl_distance(p, p) == pytest.approx(0.0, abs=1e-12)
    assert kl_distance(np.array([0.5, 0.5]), np.array([1.0, 0.0])) == float("inf")


def test_cube_error_against_pandas_groupby():
    codes, dims = _small(5)
    pi = contingency(codes, dims)
    est = pi * np.random.default_rng(1).uniform(0.5, 1.5, pi.shape)
    df = pd.DataFrame(codes, columns=["a", "b", "s"])
    errs = [abs(pi.sum() - est.sum()) / pi.sum()]
    for k in range(1, 4):
        for cols in combinations(range(3), k):
            act = df.groupby([df.columns[c] for c in cols]).size()
            drop = tuple(a for a in range(3) if a not in cols)
            e = est.sum(axis=drop)
            for key, a in act.items():
                key = key if isinstance(key, tuple) else (key,)
                errs.append(abs(a - e[key]) / a)
    assert cube_query_error(pi, est) == pytest.approx(np.mean(errs))


def test_random_queries_against_record_counts():
    codes, dims = _small(6)
    pi = contingency(codes, dims)
    qs = random_count_queries(dims, 50, qi_attributes=1, rng=3)
    got = answer_count_queries(pi, qs)
    for q, a in zip(qs, got, strict=True):
        mask = np.ones(len(codes), bool)
        for j, vals in enumerate(q.values):
            if vals is not None:
                mask &= np.isin(codes[:, j], vals)
        assert a == mask.sum()
        assert q.values[-1] is not None and sum(v is not None for v in q.values[:-1]) == 1


def test_uncertainty_coefficient_against_sklearn():
    g = np.random.default_rng(2)
    x = g.integers(0, 4, 3000)
    y = (x + g.integers(0, 3, 3000)) % 5
    joint = contingency(np.column_stack([x, y]), (4, 5))
    hx = stats.entropy(np.bincount(x) / 3000)
    assert uncertainty_coefficient(joint) == pytest.approx(mutual_info_score(x, y) / hx)
    u = pairwise_uncertainty(joint)
    assert u[0, 1] == pytest.approx(mutual_info_score(x, y) / hx)


def test_quasi_sensitive_rules_against_mlxtend(adult_dir):
    df = pd.read_csv(adult_dir / "adult.csv", sep=";").head(4000)
    cols = ["sex", "race", "salary-class", "workclass", "occupation"]
    enc = encode(df, cols)
    rules = quasi_sensitive_rules(enc.codes, enc.dims, min_support=0.05, min_confidence=0.15)
    onehot = pd.get_dummies(df[cols].astype(str)).astype(bool)
    freq = apriori(onehot, min_support=0.05, use_colnames=True)
    supp = {frozenset(s): v for s, v in zip(freq["itemsets"], freq["support"], strict=True)}
    expected = set()
    for items, sup in supp.items():
        s_items = [i for i in items if i.startswith("occupation_")]
        q_items = frozenset(i for i in items if not i.startswith("occupation_"))
        if len(s_items) == 1 and q_items and sup / supp[q_items] >= 0.15:
            expected.add((q_items, s_items[0]))
    got = set()
    for (ante, cons), _ in rules.items():
        names = frozenset(f"{cols[a]}_{enc.categories[a][v]}" for a, v in ante)
        got.add((names, f"occupation_{enc.categories[-1][cons]}"))
    assert got == expected and len(got) > 3
    # the same rules from the contingency table
    assert set(rules_from_table(contingency(enc.codes, enc.dims), min_support=0.05)) == set(rules)
    assert rule_recovery_rate(rules, rules) == 1.0
