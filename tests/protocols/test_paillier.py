"""Paillier keys, encryption, decryption and homomorphic operations against plain
arithmetic, python-paillier (phe) interop both ways, serialization and validation."""

from __future__ import annotations

import gmpy2
import numpy as np
import phe
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.protocols.paillier import (
    FixedBaseTable,
    PaillierPrivateKey,
    PaillierPublicKey,
    decrypt_array,
    decrypt_fixed,
    encrypt_array,
    encrypt_fixed,
    generate_keypair,
)
from ppdm.protocols.paillier import pool as paillier_pool

# One 1024-bit key for the fast tests (insecure size, allowed explicitly) and one
# 2048-bit key for the interop and size checks.
PUB, PRIV = generate_keypair(1024, allow_insecure=True)
MAX = PUB.max_int
signed = st.integers(min_value=-MAX, max_value=MAX)
small = st.integers(min_value=-(2**64), max_value=2**64)


@pytest.fixture(scope="module")
def key2048() -> tuple[PaillierPublicKey, PaillierPrivateKey]:
    return generate_keypair(2048)


def test_key_generation_sizes(key2048):
    pub, priv = key2048
    assert pub.bits == 2048
    assert priv.p * priv.q == pub.n and priv.p != priv.q
    assert gmpy2.is_prime(priv.p) and gmpy2.is_prime(priv.q)
    assert pub.g == pub.n + 1
    assert pub.ciphertext_bytes == 512


def test_small_keys_need_an_explicit_opt_in():
    with pytest.raises(ValueError, match="insecure"):
        generate_keypair(1024)


@given(signed)
def test_public_and_owner_encryption_round_trip(v):
    assert PRIV.decrypt(PUB.encrypt(v)) == v
    assert PRIV.decrypt(PRIV.encrypt(v)) == v


@given(small, small, small)
def test_homomorphic_operations_match_plain_arithmetic(a, b, k):
    ca, cb = PUB.encrypt(a), PUB.encrypt(b)
    assert PRIV.decrypt(PUB.add(ca, cb)) == a + b
    assert PRIV.decrypt(PUB.sub(ca, cb)) == a - b
    assert PRIV.decrypt(PUB.neg(ca)) == -a
    assert PRIV.decrypt(PUB.add_plain(ca, b)) == a + b
    assert PRIV.decrypt(PUB.mul_plain(ca, k)) == a * k
    assert PRIV.decrypt(PUB.sum([ca, cb, PRIV.encrypt(k)])) == a + b + k


def test_encryption_is_randomized_and_rerandomize_keeps_the_plaintext():
    c1, c2 = PUB.encrypt(5), PUB.encrypt(5)
    assert c1 != c2
    r1 = PUB.rerandomize(c1)
    r2 = PUB.rerandomize(c1, statistical=True)
    assert len({c1, r1, r2}) == 3
    assert PRIV.decrypt(r1) == PRIV.decrypt(r2) == 5


def test_djn_mask_is_an_encryption_of_zero():
    assert PRIV.raw_decrypt(PUB.h_s) == 0
    masks = PUB.random_masks(3) + PRIV.random_masks(3)
    assert len(set(masks)) == 6
    assert all(PRIV.raw_decrypt(m) == 0 for m in masks)


def test_boundaries_and_overflow_detection():
    assert PRIV.decrypt(PUB.encrypt(MAX)) == MAX
    assert PRIV.decrypt(PUB.encrypt(-MAX)) == -MAX
    with pytest.raises(OverflowError):
        PUB.encrypt(MAX + 1)
    with pytest.raises(OverflowError):
        PUB.encrypt(-MAX - 1)
    # MAX + MAX lands in the gap between the positive and negative ranges
    with pytest.raises(OverflowError):
        PRIV.decrypt(PUB.add(PUB.encrypt(MAX), PUB.encrypt(MAX)))
    with pytest.raises(ValueError):
        PUB.raw_encrypt(int(PUB.n))
    with pytest.raises(TypeError):
        PUB.encrypt(1.5)  # type: ignore[arg-type]


@given(st.integers(min_value=0, max_value=2**40 - 1), st.sampled_from([1, 3, 4, 8, 11]))
def test_fixed_base_table_matches_powmod(e, window):
    table = FixedBaseTable(7, 1_000_000_007 * 998_244_353, exponent_bits=40, window=window)
    assert table.pow(e) == pow(7, e, 1_000_000_007 * 998_244_353)


def test_phe_decrypts_ppdm_ciphertexts(key2048):
    pub, priv = key2048
    phe_priv = priv.to_phe()
    for v in (0, 1, -1, 123456789, -(2**100), pub.max_int, -pub.max_int):
        for c in (pub.encrypt(v), priv.encrypt(v)):
            assert phe_priv.decrypt(pub.to_phe_encrypted(c)) == v
    # phe's homomorphic operations on ppdm ciphertexts
    e = pub.to_phe_encrypted(pub.encrypt(20)) * 3 + pub.to_phe_encrypted(pub.encrypt(-7))
    assert phe_priv.decrypt(e) == 53
    # fixed point: frac_bits 32 is phe exponent -8
    c = encrypt_fixed(pub, np.array([3.25]), frac_bits=32)[0]
    assert phe_priv.decrypt(pub.to_phe_encrypted(c, exponent=-8)) == 3.25


def test_ppdm_decrypts_phe_ciphertexts(key2048):
    pub, priv = key2048
    phe_pub, _ = pub.to_phe(), priv.to_phe()
    for v in (0, 7, -7, 2**200, -(2**200)):
        enc = phe_pub.encrypt(v)
        assert enc.exponent == 0
        assert priv.decrypt(enc.ciphertext()) == v
    enc = phe_pub.encrypt(5) + phe_pub.encrypt(-12)
    assert priv.decrypt(enc.ciphertext()) == -7
    # phe keys convert to ppdm keys and back
    phe_pub2, phe_priv2 = phe.generate_paillier_keypair(n_length=1024)
    p2 = PaillierPrivateKey.from_phe(phe_priv2)
    assert p2.public_key == PaillierPublicKey.from_phe(phe_pub2)
    assert p2.decrypt(phe_pub2.encrypt(-99).ciphertext()) == -99
    assert phe_priv2.decrypt(p2.public_key.to_phe_encrypted(p2.encrypt(42))) == 42


def test_key_serialization_round_trip():
    pub2 = PaillierPublicKey.from_bytes(PUB.to_bytes())
    assert pub2 == PUB and pub2.fingerprint == PUB.fingerprint
    assert pub2.h_s == PUB.h_s  # h is derived from n, identically everywhere
    priv2 = PaillierPrivateKey.from_bytes(PRIV.to_bytes())
    assert priv2.decrypt(PUB.encrypt(-31)) == -31
    with pytest.raises(ValueError):
        PaillierPublicKey.from_bytes(b"\xff\xff\xff")
    assert "p=" not in repr(PRIV) and str(int(PRIV.p)) not in repr(PRIV)


def test_ciphertext_batch_serialization():
    cts = PUB.encrypt_many([1, -2, 3])
    data = PUB.ciphertexts_to_bytes(cts)
    assert PUB.ciphertexts_from_bytes(data) == cts
    other, _ = generate_keypair(1024, allow_insecure=True)
    with pytest.raises(ValueError, match="another key"):
        other.ciphertexts_from_bytes(data)
    bad = PUB.ciphertexts_to_bytes([cts[0], PRIV.p])  # shares a factor with n
    with pytest.raises(ValueError, match="ciphertext 1"):
        PUB.ciphertexts_from_bytes(bad)


@pytest.mark.parametrize(
    "bad, position",
    [
        (lambda: [PUB.encrypt(1), 0], 1),
        (lambda: [PUB.nsquare], 0),
        (lambda: [PUB.encrypt(1), PUB.encrypt(2), PRIV.q * 5], 2),
        (lambda: [-3], 0),
        (lambda: [True], 0),
        (lambda: [PUB.encrypt(1), "x"], 1),
    ],
)
def test_invalid_peer_ciphertexts_raise_protocol_error(bad, position):
    with pytest.raises(ProtocolError, match=f"ciphertext {position}") as info:
        PUB.check_ciphertexts(bad(), "mallory", "dot/ciphertexts")
    assert info.value.party == "mallory" and info.value.step == "dot/ciphertexts"
    with pytest.raises(ProtocolError):
        PUB.check_ciphertexts("not a list", "mallory", "s")


@pytest.mark.parametrize(
    "n, reason",
    [
        (61 * 53, "bits"),  # tiny
        (2**2048, "valid"),  # even
        (gmpy2.next_prime(2**1024) ** 2, "valid"),  # square
        (3 * gmpy2.next_prime(2**2046), "valid"),  # small factor
        ("abc", "integer"),
    ],
)
def test_invalid_peer_keys_raise_protocol_error(n, reason):
    with pytest.raises(ProtocolError, match=reason) as info:
        PaillierPublicKey.from_peer(n if isinstance(n, str) else int(n), "alice", "dot/key")
    assert info.value.party == "alice"


def test_batch_arrays_and_fixed_point():
    gen = np.random.default_rng(5)
    x = gen.integers(-(2**62), 2**62, 40)
    np.testing.assert_array_equal(decrypt_array(PRIV, encrypt_array(PUB, x)), x)
    big = [2**100, -(2**90)]
    assert decrypt_array(PRIV, PUB.encrypt_many(big)).tolist() == big
    reals = gen.normal(0, 1000, 20)
    got = decrypt_fixed(PRIV, encrypt_fixed(PUB, reals, frac_bits=40), frac_bits=40)
    np.testing.assert_allclose(got, reals, atol=2.0**-40)


def test_process_pool_matches_serial_results():
    x = np.arange(-300, 300)
    try:
        cts = PUB.encrypt_many(x, workers=2)
        owner = PRIV.encrypt_many(x, workers=2)
        assert decrypt_array(PRIV, cts, workers=2).tolist() == x.tolist()
        assert decrypt_array(PRIV, owner).tolist() == x.tolist()
    finally:
        paillier_pool.shutdown()
