"""What one member can make a node hold (issue 13, item 4): the ``[limits]`` settings,
bytes a job buffers per sender and in all (over the limit the job ends naming the
sender), nothing kept for an ended job, and idle streams closed."""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
import pytest

from ppdm.errors import ConfigError, ProtocolError
from ppdm.parties.consortium import NodeLimits, load_settings
from ppdm.parties.network import Endpoint
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb
from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.testbed.consortia import LoopbackConsortium


def _envelope(sender: str, seq: int, size: int, *, job_id: str = "j") -> bytes:
    env = env_pb.Envelope(
        consortium="local", job_id=job_id, step="s", sender=sender, recipient="alice", seq=seq
    )
    env.payload.blob = bytes(size)
    return env.SerializeToString()


def _endpoint(per_peer: int | None, per_job: int | None) -> Endpoint:
    return Endpoint(
        "alice",
        ("alice", "bob", "carol"),
        lambda to, data: None,
        job_id="j",
        timeout=2,
        max_unread_bytes_per_peer=per_peer,
        max_unread_bytes_per_job=per_job,
    )


# Settings ---------------------------------------------------------------------------------


def test_limits_table_read_and_checked(tmp_path):
    from ppdm.parties.consortium import init_consortium

    init_consortium(tmp_path, ("alice", "bob"), ports=[50990, 50991], overwrite=True)
    path = tmp_path / "alice.toml"
    assert load_settings(path).limits == NodeLimits()
    base = path.read_text()
    path.write_text(base + "\n[limits]\nmax_streams_per_peer = 3\nidle_stream_s = 5\n")
    limits = load_settings(path).limits
    assert limits.max_streams_per_peer == 3 and limits.idle_stream_s == 5.0
    assert limits.max_unread_bytes_per_peer == NodeLimits.max_unread_bytes_per_peer
    for bad, what in [
        ("max_streams_per_peer = 0", "max_streams_per_peer"),
        ("max_streams_per_peer = true", "max_streams_per_peer"),
        ("idle_stream_s = -1", "idle_stream_s"),
        ("idle_stream_s = nan", "idle_stream_s"),
        ("max_open_files = 3", "unknown setting"),
        ("max_unread_bytes_per_peer = 5000\nmax_unread_bytes_per_job = 10", "must not exceed"),
    ]:
        path.write_text(base + f"\n[limits]\n{bad}\n")
        with pytest.raises(ConfigError, match=what):
            load_settings(path)


# The endpoint's buffer ---------------------------------------------------------------------


def test_unread_bytes_per_peer_end_the_job_naming_the_sender():
    ep = _endpoint(per_peer=10_000, per_job=1 << 20)
    ep.deliver(_envelope("carol", 1, 100), sender="carol")
    for seq in range(1, 20):
        ep.deliver(_envelope("bob", seq, 1000), sender="bob")
    # bob went over its share: every receive now fails naming bob, even one from carol
    with pytest.raises(ProtocolError) as info:
        ep.receive("carol", "s")
    assert info.value.party == "bob"
    assert ep.unread_bytes <= 10_000 + 200


def test_unread_bytes_per_job_counts_every_sender():
    ep = _endpoint(per_peer=6_000, per_job=10_000)
    for seq in range(1, 6):
        ep.deliver(_envelope("bob", seq, 1000), sender="bob")
    for seq in range(1, 6):
        ep.deliver(_envelope("carol", seq, 1000), sender="carol")  # the job's sum overflows
    with pytest.raises(ProtocolError) as info:
        ep.receive("bob", "s")
    assert info.value.party == "carol"


def test_reading_frees_the_budget():
    ep = _endpoint(per_peer=5_000, per_job=5_000)
    for seq in range(1, 101):  # 100 messages of 1 kB through a 5 kB buffer: read as they come
        ep.deliver(_envelope("bob", seq, 1000), sender="bob")
        assert len(ep.receive("bob", "s")) == 1000
    assert ep.unread_bytes == 0


def test_ended_job_keeps_nothing():
    ep = _endpoint(per_peer=None, per_job=None)
    ep.deliver(_envelope("bob", 1, 5000), sender="bob")
    assert ep.unread_bytes > 5000
    ep.close()
    assert ep.unread_bytes == 0 and ep.closed
    ep.deliver(_envelope("bob", 2, 5000), sender="bob")  # late: dropped on arrival
    assert ep.unread_bytes == 0


# Over gRPC --------------------------------------------------------------------------------


@pytest.mark.grpc
def test_flooding_member_is_named_and_node_serves_the_next_job(tmp_path):
    limits = NodeLimits(max_unread_bytes_per_peer=2 << 20, max_unread_bytes_per_job=4 << 20)
    with LoopbackConsortium(
        ("alice", "bob", "carol"), tmp_path, policy=OPEN_POLICY_TOML, limits=limits
    ) as bed:
        job = bed.open(timeout=10)
        try:
            for _ in range(8):  # 8 MiB that alice never reads
                job["bob"].send("alice", "flood", np.zeros(1 << 17))
            with pytest.raises(ProtocolError) as info:
                job["alice"].receive("carol", "never-sent", timeout=10)
            assert info.value.party == "bob"
            assert job["alice"].unread_bytes <= (2 << 20) + (1 << 20)
        finally:
            job.close()
        job = bed.open(timeout=10)
        try:
            job["bob"].send("alice", "hello", np.arange(3))
            assert list(job["alice"].receive("bob", "hello")) == [0, 1, 2]
        finally:
            job.close()


def _raw_exchange(channel: grpc.Channel):
    return channel.stream_unary(
        "/ppdm.v1.Party/Exchange",
        request_serializer=None,
        response_deserializer=env_pb.ExchangeSummary.FromString,
    )


@pytest.mark.grpc
def test_idle_streams_are_closed(tmp_path):
    limits = NodeLimits(idle_stream_s=1.0, pending_job_wait_s=30.0)
    with LoopbackConsortium(("alice", "bob"), tmp_path, limits=limits) as bed:
        alice = bed.nodes["alice"]
        release = threading.Event()

        # The client's own deadline is far longer than idle_stream_s: only the node closing
        # the idle stream gives CANCELLED (its deadline would give DEADLINE_EXCEEDED, the
        # silent stream ending would give OK). No bound on how soon (issue 22).
        hang = 120

        def silent():
            release.wait(hang)
            return
            yield  # a stream that never sends a frame

        call = _raw_exchange(bed.nodes["bob"].channel("alice")).future(silent(), timeout=hang)
        try:
            with pytest.raises(grpc.RpcError) as info:
                call.result(timeout=2 * hang)
            assert info.value.code() == grpc.StatusCode.CANCELLED  # type: ignore[attr-defined]
            deadline = time.monotonic() + hang
            while len(alice.streams) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(alice.streams) == 0, "the stream's thread was not freed"
        finally:
            release.set()
