"""Random OTs kept per receiver column, the pads expanded from them, and the wire
formats of corrections: the parts of
:func:`~ppdm.protocols.dot_product_ot.column_product_shares` below its protocol.

- :class:`ColumnOTs` keeps the random OTs of receiver columns between calls (one
  OT, many correlations, across calls as within one), with the public book-keeping of
  which columns are kept and which hash-output blocks their pads used;
- :func:`attach` gives a batch's new columns their IKNP rows
  (:class:`~ppdm.protocols.ot.extension.RawRows`, unhashed), and :func:`pads` hashes a
  row straight into pads with the fixed-key AES TCCR hash of
  :mod:`ppdm.protocols.ot.crhash` (the same outputs as its ``tccr_expand`` of the row,
  from any output block on): one hash layer per pad, as IKNP derives its own outputs;
- :func:`planes` sends corrections as bit planes (the receiver ANDs them with its
  choice bits and counts); :func:`pack_uint` packs values to ``width`` bits each.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppdm.protocols.ot.bits import transpose_bits, unpack
from ppdm.protocols.ot.crhash import BLOCK, BLOCK_BITS, FIXED_KEY, SESSION_BITS
from ppdm.protocols.ot.extension import span_indices
from ppdm.protocols.ot.kk13 import TWEAK_BLOCK

if TYPE_CHECKING:
    from ppdm.protocols.ot.extension import OTSession, RawRows

__all__ = [
    "KEEP_OTS",
    "ColumnOTs",
    "Step",
    "attach",
    "batch_members",
    "check_kept",
    "column_sums",
    "gather_uint",
    "pack_uint",
    "packed_size",
    "pads",
    "plane_matrix",
    "planes",
    "planes_size",
    "schedule",
    "unpack_uint",
    "unplanes",
]

#: OTs whose rows a :class:`ColumnOTs` keeps for later calls, per direction: 32 bytes
#: each at the sender, 16 at the receiver (64 MiB and 32 MiB at most).
KEEP_OTS = 1 << 21
#: Hash-output blocks per OT that the pads of a column may use over all its calls (the
#: block field of the TCCR tweak, :func:`~ppdm.protocols.ot.crhash.make_tweaks`): the
#: range of IKNP's own outputs, below KK13's tweak blocks.
_MAX_BLOCKS = TWEAK_BLOCK


@dataclass
class Column:
    """The random OTs of one receiver column in a call: where its pads start, and once
    the OTs are made their IKNP rows through the fixed permutation (``(pi(q_i), pi(q_i
    XOR s))`` at the sender, ``(pi(t_i),)`` at the receiver: a pad needs only these),
    where they sit among the session's OTs and the session's tag."""

    n: int
    block: int  # the first hash-output block its pads have not used yet
    epoch: int  # the last epoch of its ColumnOTs it was used in
    keys: tuple[np.ndarray, ...] = ()
    spans: tuple[tuple[int, int, int], ...] = ()  # (first position, count, OT index)
    session: int = 0

    def indices(self, lo: int, count: int) -> np.ndarray:
        """The OT indices of positions ``lo .. lo + count - 1`` (the pads' tweaks)."""
        return span_indices(self.spans, lo, lo + count)


class ColumnOTs:
    """The random OTs of receiver columns, kept between calls of
    :func:`~ppdm.protocols.dot_product_ot.column_product_shares` over one
    :class:`~ppdm.protocols.ot.extension.OTSession` (one OT, many correlations, across
    calls as within one).

    A column is named by a public label, the same at both parties (vertical mining: the
    itemset whose cover it is). Its OTs are kept as IKNP's unhashed rows
    (:class:`~ppdm.protocols.ot.extension.RawRows`), and every pad is one TCCR hash of a
    row, ``H((i, session, b), q_i)`` or ``H((i, session, b), q_i XOR s)`` (the receiver's
    ``H((i, session, b), t_i)`` is the one of its choice): how IKNP derives its own
    random-OT outputs, so this is sound iff no tweak ``(i, session, b)`` hashes two OTs'
    rows, or one OT's pair twice. It does not: ``i`` is the row's own OT index (rows
    taken raw are never hashed by any other method of the session, which consumes fresh
    indices for every call), the session field is the IKNP session's tag, and the block
    ``b`` runs over blocks of the column never used before: each product run of a call
    takes the next ``blocks`` blocks (:meth:`_use`), whether in one call or across
    calls, and a column that would pass :data:`_MAX_BLOCKS` (KK13's block range) is
    dropped and gets new OTs. So the products of all calls on a column are exactly what
    one call with all of them would compute: the receiver still holds one row per OT and
    sees every correction masked by a fresh pad of the output it did not choose; the
    sender sees no new ``u``. A label must name the same choice bits in every call (a reused label with other bits gives
    wrong products, never a leak). Columns not used between two calls of
    :meth:`advance` are dropped (vertical mining advances per level: a part used at level
    ``k + 2`` was used at level ``k + 1`` or is new), and at most ``max_ots`` OTs are
    kept per direction.

    With ``session=None`` it keeps only the public book-keeping (which labels are kept,
    the blocks they used): :func:`~ppdm.protocols.dot_product_ot.column_product_bytes`
    can then follow the calls of parties that do not include this one.
    """

    def __init__(self, session: OTSession | None, *, max_ots: int = KEEP_OTS) -> None:
        if isinstance(max_ots, bool) or not isinstance(max_ots, int) or max_ots < 0:
            raise ValueError("max_ots must be a non-negative integer")
        self.session = session
        self.max_ots = max_ots
        self._epoch = 0
        self._sides: dict[bool, dict[Hashable, Column]] = {True: {}, False: {}}

    def advance(self) -> None:
        """Drop the columns not used since the last call (both parties call it at the
        same points)."""
        for side in self._sides.values():
            for label in [k for k, c in side.items() if c.epoch < self._epoch]:
                del side[label]
        self._epoch += 1

    def kept(self, labels: Iterable[Hashable], *, sending: bool) -> int:
        """How many of ``labels`` have kept OTs (``sending``: this party as the sender)."""
        side = self._sides[sending]
        return sum(1 for x in labels if x in side)

    def _use(self, label: Hashable, n: int, blocks: int, sending: bool) -> Step:
        """This call's use of column ``label`` with ``blocks`` output blocks of pads per
        OT: the kept column if it has room, else a new one (kept if the budget allows)."""
        side = self._sides[sending]
        col = side.get(label)
        if col is not None and (col.n != n or col.block + blocks > _MAX_BLOCKS):
            del side[label]
            col = None
        new = col is None
        if col is None:
            col = Column(n, 0, self._epoch)
            if sum(c.n for c in side.values()) + n <= self.max_ots:
                side[label] = col
        step = Step(-1, 0, col, col.block, side.get(label) is col, new)
        col.block += blocks
        col.epoch = self._epoch
        return step


class Step(NamedTuple):
    """Where a plan step's random OTs come from: slot ``slot`` of new-OT batch ``batch``,
    or a kept column (``batch`` -1); its pads start at output block ``block``."""

    batch: int
    slot: int
    column: Column
    block: int
    keep: bool  # the column stays kept after the call
    new: bool


def schedule(
    plan: list,
    n: int,
    item: int,
    labels: Sequence[Hashable] | None,
    kept: ColumnOTs | None,
    sending: bool,
    per_group: int,
) -> tuple[list[Step], list[int]]:
    """Every plan step's :class:`Step` (a plan step: a receiver column index, the
    indices of its products, their runs and row chunks) and the sizes of the batches of
    new OTs, at most ``per_group`` columns each: the same at both parties (and in the
    byte count), from public values only."""
    if kept is not None and labels is None:
        raise ValueError("kept columns need labels")
    steps: list[Step] = []
    sizes: list[int] = []
    for col, run, _, _ in plan:
        blocks = -(-len(run) * item // BLOCK)
        if kept is None:
            step = Step(-1, 0, Column(n, blocks, 0), 0, False, True)
        else:
            step = kept._use(labels[col], n, blocks, sending)  # type: ignore[index]
        if step.new:
            if not sizes or sizes[-1] == per_group:
                sizes.append(0)
            step = step._replace(batch=len(sizes) - 1, slot=sizes[-1])
            sizes[-1] += 1
        steps.append(step)
    return steps, sizes


def _pack_small(v: np.ndarray, width: int) -> np.ndarray:
    """``width <= 8`` bits per value, little-endian: eight values per ``width`` bytes.
    The eight bytes of a group, read as one 64-bit word, are squeezed together in three
    rounds of masked shifts (bytes -> 16-bit lanes -> 32-bit lanes -> the word)."""
    count = v.size
    groups = -(-count // 8)
    b = np.zeros(groups * 8, dtype=np.uint8)
    b[:count] = v.reshape(-1)  # every value is below 2^width <= 256
    word = b.view("<u8")
    for lane, mask_low in ((8, 0x00FF00FF00FF00FF), (16, 0x0000FFFF0000FFFF), (32, 0xFFFFFFFF)):
        low = np.uint64(mask_low)
        used = width * lane // 8  # bits held at the bottom of each lane
        word = (word & low) | ((word & ~low) >> np.uint64(lane - used))
    return word.view(np.uint8).reshape(groups, 8)[:, :width].reshape(-1)[: -(-count * width // 8)]


def _unpack_small(data: np.ndarray, width: int, count: int) -> np.ndarray:
    groups = -(-count // 8)
    buf = np.zeros((groups, 8), dtype=np.uint8)
    flat = np.zeros(groups * width, dtype=np.uint8)
    flat[: data.size] = data
    buf[:, :width] = flat.reshape(groups, width)
    word = buf.view("<u8").reshape(groups)
    mask = np.uint64((1 << width) - 1)
    out = np.empty((groups, 8), dtype=np.uint64)
    for j in range(8):
        out[:, j] = (word >> np.uint64(j * width)) & mask
    return out.reshape(-1)[:count]


def _gather_small(data: np.ndarray, width: int, at: np.ndarray) -> np.ndarray:
    bits = at * width
    first = bits >> 3
    padded = np.concatenate([data, np.zeros(2, dtype=np.uint8)])
    word = padded[first].astype(np.uint16) | (padded[first + 1].astype(np.uint16) << np.uint16(8))
    shifted = word >> (bits & 7).astype(np.uint16)
    return (shifted & np.uint16((1 << width) - 1)).astype(np.uint64)


def packed_size(count: int, width: int) -> int:
    """Bytes of :func:`pack_uint` for ``count`` values of ``width`` bits."""
    if width <= 8:
        return -(-count * width // 8)
    low = 1 if width <= 16 else 2
    return low * count + packed_size(count, width - 8 * low)


def pack_uint(values: np.ndarray, width: int) -> np.ndarray:
    """Pack non-negative integers below ``2^width`` (``1 <= width <= 32``) into about
    ``count * width / 8`` bytes: up to 8 bits, ``width`` bits each (little-endian, eight
    values per ``width`` bytes); above, the low byte (or two) of every value, then the
    high bits packed the same way (:func:`packed_size` bytes in all).

    >>> v = np.array([0, 5, 1023, 7, 512, 3, 1, 999, 2], dtype=np.uint16)
    >>> data = pack_uint(v, 10)
    >>> data.size, bool((unpack_uint(data, 10, 9) == v).all())
    (12, True)
    """
    if not 1 <= width <= 32:
        raise ValueError("width must be in [1, 32]")
    v = np.asarray(values).reshape(-1)
    if v.dtype.kind != "u":
        v = v.astype(np.uint64)
    if width <= 8:
        return _pack_small(v, width)
    if width <= 16:
        low = (v & 0xFF).astype(np.uint8)
        return np.concatenate([low, _pack_small(v >> 8, width - 8)])
    v = v.astype(np.uint64)
    low16 = (v & np.uint64(0xFFFF)).astype("<u2").view(np.uint8)
    return np.concatenate([low16, pack_uint(v >> np.uint64(16), width - 16)])


def unpack_uint(data: np.ndarray, width: int, count: int) -> np.ndarray:
    """Inverse of :func:`pack_uint`: ``count`` uint64 values (``data`` must have exactly
    :func:`packed_size` bytes)."""
    if not 1 <= width <= 32:
        raise ValueError("width must be in [1, 32]")
    if data.size != packed_size(count, width):
        raise ValueError("packed data has the wrong length")
    if width <= 8:
        return _unpack_small(data, width, count)
    if width <= 16:
        high = _unpack_small(data[count:], width - 8, count)
        return data[:count].astype(np.uint64) | (high << np.uint64(8))
    low16 = np.ascontiguousarray(data[: 2 * count]).view("<u2").astype(np.uint64)
    return low16 | (unpack_uint(data[2 * count :], width - 16, count) << np.uint64(16))


def gather_uint(data: np.ndarray, width: int, count: int, at: np.ndarray) -> np.ndarray:
    """Values number ``at`` of :func:`pack_uint`'s ``count`` packed values, without
    unpacking the rest (``data`` must have exactly :func:`packed_size` bytes).

    >>> v = np.arange(100, dtype=np.uint64) * 37 % 1000
    >>> gather_uint(pack_uint(v, 10), 10, 100, np.array([0, 7, 99])).tolist()
    [0, 259, 663]
    """
    if not 1 <= width <= 32:
        raise ValueError("width must be in [1, 32]")
    if data.size != packed_size(count, width):
        raise ValueError("packed data has the wrong length")
    at = np.asarray(at, dtype=np.int64)
    if at.size and (int(at.min()) < 0 or int(at.max()) >= count):
        raise ValueError("value index out of range")
    if width <= 8:
        return _gather_small(data, width, at)
    if width <= 16:
        high = _gather_small(data[count:], width - 8, at)
        return data[at].astype(np.uint64) | (high << np.uint64(8))
    low16 = np.ascontiguousarray(data[: 2 * count]).view("<u2")[at].astype(np.uint64)
    return low16 | (gather_uint(data[2 * count :], width - 16, count, at) << np.uint64(16))


def plane_matrix(rows: int, lanes: int, dtype: np.dtype) -> np.ndarray:
    """A ``(rows rounded up to 64, lanes)`` matrix for :func:`planes`, the rows past
    ``rows`` zero (they fill the last byte of every plane: never uninitialized memory)."""
    out = np.empty((-(-rows // 64) * 64, lanes), dtype=np.dtype(dtype).newbyteorder("<"))
    out[rows:] = 0
    return out


def planes(d: np.ndarray, rows: int, runs: list) -> np.ndarray:
    """The corrections as they go on the wire: ``d`` (a :func:`plane_matrix`) holds them
    position by position (row ``r`` the values of position ``r``, its first columns the
    products of ``runs``); for every run of products of one width, ``width`` bit planes
    per product (bit ``b`` of product ``j`` at every row, rows packed eight to a byte,
    little-endian), ``(k, width, ceil(rows / 8))`` bytes that the receiver ANDs with its
    packed choice bits and counts (:func:`planes_size`). One bit-matrix transpose of the
    rows' values (:func:`~ppdm.protocols.ot.bits.transpose_bits`)."""
    lanes = d.shape[1]
    bits = 8 * d.dtype.itemsize
    planes = transpose_bits(d.view(np.uint8)).reshape(lanes, bits, -1)
    used = -(-rows // 8)
    return np.concatenate([planes[s:e, :width, :used].reshape(-1) for s, e, width in runs])


def planes_size(rows: int, k: int, width: int) -> int:
    """Bytes of :func:`_planes` for ``rows`` positions of ``k`` products."""
    return k * width * (-(-rows // 8))


def unplanes(planes: np.ndarray, rows: int, dtype: np.dtype) -> np.ndarray:
    """The ``(k, rows)`` values of ``(k, width, bytes)`` bit planes."""
    bits = unpack(planes, rows).astype(dtype)
    out = bits[:, 0].copy()
    for b in range(1, bits.shape[1]):
        out |= bits[:, b] << dtype.type(b)
    return out


def batch_members(steps: list[Step], batches: int) -> list[list[Column]]:
    """The new columns of every batch of OTs, in slot order."""
    out: list[list[Column]] = [[] for _ in range(batches)]
    for step in steps:
        if step.batch >= 0:
            out[step.batch].append(step.column)
    return out


def check_kept(
    kept: ColumnOTs | None, session: OTSession, labels: Sequence[Hashable] | None
) -> None:
    if kept is None:
        return
    if kept.session is not session:
        raise ValueError("kept columns must belong to the session of the call")
    if labels is None:
        raise ValueError("kept columns need labels")


def pads(
    keys: np.ndarray,
    index: np.ndarray,
    session: int,
    blocks: int,
    dtype: np.dtype,
    block: int = 0,
) -> np.ndarray:
    """``(rows, blocks * 16 / itemsize)`` pads of ``dtype`` (product ``j`` of a run takes
    column ``j``) from IKNP rows given through the fixed permutation, ``keys = pi(x)``
    (:func:`attach` keeps them so): the TCCR expansion of
    :func:`~ppdm.protocols.ot.crhash.tccr_expand`, ``H((i, s, b), x) = pi(pi(x) ^ t) ^
    pi(x)`` with the tweak ``t`` of OT index ``i`` (``index``, one per row), session field
    ``s`` and output block ``b``, for ``blocks`` output blocks from block ``block`` on (the
    blocks before it went to earlier products of a kept column)."""
    rows = len(keys)
    if (
        not 0 <= session < (1 << SESSION_BITS)
        or not 0 <= block <= _MAX_BLOCKS - blocks
        or len(index) != rows
    ):
        raise ValueError("pad tweak out of range")
    lanes = np.ascontiguousarray(keys).view("<u8").reshape(rows, 2)
    tweak = np.empty((rows, 2), dtype="<u8")  # the tweak of block b, XOR pi(x)
    tweak[:, 0] = index
    tweak[:, 1] = np.uint64((session << BLOCK_BITS) | block)
    tweak ^= lanes
    if blocks == 1:
        y = _permute(tweak.view(np.uint8))
        y.view("<u8")[...] ^= lanes
        return y.view(dtype).reshape(rows, -1)
    # Block by block: every array is one 16-byte row per key (numpy is slow on narrow
    # strided axes); the blocks are then put side by side as 16-byte cells.
    out = np.empty((rows, blocks), dtype=np.complex128)
    for b in range(blocks):
        if b:
            tweak[:, 1] ^= np.uint64((block + b) ^ (block + b - 1))
        y = _permute(tweak.view(np.uint8))
        y.view("<u8")[...] ^= lanes
        out[:, b] = y.view(np.complex128)[:, 0]
    return out.view(dtype).reshape(rows, -1)


def attach(members: list[Column], raw: RawRows, n: int) -> None:
    """Give the new columns of a batch (slot ``j``: rows ``j n .. (j + 1) n - 1`` of
    ``raw``) their rows through the fixed permutation (:func:`pads` starts from them)
    and their OT indices. The sender's second row, ``q_i XOR s``, is formed here once."""
    first = _permute(raw.rows)
    keys = (first,) if raw.delta is None else (first, _permute(raw.rows ^ raw.delta))
    for slot, col in enumerate(members):
        lo = slot * n
        col.keys = tuple(k[lo : lo + n] for k in keys)
        col.spans = raw.take(lo, lo + n).spans
        col.session = raw.session


def column_sums(h: np.ndarray, k: int) -> np.ndarray:
    """Sums of the first ``k`` columns of ``h`` modulo ``2^(8 * itemsize)`` (uint64; the
    shares are reduced modulo ``2^widths <= 2^(8 * itemsize)`` anyway): the rows added in
    wrapping arithmetic of ``h``'s dtype, 64 rows side by side (numpy sums wide rows far
    faster than a narrow array down its columns), then the 64 partial sums."""
    rows, width = h.shape
    cut = rows - rows % 64
    part = h[:cut].reshape(-1, 64 * width).sum(axis=0, dtype=h.dtype).reshape(64, width)
    total = part.sum(axis=0, dtype=h.dtype) + h[cut:].sum(axis=0, dtype=h.dtype)
    return total[:k].astype(np.uint64)


_THREAD = threading.local()


def _permute(x: np.ndarray) -> np.ndarray:
    """``pi(x)``, as :func:`~ppdm.protocols.ot.crhash.aes_permute` computes it (AES-128-ECB
    of every 16-byte row under the fixed key), with one encryptor per thread, made on the
    thread's first call: ECB keeps no state between whole blocks, and a thread's calls
    never interleave (parties that share a process run in their own threads)."""
    enc: Any = getattr(_THREAD, "encryptor", None)
    if enc is None:
        enc = Cipher(algorithms.AES(FIXED_KEY), modes.ECB()).encryptor()
        _THREAD.encryptor = enc
    out = np.empty(x.size + BLOCK, dtype=np.uint8)
    done = enc.update_into(x.reshape(-1), out)
    return out[:done].reshape(x.shape)
