"""The reported side effects equal a recount from scratch with mlxtend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppdm.hiding.api import hide_rules
from ppdm.hiding.metrics import dissimilarity
from ppdm.hiding.metrics import mine as ppdm_mine
from ppdm.hiding.problem import SensitiveRule
from ppdm.mining.readers import from_transactions, read_fimi
from ppdm.randomness import make_rng


def _mlxtend(tx: list[list[int]], s: float, c: float) -> tuple[set, set]:
    from mlxtend.frequent_patterns import association_rules, fpgrowth
    from mlxtend.preprocessing import TransactionEncoder

    te = TransactionEncoder()
    df = pd.DataFrame(te.fit(tx).transform(tx), columns=te.columns_)
    fi = fpgrowth(df, min_support=s, use_colnames=True)
    sets = {frozenset(int(x) for x in f) for f in fi.itemsets}
    if fi.empty:
        return sets, set()
    rules = association_rules(fi, len(tx), metric="confidence", min_threshold=c)
    keys = {
        (frozenset(int(x) for x in a), frozenset(int(x) for x in b))
        for a, b in zip(rules.antecedents, rules.consequents, strict=True)
    }
    return sets, keys


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("method", ["1.a", "2.b", "remove", "border", "exact"])
def test_report_equals_mlxtend_recount(fimi_dir: Path, method: str) -> None:
    db = read_fimi(fimi_dir / "mushroom.dat").subset(np.arange(0, 8124, 4))
    s, c = 0.4, 0.9
    before = ppdm_mine(db, min_support=s, min_confidence=c)
    rng = make_rng(7)
    sens = [SensitiveRule.of(before.rules[i]) for i in rng.permutation(len(before.rules))[:4]]
    res = hide_rules(
        db, sens, min_support=s, min_confidence=c, method=method, max_vars=30_000, time_limit=30
    )
    fe = res.side_effects
    tx0 = [list(t) for t in db.transactions()]
    tx1 = [list(t) for t in res.sanitized.transactions()]
    f0, r0 = _mlxtend(tx0, s, c)
    f1, r1 = _mlxtend(tx1, s, c)
    keys = {r.key for r in sens}
    gens = [r.itemset for r in sens]
    assert fe.rules_before == len(r0) and fe.rules_after == len(r1)
    assert fe.sensitive_minable_before == len(keys & r0) == len(sens)
    assert fe.hiding_failure == len(keys & r1) == 0
    assert fe.lost_rules == len((r0 - keys) - r1)
    assert fe.ghost_rules == len(r1 - r0)
    assert fe.itemsets_before == len(f0) and fe.itemsets_after == len(f1)
    assert fe.lost_itemsets == sum(1 for f in f0 - f1 if not any(g <= f for g in gens))
    assert fe.ghost_itemsets == len(f1 - f0)
    # Operations agree with the data.
    ops = res.operations
    removed = added = 0
    if ops["transactions_removed"] == 0:
        for a, b in zip(tx0, tx1, strict=True):
            removed += len(set(a) - set(b))
            added += len(set(b) - set(a))
        assert (removed, added) == (ops["items_removed"], ops["items_added"])
        assert ops["transactions_modified"] == sum(
            1 for a, b in zip(tx0, tx1, strict=True) if set(a) != set(b)
        )
    else:
        assert len(tx1) == len(tx0) - ops["transactions_removed"]


def test_dissimilarity() -> None:
    a = from_transactions([[1, 2], [1, 3], [2]])  # item counts 2, 2, 1 -> total 5
    b = from_transactions([[1], [1, 3], [2, 3]])  # 2, 1, 2
    assert dissimilarity(a, b) == pytest.approx(2 / 5)
    assert dissimilarity(a, a) == 0.0
