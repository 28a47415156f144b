"""The local mining kernel: Eclat on packed bit-columns, compiled or in numpy.

Every party runs local frequent-itemset mining on its critical path, so the search itself
is compiled: ``ppdm/mining/_eclat.c`` (built by ``setup.py`` as an optional extension of
the wheel) runs Zaki's Eclat (IEEE TKDE 2000) over ``uint64`` bit-columns with tid-set
shrinking, releases the GIL, and returns the result as arrays instead of one Python object
per itemset. When the extension is not built (no compiler at install time) the same search
runs in numpy, one vectorized AND-and-popcount per prefix class; both return the same
forest, exactly.

The result is an :class:`ItemsetForest`: the frequent itemsets in depth-first order, each
stored as its parent (the itemset one item shorter) plus one item, so that an itemset of
any length costs 16 bytes. :meth:`ItemsetForest.to_dict` builds the ``{frozenset: count}``
mapping of :func:`ppdm.mining.itemsets.frequent_itemsets`, :meth:`ItemsetForest.members`
a padded matrix for vectorized rule generation (:mod:`ppdm.mining.rules`).
"""

from __future__ import annotations

import gc
import importlib
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppdm.mining.transactions import TransactionDB

__all__ = ["COMPILED", "ItemsetForest", "eclat_forest", "mine_forest"]

log = logging.getLogger(__name__)

try:
    # The compiled module (ppdm/mining/_eclat.c) imports nothing of ppdm; loading it by
    # its full name keeps this module from depending on the ppdm.mining package itself.
    _eclat: Any = importlib.import_module("ppdm.mining._eclat")
except ImportError:  # pragma: no cover - the wheel was built without a compiler
    _eclat = None

_PAD = np.iinfo(np.int64).max

#: True when the compiled kernel is available (else the numpy Eclat runs).
COMPILED: bool = _eclat is not None


_GC_LOCK = threading.Lock()
_gc_depth = 0  # blocks inside gc_paused, over every thread
_gc_was_enabled = False  # the collector's state when the first of them entered


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a block builds many small containers (one
    rule, record or itemset each, none of which can form a cycle): otherwise every few
    hundred allocations it rescans all the objects the process holds, which can cost more
    than building them.

    The collector is one switch for the whole process, and parties simulated in one
    process (or a node's concurrent jobs) run such blocks on several threads at once: the
    blocks are counted, and the collector is turned back on only when the last one leaves
    (and only if it was on when the first entered). Otherwise the first thread to leave
    would turn it on under another's block, whose next allocations would then pay for a
    full collection of everything the process holds."""
    global _gc_depth, _gc_was_enabled
    with _GC_LOCK:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()


@dataclass(frozen=True)
class ItemsetForest:
    """Frequent itemsets as a forest in depth-first order.

    Attributes
    ----------
    parent : numpy.ndarray
        ``int32``; index of the itemset with the last item removed, ``-1`` for a single item.
        A parent always comes before its children.
    item : numpy.ndarray
        ``int64``; the item position (into ``labels``) added to the parent.
    count : numpy.ndarray
        ``int64`` support counts.
    labels : numpy.ndarray
        The item labels of the database (``TransactionDB.items``).
    n_transactions : int
        Number of transactions the counts refer to.
    """

    parent: np.ndarray
    item: np.ndarray
    count: np.ndarray
    labels: np.ndarray
    n_transactions: int

    def __len__(self) -> int:
        return len(self.count)

    def sizes(self) -> np.ndarray:
        """Number of items of every itemset."""
        size = np.ones(len(self), dtype=np.int64)
        par = self.parent.astype(np.int64)
        # Walk up all ancestors at once: one vectorized step per level.
        live = np.flatnonzero(par >= 0)
        anc = par[live]
        while len(live):
            size[live] += 1
            anc = par[anc]
            keep = anc >= 0
            live, anc = live[keep], anc[keep]
        return size

    def members(self) -> np.ndarray:
        """``(len, max size)`` ``int64`` matrix of item positions, each row sorted
        ascending and padded with ``-1`` on the right."""
        n = len(self)
        sizes = self.sizes()
        width = int(sizes.max()) if n else 0
        out = np.full((n, width), _PAD, dtype=np.int64)
        par = self.parent.astype(np.int64)
        # Level by level: a row is its parent's row plus its own item.
        for size in range(1, width + 1):
            sel = np.flatnonzero(sizes == size)
            if size > 1:
                out[sel, : size - 1] = out[par[sel], : size - 1]
            out[sel, size - 1] = self.item[sel]
        out.sort(axis=1)
        out[out == _PAD] = -1
        return out

    def to_dict(self) -> dict[frozenset, int]:
        """``{frozenset of labels: support count}``."""
        labels = self.labels.tolist()
        lab = [labels[i] for i in self.item.tolist()]
        tuples: list[tuple] = [()] * len(lab)
        with gc_paused():  # millions of small containers
            for k, p in enumerate(self.parent.tolist()):
                tuples[k] = (*tuples[p], lab[k]) if p >= 0 else (lab[k],)
            return dict(zip(map(frozenset, tuples), self.count.tolist(), strict=True))


#: Largest pair-count matrix (bytes) the compiled kernel builds for its first level.
_PAIR_BYTES = 64 << 20
#: Largest work (sum of squared row lengths over the frequent items) of that pass.
_PAIR_WORK = 4e8


def eclat_forest(
    bits: np.ndarray,
    counts: np.ndarray,
    minc: int,
    max_len: int,
    *,
    indptr: np.ndarray | None = None,
    rows: np.ndarray | None = None,
    compiled: bool | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eclat over the bit-columns ``bits`` (``(m, w)`` ``uint64``, rows in search order,
    all frequent) with support ``counts``: ``(parent, row, count)`` arrays of the forest.

    ``indptr``/``rows``, the transactions as CSR over the rows of ``bits`` (``-1`` for an
    item not among them), let the compiled kernel count all pairs in one pass first and
    skip the intersections of infrequent pairs. ``compiled=False`` forces the numpy
    search (:func:`_eclat_numpy`, same output); by default the compiled one runs when built.
    """
    bits = np.ascontiguousarray(bits, dtype=np.uint64)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    m, w = bits.shape
    if compiled is None:
        compiled = _eclat is not None
    if compiled:
        if _eclat is None:
            raise RuntimeError("the compiled Eclat kernel (ppdm.mining._eclat) is not built")
        use_pairs = indptr is not None and rows is not None and m * m * 4 <= _PAIR_BYTES
        ip, rw = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if use_pairs:
            ip = np.ascontiguousarray(indptr, dtype=np.int64)
            rw = np.ascontiguousarray(rows, dtype=np.int64)
            # The pair pass costs the squared row lengths; skip it on very long rows.
            row_of = np.repeat(np.arange(len(ip) - 1), np.diff(ip))
            lens = np.bincount(row_of[rw >= 0], minlength=len(ip) - 1)
            use_pairs = float(np.dot(lens, lens)) <= _PAIR_WORK
            if not use_pairs:
                ip, rw = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        p, it, c = _eclat.eclat_forest(
            bits, counts, m, w, int(minc), int(max_len), ip, rw, len(ip) - 1, use_pairs
        )
        return (
            np.frombuffer(p, dtype=np.int32),
            np.frombuffer(it, dtype=np.int32).astype(np.int64),
            np.frombuffer(c, dtype=np.int64),
        )
    return _eclat_numpy(bits, counts, minc, max_len)


def _eclat_numpy(
    bits: np.ndarray, counts: np.ndarray, minc: int, max_len: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fallback: the same depth-first search in the same order, one numpy call per
    prefix class."""
    parent: list[int] = []
    rows: list[int] = []
    cnt: list[int] = []

    def mine(pnode: int, b: np.ndarray, ids: list[int], cs: list[int], depth: int) -> None:
        m = len(ids)
        for i in range(m):
            node = len(parent)
            parent.append(pnode)
            rows.append(ids[i])
            cnt.append(cs[i])
            if i + 1 == m or depth + 1 >= max_len:
                continue
            row = b[i]
            nz = np.flatnonzero(row)
            if len(nz) * 4 < len(row) * 3:
                x = b[i + 1 :, nz]
                np.bitwise_and(x, row[nz], out=x)
            else:
                x = np.bitwise_and(b[i + 1 :], row)
            c = np.bitwise_count(x).sum(axis=1, dtype=np.int64)
            keep = np.flatnonzero(c >= minc)
            if len(keep):
                sub = [ids[i + 1 + j] for j in keep.tolist()]
                mine(node, x[keep], sub, c[keep].tolist(), depth + 1)

    mine(-1, bits, list(range(len(bits))), counts.tolist(), 0)
    return (
        np.array(parent, dtype=np.int32),
        np.array(rows, dtype=np.int64),
        np.array(cnt, dtype=np.int64),
    )


def mine_forest(
    db: TransactionDB, minc: int, max_len: int, *, compiled: bool | None = None
) -> ItemsetForest:
    """All itemsets of ``db`` with count ``>= minc`` and at most ``max_len`` items.

    Items are searched in ascending-support order (Eclat's usual heuristic: the classes of
    rare items are small), ties by position. ``compiled`` as in :func:`eclat_forest`."""
    counts = db.item_counts()
    freq1 = np.flatnonzero(counts >= minc)
    order = freq1[np.lexsort((freq1, counts[freq1]))]
    rank = np.full(db.n_items, -1, dtype=np.int64)
    rank[order] = np.arange(len(order))
    if compiled is None:
        compiled = _eclat is not None
    if compiled and _eclat is not None:
        raw = _eclat.pack_bits(db.indptr, rank[db.indices], db.n_transactions, len(order))
        bits = np.frombuffer(raw, dtype=np.uint64).reshape(len(order), db.n_words)
    else:
        bits = db.bit_matrix(order)
    parent, rows, cnt = eclat_forest(
        bits,
        counts[order],
        minc,
        max_len,
        indptr=db.indptr,
        rows=rank[db.indices],
        compiled=compiled,
    )
    return ItemsetForest(parent, order[rows], cnt, db.items, db.n_transactions)
