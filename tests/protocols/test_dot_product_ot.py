"""OT-based binary dot product and AND against plain computation: random, all-zero and
all-one vectors, batches, every output mode, both networks, bad peers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.local import LocalNetwork, simulate
from ppdm.protocols.dot_product_ot import (
    STEP_REVEAL,
    binary_dot_product,
    binary_dot_product_shares,
    secure_and_shares,
)
from ppdm.protocols.ot.extension import OTSession
from ppdm.testbed.consortia import LoopbackConsortium

PARTIES = ("alice", "bob")


def _dot(x, y, *, bed=None, **kw):
    def party(net, v):
        return binary_dot_product(net, v, x_party="alice", y_party="bob", **kw)

    inputs = {"alice": np.asarray(x), "bob": np.asarray(y)}
    sim = bed.simulate(party, inputs, timeout=30) if bed else simulate(party, inputs, timeout=30)
    return sim.results


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=400))
def test_dot_product_random(pairs):
    x = np.array([p[0] for p in pairs])
    y = np.array([p[1] for p in pairs])
    out = _dot(x, y)
    assert int(out["alice"]) == int(out["bob"]) == int(x @ y)
    assert out["alice"].shape == ()


@pytest.mark.parametrize("n", [1, 100_000])
def test_dot_product_all_zero_all_one(n):
    zeros, ones = np.zeros(n, np.uint8), np.ones(n, np.uint8)
    x = np.stack([zeros, ones, ones, zeros])
    y = np.stack([zeros, ones, zeros, ones])
    out = _dot(x, y)
    assert out["alice"].tolist() == out["bob"].tolist() == [0, n, 0, 0]


def test_batch_of_candidate_itemsets_and_reveal_to():
    rng = np.random.default_rng(2)
    x = rng.random((7, 5000)) < 0.3
    y = rng.random((7, 5000)) < 0.6
    out = _dot(x, y, reveal_to="bob")
    assert out["alice"] is None
    assert out["bob"].tolist() == (x.astype(int) * y).sum(axis=1).tolist()


@pytest.mark.parametrize("ring_bits", [8, 16, 32, 64])
def test_shares_mod_2k(ring_bits):
    rng = np.random.default_rng(ring_bits)
    x = rng.integers(0, 2, (3, 300))
    y = rng.integers(0, 2, (3, 300))

    def party(net, v):
        return binary_dot_product_shares(
            net, v, x_party="alice", y_party="bob", ring_bits=ring_bits
        )

    sh = simulate(party, {"alice": x, "bob": y}, timeout=30).results
    total = (sh["alice"] + sh["bob"]) & np.uint64((1 << ring_bits) - 1)
    assert total.tolist() == [int(v) % (1 << ring_bits) for v in (x * y).sum(axis=1)]
    assert sh["alice"].dtype == np.uint64


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), max_size=300))
def test_and_shares(pairs):
    x = np.array([p[0] for p in pairs], dtype=np.uint8)
    y = np.array([p[1] for p in pairs], dtype=np.uint8)

    def party(net, v):
        return secure_and_shares(net, v, x_party="alice", y_party="bob")

    sh = simulate(party, {"alice": x, "bob": y}, timeout=30).results
    assert np.array_equal(sh["alice"] ^ sh["bob"], x & y)


def test_session_reuse_and_grpc(tmp_path):
    rng = np.random.default_rng(5)
    x, y = rng.integers(0, 2, 20_000), rng.integers(0, 2, 20_000)

    def party(net, v):
        sess = OTSession(net, "bob" if net.me == "alice" else "alice")
        a = binary_dot_product(net, v, x_party="alice", y_party="bob", session=sess)
        b = binary_dot_product(net, v, x_party="bob", y_party="alice", session=sess)
        c = secure_and_shares(net, v, x_party="alice", y_party="bob", session=sess)
        return int(a), int(b), c

    with LoopbackConsortium(PARTIES, tmp_path) as bed:
        res = bed.simulate(party, {"alice": x, "bob": y}, timeout=60).results
    assert res["alice"][:2] == res["bob"][:2] == (int(x @ y), int(x @ y))
    assert np.array_equal(res["alice"][2] ^ res["bob"][2], x & y)


def test_input_checks():
    net = LocalNetwork(PARTIES).endpoint("alice")
    with pytest.raises(ValueError):
        binary_dot_product(net, np.array([0, 2]), x_party="alice", y_party="bob")
    with pytest.raises(ValueError):
        binary_dot_product_shares(net, np.array([1]), x_party="alice", y_party="bob", ring_bits=12)
    with pytest.raises(ValueError):
        binary_dot_product(net, np.array([1]), x_party="bob", y_party="bob")


@pytest.mark.parametrize(
    "bad",
    [
        np.array([1 << 40], dtype=np.uint64),
        np.array([1, 2], dtype=np.uint64),
        np.array([1], dtype=np.int64),
    ],
)
def test_bad_reveal(bad):
    def party(net, v):
        if net.me == "bob":
            original = net.send

            def send(to, step, value):
                original(to, step, bad if step == STEP_REVEAL else value)

            net.send = send
        return binary_dot_product(net, v, x_party="alice", y_party="bob")

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": np.ones(10, int), "bob": np.ones(10, int)}, timeout=10)
    assert info.value.party == "bob" and info.value.step == STEP_REVEAL
