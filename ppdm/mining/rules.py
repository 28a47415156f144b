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
    "Rule",
    "association_rules",
    "is_confident",
    "rules_from_records",
    "rules_to_json",
    "rules_to_records",
]


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
