"""Vertical association rules on the fast paths (issue 14, items 2 and 3): exactness.

Two owners count a candidate with the column dot products (one OT per distinct part and
transaction, packed corrections), three or more with the GMW-style AND-and-count; both
must give exactly the frequent itemsets, support counts and rules of centralized miners
on the pooled data: mlxtend's Apriori (with its rules) and pyfim's Apriori, on samples of
mushroom, chess and BMS-WebView-1 split among 2, 3 and 4 parties, and on random small
databases and partitions (hypothesis). The old paths (``method="gilboa"``,
``multiparty="intersection"``) stay available and agree. The oracles parse the FIMI
files in plain Python and never call ppdm's miners.
"""

from __future__ import annotations

import functools
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.mining.assoc_common import AssocResult
from ppdm.mining.readers import from_transactions
from ppdm.mining.vertical_rules import vertical_association_rules
from ppdm.parties.local import simulate

NAMES = ["alice", "bob", "carol", "dave"]
Tx = list[list[int]]


@functools.cache
def _fimi(path: Path) -> tuple[tuple[int, ...], ...]:
    with open(path) as fh:
        return tuple(tuple(sorted({int(x) for x in line.split()})) for line in fh)


def _sample(fimi_dir: Path, name: str, rows: int, seed: int) -> Tx:
    tx = _fimi(fimi_dir / name)
    idx = np.sort(np.random.default_rng(seed).choice(len(tx), rows, replace=False))
    return [list(tx[i]) for i in idx]


def run(tx: Tx, n_parties: int, seed: int, s: float, conf: float, **kw: Any) -> AssocResult:
    """The items dealt to the parties at random; every party's result must agree."""
    items = sorted({x for t in tx for x in t})
    order = np.random.default_rng(seed).permutation(len(items))
    owned = [{items[i] for i in part} for part in np.array_split(order, n_parties)]
    inputs = {
        p: from_transactions([[x for x in t if x in own] for t in tx])
        for p, own in zip(NAMES[:n_parties], owned, strict=True)
    }
    sim = simulate(
        lambda net, db: vertical_association_rules(
            net, db, min_support=s, min_confidence=conf, **kw
        ),
        inputs,
        timeout=120,
    )
    first, *rest = sim.results.values()
    for r in rest:
        assert r.itemsets == first.itemsets
        assert r.to_json()["rules"] == first.to_json()["rules"]
    return first


def threshold(s: float, n: int) -> int:
    return next(c for c in range(1, n + 1) if c / n >= s)


def pyfim_counts(tx: Tx, s: float) -> dict[frozenset, int]:
    import fim

    found = fim.apriori([*tx, []], target="s", supp=-threshold(s, len(tx)), zmin=1, report="a")
    return {frozenset(i): int(c) for i, c in found}


def mlxtend_check(got: AssocResult, tx: Tx, s: float) -> None:
    """Itemsets, counts and rules (confidence and lift) equal mlxtend's."""
    from mlxtend.frequent_patterns import apriori, association_rules
    from mlxtend.preprocessing import TransactionEncoder

    n = len(tx)
    te = TransactionEncoder().fit(tx)
    onehot = pd.DataFrame(te.transform(tx), columns=te.columns_)
    fi = apriori(onehot, min_support=s, use_colnames=True)
    want = {
        frozenset(int(x) for x in i): round(v * n)
        for i, v in zip(fi.itemsets, fi.support, strict=True)
    }
    assert got.itemsets == want
    if not any(len(i) > 1 for i in fi.itemsets):
        assert not got.rules
        return
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        rules = association_rules(
            fi, num_itemsets=n, metric="confidence", min_threshold=got.min_confidence
        )
    theirs = {
        (frozenset(map(int, a)), frozenset(map(int, c))): (conf, lift)
        for a, c, conf, lift in zip(
            rules.antecedents, rules.consequents, rules.confidence, rules.lift, strict=True
        )
    }
    ours = {(r.antecedent, r.consequent): r for r in got.rules}
    assert set(theirs) <= set(ours)
    for key in set(ours) - set(theirs):  # mlxtend's float rounding exactly at the threshold
        exact = Fraction(ours[key].support_count, want[key[0]])
        assert exact == Fraction(repr(float(got.min_confidence)))
    for key, (conf, lift) in theirs.items():
        assert ours[key].confidence == pytest.approx(conf, rel=1e-12)
        assert ours[key].lift == pytest.approx(lift, rel=1e-12)


def spans(got: AssocResult, owners: int) -> int:
    """Candidates counted by exactly ``owners`` parties together."""
    return sum(
        m for lv in got.levels for g, m in lv["groups"].items() if g.count("+") == owners - 1
    )


# (file, rows, min support, parties, min confidence, seed)
CASES = [
    ("mushroom.dat", 600, 0.4, 2, 0.8, 1),
    ("mushroom.dat", 600, 0.4, 3, 0.8, 2),
    ("mushroom.dat", 400, 0.45, 4, 0.7, 3),
    ("chess.dat", 300, 0.92, 3, 0.9, 4),
    ("chess.dat", 200, 0.95, 4, 0.9, 5),
    ("BMS1.dat", 6000, 0.005, 2, 0.3, 6),
    ("BMS1.dat", 6000, 0.005, 3, 0.3, 7),
]


@pytest.mark.parametrize(("name", "rows", "s", "n_parties", "conf", "seed"), CASES)
def test_fast_paths_match_mlxtend_and_pyfim(
    fimi_dir: Path, name: str, rows: int, s: float, n_parties: int, conf: float, seed: int
) -> None:
    tx = _sample(fimi_dir, name, rows, seed)
    got = run(tx, n_parties, seed, s, conf)
    mlxtend_check(got, tx, s)
    assert got.itemsets == pyfim_counts(tx, s)
    assert spans(got, 2) > 0
    if n_parties > 2 and name != "BMS1.dat":
        assert spans(got, 3) > 0  # candidates over three parties took the GMW path
    if n_parties == 4 and name == "mushroom.dat":
        assert spans(got, 4) > 0  # and over four
    # The costs are in the result: payload bytes per candidate and transaction.
    per = [lv["bytes_per_candidate_transaction"] for lv in got.levels if lv["shared_candidates"]]
    assert per and all(b > 0 for b in per)


def test_old_paths_agree_and_cost_more(fimi_dir: Path) -> None:
    """``gilboa`` (one OT per candidate and transaction) and the EC intersection give the
    same counts; the default sends over ten times fewer bytes per candidate (bytes are
    deterministic: message sizes do not depend on the randomness)."""
    small = _sample(fimi_dir, "mushroom.dat", 100, 9)
    new = run(small, 3, 10, 0.5, 0.8)
    old = run(small, 3, 10, 0.5, 0.8, method="gilboa", multiparty="intersection")
    assert new.itemsets == old.itemsets == pyfim_counts(small, 0.5)
    assert spans(new, 3) > 0
    tx = _sample(fimi_dir, "BMS1.dat", 3000, 12)

    def bytes_per(res: AssocResult) -> float:
        levels = [lv for lv in res.levels if lv["shared_candidates"]]
        return sum(lv["payload_bytes"] for lv in levels) / sum(
            lv["shared_candidates"] for lv in levels
        )

    two = run(tx, 2, 11, 0.015, 0.8)
    two_old = run(tx, 2, 11, 0.015, 0.8, method="gilboa")
    assert two.itemsets == two_old.itemsets == pyfim_counts(tx, 0.015)
    assert spans(two, 2) > 100
    # about 1.3 against 24 bytes per candidate and transaction
    assert bytes_per(two) * 10 < bytes_per(two_old)


def test_unknown_options_refused() -> None:
    db = from_transactions([[1], [2]])
    with pytest.raises(ValueError, match="method"):
        vertical_association_rules(None, db, min_support=0.5, min_confidence=0.5, method="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="multiparty"):
        vertical_association_rules(
            None,  # type: ignore[arg-type]
            db,
            min_support=0.5,
            min_confidence=0.5,
            multiparty="x",  # type: ignore[arg-type]
        )


@settings(max_examples=15)
@given(
    st.lists(st.lists(st.integers(0, 9), max_size=7), min_size=2, max_size=30),
    st.integers(2, 4),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.1, 0.2, 0.4]),
    st.sampled_from([0.0, 0.6]),
)
def test_random_small_partitions(tx: Tx, n_parties: int, seed: int, s: float, conf: float) -> None:
    tx = [sorted(set(t)) for t in tx]
    if len({x for t in tx for x in t}) < n_parties:  # every party holds some item
        tx = [*tx, list(range(n_parties))]
    got = run(tx, n_parties, seed, s, conf)
    mlxtend_check(got, tx, s)
    assert got.itemsets == pyfim_counts(tx, s)
