"""The node's hash-chained ledger: append, restart, concurrency, and every kind of tampering
reported by ``ppdm ledger verify``."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppdm.cli.main import main
from ppdm.service.ledger import GENESIS, Ledger, verify_file


def _fill(path, n=12):
    with Ledger(path) as led:
        for i in range(n):
            led.append(
                "request",
                {"i": i, "parties": ["alice", "bob"], "big": 2**80 + i},
                job_id=f"j{i % 3}",
            )
    return path


def _verify_cli(capsys, path) -> tuple[int, str]:
    code = main(["ledger", "verify", "--ledger", str(path)])
    return code, capsys.readouterr().out


def test_append_read_and_restart(tmp_path):
    path = tmp_path / "state" / "ledger.sqlite"
    with Ledger(path) as led:
        a = led.append("request", {"x": 1}, job_id="j1")
        b = led.append("finish", {"state": "succeeded"}, job_id="j1")
        led.save_job("j1", {"job_id": "j1", "state": "succeeded", "result": {"sum": 2**70}})
        led.save_state("audit", {"answered": {"k": [1, 2]}})
    assert (a.seq, b.seq) == (1, 2) and a.prev_hash == GENESIS and b.prev_hash == a.hash
    with Ledger(path) as led:
        assert [e.kind for e in led.entries(job_id="j1")] == ["request", "finish"]
        assert led.load_job("j1")["result"]["sum"] == 2**70
        assert led.load_state("audit") == {"answered": {"k": [1, 2]}}
        assert led.jobs(states=["succeeded"])[0]["job_id"] == "j1"
        state_entry = led.entries(since=2)[0]
        assert state_entry.kind == "state" and state_entry.prev_hash == b.hash
        assert state_entry.record["key"] == "audit" and len(state_entry.record["sha256"]) == 64
        c = led.append("node", {"event": "start"})
        assert c.seq == 4 and c.prev_hash == state_entry.hash
        assert led.verify().ok
    assert (path.stat().st_mode & 0o777) == 0o600


def test_concurrent_appends_keep_one_chain(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as led:
        threads = [
            threading.Thread(
                target=lambda k=k: [led.append("t", {"k": k, "i": i}) for i in range(50)]
            )
            for k in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        report = led.verify()
    assert report.ok and report.entries == 400, report.problems
    assert [e.seq for e in Ledger(path).entries()] == list(range(1, 401))


def test_an_untouched_ledger_verifies(tmp_path, capsys):
    path = _fill(tmp_path / "l.sqlite")
    code, out = _verify_cli(capsys, path)
    assert code == 0 and "ledger OK: 12 entries" in out


def _db(path):
    return sqlite3.connect(path, isolation_level=None)


def test_an_edited_entry_is_reported(tmp_path, capsys):
    path = _fill(tmp_path / "l.sqlite")
    with _db(path) as db:
        db.execute("UPDATE entries SET record = ? WHERE seq = 5", (json.dumps({"i": 99}),))
    code, out = _verify_cli(capsys, path)
    assert code == 1 and "entry 5 was edited" in out


def test_an_edit_with_a_recomputed_hash_breaks_the_next_link(tmp_path, capsys):
    from ppdm.service.ledger import entry_hash

    path = _fill(tmp_path / "l.sqlite")
    with _db(path) as db:
        seq, time, kind, job, prev = db.execute(
            "SELECT seq, time, kind, job_id, prev_hash FROM entries WHERE seq = 7"
        ).fetchone()
        forged = {"i": 6, "parties": ["alice"], "big": 0}
        db.execute(
            "UPDATE entries SET record = ?, hash = ? WHERE seq = 7",
            (json.dumps(forged), entry_hash(seq, time, kind, job, forged, prev)),
        )
    code, out = _verify_cli(capsys, path)
    assert code == 1 and "entry 8 does not link to entry 7" in out
    assert "entry 7 was edited" not in out


def test_a_deleted_entry_is_reported(tmp_path, capsys):
    path = _fill(tmp_path / "l.sqlite")
    with _db(path) as db:
        db.execute("DELETE FROM entries WHERE seq = 4")
    code, out = _verify_cli(capsys, path)
    assert code == 1 and "entry 4 is missing" in out


def test_reordered_entries_are_reported(tmp_path, capsys):
    path = _fill(tmp_path / "l.sqlite")
    with _db(path) as db:
        cols = "seq, time, kind, job_id, record, prev_hash, hash"
        r3 = db.execute(f"SELECT {cols} FROM entries WHERE seq = 3").fetchone()
        r6 = db.execute(f"SELECT {cols} FROM entries WHERE seq = 6").fetchone()
        sets = "seq=?, time=?, kind=?, job_id=?, record=?, prev_hash=?, hash=?"
        db.execute(f"UPDATE entries SET {sets} WHERE rowid = 3", r6)
        db.execute(f"UPDATE entries SET {sets} WHERE rowid = 6", r3)
    code, out = _verify_cli(capsys, path)
    assert code == 1 and "out of order" in out


def test_entries_removed_from_the_end_are_reported(tmp_path, capsys):
    path = _fill(tmp_path / "l.sqlite")
    with _db(path) as db:
        db.execute("DELETE FROM entries WHERE seq > 10")
    code, out = _verify_cli(capsys, path)
    assert code == 1 and "the last 2 entries were removed" in out
    (tmp_path / "l.sqlite.head").unlink()
    code, out = _verify_cli(capsys, path)
    assert code == 1 and "anchor file is missing" in out


def test_verify_reads_only_and_errors_are_one_line(tmp_path, capsys):
    assert main(["ledger", "verify", "--ledger", str(tmp_path / "none.sqlite")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    assert main(["ledger", "verify", "--ledger", str(tmp_path / "junk.sqlite")]) == 2
    assert "not a ppdm ledger" in capsys.readouterr().err
    assert not (tmp_path / "none.sqlite").exists()


def test_show_prints_entries(tmp_path, capsys):
    path = _fill(tmp_path / "l.sqlite", n=6)
    assert main(["ledger", "show", "--ledger", str(path), "--job", "j1", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(x)["seq"] for x in lines] == [2, 5]
    assert main(["ledger", "show", "--ledger", str(path), "--since", "4"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seq=st.integers(1, 8), pos=st.integers(0, 200), byte=st.integers(32, 126))
def test_any_change_to_a_stored_record_is_detected(tmp_path_factory, seq, pos, byte):
    path = _fill(tmp_path_factory.mktemp("h") / "l.sqlite", n=8)
    with _db(path) as db:
        (text,) = db.execute("SELECT record FROM entries WHERE seq = ?", (seq,)).fetchone()
        i = pos % len(text)
        changed = text[:i] + chr(byte) + text[i + 1 :]
        if changed == text:
            return
        db.execute("UPDATE entries SET record = ? WHERE seq = ?", (changed, seq))
    report = verify_file(path)
    assert not report.ok and any(f"entry {seq}" in p for p in report.problems)


@pytest.mark.grpc
def test_job_states_survive_a_node_restart(tmp_path):
    from ppdm.service.client import job_status
    from ppdm.testbed.consortia import GrpcTestbed

    with GrpcTestbed(["alice", "bob", "carol"], tmp_path / "bed", timeout=20) as bed:
        doc = bed.run_job("secure-sum")
        assert doc["state"] == "succeeded", doc["error"]
        refused = bed.run_job("secure-sum", parties=["alice", "bob"])
        assert refused["state"] == "refused"
        bed.restart("bob")
        status = job_status(bed.settings["alice"], doc["job_id"])
        assert status["bob"]["state"] == "succeeded"
        assert status["bob"]["result"]["sum"] == doc["parties"]["bob"]["result"]["sum"]
        assert job_status(bed.settings["alice"], refused["job_id"])["bob"]["state"] == "refused"
        assert main(["ledger", "verify", "--settings", str(bed.settings_path("bob"))]) == 0
        again = bed.run_job("secure-sum", initiator="bob")
        assert again["state"] == "succeeded", again["error"]
        # A new policy takes effect without a restart (on change, and on SIGHUP).
        bed.set_policy("carol", "version = 1\n[jobs.secure-sum]\nallow = false\n")
        off = bed.run_job("secure-sum", initiator="bob")
        assert (
            off["state"] == "refused"
            and off["decisions"]["carol"]["rule"] == "jobs.secure-sum.allow"
        )
        import signal

        loads = bed.log("carol").count("policy loaded from")
        bed.send_signal("carol", signal.SIGHUP)
        deadline = time.monotonic() + 10
        while bed.log("carol").count("policy loaded from") == loads:
            assert time.monotonic() < deadline, "SIGHUP did not reload the policy"
            time.sleep(0.1)
        bed.policy_path("carol").write_text("version = 1\n[defaults]\nmin_parties = 'many'\n")
        time.sleep(0.5)  # settled
        kept = bed.run_job("secure-sum", initiator="bob")
        assert kept["state"] == "refused", (kept["decisions"], bed.log("carol")[-3000:])
        assert "policy not reloaded" in bed.log("carol")
