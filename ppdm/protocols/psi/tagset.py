"""The sender's tag sets of the KKRT PSI on the wire: as short as the bound allows, and
Elias-Fano coded.

Tag length. The receiver looks each of its ``|X|`` items up in one set of ``|Y|`` tags,
so a false match needs one of ``|X| |Y|`` pairs of ``l``-bit tags to collide:
probability ``<= |X| |Y| 2^-l``. With ``l = sigma + ceil(log2(|X| |Y|))`` bits and the
statistical security parameter ``sigma = 40`` (:data:`~.cuckoo.STAT_SECURITY`) that is
at most ``2^-40`` (:func:`tag_bits`: 80 bits at ``2 x 10^6`` items, 74 at ``2 x 10^5``,
at most 96 for the largest sets).

Encoding. The receiver needs the set, not an order, so the sender sends each set
sorted, and a sorted set of ``n`` uniform ``l``-bit values carries about ``log2 n``
bits fewer per value than the values themselves. Elias-Fano (P. Elias, "Efficient
storage and retrieval by content and address of static files", J. ACM 21(2), 1974;
R. M. Fano, MIT Project MAC memo 61, 1971): with ``h = ceil(log2 n)`` high bits, the
high parts of the sorted tags are written in unary (``n + 2^h`` bits: a one for tag
``i`` at position ``high_i + i``), then the ``l - h`` low bits of every tag, packed.
Cost: ``l - h + (n + 2^h) / n <= l - log2 n + 2`` bits a tag (``2^g <= 1 + g`` for
``g = h - log2 n`` in ``[0, 1)``); 62.05 bits against the 80 of a raw 10-byte tag at
``n = 10^6``. All in numpy, in batches of :data:`BATCH` tags.

In memory a tag is a ``(width,)`` uint8 row, ``width = max(8, ceil(l / 8))``
(:func:`tag_width`; the receiver searches on the first 8 bytes), its first ``l`` bits
(big-endian bit order) the tag and the rest zero (:func:`truncate`). The order is that
of the first 8 bytes read as a big-endian integer (:func:`sort_keys`), which is the
order of the high parts.

The encoding is canonical, and :func:`decode` accepts nothing else: the exact length
for the announced count and tag length, zero padding bits, exactly ``n`` ones in the
unary part, every high part below ``2^h``, the tags sorted. Anything else is a
:class:`~ppdm.errors.ProtocolError` naming the sender and the step, with a fixed reason
(no size in it).

>>> tags = truncate(np.arange(40, dtype=np.uint8).reshape(4, 10) * 7, 74)
>>> data = encode(tags, 74)
>>> len(data), encoded_size(4, 74)
(37, 37)
>>> back = decode(data, 4, 74, party="bob", step="tags")
>>> bool((back == tags[np.argsort(sort_keys(tags))]).all())
True
"""

from __future__ import annotations

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.protocols.psi.cuckoo import STAT_SECURITY

__all__ = [
    "BATCH",
    "bound_holds",
    "decode",
    "encode",
    "encoded_size",
    "high_bits",
    "sort_keys",
    "tag_bits",
    "tag_width",
    "truncate",
]

#: Tags per batch of bit (un)packing (a multiple of 8: every batch's low bits end on a
#: byte boundary); bounds the temporary arrays at ``BATCH * 8 * width`` bytes.
BATCH = 1 << 16

REASON_LENGTH = "the tag set does not have the length of the announced count"
REASON_PADDING = "the tag set's padding bits are not zero"
REASON_COUNT = "the tag set does not hold the announced count of tags"
REASON_HIGH = "a tag's high part is out of range"
REASON_ORDER = "the tags are not sorted"


def tag_bits(n_receiver: int, n_sender: int) -> int:
    """Tag length in bits: ``STAT_SECURITY + ceil(log2(|X| |Y|))`` (40 bits for a
    single pair), so that ``|X| |Y| 2^-l <= 2^-40``.

    >>> tag_bits(10**6, 10**6), tag_bits(10**5, 10**5), tag_bits(1, 1)
    (80, 74, 40)
    """
    if n_receiver < 0 or n_sender < 0:
        raise ValueError("set sizes must be >= 0")
    pairs = max(n_receiver * n_sender, 1)
    return STAT_SECURITY + (pairs - 1).bit_length()  # ceil(log2(pairs)), exact


def tag_width(bits: int) -> int:
    """Bytes of a tag row in memory: ``ceil(bits / 8)``, at least 8."""
    return max(8, -(-bits // 8))


def high_bits(count: int, bits: int) -> int:
    """``h``: the high bits of each tag written in unary, ``ceil(log2 count)``."""
    return min((max(count, 1) - 1).bit_length(), bits)


def encoded_size(count: int, bits: int) -> int:
    """Bytes of the encoding of ``count`` tags of ``bits`` bits."""
    h = high_bits(count, bits)
    return -(-(count + (1 << h)) // 8) + -(-(count * (bits - h)) // 8)


def sort_keys(tags: np.ndarray) -> np.ndarray:
    """The first 8 bytes of every tag row as a big-endian uint64 (the sort order)."""
    return np.ascontiguousarray(tags[:, :8]).view(">u8").ravel().astype(np.uint64)


def truncate(tags: np.ndarray, bits: int) -> np.ndarray:
    """``tags`` (uint8 rows of at least ``tag_width(bits)`` bytes) cut to ``bits`` bits:
    rows of ``tag_width(bits)`` bytes, the bits after the first ``bits`` zero."""
    width = tag_width(bits)
    out = np.array(tags[:, :width], dtype=np.uint8, copy=True)
    whole, rest = divmod(bits, 8)
    if whole < width:
        out[:, whole] &= np.uint8((0xFF << (8 - rest)) & 0xFF)
        out[:, whole + 1 :] = 0
    return out


def encode(tags: np.ndarray, bits: int) -> bytes:
    """The Elias-Fano encoding of the set of ``tags`` (``(n, tag_width(bits))`` uint8
    rows, already :func:`truncate` d; in any order: they are sorted here)."""
    return _pack(tags[np.argsort(sort_keys(tags), kind="stable")], bits)


def _pack(tags: np.ndarray, bits: int) -> bytes:
    """The encoding of ``tags`` in the order given (sorted: :func:`encode`)."""
    n = len(tags)
    h = high_bits(n, bits)
    high = _high(sort_keys(tags), h)
    unary = np.zeros(n + (1 << h), dtype=np.uint8)
    unary[high + np.arange(n)] = 1
    parts = [np.packbits(unary).tobytes()]
    for a in range(0, n, BATCH):
        rows = tags[a : a + BATCH]
        parts.append(np.packbits(np.unpackbits(rows, axis=1)[:, h:bits].ravel()).tobytes())
    return b"".join(parts)


def decode(data: object, count: int, bits: int, *, party: str, step: str) -> np.ndarray:
    """The ``(count, tag_width(bits))`` uint8 tags of an encoding, sorted; a
    :class:`~ppdm.errors.ProtocolError` naming ``party`` and ``step`` for anything but
    the canonical encoding of ``count`` tags of ``bits`` bits."""
    if not isinstance(data, bytes) or len(data) != encoded_size(count, bits):
        raise ProtocolError(party, step, REASON_LENGTH)
    h = high_bits(count, bits)
    low_bits = bits - h
    raw = np.frombuffer(data, dtype=np.uint8)
    unary_bits = count + (1 << h)
    unary_bytes = -(-unary_bits // 8)
    unary = np.unpackbits(raw[:unary_bytes])
    low = raw[unary_bytes:]
    if unary[unary_bits:].any() or (low.size and _tail_bits(low[-1], count * low_bits)):
        raise ProtocolError(party, step, REASON_PADDING)
    ones = np.flatnonzero(unary)
    if len(ones) != count:
        raise ProtocolError(party, step, REASON_COUNT)
    high = ones - np.arange(count)
    if count and int(high[-1]) >= 1 << h:
        raise ProtocolError(party, step, REASON_HIGH)
    width = tag_width(bits)
    out = np.empty((count, width), dtype=np.uint8)
    shifts = np.arange(h - 1, -1, -1, dtype=np.int64)
    for a in range(0, count, BATCH):
        m = min(BATCH, count - a)
        matrix = np.zeros((m, 8 * width), dtype=np.uint8)
        matrix[:, :h] = (high[a : a + m, None] >> shifts) & 1
        start = a * low_bits // 8  # a is a multiple of 8: a byte boundary
        piece = low[start : start + -(-(m * low_bits) // 8)]
        matrix[:, h:bits] = np.unpackbits(piece)[: m * low_bits].reshape(m, low_bits)
        out[a : a + m] = np.packbits(matrix, axis=1)
    keys = sort_keys(out)
    if count > 1 and not bool(np.all(keys[1:] >= keys[:-1])):
        raise ProtocolError(party, step, REASON_ORDER)
    return out


def _high(keys: np.ndarray, h: int) -> np.ndarray:
    if h == 0:
        return np.zeros(len(keys), dtype=np.int64)
    return (keys >> np.uint64(64 - h)).astype(np.int64)


def _tail_bits(last: np.uint8, used: int) -> int:
    """The padding bits of the last byte of a field of ``used`` bits."""
    spare = -used % 8
    return int(last) & ((1 << spare) - 1)


def bound_holds(n_receiver: int, n_sender: int, bits: int) -> bool:
    """Whether ``bits``-bit tags keep a false match at ``<= 2^-STAT_SECURITY``:
    ``|X| |Y| 2^-bits <= 2^-40``, exactly (integers)."""
    return max(n_receiver * n_sender, 1) << STAT_SECURITY <= 1 << bits
