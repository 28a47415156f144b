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
  choice bits and counts); :func:`pack_uint` packs values to ``width`` bits each;
- :func:`segments` groups consecutive receiver columns of a call whose corrections go
  in one message, and :func:`segment_corrections` / :func:`segment_sums` do a segment's
  arithmetic at the sender and the receiver on the pads of all its columns at once
  (:func:`stacked_pads`): the same bytes as column by column, in fewer numpy calls and
  messages.
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
    "segment_corrections",
    "segment_sums",
    "segments",
    "stacked_pads",
    "unit_sums",
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
#: Pad bytes (output blocks x positions x 16) of the columns of one :class:`Segment`.
SEGMENT_BYTES = 1 << 20


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
    y = stacked_pads([keys], [index], [session], [blocks], dtype, [block])
    if blocks == 1:
        return y[0]
    return np.ascontiguousarray(y.transpose(1, 0, 2)).reshape(len(keys), -1)


def stacked_pads(
    keys: Sequence[np.ndarray],
    index: Sequence[np.ndarray],
    session: Sequence[int],
    blocks: Sequence[int],
    dtype: np.dtype,
    block: Sequence[int],
) -> np.ndarray:
    """:func:`pads` of several columns (``keys[j]``, ``index[j]``, ... of column ``j``,
    the same number of rows each) in one AES call, block-major: ``(sum(blocks), rows,
    16 / itemsize)``, unit ``u`` holding output block ``block[j] + t`` of column ``j`` (its
    ``t``-th unit), so column ``j``'s :func:`pads` are its units side by side."""
    m = len(keys)
    rows = len(keys[0]) if m else 0
    for j in range(m):
        if (
            len(keys[j]) != rows
            or len(index[j]) != rows
            or not 0 <= session[j] < (1 << SESSION_BITS)
            or not 0 <= block[j] <= _MAX_BLOCKS - blocks[j]
        ):
            raise ValueError("pad tweak out of range")
    count = np.asarray(blocks, dtype=np.int64).reshape(-1)
    first = np.cumsum(count) - count
    step = (np.arange(int(count.sum())) - np.repeat(first, count)).astype(np.uint64)
    fields = np.repeat(np.asarray(session, dtype=np.uint64), count) << np.uint64(BLOCK_BITS)
    fields |= np.repeat(np.asarray(block, dtype=np.uint64), count) + step
    # the tweaks (OT index | session | output block), XOR pi(x); column by column (its
    # rows stay where they are), one AES call for all
    tweak = np.empty((len(fields), rows, 2), dtype="<u8")
    tweak[:, :, 1] = fields[:, None]
    lanes = [np.ascontiguousarray(k).view("<u8").reshape(rows, 2) for k in keys]
    for j in range(m):
        part = tweak[first[j] : first[j] + count[j]]
        part[:, :, 0] = index[j]
        part ^= lanes[j]
    y = _permute(tweak.view(np.uint8).reshape(-1, BLOCK)).view("<u8").reshape(tweak.shape)
    for j in range(m):
        y[first[j] : first[j] + count[j]] ^= lanes[j]
    return y.view(dtype).reshape(len(fields), rows, BLOCK // np.dtype(dtype).itemsize)


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


def unit_sums(a: np.ndarray) -> np.ndarray:
    """Sums over the positions (axis 1) of ``(units, rows, lanes)`` pads, wrapping in
    their dtype (uint64 out): 64 rows side by side per add, as :func:`column_sums`."""
    units, rows, lanes = a.shape
    cut = rows - rows % 64
    part = a[:, :cut].reshape(units, -1, 64 * lanes).sum(axis=1, dtype=a.dtype)
    total = part.reshape(units, 64, lanes).sum(axis=1, dtype=a.dtype)
    return (total + a[:, cut:].sum(axis=1, dtype=a.dtype)).astype(np.uint64)


class Segment(NamedTuple):
    """Consecutive plan steps (receiver columns of one row chunk each) whose corrections
    go in one message, their pads :func:`stacked_pads` units: step ``j`` takes
    ``blocks[j]`` units, its ``t``-th product lane ``t % lanes`` of its unit ``t //
    lanes``. Public: both parties derive it from the plan."""

    members: range  # the plan steps
    blocks: list[int]  # output blocks (units) of every member
    products: np.ndarray  # the call's product indices, in wire order
    unit: np.ndarray  # every product's unit
    lane: np.ndarray  # every product's lane in its unit
    widths: np.ndarray  # every product's ring bits
    row_product: np.ndarray  # the product (its position here) of every wire row
    row_unit: np.ndarray  # the unit of every wire row
    row_bit: np.ndarray  # the bit of every wire row
    starts: np.ndarray  # every product's first wire row
    columns: list[int]  # every member's receiver column
    member_rows: list[int]  # every member's first wire row, and the number of rows


def segments(
    plan: list, widths: np.ndarray, n: int, item: int, limit: int = SEGMENT_BYTES
) -> list[Segment | int]:
    """The plan's steps in :class:`Segment` s of at most ``limit`` pad bytes (or one step
    if larger); a step whose corrections take several row chunks stays alone, as its
    plan index (sent chunk by chunk)."""
    out: list[Segment | int] = []
    blocks = [-(-len(run) * item // BLOCK) for _, run, _, _ in plan]
    i = 0
    while i < len(plan):
        if len(plan[i][3]) > 1:
            out.append(i)
            i += 1
            continue
        j, total = i + 1, blocks[i]
        while j < len(plan) and len(plan[j][3]) == 1 and (total + blocks[j]) * n * BLOCK <= limit:
            total += blocks[j]
            j += 1
        out.append(_segment(plan, widths, range(i, j), blocks, item))
        i = j
    return out


def _segment(
    plan: list, widths: np.ndarray, members: range, blocks: list[int], item: int
) -> Segment:
    per = BLOCK // item  # lanes per unit
    runs = [np.asarray(plan[j][1], dtype=np.int64) for j in members]
    first = np.cumsum([0] + [blocks[j] for j in members])[:-1]
    products = np.concatenate(runs)
    t = np.concatenate([np.arange(len(r)) for r in runs])
    unit = np.repeat(first, [len(r) for r in runs]) + t // per
    lane = t % per
    wid = np.asarray(widths, dtype=np.int64)[products]
    starts = np.cumsum(wid) - wid
    bit = np.arange(int(wid.sum()), dtype=np.int64) - np.repeat(starts, wid)
    rows = [0, *np.cumsum([int(widths[r].sum()) for r in runs]).tolist()]
    return Segment(
        members,
        [blocks[j] for j in members],
        products,
        unit,
        lane,
        wid,
        np.repeat(np.arange(len(products)), wid),
        np.repeat(unit, wid),
        bit,
        starts,
        [plan[j][0] for j in members],
        rows,
    )


def segment_pad_sums(h: np.ndarray, seg: Segment) -> np.ndarray:
    """Every product's sum of its pads over the positions (uint64, modulo ``2^(8 *
    itemsize)``), from the members' :func:`stacked_pads` ``h``: the sender's share of a
    segment (negated) from ``h0``, the receiver's start from its ``h`` (computed apart
    from the corrections, so the sender sends first and the receiver sums while it
    waits)."""
    return unit_sums(h)[seg.unit, seg.lane]


def segment_corrections(
    a: np.ndarray, b: np.ndarray, values: np.ndarray, seg: Segment, n: int, *, bits: bool
) -> np.ndarray:
    """The sender's side of a segment: the corrections ``d = h0 - h1 + x`` of every
    product and position as they go on the wire (every product's bit planes, in wire
    order: :func:`planes`' format; :func:`segment_pad_sums` of ``h0`` gives its shares).
    ``a``, ``b``: the members' :func:`stacked_pads` of
    ``q`` and ``q XOR s``; ``values`` the call's ``(m, n)`` values, 0/1 if ``bits`` (then
    added to the bit planes of ``h0 - h1`` with a ripple carry, product by product,
    instead of position by position)."""
    units, _, lanes = a.shape
    padded = -(-n // 64) * 64
    used = -(-n // 8)
    d = np.empty((units, padded, lanes), dtype=a.dtype)
    d[:, n:] = 0  # the rows that fill the planes' last bytes
    np.subtract(a, b, out=d[:, :n])
    if not bits:
        x = np.zeros((units * lanes, n), dtype=a.dtype)
        x[seg.unit * lanes + seg.lane] = values[seg.products]
        x = np.ascontiguousarray(x.reshape(units, lanes, n).transpose(0, 2, 1))
        np.add(d[:, :n], x, out=d[:, :n], casting="unsafe")
    planes = transpose_bits(d.view(np.uint8).reshape(units * padded, BLOCK))
    planes = planes.reshape(lanes, 8 * a.dtype.itemsize, units, padded // 8)
    if not bits:
        wire = planes[seg.lane[seg.row_product], seg.row_bit, seg.row_unit, :used]
        return wire.reshape(-1)
    width = seg.widths
    g = planes[seg.lane, : int(width.max()), seg.unit, :used]  # (products, bits, bytes)
    carry = np.packbits(values[seg.products], axis=1, bitorder="little")
    for bit in range(g.shape[1]):  # + x, plane by plane with its carry
        plane = g[:, bit]
        nxt = plane & carry
        plane ^= carry
        carry = nxt
    wire = g if bool((width == g.shape[1]).all()) else g[np.arange(g.shape[1]) < width[:, None]]
    return wire.reshape(-1)


def segment_sums(
    pad_sums: np.ndarray, wire: np.ndarray, choices: np.ndarray, seg: Segment, n: int
) -> np.ndarray:
    """The receiver's side of a segment: every product's sum over the positions of its
    pad plus, where it chose 1, the correction (uint64, modulo ``2^(8 * itemsize)``).
    ``pad_sums``: :func:`segment_pad_sums` of the members' pads; ``wire`` the sender's message (the caller
    checks that it holds ``len(seg.row_bit)`` planes); ``choices`` every receiver column's
    choice bits packed (:func:`~ppdm.protocols.ot.bits.pack`), zero-padded to whole
    64-bit words."""
    used = -(-n // 8)
    rows = wire.reshape(len(seg.row_bit), used)
    picked = np.zeros((len(rows), choices.shape[1]), dtype=np.uint8)  # whole words
    for j, c in enumerate(seg.columns):  # every wire row AND its column's choice bits
        a, b = seg.member_rows[j], seg.member_rows[j + 1]
        np.bitwise_and(rows[a:b], choices[c, :used], out=picked[a:b, :used])
    ones = np.bitwise_count(picked.view(np.uint64)).sum(axis=1, dtype=np.uint64)
    ones <<= seg.row_bit.astype(np.uint64)
    own = np.add.reduceat(ones, seg.starts) if len(seg.starts) else ones[:0]
    return pad_sums + own
