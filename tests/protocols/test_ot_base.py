"""Chou–Orlandi base OT: correctness for every choice pattern, the receiver's view, and
malicious peers (invalid points, wrong lengths)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.codec import ByteStrings
from ppdm.parties.local import LocalNetwork, simulate
from ppdm.protocols import ecgroup
from ppdm.protocols.ot.base import (
    STEP_A,
    STEP_B,
    STEP_CIPHERTEXTS,
    base_ot_receive,
    base_ot_receive_random,
    base_ot_send,
    base_ot_send_random,
)
from ppdm.testbed.consortia import LoopbackConsortium

PARTIES = ("alice", "bob")


def _messages(seed: int, m: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.integers(0, 256, (m, length), dtype=np.uint8),
        rng.integers(0, 256, (m, length), dtype=np.uint8),
    )


class Recorder:
    """Wraps a party's receive to keep every value it received (its view)."""

    def __init__(self, net):
        self.net = net
        self.view: list = []
        original = net.receive

        def receive(frm, step, **kw):
            value = original(frm, step, **kw)
            self.view.append(value)
            return value

        net.receive = receive


def _view_bytes(view) -> bytes:
    out = b""
    for v in view:
        if isinstance(v, bytes):
            out += v
        elif isinstance(v, np.ndarray):
            out += v.tobytes()
        elif isinstance(v, list):
            out += b"".join(x if isinstance(x, bytes) else b"" for x in v)
    return out


@given(st.lists(st.integers(0, 1), max_size=24))
def test_random_ot_every_choice_pattern(choices):
    c = np.array(choices, dtype=np.uint8)

    def party(net, _):
        if net.me == "alice":
            return base_ot_send_random(net, "bob", len(c))
        return base_ot_receive_random(net, "alice", c)

    out = simulate(party, {"alice": None, "bob": None}, timeout=20).results
    k0, k1 = out["alice"]
    got = out["bob"]
    assert k0.shape == k1.shape == got.shape == (len(c), 16)
    assert np.array_equal(got, np.where(c[:, None] == 1, k1, k0))
    assert (k0 != k1).any(axis=1).all()


@given(st.lists(st.integers(0, 1), min_size=1, max_size=16), st.integers(1, 70))
def test_chosen_message_ot_and_receiver_view(choices, length):
    c = np.array(choices, dtype=np.uint8)
    m0, m1 = _messages(len(c) * 100 + length, len(c), length)
    views = {}

    def party(net, _):
        if net.me == "alice":
            return base_ot_send(net, "bob", m0, m1)
        rec = Recorder(net)
        views["bob"] = rec
        return base_ot_receive(net, "alice", c, length=length)

    got = simulate(party, {"alice": None, "bob": None}, timeout=20).results["bob"]
    assert np.array_equal(got, np.where(c[:, None] == 1, m1, m0))
    if length >= 8:  # long enough that an accidental match is impossible
        seen = _view_bytes(views["bob"].view) + got.tobytes()
        for i, ci in enumerate(c):
            unchosen = (m0 if ci else m1)[i].tobytes()
            assert unchosen not in seen


def test_on_grpc_loopback(tmp_path):
    c = np.array([0, 1, 1, 0, 1], dtype=np.uint8)
    m0, m1 = _messages(3, 5, 20)

    def party(net, _):
        if net.me == "alice":
            return base_ot_send(net, "bob", m0, m1)
        return base_ot_receive(net, "alice", c, length=20)

    with LoopbackConsortium(PARTIES, tmp_path) as bed:
        got = bed.simulate(party, {"alice": None, "bob": None}, timeout=30).results["bob"]
    assert np.array_equal(got, np.where(c[:, None] == 1, m1, m0))


def test_empty_batch():
    def party(net, _):
        if net.me == "alice":
            return base_ot_send_random(net, "bob", 0)
        return base_ot_receive_random(net, "alice", [])

    out = simulate(party, {"alice": None, "bob": None}, timeout=10).results
    assert out["bob"].shape == (0, 16)


@pytest.mark.parametrize("bad", [b"\x02" + b"\xff" * 32, b"short", 17, b"\x05" + bytes(32)])
def test_invalid_point_from_sender(bad):
    def party(net, _):
        if net.me == "alice":
            net.send("bob", STEP_A, bad)
            net.receive("bob", "never", timeout=5)
            return None
        return base_ot_receive_random(net, "alice", [0, 1])

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, timeout=10)
    assert info.value.party == "alice" and info.value.step == STEP_A


def _bad_receiver(points):
    def party(net, _):
        if net.me == "alice":
            return base_ot_send_random(net, "bob", 3)
        a = net.receive("alice", STEP_A)
        net.send("alice", STEP_B, points(a))
        net.receive("alice", "never", timeout=5)
        return None

    return party


@pytest.mark.parametrize(
    "points",
    [
        lambda a: ByteStrings([ecgroup.base_mult(2)] * 2),  # too few
        lambda a: ByteStrings([ecgroup.base_mult(2)] * 4),  # too many
        lambda a: ByteStrings([ecgroup.base_mult(2), b"\x02" + b"\xff" * 32, a]),  # off-curve
        lambda a: ByteStrings([ecgroup.base_mult(2), a, a]),  # B = A: a(B - A) = infinity
        lambda a: ByteStrings([b"\x02" * 10] * 3),  # wrong length
        lambda a: "not points",
    ],
)
def test_invalid_points_from_receiver(points):
    with pytest.raises(ProtocolError) as info:
        simulate(_bad_receiver(points), {"alice": None, "bob": None}, timeout=10)
    assert info.value.party == "bob" and info.value.step == STEP_B


def test_ciphertexts_of_the_wrong_shape():
    net = LocalNetwork(PARTIES, timeout=10)

    def party(net_, _):
        if net_.me == "alice":
            base_ot_send_random(net_, "bob", 2, length=4)
            net_.send("bob", STEP_CIPHERTEXTS, np.zeros((2, 2, 5), dtype=np.uint8))
            net_.receive("bob", "never", timeout=5)
            return None
        return base_ot_receive(net_, "alice", [1, 0], length=4)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, network=net, timeout=10)
    assert info.value.party == "alice" and info.value.step == STEP_CIPHERTEXTS


def test_local_input_checks():
    net = LocalNetwork(PARTIES, timeout=1).endpoint("alice")
    with pytest.raises(ValueError):
        base_ot_send(net, "bob", np.zeros((2, 3), np.uint8), np.zeros((2, 4), np.uint8))
    with pytest.raises(ValueError):
        base_ot_send_random(net, "bob", -1)


def test_batches_spanning_several_point_messages():
    c = np.random.default_rng(0).integers(0, 2, 600).astype(np.uint8)
    m0, m1 = _messages(1, 600, 3)

    def party(net, _):
        if net.me == "alice":
            return base_ot_send(net, "bob", m0, m1)
        return base_ot_receive(net, "alice", c, length=3)

    sim = simulate(party, {"alice": None, "bob": None}, timeout=30)
    assert np.array_equal(sim.results["bob"], np.where(c[:, None] == 1, m1, m0))
    steps = {s["step"]: s for s in sim.metrics["bob"]}
    assert steps[STEP_B]["messages_sent"] == 3  # 256 + 256 + 88 points


def test_bad_point_in_a_later_message():
    def party(net, _):
        if net.me == "alice":
            return base_ot_send_random(net, "bob", 300)
        a = net.receive("alice", STEP_A)
        net.send("alice", STEP_B, ByteStrings([ecgroup.base_mult(3)] * 256))
        net.send("alice", STEP_B, ByteStrings([ecgroup.base_mult(3)] * 43 + [a]))
        net.receive("alice", "never", timeout=5)
        return None

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, timeout=10)
    assert info.value.party == "bob" and "point 299" in info.value.reason


def test_a_secret_scalar_is_not_found_by_a_small_range_search() -> None:
    """Attacker's side: from the public point ``k G`` a party sends (base OT, commutative
    encryption), try every ``k`` below 2^16 (a table of 2^16 points) -- the search a
    weak scalar falls to. With ``k`` uniform in the group order it succeeds with
    probability 2^-240 per point; 16 points from fresh scalars must all resist it."""
    from ppdm.protocols.ecgroup import base_mult, random_scalar

    table = {base_mult(i) for i in range(1, (1 << 16) + 2)}
    found = sum(base_mult(random_scalar()) in table for _ in range(16))
    assert found == 0


def test_the_libsecp256k1_loops_equal_the_coincurve_ones(monkeypatch):
    """The per-OT loops run on libsecp256k1 directly (a few key buffers per batch); the
    coincurve versions (no cffi module) must give the same points, keys and errors, and
    either side may run either one."""
    from ppdm.protocols.ot import base

    if base._lib is None:
        pytest.skip("coincurve's cffi module is not available: only the coincurve loops run")
    c = np.random.default_rng(5).integers(0, 2, 40).astype(np.uint8)
    want = np.where(c[:, None] == 1, 1, 0)
    sender = base.ChouOrlandiSender()
    fast = base.ChouOrlandiReceiver(sender.first_message, peer="alice")
    pts_fast = list(fast.points(c))
    with monkeypatch.context() as m:
        m.setattr(base, "_lib", None)
        slow = base.ChouOrlandiReceiver(sender.first_message, peer="alice")
        pts_slow = list(slow.points(c))
        s0, s1 = sender.keys(pts_fast, count=40, length=20, peer="bob")
        slow_keys = slow.keys(20)
        fast_keys_py = fast.keys(20)
        errors_py = [_sender_error(sender, bad) for bad in _bad_batches(sender)]
    f0, f1 = sender.keys(pts_fast, count=40, length=20, peer="bob")
    assert np.array_equal(f0, s0) and np.array_equal(f1, s1)
    assert np.array_equal(fast.keys(20), fast_keys_py)
    assert np.array_equal(fast_keys_py, np.where(want == 1, f1, f0))
    g0, g1 = sender.keys(pts_slow, count=40, length=20, peer="bob")
    assert np.array_equal(slow_keys, np.where(want == 1, g1, g0))
    assert [_sender_error(sender, bad) for bad in _bad_batches(sender)] == errors_py


def _bad_batches(sender) -> list:
    good = ecgroup.base_mult(5)
    return [
        [good, b"\x02" + b"\xff" * 32, good],
        [good, good, sender.first_message],
        [good, b"\x02" * 10, good],
        [good, 7, good],
        [good, bytearray(good), good],
    ]


def _sender_error(sender, batch) -> str:
    with pytest.raises(ProtocolError) as info:
        sender.keys(batch, count=len(batch), length=16, peer="bob", offset=3)
    return f"{info.value.party} {info.value.step} {info.value.reason}"


def test_the_library_loops_keep_their_points_alive(monkeypatch):
    """cffi pointer arrays do not own what they point to: every point the loops parse
    for libsecp256k1 must stay alive while they run (a freed ``-aA`` gave wrong keys now
    and then). Checked at each point the loops encode, after a garbage collection."""
    import gc
    import weakref

    from ppdm.protocols.ot import base

    if base._lib is None:
        pytest.skip("coincurve's cffi module is not available: only the coincurve loops run")
    made: list = []
    real_parsed, real_serializer = base._parsed, base._serializer

    def parsed(point):
        key = real_parsed(point)
        made.append(weakref.ref(key))
        return key

    def serializer():  # every loop makes its encoder first, then parses its points
        made.clear()
        encode = real_serializer()

        def checked(key):
            gc.collect()
            assert all(r() is not None for r in made), "a parsed point was freed mid-loop"
            return encode(key)

        return checked

    monkeypatch.setattr(base, "_parsed", parsed)
    monkeypatch.setattr(base, "_serializer", serializer)
    c = np.array([0, 1, 1, 0, 1], dtype=np.uint8)
    sender = base.ChouOrlandiSender()
    receiver = base.ChouOrlandiReceiver(sender.first_message, peer="alice")
    k0, k1 = sender.keys(list(receiver.points(c)), count=5, length=16, peer="bob")
    assert np.array_equal(receiver.keys(16), np.where(c[:, None] == 1, k1, k0))
