"""Shared pieces of the distributed association-rule miners: thresholds, itemset
encoding, and the result type."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Self

from ppdm.mining.rules import association_rules, gc_paused, rules_to_records

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


@dataclass
class AssocResult:
    """What every party learns from distributed association-rule mining.

    ``itemsets`` maps each frequent itemset to its global support count, or to ``None``
    when counts were not revealed; ``rules`` are :class:`~ppdm.mining.rules.Rule` objects
    when counts are known, else dicts naming antecedent and consequent only.
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
        rules = association_rules(itemsets, n, min_confidence=c)
        return cls(n, s, c, dict(itemsets), rules, True, levels)

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
        :func:`~ppdm.mining.rules.rules_to_records` gives them)."""
        with gc_paused():
            return self._json()

    def _json(self) -> dict[str, Any]:
        def label(x: Any) -> Any:
            return int(x) if isinstance(x, int) else x

        itemsets = [
            {
                "items": sorted(label(x) for x in k),
                "support_count": v,
                "support": None if v is None else v / self.n_transactions,
            }
            for k, v in sorted(self.itemsets.items(), key=lambda kv: (len(kv[0]), sorted(kv[0])))
        ]
        if self.counts_revealed:
            rules = rules_to_records(self.rules)
        else:
            rules = [
                {
                    "antecedent": sorted(r["antecedent"]),
                    "consequent": sorted(r["consequent"]),
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
