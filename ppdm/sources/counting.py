"""Support counting over a stream of transactions, a chunk of whole transactions at a time.

A source too large for memory gives its transactions as *batches* of ``(tids, items,
valid)`` arrays in the long layout (one row per item of a transaction), ordered so that
the rows of one transaction are contiguous (``ORDER BY tid``, or a file already in that
order); ``valid`` is ``False`` on a row that only marks a transaction (an empty one).
:class:`StreamedCounter` cuts the stream into chunks of whole transactions, builds an
in-memory :class:`~ppdm.mining.itemsets.TransactionDB` of each chunk and adds the chunks'
support counts (:func:`~ppdm.mining.itemsets.support_counts`), so memory is bounded by
the chunk size and time grows linearly with the data. It is the *local counter* that
:func:`ppdm.mining.horizontal_rules.horizontal_association_rules` takes in place of a
whole database: ``n_transactions``, ``items`` and ``count(candidates)``.

The first scan (at construction) finds the number of transactions, the item labels and
their counts (level 1); every later ``count`` call scans once more, reading only the rows
of the candidates' items (the source pushes that filter down: DuckDB into the Parquet
scan, PostgreSQL into its query).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ppdm.extras import require
from ppdm.mining.itemsets import TransactionDB, support_counts
from ppdm.mining.readers import from_row_labels

__all__ = [
    "Batch",
    "BatchStream",
    "StreamedCounter",
    "chunk_database",
    "database_from_rows",
    "label_array",
    "pair_counts",
    "sorted_unique",
    "transaction_chunks",
]

log = logging.getLogger(__name__)

#: One batch of the long layout: transaction ids, item labels, and which rows hold an
#: item (``None``: all of them).
Batch = tuple[np.ndarray, np.ndarray, np.ndarray | None]
#: A function that scans the source once: ``stream(items)`` yields batches, restricted to
#: the rows of ``items`` when it is not ``None`` (marker rows may then be left out).
BatchStream = Callable[[Sequence[Any] | None], Iterator[Batch]]

#: Rows (item occurrences) per chunk: ~4M rows is ~100 MB of CSR and bitsets.
DEFAULT_CHUNK_ROWS = 4_000_000


def label_array(values: Any) -> np.ndarray:
    """Item labels as ``int64`` (integers) or a numpy unicode array (strings)."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "U":
        return arr
    if arr.dtype.kind == "f" and arr.size and np.all(arr == np.floor(arr)):
        return arr.astype(np.int64)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    first = arr.flat[0]
    if isinstance(first, int | np.integer) and not isinstance(first, bool):
        return arr.astype(np.int64)
    return arr.astype(str)


def transaction_chunks(batches: Iterable[Batch], chunk_rows: int) -> Iterator[Batch]:
    """Regroup batches into chunks of at least ``chunk_rows`` rows (the last may be
    smaller) that never split a transaction: the rows of the last transaction of a
    chunk that may continue in the next batch are carried over."""
    parts: list[Batch] = []
    size = 0
    for tids, items, valid in batches:
        if len(tids) == 0:
            continue
        parts.append((tids, items, valid))
        size += len(tids)
        if size < chunk_rows:
            continue
        tids_all, items_all, valid_all = _concat(parts)
        # Rows of the last transaction are a suffix (contiguous); find where it starts.
        same = tids_all == tids_all[-1]
        cut = len(tids_all) - int(np.argmin(same[::-1])) if not same.all() else 0
        if cut == 0:  # one huge transaction: keep collecting
            parts = [(tids_all, items_all, valid_all)]
            continue
        yield tids_all[:cut], items_all[:cut], None if valid_all is None else valid_all[:cut]
        rest = (tids_all[cut:], items_all[cut:], None if valid_all is None else valid_all[cut:])
        parts = [rest]
        size = len(rest[0])
    if parts:
        tids_all, items_all, valid_all = _concat(parts)
        if len(tids_all):
            yield tids_all, items_all, valid_all


def _concat(parts: list[Batch]) -> Batch:
    if len(parts) == 1:
        return parts[0]
    tids = np.concatenate([p[0] for p in parts])
    items = np.concatenate([label_array(p[1]) for p in parts])
    if all(p[2] is None for p in parts):
        return tids, items, None
    valid = np.concatenate(
        [np.ones(len(p[0]), dtype=bool) if p[2] is None else p[2] for p in parts]
    )
    return tids, items, valid


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (one sort and a mask: numpy's hash-based
    ``np.unique`` is much slower on millions of wide integer keys)."""
    s = np.sort(values)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _positions(items: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Position of every label in the sorted ``items`` (a lookup table for small
    non-negative integer labels, else a binary search)."""
    if items.dtype.kind == "i" and len(items) and items[0] >= 0 and items[-1] < (1 << 24):
        table = np.zeros(int(items[-1]) + 1, dtype=np.int64)
        table[items] = np.arange(len(items))
        return table[labels]
    return np.searchsorted(items, labels)


def pair_counts(db: TransactionDB, pairs: Sequence[tuple]) -> np.ndarray:
    """Support counts of 2-itemsets from the item co-occurrence matrix ``X^T X`` of the
    sparse transaction-by-item matrix ``X`` (cost: the sum over transactions of the
    squared length, instead of one bitset AND per pair)."""
    sp = require("scipy.sparse", "stats", "counting the pairs of a streamed data set")

    out = np.zeros(len(pairs), dtype=np.int64)
    if not pairs or db.n_items == 0 or len(db.indices) == 0:
        return out
    x = sp.csr_matrix(
        (np.ones(len(db.indices), dtype=np.int64), db.indices, db.indptr),
        shape=(db.n_transactions, db.n_items),
    )
    co = (x.T @ x).toarray() if db.n_items <= 4096 else (x.T @ x).tocsr()
    pos = {v: i for i, v in enumerate(db.items.tolist())}
    a = np.array([pos.get(_native(p[0]), -1) for p in pairs], dtype=np.int64)
    b = np.array([pos.get(_native(p[1]), -1) for p in pairs], dtype=np.int64)
    ok = (a >= 0) & (b >= 0)
    if ok.any():
        out[ok] = np.asarray(co[a[ok], b[ok]]).ravel()
    return out


def database_from_rows(n: int, row: np.ndarray, labels: np.ndarray) -> TransactionDB:
    """A database of ``n`` transactions from the long layout: ``labels[j]`` is an item
    of transaction ``row[j]`` (any order, repeats count once); the same database as
    :func:`ppdm.mining.readers.from_row_labels`, built with sorts only."""
    labels = label_array(labels)
    if len(labels) == 0:
        return from_row_labels(n, np.zeros(0, np.int64), np.zeros(0, np.int64))
    items = sorted_unique(labels)
    cols = _positions(items, labels)
    m = len(items)
    key = sorted_unique(np.asarray(row, dtype=np.int64) * m + cols)
    r, c = np.divmod(key, m)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=indptr[1:])
    return TransactionDB.from_csr(n, items, indptr, c)


def chunk_database(tids: np.ndarray, items: np.ndarray, valid: np.ndarray | None) -> TransactionDB:
    """The transactions of one chunk (rows of a transaction contiguous) as a database."""
    boundary = np.ones(len(tids), dtype=bool)
    if len(tids) > 1:
        np.not_equal(tids[1:], tids[:-1], out=boundary[1:])
    row = np.cumsum(boundary) - 1
    n = int(boundary.sum())
    if valid is not None:
        row, items = row[valid], items[valid]
    return database_from_rows(n, row, items)


class StreamedCounter:
    """A local counter over a stream of transactions (module docstring).

    Parameters
    ----------
    stream
        Scans the source once per call (see :data:`BatchStream`).
    chunk_rows
        Rows per in-memory chunk.
    """

    def __init__(self, stream: BatchStream, *, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> None:
        if chunk_rows < 1:
            raise ValueError("chunk_rows must be positive")
        self._stream = stream
        self.chunk_rows = int(chunk_rows)
        self.scans = 0
        self.rows_scanned = 0
        n = 0
        labels: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        for db in self._chunks(None):
            n += db.n_transactions
            labels.append(db.items)
            counts.append(db.item_counts())
        self.n_transactions = n
        if labels and sum(len(x) for x in labels):
            every = np.concatenate([label_array(x) for x in labels])
            self.items, inverse = np.unique(every, return_inverse=True)
            self._item_counts = np.bincount(
                inverse.ravel(), weights=np.concatenate(counts), minlength=len(self.items)
            ).astype(np.int64)
        else:
            self.items = np.zeros(0, dtype=np.int64)
            self._item_counts = np.zeros(0, dtype=np.int64)
        self._single = {
            x: int(c) for x, c in zip(self.items.tolist(), self._item_counts, strict=True)
        }

    @property
    def n_items(self) -> int:
        return len(self.items)

    def _chunks(self, items: Sequence[Any] | None) -> Iterator[TransactionDB]:
        self.scans += 1
        for tids, labels, valid in transaction_chunks(self._stream(items), self.chunk_rows):
            self.rows_scanned += len(tids)
            yield chunk_database(tids, labels, valid)

    def item_counts(self) -> np.ndarray:
        """Support count of every label of :attr:`items`."""
        return self._item_counts.copy()

    def count(self, candidates: Sequence[tuple]) -> np.ndarray:
        """Support counts of ``candidates`` (tuples of labels), in order, as ``int64``:
        single items from the first scan, longer itemsets by one more scan."""
        out = np.zeros(len(candidates), dtype=np.int64)
        longer = [i for i, c in enumerate(candidates) if len(set(c)) > 1]
        for i, c in enumerate(candidates):
            s = set(c)
            if not s:
                out[i] = self.n_transactions
            elif len(s) == 1:
                out[i] = self._single.get(_native(next(iter(s))), 0)
        if not longer:
            return out
        wanted = [candidates[i] for i in longer]
        needed = sorted({_native(x) for c in wanted for x in c}, key=_order_key)
        acc = np.zeros(len(wanted), dtype=np.int64)
        pairs = all(len(set(c)) == 2 and len(c) == 2 for c in wanted)
        for db in self._chunks(needed):
            acc += pair_counts(db, wanted) if pairs else support_counts(db, wanted)
        out[np.array(longer, dtype=np.int64)] = acc
        log.debug("counted %d itemsets in scan %d", len(wanted), self.scans)
        return out


def _native(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def _order_key(x: Any) -> tuple[int, Any]:
    return (0, x) if isinstance(x, int) else (1, str(x))
