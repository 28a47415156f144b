"""Local frequent-itemset mining against mlxtend, pyfim and brute force."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.mining.itemsets import (
    TransactionDB,
    apriori_gen,
    frequent_itemsets,
    join_step,
    min_count,
    prune_step,
    support_counts,
)
from ppdm.mining.readers import from_transactions, read_fimi

METHODS = ["auto", "fpgrowth", "apriori", "eclat"]


def _plain_read(path: Path, rows: int | None = None) -> list[list[int]]:
    """Independent FIMI parse for the oracles (plain Python)."""
    out = []
    with open(path) as fh:
        for line in fh:
            out.append(sorted({int(x) for x in line.split()}))
            if rows is not None and len(out) == rows:
                break
    return out


def _mlxtend(transactions: list[list[int]], min_support: float, algo: str) -> dict:
    from mlxtend.frequent_patterns import apriori, fpgrowth
    from mlxtend.preprocessing import TransactionEncoder

    te = TransactionEncoder()
    df = pd.DataFrame(te.fit(transactions).transform(transactions), columns=te.columns_)
    fn = apriori if algo == "apriori" else fpgrowth
    res = fn(df, min_support=min_support, use_colnames=True)
    n = len(transactions)
    return {
        frozenset(int(x) for x in s): round(v * n)
        for s, v in zip(res.itemsets, res.support, strict=True)
    }


def _pyfim(transactions: list[list[int]], count: int, algo: str) -> dict:
    import fim

    # pyfim leaves out items present in every transaction; one extra empty transaction
    # changes no count and avoids that.
    fn = fim.fpgrowth if algo == "fpgrowth" else fim.apriori
    res = fn([*transactions, []], target="s", supp=-count, zmin=1, report="a")
    return {frozenset(s): int(c) for s, c in res}


def _brute_force(transactions: list[list[int]], minc: int, max_len: int | None = None) -> dict:
    items = sorted({x for t in transactions for x in t})
    sets = [set(t) for t in transactions]
    out = {}
    top = len(items) if max_len is None else min(max_len, len(items))
    for k in range(1, top + 1):
        for combo in itertools.combinations(items, k):
            c = sum(1 for t in sets if set(combo) <= t)
            if c >= minc:
                out[frozenset(combo)] = c
    return out


# -- min_count -----------------------------------------------------------------------------


@given(st.integers(1, 2000), st.floats(1e-6, 1.0))
def test_min_count_is_the_float_division_threshold(n: int, s: float) -> None:
    c = min_count(s, n)
    assert 1 <= c <= n
    assert c / n >= s  # frequent at c ...
    assert c == 1 or (c - 1) / n < s  # ... and not one below


@given(st.integers(1, 500), st.integers(1, 100))
def test_min_count_exact_decimal_ratios_are_frequent(n: int, pct: int) -> None:
    s = pct / 100
    exact = Fraction(pct, 100) * n
    if exact.denominator == 1:
        assert min_count(s, n) == int(exact)


def test_min_count_rejects_bad_thresholds() -> None:
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError):
            min_count(bad, 10)
    assert min_count(0.3, 10) == 3
    assert min_count(0.5, 0) == 1


# -- Apriori-gen ---------------------------------------------------------------------------


def test_join_and_prune_worked_example() -> None:
    # Agrawal & Srikant (1994), section 2.1.1: L3 -> C4.
    l3 = [(1, 2, 3), (1, 2, 4), (1, 3, 4), (1, 3, 5), (2, 3, 4)]
    assert join_step(l3) == [(1, 2, 3, 4), (1, 3, 4, 5)]
    assert prune_step(join_step(l3), l3) == [(1, 2, 3, 4)]
    assert apriori_gen(l3) == [(1, 2, 3, 4)]
    assert join_step([(1,), (3,), (2,)]) == [(1, 2), (1, 3), (2, 3)]
    assert apriori_gen([]) == []


@given(st.sets(st.frozensets(st.integers(0, 6), min_size=2, max_size=2), max_size=15))
def test_apriori_gen_is_the_downward_closed_candidates(level2: set) -> None:
    lk = [tuple(sorted(s)) for s in level2]
    want = sorted(
        c
        for c in itertools.combinations(range(7), 3)
        if all(tuple(x for x in c if x != d) in set(lk) for d in c)
    )
    assert sorted(apriori_gen(lk)) == want


# -- miners vs brute force ----------------------------------------------------------------

small_db = st.lists(st.lists(st.integers(0, 7), max_size=7), min_size=0, max_size=14)


@given(
    small_db,
    st.sampled_from([0.05, 0.1, 0.2, 0.25, 0.3, 0.5, 0.7, 1.0]),
    st.sampled_from([None, 1, 2, 3]),
)
def test_all_methods_match_brute_force(tx: list, s: float, max_len: int | None) -> None:
    db = from_transactions(tx)
    want = _brute_force(tx, min_count(s, len(tx)), max_len)
    for m in METHODS:
        assert frequent_itemsets(db, s, method=m, max_len=max_len) == want, m


@given(small_db, st.integers(0, 13))
def test_subset_and_project_are_partitions(tx: list, cut: int) -> None:
    db = from_transactions(tx)
    rows = np.arange(min(cut, len(tx)))
    part = db.subset(rows)
    assert list(part.transactions()) == [tuple(sorted(set(t))) for t in tx[: len(rows)]]
    mask = np.zeros(len(tx), dtype=bool)
    mask[rows] = True
    assert db.subset(mask) == part
    keep = [x for x in db.items.tolist() if x % 2 == 0]
    proj = db.project(keep)
    assert proj.n_transactions == db.n_transactions
    assert list(proj.transactions()) == [tuple(sorted({x for x in t if x % 2 == 0})) for t in tx]
    for x in keep:
        assert proj.support_count({x}) == db.support_count({x})
        assert np.array_equal(proj.bitset(x), db.bitset(x))


@given(small_db)
def test_bitsets_and_support_counts(tx: list) -> None:
    db = from_transactions(tx)
    for x in db.items.tolist():
        bits = np.unpackbits(db.bitset(x).view(np.uint8), bitorder="little")[: len(tx)]
        assert bits.tolist() == [int(x in t) for t in tx]
    sets = [{0, 1}, {2}, set(), {3, 4, 5}, {99}]
    want = [sum(1 for t in tx if s <= set(t)) for s in sets]
    assert support_counts(db, sets).tolist() == want
    assert db.cover({0, 1}).tolist() == [{0, 1} <= set(t) for t in tx]


def test_replace_columns() -> None:
    db = from_transactions([[1, 2, 3], [2, 3], [1], []])
    new = db.replace_columns([1, 3], np.array([[0, 0], [1, 1], [1, 0], [0, 1]], dtype=bool))
    assert list(new.transactions()) == [(2,), (1, 2, 3), (1,), (3,)]
    with pytest.raises(ValueError):
        db.replace_columns([1], np.zeros((3, 1), dtype=bool))


def test_unknown_method_and_bad_max_len() -> None:
    db = from_transactions([[1]])
    with pytest.raises(ValueError):
        frequent_itemsets(db, 0.5, method="nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        frequent_itemsets(db, 0.5, max_len=0)


def test_validation_of_csr() -> None:
    with pytest.raises(ValueError):
        TransactionDB(1, np.array([1, 2]), np.array([0, 2]), np.array([1, 0]))
    with pytest.raises(ValueError):
        TransactionDB(1, np.array([2, 1]), np.array([0, 1]), np.array([0]))
    with pytest.raises(ValueError):
        TransactionDB(2, np.array([1]), np.array([0, 1]), np.array([0]))


# -- real data vs mlxtend and pyfim -------------------------------------------------------

REAL = [
    ("mushroom.dat", None, 0.3),
    ("chess.dat", None, 0.8),
    ("retail.dat", 8000, 0.01),
    ("T10I4D100K.dat", 8000, 0.01),
]


@pytest.fixture(scope="module")
def real_data(fimi_dir: Path) -> dict:
    out = {}
    for name, rows, s in REAL:
        tx = _plain_read(fimi_dir / name, rows)
        db = read_fimi(fimi_dir / name)
        if rows is not None:
            db = db.subset(np.arange(rows))
        out[name] = (tx, db, s)
    return out


@pytest.mark.parametrize("name", [r[0] for r in REAL])
def test_real_data_matches_mlxtend_and_pyfim(real_data: dict, name: str) -> None:
    tx, db, s = real_data[name]
    ours = {m: frequent_itemsets(db, s, method=m) for m in METHODS}
    assert ours["fpgrowth"] == ours["apriori"] == ours["eclat"] == ours["auto"]
    assert _mlxtend(tx, s, "fpgrowth") == ours["fpgrowth"]
    assert _pyfim(tx, min_count(s, len(tx)), "fpgrowth") == ours["fpgrowth"]
    if name in ("mushroom.dat", "chess.dat"):
        assert _mlxtend(tx, s, "apriori") == ours["apriori"]
        assert _pyfim(tx, min_count(s, len(tx)), "apriori") == ours["apriori"]


def test_mushroom_max_len_matches_mlxtend(real_data: dict) -> None:
    from mlxtend.frequent_patterns import fpgrowth
    from mlxtend.preprocessing import TransactionEncoder

    tx, db, _ = real_data["mushroom.dat"]
    te = TransactionEncoder()
    df = pd.DataFrame(te.fit(tx).transform(tx), columns=te.columns_)
    res = fpgrowth(df, min_support=0.2, use_colnames=True, max_len=3)
    want = {
        frozenset(int(x) for x in s): round(v * len(tx))
        for s, v in zip(res.itemsets, res.support, strict=True)
    }
    for m in METHODS:
        assert frequent_itemsets(db, 0.2, method=m, max_len=3) == want
