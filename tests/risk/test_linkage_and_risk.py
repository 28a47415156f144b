"""Linkage attack (Aggarwal 2015, tables 20.1-20.3), re-identification risk and attribute attacks."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pycanon import anonymity

from ppdm.cli.main import main
from ppdm.randomness import make_rng
from ppdm.risk import (
    background_knowledge_attack,
    background_knowledge_check,
    covers,
    homogeneity_attack,
    journalist_risk,
    linkage_attack,
    load_hierarchy,
    marketer_risk,
    prosecutor_risk,
    risk_report,
)

# Aggarwal 2015, table 20.1 without the SSN, and table 20.2 (voter registration rolls).
TABLE_20_1 = pd.DataFrame(
    {
        "Age": [24, 37, 26, 38, 36, 25],
        "ZIP": ["10598", "90210", "10547", "90345", "89119", "02139"],
        "Disease": ["HIV", "Hepatitis C", "HIV", "Hepatitis C", "Diabetes", "HIV"],
    },
    index=[1, 2, 3, 4, 5, 6],
)
TABLE_20_2 = pd.DataFrame(
    {
        "Name": [
            "Mary A.",
            "John S.",
            "Ann L.",
            "Jack M.",
            "Joy M.",
            "Victor B.",
            "Peter P.",
            "Diana X.",
            "William W.",
            "Sue G.",
        ],
        "Age": [38, 36, 31, 57, 26, 46, 25, 24, 37, 26],
        "ZIP": [
            "90345",
            "89119",
            "02139",
            "10562",
            "10547",
            "90345",
            "02139",
            "10598",
            "90210",
            "10547",
        ],
    }
).set_index("Name")
# Table 20.3: the 3-anonymized release.
TABLE_20_3 = pd.DataFrame(
    {
        "Age": ["[20, 30]", "[30, 40]", "[20, 30]", "[30, 40]", "[30, 40]", "[20, 30]"],
        "ZIP": [
            "Northeastern US",
            "Western US",
            "Northeastern US",
            "Western US",
            "Western US",
            "Northeastern US",
        ],
        "Disease": ["HIV", "Hepatitis C", "HIV", "Hepatitis C", "Diabetes", "HIV"],
    },
    index=[1, 2, 3, 4, 5, 6],
)
# Fig. 20.1's location hierarchy for these ZIP codes.
ZIP_HIERARCHY = {
    **{z: ["Northeastern US"] for z in ["10598", "10547", "02139", "10562"]},
    **{z: ["Western US"] for z in ["90210", "90345", "89119"]},
}


def test_seed000_linkage_on_table_20_1() -> None:
    result = linkage_attack(TABLE_20_1, TABLE_20_2, qi=["Age", "ZIP"], sensitive="Disease")
    pairs = result.pairs()
    hiv_26 = pairs[pairs["release_index"] == 3]["public_index"].tolist()
    assert hiv_26 == ["Joy M.", "Sue G."]  # "Joy and Sue ... 50 % certainty"
    assert result.records.loc[3, "identity_risk"] == 0.5
    hep_c = pairs[pairs["release_index"] == 2]["public_index"].tolist()
    assert hep_c == ["William W."]  # "William is the only individual ... hepatitis C"
    reid = result.reidentified().set_index("release_index")["public_index"].to_dict()
    assert reid == {1: "Diana X.", 2: "William W.", 4: "Mary A.", 5: "John S.", 6: "Peter P."}
    assert result.individuals.loc["Joy M.", "top_value"] == "HIV"
    assert result.individuals.loc["Jack M.", "matching_records"] == 0


def test_seed000_linkage_on_table_20_3_homogeneity() -> None:
    hier = {"ZIP": ZIP_HIERARCHY}
    result = linkage_attack(
        TABLE_20_3, TABLE_20_2, qi=["Age", "ZIP"], sensitive="Disease", hierarchies=hier
    )
    assert result.summary()["records_reidentified"] == 0
    assert result.records["candidates"].tolist() == [4, 3, 4, 3, 3, 4]
    disclosed = result.individuals.index[result.individuals["disclosed"]].tolist()
    assert sorted(disclosed) == ["Diana X.", "Joy M.", "Peter P.", "Sue G."]
    assert result.sensitive_distribution.loc["William W."].to_dict() == pytest.approx(
        {"Diabetes": 1 / 3, "HIV": 0.0, "Hepatitis C": 2 / 3}
    )


@pytest.mark.parametrize(
    ("label", "value", "expected"),
    [
        ("*", "anything", True),
        ("26", 26.0, True),
        ("[20, 30]", 30, True),
        ("[20, 30)", 30, False),
        ("[20, 40[", 39, True),
        ("20-39", 20, True),
        ("2*", "29", True),
        ("2*", "31", False),
        ("52***", "52066", True),
        ("52***", "520661", False),
        ("[5206*, 5207*]", "52072", True),
        ("[5206*, 5207*]", "52080", False),
        ("{a, b}", "b", True),
        ("02139", "2139", True),
        ("Northeastern US", "10547", False),
    ],
)
def test_cover_rules(label: str, value: object, expected: bool) -> None:
    assert covers(label, value) is expected


@given(lo=st.integers(0, 50), width=st.integers(0, 30), v=st.integers(-5, 90))
def test_interval_cover_matches_arithmetic(lo: int, width: int, v: int) -> None:
    hi = lo + width
    assert covers(f"[{lo}, {hi}]", v) == (lo <= v <= hi)
    assert covers(f"[{lo}, {hi}[", v) == (lo <= v < hi)


def _random_release(seed: int, n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = make_rng(seed)
    ages = rng.integers(20, 60, n)
    zips = np.array(["5206", "5207", "5208"])[rng.integers(0, 3, n)]
    zips = [z + str(d) for z, d in zip(zips, rng.integers(0, 10, n), strict=True)]
    level = rng.integers(0, 3, n)
    age_label = [
        str(a) if lv == 0 else f"[{a // 10 * 10}, {a // 10 * 10 + 9}]" if lv == 1 else "*"
        for a, lv in zip(ages, level, strict=True)
    ]
    zip_label = [z if lv == 2 else z[:4] + "*" for z, lv in zip(zips, level, strict=True)]
    release = pd.DataFrame(
        {"Age": age_label, "ZIP": zip_label, "S": np.array(list("abc"))[rng.integers(0, 3, n)]}
    )
    pub_n = n + 5
    public = pd.DataFrame(
        {
            "Age": rng.integers(20, 60, pub_n),
            "ZIP": [f"520{d}" for d in rng.integers(60, 90, pub_n)],
        }
    )
    return release, public


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_linkage_counts_equal_brute_force(seed: int) -> None:
    release, public = _random_release(seed, 40)
    result = linkage_attack(release, public, qi=["Age", "ZIP"], sensitive="S")
    brute = np.zeros((len(release), len(public)), dtype=bool)
    for i, j in itertools.product(range(len(release)), range(len(public))):
        brute[i, j] = all(covers(release.iloc[i][c], public.iloc[j][c]) for c in ["Age", "ZIP"])
    assert result.records["candidates"].tolist() == brute.sum(axis=1).tolist()
    assert result.individuals["matching_records"].tolist() == brute.sum(axis=0).tolist()
    for j in range(len(public)):
        rows = np.flatnonzero(brute[:, j])
        if rows.size:
            share = (release["S"].iloc[rows] == "a").mean()
            assert result.sensitive_distribution.iloc[j]["a"] == pytest.approx(share)


def test_prosecutor_risk_against_pycanon(adult_dir) -> None:
    adult = pd.read_csv(adult_dir / "adult.csv", sep=";").head(4000)
    adult["age"] = (adult["age"] // 10 * 10).astype(str)
    qi = ["age", "sex", "race"]
    k = anonymity.k_anonymity(adult, qi)
    risk = prosecutor_risk(adult, qi, threshold=0.05)
    assert risk.max_risk == pytest.approx(1 / k)
    sizes = adult.groupby(qi).size()
    assert risk.avg_risk == pytest.approx(len(sizes) / len(adult))
    per_record = 1 / adult.groupby(qi)["sex"].transform("size")
    assert risk.records_at_risk == pytest.approx(float((per_record > 0.05).mean()))
    assert marketer_risk(adult, qi) == pytest.approx(len(sizes) / len(adult))
    hom = homogeneity_attack(adult, qi=qi, sensitive="occupation")
    assert hom["distinct_l"] == anonymity.l_diversity(adult, qi, ["occupation"])
    assert hom["entropy_l"] == pytest.approx(
        anonymity.entropy_l_diversity(adult, qi, ["occupation"]), abs=1.0
    )


def test_journalist_and_marketer_against_a_population() -> None:
    hier = {"ZIP": ZIP_HIERARCHY}
    j = journalist_risk(TABLE_20_3, ["Age", "ZIP"], population=TABLE_20_2, hierarchies=hier)
    # F = 4 for ([20, 30], Northeastern US), 3 for ([30, 40], Western US).
    assert j.max_risk == pytest.approx(1 / 3)
    assert j.avg_risk == pytest.approx((3 / 4 + 3 / 3) / 6)
    m = marketer_risk(TABLE_20_3, ["Age", "ZIP"], population=TABLE_20_2, hierarchies=hier)
    assert m == pytest.approx((3 / 4 + 3 / 3) / 6)
    # Without a population the release is its own population.
    assert journalist_risk(TABLE_20_3, ["Age", "ZIP"]).max_risk == pytest.approx(1 / 3)


@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from("pqrs")), min_size=1, max_size=40),
    st.integers(0, 3),
)
def test_background_knowledge_check_brute_force(rows: list[tuple[int, str]], b: int) -> None:
    t = pd.DataFrame(rows, columns=["q", "s"])
    out = background_knowledge_check(t, qi=["q"], sensitive="s", statements=b)
    vulnerable = [g for _, g in t.groupby("q") if g["s"].nunique() - 1 <= b]
    assert out["vulnerable_classes"] == len(vulnerable)
    assert out["records_vulnerable"] == sum(len(g) for g in vulnerable)
    hom = homogeneity_attack(t, qi=["q"], sensitive="s")
    assert hom["homogeneous_classes"] == sum(g["s"].nunique() == 1 for _, g in t.groupby("q"))
    top = max(g["s"].value_counts(normalize=True).iloc[0] for _, g in t.groupby("q"))
    assert hom["probabilistic_l"] == pytest.approx(1 / top)


def test_seed003_background_knowledge_attack() -> None:
    released = pd.DataFrame(
        {
            "Gender": ["F", "F", "M", "M", "M", "M", "F"],
            "Age": ["2*", "2*", "2*", "2*", "3*", "3*", "3*"],
            "Zip": ["520*"] * 7,
            "Disease": [
                "Breast Cancer",
                "Breast Cancer",
                "Lung Cancer",
                "Lung Cancer",
                "Heart Disease",
                "Fever",
                "Nose Pains",
            ],
        }
    )
    qi = ["Gender", "Age", "Zip"]
    alice = background_knowledge_attack(
        released, qi=qi, sensitive="Disease", target={"Gender": "F", "Age": 29}
    )
    assert alice.to_dict() == {"Breast Cancer": 1.0}
    jones = background_knowledge_attack(
        released, qi=qi, sensitive="Disease", target={"Gender": "M", "Age": 27}
    )
    assert jones.to_dict() == {"Lung Cancer": 1.0}
    frank = background_knowledge_attack(
        released, qi=qi, sensitive="Disease", target={"Gender": "M", "Age": 35, "Zip": "52072"}
    )
    assert frank.to_dict() == {"Heart Disease": 0.5, "Fever": 0.5}
    assert background_knowledge_attack(
        released, qi=qi, sensitive="Disease", target={"Age": 50}
    ).empty


def test_risk_report_and_cli(tmp_path, capsys) -> None:
    report = risk_report(
        TABLE_20_3,
        qi=["Age", "ZIP"],
        sensitive="Disease",
        public=TABLE_20_2,
        hierarchies={"ZIP": ZIP_HIERARCHY},
    )
    json.dumps(report)
    assert report["linkage"]["individuals_attribute_disclosed"] == 4
    rel = tmp_path / "release.csv"
    TABLE_20_3.to_csv(rel, index=False)
    pub = tmp_path / "voters.csv"
    TABLE_20_2.reset_index().to_csv(pub, index=False)
    hier = tmp_path / "zip.csv"
    hier.write_text("".join(f"{z};{a[0]};*\n" for z, a in ZIP_HIERARCHY.items()))
    assert load_hierarchy(hier)["02139"] == ("Northeastern US", "*")
    out = tmp_path / "report.json"
    code = main(
        [
            "risk",
            "--input",
            str(rel),
            "--qi",
            "Age,ZIP",
            "--sensitive",
            "Disease",
            "--public",
            str(pub),
            "--public-id",
            "Name",
            "--population",
            str(pub),
            "--hierarchy",
            f"ZIP={hier}",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["reidentification"]["prosecutor"]["max_risk"] == pytest.approx(1 / 3)
    assert doc["homogeneity"]["disclosed_classes"][0]["value"] == "HIV"
    assert doc["linkage"]["individuals_attribute_disclosed"] == 4
    named = {d["public_index"] for d in doc["linkage"]["disclosed_individuals"]}
    assert named == {"Joy M.", "Sue G.", "Peter P.", "Diana X."}
    capsys.readouterr()
    assert main(["risk", "--input", str(rel), "--qi", "Age,Nope"]) == 2
    assert main(["risk", "--input", str(rel), "--qi", "Age", "--hierarchy", "oops"]) == 2
    assert main(["risk", "--input", str(tmp_path / "none.csv"), "--qi", "Age"]) == 2
    assert "ppdm: error" in capsys.readouterr().err
