"""Two-party PSI from the KKRT16 batched OPRF over IKNP (semi-honest).

Kolesnikov, Kumaresan, Rosulek and Trieu, "Efficient batched oblivious PRF with
applications to private set intersection", ACM CCS 2016, sections 3-5 (BaRK-OPRF and
its PSI with cuckoo hashing; the hashing of Pinkas, Schneider, Segev and Zohner, "Phasing:
private set intersection using permutation-based hashing", USENIX Security 2015, and
Pinkas, Schneider and Zohner, "Scalable private set intersection based on OT
extension", ACM TOPS 2018). The receiver ``R`` learns which of its items the sender ``S``
holds; ``S`` learns nothing but ``|X|``.

Protocol (``w`` code bits, :func:`code_bits` of ``|Y|``: 448 up to about ``3 x 10^7``
sender items, else 512; ``B`` = :func:`~.cuckoo.cuckoo_bins` of ``|X|``):

1. *Hello.* ``R`` sends a 16-byte nonce and ``|X|``; ``S`` answers with its nonce and
   ``|Y|``. SHAKE-256 of both nonces gives the public keys of the cuckoo hash functions,
   of the pseudorandom code ``C`` and the session tag of the hash tweaks (neither party
   chooses them alone).
2. *Base OTs.* ``w`` random OTs with ``R`` as sender (pairs ``k_j^0, k_j^1``) and ``S``
   as chooser with secret random bits ``s``, from the IKNP extension of
   :mod:`ppdm.protocols.ot.extension` (128 Chou-Orlandi OTs underneath).
3. *OPRF.* ``R`` cuckoo-hashes ``X`` into ``B`` bins with three functions (item ``x`` in
   bin ``b = h_k(x)``; empty bins get a random row) and forms ``c_b = C(x, k)``:
   the first ``w`` bits of four AES-128 blocks under four public keys of ``x`` with
   ``k`` in its last byte. It
   sends ``u^j = G(k_j^0) XOR G(k_j^1) XOR c^j`` column by column (``G`` = AES-CTR), in
   chunks of 2^17 bins; ``S`` gets ``q_b = t_b XOR (c_b AND s)`` with ``t^j =
   G(k_j^0)``. The OPRF is ``F(b, y) = H(b, q_b XOR (C(y) AND s))``; ``R`` knows it
   at its own item: ``H(b, t_b)``.
4. *Tags.* For ``k = 0, 1, 2``, ``S`` sends ``{F(h_k(y), (y, k)) : y in Y}`` truncated to
   ``l = sigma + ceil(log2(|X| |Y|))`` bits with ``sigma = 40``
   (:func:`~.tagset.tag_bits`), as a set: sorted and Elias-Fano coded
   (:mod:`ppdm.protocols.psi.tagset`, about ``l - log2 |Y| + 2`` bits a tag). ``R``
   looks each of its items up in the set of the function it was placed with (sorted
   search on the first 8 bytes, then the rest).

``H(b, z)`` chains the tweakable circular correlation-robust fixed-key AES hash of
:func:`ppdm.protocols.ot.crhash.tccr_hash` over the 128-bit blocks ``z_j`` of ``z`` (the
last one zero-padded when ``w = 448``): ``h_0 = H_GKWY(tweak(b, session, 0), z_0)``,
``h_j = H_GKWY(tweak(b, session, j), z_j XOR h_{j-1})``, ``H(b, z) = h_last`` (the bin
index, session and block in the tweak: no tweak repeats across bins, sessions or
blocks). Chained, not XOR-ed block by block: with ``XOR_j H_GKWY(tweak_j, z_j)`` the
blocks' unknown bits of ``s`` could be guessed block by block and met in the middle --
two codewords at the minimum distance of 128 leave about 64 unknown bits in each half,
2^64 work instead of 2^128 (the same argument as the KK13 leaves',
:mod:`ppdm.protocols.ot.kk13`).

Security (semi-honest)
----------------------
- ``S`` sees the nonces, ``|X|`` (through ``B``) and ``u``, which is masked column by
  column by ``G(k_j^{1-s_j})``, a PRG output it does not know: nothing about ``X``.
- ``R`` sees ``3 |Y|`` tags. For ``y`` not in ``X``, the codewords of ``y`` and of the
  item in its bin differ in at least 128 of the ``w`` positions, for all ``3 |Y|``
  pairs at once except with probability ``<= 2^-40`` (:func:`code_bits`: binomial tail
  of a pseudorandom code, union bound), and each differing position is masked by an
  unknown bit of ``s``: the tag is pseudorandom to ``R`` (KKRT16, theorem 3, with ``H``
  modelled as a random oracle). ``R`` learns ``X cap Y`` and ``|Y|``. The encoding of a
  tag set is a function of the set alone, so it shows ``R`` nothing the sorted tags did
  not.
- A false match needs two ``l``-bit tags to collide: probability ``<= |X| |Y| 2^-l
  <= 2^-40``. Cuckoo failure (``<= 2^-40``) stops the protocol with an error; it never
  drops an item.
- Every message is checked (type, dtype, shape, sizes, sortedness; a tag set's exact
  length, padding, count and range, :func:`~.tagset.decode`):
  :class:`~ppdm.errors.ProtocolError` naming the peer and step (fixed reasons: no size
  in them). With ``peer_size`` (the size the peer announced earlier, in the n-party
  opening of :mod:`ppdm.protocols.psi.opening`) each hello must announce that size, so
  the sender sends exactly ``3 peer_size`` tags and the receiver a ``u`` for
  ``cuckoo_bins(peer_size)`` bins. The receiver's ``u`` is pseudorandom to the sender,
  so a receiver lying about ``X`` can still fill its empty bins with codewords of more
  items: at most ``cuckoo_bins(|X|)`` candidates (``1.5 |X|`` for large sets, at least
  64 bins).

Cost: 5 messages (hello, reply, three tag sets) + the IKNP setup (nonces, 128 base
OTs, one ``u`` of ``w`` x 16 bytes) + one ``u`` message per 2^17 bins. Bytes: ``w B / 8``
(``R -> S``: ``56 B``, about ``86 |X|``, up to ``3 x 10^7`` items; 64 B before, about 98
``|X|``) plus about ``3 |Y| (l - log2 |Y| + 2) / 8`` (``S -> R``: 23.3 B per item at
``2 x 10^6``, 30 B as raw 10-byte tags before). Three round trips before the ``u``
stream, which is one-way.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from typing import Any

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.ot.bits import pack, transpose_bits
from ppdm.protocols.ot.crhash import SESSION_BITS, AESCTRStream, aes_permute, tccr_hash
from ppdm.protocols.ot.extension import OTSession
from ppdm.protocols.psi import tagset
from ppdm.protocols.psi.cuckoo import HASHES, STAT_SECURITY, cuckoo_bins, cuckoo_insert
from ppdm.protocols.psi.tagset import tag_bits, tag_width

__all__ = [
    "CHUNK_BINS",
    "CODE_BITS",
    "CODE_WIDTHS",
    "MAX_ITEMS",
    "MIN_DISTANCE",
    "code_bits",
    "kkrt_receive",
    "kkrt_send",
    "oprf_hash",
    "tag_bits",
    "tag_bytes",
]

#: Widest pseudorandom code (bits): four AES blocks, the keys of :class:`_Keys`.
CODE_BITS = 512
CODE_BYTES = CODE_BITS // 8
#: The code widths :func:`code_bits` chooses from (multiples of 64: the bit transposes).
CODE_WIDTHS = (448, 512)
#: Codewords of two different inputs must differ in at least this many positions (each
#: differing position hides one bit of the sender's ``s``: the computational security).
MIN_DISTANCE = 128
#: Bins per ``u`` message (``512 * CHUNK_BINS / 8`` bytes = 8 MiB).
CHUNK_BINS = 1 << 17
#: Largest set either party may announce.
MAX_ITEMS = 1 << 28
NONCE_BYTES = 16
#: Block numbers of the hash tweaks (24-bit field; IKNP's own outputs use small ones).
_TWEAK_BLOCK = 0x800000
#: Items per batch when the sender computes tags (bounds its temporary arrays).
_ITEM_BATCH = 1 << 18

STEP_HELLO = "hello"
STEP_HELLO_REPLY = "hello-reply"
STEP_U = "u"
STEP_TAGS = "tags"


def _prefix(receiver: str, sender: str) -> str:
    return f"psi/kkrt/{receiver}>{sender}"


def tag_bytes(n_receiver: int, n_sender: int) -> int:
    """Bytes of a tag row in memory: the :func:`~.tagset.tag_bits` of the two sizes
    (``40 + ceil(log2(|X| |Y|))``), rounded up to whole bytes, at least 8."""
    return tag_width(tag_bits(n_receiver, n_sender))


@functools.cache
def code_bits(n_sender: int) -> int:
    """Width ``w`` of the pseudorandom code for a sender of ``n_sender`` items: the
    narrowest of :data:`CODE_WIDTHS` with ``3 |Y| P[Bin(w, 1/2) < 128] <= 2^-40``.

    The receiver sees ``3 |Y|`` tags, each the OPRF of bin ``b`` at a sender's input
    ``(y, k)``; it is pseudorandom if ``C(y, k)`` and the codeword in ``b`` (another
    input's, or a random row) differ in at least :data:`MIN_DISTANCE` positions. For a
    pseudorandom code the distance of two different inputs is ``Bin(w, 1/2)``, so the
    union bound over those ``3 |Y|`` pairs fails with probability at most ``3 |Y|
    P[Bin(w, 1/2) < 128]``, computed here exactly in integers (the argument by which
    KKRT16 sizes its pseudorandom code, here over the pairs the receiver sees). ``P[Bin(448, 1/2) < 128] = 2^-66.5``: 448 bits up to
    about 3 x 10^7 sender items, 512 (``2^-102.3``) above.

    >>> code_bits(10**6), code_bits(10**8)
    (448, 512)
    """
    pairs = HASHES * max(n_sender, 1)
    for w in CODE_WIDTHS:
        close = sum(math.comb(w, i) for i in range(MIN_DISTANCE))
        if (close * pairs) << STAT_SECURITY <= 1 << w:
            return w
    raise ValueError("no code width keeps the distance bound for this many items")


class _Keys:
    """Public keys derived from both nonces: cuckoo hashing, code, session tag."""

    def __init__(self, receiver_nonce: bytes, sender_nonce: bytes) -> None:
        d = hashlib.shake_256(b"ppdm/psi/kkrt" + receiver_nonce + sender_nonce).digest(96)
        self.hash_key = d[:16]
        self.code_keys = [d[16 * (j + 1) : 16 * (j + 2)] for j in range(CODE_BYTES // 16)]
        self.session = int.from_bytes(d[80:88], "big") >> (64 - SESSION_BITS)


def _positions(blocks: np.ndarray, keys: _Keys, bins: int) -> np.ndarray:
    """``(n, 3)`` bins ``h_k(x)``: three 32-bit words of ``AES_hk(x)`` mapped to
    ``[0, bins)`` by multiply-shift."""
    x = blocks.copy()
    x[:, 15] = 0xFF
    words = aes_permute(x, key=keys.hash_key).view("<u4")[:, :HASHES].astype(np.uint64)
    return ((words * np.uint64(bins)) >> np.uint64(32)).astype(np.int64)


def _codes(
    blocks: np.ndarray, which: np.ndarray | int, keys: _Keys, nbytes: int = CODE_BYTES
) -> np.ndarray:
    """``C(x, k)``: ``(n, nbytes)`` uint8, the first ``nbytes`` bytes of four AES blocks
    of ``x`` with ``k`` in its last byte."""
    x = blocks.copy()
    x[:, 15] = which
    out = np.empty((len(x), nbytes), dtype=np.uint8)
    for j, key in enumerate(keys.code_keys[: -(-nbytes // 16)]):
        out[:, 16 * j : 16 * (j + 1)] = aes_permute(x, key=key)[:, : nbytes - 16 * j]
    return out


def _tweaks(bins: np.ndarray, session: int, block: int) -> np.ndarray:
    words = np.empty((len(bins), 2), dtype="<u8")
    words[:, 0] = bins
    words[:, 1] = np.uint64((session << 24) | block)
    return words.view(np.uint8).reshape(len(bins), 16)


def oprf_hash(rows: np.ndarray, bins: np.ndarray, session: int, nbytes: int) -> np.ndarray:
    """``H(b, z)`` of every row ``z`` (the code width: 56 or 64 bytes; a last partial
    block is padded with zeros) in bin ``b``, first ``nbytes`` bytes: the TCCR hash
    chained over the 128-bit blocks (module docstring)."""
    rows = np.ascontiguousarray(rows)
    out = np.zeros((len(rows), 16), dtype=np.uint8)
    for j in range(-(-rows.shape[1] // 16)):
        part = rows[:, 16 * j : 16 * (j + 1)]
        if part.shape[1] < 16:
            part = np.pad(part, ((0, 0), (0, 16 - part.shape[1])))
        out = tccr_hash(part ^ out, _tweaks(bins, session, _TWEAK_BLOCK + j))
    return out[:, :nbytes]


def _spans(bins: int) -> list[tuple[int, int]]:
    return [(o, min(CHUNK_BINS, bins - o)) for o in range(0, bins, CHUNK_BINS)]


def _hello(value: Any, party: str, step: str, *, announced: int | None) -> tuple[bytes, int]:
    if not isinstance(value, dict) or set(value) != {"nonce", "size"}:
        raise ProtocolError(party, step, "expected a nonce and a set size")
    nonce, size = value["nonce"], value["size"]
    if not isinstance(nonce, bytes) or len(nonce) != NONCE_BYTES:
        raise ProtocolError(party, step, f"the nonce must be {NONCE_BYTES} bytes")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_ITEMS:
        raise ProtocolError(party, step, f"the set size must be an int in [0, {MAX_ITEMS}]")
    if announced is not None and size != announced:
        raise ProtocolError(party, step, "the set size differs from the announced one")
    return nonce, size


def _keys64(tags: np.ndarray) -> np.ndarray:
    return tagset.sort_keys(tags)


def kkrt_receive(
    net: Network, sender: str, blocks: np.ndarray, *, peer_size: int | None = None
) -> np.ndarray:
    """Run the receiver's side with ``sender`` on the ``(n, 16)`` item blocks (distinct);
    returns the ``(n,)`` bool mask of the items the sender holds.

    ``peer_size``: the set size ``sender`` announced before (the n-party opening); its
    hello must announce the same, and it can send no more tags than that."""
    prefix = _prefix(net.me, sender)
    scoped = net.scoped(prefix)
    n = len(blocks)
    mine = os.urandom(NONCE_BYTES)
    scoped.send(sender, STEP_HELLO, {"nonce": mine, "size": n})
    theirs, n_sender = _hello(
        scoped.receive(sender, STEP_HELLO_REPLY, expect=dict),
        sender,
        f"{prefix}/hello-reply",
        announced=peer_size,
    )
    keys = _Keys(mine, theirs)
    bins = cuckoo_bins(n)
    bits = tag_bits(n, n_sender)
    length = tag_width(bits)
    width = code_bits(n_sender)
    k0, k1 = OTSession(scoped, sender).sender.random(width)
    table, which = cuckoo_insert(_positions(blocks, keys, bins), bins)
    g0 = [AESCTRStream(bytes(k)) for k in k0]
    g1 = [AESCTRStream(bytes(k)) for k in k1]
    filler = AESCTRStream(os.urandom(16))
    values = np.empty((n, length), dtype=np.uint8)
    for o, m in _spans(bins):
        part = table[o : o + m]
        occupied = np.flatnonzero(part >= 0)
        items = part[occupied]
        rows = filler.read(m * width // 8).reshape(m, width // 8)
        rows[occupied] = _codes(blocks[items], which[items], keys, width // 8)
        columns = transpose_bits(rows)  # (w, m / 8)
        t = np.empty_like(columns)
        u = np.empty_like(columns)
        for j in range(width):
            t[j] = g0[j].read(m // 8)
            u[j] = g1[j].read(m // 8)
        u ^= t
        u ^= columns
        scoped.send(sender, STEP_U, u)
        t_rows = transpose_bits(t)[occupied]
        values[items] = oprf_hash(t_rows, occupied + o, keys.session, length)
    values = tagset.truncate(values, bits)
    found = np.zeros(n, dtype=bool)
    step = f"{prefix}/{STEP_TAGS}"
    for k in range(HASHES):
        payload = scoped.receive(sender, STEP_TAGS, expect=bytes)
        # Fixed reasons in decode: the sizes would show the announced counts.
        tags = tagset.decode(payload, n_sender, bits, party=sender, step=step)
        sorted_keys = _keys64(tags)
        idx = np.flatnonzero(which == k)
        if not idx.size or not n_sender:
            continue
        lookup = _keys64(values[idx])
        by_key = np.argsort(lookup)  # sorted needles: the binary searches stay in cache
        idx, lookup = idx[by_key], lookup[by_key]
        lo = np.searchsorted(sorted_keys, lookup, side="left")
        hi = np.searchsorted(sorted_keys, lookup, side="right")
        one = np.flatnonzero(hi == lo + 1)  # the common case: compare the whole tag
        same = (tags[lo[one]] == values[idx[one]]).all(axis=1)
        found[idx[one[same]]] = True
        for i in np.flatnonzero(hi > lo + 1).tolist():  # repeated 64-bit prefixes: rare
            if any((tags[j] == values[idx[i]]).all() for j in range(lo[i], hi[i])):
                found[idx[i]] = True
    return found


def kkrt_send(
    net: Network, receiver: str, blocks: np.ndarray, *, peer_size: int | None = None
) -> None:
    """Run the sender's side with ``receiver`` on the ``(n, 16)`` item blocks.

    ``peer_size``: the set size ``receiver`` announced before; its hello must announce
    the same (the cuckoo table, and so the ``u`` matrices it may send, are sized from
    it)."""
    prefix = _prefix(receiver, net.me)
    scoped = net.scoped(prefix)
    n = len(blocks)
    theirs, n_receiver = _hello(
        scoped.receive(receiver, STEP_HELLO, expect=dict),
        receiver,
        f"{prefix}/hello",
        announced=peer_size,
    )
    mine = os.urandom(NONCE_BYTES)
    scoped.send(receiver, STEP_HELLO_REPLY, {"nonce": mine, "size": n})
    keys = _Keys(theirs, mine)
    bins = cuckoo_bins(n_receiver)
    bits = tag_bits(n_receiver, n)
    length = tag_width(bits)
    width = code_bits(n)
    s_bits = np.unpackbits(np.frombuffer(os.urandom(CODE_BYTES), dtype=np.uint8))
    s_bits = s_bits[:width]  # the OPRF key: one secret bit per code bit
    seeds = OTSession(scoped, receiver).receiver.random(s_bits)
    s_row = pack(s_bits)
    chosen = s_bits.astype(bool)
    streams = [AESCTRStream(bytes(k)) for k in seeds]
    # Items grouped, per hash function, by the u chunk (range of bins) their bin lies in
    # (a linear-time radix sort of 16-bit chunk numbers): each chunk of q becomes the
    # tags of its items at once, so memory stays at one chunk of q plus the tags, and
    # the work overlaps the receiver's next chunk.
    positions = _positions(blocks, keys, bins)
    chunk_of = (positions // CHUNK_BINS).astype(np.uint16)
    order = [np.argsort(chunk_of[:, k], kind="stable") for k in range(HASHES)]
    placed = [positions[order[k], k] for k in range(HASHES)]
    chunk_sorted = [chunk_of[order[k], k] for k in range(HASHES)]
    tags = np.empty((HASHES, n, length), dtype=np.uint8)
    step = f"{prefix}/{STEP_U}"
    for o, m in _spans(bins):
        u = scoped.receive(receiver, STEP_U, expect=np.ndarray)
        if u.dtype != np.uint8 or u.shape != (width, m // 8):
            raise ProtocolError(receiver, step, "u is not a uint8 matrix of the announced shape")
        g = np.empty_like(u)
        for j in range(width):
            g[j] = streams[j].read(m // 8)
        g[chosen] ^= u[chosen]
        q = transpose_bits(g)  # (m, 64): q_b = t_b xor (c_b and s)
        for k in range(HASHES):
            c = o // CHUNK_BINS
            lo, hi = np.searchsorted(chunk_sorted[k], [c, c + 1])
            for a in range(int(lo), int(hi), _ITEM_BATCH):
                idx = order[k][a : min(a + _ITEM_BATCH, int(hi))]
                b = placed[k][a : a + len(idx)]
                rows = q[b - o]
                rows ^= _codes(blocks[idx], k, keys, width // 8) & s_row
                tags[k, idx] = oprf_hash(rows, b, keys.session, length)
    for k in range(HASHES):
        scoped.send(receiver, STEP_TAGS, tagset.encode(tagset.truncate(tags[k], bits), bits))
