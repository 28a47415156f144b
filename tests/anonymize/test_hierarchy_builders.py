"""Hierarchy builders, the interval default of ``anonymize`` and text columns (issue 15,
item 3).

Oracles: ``pandas.cut`` for fixed-width intervals, plain string slicing for masking,
pandas' period formatting for dates, pycanon's k-anonymity for the default hierarchies;
the CLI keeps ZIP codes with leading zeros and never turns text codes into ranges.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from pycanon import anonymity

from ppdm.anonymize.api import anonymize
from ppdm.anonymize.data import load_table
from ppdm.anonymize.hierarchy import Hierarchy
from ppdm.anonymize.hierarchy_builders import (
    auto_widths,
    date_hierarchy,
    interval_hierarchy,
    masking_hierarchy,
    quantile_hierarchy,
    write_hierarchy,
)
from ppdm.cli.main import main
from ppdm.errors import ConfigError


def test_intervals_equal_pandas_cut():
    rng = np.random.default_rng(4)
    ages = rng.integers(17, 91, 500)
    widths = [5, 10, 20]
    h = interval_hierarchy(ages, attribute="age", widths=widths, origin=0)
    for level, w in enumerate(widths, start=1):
        edges = np.arange(0, 101 + w, w)
        ref = pd.cut(ages, edges, right=False).astype(str)
        ref = [s.replace(".0", "") for s in ref]
        got = h.generalize(ages.astype(str), level).tolist()
        assert got == ref
    assert h.generalize(["17"], h.height - 1).tolist() == ["*"]


def test_auto_widths_nest_and_span():
    ws = auto_widths(np.arange(17, 91))
    assert ws == [5.0, 10.0, 20.0, 40.0, 80.0]
    assert all(b / a == 2 for a, b in itertools.pairwise(ws))
    with pytest.raises(ConfigError, match="non-numeric"):
        auto_widths(["a", "1"])


def test_quantiles_are_equal_frequency_and_nested():
    x = np.random.default_rng(1).normal(70, 12, 4000).round(1)
    h = quantile_hierarchy(x, attribute="weight", bins=8)
    labels = pd.Series(h.generalize(pd.Series(x).astype(str), 1))
    counts = labels.value_counts().to_numpy()
    assert len(counts) == 8 and counts.min() > 0.8 * len(x) / 8
    assert len(set(h.generalize(pd.Series(x).astype(str), 2))) == 4
    assert h.labels(h.height - 1).tolist() == ["*"]


def test_masking_matches_string_slicing():
    zips = ["02139", "02138", "10598", "10547", "94110"]
    h = masking_hierarchy(zips, attribute="zip")
    for level in range(1, 6):
        assert h.generalize(zips, level).tolist() == [z[: 5 - level] + "*" * level for z in zips]
    kept = masking_hierarchy(zips, attribute="zip", keep=2)
    assert kept.height == 5 and kept.generalize(["02139"], 3).tolist() == ["02***"]


def test_dates_roll_up_like_pandas_periods():
    days = pd.date_range("2019-11-20", periods=90, freq="D").strftime("%Y-%m-%d")
    h = date_hierarchy(days, attribute="visit", levels=["month", "quarter", "year", "decade"])
    d = pd.to_datetime(pd.Series(days))
    assert h.generalize(days, 1).tolist() == d.dt.to_period("M").astype(str).tolist()
    assert h.generalize(days, 2).tolist() == [f"{p.year}-Q{p.quarter}" for p in d.dt.to_period("Q")]
    assert h.generalize(days, 3).tolist() == d.dt.year.astype(str).tolist()
    assert set(h.generalize(days, 4)) == {"2010s", "2020s"}
    with pytest.raises(ConfigError, match="fine to coarse"):
        date_hierarchy(days, attribute="visit", levels=["year", "month"])
    with pytest.raises(ConfigError, match="cannot read"):
        date_hierarchy(["2020-01-01", "soon"], attribute="visit")


def test_write_and_read_back(tmp_path):
    h = masking_hierarchy(["02139", "10598"], attribute="zip")
    path = write_hierarchy(h, tmp_path / "x_hierarchy_zip.csv")
    assert path.read_text().splitlines()[0] == "02139;0213*;021**;02***;0****;*****;*"
    back = Hierarchy.from_csv(path)
    assert back.attribute == "zip" and back.table.equals(h.table)


def test_anonymize_builds_interval_hierarchies_for_numeric_qis(adult_dir):
    t = pd.read_csv(adult_dir / "adult.csv", sep=";").head(4000)
    rel = anonymize(t, qi=["age", "sex"], k=5, hierarchies={"sex": _flat(t["sex"])}, rng=2)
    assert rel.info["built_hierarchies"] == {"age": "intervals of width 5, 10, 20, 40, 80, then *"}
    assert anonymity.k_anonymity(rel.data, ["age", "sex"]) >= 5
    assert rel.data["age"].astype(str).str.startswith("[").any() or (rel.data["age"] == "*").all()
    # a text QI without a hierarchy gets one too (tests/anonymize/test_text_default.py)
    assert "race" in anonymize(t, qi=["age", "race"], k=5).info["built_hierarchies"]


def _flat(col: pd.Series) -> Hierarchy:
    return Hierarchy.from_rows([[v, "*"] for v in sorted(set(col))], attribute=col.name)


@pytest.fixture
def zip_table(tmp_path):
    rows = ["zip,age,disease"]
    rng = np.random.default_rng(0)
    zips = ["02139", "02138", "02141", "02142", "10598", "10597"]
    for i in range(60):
        age = f"{rng.integers(20, 70)}" if i % 3 else f"{rng.integers(20, 70)}.5"
        rows.append(f"{zips[i % len(zips)]},{age},{['flu', 'cold', 'hiv'][i % 3]}")
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def test_cli_zip_codes_with_leading_zeros(zip_table, capsys):
    d = zip_table
    assert (
        main(
            [
                "hierarchy",
                "mask",
                "--input",
                str(d / "t.csv"),
                "--column",
                "zip",
                "--output",
                str(d / "t_hierarchy_zip.csv"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "hierarchy",
                "intervals",
                "--input",
                str(d / "t.csv"),
                "--column",
                "age",
                "--widths",
                "10,20",
                "--output",
                str(d / "t_hierarchy_age.csv"),
            ]
        )
        == 0
    )
    # the age file lists values as written ("23" and "41.5" in one column)
    assert any(
        line.split(";")[0].endswith(".5")
        for line in (d / "t_hierarchy_age.csv").read_text().splitlines()
    )
    code = main(
        [
            "anonymize",
            "--input",
            str(d / "t.csv"),
            "--qi",
            "zip,age",
            "--k",
            "5",
            "--hierarchies",
            str(d),
            "--output",
            str(d / "o.csv"),
            "--report",
            str(d / "r.json"),
            "--no-progress",
            "--seed",
            "1",
        ]
    )
    assert code == 0, capsys.readouterr().err
    out = load_table(d / "o.csv", dtypes={"zip": "text"})
    assert out["zip"].str.len().eq(5).all() or (out["zip"] == "*").all()
    assert out["zip"].str.startswith("0").any()
    node = json.loads((d / "r.json").read_text())["info"]["node"]
    assert (
        node["zip"] >= 0
        and "built_hierarchies" not in json.loads((d / "r.json").read_text())["info"]
    )


def test_cli_mondrian_keeps_text_codes(zip_table, capsys):
    d = zip_table
    for extra in ([], ["--dtype", "zip=text"]):
        code = main(
            [
                "anonymize",
                "--input",
                str(d / "t.csv"),
                "--qi",
                "zip",
                "--k",
                "5",
                "--algorithm",
                "mondrian",
                "--output",
                str(d / "m.csv"),
                "--no-progress",
                "--seed",
                "1",
                *extra,
            ]
        )
        assert code == 0, capsys.readouterr().err
        z = load_table(d / "m.csv", dtypes={"zip": "text"})["zip"]
        assert not z.str.contains(r"\[|-").any()
        assert z.str.startswith("0").any()


def test_cli_dtype_option(zip_table, capsys):
    d = zip_table
    code = main(
        [
            "anonymize",
            "--input",
            str(d / "t.csv"),
            "--qi",
            "zip",
            "--k",
            "5",
            "--algorithm",
            "mondrian",
            "--output",
            str(d / "m.csv"),
            "--no-progress",
            "--dtype",
            "disease=number",
        ]
    )
    assert code == 2 and "'disease' is read as numbers" in capsys.readouterr().err
    code = main(
        [
            "anonymize",
            "--input",
            str(d / "t.csv"),
            "--qi",
            "zip",
            "--k",
            "5",
            "--output",
            str(d / "m.csv"),
            "--dtype",
            "zip=txt",
        ]
    )
    assert code == 2 and "COLUMN=text" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kind,extra,height",
    [("quantiles", ["--bins", "4"], 5), ("mask", [], 7), ("intervals", [], None)],
)
def test_cli_hierarchy_kinds(zip_table, kind, extra, height):
    d = zip_table
    col = "zip" if kind == "mask" else "age"
    out = d / f"k_hierarchy_{col}.csv"
    assert (
        main(
            [
                "hierarchy",
                kind,
                "--input",
                str(d / "t.csv"),
                "--column",
                col,
                "--output",
                str(out),
                *extra,
            ]
        )
        == 0
    )
    h = Hierarchy.from_csv(out)
    values = set(pd.read_csv(d / "t.csv", dtype=str)[col])
    assert set(h.values) == values
    if height is not None:
        assert h.height == height


def test_cli_hierarchy_dates(tmp_path):
    (tmp_path / "v.csv").write_text("visit\n15/03/2024\n02/01/2023\n")
    assert (
        main(
            [
                "hierarchy",
                "dates",
                "--input",
                str(tmp_path / "v.csv"),
                "--column",
                "visit",
                "--levels",
                "month,year",
                "--format",
                "%d/%m/%Y",
                "--output",
                str(tmp_path / "h.csv"),
            ]
        )
        == 0
    )
    assert (tmp_path / "h.csv").read_text().splitlines() == [
        "15/03/2024;2024-03;2024;*",
        "02/01/2023;2023-01;2023;*",
    ]
