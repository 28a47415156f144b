"""Naor–Pinkas 1-out-of-N and k-out-of-N OT: every index pattern, both OT sources (base
OTs for small batches, IKNP for large ones or with a session), bad peers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.local import simulate
from ppdm.protocols.ot.extension import OTSession
from ppdm.protocols.ot.one_of_n import (
    STEP_Y,
    k_of_n_receive,
    k_of_n_send,
    one_of_n_receive,
    one_of_n_send,
)
from ppdm.testbed.consortia import LoopbackConsortium

PARTIES = ("alice", "bob")


def _table(seed: int, m: int, n: int, length: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (m, n, length), dtype=np.uint8)


def _run(messages, choices, *, session=False, bed=None):
    _m, n, length = messages.shape

    def party(net, _):
        peer = "bob" if net.me == "alice" else "alice"
        sess = OTSession(net, peer) if session else None
        if net.me == "alice":
            return one_of_n_send(net, "bob", messages, session=sess)
        return one_of_n_receive(net, "alice", choices, n=n, length=length, session=sess)

    inputs = {"alice": None, "bob": None}
    sim = bed.simulate(party, inputs, timeout=30) if bed else simulate(party, inputs, timeout=30)
    return sim.results["bob"]


@given(
    st.integers(2, 40).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.integers(0, n - 1), min_size=1, max_size=12))
    ),
    st.integers(1, 20),
)
def test_one_of_n_every_index_base_ots(n_and_choices, length):
    n, choices = n_and_choices
    x = _table(n * 31 + length, len(choices), n, length)
    got = _run(x, np.array(choices))
    assert np.array_equal(got, x[np.arange(len(choices)), choices])


@pytest.mark.parametrize("session", [False, True])
@pytest.mark.parametrize("n,length", [(2, 1), (16, 1), (5, 33), (256, 4)])
def test_one_of_n_large_batches_use_extension(n, length, session):
    m = 600
    c = np.random.default_rng(n).integers(0, n, m)
    x = _table(n + length, m, n, length)
    got = _run(x, c, session=session)
    assert np.array_equal(got, x[np.arange(m), c])


def test_unchosen_messages_not_in_receiver_output_or_view():
    n, m, length = 8, 200, 16
    x = _table(5, m, n, length)
    c = np.random.default_rng(6).integers(0, n, m)
    seen = []

    def party(net, _):
        if net.me == "alice":
            return one_of_n_send(net, "bob", x)
        original = net.receive

        def receive(frm, step, **kw):
            v = original(frm, step, **kw)
            seen.append(v.tobytes() if isinstance(v, np.ndarray) else repr(v).encode())
            return v

        net.receive = receive
        return one_of_n_receive(net, "alice", c, n=n, length=length)

    got = simulate(party, {"alice": None, "bob": None}, timeout=30).results["bob"]
    assert np.array_equal(got, x[np.arange(m), c])
    view = b"".join(seen)
    for i in range(0, m, 7):
        for j in range(n):
            if j != c[i]:
                assert x[i, j].tobytes() not in view


def test_k_of_n():
    rows = np.arange(30 * 6, dtype=np.uint8).reshape(30, 6)
    idx = [29, 0, 17, 4]

    def party(net, _):
        if net.me == "alice":
            return k_of_n_send(net, "bob", rows, len(idx))
        return k_of_n_receive(net, "alice", idx, n=30, length=6)

    got = simulate(party, {"alice": None, "bob": None}, timeout=30).results["bob"]
    assert np.array_equal(got, rows[idx])


def test_k_of_n_rejects_repeated_indices_and_bad_k():
    from ppdm.parties.local import LocalNetwork

    net = LocalNetwork(PARTIES).endpoint("bob")
    with pytest.raises(ValueError):
        k_of_n_receive(net, "alice", [3, 3], n=5, length=1)
    with pytest.raises(ValueError):
        k_of_n_send(net, "alice", np.zeros((4, 2), np.uint8), 5)
    with pytest.raises(ValueError):
        one_of_n_receive(net, "alice", [5], n=5, length=1)
    with pytest.raises(ValueError):
        one_of_n_send(net, "alice", np.zeros((2, 1, 3), np.uint8))


def test_on_grpc_loopback(tmp_path):
    x = _table(1, 300, 16, 2)
    c = np.random.default_rng(2).integers(0, 16, 300)
    with LoopbackConsortium(PARTIES, tmp_path) as bed:
        got = _run(x, c, bed=bed)
    assert np.array_equal(got, x[np.arange(300), c])


@pytest.mark.parametrize(
    "bad", [np.zeros((3, 4, 2), np.uint8), np.zeros((3, 4, 1), np.int8), "nope"]
)
def test_bad_masked_messages(bad):
    def party(net, _):
        if net.me == "alice":
            from ppdm.protocols.ot.base import base_ot_send_random

            base_ot_send_random(net, "bob", 6, length=4)
            net.send("bob", STEP_Y, bad)
            net.receive("bob", "never", timeout=5)
            return None
        return one_of_n_receive(net, "alice", [0, 1, 3], n=4, length=1)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, timeout=10)
    assert info.value.party == "alice" and info.value.step == STEP_Y
