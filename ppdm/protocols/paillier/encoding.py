"""Plaintext encodings for Paillier: signed integers, fixed point, and slot packing.

Paillier encrypts residues ``m`` in ``Z_n``. The encodings here map user values to such
residues and back, and refuse values that would wrap around:

- **Signed integers** use python-paillier's (``phe``) convention, so ``phe`` decodes what
  ppdm encrypts and the other way round: ``v >= 0`` is ``m = v`` and ``v < 0`` is
  ``m = n + v``, for ``|v| <= max_int = n // 3 - 1``. A decrypted residue in the gap
  ``(max_int, n - max_int)`` means a homomorphic result overflowed, and decoding it raises
  :class:`OverflowError` instead of returning a wrong number.
- **Fixed point** (:class:`FixedPoint`) scales reals by ``2**frac_bits`` and rounds to the
  nearest integer, then encodes that signed integer. With ``frac_bits`` a multiple of 4,
  a ciphertext is a ``phe.EncryptedNumber`` with exponent ``-frac_bits // 4`` (phe's base
  is 16).
- **Packing** (:class:`Packing`) puts ``slots`` signed integers of ``slot_bits`` bits into
  one plaintext, ``m = sum_j v_j 2^(slot_bits * j)``, so one encryption, one homomorphic
  addition and one decryption handle ``slots`` values at once. Slot-wise sums stay exact
  while every slot's running sum lies in ``[-2^(slot_bits-1), 2^(slot_bits-1))``;
  :meth:`Packing.for_sums` sizes the slots for ``terms`` addends of ``value_bits`` bits (plus a guard bit).
  (Packing of many small values per Paillier plaintext is the standard batching trick,
  e.g. Ge and Zdonik 2007; Pedrouzo-Ulloa et al. 2017; SecretFlow HEU's batch encoding.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import gmpy2
import numpy as np

__all__ = [
    "FixedPoint",
    "Packing",
    "decode_signed",
    "decode_signed_many",
    "encode_signed",
    "encode_signed_many",
    "max_int",
    "to_int64_or_object",
]


def max_int(n: int) -> int:
    """Largest magnitude of a signed integer encoded under modulus ``n`` (``n // 3 - 1``,
    as in ``phe``)."""
    return int(n) // 3 - 1


def encode_signed(n: int, value: int) -> int:
    """The residue of the signed integer ``value`` in ``Z_n``.

    >>> encode_signed(101, -3)
    98
    >>> encode_signed(101, 40)
    Traceback (most recent call last):
    ...
    OverflowError: integer 40 is outside the signed range [-32, 32] of the key
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer | type(gmpy2.mpz(0))):
        raise TypeError(f"expected an integer, not {type(value).__name__}")
    v = int(value)
    bound = max_int(n)
    if not -bound <= v <= bound:
        raise OverflowError(
            f"integer {v} is outside the signed range [{-bound}, {bound}] of the key"
        )
    return v if v >= 0 else int(n) + v


def decode_signed(n: int, residue: int) -> int:
    """The signed integer a decrypted residue stands for; :class:`OverflowError` if it lies
    in the overflow gap ``(max_int, n - max_int)``.

    >>> decode_signed(101, 98)
    -3
    """
    n = int(n)
    m = int(residue)
    if not 0 <= m < n:
        raise ValueError("residue is not in Z_n")
    bound = max_int(n)
    if m <= bound:
        return m
    if m >= n - bound:
        return m - n
    raise OverflowError("decrypted value overflowed the signed range (homomorphic overflow)")


def encode_signed_many(n: int, values: Iterable[int] | np.ndarray) -> list[int]:
    """:func:`encode_signed` over a sequence or an integer numpy array (vectorized range
    check for int64 arrays)."""
    n = int(n)
    if isinstance(values, np.ndarray):
        if values.dtype == np.bool_:
            values = values.astype(np.int64)
        if not np.issubdtype(values.dtype, np.integer) and values.dtype != object:
            raise TypeError(f"expected an integer array, not {values.dtype}")
        if np.issubdtype(values.dtype, np.integer) and values.size:
            bound = max_int(n)
            lo, hi = int(values.min()), int(values.max())
            if lo < -bound or hi > bound:
                raise OverflowError("array values are outside the signed range of the key")
            return [v if v >= 0 else n + v for v in values.ravel().tolist()]
        values = values.ravel().tolist()
    return [encode_signed(n, v) for v in values]


def decode_signed_many(n: int, residues: Iterable[int]) -> list[int]:
    """:func:`decode_signed` over a sequence."""
    return [decode_signed(n, m) for m in residues]


def to_int64_or_object(values: Sequence[int]) -> np.ndarray:
    """An ``int64`` array if every value fits, else an object array of Python ints."""
    ints = [int(v) for v in values]
    if not ints:
        return np.zeros(0, dtype=np.int64)
    if min(ints) >= -(1 << 63) and max(ints) < (1 << 63):
        return np.array(ints, dtype=np.int64)
    out = np.empty(len(ints), dtype=object)
    out[:] = ints
    return out


@dataclass(frozen=True)
class FixedPoint:
    """Reals as integers scaled by ``2**frac_bits`` (round to nearest).

    A product of two encoded numbers has ``2 * frac_bits`` fractional bits: decode it with
    ``scale_power=2``. Overflow is checked against the key's signed range on encoding
    (:func:`encode_signed`) and on decoding (:func:`decode_signed`).

    >>> fp = FixedPoint(frac_bits=8)
    >>> fp.to_ints(np.array([1.5, -0.25]))
    [384, -64]
    >>> fp.from_ints([384, -64]).tolist()
    [1.5, -0.25]
    """

    frac_bits: int = 32

    def __post_init__(self) -> None:
        if isinstance(self.frac_bits, bool) or not isinstance(self.frac_bits, int):
            raise TypeError("frac_bits must be an int")
        if not 0 <= self.frac_bits <= 1024:
            raise ValueError("frac_bits must be in [0, 1024]")

    @property
    def phe_exponent(self) -> int:
        """The ``phe.EncryptedNumber`` exponent of a ciphertext of this encoding (base 16)."""
        if self.frac_bits % 4:
            raise ValueError("phe exponents need frac_bits to be a multiple of 4")
        return -(self.frac_bits // 4)

    def to_ints(self, values: Iterable[float] | np.ndarray) -> list[int]:
        """Scaled and rounded integers (Python ints, any size). Non-finite values raise
        ``ValueError``."""
        x = np.asarray(values, dtype=np.float64).ravel()
        if not np.all(np.isfinite(x)):
            raise ValueError("cannot encode NaN or infinite values")
        if x.size == 0:
            return []
        with np.errstate(over="ignore"):
            scaled = np.rint(np.ldexp(x, self.frac_bits))
        if float(np.max(np.abs(scaled))) < 2.0**62:
            return scaled.astype(np.int64).tolist()
        # exact (half to even, like np.rint) for values beyond int64 or float range
        scale = 1 << self.frac_bits
        return [round(Fraction(v) * scale) for v in x.tolist()]

    def from_ints(self, ints: Iterable[int], *, scale_power: int = 1) -> np.ndarray:
        """Decoded float64 values of integers carrying ``scale_power * frac_bits``
        fractional bits."""
        shift = self.frac_bits * scale_power
        vals = [int(v) for v in ints]
        out = np.empty(len(vals), dtype=np.float64)
        for i, v in enumerate(vals):
            out[i] = math.ldexp(v, -shift) if abs(v) < (1 << 1000) else float(v) / 2.0**shift
        return out

    def encode(self, n: int, values: Iterable[float] | np.ndarray) -> list[int]:
        """Residues in ``Z_n`` of the fixed-point encodings of ``values``."""
        return [encode_signed(n, v) for v in self.to_ints(values)]

    def decode(self, n: int, residues: Iterable[int], *, scale_power: int = 1) -> np.ndarray:
        """Float64 values of decrypted residues (overflow raises :class:`OverflowError`)."""
        return self.from_ints(decode_signed_many(n, residues), scale_power=scale_power)


@dataclass(frozen=True)
class Packing:
    """``slots`` signed integers of ``slot_bits`` bits per Paillier plaintext.

    The packed plaintext is ``sum_j v_j * 2^(slot_bits * j)`` as a signed integer (slot 0
    in the lowest bits), encoded with :func:`encode_signed`; the sum of two packed
    plaintexts is the packing of the slot-wise sums as long as no slot leaves
    ``[-2^(slot_bits-1), 2^(slot_bits-1))``. Unpacking adds the offset
    ``sum_j 2^(slot_bits-1) 2^(slot_bits*j)`` so that every slot becomes a plain base
    ``2^slot_bits`` digit, reads the digits with numpy and subtracts ``2^(slot_bits-1)``.

    ``value_bits`` and ``terms`` record what the slots were sized for (see
    :meth:`for_sums`): each input must lie in ``[-2^(value_bits-1), 2^(value_bits-1))``
    and at most ``terms`` packed vectors may be added; :meth:`unpack` raises
    :class:`OverflowError` if a slot leaves the resulting bound.

    >>> pk = Packing(slot_bits=8, slots=3, value_bits=6, terms=4)
    >>> m = pk.pack(np.array([5, -7, 30]))  # 5 - 7 * 2**8 + 30 * 2**16
    >>> m
    [1964293]
    >>> pk.unpack(m, 3).tolist()
    [5, -7, 30]
    """

    slot_bits: int
    slots: int
    value_bits: int
    terms: int = 1

    def __post_init__(self) -> None:
        for name in ("slot_bits", "slots", "value_bits", "terms"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int")
        if not 2 <= self.slot_bits <= 62:
            raise ValueError("slot_bits must be in [2, 62]")
        if self.value_bits + max(self.terms - 1, 0).bit_length() > self.slot_bits:
            raise ValueError(
                f"{self.terms} terms of {self.value_bits} bits need slots of at least "
                f"{self.value_bits + max(self.terms - 1, 0).bit_length()} bits"
            )

    @classmethod
    def for_sums(cls, n: int, *, value_bits: int, terms: int = 1) -> Packing:
        """The densest packing under modulus ``n`` for sums of ``terms`` signed values of
        ``value_bits`` bits: slots of ``value_bits + bit_length(terms - 1) + 1`` bits. The
        extra guard bit lets :meth:`unpack` detect sums of up to twice the planned size
        (such a slot exceeds the bound without wrapping into its neighbour)."""
        if value_bits < 1 or terms < 1:
            raise ValueError("value_bits and terms must be positive")
        slot_bits = value_bits + (terms - 1).bit_length() + 1
        slots = cls.capacity(n, slot_bits)
        if slots < 1:
            raise ValueError(f"slots of {slot_bits} bits do not fit the key")
        return cls(slot_bits=slot_bits, slots=slots, value_bits=value_bits, terms=terms)

    @staticmethod
    def capacity(n: int, slot_bits: int) -> int:
        """How many slots of ``slot_bits`` bits fit a key with modulus ``n``: the packed
        signed integer must stay within ``max_int`` (so ``slots * slot_bits <=
        bit_length(n) - 3``)."""
        return (int(n).bit_length() - 3) // slot_bits

    def check_key(self, n: int) -> None:
        """``ValueError`` if this packing does not fit modulus ``n``."""
        if self.slots > self.capacity(n, self.slot_bits):
            raise ValueError(
                f"{self.slots} slots of {self.slot_bits} bits do not fit a "
                f"{int(n).bit_length()}-bit key"
            )

    @property
    def value_bound(self) -> int:
        """Inputs lie in ``[-value_bound, value_bound)``."""
        return 1 << (self.value_bits - 1)

    def plaintexts_for(self, count: int) -> int:
        """Number of plaintexts holding ``count`` values."""
        return -(-count // self.slots)

    @property
    def _offset(self) -> int:
        half = 1 << (self.slot_bits - 1)
        return sum(half << (self.slot_bits * j) for j in range(self.slots))

    def pack(self, values: np.ndarray | Sequence[int]) -> list[int]:
        """Signed packed integers (not yet reduced mod ``n``) holding ``values``.

        Values outside ``[-2^(value_bits-1), 2^(value_bits-1))`` raise
        :class:`OverflowError`.
        """
        v = np.asarray(values)
        if v.dtype == np.bool_:
            v = v.astype(np.int64)
        if v.ndim != 1 or not np.issubdtype(v.dtype, np.integer):
            raise TypeError("pack takes a 1-D integer array")
        v = v.astype(np.int64)
        bound = self.value_bound
        if v.size and (int(v.min()) < -bound or int(v.max()) >= bound):
            raise OverflowError(
                f"values must lie in [{-bound}, {bound}) for {self.value_bits}-bit slots"
            )
        count = len(v)
        rows = self.plaintexts_for(count)
        if rows == 0:
            return []
        s, k = self.slot_bits, self.slots
        digits = np.full(rows * k, 1 << (s - 1), dtype=np.uint64)
        digits[:count] = (v + (1 << (s - 1))).astype(np.uint64)
        shifts = np.arange(s, dtype=np.uint64)
        bits = ((digits[:, None] >> shifts[None, :]) & np.uint64(1)).astype(np.uint8)
        packed = np.packbits(bits.reshape(rows, k * s), axis=1, bitorder="little")
        offset = self._offset
        return [int.from_bytes(row.tobytes(), "little") - offset for row in packed]

    def unpack(self, packed: Sequence[int], count: int) -> np.ndarray:
        """The first ``count`` slot values (``int64``) of signed packed integers.

        Raises :class:`OverflowError` if a value is outside the range of the packing, or a
        slot outside ``terms`` times the input range (a homomorphic overflow).
        """
        rows = len(packed)
        if count > rows * self.slots or count < 0:
            raise ValueError(f"{rows} plaintexts hold at most {rows * self.slots} values")
        if rows == 0:
            return np.zeros(0, dtype=np.int64)
        s, k = self.slot_bits, self.slots
        nbytes = (k * s + 7) // 8
        offset = self._offset
        limit = 1 << (k * s)
        buf = bytearray()
        for m in packed:
            u = int(m) + offset
            if not 0 <= u < limit:
                raise OverflowError("packed value outside the range of its slots")
            buf += u.to_bytes(nbytes, "little")
        raw = np.frombuffer(bytes(buf), dtype=np.uint8).reshape(rows, nbytes)
        bits = np.unpackbits(raw, axis=1, bitorder="little")[:, : k * s].reshape(rows * k, s)
        weights = np.uint64(1) << np.arange(s, dtype=np.uint64)
        digits = (bits.astype(np.uint64) * weights[None, :]).sum(axis=1, dtype=np.uint64)
        out = digits.astype(np.int64)[:count] - (1 << (s - 1))
        bound = self.terms * self.value_bound
        if out.size and (int(out.min()) < -bound or int(out.max()) > bound):
            raise OverflowError("a packed slot left its range (homomorphic overflow)")
        return out

    def encode(self, n: int, values: np.ndarray | Sequence[int]) -> list[int]:
        """Residues in ``Z_n`` of the packed ``values``."""
        self.check_key(n)
        return [encode_signed(n, m) for m in self.pack(values)]

    def decode(self, n: int, residues: Sequence[int], count: int) -> np.ndarray:
        """The ``count`` values packed in decrypted residues."""
        return self.unpack(decode_signed_many(n, residues), count)
