"""Commutative encryption on secp256k1 (Pohlig–Hellman style) and item encodings.

``E_k(P) = k·P`` for a secret scalar ``k``: encryptions under different keys commute
(``E_a(E_b(P)) = E_b(E_a(P))``), equal plaintexts give equal ciphertexts under the same
keys, and ``E_k`` is inverted by ``k^-1 mod ORDER``. Under the decisional Diffie–Hellman
assumption in secp256k1, a party that does not know ``k`` cannot link ``P`` to ``k·P``;
this is the commutative encryption of Kantarcioglu & Clifton (2004) and Vaidya & Clifton
(2005), in a prime-order elliptic-curve group instead of modular exponentiation.

Items become points in one of two ways:

- :func:`encode_items` embeds the bytes of each item invertibly (for secure set union,
  where the union must be decrypted back to the items). An item takes ``chunks`` points;
  every item of a job uses the same number of points, so ciphertext sizes do not reveal
  item lengths. An item of several points carries its identifier (a hash of the whole
  item) in every point, so distinct items never share a point even when they share
  bytes, and padding differs per item. Fake items (:func:`fake_items`) carry a distinct
  tag and fresh random content in every point, and are dropped after decryption.
- :func:`hash_items` hashes each item to a point (for intersection cardinality, where
  nothing is decrypted), domain-separated per job.

Batches are numpy ``uint8`` arrays of shape ``(m, chunks, 33)`` (compressed points); the
scalar multiplications run in libsecp256k1, optionally spread over worker processes
(:func:`set_workers`), which receive raw bytes only.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from concurrent.futures import Executor

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.protocols import ecgroup
from ppdm.randomness import SecureRandom
from ppdm.workers import get_pool

__all__ = [
    "BOUND_CHUNK_BYTES",
    "CHUNK_BYTES",
    "ITEM_ID_BYTES",
    "CommutativeKey",
    "capacity",
    "chunks_for",
    "decode_items",
    "encode_items",
    "fake_items",
    "hash_items",
    "item_id",
    "set_workers",
    "shuffle_rows",
    "validate_points",
]

PB = ecgroup.POINT_BYTES
#: Item bytes carried by a one-point item (the embedding's 30 bytes less a tag byte).
CHUNK_BYTES = ecgroup.EMBED_CAPACITY - 1
#: Bytes of the per-item identifier every chunk of a longer item carries.
ITEM_ID_BYTES = 8
#: Item bytes per point of an item that spans several points (tag and identifier less).
BOUND_CHUNK_BYTES = ecgroup.EMBED_CAPACITY - 1 - ITEM_ID_BYTES
_REAL, _FAKE = b"\x01", b"\x00"

# Below this many points a batch is multiplied in the calling process.
_PARALLEL_THRESHOLD = 4096
_pool_workers = 0


def set_workers(workers: int | None) -> None:
    """Use ``workers`` processes for large batches (``None``: one per CPU; ``1``: none).

    The pools come from :func:`ppdm.workers.get_pool` (shared by the process, one per
    size, never shut down under a running job; workers die with their node)."""
    global _pool_workers
    _pool_workers = (os.cpu_count() or 1) if workers is None else max(int(workers), 1)


def _executor() -> Executor | None:
    n = _pool_workers
    return None if n <= 1 else get_pool(n, method="spawn")


class InvalidPoint(ValueError):
    """A batch held a value that is not a curve point; ``index`` is its position."""

    def __init__(self, index: int) -> None:
        super().__init__(f"point {index} is not on secp256k1")
        self.index = index


def _mult_buffer(buf: bytes, scalar: bytes, first: int = 0) -> bytes:
    """Multiply every 33-byte point in ``buf`` by the 32-byte ``scalar``; parsing each
    point validates it (raises :class:`InvalidPoint` at the first invalid one)."""
    try:
        return ecgroup.mult_points(buf, scalar)
    except ecgroup.PointError as exc:
        raise InvalidPoint(first + exc.index) from None


def _mult_array(points: np.ndarray, k: int) -> np.ndarray:
    scalar = (k % ecgroup.ORDER).to_bytes(32, "big")
    flat = np.ascontiguousarray(points, dtype=np.uint8).reshape(-1, PB)
    total = flat.shape[0]
    pool = _executor() if total >= _PARALLEL_THRESHOLD else None
    if pool is None:
        out = _mult_buffer(flat.tobytes(), scalar)
    else:
        parts = [p for p in np.array_split(np.arange(total), _pool_workers * 4) if len(p)]
        bufs = [flat[p[0] : p[-1] + 1].tobytes() for p in parts]
        firsts = [int(p[0]) for p in parts]
        out = b"".join(pool.map(_mult_buffer, bufs, [scalar] * len(bufs), firsts))
    return np.frombuffer(out, dtype=np.uint8).reshape(points.shape).copy()


class CommutativeKey:
    """A secret scalar ``k``; :meth:`encrypt` maps ``P -> k·P``, :meth:`decrypt` inverts.

    Build one with :meth:`generate` (``secrets``-based).
    """

    __slots__ = ("_inverse", "_k")

    def __init__(self, k: int) -> None:
        if not 0 < k < ecgroup.ORDER:
            raise ValueError("key must be in [1, ORDER)")
        self._k = k
        self._inverse = ecgroup.invert_scalar(k)

    @classmethod
    def generate(cls) -> CommutativeKey:
        return cls(ecgroup.random_scalar())

    def encrypt(self, points: np.ndarray) -> np.ndarray:
        """``k·P`` for every point of a ``(..., 33)`` uint8 array (already validated)."""
        return _mult_array(points, self._k)

    def decrypt(self, points: np.ndarray) -> np.ndarray:
        """``k^-1·P`` for every point."""
        return _mult_array(points, self._inverse)

    def encrypt_received(self, value: object, party: str, step: str, *, chunks: int) -> np.ndarray:
        """Validate a batch received from ``party`` and encrypt it in one pass (each
        point is parsed once); raises :class:`ProtocolError` for anything invalid."""
        return self._apply_received(value, party, step, chunks, self._k)

    def decrypt_received(self, value: object, party: str, step: str, *, chunks: int) -> np.ndarray:
        """Like :meth:`encrypt_received`, decrypting."""
        return self._apply_received(value, party, step, chunks, self._inverse)

    @staticmethod
    def _apply_received(value: object, party: str, step: str, chunks: int, k: int) -> np.ndarray:
        batch = check_shape(value, party, step, chunks=chunks)
        try:
            return _mult_array(batch, k)
        except InvalidPoint as exc:
            raise ProtocolError(
                party, step, f"item {exc.index // chunks} is not a point on secp256k1"
            ) from exc


def chunks_for(max_item_bytes: int) -> int:
    """Points per item for items of at most ``max_item_bytes`` bytes: one up to
    :data:`CHUNK_BYTES`, else :data:`BOUND_CHUNK_BYTES` per point."""
    if max_item_bytes < 0:
        raise ValueError("max_item_bytes must be >= 0")
    if max_item_bytes <= CHUNK_BYTES:
        return 1
    return -(-max_item_bytes // BOUND_CHUNK_BYTES)


def capacity(chunks: int) -> int:
    """The longest item ``chunks`` points carry."""
    return CHUNK_BYTES if chunks == 1 else chunks * BOUND_CHUNK_BYTES


def item_id(item: bytes, domain: bytes = b"", chunk: int = 0) -> bytes:
    """The identifier chunk ``chunk`` of ``item`` carries: SHA-256 of the whole item and
    the chunk's position (domain-separated per job), truncated to :data:`ITEM_ID_BYTES`.

    It binds each chunk to its item and its place in it: two different items never share
    a point even when they share a chunk of bytes or are padded alike, and an item's own
    padding chunks differ from each other (a collision needs two (item, position) pairs
    with the same 64-bit identifier in one job)."""
    h = hashlib.sha256(b"ppdm/commutative/item-id" + len(domain).to_bytes(2, "big") + domain)
    h.update(chunk.to_bytes(2, "big"))
    h.update(item)
    return h.digest()[:ITEM_ID_BYTES]


def _encode_chunk(items: list[bytes], chunks: int, domain: bytes = b"") -> bytes:
    """Embedding of ``items`` as concatenated compressed points (worker function)."""
    out = bytearray()
    if chunks == 1:
        for item in items:
            out += ecgroup.embed_bytes(_REAL + item)
        return bytes(out)
    for item in items:
        for c in range(chunks):
            part = item[c * BOUND_CHUNK_BYTES : (c + 1) * BOUND_CHUNK_BYTES]
            out += ecgroup.embed_bytes(_REAL + item_id(item, domain, c) + part)
    return bytes(out)


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    bounds = np.linspace(0, n, parts + 1).astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]


def encode_items(items: list[bytes], chunks: int, *, domain: bytes = b"") -> np.ndarray:
    """Embed each item in ``chunks`` points: array of shape ``(len(items), chunks, 33)``.

    One point: ``tag || item``. Several points: chunk ``c`` is
    ``tag || item_id(item, domain, c) || item[21 c : 21 (c + 1)]``, so every point is
    bound to the whole item and its position in it (:func:`item_id`): no two points of
    a job's items are equal unless the items are, and padding differs everywhere."""
    cap = capacity(chunks)
    for item in items:
        if len(item) > cap:
            raise ValueError(f"an item exceeds the {cap}-byte limit")
    pool = _executor() if len(items) * chunks >= _PARALLEL_THRESHOLD else None
    if pool is None:
        raw = _encode_chunk(items, chunks, domain)
    else:
        spans = _split(len(items), _pool_workers * 4)
        raw = b"".join(
            pool.map(
                _encode_chunk,
                [items[a:b] for a, b in spans],
                [chunks] * len(spans),
                [domain] * len(spans),
            )
        )
    return np.frombuffer(raw, dtype=np.uint8).reshape(len(items), chunks, PB).copy()


def fake_items(count: int, chunks: int) -> np.ndarray:
    """``count`` fake items under the fake tag, with fresh random content in *every*
    point (a random identifier and a full chunk of random bytes), so that after
    encryption a fake row looks like a real one: no constant or repeated point."""
    out = np.empty((count, chunks, PB), dtype=np.uint8)
    if chunks == 1:
        rnd = os.urandom(CHUNK_BYTES * count)
        for i in range(count):
            body = rnd[CHUNK_BYTES * i : CHUNK_BYTES * (i + 1)]
            out[i, 0] = np.frombuffer(ecgroup.embed_bytes(_FAKE + body), dtype=np.uint8)
        return out
    per_chunk = ITEM_ID_BYTES + BOUND_CHUNK_BYTES
    rnd = os.urandom(per_chunk * chunks * count)
    for i in range(count):
        for c in range(chunks):
            off = per_chunk * (i * chunks + c)
            body = _FAKE + rnd[off : off + per_chunk]
            out[i, c] = np.frombuffer(ecgroup.embed_bytes(body), dtype=np.uint8)
    return out


def _decode_chunk(
    buf: bytes, chunks: int, domain: bytes = b"", trusted: bool = False
) -> tuple[list[bytes], int]:
    """Decode concatenated decrypted items (worker function); see :func:`decode_items`."""
    items: list[bytes] = []
    fakes = 0
    row = chunks * PB
    head = 1 if chunks == 1 else 1 + ITEM_ID_BYTES
    for off in range(0, len(buf), row):
        parts = [
            ecgroup.extract_bytes(buf[off + c * PB : off + (c + 1) * PB], validated=trusted)
            for c in range(chunks)
        ]
        if any(len(part) < head for part in parts):
            raise ValueError("decrypted point carries no item tag")
        if parts[0][:1] == _FAKE:
            fakes += 1
            continue
        if any(part[:1] != _REAL for part in parts):
            raise ValueError("decrypted item mixes real and fake tags")
        item = b"".join(part[head:] for part in parts)
        if chunks > 1 and any(
            part[1:head] != item_id(item, domain, c) for c, part in enumerate(parts)
        ):
            raise ValueError("the decrypted chunks of an item do not belong together")
        items.append(item)
    return items, fakes


def decode_items(
    points: np.ndarray, *, domain: bytes = b"", trusted: bool = False
) -> tuple[list[bytes], int]:
    """Decode decrypted items; returns the real items and the number of fakes dropped.

    Raises ValueError for a point that carries no embedded item, or chunks whose
    identifiers do not match their item (a protocol fault). ``trusted``: the points are
    this party's own libsecp256k1 output (canonical encodings), not parsed again."""
    m, chunks = points.shape[0], points.shape[1]
    flat = np.ascontiguousarray(points, dtype=np.uint8)
    pool = _executor() if m * chunks >= _PARALLEL_THRESHOLD else None
    if pool is None:
        return _decode_chunk(flat.tobytes(), chunks, domain, trusted)
    spans = _split(m, _pool_workers * 4)
    items: list[bytes] = []
    fakes = 0
    for got, n_fake in pool.map(
        _decode_chunk,
        [flat[a:b].tobytes() for a, b in spans],
        [chunks] * len(spans),
        [domain] * len(spans),
        [trusted] * len(spans),
    ):
        items.extend(got)
        fakes += n_fake
    return items, fakes


def hash_items(items: list[bytes], *, domain: bytes) -> np.ndarray:
    """Hash each item to a point: array of shape ``(len(items), 1, 33)``."""
    out = np.empty((len(items), 1, PB), dtype=np.uint8)
    for i, item in enumerate(items):
        out[i, 0] = np.frombuffer(ecgroup.hash_to_point(item, domain=domain), dtype=np.uint8)
    return out


def check_shape(
    value: object, party: str, step: str, *, chunks: int, count: int | None = None
) -> np.ndarray:
    """Check the type, shape and prefix bytes of a received batch (not the curve
    equation: see :func:`validate_points`). Raises :class:`ProtocolError`."""
    if not isinstance(value, np.ndarray) or value.dtype != np.uint8:
        raise ProtocolError(party, step, "expected a uint8 array of curve points")
    if value.ndim != 3 or value.shape[1:] != (chunks, PB):
        raise ProtocolError(party, step, f"expected shape (m, {chunks}, {PB}), got {value.shape}")
    if count is not None and value.shape[0] != count:
        raise ProtocolError(party, step, f"expected {count} items, got {value.shape[0]}")
    flat = value.reshape(-1, PB)
    if flat.size and not np.all((flat[:, 0] == 2) | (flat[:, 0] == 3)):
        raise ProtocolError(party, step, "batch holds a value that is not a compressed point")
    return value


def validate_points(
    value: object, party: str, step: str, *, chunks: int, count: int | None = None
) -> np.ndarray:
    """Check a received batch: a uint8 array of shape ``(m, chunks, 33)`` of valid
    compressed points (``m == count`` if given). Raises :class:`ProtocolError`."""
    value = check_shape(value, party, step, chunks=chunks, count=count)
    try:
        ecgroup.validate_buffer(value.reshape(-1, PB).tobytes())
    except ecgroup.PointError as exc:
        raise ProtocolError(
            party, step, f"item {exc.index // chunks} is not a point on secp256k1"
        ) from exc
    return value


def shuffle_rows(points: np.ndarray) -> np.ndarray:
    """The rows (items) of ``points`` in a uniformly random order (OS CSPRNG)."""
    return points[SecureRandom().permutation(points.shape[0])]


def unique_rows(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct items (rows) of ``points`` and how often each occurred."""
    if points.shape[0] == 0:
        return points, np.zeros(0, dtype=np.int64)
    flat = np.ascontiguousarray(points).reshape(points.shape[0], -1)
    keys = flat.view(np.dtype((np.void, flat.shape[1]))).ravel()
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    return points[first], counts
