"""Side effects of rule hiding, recounted by mining both databases (Aggarwal 2015, §20.4).

"In general, if too many transactions are removed, then the remaining nonsensitive rules,
which are discovered, will not reflect the true set of rules." The measures are those of
Oliveira & Zaiane (ICDM 2003) and Verykios et al. (TKDE 2004), all computed from scratch by
mining the original database ``D`` and the sanitized ``D'`` at the same thresholds:

* hiding failure -- sensitive rules still minable in ``D'`` (count, and as a fraction of
  the sensitive rules minable in ``D``);
* lost rules (misses cost) -- non-sensitive rules of ``D`` not minable in ``D'``;
* ghost rules (artifactual patterns) -- rules of ``D'`` not minable in ``D``;
* lost itemsets -- frequent itemsets of ``D`` that contain no sensitive rule's generating
  itemset (those must disappear under support-based hiding) and are not frequent in
  ``D'``; ghost itemsets -- frequent in ``D'``, not in ``D``;
* dissimilarity -- ``sum_i |f_D(i) - f_D'(i)| / sum_i f_D(i)`` over items ``i`` (``f`` the
  item frequency), Oliveira & Zaiane's ``dif(D, D')``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ppdm.errors import ConfigError
from ppdm.hiding.problem import SensitiveRule
from ppdm.mining.itemsets import TransactionDB, frequent_itemsets
from ppdm.mining.rules import Rule, association_rules

__all__ = [
    "MAX_ITEMSETS",
    "MAX_RULE_CANDIDATES",
    "Mined",
    "SideEffects",
    "bounded_frequent_itemsets",
    "dissimilarity",
    "mine",
    "side_effects",
]


@dataclass
class Mined:
    """Frequent itemsets and rules of one database at one pair of thresholds."""

    itemsets: dict[frozenset, int]
    rules: list[Rule]

    @property
    def rule_keys(self) -> set[tuple[frozenset, frozenset]]:
        return {r.key for r in self.rules}


#: Most frequent itemsets the hiding code mines for its recounts (about 100 bytes each).
MAX_ITEMSETS = 250_000
#: Most candidate rules (sum of 2^|I| - 2 over the frequent itemsets) it derives.
MAX_RULE_CANDIDATES = 2_000_000


def bounded_frequent_itemsets(
    db: TransactionDB, min_support: float, *, budget: int = MAX_ITEMSETS
) -> dict[frozenset, int]:
    """All frequent itemsets of ``db``, mined one itemset length more at a time, refusing
    with a :class:`ConfigError` that says how to proceed once there are more than
    ``budget`` (dense data at a low support has exponentially many: a recount of the
    first 1,000 mushroom baskets at 30 % once grew to 22 GB). Complete as soon as a
    length has no frequent itemset (anti-monotonicity)."""
    length = 1
    while True:
        found = frequent_itemsets(db, min_support, max_len=length)
        if len(found) > budget:
            raise ConfigError(
                f"more than {budget:,} frequent itemsets at min-support {min_support:g} "
                "(the recount of side effects would not fit in memory): raise "
                "--min-support, or pass --no-evaluate to skip the recount"
            )
        if not any(len(k) == length for k in found):
            return found
        length += 1


def mine(db: TransactionDB, *, min_support: float, min_confidence: float) -> Mined:
    """Mine ``db`` with ppdm's miner at the thresholds (bounded, see
    :func:`bounded_frequent_itemsets`)."""
    fi = bounded_frequent_itemsets(db, min_support)
    # Each itemset of size k yields up to 2^k - 2 candidate rules: bound those too.
    candidates = 0
    for itemset in fi:
        candidates += (1 << len(itemset)) - 2
        if candidates > MAX_RULE_CANDIDATES:
            raise ConfigError(
                f"more than {MAX_RULE_CANDIDATES:,} candidate rules at min-support "
                f"{min_support:g} (the recount of side effects would not fit in memory): "
                "raise --min-support, or pass --no-evaluate to skip the recount"
            )
    return Mined(fi, association_rules(fi, db.n_transactions, min_confidence=min_confidence))


@dataclass
class SideEffects:
    """The measures of the module docstring."""

    sensitive_minable_before: int
    hiding_failure: int
    rules_before: int
    rules_after: int
    lost_rules: int
    ghost_rules: int
    itemsets_before: int
    itemsets_after: int
    lost_itemsets: int
    ghost_itemsets: int
    dissimilarity: float

    @property
    def hiding_failure_rate(self) -> float:
        return (
            self.hiding_failure / self.sensitive_minable_before
            if self.sensitive_minable_before
            else 0.0
        )

    @property
    def misses_cost(self) -> float:
        """Lost rules over the non-sensitive rules of ``D``."""
        base = self.rules_before - self.sensitive_minable_before
        return self.lost_rules / base if base else 0.0

    @property
    def artifactual_patterns(self) -> float:
        """Ghost rules over the rules of ``D'``."""
        return self.ghost_rules / self.rules_after if self.rules_after else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["hiding_failure_rate"] = self.hiding_failure_rate
        out["misses_cost"] = self.misses_cost
        out["artifactual_patterns"] = self.artifactual_patterns
        return out


def _item_freq(db: TransactionDB) -> dict[Any, int]:
    return dict(zip(db.items.tolist(), db.item_counts().tolist(), strict=True))


def dissimilarity(original: TransactionDB, sanitized: TransactionDB) -> float:
    """Oliveira & Zaiane's ``dif(D, D')`` on item frequencies."""
    f0, f1 = _item_freq(original), _item_freq(sanitized)
    total = sum(f0.values())
    if total == 0:
        return 0.0
    diff = sum(abs(f0.get(i, 0) - f1.get(i, 0)) for i in set(f0) | set(f1))
    return float(diff / total)


def side_effects(
    original: TransactionDB,
    sanitized: TransactionDB,
    sensitive: Iterable[SensitiveRule],
    *,
    min_support: float,
    min_confidence: float,
    before: Mined | None = None,
    after: Mined | None = None,
) -> SideEffects:
    """Recount the side effects of a sanitization (see the module docstring)."""
    sens = list(sensitive)
    keys = {s.key for s in sens}
    gen = [s.itemset for s in sens]
    b = before or mine(original, min_support=min_support, min_confidence=min_confidence)
    a = after or mine(sanitized, min_support=min_support, min_confidence=min_confidence)
    kb, ka = b.rule_keys, a.rule_keys
    return SideEffects(
        sensitive_minable_before=len(keys & kb),
        hiding_failure=len(keys & ka),
        rules_before=len(kb),
        rules_after=len(ka),
        lost_rules=len((kb - keys) - ka),
        ghost_rules=len(ka - kb),
        itemsets_before=len(b.itemsets),
        itemsets_after=len(a.itemsets),
        lost_itemsets=_lost_itemsets(b.itemsets, a.itemsets, gen),
        ghost_itemsets=len(set(a.itemsets) - set(b.itemsets)),
        dissimilarity=dissimilarity(original, sanitized),
    )


def _lost_itemsets(
    before: Mapping[frozenset, int], after: Mapping[frozenset, int], gen: list[frozenset]
) -> int:
    return sum(1 for s in before if s not in after and not any(g <= s for g in gen))
