"""Secure set union and intersection cardinality against the plain set operations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.local import LocalNetwork, run_local, simulate
from ppdm.protocols import commutative
from ppdm.protocols.intersection import (
    secure_intersection_cardinalities,
    secure_intersection_cardinality,
)
from ppdm.protocols.set_union import secure_set_union

NAMES = ["p0", "p1", "p2", "p3", "p4"]
item_sets = st.lists(
    st.sets(st.binary(min_size=0, max_size=70), max_size=8), min_size=1, max_size=4
)


@settings(max_examples=15)
@given(item_sets, st.sampled_from([0.0, 0.5]))
def test_union_equals_plain_union_byte_for_byte(sets, fake_ratio):
    inputs = dict(zip(NAMES, [sorted(s) for s in sets], strict=False))
    out = run_local(
        lambda net, s: secure_set_union(net, s, max_item_bytes=70, fake_ratio=fake_ratio),
        inputs,
    )
    expected = sorted(set().union(*sets))
    assert all(v == expected for v in out.values())


def test_union_with_padding_hides_sizes():
    seen_sizes = []
    net = LocalNetwork(["a", "b", "c"])
    orig = net["b"].receive

    def spy(frm, step, _orig=orig, **kw):
        v = _orig(frm, step, **kw)
        if step == "set-union/encrypt":
            seen_sizes.append(v.shape[0])
        return v

    net["b"].receive = spy  # type: ignore[method-assign]
    inputs = {"a": [b"1"], "b": [b"2", b"3"], "c": [b"4", b"5", b"6", b"7"]}
    sim = simulate(lambda ep, s: secure_set_union(ep, s, pad_to=10), inputs, network=net)
    assert sim.results["a"] == [b"1", b"2", b"3", b"4", b"5", b"6", b"7"]
    assert seen_sizes == [10, 10]


def test_union_of_many_overlapping_sets():
    gen = np.random.default_rng(7)
    sets = {
        p: [int(x).to_bytes(3, "big") for x in gen.choice(500, 200, replace=False)]
        for p in NAMES[:3]
    }
    out = run_local(secure_set_union, sets)
    assert out["p2"] == sorted(set().union(*map(set, sets.values())))


def test_item_too_long_is_refused_locally():
    with pytest.raises(ValueError, match="max_item_bytes"):
        run_local(lambda n, s: secure_set_union(n, s, max_item_bytes=4), {"a": [b"12345"], "b": []})


def test_invalid_point_from_peer_is_protocol_error():
    net = LocalNetwork(["a", "b"])
    bad = np.zeros((2, 1, 33), dtype=np.uint8)
    bad[:, :, 0] = 2
    bad[:, :, 1:] = 0xFF  # x >= field prime: not a point
    net["a"].send("b", "set-union/encrypt", bad)
    with pytest.raises(ProtocolError) as info:
        secure_set_union(net["b"], [b"x"])
    assert info.value.party == "a" and info.value.step == "set-union/encrypt"


def test_embedding_fast_paths_equal_the_reference():
    """``embed_bytes`` (one key buffer, no integer round trip) picks the same point as
    try-and-increment through ``_lift_x``; reading an own, canonical point back without
    parsing it gives the same bytes."""
    from ppdm.protocols import ecgroup

    gen = np.random.default_rng(5)
    for n in [0, 1, 7, 29, 30] * 40:
        data = gen.bytes(n)
        body = bytes([n]) + data.ljust(ecgroup.EMBED_CAPACITY, b"\0")
        want = next(
            p
            for c in range(256)
            if (p := ecgroup._lift_x(int.from_bytes(body + bytes([c]), "big"))) is not None
        )
        got = ecgroup.embed_bytes(data)
        assert got == want
        assert ecgroup.extract_bytes(got) == ecgroup.extract_bytes(got, validated=True) == data


def test_union_of_empty_sets_is_empty():
    out = run_local(
        lambda net, s: secure_set_union(net, s, fake_ratio=0.0), {"a": [], "b": [], "c": []}
    )
    assert out == {"a": [], "b": [], "c": []}


def test_invalid_point_at_the_collector_names_its_sender():
    """The collector parses each distinct point once (by its decryption, after the
    merge): an invalid one is still refused, naming the party and item that sent it."""
    net = LocalNetwork(["a", "b", "c"])
    pts = commutative.encode_items([b"p", b"q"], 1)
    bad = pts[:1].copy()
    bad[0, 0, 1:] = 0xFF  # x >= field prime: not a point
    for _ in range(2):  # the two hops that bring a's own set back fully encrypted
        net["c"].send("a", "set-union/encrypt", pts)
    net["b"].send("a", "set-union/encrypted", pts)
    net["c"].send("a", "set-union/encrypted", np.concatenate([pts[1:], bad, pts[:1]]))
    with pytest.raises(ProtocolError, match="item 1 is not a point") as info:
        secure_set_union(net["a"], [b"x"], fake_ratio=0.0)
    assert info.value.party == "c" and info.value.step == "set-union/encrypted"


def test_wrong_shape_from_peer_is_protocol_error():
    net = LocalNetwork(["a", "b"])
    net["a"].send("b", "set-union/encrypt", np.zeros((2, 2, 33), dtype=np.uint8))
    with pytest.raises(ProtocolError, match="shape"):
        secure_set_union(net["b"], [b"x"])


@settings(max_examples=15)
@given(st.lists(st.sets(st.integers(0, 40), max_size=25), min_size=1, max_size=4))
def test_intersection_cardinality_equals_plain(sets):
    inputs = dict(zip(NAMES, [sorted(s) for s in sets], strict=False))
    out = run_local(secure_intersection_cardinality, inputs)
    assert set(out.values()) == {len(set.intersection(*sets))}


@settings(max_examples=10)
@given(
    st.integers(2, 4),
    st.lists(st.integers(0, 30), min_size=0, max_size=6),
    st.integers(0, 2**32),
)
def test_batched_cardinalities_equal_plain(n_parties, sizes, seed):
    gen = np.random.default_rng(seed)
    per_party = {
        p: [set(gen.choice(60, size=s, replace=False).tolist()) for s in sizes]
        for p in NAMES[:n_parties]
    }
    out = run_local(
        lambda net, ss: secure_intersection_cardinalities(net, ss, fake_ratio=0.3), per_party
    )
    expected = [
        len(set.intersection(*(per_party[p][j] for p in per_party))) for j in range(len(sizes))
    ]
    assert all(v == expected for v in out.values())


def test_intersection_of_bytes_and_ints_do_not_collide():
    out = run_local(secure_intersection_cardinality, {"a": [1, b"\x01"], "b": [1]})
    assert out["a"] == 1


def test_intersection_bad_sizes_from_peer():
    net = LocalNetwork(["a", "b"])
    pts = commutative.hash_items([b"x"], domain=b"d")
    net["a"].send("b", "intersection/encrypt", {"points": pts, "sizes": np.array([5])})
    with pytest.raises(ProtocolError) as info:
        secure_intersection_cardinality(net["b"], [1])
    assert info.value.party == "a"


def test_duplicated_ciphertexts_do_not_inflate_the_count():
    batches = []
    pts = commutative.hash_items([b"x", b"y"], domain=b"d")
    dup = np.concatenate([pts[:1], pts[:1]])
    from ppdm.protocols.intersection import _count_common

    batches = [(dup, np.array([2])), (pts, np.array([2]))]
    # "x" twice in one party's set and once in the other's: common to 2 parties, once.
    assert _count_common(batches, 1, 2).tolist() == [1]
    assert _count_common([(dup, np.array([2])), (dup, np.array([2]))], 1, 3).tolist() == [0]


def test_commutative_roundtrip_and_commutation():
    a, b = commutative.CommutativeKey.generate(), commutative.CommutativeKey.generate()
    pts = commutative.encode_items([b"hello", b""], 1)
    np.testing.assert_array_equal(a.encrypt(b.encrypt(pts)), b.encrypt(a.encrypt(pts)))
    back = a.decrypt(b.decrypt(b.encrypt(a.encrypt(pts))))
    assert commutative.decode_items(back) == ([b"hello", b""], 0)


def test_worker_pool_paths_equal_the_serial_ones():
    items = [i.to_bytes(6, "big") for i in range(5000)]  # above the parallel threshold
    key = commutative.CommutativeKey.generate()
    try:
        commutative.set_workers(1)
        serial = key.encrypt(commutative.encode_items(items, 1))
        commutative.set_workers(2)
        pts = commutative.encode_items(items, 1)
        parallel = key.encrypt(pts)
        np.testing.assert_array_equal(parallel, serial)
        assert commutative.decode_items(key.decrypt(parallel)) == (items, 0)
        bad = parallel.copy()
        bad[4321, 0, 1:] = 0xFF  # x >= p: not a point
        with pytest.raises(ProtocolError, match="item 4321 "):
            key.encrypt_received(bad, "peer", "step", chunks=1)
    finally:
        commutative.set_workers(1)
