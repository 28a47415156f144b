"""Secure sum (ring with random mask) against the plain sum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.local import LocalNetwork, run_local, simulate
from ppdm.protocols.secure_sum import secure_sum

NAMES = ["p0", "p1", "p2", "p3", "p4"]


@given(st.lists(st.integers(min_value=-(2**100), max_value=2**100), min_size=1, max_size=5))
def test_int_sum_equals_plain_sum(values):
    inputs = dict(zip(NAMES, values, strict=False))
    out = run_local(secure_sum, inputs)
    assert set(out.values()) == {sum(values)}


@given(
    st.integers(min_value=1, max_value=5),
    st.integers(min_value=0, max_value=50),
    st.integers(min_value=0, max_value=2**32),
)
def test_vector_sum_wraps_mod_2_64(n_parties, length, seed):
    gen = np.random.default_rng(seed)
    vecs = [gen.integers(-(2**40), 2**40, size=length) for _ in range(n_parties)]
    out = run_local(secure_sum, dict(zip(NAMES, vecs, strict=False)))
    expected = np.sum(vecs, axis=0) if length else np.zeros(0, dtype=np.int64)
    for v in out.values():
        np.testing.assert_array_equal(v, expected)


def test_vector_sum_with_small_modulus():
    vecs = {"a": np.array([1, -2, 3]), "b": np.array([4, 5, -6])}
    out = run_local(lambda n, v: secure_sum(n, v, modulus=101), vecs)
    np.testing.assert_array_equal(out["a"], [5, 3, -3])


def test_what_a_middle_party_sees_is_masked():
    # bob's view is R + x_alice mod m; over repeated runs it must not be constant
    seen = set()
    for _ in range(5):
        net = LocalNetwork(["alice", "bob", "carol"])
        orig = net["bob"].receive

        def spy(frm, step, _orig=orig, **kw):
            v = _orig(frm, step, **kw)
            if step == "secure-sum/ring":
                seen.add(v)
            return v

        net["bob"].receive = spy  # type: ignore[method-assign]
        simulate(secure_sum, {"alice": 3, "bob": 5, "carol": 9}, network=net)
    assert len(seen) == 5


def test_value_outside_the_ring_is_a_protocol_error():
    net = LocalNetwork(["a", "b"])
    net["a"].send("b", "secure-sum/ring", 2**200)
    with pytest.raises(ProtocolError) as info:
        secure_sum(net["b"], 1)
    assert info.value.party == "a" and info.value.step == "secure-sum/ring"


def test_vector_of_wrong_length_is_a_protocol_error():
    net = LocalNetwork(["a", "b"])
    net["a"].send("b", "secure-sum/ring", np.zeros(3, dtype=np.uint64))
    with pytest.raises(ProtocolError, match="expected 2 values"):
        secure_sum(net["b"], np.array([1, 2]))


def test_rejects_non_integer_input():
    with pytest.raises(TypeError):
        run_local(secure_sum, {"a": 1.5, "b": 2.0})


def test_the_successor_cannot_read_the_first_partys_integer() -> None:
    """Attacker's side: the first party's successor receives ``mask + x mod m``. It
    guesses ``x`` as what it received; with a uniform mask in Z_{2^64} that lands within
    2^40 of the secret with probability 2^-23 per run, so over 30 runs a single hit
    means a weak mask (a mask from 256 values hits every time)."""
    m = 1 << 64
    secret = 123_456_789_012
    hits = 0
    for _ in range(30):
        seen: list[int] = []

        def party(net, x, seen=seen):
            if net.me == "b":
                inner = net.receive

                def spy(sender, step, **kw):
                    got = inner(sender, step, **kw)
                    if sender == "a" and step == "secure-sum/ring":
                        seen.append(int(got))
                    return got

                net.receive = spy
            return secure_sum(net, x, modulus=m)

        run_local(party, {"a": secret, "b": 5, "c": 7})
        assert len(seen) == 1
        hits += abs(seen[0] - secret) < (1 << 40)
    assert hits == 0
