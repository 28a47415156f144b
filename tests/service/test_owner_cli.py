"""The owner's and the operator's command line (issue 24, items 2, 4, 5): the owner sees
the local cause of its own node's refusal while peers see only the code; job history,
saved documents and job id prefixes; ``ppdm policy allow`` and its ledger entry.

The nodes run in this process (:class:`ppdm.testbed.consortia.LoopbackConsortium`, gRPC
with mutual TLS on 127.0.0.1); every command goes through :func:`ppdm.cli.main.main`.
"""

from __future__ import annotations

import json
import random
import secrets
import threading
import time

import pytest

from ppdm.cli.main import main
from ppdm.errors import ConfigError
from ppdm.service.history import resolve_job_id
from ppdm.service.ledger import ledger_path, read_entries
from ppdm.service.policy import SETTLE_S
from ppdm.testbed.consortia import LoopbackConsortium

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(600)]

PARTIES = ["alice", "bob", "carol"]


def write_transactions(path, baskets: list[list[int]]) -> None:
    """A FIMI file: one basket of integer items per line."""
    path.write_text("".join(" ".join(map(str, b)) + "\n" for b in baskets))


def _baskets(seed: int) -> list[list[int]]:
    gen = random.Random(seed)  # public test data, seeded
    return [sorted(gen.sample(range(1, 9), 3)) for _ in range(40)]


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_resolve_job_id_prefixes():
    ids = ["3fa9c0aa", "77aa0100", "77ab0200"]
    assert resolve_job_id("3fa9", ids) == "3fa9c0aa"
    assert resolve_job_id("77AA", ids) == "77aa0100"
    assert resolve_job_id("77ab0200", ids) == "77ab0200"
    with pytest.raises(ConfigError, match="ambiguous"):
        resolve_job_id("77a0", ["77a01", "77a02"])
    with pytest.raises(ConfigError, match="no job id"):
        resolve_job_id("ffff", ids)
    with pytest.raises(ConfigError, match="too short"):
        resolve_job_id("3f", ids)


def test_owner_sees_the_cause_a_peer_does_not(tmp_path, capsys):
    """Bob's [data] names a file that is not there, its path carrying a secret: bob's node
    refuses with the fixed input-check reason; bob's owner reads the cause (the path) from
    `job run`, `job status` and `job explain`; alice, the initiator, never does."""
    secret = f"SECRET-{secrets.token_hex(8)}"
    for i, p in enumerate(PARTIES):
        write_transactions(tmp_path / f"{p}.dat", _baskets(i))
    data = {p: {"transactions": str(tmp_path / f"{p}.dat")} for p in PARTIES}
    data["bob"] = {"transactions": str(tmp_path / f"{secret}.dat")}  # planted in the FILE
    with LoopbackConsortium(PARTIES, tmp_path / "net", data=data, probe_peers=False) as bed:
        a, b = (str(bed.workdir / f"{p}.toml") for p in ("alice", "bob"))
        doc_path = tmp_path / "a.json"
        code, out, err = _run(
            capsys, ["job", "run", "assoc", "--settings", a, "--output", str(doc_path)]
        )
        assert code == 1 and "input_check" in err
        assert secret not in out + err  # alice, a peer of bob, gets the code only
        job_id = _last_job(bed, "alice")
        code, out, err = _run(capsys, ["job", "status", job_id[:10], "--settings", a, "--json"])
        assert code == 0 and secret not in out + err
        assert json.loads(out)["bob"]["state"] == "refused"
        # bob's owner, with bob's certificate on bob's host
        code, out, err = _run(capsys, ["job", "status", job_id[:10], "--settings", b])
        assert code == 0 and secret in out, out
        code, out, err = _run(capsys, ["job", "explain", job_id[:10], "--settings", b])
        assert code == 0 and "local cause" in out and secret in out and "input_check" in out
        # the dry run on bob's host names it too
        code, out, err = _run(capsys, ["policy", "check", "assoc", "--settings", b])
        assert code == 1 and "input_check" in out and secret in out
        # bob starting a job himself sees his own node's cause at once
        code, out, err = _run(capsys, ["job", "run", "assoc", "--settings", b])
        assert code == 1 and secret in err
        # and the ledgers of the other nodes never held it
        for p in ("alice", "carol"):
            text = json.dumps([e.as_dict() for e in read_entries(ledger_path(bed.settings[p]))])
            assert secret not in text


def _last_job(bed: LoopbackConsortium, party: str) -> str:
    return [e.job_id for e in read_entries(ledger_path(bed.settings[party])) if e.job_id][-1]


def test_history_show_prefixes_and_policy_allow(tmp_path, capsys):
    for i, p in enumerate(PARTIES):
        write_transactions(tmp_path / f"{p}.dat", _baskets(10 + i))
    data = {p: {"transactions": str(tmp_path / f"{p}.dat")} for p in PARTIES}
    with LoopbackConsortium(PARTIES, tmp_path / "net", data=data, probe_peers=False) as bed:
        s = {p: str(bed.workdir / f"{p}.toml") for p in PARTIES}
        doc_path = tmp_path / "sum.json"
        code, out, err = _run(
            capsys,
            ["job", "run", "secure-sum", "--settings", s["alice"], "--output", str(doc_path)],
        )
        assert code == 0, err
        doc = json.loads(doc_path.read_text())
        job_id = doc["job_id"]
        # every party's time is its node's own (not 0.00 s)
        for p in PARTIES:
            line = next(ln for ln in out.splitlines() if ln.strip().startswith(f"{p}:"))
            assert not line.endswith(" 0.00 s"), line

        code, out, _ = _run(capsys, ["job", "show", str(doc_path)])
        assert code == 0 and f"job {job_id}" in out and "sum = " in out and "{" not in out
        code, out, _ = _run(capsys, ["job", "show", str(doc_path), "--json"])
        assert json.loads(out) == doc

        # first run of assoc: no measures; the summary names the one-line policy change
        code, out, err = _run(
            capsys,
            [
                "job",
                "run",
                "assoc",
                "--settings",
                s["alice"],
                "--param",
                "min_confidence=0.2",
                "--output",
                str(tmp_path / "r.json"),
            ],
        )
        assert code == 0, err
        assert "ppdm policy allow reveal_counts" in out

        # history at bob's node, human and JSON
        code, out, _ = _run(capsys, ["job", "history", "--settings", s["bob"]])
        assert code == 0 and job_id[:12] in out and "secure-sum" in out and "succeeded" in out
        code, out, _ = _run(capsys, ["job", "history", "--settings", s["bob"], "--json"])
        rows = json.loads(out)
        assert [r["protocol"] for r in rows] == ["secure-sum", "assoc"]
        assert rows[0]["initiator"] == "alice" and rows[0]["parties"] == PARTIES
        assert rows[0]["state"] == "succeeded" and rows[0]["ended"] >= rows[0]["proposed"]

        # prefixes: ledger show --job, status; unknown and ambiguous prefixes exit 2
        code, out, _ = _run(
            capsys, ["ledger", "show", "--settings", s["bob"], "--job", job_id[:12]]
        )
        assert code == 0 and "request" in out and "finish" in out and "assoc" not in out
        code, _, err = _run(capsys, ["ledger", "show", "--settings", s["bob"], "--job", "zzzz"])
        assert code == 2 and "no job id" in err
        code, out, _ = _run(capsys, ["job", "status", job_id[:8], "--settings", s["alice"]])
        assert code == 0 and "succeeded" in out
        other = rows[1]["job_id"]
        common = next(n for n in range(len(job_id)) if job_id[n] != other[n])
        if common >= 4:  # two ids sharing 4+ leading digits: ambiguous
            code, _, err = _run(
                capsys, ["job", "status", job_id[:common], "--settings", s["alice"]]
            )
            assert code == 2 and "ambiguous" in err
        code, _, err = _run(capsys, ["job", "status", "0000ffff", "--settings", s["alice"]])
        assert code == 2

        # policy allow: the comments stay, the node takes it and chains a ledger entry
        for p in PARTIES:
            path = bed.workdir / f"{p}.policy.toml"
            before = path.read_text()
            code, out, err = _run(capsys, ["policy", "allow", "reveal_counts", "--settings", s[p]])
            assert code == 0, err
            after = path.read_text()
            assert after.startswith(before.rstrip("\n"))  # nothing removed, comments kept
            assert "[jobs.assoc.params]" in after and "reveal_counts" in after
        time.sleep(2 * SETTLE_S)
        code, out, err = _run(
            capsys,
            [
                "job",
                "run",
                "assoc",
                "--settings",
                s["alice"],
                "--param",
                "reveal_counts=true",
                "--param",
                "min_confidence=0.2",
                "--output",
                str(tmp_path / "r2.json"),
            ],
        )
        assert code == 0, err
        assert "lift" in out and "ppdm policy allow" not in out
        kinds = [
            (e.kind, e.record.get("event")) for e in read_entries(ledger_path(bed.settings["bob"]))
        ]
        assert ("policy", "change") in kinds

        code, _, err = _run(capsys, ["policy", "allow", "no_such_param", "--settings", s["bob"]])
        assert code == 2 and "not a parameter" in err
        code, _, err = _run(capsys, ["policy", "allow", "report_local", "--settings", s["bob"]])
        assert code == 2 and "--job" in err


def test_approve_by_prefix(tmp_path, capsys):
    consent = "version = 1\n[defaults]\nconsent = true\nconsent_timeout_s = 300\n"
    with LoopbackConsortium(
        PARTIES, tmp_path / "net", policy={"bob": consent}, probe_peers=False
    ) as bed:
        s = {p: str(bed.workdir / f"{p}.toml") for p in PARTIES}
        result: dict[str, int] = {}
        runner = threading.Thread(
            target=lambda: result.setdefault(
                "code",
                main(
                    [
                        "job",
                        "run",
                        "secure-sum",
                        "--settings",
                        s["alice"],
                        "--output",
                        str(tmp_path / "d.json"),
                    ]
                ),
            )
        )
        runner.start()
        deadline = time.monotonic() + 120  # catches a hang only
        pending: list = []
        while not pending and time.monotonic() < deadline:
            from ppdm.service.client import pending_jobs

            pending = pending_jobs(bed.settings["bob"])
            time.sleep(0.2)
        assert pending
        code = main(["job", "approve", pending[0]["job_id"][:8], "--settings", s["bob"]])
        assert code == 0
        runner.join(300)
        assert result.get("code") == 0
        assert main(["job", "reject", "abcd", "--settings", s["bob"]]) == 2
