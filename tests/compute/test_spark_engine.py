"""The Spark engine in process (issue 28): string item labels and unsorted Parquet give
the embedded engine's counts; faults have their public classes. One JVM for the module.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppdm.compute import ComputeError, EmbeddedEngine, parse_compute_table
from ppdm.errors import ConfigError, PublicError, SourceError
from ppdm.mining.itemsets import support_counts
from ppdm.sources import parse_data_entry


@pytest.fixture(scope="module")
def spark(tier_unavailable):
    try:
        from ppdm.compute.spark import SparkEngine
    except ImportError:
        tier_unavailable("spark", 'pyspark is not installed (pip install -e ".[spark]")')
    import shutil

    if shutil.which("java") is None:
        tier_unavailable("spark", "no Java runtime (apt-get install default-jre-headless)")
    bad = SparkEngine(parse_compute_table({"engine": "spark", "master": "no-such-master://x"}))
    with pytest.raises(ComputeError) as info:
        bad.session()
    assert PublicError.of(info.value, "alice").code == "compute-failed"
    engine = SparkEngine(
        parse_compute_table(
            {"engine": "spark", "master": "local[2]", "conf": {"spark.sql.shuffle.partitions": 2}}
        )
    )
    yield engine
    engine.close()


def _baskets(tmp: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    names = np.array([f"item-{c}" for c in "abcdefghij"])
    tids, items = [], []
    for t in range(300):
        k = int(rng.integers(0, 5))
        if k == 0:
            tids.append(f"t{t:04d}")
            items.append(None)
        for x in rng.choice(names, size=k, replace=False):
            tids.append(f"t{t:04d}")
            items.append(str(x))
    path = tmp / "baskets.parquet"
    frame = pd.DataFrame({"tid": tids, "item": items})
    frame.sample(frac=1.0, random_state=seed).to_parquet(path, index=False)
    return path


def test_string_labels_and_string_ids_count_like_the_embedded_engine(spark, tmp_path):
    spec = parse_data_entry(
        "tx", {"kind": "parquet", "path": str(_baskets(tmp_path, 4))}, base_dir=tmp_path
    )
    db = EmbeddedEngine().transactions(spec)
    counter = spark.local_counter(spec)
    assert counter.n_transactions == db.n_transactions == 300
    assert counter.items.tolist() == db.items.tolist()
    assert counter.item_counts().tolist() == db.item_counts().tolist()
    labels = db.items.tolist()
    pairs = [(a, b) for i, a in enumerate(labels) for b in labels[i + 1 :]]
    triples = [tuple(labels[i : i + 3]) for i in range(len(labels) - 2)]
    assert counter.count(pairs).tolist() == support_counts(db, pairs).tolist()
    assert counter.count(triples).tolist() == support_counts(db, triples).tolist()
    whole = spark.transactions(spec)
    assert whole.items.tolist() == db.items.tolist()
    assert whole.indptr.tolist() == db.indptr.tolist()
    assert whole.indices.tolist() == db.indices.tolist()


def test_a_missing_dataset_or_column_is_a_source_fault_not_an_engine_fault(spark, tmp_path):
    gone = parse_data_entry(
        "tx", {"kind": "parquet", "path": str(tmp_path / "nowhere")}, base_dir=tmp_path
    )
    with pytest.raises(SourceError) as info:
        spark.local_counter(gone)
    assert info.value.fault == "source-unreachable"
    spec = parse_data_entry(
        "tx",
        {"kind": "parquet", "path": str(_baskets(tmp_path, 5)), "item_column": "sku"},
        base_dir=tmp_path,
    )
    with pytest.raises(ConfigError, match="'sku'"):
        spark.local_counter(spec)


def test_records_with_a_missing_value_are_refused_without_the_value(spark, tmp_path):
    frame = pd.DataFrame({"rid": [3, 1, 2], "a": [1.5, float("nan"), 31337.25]})
    frame.to_parquet(tmp_path / "r.parquet", index=False)
    spec = parse_data_entry(
        "r", {"kind": "parquet", "path": str(tmp_path / "r.parquet")}, base_dir=tmp_path
    )
    with pytest.raises(ConfigError, match="missing or infinite") as info:
        spark.local_records(spec, ["a"], "rid")
    assert "31337" not in str(info.value)
