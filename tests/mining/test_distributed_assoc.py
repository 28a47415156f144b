"""Exactness of distributed association-rule mining (issue 5) on the in-process network.

The frequent itemsets (with support counts where they are revealed) and the rules found
by the parties together must be identical to those of a centralized miner on the pooled
data: mlxtend's ``apriori`` + ``association_rules`` (and pyfim's Apriori as a second
oracle), for random partitions among 2-5 parties of the FIMI benchmark sets at several
minimum supports and confidences.

- Horizontal (Kantarcioglu & Clifton; Aggarwal 2015, §20.5, figure 20.6): each party
  holds some transactions; tested with published counts (``reveal_counts=True``) and in
  the private mode, where only the itemsets and the rules (without measures) are output.
- Vertical (Vaidya & Clifton; Aggarwal 2015, §20.5): each party holds some items of all
  transactions; candidates within two parties use the shared-OT column dot products,
  over three or more the GMW-style chain (``tests/mining/test_vertical_fast.py`` covers
  both at scale; the older intersection-cardinality path is kept as an option).

The oracles read the FIMI files with a plain Python parser and never call ppdm's miners.
"""

from __future__ import annotations

import collections
import functools
import itertools
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
from ppdm.mining.horizontal_rules import horizontal_association_rules
from ppdm.mining.readers import from_transactions
from ppdm.mining.vertical_rules import vertical_association_rules
from ppdm.parties.local import simulate

Tx = list[list[Any]]
RuleMap = dict[tuple[frozenset, frozenset], tuple[float, float]]

# -- data and partitions ------------------------------------------------------------------


@functools.cache
def _fimi(path: Path) -> tuple[tuple[int, ...], ...]:
    """Independent FIMI parse (plain Python): one sorted tuple of ints per line."""
    with open(path) as fh:
        return tuple(tuple(sorted({int(x) for x in line.split()})) for line in fh)


def _load(fimi_dir: Path, name: str, rows: int | None, seed: int = 0) -> Tx:
    """All transactions of ``name``, or a seeded random sample of ``rows`` of them (in file
    order; the heads of the FIMI files are far more homogeneous than the whole)."""
    tx = _fimi(fimi_dir / name)
    if rows is not None:
        idx = np.sort(np.random.default_rng(seed).choice(len(tx), rows, replace=False))
        tx = tuple(tx[i] for i in idx)
    return [list(t) for t in tx]


def _row_partition(n_rows: int, n_parties: int, seed: int) -> list[np.ndarray]:
    """Each transaction to a uniformly random party (unequal sizes), rows in order."""
    owner = np.random.default_rng(seed).integers(0, n_parties, n_rows)
    return [np.flatnonzero(owner == p) for p in range(n_parties)]


def _item_partition(tx: Tx, n_parties: int, seed: int) -> list[set]:
    """The pooled items dealt to the parties in a random order (near-equal shares)."""
    items = sorted({x for t in tx for x in t})
    order = np.random.default_rng(seed).permutation(len(items))
    return [{items[i] for i in part} for part in np.array_split(order, n_parties)]


def _names(n: int) -> list[str]:
    return ["alice", "bob", "carol", "dave", "erin"][:n]


def run_horizontal(
    tx: Tx, n_parties: int, *, seed: int, min_support: float, min_confidence: float, **kw: Any
) -> AssocResult:
    parts = _row_partition(len(tx), n_parties, seed)
    inputs = {
        p: from_transactions([tx[i] for i in rows])
        for p, rows in zip(_names(n_parties), parts, strict=True)
    }
    sim = simulate(
        lambda net, db: horizontal_association_rules(
            net, db, min_support=min_support, min_confidence=min_confidence, **kw
        ),
        inputs,
        timeout=120,
    )
    return _same_everywhere(sim.results)


def run_vertical(
    tx: Tx, n_parties: int, *, seed: int, min_support: float, min_confidence: float, **kw: Any
) -> AssocResult:
    owned = _item_partition(tx, n_parties, seed)
    inputs = {
        p: from_transactions([[x for x in t if x in own] for t in tx])
        for p, own in zip(_names(n_parties), owned, strict=True)
    }
    sim = simulate(
        lambda net, db: vertical_association_rules(
            net, db, min_support=min_support, min_confidence=min_confidence, **kw
        ),
        inputs,
        timeout=120,
    )
    return _same_everywhere(sim.results)


def _same_everywhere(results: dict[str, AssocResult]) -> AssocResult:
    first, *rest = results.values()
    for r in rest:
        assert r.n_transactions == first.n_transactions
        assert r.itemsets == first.itemsets
        assert r.to_json()["rules"] == first.to_json()["rules"]
    return first


# -- oracles --------------------------------------------------------------------------------


def _onehot(tx: Tx, min_support: float) -> pd.DataFrame:
    """One-hot frame of the pooled data over the frequent single items only (an itemset
    with an infrequent item is infrequent, so the result is unchanged; it keeps the frame
    small on sparse sets with thousands of items)."""
    from mlxtend.preprocessing import TransactionEncoder

    n = len(tx)
    freq = collections.Counter(x for t in tx for x in t)
    keep = {x for x, c in freq.items() if c / n >= min_support}
    kept = [[x for x in t if x in keep] for t in tx]
    te = TransactionEncoder()
    return pd.DataFrame(te.fit(kept).transform(kept), columns=te.columns_)


_MLX_CACHE: dict[tuple, pd.DataFrame] = {}


def mlxtend_itemsets(tx: Tx, min_support: float, key: tuple | None = None) -> pd.DataFrame:
    """mlxtend's Apriori on the pooled data (cached per ``key``: file, rows, sample seed)."""
    from mlxtend.frequent_patterns import apriori

    if key is not None and (key, min_support) in _MLX_CACHE:
        return _MLX_CACHE[(key, min_support)]
    onehot = _onehot(tx, min_support)
    if onehot.shape[1] == 0:
        return pd.DataFrame({"support": [], "itemsets": []})
    df = apriori(onehot, min_support=min_support, use_colnames=True, low_memory=True)
    if key is not None:
        _MLX_CACHE[(key, min_support)] = df
    return df


def counts_of(fi: pd.DataFrame, n: int) -> dict[frozenset, int]:
    return {
        frozenset(_plain(x) for x in s): round(v * n)
        for s, v in zip(fi.itemsets, fi.support, strict=True)
    }


def mlxtend_rules(fi: pd.DataFrame, n: int, min_confidence: float) -> RuleMap:
    from mlxtend.frequent_patterns import association_rules

    if not any(len(x) > 1 for x in fi.itemsets):
        return {}
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        rules = association_rules(
            fi, num_itemsets=n, metric="confidence", min_threshold=min_confidence
        )
    return {
        (frozenset(_plain(x) for x in a), frozenset(_plain(x) for x in c)): (conf, lift)
        for a, c, conf, lift in zip(
            rules.antecedents, rules.consequents, rules.confidence, rules.lift, strict=True
        )
    }


def pyfim_itemsets(tx: Tx, count: int) -> dict[frozenset, int]:
    """Borgelt's Apriori (pyfim); one extra empty transaction keeps items present in every
    transaction in its output and changes no count."""
    import fim

    res = fim.apriori([*tx, []], target="s", supp=-count, zmin=1, report="a")
    return {frozenset(s): int(c) for s, c in res}


def count_threshold(min_support: float, n: int) -> int:
    """Smallest count ``c`` with ``c / n >= min_support`` (mlxtend's test), by search."""
    return next(c for c in range(1, n + 1) if c / n >= min_support)


def _plain(x: Any) -> Any:
    return x.item() if hasattr(x, "item") else x


def check_rule_keys(
    got: set, want: RuleMap, counts: dict[frozenset, int], min_confidence: float
) -> None:
    """The rule sets agree, up to mlxtend's rounding at the threshold.

    mlxtend computes a confidence as ``(c_xy / n) / (c_x / n)``; when the exact ratio
    ``c_xy / c_x`` equals the decimal threshold that quotient can fall one ulp below it
    (96/120 of 300 transactions gives 0.7999999999999999 < 0.8), and mlxtend drops a rule
    that the definition ``conf >= min_confidence`` keeps. Such rules (and only such) may
    appear in ``got`` alone.
    """
    assert not set(want) - got, "rules mlxtend finds are missing"
    threshold = Fraction(repr(float(min_confidence)))
    for x, y in got - set(want):
        assert Fraction(counts[x | y], counts[x]) == threshold, (sorted(x), sorted(y))


def check_counts_and_rules(got: AssocResult, fi: pd.DataFrame, n: int) -> None:
    """Itemsets, counts and rules (with confidence and lift) equal mlxtend's."""
    want = counts_of(fi, n)
    assert got.counts_revealed
    assert got.n_transactions == n
    assert got.itemsets == want
    want_rules = mlxtend_rules(fi, n, got.min_confidence)
    got_rules = {(r.antecedent, r.consequent): r for r in got.rules}
    assert len(got_rules) == len(got.rules)
    check_rule_keys(set(got_rules), want_rules, want, got.min_confidence)
    for key, (conf, lift) in want_rules.items():
        rule = got_rules[key]
        assert rule.support_count == want[key[0] | key[1]]
        assert rule.confidence == pytest.approx(conf, rel=1e-12)
        assert rule.lift == pytest.approx(lift, rel=1e-12)


def check_private(got: AssocResult, fi: pd.DataFrame, n: int) -> None:
    """Private horizontal mode: the same itemsets and rules, no counts or measures."""
    assert not got.counts_revealed
    counts = counts_of(fi, n)
    assert set(got.itemsets) == set(counts)
    assert all(v is None for v in got.itemsets.values())
    keys = [(frozenset(r["antecedent"]), frozenset(r["consequent"])) for r in got.rules]
    assert len(set(keys)) == len(keys)
    check_rule_keys(set(keys), mlxtend_rules(fi, n, got.min_confidence), counts, got.min_confidence)
    doc = got.to_json()
    assert all(i["support_count"] is None for i in doc["frequent_itemsets"])
    assert all(r["confidence"] is None for r in doc["rules"])


# -- horizontal partitioning -----------------------------------------------------------------

# (file, sampled rows or None for all, min support, parties, min confidence, seed)
HORIZONTAL = [
    ("mushroom.dat", None, 0.5, 2, 0.9, 1),
    ("mushroom.dat", None, 0.4, 4, 0.7, 2),
    ("chess.dat", None, 0.9, 5, 0.95, 3),
    ("retail.dat", 20000, 0.01, 3, 0.5, 4),
    ("T10I4D100K.dat", 20000, 0.01, 4, 0.6, 5),
]


@pytest.mark.parametrize(("name", "rows", "s", "n_parties", "conf", "seed"), HORIZONTAL)
def test_horizontal_revealed_counts_match_mlxtend(
    fimi_dir: Path, name: str, rows: int | None, s: float, n_parties: int, conf: float, seed: int
) -> None:
    tx = _load(fimi_dir, name, rows)
    got = run_horizontal(
        tx, n_parties, seed=seed, min_support=s, min_confidence=conf, reveal_counts=True
    )
    fi = mlxtend_itemsets(tx, s, key=(name, rows, 0))
    assert len(fi) > 50  # a real workload, several levels deep
    check_counts_and_rules(got, fi, len(tx))
    assert [lv["k"] for lv in got.levels] == list(range(1, len(got.levels) + 1))


@pytest.mark.slow
def test_horizontal_mushroom_low_support_matches_pyfim(fimi_dir: Path) -> None:
    """2,735 itemsets up to 7 items, 43,558 rules at 0.3 / 0.8 among 3 parties."""
    tx = _load(fimi_dir, "mushroom.dat", None)
    got = run_horizontal(tx, 3, seed=7, min_support=0.3, min_confidence=0.8, reveal_counts=True)
    n = len(tx)
    assert got.itemsets == pyfim_itemsets(tx, count_threshold(0.3, n))
    check_counts_and_rules(got, mlxtend_itemsets(tx, 0.3, key=("mushroom.dat", None, 0)), n)


# (file, sampled rows, min support, parties, min confidence, seed)
PRIVATE = [
    ("mushroom.dat", None, 0.5, 2, 0.9, 11),
    ("mushroom.dat", None, 0.4, 3, 0.95, 12),
    ("chess.dat", None, 0.95, 4, 0.9, 13),
    ("retail.dat", 20000, 0.02, 3, 0.3, 14),
    ("T10I4D100K.dat", 20000, 0.01, 5, 0.2, 15),
]


@pytest.mark.parametrize(("name", "rows", "s", "n_parties", "conf", "seed"), PRIVATE)
def test_horizontal_private_mode_matches_mlxtend(
    fimi_dir: Path, name: str, rows: int | None, s: float, n_parties: int, conf: float, seed: int
) -> None:
    tx = _load(fimi_dir, name, rows)
    got = run_horizontal(tx, n_parties, seed=seed, min_support=s, min_confidence=conf)
    fi = mlxtend_itemsets(tx, s, key=(name, rows, 0))
    check_private(got, fi, len(tx))
    assert got.rules  # every case has confident rules to decide


@pytest.mark.parametrize("conf", [0.0, 0.7, 0.95, 1.0])
def test_horizontal_private_rules_at_each_confidence(fimi_dir: Path, conf: float) -> None:
    tx = _load(fimi_dir, "chess.dat", 600, seed=21)
    got = run_horizontal(tx, 3, seed=22, min_support=0.92, min_confidence=conf)
    check_private(got, mlxtend_itemsets(tx, 0.92, key=("chess.dat", 600, 21)), len(tx))


@settings(max_examples=15)
@given(
    st.lists(st.lists(st.integers(0, 7), max_size=6), min_size=2, max_size=24),
    st.integers(2, 4),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.1, 0.2, 0.25, 0.3, 0.5]),
    st.sampled_from([0.0, 0.4, 0.6, 2 / 3, 1.0]),
    st.booleans(),
)
def test_horizontal_small_random_partitions(
    tx: Tx, n_parties: int, seed: int, s: float, conf: float, reveal: bool
) -> None:
    """Random small databases, partitions (parties may hold no transaction), supports and
    confidences, in both modes, against mlxtend and pyfim."""
    tx = [sorted(set(t)) for t in tx]
    got = run_horizontal(
        tx, n_parties, seed=seed, min_support=s, min_confidence=conf, reveal_counts=reveal
    )
    n = len(tx)
    fi = mlxtend_itemsets(tx, s)
    pf = pyfim_itemsets(tx, count_threshold(s, n))
    assert set(counts_of(fi, n)) == set(pf)
    if reveal:
        check_counts_and_rules(got, fi, n)
    else:
        check_private(got, fi, n)


def test_horizontal_string_labels() -> None:
    """Basket data with string items (encoded in ``label_bytes`` bytes per item)."""
    rng = np.random.default_rng(31)
    goods = ["milk", "bread", "butter", "beer", "diapers", "eggs", "cola", "chips"]
    tx = [sorted(set(rng.choice(goods, size=rng.integers(1, 6)).tolist())) for _ in range(300)]
    got = run_horizontal(
        tx, 3, seed=32, min_support=0.15, min_confidence=0.6, reveal_counts=True, label_bytes=8
    )
    check_counts_and_rules(got, mlxtend_itemsets(tx, 0.15), len(tx))


# -- horizontal, with a minimum aggregation (min_aggregate, colluders; issue 21) -------------


def _skewed_partition(tx: Tx, n_parties: int, seed: int, item: Any) -> list[np.ndarray]:
    """Every transaction holding ``item`` to the first party, the rest at random: the
    itemsets with ``item`` rest on one party alone, which the release rule must drop."""
    owner = np.random.default_rng(seed).integers(0, n_parties, len(tx))
    owner[[i for i, t in enumerate(tx) if item in t]] = 0
    return [np.flatnonzero(owner == p) for p in range(n_parties)]


def filtered_oracle(
    tx: Tx,
    parts: list[np.ndarray],
    min_support: float,
    min_aggregate: int,
    colluders: int,
) -> dict[frozenset, int]:
    """The centralized result filtered by the release rule, from the pooled data and the
    split: pooled count ``>= max(T, m)`` (pyfim on the pooled data) and, for every set of
    ``colluders`` parties, the count outside them ``>= m`` (plain Python per party)."""
    n = len(tx)
    pooled = pyfim_itemsets(tx, max(count_threshold(min_support, n), min_aggregate, 1))
    # Per party, each item's set of transactions: an itemset's count there is the size of
    # the intersection of its items' sets.
    holders: list[dict[Any, set[int]]] = []
    for rows in parts:
        tids: dict[Any, set[int]] = collections.defaultdict(set)
        for i in rows.tolist():
            for x in tx[i]:
                tids[x].add(i)
        holders.append(tids)
    out = {}
    for itemset, count in pooled.items():
        per_party = [len(set.intersection(*(tids[x] for x in itemset))) for tids in holders]
        assert sum(per_party) == count
        if all(
            count - sum(per_party[j] for j in coalition) >= min_aggregate
            for coalition in itertools.combinations(range(len(parts)), colluders)
        ):
            out[itemset] = count
    return out


def oracle_rule_keys(counts: dict[frozenset, int], min_confidence: float) -> set:
    """Confident rules of ``counts`` by exact fractions (every subset is in ``counts``)."""
    bar = Fraction(repr(float(min_confidence)))
    keys = set()
    for z, cz in counts.items():
        for r in range(1, len(z)):
            for x in itertools.combinations(sorted(z), r):
                xs = frozenset(x)
                if Fraction(cz, counts[xs]) >= bar:
                    keys.add((xs, z - xs))
    return keys


def run_horizontal_parts(
    tx: Tx, parts: list[np.ndarray], *, min_support: float, min_confidence: float, **kw: Any
) -> AssocResult:
    inputs = {
        p: from_transactions([tx[i] for i in rows])
        for p, rows in zip(_names(len(parts)), parts, strict=True)
    }
    sim = simulate(
        lambda net, db: horizontal_association_rules(
            net, db, min_support=min_support, min_confidence=min_confidence, **kw
        ),
        inputs,
        timeout=120,
    )
    return _same_everywhere(sim.results)


def _rule_keys_of(got: AssocResult) -> set:
    if got.counts_revealed:
        return {(r.antecedent, r.consequent) for r in got.rules}
    return {(frozenset(r["antecedent"]), frozenset(r["consequent"])) for r in got.rules}


# (file, sampled rows, min support, parties, min confidence, min_aggregate, colluders, seed)
MIN_AGGREGATE = [
    ("mushroom.dat", 1000, 0.35, 3, 0.8, 10, 1, 91),
    ("chess.dat", 600, 0.9, 4, 0.9, 10, 2, 92),
    ("retail.dat", 20000, 0.01, 3, 0.3, 10, 1, 93),
    ("T10I4D100K.dat", 10000, 0.01, 3, 0.5, 25, 1, 94),
]


@pytest.mark.parametrize("reveal", [False, True])
@pytest.mark.parametrize(
    ("name", "rows", "s", "n_parties", "conf", "m", "c", "seed"), MIN_AGGREGATE
)
def test_horizontal_min_aggregate_equals_filtered_centralized(
    fimi_dir: Path,
    name: str,
    rows: int,
    s: float,
    n_parties: int,
    conf: float,
    m: int,
    c: int,
    seed: int,
    reveal: bool,
) -> None:
    """With ``min_aggregate`` the parties find exactly the centralized itemsets that pass
    the release rule, with their counts when revealed (of released itemsets only), and
    exactly the confident rules among them. The split puts every transaction with one
    frequent item at the first party, so the rule drops real itemsets."""
    tx = _load(fimi_dir, name, rows, seed=seed)
    n = len(tx)
    freq = collections.Counter(x for t in tx for x in t)
    t = count_threshold(s, n)
    # An item frequent enough to be found, held by the first party alone.
    item = min((k, x) for x, k in freq.items() if t <= k < n)[1]
    parts = _skewed_partition(tx, n_parties, seed, item)
    got = run_horizontal_parts(
        tx,
        parts,
        min_support=s,
        min_confidence=conf,
        reveal_counts=reveal,
        min_aggregate=m,
        colluders=c,
    )
    want = filtered_oracle(tx, parts, s, m, c)
    unfiltered = pyfim_itemsets(tx, max(t, m))
    assert frozenset([item]) in unfiltered and frozenset([item]) not in want
    assert set(got.itemsets) == set(want)
    if reveal:
        assert got.itemsets == want
    else:
        assert all(v is None for v in got.itemsets.values())
    assert _rule_keys_of(got) == oracle_rule_keys(want, conf)
    assert [lv["frequent"] for lv in got.levels if lv["frequent"]] == [
        sum(len(k) == level for k in want) for level in range(1, max(map(len, want)) + 1)
    ]


@settings(max_examples=15)
@given(
    st.lists(st.lists(st.integers(0, 6), max_size=6), min_size=2, max_size=30),
    st.integers(2, 4),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.05, 0.1, 0.25, 0.5]),
    st.sampled_from([0.0, 0.5, 1.0]),
    st.integers(1, 6),
    st.integers(1, 3),
    st.booleans(),
)
def test_horizontal_min_aggregate_small_random(
    tx: Tx, n_parties: int, seed: int, s: float, conf: float, m: int, c: int, reveal: bool
) -> None:
    """Random small data, partitions, minimum aggregations and coalition sizes."""
    tx = [sorted(set(t)) for t in tx]
    parts = _row_partition(len(tx), n_parties, seed)
    kw = {"min_support": s, "min_confidence": conf, "reveal_counts": reveal}
    if c >= n_parties:
        with pytest.raises(ValueError, match="more parties than colluders"):
            run_horizontal_parts(tx, parts, min_aggregate=m, colluders=c, **kw)
        return
    got = run_horizontal_parts(tx, parts, min_aggregate=m, colluders=c, **kw)
    want = filtered_oracle(tx, parts, s, m, c)
    assert set(got.itemsets) == set(want)
    if reveal:
        assert got.itemsets == want
    assert _rule_keys_of(got) == oracle_rule_keys(want, conf)


def test_horizontal_min_aggregate_zero_is_plain_kc(fimi_dir: Path) -> None:
    """``min_aggregate=0`` is today's protocol: the same result and the same messages."""
    # 343 itemsets over 6 levels at 0.45 (1,309 over 8 at 0.35 cost four times the
    # protocol work for the same comparison; the 0.3 test above mines the larger set).
    tx = _load(fimi_dir, "mushroom.dat", 1500, seed=95)
    parts = _row_partition(len(tx), 3, 96)
    kw = {"min_support": 0.45, "min_confidence": 0.8}
    plain = run_horizontal_parts(tx, parts, **kw)
    zero = run_horizontal_parts(tx, parts, min_aggregate=0, colluders=2, **kw)
    assert zero.itemsets == plain.itemsets and zero.rules == plain.rules
    assert set(plain.itemsets) == set(pyfim_itemsets(tx, count_threshold(0.45, len(tx))))
    assert len(plain.itemsets) > 300 and len(plain.levels) >= 6 and plain.rules


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"min_aggregate": -1}, "non-negative"),
        ({"min_aggregate": 1.5}, "non-negative"),
        ({"colluders": 0}, "positive"),
        ({"min_aggregate": 3, "colluders": 3}, "more parties than colluders"),
    ],
)
def test_horizontal_min_aggregate_bad_parameters(kw: dict, message: str) -> None:
    tx = [[1, 2], [1], [2, 3]] * 4
    with pytest.raises(ValueError, match=message):
        run_horizontal_parts(
            tx, _row_partition(len(tx), 3, 1), min_support=0.2, min_confidence=0.5, **kw
        )


# -- vertical partitioning -------------------------------------------------------------------

# (file, sampled rows or None, min support, parties, min confidence, seed)
VERTICAL_TWO = [
    ("mushroom.dat", None, 0.5, 0.8, 41),
    ("mushroom.dat", None, 0.4, 0.9, 42),
    ("chess.dat", None, 0.9, 0.95, 43),
    ("retail.dat", 5000, 0.01, 0.3, 44),
    ("T10I4D100K.dat", 2000, 0.02, 0.2, 45),
]


@pytest.mark.parametrize(("name", "rows", "s", "conf", "seed"), VERTICAL_TWO)
def test_vertical_two_parties_match_mlxtend(
    fimi_dir: Path, name: str, rows: int | None, s: float, conf: float, seed: int
) -> None:
    tx = _load(fimi_dir, name, rows)
    got = run_vertical(tx, 2, seed=seed, min_support=s, min_confidence=conf)
    fi = mlxtend_itemsets(tx, s, key=(name, rows, 0))
    check_counts_and_rules(got, fi, len(tx))
    # Some itemsets span both parties (counted by the OT dot product).
    assert any("+" in g for lv in got.levels for g in lv.get("groups", {}))


# Three or more parties: secure intersection cardinality (EC), on a few hundred rows.
VERTICAL_MANY = [
    ("mushroom.dat", 200, 0.5, 3, 0.8, 51),
    ("chess.dat", 100, 0.95, 4, 0.9, 52),
    ("retail.dat", 300, 0.05, 3, 0.3, 53),
    ("T10I4D100K.dat", 300, 0.015, 5, 0.5, 54),
]


@pytest.mark.parametrize(("name", "rows", "s", "n_parties", "conf", "seed"), VERTICAL_MANY)
def test_vertical_many_parties_match_mlxtend(
    fimi_dir: Path, name: str, rows: int, s: float, n_parties: int, conf: float, seed: int
) -> None:
    tx = _load(fimi_dir, name, rows, seed=seed)
    got = run_vertical(tx, n_parties, seed=seed, min_support=s, min_confidence=conf)
    fi = mlxtend_itemsets(tx, s)
    check_counts_and_rules(got, fi, len(tx))
    assert got.itemsets == pyfim_itemsets(tx, count_threshold(s, len(tx)))
    # Some candidates span three or more parties (secure intersection cardinality).
    assert any(g.count("+") >= 2 and m for lv in got.levels for g, m in lv["groups"].items())


def test_vertical_mushroom_three_parties_larger(fimi_dir: Path) -> None:
    """265 itemsets at 0.45 on 300 rows, 20 candidates over all three parties' items."""
    tx = _load(fimi_dir, "mushroom.dat", 300, seed=61)
    got = run_vertical(tx, 3, seed=62, min_support=0.45, min_confidence=0.8)
    check_counts_and_rules(got, mlxtend_itemsets(tx, 0.45), len(tx))
    spans = sum(lv["groups"].get("alice+bob+carol", 0) for lv in got.levels)
    assert spans >= 15


@settings(max_examples=10)
@given(
    st.lists(st.lists(st.integers(0, 7), max_size=6), min_size=2, max_size=20),
    st.integers(2, 3),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.1, 0.25, 0.5]),
    st.sampled_from([0.0, 0.5, 1.0]),
)
def test_vertical_small_random_partitions(
    tx: Tx, n_parties: int, seed: int, s: float, conf: float
) -> None:
    tx = [sorted(set(t)) for t in tx]
    if len({x for t in tx for x in t}) < n_parties:  # every party holds some item
        tx = [*tx, list(range(n_parties))]
    got = run_vertical(tx, n_parties, seed=seed, min_support=s, min_confidence=conf)
    check_counts_and_rules(got, mlxtend_itemsets(tx, s), len(tx))


def test_vertical_paillier_method_matches() -> None:
    """``method="paillier"`` (Vaidya & Clifton 2002 with an encrypted scalar product) gives
    the same result as the OT path. Every distinct cross-party antecedent part costs a
    2048-bit Paillier dot product, so the data are small: 80 transactions over 4 items."""
    rng = np.random.default_rng(71)
    tx = [sorted(np.flatnonzero(rng.random(4) < 0.7).tolist()) for _ in range(80)]
    kw = {"seed": 72, "min_support": 0.3, "min_confidence": 0.6}
    got = run_vertical(tx, 2, method="paillier", **kw)
    check_counts_and_rules(got, mlxtend_itemsets(tx, 0.3), len(tx))
    assert got.itemsets == run_vertical(tx, 2, **kw).itemsets
    assert max(map(len, got.itemsets)) >= 3


def test_every_confidence_from_one_count_table(fimi_dir: Path) -> None:
    """Rules at each confidence equal mlxtend's, from the counts one vertical run
    published (rules are a local function of the public counts)."""
    from ppdm.mining.rules import association_rules

    tx = _load(fimi_dir, "mushroom.dat", None)
    got = run_vertical(tx, 2, seed=81, min_support=0.45, min_confidence=0.5)
    fi = mlxtend_itemsets(tx, 0.45, key=("mushroom.dat", None, 0))
    for conf in [0.0, 0.3, 0.5, 0.75, 0.9, 0.99, 1.0]:
        rules = association_rules(got.itemsets, got.n_transactions, min_confidence=conf)
        want = mlxtend_rules(fi, len(tx), conf)
        check_rule_keys({(r.antecedent, r.consequent) for r in rules}, want, got.itemsets, conf)


def test_partitions_are_real(fimi_dir: Path) -> None:
    """The helpers split what they claim: rows and items disjoint and complete."""
    tx = _load(fimi_dir, "mushroom.dat", 500, seed=3)
    parts = _row_partition(len(tx), 4, seed=9)
    joined = np.sort(np.concatenate(parts))
    assert np.array_equal(joined, np.arange(len(tx)))
    owned = _item_partition(tx, 3, seed=9)
    assert set().union(*owned) == {x for t in tx for x in t}
    assert all(not (a & b) for a, b in itertools.combinations(owned, 2))
