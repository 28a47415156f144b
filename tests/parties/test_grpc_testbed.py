"""Acceptance on real processes: ``ppdm consortium init`` + one ``ppdm party serve`` per
party on 127.0.0.1, jobs started from any party, refused strangers, malformed messages,
a node killed mid-job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ppdm.errors import without_local_causes
from ppdm.parties.consortium import generate_ca, issue_certificate
from ppdm.parties.grpc_net import split_envelope
from ppdm.parties.local import run_local
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.protocols.secure_sum import secure_sum
from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.testbed.consortia import GrpcTestbed, spawn_tied

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(120)]

PARTIES = ("alice", "bob", "carol")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    with GrpcTestbed(
        PARTIES,
        tmp_path_factory.mktemp("testbed"),
        timeout=10,
        keep_ca_key=True,
        # alice keeps her random sample; bob and carol get edge-case inputs.
        inputs={"bob": -(2**70), "carol": {"secure_sum": 2**69 + 3, "note": "private"}},
        data={"carol": {"table": "carol.csv"}},
    ) as b:
        yield b


def ppdm_cli(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "ppdm", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_secure_sum_from_any_party_is_exact_and_matches_the_simulation(bed):
    inputs = {p: v["secure_sum"] for p, v in bed.private_inputs().items()}
    assert inputs["bob"] == -(2**70) and bed.private_inputs()["carol"]["note"] == "private"
    assert bed.settings["carol"].raw["data"] == {"table": "carol.csv"}
    simulated = run_local(secure_sum, inputs)
    for initiator in ("carol", "alice"):
        doc = bed.run_job("secure-sum", initiator=initiator)
        assert doc["state"] == "succeeded", doc["error"]
        assert doc["initiator"] == initiator
        for p in PARTIES:
            rec = doc["parties"][p]
            assert rec["result"] == {"sum": sum(inputs.values()), "parties": list(PARTIES)}
            assert rec["result"]["sum"] == simulated[p]
            steps = {m["step"]: m for m in rec["metrics"]}
            assert set(steps) == {"secure-sum/ring", "secure-sum/result"}
            assert steps["secure-sum/ring"]["messages_sent"] == 1
            assert rec["totals"]["bytes_sent"] == sum(m["bytes_sent"] for m in rec["metrics"])
        # What one party sent on the ring is what the next one received.
        ring = {p: {m["step"]: m for m in doc["parties"][p]["metrics"]} for p in PARTIES}
        assert (
            ring["alice"]["secure-sum/ring"]["bytes_sent"]
            == (ring["bob"]["secure-sum/ring"]["bytes_received"])
        )


def test_cli_job_run_writes_the_document(bed, tmp_path):
    out = tmp_path / "result.json"
    proc = ppdm_cli(
        "job",
        "run",
        "secure-sum",
        "--settings",
        str(bed.settings_path("bob")),
        "--output",
        str(out),
        "--timeout",
        "10",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    # the terminal gets a short summary, the file the whole document
    assert "succeeded" in proc.stdout and len(proc.stdout) < 4000
    inputs = {p: v["secure_sum"] for p, v in bed.private_inputs().items()}
    assert doc["parties"]["carol"]["result"]["sum"] == sum(inputs.values())
    health = ppdm_cli("party", "health", "--settings", str(bed.settings_path("carol")), "--json")
    assert health.returncode == 0, health.stderr
    assert set(json.loads(health.stdout)) == set(PARTIES)


def test_cli_failed_job_exits_nonzero_and_writes_no_output(bed, tmp_path):
    out = tmp_path / "result.json"
    proc = ppdm_cli(
        "job",
        "run",
        "secure-sum",
        "--settings",
        str(bed.settings_path("alice")),
        "--param",
        "modulus=1",
        "--output",
        str(out),
    )
    assert proc.returncode == 1
    assert not out.exists()
    # Every node's input check refuses a modulus that cannot hold its input.
    assert "refused" in proc.stdout
    assert proc.stderr.strip().count("\n") == 0 and "refused" in proc.stderr
    assert all(f"{p}: refused" in proc.stderr for p in PARTIES), proc.stderr


def _stub(bed, key: bytes | None, cert: bytes | None, ca: bytes | None = None):
    settings = bed.settings["alice"]
    creds = grpc.ssl_channel_credentials(
        root_certificates=ca or settings.consortium.ca_certificate_pem,
        private_key=key,
        certificate_chain=cert,
    )
    channel = grpc.secure_channel(
        settings.consortium.party("alice").address,
        creds,
        options=[("grpc.ssl_target_name_override", "alice")],
    )
    return channel, party_pb2_grpc.PartyStub(channel)


def _pems(key, cert) -> tuple[bytes, bytes]:
    return (
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        cert.public_bytes(serialization.Encoding.PEM),
    )


def _health(bed, key, cert) -> grpc.StatusCode | None:
    channel, stub = _stub(bed, key, cert)
    try:
        stub.Health(pb.HealthRequest(), timeout=10)
        return None
    except grpc.RpcError as exc:
        return exc.code()
    finally:
        channel.close()


def test_strangers_are_refused(bed):
    bob = bed.settings["bob"]
    assert _health(bed, bob.private_key_pem, bob.certificate_pem) is None
    # No client certificate: the TLS handshake fails.
    assert _health(bed, None, None) == grpc.StatusCode.UNAVAILABLE
    # A certificate from another CA: the TLS handshake fails.
    other_key, other_ca = generate_ca("other")
    assert _health(bed, *_pems(*issue_certificate(other_key, other_ca, "bob"))) == (
        grpc.StatusCode.UNAVAILABLE
    )
    # The consortium CA's certificate for "bob" that is not bob's roster certificate, and
    # one for a party not on the roster: refused by the roster check.
    ca_key = serialization.load_pem_private_key(
        (bed.workdir / "private" / "ca.key").read_bytes(), None
    )
    ca = x509.load_pem_x509_certificate((bed.workdir / "ca.crt").read_bytes())
    for name in ("bob", "mallory"):
        pems = _pems(*issue_certificate(ca_key, ca, name, hosts=["127.0.0.1"]))
        assert _health(bed, *pems) == grpc.StatusCode.PERMISSION_DENIED


def _running_job(bed, party: str, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = bed.health()[party].get("running_jobs", [])
        if jobs:
            return jobs[0]
        time.sleep(0.05)
    raise AssertionError(f"no job running at {party}")


def test_malformed_messages_end_the_job_with_a_protocol_error(bed):
    # bob holds the token for 3 s; meanwhile frames "from bob" that break the framing
    # reach alice, who must end the job with a ProtocolError naming bob.
    box: dict[str, dict] = {}
    runner = threading.Thread(
        target=lambda: box.setdefault(
            "doc", bed.run_job("ring-echo", {"delay_s": 3.0}, parties=["alice", "bob"])
        )
    )
    runner.start()
    job_id = _running_job(bed, "alice")
    bob = bed.settings["bob"]
    frames = split_envelope(b"\x00" * 64, job_id=job_id, seq=5, max_chunk=16)  # seq gap
    channel, stub = _stub(bed, bob.private_key_pem, bob.certificate_pem)
    try:
        with pytest.raises(grpc.RpcError) as info:
            stub.Exchange(iter(frames), timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        channel.close()
    runner.join(60)
    doc = box["doc"]
    assert doc["state"] == "failed" and doc["failed_party"] == "bob"
    error = doc["parties"]["alice"]["error"]
    assert error.startswith("protocol_error: party 'bob' at step 'ring-echo/token'")
    alice = doc["parties"]["alice"]
    assert (alice["error_code"], alice["error_party"]) == ("protocol_error", "bob")
    # The details stay at alice's node: its log, and the cause it shows its own owner
    # (the initiator here) inside the marked part of its own record; nothing elsewhere.
    outside = without_local_causes(json.dumps(doc))
    assert "malformed frames" not in outside and "malformed frames" in bed.log("alice")
    assert "malformed frames" not in json.dumps(doc["parties"]["bob"])


def test_killing_a_node_mid_job_ends_the_job_everywhere(tmp_path):
    timeout = 10.0
    # A transport test, not a governance one: the open policy lets the survivors run a
    # two-party sum afterwards.
    with GrpcTestbed(PARTIES, tmp_path / "bed", timeout=timeout, policy=OPEN_POLICY_TOML) as bed:
        cli = spawn_tied(
            [
                sys.executable,
                "-m",
                "ppdm",
                "job",
                "run",
                "ring-echo",
                "--json",
                "--settings",
                str(bed.settings_path("alice")),
                "--param",
                "rounds=100000",
                "--param",
                "delay_s=0.01",
                "--timeout",
                str(timeout),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        try:
            _running_job(bed, "carol")
            time.sleep(0.5)
            bed.kill("bob")
            # a deadline that catches a hang only (issue 22); the job must end, naming bob
            stdout, stderr = cli.communicate(timeout=300)
        finally:
            if cli.poll() is None:
                cli.kill()
        assert cli.returncode == 1, stderr
        doc = json.loads(stdout)  # with --json the document goes to stdout
        assert doc["state"] == "failed" and doc["ok"] is False
        assert doc["failed_party"] == "bob"
        assert "unreachable" in doc["parties"]["bob"]["error"]
        for p in ("alice", "carol"):
            assert doc["parties"][p]["state"] == "failed"
            assert "'bob'" in doc["parties"][p]["error"], doc["parties"][p]["error"]
        # The survivors keep serving.
        after = bed.run_job("secure-sum", initiator="carol", parties=["alice", "carol"])
        assert after["state"] == "succeeded", after["error"]
        # SIGTERM shuts a node down cleanly.
        assert bed.terminate("alice") == 0
        assert "shutting down" in bed.log("alice")
