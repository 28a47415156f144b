"""Secure intersection cardinality for n >= 2 parties (Vaidya & Clifton 2005).

Vaidya and Clifton, "Secure set intersection cardinality with application to
association rule mining", Journal of Computer Security 13(4), 2005; Aggarwal 2015, §20.5
(vertically partitioned data). Commutative encryption is
:mod:`ppdm.protocols.commutative` (secp256k1); items are hashed to points with a
per-job domain, so nothing is ever decrypted.

Each party ``P_0 .. P_{n-1}`` holds a set (e.g. the ids of the transactions in which all
its items of a candidate itemset are present). Each party hashes its items to points,
optionally adds fake items, encrypts with its key, shuffles and sends the set to its
successor; every set travels the ring and is encrypted and shuffled by every party. The
fully encrypted sets (equal items are now equal ciphertexts) go to the evaluator ``P_0``,
which counts the ciphertexts present in all ``n`` sets and announces the count.

:func:`secure_intersection_cardinalities` runs many intersections (one per candidate)
in a single protocol run: each item is tagged with its set's index before hashing.

Security (semi-honest, DDH in secp256k1)
----------------------------------------
- Everyone learns ``|S_0 ∩ ... ∩ S_{n-1}|`` (per set index in the batched form).
- The evaluator ``P_0`` sees every party's fully encrypted set separately, so it also
  learns the size of every party's (padded) set and the cardinality of the intersection
  of every subset of the parties' sets — the leakage Vaidya & Clifton accept; fake items
  (``fake_ratio``) blur the set sizes but not the subset intersections.
- Other parties see only sets encrypted under keys they do not all hold: nothing.

Cost, ``n`` parties, ``m`` items per party: ``n - 1`` encryption rounds + 2; messages
``n(n-1) + (n-1) + (n-1)``; ``33 n^2 m`` bytes; ``n^2 m`` scalar multiplications.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.commutative import (
    CommutativeKey,
    check_shape,
    hash_items,
    shuffle_rows,
    unique_rows,
    validate_points,
)
from ppdm.randomness import SecureRandom

__all__ = ["secure_intersection_cardinalities", "secure_intersection_cardinality"]

STEP = "intersection"


def _as_bytes(item: int | bytes) -> bytes:
    if isinstance(item, bytes | bytearray):
        return b"b" + bytes(item)
    if isinstance(item, int | np.integer):
        v = int(item)
        return b"i" + v.to_bytes((v.bit_length() + 8) // 8 + 1, "big", signed=True)
    raise TypeError(f"set items must be ints or bytes, not {type(item).__name__}")


def secure_intersection_cardinality(
    net: Network,
    items: Iterable[int | bytes],
    *,
    fake_ratio: float = 0.0,
    ring: Sequence[str] | None = None,
) -> int:
    """``|S_0 ∩ ... ∩ S_{n-1}|`` for the parties' sets of ints or byte strings.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> run_local(secure_intersection_cardinality,
    ...           {"a": [1, 2, 3, 4], "b": [2, 3, 4, 5], "c": [3, 4, 9]})
    {'a': 2, 'b': 2, 'c': 2}
    """
    return secure_intersection_cardinalities(net, [items], fake_ratio=fake_ratio, ring=ring)[0]


def secure_intersection_cardinalities(
    net: Network,
    sets: Sequence[Iterable[int | bytes]],
    *,
    fake_ratio: float = 0.0,
    ring: Sequence[str] | None = None,
) -> list[int]:
    """Intersection cardinalities of many sets at once: entry ``j`` is
    ``|S_0[j] ∩ ... ∩ S_{n-1}[j]|``. Every party must pass the same number of sets.

    The sets travel as segments of one batch (each segment shuffled on its own), so the
    segment sizes — each party's set sizes plus fakes — are visible to the parties that
    handle them; ``fake_ratio`` adds up to ``ceil(fake_ratio * |S|)`` fakes per set.
    ``ring`` restricts the protocol to some of the parties (default: all), in that order;
    only they call it.
    """
    if fake_ratio < 0:
        raise ValueError("fake_ratio must be >= 0")
    parties = tuple(ring) if ring is not None else net.parties
    if net.me not in parties:
        raise ValueError(f"party {net.me!r} is not on the ring {list(parties)}")
    n = len(parties)
    n_sets = len(sets)
    own = [sorted({_as_bytes(x) for x in s}) for s in sets]
    if n == 1:
        return [len(s) for s in own]
    me, first = net.me, parties[0]
    nxt, prev = net.successor(parties), net.predecessor(parties)
    domain = b"ppdm-intersection|" + net.job_id.encode()
    rng = SecureRandom()
    segments = []
    for j, s in enumerate(own):
        tag = j.to_bytes(4, "big")
        items = [tag + x for x in s]
        bound = math.ceil(fake_ratio * len(items))
        if bound:
            n_fake = int(rng.integers(0, bound + 1, 1)[0])
            items += [b"\xff\xff\xff\xff" + rng.bytes(16) for _ in range(n_fake)]
        segments.append(hash_items(items, domain=domain))
    sizes = np.array([len(seg) for seg in segments], dtype=np.int64)
    points = np.concatenate(segments) if segments else np.empty((0, 1, 33), np.uint8)
    key = CommutativeKey.generate()

    def shuffle_segments(pts: np.ndarray, sz: np.ndarray) -> np.ndarray:
        bounds = np.concatenate([[0], np.cumsum(sz)])
        return np.concatenate(
            [shuffle_rows(pts[bounds[j] : bounds[j + 1]]) for j in range(len(sz))] or [pts]
        )

    def receive_batch(frm: str, step: str) -> tuple[np.ndarray, np.ndarray]:
        msg = net.receive(frm, step, expect=dict)
        sz = msg.get("sizes")
        if (
            not isinstance(sz, np.ndarray)
            or sz.dtype != np.int64
            or sz.shape != (n_sets,)
            or (sz.size and int(sz.min()) < 0)
        ):
            raise ProtocolError(frm, step, f"sizes must be {n_sets} non-negative int64 values")
        pts = check_shape(msg.get("points"), frm, step, chunks=1, count=int(sz.sum()))
        return pts, sz

    net.send(
        nxt,
        f"{STEP}/encrypt",
        {"points": key.encrypt(shuffle_segments(points, sizes)), "sizes": sizes},
    )
    full: tuple[np.ndarray, np.ndarray] | None = None
    for hop in range(1, n):
        step = f"{STEP}/encrypt"
        pts, sz = receive_batch(prev, step)
        pts = shuffle_segments(key.encrypt_received(pts, prev, step, chunks=1), sz)
        if hop < n - 1:
            net.send(nxt, step, {"points": pts, "sizes": sz})
        elif me == first:
            full = (pts, sz)
        else:
            net.send(first, f"{STEP}/encrypted", {"points": pts, "sizes": sz})
    step = f"{STEP}/result"
    if me == first:
        if full is None:  # pragma: no cover - n >= 2 always sets it
            raise RuntimeError("no fully encrypted set")
        batches = [full]
        for p in parties[1:]:
            pts, sz = receive_batch(p, f"{STEP}/encrypted")
            batches.append((validate_points(pts, p, f"{STEP}/encrypted", chunks=1), sz))
        counts = _count_common(batches, n_sets, n)
        net.broadcast(step, counts, to=parties[1:])
        return [int(c) for c in counts]
    value = net.receive(first, step, expect=np.ndarray)
    if value.dtype != np.int64 or value.shape != (n_sets,) or (value.size and value.min() < 0):
        raise ProtocolError(first, step, f"expected {n_sets} non-negative counts")
    return [int(c) for c in value]


def _count_common(batches: list[tuple[np.ndarray, np.ndarray]], n_sets: int, n: int) -> np.ndarray:
    """Per set index, the number of ciphertexts present in all ``n`` parties' segments
    (each party's segment deduplicated first, so a repeated ciphertext counts once)."""
    keyed = []
    for pts, sz in batches:
        idx = np.repeat(np.arange(n_sets, dtype=">u4"), sz).view(np.uint8).reshape(-1, 4)
        rows = np.concatenate([idx, pts.reshape(-1, 33)], axis=1)
        keyed.append(unique_rows(rows[:, None, :])[0])
    distinct, mult = unique_rows(np.concatenate(keyed))
    common = distinct[mult == n].reshape(-1, 37)[:, :4]
    index = np.ascontiguousarray(common).view(">u4").ravel().astype(np.int64)
    return np.bincount(index, minlength=n_sets).astype(np.int64)
