"""Certificates with a lifetime (issue 13, item 5): a member whose certificate expired is
refused by name, while jobs among the others go on and their nodes restart; `ppdm party
health` warns 30 days before any roster certificate expires."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ppdm.errors import ConfigError
from ppdm.parties.consortium import _key_pem, _pem, issue_certificate, load_settings
from ppdm.parties.roster import sign_roster
from ppdm.service.client import certificate_warnings, run_job
from ppdm.testbed.consortia import GrpcTestbed

pytestmark = pytest.mark.grpc

REPO = Path(__file__).resolve().parents[2]


def _reissue(root: Path, party: str, *, start: dt.datetime, days: int) -> None:
    """Give ``party`` a new certificate from the consortium CA valid from ``start`` for
    ``days`` days (the roster names the file, so it lists the new one; the CA signs the
    changed roster, as ``ppdm consortium sign`` does)."""
    ca_key = serialization.load_pem_private_key((root / "private" / "ca.key").read_bytes(), None)
    ca_cert = x509.load_pem_x509_certificate((root / "ca.crt").read_bytes())
    key, cert = issue_certificate(
        ca_key, ca_cert, party, hosts=["127.0.0.1"], validity_days=days, not_before=start
    )
    (root / "certs" / f"{party}.crt").write_bytes(_pem(cert))
    (root / "private" / f"{party}.key").write_bytes(_key_pem(key))
    sign_roster(root / "consortium.toml", ca_key)


def test_an_expired_member_is_refused_and_the_others_go_on(tmp_path):
    now = dt.datetime.now(dt.UTC)
    root = tmp_path / "bed"
    bed = GrpcTestbed(["alice", "bob", "carol", "dave"], root, timeout=20, keep_ca_key=True)
    _reissue(root, "dave", start=now - dt.timedelta(days=400), days=365)  # expired
    _reissue(root, "carol", start=now - dt.timedelta(days=350), days=365)  # 15 days left
    # dave's own node cannot start with an expired certificate ...
    with pytest.raises(ConfigError, match="not valid now"):
        load_settings(bed.settings_path("dave"))
    bed.parties = ("alice", "bob", "carol")  # ... so the test bed runs the others
    bed.settings = {p: load_settings(bed.settings_path(p)) for p in bed.parties}
    with bed:
        alice = bed.settings["alice"]
        inactive = alice.consortium.inactive()
        assert list(inactive) == ["dave"] and "expired on" in inactive["dave"]
        # Jobs among the others go on (the default party set leaves dave out).
        doc = bed.run_job("secure-sum")
        assert doc["state"] == "succeeded", doc["error"]
        assert list(doc["parties"]) == ["alice", "bob", "carol"]
        # Naming dave is refused at once, naming him and the date.
        with pytest.raises(ConfigError, match="certificate of 'dave' expired"):
            run_job(alice, "secure-sum", parties=["alice", "bob", "dave"])
        # The others' nodes restart (the roster with an expired member still loads).
        bed.restart("bob")
        again = bed.run_job("secure-sum", initiator="bob")
        assert again["state"] == "succeeded", again["error"]
        # Health warns about carol (15 days left) and dave (expired).
        warnings = certificate_warnings(alice)
        assert any("'carol'" in w and "expires" in w for w in warnings)
        assert any("'dave'" in w and "expired" in w for w in warnings)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "ppdm",
                "party",
                "health",
                "--settings",
                str(bed.settings_path("alice")),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        )
        report = json.loads(proc.stdout)
        assert report["alice"]["ok"] and not report["dave"]["ok"]
        assert report["carol"]["certificate_days_left"] < 30
        assert "ppdm: warning: the certificate of 'carol' expires" in proc.stderr
        assert "ppdm: warning: the certificate of 'dave' expired" in proc.stderr


@pytest.mark.parametrize("when", ["expired", "not yet valid"])
def test_a_member_outside_its_validity_cannot_call_a_node(tmp_path, when):
    """Dave holds a roster certificate that is expired (or not valid yet) and dials
    alice's node directly with it, as his own node would: every RPC is refused, so a
    member outside its validity reaches no job, status or audit history."""
    import grpc

    from ppdm.proto.ppdm.v1 import party_pb2 as pb
    from ppdm.proto.ppdm.v1 import party_pb2_grpc

    now = dt.datetime.now(dt.UTC)
    root = tmp_path / "bed"
    bed = GrpcTestbed(["alice", "bob", "carol", "dave"], root, timeout=20, keep_ca_key=True)
    start = now - dt.timedelta(days=400) if when == "expired" else now + dt.timedelta(days=2)
    _reissue(root, "dave", start=start, days=365)
    bed.parties = ("alice", "bob", "carol")
    bed.settings = {p: load_settings(bed.settings_path(p)) for p in bed.parties}
    with bed:
        alice = bed.settings["alice"]
        creds = grpc.ssl_channel_credentials(
            root_certificates=alice.consortium.party("alice").certificate_pem,
            private_key=(root / "private" / "dave.key").read_bytes(),
            certificate_chain=(root / "certs" / "dave.crt").read_bytes(),
        )
        options = [("grpc.ssl_target_name_override", "alice")]
        address = alice.consortium.party("alice").address
        with grpc.secure_channel(address, creds, options=options) as channel:
            stub = party_pb2_grpc.PartyStub(channel)
            calls = {
                "Health": lambda: stub.Health(pb.HealthRequest(), timeout=30),
                "ListPending": lambda: stub.ListPending(pb.PendingRequest(), timeout=30),
                "AuditHistory": lambda: stub.AuditHistory(pb.AuditHistoryRequest(), timeout=30),
            }
            for name, call in calls.items():
                with pytest.raises(grpc.RpcError) as info:
                    call()
                assert info.value.code() in (
                    grpc.StatusCode.PERMISSION_DENIED,
                    grpc.StatusCode.UNAVAILABLE,
                ), (name, info.value.code())
        # The node itself is fine: jobs among the valid members go on.
        doc = bed.run_job("secure-sum")
        assert doc["state"] == "succeeded", doc["error"]
