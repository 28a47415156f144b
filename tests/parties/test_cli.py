"""The ``ppdm consortium``, ``ppdm party`` and ``ppdm job`` commands, in process."""

from __future__ import annotations

import json

import pytest

from ppdm.cli.job import parse_params
from ppdm.cli.main import main
from ppdm.errors import ConfigError
from ppdm.parties.consortium import load_settings
from ppdm.testbed.consortia import LoopbackConsortium


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ppdm: error:") and err.count("\n") == 1, err
    return err


def test_consortium_init_and_check(tmp_path, capsys):
    out = tmp_path / "c"
    argv = [
        "consortium",
        "init",
        "--parties",
        "alice,bob,carol",
        "--host",
        "127.0.0.1",
        "--base-port",
        "50051",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    assert "ppdm party serve" in capsys.readouterr().out
    settings = load_settings(out / "bob.toml")
    assert settings.listen == "127.0.0.1:50052"
    assert main(["consortium", "check", str(out / "consortium.toml"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in doc["parties"]] == ["alice", "bob", "carol"]
    assert main(["consortium", "check", str(out / "carol.toml"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings_of"] == "carol"
    # A second init into the same folder needs --force.
    assert "not empty" in one_line_error(capsys, argv)
    assert main([*argv, "--force"]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["consortium", "init", "--parties", "alice,Bob", "--out", "{tmp}/x"], "DNS label"),
        (["consortium", "init", "--parties", ",", "--out", "{tmp}/x"], "at least one party"),
        (["consortium", "init", "--parties", "a,a", "--out", "{tmp}/x"], "distinct"),
        (["consortium", "check", "{tmp}/missing.toml"], "file not found"),
        (["party", "serve", "{tmp}/missing.toml"], "file not found"),
        (["party", "health", "--settings", "{tmp}/missing.toml"], "file not found"),
        (["job", "run", "no-such-job", "--settings", "{tmp}/missing.toml"], "file not found"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert message in one_line_error(capsys, argv)


def test_job_run_checks_its_arguments_before_calling_anyone(tmp_path, capsys):
    main(["consortium", "init", "--parties", "alice,bob", "--out", str(tmp_path)])
    capsys.readouterr()
    s = str(tmp_path / "alice.toml")
    assert "unknown job" in one_line_error(capsys, ["job", "run", "nope", "--settings", s])
    assert "no parameter 'size'" in one_line_error(
        capsys, ["job", "run", "secure-sum", "--settings", s, "--param", "size=3"]
    )
    assert "KEY=VALUE" in one_line_error(
        capsys, ["job", "run", "secure-sum", "--settings", s, "--param", "modulus"]
    )
    assert "--timeout" in one_line_error(
        capsys, ["job", "run", "secure-sum", "--settings", s, "--timeout", "-1"]
    )
    assert "not in consortium" in one_line_error(
        capsys, ["job", "run", "secure-sum", "--settings", s, "--parties", "alice,zed"]
    )
    assert "does not exist" in one_line_error(
        capsys,
        ["job", "run", "secure-sum", "--settings", s, "--output", str(tmp_path / "no/x.json")],
    )


def test_job_list_names_the_builtin_jobs(capsys):
    assert main(["job", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("secure-sum", "ring-echo", "stream"):
        assert name in out


def test_parse_params():
    assert parse_params(["a=3", "b=x", "c=[1, 2]", "d=null", "e=a=b"]) == {
        "a": 3,
        "b": "x",
        "c": [1, 2],
        "d": None,
        "e": "a=b",
    }
    with pytest.raises(ConfigError):
        parse_params(["=3"])


def test_job_run_and_health_against_in_process_nodes(tmp_path, capsys):
    with LoopbackConsortium(("alice", "bob"), tmp_path) as bed:
        s = str(tmp_path / "bob.toml")
        out = tmp_path / "doc.json"
        assert (
            main(
                [
                    "job",
                    "run",
                    "ring-echo",
                    "--settings",
                    s,
                    "--param",
                    "rounds=2",
                    "--output",
                    str(out),
                ]
            )
            == 0
        )
        doc = json.loads(out.read_text())  # with --output: a short summary on the terminal
        assert f"job {doc['job_id']} (ring-echo): succeeded" in capsys.readouterr().out
        assert doc["parties"]["alice"]["result"]["rounds"] == 2
        assert main(["job", "status", doc["job_id"], "--settings", s, "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["bob"]["state"] == "succeeded"
        assert main(["party", "health", "--settings", s, "--json"]) == 0
        health = json.loads(capsys.readouterr().out)
        assert health["alice"]["ok"] and health["bob"]["party"] == "bob"
        bed.nodes["alice"].stop(grace=0)
        assert main(["party", "health", "--settings", s, "--timeout", "2", "--json"]) == 1
        assert json.loads(capsys.readouterr().out)["alice"]["ok"] is False
