"""The transport-independent endpoint: ordering, validation, aborts, timeouts, metrics."""

from __future__ import annotations

import time

import numpy as np
import pytest

from ppdm.errors import PartyFailure, ProtocolError
from ppdm.parties.local import LocalNetwork, simulate
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb
from ppdm.proto.ppdm.v1 import payload_pb2 as pb


def test_fifo_per_sender_and_step():
    net = LocalNetwork(["a", "b"])
    for i in range(5):
        net["a"].send("b", "x", i)
        net["a"].send("b", "y", -i)
    assert [net["b"].receive("a", "y") for _ in range(5)] == [0, -1, -2, -3, -4]
    assert [net["b"].receive("a", "x") for _ in range(5)] == [0, 1, 2, 3, 4]


def test_expect_type_mismatch_is_protocol_error_naming_party_and_step():
    net = LocalNetwork(["a", "b"])
    net["a"].send("b", "s1", "text")
    with pytest.raises(ProtocolError) as info:
        net["b"].receive("a", "s1", expect=np.ndarray)
    assert info.value.party == "a" and info.value.step == "s1"


def test_undecodable_payload_is_protocol_error():
    net = LocalNetwork(["a", "b"])
    env = env_pb.Envelope(
        consortium="local",
        job_id=net.job_id,
        step="s",
        sender="a",
        recipient="b",
        seq=1,
        payload=pb.Payload(array=pb.NdArray(dtype="<i8", shape=[2], data=b"123")),
    )
    net["b"].deliver(env.SerializeToString(), sender="a")
    with pytest.raises(ProtocolError, match="does not decode") as info:
        net["b"].receive("a", "s")
    assert info.value.party == "a"


def test_garbage_bytes_poison_the_sender():
    net = LocalNetwork(["a", "b"])
    net["b"].deliver(b"\xff\xff\xff garbage", sender="a")
    with pytest.raises(ProtocolError, match="undecodable") as info:
        net["b"].receive("a", "anything", timeout=1)
    assert info.value.party == "a" and info.value.step == "anything"


def test_impersonation_is_refused():
    net = LocalNetwork(["a", "b", "c"])
    env = env_pb.Envelope(
        consortium="local",
        job_id=net.job_id,
        step="s",
        sender="c",
        recipient="b",
        seq=1,
        payload=pb.Payload(int64=1),
    )
    net["b"].deliver(env.SerializeToString(), sender="a")
    with pytest.raises(ProtocolError, match="claims sender"):
        net["b"].receive("a", "s", timeout=1)


def test_replayed_sequence_number_is_refused():
    net = LocalNetwork(["a", "b"])
    env = env_pb.Envelope(
        consortium="local",
        job_id=net.job_id,
        step="s",
        sender="a",
        recipient="b",
        seq=1,
        payload=pb.Payload(int64=1),
    )
    data = env.SerializeToString()
    net["b"].deliver(data, sender="a")
    net["b"].deliver(data, sender="a")
    assert net["b"].receive("a", "s") == 1
    with pytest.raises(ProtocolError, match="sequence number"):
        net["b"].receive("a", "s", timeout=1)


def test_wrong_job_is_refused():
    net = LocalNetwork(["a", "b"])
    env = env_pb.Envelope(
        consortium="local",
        job_id="other",
        step="s",
        sender="a",
        recipient="b",
        seq=1,
        payload=pb.Payload(int64=1),
    )
    net["b"].deliver(env.SerializeToString(), sender="a")
    with pytest.raises(ProtocolError, match="job"):
        net["b"].receive("a", "s", timeout=1)


def test_receive_timeout_names_the_silent_party():
    net = LocalNetwork(["a", "b"])
    t0 = time.perf_counter()
    with pytest.raises(PartyFailure) as info:
        net["b"].receive("a", "s", timeout=0.2)
    assert info.value.party == "a"
    assert time.perf_counter() - t0 < 120  # a hang guard only (no wall-clock goal)


def test_failing_party_aborts_the_others_and_its_error_is_reraised():
    def fn(net, _):
        if net.me == "b":
            raise ValueError("b's data is broken")
        return net.receive("b", "never")

    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="broken") as info:
        simulate(fn, {"a": None, "b": None, "c": None}, timeout=900)
    # the abort, not the 900 s receive timeout, ended it (a generous bound: no speed goal)
    assert time.perf_counter() - t0 < 450
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "party 'a'" in notes and "'b' failed" in notes


def test_dead_party_is_named_within_the_timeout():
    net = LocalNetwork(["a", "b", "c"], timeout=0.5)
    net.take_down("c")

    def fn(ep, _):
        if ep.me == "c":
            return None
        return ep.receive("c", "result")

    with pytest.raises(PartyFailure) as info:
        simulate(fn, {"a": None, "b": None, "c": None}, network=net, timeout=0.5)
    assert info.value.party == "c"


def test_metrics_count_messages_and_bytes():
    def fn(net, _):
        if net.me == "a":
            net.send("b", "big", np.zeros(1000, dtype=np.uint64))
        else:
            net.receive("a", "big")

    sim = simulate(fn, {"a": None, "b": None})
    (sent,) = sim.metrics["a"]
    (recv,) = sim.metrics["b"]
    assert sent["step"] == "big" and sent["messages_sent"] == 1
    assert sent["bytes_sent"] == recv["bytes_received"] > 8000


def test_scoped_network_prefixes_steps():
    def fn(net, _):
        sub = net.scoped("outer")
        if net.me == "a":
            sub.send("b", "inner", 7)
        else:
            return net.receive("a", "outer/inner")
        return None

    assert simulate(fn, {"a": None, "b": None}).results["b"] == 7


def test_ring_helpers():
    net = LocalNetwork(["a", "b", "c"])
    assert net["a"].successor() == "b" and net["a"].predecessor() == "c"
    assert net["c"].successor() == "a"
    assert net["b"].successor(["c", "b"]) == "c"
    assert net["b"].others == ("a", "c")
