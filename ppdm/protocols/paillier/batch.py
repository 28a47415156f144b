"""Batch Paillier over numpy arrays: integer and fixed-point vectors, packed vectors, and
multi-exponentiation (``prod c_i^(y_i)``, the encrypted dot product).

Every function takes either key: with a :class:`~ppdm.protocols.paillier.keys.
PaillierPrivateKey` encryption uses the key owner's CRT path. ``workers > 1`` spreads big
batches over a process pool (:mod:`ppdm.protocols.paillier.pool`).

>>> from ppdm.protocols.paillier.keys import generate_keypair
>>> pub, priv = generate_keypair(512, allow_insecure=True)
>>> v = encrypt_packed(pub, np.array([1, -2, 3]), value_bits=8, terms=2)
>>> decrypt_packed(priv, v + v).tolist()
[2, -4, 6]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gmpy2
import numpy as np
from gmpy2 import mpz

from ppdm.protocols.paillier.encoding import (
    FixedPoint,
    Packing,
    decode_signed_many,
    encode_signed,
    to_int64_or_object,
)
from ppdm.protocols.paillier.keys import PaillierPrivateKey, PaillierPublicKey

__all__ = [
    "PackedVector",
    "decrypt_array",
    "decrypt_fixed",
    "decrypt_packed",
    "encrypt_array",
    "encrypt_fixed",
    "encrypt_packed",
    "encrypted_dot",
    "multi_exp",
]

Key = PaillierPublicKey | PaillierPrivateKey


def _public(key: Key) -> PaillierPublicKey:
    return key.public_key if isinstance(key, PaillierPrivateKey) else key


def encrypt_array(key: Key, values: np.ndarray, *, workers: int | None = None) -> list[Any]:
    """Encrypt a 1-D integer (or bool) array element by element (signed encoding)."""
    v = np.asarray(values)
    if v.ndim != 1:
        raise ValueError("encrypt_array takes a 1-D array")
    return key.encrypt_many(v, workers=workers)


def decrypt_array(
    key: PaillierPrivateKey, ciphertexts: Sequence[int], *, workers: int | None = None
) -> np.ndarray:
    """Signed plaintexts as ``int64`` (or an object array if some do not fit)."""
    return to_int64_or_object(key.decrypt_many(ciphertexts, workers=workers))


def encrypt_fixed(
    key: Key, values: np.ndarray, *, frac_bits: int = 32, workers: int | None = None
) -> list[Any]:
    """Encrypt reals in fixed point with ``frac_bits`` fractional bits."""
    n = int(_public(key).n)
    return key.raw_encrypt_many(FixedPoint(frac_bits).encode(n, values), workers=workers)


def decrypt_fixed(
    key: PaillierPrivateKey,
    ciphertexts: Sequence[int],
    *,
    frac_bits: int = 32,
    scale_power: int = 1,
    workers: int | None = None,
) -> np.ndarray:
    """Float64 values of fixed-point ciphertexts (``scale_power=2`` after a product)."""
    residues = key.raw_decrypt_many(ciphertexts, workers=workers)
    return FixedPoint(frac_bits).decode(int(key.public_key.n), residues, scale_power=scale_power)


@dataclass(frozen=True)
class PackedVector:
    """An encrypted integer vector packed ``packing.slots`` values per ciphertext.

    ``terms`` counts how many packed input vectors were added into it; adding beyond
    ``packing.terms`` raises :class:`OverflowError` (the slots were not sized for it).
    """

    public_key: PaillierPublicKey
    packing: Packing
    ciphertexts: tuple[Any, ...]
    length: int
    terms: int = 1

    def __add__(self, other: PackedVector) -> PackedVector:
        if not isinstance(other, PackedVector):
            return NotImplemented
        if (
            other.public_key != self.public_key
            or other.packing != self.packing
            or other.length != self.length
        ):
            raise ValueError("packed vectors differ in key, packing or length")
        terms = self.terms + other.terms
        if terms > self.packing.terms:
            raise OverflowError(
                f"adding {terms} packed vectors overflows slots sized for {self.packing.terms}"
            )
        n2 = self.public_key.nsquare
        cts = tuple(a * b % n2 for a, b in zip(self.ciphertexts, other.ciphertexts, strict=True))
        return PackedVector(self.public_key, self.packing, cts, self.length, terms)

    def rerandomize(self, *, statistical: bool = True) -> PackedVector:
        """The same packed plaintexts under fresh randomness: by default textbook ``r^n``
        masks (statistically hiding past operations, even from the key owner);
        ``statistical=False``: DJN masks (computationally hiding only, faster)."""
        pk = self.public_key
        if statistical:
            masks = [pk.statistical_mask() for _ in self.ciphertexts]
        else:
            masks = pk.random_masks(len(self.ciphertexts))
        cts = tuple(c * r % pk.nsquare for c, r in zip(self.ciphertexts, masks, strict=True))
        return PackedVector(pk, self.packing, cts, self.length, self.terms)


def encrypt_packed(
    key: Key,
    values: np.ndarray,
    packing: Packing | None = None,
    *,
    value_bits: int = 32,
    terms: int = 1,
    workers: int | None = None,
) -> PackedVector:
    """Encrypt an integer vector packed (default: :meth:`Packing.for_sums` for
    ``terms`` addends of ``value_bits`` bits)."""
    pub = _public(key)
    n = int(pub.n)
    pk = packing or Packing.for_sums(n, value_bits=value_bits, terms=terms)
    v = np.asarray(values)
    cts = key.raw_encrypt_many(pk.encode(n, v), workers=workers)
    return PackedVector(pub, pk, tuple(cts), len(v), 1)


def decrypt_packed(
    key: PaillierPrivateKey, vector: PackedVector, *, workers: int | None = None
) -> np.ndarray:
    """The ``int64`` slot values of a packed vector (``OverflowError`` on overflow)."""
    if vector.public_key != key.public_key:
        raise ValueError("packed vector is under another key")
    n = int(key.public_key.n)
    residues = key.raw_decrypt_many(list(vector.ciphertexts), workers=workers)
    return vector.packing.unpack(decode_signed_many(n, residues), vector.length)


def _bucket_exp(ciphertexts: Sequence[Any], e: np.ndarray, n2: Any) -> Any:
    """``prod c_i^(e_i) mod n2`` for non-negative int64 ``e`` (Pippenger's bucket method:
    per window of ``w`` bits, ``len(e) + 2^(w+1)`` multiplications and ``w`` squarings)."""
    nz = np.flatnonzero(e)
    if nz.size == 0:
        return mpz(1)
    e = e[nz].astype(np.uint64)
    cts = [ciphertexts[i] for i in nz.tolist()]
    bits = int(e.max()).bit_length()
    if bits == 1:
        acc = mpz(1)
        for c in cts:
            acc = acc * c % n2
        return acc
    k = len(cts)
    w = min(range(1, 17), key=lambda w: -(-bits // w) * (k + (2 << w)) + bits)
    mask = np.uint64((1 << w) - 1)
    acc = mpz(1)
    for j in reversed(range(-(-bits // w))):
        if acc != 1:
            acc = gmpy2.powmod(acc, 1 << w, n2)
        digits = ((e >> np.uint64(w * j)) & mask).tolist()
        buckets: list[Any] = [None] * (1 << w)
        for c, d in zip(cts, digits, strict=True):
            if d:
                b = buckets[d]
                buckets[d] = c if b is None else b * c % n2
        running = mpz(1)
        total = mpz(1)
        for b in reversed(buckets[1:]):
            if b is not None:
                running = running * b % n2
            if running != 1:
                total = total * running % n2
        acc = acc * total % n2
    return acc


def multi_exp(public_key: PaillierPublicKey, ciphertexts: Sequence[Any], exponents: Any) -> Any:
    """``prod_i c_i^(y_i) mod n^2``, i.e. ``E(sum_i x_i y_i)`` for ``c_i = E(x_i)``.

    ``exponents`` is a 1-D bool or integer array (int64 range) of the same length; 0/1
    exponents cost one multiplication per selected ciphertext, larger ones use the bucket
    method, negative ones one modular inversion in all. The result carries no fresh
    randomness: re-randomize it before it leaves the party.
    """
    y = np.asarray(exponents)
    if y.ndim != 1 or len(y) != len(ciphertexts):
        raise ValueError("exponents must be a 1-D array as long as the ciphertexts")
    if y.dtype == np.bool_:
        y = y.astype(np.int64)
    if not np.issubdtype(y.dtype, np.integer):
        raise TypeError("exponents must be integers")
    if y.dtype == np.uint64 and y.size and int(y.max()) >= 1 << 63:
        raise OverflowError("exponents must fit in int64")
    y = y.astype(np.int64)
    n2 = public_key.nsquare
    pos = _bucket_exp(ciphertexts, np.where(y > 0, y, 0), n2)
    if y.size and int(y.min()) < 0:
        if int(y.min()) == -(1 << 63):
            raise OverflowError("exponents must be > -2**63")
        neg = _bucket_exp(ciphertexts, np.where(y < 0, -y, 0), n2)
        if neg != 1:
            pos = pos * gmpy2.invert(neg, n2) % n2
    return pos


def encrypted_dot(
    public_key: PaillierPublicKey, ciphertexts: Sequence[Any], y: np.ndarray, *, mask: int = 0
) -> Any:
    """``E(x . y + mask)`` re-randomized with a textbook ``r^n`` (statistically hiding
    which ciphertexts were combined, even from the key owner)."""
    c = multi_exp(public_key, ciphertexts, y)
    m = encode_signed(int(public_key.n), mask) if mask else 0
    if m:
        c = public_key._apply(mpz(m), c)
    return c * public_key.statistical_mask() % public_key.nsquare
