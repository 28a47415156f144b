"""The local mining kernel (issue 25, items 1-2): compiled and numpy Eclat against pyfim,
rules in bulk against the per-itemset path, brute force and mlxtend.

Oracles: pyfim (Borgelt's C miners) on hypothesis-generated transaction sets and on the
FIMI files we ship, at an absolute count; the numpy Eclat must give the compiled kernel's
forest exactly (same order); the bulk rule generator must equal the one-itemset-at-a-time
``ap-genrules`` (also forced by a hash collision) and a brute-force enumeration.
"""

from __future__ import annotations

import gc
import itertools
from pathlib import Path

import fim
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.mining import kernel, rules
from ppdm.mining.itemsets import eclat_forest, frequent_itemsets, frequent_itemsets_df, min_count
from ppdm.mining.readers import from_transactions, read_fimi

needs_compiled = pytest.mark.skipif(not kernel.COMPILED, reason="extension not built")

transactions = st.lists(st.lists(st.integers(0, 11), max_size=9), min_size=1, max_size=60)


def _pyfim(tx: list[list[int]], minc: int, max_len: int | None = None) -> dict:
    # pyfim leaves out items present in every transaction; an extra empty transaction
    # changes no count and avoids that.
    res = fim.eclat([*tx, []], target="s", supp=-minc, zmin=1, zmax=max_len or -1, report="a")
    # Up to 574,431 frozensets (mushroom at 0.1): the cyclic collector, left on, rescans
    # them again and again while they are built and takes twice the time of the build.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return {frozenset(s): int(c) for s, c in res}
    finally:
        if enabled:
            gc.enable()


@settings(max_examples=150, deadline=None)
@given(transactions, st.integers(1, 6), st.sampled_from([None, 1, 2, 3]))
def test_kernel_equals_pyfim_on_random_sets(tx, minc, max_len):
    db = from_transactions(tx)
    minc = min(minc, len(tx))
    want = _pyfim(tx, minc, max_len)
    lim = max_len or 1 << 30
    for compiled in [False, True] if kernel.COMPILED else [False]:
        forest = kernel.mine_forest(db, minc, lim, compiled=compiled)
        assert forest.to_dict() == want
        assert len(forest) == len(want)  # no itemset twice
        # the forest's shape: parents come first and are one item shorter
        sizes = forest.sizes()
        par = forest.parent.astype(np.int64)
        assert np.all(par < np.arange(len(par)))
        assert np.all(sizes[par >= 0] == sizes[par[par >= 0]] + 1)


@needs_compiled
@settings(max_examples=60, deadline=None)
@given(transactions, st.integers(1, 4))
def test_numpy_fallback_gives_the_compiled_forest(tx, minc):
    db = from_transactions(tx)
    a = kernel.mine_forest(db, minc, 1 << 30, compiled=True)
    b = kernel.mine_forest(db, minc, 1 << 30, compiled=False)
    for x, y in [(a.parent, b.parent), (a.item, b.item), (a.count, b.count)]:
        assert np.array_equal(x, y)


@pytest.mark.parametrize(
    "name,rows,support",
    [
        ("mushroom.dat", None, 0.1),
        ("chess.dat", None, 0.7),
        ("retail.dat", None, 0.002),
        ("BMS1.dat", None, 0.002),
        ("T10I4D100K.dat", 30000, 0.002),
    ],
)
def test_fimi_files_equal_pyfim(fimi_dir: Path, name: str, rows: int | None, support: float):
    db = read_fimi(fimi_dir / name)
    if rows is not None:
        db = db.subset(np.arange(rows))
    tx = [list(t) for t in db.transactions()]
    minc = min_count(support, db.n_transactions)
    got = frequent_itemsets(db, support)  # method="auto": the compiled kernel when built
    assert got == _pyfim(tx, minc)
    assert len(got) > 100


def test_forest_members_and_frame(fimi_dir: Path):
    db = read_fimi(fimi_dir / "mushroom.dat")
    forest = eclat_forest(db, 0.4)
    mem = forest.members()
    labels = db.items
    as_sets = {
        frozenset(labels[r[r >= 0]].tolist()): int(c)
        for r, c in zip(mem, forest.count, strict=True)
    }
    assert as_sets == forest.to_dict() == frequent_itemsets(db, 0.4, method="fpgrowth")
    frame = frequent_itemsets_df(db, 0.4)
    assert frame["support"].is_monotonic_decreasing
    counts = np.round(frame["support"] * db.n_transactions).astype(int).tolist()
    assert dict(zip(frame["itemsets"], counts, strict=True)) == as_sets


# -- rules in bulk ---------------------------------------------------------------------------


def _brute_rules(counts: dict, conf: float) -> set:
    out = set()
    for z, cz in counts.items():
        for r in range(1, len(z)):
            for xs in itertools.combinations(sorted(z), r):
                x = frozenset(xs)
                if cz / counts[x] >= conf:
                    out.add((x, z - x))
    return out


@settings(max_examples=120, deadline=None)
@given(transactions, st.sampled_from([0.05, 0.1, 0.2]), st.sampled_from([0.0, 0.5, 2 / 3, 1.0]))
def test_bulk_rules_equal_the_per_itemset_path_and_brute_force(tx, s, conf):
    counts = frequent_itemsets(from_transactions(tx), s)
    table = rules.ItemsetTable.from_mapping(counts)
    bulk = rules.rule_table(table, min_confidence=conf)
    slow = rules._rule_table_slow(table, conf)
    for a, b in [
        (bulk.itemset, slow.itemset),
        (bulk.antecedent, slow.antecedent),
        (bulk.consequent, slow.consequent),
    ]:
        assert np.array_equal(a, b)
    got = rules.association_rules(counts, len(tx), min_confidence=conf)
    assert {r.key for r in got} == _brute_rules(counts, conf)
    assert len(got) == len(bulk)


def test_hash_collision_falls_back_to_the_exact_path(monkeypatch):
    tx = [[1, 2, 3], [1, 2], [2, 3], [1, 3], [1, 2, 3], [3, 4], [1, 2, 4]]
    counts = frequent_itemsets(from_transactions(tx), 0.1)
    want = rules.association_rules(counts, len(tx), min_confidence=0.3)
    # every item hashes alike: itemsets of one size collide, the bulk path must step aside
    monkeypatch.setattr(rules, "_splitmix64", lambda x: np.ones(len(x), dtype=np.uint64))
    assert rules.association_rules(counts, len(tx), min_confidence=0.3) == want


def test_missing_subset_is_refused():
    with pytest.raises(ValueError, match="not closed under subsets"):
        rules.association_rules({frozenset({1, 2}): 3, frozenset({1}): 4}, 10, min_confidence=0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_mushroom_bulk_rules_equal_mlxtend(fimi_dir: Path):
    from mlxtend.frequent_patterns import association_rules, fpgrowth
    from mlxtend.preprocessing import TransactionEncoder

    db = read_fimi(fimi_dir / "mushroom.dat")
    tx = [list(t) for t in db.transactions()]
    te = TransactionEncoder()
    onehot = pd.DataFrame(te.fit(tx).transform(tx), columns=te.columns_)
    fi = fpgrowth(onehot, min_support=0.3, use_colnames=True)
    want = association_rules(fi, num_itemsets=len(tx), metric="confidence", min_threshold=0.5)
    got = rules.association_rules_df(
        fi, num_itemsets=len(tx), metric="confidence", min_threshold=0.5
    )
    assert len(got) == len(want) > 70000

    def key(df):
        k = df["antecedents"].map(lambda s: repr(sorted(s))) + df["consequents"].map(
            lambda s: repr(sorted(s))
        )
        return df.assign(_k=k).sort_values("_k").drop(columns="_k").reset_index(drop=True)

    pd.testing.assert_frame_equal(key(got), key(want), check_exact=False)


def test_without_the_extension_the_numpy_kernel_runs(tmp_path):
    """A wheel built without a compiler: the import of the extension fails, the package
    still mines (numpy Eclat, numpy FP-growth for method="auto"), with the same result."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['ppdm.mining._eclat'] = None\n"
        "from ppdm.mining import kernel, frequent_itemsets\n"
        "from ppdm.mining.itemsets import eclat_forest\n"
        "from ppdm.mining.readers import from_transactions\n"
        "assert not kernel.COMPILED\n"
        "db = from_transactions([[1, 2, 3], [1, 2], [2, 3], [1, 3], [1, 2, 3]])\n"
        "print(sorted((sorted(k), v) for k, v in frequent_itemsets(db, 0.4).items()))\n"
        "print(sorted((sorted(k), v) for k, v in eclat_forest(db, 0.4).to_dict().items()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    ).stdout.splitlines()
    want = "[([1], 4), ([1, 2], 3), ([1, 2, 3], 2), ([1, 3], 3), ([2], 4), ([2, 3], 3), ([3], 4)]"
    assert out == [want, want]


@needs_compiled
def test_kernel_without_the_pair_pass(fimi_dir: Path, monkeypatch):
    """Rows too long for the pair-counting pass: the kernel skips it, same itemsets."""
    db = read_fimi(fimi_dir / "retail.dat").subset(np.arange(20000))
    minc = min_count(0.003, db.n_transactions)
    with_pairs = kernel.mine_forest(db, minc, 1 << 30)
    monkeypatch.setattr(kernel, "_PAIR_WORK", 0.0)
    without = kernel.mine_forest(db, minc, 1 << 30)
    assert (
        with_pairs.to_dict()
        == without.to_dict()
        == _pyfim([list(t) for t in db.transactions()], minc)
    )
