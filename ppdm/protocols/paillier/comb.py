"""Precomputation for DJN encryption (:mod:`ppdm.protocols.paillier.keys`): the fixed-base
comb (:class:`FixedBaseTable`, Lim and Lee, CRYPTO 1994) that turns ``h_s^alpha`` into a
few table look-ups, its split form modulo a square (:class:`SquareModulusTable`: products
by half-size numbers), and the threads that evaluate large batches of it at once.

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
    "LARGE_BATCH_BLOCKS",
    "LARGE_BATCH_MIN_POWERS",
    "LARGE_BATCH_WINDOW",
    "MASK_THREADS",
    "MASK_THREAD_MIN",
    "POWERS_CHUNK",
    "SPLIT_MIN_ROOT_BITS",
    "FixedBaseTable",
    "SquareModulusTable",
    "comb_layout",
    "table_mod_square",
    "threaded_batches",
]

#: Teeth of the fixed-base comb tables (:class:`FixedBaseTable`: rows of the exponent
#: read at once, ``2^window`` entries per block).
DEFAULT_WINDOW = 12
#: Column blocks of the comb tables (one table of ``2^window`` entries each).
DEFAULT_COMB_BLOCKS = 8
#: The layout for a process that computes many powers of one base (:func:`comb_layout`):
#: 8 steps of 10 look-ups for a 1,024-bit exponent (7 squarings) instead of 11 steps of 8
#: (10 squarings), 2.5x the entries (81,920). Measured on the key owner's split tables of a
#: 2048-bit key (best of 10 interleaved batches of 400, two processes at once as the
#: worker pool runs them): a median 1.15-1.18x as many encryptions per CPU second, for a
#: build of 1.2 s instead of 0.45 s (both halves) and about 50 MB instead of 20 MB.
LARGE_BATCH_WINDOW = 13
LARGE_BATCH_BLOCKS = 10
#: Powers per process from which the larger layout pays for its build (about 13,000 at
#: the figures above, rounded up).
LARGE_BATCH_MIN_POWERS = 16384
#: Smallest ``root`` (in bits) for which :func:`table_mod_square` stores the split form
#: (:class:`SquareModulusTable`). Measured per encryption: 30-40 % fewer CPU seconds at a
#: 2,048-bit root (the public key), about 20 % at 1,536 bits; at 1,024 bits (the key
#: owner's halves of a 2048-bit key, since the flat comb) 1.3-1.45x as many encryptions
#: per CPU second (best of 8 interleaved batches of 400, issue 25, item 5), for a build
#: of 0.5 s instead of 0.2 s per key, paid back after about 2,000 encryptions.
SPLIT_MIN_ROOT_BITS = 1024
#: Threads that compute randomizers of one large batch at once. One by default:
#: gmpy2 releases the GIL in each of the comb's many small products, and threads that
#: share them stall each other -- measured on 2 free cores (``benchmarks/paillier.py``,
#: 2048-bit key, exponent n/2), two threads encrypted 974-1,455/s against 1,482-2,104/s
#: on one, at 0.6-0.8x the CPU efficiency; with the flat comb (issue 25, item 5) on the
#: same 2 cores under a load of 3.8, 0.9x the wall rate and 0.91x the CPU efficiency
#: (medians of 5). Two worker processes (``workers=2``) are the way to use 2 cores. A
#: caller with more cores may set it higher (and measure).
MASK_THREADS = 1
#: Batches smaller than this are computed in the calling thread.
MASK_THREAD_MIN = 64
#: Exponents laid out (numpy index arrays, beta sums) at a time by a batch of powers.
POWERS_CHUNK = 256

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
        self.modulus = mpz(modulus)
        self.window = window
        self.exponent_bits = exponent_bits
        span = -(-exponent_bits // window)  # bits per row before rounding to the blocks
        self.blocks = v = min(blocks, span)
        self.steps = b = -(-span // v)
        self.span = v * b
        self._weights = (np.uint64(1) << np.arange(window, dtype=np.uint64))[None, :, None, None]
        self._build(mpz(base))

    def _build(self, base: Any) -> None:
        m, a, b = self.modulus, self.span, self.steps
        # base^(2^j) for every bit position j of the (window x span) layout.
        powers = [base % m]
        for _ in range(1, self.window * a):
            powers.append(powers[-1] * powers[-1] % m)
        # One flat list, block k's entries at [k 2^window, (k + 1) 2^window): a look-up is
        # one index, computed with numpy for the whole batch (:meth:`_indices`).
        self.entries: list[Any] = []
        for k in range(self.blocks):
            start = len(self.entries)
            self.entries.append(mpz(1))
            for u in range(1, 1 << self.window):
                top = u.bit_length() - 1
                parent = self.entries[start + (u ^ (1 << top))]
                self.entries.append(parent * powers[top * a + k * b] % m)

    def pow(self, e: int) -> Any:
        """``base^e mod modulus`` (``0 <= e < 2^exponent_bits``)."""
        if e < 0 or e >> self.exponent_bits:
            raise ValueError("exponent out of the table's range")
        nbytes = (self.exponent_bits + 7) // 8
        raw = np.frombuffer(int(e).to_bytes(nbytes, "little"), dtype=np.uint8)
        return self._powers(raw.reshape(1, nbytes))[0]

    def random_powers(self, count: int) -> list[Any]:
        """``count`` powers ``base^alpha`` for independent uniform ``alpha`` of
        ``exponent_bits`` bits (from ``os.urandom``; large batches on several threads)."""
        return threaded_batches(self._random_powers, count)

    def _random_powers(self, count: int) -> list[Any]:
        return self._powers(self._random_exponents(count))

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

    #: Whether a row of look-ups is padded to an even length (split tables multiply
    #: their entries two at a time).
    _even_rows = False

    def _indices(self, raw: np.ndarray) -> np.ndarray:
        """Per exponent (rows of little-endian bytes), the flat index into the entries of
        every block at every step, most significant step first: an array ``(exponent,
        step, block)``. A zero digit is the index of its block's entry 1 (rare at real
        sizes: a product by 1 costs less than a test per look-up); an odd row gets one
        more such index where :attr:`_even_rows` asks for it."""
        count = raw.shape[0]
        bits = np.unpackbits(raw, axis=1, bitorder="little")
        total = self.window * self.span
        if bits.shape[1] < total:
            bits = np.pad(bits, ((0, 0), (0, total - bits.shape[1])))
        layout = bits[:, :total].reshape(count, self.window, self.blocks, self.steps)
        idx = (layout.astype(np.uint64) * self._weights).sum(axis=1)  # (count, blocks, steps)
        idx += (np.arange(self.blocks, dtype=np.uint64) << np.uint64(self.window))[:, None]
        rows = idx.transpose(0, 2, 1)[:, ::-1, :].astype(np.intp)
        if self._even_rows and self.blocks % 2:
            rows = np.concatenate([rows, np.zeros((count, self.steps, 1), np.intp)], axis=2)
        return rows

    def _powers(self, raw: np.ndarray) -> list[Any]:
        """``base^e`` for every exponent ``e`` of ``raw`` (rows of little-endian bytes),
        :data:`POWERS_CHUNK` exponents at a time (bounds the index arrays' memory)."""
        out: list[Any] = []
        for at in range(0, raw.shape[0], POWERS_CHUNK):
            out.extend(map(self._evaluate, self._indices(raw[at : at + POWERS_CHUNK]).tolist()))
        return out

    def _powers_pair(self, other: FixedBaseTable, raw: np.ndarray) -> list[tuple[Any, Any]]:
        """``(self.pow(e), other.pow(e))`` for every exponent of ``raw``, both in one loop
        per exponent (less interpreter work: the key owner's combs mod ``p^2`` and
        ``q^2``); ``other`` is a table of the same class and layout."""
        out: list[tuple[Any, Any]] = []
        for at in range(0, raw.shape[0], POWERS_CHUNK):
            rows = self._indices(raw[at : at + POWERS_CHUNK]).tolist()
            out.extend(map(self._evaluate_pair, [other] * len(rows), rows))
        return out

    def _evaluate(self, steps: list[list[int]]) -> Any:
        e, m = self.entries, self.modulus
        acc = mpz(1)
        for row in steps:
            looked_up = map(e.__getitem__, row)
            acc = acc * acc % m * next(looked_up) % m
            for x in looked_up:
                acc = acc * x % m
        return acc

    def _evaluate_pair(self, other: FixedBaseTable, steps: list[list[int]]) -> tuple[Any, Any]:
        e, e2, m, m2 = self.entries, other.entries, self.modulus, other.modulus
        acc = acc2 = mpz(1)
        for row in steps:
            acc = acc * acc % m
            acc2 = acc2 * acc2 % m2
            for i in row:
                acc = acc * e[i] % m
                acc2 = acc2 * e2[i] % m2
        return acc, acc2


class SquareModulusTable(FixedBaseTable):
    """The comb of :class:`FixedBaseTable` modulo a square ``root^2`` (Paillier's ``n^2``,
    or ``p^2`` for the key owner), with every multiplication by a table entry on a
    half-size number.

    Every entry ``T`` (a unit) is stored as ``a (1 + root beta) mod root^2`` with ``a = T mod
    root`` and ``beta`` in ``[0, root)``. Since ``root^2`` divides ``(root x)(root y)``, the
    ``1 + root beta`` factors of a product add up: ``prod_k T_k = (prod_k a_k) (1 + root
    sum_k beta_k) mod root^2``. A power is therefore the comb over the ``a`` alone, two
    half-size ``a`` multiplied together before each product and reduction mod ``root^2``
    (one full-size operation per two entries instead of one per entry), plus a sum of the
    ``beta`` (numpy limbs, a whole batch at once), joined at the end by one product mod
    ``root``. At a 2048-bit Paillier ``n`` this takes 30-40 % fewer CPU seconds per power
    than :class:`FixedBaseTable` (measured in ``benchmarks/paillier.py``), for the same
    exponents and the same results.

    The tables are built without a modular inverse per entry: when ``x y = a + root q``
    (``a = x y mod root``), ``beta(x y) = beta(x) + beta(y) + q / a`` and ``1 / a = (1 /
    a(x)) (1 / a(y)) mod root`` is carried along, so one inversion serves the whole table.

    >>> t = SquareModulusTable(3, 1009, exponent_bits=20, window=4)
    >>> t.pow(123456) == pow(3, 123456, 1009**2)
    True
    """

    def __init__(
        self,
        base: int,
        root: int,
        *,
        exponent_bits: int,
        window: int,
        blocks: int = DEFAULT_COMB_BLOCKS,
    ) -> None:
        self.root = mpz(root)
        if self.root < 3 or gmpy2.gcd(mpz(base), self.root) != 1:
            raise ValueError("the base must be a unit modulo root (root >= 3)")
        super().__init__(
            base, self.root * self.root, exponent_bits=exponent_bits, window=window, blocks=blocks
        )

    _even_rows = True

    def _build(self, base: Any) -> None:
        r, a, b = self.root, self.span, self.steps
        # (a, beta, 1/a) of base^(2^j) for every bit position j of the layout; squaring
        # (a + r q = a_x^2): beta = 2 beta_x + q / a.
        high, low = divmod(base % self.modulus, r)
        inv = gmpy2.invert(low, r)
        powers = [(low, high * inv % r, inv)]
        for _ in range(1, self.window * a):
            x, beta, inv = powers[-1]
            q, x = divmod(x * x, r)
            inv = inv * inv % r
            powers.append((x, (2 * beta + q * inv) % r, inv))
        # Flat lists as in FixedBaseTable: block k at [k 2^window, (k + 1) 2^window).
        fac: list[Any] = []
        bet: list[Any] = []
        for k in range(self.blocks):
            start = len(fac)
            fac.append(mpz(1))
            bet.append(mpz(0))
            invs = [mpz(1)]
            for u in range(1, 1 << self.window):
                parent = u ^ (1 << (u.bit_length() - 1))
                px, pbeta, pinv = powers[(u.bit_length() - 1) * a + k * b]
                q, x = divmod(fac[start + parent] * px, r)
                inv = invs[parent] * pinv % r
                fac.append(x)
                bet.append((bet[start + parent] + pbeta + q * inv) % r)
                invs.append(inv)
        self.factors = fac
        # The beta are only added up: 32-bit limbs in a numpy array, so a batch's sums are
        # a few numpy calls (:meth:`_beta_sums`) instead of one big-integer addition per
        # look-up (each a cache miss in a table of megabytes).
        self._limbs = -(-int(r.bit_length()) // 32)
        blob = b"".join(int(x).to_bytes(4 * self._limbs, "little") for x in bet)
        self.betas = np.frombuffer(blob, dtype="<u4").reshape(len(bet), self._limbs)

    def _beta_sums(self, idx: np.ndarray) -> list[int]:
        """Per exponent (look-ups ``(exponent, step, entry)``, most significant step
        first), ``sum_steps 2^(steps - 1 - step) sum_entries beta``, exactly: a uint64
        sum over ``group`` steps of ``width`` 32-bit limbs stays below ``width 2^32
        2^group <= 2^63``; the groups and the limbs' carries are joined as Python ints."""
        count, steps, width = idx.shape
        group = max(1, min(16, 31 - width.bit_length()))
        out = [0] * count
        for first in range(0, steps, group):
            part = idx[:, first : first + group]
            rows = part.shape[1]
            weights = np.uint64(1) << np.arange(rows - 1, -1, -1, dtype=np.uint64)
            sums = self.betas[part].sum(axis=2, dtype=np.uint64)  # (count, rows, limbs)
            sums = (sums * weights[None, :, None]).sum(axis=1, dtype=np.uint64)
            low = (sums & np.uint64(0xFFFFFFFF)).astype("<u4").tobytes()
            high = (sums >> np.uint64(32)).astype("<u4").tobytes()
            size, shift = 4 * self._limbs, steps - first - rows
            for i in range(count):
                at = slice(i * size, (i + 1) * size)
                value = int.from_bytes(low[at], "little") + (
                    int.from_bytes(high[at], "little") << 32
                )
                out[i] += value << shift
        return out

    def _join(self, acc: Any, total: int) -> Any:
        """``acc (1 + root total) mod root^2``: the product of the ``a`` and the sum of
        the ``beta`` back into one residue."""
        r = self.root
        return (acc + r * (acc % r * (total % r) % r)) % self.modulus

    def _powers(self, raw: np.ndarray) -> list[Any]:
        out: list[Any] = []
        for at in range(0, raw.shape[0], POWERS_CHUNK):
            idx = self._indices(raw[at : at + POWERS_CHUNK])
            out.extend(map(self._join, map(self._product, idx.tolist()), self._beta_sums(idx)))
        return out

    def _powers_pair(self, other: FixedBaseTable, raw: np.ndarray) -> list[tuple[Any, Any]]:
        if not isinstance(other, SquareModulusTable):
            raise TypeError("both tables must be split tables")
        out: list[tuple[Any, Any]] = []
        for at in range(0, raw.shape[0], POWERS_CHUNK):
            idx = self._indices(raw[at : at + POWERS_CHUNK])
            out.extend(
                (self._join(acc, total), other._join(acc2, total2))
                for (acc, acc2), total, total2 in zip(
                    map(self._product_pair, [other] * len(idx), idx.tolist()),
                    self._beta_sums(idx),
                    other._beta_sums(idx),
                    strict=True,
                )
            )
        return out

    def _product(self, steps: list[list[int]]) -> Any:
        """The comb over the ``a`` alone (rows of even length, :attr:`_even_rows`): two
        half-size factors multiplied before each product and reduction mod ``root^2``."""
        fac, m = self.factors, self.modulus
        acc = mpz(1)
        for row in steps:
            looked_up = map(fac.__getitem__, row)
            pairs = zip(looked_up, looked_up, strict=True)  # entries two by two
            x, y = next(pairs)
            acc = acc * acc % m * (x * y) % m
            for x, y in pairs:
                acc = acc * (x * y) % m
        return acc

    def _product_pair(self, other: SquareModulusTable, steps: list[list[int]]) -> tuple[Any, Any]:
        fac, fac2, m, m2 = self.factors, other.factors, self.modulus, other.modulus
        acc = acc2 = mpz(1)
        for row in steps:
            acc = acc * acc % m
            acc2 = acc2 * acc2 % m2
            looked_up = iter(row)
            for i, j in zip(looked_up, looked_up, strict=True):
                acc = acc * (fac[i] * fac[j]) % m
                acc2 = acc2 * (fac2[i] * fac2[j]) % m2
        return acc, acc2


def comb_layout(powers: int) -> tuple[int, int]:
    """``(window, blocks)`` of the comb for a process that will compute about ``powers``
    powers of one base: :data:`LARGE_BATCH_WINDOW` and :data:`LARGE_BATCH_BLOCKS` from
    :data:`LARGE_BATCH_MIN_POWERS` on, else the defaults (cheaper to build).

    >>> comb_layout(100) == (DEFAULT_WINDOW, DEFAULT_COMB_BLOCKS)
    True
    >>> comb_layout(50_000)
    (13, 10)
    """
    if powers >= LARGE_BATCH_MIN_POWERS:
        return LARGE_BATCH_WINDOW, LARGE_BATCH_BLOCKS
    return DEFAULT_WINDOW, DEFAULT_COMB_BLOCKS


def table_mod_square(
    base: int, root: int, *, exponent_bits: int, window: int, blocks: int = DEFAULT_COMB_BLOCKS
) -> FixedBaseTable:
    """The comb of ``base`` modulo ``root^2``: a :class:`SquareModulusTable` for a ``root``
    of at least :data:`SPLIT_MIN_ROOT_BITS` bits, else a :class:`FixedBaseTable` (same
    powers, same sampler)."""
    options: dict[str, int] = {"exponent_bits": exponent_bits, "window": window, "blocks": blocks}
    root = mpz(root)
    if root.bit_length() >= SPLIT_MIN_ROOT_BITS:
        return SquareModulusTable(base, root, **options)
    return FixedBaseTable(base, root * root, **options)
