"""Membership that completes (issue 24, item 3): the flow of docs/deployment.md from
``consortium init`` through ``add-party``, with the new member started from the files
``add-party`` wrote and a job that includes it, against running nodes that take the new
roster without a restart.

Every node is its own ``ppdm party serve`` process on 127.0.0.1, tied to the test
(:func:`ppdm.testbed.consortia.spawn_tied`); the other commands run in this process.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from ppdm.cli.main import main
from ppdm.parties.consortium import load_settings, update_toml_file
from ppdm.service.client import health
from ppdm.testbed.consortia import free_ports, kill_tied, spawn_tied

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(900)]

HANG_S = 240.0  # only catches a hang (no wall-clock bound in a test)


def _serve(settings: Path, logs: Path):
    log = (logs / f"{settings.stem}.log").open("w")
    return spawn_tied(
        [sys.executable, "-m", "ppdm.cli.main", "party", "serve", str(settings)],
        stdout=log,
        stderr=log,
    )


def _wait_up(settings: Path, parties: list[str]) -> None:
    deadline = time.monotonic() + HANG_S
    s = load_settings(settings)
    while True:
        report = health(s, timeout=2.0)
        if all(report.get(p, {}).get("ok") for p in parties):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"nodes not up: {report}")
        time.sleep(0.3)


def test_init_add_party_serve_and_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CA_PASSPHRASE", "correct horse battery staple")
    ports = free_ports(4)
    logs = tmp_path / "logs"
    logs.mkdir()

    # without a way to keep the CA key, init says exactly how, and add-party names it
    assert main(["consortium", "init", "--parties", "x,y,z", "--out", "lost"]) == 0
    assert "--ca-passphrase-env" in capsys.readouterr().err
    code = main(
        [
            "consortium",
            "add-party",
            "w",
            "--address",
            "127.0.0.1:1",
            "--roster",
            "lost/consortium.toml",
            "--ca-key",
            "lost/private/ca.key",
        ]
    )
    assert code == 2 and "--ca-passphrase-env" in capsys.readouterr().err

    # the documented flow
    assert (
        main(
            [
                "consortium",
                "init",
                "--parties",
                "alice,bob,carol",
                "--host",
                "127.0.0.1",
                "--base-port",
                str(ports[0]),
                "--out",
                "net",
                "--ca-passphrase-env",
                "CA_PASSPHRASE",
            ]
        )
        == 0
    )
    key_pem = (tmp_path / "net/private/ca.key").read_bytes()
    assert b"ENCRYPTED" in key_pem  # kept, encrypted by default
    assert stat.S_IMODE(os.stat(tmp_path / "net/private/ca.key").st_mode) == 0o600
    procs = []
    try:
        for p in ("alice", "bob", "carol"):
            procs.append(_serve(tmp_path / f"net/{p}.toml", logs))
        _wait_up(tmp_path / "net/alice.toml", ["alice", "bob", "carol"])

        capsys.readouterr()
        dave_address = f"127.0.0.1:{ports[3]}"
        assert (
            main(
                [
                    "consortium",
                    "add-party",
                    "dave",
                    "--address",
                    dave_address,
                    "--roster",
                    "net/consortium.toml",
                    "--ca-key",
                    "net/private/ca.key",
                    "--ca-passphrase-env",
                    "CA_PASSPHRASE",
                ]
            )
            == 0
        )
        out = capsys.readouterr().out
        assert "ppdm party serve net/dave.toml" in out
        dave = tmp_path / "net/dave.toml"
        assert dave.is_file() and (tmp_path / "net/dave.policy.toml").is_file()
        # dave's owner adds its private input to the settings file add-party wrote
        update_toml_file(dave, {"inputs": {"secure_sum": 41}})
        procs.append(_serve(dave, logs))
        _wait_up(dave, ["dave"])
        # the running nodes take the new roster without a restart
        assert main(["consortium", "push", "--settings", "net/alice.toml", "--json"]) == 0
        pushed = json.loads(capsys.readouterr().out)
        assert all(r["ok"] for r in pushed.values()), pushed
        _wait_up(tmp_path / "net/alice.toml", ["alice", "bob", "carol", "dave"])

        doc_path = tmp_path / "four.json"
        code = main(
            [
                "job",
                "run",
                "secure-sum",
                "--settings",
                "net/alice.toml",
                "--parties",
                "alice,bob,carol,dave",
                "--output",
                str(doc_path),
            ]
        )
        assert code == 0, capsys.readouterr().err
        doc = json.loads(doc_path.read_text())
        assert sorted(doc["parties"]) == ["alice", "bob", "carol", "dave"]
        inputs = [
            load_settings(tmp_path / f"net/{p}.toml").raw["inputs"]["secure_sum"]
            for p in ("alice", "bob", "carol", "dave")
        ]
        assert doc["parties"]["dave"]["result"]["sum"] == sum(inputs)
    finally:
        for proc in procs:
            kill_tied(proc)
