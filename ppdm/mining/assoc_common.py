"""Shared pieces of the distributed association-rule miners: thresholds, itemset
encoding, and the result type."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Self

import numpy as np

from ppdm.mining.rules import (
    RuleTable,
    association_rules,
    gc_paused,
    rule_table,
    rules_to_records,
)

__all__ = [
    "AssocResult",
    "confidence_fraction",
    "decode_itemset",
    "encode_itemset",
    "native_label",
]


def native_label(x: Any) -> Any:
    """A numpy scalar item label as the plain Python value (``np.int64(3)`` -> ``3``)."""
    return x.item() if hasattr(x, "item") else x


def confidence_fraction(min_confidence: float) -> Fraction:
    """The decimal value of ``min_confidence`` as an exact fraction ``p/q``.

    ``count_xy / count_x >= min_confidence`` (one IEEE division, the reference test of
    :func:`ppdm.mining.rules.is_confident`) agrees with the integer test
    ``q * count_xy - p * count_x >= 0`` whenever ``count_x < 2^40``: the decimal threshold
    lies on the same side of every ratio, and ratios differing from it do so by far more
    than a rounding error. The integer form is what parties can evaluate securely.
    """
    c = float(min_confidence)
    if not 0.0 <= c <= 1.0:
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence!r}")
    return Fraction(repr(c))


def encode_itemset(itemset: tuple, *, label_bytes: int) -> bytes:
    """Canonical bytes of an itemset of int labels (sorted, ``label_bytes`` each) or str
    labels (sorted, each as a length byte and UTF-8)."""
    if not itemset:
        return b""
    if all(isinstance(x, int) for x in itemset):
        out = bytearray()
        for x in sorted(itemset):
            if not 0 <= x < 1 << (8 * label_bytes):
                raise ValueError(f"item {x} does not fit in {label_bytes} bytes")
            out += x.to_bytes(label_bytes, "big")
        return bytes(out)
    if all(isinstance(x, str) for x in itemset):
        out = bytearray()
        for x in sorted(itemset):
            b = x.encode()
            if len(b) > min(label_bytes, 255):
                raise ValueError(f"item label {x!r} is longer than {label_bytes} bytes")
            out += bytes([len(b)]) + b
        return bytes(out)
    raise TypeError("itemsets must hold only ints or only strings")


def decode_itemset(data: bytes, *, label_bytes: int, kind: type) -> tuple:
    """Inverse of :func:`encode_itemset`."""
    if kind is int:
        if len(data) % label_bytes:
            raise ValueError("itemset bytes are not a whole number of labels")
        return tuple(
            int.from_bytes(data[i : i + label_bytes], "big")
            for i in range(0, len(data), label_bytes)
        )
    items = []
    i = 0
    while i < len(data):
        n = data[i]
        items.append(data[i + 1 : i + 1 + n].decode())
        i += 1 + n
    return tuple(items)


@dataclass(frozen=True)
class _PendingRules:
    """Rules not built yet: the arrays of :func:`~ppdm.mining.rules.rule_table` and the
    transaction count their measures divide by."""

    table: RuleTable
    n: int


class _RulesField:
    """The ``rules`` field of :class:`AssocResult`: the list it was given, or (a result of
    :meth:`AssocResult.with_counts`) the :class:`~ppdm.mining.rules.Rule` objects built
    from the rule arrays when first read, so a job that only writes the document
    (:meth:`AssocResult.to_json`, from the arrays) builds no object per rule."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            raise AttributeError("rules")  # a dataclass field without a default
        rules = obj.__dict__["rules"]
        if isinstance(rules, _PendingRules):
            rules = obj.__dict__["rules"] = rules.table.to_rules(rules.n)
        return rules

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__["rules"] = value


@dataclass
class AssocResult:
    """What every party learns from distributed association-rule mining.

    ``itemsets`` maps each frequent itemset to its global support count, or to ``None``
    when counts were not revealed; ``rules`` are :class:`~ppdm.mining.rules.Rule` objects
    when counts are known (made from the rule arrays when ``rules`` is first read), else
    dicts naming antecedent and consequent only.
    """

    n_transactions: int
    min_support: float
    min_confidence: float
    itemsets: dict[frozenset, int | None]
    rules: list[Any]
    counts_revealed: bool
    levels: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def with_counts(
        cls,
        n: int,
        s: float,
        c: float,
        itemsets: dict[frozenset, int],
        levels: list[dict[str, Any]],
    ) -> Self:
        if int(n) <= 0:
            rules = association_rules(itemsets, n, min_confidence=c)  # none; checks c
            return cls(n, s, c, dict(itemsets), rules, True, levels)
        # What association_rules builds, its Rule objects made when first read.
        pending = _PendingRules(rule_table(itemsets, min_confidence=c), int(n))
        return cls(n, s, c, dict(itemsets), pending, True, levels)  # type: ignore[arg-type]

    def to_frame(self) -> Any:
        """The rules as a pandas DataFrame in mlxtend's layout (columns of
        :func:`ppdm.mining.rules.association_rules_df`); without revealed counts the
        measure columns are ``NaN``. ``itemsets_frame`` gives the frequent itemsets."""
        import pandas as pd

        from ppdm.mining.rules import RULE_COLUMNS, rules_to_frame

        if self.counts_revealed:
            return rules_to_frame(self.rules)
        frame = pd.DataFrame(
            {
                "antecedents": pd.Series(
                    [frozenset(map(native_label, r["antecedent"])) for r in self.rules],
                    dtype=object,
                ),
                "consequents": pd.Series(
                    [frozenset(map(native_label, r["consequent"])) for r in self.rules],
                    dtype=object,
                ),
            }
        )
        for col in RULE_COLUMNS[2:]:
            frame[col] = float("nan")
        return frame

    def itemsets_frame(self) -> Any:
        """The frequent itemsets as mlxtend's frame (``support``, ``itemsets``); support
        ``NaN`` when counts were not revealed."""
        import pandas as pd

        n = self.n_transactions
        return pd.DataFrame(
            {
                "support": pd.Series(
                    [float("nan") if v is None else v / n for v in self.itemsets.values()],
                    dtype=float,
                ),
                "itemsets": pd.Series(
                    [frozenset(map(native_label, k)) for k in self.itemsets], dtype=object
                ),
            }
        )

    def to_json(self) -> dict[str, Any]:
        """The result as JSON-ready values (itemsets by size, then items; the rules as
        :func:`~ppdm.mining.rules.rules_to_records` gives them).

        ``frequent_itemsets`` and ``rules`` hold plain Python values only (labels as
        ``int`` or ``str``, a non-finite measure as ``None``), so a job document takes
        them as they are. With counts the rule records are written from the arrays the
        rules came from (:class:`~ppdm.mining.rules.RuleTable`), one distinct antecedent
        or consequent at a time, with no :class:`~ppdm.mining.rules.Rule` read per rule.
        """
        with gc_paused():
            return self._json()

    def _json(self) -> dict[str, Any]:
        def label(x: Any) -> Any:
            return int(x) if isinstance(x, int) else native_label(x)

        n = self.n_transactions
        # Each itemset sorted once: the order key (size, sorted items) and, when every
        # item is a plain int (label() is the identity), the "items" list itself.
        keyed = [(len(k), sorted(k), v) for k, v in self.itemsets.items()]
        keyed.sort(key=lambda row: (row[0], row[1]))
        plain = all(type(x) is int for _, items, _ in keyed for x in items)
        itemsets = [
            {
                "items": items if plain else sorted(label(x) for x in items),
                "support_count": None if v is None else _finite(native_label(v)),
                "support": None if v is None else _finite(native_label(v) / n),
            }
            for _, items, v in keyed
        ]
        if self.counts_revealed:
            pending = self.__dict__.get("rules")
            rules = None
            if isinstance(pending, _PendingRules):
                rules = _rule_records(pending.table, pending.n)
            if rules is None:
                rules = [_finite_measures(r) for r in rules_to_records(self.rules)]
        else:
            rules = [
                {
                    "antecedent": sorted(native_label(x) for x in r["antecedent"]),
                    "consequent": sorted(native_label(x) for x in r["consequent"]),
                    "support": None,
                    "confidence": None,
                    "lift": None,
                }
                for r in self.rules
            ]
        return {
            "n_transactions": self.n_transactions,
            "min_support": self.min_support,
            "min_confidence": self.min_confidence,
            "counts_revealed": self.counts_revealed,
            "frequent_itemsets": itemsets,
            "rules": rules,
            "levels": self.levels,
        }


# Installed after the dataclass is made: ``rules`` stays a field without a default, read
# and written through the descriptor (its __init__ assigns it).
AssocResult.rules = _RulesField()  # type: ignore[assignment]


def _finite(v: Any) -> Any:
    """``v``, or ``None`` for a non-finite float (JSON has no NaN or infinity)."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _finite_measures(record: dict[str, Any]) -> dict[str, Any]:
    for key in ("support", "confidence", "lift"):
        record[key] = _finite(record[key])
    return record


def _rule_records(table: RuleTable, n: int) -> list[dict[str, Any]] | None:
    """The records :func:`~ppdm.mining.rules.rules_to_records` gives for
    ``table.to_rules(n)``, built from the arrays: the measures of
    :meth:`~ppdm.mining.rules.RuleTable.measures`, as ``to_rules`` takes them, the item lists once per
    distinct itemset (a row of positions into the sorted labels is its sorted items).
    ``None`` when the labels are not all ints or all strings."""
    labels = [native_label(x) for x in table.labels]
    kinds = {type(x) for x in labels}
    if not (kinds <= {int} or kinds <= {str}):
        return None
    if len(table) == 0:
        return []
    cz = table.support
    supp, conf, lift = table.measures(n)
    counts = cz.tolist() if cz.dtype.kind in "iu" else [int(z) for z in cz.tolist()]
    measures = [_finite_list(a) for a in (supp, conf, lift)]
    ants = _item_lists(table, table.antecedent, labels)
    cons = _item_lists(table, table.consequent, labels)
    return [
        {
            "antecedent": a[:],
            "consequent": c[:],
            "support_count": z,
            "support": s,
            "confidence": cf,
            "lift": lf,
        }
        for a, c, z, s, cf, lf in zip(ants, cons, counts, *measures, strict=True)
    ]


def _finite_list(a: np.ndarray) -> list[Any]:
    """``a`` as Python floats, non-finite values as ``None``."""
    out = a.tolist()
    bad = np.flatnonzero(~np.isfinite(a))
    for i in bad.tolist():
        out[i] = None
    return out


def _item_lists(table: RuleTable, idx: np.ndarray, labels: list[Any]) -> list[list[Any]]:
    """The sorted item labels of the itemsets ``idx`` (rows of ``table.table``), one list
    per distinct itemset shared by the rules that have it (the caller copies them)."""
    uniq, inv = np.unique(idx, return_inverse=True)
    rows = table.table.members[uniq].tolist()
    lists = [[labels[i] for i in r if i >= 0] for r in rows]
    return [lists[i] for i in inv.ravel().tolist()]


def candidate_rules(itemsets: list[frozenset]) -> list[tuple[frozenset, frozenset]]:
    """Every rule ``X -> Z \\ X`` for each itemset ``Z`` (``|Z| >= 2``), in a fixed order."""
    from itertools import combinations

    out = []
    with gc_paused():
        for z in sorted(itemsets, key=lambda s: (len(s), sorted(s))):
            if len(z) < 2:
                continue
            items = sorted(z)
            for r in range(1, len(items)):
                for x in combinations(items, r):
                    xs = frozenset(x)
                    out.append((xs, z - xs))
    return out
