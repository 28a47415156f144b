"""Bit-matrix helpers for OT extension: packing bits and the 128 x m transpose.

Bit order: everywhere in the OT package a bit vector is packed little-endian within bytes
(``np.packbits(..., bitorder="little")``): bit ``i`` lives in byte ``i // 8`` at bit
position ``i % 8``. Then a 64-bit little-endian word holds bits ``64w .. 64w + 63`` in
its bit positions 0..63, which is what makes the word-level transpose below work.

The transpose is compiled when the optional extension ``ppdm.protocols.ot._bits`` is
built (``_bits.c``: SSE2 unpacks and movemask on 16 x 16-byte blocks, the GIL released;
2.5-4x the numpy version's speed here, docs/protocols/ot.md); otherwise the numpy delta swaps below run, with the same
output (``COMPILED`` says which one runs; the tests compare both).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

__all__ = ["COMPILED", "pack", "transpose_bits", "unpack"]

try:
    _bits: Any = importlib.import_module("ppdm.protocols.ot._bits")
except ImportError:
    _bits = None

#: Whether the compiled transpose is built (``setup.py``; optional).
COMPILED: bool = _bits is not None

_MASKS = {
    32: np.uint64(0x00000000FFFFFFFF),
    16: np.uint64(0x0000FFFF0000FFFF),
    8: np.uint64(0x00FF00FF00FF00FF),
    4: np.uint64(0x0F0F0F0F0F0F0F0F),
    2: np.uint64(0x3333333333333333),
    1: np.uint64(0x5555555555555555),
}


def pack(bits: np.ndarray) -> np.ndarray:
    """Pack 0/1 values (last axis) into bytes, little-endian bit order."""
    return np.packbits(np.asarray(bits, dtype=np.uint8), axis=-1, bitorder="little")


def unpack(data: np.ndarray, count: int) -> np.ndarray:
    """Inverse of :func:`pack`: the first ``count`` bits (last axis) as uint8 0/1."""
    return np.unpackbits(data, axis=-1, count=count, bitorder="little")


def transpose_bits(matrix: np.ndarray, *, compiled: bool | None = None) -> np.ndarray:
    """Transpose a packed bit matrix.

    ``matrix`` is ``(rows, m / 8)`` uint8 (row ``j`` holds ``m`` packed bits), with
    ``rows`` and ``m`` multiples of 64; the result is ``(m, rows / 8)`` uint8 whose row
    ``i`` holds bit ``i`` of every input row. The compiled transpose runs when it is built
    (``compiled=None``; ``True`` demands it, ``False`` forces numpy's). In numpy:
    vectorized 64 x 64 block transposes by
    delta swaps on 64-bit words (six rounds of shifts and masks over the whole array,
    about 50 ms per million 128-bit rows here), then one word-level reordering.

    >>> m = (np.arange(128 * 16) * 2654435761 % 251).astype(np.uint8).reshape(128, 16)
    >>> ref = pack(unpack(m, 128).T)
    >>> bool((transpose_bits(m) == ref).all())
    True
    """
    if matrix.dtype != np.uint8 or matrix.ndim != 2:
        raise ValueError("expected a 2-D uint8 array")
    rows, nbytes = matrix.shape
    if rows % 64 or nbytes % 8:
        raise ValueError("rows and columns must be multiples of 64 bits")
    if compiled is None:
        compiled = _bits is not None
    elif compiled and _bits is None:
        raise RuntimeError("the compiled transpose (ppdm.protocols.ot._bits) is not built")
    if compiled:
        out = np.empty((nbytes * 8, rows // 8), dtype=np.uint8)
        _bits.transpose(np.ascontiguousarray(matrix), rows, nbytes * 8, out)
        return out
    words = nbytes // 8
    blocks = rows // 64
    x = np.ascontiguousarray(matrix).view("<u8").copy()  # (rows, words)
    for j in (32, 16, 8, 4, 2, 1):
        # Pair row k with row k + j inside every 64-row block (k & j == 0) and swap the
        # bits at positions b (b & j != 0) of row k with positions b - j of row k + j.
        xr = x.reshape(blocks, 64 // (2 * j), 2, j, words)
        lo = xr[:, :, 0]
        hi = xr[:, :, 1]
        t = lo >> np.uint64(j)
        t ^= hi
        t &= _MASKS[j]
        hi ^= t
        t <<= np.uint64(j)
        lo ^= t
    # Now x[block, k, w] holds, for column 64w + k, the 64 bits of rows 64*block .. +63.
    out = np.ascontiguousarray(x.reshape(blocks, 64, words).transpose(2, 1, 0))
    return out.view(np.uint8).reshape(words * 64, blocks * 8)
