"""Collusion-resistant secure sum (pairwise-masked additive sharing) against the plain sum;
what the aggregator sees; malicious peers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.local import LocalNetwork, run_local, simulate
from ppdm.protocols.additive_sum import additive_sum, pair_mask
from ppdm.protocols.secure_sum import secure_sum

NAMES = ["p0", "p1", "p2", "p3", "p4"]


@given(
    st.integers(min_value=1, max_value=5),
    st.integers(min_value=0, max_value=40),
    st.sampled_from([None, "p0", "p1"]),
    st.integers(min_value=0, max_value=2**32),
)
def test_sum_equals_plain_sum(n_parties, length, aggregator, seed):
    gen = np.random.default_rng(seed)
    vecs = [gen.integers(-(2**62), 2**62, size=length) for _ in range(n_parties)]
    names = NAMES[:n_parties]
    agg = aggregator if aggregator in names else None
    out = run_local(
        lambda net, v: additive_sum(net, v, aggregator=agg), dict(zip(names, vecs, strict=True))
    )
    with np.errstate(over="ignore"):
        expected = np.sum(vecs, axis=0, dtype=np.int64) if length else np.zeros(0, np.int64)
    for v in out.values():
        assert v.dtype == np.int64
        np.testing.assert_array_equal(v, expected)


def test_agrees_with_the_ring_protocol_and_wraps_mod_2_64():
    vecs = {
        "a": np.array([2**63 - 1, -5, 0], dtype=np.int64),
        "b": np.array([1, 7, 0], dtype=np.int64),
        "c": np.array([0, 2**64 - 2, 0], dtype=np.uint64),
    }
    add = run_local(additive_sum, vecs)
    ring = run_local(secure_sum, {k: v.astype(np.int64) for k, v in vecs.items()})
    np.testing.assert_array_equal(add["a"], ring["a"])
    assert add["a"].tolist() == [-(2**63), 0, 0]


def test_subset_of_parties_and_bool_input():
    def party(net, v):
        if net.me == "p3":
            return None
        return additive_sum(net, v, parties=["p2", "p0", "p1"], session="s1")

    out = run_local(party, {p: np.array([True, False]) for p in NAMES[:4]})
    assert out["p0"].tolist() == [3, 0] and out["p3"] is None
    with pytest.raises(ValueError):
        run_local(lambda net, v: additive_sum(net, v, aggregator="zed"), {"a": np.ones(1)})
    with pytest.raises(TypeError):
        run_local(additive_sum, {"a": np.ones(2), "b": np.ones(2)})


def test_aggregator_sees_only_masked_vectors():
    """The aggregator (or any coalition of n - 1 parties) sees each honest party's vector
    masked by pads it cannot compute: fresh every run and far from the inputs."""
    seen: list[np.ndarray] = []
    inputs = {"alice": np.arange(64), "bob": np.arange(64), "carol": np.zeros(64, np.int64)}
    for _ in range(2):
        net = LocalNetwork(list(inputs))
        orig = net["carol"].receive

        def spy(frm, step, _orig=orig, **kw):
            v = _orig(frm, step, **kw)
            if step == "additive-sum/masked" and frm == "alice":
                seen.append(v.copy())
            return v

        net["carol"].receive = spy  # type: ignore[method-assign]
        sim = simulate(lambda n, v: additive_sum(n, v, aggregator="carol"), inputs, network=net)
        assert sim.results["carol"].tolist() == (2 * np.arange(64)).tolist()
    first, second = seen
    assert not np.array_equal(first, second)
    assert not np.array_equal(first.view(np.int64), inputs["alice"])
    # a pseudorandom pad: roughly half of the 64 * 64 bits set
    ones = int(np.unpackbits(first.view(np.uint8)).sum())
    assert 1700 < ones < 2400


def test_pair_mask_is_a_deterministic_prg():
    k1, k2 = bytes(32), bytes([1]) + bytes(31)
    assert np.array_equal(pair_mask(k1, 10), pair_mask(k1, 10))
    assert np.array_equal(pair_mask(k1, 10)[:4], pair_mask(k1, 4))
    assert not np.array_equal(pair_mask(k1, 10), pair_mask(k2, 10))
    assert pair_mask(k1, 3).dtype == np.uint64
    with pytest.raises(ValueError):
        pair_mask(b"short", 3)


def _bad_peer(step_values, *, aggregator=None):
    """mallory sends the given (step, value) pairs, then waits; alice runs the protocol."""

    def party(net, v):
        if net.me == "mallory":
            for step, value in step_values:
                net.send("alice", step, value)
            net.receive("alice", "never", timeout=5)
            return None
        return additive_sum(net, v, aggregator=aggregator)

    return simulate(party, {"alice": np.array([1, 2, 3]), "mallory": None}, timeout=10)


GOOD_KEY = bytes(range(1, 33))


@pytest.mark.parametrize(
    "messages, step, reason",
    [
        ([("additive-sum/key", b"\x01" * 31)], "additive-sum/key", "32 bytes"),
        ([("additive-sum/key", bytes(32))], "additive-sum/key", "invalid"),
        ([("additive-sum/key", "text")], "additive-sum/key", "bytes"),
        (
            [("additive-sum/key", GOOD_KEY), ("additive-sum/masked", np.zeros(3, np.int64))],
            "additive-sum/masked",
            "uint64",
        ),
        (
            [("additive-sum/key", GOOD_KEY), ("additive-sum/masked", np.zeros(4, np.uint64))],
            "additive-sum/masked",
            "3 uint64",
        ),
    ],
)
def test_bad_peer_messages_raise_protocol_error(messages, step, reason):
    with pytest.raises(ProtocolError, match=reason) as info:
        _bad_peer(messages)
    assert info.value.party == "mallory" and info.value.step == step


def test_bad_aggregator_result_raises_protocol_error():
    def party(net, v):
        if net.me == "mallory":
            net.receive("alice", "additive-sum/key")
            net.send("alice", "additive-sum/key", GOOD_KEY)
            net.receive("alice", "additive-sum/masked")
            net.send("alice", "additive-sum/result", np.zeros(2, np.int64))
            net.receive("alice", "never", timeout=5)
            return None
        return additive_sum(net, v, aggregator="mallory")

    with pytest.raises(ProtocolError, match="wrong type or length") as info:
        simulate(party, {"alice": np.array([1, 2, 3]), "mallory": None}, timeout=10)
    assert info.value.party == "mallory" and info.value.step == "additive-sum/result"
