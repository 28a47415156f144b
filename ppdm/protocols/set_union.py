"""Secure set union with commutative encryption and fake items (Kantarcioglu & Clifton).

Kantarcioglu and Clifton, "Privacy-preserving distributed mining of association rules on
horizontally partitioned data", IEEE TKDE 16(9), 2004 (protocol "secure union of locally
large itemsets"); Aggarwal 2015, §20.5 (secure set union with fake itemsets). Commutative
encryption is :mod:`ppdm.protocols.commutative` (secp256k1).

Every party ``P_0 .. P_{n-1}`` (ring = consortium order) holds a set of byte-string items
and gets their union, recovered byte for byte.

1. **Encrypt** — each party embeds its items as points, adds fake items (random count, or
   padding to a public size), encrypts with its key ``e_i``, shuffles and sends the set to
   its successor; each party encrypts and shuffles every set it receives and passes it
   on, so each set travels ``n - 1`` hops; a party holding a fully encrypted set (all
   ``n`` keys) sends it to the collector ``P_0``.
2. **Merge** — ``P_0`` concatenates the ``n`` fully encrypted sets and removes duplicates
   (equal items are equal ciphertexts, since every item now carries every key).
3. **Decrypt** — the deduplicated list travels the ring from ``P_0``; each party removes
   its layer (multiplication by ``e_i^-1``) and shuffles; the last party decodes the
   items, drops the fakes, and sends the union to everyone.

Security (semi-honest, DDH in secp256k1)
----------------------------------------
- Everyone learns the union and its size.
- The collector ``P_0`` holds every party's fully encrypted set, knowing whose it is, and
  can compare ciphertexts; so it learns each party's set size including fakes (``pad_to``
  makes them all equal) and the number of items every group of parties has in common
  (e.g. ``|S_1 ∩ S_2|``) — never the items. This is the leakage Kantarcioglu & Clifton
  accept for their merge step (deterministic commutative encryption makes any party that
  merges origin-labelled sets learn their overlaps; a re-encryption pass cannot hide
  origins from the party that first receives the labelled sets, so ppdm does not pay for
  one).
- The party that decodes learns the total number of fake items.
- No other party learns anything about which party holds which item: every set it sees
  is encrypted under a key it lacks, and the decryption pass is shuffled by every party.
  Linking a union item to its owner needs the collector plus every party's shuffle.

Cost, ``n`` parties, ``m`` items per party (after fakes), ``u`` distinct items (plus fakes),
``c`` points per item (33 bytes each): rounds ``n - 1`` (encrypt) + 1 + ``n - 1``
(decrypt) + 1; messages ``n(n-1) + (n-1) + (n-1) + (n-1)``; bytes about
``33 c (n^2 m + n u)``; scalar multiplications ``c (n^2 m + n u)`` in total, ``c (n m + u)``
per party (phase 1 runs at all parties at once).

Long items: with ``max_item_bytes`` above :data:`~ppdm.protocols.commutative.CHUNK_BYTES`
(29) every item is split over ``ceil(max_item_bytes / 21)`` points, the same number for
every item of the job (``max_item_bytes`` is a public parameter), so ciphertext sizes
reveal nothing about an item's length. Every point of such an item also carries the
item's 8-byte identifier (a hash of the whole item, domain-separated per job), so two
different items never share a point — not when they share 21 bytes, not in their
padding — and fake items carry fresh random content in every point: the collector's
view of a row (its points' equalities with other rows) is the same for a fake as for a
real item that no other party holds. (Before this binding, trailing chunks were
constants: the collector could tell fakes from real items and recover every party's
true set size, defeating ``pad_to`` and ``fake_ratio``.)
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.commutative import (
    CommutativeKey,
    InvalidPoint,
    check_shape,
    chunks_for,
    decode_items,
    encode_items,
    fake_items,
    shuffle_rows,
)
from ppdm.randomness import SecureRandom

log = logging.getLogger(__name__)

__all__ = ["secure_set_union"]

STEP = "set-union"


def _fake_count(n_items: int, fake_ratio: float, pad_to: int | None) -> int:
    if pad_to is not None:
        if n_items > pad_to:
            raise ValueError(f"set of {n_items} items exceeds pad_to={pad_to}")
        return pad_to - n_items
    bound = math.ceil(fake_ratio * max(n_items, 1))
    return int(SecureRandom().integers(0, bound + 1, 1)[0]) if bound > 0 else 0


def secure_set_union(
    net: Network,
    items: Iterable[bytes],
    *,
    max_item_bytes: int = 29,
    fake_ratio: float = 0.25,
    pad_to: int | None = None,
) -> list[bytes]:
    """The union of every party's items, sorted; all parties call this with their own set.

    Parameters
    ----------
    net
        This party's network; all parties of ``net.parties`` take part.
    items
        This party's items (byte strings; duplicates are ignored).
    max_item_bytes
        Public bound on item length (the same at every party); sets the points per item.
    fake_ratio
        Each party adds a uniformly random number of fake items in
        ``[0, ceil(fake_ratio * |set|)]`` (ignored when ``pad_to`` is given).
    pad_to
        Public size every party pads its set to with fake items (hides set sizes fully).

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> out = run_local(secure_set_union, {"a": [b"x", b"y"], "b": [b"y", b"z"], "c": []})
    >>> out["c"]
    [b'x', b'y', b'z']
    """
    own = sorted(set(bytes(i) for i in items))
    chunks = chunks_for(max_item_bytes)
    parties = net.parties
    n = len(parties)
    if fake_ratio < 0:
        raise ValueError("fake_ratio must be >= 0")
    for item in own:
        if len(item) > max_item_bytes:
            raise ValueError(f"item of {len(item)} bytes exceeds max_item_bytes={max_item_bytes}")
    if n == 1:
        return own
    me, first, last = net.me, parties[0], parties[-1]
    nxt, prev = net.successor(), net.predecessor()
    e = CommutativeKey.generate()
    t0 = time.perf_counter()
    domain = f"{net.job_id}/{STEP}".encode()
    mine = np.concatenate(
        [
            encode_items(own, chunks, domain=domain),
            fake_items(_fake_count(len(own), fake_ratio, pad_to), chunks),
        ]
    )

    log.info(
        "set union: %d items + %d fakes encoded in %.2f s",
        len(own),
        len(mine) - len(own),
        time.perf_counter() - t0,
    )
    # 1. Encrypt: every set visits every party once.
    net.send(nxt, f"{STEP}/encrypt", e.encrypt(shuffle_rows(mine)))
    log.info("set union: own set encrypted at %.2f s", time.perf_counter() - t0)
    full_own = None
    for hop in range(1, n):
        step = f"{STEP}/encrypt"
        batch = e.encrypt_received(net.receive(prev, step), prev, step, chunks=chunks)
        batch = shuffle_rows(batch)
        if hop < n - 1:
            net.send(nxt, step, batch)
        elif me == first:
            full_own = batch
        else:
            net.send(first, f"{STEP}/encrypted", batch)
        log.info(
            "set union: hop %d (%d items) done at %.2f s", hop, len(batch), time.perf_counter() - t0
        )

    # 2. Merge at the collector, 3. decrypt around the ring.
    step = f"{STEP}/decrypt"
    if me == first:
        if full_own is None:  # pragma: no cover - n >= 2 always sets it
            raise RuntimeError("the collector holds no fully encrypted set")
        batch = shuffle_rows(_merge_and_decrypt(net, e, full_own, chunks))
    else:
        batch = e.decrypt_received(net.receive(prev, step), prev, step, chunks=chunks)
        batch = shuffle_rows(batch)
    log.info("set union: decrypted %d items at %.2f s", len(batch), time.perf_counter() - t0)
    if me != last:
        net.send(nxt, step, batch)
        union = net.receive(last, f"{STEP}/result", expect=list)
        if not all(isinstance(x, bytes) for x in union) or union != sorted(set(union)):
            raise ProtocolError(last, f"{STEP}/result", "union is not a sorted list of items")
        return list(union)
    try:
        real, _fakes = decode_items(batch, domain=domain, trusted=True)  # decrypted here
    except ValueError as exc:
        raise ProtocolError(prev, step, f"decryption produced no item: {exc}") from exc
    union = sorted(set(real))
    if len(union) != len(real):
        raise ProtocolError(prev, step, "duplicate items survived deduplication")
    net.broadcast(f"{STEP}/result", union)
    return union


def _merge_and_decrypt(
    net: Network, e: CommutativeKey, full_own: np.ndarray, chunks: int
) -> np.ndarray:
    """At the collector: the other parties' fully encrypted sets (checked), merged with
    its own, without duplicates, with its layer removed. Each distinct point is parsed
    once, by the decryption, which validates it; an invalid one is reported as the item
    of the first party that sent it (its own set, computed here, comes first)."""
    step = f"{STEP}/encrypted"
    owners, sets = [net.me], [full_own]
    for p in net.parties[1:]:
        owners.append(p)
        sets.append(check_shape(net.receive(p, step), p, step, chunks=chunks))
    merged = np.ascontiguousarray(np.concatenate(sets))
    if not len(merged):
        return merged
    flat = merged.reshape(len(merged), -1)
    _, first = np.unique(flat.view(np.dtype((np.void, flat.shape[1]))).ravel(), return_index=True)
    try:
        return e.decrypt(merged[first])
    except InvalidPoint as exc:
        row = int(first[exc.index // chunks])
        ends = np.cumsum([len(x) for x in sets])
        who = int(np.searchsorted(ends, row, side="right"))
        item = row - (int(ends[who - 1]) if who else 0)
        raise ProtocolError(owners[who], step, f"item {item} is not a point on secp256k1") from exc
