"""The association-rule hiding problem: sensitive rules, thresholds and a working copy.

Aggarwal 2015, §20.4: "a set of sensitive rules are specified by the system
administrator. The task is to mine all association rules, such that none of the sensitive
rules are discovered, but all nonsensitive rules are discovered." A rule ``X -> Y`` is
*hidden* in a database at the thresholds (MST, MCT) when mining there does not report it,
that is when ``c(X | Y) < min_count(MST, n)`` or ``c(X | Y) / c(X) < MCT`` (the tests
:func:`ppdm.mining.itemsets.min_count` and :func:`ppdm.mining.rules.is_confident`).

Sensitive rules file (``RULES.json``)
-------------------------------------
A JSON array of objects with the keys ``antecedent`` and ``consequent``, each a non-empty
array of item labels (integers for FIMI data), disjoint::

    [{"antecedent": [34, 86], "consequent": [85]},
     {"antecedent": [2], "consequent": [39, 90]}]

Other keys (``support``, ``confidence``, ... as written by
:func:`ppdm.mining.rules.rules_to_json`) are allowed and ignored, so a mined rule list can be
edited into a sensitive-rules file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppdm.errors import ConfigError, PPDMError
from ppdm.mining.itemsets import TransactionDB, min_count
from ppdm.mining.rules import Rule, is_confident, sorted_items

__all__ = [
    "HidingError",
    "SensitiveRule",
    "Workspace",
    "load_sensitive_rules",
    "parse_sensitive_rules",
    "rule_is_hidden",
]


class HidingError(PPDMError):
    """A hiding method cannot hide the sensitive rules on this input."""


@dataclass(frozen=True)
class SensitiveRule:
    """A rule ``antecedent -> consequent`` the data owner wants hidden."""

    antecedent: frozenset
    consequent: frozenset

    def __post_init__(self) -> None:
        if not self.antecedent or not self.consequent:
            raise ConfigError("a sensitive rule needs a non-empty antecedent and consequent")
        if self.antecedent & self.consequent:
            raise ConfigError("antecedent and consequent of a sensitive rule must be disjoint")

    @property
    def itemset(self) -> frozenset:
        """The generating itemset ``antecedent | consequent``."""
        return self.antecedent | self.consequent

    @property
    def key(self) -> tuple[frozenset, frozenset]:
        return (self.antecedent, self.consequent)

    @classmethod
    def of(cls, rule: SensitiveRule | Rule | Mapping[str, Any] | Sequence[Any]) -> SensitiveRule:
        """Coerce a :class:`~ppdm.mining.rules.Rule`, a ``{"antecedent", "consequent"}``
        mapping or an ``(antecedent, consequent)`` pair."""
        if isinstance(rule, SensitiveRule):
            return rule
        if isinstance(rule, Rule):
            return cls(rule.antecedent, rule.consequent)
        if isinstance(rule, Mapping):
            try:
                a, c = rule["antecedent"], rule["consequent"]
            except KeyError as exc:
                raise ConfigError(f"sensitive rule without {exc.args[0]!r}: {rule!r}") from None
        else:
            if len(rule) != 2:
                raise ConfigError(f"a sensitive rule is (antecedent, consequent), got {rule!r}")
            a, c = rule
        if isinstance(a, str | bytes) or isinstance(c, str | bytes):
            raise ConfigError("antecedent and consequent must be lists of items")
        try:
            return cls(frozenset(a), frozenset(c))
        except TypeError:
            raise ConfigError(f"bad sensitive rule {rule!r}") from None

    def to_record(self) -> dict[str, list]:
        return {
            "antecedent": sorted_items(self.antecedent),
            "consequent": sorted_items(self.consequent),
        }


def parse_sensitive_rules(data: Any) -> list[SensitiveRule]:
    """Sensitive rules from decoded JSON (see the module docstring), duplicates dropped."""
    if not isinstance(data, list):
        raise ConfigError("the sensitive rules must be a JSON array of rule objects")
    out: list[SensitiveRule] = []
    for rec in data:
        if not isinstance(rec, Mapping):
            raise ConfigError(f"each sensitive rule must be a JSON object, got {rec!r}")
        for side in ("antecedent", "consequent"):
            items = rec.get(side)
            if isinstance(items, list) and any(isinstance(i, bool) for i in items):
                raise ConfigError(f"rule {side} holds true/false where items belong: {items!r}")
        r = SensitiveRule.of(rec)
        if r not in out:
            out.append(r)
    if not out:
        raise ConfigError("no sensitive rules given")
    return out


def load_sensitive_rules(path: str | os.PathLike[str]) -> list[SensitiveRule]:
    """Read a sensitive-rules JSON file (see the module docstring)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a rules file") from None
    return parse_sensitive_rules(data)


def rule_is_hidden(
    db: TransactionDB, rule: SensitiveRule, min_support: float, min_confidence: float
) -> bool:
    """Whether mining ``db`` at the thresholds would not report ``rule`` (recount)."""
    cz = db.support_count(rule.itemset)
    cx = db.support_count(rule.antecedent)
    return cz < min_count(min_support, db.n_transactions) or not is_confident(
        cz, cx, min_confidence
    )


class Workspace:
    """A mutable copy of the columns of the sensitive items, with counts kept up to date.

    Every hiding algorithm here only deletes or adds items of sensitive rules, or drops
    whole transactions, so the working state is a boolean matrix over those items, the
    transaction lengths (over all items) and an ``alive`` mask. The support counts of every
    rule's antecedent and generating itemset are updated incrementally on each edit.
    """

    def __init__(
        self,
        db: TransactionDB,
        rules: Iterable[SensitiveRule],
        *,
        min_support: float,
        min_confidence: float,
    ) -> None:
        self.db = db
        self.rules = list(rules)
        self.min_support = float(min_support)
        self.min_confidence = float(min_confidence)
        min_count(min_support, 1)  # validates the threshold
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ConfigError(f"min_confidence must be in [0, 1], got {min_confidence}")
        labels: set = set()
        for r in self.rules:
            labels |= r.itemset
        missing = [x for x in labels if not _has_item(db, x)]
        if missing:
            raise ConfigError(f"sensitive rules use items not in the data: {missing[:10]}")
        self.labels = sorted(labels, key=db.item_position)
        self.col = {x: j for j, x in enumerate(self.labels)}
        self.matrix = db.to_dense(db.item_positions(self.labels))
        self.length = db.transaction_lengths().astype(np.int64)
        self.alive = np.ones(db.n_transactions, dtype=bool)
        self.n_alive = db.n_transactions
        self.x_cols = [self.cols(r.antecedent) for r in self.rules]
        self.y_cols = [self.cols(r.consequent) for r in self.rules]
        self.z_cols = [self.cols(r.itemset) for r in self.rules]
        self.counts: dict[tuple[int, ...], int] = {}
        for key in (*self.x_cols, *self.z_cols):
            self.counts[key] = int(self.cover(key).sum())
        self.item_count = self.matrix.sum(axis=0).astype(np.int64)
        self.removed = 0
        self.added = 0
        self.touched = np.zeros(db.n_transactions, dtype=bool)
        self.dropped = 0
        self.notes: list[str] = []

    def cols(self, labels: Iterable[Any]) -> tuple[int, ...]:
        return tuple(sorted(self.col[x] for x in labels))

    def cover(self, cols: Sequence[int]) -> np.ndarray:
        """Mask of alive transactions containing all the given columns."""
        return self.matrix[:, list(cols)].all(axis=1) & self.alive

    def min_count(self) -> int:
        return min_count(self.min_support, self.n_alive)

    def hidden(self, r: int) -> bool:
        cz = self.counts[self.z_cols[r]]
        cx = self.counts[self.x_cols[r]]
        return cz < self.min_count() or not is_confident(cz, cx, self.min_confidence)

    def support_hidden(self, r: int) -> bool:
        return self.counts[self.z_cols[r]] < self.min_count()

    def all_hidden(self) -> bool:
        return all(self.hidden(r) for r in range(len(self.rules)))

    def _delta(self, t: int, c: int, sign: int) -> None:
        row = self.matrix[t]
        for key in self.counts:
            if c in key and all(row[k] for k in key if k != c):
                self.counts[key] += sign

    def remove_item(self, t: int, c: int) -> None:
        """Delete column ``c`` from transaction ``t`` (must be present)."""
        if not self.matrix[t, c] or not self.alive[t]:
            raise ValueError("removing an item that is not in the transaction")
        self._delta(t, c, -1)
        self.matrix[t, c] = False
        self.length[t] -= 1
        self.item_count[c] -= 1
        self.removed += 1
        self.touched[t] = True

    def add_item(self, t: int, c: int) -> None:
        """Insert column ``c`` into transaction ``t`` (must be absent)."""
        if self.matrix[t, c] or not self.alive[t]:
            raise ValueError("adding an item that is already in the transaction")
        self._delta(t, c, +1)
        self.matrix[t, c] = True
        self.length[t] += 1
        self.item_count[c] += 1
        self.added += 1
        self.touched[t] = True

    def drop_transaction(self, t: int) -> None:
        """Remove transaction ``t`` from the database."""
        if not self.alive[t]:
            raise ValueError("transaction already removed")
        row = self.matrix[t]
        for key in self.counts:
            if all(row[k] for k in key):
                self.counts[key] -= 1
        self.item_count -= row
        self.alive[t] = False
        self.n_alive -= 1
        self.dropped += 1

    def sanitized(self) -> TransactionDB:
        """The sanitized database (dropped transactions removed, order kept)."""
        out = self.db.replace_columns(self.labels, self.matrix)
        if self.dropped:
            out = out.subset(self.alive)
        return out

    def operations(self) -> dict[str, int]:
        return {
            "items_removed": int(self.removed),
            "items_added": int(self.added),
            "transactions_modified": int((self.touched & self.alive).sum()),
            "transactions_removed": int(self.dropped),
        }


def _has_item(db: TransactionDB, x: Any) -> bool:
    try:
        db.item_position(x)
    except KeyError:
        return False
    return True
