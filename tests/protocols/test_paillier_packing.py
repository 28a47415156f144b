"""Plaintext encodings: signed integers, fixed point and slot packing (boundaries and
overflow detection), encrypted and in the clear."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.protocols.paillier import (
    FixedPoint,
    Packing,
    decrypt_packed,
    encrypt_packed,
    generate_keypair,
)
from ppdm.protocols.paillier.encoding import decode_signed, encode_signed, max_int

PUB, PRIV = generate_keypair(1024, allow_insecure=True)
N = int(PUB.n)


@given(
    st.integers(min_value=2, max_value=40),
    st.integers(min_value=1, max_value=16),
    st.integers(min_value=0, max_value=60),
    st.integers(min_value=0, max_value=2**32),
)
def test_pack_unpack_round_trip(value_bits, terms, length, seed):
    pk = Packing.for_sums(N, value_bits=value_bits, terms=terms)
    assert pk.slots * pk.slot_bits <= N.bit_length() - 3
    gen = np.random.default_rng(seed)
    v = gen.integers(-pk.value_bound, pk.value_bound, length)
    packed = pk.pack(v)
    assert len(packed) == pk.plaintexts_for(length)
    assert all(abs(m) <= max_int(N) for m in packed)
    np.testing.assert_array_equal(pk.unpack(packed, length), v)
    np.testing.assert_array_equal(pk.decode(N, pk.encode(N, v), length), v)


@given(st.integers(min_value=2, max_value=30), st.integers(min_value=1, max_value=9))
def test_sums_of_extreme_values_stay_exact_in_the_clear(value_bits, terms):
    pk = Packing.for_sums(N, value_bits=value_bits, terms=terms)
    lo, hi = -pk.value_bound, pk.value_bound - 1
    count = 2 * pk.slots + 1
    for fill in (lo, hi):
        vecs = [np.full(count, fill) for _ in range(terms)]
        total = sum(pk.pack(v)[0] for v in vecs)
        np.testing.assert_array_equal(pk.unpack([total], pk.slots), np.full(pk.slots, terms * fill))
    # alternating extremes across slots
    v = np.where(np.arange(count) % 2 == 0, lo, hi)
    sums = [sum(col) for col in zip(*(pk.pack(v) for _ in range(terms)), strict=True)]
    np.testing.assert_array_equal(pk.unpack(sums, count), terms * v)


def test_encrypted_packed_sums_at_full_capacity():
    pk = Packing.for_sums(N, value_bits=32, terms=4)
    assert pk.slot_bits == 35 and pk.slots == (N.bit_length() - 3) // 35
    gen = np.random.default_rng(0)
    vecs = [gen.integers(-(2**31), 2**31, 3 * pk.slots) for _ in range(4)]
    vecs[0][:5] = -(2**31)
    vecs[1][:5] = -(2**31)
    vecs[2][:5] = -(2**31)
    vecs[3][:5] = -(2**31)
    enc = [encrypt_packed(PUB if i % 2 else PRIV, v, pk) for i, v in enumerate(vecs)]
    assert len(enc[0].ciphertexts) == 3
    total = enc[0] + enc[1] + enc[2] + enc[3]
    np.testing.assert_array_equal(decrypt_packed(PRIV, total), np.sum(vecs, axis=0))
    np.testing.assert_array_equal(decrypt_packed(PRIV, total.rerandomize()), np.sum(vecs, axis=0))


def test_packing_overflow_is_detected():
    pk = Packing.for_sums(N, value_bits=8, terms=2)
    with pytest.raises(OverflowError):
        pk.pack(np.array([128]))
    with pytest.raises(OverflowError):
        pk.pack(np.array([-129]))
    a = encrypt_packed(PUB, np.array([127, -128]), pk)
    b = a + a
    assert decrypt_packed(PRIV, b).tolist() == [254, -256]
    with pytest.raises(OverflowError, match="sized for 2"):
        _ = b + a
    # a slot pushed out of its range by raw plaintext arithmetic is caught on unpacking
    m = pk.pack(np.array([127, 0]))[0]
    with pytest.raises(OverflowError):
        pk.unpack([m * 3], 2)
    with pytest.raises(ValueError, match="do not fit"):
        Packing(slot_bits=40, slots=30, value_bits=32).check_key(N)
    with pytest.raises(ValueError, match="at least"):
        Packing(slot_bits=8, slots=2, value_bits=8, terms=2)
    with pytest.raises(ValueError):
        Packing(slot_bits=63, slots=1, value_bits=8)
    other_pub, _ = generate_keypair(1024, allow_insecure=True)
    with pytest.raises(ValueError):
        _ = a + encrypt_packed(other_pub, np.array([1, 2]), pk)


def test_signed_encoding_edges():
    m = max_int(N)
    assert decode_signed(N, encode_signed(N, m)) == m
    assert decode_signed(N, encode_signed(N, -m)) == -m
    assert decode_signed(N, 0) == 0
    with pytest.raises(OverflowError):
        decode_signed(N, m + 1)
    with pytest.raises(OverflowError):
        decode_signed(N, N - m - 1)
    with pytest.raises(ValueError):
        decode_signed(N, N)


@given(
    st.lists(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), max_size=20),
    st.sampled_from([0, 8, 16, 32, 52]),
)
def test_fixed_point_round_trip(values, frac_bits):
    fp = FixedPoint(frac_bits)
    x = np.array(values, dtype=np.float64)
    got = fp.decode(N, fp.encode(N, x))
    np.testing.assert_allclose(got, x, rtol=0, atol=2.0 ** -(frac_bits + 1) + 1e-9 * 0)


def test_fixed_point_products_and_errors():
    fp = FixedPoint(16)
    a, b = fp.encode(N, [1.5])[0], fp.encode(N, [-2.25])[0]
    c = PUB.mul_plain(PUB.raw_encrypt(a), decode_signed(N, b))
    assert fp.decode(N, [PRIV.raw_decrypt(c)], scale_power=2).tolist() == [-3.375]
    with pytest.raises(ValueError):
        fp.encode(N, [float("nan")])
    with pytest.raises(OverflowError):
        FixedPoint(900).encode(N, [1e200])
    with pytest.raises(ValueError):
        FixedPoint(6).phe_exponent  # noqa: B018
    assert FixedPoint(32).phe_exponent == -8
