"""Value generalization hierarchies: ARX files, validation, interval hierarchies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.anonymize.hierarchy import Hierarchy, as_labels, load_hierarchies
from ppdm.errors import ConfigError

ADULT_HEIGHTS = {
    "age": 5,
    "education": 4,
    "marital-status": 3,
    "native-country": 3,
    "race": 2,
    "salary-class": 2,
    "sex": 2,
    "workclass": 3,
    "occupation": 3,
}


def test_adult_hierarchies_load_with_documented_heights(adult_dir):
    hs = load_hierarchies(adult_dir, list(ADULT_HEIGHTS))
    assert {a: h.height for a, h in hs.items()} == ADULT_HEIGHTS
    for h in hs.values():
        assert h.labels(h.height - 1).tolist() == ["*"]
    data = pd.read_csv(adult_dir / "adult.csv", sep=";")
    for a, h in hs.items():  # every data value is covered
        assert len(h.leaf_codes(data[a])) == len(data)


def test_generalize_matches_file(adult_dir):
    h = Hierarchy.from_csv(adult_dir / "adult_hierarchy_age.csv")
    assert h.attribute == "age"
    assert h.generalize([39, "8", 11.0], 1).tolist() == ["35-39", "5-9", "10-14"]
    assert h.generalize([39], 4).tolist() == ["*"]
    rows = [line.split(";") for line in (adult_dir / "adult_hierarchy_age.csv").read_text().split()]
    assert h.leaves_under("5-9", 1) == [r[0] for r in rows if r[1] == "5-9"]


def _write(tmp_path, text, name="t_hierarchy_x.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_missing_values_rejected_naming_them(tmp_path):
    p = _write(tmp_path, "a;A;*\nb;;*\nc;C;*\n")
    with pytest.raises(ConfigError, match=r"missing values: row 2 \(b\) level\(s\) \[1\]"):
        Hierarchy.from_csv(p)


def test_ragged_rows_rejected(tmp_path):
    p = _write(tmp_path, "a;A;*\nb;B\n")
    with pytest.raises(ConfigError, match="missing values"):
        Hierarchy.from_csv(p)


def test_duplicate_values_rejected_naming_them(tmp_path):
    p = _write(tmp_path, "a;A;*\nb;B;*\na;B;*\n")
    with pytest.raises(ConfigError, match="more than once: 'a'"):
        Hierarchy.from_csv(p)


def test_label_with_two_parents_rejected(tmp_path):
    p = _write(tmp_path, "a;A;X\nb;A;Y\nc;C;Y\n")
    with pytest.raises(ConfigError, match="'A' at level 1 generalize to more than one"):
        Hierarchy.from_csv(p)


def test_unknown_value_named():
    h = Hierarchy.from_rows([["a", "*"], ["b", "*"]], attribute="x")
    with pytest.raises(ConfigError, match="not in its hierarchy: 'zz'"):
        h.generalize(["a", "zz"], 1)


def test_load_hierarchies_finds_by_attribute(tmp_path):
    _write(tmp_path, "a;*\nb;*\n", "d_hierarchy_x.csv")
    hs = load_hierarchies(tmp_path, ["x", "y"])
    assert list(hs) == ["x"]
    _write(tmp_path, "a;*\nb;*\n", "e_hierarchy_x.csv")
    with pytest.raises(ConfigError, match="more than one hierarchy file"):
        load_hierarchies(tmp_path, ["x"])


def test_intervals_nest_and_validate():
    h = Hierarchy.intervals(np.arange(17, 91), widths=[5, 10, 20], attribute="age")
    assert h.height == 5
    for lv in range(1, h.height - 1):  # each interval lies inside its parent
        lo, hi = h.label_ranges(lv)
        plo, phi = h.label_ranges(lv + 1)
        parent = h.parent_map(lv)
        assert np.all(plo[parent] <= lo) and np.all(hi <= phi[parent])
    with pytest.raises(ConfigError, match="not a whole multiple"):
        Hierarchy.intervals([1, 2, 3], widths=[5, 7], attribute="a")
    with pytest.raises(ConfigError, match="non-numeric or missing values 'x'"):
        Hierarchy.intervals(["1", "x"], widths=[5], attribute="a")


@given(
    st.lists(st.integers(-50, 200), min_size=1, max_size=60),
    st.sampled_from([[1], [2, 4], [5, 10, 20], [3, 6, 12, 24]]),
)
def test_intervals_cover_their_values(values, widths):
    h = Hierarchy.intervals(values, widths=widths, attribute="v")
    for lv, w in enumerate(widths, start=1):
        labels = h.generalize(values, lv)
        for v, lab in zip(values, labels, strict=True):
            lo, hi = (float(x) for x in lab.strip("[)").split(","))
            assert lo <= v < hi and hi - lo == w
            assert str(v) in h.leaves_under(lab, lv)


def test_as_labels_integral_floats():
    assert as_labels(pd.Series([1.0, 2.5])).tolist() == ["1.0", "2.5"]
    assert as_labels(pd.Series([1, 2])).tolist() == ["1", "2"]
