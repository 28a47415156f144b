"""Association rules from frequent itemsets: support, confidence and lift.

A rule ``X -> Y`` (``X``, ``Y`` non-empty and disjoint, ``X | Y`` frequent) has

* support count ``c(X | Y)`` and support ``c(X | Y) / n``,
* confidence ``c(X | Y) / c(X)``,
* lift ``confidence / (c(Y) / n)``,

as in seed 000 section 20.4 (association rule hiding works on exactly these rules) and
Agrawal & Srikant (VLDB 1994). Rules of one itemset are generated with their ``ap-genrules``
procedure: a consequent is extended only if all its sub-consequents gave confident rules,
because moving items from the antecedent to the consequent can only lower the confidence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ppdm.mining.itemsets import apriori_gen

__all__ = [
    "RULE_COLUMNS",
    "Rule",
    "association_rules",
    "association_rules_df",
    "is_confident",
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
    c = float(min_confidence)
    if not (0.0 <= c <= 1.0) or math.isnan(c):
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence!r}")
    n = int(n_transactions)
    if n <= 0:
        return []
    keyed: list[tuple[tuple, Rule]] = []

    def count(s: frozenset) -> int:
        try:
            return itemsets[s]
        except KeyError:
            raise ValueError(
                f"itemsets are not closed under subsets: {sorted(map(repr, s))} is missing"
            ) from None

    def emit(items: list, cons: tuple, cz: int, cx: int) -> None:
        y = frozenset(cons)
        x_items = tuple(i for i in items if i not in y)
        rule = _make_rule(frozenset(x_items), y, cz, cx, count(y), n)
        keyed.append(
            ((-rule.confidence, -cz, len(items), len(x_items), x_items, tuple(cons)), rule)
        )

    for z, cz in itemsets.items():
        if len(z) < 2:
            continue
        items = sorted_items(z)
        # ap-genrules: grow confident consequents level by level.
        level: list[tuple] = []
        for y in items:
            cx = count(z - {y})
            if is_confident(cz, cx, c):
                level.append((y,))
                emit(items, (y,), cz, cx)
        m = 1
        while level and m + 1 < len(z):
            nxt = []
            for cons in apriori_gen(level):
                cx = count(z.difference(cons))
                if is_confident(cz, cx, c):
                    nxt.append(cons)
                    emit(items, cons, cz, cx)
            level = nxt
            m += 1
    try:
        keyed.sort(key=lambda kr: kr[0])
    except TypeError:
        keyed.sort(key=lambda kr: (*kr[0][:4], repr(kr[0][4]), repr(kr[0][5])))
    return [r for _, r in keyed]


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


def _frame_counts(frame: Any, n: int) -> dict[frozenset, int]:
    """``{itemset: count}`` from a DataFrame with ``support`` and ``itemsets`` columns."""
    missing = [c for c in ("support", "itemsets") if c not in frame.columns]
    if missing:
        raise TypeError(
            "itemsets: a DataFrame of frequent itemsets needs the columns 'support' and "
            f"'itemsets' (as frequent_itemsets_df or mlxtend write); missing {missing}"
        )
    out: dict[frozenset, int] = {}
    for sup, items in zip(frame["support"].tolist(), frame["itemsets"].tolist(), strict=True):
        if isinstance(items, str | bytes) or not isinstance(items, Iterable):
            raise TypeError(f"itemsets: cells must be frozensets of items, got {items!r}")
        out[frozenset(_native(x) for x in items)] = round(float(sup) * n)
    return out


def association_rules_df(
    itemsets: Any,
    n_transactions: int,
    *,
    min_confidence: float,
) -> Any:
    """:func:`association_rules` as a pandas DataFrame in mlxtend's layout.

    Parameters
    ----------
    itemsets : DataFrame or Mapping[frozenset, int]
        Frequent itemsets: the DataFrame of
        :func:`ppdm.mining.itemsets.frequent_itemsets_df` (or of mlxtend's miners; columns
        ``support`` and ``itemsets``), or ``{itemset: support count}``.
    n_transactions : int
        Number of transactions (mlxtend's ``num_itemsets``).
    min_confidence : float
        Confidence threshold (mlxtend's ``metric="confidence", min_threshold=...``).

    Returns
    -------
    pandas.DataFrame
        One row per rule, columns :data:`RULE_COLUMNS` (``antecedents`` and
        ``consequents`` frozensets, then the measures, as in
        ``mlxtend.frequent_patterns.association_rules``), in the order of
        :func:`association_rules`.

    Examples
    --------
    >>> import pandas as pd
    >>> from ppdm.mining.itemsets import frequent_itemsets_df
    >>> baskets = pd.DataFrame({"basket": [["bread", "milk"], ["bread"], ["milk"],
    ...                                    ["bread", "milk"]]})
    >>> rules = association_rules_df(frequent_itemsets_df(baskets, 0.5), 4,
    ...                              min_confidence=0.6)
    >>> rules[["antecedents", "consequents", "support", "confidence"]].map(
    ...     lambda v: sorted(v) if isinstance(v, frozenset) else v)
      antecedents consequents  support  confidence
    0     [bread]      [milk]      0.5    0.666667
    1      [milk]     [bread]      0.5    0.666667
    """
    import pandas as pd

    n = int(n_transactions)
    if isinstance(itemsets, pd.DataFrame):
        counts = _frame_counts(itemsets, n)
    elif isinstance(itemsets, Mapping):
        counts = {frozenset(k): int(v) for k, v in itemsets.items()}
    else:
        raise TypeError(
            "itemsets must be a DataFrame with columns 'support' and 'itemsets' or a "
            f"mapping {{frozenset: support count}}; got {type(itemsets).__name__}"
        )
    rules = association_rules(counts, n, min_confidence=min_confidence)
    rows = []
    for r in rules:
        s_a = counts[r.antecedent] / n
        s_c = counts[r.consequent] / n
        rows.append(_measures(r.antecedent, r.consequent, r.support, s_a, s_c))
    return pd.DataFrame(rows, columns=list(RULE_COLUMNS))


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
