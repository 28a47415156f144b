"""``ppdm policy check`` / ``validate``, and the node refusing a bad policy at start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ppdm.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def _init(tmp_path, capsys):
    assert (
        main(["consortium", "init", "--parties", "alice,bob,carol,mallory", "--out", str(tmp_path)])
        == 0
    )
    capsys.readouterr()
    return str(tmp_path / "bob.toml")


def test_init_writes_the_default_policy(tmp_path, capsys):
    _init(tmp_path, capsys)
    text = (tmp_path / "bob.policy.toml").read_text()
    assert "min_parties = 3" in text and "docs/governance.md" in text
    assert 'policy = "bob.policy.toml"' in (tmp_path / "bob.toml").read_text()
    assert (tmp_path / "bob.policy.toml").stat().st_mode & 0o777 == 0o600


def test_policy_check_dry_runs_the_nodes_decision(tmp_path, capsys):
    s = _init(tmp_path, capsys)
    code = main(
        [
            "policy",
            "check",
            "secure-sum",
            "--settings",
            s,
            "--parties",
            "bob,mallory",
            "--initiator",
            "mallory",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1 and out.startswith("REFUSED by rule 'min_parties'")
    code = main(["policy", "check", "secure-sum", "--settings", s, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["decision"] == "accept"
    assert report["leakage"]["reads"] == ["inputs.secure_sum"]
    code = main(["policy", "check", "assoc", "--settings", s, "--param", "reveal_counts=true"])
    assert code == 1 and "params.reveal_counts" in capsys.readouterr().out
    # The input check: the modulus cannot hold bob's sample input (0..999).
    code = main(
        ["policy", "check", "secure-sum", "--settings", s, "--param", "modulus=2", "--json"]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["rule"] == "input_check"
    # Consent shows as pending.
    (tmp_path / "bob.policy.toml").write_text("version = 1\n[defaults]\nconsent = true\n")
    code = main(["policy", "check", "secure-sum", "--settings", s])
    assert code == 1 and capsys.readouterr().out.startswith("PENDING")
    # Nothing was recorded by the dry runs.
    assert not (tmp_path / "state").exists()


def test_policy_check_and_validate_errors(tmp_path, capsys):
    s = _init(tmp_path, capsys)
    assert main(["policy", "check", "secure-sum", "--settings", s, "--parties", "bob,zed"]) == 2
    assert "unknown" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("version = 1\n[defaults]\nmin_parties = -1\n")
    assert main(["policy", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "min_parties" in err
    assert main(["policy", "validate", str(tmp_path / "bob.policy.toml"), "--json"]) == 0
    rules = json.loads(capsys.readouterr().out)["jobs"]
    assert rules["secure-sum"]["min_parties"] == 3


def test_a_node_with_a_bad_policy_does_not_start(tmp_path, capsys):
    s = _init(tmp_path, capsys)
    (tmp_path / "bob.policy.toml").write_text("version = 1\n[defaults]\nresults = 'everyone'\n")
    proc = subprocess.run(
        [sys.executable, "-m", "ppdm", "party", "serve", s],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2
    assert "results must be one of" in proc.stderr and "Traceback" not in proc.stderr
