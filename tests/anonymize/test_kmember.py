"""Byun's IL(e) and greedy k-member clustering (Xiong n.d.), checked against the seed's
worked example, a literal transcription of the seed's pseudo-code, and pycanon."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pycanon import anonymity

from ppdm.anonymize.hierarchy import Hierarchy, load_hierarchies
from ppdm.anonymize.kmember import (
    ByunInformationLoss,
    encode_qi,
    greedy_k_member_clustering,
    k_member,
)
from ppdm.anonymize.models import (
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    RecursiveCLDiversity,
    make_models,
)
from ppdm.errors import ConfigError
from ppdm.randomness import make_rng

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

COUNTRY = Hierarchy.from_rows(
    [
        ["USA", "North America", "America", "*"],
        ["Canada", "North America", "America", "*"],
        ["Brazil", "South America", "America", "*"],
        ["India", "South Asia", "Asia", "*"],
        ["Iran", "West Asia", "Asia", "*"],
        ["Greece", "Southern Europe", "Europe", "*"],
    ],
    attribute="country",
)
OCCUPATION = Hierarchy.from_rows(
    [
        ["Armed-Forces", "Government", "*"],
        ["Teacher", "Professional", "*"],
        ["Doctor", "Professional", "*"],
        ["Salesman", "Technical", "*"],
        ["Tech-support", "Technical", "*"],
    ],
    attribute="occupation",
)
SEED_TABLE = pd.DataFrame(
    {
        "age": [41, 57, 40, 38, 24, 45],
        "country": ["USA", "India", "Canada", "Iran", "Brazil", "Greece"],
        "occupation": [
            "Armed-Forces",
            "Tech-support",
            "Teacher",
            "Tech-support",
            "Doctor",
            "Salesman",
        ],
        "salary": [">=50K", "<50K", "<50K", ">=50K", ">=50K", "<50K"],
        "diagnosis": ["Cancer", "Flu", "Obesity", "Flu", "Cancer", "Fever"],
    }
)


@pytest.fixture(scope="module")
def adult(adult_dir: Path) -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    table = pd.read_csv(adult_dir / "adult.csv", sep=";")
    hierarchies = load_hierarchies(adult_dir, [*ADULT_QI, "occupation"])
    return table, hierarchies


def _il() -> ByunInformationLoss:
    return ByunInformationLoss(
        SEED_TABLE,
        qi=["age", "country", "occupation"],
        hierarchies={"country": COUNTRY, "occupation": OCCUPATION},
    )


# -- the seed's worked example ------------------------------------------------------------


def test_seed_example_information_loss() -> None:
    il = _il()
    # D(e1) = (41-24)/33 + 2/3 + 1 = 2.1818..., IL(e1) = 6.5454...
    assert il.cluster_loss([0, 2, 4]) == pytest.approx(3 * (17 / 33 + 2 / 3 + 1))
    assert il.cluster_loss([0, 2, 4]) == pytest.approx(6.545454545, abs=1e-8)
    # D(e2) = (57-24)/33 + 3/3 + 1 = 3, IL(e2) = 9
    assert il.cluster_loss([0, 1, 4]) == pytest.approx(9.0)


def test_seed_example_taxonomy_distances() -> None:
    il = _il()
    # delta(India, USA) = 3/3, delta(India, Iran) = 2/3 on country (Xiong n.d.)
    country_only = ByunInformationLoss(SEED_TABLE, qi=["country"], hierarchies={"country": COUNTRY})
    assert country_only.distance(1, 0) == pytest.approx(1.0)
    assert country_only.distance(1, 3) == pytest.approx(2 / 3)
    assert il.distance(0, 0) == 0.0


def test_class_losses_match_cluster_loss() -> None:
    il = _il()
    labels = np.array([0, 1, 0, 1, 0, 1])
    per_class = il.class_losses(labels)
    assert per_class[0] == pytest.approx(il.cluster_loss([0, 2, 4]))
    assert per_class[1] == pytest.approx(il.cluster_loss([1, 3, 5]))
    assert il.total(labels) == pytest.approx(per_class.sum())


def _naive_lca_height(h: Hierarchy, values: list[str]) -> int:
    """Lowest level at which all values share a label, by walking the table's rows."""
    for level in range(h.height):
        if len({h.table.loc[v, level] for v in values}) == 1:
            return level
    return h.height


@given(st.lists(st.integers(0, 5), min_size=1, max_size=6), st.lists(st.integers(0, 4)))
def test_cluster_loss_against_definition(countries: list[int], jobs: list[int]) -> None:
    members = sorted(set(countries))
    il = _il()
    ages = SEED_TABLE["age"].to_numpy()[members]
    expected = (ages.max() - ages.min()) / 33
    c = SEED_TABLE["country"].to_numpy()[members].tolist()
    o = SEED_TABLE["occupation"].to_numpy()[members].tolist()
    expected += _naive_lca_height(COUNTRY, c) / 3 + _naive_lca_height(OCCUPATION, o) / 2
    assert il.cluster_loss(members) == pytest.approx(len(members) * expected)


# -- greedy k-member against the seed's pseudo-code ---------------------------------------


def _naive_greedy(table: pd.DataFrame, qi: list[str], hierarchies, k: int, seed: int):
    """Literal transcription of Xiong's (n.d.) greedy_k_member_clustering."""
    il = ByunInformationLoss(table, qi=qi, hierarchies=hierarchies)
    rng = make_rng(seed)
    s = list(range(len(table)))
    result: list[list[int]] = []
    r = s[int(rng.integers(0, len(s), 1)[0])]
    while len(s) >= k:
        r = max(s, key=lambda x: (il.distance(r, x), -x))  # furthest; ties: lowest row
        s.remove(r)
        c = [r]
        while len(c) < k:
            best, best_diff = None, np.inf
            for x in s:  # find_best_record
                diff = il.cluster_loss([*c, x]) - il.cluster_loss(c)
                if diff < best_diff:
                    best, best_diff = x, diff
            s.remove(best)
            c.append(best)
            r = best
        result.append(c)
    order = np.array(s)[rng.permutation(len(s))] if s else []
    for x in order:  # find_best_cluster
        x = int(x)
        best, best_diff = None, np.inf
        for i, c in enumerate(result):
            diff = il.cluster_loss([*c, x]) - il.cluster_loss(c)
            if diff < best_diff:
                best, best_diff = i, diff
        result[best].append(x)
    labels = np.empty(len(table), dtype=int)
    for i, c in enumerate(result):
        labels[c] = i
    return labels


_TREE = Hierarchy.from_rows(
    [[a, g, "*"] for a, g in [("a", "x"), ("b", "x"), ("c", "y"), ("d", "y")]],
    attribute="cat",
)


@st.composite
def _small_tables(draw):
    n = draw(st.integers(3, 14))
    # numeric span 8 (0 and 8 present) and tree heights 1 and 2 keep every IL exact
    nums = [*draw(st.lists(st.integers(0, 8), min_size=n - 2, max_size=n - 2)), 0, 8]
    cats = draw(st.lists(st.sampled_from("abcd"), min_size=n, max_size=n))
    flags = draw(st.lists(st.sampled_from(["p", "q"]), min_size=n, max_size=n))
    k = draw(st.integers(1, n))
    seed = draw(st.integers(0, 2**16))
    return pd.DataFrame({"num": nums, "cat": cats, "flag": flags}), k, seed


@given(_small_tables())
def test_greedy_matches_seed_pseudocode(case) -> None:
    table, k, seed = case
    qi = ["num", "cat", "flag"]
    hierarchies = {"cat": _TREE}
    space = encode_qi(table, qi, hierarchies)
    fast = greedy_k_member_clustering(space, k, rng=make_rng(seed))
    naive = _naive_greedy(table, qi, hierarchies, k, seed)
    np.testing.assert_array_equal(fast, naive)
    sizes = np.bincount(fast)
    assert len(sizes) == len(table) // k
    assert sizes.min() >= k and sizes.max() <= 2 * k - 1


# -- releases verified by pycanon ---------------------------------------------------------


@given(_small_tables(), st.lists(st.sampled_from("xyz"), min_size=14, max_size=14))
def test_k_member_generated_releases(case, sensitive: list[str]) -> None:
    table, k, seed = case
    table = table.assign(s=sensitive[: len(table)])
    qi = ["num", "cat", "flag"]
    r = k_member(table, qi=qi, model=KAnonymity(k), hierarchies={"cat": _TREE}, rng=seed)
    assert anonymity.k_anonymity(r.data, qi) >= k
    assert sorted(r.data["s"]) == sorted(table["s"])
    if table["s"].nunique() >= 2:
        r = k_member(
            table,
            qi=qi,
            model=make_models(k=k, l=2),
            sensitive="s",
            hierarchies={"cat": _TREE},
            rng=seed,
        )
        assert anonymity.l_diversity(r.data, qi, ["s"]) >= 2


def test_k_member_adult_k_anonymity(adult) -> None:
    table, hierarchies = adult
    sub = table.sample(1500, random_state=1).reset_index(drop=True)
    r = k_member(sub, qi=ADULT_QI, model=KAnonymity(8), hierarchies=hierarchies, rng=3)
    assert anonymity.k_anonymity(r.data, ADULT_QI) >= 8
    assert len(r.data) == len(sub) and r.suppressed == 0
    assert r.info["n_groups"] == len(sub) // 8
    assert 0 < r.metrics["ncp"] < 1
    assert r.metrics["suppression_rate"] == 0.0
    assert r.metrics["byun_il"] > 0
    # categorical QIs are released as labels of their hierarchy
    for col in ("education", "native-country"):
        h = hierarchies[col]
        allowed = {str(v) for level in range(h.height) for v in h.labels(level)}
        assert set(r.data[col]) <= allowed
    # sensitive and other columns travel with their rows (same multiset)
    assert sorted(r.data["occupation"]) == sorted(sub["occupation"])


@pytest.mark.parametrize(
    "model",
    [
        make_models(k=4, l=3),
        make_models(k=3, t=0.25),
        EntropyLDiversity(2.0),
        RecursiveCLDiversity(3, 2),
    ],
    ids=["distinct-l", "t-closeness", "entropy-l", "recursive-cl"],
)
def test_k_member_adult_sensitive_models(adult, model) -> None:
    table, hierarchies = adult
    sub = table.sample(800, random_state=2).reset_index(drop=True)
    r = k_member(
        sub,
        qi=ADULT_QI,
        model=model,
        sensitive="occupation",
        hierarchies=hierarchies,
        rng=5,
    )
    data = r.data
    groups = data.groupby(ADULT_QI)["occupation"]
    assert anonymity.k_anonymity(data, ADULT_QI) >= model.min_class_size
    if isinstance(model, EntropyLDiversity):
        ent = groups.apply(
            lambda s: -(s.value_counts(normalize=True).pipe(lambda p: p * np.log(p))).sum()
        )
        assert ent.min() >= np.log(2.0) - 1e-9
    elif isinstance(model, RecursiveCLDiversity):

        def ok(s: pd.Series) -> bool:
            r_ = np.sort(s.value_counts().to_numpy())[::-1]
            return r_[0] < 3 * r_[1:].sum()

        assert groups.apply(ok).all()
    elif any(isinstance(m, DistinctLDiversity) for m in model.models):
        assert anonymity.l_diversity(data, ADULT_QI, ["occupation"]) >= 3
    else:
        assert anonymity.t_closeness(data, ADULT_QI, ["occupation"]) <= 0.25 + 1e-9


def test_k_member_errors(adult) -> None:
    table, hierarchies = adult
    sub = table.head(20)
    with pytest.raises(ConfigError):
        k_member(sub, qi=ADULT_QI, model=DistinctLDiversity(2), hierarchies=hierarchies)
    with pytest.raises(ConfigError):
        k_member(sub, qi=ADULT_QI, model=KAnonymity(21), hierarchies=hierarchies)
    with pytest.raises(ConfigError):
        k_member(sub, qi=["nope"], model=KAnonymity(2))
