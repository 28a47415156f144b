"""A member with a valid certificate sends a node 10,000 mutated frames (issue 13, item 4):
no crash, no hang, bounded memory, and the node serves the next job; one member cannot
hold more than its share of the node's server threads."""

from __future__ import annotations

import contextlib
import random
import resource
import threading
import time

import grpc
import numpy as np
import pytest

from ppdm.parties.grpc_net import split_envelope
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.service.node import MAX_STREAMS_PER_PEER
from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.testbed.consortia import LoopbackConsortium

pytestmark = pytest.mark.grpc

FRAMES = 10_000


def _raw_exchange(channel: grpc.Channel):
    return channel.stream_unary(
        "/ppdm.v1.Party/Exchange",
        request_serializer=None,
        response_deserializer=env_pb.ExchangeSummary.FromString,
    )


def _envelope(job_id: str, seq: int, payload_size: int) -> bytes:
    env = env_pb.Envelope(
        consortium="ppdm-testbed",
        job_id=job_id,
        step="fuzz",
        sender="bob",
        recipient="alice",
        seq=seq,
    )
    env.payload.blob = bytes(payload_size)
    return env.SerializeToString()


def _mutate(frame: bytes, rng: random.Random) -> bytes:
    b = bytearray(frame)
    kind = rng.randrange(7)
    if kind == 0 and b:  # flip bytes
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncate
        b = b[: rng.randrange(len(b) + 1)]
    elif kind == 2:  # junk
        b = bytearray(rng.randbytes(rng.randint(0, 64)))
    elif kind == 3:  # huge varints
        b = bytearray(b"\x10" + b"\xff" * 10 + b"\x01") + b
    elif kind == 4 and len(b) > 4:  # splice
        i = rng.randrange(len(b))
        b = b[:i] + rng.randbytes(rng.randint(1, 16)) + b[i:]
    elif kind == 5:  # repeat
        b = b * rng.randint(2, 3)
    # kind 6: unchanged (a valid frame, possibly out of sequence)
    return bytes(b)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_ten_thousand_mutated_frames(tmp_path):
    rng = random.Random(1234)
    with LoopbackConsortium(
        ("alice", "bob"), tmp_path, pending_wait_s=0.05, policy=OPEN_POLICY_TOML
    ) as bed:
        alice, bob = bed.nodes["alice"], bed.nodes["bob"]
        job_id = "fuzz-target"
        alice.open_endpoint(job_id, ("alice", "bob"), timeout=5)
        seeds = []
        for seq in range(1, 30):
            data = _envelope(job_id if seq % 3 else "no-such-job", seq, rng.randint(0, 3000))
            seeds += split_envelope(data, job_id=job_id, seq=seq, max_chunk=512)
        seeds = [f.SerializeToString() for f in seeds]
        exchange = _raw_exchange(bob.channel("alice"))
        rss0 = _rss_mb()
        sent = 0
        codes: dict[str, int] = {}
        while sent < FRAMES:
            batch = [_mutate(rng.choice(seeds), rng) for _ in range(rng.randint(1, 40))]
            sent += len(batch)
            try:
                exchange(iter(batch), timeout=120)  # a hang deadline only
                codes["OK"] = codes.get("OK", 0) + 1
            except grpc.RpcError as exc:
                name = exc.code().name  # type: ignore[attr-defined]
                codes[name] = codes.get(name, 0) + 1
                assert exc.code() != grpc.StatusCode.UNKNOWN, exc.details()  # type: ignore[attr-defined]
        assert _rss_mb() - rss0 < 400, "memory grew with the fuzz"
        assert set(codes) <= {"OK", "INVALID_ARGUMENT", "NOT_FOUND", "PERMISSION_DENIED"}, codes
        alice.close_endpoint(job_id)
        alice.forget_endpoint(job_id)
        # The node still serves: a fresh exchange between the two works.
        job = bed.open(timeout=10)
        try:
            job.endpoint("bob").send("alice", "hello", np.arange(5))
            assert list(job.endpoint("alice").receive("bob", "hello")) == [0, 1, 2, 3, 4]
        finally:
            job.close()
        reply = party_pb2_grpc.PartyStub(bob.channel("alice")).Health(pb.HealthRequest(), timeout=5)
        assert reply.party == "alice"


def test_one_member_cannot_hold_every_server_thread(tmp_path):
    with LoopbackConsortium(("alice", "bob"), tmp_path, pending_wait_s=5.0) as bed:
        exchange = _raw_exchange(bed.nodes["bob"].channel("alice"))
        release = threading.Event()

        def silent():
            release.wait(15)
            return
            yield  # a stream that sends nothing until released

        calls = [exchange.future(silent(), timeout=20) for _ in range(MAX_STREAMS_PER_PEER + 3)]
        time.sleep(1.0)
        refused = [c for c in calls if c.done() and c.exception() is not None]
        assert refused, "no stream was refused"
        assert all(
            c.exception().code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[union-attr]
            for c in refused
        )
        # Another member's health checks and jobs still get threads.
        reply = party_pb2_grpc.PartyStub(bed.nodes["bob"].channel("alice")).Health(
            pb.HealthRequest(), timeout=5
        )
        assert reply.party == "alice"
        release.set()
        for c in calls:
            with contextlib.suppress(grpc.RpcError):
                c.result(timeout=20)
