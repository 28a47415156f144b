"""Local frequent-itemset mining: the transaction database and three miners.

Every party runs these on its own data, and the centralized reference of the distributed
protocols (issue 5) is the same code run on the pooled data.

The data structure is :class:`~ppdm.mining.transactions.TransactionDB` (re-exported
here): rows are transactions, columns are items, stored as CSR with packed ``uint64``
bit-columns per item built on demand. The readers of :mod:`ppdm.mining.readers` build it;
this module uses them, never the other way round.

The miners follow the literature:

* :func:`apriori` -- level-wise search with the candidate generation ``apriori_gen`` =
  :func:`join_step` + :func:`prune_step` of Agrawal & Srikant (VLDB 1994), supports
  counted on bitsets; see Aggarwal 2015, §20.3 ("reminiscent of Apriori pruning in
  frequent itemset mining") and the distributed mining of section 20.5.
* :func:`eclat` -- Zaki's (IEEE TKDE 2000) depth-first search on the vertical layout: the
  tid-set of ``P + {x}`` is the intersection of tid-sets; here the tid-sets of all
  extensions of a prefix are intersected in one vectorized numpy call.
* :func:`fpgrowth` -- Han, Pei & Yin's (SIGMOD 2000) pattern growth: items are processed
  from the least frequent, and each item's *conditional pattern base* (the prefix paths of
  the transactions containing it, in descending-frequency order) is mined recursively.
  The FP-tree's prefix sharing is replaced by merging identical weighted paths in a
  boolean matrix, which is what the tree compresses.

The single definition of "frequent" is :func:`min_count`.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np

from ppdm.mining import readers
from ppdm.mining.kernel import COMPILED, ItemsetForest, mine_forest
from ppdm.mining.transactions import TransactionDB
from ppdm.progress import Progress, progress_task

__all__ = [
    "TransactionDB",
    "apriori",
    "apriori_gen",
    "as_transaction_db",
    "eclat",
    "fpgrowth",
    "frequent_itemsets",
    "frequent_itemsets_df",
    "join_step",
    "min_count",
    "prune_step",
    "support_counts",
]

log = logging.getLogger(__name__)

Method = Literal["auto", "fpgrowth", "apriori", "eclat"]

# Bytes of bitsets materialized at once when counting a batch of Apriori candidates.
_CHUNK_BYTES = 32 << 20
# Largest dense boolean matrix (cells) FP-growth builds for its top level; beyond it the
# conditional pattern bases are read from the sparse rows item by item.
_DENSE_CELLS = 16 << 20


def min_count(min_support: float, n: int) -> int:
    """The smallest support count that makes an itemset frequent in ``n`` transactions.

    An itemset with support count ``c`` is frequent iff ``c >= min_support * n``. To make
    the comparison immune to float error (``0.3 * 10`` is ``3.0000000000000004`` in IEEE
    double, so a naive ``ceil`` would demand 4), the threshold is defined as the smallest
    integer ``c`` with ``c / n >= min_support`` where ``c / n`` is one correctly rounded
    IEEE division -- exactly the test ``support >= min_support`` of mlxtend's apriori and
    of association-rule tools that report relative supports. A ratio that equals the
    decimal threshold (3 of 10 at 0.3) therefore counts as frequent.

    Parameters
    ----------
    min_support : float
        Relative minimum support, ``0 < min_support <= 1``.
    n : int
        Number of transactions.

    Returns
    -------
    int
        The count threshold, at least 1 (``n + 1`` when nothing can be frequent, which
        only happens for ``n == 0``).

    Examples
    --------
    >>> min_count(0.3, 10)
    3
    >>> min_count(0.25, 10)
    3
    >>> min_count(1.0, 7)
    7
    """
    s = float(min_support)
    if not (0.0 < s <= 1.0) or math.isnan(s):
        raise ValueError(f"min_support must be in (0, 1], got {min_support!r}")
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if n == 0:
        return 1
    c = max(1, min(n, math.ceil(s * n)))
    while c > 1 and (c - 1) / n >= s:
        c -= 1
    while c <= n and c / n < s:
        c += 1
    return c


def _popcount_rows(x: np.ndarray) -> np.ndarray:
    """Number of set bits in each row of a 2-D ``uint64`` array, as int64."""
    if x.shape[1] == 0:
        return np.zeros(x.shape[0], dtype=np.int64)
    return np.bitwise_count(x).sum(axis=1, dtype=np.int64)


def support_counts(db: TransactionDB, itemsets: Iterable[Iterable[Any]]) -> np.ndarray:
    """Support counts of many itemsets (labels), as an ``int64`` array in input order.

    Same values as :meth:`TransactionDB.support_count` per itemset, computed in batches:
    single items from :meth:`TransactionDB.item_counts`, longer itemsets by AND-ing the
    rows of one packed bit matrix of their distinct items, a chunk of equal-length
    itemsets at a time.
    """
    sets = [set(s) for s in itemsets]
    out = np.zeros(len(sets), dtype=np.int64)
    by_len: dict[int, tuple[list[int], list[list[int]]]] = {}
    for i, s in enumerate(sets):
        if not s:
            out[i] = db.n_transactions
            continue
        try:
            pos = sorted(db.item_position(x) for x in s)
        except KeyError:
            continue  # a label not in the database: support 0
        idx, rows = by_len.setdefault(len(pos), ([], []))
        idx.append(i)
        rows.append(pos)
    if 1 in by_len:
        idx, rows = by_len.pop(1)
        out[idx] = db.item_counts()[np.array(rows, dtype=np.int64)[:, 0]]
    if not by_len:
        return out
    distinct = np.unique(np.concatenate([np.ravel(rows) for _, rows in by_len.values()]))
    bits = db.bit_matrix(distinct)
    for idx, rows in by_len.values():
        arr = np.searchsorted(distinct, np.array(rows, dtype=np.int64))
        out[np.array(idx, dtype=np.int64)] = _and_counts(bits, arr)
    return out


def _and_counts(bits: np.ndarray, arr: np.ndarray) -> np.ndarray:
    """Popcount of the AND of the rows ``arr[i]`` of the bit matrix ``bits``, for every
    ``i`` (``arr`` is ``(c, k)``), a chunk of at most ``_CHUNK_BYTES`` at a time."""
    out = np.empty(len(arr), dtype=np.int64)
    step = max(1, _CHUNK_BYTES // max(8 * bits.shape[1], 1))
    for lo in range(0, len(arr), step):
        a = arr[lo : lo + step]
        acc = bits[a[:, 0]]
        for j in range(1, a.shape[1]):
            np.bitwise_and(acc, bits[a[:, j]], out=acc)
        out[lo : lo + step] = _popcount_rows(acc)
    return out


# -- Apriori candidate generation ---------------------------------------------------------


def join_step(frequent_k: Iterable[tuple]) -> list[tuple]:
    """Apriori join: merge two frequent k-itemsets that share their first ``k - 1`` items.

    Itemsets are sorted tuples; the result is sorted and holds ``p + (a, b)`` for every
    pair ``p + (a,)``, ``p + (b,)`` of the input with ``a < b`` (Agrawal & Srikant 1994,
    ``apriori-gen``; the same join drives Incognito in Aggarwal 2015, §20.3).

    Examples
    --------
    >>> join_step([(1, 2, 3), (1, 2, 4), (1, 3, 4), (1, 3, 5), (2, 3, 4)])
    [(1, 2, 3, 4), (1, 3, 4, 5)]
    """
    level = sorted(set(frequent_k))
    out: list[tuple] = []
    for _, group in itertools.groupby(level, key=lambda t: t[:-1]):
        g = list(group)
        for i, a in enumerate(g):
            for b in g[i + 1 :]:
                out.append(a + b[-1:])
    return out


def prune_step(candidates: Iterable[tuple], frequent_k: Iterable[tuple]) -> list[tuple]:
    """Apriori prune: drop every candidate with a k-subset that is not frequent
    (downward closure).

    Examples
    --------
    >>> prune_step([(1, 2, 3, 4), (1, 3, 4, 5)],
    ...            [(1, 2, 3), (1, 2, 4), (1, 3, 4), (1, 3, 5), (2, 3, 4)])
    [(1, 2, 3, 4)]
    """
    freq = set(frequent_k)
    out = []
    for c in candidates:
        if all(c[:i] + c[i + 1 :] in freq for i in range(len(c))):
            out.append(c)
    return out


def apriori_gen(frequent_k: Iterable[tuple]) -> list[tuple]:
    """Candidate (k+1)-itemsets: :func:`prune_step` of :func:`join_step`.

    Examples
    --------
    >>> apriori_gen([(1, 2, 3), (1, 2, 4), (1, 3, 4), (1, 3, 5), (2, 3, 4)])
    [(1, 2, 3, 4)]
    """
    level = list(frequent_k)
    return prune_step(join_step(level), level)


# -- miners -------------------------------------------------------------------------------


def _check_max_len(max_len: int | None) -> int:
    if max_len is None:
        return 1 << 30
    if int(max_len) < 1:
        raise ValueError(f"max_len must be positive, got {max_len}")
    return int(max_len)


def _to_labels(db: TransactionDB, found: dict[tuple, int]) -> dict[frozenset, int]:
    labels = db.items.tolist()
    return {frozenset(labels[i] for i in k): int(v) for k, v in found.items()}


def apriori(
    db: TransactionDB,
    min_support: float,
    *,
    max_len: int | None = None,
    progress: Progress | None = None,
) -> dict[frozenset, int]:
    """Frequent itemsets by level-wise Apriori (Agrawal & Srikant, VLDB 1994).

    Level ``k + 1`` candidates come from :func:`apriori_gen` on level ``k``; their supports
    are counted by AND-ing the items' bit-columns, a batch of candidates at a time.

    Returns ``{frozenset(labels): support count}`` for every itemset with count
    ``>= min_count(min_support, n)``.
    """
    minc = min_count(min_support, db.n_transactions)
    max_len = _check_max_len(max_len)
    counts = db.item_counts()
    freq1 = np.flatnonzero(counts >= minc)
    found: dict[tuple, int] = {(int(i),): int(counts[i]) for i in freq1}
    if len(freq1) == 0:
        return {}
    bits = db.bit_matrix(freq1)
    row_of = {int(p): r for r, p in enumerate(freq1)}
    level = [(int(i),) for i in freq1]
    k = 1
    with progress_task(progress, "apriori levels", None) as prog:
        while level and k < max_len:
            cands = apriori_gen(level)
            prog.advance()
            if not cands:
                break
            arr = np.array([[row_of[x] for x in c] for c in cands], dtype=np.int64)
            sup = _and_counts(bits, arr)
            keep = np.flatnonzero(sup >= minc)
            level = [cands[i] for i in keep]
            for i in keep:
                found[cands[i]] = int(sup[i])
            k += 1
            log.debug("apriori level %d: %d candidates, %d frequent", k, len(cands), len(level))
    return _to_labels(db, found)


def eclat(
    db: TransactionDB,
    min_support: float,
    *,
    max_len: int | None = None,
    progress: Progress | None = None,
) -> dict[frozenset, int]:
    """Frequent itemsets by Eclat (Zaki, IEEE TKDE 2000) on packed bitsets.

    Depth-first over prefixes in ascending-support order; the tid-sets of a prefix's
    extensions are intersections of ``uint64`` bit-columns, with the words that are zero
    in the prefix dropped from its children (tid-set shrinking on sparse data). The search
    is :func:`ppdm.mining.kernel.mine_forest`: compiled when the extension is built, else
    one vectorized numpy call per prefix class.
    """
    forest = eclat_forest(db, min_support, max_len=max_len, progress=progress)
    return forest.to_dict()


def eclat_forest(
    db: TransactionDB,
    min_support: float,
    *,
    max_len: int | None = None,
    progress: Progress | None = None,
    compiled: bool | None = None,
) -> ItemsetForest:
    """:func:`eclat`'s itemsets as arrays (an :class:`~ppdm.mining.kernel.ItemsetForest`),
    without a Python object per itemset: what :func:`frequent_itemsets_df` and the rules
    in bulk (:func:`ppdm.mining.rules.rule_table`) read. ``compiled=False`` forces the
    numpy search (same result)."""
    minc = min_count(min_support, db.n_transactions)
    max_len = _check_max_len(max_len)
    with progress_task(progress, "eclat", 1) as prog:
        forest = mine_forest(db, minc, max_len, compiled=compiled)
        prog.advance()
    return forest


def fpgrowth(
    db: TransactionDB,
    min_support: float,
    *,
    max_len: int | None = None,
    progress: Progress | None = None,
) -> dict[frozenset, int]:
    """Frequent itemsets by FP-growth (Han, Pei & Yin, SIGMOD 2000).

    The database is re-encoded over the frequent items in descending-support order and
    identical rows are merged with a weight (the FP-tree's path counts). For every item
    ``x``, from the least frequent up, the conditional pattern base is the set of weighted
    prefixes (the columns before ``x``) of the rows containing ``x``; its frequent items
    form the conditional database, mined recursively with ``x`` appended to the suffix.
    """
    minc = min_count(min_support, db.n_transactions)
    max_len = _check_max_len(max_len)
    counts = db.item_counts()
    freq1 = np.flatnonzero(counts >= minc)
    if len(freq1) == 0:
        return {}
    order = freq1[np.lexsort((freq1, -counts[freq1]))]  # descending support
    m = len(order)
    found: dict[tuple, int] = {}
    if m * db.n_transactions <= _DENSE_CELLS:
        mat = db.to_dense(order)
        mat, w = _merge_rows(mat[mat.any(axis=1)], None)
        with progress_task(progress, "fpgrowth", m) as prog:
            _fp_rec((), mat, w, order, counts[order], minc, max_len, found, prog)
        return _to_labels(db, found)
    rank = np.full(db.n_items, -1, dtype=np.int64)
    rank[order] = np.arange(m)
    entry_rank = rank[db.indices]
    colptr, tids = db.tidlists()
    with progress_task(progress, "fpgrowth", m) as prog:
        # The top level reads each item's conditional pattern base straight from the sparse
        # rows, so that no dense matrix over all frequent items is ever built.
        for j in range(m - 1, -1, -1):
            p = int(order[j])
            found[(p,)] = int(counts[p])
            prog.advance()
            if j == 0 or max_len == 1:
                continue
            rows = tids[colptr[p] : colptr[p + 1]]
            lens = db.indptr[rows + 1] - db.indptr[rows]
            starts = np.repeat(db.indptr[rows] - (np.cumsum(lens) - lens), lens)
            ent = starts + np.arange(int(lens.sum()))
            er = entry_rank[ent]
            sel = (er >= 0) & (er < j)
            local_row = np.repeat(np.arange(len(rows), dtype=np.int64), lens)[sel]
            cols = er[sel]
            c = np.bincount(cols, minlength=j)
            keep = np.flatnonzero(c >= minc)
            if len(keep) == 0:
                continue
            if len(keep) == 1:
                found[(int(order[keep[0]]), p)] = int(c[keep[0]])
                continue
            new_col = np.full(j, -1, dtype=np.int64)
            new_col[keep] = np.arange(len(keep))
            nc = new_col[cols]
            ok = nc >= 0
            sub = np.zeros((len(rows), len(keep)), dtype=bool)
            sub[local_row[ok], nc[ok]] = True
            sub = sub[sub.any(axis=1)]
            sub, w = _merge_rows(sub, None)
            _fp_rec((p,), sub, w, order[keep], c[keep], minc, max_len, found, None)
    return _to_labels(db, found)


def _merge_rows(mat: np.ndarray, w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Merge identical boolean rows, summing their weights."""
    r = mat.shape[0]
    if w is None:
        w = np.ones(r, dtype=np.int64)
    if r < 32 or mat.shape[1] == 0:
        return mat, w
    packed = np.packbits(mat, axis=1)
    width = packed.shape[1]
    keys = np.ascontiguousarray(packed).view(np.dtype((np.void, width))).ravel()
    uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    if len(uniq) == r:
        return mat, w
    return mat[first], np.bincount(inv.ravel(), weights=w, minlength=len(uniq)).astype(np.int64)


def _fp_rec(
    suffix: tuple,
    mat: np.ndarray,
    w: np.ndarray,
    ids: np.ndarray,
    cnts: np.ndarray,
    minc: int,
    max_len: int,
    found: dict[tuple, int],
    prog: Progress | None,
) -> None:
    id_list = ids.tolist()
    cnt_list = cnts.tolist()
    for j in range(len(id_list) - 1, -1, -1):
        new = (id_list[j], *suffix)
        found[new] = cnt_list[j]
        if j > 0 and len(new) < max_len:
            rows = mat[:, j]
            base = mat[rows, :j]
            bw = w[rows]
            c = bw @ base if len(bw) else np.zeros(j, dtype=np.int64)
            keep = np.flatnonzero(c >= minc)
            if len(keep):
                if len(keep) == 1:
                    found[(id_list[keep[0]], *new)] = int(c[keep[0]])
                else:
                    sub = base[:, keep]
                    nonempty = sub.any(axis=1)
                    sub, sw = _merge_rows(sub[nonempty], bw[nonempty])
                    _fp_rec(new, sub, sw, ids[keep], c[keep], minc, max_len, found, None)
        if prog is not None:
            prog.advance()


def _auto(
    db: TransactionDB,
    min_support: float,
    *,
    max_len: int | None = None,
    progress: Progress | None = None,
) -> dict[frozenset, int]:
    """The fastest search measured (``benchmarks/mining.py``): the compiled Eclat when
    the extension is built, else the numpy FP-growth."""
    miner = eclat if COMPILED else fpgrowth
    return miner(db, min_support, max_len=max_len, progress=progress)


_MINERS = {"auto": _auto, "apriori": apriori, "eclat": eclat, "fpgrowth": fpgrowth}


#: What :func:`as_transaction_db` accepts, for error messages.
TRANSACTIONS_TYPES = (
    "a TransactionDB, a one-hot pandas DataFrame (one bool or 0/1 column per item, as "
    "mlxtend's TransactionEncoder writes), a DataFrame with one column of item lists, a "
    "pandas Series of item lists, or a list of transactions (each a list of items)"
)


def as_transaction_db(data: Any, *, argument: str = "transactions") -> TransactionDB:
    """``data`` as a :class:`TransactionDB`; accepts every layout notebooks use.

    Parameters
    ----------
    data
        A :class:`TransactionDB` (returned as it is); a one-hot pandas DataFrame (columns
        are items, values bool or 0/1, rows are transactions); a DataFrame with a single
        column whose cells are lists (tuples, sets) of items; a pandas Series of such
        lists; or a list/tuple of transactions.
    argument : str
        The parameter name used in the error message.

    Raises
    ------
    TypeError
        For any other type, naming the accepted ones.

    Examples
    --------
    >>> import pandas as pd
    >>> as_transaction_db(pd.DataFrame({"a": [True, False], "b": [True, True]})).n_transactions
    2
    >>> list(as_transaction_db(pd.DataFrame({"basket": [["x", "y"], ["y"]]})).transactions())
    [('x', 'y'), ('y',)]
    >>> as_transaction_db("milk")
    Traceback (most recent call last):
    ...
    TypeError: transactions must be a TransactionDB, a one-hot pandas DataFrame ...
    """
    if isinstance(data, TransactionDB):
        return data

    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None  # type: ignore[assignment]
    if pd is not None and isinstance(data, pd.DataFrame):
        dt0 = data.dtypes.iloc[0] if data.shape[1] == 1 else None
        if dt0 is not None and not (
            pd.api.types.is_bool_dtype(dt0)
            or pd.api.types.is_integer_dtype(dt0)
            or isinstance(dt0, pd.SparseDtype)
        ):
            return _from_list_cells(data.iloc[:, 0], argument, readers)
        bad = [
            c
            for c, dt in zip(data.columns, data.dtypes, strict=True)
            if not (
                pd.api.types.is_bool_dtype(dt)
                or pd.api.types.is_integer_dtype(dt)
                or isinstance(dt, pd.SparseDtype)
            )
        ]
        if bad:
            raise TypeError(
                f"{argument}: a DataFrame of transactions must be one-hot (bool or 0/1 "
                f"columns, one per item) or have a single column of item lists; column "
                f"{bad[0]!r} has dtype {data[bad[0]].dtype}"
            )
        return readers.from_onehot(data)
    if pd is not None and isinstance(data, pd.Series):
        return _from_list_cells(data, argument, readers)
    if isinstance(data, list | tuple):
        for t in data:
            if isinstance(t, str | bytes) or not isinstance(t, Iterable):
                raise TypeError(
                    f"{argument}: each transaction must be a list of items, got {type(t).__name__}"
                )
        return readers.from_transactions(data)
    raise TypeError(f"{argument} must be {TRANSACTIONS_TYPES}; got {type(data).__name__}")


def _from_list_cells(column: Any, argument: str, readers: Any) -> TransactionDB:
    cells = column.tolist()
    for c in cells:
        if isinstance(c, str | bytes) or not isinstance(c, list | tuple | set | frozenset):
            raise TypeError(
                f"{argument}: a DataFrame of transactions must be one-hot (bool or 0/1 "
                f"columns, one per item) or have a single column of item lists (tuples, "
                f"sets); got a column holding {type(c).__name__}"
            )
    return readers.from_transactions(cells)


def frequent_itemsets(
    db: TransactionDB | Any,
    min_support: float,
    *,
    method: Method = "auto",
    max_len: int | None = None,
    progress: Progress | None = None,
) -> dict[frozenset, int]:
    """All frequent itemsets of ``db`` with their support counts.

    Parameters
    ----------
    db : TransactionDB or DataFrame or list
        The transactions, in any layout :func:`as_transaction_db` accepts (a one-hot
        DataFrame, a column of item lists, a list of lists).
    min_support : float
        Relative threshold in ``(0, 1]``; an itemset is frequent iff its count is at least
        :func:`min_count` ``(min_support, db.n_transactions)``.
    method : {'auto', 'eclat', 'fpgrowth', 'apriori'}
        The search; all return the same result. ``'auto'`` (the default) is the compiled
        Eclat kernel when built (:mod:`ppdm.mining.kernel`), else the numpy FP-growth.
    max_len : int, optional
        Longest itemset to report.
    progress : Progress, optional
        Progress sink (advanced once per frequent item, or per Apriori level).

    Returns
    -------
    dict[frozenset, int]
        ``{itemset of original labels: support count}``.

    Examples
    --------
    The running example of Agrawal & Srikant (1994), at 50% support:

    >>> from ppdm.mining.readers import from_transactions
    >>> db = from_transactions([[1, 3, 4], [2, 3, 5], [1, 2, 3, 5], [2, 5]])
    >>> found = frequent_itemsets(db, 0.5)
    >>> sorted((sorted(k), v) for k, v in found.items())  # doctest: +NORMALIZE_WHITESPACE
    [([1], 2), ([1, 3], 2), ([2], 3), ([2, 3], 2), ([2, 3, 5], 2), ([2, 5], 3), ([3], 3),
     ([3, 5], 2), ([5], 3)]
    """
    try:
        miner = _MINERS[method]
    except KeyError:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(_MINERS)}") from None
    db = as_transaction_db(db, argument="db")
    return miner(db, min_support, max_len=max_len, progress=progress)


def frequent_itemsets_df(
    data: TransactionDB | Any,
    min_support: float = 0.5,
    *,
    use_colnames: bool = True,
    max_len: int | None = None,
    verbose: int = 0,
    low_memory: bool = False,
    n_jobs: int = 1,
    null_values: bool = False,
    method: Method = "auto",
    progress: Progress | None = None,
) -> Any:
    """:func:`frequent_itemsets` as a pandas DataFrame in mlxtend's layout.

    Columns ``support`` (relative, float) and ``itemsets`` (frozensets), like
    ``mlxtend.frequent_patterns.fpgrowth(df, min_support=..., use_colnames=True)``; rows
    sorted by decreasing support, then size and items (deterministic). Feed it to
    :func:`ppdm.mining.rules.association_rules_df` (or to mlxtend's
    ``association_rules``) for the rules. The frame is built once from the kernel's arrays
    (:func:`eclat_forest`) when ``method`` is ``'auto'`` or ``'eclat'``.

    Parameters
    ----------
    data
        The transactions in any layout :func:`as_transaction_db` accepts.
    min_support : float
        Relative threshold in ``(0, 1]`` (mlxtend's default 0.5).
    use_colnames : bool
        Items as labels (the default here, mlxtend's ``use_colnames=True``) or, when False,
        as the column positions of a one-hot DataFrame (of the sorted labels otherwise),
        as mlxtend reports them.
    max_len : int, optional
        Longest itemset to report.
    verbose, low_memory, n_jobs
        mlxtend's execution options, accepted so that its calls run unchanged; they do not
        change the result.
    null_values : bool
        mlxtend's missing-value mode; only False is supported.
    method, progress
        As in :func:`frequent_itemsets`.

    Examples
    --------
    >>> import pandas as pd
    >>> onehot = pd.DataFrame({"bread": [1, 1, 0, 1], "milk": [1, 0, 1, 1]}).astype(bool)
    >>> found = frequent_itemsets_df(onehot, min_support=0.5, use_colnames=True)
    >>> list(found.columns), found["support"].tolist()
    (['support', 'itemsets'], [0.75, 0.75, 0.5])
    >>> [sorted(s) for s in found["itemsets"]]
    [['bread'], ['milk'], ['bread', 'milk']]
    >>> [sorted(s) for s in frequent_itemsets_df(onehot, 0.5, use_colnames=False)["itemsets"]]
    [[0], [1], [0, 1]]
    """
    import pandas as pd

    del verbose, low_memory, n_jobs  # execution options of mlxtend; same result
    if null_values:
        raise ValueError(
            "frequent_itemsets_df: null_values=True (mlxtend's missing-value "
            "mode) is not supported; fill or drop missing cells first"
        )
    db = as_transaction_db(data, argument="data")
    n = db.n_transactions
    if use_colnames:
        names = [_native_label(x) for x in db.items.tolist()]
    elif isinstance(data, pd.DataFrame) and (
        data.shape[1] != 1 or _onehot_dtype(pd, data.dtypes.iloc[0])
    ):
        col = {c: i for i, c in enumerate(data.columns)}
        names = [col[x] for x in db.items.tolist()]
    else:
        names = list(range(db.n_items))
    if method in ("auto", "eclat") and (COMPILED or method == "eclat"):
        forest = eclat_forest(db, min_support, max_len=max_len, progress=progress)
        members = forest.members()
        counts = forest.count
    else:
        found = frequent_itemsets(
            db, min_support, method=method, max_len=max_len, progress=progress
        )
        sets = [db.item_positions(k) for k in found]
        width = max((len(x) for x in sets), default=0)
        members = np.full((len(sets), width), -1, dtype=np.int64)
        for i, x in enumerate(sets):
            members[i, : len(x)] = x
        counts = np.fromiter(found.values(), dtype=np.int64, count=len(found))
    sizes = (members >= 0).sum(axis=1) if members.size else np.ones(len(counts), np.int64)
    # Positions follow the sorted labels, so sorting positions sorts the labels.
    keys = [members[:, j] for j in range(members.shape[1] - 1, -1, -1)]
    order = np.lexsort([*keys, sizes, -counts]) if len(counts) else np.zeros(0, np.int64)
    rows = members[order].tolist()
    return pd.DataFrame(
        {
            "support": pd.Series(counts[order] / n, dtype=float),
            "itemsets": pd.Series(
                [frozenset([names[i] for i in r if i >= 0]) for r in rows], dtype=object
            ),
        }
    )


def _onehot_dtype(pd: Any, dt: Any) -> bool:
    return bool(
        pd.api.types.is_bool_dtype(dt)
        or pd.api.types.is_integer_dtype(dt)
        or isinstance(dt, pd.SparseDtype)
    )


def _native_label(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x
