"""The notebook API (issue 15, item 2): DataFrames in and out, in mlxtend's layout.

Oracles: mlxtend's ``TransactionEncoder``, ``fpgrowth`` and ``association_rules`` on the
same data (a FIMI mushroom sample and seeded baskets with string items); the DataFrames
must be equal after sorting rows. Plus: the transactions-taking entry points accept a
one-hot DataFrame or a column of item lists and name the expected types otherwise,
``ppdm.simulate`` is the in-process simulation, and string item labels work in the
distributed miner without choosing ``label_bytes`` by hand.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from mlxtend.frequent_patterns import association_rules, fpgrowth
from mlxtend.preprocessing import TransactionEncoder

import ppdm
from ppdm.anonymize.api import anonymize
from ppdm.hiding.api import hide_rules
from ppdm.mining import (
    as_transaction_db,
    association_rules_df,
    frequent_itemsets,
    frequent_itemsets_df,
    horizontal_association_rules,
    horizontal_split,
    rules_to_frame,
)
from ppdm.mining.horizontal_rules import agree_label_bytes
from ppdm.mining.readers import from_transactions, read_fimi
from ppdm.mining.rules import RULE_COLUMNS
from ppdm.protocols.secure_sum import secure_sum


def _baskets(seed: int, n: int = 300) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    names = [f"product-{i:02d}-{'x' * int(i % 7)}" for i in range(15)]
    p = np.linspace(0.6, 0.05, len(names))
    return [[x for x, q in zip(names, p, strict=True) if rng.random() < q] for _ in range(n)]


def _onehot(tx: list[list]) -> pd.DataFrame:
    te = TransactionEncoder()
    return pd.DataFrame(te.fit(tx).transform(tx), columns=te.columns_)


def _sorted_itemsets(df: pd.DataFrame) -> pd.DataFrame:
    key = df["itemsets"].map(lambda s: repr(sorted(s)))
    return df.assign(_k=key).sort_values("_k").drop(columns="_k").reset_index(drop=True)


def _sorted_rules(df: pd.DataFrame) -> pd.DataFrame:
    key = (
        df["antecedents"].map(lambda s: repr(sorted(s)))
        + "|"
        + df["consequents"].map(lambda s: repr(sorted(s)))
    )
    return df.assign(_k=key).sort_values("_k").drop(columns="_k").reset_index(drop=True)


@pytest.fixture(scope="module")
def mushroom(fimi_dir) -> list[list[int]]:
    db = read_fimi(fimi_dir / "mushroom.dat")
    rows = list(db.transactions())
    idx = np.random.default_rng(3).choice(len(rows), 1500, replace=False)
    return [list(rows[i]) for i in np.sort(idx)]


@pytest.mark.parametrize("support,confidence", [(0.3, 0.8), (0.45, 0.6)])
def test_frames_equal_mlxtend_on_mushroom(mushroom, support, confidence):
    onehot = _onehot(mushroom)
    ours = frequent_itemsets_df(onehot, support)
    theirs = fpgrowth(onehot, min_support=support, use_colnames=True)
    assert list(ours.columns) == ["support", "itemsets"]
    assert all(isinstance(s, frozenset) for s in ours["itemsets"])
    pd.testing.assert_frame_equal(_sorted_itemsets(ours), _sorted_itemsets(theirs))
    rules = association_rules_df(ours, len(onehot), min_confidence=confidence)
    ref = association_rules(
        theirs, num_itemsets=len(onehot), metric="confidence", min_threshold=confidence
    )
    assert list(rules.columns) == list(RULE_COLUMNS) == list(ref.columns)
    assert len(rules) > 10
    pd.testing.assert_frame_equal(_sorted_rules(rules), _sorted_rules(ref), check_exact=False)


@pytest.mark.parametrize("seed", [0, 1])
def test_string_items_in_every_layout(seed):
    tx = _baskets(seed)
    onehot = _onehot(tx)
    ref = _sorted_itemsets(fpgrowth(onehot, min_support=0.1, use_colnames=True))
    layouts = [
        onehot,
        onehot.astype(int),
        pd.DataFrame({"basket": tx}),
        pd.Series(tx),
        tx,
        from_transactions(tx),
    ]
    for data in layouts:
        got = _sorted_itemsets(frequent_itemsets_df(data, 0.1))
        pd.testing.assert_frame_equal(got, ref)
    # the dict API takes the same layouts
    assert frequent_itemsets(onehot, 0.1) == frequent_itemsets(from_transactions(tx), 0.1)
    # the rules of Rule objects as a frame equal the direct frame
    counts = frequent_itemsets(tx, 0.1)
    from ppdm.mining.rules import association_rules as rules_list

    direct = association_rules_df(counts, len(tx), min_confidence=0.3)
    via = rules_to_frame(rules_list(counts, len(tx), min_confidence=0.3))
    pd.testing.assert_frame_equal(direct, via, check_exact=False)


@pytest.mark.parametrize(
    "bad,fragment",
    [
        ("milk", "got str"),
        (42, "got int"),
        (np.zeros((3, 2)), "got ndarray"),
        (pd.DataFrame({"a": [0.5, 1.0]}), "holding float"),
        (pd.DataFrame({"a": [0.5, 1.0], "b": [True, False]}), "dtype float64"),
        (pd.DataFrame({"basket": ["milk", "bread"]}), "holding str"),
        ([["a"], "b"], "got str"),
    ],
)
def test_clear_type_errors(bad, fragment):
    with pytest.raises(TypeError, match=fragment) as info:
        frequent_itemsets(bad, 0.5)
    assert "transaction" in str(info.value)
    with pytest.raises(TypeError):
        hide_rules(
            bad, [{"antecedent": ["a"], "consequent": ["b"]}], min_support=0.1, min_confidence=0.5
        )


def test_type_error_names_the_accepted_types():
    with pytest.raises(TypeError) as info:
        as_transaction_db({1, 2})
    text = str(info.value)
    for name in ("TransactionDB", "one-hot pandas DataFrame", "column of item lists"):
        assert name in text
    with pytest.raises(TypeError, match="columns 'support' and 'itemsets'"):
        association_rules_df(pd.DataFrame({"x": [1]}), 10, min_confidence=0.5)
    with pytest.raises(TypeError, match="DataFrame, a CSV or Parquet path"):
        anonymize([[1, 2]], qi="a", k=2)


def test_hide_rules_takes_a_dataframe():
    tx = [["a", "b", "c"], ["a", "b"], ["a", "b", "d"], ["b", "c"], ["a", "c"], ["a", "b", "c"]]
    onehot = _onehot(tx)
    res = hide_rules(
        onehot,
        [{"antecedent": ["a"], "consequent": ["b"]}],
        min_support=0.5,
        min_confidence=0.7,
        method="1.b",
    )
    assert res.side_effects is not None and res.side_effects.hiding_failure == 0
    out = res.sanitized.to_frame()
    assert list(out.columns) == list(onehot.columns) and out.dtypes.eq(bool).all()
    ref = association_rules(
        fpgrowth(out, min_support=0.5, use_colnames=True),
        num_itemsets=len(out),
        metric="confidence",
        min_threshold=0.7,
    )
    hidden = (frozenset({"a"}), frozenset({"b"}))
    assert hidden not in set(zip(ref["antecedents"], ref["consequents"], strict=True))


def test_top_level_simulate_is_the_local_simulation():
    sim = ppdm.simulate(secure_sum, {"a": 4, "b": 5, "c": 6})
    assert sim.results == {"a": 15, "b": 15, "c": 15}
    assert sim.totals and sim.wall_time_s >= 0


def test_import_ppdm_stays_cheap():
    code = "import sys, ppdm; print(sorted(m for m in sys.modules if m.startswith(('ppdm.parties', 'numpy', 'pandas', 'grpc'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_string_labels_distributed_by_default():
    """Labels longer than the old fixed 4 bytes work without setting label_bytes, and the
    result equals mlxtend on the pooled data."""
    tx = _baskets(5, n=240)
    parts = horizontal_split(len(tx), 3, seed=1)
    # each party's share as a column of item lists (a notebook layout)
    inputs = {f"p{i}": pd.DataFrame({"basket": [tx[j] for j in p]}) for i, p in enumerate(parts)}
    sim = ppdm.simulate(
        lambda net, db: horizontal_association_rules(
            net, db, min_support=0.15, min_confidence=0.5, reveal_counts=True
        ),
        inputs,
    )
    got = {k: v for k, v in sim.results["p0"].itemsets.items()}
    ref = fpgrowth(_onehot(tx), min_support=0.15, use_colnames=True)
    expected = {
        frozenset(s): round(sup * len(tx))
        for s, sup in zip(ref["itemsets"], ref["support"], strict=True)
    }
    assert got == expected
    assert max(len(x) for x in _onehot(tx).columns) > 4


@pytest.mark.parametrize(
    "labels,width",
    [([["a"]], 4), ([["x" * 5]], 8), ([["x" * 17], ["y"]], 32), ([[2**40]], 8), ([[7]], 4)],
)
def test_agreed_width_is_the_longest_rounded_up(labels, width):
    dbs = {
        "p0": from_transactions([["s"]] if isinstance(labels[0][0], str) else [[1]]),
        "p1": from_transactions(labels),
        "p2": from_transactions([]),
    }
    sim = ppdm.simulate(agree_label_bytes, dbs)
    assert set(sim.results.values()) == {width}


def test_vertical_rules_take_each_partys_dataframe(mushroom):
    """Vertically, each party passes its own one-hot columns as a DataFrame (rows aligned,
    empty rows included); the itemsets equal mlxtend on the pooled frame."""
    from mlxtend.frequent_patterns import apriori

    from ppdm.mining.vertical_rules import vertical_association_rules

    frame = _onehot(mushroom[:600])
    cols = list(frame.columns)
    parts = {"alice": frame[cols[::2]], "bob": frame[cols[1::2]]}
    sim = ppdm.simulate(
        lambda net, df: vertical_association_rules(net, df, min_support=0.4, min_confidence=0.9),
        parts,
    )
    got = {frozenset(k): v for k, v in sim.results["alice"].itemsets.items()}
    ref = apriori(frame, min_support=0.4, use_colnames=True)
    want = {
        frozenset(s): round(x * len(frame))
        for s, x in zip(ref["itemsets"], ref["support"], strict=True)
    }
    assert got == want
