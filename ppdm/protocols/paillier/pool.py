"""Optional multiprocessing for big Paillier batches (``workers=`` in the batch APIs).

A process pool (``forkserver`` start method, so no thread or lock state is forked) is
created on first use per worker count and reused; :func:`shutdown` stops it (also at
exit). Only bytes cross the process boundary: keys as their protobuf serialization and
integers as fixed-width big-endian blobs, so no ppdm object is ever pickled. Each worker
process keeps the keys (and their fixed-base tables) it has seen, keyed by the key's
bytes, so a table is built once per worker.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

from gmpy2 import mpz

from ppdm.workers import get_pool, shutdown_pools

if TYPE_CHECKING:
    from ppdm.protocols.paillier.keys import PaillierPrivateKey, PaillierPublicKey

__all__ = ["parallel_decrypt", "parallel_encrypt", "shutdown"]


def _pool(workers: int) -> ProcessPoolExecutor:
    """The process-wide forkserver pool of ``workers`` processes (:mod:`ppdm.workers`:
    shared safely by concurrent jobs; workers die with their node)."""
    return get_pool(workers, method="forkserver")


def shutdown() -> None:
    """Stop the worker processes (they are started again on the next parallel call)."""
    shutdown_pools()


def _pack(values: list[Any], width: int) -> bytes:
    return b"".join(int(v).to_bytes(width, "big") for v in values)


def _unpack(blob: bytes, width: int) -> list[Any]:
    return [mpz(int.from_bytes(blob[i : i + width], "big")) for i in range(0, len(blob), width)]


def _split(items: list[Any], parts: int) -> list[list[Any]]:
    size = -(-len(items) // parts)
    return [items[i : i + size] for i in range(0, len(items), size)]


# Worker side -----------------------------------------------------------------------------

_worker_keys: dict[tuple[str, bytes, int, int], Any] = {}


def _worker_key(kind: str, blob: bytes, exponent_bits: int, window: int) -> Any:
    from ppdm.protocols.paillier.keys import PaillierPrivateKey, PaillierPublicKey

    key = (kind, blob, exponent_bits, window)
    if key not in _worker_keys:
        if len(_worker_keys) > 8:
            _worker_keys.clear()
        cls = PaillierPrivateKey if kind == "private" else PaillierPublicKey
        _worker_keys[key] = cls.from_bytes(blob, exponent_bits=exponent_bits, window=window)
    return _worker_keys[key]


def _encrypt_task(
    kind: str, blob: bytes, exponent_bits: int, window: int, width: int, plain: bytes
) -> bytes:
    key = _worker_key(kind, blob, exponent_bits, window)
    pub = key.public_key if kind == "private" else key
    cts = key.raw_encrypt_many(_unpack(plain, width))
    return _pack(cts, pub.ciphertext_bytes)


def _decrypt_task(blob: bytes, exponent_bits: int, window: int, width: int, data: bytes) -> bytes:
    key = _worker_key("private", blob, exponent_bits, window)
    ms = key.raw_decrypt_many(_unpack(data, width))
    return _pack(ms, (int(key.public_key.n.bit_length()) + 7) // 8)


# Caller side -----------------------------------------------------------------------------


def parallel_encrypt(
    pub: PaillierPublicKey,
    priv: PaillierPrivateKey | None,
    plaintexts: list[Any],
    workers: int,
) -> list[Any]:
    """Encrypt residues on ``workers`` processes (key-owner path if ``priv`` is given)."""
    kind, blob = ("private", priv.to_bytes()) if priv is not None else ("public", pub.to_bytes())
    width = (pub.bits + 7) // 8
    chunks = _split(plaintexts, workers * 4)
    pool = _pool(workers)
    futures = [
        pool.submit(
            _encrypt_task, kind, blob, pub.exponent_bits, pub.window, width, _pack(c, width)
        )
        for c in chunks
    ]
    out: list[Any] = []
    for f in futures:
        out.extend(_unpack(f.result(), pub.ciphertext_bytes))
    return out


def parallel_decrypt(priv: PaillierPrivateKey, ciphertexts: list[Any], workers: int) -> list[Any]:
    """Decrypt to residues on ``workers`` processes."""
    pub = priv.public_key
    blob = priv.to_bytes()
    width = pub.ciphertext_bytes
    pool = _pool(workers)
    futures = [
        pool.submit(_decrypt_task, blob, pub.exponent_bits, pub.window, width, _pack(c, width))
        for c in _split(ciphertexts, workers * 4)
    ]
    out: list[Any] = []
    for f in futures:
        out.extend(_unpack(f.result(), (pub.bits + 7) // 8))
    return out
