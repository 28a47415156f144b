"""Readers and writers of transaction data: FIMI ``.dat``, basket CSV, one-hot DataFrames.

Formats
-------
FIMI (the Frequent Itemset Mining Implementations repository format, used by the files in
``shared/data/fimi``): one transaction per line, items as non-negative integers separated by
blanks. Every line is a transaction -- an empty line is an empty transaction -- except that
the newline ending the last line does not start another one. Repeated items in a line count
once.

Basket CSV: one basket per line, item names separated by ``sep`` (CSV quoting allowed),
surrounding blanks stripped, empty fields ignored; labels are strings.

One-hot: a pandas DataFrame with one column per item (the column label is the item) and
boolean or 0/1 values, one row per transaction (the input format of mlxtend).
"""

from __future__ import annotations

import csv
import io
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ppdm.errors import ConfigError
from ppdm.mining.transactions import TransactionDB

__all__ = [
    "from_onehot",
    "from_row_labels",
    "from_transactions",
    "read_basket_csv",
    "read_fimi",
    "write_fimi",
]

PathLike = str | os.PathLike[str]

_EMPTY = np.zeros(0, dtype=np.int64)


def _empty_db(n: int) -> TransactionDB:
    """``n`` empty transactions over no items."""
    return TransactionDB(n, np.array([], dtype=np.int64), np.zeros(n + 1, np.int64), _EMPTY)


def _label_array(labels: list[Any]) -> np.ndarray:
    """Item labels as ``int64`` (all ints), ``str`` (all strings) or ``object``."""
    # The labels' few distinct types, found in C, are checked instead of every label.
    kinds = set(map(type, labels))
    if kinds and all(issubclass(k, int | np.integer) and not issubclass(k, bool) for k in kinds):
        return np.array(labels, dtype=np.int64)
    if kinds and all(issubclass(k, str) for k in kinds):
        return np.array(labels, dtype=str)
    return np.array(labels, dtype=object)


def _from_flat(n: int, row: np.ndarray, labels: np.ndarray) -> TransactionDB:
    """Build a database from parallel arrays (transaction index, label)."""
    if len(labels) == 0:
        return _empty_db(n)
    try:
        items, cols = np.unique(labels, return_inverse=True)
    except TypeError as exc:
        raise ConfigError(f"item labels must be mutually comparable: {exc}") from None
    return TransactionDB.from_pairs(n, items, row, cols.ravel())


def from_row_labels(n: int, rows: np.ndarray, labels: np.ndarray) -> TransactionDB:
    """A database of ``n`` transactions from the long layout: ``labels[j]`` is an item of
    transaction ``rows[j]`` (any order, repeats count once). Used by the streamed sources
    of :mod:`ppdm.sources`, which read tables of ``(transaction, item)`` rows."""
    return _from_flat(int(n), np.asarray(rows, dtype=np.int64), np.asarray(labels))


def from_transactions(transactions: Iterable[Iterable[Any]]) -> TransactionDB:
    """A database from an iterable of transactions, each an iterable of item labels.

    Labels must be mutually comparable (all ints, or all strings).

    Examples
    --------
    >>> db = from_transactions([["milk", "bread"], [], ["bread"]])
    >>> db.n_transactions, db.items.tolist(), list(db.transactions())
    (3, ['bread', 'milk'], [('bread', 'milk'), (), ('bread',)])
    """
    flat: list[Any] = []
    lens: list[int] = []
    for t in transactions:
        if isinstance(t, str | bytes):
            raise ConfigError("a transaction must be an iterable of items, not a string")
        before = len(flat)
        flat.extend(t)
        lens.append(len(flat) - before)
    n = len(lens)
    row = np.repeat(np.arange(n, dtype=np.int64), lens)
    return _from_flat(n, row, _label_array(flat))


def read_fimi(path: PathLike) -> TransactionDB:
    """Read a FIMI ``.dat`` file (see the module docstring for the format).

    Raises
    ------
    ConfigError
        If a token is not a non-negative integer.
    """
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("ascii").replace("\r", "")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: a FIMI file holds ASCII integers only") from None
    if text == "":
        return _empty_db(0)
    if text.endswith("\n"):
        text = text[:-1]
    if text.strip() == "":
        return _empty_db(text.count("\n") + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            tokens = np.fromstring(text.replace("\n", " -1 "), dtype=np.int64, sep=" ")
        except (DeprecationWarning, ValueError):
            raise ConfigError(f"{path}: items must be integers separated by blanks") from None
    sep = tokens == -1
    if np.any(tokens < -1):
        raise ConfigError(f"{path}: items must be non-negative integers")
    n = int(sep.sum()) + 1
    row = np.cumsum(sep)[~sep]
    return _from_flat(n, row, tokens[~sep])


def read_basket_csv(path: PathLike, *, sep: str = ",") -> TransactionDB:
    """Read baskets, one per line, item names separated by ``sep`` (labels are strings)."""
    text = Path(path).read_text(encoding="utf-8")
    if text.endswith("\n"):
        text = text[:-1]
    if text == "":
        return from_transactions([])
    reader = csv.reader(io.StringIO(text + "\n"), delimiter=sep)
    baskets = [[f.strip() for f in rec if f.strip()] for rec in reader]
    return from_transactions(baskets)


def from_onehot(df: Any) -> TransactionDB:
    """A database from a one-hot pandas DataFrame (columns = items, rows = transactions).

    Values must be boolean or 0/1 (sparse DataFrames are accepted).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"b": [True, False], "a": [True, True]})
    >>> list(from_onehot(df).transactions())
    [('a', 'b'), ('a',)]
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise ConfigError("from_onehot expects a pandas DataFrame")
    columns = list(df.columns)
    if len(set(columns)) != len(columns):
        raise ConfigError("one-hot columns (items) must be distinct")
    n = len(df.index)
    if all(isinstance(dt, pd.SparseDtype) for dt in df.dtypes) and len(columns):
        coo = df.sparse.to_coo().tocoo()
        rows, cols, vals = coo.row, coo.col, np.asarray(coo.data)
    else:
        values = df.to_numpy()
        rows, cols = np.nonzero(values)
        vals = values[rows, cols]
    vals = np.asarray(vals)
    if vals.dtype != bool and not np.all((vals == 1) | (vals == 0)):
        raise ConfigError("one-hot values must be boolean or 0/1")
    nz = vals.astype(bool)
    rows, cols = np.asarray(rows)[nz], np.asarray(cols)[nz]
    if len(columns) == 0:
        return _empty_db(n)
    try:
        order = sorted(range(len(columns)), key=lambda i: columns[i])
    except TypeError as exc:
        raise ConfigError(f"item labels must be mutually comparable: {exc}") from None
    items = _label_array([columns[i] for i in order])
    pos_of = np.empty(len(columns), dtype=np.int64)
    pos_of[order] = np.arange(len(columns))
    return TransactionDB.from_pairs(n, items, rows.astype(np.int64), pos_of[cols])


def write_fimi(db: TransactionDB, path: PathLike) -> None:
    """Write ``db`` in FIMI format (integer labels only), items sorted in each line."""
    if db.n_items and not np.issubdtype(db.items.dtype, np.integer):
        raise ConfigError("write_fimi needs integer item labels")
    if db.n_items and db.items.min() < 0:
        raise ConfigError("write_fimi needs non-negative item labels")
    labels = [str(x) for x in db.items.tolist()]
    ind = db.indices.tolist()
    ptr = db.indptr.tolist()
    lines = [
        " ".join(labels[i] for i in ind[ptr[t] : ptr[t + 1]]) for t in range(db.n_transactions)
    ]
    with open(path, "w", encoding="ascii", newline="\n") as fh:
        if lines:
            fh.write("\n".join(lines) + "\n")
