"""Precomputation for DJN encryption (:mod:`ppdm.protocols.paillier.keys`): the fixed-base
comb (:class:`FixedBaseTable`, Lim and Lee, CRYPTO 1994) that turns ``h_s^alpha`` into a
few table look-ups, and the threads that evaluate large batches of it at once.

The randomness of the exponents comes from ``os.urandom`` only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gmpy2
import numpy as np
from gmpy2 import mpz

__all__ = [
    "DEFAULT_COMB_BLOCKS",
    "DEFAULT_WINDOW",
    "MASK_THREADS",
    "MASK_THREAD_MIN",
    "FixedBaseTable",
    "threaded_batches",
]

#: Teeth of the fixed-base comb tables (:class:`FixedBaseTable`: rows of the exponent
#: read at once, ``2^window`` entries per block).
DEFAULT_WINDOW = 12
#: Column blocks of the comb tables (one table of ``2^window`` entries each).
DEFAULT_COMB_BLOCKS = 8
#: Threads that compute randomizers of one large batch at once (gmpy2 releases the GIL
#: for big-number arithmetic in them, so they use several cores in one process).
MASK_THREADS = max(1, min(os.cpu_count() or 1, 4))
#: Batches smaller than this are computed in the calling thread.
MASK_THREAD_MIN = 64

_mask_pool: ThreadPoolExecutor | None = None
_mask_pool_lock = threading.Lock()


def _release_gil() -> None:
    # gmpy2 contexts are per thread: this one lets the thread's mpz arithmetic run
    # without the GIL (operands are immutable, so nothing is shared unsafely).
    gmpy2.get_context().allow_release_gil = True


def _mask_threads() -> ThreadPoolExecutor:
    global _mask_pool
    with _mask_pool_lock:
        if _mask_pool is None:
            _mask_pool = ThreadPoolExecutor(
                MASK_THREADS, thread_name_prefix="ppdm-paillier", initializer=_release_gil
            )
        return _mask_pool


def threaded_batches(work: Callable[[int], list[Any]], count: int) -> list[Any]:
    """``work(k)`` returns ``k`` independent items; run it over ``count`` items split
    among :data:`MASK_THREADS` threads (in order; one thread for small counts)."""
    if count < MASK_THREAD_MIN or MASK_THREADS < 2:
        return work(count)
    share = -(-count // MASK_THREADS)
    sizes = [min(share, count - i) for i in range(0, count, share)]
    out: list[Any] = []
    for part in _mask_threads().map(work, sizes):
        out.extend(part)
    return out


class FixedBaseTable:
    """``base^e mod modulus`` for ``0 <= e < 2^exponent_bits`` by a fixed-base comb (Lim
    and Lee, "More flexible exponentiation with precomputation", CRYPTO 1994).

    The exponent's bits are laid out as ``window`` rows of ``a = blocks * b`` bits; the
    table holds, for each of the ``blocks`` column blocks, the ``2^window`` products of
    the powers ``base^(2^(i a + k b))`` over the subsets of rows. A power is then ``b``
    steps of (square, one table entry per block): ``b - 1`` squarings and at most
    ``blocks * b`` multiplications, with ``blocks * 2^window`` entries stored. The
    default (``window=12``, ``blocks=8``) stores as many entries as a fixed-base window
    table of 8-bit digits (32,768) and needs 98 operations for a 1,024-bit exponent
    instead of 127.

    >>> t = FixedBaseTable(3, 1000003, exponent_bits=20, window=4)
    >>> t.pow(123456) == pow(3, 123456, 1000003)
    True
    """

    def __init__(
        self,
        base: int,
        modulus: int,
        *,
        exponent_bits: int,
        window: int,
        blocks: int = DEFAULT_COMB_BLOCKS,
    ) -> None:
        if not 1 <= window <= 16:
            raise ValueError("window must be in [1, 16]")
        if exponent_bits < 1:
            raise ValueError("exponent_bits must be positive")
        if blocks < 1:
            raise ValueError("blocks must be positive")
        self.modulus = m = mpz(modulus)
        self.window = window
        self.exponent_bits = exponent_bits
        span = -(-exponent_bits // window)  # bits per row before rounding to the blocks
        self.blocks = v = min(blocks, span)
        self.steps = b = -(-span // v)
        self.span = a = v * b
        # base^(2^j) for every bit position j of the (window x span) layout.
        powers = [mpz(base) % m]
        for _ in range(1, window * a):
            powers.append(powers[-1] * powers[-1] % m)
        self.tables: list[list[Any]] = []
        for k in range(v):
            tab = [mpz(1)]
            for u in range(1, 1 << window):
                top = u.bit_length() - 1
                tab.append(tab[u ^ (1 << top)] * powers[top * a + k * b] % m)
            self.tables.append(tab)
        self._weights = (np.uint64(1) << np.arange(window, dtype=np.uint64))[None, :, None, None]

    def pow(self, e: int) -> Any:
        """``base^e mod modulus`` (``0 <= e < 2^exponent_bits``)."""
        if e < 0 or e >> self.exponent_bits:
            raise ValueError("exponent out of the table's range")
        nbytes = (self.exponent_bits + 7) // 8
        raw = np.frombuffer(int(e).to_bytes(nbytes, "little"), dtype=np.uint8)
        return self._evaluate(self._indices(raw.reshape(1, nbytes))[0])

    def random_powers(self, count: int) -> list[Any]:
        """``count`` powers ``base^alpha`` for independent uniform ``alpha`` of
        ``exponent_bits`` bits (from ``os.urandom``; large batches on several threads)."""
        return threaded_batches(self._random_powers, count)

    def _random_powers(self, count: int) -> list[Any]:
        return [self._evaluate(steps) for steps in self._indices(self._random_exponents(count))]

    def _random_exponents(self, count: int) -> np.ndarray:
        """``count`` independent uniform exponents of ``exponent_bits`` bits, drawn from
        ``os.urandom`` in one call: a ``(count, bytes)`` uint8 array, little-endian."""
        nbytes = (self.exponent_bits + 7) // 8
        raw = np.frombuffer(os.urandom(nbytes * count), dtype=np.uint8).reshape(count, nbytes)
        top = self.exponent_bits % 8
        if top:
            raw = raw.copy()
            raw[:, -1] &= np.uint8((1 << top) - 1)
        return raw

    def _random_digits(self, count: int) -> Iterator[bytes]:
        """The little-endian bytes of ``count`` exponents from the sampler of
        :meth:`random_powers`."""
        for row in self._random_exponents(count):
            yield row.tobytes()

    def _indices(self, raw: np.ndarray) -> list[list[list[int]]]:
        """Per exponent (rows of little-endian bytes), the table index of every block at
        every step, most significant step first: ``[exponent][step][block]``."""
        count = raw.shape[0]
        bits = np.unpackbits(raw, axis=1, bitorder="little")
        total = self.window * self.span
        if bits.shape[1] < total:
            bits = np.pad(bits, ((0, 0), (0, total - bits.shape[1])))
        layout = bits[:, :total].reshape(count, self.window, self.blocks, self.steps)
        idx = (layout.astype(np.uint64) * self._weights).sum(axis=1)  # (count, blocks, steps)
        return idx.transpose(0, 2, 1)[:, ::-1, :].tolist()

    def _evaluate(self, steps: list[list[int]]) -> Any:
        m = self.modulus
        acc = None
        for row in steps:
            if acc is not None:
                acc = acc * acc % m
            for tab, u in zip(self.tables, row, strict=True):
                if u:
                    acc = tab[u] if acc is None else acc * tab[u] % m
        return mpz(1) if acc is None else acc
