"""The rule records of a distributed result written in bulk (issue 25, item 2).

:meth:`ppdm.mining.assoc_common.AssocResult.to_json` writes the records of a result with
counts from the arrays its rules came from; they must equal what the per-rule path
(:func:`ppdm.mining.rules.rules_to_records` over the :class:`~ppdm.mining.rules.Rule`
objects, built only when ``rules`` is read) gives, hold only plain JSON values, and follow
``rules`` when a caller changed it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ppdm.mining.assoc_common import AssocResult
from ppdm.mining.itemsets import frequent_itemsets
from ppdm.mining.readers import from_transactions
from ppdm.mining.rules import rules_to_records


def _result(seed: int, kind: str) -> AssocResult:
    """Counts of seeded random baskets (12 items, some correlated), as a miner with
    revealed counts returns them."""
    rng = np.random.default_rng(seed)
    baskets = []
    for _ in range(300):
        row = set(np.flatnonzero(rng.random(12) < 0.3).tolist())
        if 0 in row and rng.random() < 0.7:
            row |= {1, 2}
        baskets.append(sorted(row) if kind == "int" else sorted(f"item {i:02d}" for i in row))
    counts = frequent_itemsets(from_transactions(baskets), 0.05)
    return AssocResult.with_counts(len(baskets), 0.05, 0.3, counts, [])


def _plain(value: object) -> bool:
    """Only dicts, lists, str, int, float and None (no numpy scalar, no NaN)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


@pytest.mark.parametrize("kind", ["int", "str"])
@pytest.mark.parametrize("seed", range(4))
def test_bulk_records_equal_the_per_rule_records(seed, kind):
    result = _result(seed, kind)
    doc = result.to_json()  # before the rules are read: from the arrays
    assert len(result.rules) > 50, "the data should have rules of several sizes"
    assert max(len(r.antecedent) for r in result.rules) >= 2
    assert doc["rules"] == rules_to_records(result.rules)
    assert _plain(doc["rules"]) and _plain(doc["frequent_itemsets"])
    json.dumps(doc, allow_nan=False)
    # each record owns its lists: changing one leaves the others as they were
    doc["rules"][0]["antecedent"].append("x")
    assert result.to_json()["rules"] == rules_to_records(result.rules)


def test_changed_rules_are_written_as_they_are_now():
    result = _result(0, "int")
    first = result.rules.pop(0)
    assert result.to_json()["rules"] == rules_to_records(result.rules)
    result.rules.append(first)  # as many rules as were built, in another order
    assert result.to_json()["rules"] == rules_to_records(result.rules)
    result.rules = result.rules[-1:] + result.rules[:-1]
    assert result.to_json()["rules"] == rules_to_records(result.rules)
