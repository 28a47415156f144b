"""Mondrian multidimensional partitioning (Aggarwal 2015, §20.3.1.3), verified with
pycanon on Adult and on generated tables."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pycanon import anonymity

from ppdm.anonymize.hierarchy import Hierarchy, load_hierarchies
from ppdm.anonymize.kmember import encode_qi, prepare_model
from ppdm.anonymize.models import (
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    RecursiveCLDiversity,
    TCloseness,
    make_models,
)
from ppdm.anonymize.mondrian import mondrian, mondrian_partition
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
RANGE = re.compile(r"^\[(-?[\d.e+-]+)-(-?[\d.e+-]+)\]$")


@pytest.fixture(scope="module")
def adult(adult_dir: Path) -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    table = pd.read_csv(adult_dir / "adult.csv", sep=";")
    return table, load_hierarchies(adult_dir, [*ADULT_QI, "occupation"])


def _bounds(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    parsed = col.str.extract(r"^\[(-?[0-9.]+)-(-?[0-9.]+)\]$").astype(float)
    return parsed[0].to_numpy(), parsed[1].to_numpy()


def test_adult_k10_full_table(adult) -> None:
    table, hierarchies = adult
    r = mondrian(table, qi=ADULT_QI, model=KAnonymity(10), hierarchies=hierarchies, rng=7)
    assert anonymity.k_anonymity(r.data, ADULT_QI) >= 10
    assert len(r.data) == len(table) and r.suppressed == 0
    assert r.metrics["suppression_rate"] == 0.0
    assert 0 < r.metrics["ncp"] < 1
    assert r.info["partitions"] >= r.metrics["n_classes"] > 1000
    # ranges are well formed and rows keep their sensitive values
    lo, hi = _bounds(r.data["age"])
    assert np.all(lo <= hi)
    assert sorted(r.data["occupation"]) == sorted(table["occupation"])
    # every original age lies in its released range: a row id (not a QI) travels with
    # each released row, so each row is matched to its original
    tagged = table.assign(row_id=np.arange(len(table)))
    t = mondrian(tagged, qi=ADULT_QI, model=KAnonymity(10), hierarchies=hierarchies, rng=7)
    original = tagged.set_index("row_id")["age"]
    released = t.data.set_index("row_id")
    lo, hi = _bounds(released["age"])
    ages = original.loc[released.index].to_numpy()
    assert len(ages) == len(tagged) and np.all((lo <= ages) & (ages <= hi))
    # ... and every categorical value lies under its released hierarchy label
    for col in ("education", "workclass"):
        h = hierarchies[col]
        truth = tagged.set_index("row_id")[col].loc[released.index]
        for level in range(h.height):
            at = np.asarray(h.generalize(truth, level), dtype=object)
            hit = released[col].to_numpy() == at
            if level == 0:
                exact = hit
            else:
                exact |= hit
        assert exact.all(), col
    # categorical QIs are released as labels of their hierarchy
    for col in ("education", "workclass", "native-country"):
        h = hierarchies[col]
        allowed = {str(v) for level in range(h.height) for v in h.labels(level)}
        assert set(r.data[col]) <= allowed


def _disjoint(a: pd.Series, b: pd.Series, hierarchies: dict[str, Hierarchy]) -> bool:
    """Whether two released classes' regions are disjoint in some dimension."""
    for col in a.index:
        m1, m2 = RANGE.match(str(a[col])), RANGE.match(str(b[col]))
        if m1 and m2:
            if float(m1[2]) < float(m2[1]) or float(m2[2]) < float(m1[1]):
                return True
            continue
        h = hierarchies[col]
        leaves1 = _leaves(h, str(a[col]))
        leaves2 = _leaves(h, str(b[col]))
        if not leaves1 & leaves2:
            return True
    return False


def _leaves(h: Hierarchy, label: str) -> set[str]:
    for level in range(h.height):
        found = h.leaves_under(label, level)
        if found:
            return set(found)
    raise AssertionError(f"{label!r} is not a label of {h.attribute}")


def test_strict_regions_do_not_overlap(adult) -> None:
    table, hierarchies = adult
    sub = table.sample(1200, random_state=5).reset_index(drop=True)
    qi = ["age", "education", "sex", "race"]
    r = mondrian(sub, qi=qi, model=KAnonymity(15), hierarchies=hierarchies, rng=1)
    boxes = r.data[qi].drop_duplicates().reset_index(drop=True)
    assert len(boxes) > 10
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert _disjoint(boxes.iloc[i], boxes.iloc[j], hierarchies), (i, j)


@pytest.mark.parametrize(
    "model",
    [
        make_models(k=5, l=3),
        EntropyLDiversity(2.5),
        RecursiveCLDiversity(2, 3),
        TCloseness(0.15),
        make_models(k=4, t=0.3, t_distance="kl"),
    ],
    ids=["distinct-l", "entropy-l", "recursive-cl", "t-variational", "t-kl"],
)
def test_adult_sensitive_models(adult, model) -> None:
    table, hierarchies = adult
    sub = table.sample(4000, random_state=11).reset_index(drop=True)
    r = mondrian(
        sub, qi=ADULT_QI, model=model, sensitive="occupation", hierarchies=hierarchies, rng=2
    )
    data = r.data
    assert anonymity.k_anonymity(data, ADULT_QI) >= model.min_class_size
    groups = data.groupby(ADULT_QI)["occupation"]
    name = model.describe()["model"]
    if "distinct" in name:
        assert anonymity.l_diversity(data, ADULT_QI, ["occupation"]) >= 3
    if "entropy" in name:
        ent = groups.apply(
            lambda s: float(
                -(s.value_counts(normalize=True) * np.log(s.value_counts(normalize=True))).sum()
            )
        )
        assert ent.min() >= np.log(2.5) - 1e-9
    if "recursive" in name:

        def ok(s: pd.Series) -> bool:
            c = np.sort(s.value_counts().to_numpy())[::-1]
            return c[0] < 2 * c[2:].sum()

        assert groups.apply(ok).all()
    if name == "t-closeness":
        # pycanon's t for string attributes is the variational (equal-distance) EMD
        assert anonymity.t_closeness(data, ADULT_QI, ["occupation"]) <= 0.15 + 1e-9
    if "t-closeness" in name and "kl" in str(model.describe()):
        q = sub["occupation"].value_counts(normalize=True)
        for _, s in groups:
            p = s.value_counts(normalize=True)
            assert float((p * np.log(p / q[p.index])).sum()) <= 0.3 + 1e-9
    assert r.metrics["n_classes"] >= 2


def test_averages_report(adult) -> None:
    table, hierarchies = adult
    sub = table.sample(3000, random_state=3).reset_index(drop=True)
    qi = ["age", "education", "sex"]
    ranges = mondrian(sub, qi=qi, model=KAnonymity(10), hierarchies=hierarchies, rng=4)
    avg = mondrian(
        sub, qi=qi, model=KAnonymity(10), hierarchies=hierarchies, rng=4, report="averages"
    )
    assert pd.api.types.is_float_dtype(avg.data["age"])
    assert avg.data["age"].mean() == pytest.approx(sub["age"].mean())
    assert anonymity.k_anonymity(avg.data, qi) >= 10
    # same regions: each region's mean lies inside its range (same shuffle with rng=4)
    lo, hi = _bounds(ranges.data["age"])
    assert np.all((avg.data["age"].to_numpy() >= lo - 1e-9) & (avg.data["age"] <= hi + 1e-9))


def test_relaxed_bounds_regions_by_2k_minus_1() -> None:
    # Relaxed Mondrian may send median ties to both halves, so a region has at most
    # 2k-1 records unless all its records are identical (nothing left to cut).
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"a": rng.integers(0, 12, 500), "b": rng.integers(0, 6, 500)})
    check = prepare_model(KAnonymity(7), table, sensitive=None)
    space = encode_qi(table, ["a", "b"])
    strict, _ = mondrian_partition(space, check, strict=True)
    relaxed, _ = mondrian_partition(space, check, strict=False)

    def big_mixed_regions(labels: np.ndarray) -> int:
        sizes = np.bincount(labels)
        return sum(
            1 for g in np.flatnonzero(sizes > 13) if len(table[labels == g].drop_duplicates()) > 1
        )

    assert big_mixed_regions(relaxed) == 0
    assert big_mixed_regions(strict) > 0  # median ties force larger strict regions here
    assert np.bincount(strict).min() >= 7 and np.bincount(relaxed).min() >= 7
    assert len(np.unique(relaxed)) > len(np.unique(strict))
    r = mondrian(table, qi=["a", "b"], model=KAnonymity(7), strict=False, rng=0)
    assert anonymity.k_anonymity(r.data, ["a", "b"]) >= 7


@st.composite
def _tables(draw):
    n = draw(st.integers(2, 60))
    nums = draw(st.lists(st.integers(-20, 20), min_size=n, max_size=n))
    cats = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=n, max_size=n))
    sens = draw(st.lists(st.sampled_from(["x", "y", "z"]), min_size=n, max_size=n))
    k = draw(st.integers(1, n))
    strict = draw(st.booleans())
    return pd.DataFrame({"num": nums, "cat": cats, "s": sens}), k, strict


_CAT = Hierarchy.from_rows(
    [["a", "ab", "*"], ["b", "ab", "*"], ["c", "cd", "*"], ["d", "cd", "*"]], attribute="cat"
)


@given(_tables())
def test_generated_tables(case) -> None:
    table, k, strict = case
    qi = ["num", "cat"]
    r = mondrian(table, qi=qi, model=KAnonymity(k), hierarchies={"cat": _CAT}, strict=strict, rng=0)
    assert anonymity.k_anonymity(r.data, qi) >= k
    assert len(r.data) == len(table)
    lo, hi = _bounds(r.data["num"])
    assert np.all(lo <= hi)
    assert set(r.data["cat"]) <= {"a", "b", "c", "d", "ab", "cd", "*"}
    if table["s"].nunique() >= 2:
        r = mondrian(
            table,
            qi=qi,
            model=make_models(k=k, l=2),
            sensitive="s",
            hierarchies={"cat": _CAT},
            strict=strict,
            rng=0,
        )
        assert anonymity.l_diversity(r.data, qi, ["s"]) >= 2
        r = mondrian(
            table,
            qi=qi,
            model=TCloseness(0.3),
            sensitive="s",
            hierarchies={"cat": _CAT},
            strict=strict,
            rng=0,
        )
        assert anonymity.t_closeness(r.data, qi, ["s"]) <= 0.3 + 1e-9


@given(st.lists(st.integers(-1000, 1000), min_size=2, max_size=80, unique=True), st.integers(1, 10))
def test_unique_values_give_regions_below_2k(values: list[int], k: int) -> None:
    # Aggarwal 2015, §20.3.1.3: with unique numeric values every region holds at most 2k-1 points
    if len(values) < k:
        return
    table = pd.DataFrame({"v": values})
    check = prepare_model(KAnonymity(k), table, sensitive=None)
    labels, n_parts = mondrian_partition(encode_qi(table, ["v"]), check, strict=True)
    sizes = np.bincount(labels)
    assert sizes.min() >= k and sizes.max() <= 2 * k - 1
    assert n_parts == len(sizes)


def test_errors() -> None:
    table = pd.DataFrame({"a": [1, 2, 3, 4], "s": ["x", "x", "x", "y"]})
    with pytest.raises(ConfigError):
        mondrian(table, qi=["a"], model=KAnonymity(5))
    with pytest.raises(ConfigError):
        mondrian(table, qi=["a"], model=DistinctLDiversity(2))  # no sensitive column
    with pytest.raises(ConfigError):
        mondrian(table, qi=["a"], model=DistinctLDiversity(3), sensitive="s")
    with pytest.raises(ConfigError):
        mondrian(table, qi=["a"], model=KAnonymity(2), report="boxes")
