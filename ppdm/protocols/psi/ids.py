"""Record ids as PSI inputs: one kind per set, distinct, and their 16-byte blocks.

A party's ids are all ints (64-bit signed), all strings or all byte strings. Each id
becomes a 16-byte block whose last byte is free (the hash-function index of the KKRT
code goes there), injective within a kind and separated between kinds:

- ints: the 8 little-endian bytes of the value, then the 7-byte tag ``ppdm-i\\x01``;
- strings / byte strings of at most 14 bytes (UTF-8 for strings): the bytes, zero-padded
  to 14, then one byte of kind and length (``0xA0 + length`` strings, ``0xB0 + length``
  byte strings) -- no hashing, so short ids (customer numbers, codes) cost a copy;
- longer strings / byte strings: a 15-byte BLAKE2b digest of the UTF-8 / raw bytes,
  personalized per kind. Two different ids share a block with probability about
  ``2^-120`` (digest against digest, or a digest that happens to equal a direct
  encoding); a digest ends in the int tag with probability ``2^-56``. Hashing costs
  about 1 us per id in CPython, so long string ids stay slower than integers.

Every order-dependent step is done on numpy arrays (integer ids) or on hashes (the
blocks go through AES before cuckoo hashing), so the time does not depend on the order
the ids come in: random or shuffled ids cost what sorted sequential ones do (the Python
objects of a shuffled list are scattered in memory, so each is touched once, in one
vectorized conversion).

The common row order of an alignment is the ids' natural order (ints by value, strings
and byte strings lexicographically): both parties know the intersection's ids, so each
sorts them the same way.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

__all__ = ["BLOCK", "IdSet", "dummy_blocks", "has_duplicates", "joined_bytes"]

BLOCK = 16
_INT_TAG = np.frombuffer(b"ppdm-i\x01", dtype=np.uint8)
_KINDS = ("int", "str", "bytes")


_DIRECT = 14  #: longest string / byte string (in bytes) encoded without hashing
_DIRECT_KIND = {"str": 0xA0, "bytes": 0xB0}


def _kind_of_types(types: set[type]) -> str:
    """The one kind of a set of Python types (``TypeError``/``ValueError`` otherwise)."""
    kinds = set()
    for t in types:
        if issubclass(t, bool | np.bool_):
            raise TypeError("ids must be ints, strings or byte strings, not bool")
        if issubclass(t, int | np.integer):
            kinds.add("int")
        elif issubclass(t, str):
            kinds.add("str")
        elif issubclass(t, bytes | bytearray):
            kinds.add("bytes")
        else:
            raise TypeError(f"ids must be ints, strings or byte strings, not {t.__name__}")
    if len(kinds) != 1:
        raise ValueError("ids must all be of one kind (ints, strings or byte strings)")
    return kinds.pop()


def _int_array(values: Sequence[Any]) -> np.ndarray:
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except OverflowError:
        raise ValueError("integer ids must fit in 64 signed bits") from None


def has_duplicates(arr: np.ndarray) -> bool:
    """Whether a 1-D array repeats a value (one sort)."""
    if len(arr) < 2:
        return False
    s = np.sort(arr)
    return bool((s[1:] == s[:-1]).any())


@dataclass(frozen=True)
class IdSet:
    """A party's distinct ids (``values``, in the order given) and their kind; integer
    ids also as an int64 ``array`` (the path every order-dependent step takes)."""

    kind: str
    values: list[Any]
    array: np.ndarray | None = field(default=None, compare=False, repr=False)
    _cache: dict[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, ids: Sequence[Any] | np.ndarray) -> IdSet:
        """Check and wrap ``ids``: one kind, no duplicates (a :class:`ValueError`
        otherwise; the message names no id)."""
        if isinstance(ids, np.ndarray) and ids.dtype.kind in "iu":
            if ids.dtype.kind == "u" and ids.size and int(ids.max()) >= 1 << 63:
                raise ValueError("integer ids must fit in 64 signed bits")
            return cls._ints(np.ascontiguousarray(ids.ravel(), dtype=np.int64))
        values: list[Any] = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
        if not values:
            return cls("int", [], np.zeros(0, dtype=np.int64))
        kind = _kind_of_types(set(map(type, values)))
        if kind == "int":
            return cls._ints(_int_array(values))
        if kind == "bytes":
            values = [bytes(v) for v in values]
        out = cls(kind, values)
        own = out._cached_blocks()
        # Short ids are their blocks: distinct 64-bit keys of the blocks prove them
        # distinct without a set of a million Python objects (equal keys: the set).
        proven = out._cache["all_short"] and out._block_keys(own)[1] is not None
        if not proven and len(set(values)) != len(values):
            raise ValueError("the id set has duplicate ids")
        return out

    @classmethod
    def _ints(cls, arr: np.ndarray) -> IdSet:
        if has_duplicates(arr):
            raise ValueError("the id set has duplicate ids")
        return cls("int", arr.tolist(), arr)

    def __len__(self) -> int:
        return len(self.values)

    def blocks(self) -> np.ndarray:
        """``(n, 16)`` uint8 blocks, last byte zero (computed once per set)."""
        return self._cached_blocks().copy()

    def _cached_blocks(self) -> np.ndarray:
        """The cached blocks themselves (read-only use inside this class: no copy)."""
        cached = self._cache.get("blocks")
        if cached is None:
            cached, short = _blocks(self.kind, self.values, self.array)
            self._cache["blocks"], self._cache["all_short"] = cached, np.array(short)
        return cached

    def item_bytes(self) -> list[bytes]:
        """One byte string per id, injective across kinds (for the EC path)."""
        return [bytes(b[:15]) for b in self._cached_blocks()]

    def sorted(self, values: Sequence[Any]) -> list[Any]:
        """``values`` (ids of this kind) in the common order."""
        if self.kind == "int":
            return np.sort(np.asarray(values, dtype=np.int64)).tolist()
        return sorted(values)

    def common(self, rows: np.ndarray) -> tuple[list[Any], np.ndarray]:
        """The ids at positions ``rows`` of this set in the common order, and their
        positions in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.array is not None:
            picked = rows[np.argsort(self.array[rows])]  # distinct: no ties
            return self.array[picked].tolist(), picked
        if not len(rows):
            return [], rows
        blocks = self._cached_blocks()
        if self._cache["all_short"]:
            # Every id is short, so its block is its bytes zero-padded, then the length:
            # the blocks' byte order (two big-endian words) is the ids' own order
            # (UTF-8 keeps code point order; a proper prefix sorts first, by length).
            words = np.ascontiguousarray(blocks[rows]).view(">u8").reshape(len(rows), 2)
            picked = rows[np.lexsort((words[:, 1], words[:, 0]))]
        else:  # hashed ids: their blocks carry no order
            picked = np.asarray(sorted(rows.tolist(), key=self.values.__getitem__), np.int64)
        if len(picked) == 1:
            return [self.values[int(picked[0])]], picked
        return list(itemgetter(*picked.tolist())(self.values)), picked

    def locate(self, ids: Sequence[Any] | np.ndarray) -> np.ndarray | None:
        """The position in this set of each of ``ids`` (of this kind, distinct), or
        ``None`` if one of them is not in the set."""
        if self.array is not None:
            numbers = np.asarray(ids, dtype=np.int64)
            order = np.argsort(self.array)
            at = np.searchsorted(self.array, numbers, sorter=order)
            at = np.minimum(at, max(len(order) - 1, 0))
            if len(numbers) and (not len(order) or (self.array[order[at]] != numbers).any()):
                return None
            return order[at] if len(numbers) else np.zeros(0, dtype=np.int64)
        want: list[Any] = list(ids.tolist() if isinstance(ids, np.ndarray) else ids)
        if not want:
            return np.zeros(0, dtype=np.int64)
        # Short strings and byte strings (every id copied into its block, none hashed:
        # equal blocks, equal ids) are matched on their blocks: 64-bit keys of the
        # blocks, sorted once, then one searchsorted and a full-block check -- numpy
        # work, not a dict of Python objects.
        if len(self) == 0 or not all(
            issubclass(t, _TYPES[self.kind]) for t in set(map(type, want))
        ):
            return None
        own = self._cached_blocks()
        keys, ranks = self._block_keys(own) if self._cache["all_short"] else (own, None)
        if ranks is None:
            # long ids would be hashed again (or two of this set's blocks share a key):
            # a dict of the ids
            position = {v: i for i, v in enumerate(self.values)}
            try:
                return np.fromiter((position[v] for v in want), dtype=np.int64, count=len(want))
            except KeyError:
                return None
        mine, _ = _blocks(self.kind, want, None)
        at = np.minimum(np.searchsorted(keys, _key64(mine)), len(keys) - 1)
        found = ranks[at]
        if not (own[found] == mine).all():
            return None
        return found

    def _block_keys(self, own: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """This set's sorted 64-bit block keys and the positions in that order (``None``
        if two keys are equal)."""
        cached = self._cache.get("keys")
        if cached is None:
            keys = _key64(own)
            order = np.argsort(keys)
            keys = keys[order]
            repeated = len(keys) > 1 and bool((keys[1:] == keys[:-1]).any())
            self._cache["keys"], self._cache["order"] = keys, order
            if repeated:
                self._cache["order"] = np.zeros(0, dtype=np.int64)
            cached = keys
        order = self._cache["order"]
        return cached, (order if len(order) == len(cached) else None)


_TYPES: dict[str, Any] = {"str": str, "bytes": bytes | bytearray}


def _key64(blocks: np.ndarray) -> np.ndarray:
    """A 64-bit key of each block (its two halves mixed): equal blocks, equal keys."""
    halves = np.ascontiguousarray(blocks).view("<u8").reshape(len(blocks), 2)
    return halves[:, 0] ^ (halves[:, 1] * np.uint64(0x9E3779B97F4A7C15))


def joined_bytes(kind: str, values: Sequence[Any]) -> tuple[bytes, np.ndarray]:
    """The UTF-8 (strings) or raw (byte strings) bytes of ``values`` back to back, and
    each one's length in bytes: one join and one encode when every string is ASCII
    (the usual record id), one encode per string otherwise."""
    if kind == "str":
        text = "".join(values)
        if text.isascii():
            lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
            return text.encode("ascii"), lengths
        raw: Sequence[bytes] = [v.encode("utf-8", errors="surrogatepass") for v in values]
    else:
        raw = [bytes(v) for v in values] if any(type(v) is not bytes for v in values) else values
    lengths = np.fromiter(map(len, raw), dtype=np.int64, count=len(raw))
    return b"".join(raw), lengths


def _blocks(kind: str, values: Sequence[Any], array: np.ndarray | None) -> tuple[np.ndarray, bool]:
    """The blocks of ``values`` and whether every id was copied (none hashed)."""
    n = len(values)
    out = np.zeros((n, BLOCK), dtype=np.uint8)
    if not n:
        return out, True
    if kind == "int":
        arr = array if array is not None else np.asarray(values, "<i8")
        out[:, :8] = arr.astype("<i8").view(np.uint8).reshape(n, 8)
        out[:, 8:15] = _INT_TAG
        return out, False
    blob, lengths = joined_bytes(kind, values)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    short = lengths <= _DIRECT
    if short.any():
        # the bytes of every short id scattered into its row in one assignment: byte j
        # of id i (at starts[i] + j in the blob) goes to i * 16 + j (zero-padded to 14)
        which = np.flatnonzero(short)
        data = np.frombuffer(blob, dtype=np.uint8)
        shift = np.repeat(np.arange(n, dtype=np.int64) * BLOCK - starts, lengths)
        at = np.arange(len(data), dtype=np.int64) + shift
        if not short.all():
            keep = np.repeat(short, lengths)
            at, data = at[keep], data[keep]
        out.reshape(-1)[at] = data
        out[which, _DIRECT] = _DIRECT_KIND[kind] + lengths[which]
    if not short.all():
        person = b"ppdm-psi-" + kind.encode()
        which = np.flatnonzero(~short)
        digests = b"".join(
            hashlib.blake2b(blob[a : a + k], digest_size=15, person=person).digest()
            for a, k in zip(starts[which].tolist(), lengths[which].tolist(), strict=True)
        )
        out[which, :15] = np.frombuffer(digests, dtype=np.uint8).reshape(len(which), 15)
    return out, bool(short.all())


def dummy_blocks(count: int) -> np.ndarray:
    """``count`` random blocks that match no real id (except with probability
    ``2^-120`` each): padding that hides how many real ids a party still holds."""
    out = np.zeros((count, BLOCK), dtype=np.uint8)
    if count:
        out[:, :15] = np.frombuffer(os.urandom(15 * count), dtype=np.uint8).reshape(count, 15)
    return out
