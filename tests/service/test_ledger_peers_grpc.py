"""Ledger heads over real ``ppdm party serve`` processes: signed heads travel with every
job, each member gets back only the heads others hold *of it*, a forged head is refused,
and a whole rewrite of a member's ledger -- every hash and the anchor recomputed, a head
re-signed with a fresh key -- passes the local check but not the peers' heads.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ppdm.cli.main import main
from ppdm.jobs.registry import get_job
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.service.client import NodeClient
from ppdm.service.ledger import (
    entry_hash,
    head_from_proto,
    head_signed_by,
    head_to_proto,
    ledger_path,
    sign_head,
)
from ppdm.service.node import to_struct
from ppdm.testbed.consortia import GrpcTestbed

pytestmark = pytest.mark.grpc

PARTIES = ["alice", "bob", "carol"]


def _ro(bed, party):
    return sqlite3.connect(f"file:{ledger_path(bed.settings[party])}?mode=ro", uri=True)


def _held(bed, holder, of):
    """``(seq, hash)`` of every head ``holder``'s ledger keeps of ``of``."""
    db = _ro(bed, holder)
    try:
        return db.execute(
            "SELECT seq, hash FROM peer_heads WHERE party = ? ORDER BY seq", (of,)
        ).fetchall()
    finally:
        db.close()


def _kinds(bed, party):
    db = _ro(bed, party)
    try:
        return [k for (k,) in db.execute("SELECT kind FROM entries ORDER BY rowid")]
    finally:
        db.close()


def _verify(capsys, bed, party, *extra):
    code = main(["ledger", "verify", "--settings", str(bed.settings_path(party)), *extra])
    return code, capsys.readouterr().out


def _offer_head(bed, sender, to, head_msg):
    """``sender``'s node identity proposes a job to ``to`` carrying ``head_msg``, then
    withdraws it."""
    spec = get_job("secure-sum")
    settings = bed.settings[sender]
    request = pb.JobRequest(
        consortium=settings.consortium.name,
        job_id=uuid.uuid4().hex,
        protocol=spec.name,
        params=to_struct(dict(spec.params({}))),
        initiator=sender,
        parties=list(PARTIES),
        timeout_s=20.0,
        roster_version=settings.consortium.version,
        initiator_head=head_msg,
    )
    with NodeClient(settings) as client:
        reply = client.stub(to).ProposeJob(request, timeout=10.0)
        client.stub(to).CancelJob(pb.JobRef(job_id=request.job_id), timeout=10.0)
    return reply


def _fresh_key_pem() -> bytes:
    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def test_heads_travel_with_jobs_and_come_back_only_to_their_member(tmp_path, capsys):
    with GrpcTestbed(PARTIES, tmp_path / "bed", timeout=20) as bed:
        for initiator in ("alice", "bob"):
            doc = bed.run_job("secure-sum", initiator=initiator)
            assert doc["state"] == "succeeded", doc["error"]
        # The initiator's head went out in the request, the others' in their answers.
        assert _held(bed, "bob", "alice") and _held(bed, "carol", "alice")
        assert _held(bed, "alice", "bob") and _held(bed, "alice", "carol")
        assert _held(bed, "bob", "carol") and _held(bed, "carol", "bob")
        assert "peer-head" in _kinds(bed, "bob") and "peer-head" in _kinds(bed, "alice")
        # Jobs one after the other never look like a rollback.
        assert not any("peer-head-conflict" in _kinds(bed, p) for p in PARTIES)
        # LedgerHeads answers carol with carol's heads only, though bob holds alice's.
        cons = bed.settings["carol"].consortium
        with NodeClient(bed.settings["carol"]) as client:
            reply = client.stub("bob").LedgerHeads(pb.LedgerHeadsRequest(), timeout=10.0)
        got = [head_from_proto(h) for h in reply.heads]
        assert [(h.seq, h.hash) for h in got] == _held(bed, "bob", "carol")
        assert {h.party for h in got} == {"carol"}
        cert = cons.party("carol").certificate_pem
        assert all(head_signed_by(h, consortium=cons.name, certificate_pem=cert) for h in got)
        with NodeClient(bed.settings["carol"]) as client:  # a page past any seq: empty
            far = client.stub("bob").LedgerHeads(
                pb.LedgerHeadsRequest(after_seq=2**64 - 1), timeout=10.0
            )
        assert not far.heads and not far.more
        # A head signed with a fresh key, or with another member's key, is refused.
        before = _held(bed, "bob", "alice")
        latest = before[-1]
        for key_pem in (_fresh_key_pem(), bed.settings["carol"].private_key_pem):
            forged = sign_head(
                key_pem, consortium=cons.name, party="alice", seq=latest[0] + 1000, digest="ab" * 32
            )
            _offer_head(bed, "alice", "bob", head_to_proto(forged))
        assert _held(bed, "bob", "alice") == before
        assert _kinds(bed, "bob").count("peer-head-refused") == 2
        assert "ledger head from alice refused" in bed.log("bob")
        # Concurrent jobs may deliver heads out of order (an "older" conflict at worst):
        # never reported as a rewrite of an honest ledger.
        with ThreadPoolExecutor(3) as pool:
            docs = list(pool.map(lambda p: bed.run_job("secure-sum", initiator=p), PARTIES))
        assert all(d["state"] in ("succeeded", "refused") for d in docs), docs
        # Every member's chain matches what its peers hold.
        for party in PARTIES:
            code, out = _verify(capsys, bed, party)
            assert code == 0, out
            others = [p for p in PARTIES if p != party]
            assert all(p in out for p in others) and "online" in out, out


def _rewrite(path, *, seq: int, change) -> None:
    """The operator's whole rewrite: entry ``seq``'s record changed, every hash after it
    and the head anchor recomputed."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        rows = db.execute(
            "SELECT rowid, seq, time, kind, job_id, record FROM entries ORDER BY rowid"
        ).fetchall()
        prev = "0" * 64
        for rowid, s, time, kind, job, text in rows:
            rec = json.loads(text)
            if s == seq:
                rec = change(rec)
            digest = entry_hash(s, time, kind, job, rec, prev)
            db.execute(
                "UPDATE entries SET record = ?, prev_hash = ?, hash = ? WHERE rowid = ?",
                (json.dumps(rec, sort_keys=True, separators=(",", ":")), prev, digest, rowid),
            )
            prev = digest
    finally:
        db.close()
    path.with_name(path.name + ".head").write_text(json.dumps({"seq": rows[-1][1], "hash": prev}))


def test_a_whole_rewrite_is_caught_only_by_the_heads_peers_hold(tmp_path, capsys):
    with GrpcTestbed(PARTIES, tmp_path / "bed", timeout=20) as bed:
        first = bed.run_job("secure-sum", initiator="alice")
        second = bed.run_job("secure-sum", initiator="alice")
        assert first["state"] == second["state"] == "succeeded"
        db = _ro(bed, "alice")
        (target,) = db.execute(
            "SELECT seq FROM entries WHERE kind = 'request' AND job_id = ?", (first["job_id"],)
        ).fetchone()
        db.close()
        held_by_bob = _held(bed, "bob", "alice")
        assert max(s for s, _ in held_by_bob) > target  # the second request carried it
        code, out = _verify(capsys, bed, "alice")
        assert code == 0, out

        # Alice's operator rewrites history: the first job "was refused" at alice.
        bed.terminate("alice")
        path = ledger_path(bed.settings["alice"])
        _rewrite(path, seq=target, change=lambda r: {**r, "decision": "refuse"})
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        seq, digest = db.execute("SELECT seq, hash FROM entries ORDER BY rowid DESC").fetchone()
        db.close()
        # ...and re-signs the new head with a fresh key for the peers: refused.
        cons = bed.settings["alice"].consortium
        forged = sign_head(
            _fresh_key_pem(), consortium=cons.name, party="alice", seq=seq + 5, digest=digest
        )
        _offer_head(bed, "alice", "bob", head_to_proto(forged))
        assert _held(bed, "bob", "alice") == held_by_bob

        # The local check finds nothing; the online one names the peers and the entries.
        code, out = _verify(capsys, bed, "alice", "--offline")
        assert code == 0 and "ledger OK" in out, out
        code, out = _verify(capsys, bed, "alice")
        assert code == 1, out
        rewrites = [line for line in out.splitlines() if "rewrite" in line]
        assert any("bob" in line for line in rewrites), out
        assert any("carol" in line for line in rewrites), out
        bad_seqs = {s for s, _ in held_by_bob if s >= target}
        assert any(f"entry {s} " in out for s in bad_seqs), out
        assert not any(f"entry {s} " in out for s, _ in held_by_bob if s < target), out

        # Alice runs on over the rewritten chain and sends new heads signed with its
        # real key: they are accepted (higher seq), but the old ones are still held.
        bed.restart("alice")
        again = bed.run_job("secure-sum", initiator="alice")
        assert again["state"] == "succeeded", again["error"]
        assert len(_held(bed, "bob", "alice")) > len(held_by_bob)
        code, out = _verify(capsys, bed, "alice")
        assert code == 1 and "rewrite" in out, out
        # The other members' ledgers are untouched.
        for party in ("bob", "carol"):
            code, out = _verify(capsys, bed, party)
            assert code == 0, out
