"""The Spark engine in process (issue 28): string item labels, unsorted Parquet and a
table of the Spark catalog give the embedded engine's counts; faults have their public
classes; a step past the job's timeout or of a job that ended is cancelled on Spark. One
JVM, shared with the JDBC module (tests/compute/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppdm.compute import EmbeddedEngine
from ppdm.errors import ConfigError, PublicError, SourceError
from ppdm.mining.itemsets import support_counts
from ppdm.sources import parse_data_entry

#: The session is the Spark tier's shared one (tests/compute/conftest.py), with the JDBC
#: module's: one JVM for both, on one xdist worker.
pytestmark = pytest.mark.xdist_group("spark")


@pytest.fixture
def spark(spark_engine):
    """The shared engine (``local[2]``; before it started, an engine on a master that
    does not exist failed as ``compute-failed``)."""
    return spark_engine


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


def _slow_frame(engine, seconds: float):
    """A Spark job that keeps both cores of ``local[2]`` busy for ``seconds`` (two
    partitions, each sleeping in short steps in its Python worker)."""

    def sleepy(frames):
        import time

        end = time.monotonic() + seconds
        for pdf in frames:
            while time.monotonic() < end:
                time.sleep(0.2)
            yield pdf

    spark = engine.session()
    return spark.range(0, 2, numPartitions=2).mapInPandas(sleepy, "id long")


def _group_jobs_failed(engine, group: str) -> list[str]:
    tracker = engine.session().sparkContext.statusTracker()
    return [tracker.getJobInfo(j).status for j in tracker.getJobIdsForGroup(group)]


def _quick_job_runs(engine) -> bool:
    """Whether a two-task job finishes (it cannot while abandoned tasks hold both
    cores); a generous deadline, minutes not seconds."""
    import threading

    done = threading.Event()

    def run():
        engine.session().range(0, 100, numPartitions=2).count()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(240)


def _no_active_jobs(engine) -> bool:
    """Whether the session comes to have no active job (its status store learns of a
    job's end from Spark's listener bus, a moment after the job's caller: a generous
    deadline, minutes not seconds)."""
    import time

    tracker = engine.session().sparkContext.statusTracker()
    deadline = time.monotonic() + 240
    while tracker.getActiveJobsIds():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.timeout(900)
def test_a_spark_step_past_the_job_timeout_is_cancelled_as_source_timeout(spark):
    """A deliberately slow Spark job inside a job whose timeout is 3 s: the step ends
    with the fault class ``source-timeout`` (as a DuckDB scan past T does), its Spark job
    group is cancelled with the tasks interrupted, and the executors are free again
    (a new job on both cores runs, where the slow tasks would hold them for 10 min).
    The step looks up the engine's partitions inside, as the counting steps do: that
    nested call must leave the step's Spark job in the step's group."""
    from ppdm.sources import read_time_limit

    df = _slow_frame(spark, 600)
    before = len(spark.cancelled_groups)

    def step():
        assert spark.partitions() == 2
        return df.collect()

    with read_time_limit(3), pytest.raises(SourceError) as info:
        spark.run("a deliberately slow step", step)
    assert info.value.fault == "source-timeout"
    assert PublicError.of(info.value, "alice").code == "source-timeout"
    assert len(spark.cancelled_groups) == before + 1
    group = spark.cancelled_groups[-1]
    assert _group_jobs_failed(spark, group) == ["FAILED"]
    assert _quick_job_runs(spark)
    assert _no_active_jobs(spark)


@pytest.mark.timeout(900)
def test_a_spark_step_of_a_job_that_ends_is_cancelled_with_the_jobs_failure(spark):
    """The job ends at this party while its Spark step runs (a peer aborts; the
    initiator cancels): the step's Spark job group is cancelled at once -- long before
    the job's timeout -- and the step raises what the job's next receive would have."""
    import threading

    from ppdm.compute import job_scope
    from ppdm.errors import PartyFailure
    from ppdm.sources import read_time_limit

    over = threading.Event()
    failure = PartyFailure("bob", "assoc/level-2", "aborted", code="input_error", blamed="bob")
    df = _slow_frame(spark, 600)
    threading.Timer(2.0, over.set).start()
    before = len(spark.cancelled_groups)
    with (
        read_time_limit(3600),
        job_scope("0123abcd", ended=lambda: failure if over.is_set() else None),
        pytest.raises(PartyFailure) as info,
    ):
        spark.run("a deliberately slow step", df.collect)
    assert info.value is failure
    assert PublicError.of(info.value, "alice").code == "input_error"
    group = spark.cancelled_groups[-1]
    assert len(spark.cancelled_groups) == before + 1 and group.startswith("ppdm-0123abcd-")
    assert _group_jobs_failed(spark, group) == ["FAILED"]
    assert _quick_job_runs(spark)
    # Outside a job nothing is bounded or cancelled: the same engine still counts.
    assert spark.session().range(0, 10).count() == 10


def test_a_spark_catalog_table_counts_like_the_embedded_engine_with_the_filter_pushed(
    spark, tmp_path
):
    """``kind = "spark-table"``: a table saved in the session's (temporary) warehouse is
    read by the Spark engine -- the same counts as the embedded engine on the same rows,
    the candidates' item filter in the table scan's pushed filters -- and refused by the
    embedded engine with one line."""
    path = _baskets(tmp_path, 9)
    session = spark.session()
    session.sql("CREATE DATABASE IF NOT EXISTS lake")
    session.read.parquet(str(path)).write.mode("overwrite").saveAsTable("lake.baskets")
    spec = parse_data_entry(
        "tx", {"kind": "spark-table", "table": "lake.baskets"}, base_dir=tmp_path
    )
    db = EmbeddedEngine().transactions(
        parse_data_entry("tx", {"kind": "parquet", "path": str(path)}, base_dir=tmp_path)
    )
    counter = spark.local_counter(spec)
    assert counter.n_transactions == db.n_transactions == 300
    assert counter.items.tolist() == db.items.tolist()
    assert counter.item_counts().tolist() == db.item_counts().tolist()
    labels = db.items.tolist()
    pairs = [(a, b) for i, a in enumerate(labels) for b in labels[i + 1 :]]
    assert counter.count(pairs).tolist() == support_counts(db, pairs).tolist()
    plan = counter.candidate_rows(["item-a", "item-c"])._jdf.queryExecution()
    scan = plan.executedPlan().toString()
    assert "PushedFilters" in scan and "In(item, [item-a,item-c])" in scan, scan
    whole = spark.transactions(spec)
    assert whole.indices.tolist() == db.indices.tolist()
    with pytest.raises(ConfigError) as info:
        EmbeddedEngine().transactions(spec)
    assert 'engine = "spark" only' in str(info.value)
    assert "\n" not in str(info.value)
    gone = parse_data_entry(
        "tx", {"kind": "spark-table", "table": "lake.nothing"}, base_dir=tmp_path
    )
    with pytest.raises(SourceError) as missing:
        spark.local_counter(gone)
    assert missing.value.fault == "source-unreachable"


def _ids_parquet(tmp: Path, name: str, ids: list, seed: int) -> Path:
    frame = pd.DataFrame({"rid": ids, "a": np.arange(len(ids), dtype=np.float64)})
    path = tmp / f"{name}.parquet"
    frame.sample(frac=1.0, random_state=seed).to_parquet(path, index=False)
    return path


@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", ["int", "str"])
def test_ids_are_encoded_on_the_executors_as_the_embedded_psi_encodes_them(
    spark, tmp_path, kind, monkeypatch
):
    """Record alignment on Spark: the ids are range-partitioned and encoded into PSI
    blocks on the executors (short strings copied, long ones hashed, non-ASCII
    included); the driver's blocks equal ``IdSet``'s on the sorted ids, ``locate`` and
    ``common`` agree with it, and a ``psi-align`` job where alice's node runs Spark gives
    every party the output of the all-embedded job."""
    from ppdm.jobs.document import simulate_job
    from ppdm.jobs.registry import PartyContext
    from ppdm.protocols.psi.ids import IdSet

    rng = np.random.default_rng(31)
    if kind == "int":
        ids = rng.choice(1 << 40, size=500, replace=False).astype(np.int64) - (1 << 39)
        a_ids, b_ids = ids[:400].tolist(), ids[150:].tolist()
    else:
        ids = [f"c{i}" if i % 3 else f"customer-{i:08d}-é-{'x' * (i % 7)}" for i in range(500)]
        order = rng.permutation(500)
        a_ids, b_ids = [ids[i] for i in order[:400]], [ids[i] for i in order[150:]]
    spec = parse_data_entry(
        "records",
        {"kind": "parquet", "path": str(_ids_parquet(tmp_path, "a", a_ids, 3))},
        base_dir=tmp_path,
    )
    encoded = spark.id_set(spec, "rid")
    plain = IdSet.of(sorted(a_ids))
    assert encoded.kind == plain.kind == kind and len(encoded) == len(plain) == 400
    assert np.array_equal(encoded.blocks(), plain.blocks())
    probe = sorted(a_ids)[::7]
    assert encoded.locate(probe).tolist() == plain.locate(probe).tolist()
    assert encoded.locate([*probe, b_ids[-1]]) is None  # not among alice's ids
    rows = np.array([5, 0, 399, 17])
    got_ids, got_rows = encoded.common(rows)
    want_ids, want_rows = plain.common(rows)
    assert got_ids == want_ids and got_rows.tolist() == want_rows.tolist()

    # The psi-align job: alice's node on this Spark engine, bob embedded.
    import ppdm.compute

    real = ppdm.compute.engine_for
    monkeypatch.setattr(
        ppdm.compute,
        "engine_for",
        lambda settings, party="": spark if (settings or {}).get("compute") else real(settings),
    )
    calls = []
    encode = spark.id_set
    monkeypatch.setattr(spark, "id_set", lambda *a: calls.append(a) or encode(*a))
    b_path = tmp_path / "b.csv"
    pd.DataFrame({"rid": b_ids}).to_csv(b_path, index=False)
    spark_table = {"kind": "parquet", "path": str(spec.path)}
    params = {"data": "records", "id_column": "rid", "min_set_size": 10}
    docs = []
    for alice in (
        {"data": {"records": spark_table}, "compute": {"engine": "spark"}},
        {"data": {"records": spark_table}},
    ):
        contexts = {
            "alice": PartyContext("alice", alice, base_dir=tmp_path),
            "bob": PartyContext("bob", {"data": {"records": str(b_path)}}, base_dir=tmp_path),
        }
        docs.append(simulate_job("psi-align", contexts, params, timeout=300))
    assert len(calls) == 1  # alice's ids were encoded on Spark in the first job only
    on_spark, embedded = ({p: e["result"] for p, e in d["parties"].items()} for d in docs)
    for p in ("alice", "bob"):
        for r in (on_spark[p], embedded[p]):
            r.pop("leader")  # a coin toss in each job
        assert on_spark[p] == embedded[p]
    common = set(a_ids) & set(b_ids)
    assert on_spark["alice"]["size"] == len(common) == 250
    assert on_spark["alice"]["ids"] == sorted(common)


def test_a_repeated_id_is_refused_on_the_executor_without_the_id(spark, tmp_path):
    path = _ids_parquet(tmp_path, "dup", [5, 90210, 7, 90210], 1)
    spec = parse_data_entry("r", {"kind": "parquet", "path": str(path)}, base_dir=tmp_path)
    with pytest.raises(ConfigError, match="missing or repeated") as info:
        spark.id_set(spec, "rid")
    assert "90210" not in str(info.value)


def test_consortium_check_reads_a_spark_table_through_the_party_engine(
    spark, tmp_path, monkeypatch
):
    """``ppdm consortium check PARTY.toml`` opens a ``spark-table`` entry as the party's
    node would in a job, through its Spark engine (the embedded sources cannot read a
    catalog table): a table that exists passes with its columns counted, a missing one
    fails with its entry named."""
    import ppdm.compute
    from ppdm.cli._output import load_settings
    from ppdm.parties.consortium import init_consortium, update_toml_file
    from ppdm.service.selfcheck import check_party

    session = spark.session()
    session.sql("CREATE DATABASE IF NOT EXISTS lake")
    session.read.parquet(str(_baskets(tmp_path, 5))).write.mode("overwrite").saveAsTable(
        "lake.checked"
    )
    init_consortium(tmp_path / "net", ["alice", "bob", "carol"])
    path = tmp_path / "net" / "alice.toml"
    update_toml_file(
        path,
        {
            "compute": {"engine": "spark", "master": "local[2]"},
            "data": {
                "lake": {"kind": "spark-table", "table": "lake.checked"},
                "gone": {"kind": "spark-table", "table": "lake.nothing"},
            },
        },
    )
    used = []
    monkeypatch.setattr(  # this process's one Spark session (the fixture's engine)
        ppdm.compute, "engine_for", lambda settings, party="": used.append(party) or spark
    )
    findings = {f["what"]: f for f in check_party(load_settings(path), timeout=60)}
    assert used and set(used) == {"alice"}
    lake = findings["[data] lake"]
    assert lake["ok"], lake
    assert "read through the Spark engine" in lake["detail"] and "2 columns" in lake["detail"]
    assert not findings["[data] gone"]["ok"]
    assert "lake.nothing" in findings["[data] gone"]["detail"]


def test_the_sessions_jvm_ignores_sigint_in_the_callers_process_group(spark):
    """The JVM gateway is started through ``/bin/sh`` rather than pyspark's
    ``preexec_fn`` (unsafe in a threaded gRPC node), with the same effect: it ignores
    SIGINT, and it stays in the caller's process group (a node's group kill ends it)."""
    import os
    import signal

    from pyspark import SparkContext

    spark.session()
    proc = SparkContext._gateway.proc  # the Popen pyspark keeps for its gateway
    assert list(proc.args[:2]) == ["/bin/sh", "-c"]
    status = Path(f"/proc/{proc.pid}/status").read_text()
    ignored = int(next(x for x in status.splitlines() if x.startswith("SigIgn:")).split()[1], 16)
    assert ignored & (1 << (signal.SIGINT - 1))
    assert os.getpgid(proc.pid) == os.getpgrp()


@pytest.mark.timeout(900)
def test_partitions_grow_with_the_rows_and_the_counts_do_not_change(spark, tmp_path, monkeypatch):
    """A scan has one partition per ``ROWS_PER_PARTITION`` rows of its source (at least
    Spark's parallelism), so a partition -- what one executor sorts and streams through
    its Python worker -- stays bounded as the data grow; the counts and the id blocks are
    the same at any number of partitions."""
    import ppdm.compute.spark as spark_module
    from ppdm.protocols.psi.ids import IdSet

    spec = parse_data_entry(
        "tx", {"kind": "parquet", "path": str(_baskets(tmp_path, 9))}, base_dir=tmp_path
    )
    rows = len(pd.read_parquet(spec.path))
    db = EmbeddedEngine().transactions(spec)
    labels = db.items.tolist()
    pairs = [(a, b) for i, a in enumerate(labels) for b in labels[i + 1 :]]
    monkeypatch.setattr(spark_module, "ROWS_PER_PARTITION", 97)
    counter = spark.local_counter(spec)
    assert counter._partitions == -(-rows // 97) > 2
    assert counter.item_counts().tolist() == db.item_counts().tolist()
    assert counter.count(pairs).tolist() == support_counts(db, pairs).tolist()
    ids = list(range(1000, 1600, 3))
    id_spec = parse_data_entry(
        "r",
        {"kind": "parquet", "path": str(_ids_parquet(tmp_path, "p", ids, 2))},
        base_dir=tmp_path,
    )
    encoded = spark.id_set(id_spec, "rid")
    assert np.array_equal(encoded.blocks(), IdSet.of(ids).blocks())
    assert encoded.common(np.array([0, 199, 57]))[0] == [1000, 1171, 1597]
