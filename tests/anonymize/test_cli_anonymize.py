"""``ppdm anonymize`` end to end, and the API's dispatch to the clustering anonymizers."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from pycanon import anonymity

from ppdm.anonymize.api import anonymize
from ppdm.anonymize.hierarchy import load_hierarchies
from ppdm.cli.main import main

QI = "age,education,marital-status,native-country,race,salary-class,sex,workclass"


def test_cli_anonbench_optimal(adult_dir, tmp_path, capsys):
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    code = main(
        [
            "anonymize",
            "--input",
            str(adult_dir / "adult.csv"),
            "--sep",
            ";",
            "--qi",
            QI,
            "--sensitive",
            "occupation",
            "--hierarchies",
            str(adult_dir),
            "--model",
            "k-anonymity",
            "--k",
            "5",
            "--algorithm",
            "optimal",
            "--output",
            str(out),
            "--report",
            str(rep),
            "--no-progress",
            "--seed",
            "1",
        ]
    )
    assert code == 0
    data = pd.read_csv(out, sep=";", dtype=str, keep_default_na=False)
    assert len(data) == 30162
    assert anonymity.k_anonymity(data, QI.split(",")) >= 5
    report = json.loads(rep.read_text())
    assert report["suppressed"] == 0 and report["rows_in"] == 30162
    assert report["info"]["lattice_size"] == 4320
    assert report["info"]["nodes_checked"] < 4320
    assert report["info"]["runtime_s"] > 0
    for key in (
        "precision",
        "iloss",
        "ncp",
        "discernibility",
        "avg_class_size",
        "classification_metric",
        "suppression_rate",
        "generalization_height",
    ):
        assert key in report["metrics"]
    assert "classes" in capsys.readouterr().out


def test_cli_l_diversity_with_suppression(adult_dir, tmp_path):
    src = tmp_path / "in.csv"
    pd.read_csv(adult_dir / "adult.csv", sep=";").iloc[:3000].to_csv(src, sep=";", index=False)
    out, rep = tmp_path / "out.csv", tmp_path / "r.json"
    code = main(
        [
            "anonymize",
            "--input",
            str(src),
            "--sep",
            ";",
            "--qi",
            "age,sex,race,education",
            "--sensitive",
            "occupation",
            "--hierarchies",
            str(adult_dir),
            "--model",
            "l-diversity",
            "--k",
            "3",
            "--l",
            "3",
            "--algorithm",
            "samarati",
            "--suppression",
            "0.05",
            "--output",
            str(out),
            "--report",
            str(rep),
            "--no-progress",
        ]
    )
    assert code == 0
    data = pd.read_csv(out, sep=";", dtype=str, keep_default_na=False)
    qi = ["age", "sex", "race", "education"]
    assert anonymity.l_diversity(data, qi, ["occupation"]) >= 3
    report = json.loads(rep.read_text())
    assert report["suppressed"] <= 150 and len(data) == 3000 - report["suppressed"]


def test_cli_bad_hierarchy_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("a,b\n1,x\n2,y\n")
    hdir = tmp_path / "h"
    hdir.mkdir()
    (hdir / "t_hierarchy_a.csv").write_text("1;*\n2;*\n1;*\n")
    code = main(
        [
            "anonymize",
            "--input",
            str(tmp_path / "t.csv"),
            "--qi",
            "a",
            "--hierarchies",
            str(hdir),
            "--k",
            "2",
            "--output",
            str(tmp_path / "o.csv"),
            "--no-progress",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "more than once: '1'" in err[0]


def test_cli_unknown_column_exit_2(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("a,b\n1,x\n2,y\n")
    code = main(
        [
            "anonymize",
            "--input",
            str(tmp_path / "t.csv"),
            "--qi",
            "zz",
            "--k",
            "2",
            "--output",
            str(tmp_path / "o.csv"),
            "--no-progress",
        ]
    )
    assert code == 2
    assert "'zz' not in the table" in capsys.readouterr().err


@pytest.mark.parametrize("algorithm", ["mondrian", "mdav", "k-member"])
def test_api_dispatches_to_clustering_algorithms(adult_dir, algorithm):
    df = pd.read_csv(adult_dir / "adult.csv", sep=";").iloc[:400]
    hs = load_hierarchies(adult_dir, ["education", "sex"])
    qi = ["age", "education", "sex"]
    r = anonymize(
        df, qi=qi, sensitive="occupation", hierarchies=hs, k=5, algorithm=algorithm, rng=4
    )
    assert r.algorithm.replace("_", "-").startswith(algorithm.split("-")[0])
    assert anonymity.k_anonymity(r.data, qi) >= 5
    assert "suppression_rate" in r.metrics and "discernibility" in r.metrics


def test_api_dispatches_to_condensation(adult_dir):
    df = pd.read_csv(adult_dir / "adult.csv", sep=";").iloc[:300]
    r = anonymize(df, qi=["age"], k=10, algorithm="condensation", rng=4)
    assert len(r.data) + r.suppressed == 300
    assert "suppression_rate" in r.metrics


def test_cli_parquet_in_and_out(adult_dir, tmp_path):
    src = tmp_path / "in.parquet"
    pd.read_csv(adult_dir / "adult.csv", sep=";").iloc[:2000].to_parquet(src, index=False)
    out = tmp_path / "out.parquet"
    code = main(
        [
            "anonymize",
            "--input",
            str(src),
            "--qi",
            "age,sex,race",
            "--hierarchies",
            str(adult_dir),
            "--k",
            "4",
            "--algorithm",
            "incognito",
            "--output",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    data = pd.read_parquet(out)
    assert len(data) == 2000
    assert anonymity.k_anonymity(data, ["age", "sex", "race"]) >= 4


def test_wrong_separator_is_explained(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("a;b\n1;x\n2;y\n")
    code = main(
        [
            "anonymize",
            "--input",
            str(tmp_path / "t.csv"),
            "--sep",  # given wrong on purpose (left out, it is sniffed: ';')
            ",",
            "--qi",
            "a",
            "--k",
            "2",
            "--output",
            str(tmp_path / "o.csv"),
            "--no-progress",
        ]
    )
    assert code == 2
    assert "is the separator ';'" in capsys.readouterr().err
