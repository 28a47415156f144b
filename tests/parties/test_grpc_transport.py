"""The gRPC transport and nodes in this process (real mutual TLS on 127.0.0.1): who is
let in, what a node accepts, malformed streams, early frames, dead peers, jobs."""

from __future__ import annotations

import re
import threading
import time

import grpc
import pytest
from cryptography.hazmat.primitives import serialization

from ppdm.errors import PartyFailure, ProtocolError
from ppdm.parties.consortium import generate_ca, issue_certificate
from ppdm.parties.grpc_net import PeerStream, split_envelope
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.service.client import run_job
from ppdm.service.node import from_struct, to_struct
from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.testbed.consortia import LoopbackConsortium

PARTIES = ("alice", "bob", "carol")
# Deadlines that only catch a hang (issue 22: no wall-clock upper bound in a test).
HANG_SECONDS = 120.0


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("grpc")
    with LoopbackConsortium(PARTIES, workdir, pending_wait_s=1.0, keep_ca_key=True) as b:
        yield b


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem_cert(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def raw_stub(bed, target: str, *, key: bytes | None, cert: bytes | None, ca: bytes | None = None):
    settings = bed.settings[target]
    creds = grpc.ssl_channel_credentials(
        root_certificates=ca or settings.consortium.ca_certificate_pem,
        private_key=key,
        certificate_chain=cert,
    )
    channel = grpc.secure_channel(
        settings.consortium.party(target).address,
        creds,
        options=[("grpc.ssl_target_name_override", target)],
    )
    return channel, party_pb2_grpc.PartyStub(channel)


def _health_code(bed, **kw) -> grpc.StatusCode | None:
    channel, stub = raw_stub(bed, "alice", **kw)
    try:
        stub.Health(pb.HealthRequest(), timeout=5)
        return None
    except grpc.RpcError as exc:
        return exc.code()
    finally:
        channel.close()


# Who is let in -----------------------------------------------------------------------


def test_a_roster_party_is_let_in(bed):
    bob = bed.settings["bob"]
    assert _health_code(bed, key=bob.private_key_pem, cert=bob.certificate_pem) is None


def test_a_client_without_certificate_is_refused(bed):
    assert _health_code(bed, key=None, cert=None) == grpc.StatusCode.UNAVAILABLE


def test_a_certificate_from_another_ca_is_refused(bed):
    other_key, other_ca = generate_ca("other")
    key, cert = issue_certificate(other_key, other_ca, "bob", hosts=["127.0.0.1"])
    code = _health_code(bed, key=_pem_key(key), cert=_pem_cert(cert))
    assert code == grpc.StatusCode.UNAVAILABLE  # the TLS handshake fails


def _rogue(bed, name: str):
    """A certificate the consortium's own CA issued for ``name``, not on the roster."""
    from cryptography import x509

    ca_key = serialization.load_pem_private_key(
        (bed.workdir / "private" / "ca.key").read_bytes(), None
    )
    ca = x509.load_pem_x509_certificate((bed.workdir / "ca.crt").read_bytes())
    key, cert = issue_certificate(ca_key, ca, name, hosts=["127.0.0.1"])
    return _pem_key(key), _pem_cert(cert)


@pytest.mark.parametrize("name", ["bob", "mallory"])
def test_a_certificate_not_on_the_roster_is_refused(bed, name):
    # The TLS handshake succeeds (same CA), the roster check refuses it.
    key, cert = _rogue(bed, name)
    assert _health_code(bed, key=key, cert=cert) == grpc.StatusCode.PERMISSION_DENIED
    frames = split_envelope(b"hi", job_id="j", seq=1, max_chunk=40)
    channel, stub = raw_stub(bed, "alice", key=key, cert=cert)
    try:
        with pytest.raises(grpc.RpcError) as info:
            stub.Exchange(iter(frames), timeout=5)
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        channel.close()


def test_another_party_cannot_start_a_job_in_its_name(bed):
    bob = bed.settings["bob"]
    channel, stub = raw_stub(bed, "alice", key=bob.private_key_pem, cert=bob.certificate_pem)
    try:
        request = pb.JobRequest(
            consortium="ppdm-testbed",
            job_id="impersonation",
            protocol="ring-echo",
            params=to_struct({}),
            initiator="carol",
            parties=list(PARTIES),
            timeout_s=5,
            roster_version=bob.consortium.version,
        )
        with pytest.raises(grpc.RpcError) as info:
            stub.ProposeJob(request, timeout=5)
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "on behalf of 'carol'" in info.value.details()
        # Nor start or cancel a job another party proposed, nor one never proposed.
        alice = bed.settings["alice"]
        own_ch, own = raw_stub(bed, "alice", key=alice.private_key_pem, cert=alice.certificate_pem)
        try:
            request.initiator = "alice"
            request.job_id = "alice-proposes"
            assert own.ProposeJob(request, timeout=5).decision == pb.DECISION_ACCEPTED
        finally:
            own_ch.close()
        for call, job_id, code in (
            (stub.StartJob, "alice-proposes", grpc.StatusCode.PERMISSION_DENIED),
            (stub.CancelJob, "alice-proposes", grpc.StatusCode.PERMISSION_DENIED),
            (stub.StartJob, "never-proposed", grpc.StatusCode.NOT_FOUND),
        ):
            with pytest.raises(grpc.RpcError) as info:
                call(pb.JobRef(job_id=job_id), timeout=5)
            assert info.value.code() == code
    finally:
        channel.close()


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        ({"protocol": "no-such-job"}, grpc.StatusCode.INVALID_ARGUMENT, "unknown job"),
        ({"params": to_struct({"sizee": 3})}, grpc.StatusCode.INVALID_ARGUMENT, "no parameter"),
        ({"consortium": "other"}, grpc.StatusCode.INVALID_ARGUMENT, "consortium"),
        ({"parties": ["bob", "carol"]}, grpc.StatusCode.INVALID_ARGUMENT, "not a member"),
        ({"parties": ["alice", "mallory"]}, grpc.StatusCode.INVALID_ARGUMENT, "not in consortium"),
        ({"timeout_s": -1.0}, grpc.StatusCode.INVALID_ARGUMENT, "timeout"),
        ({"roster_version": 0}, grpc.StatusCode.INVALID_ARGUMENT, "roster version mismatch"),
    ],
)
def test_bad_job_requests_are_refused(bed, change, code, message):
    alice = bed.settings["alice"]
    channel, stub = raw_stub(bed, "alice", key=alice.private_key_pem, cert=alice.certificate_pem)
    try:
        fields = {
            "consortium": "ppdm-testbed",
            "job_id": f"bad-{message}",
            "protocol": "ring-echo",
            "params": to_struct({}),
            "initiator": "alice",
            "parties": list(PARTIES),
            "timeout_s": 5.0,
            "roster_version": alice.consortium.version,
        }
        fields.update(change)
        with pytest.raises(grpc.RpcError) as info:
            stub.ProposeJob(pb.JobRequest(**fields), timeout=5)
        assert info.value.code() == code
        assert message in info.value.details()
    finally:
        channel.close()


# Streams ------------------------------------------------------------------------------


def _raw_exchange(bed, frm: str, to: str, frames: list[env_pb.Frame]) -> grpc.RpcError | None:
    stub = party_pb2_grpc.PartyStub(bed.nodes[frm].channel(to))
    try:
        stub.Exchange(iter(frames), timeout=10)
        return None
    except grpc.RpcError as exc:
        return exc


def test_malformed_frames_fail_the_job_naming_the_sender(bed):
    job = bed.open(timeout=10)
    try:
        frames = split_envelope(b"x" * 100, job_id=job.job_id, seq=1, max_chunk=40)
        frames[1].chunk_index = 2  # a chunk goes missing
        err = _raw_exchange(bed, "bob", "alice", frames)
        assert err is not None and err.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(ProtocolError) as info:
            job.endpoint("alice").receive("bob", "anything", timeout=5)
        assert info.value.party == "bob" and "malformed frames" in info.value.reason
    finally:
        job.close()


def test_a_stream_cut_inside_an_envelope_fails_the_job(bed):
    job = bed.open(timeout=10)
    try:
        frames = split_envelope(b"x" * 100, job_id=job.job_id, seq=1, max_chunk=40)
        err = _raw_exchange(bed, "carol", "alice", frames[:2])
        assert err is not None and err.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(ProtocolError, match="stream ended") as info:
            job.endpoint("alice").receive("carol", "anything", timeout=5)
        assert info.value.party == "carol"
    finally:
        job.close()


def test_frames_for_an_unknown_job_are_refused_after_the_wait(bed):
    frames = split_envelope(b"hello", job_id="never-started", seq=1, max_chunk=40)
    t0 = time.perf_counter()
    err = _raw_exchange(bed, "bob", "alice", frames)
    assert err is not None and err.code() == grpc.StatusCode.NOT_FOUND
    assert time.perf_counter() - t0 > 0.9  # held for the wait first (a lower bound only)


def test_frames_that_arrive_before_the_job_starts_are_kept(bed):
    job_id = "early-bird"
    node_b = bed.nodes["bob"]
    ep_b, _ = node_b.open_endpoint(job_id, PARTIES, timeout=10)
    ep_b.send("alice", "early", 42)  # alice has not opened the job yet
    time.sleep(0.3)
    ep_a, _ = bed.nodes["alice"].open_endpoint(job_id, PARTIES, timeout=10)
    try:
        assert ep_a.receive("bob", "early") == 42
    finally:
        for p in ("alice", "bob"):
            bed.nodes[p].close_endpoint(job_id)
            bed.nodes[p].forget_endpoint(job_id)


def test_a_stream_from_a_non_member_is_refused(bed):
    job_id = "two-party"
    bed.nodes["alice"].open_endpoint(job_id, ("alice", "bob"), timeout=10)
    try:
        frames = split_envelope(b"hi", job_id=job_id, seq=1, max_chunk=40)
        err = _raw_exchange(bed, "carol", "alice", frames)
        assert err is not None and err.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        bed.nodes["alice"].close_endpoint(job_id)
        bed.nodes["alice"].forget_endpoint(job_id)


def test_a_dead_peer_is_named_before_the_timeout(tmp_path):
    with LoopbackConsortium(PARTIES, tmp_path) as bed:
        # The receive timeout is far longer than the hang deadline below: only noticing
        # that bob is gone can end alice's wait in time (issue 22: no bound on how soon).
        job = bed.open(timeout=HANG_SECONDS * 4)
        ep_a = job.endpoint("alice")
        ep_a.send("bob", "hello", 1)  # alice now has a stream to bob
        errors: list[BaseException] = []

        def wait_for_carol():
            try:
                ep_a.receive("carol", "never")
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=wait_for_carol)
        t.start()
        bed.nodes["bob"].stop(grace=0)
        t.join(HANG_SECONDS)
        assert not t.is_alive()
        assert isinstance(errors[0], PartyFailure) and errors[0].party == "bob"
        job.close(timeout=2)


def test_peer_stream_send_fails_once_the_peer_is_gone(tmp_path):
    with LoopbackConsortium(("alice", "bob"), tmp_path, probe_peers=False) as bed:
        failures: list[tuple[str, str]] = []
        stream = PeerStream(
            bed.nodes["alice"].channel("bob"),
            "bob",
            "some-job",
            max_chunk=1024,
            timeout=5,
            on_failure=lambda p, r: failures.append((p, r)),
        )
        bed.nodes["bob"].stop(grace=0)
        deadline = time.monotonic() + 15
        with pytest.raises(PartyFailure) as info:
            while time.monotonic() < deadline:
                stream.send(b"x" * 100)
                time.sleep(0.05)
        assert info.value.party == "bob"
        assert failures and failures[0][0] == "bob"


# Jobs on in-process nodes ------------------------------------------------------------


def test_run_job_collects_every_party_and_the_nodes_survive_a_failed_job(bed):
    inputs = {p: s.raw["inputs"]["secure_sum"] for p, s in bed.settings.items()}
    doc = run_job(bed.settings["bob"], "secure-sum", timeout=10)
    assert doc["state"] == "succeeded", doc["error"]
    assert {r["result"]["sum"] for r in doc["parties"].values()} == {sum(inputs.values())}
    assert doc["initiator"] == "bob" and doc["schema"] == "ppdm.job/1"
    # modulus 1 cannot hold anything: every node's input check refuses before anything
    # runs (first alice), the others are cancelled, and no input value is quoted.
    bad = run_job(bed.settings["alice"], "secure-sum", {"modulus": 1}, timeout=5)
    assert bad["state"] == "refused" and set(bad["failed_parties"]) == set(PARTIES)
    assert bad["failed_party"] == "alice" and bad["decisions"]["alice"]["rule"] == "input_check"
    # Every text another party or the initiator reads (errors, reasons); numbers as whole
    # words, so that a timing or a job id that happens to contain the digits is no match.
    texts = [bad["error"] or ""]
    texts += [d["reason"] or "" for d in bad["decisions"].values()]
    texts += [r.get("error") or "" for r in bad["parties"].values()]
    for v in (v for v in inputs.values() if v > 9):
        assert not any(re.search(rf"(?<![\d.]){v}(?![\d.])", t) for t in texts), (v, texts)
    again = run_job(bed.settings["carol"], "ring-echo", {"rounds": 3}, timeout=10)
    assert again["state"] == "succeeded"
    assert len(again["parties"]["alice"]["result"]["round_trip_s"]) == 3


def test_job_status_is_for_members_only(bed):
    doc = run_job(bed.settings["alice"], "ring-echo", parties=["alice", "bob"], timeout=10)
    assert doc["state"] == "succeeded" and list(doc["parties"]) == ["alice", "bob"]
    carol = bed.settings["carol"]
    channel, stub = raw_stub(bed, "alice", key=carol.private_key_pem, cert=carol.certificate_pem)
    try:
        with pytest.raises(grpc.RpcError) as info:
            stub.GetJobStatus(pb.JobStatusRequest(job_id=doc["job_id"]), timeout=5)
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
        unknown = stub.GetJobStatus(pb.JobStatusRequest(job_id="nope"), timeout=5)
        assert unknown.state == pb.JOB_STATE_UNKNOWN
    finally:
        channel.close()
    bob = bed.settings["bob"]
    channel, stub = raw_stub(bed, "alice", key=bob.private_key_pem, cert=bob.certificate_pem)
    try:
        status = stub.GetJobStatus(pb.JobStatusRequest(job_id=doc["job_id"]), timeout=5)
        assert status.state == pb.JOB_STATE_SUCCEEDED
        assert from_struct(status.result, "result")["rounds"] == 1
        assert [m.step for m in status.metrics] == ["ring-echo/token"]
    finally:
        channel.close()


def _wait_for_peer(net, params, ctx):
    """Test job: wait for a message nobody sends (from the other party)."""
    other = next(p for p in net.parties if p != net.me)
    net.receive(other, "test/never")
    return {}


def test_a_crashed_node_is_noticed_by_the_health_probes(tmp_path, monkeypatch):
    from ppdm.jobs.registry import JobSpec, register_job

    register_job(JobSpec("test-wait-for-peer", "test only", _wait_for_peer, {}))
    policy = OPEN_POLICY_TOML + "\n[jobs.test-wait-for-peer]\nallow = true\n"
    with LoopbackConsortium(("alice", "bob"), tmp_path, policy=policy) as bed:
        # The runner asks for bob's status only once StartJob has answered everywhere:
        # stopping bob's server before that would make "job not started at bob" the
        # (racy) cause instead of the crash during the job (issue 22).
        polled = threading.Event()
        look_up = bed.nodes["bob"].job

        def job(job_id: str):
            polled.set()
            return look_up(job_id)

        monkeypatch.setattr(bed.nodes["bob"], "job", job)
        box: dict = {}
        runner = threading.Thread(
            target=lambda: box.setdefault(
                "doc",
                run_job(
                    bed.settings["alice"],
                    "test-wait-for-peer",
                    timeout=HANG_SECONDS * 4,  # only the health probes can end it in time
                    deadline=HANG_SECONDS * 8,
                ),
            )
        )
        runner.start()
        assert polled.wait(HANG_SECONDS) and bed.nodes["bob"].running_jobs()
        # No stream exists between the two; bob's server vanishes without a word.
        bed.nodes["bob"]._server.stop(0)
        runner.join(HANG_SECONDS)
        assert not runner.is_alive(), "the crash was not noticed"
        doc = box["doc"]
        assert doc["ok"] is False and doc["failed_party"] == "bob", doc["error"]
        error = doc["parties"]["alice"]["error"]
        assert error.startswith("party_failure: party 'bob'")
        assert doc["parties"]["alice"]["error_party"] == "bob"


def _big_result(net, params, ctx):
    return {"blob": "x" * params["size"]}


def test_a_result_too_big_for_one_message_is_reported(tmp_path):
    from ppdm.jobs.registry import JobSpec, register_job

    register_job(JobSpec("test-big-result", "test only", _big_result, {"size": 10}))
    policy = OPEN_POLICY_TOML + "\n[jobs.test-big-result]\nallow = true\n"
    with LoopbackConsortium(
        ("alice", "bob"), tmp_path, max_message_bytes=64 * 1024, policy=policy
    ) as bed:
        small = run_job(bed.settings["alice"], "test-big-result", timeout=10)
        assert small["ok"] and small["parties"]["bob"]["result"] == {"blob": "x" * 10}
        big = run_job(bed.settings["alice"], "test-big-result", {"size": 100_000}, timeout=10)
        assert big["ok"] is False
        assert "raise max_message_bytes" in big["parties"]["bob"]["error"]
