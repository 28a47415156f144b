"""Paillier keys with ``g = n + 1``: DJN fast encryption, CRT decryption, homomorphic ops.

Paillier, "Public-key cryptosystems based on composite degree residuosity classes",
EUROCRYPT 1999; with the randomness of Damgård, Jurik and Nielsen, "A generalization of
Paillier's public-key system with applications to electronic voting", Int. J. Inf.
Security 9(6), 2010 (section 4.2), which SecretFlow HEU also implements. Aggarwal 2015, §20.5 uses homomorphic encryption for the distributed dot products of vertically
partitioned mining.

Scheme
------
``n = p q`` (two primes of the same length), ``g = n + 1``.
``E(m) = (1 + n m) * h_s^alpha mod n^2`` where ``h = -x^2 mod n`` and ``h_s = h^n mod
n^2``; ``x`` is derived from ``n`` with SHAKE-256 (nothing up the sleeve), so every party
computes the same ``h_s`` from the public key alone and a peer cannot hand us a weak one.
``h_s^alpha`` is an ``n``-th residue like the textbook ``r^n``, so decryption is the
ordinary one and ciphertexts interoperate with python-paillier (``phe``) both ways.
Decryption uses the CRT (``c^(p-1) mod p^2`` and ``c^(q-1) mod q^2``, as in ``phe``).

Speed: ``h_s^alpha`` comes from a fixed-base comb (Lim-Lee; 8 tables of ``2^12`` powers,
built once per key), so an encryption of a 1,024-bit ``alpha`` costs 88 modular
multiplications and 10 squarings instead of a full exponentiation (a fixed-base window
table of 8-bit digits, the same 32,768 entries, needs 127). For an ``n`` of 1,536 bits
or more (:data:`~ppdm.protocols.paillier.comb.SPLIT_MIN_ROOT_BITS`) each entry is
stored split as ``a (1 + n beta)`` with ``a < n``
(:class:`~ppdm.protocols.paillier.comb.SquareModulusTable`), so the 88 products are by
half-size numbers, taken two at a time before one reduction mod ``n^2``, and the
``beta`` are only added: 1.3-1.6x as many encryptions per CPU second at 2048 bits, the
same ciphertexts for the same ``alpha``. The key owner uses two half-size combs (mod
``p^2`` and ``q^2``, in one loop; split from 2048-bit keys on, where the halves reach
1,024 bits) and the CRT. A key's ``window`` and ``blocks`` lay out its tables; a process
that makes many encryptions with one key may ask for larger ones
(:func:`~ppdm.protocols.paillier.comb.comb_layout`, as the dot product's holder does).

Security assumption (document it where keys are used)
------------------------------------------------------
By default ``alpha`` is uniform in ``[0, 2^(k/2))`` (``k`` = bit length of ``n``): DJN's
own setting, semantically secure under the decisional composite residuosity assumption
(DJN 2010, section 4.2). ``exponent_bits=SHORT_EXPONENT_BITS`` (256) is an explicit
option, about 4x faster, that needs in addition the *short-exponent
indistinguishability* assumption in the group of ``n``-th residues of Jacobi symbol 1
(the best known attack is generic, Pollard's kangaroo in ``2^128`` steps; the same
trade-off as short-exponent Diffie-Hellman, Koshiba and Kurosawa 2004) -- not DJN's
analysis, and not the default.

Re-randomization hides *past operations* from the key owner only if it is statistical:
:meth:`PaillierPublicKey.rerandomize` and :meth:`PackedVector.rerandomize
<ppdm.protocols.paillier.batch.PackedVector.rerandomize>` therefore multiply by a
textbook ``r^n`` with ``r`` uniform in ``Z*_n`` by default (uniform over the ``n``-th
residues: the result is a fresh encryption of the same plaintext even for someone who
knows the factorization); ``statistical=False`` uses a DJN mask (computationally hiding
only, faster).

Key generation and keys loaded from bytes or ``phe`` pass the checks of
:func:`check_key_factors` (HEU-style): two distinct primes of exactly half the modulus
size, ``|p - q| > 2^(k/2 - 100)``, ``gcd(n, (p-1)(q-1)) = 1`` and ``n`` of exactly ``k``
bits.

Randomness comes from ``os.urandom`` (through ``secrets``) only. Ciphertexts are ``gmpy2``
integers; :meth:`PaillierPublicKey.check_ciphertexts` validates those from peers.
"""

from __future__ import annotations

import hashlib
import secrets
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import gmpy2
import numpy as np
from gmpy2 import mpz
from google.protobuf.message import DecodeError

from ppdm.errors import ProtocolError
from ppdm.proto.ppdm.v1 import paillier_pb2 as pb
from ppdm.protocols.paillier import pool
from ppdm.protocols.paillier.comb import DEFAULT_COMB_BLOCKS as DEFAULT_COMB_BLOCKS
from ppdm.protocols.paillier.comb import DEFAULT_WINDOW as DEFAULT_WINDOW
from ppdm.protocols.paillier.comb import FixedBaseTable as FixedBaseTable
from ppdm.protocols.paillier.comb import table_mod_square
from ppdm.protocols.paillier.comb import threaded_batches as threaded_batches
from ppdm.protocols.paillier.encoding import (
    decode_signed,
    decode_signed_many,
    encode_signed,
    encode_signed_many,
    max_int,
)

if TYPE_CHECKING:
    import phe

__all__ = [
    "DEFAULT_EXPONENT_BITS",
    "DEFAULT_KEY_BITS",
    "DEFAULT_WINDOW",
    "MIN_KEY_BITS",
    "SHORT_EXPONENT_BITS",
    "FixedBaseTable",
    "PaillierPrivateKey",
    "PaillierPublicKey",
    "check_key_factors",
    "generate_keypair",
]

#: Default modulus size (112-bit security, NIST SP 800-57).
DEFAULT_KEY_BITS = 2048
#: Smallest modulus accepted from peers and by :func:`generate_keypair` by default.
MIN_KEY_BITS = 2048
#: Largest modulus accepted from a peer (bounds the work a peer can make us do).
MAX_KEY_BITS = 8192
#: Bits of the DJN exponent ``alpha`` by default: ``None`` means half the modulus size
#: (DJN's setting; 1024 bits for a 2048-bit ``n``).
DEFAULT_EXPONENT_BITS: int | None = None
#: The short-exponent option (an extra assumption, see the module docstring).
SHORT_EXPONENT_BITS = 256


_MpzType = type(mpz(0))
_SMALL_PRIMES = 1
for _p in range(3, 2000, 2):
    if gmpy2.is_prime(_p):
        _SMALL_PRIMES *= _p


def _mpz(value: Any, what: str = "value") -> Any:
    if isinstance(value, bool) or not isinstance(value, int | np.integer | _MpzType):
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}")
    return mpz(int(value))


def _derive_h(n: Any) -> Any:
    """DJN's ``h = -x^2 mod n`` with ``x`` derived from ``n`` by SHAKE-256."""
    nbytes = (int(n).bit_length() + 7) // 8
    seed = b"ppdm/paillier/djn-h/v1" + int(n).to_bytes(nbytes, "big")
    x = mpz(int.from_bytes(hashlib.shake_256(seed).digest(nbytes + 16), "big")) % n
    if gmpy2.gcd(x, n) != 1:  # would factor n; cannot happen for a proper key
        raise ValueError("modulus shares a factor with the derived DJN base")
    return (-(x * x)) % n


class PaillierPublicKey:
    """A Paillier public key with ``g = n + 1`` (see the module docstring).

    Ciphertexts are ``gmpy2.mpz`` integers in ``Z*_{n^2}``. :meth:`encrypt` takes signed
    integers (``|v| <= n // 3 - 1``); :meth:`raw_encrypt` takes residues in ``[0, n)``.
    Keys are built with :func:`generate_keypair`, :meth:`from_bytes`, :meth:`from_peer`
    or :meth:`from_phe`.
    """

    def __init__(
        self,
        n: int,
        *,
        exponent_bits: int | None = None,
        window: int = DEFAULT_WINDOW,
        blocks: int = DEFAULT_COMB_BLOCKS,
    ) -> None:
        n = _mpz(n, "n")
        if exponent_bits is None:
            exponent_bits = max(int(n.bit_length()) // 2, 16)
        if n < 15 or n % 2 == 0 or gmpy2.is_square(n):
            raise ValueError("n must be an odd composite, not a square")
        if not 16 <= exponent_bits <= n.bit_length():
            raise ValueError("exponent_bits must be in [16, bit length of n]")
        if blocks < 1:
            raise ValueError("blocks must be positive")
        self.n = n
        self.nsquare = n * n
        self.g = n + 1
        self.max_int = max_int(int(n))
        self.exponent_bits = int(exponent_bits)
        self.window = int(window)
        self.blocks = int(blocks)

    # Construction and serialization ----------------------------------------------------

    @classmethod
    def from_peer(
        cls,
        n: object,
        party: str,
        step: str,
        *,
        min_bits: int = MIN_KEY_BITS,
        max_bits: int = MAX_KEY_BITS,
        **options: int,
    ) -> PaillierPublicKey:
        """A public key received from ``party`` at ``step``: an odd ``n`` of at least
        ``min_bits`` bits, not a square, without prime factors below 2000; anything else
        raises :class:`ProtocolError`. (Whether ``n`` is a product of two primes cannot be
        checked; a key owner can only weaken its own ciphertexts.)"""
        if isinstance(n, bytes):
            try:
                n = int(pb.PaillierPublicKey.FromString(n).n.hex() or "0", 16)
            except DecodeError as exc:
                raise ProtocolError(party, step, f"undecodable Paillier public key: {exc}") from exc
        if isinstance(n, bool) or not isinstance(n, int):
            raise ProtocolError(party, step, "Paillier public key is not an integer")
        if n.bit_length() < min_bits:
            raise ProtocolError(
                party, step, f"Paillier modulus of {n.bit_length()} bits (< {min_bits})"
            )
        if n.bit_length() > max_bits:
            # A huge modulus costs the receiver seconds per operation: a denial of service.
            raise ProtocolError(
                party, step, f"Paillier modulus of {n.bit_length()} bits (> {max_bits})"
            )
        if n % 2 == 0 or gmpy2.is_square(n) or gmpy2.gcd(n, _SMALL_PRIMES) != 1:
            raise ProtocolError(party, step, "Paillier modulus is not a valid RSA modulus")
        return cls(n, **options)

    def to_bytes(self) -> bytes:
        """The ``ppdm.v1.PaillierPublicKey`` protobuf bytes."""
        return pb.PaillierPublicKey(n=_to_bytes(self.n)).SerializeToString()

    @classmethod
    def from_bytes(cls, data: bytes, **options: int) -> PaillierPublicKey:
        """Inverse of :meth:`to_bytes` (``ValueError`` on malformed input)."""
        try:
            msg = pb.PaillierPublicKey.FromString(data)
        except DecodeError as exc:
            raise ValueError(f"not a PaillierPublicKey message: {exc}") from exc
        return cls(int.from_bytes(msg.n, "big"), **options)

    @cached_property
    def fingerprint(self) -> bytes:
        """BLAKE2b-256 of :meth:`to_bytes` (names the key in ciphertext batches)."""
        return hashlib.blake2b(self.to_bytes(), digest_size=32).digest()

    @property
    def bits(self) -> int:
        return int(self.n.bit_length())

    @property
    def ciphertext_bytes(self) -> int:
        """Fixed width of a serialized ciphertext."""
        return (int(self.nsquare.bit_length()) + 7) // 8

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PaillierPublicKey) and self.n == other.n

    def __hash__(self) -> int:
        return hash(("paillier", int(self.n)))

    def __repr__(self) -> str:
        return f"PaillierPublicKey(bits={self.bits}, id={self.fingerprint[:6].hex()})"

    # phe interop --------------------------------------------------------------------------

    def to_phe(self) -> phe.PaillierPublicKey:
        """The same key as a ``phe.PaillierPublicKey``."""
        import phe

        return phe.PaillierPublicKey(int(self.n))

    @classmethod
    def from_phe(cls, key: phe.PaillierPublicKey, **options: int) -> PaillierPublicKey:
        return cls(int(key.n), **options)

    def to_phe_encrypted(self, ciphertext: int, *, exponent: int = 0) -> phe.EncryptedNumber:
        """``ciphertext`` as a ``phe.EncryptedNumber`` (exponent 0: an integer)."""
        import phe

        return phe.EncryptedNumber(self.to_phe(), int(ciphertext), exponent=exponent)

    # DJN randomness ------------------------------------------------------------------------

    @cached_property
    def h_s(self) -> Any:
        """``h^n mod n^2`` for DJN's ``h = -x^2 mod n``."""
        return gmpy2.powmod(_derive_h(self.n), self.n, self.nsquare)

    @cached_property
    def table(self) -> FixedBaseTable:
        """The fixed-base table of :attr:`h_s` mod ``n^2`` (built on first use)."""
        return table_mod_square(
            self.h_s,
            self.n,
            exponent_bits=self.exponent_bits,
            window=self.window,
            blocks=self.blocks,
        )

    def random_masks(self, count: int) -> list[Any]:
        """``count`` fresh DJN randomizers ``h_s^alpha mod n^2``."""
        return self.table.random_powers(count)

    def statistical_mask(self) -> Any:
        """A textbook randomizer ``r^n mod n^2`` with ``r`` uniform in ``Z*_n``."""
        while True:
            r = mpz(secrets.randbelow(int(self.n) - 1) + 1)
            if gmpy2.gcd(r, self.n) == 1:
                return gmpy2.powmod(r, self.n, self.nsquare)

    # Encryption ----------------------------------------------------------------------------

    def _apply(self, plaintext: Any, mask: Any) -> Any:
        # (1 + n m) * mask = mask + n * (m * mask mod n)  (mod n^2)
        if plaintext == 0:
            return mask
        return (mask + self.n * (plaintext * mask % self.n)) % self.nsquare

    def _check_plaintext(self, m: Any) -> Any:
        m = _mpz(m, "plaintext")
        if not 0 <= m < self.n:
            raise ValueError("raw plaintext must be in [0, n)")
        return m

    def raw_encrypt(self, plaintext: int) -> Any:
        """Encrypt a residue ``0 <= plaintext < n`` (hazmat: no signed encoding)."""
        return self.raw_encrypt_many([plaintext])[0]

    def raw_encrypt_many(
        self, plaintexts: Sequence[int] | np.ndarray, *, workers: int | None = None
    ) -> list[Any]:
        """Encrypt residues in ``[0, n)``; ``workers > 1`` uses a process pool."""
        return _encrypt_residues(self, None, plaintexts, workers)

    def encrypt(self, value: int) -> Any:
        """Encrypt a signed integer (``OverflowError`` beyond ``n // 3 - 1``)."""
        return self.raw_encrypt(encode_signed(int(self.n), value))

    def encrypt_many(
        self, values: Iterable[int] | np.ndarray, *, workers: int | None = None
    ) -> list[Any]:
        """Encrypt signed integers (a sequence or an integer numpy array)."""
        arr = values if isinstance(values, np.ndarray) else list(values)
        return self.raw_encrypt_many(encode_signed_many(int(self.n), arr), workers=workers)

    def rerandomize(self, ciphertext: int, *, statistical: bool = True) -> Any:
        """The same plaintext under fresh randomness: by default a textbook ``r^n`` (hides
        past operations even from the key owner, statistically); ``statistical=False``
        multiplies by a DJN mask instead (faster, computationally hiding only)."""
        c = self.check_ciphertext(ciphertext)
        mask = self.statistical_mask() if statistical else self.random_masks(1)[0]
        return c * mask % self.nsquare

    # Homomorphic operations -----------------------------------------------------------

    def add(self, a: int, b: int) -> Any:
        """``E(x + y)`` from ``E(x)`` and ``E(y)``."""
        return mpz(a) * mpz(b) % self.nsquare

    def add_plain(self, ciphertext: int, value: int) -> Any:
        """``E(x + v)`` for a signed plaintext integer ``v`` (no new randomness)."""
        m = encode_signed(int(self.n), value)
        return self._apply(mpz(m), mpz(ciphertext))

    def neg(self, ciphertext: int) -> Any:
        """``E(-x)`` (the inverse mod ``n^2``)."""
        return gmpy2.invert(mpz(ciphertext), self.nsquare)

    def sub(self, a: int, b: int) -> Any:
        """``E(x - y)``."""
        return mpz(a) * self.neg(b) % self.nsquare

    def mul_plain(self, ciphertext: int, k: int) -> Any:
        """``E(k * x)`` for a signed integer ``k``."""
        k = int(_mpz(k, "k"))
        c = mpz(ciphertext)
        if k < 0:
            c, k = self.neg(c), -k
        return gmpy2.powmod(c, k, self.nsquare)

    def sum(self, ciphertexts: Iterable[int]) -> Any:
        """``E(sum x_i)`` (``E(0)`` with randomness 1 for an empty input)."""
        acc = mpz(1)
        n2 = self.nsquare
        for c in ciphertexts:
            acc = acc * c % n2
        return acc

    # Validation ------------------------------------------------------------------------

    def is_ciphertext(self, value: object) -> bool:
        """Whether ``value`` is in ``Z*_{n^2}`` (``0 < c < n^2`` and ``gcd(c, n) = 1``)."""
        if isinstance(value, bool) or not isinstance(value, int | _MpzType):
            return False
        return 0 < value < self.nsquare and gmpy2.gcd(value, self.n) == 1

    def check_ciphertext(self, value: object) -> Any:
        """``value`` as an ``mpz`` if it is a ciphertext, else ``ValueError``."""
        if not self.is_ciphertext(value):
            raise ValueError("not a ciphertext of this key (must be in Z*_{n^2})")
        return mpz(value)  # type: ignore[call-overload]

    def check_ciphertexts(self, values: object, party: str, step: str) -> list[Any]:
        """Validate a batch of ciphertexts received from ``party`` at ``step``.

        Every value must be an int with ``0 < c < n^2`` and ``gcd(c, n) = 1``; otherwise
        :class:`ProtocolError` names the first bad position. The gcd test is batched: the
        product of all values mod ``n`` is coprime to ``n`` iff every value is.
        """
        if not isinstance(values, list | tuple):
            raise ProtocolError(party, step, "expected a list of ciphertexts")
        n, n2 = self.n, self.nsquare
        out = []
        prod = mpz(1)
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, int | _MpzType) or not 0 < v < n2:
                raise ProtocolError(party, step, f"ciphertext {i} is not in Z*_(n^2)")
            c = mpz(v)
            out.append(c)
            prod = prod * (c % n) % n
        if gmpy2.gcd(prod, n) != 1:
            for i, c in enumerate(out):
                if gmpy2.gcd(c, n) != 1:
                    raise ProtocolError(
                        party, step, f"ciphertext {i} is not a unit mod n (not in Z*_(n^2))"
                    )
        return out

    # Ciphertext batches as protobuf -----------------------------------------------------

    def ciphertexts_to_bytes(self, ciphertexts: Sequence[int]) -> bytes:
        """A ``ppdm.v1.PaillierCiphertexts`` message holding ``ciphertexts``."""
        width = self.ciphertext_bytes
        data = b"".join(int(c).to_bytes(width, "big") for c in ciphertexts)
        return pb.PaillierCiphertexts(
            key_id=self.fingerprint, width=width, count=len(ciphertexts), data=data
        ).SerializeToString()

    def ciphertexts_from_bytes(self, data: bytes) -> list[Any]:
        """Inverse of :meth:`ciphertexts_to_bytes`; ``ValueError`` for a message under
        another key, with the wrong sizes, or holding a value outside ``Z*_{n^2}``."""
        try:
            msg = pb.PaillierCiphertexts.FromString(data)
        except DecodeError as exc:
            raise ValueError(f"not a PaillierCiphertexts message: {exc}") from exc
        if msg.key_id != self.fingerprint:
            raise ValueError("ciphertexts are under another key")
        width, count = int(msg.width), int(msg.count)
        if width != self.ciphertext_bytes or len(msg.data) != width * count:
            raise ValueError("ciphertext batch has the wrong width or length")
        values = [
            int.from_bytes(msg.data[i : i + width], "big") for i in range(0, width * count, width)
        ]
        try:
            return self.check_ciphertexts(values, "local", "paillier/from-bytes")
        except ProtocolError as exc:
            raise ValueError(exc.reason) from None


class PaillierPrivateKey:
    """A Paillier private key ``(p, q)`` with CRT decryption and fast key-owner encryption.

    >>> pub, priv = generate_keypair(512, allow_insecure=True)
    >>> priv.decrypt(pub.add(pub.encrypt(20), pub.encrypt(-5)))
    15
    """

    def __init__(
        self, public_key: PaillierPublicKey, p: int, q: int, *, check: bool = True
    ) -> None:
        p, q = _mpz(p, "p"), _mpz(q, "q")
        if p * q != public_key.n:
            raise ValueError("p * q does not match the public key")
        if p == q:
            raise ValueError("p and q must differ")
        if check:
            check_key_factors(p, q)
        if q < p:
            p, q = q, p
        self.public_key = public_key
        self.p, self.q = p, q
        self.psquare, self.qsquare = p * p, q * q
        self.p_inverse = gmpy2.invert(p, q)
        self.hp = self._h(p, self.psquare)
        self.hq = self._h(q, self.qsquare)

    def _h(self, x: Any, xsquare: Any) -> Any:
        return gmpy2.invert((gmpy2.powmod(self.public_key.g, x - 1, xsquare) - 1) // x, x)

    def __repr__(self) -> str:
        return f"PaillierPrivateKey(bits={self.public_key.bits})"

    # Serialization and phe ---------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The ``ppdm.v1.PaillierPrivateKey`` protobuf bytes (secret!)."""
        return pb.PaillierPrivateKey(p=_to_bytes(self.p), q=_to_bytes(self.q)).SerializeToString()

    @classmethod
    def from_bytes(cls, data: bytes, **options: int) -> PaillierPrivateKey:
        try:
            msg = pb.PaillierPrivateKey.FromString(data)
        except DecodeError as exc:
            raise ValueError(f"not a PaillierPrivateKey message: {exc}") from exc
        p, q = int.from_bytes(msg.p, "big"), int.from_bytes(msg.q, "big")
        return cls(PaillierPublicKey(p * q, **options), p, q)

    def to_phe(self) -> phe.PaillierPrivateKey:
        import phe

        return phe.PaillierPrivateKey(self.public_key.to_phe(), int(self.p), int(self.q))

    @classmethod
    def from_phe(cls, key: phe.PaillierPrivateKey, **options: int) -> PaillierPrivateKey:
        return cls(PaillierPublicKey.from_phe(key.public_key, **options), key.p, key.q)

    # Decryption ------------------------------------------------------------------------

    def raw_decrypt(self, ciphertext: int) -> Any:
        """The residue in ``[0, n)`` (``ValueError`` if not in ``Z*_{n^2}``)."""
        c = self.public_key.check_ciphertext(ciphertext)
        return self._crt_decrypt(c)

    def _crt_decrypt(self, c: Any) -> Any:
        p, q = self.p, self.q
        mp = (gmpy2.powmod(c, p - 1, self.psquare) - 1) // p * self.hp % p
        mq = (gmpy2.powmod(c, q - 1, self.qsquare) - 1) // q * self.hq % q
        return mp + p * ((mq - mp) * self.p_inverse % q)

    def raw_decrypt_many(
        self, ciphertexts: Sequence[int], *, workers: int | None = None
    ) -> list[Any]:
        """Residues of many ciphertexts; ``workers > 1`` uses a process pool."""
        cs = [self.public_key.check_ciphertext(c) for c in ciphertexts]
        if workers is not None and workers > 1 and len(cs) >= 2 * _POOL_MIN_CHUNK // 8:
            pub = self.public_key
            return pool.map_packed(
                _decrypt_task,
                (self.to_bytes(), pub.exponent_bits, pub.window, pub.blocks),
                cs,
                workers=workers,
                in_width=pub.ciphertext_bytes,
                out_width=(pub.bits + 7) // 8,
            )
        return [self._crt_decrypt(c) for c in cs]

    def decrypt(self, ciphertext: int) -> int:
        """The signed integer (``OverflowError`` if the result overflowed)."""
        return decode_signed(int(self.public_key.n), self.raw_decrypt(ciphertext))

    def decrypt_many(self, ciphertexts: Sequence[int], *, workers: int | None = None) -> list[int]:
        return decode_signed_many(
            int(self.public_key.n), self.raw_decrypt_many(ciphertexts, workers=workers)
        )

    # Key-owner encryption ------------------------------------------------------------------

    @cached_property
    def _tables(self) -> tuple[FixedBaseTable, FixedBaseTable, Any]:
        pk = self.public_key
        h = _derive_h(pk.n)
        tp, tq = (
            table_mod_square(
                gmpy2.powmod(h, pk.n, x * x),
                x,
                exponent_bits=pk.exponent_bits,
                window=pk.window,
                blocks=pk.blocks,
            )
            for x in (self.p, self.q)
        )
        return tp, tq, gmpy2.invert(self.qsquare, self.psquare)

    def random_masks(self, count: int) -> list[Any]:
        """``count`` DJN randomizers ``h_s^alpha mod n^2`` computed mod ``p^2`` and
        ``q^2`` and joined by the CRT (same distribution as the public path)."""
        return threaded_batches(self._random_masks, count)

    def _random_masks(self, count: int) -> list[Any]:
        tp, tq, q2inv = self._tables
        p2, q2 = self.psquare, self.qsquare
        out = []
        raw = tp._random_exponents(count)
        if type(tp) is type(tq):  # (p and q of one size, unless built unchecked)
            # Same exponent mod p^2 and q^2; both combs in one loop: less interpreter work.
            pairs = tp._powers_pair(tq, raw)
        else:
            pairs = list(zip(tp._powers(raw), tq._powers(raw), strict=True))
        for ap, aq in pairs:
            out.append(aq + q2 * ((ap - aq) * q2inv % p2))
        return out

    def raw_encrypt_many(
        self, plaintexts: Sequence[int] | np.ndarray, *, workers: int | None = None
    ) -> list[Any]:
        """Key-owner encryption of residues in ``[0, n)`` (CRT tables)."""
        return _encrypt_residues(self.public_key, self, plaintexts, workers)

    def encrypt(self, value: int) -> Any:
        """Key-owner encryption of a signed integer."""
        return self.raw_encrypt_many([encode_signed(int(self.public_key.n), value)])[0]

    def encrypt_many(
        self, values: Iterable[int] | np.ndarray, *, workers: int | None = None
    ) -> list[Any]:
        """Key-owner encryption of signed integers."""
        arr = values if isinstance(values, np.ndarray) else list(values)
        return self.raw_encrypt_many(
            encode_signed_many(int(self.public_key.n), arr), workers=workers
        )


_POOL_MIN_CHUNK = 256


def _encrypt_residues(
    pub: PaillierPublicKey,
    priv: PaillierPrivateKey | None,
    plaintexts: Sequence[int] | np.ndarray,
    workers: int | None,
) -> list[Any]:
    """Encrypt residues in ``[0, n)`` with ``priv``'s CRT masks if given, else ``pub``'s;
    ``workers > 1`` uses a process pool for big batches."""
    ms = [pub._check_plaintext(m) for m in _as_list(plaintexts)]
    if workers is not None and workers > 1 and len(ms) >= 2 * _POOL_MIN_CHUNK:
        kind, blob = (
            ("private", priv.to_bytes()) if priv is not None else ("public", pub.to_bytes())
        )
        return pool.map_packed(
            _encrypt_task,
            (kind, blob, pub.exponent_bits, pub.window, pub.blocks, pub.ciphertext_bytes),
            ms,
            workers=workers,
            in_width=(pub.bits + 7) // 8,
            out_width=pub.ciphertext_bytes,
        )
    masks = (priv if priv is not None else pub).random_masks(len(ms))
    return [pub._apply(m, r) for m, r in zip(ms, masks, strict=True)]


# Worker side of the process pool (:mod:`ppdm.protocols.paillier.pool` sends these tasks
# by reference; every worker keeps the keys, and so the tables, it has seen).

#: Table entries (``blocks * 2^window`` per key) the worker-side key cache holds, least
#: recently used out first: 8 default keys or 3 large-batch ones (110 MB for 2048 bits).
_WORKER_TABLE_ENTRIES = 8 * DEFAULT_COMB_BLOCKS << DEFAULT_WINDOW

_worker_keys: OrderedDict[tuple[str, bytes, int, int, int], Any] = OrderedDict()


def _worker_key(kind: str, blob: bytes, exponent_bits: int, window: int, blocks: int) -> Any:
    key = (kind, blob, exponent_bits, window, blocks)
    found = _worker_keys.get(key)
    if found is not None:
        _worker_keys.move_to_end(key)
        return found
    cls = PaillierPrivateKey if kind == "private" else PaillierPublicKey
    found = _worker_keys[key] = cls.from_bytes(
        blob, exponent_bits=exponent_bits, window=window, blocks=blocks
    )
    while len(_worker_keys) > 1 and (
        sum(b << w for _, _, _, w, b in _worker_keys) > _WORKER_TABLE_ENTRIES
    ):
        _worker_keys.popitem(last=False)
    return found


def _encrypt_task(
    kind: str,
    blob: bytes,
    exponent_bits: int,
    window: int,
    blocks: int,
    out_width: int,
    width: int,
    data: bytes,
) -> bytes:
    key = _worker_key(kind, blob, exponent_bits, window, blocks)
    return pool.pack(key.raw_encrypt_many(pool.unpack(data, width)), out_width)


def _decrypt_task(
    blob: bytes, exponent_bits: int, window: int, blocks: int, width: int, data: bytes
) -> bytes:
    key = _worker_key("private", blob, exponent_bits, window, blocks)
    out_width = (int(key.public_key.n.bit_length()) + 7) // 8
    return pool.pack(key.raw_decrypt_many(pool.unpack(data, width)), out_width)


def _as_list(values: Sequence[int] | np.ndarray) -> list[Any]:
    if isinstance(values, np.ndarray):
        return values.ravel().tolist()
    return list(values)


def _to_bytes(x: Any) -> bytes:
    x = int(x)
    return x.to_bytes(max((x.bit_length() + 7) // 8, 1), "big")


def _random_prime(bits: int) -> Any:
    while True:
        # Top two bits set, so the product of two such primes has exactly 2 * bits bits.
        cand = mpz(secrets.randbits(bits)) | (mpz(3) << (bits - 2)) | 1
        p = gmpy2.next_prime(cand)
        if p.bit_length() == bits and gmpy2.is_prime(p, 40):
            return p


def check_key_factors(p: int, q: int, bits: int | None = None) -> None:
    """HEU-style checks of a key's factors (``ValueError`` naming the first that fails):
    ``p`` and ``q`` distinct primes of exactly half the size of ``n = p q``, which has
    exactly ``bits`` bits (default: its own, rounded up to even); ``|p - q| >
    2^(bits/2 - 100)`` (Fermat factoring); ``gcd(n, (p-1)(q-1)) = 1``."""
    p, q = mpz(p), mpz(q)
    n = p * q
    k = bits if bits is not None else n.bit_length() + (n.bit_length() & 1)
    if n.bit_length() != k:
        raise ValueError(f"n has {n.bit_length()} bits, not {k}")
    if p == q:
        raise ValueError("p and q must differ")
    for name, f in (("p", p), ("q", q)):
        if f.bit_length() != k // 2:
            raise ValueError(f"{name} has {f.bit_length()} bits, not {k // 2}")
        if not gmpy2.is_prime(f, 40):
            raise ValueError(f"{name} is not prime")
    if k >= 256 and abs(p - q).bit_length() <= k // 2 - 100:
        raise ValueError("p and q are too close (|p - q| <= 2^(k/2 - 100))")
    if gmpy2.gcd(n, (p - 1) * (q - 1)) != 1:
        raise ValueError("gcd(n, (p-1)(q-1)) != 1")


def generate_keypair(
    bits: int = DEFAULT_KEY_BITS,
    *,
    exponent_bits: int | None = DEFAULT_EXPONENT_BITS,
    window: int = DEFAULT_WINDOW,
    blocks: int = DEFAULT_COMB_BLOCKS,
    allow_insecure: bool = False,
) -> tuple[PaillierPublicKey, PaillierPrivateKey]:
    """A fresh key pair with an ``n`` of exactly ``bits`` bits (two ``bits/2``-bit primes
    from ``secrets``, checked by :func:`check_key_factors`). ``exponent_bits`` ``None``
    is DJN's ``bits/2``; :data:`SHORT_EXPONENT_BITS` is the faster option. ``window`` and
    ``blocks`` lay out the encryption tables (:func:`~ppdm.protocols.paillier.comb.comb_layout`).

    Moduli below 2048 bits are refused unless ``allow_insecure=True`` (tests only).
    """
    if bits % 2 or bits < 64:
        raise ValueError("bits must be even and at least 64")
    if bits < MIN_KEY_BITS and not allow_insecure:
        raise ValueError(f"Paillier keys below {MIN_KEY_BITS} bits are insecure")
    while True:
        p = _random_prime(bits // 2)
        q = _random_prime(bits // 2)
        try:
            check_key_factors(p, q, bits)
        except ValueError:
            continue
        break
    ebits = min(exponent_bits, bits) if exponent_bits is not None else None
    pub = PaillierPublicKey(p * q, exponent_bits=ebits, window=window, blocks=blocks)
    return pub, PaillierPrivateKey(pub, p, q, check=False)
