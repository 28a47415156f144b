"""Membership and certificates as commands (issue 16, item 2): rosters signed by the
consortium CA with a version; nodes take a newer signed roster pushed by a member or
reloaded on SIGHUP, refuse older, unsigned or foreign ones, refuse jobs across roster
versions, and pin changed certificates at once, inbound and outbound."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import grpc
import pytest

from ppdm.errors import ConfigError
from ppdm.parties.consortium import (
    init_consortium,
    load_consortium,
    load_settings,
)
from ppdm.parties.grpc_net import open_channel
from ppdm.parties.roster import (
    add_party,
    check_successor,
    load_ca_key,
    remove_party,
    roster_toml,
    rotate_certificate,
    sign_roster,
)
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.service.client import health, push_roster, run_job
from ppdm.testbed.consortia import LoopbackConsortium, free_ports

PASS = b"correct horse battery staple"


# Files ------------------------------------------------------------------------------------


@pytest.fixture
def roster(tmp_path):
    path = init_consortium(
        tmp_path,
        ["alice", "bob", "carol"],
        ports=free_ports(3),
        keep_ca_key=True,
        ca_passphrase=PASS,
    )
    return path, load_ca_key(tmp_path / "private" / "ca.key", PASS)


def test_init_signs_version_one_and_any_edit_breaks_it(roster):
    path, _ = roster
    c = load_consortium(path)
    assert c.version == 1 and c.signed
    text = path.read_text()
    for edit in [
        lambda t: t.replace(c.parties[1].address, "127.0.0.1:1"),  # an address
        lambda t: t.replace("version = 1", "version = 7"),  # the version
        lambda t: t.replace('name = "carol"', 'name = "carl"'),  # a name
    ]:
        path.write_text(edit(text))
        with pytest.raises(ConfigError, match=r"signature|certificate of"):
            load_consortium(path)
    path.write_text(text.replace("version = 1", "version = 2").split("signature")[0] + "\n")
    with pytest.raises(ConfigError):
        load_consortium(path)


def test_ca_key_passphrase(roster, tmp_path):
    with pytest.raises(ConfigError, match="encrypted"):
        load_ca_key(tmp_path / "private" / "ca.key")
    with pytest.raises(ConfigError, match="wrong passphrase"):
        load_ca_key(tmp_path / "private" / "ca.key", b"nope")


def test_changes_bump_the_version_and_verify(roster, tmp_path):
    path, key = roster
    v1 = load_consortium(path)
    v2 = add_party(path, key, "dave", "127.0.0.1:1")
    assert v2.version == 2 and "dave" in load_consortium(path).names
    assert (tmp_path / "private" / "dave.key").stat().st_mode & 0o077 == 0
    old_bob = v2.party("bob").fingerprint
    v3 = rotate_certificate(path, key, "bob")
    assert v3.version == 3 and load_consortium(path).party("bob").fingerprint != old_bob
    # bob's settings name the files rotate-cert rewrote: they load against the new roster
    assert load_settings(tmp_path / "bob.toml").consortium.version == 3
    v4 = remove_party(path, key, "carol")
    assert v4.version == 4 and "carol" not in load_consortium(path).names
    with pytest.raises(ConfigError, match="not a member"):
        remove_party(path, key, "carol")
    with pytest.raises(ConfigError, match="already a member"):
        add_party(path, key, "alice", "127.0.0.1:2")
    # the successor rule
    check_successor(v1, load_consortium(path))
    for older in (v1, v2, v3):
        with pytest.raises(ConfigError, match="not newer"):
            check_successor(v4, older)
    with pytest.raises(ConfigError, match="not signed"):
        check_successor(v1, replace(v4, signature=None))
    with pytest.raises(ConfigError, match="consortium"):
        check_successor(v1, replace(v4, name="other"))
    # a key from another CA cannot sign this roster
    other = init_consortium(tmp_path / "other", ["x"], keep_ca_key=True)
    with pytest.raises(ConfigError, match="does not belong"):
        sign_roster(path, load_ca_key(other.parent / "private" / "ca.key"))


def test_cli_commands(roster, tmp_path):
    path, _ = roster
    env = {**os.environ, "CA_PW": PASS.decode()}
    base = [sys.executable, "-m", "ppdm", "consortium"]
    key = ["--roster", str(path), "--ca-key", str(tmp_path / "private" / "ca.key")]
    ok = subprocess.run(
        [
            *base,
            "add-party",
            "dave",
            "--address",
            "127.0.0.1:9",
            *key,
            "--ca-passphrase-env",
            "CA_PW",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert "version 2" in ok.stdout
    bad = subprocess.run(
        [*base, "rotate-cert", "bob", *key], capture_output=True, text=True, env=env, timeout=60
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "passphrase" in bad.stderr
    assert load_consortium(path).version == 2


# Nodes ------------------------------------------------------------------------------------


def _ping(settings, peer: str) -> None:
    channel = open_channel(settings, peer)
    try:
        party_pb2_grpc.PartyStub(channel).Health(pb.HealthRequest(), timeout=5)
    finally:
        channel.close()


@pytest.mark.grpc
def test_rotation_removal_and_versions_between_nodes(tmp_path):
    with LoopbackConsortium(("alice", "bob", "carol"), tmp_path, keep_ca_key=True) as bed:
        path = tmp_path / "consortium.toml"
        key = load_ca_key(tmp_path / "private" / "ca.key")
        old = {p: bed.settings[p] for p in bed.parties}
        assert run_job(old["alice"], "secure-sum", {}, deadline=60)["state"] == "succeeded"

        # bob's certificate is rotated: bob's node reloads (SIGHUP) and alice pushes
        rotate_certificate(path, key, "bob")
        assert bed.nodes["bob"].reload()
        alice_v2 = load_settings(tmp_path / "alice.toml")
        report = push_roster(alice_v2, alice_v2.consortium)
        assert all(r["ok"] for r in report.values()), report
        assert {n.consortium.version for n in bed.nodes.values()} == {2}
        # bob's old certificate is refused at once by alice (inbound) ...
        with pytest.raises(grpc.RpcError) as info:
            _ping(old["bob"], "alice")
        assert info.value.code() in (  # type: ignore[attr-defined]
            grpc.StatusCode.UNAUTHENTICATED,
            grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.UNAVAILABLE,
        )
        # ... and a job started with the old roster is refused naming both versions
        doc = run_job(old["carol"], "secure-sum", {}, deadline=30)
        assert doc["state"] != "succeeded"
        assert "roster version" in doc["error"] and "1" in doc["error"] and "2" in doc["error"]
        # the new roster works end to end
        assert run_job(alice_v2, "secure-sum", {}, deadline=60)["state"] == "succeeded"
        assert all(h["same_roster"] for h in health(alice_v2).values())

        # an older, a tampered and a foreign roster are refused by every node
        v1_text = roster_toml(old["alice"].consortium)
        tampered = roster_toml(alice_v2.consortium).replace("version = 2", "version = 9")
        stub = party_pb2_grpc.PartyStub(open_channel(alice_v2, "carol"))
        for text, why in [(v1_text, "not newer"), (tampered, "signature")]:
            reply = stub.PushRoster(pb.RosterUpdate(roster_toml=text), timeout=5)
            assert not reply.accepted and why in reply.reason and reply.version == 2

        # carol is removed: alice and bob refuse her at once, both ways
        v3 = remove_party(path, key, "carol")
        report = push_roster(alice_v2, v3)
        assert report["alice"]["ok"] and report["bob"]["ok"], report
        with pytest.raises(grpc.RpcError):
            _ping(old["carol"], "alice")
        with pytest.raises(ConfigError, match="not in consortium"):
            bed.nodes["alice"].channel("carol")
        assert bed.nodes["alice"].consortium.version == 3
        # the file at alice's node holds the version it took
        assert load_consortium(tmp_path / "consortium.toml").version == 3
