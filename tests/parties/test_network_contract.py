"""The network contract: one suite, run against the in-process network and against gRPC
(every party's node in this process, mutual TLS over 127.0.0.1, small frames so that
chunking is exercised)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppdm.errors import PartyFailure, ProtocolError
from ppdm.parties.codec import BigInts, ByteStrings
from ppdm.parties.grpc_net import PeerStream
from ppdm.parties.local import LocalNetwork, simulate
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb
from ppdm.protocols.secure_sum import secure_sum
from ppdm.testbed.consortia import LoopbackConsortium

PARTIES = ("alice", "bob", "carol")
SMALL_FRAMES = 16 * 1024


@pytest.fixture(scope="module")
def loopback(tmp_path_factory):
    bed = LoopbackConsortium(
        PARTIES, tmp_path_factory.mktemp("loopback"), max_message_bytes=SMALL_FRAMES
    )
    with bed:
        yield bed


class _LocalJob:
    def __init__(self, timeout: float) -> None:
        self.net = LocalNetwork(PARTIES, timeout=timeout)
        self.job_id = self.net.job_id

    def endpoint(self, party: str):
        return self.net.endpoint(party)

    def inject(self, frm: str, to: str, data: bytes) -> None:
        """Deliver raw envelope bytes to ``to`` on ``frm``'s authenticated connection."""
        self.net.endpoint(to).deliver(data, sender=frm)

    def close(self) -> None:
        pass


class _GrpcJob:
    def __init__(self, bed: LoopbackConsortium, timeout: float) -> None:
        self.bed = bed
        self.job = bed.open(timeout=timeout)
        self.job_id = self.job.job_id

    def endpoint(self, party: str):
        return self.job.endpoint(party)

    def inject(self, frm: str, to: str, data: bytes) -> None:
        stream = PeerStream(
            self.bed.nodes[frm].channel(to),
            to,
            self.job_id,
            max_chunk=SMALL_FRAMES - 1024,
            timeout=5.0,
            on_failure=lambda *_: None,
        )
        stream.send(data)
        stream.close(5.0)

    def close(self) -> None:
        self.job.close()


def _envelope(job_id: str, sender: str, recipient: str, seq: int, value: Any, **kw) -> bytes:
    from ppdm.parties.codec import encode

    env = env_pb.Envelope(
        consortium=kw.pop("consortium", None),
        job_id=job_id,
        step=kw.pop("step", "evil"),
        sender=sender,
        recipient=recipient,
        seq=seq,
        payload=encode(value),
    )
    return env.SerializeToString()


# The same property runs once per backend (subclass); sharing examples between them is
# the point, so the differing-executors check does not apply.
_per_backend = settings(suppress_health_check=[HealthCheck.differing_executors])


class NetworkContract:
    """What every Network implementation must do. Subclasses give ``run`` (simulate a
    function at every party) and ``open_job`` (endpoints driven by hand)."""

    consortium_name = "local"

    @pytest.fixture(scope="class")
    @classmethod
    def run(cls):
        raise NotImplementedError

    @pytest.fixture(scope="class")
    @classmethod
    def open_job(cls):
        raise NotImplementedError

    # Values and ordering ------------------------------------------------------------

    @_per_backend
    @given(
        value=st.one_of(
            st.none(),
            st.booleans(),
            st.integers(min_value=-(2**300), max_value=2**300),
            st.floats(allow_nan=False),
            st.text(max_size=30),
            st.binary(max_size=40_000),
            st.lists(st.integers(-(2**63), 2**63 - 1), max_size=30).map(
                lambda v: np.array(v, dtype=np.int64)
            ),
            st.lists(st.integers(0, 2**2048), max_size=5).map(BigInts),
            st.lists(st.binary(max_size=40), max_size=5).map(ByteStrings),
            st.dictionaries(st.text(max_size=5), st.integers(), max_size=4),
        )
    )
    def test_values_arrive_intact(self, run, value):
        def fn(net, _):
            if net.me == "alice":
                net.send("bob", "v", value)
                return None
            if net.me == "bob":
                return net.receive("alice", "v")
            return None

        got = run(fn, dict.fromkeys(PARTIES)).results["bob"]
        if isinstance(value, np.ndarray):
            assert got.dtype == value.dtype and np.array_equal(got, value)
        else:
            assert type(got) is type(value) and got == value

    def test_fifo_per_sender_and_step_and_any_step_order(self, run):
        def fn(net, _):
            if net.me == "alice":
                for i in range(5):
                    net.send("bob", "a", i)
                net.send("bob", "b", "last")
                return None
            if net.me == "bob":
                first = net.receive("alice", "b")
                return [first] + [net.receive("alice", "a") for _ in range(5)]
            return None

        assert run(fn, dict.fromkeys(PARTIES)).results["bob"] == ["last", 0, 1, 2, 3, 4]

    def test_broadcast_gather_ring_and_scoped_tags(self, run):
        def fn(net, x):
            net.broadcast("hello", x)
            got = net.gather("hello", expect=int)
            sub = net.scoped("sub")
            sub.send(net.successor(), "ring", x)
            prev = sub.receive(net.predecessor(), "ring", expect=int)
            return got, prev, net.index

        sim = run(fn, {"alice": 1, "bob": 2, "carol": 3})
        assert sim.results["alice"] == ({"bob": 2, "carol": 3}, 3, 0)
        assert sim.results["bob"] == ({"alice": 1, "carol": 3}, 1, 1)
        steps = {m["step"] for m in sim.metrics["carol"]}
        assert steps == {"hello", "sub/ring"}

    def test_large_message_is_chunked_and_metered(self, run):
        big = np.arange(300_000, dtype=np.int64)  # 2.4 MB, far above the frame size

        def fn(net, _):
            if net.me == "alice":
                net.send("carol", "big", big)
                return None
            if net.me == "carol":
                return net.receive("alice", "big", expect=np.ndarray)
            return None

        sim = run(fn, dict.fromkeys(PARTIES))
        assert np.array_equal(sim.results["carol"], big)
        sent = {m["step"]: m for m in sim.metrics["alice"]}["big"]
        received = {m["step"]: m for m in sim.metrics["carol"]}["big"]
        assert sent["bytes_sent"] == received["bytes_received"] > big.nbytes

    @_per_backend
    @given(st.lists(st.integers(-(2**40), 2**40), min_size=3, max_size=3))
    def test_secure_sum_equals_the_plain_sum(self, run, xs):
        sim = run(secure_sum, dict(zip(PARTIES, xs, strict=True)))
        assert set(sim.results.values()) == {sum(xs)}

    # Failures -------------------------------------------------------------------------

    def test_receive_timeout_names_the_silent_party(self, run):
        def fn(net, _):
            if net.me == "bob":
                net.receive("alice", "never", timeout=0.3)
            return None

        with pytest.raises(PartyFailure) as info:  # a hang is caught by pytest-timeout
            run(fn, dict.fromkeys(PARTIES))
        assert info.value.party == "alice" and info.value.step == "never"

    def test_a_failing_party_aborts_the_others(self, run):
        def fn(net, _):
            if net.me == "carol":
                raise RuntimeError("carol's disk is full")
            return net.receive("carol", "x")

        with pytest.raises(RuntimeError, match="disk is full") as info:
            run(fn, dict.fromkeys(PARTIES))
        notes = "\n".join(getattr(info.value, "__notes__", []))
        assert "party 'alice' then failed" in notes and "'carol'" in notes

    def test_abort_reaches_a_waiting_party(self, open_job):
        job = open_job(10.0)
        try:
            job.endpoint("alice").abort("giving up")
            with pytest.raises(PartyFailure, match="giving up") as info:
                job.endpoint("bob").receive("carol", "x")
            assert info.value.party == "alice"
        finally:
            job.close()

    def test_wrong_type_is_a_protocol_error(self, run):
        def fn(net, _):
            if net.me == "alice":
                net.send("bob", "count", "not a number")
            if net.me == "bob":
                net.receive("alice", "count", expect=int)

        with pytest.raises(ProtocolError) as info:
            run(fn, dict.fromkeys(PARTIES))
        assert (info.value.party, info.value.step) == ("alice", "count")

    def test_sending_to_self_or_a_stranger_is_refused(self, open_job):
        job = open_job(5.0)
        try:
            with pytest.raises(ValueError, match="itself"):
                job.endpoint("alice").send("alice", "x", 1)
            with pytest.raises(ValueError, match="unknown party"):
                job.endpoint("alice").send("mallory", "x", 1)
        finally:
            job.close()

    # Malicious peers ------------------------------------------------------------------

    def _expect_protocol_error(self, job, party: str = "bob", step: str = "evil") -> ProtocolError:
        with pytest.raises(ProtocolError) as info:
            job.endpoint("alice").receive(party, step, timeout=10)
        assert info.value.party == party
        return info.value

    def test_envelope_claiming_another_sender_is_refused(self, open_job):
        job = open_job(10.0)
        try:
            data = _envelope(job.job_id, "carol", "alice", 1, 5, consortium=self.consortium_name)
            job.inject("bob", "alice", data)
            err = self._expect_protocol_error(job)
            assert "claims sender 'carol'" in err.reason
        finally:
            job.close()

    def test_undecodable_envelope_is_a_protocol_error(self, open_job):
        job = open_job(10.0)
        try:
            job.inject("bob", "alice", b"\xff\xff\xff\xff garbage")
            err = self._expect_protocol_error(job)
            assert "undecodable" in err.reason
        finally:
            job.close()

    def test_bad_payload_names_party_and_step(self, open_job):
        job = open_job(10.0)
        try:
            env = env_pb.Envelope.FromString(
                _envelope(
                    job.job_id, "bob", "alice", 1, np.zeros(4), consortium=self.consortium_name
                )
            )
            env.payload.array.data = b"\x00" * 5  # not 4 float64 values
            job.inject("bob", "alice", env.SerializeToString())
            err = self._expect_protocol_error(job)
            assert err.step == "evil" and "does not decode" in err.reason
        finally:
            job.close()

    def test_sequence_gap_is_a_protocol_error(self, open_job):
        job = open_job(10.0)
        try:
            data = _envelope(job.job_id, "bob", "alice", 7, 1, consortium=self.consortium_name)
            job.inject("bob", "alice", data)
            err = self._expect_protocol_error(job)
            assert "sequence number 7" in err.reason
        finally:
            job.close()

    def test_envelope_for_another_job_is_refused(self, open_job):
        job = open_job(10.0)
        try:
            data = _envelope("other-job", "bob", "alice", 1, 1, consortium=self.consortium_name)
            job.inject("bob", "alice", data)
            err = self._expect_protocol_error(job)
            assert "for job 'other-job'" in err.reason
        finally:
            job.close()


class TestLocalNetwork(NetworkContract):
    @pytest.fixture(scope="class")
    @classmethod
    def run(cls):
        return simulate

    @pytest.fixture(scope="class")
    @classmethod
    def open_job(cls):
        return _LocalJob


class TestGrpcNetwork(NetworkContract):
    consortium_name = "ppdm-testbed"

    @pytest.fixture(scope="class")
    @classmethod
    def run(cls, loopback):
        return loopback.simulate

    @pytest.fixture(scope="class")
    @classmethod
    def open_job(cls, loopback):
        return lambda timeout: _GrpcJob(loopback, timeout)
