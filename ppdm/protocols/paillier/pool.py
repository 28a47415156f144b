"""Optional multiprocessing for big Paillier batches (``workers=`` in the batch APIs).

A process pool (``forkserver`` start method, so no thread or lock state is forked) is
created on first use per worker count and reused; :func:`shutdown` stops it (also at
exit). Only bytes cross the process boundary: keys as their protobuf serialization and
integers as fixed-width big-endian blobs, so no ppdm object is ever pickled.

This module knows nothing of keys: :func:`map_packed` runs a module-level task (the
worker side of :mod:`ppdm.protocols.paillier.keys`, which keeps the keys and fixed-base
tables it has seen per worker) over packed chunks, so the dependency runs one way,
``keys -> pool``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from gmpy2 import mpz

from ppdm.workers import get_pool, shutdown_pools

__all__ = ["map_packed", "pack", "shutdown", "unpack"]


def _pool(workers: int) -> ProcessPoolExecutor:
    """The process-wide forkserver pool of ``workers`` processes (:mod:`ppdm.workers`:
    shared safely by concurrent jobs; workers die with their node)."""
    return get_pool(workers, method="forkserver")


def shutdown() -> None:
    """Stop the worker processes (they are started again on the next parallel call)."""
    shutdown_pools()


def pack(values: list[Any], width: int) -> bytes:
    """Non-negative integers as one blob of ``width``-byte big-endian words."""
    return b"".join(int(v).to_bytes(width, "big") for v in values)


def unpack(blob: bytes, width: int) -> list[Any]:
    """Inverse of :func:`pack` (``gmpy2.mpz`` values)."""
    return [mpz(int.from_bytes(blob[i : i + width], "big")) for i in range(0, len(blob), width)]


def _split(items: list[Any], parts: int) -> list[list[Any]]:
    size = -(-len(items) // parts)
    return [items[i : i + size] for i in range(0, len(items), size)]


def map_packed(
    task: Callable[..., bytes],
    args: tuple[Any, ...],
    items: list[Any],
    *,
    workers: int,
    in_width: int,
    out_width: int,
) -> list[Any]:
    """``task(*args, in_width, packed_chunk)`` on ``workers`` processes over ``4 *
    workers`` chunks of ``items`` (packed ``in_width`` bytes per integer); each returns
    its results packed ``out_width`` bytes per integer. Results in input order.
    ``task`` must be a module-level function (it is sent by reference)."""
    pool = _pool(workers)
    futures = [
        pool.submit(task, *args, in_width, pack(chunk, in_width))
        for chunk in _split(items, workers * 4)
    ]
    out: list[Any] = []
    for f in futures:
        out.extend(unpack(f.result(), out_width))
    return out
