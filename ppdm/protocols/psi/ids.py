"""Record ids as PSI inputs: one kind per set, distinct, and their 16-byte blocks.

A party's ids are all ints (64-bit signed), all strings or all byte strings. Each id
becomes a 16-byte block whose last byte is free (the hash-function index of the KKRT
code goes there), injective within a kind and separated between kinds:

- ints: the 8 little-endian bytes of the value, then the 7-byte tag ``ppdm-i\\x01``;
- strings / byte strings: a 15-byte BLAKE2b digest of the UTF-8 / raw bytes, personalized
  per kind (two different ids share a block with probability about ``2^-120``; a string
  digest ends in the int tag with probability ``2^-56``).

The common row order of an alignment is the ids' natural order (ints by value, strings
and byte strings lexicographically): both parties know the intersection's ids, so each
sorts them the same way.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BLOCK", "IdSet", "dummy_blocks"]

BLOCK = 16
_INT_TAG = np.frombuffer(b"ppdm-i\x01", dtype=np.uint8)
_KINDS = ("int", "str", "bytes")


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError("ids must be ints, strings or byte strings, not bool")
    if isinstance(value, int | np.integer):
        return "int"
    if isinstance(value, str):
        return "str"
    if isinstance(value, bytes | bytearray):
        return "bytes"
    raise TypeError(f"ids must be ints, strings or byte strings, not {type(value).__name__}")


@dataclass(frozen=True)
class IdSet:
    """A party's distinct ids (``values``, in the order given) and their kind."""

    kind: str
    values: list[Any]

    @classmethod
    def of(cls, ids: Sequence[Any] | np.ndarray) -> IdSet:
        """Check and wrap ``ids``: one kind, no duplicates (a :class:`ValueError`
        otherwise; the message names no id)."""
        if isinstance(ids, np.ndarray):
            if ids.dtype.kind in "iu":
                if ids.dtype.kind == "u" and ids.size and int(ids.max()) >= 1 << 63:
                    raise ValueError("integer ids must fit in 64 signed bits")
                values: list[Any] = ids.astype(np.int64).tolist()
            else:
                values = ids.tolist()
        else:
            values = list(ids)
        if not values:
            return cls("int", [])
        kinds = {_kind_of(v) for v in values}
        if len(kinds) != 1:
            raise ValueError("ids must all be of one kind (ints, strings or byte strings)")
        kind = kinds.pop()
        if kind == "int":
            values = [int(v) for v in values]
            if min(values) < -(1 << 63) or max(values) >= 1 << 63:
                raise ValueError("integer ids must fit in 64 signed bits")
        elif kind == "bytes":
            values = [bytes(v) for v in values]
        if len(set(values)) != len(values):
            raise ValueError("the id set has duplicate ids")
        return cls(kind, values)

    def __len__(self) -> int:
        return len(self.values)

    def blocks(self) -> np.ndarray:
        """``(n, 16)`` uint8 blocks, last byte zero."""
        n = len(self.values)
        out = np.zeros((n, BLOCK), dtype=np.uint8)
        if not n:
            return out
        if self.kind == "int":
            out[:, :8] = np.asarray(self.values, dtype="<i8").view(np.uint8).reshape(n, 8)
            out[:, 8:15] = _INT_TAG
            return out
        person = b"ppdm-psi-" + self.kind.encode()
        enc = (
            (v.encode("utf-8", errors="surrogatepass") for v in self.values)
            if self.kind == "str"
            else iter(self.values)
        )
        digests = b"".join(hashlib.blake2b(v, digest_size=15, person=person).digest() for v in enc)
        out[:, :15] = np.frombuffer(digests, dtype=np.uint8).reshape(n, 15)
        return out

    def item_bytes(self) -> list[bytes]:
        """One byte string per id, injective across kinds (for the EC path)."""
        return [bytes(b[:15]) for b in self.blocks()]

    def sorted(self, values: Sequence[Any]) -> list[Any]:
        """``values`` (ids of this kind) in the common order."""
        return sorted(values)


def dummy_blocks(count: int) -> np.ndarray:
    """``count`` random blocks that match no real id (except with probability
    ``2^-120`` each): padding that hides how many real ids a party still holds."""
    out = np.zeros((count, BLOCK), dtype=np.uint8)
    if count:
        out[:, :15] = np.frombuffer(os.urandom(15 * count), dtype=np.uint8).reshape(count, 15)
    return out
