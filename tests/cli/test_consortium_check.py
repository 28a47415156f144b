"""``ppdm consortium check PARTY.toml`` checks [limits], [data] and the policy together,
opening each source read-only (issue 24, item 2): a broken entry fails the check with
its precise cause and never prints a credential."""

from __future__ import annotations

import json
import os
import secrets

import pytest

from ppdm.cli.main import main
from ppdm.parties.consortium import init_consortium, update_toml_file
from ppdm.service.policy import DEFAULT_POLICY_TOML

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def net(tmp_path):
    init_consortium(tmp_path, ["alice", "bob", "carol"], policy_text=DEFAULT_POLICY_TOML)
    (tmp_path / "baskets.dat").write_text("1 2 3\n2 3\n")
    return tmp_path


def _check(capsys, path) -> tuple[int, dict]:
    code = main(["consortium", "check", str(path), "--json", "--timeout", "20"])
    return code, json.loads(capsys.readouterr().out)


def _by_what(doc: dict) -> dict[str, dict]:
    return {c["what"]: c for c in doc["checks"]}


def test_a_good_party_passes(net, capsys):
    update_toml_file(net / "alice.toml", {"data": {"transactions": "baskets.dat"}})
    code, doc = _check(capsys, net / "alice.toml")
    assert code == 0 and doc["settings_of"] == "alice"
    assert _by_what(doc)["[data] transactions"]["ok"]
    assert main(["consortium", "check", str(net / "alice.toml")]) == 0
    out = capsys.readouterr().out
    assert "ready" in out and "{" not in out  # a report for people, not JSON


def test_broken_entries_fail_with_their_cause_and_no_secret(net, capsys, monkeypatch):
    secret = secrets.token_hex(8)
    pw = net / "db.password"
    pw.write_text(secret)
    os.chmod(pw, 0o640)  # group-readable
    monkeypatch.setenv("PPDM_TEST_DB_PASSWORD", secret)
    data = {
        "transactions": "basketz.dat",  # a typo
        "in_url": {"kind": "sql", "url": f"postgresql://u:{secret}@127.0.0.1:1/x", "table": "t"},
        "readable": {
            "kind": "sql",
            "url": "postgresql://u@127.0.0.1:1/x",
            "table": "t",
            "password_file": str(pw),
        },
        "down": {
            "kind": "sql",
            "url": "postgresql://u@127.0.0.1:1/x",
            "table": "t",
            "password_env": "PPDM_TEST_DB_PASSWORD",
        },
    }
    text = (net / "bob.toml").read_text()
    import tomlkit

    doc = tomlkit.parse(text)
    doc["data"] = data
    (net / "bob.toml").write_text(tomlkit.dumps(doc))
    policy = (net / "bob.policy.toml").read_text() + "\n[data.transaction]\njobs = ['assoc']\n"
    (net / "bob.policy.toml").write_text(policy)

    code = main(["consortium", "check", str(net / "bob.toml"), "--json", "--timeout", "20"])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert secret not in captured.out + captured.err
    found = _by_what(json.loads(captured.out))
    assert (
        not found["[data] transactions"]["ok"]
        and "basketz.dat" in found["[data] transactions"]["detail"]
    )
    assert not found["[data] in_url"]["ok"]
    assert not found["[data] readable"]["ok"]
    assert not found["[data] down"]["ok"]
    assert not found["policy [data.transaction]"]["ok"]
    assert found["[limits]"]["ok"]


def test_a_spark_table_entry_needs_the_spark_engine(net, capsys):
    """A table of a Spark catalog cannot be read by the embedded engine: the finding
    names the missing ``[compute]`` setting, not a generic source failure. (With
    ``engine = "spark"`` the check reads the table through the party's Spark engine:
    ``tests/compute/test_spark_engine.py``.)"""
    update_toml_file(
        net / "carol.toml",
        {"data": {"lake": {"kind": "spark-table", "table": "sales.baskets"}}},
    )
    code, doc = _check(capsys, net / "carol.toml")
    assert code == 1
    finding = _by_what(doc)["[data] lake"]
    assert not finding["ok"]
    assert 'engine = "spark"' in finding["detail"] and "sales.baskets" in finding["detail"]
