"""Vertical mining with ``align=true`` where one party's node runs Spark (issue 28): its
ids are encoded into PSI blocks on the executors, only the rows of the common ids come
back to the node, and the results equal the all-embedded run's and the centralized
oracle's (mlxtend's Apriori, scikit-learn's Lloyd) on the pooled common rows.

The Spark session is the tier's shared one (tests/compute/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

import ppdm.compute
from ppdm.errors import ConfigError
from ppdm.jobs.document import simulate_job
from ppdm.jobs.registry import PartyContext

pytestmark = pytest.mark.xdist_group("spark")


@pytest.fixture
def on_spark(spark_engine, monkeypatch):
    """The shared engine for every party whose settings have a ``[compute]`` table, and
    a log of what that node read through it: the ids it encoded and the rows it read
    back (each call's ids and the rows returned)."""
    real = ppdm.compute.engine_for
    monkeypatch.setattr(
        ppdm.compute,
        "engine_for",
        lambda settings, party="": (
            spark_engine if (settings or {}).get("compute") else real(settings)
        ),
    )
    log: dict[str, list] = {"id_set": [], "rows_of": [], "whole": []}
    encode = spark_engine.id_set

    def id_set(*args, **kwargs):
        encoded = encode(*args, **kwargs)
        log["id_set"].append((args, kwargs))
        rows_of = encoded.rows_of

        def logged(ids, columns):
            frame = rows_of(ids, columns)
            log["rows_of"].append((list(ids), frame))
            return frame

        encoded.rows_of = logged
        return encoded

    monkeypatch.setattr(spark_engine, "id_set", id_set)
    for name in ("read_frame", "transactions", "local_records"):
        method = getattr(spark_engine, name)
        monkeypatch.setattr(
            spark_engine,
            name,
            lambda *a, _m=method, _n=name, **k: log["whole"].append(_n) or _m(*a, **k),
        )
    return log


def _results(doc):
    assert doc["ok"], doc["error"]
    return {p: e["result"] for p, e in doc["parties"].items()}


def _baskets(tmp: Path, fimi_dir: Path):
    """Two parties with the item columns of mushroom split in two and different,
    overlapping transactions: bob's a text file whose lines start with the id, alice's
    the same kind of file and the long layout of it (tid, item; a transaction without
    items is one row with an empty item) as Parquet, rows shuffled."""
    lines = (fimi_dir / "mushroom.dat").read_text().splitlines()[::20][:360]
    tx = [[int(t) for t in line.split()] for line in lines]
    items = sorted({i for t in tx for i in t})
    half = set(items[::2])
    rng = np.random.default_rng(11)
    files, held = {}, {}
    for p, mine in (("alice", half), ("bob", set(items) - half)):
        keep = np.flatnonzero(rng.random(len(tx)) < 0.85)
        rows = [(f"t{i:04d}", [j for j in tx[i] if j in mine]) for i in keep]
        rows += [(f"{p}-x{i}", sorted(mine)[:3]) for i in range(12)]
        rows += [(f"{p}-empty", [])]
        order = rng.permutation(len(rows))
        text = "\n".join(" ".join([rows[i][0], *map(str, rows[i][1])]) for i in order)
        files[p] = tmp / f"{p}.dat"
        files[p].write_text(text + "\n")
        held[p] = {r[0] for r in rows}
        if p == "alice":
            long = [(tid, j) for tid, js in rows for j in js] + [
                (tid, None) for tid, js in rows if not js
            ]
            frame = pd.DataFrame(long, columns=["tid", "item"]).astype({"item": "Int64"})
            files["alice-long"] = tmp / "alice-long.parquet"
            frame.sample(frac=1.0, random_state=3).to_parquet(files["alice-long"], index=False)
    common = sorted(held["alice"] & held["bob"])
    return files, common, [tx[int(c[1:])] for c in common]


@pytest.mark.timeout(900)
def test_aligned_vertical_assoc_with_a_spark_party_equals_embedded_and_apriori(
    on_spark, tmp_path, fimi_dir
):
    from mlxtend.frequent_patterns import apriori
    from mlxtend.preprocessing import TransactionEncoder

    files, common, pooled = _baskets(tmp_path, fimi_dir)
    params = {
        "mode": "vertical",
        "min_support": 0.55,
        "min_confidence": 0.9,
        "align": True,
        "protect": "exact",
        "min_aggregate": 0,
        "report_local": True,
    }
    long = {"kind": "parquet", "path": str(files["alice-long"])}
    bob = PartyContext("bob", {"data": {"transactions": str(files["bob"])}}, base_dir=tmp_path)
    runs = {}
    for name, alice in (
        ("spark", {"data": {"transactions": long}, "compute": {"engine": "spark"}}),
        ("embedded-long", {"data": {"transactions": long}}),
        ("embedded-text", {"data": {"transactions": str(files["alice"])}}),
    ):
        contexts = {"alice": PartyContext("alice", alice, base_dir=tmp_path), "bob": bob}
        runs[name] = _results(simulate_job("assoc", contexts, params, timeout=600))

    # alice's Spark node encoded the distinct transaction ids and read back the rows of
    # the common transactions only, never the whole table
    assert on_spark["whole"] == []
    assert [k for _, k in on_spark["id_set"]] == [{"distinct": True}]
    ((asked, frame),) = on_spark["rows_of"]
    assert asked == common and set(frame["tid"]) == set(common)
    te = TransactionEncoder()
    onehot = pd.DataFrame(te.fit(pooled).transform(pooled), columns=te.columns_)
    want = {
        frozenset(int(i) for i in row.itemsets): round(row.support * len(pooled))
        for row in apriori(onehot, min_support=0.55, use_colnames=True).itertuples()
    }
    assert len(want) > 20 and any(len(s) >= 3 for s in want)
    for p in ("alice", "bob"):
        found = {
            frozenset(e["items"]): e["support_count"] for e in runs["spark"][p]["frequent_itemsets"]
        }
        assert found == want
        assert runs["spark"][p]["aligned"] == len(common)
        for other in ("embedded-long", "embedded-text"):
            assert runs["spark"][p] == runs[other][p]
    assert runs["spark"]["alice"]["local"]["transactions"] == len(
        files["alice"].read_text().splitlines()
    )


@pytest.mark.timeout(900)
def test_aligned_vertical_kmeans_with_a_spark_party_equals_embedded_and_sklearn(on_spark, tmp_path):
    n, k = 300, 3
    x, _ = make_blobs(n_samples=n, n_features=4, centers=k, cluster_std=1.2, random_state=8)
    ids = (np.arange(n) * 7919 + 13).astype(np.int64)  # integer ids, not in row order
    rng = np.random.default_rng(8)
    paths, held = {}, {}
    for j, p in enumerate(("alice", "bob")):
        keep = np.flatnonzero(rng.random(n) < 0.8)
        frame = pd.DataFrame(x[keep, 2 * j : 2 * j + 2], columns=[f"{p}0", f"{p}1"])
        frame.insert(0, "rid", ids[keep])
        extra = pd.DataFrame(rng.normal(size=(9, 2)), columns=frame.columns[1:])
        extra.insert(0, "rid", 10**9 + 10 * np.arange(9) + j)  # ids only this party has
        frame = pd.concat([frame, extra]).sample(frac=1.0, random_state=j)
        held[p] = set(frame["rid"].tolist())
        paths[p] = tmp_path / f"{p}.parquet"
        frame.to_parquet(paths[p], index=False)
        paths[p + "-csv"] = tmp_path / f"{p}.csv"
        frame.to_csv(paths[p + "-csv"], index=False)
    common = sorted(held["alice"] & held["bob"])
    params = {
        "mode": "vertical",
        "k": k,
        "align": True,
        "id_column": "rid",
        "init": "first-k",
        "include_labels": True,
    }
    table = {"kind": "parquet", "path": str(paths["alice"])}
    bob = PartyContext("bob", {"data": {"records": str(paths["bob-csv"])}}, base_dir=tmp_path)
    runs = {}
    for name, alice in (
        ("spark", {"data": {"records": table}, "compute": {"engine": "spark"}}),
        ("embedded", {"data": {"records": str(paths["alice-csv"])}}),
    ):
        contexts = {"alice": PartyContext("alice", alice, base_dir=tmp_path), "bob": bob}
        runs[name] = _results(simulate_job("kmeans", contexts, params, timeout=600))

    assert on_spark["whole"] == []
    assert [k for _, k in on_spark["id_set"]] == [{}]
    ((asked, frame),) = on_spark["rows_of"]
    assert asked == common and sorted(frame["rid"].tolist()) == common
    pos = {v: i for i, v in enumerate(ids.tolist())}
    pooled = x[[pos[c] for c in common]]
    ref = KMeans(k, init=pooled[:k], n_init=1, algorithm="lloyd", tol=0.0, max_iter=300)
    ref.fit(pooled)
    centers = np.hstack([np.array(runs["spark"][p]["centers"]) for p in ("alice", "bob")])
    assert np.abs(centers - ref.cluster_centers_).max() < 1e-6
    for p in ("alice", "bob"):
        assert runs["spark"][p]["record_ids"] == common
        assert runs["spark"][p]["labels"] == ref.labels_.tolist()
        assert runs["spark"][p] == runs["embedded"][p]


def test_a_k_too_large_for_the_spark_party_is_refused_before_the_alignment(on_spark, tmp_path):
    path = tmp_path / "a.parquet"
    pd.DataFrame({"rid": np.arange(20), "v": np.arange(20.0)}).to_parquet(path, index=False)
    other = tmp_path / "b.csv"
    pd.DataFrame({"rid": np.arange(20), "w": np.arange(20.0)}).to_csv(other, index=False)
    alice = {
        "data": {"records": {"kind": "parquet", "path": str(path)}},
        "compute": {"engine": "spark"},
    }
    contexts = {
        "alice": PartyContext("alice", alice, base_dir=tmp_path),
        "bob": PartyContext("bob", {"data": {"records": str(other)}}, base_dir=tmp_path),
    }
    params = {"mode": "vertical", "k": 5, "align": True, "id_column": "rid", "min_cluster_size": 5}
    with pytest.raises(ConfigError, match="nothing derived from the records was sent"):
        simulate_job("kmeans", contexts, params, timeout=300)
    assert on_spark["id_set"] and on_spark["rows_of"] == []
