"""Secure comparison and secure argmin against plain computation: random and edge
inputs (0, the maximum, equal values), every output mode, both networks, bad peers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.local import LocalNetwork, simulate
from ppdm.protocols.comparison import (
    STEP_AND,
    secure_argmin,
    secure_ge,
    secure_ge_shares,
)
from ppdm.protocols.ot.extension import OTSession
from ppdm.testbed.consortia import LoopbackConsortium

PARTIES = ("alice", "bob")


def _ge(x, y, *, bed=None, **kw):
    def party(net, v):
        return secure_ge(net, v, x_party="alice", y_party="bob", **kw)

    inputs = {"alice": np.asarray(x), "bob": np.asarray(y)}
    sim = bed.simulate(party, inputs, timeout=30) if bed else simulate(party, inputs, timeout=30)
    return sim.results


@given(
    st.sampled_from([1, 5, 8, 32, 64]).flatmap(
        lambda b: st.tuples(
            st.just(b),
            st.lists(
                st.tuples(st.integers(0, 2**b - 1), st.integers(0, 2**b - 1)),
                min_size=1,
                max_size=30,
            ),
        )
    ),
    st.sampled_from([1, 3, 4]),
)
@settings(max_examples=15)
def test_ge_random_inputs(bits_and_pairs, block_bits):
    bits, pairs = bits_and_pairs
    x = np.array([p[0] for p in pairs], dtype=np.uint64)
    y = np.array([p[1] for p in pairs], dtype=np.uint64)
    out = _ge(x, y, bits=bits, block_bits=block_bits)
    assert out["alice"].tolist() == out["bob"].tolist() == (x >= y).tolist()


@pytest.mark.parametrize("bits", [1, 7, 32, 64])
def test_ge_edge_values(bits):
    top = 2**bits - 1
    vals = sorted({0, 1 % (top + 1), top // 2, top // 2 + 1, top - 1 if top else 0, top})
    x = np.array([a for a in vals for _ in vals], dtype=np.uint64)
    y = np.array([b for _ in vals for b in vals], dtype=np.uint64)
    out = _ge(x, y, bits=bits)
    assert out["alice"].tolist() == (x >= y).tolist()


def test_ge_many_random_32_bit():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2**32, 20000)
    y = rng.integers(0, 2**32, 20000)
    y[::10] = x[::10]  # plenty of equal values
    out = _ge(x, y, bits=32)
    assert np.array_equal(out["bob"], x >= y)


@given(st.lists(st.tuples(st.integers(-128, 127), st.integers(-128, 127)), min_size=1, max_size=20))
def test_ge_signed_and_sum_nonnegative(pairs):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    # First half: a >= b; second half: "is a + b >= 0", where the y-party passes -b.
    out = _ge(np.concatenate([a, a]), np.concatenate([b, -b]), bits=9, signed=True)
    n = len(a)
    assert out["alice"][:n].tolist() == (a >= b).tolist()
    assert out["bob"][n:].tolist() == (a + b >= 0).tolist()


def test_reveal_to_one_party_and_shares():
    x = np.array([3, 9, 4, 4], dtype=np.uint64)
    y = np.array([5, 2, 4, 0], dtype=np.uint64)
    out = _ge(x, y, bits=4, reveal_to="bob")
    assert out["alice"] is None and out["bob"].tolist() == [False, True, True, True]

    def party(net, v):
        return secure_ge_shares(net, v, x_party="alice", y_party="bob", bits=4)

    sh = simulate(party, {"alice": x, "bob": y}, timeout=30).results
    assert ((sh["alice"] ^ sh["bob"]) == (x >= y)).all()


def test_session_reuse_and_grpc(tmp_path):
    rng = np.random.default_rng(8)
    x, y = rng.integers(0, 2**16, 500), rng.integers(0, 2**16, 500)

    def party(net, v):
        sess = OTSession(net, "bob" if net.me == "alice" else "alice")
        a = secure_ge(net, v, x_party="alice", y_party="bob", bits=16, session=sess)
        b = secure_ge(net, v, x_party="bob", y_party="alice", bits=16, session=sess)
        return a, b

    with LoopbackConsortium(PARTIES, tmp_path) as bed:
        res = bed.simulate(party, {"alice": x, "bob": y}, timeout=60).results
    a, b = res["alice"]
    assert np.array_equal(a, x >= y) and np.array_equal(b, y >= x)


def test_input_checks():
    net = LocalNetwork(PARTIES).endpoint("alice")
    with pytest.raises(ValueError):
        secure_ge(net, np.array([256]), x_party="alice", y_party="bob", bits=8)
    with pytest.raises(ValueError):
        secure_ge(net, np.array([-1]), x_party="alice", y_party="bob", bits=8)
    with pytest.raises(ValueError):
        secure_ge(net, np.array([1]), x_party="alice", y_party="alice")
    with pytest.raises(ValueError):
        secure_ge(net, np.array([1]), x_party="alice", y_party="bob", reveal_to="carol")


def test_empty_batch():
    out = _ge(np.zeros(0, np.uint64), np.zeros(0, np.uint64))
    assert out["alice"].shape == (0,)


def test_bad_and_message():
    def party(net, v):
        if net.me == "bob":
            original = net.send

            def send(to, step, value):
                if step == STEP_AND:
                    value = np.zeros(1000, dtype=np.uint8)
                original(to, step, value)

            net.send = send
        return secure_ge(net, v, x_party="alice", y_party="bob", bits=16)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": np.arange(10), "bob": np.arange(10)}, timeout=10)
    assert info.value.party == "bob" and info.value.step == STEP_AND


@pytest.mark.parametrize(
    ("liar", "step", "bad"),
    [
        ("alice", "cmp/leaves", np.zeros((800, 4), dtype=np.uint8)),  # 8-byte tables
        ("alice", "cmp/leaves", np.zeros((800, 8), dtype=np.int8)),
        ("bob", "ot/ss16/alice>bob/u", np.zeros((60, 96), dtype=np.uint8)),  # 768 OTs
        ("bob", "ot/ss16/alice>bob/u", np.zeros((240, 104), dtype=np.uint8)),  # KK13's rows
    ],
)
def test_bad_leaf_messages(liar, step, bad):
    """The SoftSpoken 1-out-of-16 leaves (100 comparisons of 32 bits: 800 leaves, ``u``
    of 60 rows for 832 OTs after padding) check the peer's tables and ``u`` rows: a ``ProtocolError`` naming the liar
    and the step."""

    def party(net, v):
        if net.me == liar:
            original = net.send

            def send(to, tag, value):
                original(to, tag, bad if tag == step else value)

            net.send = send
        return secure_ge(net, v, x_party="alice", y_party="bob", bits=32)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": np.arange(100), "bob": np.arange(100)}, timeout=10)
    assert info.value.party == liar and info.value.step == step


# Argmin -------------------------------------------------------------------------------------


def _argmin(d, *, value_bits=32, seed=0, reveal_to=None, bed=None):
    rng = np.random.default_rng(seed)
    mask = rng.integers(0, 2**63, d.shape, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    shares = {"alice": d.astype(np.uint64) - mask, "bob": mask}

    def party(net, s):
        peer = "bob" if net.me == "alice" else "alice"
        return secure_argmin(net, s, peer=peer, value_bits=value_bits, reveal_to=reveal_to)

    sim = bed.simulate(party, shares, timeout=60) if bed else simulate(party, shares, timeout=60)
    return sim.results


@settings(max_examples=15)
@given(st.integers(1, 9), st.integers(1, 12), st.integers(0, 2**32), st.sampled_from([3, 20]))
def test_argmin_random_with_ties(k, n, seed, value_bits):
    rng = np.random.default_rng(seed)
    d = rng.integers(0, min(2**value_bits, 6 if seed % 2 else 2**value_bits), (n, k))
    out = _argmin(d, value_bits=value_bits, seed=seed)
    assert out["alice"].tolist() == out["bob"].tolist() == d.argmin(axis=1).tolist()


def test_argmin_edge_values_and_reveal_to():
    top = 2**40 - 1
    d = np.array([[top, 0, top], [top, top, top], [0, 0, 0], [5, top, 4], [top, top - 1, 0]])
    out = _argmin(d, value_bits=40, reveal_to="alice")
    assert out["bob"] is None
    assert out["alice"].tolist() == d.argmin(axis=1).tolist()


def test_argmin_on_grpc(tmp_path):
    d = np.random.default_rng(1).integers(0, 2**20, (50, 4))
    with LoopbackConsortium(PARTIES, tmp_path) as bed:
        out = _argmin(d, value_bits=20, bed=bed)
    assert out["bob"].tolist() == d.argmin(axis=1).tolist()


def test_each_partys_share_of_a_comparison_says_nothing_about_it() -> None:
    """Attacker's side: one party's XOR share of ``[x >= y]`` must be independent of the
    result. Over 512 comparisons (half true) the best guess of the result from either
    share alone -- the share itself or its complement -- agrees with it in about half the
    places; 4 standard deviations above 0.5 is 0.59 (a share equal to the result, or to
    its complement, would agree everywhere)."""
    from ppdm.parties.local import run_local
    from ppdm.protocols.comparison import secure_ge_shares

    rng = np.random.default_rng(3)
    n = 512
    x = rng.integers(0, 1 << 20, n)
    y = np.where(np.arange(n) % 2 == 0, x - 1, x + 1)  # x >= y exactly on even places
    y = np.clip(y, 0, (1 << 20) - 1)
    truth = (x >= y).astype(np.uint8)
    shares = run_local(
        lambda net, v: secure_ge_shares(net, v, x_party="a", y_party="b", bits=21),
        {"a": x, "b": y},
    )
    assert np.array_equal(shares["a"] ^ shares["b"], truth)
    for share in shares.values():
        agree = float(np.mean(share == truth))
        assert max(agree, 1 - agree) < 0.59
