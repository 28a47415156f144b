"""Association rules against mlxtend and brute-force enumeration."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.mining.itemsets import frequent_itemsets, min_count
from ppdm.mining.readers import from_transactions, read_fimi
from ppdm.mining.rules import (
    Rule,
    association_rules,
    is_confident,
    rules_from_records,
    rules_to_json,
    rules_to_records,
)


def _brute_rules(tx: list, s: float, conf: float) -> dict:
    sets = [set(t) for t in tx]
    n = len(tx)
    minc = min_count(s, n)

    def cnt(x: frozenset) -> int:
        return sum(1 for t in sets if x <= t)

    items = sorted({x for t in tx for x in t})
    out = {}
    for k in range(2, len(items) + 1):
        for z in itertools.combinations(items, k):
            cz = cnt(frozenset(z))
            if cz < minc:
                continue
            for r in range(1, k):
                for xs in itertools.combinations(z, r):
                    x = frozenset(xs)
                    y = frozenset(z) - x
                    cx = cnt(x)
                    if cz / cx >= conf:
                        out[(x, y)] = (cz, cz / cx, (cz / cx) / (cnt(y) / n))
    return out


@given(
    st.lists(st.lists(st.integers(0, 6), max_size=6), min_size=1, max_size=12),
    st.sampled_from([0.1, 0.2, 0.3, 0.5]),
    st.sampled_from([0.0, 0.3, 0.5, 0.6, 2 / 3, 0.8, 1.0]),
)
def test_rules_match_brute_force(tx: list, s: float, conf: float) -> None:
    db = from_transactions(tx)
    rules = association_rules(frequent_itemsets(db, s), len(tx), min_confidence=conf)
    got = {r.key: (r.support_count, r.confidence, r.lift) for r in rules}
    want = _brute_rules(tx, s, conf)
    assert set(got) == set(want)
    for k, (c, cf, lift) in want.items():
        assert got[k][0] == c
        assert got[k][1] == pytest.approx(cf)
        assert got[k][2] == pytest.approx(lift)
    assert len(rules) == len(got)  # no duplicates
    assert all(a.confidence >= b.confidence for a, b in itertools.pairwise(rules))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_mushroom_rules_match_mlxtend(fimi_dir: Path) -> None:
    from mlxtend.frequent_patterns import association_rules as mlx_rules
    from mlxtend.frequent_patterns import fpgrowth
    from mlxtend.preprocessing import TransactionEncoder

    lines = (fimi_dir / "mushroom.dat").read_text().splitlines()
    tx = [sorted({int(x) for x in line.split()}) for line in lines]
    te = TransactionEncoder()
    df = pd.DataFrame(te.fit(tx).transform(tx), columns=te.columns_)
    fi = fpgrowth(df, min_support=0.4, use_colnames=True)
    want = mlx_rules(fi, len(tx), metric="confidence", min_threshold=0.9)
    want_map = {
        (frozenset(int(x) for x in a), frozenset(int(x) for x in c)): (conf, lift)
        for a, c, conf, lift in zip(
            want.antecedents, want.consequents, want.confidence, want.lift, strict=True
        )
    }
    db = read_fimi(fimi_dir / "mushroom.dat")
    rules = association_rules(frequent_itemsets(db, 0.4), db.n_transactions, min_confidence=0.9)
    got = {r.key: (r.confidence, r.lift) for r in rules}
    assert set(got) == set(want_map)
    assert len(got) > 1000
    for k, (conf, lift) in want_map.items():
        assert got[k][0] == pytest.approx(conf, rel=1e-12)
        assert got[k][1] == pytest.approx(lift, rel=1e-12)


def test_records_roundtrip_and_json() -> None:
    db = from_transactions([[1, 3, 4], [2, 3, 5], [1, 2, 3, 5], [2, 5]])
    rules = association_rules(frequent_itemsets(db, 0.5), 4, min_confidence=0.6)
    recs = json.loads(rules_to_json(rules))
    assert recs == rules_to_records(rules)
    assert rules_from_records(recs) == rules
    assert all(isinstance(x, int) for r in recs for x in r["antecedent"])
    r = rules[0]
    assert isinstance(r, Rule) and r.itemset == r.antecedent | r.consequent


def test_confidence_threshold_is_robust() -> None:
    assert is_confident(7, 10, 0.7)
    assert is_confident(1, 3, 1 / 3)
    assert not is_confident(0, 0, 0.0)
    with pytest.raises(ValueError):
        association_rules({}, 10, min_confidence=1.5)
    with pytest.raises(ValueError):
        association_rules({frozenset({1, 2}): 3}, 10, min_confidence=0.5)
