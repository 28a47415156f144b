"""Secure comparison (Yao's millionaires' problem) and a secure argmin, built on OT.

Two parties hold ``l``-bit integers ``x`` (party ``x_party``) and ``y`` (``y_party``) and
learn ``[x >= y]`` -- both of them, one of them, or only as XOR shares -- and nothing
else; everything is batched over arrays of comparisons. Aggarwal 2015, §20.5: secure
comparisons are among the primitive operations distributed mining is built from (the
global-support threshold of horizontally partitioned association mining; the closest
cluster of vertically partitioned k-means).

Construction (Rathee et al., "CrypTFlow2: practical 2-party secure inference", CCS 2020,
section 4.1, the millionaires' protocol; Garay, Schoenmakers, Villegas 2007 for the
tree):

1. Split ``x`` and ``y`` into ``q = ceil(l / m)`` blocks of ``m`` bits (``block_bits``,
   default 4). For every block a 1-out-of-``2^m`` OT gives the parties XOR shares of
   ``lt_j = [x_j < y_j]`` and ``eq_j = [x_j = y_j]``: the ``x_party`` offers, for
   every possible ``y_j``, the two bits masked with its own random shares (entries
   packed to bytes). For ``m = 4`` (batches of 256 leaves or more, in a session not
   checked against a malicious receiver) that OT is one random 1-out-of-16 OT: KK13's
   (Kolesnikov and Kumaresan, CRYPTO 2013, as in CrypTFlow2's leaves) with its columns
   from SoftSpoken's small-field VOLE (Roy, CRYPTO 2022;
   :mod:`ppdm.protocols.ot.softspoken`: 7.5 bytes of ``u``, KK13's own 30); otherwise
   Naor-Pinkas from ``m`` IKNP random OTs (as :mod:`ppdm.protocols.ot.one_of_n`, 16
   bytes each). The path follows the leaf count, so the ``y_party`` sends its count
   ahead of its ``u`` and the ``x_party`` checks it before its first OT
   (``cmp/leaf-count``): batches of different
   lengths end in a :class:`~ppdm.errors.ProtocolError` at once, not in two parties
   waiting on different steps.
2. Combine adjacent blocks (``hi``, ``lo``) up a binary tree:
   ``lt = lt_hi XOR (eq_hi AND lt_lo)``, ``eq = eq_hi AND eq_lo``. The first level
   costs no triple and no round: its two ANDs multiply a function of the ``y_party``'s
   block ``hi`` by one of its block ``lo``, so with the ``x_party``'s leaf shares
   ``a``, ``b`` the cross terms ``b eq_hi`` and ``a lt_lo`` (``a eq_lo``) are two more
   entry bits of the ``hi`` and ``lo`` tables, masked with fresh random bits
   (:func:`_first_level_tables`; 4-bit entries instead of 2). Above it, ANDs of
   XOR-shared bits use Beaver multiplication triples whose cross terms come from random
   OTs, one in each direction (:mod:`ppdm.protocols.bit_triples`; Asharov et al. CCS
   2013, section 5; Demmler et al., ABY, NDSS 2015): with 4-bit blocks and batches of
   1,024 triples or more, one of those 1-out-of-16 OTs (7.5 bytes of ``u`` and a
   15-byte table) carries the cross terms of four triples, otherwise an IKNP OT (16
   bytes) each.
   The two ANDs of a node share the operand ``eq_hi``, so they share one "pair triple"
   ``(a, b, b', ab, ab')``: ``eq_hi`` is masked and opened once, and the pair costs the
   cross terms of one triple (each OT carries two lanes).
3. ``[x >= y] = 1 XOR [x < y]``; the shares are exchanged (or sent to one party).

:func:`secure_argmin` -- for vertically partitioned k-means, where both parties hold
additive shares (mod ``2^64``) of the ``k`` distances of every point -- runs a tournament:
``[D_j < D_i]`` is the most significant bit of ``D_j - D_i`` (mod ``2^(b+1)`` for
``b``-bit distances), computed as ``MSB(a) XOR MSB(b) XOR carry`` with the carry from a
millionaires' comparison of the low bits of the two shares (CrypTFlow2's DReLU); the
winner's distance and index are selected with an OT-based multiplexer (one correlated
OT per direction: ``(b0 XOR b1) * v`` from ``b_i`` and the additive shares of ``v``; from
256 comparisons up on the 1-out-of-16 OTs with choices 0 and 1, 7.5 bytes of ``u``
instead of IKNP's 16, :func:`ppdm.protocols.ot.softspoken.correlated_both`; the index
shares in the narrowest ring that holds ``k - 1``, one byte for ``k <= 256``).

Security (semi-honest, two parties)
-----------------------------------
- A party sees only its side of OTs and the opened ``x XOR a``, ``y XOR b`` values of
  Beaver ANDs (uniformly random), so apart from the output it learns nothing about the
  other's input. :func:`secure_ge_shares` reveals nothing at all (uniform XOR shares).
- :func:`secure_argmin` reveals only the index of the minimum of every row (ties go to
  the lowest index); the comparison bits of the tournament and the intermediate
  minima stay secret-shared. It is correct only if every distance lies in
  ``[0, 2^value_bits)``; otherwise the output is wrong (not insecure).
- The triples' KK13 tables show the receiver nothing beyond its share (the argument
  is in :mod:`ppdm.protocols.bit_triples`).
- Bad messages (wrong dtype, shape, point) and a peer's batch of another length raise
  :class:`~ppdm.errors.ProtocolError`.

Cost per ``l``-bit comparison with ``m``-bit blocks (``q = ceil(l/m)`` leaves,
``q' = ceil(q/2)`` nodes after the first level): ``q`` 1-out-of-``2^m`` OTs (for
``m = 4`` one SoftSpoken 1-out-of-16 OT each, 7.5 bytes of ``u``; otherwise ``m`` IKNP
OTs, ``16 m`` bytes) plus ``q * 2^m / 2`` bytes of packed 4-bit tables, ``q' - 1``
tree nodes with a (pair) triple, two cross terms of ``(7.5 + 15) / 4`` bytes or 16
bytes (IKNP), and 3/8 byte per party to open (2/8 at the root); about
``15.5 q + 11.25 (q' - 1)``: ``~0.16 KB`` for ``l = 32`` and ``~0.32 KB`` for the
56-bit comparisons of vertical k-means on digits with their multiplexers (2 x 16.5
bytes: 7.5 of ``u``, 8 of distance and 1 of index correction; measured: see
``benchmarks/kmeans.py``; 738 bytes with KK13's 30-byte ``u`` and IKNP multiplexers,
823 with IKNP triples and 32-byte ``u``, 1,271 with four IKNP OTs a leaf; ``~1.2 KB``
before the pair triples and packed tables).
Rounds: 2 messages for the leaf OTs + one random-OT message each way for the triples
(KK13's tables travel with the first AND's openings) + ``ceil(log2 q) - 1`` AND levels
+ 1 to reveal. An ``OTSession`` passed in amortizes the 2 x 128 IKNP base OTs and the
1-out-of-16 set-up (240 random IKNP OTs and 7.5 KiB of GGM sums, one round trip more,
per direction: the leaves' the first time a batch has ``_KK13_MIN_LEAVES`` leaves,
smaller batches keep Naor-Pinkas; the other the first time the triples or the
multiplexer use them).
"""

from __future__ import annotations

import collections
import functools

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.bit_triples import STEP_AND as STEP_AND  # re-exported
from ppdm.protocols.bit_triples import STEP_REVEAL as STEP_REVEAL
from ppdm.protocols.bit_triples import BitEngine as _BitEngine
from ppdm.protocols.bit_triples import random_bits as _random_bits
from ppdm.protocols.dot_product_ot import check_two_party_roles
from ppdm.protocols.ot.extension import OTSession
from ppdm.protocols.ot.softspoken import correlated_both as _ot16_correlated_both

__all__ = ["secure_argmin", "secure_ge", "secure_ge_shares"]

STEP_INDEX = "argmin/index"
STEP_LEAF = "cmp/leaves"
#: The ``y_party``'s leaf count, sent before its leaf OTs (:func:`_check_leaf_count`).
STEP_LEAF_COUNT = "cmp/leaf-count"
_LEAF_BATCH = 8 << 20  # bytes of random-OT output per side per leaf batch
_KK13_BITS = 4  # blocks of this many bits use KK13 1-out-of-16 OTs ...
#: ... from this many leaves in a batch up: below it the 11.5 KiB of the set-up (240
#: random IKNP OTs and 7.5 KiB of GGM sums, once per session and direction) would cost
#: more than the 56.5 bytes a leaf saves (7.5 bytes of ``u`` against four IKNP OTs' 64).
_KK13_MIN_LEAVES = 256
_KK13_WINDOW = 8  # leaf batches whose u the receiver sends before it reads their tables


def _use_kk13(session: OTSession, m: int, count: int) -> bool:
    """Whether ``count`` leaves of ``m`` bits use KK13 (both parties know all three). Not
    in a session checked against a malicious receiver (KOS15): KK13 here has no such
    check, so those leaves keep the checked IKNP OTs."""
    return (
        m == _KK13_BITS
        and count >= _KK13_MIN_LEAVES
        and session.kk13
        and not session.malicious_receiver
    )


def _as_unsigned(values: np.ndarray, bits: int, signed: bool) -> np.ndarray:
    if not 1 <= bits <= 64:
        raise ValueError("bits must lie in [1, 64]")
    v = np.asarray(values)
    if v.ndim != 1 or (v.size and not np.issubdtype(v.dtype, np.integer)):
        raise ValueError("values must be a 1-D integer array")
    if not v.size:
        return np.zeros(0, dtype=np.uint64)
    lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    if int(v.min()) < lo or int(v.max()) >= hi:
        kind = "signed" if signed else "unsigned"
        raise ValueError(f"values must be {kind} {bits}-bit integers in [{lo}, {hi})")
    if signed:
        shifted = v.astype(np.int64).view(np.uint64) + np.uint64(1 << (bits - 1))
        return shifted & np.uint64((1 << bits) - 1)
    return v.astype(np.uint64)


def _tree_triples(q: int, n: int) -> tuple[int, int]:
    """The single and the pair triples of the AND tree over ``q`` leaves for ``n``
    comparisons: none for the first level (its ANDs ride in the leaf tables,
    :func:`_compare_core`), then a pair triple per node (``eq_hi AND lt_lo``,
    ``eq_hi AND eq_lo``) and a single triple per node of the last level (``lt`` only)."""
    single = double = 0
    q = q // 2 + q % 2
    while q > 1:
        pairs = q // 2
        q = pairs + q % 2
        if q == 1:
            single += pairs
        else:
            double += pairs
    return single * n, double * n


def _check_leaf_count(engine: _BitEngine, count: int) -> None:
    """The ``x_party`` reads the ``y_party``'s leaf count before its first leaf OT and
    stops at once if it is not its own: the two would otherwise pick different OTs
    (:func:`_use_kk13` decides by the count) and wait on different steps until the job
    times out. The ``y_party`` sends it just before its ``u``, so no hop is added; the
    reason names no count (the peer's log gets a fixed text)."""
    got = engine.net.receive(engine.peer, STEP_LEAF_COUNT, expect=np.ndarray)
    if got.dtype != np.uint64 or got.shape != (1,):
        raise ProtocolError(engine.peer, STEP_LEAF_COUNT, "expected one uint64 leaf count")
    if int(got[0]) != count:
        raise ProtocolError(
            engine.peer, STEP_LEAF_COUNT, "the peer's batch has another number of leaves"
        )


def _leaf_send(engine: _BitEngine, packed: np.ndarray, m: int, width: int = 2) -> None:
    """Sender of the leaves' 1-out-of-``2^m`` OTs of ``width``-bit entries: ``packed`` is
    ``(count, L)`` tables of ``2^m`` entries packed ``8 / width`` to a byte
    (:func:`_pack_entries`; ``width`` is 2 or 4).

    For ``m = 4`` (the default blocks) and at least ``_KK13_MIN_LEAVES`` tables, one
    KK13 OT per table (:func:`_kk13_leaf_send`). Otherwise Naor-Pinkas from ``m`` IKNP
    random OTs (:mod:`ppdm.protocols.ot.one_of_n`, 16 bytes of ``u`` each): entry ``J``
    is masked with the ``J``-th ``width``-bit piece of random-OT output ``J_j`` of every
    OT ``j``; on packed bytes that is, per OT, its output 0 with the lanes of the
    entries whose bit ``j`` is set taken from its output 1 (:func:`_lane_masks`),
    computed on the widest words that divide ``L``."""
    count, length = packed.shape
    _check_leaf_count(engine, count)
    if _use_kk13(engine.session, m, count):
        _kk13_leaf_send(engine, packed, width)
        return
    word = next(
        t for t in (np.uint64, np.uint32, np.uint16, np.uint8) if length % t().itemsize == 0
    )
    lanes = _lane_masks(m, 1 << m, length, width).view(word)
    step = max(1, _LEAF_BATCH // (m * length))
    for o in range(0, count, step):
        b = min(step, count - o)
        r0, r1 = engine.session.sender.random(b * m, length=length)
        w0: np.ndarray = r0.view(word).reshape(b, m, -1)
        w1: np.ndarray = r1.view(word).reshape(b, m, -1)
        np.bitwise_xor(w1, w0, out=w1)
        np.bitwise_and(w1, lanes[None, :, :], out=w1)
        np.bitwise_xor(w1, w0, out=w1)
        mask = np.bitwise_xor.reduce(w1, axis=1).view(np.uint8)
        engine.net.send(engine.peer, STEP_LEAF, packed[o : o + b] ^ mask)


def _leaf_receive(engine: _BitEngine, choices: np.ndarray, m: int, width: int = 2) -> np.ndarray:
    """Receiver of :func:`_leaf_send`: the chosen ``width``-bit entries, ``(count,)``
    uint8."""
    count = len(choices)
    engine.net.send(engine.peer, STEP_LEAF_COUNT, np.array([count], dtype=np.uint64))
    if _use_kk13(engine.session, m, count):
        return _kk13_leaf_receive(engine, choices, width)
    size = 1 << m
    length = (width * size + 7) // 8
    per_byte = 8 // width
    ci = choices.astype(np.intp)
    out = np.empty(count, dtype=np.uint8)
    step = max(1, _LEAF_BATCH // (m * length))
    for o in range(0, count, step):
        b = min(step, count - o)
        cb = ci[o : o + b]
        bits = ((cb[:, None] >> np.arange(m)[None, :]) & 1).astype(np.uint8)
        keys = engine.session.receiver.random(bits.reshape(-1), length=length)
        got = engine.net.receive(engine.peer, STEP_LEAF, expect=np.ndarray)
        if got.dtype != np.uint8 or got.shape != (b, length):
            raise ProtocolError(
                engine.peer, STEP_LEAF, f"expected {b} packed leaf tables of {length} bytes"
            )
        if length in (1, 2, 4, 8):
            # The table fits one little-endian word: entry J is at bit J * width.
            word = np.dtype(f"<u{length}")
            key_w = np.bitwise_xor.reduce(keys.view(word).reshape(b, m), axis=1)
            got_w = np.ascontiguousarray(got).view(word)[:, 0]
            shift_w = (cb * width).astype(word)
            out[o : o + b] = ((got_w ^ key_w) >> shift_w) & ((1 << width) - 1)
            continue
        rows = np.arange(b)
        byte = cb // per_byte
        shift = ((cb % per_byte) * width).astype(np.uint8)
        key = np.bitwise_xor.reduce(keys.reshape(b, m, length)[rows, :, byte], axis=1)
        out[o : o + b] = ((got[rows, byte] ^ key) >> shift) & np.uint8((1 << width) - 1)
    return out


def _kk13_spans(count: int) -> list[tuple[int, int]]:
    """``(offset, leaves)`` of the 1-out-of-16 leaf batches (262,144 leaves each: one
    ``u`` message of at most 1.9 MiB, 7.5 bytes a leaf)."""
    step = _LEAF_BATCH // 32
    return [(o, min(step, count - o)) for o in range(0, count, step)]


def _kk13_leaf_send(engine: _BitEngine, packed: np.ndarray, width: int) -> None:
    """:func:`_leaf_send` for 4-bit blocks: one random 1-out-of-16 OT per table (KK13's
    keys, SoftSpoken's columns: :mod:`ppdm.protocols.ot.softspoken`),
    entry ``J`` masked with the low ``width`` bits of the OT's key ``J``; each batch's
    tables answer its ``u``."""
    sender = engine.session.ot16.sender
    low = np.uint8((1 << width) - 1)
    length = packed.shape[1]
    for o, b in _kk13_spans(len(packed)):
        keys = sender.random(b, length=1)[:, :, 0]
        mask = _pack_entries(keys & low, length, width)
        engine.net.send(engine.peer, STEP_LEAF, packed[o : o + b] ^ mask)


def _kk13_leaf_receive(engine: _BitEngine, choices: np.ndarray, width: int) -> np.ndarray:
    """:func:`_leaf_receive` for 4-bit blocks. The ``u`` of up to ``_KK13_WINDOW``
    batches goes out before their tables are read: the leaves take one round trip up to
    ``_KK13_WINDOW`` batches (2 million leaves), and a peer holds at most that many
    unread ``u`` messages (15 MiB) and this party that many unread tables (16 MiB)."""
    receiver = engine.session.ot16.receiver
    low = (1 << width) - 1
    length = 2 * width  # 16 entries of width bits: 4 or 8 bytes, one little-endian word
    word = np.dtype(f"<u{length}")
    ci = choices.astype(np.intp)
    out = np.empty(len(ci), dtype=np.uint8)
    pending: collections.deque[tuple[int, int, np.ndarray]] = collections.deque()
    spans = _kk13_spans(len(ci))
    for i, (o, b) in enumerate(spans):
        pending.append((o, b, receiver.random(ci[o : o + b], length=1)[:, 0]))
        if len(pending) < _KK13_WINDOW and i + 1 < len(spans):
            continue
        while pending and (len(pending) >= _KK13_WINDOW or i + 1 == len(spans)):
            po, pb, key = pending.popleft()
            got = engine.net.receive(engine.peer, STEP_LEAF, expect=np.ndarray)
            if got.dtype != np.uint8 or got.shape != (pb, length):
                raise ProtocolError(
                    engine.peer, STEP_LEAF, f"expected {pb} packed leaf tables of {length} bytes"
                )
            got_w = np.ascontiguousarray(got).view(word)[:, 0]
            entry = (got_w >> (ci[po : po + pb] * width).astype(word)) & word.type(low)
            out[po : po + pb] = entry.astype(np.uint8) ^ (key & np.uint8(low))
    return out


def _lane_masks(m: int, size: int, length: int, width: int = 2) -> np.ndarray:
    """``(m, L)`` byte masks: the ``width``-bit lanes of the entries ``J < size`` whose
    bit ``j`` is set (entry ``J`` is lane ``J % (8 / width)`` of byte
    ``J // (8 / width)``)."""
    per_byte = 8 // width
    entries = np.arange(per_byte * length)
    lane_bits = np.where(entries < size, ((1 << width) - 1) << (width * (entries % per_byte)), 0)
    masks = np.zeros((m, length), dtype=np.uint8)
    for j in range(m):
        chosen = np.where((entries >> j) & 1, lane_bits, 0).reshape(length, per_byte)
        masks[j] = np.bitwise_or.reduce(chosen, axis=1).astype(np.uint8)
    return masks


def _pack_entries(entries: np.ndarray, length: int, width: int = 2) -> np.ndarray:
    """``(r, size)`` values below ``2^width`` -> ``(r, L)`` bytes, ``8 / width`` entries
    to a byte (entry ``J`` in lane ``J % (8 / width)`` of byte ``J // (8 / width)``,
    lowest bits first)."""
    r, size = entries.shape
    per_byte = 8 // width
    padded = np.zeros((r, per_byte * length), dtype=np.uint8)
    padded[:, :size] = entries
    lanes = padded.reshape(r, length, per_byte)
    out = lanes[:, :, 0].copy()
    for i in range(1, per_byte):
        out |= lanes[:, :, i] << np.uint8(width * i)
    return out


@functools.lru_cache(maxsize=16)
def _table_lut(m: int, greater: bool) -> tuple[np.ndarray, np.ndarray]:
    """Every packed 4-bit leaf table the ``x_party`` can send, for a ``hi`` and for a
    ``lo`` leaf of the first tree level (:func:`_first_level_tables`): row
    ``x | c0 << m | c1 << (m + 1) | c2 << (m + 2) | c3 << (m + 3) | s2 << (m + 4) |
    s3 << (m + 5)`` holds, for every ``v < 2^m``, the entry bits ``lt(v) XOR c0``,
    ``eq(v) XOR c1``, ``(s2 AND f(v)) XOR c2`` and ``(s3 AND eq(v)) XOR c3``, with
    ``lt(v) = [x < v]`` (``[x > v]`` if ``greater``), ``eq(v) = [x = v]`` and
    ``f = eq`` for ``hi``, ``f = lt`` for ``lo``. A table is then one row lookup:
    ``(2^(m + 6), 2^m / 2)`` bytes each."""
    size = 1 << m
    key = np.arange(1 << (m + 6))[:, None]
    x = key & (size - 1)
    c0, c1, c2, c3, s2, s3 = ((key >> (m + i)) & 1 for i in range(6))
    v = np.arange(size)[None, :]
    lt = ((x > v) if greater else (x < v)).astype(np.int64)
    eq = (x == v).astype(np.int64)
    base = (lt ^ c0) | ((eq ^ c1) << 1) | (((s3 & eq) ^ c3) << 3)
    length = (4 * size + 7) // 8
    hi = _pack_entries((base | (((s2 & eq) ^ c2) << 2)).astype(np.uint8), length, 4)
    lo = _pack_entries((base | (((s2 & lt) ^ c2) << 2)).astype(np.uint8), length, 4)
    hi.flags.writeable = lo.flags.writeable = False
    return hi, lo


def _first_level_tables(
    blocks: np.ndarray, r_lt: np.ndarray, r_eq: np.ndarray, m: int, greater: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``x_party``'s side of the first tree level, done inside the leaf tables.

    ``blocks`` are its ``(n, q)`` blocks, ``r_lt``/``r_eq`` its random leaf shares.
    Node ``p`` joins leaves ``hi = 2p`` and ``lo = 2p + 1`` and needs ``F AND G`` for
    ``F = eq_hi`` (a function of the peer's block ``hi``) and ``G`` = ``lt_lo`` or
    ``eq_lo`` (of its block ``lo``), held as ``F = F' XOR a``, ``G = G' XOR b`` (the
    peer holds ``F'`` and ``G'``, this party ``a`` and ``b``). Then
    ``F AND G = F' G' XOR b F XOR a G XOR a b``: the peer multiplies ``F' G'``
    itself, and ``b F`` and ``a G`` are each a function of one of the peer's blocks
    times bits this party knows, so they go into the leaf tables as two more entry
    bits each, masked with fresh random bits ``rho`` (every bit the peer receives is
    uniform). No triple and no round for this level: four entry bits instead of two.
    An odd last leaf gets zeros in the two extra bits.

    Returns the packed 4-bit tables ``(n * q, 2^m / 2)`` (:func:`_table_lut`) and this
    party's shares of ``eq_hi AND lt_lo`` and ``eq_hi AND eq_lo``, ``(n, q // 2)``
    each."""
    n, q = blocks.shape
    pairs = q // 2
    hi, lo = slice(0, 2 * pairs, 2), slice(1, 2 * pairs, 2)
    rho = _random_bits(4 * n * pairs).reshape(4, n, pairs).astype(np.intp)
    lt_r, eq_r = r_lt.astype(np.intp), r_eq.astype(np.intp)
    a, b_lt, b_eq = eq_r[:, hi], lt_r[:, lo], eq_r[:, lo]
    keys = blocks.astype(np.intp) | (lt_r << m) | (eq_r << (m + 1))
    keys[:, hi] |= (rho[0] << (m + 2)) | (rho[1] << (m + 3)) | (b_lt << (m + 4)) | (b_eq << (m + 5))
    keys[:, lo] |= (rho[2] << (m + 2)) | (rho[3] << (m + 3)) | (a << (m + 4)) | (a << (m + 5))
    hi_lut, lo_lut = _table_lut(m, greater)
    packed = np.empty((n, q, hi_lut.shape[1]), dtype=np.uint8)
    packed[:, hi] = hi_lut[keys[:, hi]]
    packed[:, lo] = lo_lut[keys[:, lo]]
    if q % 2:
        packed[:, -1] = hi_lut[keys[:, -1]]
    and_lt = (rho[0] ^ rho[2] ^ (a & b_lt)).astype(np.uint8)
    and_eq = (rho[1] ^ rho[3] ^ (a & b_eq)).astype(np.uint8)
    return packed.reshape(n * q, -1), and_lt, and_eq


def _compare_core(
    engine: _BitEngine,
    values: np.ndarray,
    *,
    x_party: str,
    bits: int,
    block_bits: int,
    greater: bool,
) -> np.ndarray:
    """XOR shares of ``[x < y]`` (or ``[x > y]`` if ``greater``) for ``n`` pairs."""
    net = engine.net
    n = len(values)
    m = min(block_bits, bits)
    q = -(-bits // m)
    size = 1 << m
    pairs = q // 2
    width = 4 if pairs else 2
    shifts = np.array([m * (q - 1 - j) for j in range(q)], dtype=np.uint64)
    blocks = (values[:, None] >> shifts[None, :]) & np.uint64(size - 1)  # (n, q), MSB first
    # The tree's triples use KK13 OTs only where its leaves do (4-bit blocks).
    engine.kk13 = engine.kk13 and m == _KK13_BITS
    if net.me == x_party:
        r_lt = _random_bits(n * q).reshape(n, q)
        r_eq = _random_bits(n * q).reshape(n, q)
        if pairs:
            packed, and_lt, and_eq = _first_level_tables(blocks, r_lt, r_eq, m, greater)
        else:
            v = np.arange(size, dtype=np.uint64)[None, :]
            xb = blocks.reshape(-1, 1)
            lt = ((xb > v) if greater else (xb < v)).astype(np.uint8)
            table = (lt ^ r_lt.reshape(-1, 1)) | (((xb == v) ^ r_eq.reshape(-1, 1)) << 1)
            packed = _pack_entries(table.astype(np.uint8), (2 * size + 7) // 8, 2)
        _leaf_send(engine, packed, m, width)
        lt_s, eq_s = r_lt, r_eq
    else:
        got = _leaf_receive(engine, blocks.reshape(-1), m, width).reshape(n, q)
        lt_s, eq_s = got & 1, (got >> 1) & 1
        if pairs:
            hi_e, lo_e = got[:, 0 : 2 * pairs : 2], got[:, 1 : 2 * pairs : 2]
            f = (hi_e >> 1) & 1
            and_lt = (f & lo_e & 1) ^ ((hi_e >> 2) & 1) ^ ((lo_e >> 2) & 1)
            and_eq = (f & (lo_e >> 1) & 1) ^ ((hi_e >> 3) & 1) ^ ((lo_e >> 3) & 1)
    if pairs:
        # The first level, from the tables: lt = lt_hi XOR (eq_hi AND lt_lo), eq = eq_hi
        # AND eq_lo; an odd last leaf passes up unchanged.
        new_lt = lt_s[:, 0 : 2 * pairs : 2] ^ and_lt
        new_eq = and_eq
        if q % 2:
            new_lt = np.concatenate([new_lt, lt_s[:, -1:]], axis=1)
            new_eq = np.concatenate([new_eq, eq_s[:, -1:]], axis=1)
        lt_s, eq_s = new_lt, new_eq
    engine.make_triples(*_tree_triples(q, n))
    while lt_s.shape[1] > 1:
        w = lt_s.shape[1]
        pairs = w // 2
        last = pairs + w % 2 == 1
        hi_lt, hi_eq = lt_s[:, 0 : 2 * pairs : 2], eq_s[:, 0 : 2 * pairs : 2]
        lo_lt, lo_eq = lt_s[:, 1 : 2 * pairs : 2], eq_s[:, 1 : 2 * pairs : 2]
        if last:
            prod = engine.and_(hi_eq.reshape(-1), lo_lt.reshape(-1)).reshape(n, pairs)
            new_eq = hi_eq  # unused
        else:
            p_lt, p_eq = engine.and_pair(hi_eq.reshape(-1), lo_lt.reshape(-1), lo_eq.reshape(-1))
            prod = p_lt.reshape(n, pairs)
            new_eq = p_eq.reshape(n, pairs)
        new_lt = hi_lt ^ prod
        if w % 2:
            new_lt = np.concatenate([new_lt, lt_s[:, -1:]], axis=1)
            new_eq = np.concatenate([new_eq, eq_s[:, -1:]], axis=1)
        lt_s, eq_s = new_lt, new_eq
    return np.ascontiguousarray(lt_s[:, 0])


def secure_ge_shares(
    net: Network,
    values: np.ndarray,
    *,
    x_party: str,
    y_party: str,
    bits: int = 32,
    signed: bool = False,
    block_bits: int = 4,
    session: OTSession | None = None,
) -> np.ndarray:
    """XOR shares of ``[x_i >= y_i]`` for a batch of comparisons.

    ``x_party`` calls this with its ``x`` values, ``y_party`` with its ``y`` values
    (1-D integer arrays of equal length; ``bits``-bit unsigned, or two's-complement
    signed with ``signed=True``). Returns this party's share: uint8 0/1 whose XOR with
    the peer's share is the comparison bit. Nothing is revealed.
    """
    peer = check_two_party_roles(net, x_party, y_party)
    v = _as_unsigned(values, bits, signed)
    if not len(v):
        return np.zeros(0, dtype=np.uint8)
    if not 1 <= block_bits <= 8:
        raise ValueError("block_bits must lie in [1, 8]")
    engine = _BitEngine(session if session is not None else OTSession(net, peer))
    lt = _compare_core(engine, v, x_party=x_party, bits=bits, block_bits=block_bits, greater=False)
    if net.me == x_party:
        lt ^= 1
    return lt


def secure_ge(
    net: Network,
    values: np.ndarray,
    *,
    x_party: str,
    y_party: str,
    bits: int = 32,
    signed: bool = False,
    reveal_to: str | None = None,
    block_bits: int = 4,
    session: OTSession | None = None,
) -> np.ndarray | None:
    """``[x_i >= y_i]`` for a batch of comparisons, revealed to both parties (default) or
    only to ``reveal_to``; the other party then gets ``None``. See
    :func:`secure_ge_shares` for the inputs.

    "Is ``a + b >= 0``" for private ``a`` and ``b``: let the ``y_party`` pass ``-b`` with
    ``signed=True`` (and ``bits`` large enough for ``-b``).

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> def party(net, mine):
    ...     return secure_ge(net, np.array(mine), x_party="alice", y_party="bob", bits=8)
    >>> out = run_local(party, {"alice": [5, 200, 7, 0], "bob": [9, 13, 7, 255]})
    >>> out["alice"].tolist(), out["bob"].tolist()
    ([False, True, True, False], [False, True, True, False])
    """
    peer = check_two_party_roles(net, x_party, y_party)
    if reveal_to is not None and reveal_to not in (x_party, y_party):
        raise ValueError("reveal_to must be None, the x_party or the y_party")
    session = session if session is not None else OTSession(net, peer)
    share = secure_ge_shares(
        net,
        values,
        x_party=x_party,
        y_party=y_party,
        bits=bits,
        signed=signed,
        block_bits=block_bits,
        session=session,
    )
    opened = _BitEngine(session).open(share, to=reveal_to) if len(share) else share
    return None if opened is None else opened.astype(bool)


def _mux_shares(
    session: OTSession, bit_share: np.ndarray, lanes: tuple[np.ndarray, ...]
) -> list[np.ndarray]:
    """Additive shares of ``b * v`` from XOR shares of ``b`` (n,) and additive shares of
    every lane ``v`` (``(n,)`` unsigned, mod ``2^(8 itemsize)`` of its dtype): one
    correlated OT each way (CrypTFlow2's multiplexer), on the 1-out-of-16 OTs where the
    leaves use them (7.5 bytes of ``u``, IKNP's 16, and the lanes' own bytes; IKNP's
    correlations are 64-bit words)."""
    deltas = []
    for v in lanes:
        b = bit_share.astype(v.dtype)
        deltas.append((v.dtype.type(1) - v.dtype.type(2) * b) * v)  # (1 - 2 b_me) * v_me
    if _use_kk13(session, _KK13_BITS, len(bit_share)):
        x0, got = _ot16_correlated_both(session, tuple(deltas), bit_share)
    else:
        wide = np.stack([d.astype(np.uint64) for d in deltas], axis=1)
        x0w, gotw = session.correlated_both(wide, bit_share)
        x0 = tuple(x0w[:, i].astype(v.dtype) for i, v in enumerate(lanes))
        got = tuple(gotw[:, i].astype(v.dtype) for i, v in enumerate(lanes))
    return [bit_share.astype(v.dtype) * v - x + g for v, x, g in zip(lanes, x0, got, strict=True)]


def secure_argmin(
    net: Network,
    shares: np.ndarray,
    *,
    peer: str,
    value_bits: int = 32,
    reveal_to: str | None = None,
    block_bits: int = 4,
    session: OTSession | None = None,
) -> np.ndarray | None:
    """Row-wise argmin of additively shared values, revealing only the index.

    Both parties call this with their ``(n, k)`` uint64 shares of a matrix ``D``
    (``D = mine + peer's mod 2^64``, every entry in ``[0, 2^value_bits)``,
    ``value_bits <= 62``); e.g. the distances of ``n`` points to ``k`` cluster centres
    in vertically partitioned k-means. Returns the ``(n,)`` int64 index of the minimum
    of each row (the lowest index on ties) to both parties, or only to ``reveal_to``
    (the other gets ``None``).

    Leakage: the argmin indices only (see the module docstring).

    Rounds: per tournament level the leaf OTs, ``ceil(log2 q) - 1`` AND levels (the
    first tree level rides in the leaf tables) and the multiplexer; the AND triples of
    all levels come in one batch with the first level's (their count depends only on
    ``n`` and ``k``).

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> d = np.array([[5, 3, 9], [2, 2, 1]], dtype=np.uint64)
    >>> r = np.array([[77, 1 << 40, 3], [0, 12345, 99]], dtype=np.uint64)
    >>> def party(net, s):
    ...     return secure_argmin(net, s, peer="bob" if net.me == "alice" else "alice")
    >>> run_local(party, {"alice": d - r, "bob": r})["bob"].tolist()
    [1, 2]
    """
    if peer == net.me or peer not in net.parties:
        raise ValueError(f"peer {peer!r} must be another party of the job")
    if reveal_to is not None and reveal_to not in (net.me, peer):
        raise ValueError("reveal_to must be None or one of the two parties")
    s = np.asarray(shares)
    if s.ndim != 2 or s.dtype != np.uint64 or s.shape[1] < 1:
        raise ValueError("shares must be an (n, k) uint64 array with k >= 1")
    if not 1 <= value_bits <= 62:
        raise ValueError("value_bits must lie in [1, 62]")
    session = session if session is not None else OTSession(net, peer)
    n, k = s.shape
    first = session.is_first
    x_party = net.me if first else peer
    low_mask = np.uint64((1 << value_bits) - 1)
    # Candidates: columns of (value share, index share); the first party holds the index.
    vals = [s[:, j].copy() for j in range(k)]
    # Index shares in the narrowest ring that holds k - 1 (1 byte for k <= 256).
    idx_dtype = next(
        t for t in (np.uint8, np.uint16, np.uint32, np.uint64) if k - 1 <= np.iinfo(t).max
    )
    idx = [np.full(n, j if first else 0, dtype=idx_dtype) for j in range(k)]
    engine = _BitEngine(session)
    # The AND triples of every tournament level are made in the first level's batch:
    # one round trip instead of one per level (the counts are public: n and k).
    m = min(block_bits, value_bits)
    q = -(-value_bits // m)
    level_sizes = []
    width = k
    while width > 1:
        level_sizes.append((width // 2) * n)
        width = width // 2 + width % 2
    later = [_tree_triples(q, size) for size in level_sizes[1:]]
    engine.ahead = sum(s for s, _ in later)
    engine.ahead_pairs = sum(p for _, p in later)
    while len(vals) > 1 and n:
        pairs = len(vals) // 2
        v0 = np.concatenate([vals[2 * p] for p in range(pairs)])
        v1 = np.concatenate([vals[2 * p + 1] for p in range(pairs)])
        i0 = np.concatenate([idx[2 * p] for p in range(pairs)])
        i1 = np.concatenate([idx[2 * p + 1] for p in range(pairs)])
        w = v1 - v0  # shares of D1 - D0, |D1 - D0| < 2^value_bits
        low = w & low_mask
        cmp_in = low if first else low_mask - low
        carry = _compare_core(
            engine, cmp_in, x_party=x_party, bits=value_bits, block_bits=block_bits, greater=True
        )
        msb = ((w >> np.uint64(value_bits)) & np.uint64(1)).astype(np.uint8) ^ carry
        sel_v, sel_i = _mux_shares(session, msb, (w, i1 - i0))
        nv = v0 + sel_v
        ni = i0 + sel_i
        new_vals = [nv[p * n : (p + 1) * n] for p in range(pairs)]
        new_idx = [ni[p * n : (p + 1) * n] for p in range(pairs)]
        if len(vals) % 2:
            new_vals.append(vals[-1])
            new_idx.append(idx[-1])
        vals, idx = new_vals, new_idx
    mine = idx[0]
    if reveal_to is None or reveal_to == peer:
        net.send(peer, STEP_INDEX, mine)
    if reveal_to is None or reveal_to == net.me:
        got = net.receive(peer, STEP_INDEX, expect=np.ndarray)
        if got.dtype != idx_dtype or got.shape != (n,):
            raise ProtocolError(
                peer, STEP_INDEX, f"expected {n} {np.dtype(idx_dtype)} index shares"
            )
        out = (mine + got).astype(np.int64)
        if n and (int(out.min()) < 0 or int(out.max()) >= k):
            raise ProtocolError(peer, STEP_INDEX, "index shares do not open to a column")
        return out
    return None
