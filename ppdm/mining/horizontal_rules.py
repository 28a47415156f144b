"""Association rules over horizontally partitioned data (Kantarcioglu & Clifton 2004).

Kantarcioglu and Clifton, "Privacy-preserving distributed mining of association rules on
horizontally partitioned data", IEEE TKDE 16(9), 2004; Aggarwal 2015, §20.5 and figure
20.6. Every party holds some of the transactions (its customers' baskets); together they
find the frequent itemsets and rules of the pooled transactions.

Per level ``k`` (Apriori over the pooled data):

1. Each party finds its *locally large* candidates: ``C_1`` is its own items, ``C_k``
   (``k > 1``) is ``apriori_gen(L_{k-1})`` of the public global result; a candidate is
   locally large if its local count reaches ``min_count(s, |DB_i|)``. A globally large
   itemset is locally large at some party, so nothing is missed.
2. The parties compute the **secure union** of their locally large itemsets
   (:func:`ppdm.protocols.set_union.secure_set_union`, with fake itemsets): the union is
   public, who contributed what is not.
3. For every itemset of the union, each party counts it locally and the parties decide
   whether ``sum_i count_i >= T`` where ``T = min_count(s, N)`` and ``N`` is the pooled
   number of transactions (a secure sum at the start): by default with
   :func:`ppdm.protocols.threshold.secure_sum_nonnegative` (masked ring sum of the excess
   supports plus a secure comparison), so that no count is revealed; with
   ``reveal_counts=True`` (the parties agree to publish exact global counts) by a plain
   secure sum of the counts.

**Minimum aggregation** (``min_aggregate = m > 0``; issue 21). Plain KC publishes an
itemset supported by one basket of one party once the pooled count reaches ``T``, and a
party that sets its own support of ``X`` to ``T - 1`` (it chooses its data) turns "is
``X`` frequent" into "does any other party hold a basket with ``X``": a membership test
on the others' data. With ``m > 0`` an itemset is *released* only if

(a) its pooled support reaches ``max(T, m)``, and
(b) for every set ``J`` of ``colluders`` parties (default 1: every single party), the
    support of the parties outside ``J`` reaches ``m``,

so no released itemset rests on fewer than ``m`` baskets outside any ``colluders``
parties, whatever those parties chose as their own data. Both are decided by one
:func:`ppdm.protocols.threshold.secure_all_nonnegative` call per level over the union
(``1 + C(n, colluders)`` tests per itemset: each party's excess, with its count zeroed in
the tests of the coalitions it belongs to), which reveals only the conjunction per
itemset: revealing (a) alone would still answer the crafted membership test above, and
revealing the tests of (b) one by one would answer "does any party but ``j`` and me hold
``X``". The released itemsets are closed under subsets, so Apriori's candidate generation
over them loses nothing, and the result equals the centralized result filtered by (a)
and (b). With ``reveal_counts`` the counts are summed after the test, for the released
itemsets only.

Rules ``X -> Y`` are decided the same way: with ``min_confidence = p/q`` (its decimal
value), ``q * count(XY) - p * count(X) >= 0`` summed over the parties, or computed from the
published counts. Candidate rules come from released itemsets only, so each rule's bit is
a function of two released supports (each resting on at least ``m`` baskets outside any
``colluders`` parties) and says no more than their published counts would. As with
published counts, the difference of the two, ``count(X) - count(XY)`` (the baskets with
``X`` but not ``Y``), is not itself bounded: a rule at confidence 1 answers whether that
cell is empty.

Leakage (semi-honest): the pooled number of transactions ``N``; unless ``label_bytes`` is
given, the longest item label at any party rounded up to 4, 8, 16, ... bytes; per level, the union of
the locally large itemsets and which of them are globally large (KC's accepted leakage),
plus the secure union's own leakage (docs/protocols/set-union.md: the collector
``P_0`` learns how many locally large itemsets each group of parties shares, not which);
with ``reveal_counts`` the global counts of the union's itemsets (with
``min_aggregate > 0``: of the released ones only). No party learns another party's
counts or which party holds which locally large itemset. Not bounded by
``min_aggregate``: the union itself says that some party holds at least its local
threshold ``min_count(s, |DB_i|)`` of baskets with each itemset, fewer than ``m`` at a
party with few transactions or under a tiny ``min_support`` (a membership answer that
the policy must weigh; a party crafting probes learns nothing from it, since it puts its
probes in the union itself).

Cost per level: one secure union, one batched threshold test (or secure sum) over the
union; one more batched test for the candidate rules. With ``min_aggregate > 0`` the
level's test has ``1 + C(n, colluders)`` entries per union
itemset and ``C(n, colluders)`` ANDs per itemset, ``ceil(log2(1 + C(n, colluders)))``
more hops: with 3 parties about 4x the test's bytes and 11 hops instead of 9
(docs/mining.md has measurements). Every test compares supports, which the pooled
number of transactions ``N`` bounds (public: a secure sum at the start), so its secure
comparisons run on about ``log2(n N)`` bits (``bound`` of
:func:`~ppdm.protocols.threshold.secure_sum_nonnegative`) instead of 63: on the
click-stream BMS-WebView-1 at 0.5 % the job sends 0.6 MB instead of 1.7 MB and takes 2
hops fewer. The mining stops without a union at the first level whose candidates
(``apriori_gen`` of the public frequent itemsets) are empty: every party knows it. A
party's own counting is a few numpy calls per level: level 1 from its item counts,
level 2 (every pair of the frequent items) from the pairs inside its transactions by one
``bincount`` when that is cheaper than one AND per candidate pair (short baskets), longer
candidates by packed-bit ANDs. What remains is mostly the unions' scalar multiplications
(each party multiplies every set once and the deduplicated union once: ``n m + u``
points per level, about 23 µs each) and the threshold tests' OT extensions
(docs/mining.md, "Where the time goes"; ``benchmarks/horizontal_profile.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import combinations
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ppdm.mining.assoc_common import (
    AssocResult,
    candidate_rules,
    confidence_fraction,
    decode_itemset,
    encode_itemset,
    native_label,
)
from ppdm.mining.itemsets import (
    TransactionDB,
    apriori_gen,
    as_transaction_db,
    min_count,
    support_counts,
)
from ppdm.parties.network import Network
from ppdm.progress import Progress, progress_or_null
from ppdm.protocols.ot.extension import OTSession
from ppdm.protocols.secure_sum import secure_sum
from ppdm.protocols.set_union import secure_set_union
from ppdm.protocols.threshold import (
    compare_session,
    secure_all_nonnegative,
    secure_sum_nonnegative,
)

log = logging.getLogger(__name__)

__all__ = [
    "LABEL_WIDTHS",
    "LocalCounter",
    "TransactionCounter",
    "agree_label_bytes",
    "horizontal_association_rules",
]


@runtime_checkable
class LocalCounter(Protocol):
    """What a party counts on: its number of transactions, its item labels (sorted) and
    the local support counts of a level's candidates. :class:`TransactionCounter` wraps
    an in-memory :class:`~ppdm.mining.itemsets.TransactionDB`; a data source too large for
    memory gives a streamed counter (:class:`ppdm.sources.StreamedCounter`)."""

    n_transactions: int
    items: np.ndarray

    def count(self, candidates: Sequence[tuple]) -> np.ndarray:
        """Support counts of ``candidates`` (tuples of labels), ``int64``, in order."""
        ...


class TransactionCounter:
    """The in-memory local counter: :func:`~ppdm.mining.itemsets.support_counts`."""

    def __init__(self, db: TransactionDB) -> None:
        self.db = db
        self.n_transactions = db.n_transactions
        self.items = db.items

    def count(self, candidates: Sequence[tuple]) -> np.ndarray:
        fast = _count_sorted_tuples(self.db, candidates)
        return support_counts(self.db, candidates) if fast is None else fast

    def item_counts(self) -> np.ndarray:
        """The count of every label of :attr:`items`, aligned (level 1 in one call)."""
        return self.db.item_counts()

    def pair_counts(self, labels: Sequence[Any]) -> np.ndarray | None:
        """Level 2 in one call: the ``f x f`` matrix whose entry ``[a, b]`` (``a < b``)
        is the count of the pair ``(labels[a], labels[b])`` (``labels`` sorted and
        distinct; a label this party lacks counts 0), or ``None`` when counting the
        pairs inside the transactions would cost more than packed-bit ANDs."""
        db, f = self.db, len(labels)
        out = np.zeros((f, f), dtype=np.int64)
        if f < 2 or db.n_transactions == 0 or db.n_items == 0:
            return out
        kind = db.items.dtype
        try:  # labels beyond the dtype (or of another kind) raise
            arr = np.array(labels, dtype=kind if kind.kind in "iu" else None)
        except (OverflowError, TypeError, ValueError):
            return None
        if arr.shape != (f,) or arr.dtype.kind != kind.kind:
            return None
        pos = np.searchsorted(db.items, arr)
        found = np.flatnonzero(db.items[np.minimum(pos, db.n_items - 1)] == arr)
        if len(found) < 2:
            return out
        pairs = _pair_matrix(db, pos[found], budget=_and_cost(f * (f - 1) // 2, db))
        if pairs is None:
            return None
        out[np.ix_(found, found)] = pairs
        return out


#: Bytes of packed bit-columns AND-ed at once by :func:`_count_sorted_tuples`.
_AND_CHUNK_BYTES = 32 << 20


def _count_sorted_tuples(db: TransactionDB, candidates: Sequence[tuple]) -> np.ndarray | None:
    """Support counts of a level's candidates in a few numpy calls, or ``None`` when they
    are not the shape Apriori makes (tuples of one length ``>= 2``, strictly increasing
    labels of the database's kind); the caller then counts with
    :func:`~ppdm.mining.itemsets.support_counts`, which gives the same numbers.

    The labels become positions by one ``searchsorted`` over the sorted item labels
    (no Python lookup per item), and each candidate's count is the popcount of the AND
    of its items' packed bit-columns."""
    if not candidates or db.n_transactions == 0 or db.n_items == 0:
        return None
    k = len(candidates[0])
    if k < 2:
        return None
    kind = db.items.dtype
    try:  # ragged tuples (numpy >= 1.24) or labels beyond the dtype raise
        labels = np.array(candidates, dtype=kind if kind.kind in "iu" else None)
    except (OverflowError, TypeError, ValueError):
        return None
    if labels.shape != (len(candidates), k) or labels.dtype.kind != kind.kind:
        return None
    if not np.all(labels[:, 1:] > labels[:, :-1]):
        return None
    pos = np.searchsorted(db.items, labels)
    found = np.all(db.items[np.minimum(pos, db.n_items - 1)] == labels, axis=1)
    out = np.zeros(len(candidates), dtype=np.int64)
    if not found.any():
        return out
    distinct, rows = np.unique(pos[found], return_inverse=True)
    rows = rows.reshape(-1, k)
    if k == 2:
        pairs = _pair_matrix(db, distinct, budget=_and_cost(len(rows), db))
        if pairs is not None:
            out[found] = pairs[rows[:, 0], rows[:, 1]]
            return out
    bits = _packed_columns(db, distinct)
    counts = np.empty(len(rows), dtype=np.int64)
    step = max(1, _AND_CHUNK_BYTES // max(bits.shape[1] * bits.itemsize, 1))
    for lo in range(0, len(rows), step):
        part = rows[lo : lo + step]
        acc = bits[part[:, 0]]
        for j in range(1, k):
            np.bitwise_and(acc, bits[part[:, j]], out=acc)
        counts[lo : lo + step] = np.bitwise_count(acc).sum(axis=1, dtype=np.int64)
    out[found] = counts
    return out


#: Item pairs :func:`_pair_matrix` enumerates per numpy pass (a few int64 arrays of that
#: length, about 8 MB each; a longer database takes several passes).
_PAIR_CHUNK = 1 << 20
#: The cost of ANDing and counting one packed word, in pairs :func:`_pair_matrix` could
#: enumerate instead (measured: about 3.7 ns a word, 10 ns a pair).
_AND_WORD_COST = 0.35


def _and_cost(n_candidates: int, db: TransactionDB) -> int:
    """What counting ``n_candidates`` pairs by packed-bit ANDs costs, in enumerated pairs."""
    return int(n_candidates * db.n_words * _AND_WORD_COST)


def _pair_matrix(db: TransactionDB, positions: np.ndarray, *, budget: int) -> np.ndarray | None:
    """The co-occurrence counts of the item ``positions`` (sorted, distinct): entry
    ``[a, b]`` (``a < b``) is the support of the pair ``(positions[a], positions[b])``.
    Built from the pairs inside each transaction (restricted to those items) by
    ``bincount``, which beats one AND per candidate pair when the transactions are
    short (click streams, T10I4D100K: level 2's candidates are every pair of the
    frequent items, but a basket holds few of them). ``None`` when the pairs inside the
    transactions plus the ``f x f`` matrix exceed ``budget`` (what the ANDs would cost,
    in the same unit: :func:`_and_cost`): then the caller ANDs."""
    f = len(positions)
    col_of = np.full(db.n_items, -1, dtype=np.int64)
    col_of[positions] = np.arange(f)
    col = col_of[db.indices]
    keep = np.flatnonzero(col >= 0)
    col = col[keep]  # a row's columns stay increasing: positions are sorted
    length = np.bincount(db.row_ids()[keep], minlength=db.n_transactions)
    pair_ends = np.cumsum(length * (length - 1) // 2)
    n_pairs = int(pair_ends[-1]) if len(pair_ends) else 0
    if n_pairs + f * f > budget:
        return None
    ends = np.cumsum(length)
    out = np.zeros(f * f, dtype=np.int64)
    r0 = 0
    while r0 < db.n_transactions:  # rows in passes of about _PAIR_CHUNK pairs
        base = int(pair_ends[r0 - 1]) if r0 else 0
        r1 = max(r0 + 1, int(np.searchsorted(pair_ends, base + _PAIR_CHUNK, side="right")))
        e0 = int(ends[r0 - 1]) if r0 else 0
        out += _row_pairs(col[e0 : int(ends[r1 - 1])], length[r0:r1], f)
        r0 = r1
    return out.reshape(f, f)


def _row_pairs(col: np.ndarray, length: np.ndarray, f: int) -> np.ndarray:
    """``bincount`` of ``a * f + b`` over the pairs ``a < b`` inside each row (``col``
    holds the rows' increasing columns one after the other, ``length`` their lengths)."""
    row = np.repeat(np.arange(len(length)), length)
    start = np.cumsum(length) - length  # first entry of every row in ``col``
    after = length[row] - (np.arange(len(col)) - start[row]) - 1  # later entries in its row
    first = np.repeat(np.arange(len(col)), after)
    n_pairs = len(first)
    second = first + 1 + np.arange(n_pairs) - np.repeat(np.cumsum(after) - after, after)
    return np.bincount(col[first] * f + col[second], minlength=f * f)


def _packed_columns(db: TransactionDB, positions: np.ndarray) -> np.ndarray:
    """Packed bit-columns of the item ``positions`` (sorted, distinct), one row each: from
    the row-wise entries of only those items when a dense ``len(positions) x
    n_transactions`` boolean fits in :data:`_AND_CHUNK_BYTES` (a level's few frequent
    items; no sort of the whole database), else :meth:`TransactionDB.bit_matrix`."""
    if len(positions) * db.n_transactions > _AND_CHUNK_BYTES:
        return db.bit_matrix(positions)
    col_of = np.full(db.n_items, -1, dtype=np.int64)
    col_of[positions] = np.arange(len(positions))
    col = col_of[db.indices]
    keep = np.flatnonzero(col >= 0)
    dense = np.zeros((len(positions), 64 * db.n_words), dtype=bool)
    dense[col[keep], db.row_ids()[keep]] = True
    return np.packbits(dense, axis=1).view(np.uint64)  # whole words: 8x fewer popcounts


#: The label widths (bytes) :func:`agree_label_bytes` rounds up to.
LABEL_WIDTHS = (4, 8, 16, 32, 64, 128, 255)


def local_label_bytes(db: TransactionDB | LocalCounter) -> int:
    """Bytes the longest label of ``db`` needs (ints: big-endian, strings: UTF-8)."""
    items = np.asarray(db.items)
    if not len(items):
        return 1
    if np.issubdtype(items.dtype, np.integer):  # one max, not a Python call per label
        widest = max(abs(int(items.max())), abs(int(items.min())))
        return max(1, (widest.bit_length() + 7) // 8)
    labels = [native_label(x) for x in items.tolist()]
    if isinstance(labels[0], str):
        return max(len(x.encode("utf-8")) for x in labels)
    return max(1, max((int(x).bit_length() + 7) // 8 for x in labels))


def agree_label_bytes(
    net: Network, db: TransactionDB | LocalCounter, *, session: OTSession | None = None
) -> int:
    """The label width every party uses: the longest label at any party, rounded up to
    :data:`LABEL_WIDTHS`.

    For each width ``w`` of the list the parties decide with one batched
    :func:`~ppdm.protocols.threshold.secure_sum_nonnegative` whether some party needs
    more than ``w`` bytes; they learn the rounded maximum width, not whose label it is nor
    any party's own width. Cost: one threshold test over ``len(LABEL_WIDTHS) - 1`` values.
    """
    need = local_label_bytes(db)
    if need > LABEL_WIDTHS[-1]:
        raise ValueError(f"an item label is longer than {LABEL_WIDTHS[-1]} bytes")
    above = np.array([int(need > w) for w in LABEL_WIDTHS[:-1]], dtype=np.int64)
    if net.me == net.parties[0]:
        above -= 1  # sum over the parties >= 0 iff at least one party needs more
    some = secure_sum_nonnegative(net.scoped("assoc/label-width"), above, session=session, bound=1)
    return LABEL_WIDTHS[int(np.count_nonzero(some))]


def horizontal_association_rules(
    net: Network,
    db: TransactionDB | LocalCounter | Any,
    *,
    min_support: float,
    min_confidence: float,
    reveal_counts: bool = False,
    max_len: int | None = None,
    label_bytes: int | None = None,
    fake_ratio: float = 0.25,
    min_aggregate: int = 0,
    colluders: int = 1,
    progress: Progress | None = None,
) -> AssocResult:
    """Frequent itemsets and rules of the parties' pooled transactions (module docstring).

    Every party calls this with its own transactions ``db`` (a :class:`TransactionDB`, or
    a one-hot DataFrame / a column of item lists, see
    :func:`ppdm.mining.itemsets.as_transaction_db`). Item labels must be all ints (each
    fitting in ``label_bytes`` bytes) or all strings (at most ``label_bytes`` UTF-8
    bytes). With ``label_bytes=None`` (the default) the width is chosen from the data by
    :func:`agree_label_bytes`: the longest label at any party, rounded up to 4, 8, 16,
    32, 64, 128 or 255 bytes (one batched threshold test; every party learns that
    rounded width and nothing else). ``db`` may also be a :class:`LocalCounter` that
    counts each level's candidates from the party's data source in bounded memory.

    ``min_aggregate`` (``m``, default 0: plain Kantarcioglu & Clifton) and ``colluders``
    (``c``, default 1) set the release rule of the module docstring: an itemset is
    released only if its pooled support reaches ``max(T, m)`` and, for every set ``J`` of
    ``c`` parties, the support outside ``J`` reaches ``m``; one secure test per level
    reveals only whether both hold. With ``m > 0`` there must be more than ``c`` parties.

    Returns
    -------
    AssocResult
        The same at every party: frequent itemsets (with global counts when
        ``reveal_counts``) and rules.
    """
    min_count(min_support, 1)  # validates min_support
    coalitions = _coalitions(net.parties, min_aggregate, colluders)
    counter: LocalCounter
    if isinstance(db, LocalCounter) and not isinstance(db, TransactionDB):
        counter = db
    else:
        counter = TransactionCounter(as_transaction_db(db, argument="db"))
    db = counter
    # One OT session between the first and the last party serves every threshold test of
    # the job (label widths, each level, the rules): its base OTs run once, not per test.
    session = compare_session(net, "assoc/compare")
    if label_bytes is None:
        label_bytes = agree_label_bytes(net, db, session=session)
    frac = confidence_fraction(min_confidence)
    prog = progress_or_null(progress)
    n_total = int(secure_sum(net.scoped("assoc/size"), int(db.n_transactions)))
    threshold = min_count(min_support, n_total)
    # Public bound on every party's test entries (a support is at most the pooled number
    # of transactions): the secure comparisons run on ~log2(3 n_total) bits, not 63.
    bound = max(n_total, threshold, min_aggregate, 1)
    local_threshold = min_count(min_support, db.n_transactions) if db.n_transactions else 1
    kind: type = int
    if len(db.items) and isinstance(native_label(db.items[0]), str):
        kind = str
    frequent: dict[frozenset, int | None] = {}
    levels: list[dict[str, Any]] = []
    prev: list[tuple] = []
    local_of: dict[tuple, int] = {}  # this party's count of every union itemset so far
    k = 1
    prog.start("association levels", max_len)
    while max_len is None or k <= max_len:
        sub = net.scoped(f"assoc/level{k}")
        level = _level(counter, prev, k)
        if k > 1 and level.empty:
            # apriori_gen of the public L_{k-1} is the same at every party: all stop
            # here together, without a union that could only hold fakes.
            levels.append({"k": k, "candidates_union": 0, "frequent": 0})
            log.info("level %d: no candidates", k)
            prog.advance()
            break
        locally_large = level.locally_large(local_threshold) if db.n_transactions else []
        encoded = [encode_itemset(c, label_bytes=label_bytes) for c in locally_large]
        max_bytes = k * (label_bytes if kind is int else label_bytes + 1)
        union_bytes = secure_set_union(
            sub.scoped("union"), encoded, max_item_bytes=max_bytes, fake_ratio=fake_ratio
        )
        union = sorted(
            tuple(sorted(decode_itemset(b, label_bytes=label_bytes, kind=kind)))
            for b in union_bytes
        )
        if union:
            # Every union itemset is a candidate of this level (at level 1, an item this
            # party lacks counts 0): reuse the local counts instead of counting again.
            counts = level.union_counts(union)
            local_of.update(zip(union, counts.tolist(), strict=True))
            totals = None
            if coalitions:
                large_mask = _release_test(
                    sub.scoped("release"),
                    counts,
                    threshold,
                    min_aggregate,
                    coalitions,
                    session,
                    bound=bound,
                )
                if reveal_counts:  # the counts of the released itemsets only
                    totals = np.zeros(len(union), dtype=np.int64)
                    if large_mask.any():
                        totals[large_mask] = secure_sum(sub.scoped("count"), counts[large_mask])
            elif reveal_counts:
                totals = secure_sum(sub.scoped("count"), counts)
                large_mask = totals >= threshold
            else:
                excess = counts.copy()
                if net.me == net.parties[0]:
                    excess -= threshold
                large_mask = secure_sum_nonnegative(
                    sub.scoped("test"), excess, session=session, bound=bound
                )
        else:
            large_mask = np.zeros(0, dtype=bool)
            totals = None
        large = [c for c, ok in zip(union, large_mask, strict=True) if ok]
        for i, c in enumerate(union):
            if large_mask[i]:
                frequent[frozenset(c)] = int(totals[i]) if totals is not None else None
        levels.append({"k": k, "candidates_union": len(union), "frequent": len(large)})
        log.info("level %d: union of %d locally large, %d frequent", k, len(union), len(large))
        prog.advance()
        if not large:
            break
        prev = large
        k += 1
    prog.finish()
    if reveal_counts:
        return AssocResult.with_counts(
            n_total,
            min_support,
            min_confidence,
            {key: int(v) for key, v in frequent.items() if v is not None},
            levels,
        )
    rules = _private_rules(net, local_of, list(frequent), frac, session, n_total=n_total)
    return AssocResult(n_total, min_support, min_confidence, frequent, rules, False, levels)


def _single_items(counter: LocalCounter) -> tuple[list[tuple], np.ndarray]:
    """Level 1's candidates (every item of this party, as 1-tuples of plain labels) and
    their local counts, aligned. A counter with ``item_counts()`` (both the in-memory and
    the streamed one) gives every single-item count in one array, with no per-item
    lookup; another counter is asked through :meth:`LocalCounter.count`."""
    items = np.asarray(counter.items)
    labels = items.tolist()  # plain ints / strs, in the items' order
    if items.dtype == object:
        labels = [native_label(x) for x in labels]
    candidates = [(x,) for x in labels]
    item_counts = getattr(counter, "item_counts", None)
    if callable(item_counts):
        counts = np.asarray(item_counts(), dtype=np.int64)
        if counts.shape == (len(candidates),):
            return candidates, counts
    if not candidates:
        return candidates, np.zeros(0, dtype=np.int64)
    return candidates, np.asarray(counter.count(candidates), dtype=np.int64)


class _Explicit:
    """A level's candidates as tuples, with this party's counts (aligned)."""

    def __init__(self, candidates: list[tuple], counts: np.ndarray) -> None:
        self.candidates, self.counts = candidates, np.asarray(counts)
        self.empty = not candidates

    def locally_large(self, local_threshold: int) -> list[tuple]:
        keep = np.flatnonzero(self.counts >= local_threshold)
        return [self.candidates[i] for i in keep.tolist()]

    def union_counts(self, union: list[tuple]) -> np.ndarray:
        return _union_counts(union, self.candidates, self.counts)


class _Items:
    """Level 1 from the counter's item counts: labels (sorted, ``int`` or ``str``) and
    counts as arrays, a tuple only per locally large item (retail: 16,470 items a party,
    70 locally large)."""

    def __init__(self, items: np.ndarray, counts: np.ndarray) -> None:
        self.items, self.counts = items, counts
        self.empty = not len(items)

    def locally_large(self, local_threshold: int) -> list[tuple]:
        return [(x,) for x in self.items[self.counts >= local_threshold].tolist()]

    def union_counts(self, union: list[tuple]) -> np.ndarray:
        """This party's count of every union item (0 for an item it lacks)."""
        kind = str if self.items.dtype.kind == "U" else int
        out = np.zeros(len(union), dtype=np.int64)
        for n, c in enumerate(union):
            if len(c) != 1 or type(c[0]) is not kind:
                continue
            try:  # a label beyond the items' dtype is not among them
                i = int(np.searchsorted(self.items, c[0]))
            except (OverflowError, TypeError):
                continue
            if i < len(self.items) and self.items[i] == c[0]:
                out[n] = self.counts[i]
        return out


class _Pairs:
    """Level 2's candidates (every pair of the frequent items ``labels``, sorted) held
    as the counter's co-occurrence matrix: no tuple per candidate pair, only per
    locally large one (on a click stream at 0.5 %: 11,175 candidates, 60 large)."""

    def __init__(self, labels: list[Any], matrix: np.ndarray) -> None:
        self.labels, self.matrix = labels, matrix
        self.empty = len(labels) < 2

    def locally_large(self, local_threshold: int) -> list[tuple]:
        a, b = np.nonzero(np.triu(self.matrix >= local_threshold, 1))  # row-major order
        labels = self.labels
        return [(labels[i], labels[j]) for i, j in zip(a.tolist(), b.tolist(), strict=True)]

    def union_counts(self, union: list[tuple]) -> np.ndarray:
        """This party's count of every union pair (0 for a pair of anything else)."""
        at = {x: i for i, x in enumerate(self.labels)}
        out = np.zeros(len(union), dtype=np.int64)
        for n, c in enumerate(union):
            if len(c) == 2 and c[0] in at and c[1] in at and at[c[0]] < at[c[1]]:
                out[n] = self.matrix[at[c[0]], at[c[1]]]
        return out


def _level(counter: LocalCounter, prev: list[tuple], k: int) -> _Explicit | _Items | _Pairs:
    """Level ``k``'s candidates and this party's counts of them: level 1 from the item
    counts (:class:`_Items`, or :func:`_single_items`); level 2 from a co-occurrence matrix when the counter gives one
    (``pair_counts``, as :class:`TransactionCounter` does); else ``apriori_gen`` of
    the public ``prev`` and :meth:`LocalCounter.count`."""
    if k == 1:
        items = np.asarray(counter.items)
        item_counts = getattr(counter, "item_counts", None)
        if items.dtype.kind in "iuU" and callable(item_counts):
            counts = np.asarray(item_counts(), dtype=np.int64)
            if counts.shape == items.shape:
                return _Items(items, counts)
        return _Explicit(*_single_items(counter))
    pair_counts = getattr(counter, "pair_counts", None)
    if k == 2 and callable(pair_counts):
        labels = sorted({x for (x,) in prev})
        matrix = pair_counts(labels)
        if matrix is not None:
            return _Pairs(labels, np.asarray(matrix))
    candidates = _candidates(prev, k)
    if not candidates:
        return _Explicit([], np.zeros(0, dtype=np.int64))
    return _Explicit(candidates, np.asarray(counter.count(candidates)))


def _candidates(prev: list[tuple], k: int) -> list[tuple]:
    """``apriori_gen(prev)``, the level's public candidates; at level 2 it is every pair
    of the frequent items in order (no 1-subset to prune), made by
    ``itertools.combinations`` in C instead of the join's Python loop."""
    if k == 2:
        return list(combinations(sorted({x for (x,) in prev}), 2))
    return apriori_gen(prev)


def _union_counts(union: list[tuple], candidates: list[tuple], counts: np.ndarray) -> np.ndarray:
    """This party's count of every union itemset, looked up among its level's
    ``candidates`` (an itemset it does not have as a candidate counts 0)."""
    counted = dict(zip(candidates, np.asarray(counts).tolist(), strict=True))
    return np.array([counted.get(c, 0) for c in union], dtype=np.int64)


def _coalitions(
    parties: Sequence[str], min_aggregate: int, colluders: int
) -> list[tuple[str, ...]]:
    """The party sets whose support :func:`_release_test` leaves out (none when
    ``min_aggregate`` is 0)."""
    if isinstance(min_aggregate, bool) or not isinstance(min_aggregate, int | np.integer):
        raise ValueError("min_aggregate must be a non-negative integer")
    if isinstance(colluders, bool) or not isinstance(colluders, int | np.integer):
        raise ValueError("colluders must be a positive integer")
    if min_aggregate < 0:
        raise ValueError("min_aggregate must be a non-negative integer")
    if colluders < 1:
        raise ValueError("colluders must be a positive integer")
    if not min_aggregate:
        return []
    if colluders >= len(parties):
        raise ValueError(
            "min_aggregate needs more parties than colluders: with every party colluding "
            "no support lies outside them"
        )
    return list(combinations(parties, colluders))


def _release_test(
    net: Network,
    counts: np.ndarray,
    threshold: int,
    min_aggregate: int,
    coalitions: list[tuple[str, ...]],
    session: OTSession | None,
    *,
    bound: int | None = None,
) -> np.ndarray:
    """Which itemsets are released: pooled support ``>= max(threshold, min_aggregate)``
    and, for every coalition ``J``, the support outside ``J`` ``>= min_aggregate``.

    One :func:`~ppdm.protocols.threshold.secure_all_nonnegative` call over ``len(counts)``
    rows of ``1 + len(coalitions)`` tests; every party learns only the row results, never
    a single test (a single test would answer "does anyone but me hold X" for a party
    that sets its own count just below the bar)."""
    first = net.me == net.parties[0]
    table = np.empty((len(counts), 1 + len(coalitions)), dtype=np.int64)
    table[:, 0] = counts - (max(threshold, min_aggregate) if first else 0)
    for j, coalition in enumerate(coalitions, start=1):
        table[:, j] = 0 if net.me in coalition else counts
        if first:
            table[:, j] -= min_aggregate
    return secure_all_nonnegative(net, table, session=session, bound=bound)


def _private_rules(
    net: Network,
    local_of: dict[tuple, int],
    itemsets: list[frozenset],
    frac: Any,
    session: OTSession | None,
    *,
    n_total: int | None = None,
) -> list[dict[str, Any]]:
    """Confident rules decided by secure threshold tests, no count revealed. Both ``X | Y``
    and ``X`` are frequent, so this party's counts of them are already in ``local_of``."""
    cands = candidate_rules(itemsets)
    if not cands:
        return []
    p, q = frac.numerator, frac.denominator
    # Looked up by set: one frozenset per itemset here instead of a sort per rule.
    of_set = {frozenset(k): v for k, v in local_of.items()}
    z_counts = np.array([of_set[x | y] for x, y in cands], dtype=np.int64)
    x_counts = np.array([of_set[x] for x, _ in cands], dtype=np.int64)
    excess = q * z_counts - p * x_counts
    # q z - p x lies in [-p N, q N] at every party (0 <= z <= x <= N): a public bound.
    bound = None if n_total is None else max(p, q) * max(n_total, 1)
    ok = secure_sum_nonnegative(net.scoped("assoc/rules"), excess, session=session, bound=bound)
    return [
        {"antecedent": sorted(x), "consequent": sorted(y)}
        for (x, y), good in zip(cands, ok, strict=True)
        if good
    ]
