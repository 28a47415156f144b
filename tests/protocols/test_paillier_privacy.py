"""Paillier privacy, tested like correctness: the encryption randomness has the declared
size (a 16-bit exponent fails), re-randomization hides past operations from the key owner
by default (a DJN-only mask fails), and keys pass HEU-style factor checks."""

from __future__ import annotations

import gmpy2
import pytest
from gmpy2 import mpz

from ppdm.protocols.paillier import (
    SHORT_EXPONENT_BITS,
    PaillierPrivateKey,
    PaillierPublicKey,
    check_key_factors,
    generate_keypair,
)


def _key(bits=512, *, blum=False):
    while True:
        pub, priv = generate_keypair(bits, allow_insecure=True)
        if not blum or (priv.p % 4 == 3 and priv.q % 4 == 3):
            return pub, priv


def test_default_exponent_is_half_the_modulus():
    pub, _ = _key(512)
    assert pub.exponent_bits == 256
    assert PaillierPublicKey(pub.n).exponent_bits == pub.n.bit_length() // 2
    big = PaillierPublicKey((1 << 2047) + 1234567, window=8)  # only the setting, no table
    assert big.exponent_bits == 1024
    short = PaillierPublicKey(pub.n, exponent_bits=SHORT_EXPONENT_BITS)
    assert short.exponent_bits == 256


def test_sampled_exponents_use_every_declared_bit():
    pub, _ = _key(512)
    table = pub.table
    exps = []
    for digits in table._random_digits(400):
        exps.append(int.from_bytes(bytes(digits), "little"))
    top = sum(e >> (pub.exponent_bits - 1) & 1 for e in exps)
    assert max(e.bit_length() for e in exps) == pub.exponent_bits
    assert 120 < top < 280  # the top bit is set about half the time (binomial, 400 draws)


def test_encryption_randomness_is_not_small():
    """No ciphertext of 0 is h_s^a for a 16-bit a: a brute force over 2^16 exponents
    recovers none (with 16-bit randomness it recovers every one)."""
    pub, _ = _key(512)
    small = set()
    x = mpz(1)
    for _ in range(1 << 16):
        small.add(int(x))
        x = x * pub.h_s % pub.nsquare
    cts = [int(pub.raw_encrypt(0)) for _ in range(30)]
    assert not any(c in small for c in cts)
    assert len(set(cts)) == len(cts)  # equal plaintexts, different ciphertexts


def test_rerandomization_hides_past_operations_from_the_key_owner():
    """With p = q = 3 (mod 4), every DJN mask h_s^a has Legendre symbols mod p and mod q
    of equal sign, so the key owner could tell a DJN-masked ciphertext from a fresh one
    (and learn about the operations behind it). The default re-randomization multiplies
    by a uniform n-th residue: the sign product is -1 about half the time."""
    pub, priv = _key(512, blum=True)
    c = pub.raw_encrypt(5)

    def sign_product(ct):
        r = int(ct) % int(pub.n)
        return gmpy2.legendre(r, priv.p) * gmpy2.legendre(r, priv.q)

    assert sign_product(c) == 1
    djn = [sign_product(pub.rerandomize(c, statistical=False)) for _ in range(40)]
    assert set(djn) == {1}  # what the owner would see with DJN masks only
    default = [sign_product(pub.rerandomize(c)) for _ in range(40)]
    assert -1 in default and 1 in default
    assert all(priv.raw_decrypt(pub.rerandomize(c)) == 5 for _ in range(3))


def test_packed_rerandomization_is_statistical_by_default():
    import numpy as np

    from ppdm.protocols.paillier import decrypt_packed
    from ppdm.protocols.paillier.batch import encrypt_packed

    pub, priv = _key(512, blum=True)
    v = encrypt_packed(pub, np.array([1, 2, 3]), value_bits=8)
    r = int(pub.n)
    signs = set()
    for _ in range(30):
        ct = v.rerandomize().ciphertexts[0]
        signs.add(gmpy2.legendre(int(ct) % r, priv.p) * gmpy2.legendre(int(ct) % r, priv.q))
    assert signs == {-1, 1}
    assert list(decrypt_packed(priv, v.rerandomize())) == [1, 2, 3]


def test_key_factor_checks():
    _, priv = _key(512)
    p, q = int(priv.p), int(priv.q)
    check_key_factors(p, q)
    with pytest.raises(ValueError, match="differ"):
        check_key_factors(p, p)
    with pytest.raises(ValueError, match="not prime"):
        check_key_factors(p, q + 2 if not gmpy2.is_prime(q + 2) else q + 4)
    small = int(gmpy2.next_prime(1 << 200))
    with pytest.raises(ValueError, match="bits"):
        check_key_factors(small, q)
    # Too close: |p - q| below 2^(k/2 - 100) (Fermat factoring).
    close = int(gmpy2.next_prime(p + (1 << 100)))
    with pytest.raises(ValueError, match="too close"):
        check_key_factors(p, close)
    # Keys built from given factors are checked too (from_bytes, from_phe, the constructor).
    with pytest.raises(ValueError, match="too close"):
        PaillierPrivateKey(PaillierPublicKey(p * close), p, close)
