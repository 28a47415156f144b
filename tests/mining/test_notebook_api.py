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


# -- mlxtend's documented call forms, unchanged (issue 24, item 7) ---------------------------

# The example data set of mlxtend's apriori/fpgrowth/association_rules user guides.
MLXTEND_DATASET = [
    ["Milk", "Onion", "Nutmeg", "Kidney Beans", "Eggs", "Yogurt"],
    ["Dill", "Onion", "Nutmeg", "Kidney Beans", "Eggs", "Yogurt"],
    ["Milk", "Apple", "Kidney Beans", "Eggs"],
    ["Milk", "Unicorn", "Corn", "Kidney Beans", "Yogurt"],
    ["Corn", "Onion", "Onion", "Kidney Beans", "Ice cream", "Eggs"],
]


def _sorted_frame(df: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in ("antecedents", "consequents", "itemsets") if c in df.columns]
    key = df[cols].apply(lambda r: repr([sorted(map(str, x)) for x in r]), axis=1)
    return df.assign(_k=key).sort_values("_k").drop(columns="_k").reset_index(drop=True)


@pytest.fixture(scope="module")
def guide_df() -> pd.DataFrame:
    return _onehot(MLXTEND_DATASET)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_support": 0.6},
        {"min_support": 0.6, "use_colnames": True},
        {"min_support": 0.4, "use_colnames": True, "max_len": 2},
        {"min_support": 0.2, "use_colnames": False, "max_len": 3},
    ],
)
def test_mlxtend_miner_calls_run_unchanged(guide_df, kwargs):
    from mlxtend.frequent_patterns import apriori as mlx_apriori
    from mlxtend.frequent_patterns import fpgrowth as mlx_fpgrowth

    from ppdm.mining import apriori as our_apriori
    from ppdm.mining import fpgrowth as our_fpgrowth

    for ours, theirs in ((our_apriori, mlx_apriori), (our_fpgrowth, mlx_fpgrowth)):
        want = _sorted_frame(theirs(guide_df, **kwargs))
        pd.testing.assert_frame_equal(_sorted_frame(ours(guide_df, **kwargs)), want)
    # frequent_itemsets_df takes the same keywords (it defaults to use_colnames=True)
    got = frequent_itemsets_df(guide_df, **{"use_colnames": False, **kwargs})
    want = _sorted_frame(mlx_fpgrowth(guide_df, **{"use_colnames": False, **kwargs}))
    pd.testing.assert_frame_equal(_sorted_frame(got), want)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(
    "metric,threshold",
    [
        ("confidence", 0.7),
        ("confidence", 0.9),
        ("support", 0.4),
        ("lift", 1.2),
        ("leverage", 0.0),
        ("conviction", 1.0),
        ("zhangs_metric", 0.0),
        ("jaccard", 0.3),
        ("certainty", 0.0),
        ("kulczynski", 0.6),
        ("representativity", 1.0),
        ("antecedent support", 0.6),
        ("consequent support", 0.6),
    ],
)
def test_mlxtend_rule_calls_run_unchanged(guide_df, mushroom, metric, threshold):
    from mlxtend.frequent_patterns import association_rules as mlx_rules

    for data, s in ((guide_df, 0.4), (_onehot(mushroom), 0.45)):
        fi = frequent_itemsets_df(data, min_support=s, use_colnames=True)
        # with and without num_itemsets, as the mlxtend guides call it
        for extra in ({}, {"num_itemsets": len(data)}):
            want = mlx_rules(fi, metric=metric, min_threshold=threshold, **extra)
            got = association_rules_df(fi, metric=metric, min_threshold=threshold, **extra)
            assert list(got.columns) == list(want.columns)
            pd.testing.assert_frame_equal(
                _sorted_frame(got), _sorted_frame(want), check_exact=False
            )
    # return_metrics picks columns, like mlxtend's
    some = association_rules_df(fi, len(data), return_metrics=["lift", "confidence"])
    assert list(some.columns) == ["antecedents", "consequents", "confidence", "lift"]


def test_rule_options_mlxtend_has_and_ppdm_refuses(guide_df):
    fi = frequent_itemsets_df(guide_df, min_support=0.6)
    with pytest.raises(ValueError, match="metric must be one of"):
        association_rules_df(fi, metric="interest", min_threshold=1)
    with pytest.raises(ValueError, match="null_values"):
        association_rules_df(fi, null_values=True)
    with pytest.raises(ValueError, match="null_values"):
        frequent_itemsets_df(guide_df, null_values=True)


def test_distributed_results_to_frame():
    tx = _baskets(7, n=180)
    parts = horizontal_split(len(tx), 3, seed=2)
    inputs = {f"p{i}": [tx[j] for j in p] for i, p in enumerate(parts)}
    for reveal in (True, False):
        sim = ppdm.simulate(
            lambda net, db, reveal=reveal: horizontal_association_rules(
                net, db, min_support=0.2, min_confidence=0.5, reveal_counts=reveal
            ),
            inputs,
        )
        res = sim.results["p1"]
        frame = res.to_frame()
        assert list(frame.columns) == list(RULE_COLUMNS)
        pooled = frequent_itemsets(tx, 0.2)
        want = association_rules_df(pooled, len(tx), min_confidence=0.5)
        assert set(zip(frame["antecedents"], frame["consequents"], strict=True)) == set(
            zip(want["antecedents"], want["consequents"], strict=True)
        )
        if reveal:
            pd.testing.assert_frame_equal(
                _sorted_frame(frame), _sorted_frame(want), check_exact=False
            )
            items = res.itemsets_frame()
            assert dict(zip(items["itemsets"], items["support"], strict=True)) == {
                k: v / len(tx) for k, v in pooled.items()
            }
        else:
            assert frame["confidence"].isna().all() and len(frame) == len(want)


def test_kmeans_result_to_frame():
    from ppdm.mining import KMeansResult

    res = KMeansResult(
        centers=np.array([[0.0, 1.0], [2.0, 3.0]]),
        labels=np.array([0, 1, 1]),
        iterations=2,
        inertia=1.5,
        converged=True,
        history=[{"sizes": [1, 2]}],
    )
    frame = res.to_frame()
    assert list(frame.columns) == ["x0", "x1", "size"]
    assert frame["size"].tolist() == [1, 2] and frame.loc[1, "x1"] == 3.0
