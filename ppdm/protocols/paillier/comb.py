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
    "MASK_THREADS",
    "MASK_THREAD_MIN",
    "SPLIT_MIN_ROOT_BITS",
    "FixedBaseTable",
    "SquareModulusTable",
    "table_mod_square",
    "threaded_batches",
]

#: Teeth of the fixed-base comb tables (:class:`FixedBaseTable`: rows of the exponent
#: read at once, ``2^window`` entries per block).
DEFAULT_WINDOW = 12
#: Column blocks of the comb tables (one table of ``2^window`` entries each).
DEFAULT_COMB_BLOCKS = 8
#: Smallest ``root`` (in bits) for which :func:`table_mod_square` stores the split form
#: (:class:`SquareModulusTable`). Measured per encryption: 30-40 % fewer CPU seconds at a
#: 2,048-bit root (the public key), about 20 % at 1,536 bits; at 1,024 bits (the key
#: owner's halves of a 2048-bit key) 0-10 %, not worth a build that costs 1.5-2x as
#: much (0.1-0.2 s more per key); below, the full-size products are faster.
SPLIT_MIN_ROOT_BITS = 1536
#: Threads that compute randomizers of one large batch at once. One by default:
#: gmpy2 releases the GIL in each of the comb's many small products, and threads that
#: share them stall each other -- measured on 2 free cores (``benchmarks/paillier.py``,
#: 2048-bit key, exponent n/2), two threads encrypted 974-1,455/s against 1,482-2,104/s
#: on one, at 0.6-0.8x the CPU efficiency. A caller with more cores may set it higher
#: (and measure).
MASK_THREADS = 1
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
        self.tables: list[list[Any]] = []
        for k in range(self.blocks):
            tab = [mpz(1)]
            for u in range(1, 1 << self.window):
                top = u.bit_length() - 1
                tab.append(tab[u ^ (1 << top)] * powers[top * a + k * b] % m)
            self.tables.append(tab)

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

    def _evaluate_pair(self, other: FixedBaseTable, steps: list[list[int]]) -> tuple[Any, Any]:
        """``(self._evaluate(steps), other._evaluate(steps))`` for a table of the same
        class and layout, in one loop (less interpreter work: the key owner's combs mod
        ``p^2`` and ``q^2`` for one exponent)."""
        m, m2 = self.modulus, other.modulus
        acc: Any = None
        acc2: Any = None
        for row in steps:
            if acc is not None:
                acc = acc * acc % m
                acc2 = acc2 * acc2 % m2
            for tab, tab2, u in zip(self.tables, other.tables, row, strict=True):
                if u:
                    if acc is None:
                        acc, acc2 = tab[u], tab2[u]
                    else:
                        acc = acc * tab[u] % m
                        acc2 = acc2 * tab2[u] % m2
        if acc is None:
            return mpz(1), mpz(1)
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
    ``beta``, joined at the end by one product mod ``root``. At a 2048-bit Paillier ``n``
    this takes 30-40 % fewer CPU seconds per power than :class:`FixedBaseTable` (measured
    in ``benchmarks/paillier.py``), for the same exponents and the same results.

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
        self.factors: list[list[Any]] = []
        self.betas: list[list[Any]] = []
        for k in range(self.blocks):
            fac, bet, invs = [mpz(1)], [mpz(0)], [mpz(1)]
            for u in range(1, 1 << self.window):
                parent = u ^ (1 << (u.bit_length() - 1))
                px, pbeta, pinv = powers[(u.bit_length() - 1) * a + k * b]
                q, x = divmod(fac[parent] * px, r)
                inv = invs[parent] * pinv % r
                fac.append(x)
                bet.append((bet[parent] + pbeta + q * inv) % r)
                invs.append(inv)
            self.factors.append(fac)
            self.betas.append(bet)

    def _evaluate(self, steps: list[list[int]]) -> Any:
        m, r = self.modulus, self.root
        acc = None
        total = 0
        for row in steps:
            if acc is not None:
                acc = acc * acc % m
                total <<= 1
            held = None  # two half-size factors, one reduction: cheaper than two
            for fac, bet, u in zip(self.factors, self.betas, row, strict=True):
                if u:
                    total += bet[u]
                    if held is None:
                        held = fac[u]
                    else:
                        acc = held * fac[u] if acc is None else acc * (held * fac[u]) % m
                        held = None
            if held is not None:
                acc = held if acc is None else acc * held % m
        if acc is None:
            return mpz(1)
        return (acc + r * (acc % r * (total % r) % r)) % m

    def _evaluate_pair(self, other: FixedBaseTable, steps: list[list[int]]) -> tuple[Any, Any]:
        """Both tables' powers for one exponent in one loop, as
        :meth:`FixedBaseTable._evaluate_pair` (``other`` a split table of the same layout)."""
        if not isinstance(other, SquareModulusTable):
            raise TypeError("both tables must be split tables")
        m, r, m2, r2 = self.modulus, self.root, other.modulus, other.root
        acc: Any = None
        acc2: Any = None
        total = total2 = 0
        columns = list(zip(self.factors, self.betas, other.factors, other.betas, strict=True))
        for row in steps:
            if acc is not None:
                acc = acc * acc % m
                acc2 = acc2 * acc2 % m2
                total <<= 1
                total2 <<= 1
            held: Any = None
            held2: Any = None
            for (fac, bet, fac2, bet2), u in zip(columns, row, strict=True):
                if u:
                    total += bet[u]
                    total2 += bet2[u]
                    if held is None:
                        held, held2 = fac[u], fac2[u]
                    elif acc is None:
                        acc, acc2, held = held * fac[u], held2 * fac2[u], None
                    else:
                        acc = acc * (held * fac[u]) % m
                        acc2 = acc2 * (held2 * fac2[u]) % m2
                        held = None
            if held is not None:
                if acc is None:
                    acc, acc2 = held, held2
                else:
                    acc = acc * held % m
                    acc2 = acc2 * held2 % m2
        if acc is None:
            return mpz(1), mpz(1)
        return (
            (acc + r * (acc % r * (total % r) % r)) % m,
            (acc2 + r2 * (acc2 % r2 * (total2 % r2) % r2)) % m2,
        )


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
