"""``ppdm hide`` end to end on a small FIMI file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppdm.cli.main import main
from ppdm.hiding.metrics import mine
from ppdm.mining.readers import read_fimi

DATA = "1 2 3\n1 2\n1 2 4\n2 3\n1 3\n1 2 3\n2 4\n1 2 5\n3 4\n1 4\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    inp = tmp_path / "in.dat"
    inp.write_text(DATA)
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"antecedent": [1], "consequent": [2]}]))
    return {"in": inp, "rules": rules, "out": tmp_path / "out.dat", "rep": tmp_path / "r.json"}


@pytest.mark.parametrize("method", ["1.b", "2.c", "swa", "maxmin", "exact"])
def test_hide_command(files: dict[str, Path], method: str) -> None:
    rc = main(
        [
            "hide",
            "--input",
            str(files["in"]),
            "--sensitive",
            str(files["rules"]),
            "--min-support",
            "0.3",
            "--min-confidence",
            "0.6",
            "--method",
            method,
            "--output",
            str(files["out"]),
            "--report",
            str(files["rep"]),
        ]
    )
    assert rc == 0
    sanitized = read_fimi(files["out"])
    keys = mine(sanitized, min_support=0.3, min_confidence=0.6).rule_keys
    assert (frozenset({1}), frozenset({2})) not in keys
    report = json.loads(files["rep"].read_text())
    assert report["method"] == method
    assert report["side_effects"]["hiding_failure"] == 0
    assert report["sensitive_rules"] == [{"antecedent": [1], "consequent": [2]}]
    assert report["n_transactions_sanitized"] == sanitized.n_transactions


def test_hide_command_errors(files: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    base = [
        "hide",
        "--input",
        str(files["in"]),
        "--min-support",
        "0.3",
        "--min-confidence",
        "0.6",
        "--output",
        str(files["out"]),
    ]
    assert main([*base, "--sensitive", str(files["in"])]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    files["rules"].write_text('[{"antecedent": [99], "consequent": [2]}]')
    assert main([*base, "--sensitive", str(files["rules"])]) == 2
    assert "not in the data" in capsys.readouterr().err
    assert main([*base, "--sensitive", str(files["in"].with_name("missing.json"))]) == 2
    capsys.readouterr()
    assert main([*base, "--sensitive", str(files["rules"]), "--method", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ppdm: error:") and err.count("\n") == 1 and "--method" in err
