"""Every hiding method hides the sensitive rules: brute force on small data, mlxtend on real
data (sensitive rules drawn at random among the mined ones)."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ppdm.errors import ConfigError
from ppdm.hiding.api import METHODS, hide_rules
from ppdm.hiding.border import revised_positive_border
from ppdm.hiding.heuristics import algorithm_1a
from ppdm.hiding.metrics import mine
from ppdm.hiding.problem import HidingError, SensitiveRule, Workspace, load_sensitive_rules
from ppdm.mining.itemsets import min_count
from ppdm.mining.readers import from_transactions, read_fimi
from ppdm.randomness import make_rng


def _brute_rules(tx: list[tuple], s: float, c: float) -> set[tuple[frozenset, frozenset]]:
    """Rules minable in ``tx`` by plain enumeration."""
    sets = [set(t) for t in tx]
    n = len(tx)
    minc = min_count(s, n) if n else 1

    def cnt(x: frozenset) -> int:
        return sum(1 for t in sets if x <= t)

    items = sorted({x for t in tx for x in t})
    out = set()
    for k in range(2, len(items) + 1):
        for z in itertools.combinations(items, k):
            cz = cnt(frozenset(z))
            if cz < minc:
                continue
            for r in range(1, k):
                for xs in itertools.combinations(z, r):
                    x = frozenset(xs)
                    if cz / cnt(x) >= c:
                        out.add((x, frozenset(z) - x))
    return out


small_db = st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=5), min_size=6, max_size=20)


@given(
    small_db,
    st.sampled_from([0.2, 0.3, 0.4]),
    st.sampled_from([0.4, 0.6, 0.8]),
    st.data(),
)
def test_every_method_hides_on_small_data(tx: list, s: float, c: float, data) -> None:
    db = from_transactions(tx)
    before = mine(db, min_support=s, min_confidence=c)
    assume(before.rules)
    k = data.draw(st.integers(1, min(3, len(before.rules))))
    idx = data.draw(st.lists(st.integers(0, len(before.rules) - 1), min_size=k, max_size=k))
    sens = [SensitiveRule.of(before.rules[i]) for i in idx]
    for m in METHODS:
        res = hide_rules(db, sens, min_support=s, min_confidence=c, method=m, before=before)
        after = _brute_rules(list(res.sanitized.transactions()), s, c)
        assert not ({r.key for r in sens} & after), m
        assert res.side_effects is not None and res.side_effects.hiding_failure == 0
        ops = res.operations
        if m in ("1.b", "2.a", "2.b", "2.c", "swa", "border", "maxmin", "exact"):
            assert ops["items_added"] == 0 and ops["transactions_removed"] == 0
            assert res.sanitized.n_transactions == len(tx)
            # Deletions only: every sanitized transaction is a subset of the original.
            for a, b in zip(res.sanitized.transactions(), db.transactions(), strict=True):
                assert set(a) <= set(b)
        if m == "1.a" and "notes" not in res.info:
            assert ops["items_removed"] == 0
            for a, b in zip(res.sanitized.transactions(), db.transactions(), strict=True):
                assert set(a) >= set(b)
        if m == "remove":
            assert res.sanitized.n_transactions == len(tx) - ops["transactions_removed"]


def test_verykios_worked_example() -> None:
    # Rule {1} -> {2}: supp 4/6, conf 4/5. 1.b deletes 2 from the shortest supporting
    # transaction ([1, 2]); then conf = 3/5 < 0.7.
    db = from_transactions([[1, 2, 3], [1, 2], [1, 2, 4], [2, 3], [1, 3], [1, 2, 3]])
    rule = [{"antecedent": [1], "consequent": [2]}]
    res = hide_rules(db, rule, min_support=0.5, min_confidence=0.7, method="1.b")
    assert list(res.sanitized.transactions())[1] == (1,)
    assert res.operations == {
        "items_removed": 1,
        "items_added": 0,
        "transactions_modified": 1,
        "transactions_removed": 0,
    }
    # 2.a must push the support of {1, 2} below 3 of 6: two deletions.
    res = hide_rules(db, rule, min_support=0.5, min_confidence=0.7, method="2.a")
    assert res.operations["items_removed"] == 2
    assert res.sanitized.support_count({1, 2}) == 2
    # 1.a adds item 1 to transactions that lack it and do not hold all of {2}; the only
    # transaction without 1 is [2, 3], which holds 2: 1.a alone cannot hide the rule.
    ws = Workspace(db, [SensitiveRule.of(rule[0])], min_support=0.5, min_confidence=0.7)
    with pytest.raises(HidingError):
        algorithm_1a(ws, complete=False)
    res = hide_rules(db, rule, min_support=0.5, min_confidence=0.7, method="1.a")
    assert "finished with 1.b" in res.info["notes"][0]
    # With a transaction lacking both sides, 1.a adds the antecedent there: conf 4/6.
    db2 = from_transactions([[1, 2, 3], [1, 2], [1, 2, 4], [2, 3], [1, 3], [1, 2, 3], [5]])
    res = hide_rules(db2, rule, min_support=0.5, min_confidence=0.7, method="1.a")
    assert list(res.sanitized.transactions())[6] == (1, 5)
    assert res.operations["items_added"] == 1 and "notes" not in res.info


def test_revised_border() -> None:
    f = {frozenset(s): 3 for s in ["a", "b", "c", "d", "ab", "ac", "bc", "abc", "cd"]}
    got = revised_positive_border(f, [frozenset("bc")])
    assert sorted("".join(sorted(b)) for b in got) == ["ab", "ac", "cd"]


def test_sensitive_rules_file(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text('[{"antecedent": [1, 2], "consequent": [3], "confidence": 0.9}]')
    assert load_sensitive_rules(p) == [SensitiveRule(frozenset({1, 2}), frozenset({3}))]
    for bad in (
        "{}",
        "[]",
        '[{"antecedent": [1]}]',
        '[{"antecedent": [1], "consequent": [1]}]',
        '[{"antecedent": "ab", "consequent": [1]}]',
        "not json",
    ):
        p.write_text(bad)
        with pytest.raises(ConfigError):
            load_sensitive_rules(p)
    db = from_transactions([[1, 2, 3]])
    with pytest.raises(ConfigError):
        hide_rules(
            db, [{"antecedent": [9], "consequent": [1]}], min_support=0.5, min_confidence=0.5
        )
    with pytest.raises(ConfigError):
        hide_rules(
            db,
            [{"antecedent": [1], "consequent": [2]}],
            min_support=0.5,
            min_confidence=0.5,
            method="nope",
        )


# -- real data, checked with mlxtend ------------------------------------------------------

REAL = [
    ("mushroom.dat", None, 0.4, 0.9),
    ("chess.dat", None, 0.9, 0.95),
    ("retail.dat", 10_000, 0.01, 0.3),
]


def _mlxtend_rule_keys(db, s: float, c: float) -> set:
    from mlxtend.frequent_patterns import association_rules, fpgrowth
    from mlxtend.preprocessing import TransactionEncoder

    tx = [list(t) for t in db.transactions()]
    # An itemset is frequent only if each of its items is (anti-monotonicity), so mlxtend
    # mines the same rules on the items with at least half the minimum count: retail's
    # thousands of rare items made the one-hot frame, and pandas' per-column work, most of
    # this oracle's cost. Every transaction stays, so supports keep their denominator.
    counts = Counter(x for t in tx for x in t)
    keep = {x for x, k in counts.items() if 2 * k >= s * len(tx)}
    if not keep:
        return set()
    tx = [[x for x in t if x in keep] for t in tx]
    te = TransactionEncoder()
    df = pd.DataFrame(te.fit(tx).transform(tx), columns=te.columns_)
    fi = fpgrowth(df, min_support=s, use_colnames=True)
    if fi.empty:
        return set()
    rules = association_rules(fi, len(tx), metric="confidence", min_threshold=c)
    return {
        (frozenset(int(x) for x in a), frozenset(int(x) for x in b))
        for a, b in zip(rules.antecedents, rules.consequents, strict=True)
    }


@pytest.fixture(scope="module", params=REAL, ids=[r[0] for r in REAL])
def real_case(request, fimi_dir: Path):
    name, rows, s, c = request.param
    db = read_fimi(fimi_dir / name)
    if rows is not None:
        db = db.subset(np.arange(rows))
    before = mine(db, min_support=s, min_confidence=c)
    rng = make_rng(2024)
    pick = rng.permutation(len(before.rules))[:5]
    sens = [SensitiveRule.of(before.rules[i]) for i in pick.tolist()]
    return db, before, sens, s, c


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("method", METHODS)
def test_real_data_sensitive_rules_not_mined(real_case, method: str) -> None:
    db, before, sens, s, c = real_case
    res = hide_rules(
        db,
        sens,
        min_support=s,
        min_confidence=c,
        method=method,
        before=before,
        evaluate=False,
        time_limit=20.0,
        max_vars=20_000,
    )
    found = _mlxtend_rule_keys(res.sanitized, s, c)
    assert not ({r.key for r in sens} & found)
    assert found  # the release is not destroyed
