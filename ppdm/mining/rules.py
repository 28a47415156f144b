"""Association rules from frequent itemsets: support, confidence and lift.

A rule ``X -> Y`` (``X``, ``Y`` non-empty and disjoint, ``X | Y`` frequent) has

* support count ``c(X | Y)`` and support ``c(X | Y) / n``,
* confidence ``c(X | Y) / c(X)``,
* lift ``confidence / (c(Y) / n)``,

as in Aggarwal 2015, §20.4 (association rule hiding works on exactly these rules) and
Agrawal & Srikant (VLDB 1994). Rules of one itemset are generated with their ``ap-genrules``
procedure: a consequent is extended only if all its sub-consequents gave confident rules,
because moving items from the antecedent to the consequent can only lower the confidence.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppdm.mining.itemsets import apriori_gen
from ppdm.mining.kernel import gc_paused

__all__ = [
    "METRICS",
    "RULE_COLUMNS",
    "ItemsetTable",
    "Rule",
    "RuleTable",
    "association_rules",
    "association_rules_df",
    "is_confident",
    "rule_measures",
    "rule_table",
    "rules_from_records",
    "rules_to_frame",
    "rules_to_json",
    "rules_to_records",
]

#: Columns of :func:`association_rules_df`, those of mlxtend's ``association_rules``.
RULE_COLUMNS = (
    "antecedents",
    "consequents",
    "antecedent support",
    "consequent support",
    "support",
    "confidence",
    "lift",
    "representativity",
    "leverage",
    "conviction",
    "zhangs_metric",
    "jaccard",
    "certainty",
    "kulczynski",
)


def _native(x: Any) -> Any:
    return x.item() if hasattr(x, "item") and not isinstance(x, str | bytes) else x


def sorted_items(items: Iterable[Any]) -> list[Any]:
    """Items in sorted order, or by ``repr`` when they do not compare (mixed types)."""
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=repr)


@dataclass(frozen=True)
class Rule:
    """An association rule ``antecedent -> consequent`` with its measures.

    Attributes
    ----------
    antecedent, consequent : frozenset
        Non-empty, disjoint item sets (original labels).
    support_count : int
        Transactions containing ``antecedent | consequent``.
    support, confidence, lift : float
        ``support_count / n``, ``support_count / c(antecedent)`` and
        ``confidence / (c(consequent) / n)``.
    """

    antecedent: frozenset
    consequent: frozenset
    support_count: int
    support: float
    confidence: float
    lift: float

    @property
    def itemset(self) -> frozenset:
        """``antecedent | consequent``."""
        return self.antecedent | self.consequent

    @property
    def key(self) -> tuple[frozenset, frozenset]:
        """``(antecedent, consequent)``: what identifies the rule regardless of data."""
        return (self.antecedent, self.consequent)

    def __str__(self) -> str:
        a = ", ".join(map(str, sorted_items(self.antecedent)))
        c = ", ".join(map(str, sorted_items(self.consequent)))
        return f"{{{a}}} -> {{{c}}} (supp={self.support:.4g}, conf={self.confidence:.4g})"


def is_confident(count_xy: int, count_x: int, min_confidence: float) -> bool:
    """The one confidence test: ``count_xy / count_x >= min_confidence``.

    Evaluated as one correctly rounded IEEE division, like :func:`ppdm.mining.itemsets.
    min_count`, so a ratio equal to the decimal threshold (7 of 10 at 0.7) passes.

    >>> is_confident(7, 10, 0.7), is_confident(2, 3, 0.67)
    (True, False)
    """
    if count_x <= 0:
        return False
    return count_xy / count_x >= min_confidence


def association_rules(
    itemsets: Mapping[frozenset, int],
    n_transactions: int,
    *,
    min_confidence: float,
) -> list[Rule]:
    """All confident rules ``X -> Y`` over the frequent ``itemsets``.

    Parameters
    ----------
    itemsets : Mapping[frozenset, int]
        Frequent itemsets with their support counts, closed under subsets (the output of
        :func:`ppdm.mining.itemsets.frequent_itemsets`).
    n_transactions : int
        Number of transactions the counts refer to.
    min_confidence : float
        Threshold in ``[0, 1]``, tested with :func:`is_confident`.

    Returns
    -------
    list[Rule]
        Sorted by decreasing confidence, then decreasing support count, then size and
        items, so the order is deterministic.

    Notes
    -----
    The rules are generated in bulk by :func:`rule_table` (arrays, one numpy pass per
    consequent size); only the returned :class:`Rule` objects are built one by one.

    Examples
    --------
    >>> from ppdm.mining.readers import from_transactions
    >>> from ppdm.mining.itemsets import frequent_itemsets
    >>> db = from_transactions([[1, 3, 4], [2, 3, 5], [1, 2, 3, 5], [2, 5]])
    >>> rules = association_rules(frequent_itemsets(db, 0.5), 4, min_confidence=1.0)
    >>> [str(r) for r in rules]  # doctest: +NORMALIZE_WHITESPACE
    ['{2} -> {5} (supp=0.75, conf=1)', '{5} -> {2} (supp=0.75, conf=1)',
     '{1} -> {3} (supp=0.5, conf=1)', '{2, 3} -> {5} (supp=0.5, conf=1)',
     '{3, 5} -> {2} (supp=0.5, conf=1)']
    """
    c = _check_confidence(min_confidence)
    n = int(n_transactions)
    if n <= 0:
        return []
    table = rule_table(itemsets, min_confidence=c)
    return table.to_rules(n)


def _check_confidence(min_confidence: float) -> float:
    c = float(min_confidence)
    if not (0.0 <= c <= 1.0) or math.isnan(c):
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence!r}")
    return c


# -- rules in bulk ------------------------------------------------------------------------

_PAD = np.iinfo(np.int64).max


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """Steele, Lea & Flood's SplitMix64 finalizer (OOPSLA 2014): a fixed 64-bit mixing
    of each value. A deterministic hash for itemset keys, not a source of randomness."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass(frozen=True)
class ItemsetTable:
    """Itemsets as arrays: ``members`` ``(N, L)`` item positions into ``labels``, sorted in
    each row and padded with ``-1``; ``sizes``; ``values`` (support counts, or relative
    supports when only those are known)."""

    labels: list[Any]
    members: np.ndarray
    sizes: np.ndarray
    values: np.ndarray

    @classmethod
    def from_mapping(cls, itemsets: Mapping[frozenset, Any]) -> ItemsetTable:
        """From ``{itemset: count or support}``, vectorized over the flattened items."""
        keys = list(itemsets.keys())
        values = np.array(list(itemsets.values()))
        if values.dtype.kind not in "iuf" and len(values):
            values = values.astype(float)
        return cls.from_sets(keys, values)

    @classmethod
    def from_sets(cls, sets: list[Any], values: np.ndarray) -> ItemsetTable:
        lens = np.fromiter(map(len, sets), dtype=np.int64, count=len(sets))
        flat = list(itertools.chain.from_iterable(sets))
        labels = sorted_items(set(flat))
        pos_of = {x: i for i, x in enumerate(labels)}
        pos = np.fromiter(map(pos_of.__getitem__, flat), dtype=np.int64, count=len(flat))
        width = int(lens.max()) if len(sets) else 0
        row = np.repeat(np.arange(len(sets)), lens)
        order = np.lexsort((pos, row))
        col = np.arange(len(flat)) - np.repeat(np.cumsum(lens) - lens, lens)
        members = np.full((len(sets), width), -1, dtype=np.int64)
        members[row, col] = pos[order]
        return cls(labels, members, lens, np.asarray(values))


@dataclass(frozen=True)
class RuleTable:
    """Association rules as arrays (the output of :func:`rule_table`).

    Rule ``r`` is ``X -> Y`` with ``X | Y``, ``X`` and ``Y`` the itemsets
    ``itemset[r]``, ``antecedent[r]`` and ``consequent[r]`` of ``table`` (row indices);
    rows are in the order of :func:`association_rules`.
    """

    table: ItemsetTable
    itemset: np.ndarray
    antecedent: np.ndarray
    consequent: np.ndarray

    def __len__(self) -> int:
        return len(self.itemset)

    @property
    def labels(self) -> list[Any]:
        """The item labels the positions refer to."""
        return self.table.labels

    @property
    def antecedents(self) -> np.ndarray:
        """``(R, L)`` item positions of the antecedents, sorted, padded with ``-1``."""
        return self.table.members[self.antecedent]

    @property
    def consequents(self) -> np.ndarray:
        """``(R, L)`` item positions of the consequents, sorted, padded with ``-1``."""
        return self.table.members[self.consequent]

    @property
    def support(self) -> np.ndarray:
        """Value (count or relative support) of ``X | Y``."""
        return self.table.values[self.itemset]

    @property
    def antecedent_support(self) -> np.ndarray:
        return self.table.values[self.antecedent]

    @property
    def consequent_support(self) -> np.ndarray:
        return self.table.values[self.consequent]

    def _sets(self, idx: np.ndarray) -> list[frozenset]:
        """The itemsets ``idx`` as frozensets; one object per distinct itemset (the
        antecedents and consequents of many rules are the same few itemsets)."""
        if len(idx) == 0:
            return []
        uniq, inv = np.unique(idx, return_inverse=True)
        labels = self.table.labels
        rows = self.table.members[uniq].tolist()
        sets = [frozenset([labels[i] for i in r if i >= 0]) for r in rows]
        return [sets[i] for i in inv.ravel().tolist()]

    def measures(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Support, confidence and lift of every rule, of ``n`` transactions."""
        cz = self.support
        conf = cz / self.antecedent_support
        return cz / n, conf, conf / (self.consequent_support / n)

    def to_rules(self, n: int) -> list[Rule]:
        """:class:`Rule` objects; ``n`` transactions (values are counts)."""
        supp, conf, lift = self.measures(n)
        out = []
        new = object.__new__
        setattr_ = object.__setattr__
        with gc_paused():
            for a, c, z, s, cf, lf in zip(
                self._sets(self.antecedent),
                self._sets(self.consequent),
                self.support.tolist(),
                supp.tolist(),
                conf.tolist(),
                lift.tolist(),
                strict=True,
            ):
                r = new(Rule)
                # The frozen dataclass's fields, as its generated __init__ sets them.
                setattr_(
                    r,
                    "__dict__",
                    {
                        "antecedent": a,
                        "consequent": c,
                        "support_count": int(z),
                        "support": s,
                        "confidence": cf,
                        "lift": lf,
                    },
                )
                out.append(r)
        return out

    def to_frame(self, n: int | None, *, num_itemsets: float | None = None) -> Any:
        """The rules as mlxtend's DataFrame (:data:`RULE_COLUMNS`), built once from the
        arrays; ``n`` transactions when the values are counts, ``None`` when they are
        relative supports."""
        import pandas as pd

        scale = 1.0 if n is None else float(n)
        s_ac = self.support / scale
        s_a = self.antecedent_support / scale
        s_c = self.consequent_support / scale
        m = rule_measures(s_ac, s_a, s_c, num_itemsets=num_itemsets)
        data: dict[str, Any] = {
            "antecedents": pd.Series(self._sets(self.antecedent), dtype=object),
            "consequents": pd.Series(self._sets(self.consequent), dtype=object),
        }
        for col in RULE_COLUMNS[2:]:
            data[col] = m[col]
        return pd.DataFrame(data, columns=list(RULE_COLUMNS))


def rule_measures(
    s_ac: np.ndarray, s_a: np.ndarray, s_c: np.ndarray, *, num_itemsets: float | None = None
) -> dict[str, np.ndarray]:
    """mlxtend's measures of rules with supports ``s_ac``, ``s_a``, ``s_c``, vectorized
    (the same floating-point operations as :func:`_measures`; with ``num_itemsets`` the
    confidences are mlxtend 0.25's ``(s_ac * N) / (s_a * N)``)."""
    s_ac = np.asarray(s_ac, dtype=float)
    s_a = np.asarray(s_a, dtype=float)
    s_c = np.asarray(s_c, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        conf = _confidence(s_ac, s_a, num_itemsets)
        conf_ca = _confidence(s_ac, s_c, num_itemsets)
        lift = conf / s_c
        leverage = s_ac - s_a * s_c
        conviction = np.where(conf >= 1.0, np.inf, (1.0 - s_c) / (1.0 - conf))
        denom = np.maximum(s_ac * (1 - s_a), s_a * (s_c - s_ac))
        zhang = np.where(denom == 0, 0.0, leverage / denom)
        jaccard = s_ac / (s_a + s_c - s_ac)
        certainty = np.where(s_c == 1, 0.0, (conf - s_c) / (1 - s_c))
        kulczynski = (conf + conf_ca) / 2
    return {
        "antecedent support": s_a,
        "consequent support": s_c,
        "support": s_ac,
        "confidence": conf,
        "lift": lift,
        "representativity": np.ones(len(s_ac)),
        "leverage": leverage,
        "conviction": conviction,
        "zhangs_metric": zhang,
        "jaccard": jaccard,
        "certainty": certainty,
        "kulczynski": kulczynski,
    }


def rule_table(
    itemsets: Mapping[frozenset, Any] | ItemsetTable,
    *,
    min_confidence: float,
    scale: float | None = None,
) -> RuleTable:
    """All rules ``X -> Y`` with ``v(X | Y) / v(X) >= min_confidence``, in bulk.

    With ``scale`` the test is ``(v(X | Y) * scale) / (v(X) * scale) >= min_confidence``,
    mlxtend's floating-point form of the confidence of relative supports
    (``sAC * num_itemsets / (sA * num_itemsets)``), so that rules at the threshold are
    kept or dropped exactly as mlxtend does.

    Agrawal & Srikant's ``ap-genrules`` (VLDB 1994) over every itemset at once: the
    consequents of size ``m + 1`` are the Apriori candidates of the confident consequents
    of size ``m`` of the same itemset (moving an item from ``X`` to ``Y`` can only lower
    the confidence), each level one numpy pass over all itemsets. The value of ``X`` is
    found by a 64-bit additive hash of item keys (:func:`_splitmix64`) and a binary search;
    when two itemsets of the input share a hash the rules are generated one itemset at a
    time instead, so the result is always exact.

    Parameters
    ----------
    itemsets : Mapping[frozenset, int or float] or ItemsetTable
        Frequent itemsets closed under subsets, with support counts (or relative
        supports).
    min_confidence : float
        Threshold in ``[0, 1]``, tested as ``v(X | Y) / v(X) >= min_confidence``.

    Raises
    ------
    ValueError
        If an antecedent or consequent is missing from ``itemsets``.
    """
    c = _check_confidence(min_confidence)
    table = itemsets if isinstance(itemsets, ItemsetTable) else ItemsetTable.from_mapping(itemsets)
    mem, sizes, vals = table.members, table.sizes, table.values
    n_sets, width = mem.shape if mem.ndim == 2 else (0, 0)
    if n_sets == 0 or width < 2:
        none = np.zeros(0, dtype=np.int64)
        return RuleTable(table, none, none, none)
    if width + int(n_sets).bit_length() > 63:
        return _rule_table_slow(table, c, scale)  # (itemset, consequent) keys need 64 bits
    item_key = _splitmix64(np.arange(len(table.labels), dtype=np.uint64))
    valid = mem >= 0
    keys = np.where(valid, item_key[np.where(valid, mem, 0)], np.uint64(0))
    with np.errstate(over="ignore"):
        h = keys.sum(axis=1, dtype=np.uint64)
    order = np.argsort(h, kind="stable")
    hs = h[order]
    if len(hs) > 1 and np.any(hs[1:] == hs[:-1]):
        return _rule_table_slow(table, c, scale)

    def lookup(q: np.ndarray, what: str) -> np.ndarray:
        i = np.searchsorted(hs, q)
        i = np.minimum(i, len(hs) - 1)
        ok = hs[i] == q
        if not ok.all():
            raise ValueError(f"itemsets are not closed under subsets: an {what} is missing")
        return order[i]

    # Level 1: every itemset of two or more items and every single consequent.
    zs, cols = np.nonzero(valid & (sizes[:, None] >= 2))
    ymask = np.left_shift(np.uint64(1), cols.astype(np.uint64))
    top = cols.copy()
    hy = keys[zs, cols]
    parts: list[tuple[np.ndarray, ...]] = []
    m = 1
    while len(zs):
        with np.errstate(over="ignore"):
            hx = h[zs] - hy
        xi = lookup(hx, "antecedent")
        keep = _confidence(vals[zs], vals[xi], scale) >= c
        zs, ymask, top, hy, xi = zs[keep], ymask[keep], top[keep], hy[keep], xi[keep]
        parts.append((zs, xi, lookup(hy, "consequent")))
        # Candidates of size m + 1: add an item after the last one, then Apriori's prune.
        ext = sizes[zs] - 1 - top
        ext = np.where(m + 1 < sizes[zs], ext, 0)
        rep = np.repeat(np.arange(len(zs)), ext)
        if len(rep) == 0:
            break
        step = np.arange(len(rep)) - np.repeat(np.cumsum(ext) - ext, ext) + 1
        nz = zs[rep]
        ntop = top[rep] + step
        nmask = ymask[rep] | np.left_shift(np.uint64(1), ntop.astype(np.uint64))
        have = np.sort(_pair_keys(zs, ymask, width))
        good = np.ones(len(rep), dtype=bool)
        for b in range(width):
            bit = np.left_shift(np.uint64(1), np.uint64(b))
            sel = ((nmask & bit) != 0) & (ntop != b)
            if not sel.any():
                continue
            probe = _pair_keys(nz[sel], nmask[sel] ^ bit, width)
            i = np.minimum(np.searchsorted(have, probe), len(have) - 1)
            good[np.flatnonzero(sel)[have[i] != probe]] = False
        zs, ymask, top = nz[good], nmask[good], ntop[good]
        with np.errstate(over="ignore"):
            hy = hy[rep][good] + keys[zs, top]
        m += 1
    return _ordered(table, *(np.concatenate([p[j] for p in parts]) for j in range(3)))


def _pair_keys(zs: np.ndarray, mask: np.ndarray, width: int) -> np.ndarray:
    """One ``uint64`` key per ``(itemset index, consequent mask)`` pair."""
    return (zs.astype(np.uint64) << np.uint64(width)) | mask


def _ordered(table: ItemsetTable, zs: np.ndarray, xi: np.ndarray, yi: np.ndarray) -> RuleTable:
    """The rules in :func:`association_rules` order: confidence and support decreasing,
    then itemset size, antecedent size, antecedent items, consequent items (items compared
    as sorted tuples, i.e. by each itemset's rank in the lexicographic order)."""
    if len(zs) == 0:
        return RuleTable(table, zs, xi, yi)
    mem = table.members
    rank = np.empty(len(mem), dtype=np.int64)
    rank[np.lexsort([mem[:, j] for j in range(mem.shape[1] - 1, -1, -1)])] = np.arange(len(mem))
    vz = table.values[zs]
    conf = vz / table.values[xi]
    idx = np.lexsort([rank[yi], rank[xi], table.sizes[xi], table.sizes[zs], -vz, -conf])
    return RuleTable(table, zs[idx], xi[idx], yi[idx])


def _confidence(vz: Any, vx: Any, scale: float | None) -> Any:
    """``vz / vx``, or mlxtend's ``(vz * scale) / (vx * scale)``."""
    if scale is None:
        return vz / vx
    return (vz * scale) / (vx * scale)


def _rule_table_slow(table: ItemsetTable, c: float, scale: float | None = None) -> RuleTable:
    """:func:`rule_table` one itemset at a time (used on a hash collision or for itemsets
    too long for one-word keys)."""
    index: dict[tuple, int] = {}
    for i, (row, s) in enumerate(zip(table.members.tolist(), table.sizes.tolist(), strict=True)):
        index[tuple(row[:s])] = i
    values = table.values.tolist()
    zs: list[int] = []
    xs: list[int] = []
    ys: list[int] = []

    def get(t: tuple, what: str) -> int:
        try:
            return index[t]
        except KeyError:
            raise ValueError(
                f"itemsets are not closed under subsets: an {what} is missing"
            ) from None

    for zi, (row, s) in enumerate(zip(table.members.tolist(), table.sizes.tolist(), strict=True)):
        if s < 2:
            continue
        z = tuple(row[:s])
        vz = values[zi]
        level = []
        for k in range(s):
            cons = (k,)
            x = get(tuple(x for j, x in enumerate(z) if j != k), "antecedent")
            if _confidence(vz, values[x], scale) >= c:
                level.append(cons)
                zs.append(zi)
                xs.append(x)
                ys.append(get((z[k],), "consequent"))
        m = 1
        while level and m + 1 < s:
            nxt = []
            for cons in apriori_gen(level):
                cs = set(cons)
                x = get(tuple(x for j, x in enumerate(z) if j not in cs), "antecedent")
                if _confidence(vz, values[x], scale) >= c:
                    nxt.append(cons)
                    zs.append(zi)
                    xs.append(x)
                    ys.append(get(tuple(z[j] for j in cons), "consequent"))
            level = nxt
            m += 1
    return _ordered(table, *(np.array(v, dtype=np.int64) for v in (zs, xs, ys)))


def _make_rule(x: frozenset, y: frozenset, cz: int, cx: int, cy: int, n: int) -> Rule:
    conf = cz / cx
    return Rule(
        antecedent=x,
        consequent=y,
        support_count=int(cz),
        support=cz / n,
        confidence=conf,
        lift=conf / (cy / n),
    )


def rules_to_records(rules: Iterable[Rule]) -> list[dict[str, Any]]:
    """Plain dictionaries (JSON-ready): items as sorted lists of native Python values."""
    with gc_paused():
        return [
            {
                "antecedent": [_native(x) for x in sorted_items(r.antecedent)],
                "consequent": [_native(x) for x in sorted_items(r.consequent)],
                "support_count": int(r.support_count),
                "support": float(r.support),
                "confidence": float(r.confidence),
                "lift": float(r.lift),
            }
            for r in rules
        ]


def rules_to_json(rules: Iterable[Rule], *, indent: int | None = None) -> str:
    """The rules as a JSON array of :func:`rules_to_records` objects."""
    return json.dumps(rules_to_records(rules), indent=indent)


def rules_from_records(records: Iterable[Mapping[str, Any]]) -> list[Rule]:
    """Inverse of :func:`rules_to_records` (measures default to 0 when absent)."""
    out = []
    for rec in records:
        out.append(
            Rule(
                antecedent=frozenset(rec["antecedent"]),
                consequent=frozenset(rec["consequent"]),
                support_count=int(rec.get("support_count", 0)),
                support=float(rec.get("support", 0.0)),
                confidence=float(rec.get("confidence", 0.0)),
                lift=float(rec.get("lift", 0.0)),
            )
        )
    return out


#: The measures of mlxtend's ``association_rules`` (its ``return_metrics`` default).
METRICS = RULE_COLUMNS[2:]


def _frame_table(frame: Any) -> ItemsetTable:
    """The itemsets of a DataFrame with ``support`` and ``itemsets`` columns."""
    missing = [c for c in ("support", "itemsets") if c not in frame.columns]
    if missing:
        raise TypeError(
            "itemsets: a DataFrame of frequent itemsets needs the columns 'support' and "
            f"'itemsets' (as frequent_itemsets_df or mlxtend write); missing {missing}"
        )
    sets = frame["itemsets"].tolist()
    for items in sets:
        if isinstance(items, str | bytes) or not isinstance(items, Iterable):
            raise TypeError(f"itemsets: cells must be frozensets of items, got {items!r}")
    table = ItemsetTable.from_sets(sets, frame["support"].to_numpy(dtype=float))
    return ItemsetTable(
        [_native(x) for x in table.labels], table.members, table.sizes, table.values
    )


def association_rules_df(
    itemsets: Any,
    num_itemsets: int | None = None,
    df_orig: Any = None,
    null_values: bool = False,
    metric: str = "confidence",
    min_threshold: float = 0.8,
    support_only: bool = False,
    return_metrics: Iterable[str] = METRICS,
    *,
    min_confidence: float | None = None,
    n_transactions: int | None = None,
) -> Any:
    """Association rules as a pandas DataFrame: mlxtend's ``association_rules``.

    The signature, metrics and frame are those of
    ``mlxtend.frequent_patterns.association_rules`` (0.23 to 0.25), so its documented
    calls run unchanged: ``association_rules_df(fi, metric="confidence",
    min_threshold=0.7)``, ``association_rules_df(fi, num_itemsets=len(df), metric="lift",
    min_threshold=1.2)``. The rules come from :func:`rule_table` in bulk and the frame is
    built once from its arrays.

    Parameters
    ----------
    itemsets : DataFrame or Mapping[frozenset, int]
        Frequent itemsets: the DataFrame of
        :func:`ppdm.mining.itemsets.frequent_itemsets_df` (or of mlxtend's miners; columns
        ``support`` and ``itemsets``), or ``{itemset: support count}`` (then
        ``num_itemsets`` is required).
    num_itemsets : int, optional
        Number of transactions (mlxtend's name; ``n_transactions`` is accepted too). A
        DataFrame's relative supports are used as they are, as mlxtend does.
    df_orig, null_values
        mlxtend's handling of missing values in the one-hot input; only
        ``null_values=False`` (the default) is supported.
    metric : str
        One of :data:`METRICS`; rules with ``metric >= min_threshold`` are kept.
        ``"confidence"`` prunes the search (``ap-genrules``); any other metric scores every
        split of every itemset.
    min_threshold : float
        The threshold of ``metric``.
    support_only : bool
        mlxtend's mode for itemset tables that lack some antecedents; not needed (and
        refused) here, where the itemsets are closed under subsets.
    return_metrics : iterable of str
        The measure columns to return, in :data:`RULE_COLUMNS` order.
    min_confidence : float, optional
        Shorthand for ``metric="confidence", min_threshold=min_confidence``.

    Returns
    -------
    pandas.DataFrame
        One row per rule: ``antecedents``, ``consequents`` (frozensets), then the measures,
        in the order of :func:`association_rules`.

    Examples
    --------
    >>> import pandas as pd
    >>> from ppdm.mining.itemsets import frequent_itemsets_df
    >>> baskets = pd.DataFrame({"basket": [["bread", "milk"], ["bread"], ["milk"],
    ...                                    ["bread", "milk"]]})
    >>> fi = frequent_itemsets_df(baskets, min_support=0.5, use_colnames=True)
    >>> rules = association_rules_df(fi, metric="confidence", min_threshold=0.6)
    >>> rules[["antecedents", "consequents", "support", "confidence"]].map(
    ...     lambda v: sorted(v) if isinstance(v, frozenset) else v)
      antecedents consequents  support  confidence
    0     [bread]      [milk]      0.5    0.666667
    1      [milk]     [bread]      0.5    0.666667
    """
    import pandas as pd

    if null_values or df_orig is not None or support_only:
        raise ValueError(
            "association_rules_df: null_values/df_orig (mlxtend's missing-value mode) and "
            "support_only are not supported; pass the itemsets of a complete one-hot table"
        )
    if min_confidence is not None:
        metric, min_threshold = "confidence", min_confidence
    n = num_itemsets if num_itemsets is not None else n_transactions
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}, got {metric!r}")
    wanted = list(return_metrics)
    unknown = [m for m in wanted if m not in METRICS]
    if unknown:
        raise ValueError(f"return_metrics: unknown metrics {unknown}")
    if isinstance(itemsets, pd.DataFrame):
        table = _frame_table(itemsets)
        scale = None
        # mlxtend's confidence of relative supports (its num_itemsets defaults to 1).
        mlx_n = float(n) if n is not None else 1.0
    elif isinstance(itemsets, Mapping):
        if n is None:
            raise TypeError("association_rules_df: a mapping of counts needs num_itemsets")
        table = ItemsetTable.from_mapping({frozenset(k): int(v) for k, v in itemsets.items()})
        scale = int(n)
        mlx_n = None
        if scale <= 0:
            return pd.DataFrame(columns=list(RULE_COLUMNS[:2]) + wanted)
    else:
        raise TypeError(
            "itemsets must be a DataFrame with columns 'support' and 'itemsets' or a "
            f"mapping {{frozenset: support count}}; got {type(itemsets).__name__}"
        )
    if metric == "confidence":
        rules = rule_table(table, min_confidence=float(min_threshold), scale=mlx_n)
    else:
        rules = rule_table(table, min_confidence=0.0)
    frame = rules.to_frame(scale, num_itemsets=mlx_n)
    if metric != "confidence":
        frame = frame[frame[metric].to_numpy() >= float(min_threshold)].reset_index(drop=True)
    return frame[[*RULE_COLUMNS[:2], *(c for c in RULE_COLUMNS[2:] if c in wanted)]]


def rules_to_frame(rules: Iterable[Rule]) -> Any:
    """Rules (e.g. the ``rules`` of a distributed result with counts) as a DataFrame with
    the columns of :func:`association_rules_df`; the antecedent and consequent supports
    are derived from the measures (``support / confidence`` and ``confidence / lift``)."""
    import pandas as pd

    rows = []
    for r in rules:
        if not isinstance(r, Rule):
            raise TypeError(f"rules must be Rule objects, got {type(r).__name__}")
        s_a = r.support / r.confidence if r.confidence else 0.0
        s_c = r.confidence / r.lift if r.lift else 0.0
        rows.append(
            _measures(
                frozenset(map(_native, r.antecedent)),
                frozenset(map(_native, r.consequent)),
                r.support,
                s_a,
                s_c,
            )
        )
    return pd.DataFrame(rows, columns=list(RULE_COLUMNS))


def _measures(a: frozenset, c: frozenset, s_ac: float, s_a: float, s_c: float) -> list[Any]:
    """One row of :data:`RULE_COLUMNS` (mlxtend's formulas, no missing values)."""
    conf = s_ac / s_a
    conf_ca = s_ac / s_c
    lift = conf / s_c
    leverage = s_ac - s_a * s_c
    conviction = math.inf if conf >= 1.0 else (1.0 - s_c) / (1.0 - conf)
    denom = max(s_ac * (1 - s_a), s_a * (s_c - s_ac))
    zhang = 0.0 if denom == 0 else leverage / denom
    jaccard = s_ac / (s_a + s_c - s_ac)
    certainty = 0.0 if s_c == 1 else (conf - s_c) / (1 - s_c)
    kulczynski = (conf + conf_ca) / 2
    return [
        frozenset(map(_native, a)),
        frozenset(map(_native, c)),
        s_a,
        s_c,
        s_ac,
        conf,
        lift,
        1.0,
        leverage,
        conviction,
        zhang,
        jaccard,
        certainty,
        kulczynski,
    ]
