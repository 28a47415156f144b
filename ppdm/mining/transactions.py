"""The transaction database of local mining: :class:`TransactionDB`.

Rows are transactions, columns are items; the rows are stored as a sparse CSR structure
(so that sparse basket data such as retail fits in memory) and packed ``uint64``
bit-columns per item are built on demand (so that support counting is
``np.bitwise_and`` plus ``np.bitwise_count``).

This module depends on nothing else in :mod:`ppdm.mining`: the readers
(:mod:`ppdm.mining.readers`) build databases and the miners
(:mod:`ppdm.mining.itemsets`) read them, so the two depend on it one way (issue 26).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["TransactionDB"]


@dataclass(eq=False)
class TransactionDB:
    """A transaction database: ``n_transactions`` rows over the item labels ``items``.

    Stored as CSR: the items of transaction ``t`` are ``items[indices[indptr[t]:
    indptr[t + 1]]]``, with ``indices`` strictly increasing inside a row (a transaction is a
    set). Build instances with the readers of :mod:`ppdm.mining.readers`
    (``from_transactions``, ``read_fimi``, ...) or :meth:`from_csr`.

    Attributes
    ----------
    n_transactions : int
        Number of transactions (rows), empty transactions included.
    items : numpy.ndarray
        Sorted distinct item labels (``int64`` for FIMI data, strings for baskets). Items
        may have support 0 (e.g. after :meth:`subset`).
    indptr, indices : numpy.ndarray
        The CSR structure (``int64``): row pointers and item positions into ``items``.

    Notes
    -----
    The column-wise bitset of item ``x`` (:meth:`bitset`) is a packed ``uint64`` array of
    ``ceil(n / 64)`` words in which bit ``t % 64`` of word ``t // 64`` is set iff transaction
    ``t`` contains ``x``. Bitsets are built lazily and cached.

    Examples
    --------
    >>> from ppdm.mining.readers import from_transactions
    >>> db = from_transactions([[1, 2, 3], [1, 2], [2, 3], [1, 3], [1, 2, 3]])
    >>> db.n_transactions, db.items.tolist()
    (5, [1, 2, 3])
    >>> db.support_count({1, 2})
    3
    >>> sorted(db.project([2, 3]).transactions())
    [(2,), (2, 3), (2, 3), (2, 3), (3,)]
    """

    n_transactions: int
    items: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    _csc: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _bits: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _pos: dict[Any, int] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.n_transactions = int(self.n_transactions)
        self.items = np.asarray(self.items)
        self.indptr = np.asarray(self.indptr, dtype=np.int64)
        self.indices = np.asarray(self.indices, dtype=np.int64)
        if self.items.ndim != 1 or self.indptr.ndim != 1 or self.indices.ndim != 1:
            raise ValueError("items, indptr and indices must be 1-D arrays")
        if len(self.indptr) != self.n_transactions + 1:
            raise ValueError("indptr must have n_transactions + 1 entries")
        if self.n_transactions and (self.indptr[0] != 0 or self.indptr[-1] != len(self.indices)):
            raise ValueError("indptr must start at 0 and end at len(indices)")
        if np.any(np.diff(self.indptr) < 0):
            raise ValueError("indptr must be non-decreasing")
        if len(self.indices) and (self.indices.min() < 0 or self.indices.max() >= len(self.items)):
            raise ValueError("indices must be positions into items")
        if len(self.items) > 1 and not np.all(self.items[1:] > self.items[:-1]):
            raise ValueError("items must be sorted and distinct")
        if len(self.indices) > 1:
            rising = self.indices[1:] > self.indices[:-1]
            row_starts = np.zeros(len(self.indices), dtype=bool)
            starts = self.indptr[:-1][np.diff(self.indptr) > 0]
            row_starts[starts] = True
            if not np.all(rising | row_starts[1:]):
                raise ValueError("indices must be strictly increasing within each row")

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_csr(
        cls, n_transactions: int, items: np.ndarray, indptr: np.ndarray, indices: np.ndarray
    ) -> TransactionDB:
        """Build from a validated CSR structure (see the class docstring)."""
        return cls(n_transactions, items, indptr, indices)

    @classmethod
    def from_pairs(
        cls, n_transactions: int, items: np.ndarray, rows: np.ndarray, cols: np.ndarray
    ) -> TransactionDB:
        """Build from ``(row, item position)`` pairs in any order, duplicates allowed."""
        n_items = len(items)
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        if len(rows) != len(cols):
            raise ValueError("rows and cols must have the same length")
        if len(rows) and (rows.min() < 0 or rows.max() >= n_transactions):
            raise ValueError("row index out of range")
        if len(cols) and (cols.min() < 0 or cols.max() >= n_items):
            raise ValueError("item position out of range")
        # Sort, then drop repeats: what np.unique returns, without numpy 2's hash-based
        # unique, which is some 40 times slower than a sort on these keys.
        key = np.sort(rows * max(n_items, 1) + cols)
        key = key[np.diff(key, prepend=-1) != 0]
        r = key // max(n_items, 1)
        c = key % max(n_items, 1)
        indptr = np.zeros(n_transactions + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=n_transactions), out=indptr[1:])
        return cls(n_transactions, items, indptr, c)

    # -- basic access -------------------------------------------------------------------

    def __len__(self) -> int:
        return self.n_transactions

    @property
    def n_items(self) -> int:
        """Number of item labels (columns)."""
        return len(self.items)

    @property
    def n_words(self) -> int:
        """Length in ``uint64`` words of one bit-column."""
        return (self.n_transactions + 63) // 64

    def row_ids(self) -> np.ndarray:
        """The transaction index of every CSR entry (aligned with ``indices``)."""
        return np.repeat(np.arange(self.n_transactions, dtype=np.int64), np.diff(self.indptr))

    def transactions(self) -> Iterator[tuple]:
        """Iterate over the transactions as tuples of item labels in sorted order."""
        labels = self.items.tolist()
        ind = self.indices.tolist()
        ptr = self.indptr.tolist()
        for t in range(self.n_transactions):
            yield tuple(labels[i] for i in ind[ptr[t] : ptr[t + 1]])

    def transaction_lengths(self) -> np.ndarray:
        """Number of items of every transaction."""
        return np.diff(self.indptr)

    def item_position(self, item: Any) -> int:
        """Position of the label ``item`` in :attr:`items`; ``KeyError`` if absent."""
        if self._pos is None:
            self._pos = {x: i for i, x in enumerate(self.items.tolist())}
        key = item.item() if isinstance(item, np.generic) else item
        try:
            return self._pos[key]
        except (KeyError, TypeError):
            raise KeyError(f"item {item!r} is not in the database") from None

    def item_positions(self, itemset: Iterable[Any]) -> np.ndarray:
        """Positions of the labels of ``itemset`` (sorted, distinct)."""
        return np.array(sorted({self.item_position(x) for x in itemset}), dtype=np.int64)

    def item_counts(self) -> np.ndarray:
        """Support count of every single item, aligned with :attr:`items`."""
        return np.bincount(self.indices, minlength=self.n_items).astype(np.int64)

    def to_dense(self, positions: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Boolean matrix ``(n_transactions, k)`` of the given item positions (all items by
        default)."""
        if positions is None:
            out = np.zeros((self.n_transactions, self.n_items), dtype=bool)
            out[self.row_ids(), self.indices] = True
            return out
        positions = np.asarray(positions, dtype=np.int64)
        col_of = np.full(self.n_items, -1, dtype=np.int64)
        col_of[positions] = np.arange(len(positions))
        out = np.zeros((self.n_transactions, len(positions)), dtype=bool)
        c = col_of[self.indices]
        keep = c >= 0
        out[self.row_ids()[keep], c[keep]] = True
        return out

    def to_frame(self) -> Any:
        """The transactions as a one-hot pandas DataFrame: one boolean column per item
        (the column label is the item), one row per transaction -- the layout of
        mlxtend's ``TransactionEncoder`` output, which :func:`as_transaction_db` reads back.

        >>> from ppdm.mining.readers import from_transactions
        >>> from_transactions([["milk", "bread"], ["bread"]]).to_frame()
           bread   milk
        0   True   True
        1   True  False
        """
        import pandas as pd

        return pd.DataFrame(self.to_dense(), columns=self.items.tolist())

    # -- vertical layout ----------------------------------------------------------------

    def tidlists(self) -> tuple[np.ndarray, np.ndarray]:
        """CSC view ``(colptr, tids)``: transactions containing item position ``i`` are
        ``tids[colptr[i]:colptr[i + 1]]`` (sorted)."""
        if self._csc is None:
            order = np.argsort(self.indices, kind="stable")
            tids = self.row_ids()[order]
            colptr = np.zeros(self.n_items + 1, dtype=np.int64)
            np.cumsum(np.bincount(self.indices, minlength=self.n_items), out=colptr[1:])
            self._csc = (colptr, tids)
        return self._csc

    def bit_matrix(self, positions: Sequence[int] | np.ndarray) -> np.ndarray:
        """Packed bit-columns ``(k, n_words)`` (``uint64``) of the given item positions."""
        positions = np.asarray(positions, dtype=np.int64)
        out = np.zeros((len(positions), self.n_words), dtype=np.uint64)
        if len(positions) == 0 or self.n_transactions == 0:
            return out
        colptr, tids = self.tidlists()
        lens = colptr[positions + 1] - colptr[positions]
        starts = np.repeat(colptr[positions], lens)
        offs = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
        t = tids[starts + offs]
        row = np.repeat(np.arange(len(positions), dtype=np.int64), lens)
        key = row * self.n_words + (t >> 6)
        vals = np.left_shift(np.uint64(1), (t & 63).astype(np.uint64))
        if len(key):
            uniq, first = np.unique(key, return_index=True)
            out.reshape(-1)[uniq] = np.bitwise_or.reduceat(vals, first)
        return out

    def bitset(self, item: Any) -> np.ndarray:
        """The packed ``uint64`` bit-column of the label ``item`` (cached, read-only)."""
        p = self.item_position(item)
        b = self._bits.get(p)
        if b is None:
            b = self.bit_matrix([p])[0]
            b.flags.writeable = False
            self._bits[p] = b
        return b

    def cover(self, itemset: Iterable[Any]) -> np.ndarray:
        """Boolean mask of the transactions that contain every item of ``itemset`` (a label
        that is not in the database is contained in none)."""
        mask = np.ones(self.n_transactions, dtype=bool)
        colptr, tids = self.tidlists()
        for item in set(itemset):
            try:
                p = self.item_position(item)
            except KeyError:
                return np.zeros(self.n_transactions, dtype=bool)
            m = np.zeros(self.n_transactions, dtype=bool)
            m[tids[colptr[p] : colptr[p + 1]]] = True
            mask &= m
        return mask

    def support_count(self, itemset: Iterable[Any]) -> int:
        """Number of transactions containing every item of ``itemset`` (``n`` if empty).

        A label that is not in the database has support 0.
        """
        items = set(itemset)
        if not items:
            return self.n_transactions
        try:
            cols = [self.bitset(x) for x in items]
        except KeyError:
            return 0
        acc = cols[0].copy()
        for b in cols[1:]:
            np.bitwise_and(acc, b, out=acc)
        return int(np.bitwise_count(acc).sum(dtype=np.int64))

    # -- partitions ---------------------------------------------------------------------

    def subset(self, rows: Sequence[int] | np.ndarray) -> TransactionDB:
        """Horizontal partition: the transactions ``rows`` (indices or a boolean mask), in
        the given order, over the same item labels."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            if len(rows) != self.n_transactions:
                raise ValueError("boolean row mask has the wrong length")
            rows = np.flatnonzero(rows)
        rows = rows.astype(np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= self.n_transactions):
            raise ValueError("row index out of range")
        lens = self.indptr[rows + 1] - self.indptr[rows]
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        starts = np.repeat(self.indptr[rows], lens)
        offs = np.arange(indptr[-1]) - np.repeat(indptr[:-1], lens)
        return TransactionDB(len(rows), self.items.copy(), indptr, self.indices[starts + offs])

    def project(self, items: Iterable[Any]) -> TransactionDB:
        """Vertical partition: the same transactions restricted to the labels ``items``."""
        pos = self.item_positions(items)
        new_of = np.full(self.n_items, -1, dtype=np.int64)
        new_of[pos] = np.arange(len(pos))
        c = new_of[self.indices]
        keep = c >= 0
        indptr = np.zeros(self.n_transactions + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.row_ids()[keep], minlength=self.n_transactions), out=indptr[1:])
        return TransactionDB(self.n_transactions, self.items[pos], indptr, c[keep])

    def replace_columns(self, items: Iterable[Any], matrix: np.ndarray) -> TransactionDB:
        """A copy in which the columns of the labels ``items`` (sorted order) are replaced
        by the boolean ``matrix`` of shape ``(n_transactions, k)``; used by rule hiding to
        write back sanitized columns."""
        pos = self.item_positions(items)
        matrix = np.asarray(matrix, dtype=bool)
        if matrix.shape != (self.n_transactions, len(pos)):
            raise ValueError(
                f"matrix must have shape {(self.n_transactions, len(pos))}, got {matrix.shape}"
            )
        drop = np.zeros(self.n_items, dtype=bool)
        drop[pos] = True
        keep = ~drop[self.indices]
        r_new, c_new = np.nonzero(matrix)
        rows = np.concatenate([self.row_ids()[keep], r_new])
        cols = np.concatenate([self.indices[keep], pos[c_new]])
        return TransactionDB.from_pairs(self.n_transactions, self.items.copy(), rows, cols)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransactionDB):
            return NotImplemented
        return (
            self.n_transactions == other.n_transactions
            and np.array_equal(self.items, other.items)
            and np.array_equal(self.indptr, other.indptr)
            and np.array_equal(self.indices, other.indices)
        )

    __hash__ = None  # type: ignore[assignment]
