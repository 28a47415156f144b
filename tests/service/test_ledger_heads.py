"""Signed ledger heads, the heads a node keeps of its peers, and state documents in the chain.

Every test here plays the operator who wants to change its own ledger (or a peer who
wants to plant heads) and checks that the change is reported; the gRPC tier is
``test_ledger_peers_grpc.py``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from ppdm.cli.main import main
from ppdm.errors import ProtocolError
from ppdm.parties.consortium import init_consortium, load_settings
from ppdm.service.ledger import (
    Ledger,
    SignedHead,
    StateTampered,
    check_head,
    entry_hash,
    head_signed_by,
    read_state,
    sign_head,
    verify_file,
)

PARTIES = ["alice", "bob", "carol"]


@pytest.fixture(scope="module")
def roster(tmp_path_factory):
    out = tmp_path_factory.mktemp("net")
    init_consortium(out, PARTIES, base_port=50300, rng=11)
    return {p: load_settings(out / f"{p}.toml") for p in PARTIES}


def _head(settings, seq: int, tag: str = "") -> SignedHead:
    digest = hashlib.sha256(f"{settings.name}:{seq}:{tag}".encode()).hexdigest()
    return sign_head(
        settings.private_key_pem,
        consortium=settings.consortium.name,
        party=settings.name,
        seq=seq,
        digest=digest,
    )


def _key_pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _db(path):
    return sqlite3.connect(path, isolation_level=None)


# Signatures -------------------------------------------------------------------------------


def test_a_head_verifies_only_against_its_own_party_and_contents(roster):
    alice, bob = roster["alice"], roster["bob"]
    cons = alice.consortium
    head = _head(alice, 7)
    check_head(head, consortium=cons, sender="alice")
    cert = cons.party("alice").certificate_pem
    assert head_signed_by(head, consortium=cons.name, certificate_pem=cert)
    # Any change to what was signed breaks the signature: seq, hash, party, consortium.
    moved = SignedHead("alice", 8, head.hash, head.signature)
    other_hash = SignedHead("alice", 7, "0" * 64, head.signature)
    for forged in (moved, other_hash):
        assert not head_signed_by(forged, consortium=cons.name, certificate_pem=cert)
    assert not head_signed_by(head, consortium="another-consortium", certificate_pem=cert)
    # Bob's certificate does not verify Alice's signature.
    assert not head_signed_by(
        head, consortium=cons.name, certificate_pem=cons.party("bob").certificate_pem
    )
    # A head signed by another member's key, claiming to be Alice's, is refused...
    by_bob = sign_head(
        bob.private_key_pem, consortium=cons.name, party="alice", seq=9, digest=head.hash
    )
    with pytest.raises(ProtocolError, match="signature"):
        check_head(by_bob, consortium=cons, sender="alice")
    # ...and so is one signed with a fresh key (ECDSA or Ed25519) the operator made.
    for fresh in (ec.generate_private_key(ec.SECP256R1()), ed25519.Ed25519PrivateKey.generate()):
        forged = sign_head(
            _key_pem(fresh), consortium=cons.name, party="alice", seq=9, digest=head.hash
        )
        with pytest.raises(ProtocolError, match="signature"):
            check_head(forged, consortium=cons, sender="alice")
    # A member cannot hand over someone else's head as its own, nor a malformed one.
    with pytest.raises(ProtocolError, match="not the sender's own"):
        check_head(_head(bob, 3), consortium=cons, sender="alice")
    for bad in (
        SignedHead("alice", 0, head.hash, head.signature),
        SignedHead("alice", 7, head.hash.upper(), head.signature),
        SignedHead("alice", 7, head.hash[:-1], head.signature),
        SignedHead("alice", 7, head.hash, b""),
        SignedHead("alice", 7, head.hash, b"x" * 5000),
    ):
        with pytest.raises(ProtocolError):
            check_head(bad, consortium=cons, sender="alice")


def test_ed25519_keys_sign_heads_too():
    import datetime as dt

    from cryptography import x509
    from cryptography.x509.oid import NameOID

    key = ed25519.Ed25519PrivateKey.generate()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, None)
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    head = sign_head(_key_pem(key), consortium="c", party="alice", seq=3, digest="ab" * 32)
    assert head_signed_by(head, consortium="c", certificate_pem=pem)
    assert not head_signed_by(
        SignedHead("alice", 4, head.hash, head.signature), consortium="c", certificate_pem=pem
    )


# Held heads: accepted, known, conflicts, refused -------------------------------------------


def test_heads_a_node_keeps_of_a_peer(roster, tmp_path):
    alice = roster["alice"]
    cons = alice.consortium
    with Ledger(tmp_path / "bob.sqlite") as led:
        led.append("node", {"event": "start"})

        def receive(head):
            return led.receive_head(head, consortium=cons, sender="alice")

        h5, h7 = _head(alice, 5), _head(alice, 7)
        assert receive(h5) == "accepted"
        assert receive(h5) == "known"
        assert receive(h7) == "accepted"
        # Lower than the latest held: a rollback (or two heads crossed) -> conflict.
        assert receive(_head(alice, 6)) == "conflict"
        # Same seq, another hash: two signed histories -> conflict.
        assert receive(_head(alice, 7, "rewritten")) == "conflict"
        assert receive(_head(alice, 7, "rewritten")) == "known"  # recorded once
        # Forged: refused, not kept.
        forged = sign_head(
            roster["carol"].private_key_pem,
            consortium=cons.name,
            party="alice",
            seq=99,
            digest="ab" * 32,
        )
        assert receive(forged) == "refused"
        # A bob head sent by alice is refused too.
        assert led.receive_head(_head(roster["bob"], 50), consortium=cons, sender="alice") == (
            "refused"
        )
        held, more = led.peer_heads("alice")
        assert [(h.seq, h.hash) for h in held] == [(5, h5.hash), (7, h7.hash)] and not more
        assert all(
            head_signed_by(
                h, consortium=cons.name, certificate_pem=cons.party("alice").certificate_pem
            )
            for h in held
        )
        conflicts = led.peer_head_conflicts("alice")
        assert sorted(h.seq for h in conflicts) == [6, 7]
        assert led.peer_heads("carol") == ([], False)  # nothing about anyone else
        kinds = [e.kind for e in led.entries()]
        assert kinds.count("peer-head") == 2
        assert kinds.count("peer-head-conflict") == 2
        assert kinds.count("peer-head-refused") == 2
        reasons = [e.record["reason"] for e in led.entries() if e.kind == "peer-head-conflict"]
        assert reasons == ["older", "fork"]
        assert led.verify().ok, led.verify().problems
        # Paging.
        for s in range(8, 20):
            assert receive(_head(alice, s)) == "accepted"
        page, more = led.peer_heads("alice", limit=5)
        assert [h.seq for h in page] == [5, 7, 8, 9, 10] and more
        page, more = led.peer_heads("alice", after_seq=10, limit=50)
        assert page[0].seq == 11 and page[-1].seq == 19 and not more


def test_held_heads_cannot_be_dropped_or_planted_beside_the_chain(roster, tmp_path):
    alice = roster["alice"]
    path = tmp_path / "bob.sqlite"
    with Ledger(path) as led:
        for s in (3, 8):
            led.receive_head(_head(alice, s), consortium=alice.consortium, sender="alice")
        led.receive_head(_head(alice, 4), consortium=alice.consortium, sender="alice")
    assert verify_file(path).ok
    with _db(path) as db:
        db.execute("DELETE FROM peer_heads WHERE seq = 8")
        db.execute("DELETE FROM peer_head_conflicts")
    report = verify_file(path)
    assert not report.ok
    assert any("seq 8" in p and "deleted" in p for p in report.problems), report.problems
    assert any("seq 4" in p and "deleted" in p for p in report.problems), report.problems
    with _db(path) as db:
        db.execute("INSERT INTO peer_heads VALUES ('alice', 8, ?, 'ab', 'now')", ("cd" * 32,))
    report = verify_file(path)
    assert any("seq 8" in p and "added beside" in p for p in report.problems), report.problems


# State documents in the chain ----------------------------------------------------------------


def _stored_state(path, key):
    with _db(path) as db:
        return json.loads(db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()[0])


@pytest.mark.parametrize("change", ["edit", "delete", "plant"])
def test_a_state_changed_beside_the_chain_is_refused_and_reported(tmp_path, capsys, change):
    path = tmp_path / "l.sqlite"
    history = {"answered": {"inputs.x@v1": [{"job_id": "j1", "parties": ["a", "b", "c"]}]}}
    with Ledger(path) as led:
        led.append("node", {"event": "start"})
        led.save_state("disclosure-audit", history)
        assert led.load_state("disclosure-audit") == history
    assert read_state(path, "disclosure-audit") == history
    with _db(path) as db:
        if change == "edit":  # the operator forgets an answered query
            db.execute(
                "UPDATE state SET value = ? WHERE key = 'disclosure-audit'",
                (json.dumps({"answered": {}}),),
            )
        elif change == "delete":
            db.execute("DELETE FROM state WHERE key = 'disclosure-audit'")
        else:
            db.execute("INSERT INTO state VALUES ('other', '{\"answered\": {}}')")
    key = "other" if change == "plant" else "disclosure-audit"
    with Ledger(path) as led, pytest.raises(StateTampered):
        led.load_state(key)
    with pytest.raises(StateTampered):
        read_state(path, key)
    code = main(["ledger", "verify", "--ledger", str(path)])
    out = capsys.readouterr().out
    assert code == 1 and f"state {key!r}" in out, out


def test_a_state_and_its_entry_edited_together_break_the_chain(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        led.save_state("audit", {"answered": {"k": [1]}})
        led.append("node", {"event": "after"})
    forged = {"answered": {}}
    digest = hashlib.sha256(json.dumps(forged, sort_keys=True, separators=(",", ":")).encode())
    with _db(path) as db:
        db.execute("UPDATE state SET value = ?", (json.dumps(forged),))
        db.execute(
            "UPDATE entries SET record = ? WHERE kind = 'state'",
            (json.dumps({"key": "audit", "sha256": digest.hexdigest()}),),
        )
    with Ledger(path) as led, pytest.raises(StateTampered, match="edited"):
        led.load_state("audit")
    report = verify_file(path)
    assert any("entry 1 was edited" in p for p in report.problems), report.problems


def test_an_old_ledger_gets_its_state_chained(tmp_path):
    path = tmp_path / "old.sqlite"
    with Ledger(path) as led:
        led.append("node", {"event": "start"})
    with _db(path) as db:  # as a ppdm.ledger/1 node left it
        db.execute("UPDATE meta SET value = 'ppdm.ledger/1' WHERE key = 'schema'")
        db.execute("INSERT INTO state VALUES ('audit', '{\"answered\": {\"k\": [1]}}')")
    assert verify_file(path).ok
    with Ledger(path) as led:
        assert led.load_state("audit") == {"answered": {"k": [1]}}
        last = led.entries()[-1]
        assert last.kind == "state" and last.record["migrated"] is True
        assert led.verify().ok


def test_an_unchanged_state_and_chain_verify(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        for i in range(3):
            led.save_state("audit", {"answered": {"k": list(range(i))}, "big": 2**70})
        assert led.load_state("audit")["big"] == 2**70
    report = verify_file(path)
    assert report.ok and report.entries == 3, report.problems


# Every field of every entry ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("seq", 40),
        ("time", "2020-01-01T00:00:00+00:00"),
        ("kind", "approval"),
        ("job_id", "another-job"),
        ("record", json.dumps({"decision": "accept"})),
        ("prev_hash", "1" * 64),
        ("hash", "2" * 64),
    ],
)
def test_an_edit_of_any_field_is_reported(tmp_path, column, value):
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        for i in range(6):
            led.append("request", {"decision": "refuse", "i": i}, job_id=f"j{i}")
    assert verify_file(path).ok
    with _db(path) as db:
        db.execute(f"UPDATE entries SET {column} = ? WHERE seq = 3", (value,))
    report = verify_file(path)
    assert not report.ok
    named = "entry 3" if column != "seq" else "entry 40"
    assert any(named in p or "entry 4 does not link" in p for p in report.problems), report.problems


def test_a_consistent_whole_rewrite_passes_the_local_check(tmp_path):
    """What the peers' heads are for: recomputing every hash and the anchor leaves nothing
    for the local check to find (the gRPC tier shows the online check reporting it)."""
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        for i in range(6):
            led.append("request", {"decision": "refuse", "i": i}, job_id=f"j{i}")
    _rewrite(path, seq=2, record={"decision": "accept", "i": 1})
    assert verify_file(path).ok


def _rewrite(path, *, seq: int, record: dict) -> None:
    """Replace entry ``seq``'s record and recompute every hash after it and the anchor."""
    with _db(path) as db:
        rows = db.execute(
            "SELECT rowid, seq, time, kind, job_id, record FROM entries ORDER BY rowid"
        ).fetchall()
        prev = "0" * 64
        for rowid, s, time, kind, job, text in rows:
            rec = record if s == seq else json.loads(text)
            digest = entry_hash(s, time, kind, job, rec, prev)
            db.execute(
                "UPDATE entries SET record = ?, prev_hash = ?, hash = ? WHERE rowid = ?",
                (json.dumps(rec, sort_keys=True, separators=(",", ":")), prev, digest, rowid),
            )
            prev = digest
    path.with_name(path.name + ".head").write_text(json.dumps({"seq": rows[-1][1], "hash": prev}))


# Two writers (the node and `ppdm job run`) on one file ----------------------------------------


def test_two_writers_on_one_file_keep_one_chain(tmp_path):
    import threading

    path = tmp_path / "l.sqlite"
    node, client = Ledger(path), Ledger(path)
    try:
        threads = [
            threading.Thread(
                target=lambda led=led, k=k: [led.append("t", {"k": k, "i": i}) for i in range(60)]
            )
            for k, led in enumerate([node, client, node, client])
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        node.save_state("audit", {"n": 1})
        assert client.load_state("audit") == {"n": 1}
        assert node.head() == client.head()
    finally:
        node.close()
        client.close()
    report = verify_file(path)
    assert report.ok and report.entries == 241, report.problems


# The online check's logic, with the peers' answers scripted -----------------------------------


class _FakeChannel:
    def __init__(self, peer: str) -> None:
        self.peer = peer

    def unary_unary(self, *args, **kwargs):
        return self.peer  # the stub's methods become the peer's name

    def stream_unary(self, *args, **kwargs):
        return self.peer

    def close(self) -> None:
        pass


def test_the_online_check_compares_each_held_head_with_the_chain(roster, tmp_path, monkeypatch):
    import grpc

    import ppdm.parties.grpc_net as grpc_net
    import ppdm.service.ledger_verify as ledger_mod
    from ppdm.service.ledger import head_to_proto, ledger_path, verify_online

    alice = roster["alice"]
    path = ledger_path(alice)
    with Ledger(path) as led:
        for i in range(6):
            led.append("request", {"i": i}, job_id=f"j{i}")
        signed = {s: None for s in (2, 4, 6)}
        chain = {e.seq: e.hash for e in led.entries()}
    for s in signed:
        signed[s] = sign_head(
            alice.private_key_pem,
            consortium=alice.consortium.name,
            party="alice",
            seq=s,
            digest=chain[s],
        )
    answers: dict[str, object] = {}

    def fake_fetch(stub, *, timeout):
        answer = answers[stub.LedgerHeads]
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(grpc_net, "open_channel", lambda settings, peer: _FakeChannel(peer))
    monkeypatch.setattr(ledger_mod, "_fetch_heads", fake_fetch)

    # bob holds heads 2 and 6, carol only a head "of alice" signed by bob's key: carol
    # cannot make alice's check fail with heads alice never signed.
    by_bob = sign_head(
        roster["bob"].private_key_pem,
        consortium=alice.consortium.name,
        party="alice",
        seq=3,
        digest="ab" * 32,
    )
    answers["bob"] = ([head_to_proto(signed[2]), head_to_proto(signed[6])], [])
    answers["carol"] = ([head_to_proto(by_bob)], [])
    report = verify_online(alice)
    assert report.ok and report.checked == {"bob": 2, "carol": 0}, report
    assert any("carol holds 1 head(s) without" in n for n in report.notes)

    # An unreachable peer is a note; the check rests on the others.
    class Down(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.UNAVAILABLE

    answers["carol"] = Down()
    report = verify_online(alice)
    assert report.ok and "carol not asked (UNAVAILABLE)" in " ".join(report.notes)

    # Truncation with the anchor moved back: the local check sees nothing, bob's head does.
    with _db(path) as db:
        db.execute("DELETE FROM entries WHERE seq > 4")
        (h4,) = db.execute("SELECT hash FROM entries WHERE seq = 4").fetchone()
    path.with_name(path.name + ".head").write_text(json.dumps({"seq": 4, "hash": h4}))
    assert verify_file(path).ok
    report = verify_online(alice)
    assert not report.ok
    assert report.problems == [
        "rewrite: bob holds this party's signed head at entry 6, but the ledger ends at "
        "entry 4 (entries were removed)"
    ]
    # A head recorded as a conflict is checked too (here a fork the peer kept).
    other = sign_head(
        alice.private_key_pem,
        consortium=alice.consortium.name,
        party="alice",
        seq=2,
        digest="cd" * 32,
    )
    answers["bob"] = ([head_to_proto(signed[2])], [head_to_proto(other)])
    report = verify_online(alice)
    assert [p for p in report.problems if "entry 2 " in p and "bob" in p], report.problems
    # A head of another party in the answer is malformed, not a verdict on alice.
    answers["bob"] = ([head_to_proto(_head(roster["carol"], 2))], [])
    report = verify_online(alice)
    assert report.problems == ["bob answered with a malformed head"]


def test_a_node_does_not_start_on_an_audit_history_changed_beside_the_chain(roster):
    from ppdm.service.disclosure import STATE_KEY
    from ppdm.service.ledger import ledger_path
    from ppdm.service.node import PartyNode

    carol = roster["carol"]
    path = ledger_path(carol)
    history = {"answered": {"inputs.secure_sum@v": [{"job_id": "j", "parties": PARTIES}]}}
    with Ledger(path) as led:
        led.save_state(STATE_KEY, history)
    with _db(path) as db:  # the operator drops the answered query
        db.execute("UPDATE state SET value = ?", (json.dumps({"answered": {}}),))
    with pytest.raises(StateTampered, match=STATE_KEY):
        PartyNode(carol)
