"""Data sources (issue 17): files, Parquet datasets and SQL (SQLite) read the same data
the same way; the streamed counter equals the in-memory count; jobs read through the
``[data]`` table; the settings are checked with clear errors.

Oracles: the FIMI reader (``read_fimi``) and ``support_counts`` of the in-memory database
for the transactions, pandas for the records tables, and for the jobs the file-based run
of the same job on the same data plus scikit-learn's Lloyd / a brute-force itemset count.
"""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.errors import ConfigError
from ppdm.jobs.document import simulate_job
from ppdm.jobs.registry import PartyContext
from ppdm.mining.itemsets import TransactionDB, apriori_gen, support_counts
from ppdm.mining.readers import from_transactions, read_fimi, write_fimi
from ppdm.sources import (
    FileSource,
    ParquetDatasetSource,
    SqlSource,
    StreamedCounter,
    open_source,
    open_spec,
    parse_data_entry,
)
from ppdm.sources.counting import transaction_chunks
from ppdm.sources.files import fimi_batches


def _long(db: TransactionDB) -> tuple[np.ndarray, np.ndarray]:
    return db.row_ids(), db.items[db.indices]


def _random_db(seed: int, n: int = 300, n_items: int = 25) -> TransactionDB:
    rng = np.random.default_rng(seed)
    tx = [
        sorted(rng.choice(n_items, size=rng.integers(1, 8), replace=False).tolist())
        for _ in range(n)
    ]
    return from_transactions(tx)


def _write_dataset(db: TransactionDB, root: Path, parts: int = 3, *, interleave: bool) -> Path:
    """The long layout of ``db`` as a hive-partitioned Parquet dataset: ``interleave``
    spreads consecutive transactions over the files (file order not by id)."""
    tids, items = _long(db)
    for p in range(parts):
        sel = (
            (tids % parts == p) if interleave else (tids * parts // max(db.n_transactions, 1) == p)
        )
        folder = root / f"shard={p}"
        folder.mkdir(parents=True)
        pq.write_table(
            pa.table({"tid": tids[sel], "item": items[sel].astype(np.int32)}),
            folder / "part-0.parquet",
            row_group_size=97,
        )
    return root


def _candidates(db: TransactionDB) -> list[tuple]:
    singles = [(int(x),) for x in db.items]
    pairs = apriori_gen(singles[:12])
    triples = [tuple(c) for c in itertools.combinations([int(x) for x in db.items[:7]], 3)]
    return singles + pairs + triples + [(10_000, int(db.items[0]))]  # one unknown label


# ---------------------------------------------------------------------------------------
# Transactions: every source reads the same database


@pytest.mark.parametrize("interleave", [False, True])
def test_parquet_dataset_reads_and_counts_like_the_file(tmp_path, interleave):
    db = _random_db(1)
    fimi = tmp_path / "t.dat"
    write_fimi(db, fimi)
    root = _write_dataset(db, tmp_path / "ds", interleave=interleave)
    spec = parse_data_entry("t", {"kind": "parquet", "path": str(root)}, base_dir=tmp_path)
    with ParquetDatasetSource(spec, chunk_rows=50) as src:
        assert "shard" in src.column_names()  # the hive partition is a column
        assert src.transactions() == read_fimi(fimi)
        counter = StreamedCounter(src.batches, chunk_rows=50)
        assert counter.n_transactions == db.n_transactions
        assert np.array_equal(counter.items, db.items)
        cands = _candidates(db)
        assert counter.count(cands).tolist() == support_counts(db, cands).tolist()
        assert counter.scans == 2


@pytest.mark.parametrize("block", [7, 64, 1 << 20])
def test_fimi_stream_equals_the_reader(tmp_path, block):
    text = "1 2 3\n\n4 2\n7\n\n\n1 7 7 2\n"  # empty lines are empty transactions
    path = tmp_path / "e.dat"
    path.write_text(text)
    spec = parse_data_entry("t", str(path), base_dir=tmp_path)
    want = read_fimi(path)
    batches = list(fimi_batches(path, block_bytes=block))
    counter = StreamedCounter(lambda items: iter(batches), chunk_rows=3)
    assert counter.n_transactions == want.n_transactions == 7
    cands = [(1,), (2,), (1, 2), (2, 7), (1, 2, 7), (4, 2), (9, 1)]
    assert counter.count(cands).tolist() == support_counts(want, cands).tolist()
    src = FileSource(spec, chunk_rows=3)
    assert src.transactions() == want


@given(
    st.lists(st.lists(st.integers(0, 9), max_size=5), max_size=40),
    st.integers(1, 25),
    st.integers(1, 9),
)
def test_streamed_counter_equals_in_memory_counts(tx, chunk_rows, batch):
    """Any split into batches and chunks gives the in-memory counts (property)."""
    db = from_transactions(tx)
    tids = np.repeat(np.arange(len(tx)), [max(len(set(t)), 1) for t in tx])
    items = np.concatenate([sorted(set(t)) or [0] for t in tx]) if tx else np.zeros(0, int)
    valid = np.concatenate([[True] * len(set(t)) or [False] for t in tx]) if tx else None
    batches = [
        (tids[i : i + batch], items[i : i + batch], None if valid is None else valid[i : i + batch])
        for i in range(0, len(tids), batch)
    ]
    for chunk in transaction_chunks(iter(batches), chunk_rows):
        assert len(np.intersect1d(chunk[0][:1], chunk[0][-1:])) <= 1
    counter = StreamedCounter(lambda items: iter(batches), chunk_rows=chunk_rows)
    assert counter.n_transactions == len(tx)
    cands = [tuple(c) for k in (1, 2, 3) for c in itertools.combinations(range(10), k)]
    assert counter.count(cands).tolist() == support_counts(db, cands).tolist()
    pairs = [c for c in cands if len(c) == 2] + [(3, 99)]  # the co-occurrence path
    assert counter.count(pairs).tolist() == support_counts(db, pairs).tolist()


def test_sqlite_source_reads_transactions_and_records(tmp_path):
    db = _random_db(2, n=120)
    tids, items = _long(db)
    path = tmp_path / "shop.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE baskets (tid INTEGER, item INTEGER)")
    con.executemany(
        "INSERT INTO baskets VALUES (?, ?)", zip(tids.tolist(), items.tolist(), strict=True)
    )
    con.execute("INSERT INTO baskets VALUES (500, NULL)")  # a transaction without items
    con.execute('CREATE TABLE people (record_id INTEGER, "a b" REAL, c NUMERIC, d TEXT)')
    con.executemany("INSERT INTO people VALUES (?, ?, ?, 'x')", [(3, 1.5, 2), (1, -2.0, 4)])
    con.commit()
    con.close()
    entry = {"kind": "sql", "url": "sqlite:///shop.db", "table": "baskets"}
    src = open_source({"b": entry}, "b", base_dir=tmp_path, party="alice")
    assert isinstance(src, SqlSource)
    got = src.transactions()
    assert got.n_transactions == db.n_transactions + 1
    assert got.subset(np.arange(db.n_transactions)) == db
    counter = StreamedCounter(src.batches, chunk_rows=40)
    cands = _candidates(db)
    assert counter.n_transactions == db.n_transactions + 1
    assert counter.count(cands).tolist() == support_counts(db, cands).tolist()
    query = {"kind": "sql", "url": "sqlite:///shop.db", "query": "SELECT * FROM people;"}
    with open_source({"p": query}, "p", base_dir=tmp_path, party="alice") as people:
        assert people.column_names() == ["record_id", "a b", "c", "d"]
        frame = people.read_frame(["a b", "record_id"])
        assert list(frame.columns) == ["a b", "record_id"]
        assert sorted(frame["record_id"]) == [1, 3]
        with pytest.raises(ConfigError, match="no column"):
            people.read_frame(['x" FROM people; --'])  # quoted: no injection, no column


def test_sqlite_is_opened_read_only(tmp_path):
    path = tmp_path / "ro.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (tid INTEGER, item INTEGER)")
    con.commit()
    con.close()
    entry = {"kind": "sql", "url": "sqlite:///ro.db", "table": "t"}
    src = open_source({"t": entry}, "t", base_dir=tmp_path, party="alice")
    assert src.transactions().n_transactions == 0
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        src._connect().execute("INSERT INTO t VALUES (1, 2)")
    with pytest.raises(ConfigError, match="refused"):
        list(src._rows("INSERT INTO t VALUES (1, 2) RETURNING tid"))
    src.close()


def test_file_source_projects_columns_of_csv_and_parquet(tmp_path):
    df = pd.DataFrame(
        {"record_id": [2, 1, 3], "x": [1.0, 2.0, 3.0], "y": [4, 5, 6], "s": list("abc")}
    )
    df.to_csv(tmp_path / "r.csv", index=False)
    df.to_parquet(tmp_path / "r.parquet", index=False)
    for name in ("r.csv", "r.parquet"):
        with open_source({"r": name}, "r", base_dir=tmp_path, party="p") as src:
            assert src.column_names() == ["record_id", "x", "y", "s"]
            got = src.read_frame(["y", "record_id"])
            pd.testing.assert_frame_equal(
                got.reset_index(drop=True), df[["y", "record_id"]], check_dtype=False
            )


# ---------------------------------------------------------------------------------------
# Jobs read through the sources


def _assoc_oracle(pooled: TransactionDB, support: float) -> set[frozenset]:
    from ppdm.mining.itemsets import min_count

    t = min_count(support, pooled.n_transactions)
    tx = [set(x) for x in pooled.transactions()]
    found = set()
    for k in (1, 2, 3, 4):
        for c in itertools.combinations([int(x) for x in pooled.items], k):
            if sum(1 for s in tx if s.issuperset(c)) >= t:
                found.add(frozenset(c))
    return found


def test_assoc_job_over_files_parquet_and_sqlite_equals_the_file_run(tmp_path, monkeypatch):
    monkeypatch.setattr("ppdm.sources.counting.DEFAULT_CHUNK_ROWS", 64)  # many chunks
    parts = [_random_db(s, n=150, n_items=12) for s in (3, 4, 5)]
    for p, db in zip("abc", parts, strict=True):
        write_fimi(db, tmp_path / f"{p}.dat")
    _write_dataset(parts[1], tmp_path / "b_ds", interleave=True)
    tids, items = _long(parts[2])
    con = sqlite3.connect(tmp_path / "c.db")
    con.execute("CREATE TABLE tx (basket INTEGER, product INTEGER)")
    con.executemany("INSERT INTO tx VALUES (?, ?)", zip(tids.tolist(), items.tolist(), strict=True))
    con.commit()
    con.close()
    files = {
        p: PartyContext(p, {"data": {"transactions": f"{p}.dat"}}, base_dir=tmp_path) for p in "abc"
    }
    sources = {
        "a": PartyContext(  # a FIMI file streamed in blocks
            "a",
            {"data": {"transactions": {"path": "a.dat", "engine": "stream"}}},
            base_dir=tmp_path,
        ),
        "b": PartyContext(
            "b",
            {"data": {"transactions": {"kind": "parquet", "path": "b_ds", "engine": "stream"}}},
            base_dir=tmp_path,
        ),
        "c": PartyContext(
            "c",
            {
                "data": {
                    "transactions": {
                        "kind": "sql",
                        "url": "sqlite:///c.db",
                        "query": "SELECT basket, product FROM tx",
                        "transaction_column": "basket",
                        "item_column": "product",
                        "engine": "stream",
                    }
                }
            },
            base_dir=tmp_path,
        ),
    }
    params = {
        "mode": "horizontal",
        "min_support": 0.08,
        "min_confidence": 0.5,
        "reveal_counts": True,
    }
    want = simulate_job("assoc", files, params, timeout=60)
    got = simulate_job("assoc", sources, params, timeout=60)
    assert want["ok"] and got["ok"], (want["error"], got["error"])
    ref = {p: e["result"] for p, e in want["parties"].items()}
    res = {p: e["result"] for p, e in got["parties"].items()}
    assert res == ref
    pooled = from_transactions([t for db in parts for t in db.transactions()])
    found = {frozenset(e["items"]) for e in res["a"]["frequent_itemsets"]}
    assert found == _assoc_oracle(pooled, 0.08)


def test_kmeans_job_reads_records_from_parquet_and_sqlite(tmp_path):
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(7)
    centers = rng.normal(0, 5, size=(3, 2))
    frames = []
    for p in range(3):
        x = np.vstack([c + rng.normal(0, 0.5, size=(12, 2)) for c in centers])
        ids = np.arange(36) + 100 * p
        frames.append(
            pd.DataFrame({"record_id": ids[::-1], "u": x[::-1, 0], "v": x[::-1, 1], "note": "n"})
        )
    for p, df in zip("abc", frames, strict=True):
        df[["record_id", "u", "v"]].to_csv(tmp_path / f"{p}.csv", index=False)
    frames[1].to_parquet(tmp_path / "b.parquet", index=False)
    con = sqlite3.connect(tmp_path / "c.db")
    frames[2].to_sql("people", con, index=False)
    con.close()
    files = {
        p: PartyContext(p, {"data": {"records": f"{p}.csv"}}, base_dir=tmp_path) for p in "abc"
    }
    sources = {
        "a": files["a"],
        "b": PartyContext("b", {"data": {"records": "b.parquet"}}, base_dir=tmp_path),
        "c": PartyContext(
            "c",
            {"data": {"records": {"kind": "sql", "url": "sqlite:///c.db", "table": "people"}}},
            base_dir=tmp_path,
        ),
    }
    # deterministic starts (records as centres, no size floors) so that two runs on the
    # same records agree; the default aggregate start draws a random direction
    params = {
        "k": 3,
        "columns": ["u", "v"],
        "include_labels": True,
        "init": "first-k",
        "min_cluster_size": 0,
        "min_party_records": 0,
    }
    want = simulate_job("kmeans", files, params, timeout=60)
    got = simulate_job("kmeans", sources, params, timeout=60)
    assert want["ok"] and got["ok"], (want["error"], got["error"])
    for p in "abc":
        assert got["parties"][p]["result"] == want["parties"][p]["result"]
    pooled = np.vstack([f.sort_values("record_id")[["u", "v"]].to_numpy() for f in frames])
    km = KMeans(3, init=pooled[:3], n_init=1, algorithm="lloyd", tol=0.0).fit(pooled)
    assert (
        np.abs(np.array(got["parties"]["a"]["result"]["centers"]) - km.cluster_centers_).max()
        < 1e-6
    )


# ---------------------------------------------------------------------------------------
# Settings: clear errors


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"kind": "mongo"}, "kind must be one of"),
        ({"kind": "sql", "url": "postgresql://u@h/db"}, "exactly one of table and query"),
        ({"kind": "sql", "url": "postgresql://u@h/db", "table": "a;b"}, "table must be a name"),
        ({"kind": "sql", "url": "mysql://u@h/db", "table": "t"}, "url must start with"),
        ({"kind": "sql", "url": "postgresql://u@h/", "table": "t"}, "name a database"),
        (
            {"kind": "sql", "url": "postgresql://u@h/d", "query": "SELECT 1; DROP TABLE x"},
            "one SELECT",
        ),
        (
            {
                "kind": "sql",
                "url": "postgresql://u@h/d",
                "table": "t",
                "password_env": "A",
                "password_file": "f",
            },
            "not both",
        ),
        (
            {"kind": "sql", "url": "postgresql://u@h/d", "table": "t", "password_env": "1X"},
            "variable name",
        ),
        ({"kind": "parquet"}, "needs a path"),
        ({"kind": "parquet", "path": "x", "format": "fimi"}, "unknown key"),
        ({"kind": "file", "path": "x", "engine": "gpu"}, "engine must be"),
        ({"kind": "file", "path": "x", "sep": ";;"}, "sep must be one character"),
        (3, "file path or a table"),
    ],
)
def test_bad_entries_are_config_errors(tmp_path, entry, message):
    with pytest.raises(ConfigError, match=message):
        parse_data_entry("t", entry, base_dir=tmp_path)


def test_missing_entry_and_missing_files(tmp_path):
    with pytest.raises(ConfigError, match="has no data file 'x'"):
        open_source({}, "x", base_dir=tmp_path, party="alice")
    with pytest.raises(ConfigError, match="not found"):
        open_source(
            {"x": {"kind": "parquet", "path": "nowhere"}}, "x", base_dir=tmp_path, party="a"
        )
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"no \.parquet files"):
        open_source({"x": {"kind": "parquet", "path": "empty"}}, "x", base_dir=tmp_path, party="a")


def test_string_labels_and_ids_from_parquet_and_sqlite(tmp_path):
    """Basket labels (strings) and string transaction ids read like the basket CSV."""
    baskets = [["milk", "bread"], ["bread"], ["eggs", "milk", "bread"], ["eggs"]]
    (tmp_path / "b.csv").write_text("\n".join(",".join(b) for b in baskets) + "\n")
    want = FileSource(parse_data_entry("t", "b.csv", base_dir=tmp_path)).transactions()
    rows = [(f"order-{t:02d}", x) for t, b in enumerate(baskets) for x in b]
    pq.write_table(
        pa.table({"tid": [r[0] for r in rows], "item": [r[1] for r in rows]}),
        tmp_path / "b.parquet",
    )
    con = sqlite3.connect(tmp_path / "b.db")
    con.execute("CREATE TABLE t (tid TEXT, item TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?)", rows[::-1])  # any order
    con.commit()
    con.close()
    sql = {"kind": "sql", "url": "sqlite:///b.db", "table": "t"}
    for entry in ("b.parquet", sql):
        with open_source({"t": entry}, "t", base_dir=tmp_path, party="p") as src:
            got = src.transactions()
            assert got == want and got.items.dtype.kind == "U"
            counter = StreamedCounter(src.batches, chunk_rows=2)
            assert counter.count([("bread", "milk"), ("eggs",)]).tolist() == [2, 2]


def test_vertical_assoc_reads_a_table_with_marker_rows(tmp_path):
    """Vertical partitioning from a table: a NULL item keeps a transaction without the
    party's items in the common order; the result equals the run on files."""
    db = _random_db(9, n=80, n_items=10)
    left = db.project([x for x in db.items if x < 5])
    right = db.project([x for x in db.items if x >= 5])
    write_fimi(left, tmp_path / "a.dat")
    write_fimi(right, tmp_path / "b.dat")
    con = sqlite3.connect(tmp_path / "b.db")
    con.execute("CREATE TABLE t (tid INTEGER, item INTEGER)")
    tx = list(right.transactions())
    rows = [(t, x) for t, items in enumerate(tx) for x in items]
    rows += [(t, None) for t, items in enumerate(tx) if not items]
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    con.commit()
    con.close()
    params = {
        "mode": "vertical",
        "min_support": 0.1,
        "min_confidence": 0.6,
        "protect": "exact",  # no noise: the two runs must agree
        "min_aggregate": 0,
    }
    files = {
        p: PartyContext(p, {"data": {"transactions": f"{p}.dat"}}, base_dir=tmp_path) for p in "ab"
    }
    table = {"kind": "sql", "url": "sqlite:///b.db", "table": "t"}
    mixed = {
        "a": files["a"],
        "b": PartyContext("b", {"data": {"transactions": table}}, base_dir=tmp_path),
    }
    want = simulate_job("assoc", files, params, timeout=60)
    got = simulate_job("assoc", mixed, params, timeout=60)
    assert want["ok"] and got["ok"], (want["error"], got["error"])
    strip = lambda r: {k: v for k, v in r.items() if k != "levels"}  # noqa: E731 (byte counts)
    for p in "ab":
        assert strip(got["parties"][p]["result"]) == strip(want["parties"][p]["result"])


def test_kmeans_streams_large_tables_through_the_local_seam(tmp_path, monkeypatch):
    """engine = "stream": the records stay in the source and every iteration scans it
    (small batches here); the result equals the in-memory run on the same files."""
    from ppdm.sources.records import StreamedRecords

    monkeypatch.setattr("ppdm.sources.files.BATCH_ROWS", 7)
    monkeypatch.setattr("ppdm.sources.sql.FETCH_ROWS", 5)
    monkeypatch.setattr("ppdm.sources.records._ASSIGN_CELLS", 12)
    monkeypatch.setattr("ppdm.sources.records.HEAD_ROWS", 2)  # first-k needs a rescan
    made: list[StreamedRecords] = []
    original = StreamedRecords.__init__

    def spy(self, *args, **kw):
        original(self, *args, **kw)
        made.append(self)

    monkeypatch.setattr(StreamedRecords, "__init__", spy)
    rng = np.random.default_rng(17)
    centers = rng.normal(0, 4, size=(3, 2))
    frames = []
    for p in range(3):
        x = np.vstack([c + rng.normal(0, 0.7, size=(10, 2)) for c in centers])
        frames.append(
            pd.DataFrame({"record_id": np.arange(30)[::-1] + 50 * p, "u": x[:, 0], "v": x[:, 1]})
        )
    for p, df in zip("abc", frames, strict=True):
        df.to_csv(tmp_path / f"{p}.csv", index=False)
    frames[0].to_parquet(tmp_path / "a.parquet", index=False)  # file order not by id
    con = sqlite3.connect(tmp_path / "b.db")
    frames[1].to_sql("people", con, index=False)
    con.close()
    files = {
        p: PartyContext(p, {"data": {"records": f"{p}.csv"}}, base_dir=tmp_path) for p in "abc"
    }
    streamed = {
        "a": PartyContext(
            "a",
            {"data": {"records": {"kind": "file", "path": "a.parquet", "engine": "stream"}}},
            base_dir=tmp_path,
        ),
        "b": PartyContext(
            "b",
            {
                "data": {
                    "records": {
                        "kind": "sql",
                        "url": "sqlite:///b.db",
                        "table": "people",
                        "engine": "stream",
                    }
                }
            },
            base_dir=tmp_path,
        ),
        "c": files["c"],
    }
    params = {
        "k": 3,
        "include_labels": True,
        "report_local": True,
        "tol": 1e-4,
        "init": "first-k",
        "min_cluster_size": 0,
        "min_party_records": 0,
    }
    want = simulate_job("kmeans", files, params, timeout=60)
    got = simulate_job("kmeans", streamed, params, timeout=60)
    assert want["ok"] and got["ok"], (want["error"], got["error"])
    assert len(made) == 2 and all(r.scans > 3 for r in made)
    for p in "abc":
        g, w = got["parties"][p]["result"], want["parties"][p]["result"]
        assert g["record_ids"] == w["record_ids"] and g["labels"] == w["labels"]
        assert g["iterations"] == w["iterations"] and g["cluster_sizes"] == w["cluster_sizes"]
        assert g["local"] == w["local"]
        assert np.allclose(g["centers"], w["centers"], rtol=0, atol=1e-9)
        assert abs(g["inertia"] - w["inertia"]) < 1e-6


def test_streamed_records_refuse_bad_tables(tmp_path):
    df = pd.DataFrame({"record_id": [1, 2, 2], "u": [1.0, 2.0, 3.0], "s": ["a", "b", "c"]})
    df.to_parquet(tmp_path / "d.parquet", index=False)
    entry = {"kind": "parquet", "path": "d.parquet", "engine": "stream"}
    with open_source({"d": entry}, "d", base_dir=tmp_path, party="p") as src:
        with pytest.raises(ConfigError, match="duplicate ids"):
            src.streamed_records(["u"], "record_id")
        with pytest.raises(ConfigError, match="not numeric"):
            src.streamed_records(["s"], "record_id")
        with pytest.raises(ConfigError, match="no column"):
            src.streamed_records(["w"], "record_id")


def test_streamed_records_project_and_sum_by_group_like_memory(tmp_path):
    """The default aggregate start (random-slabs / random-partition) on streamed records:
    one scan each, the same numbers as the in-memory records."""
    from ppdm.mining.kmeans_common import _ArrayRecords
    from ppdm.sources.records import StreamedRecords

    rng = np.random.default_rng(5)
    x = rng.normal(size=(1000, 3))
    ids = np.arange(1000)

    def scan():
        for lo in range(0, 1000, 128):
            yield ids[lo : lo + 128], x[lo : lo + 128]

    streamed = StreamedRecords(scan, 3, "test")
    memory = _ArrayRecords(x)
    u = np.array([0.6, -0.8, 0.0])
    assert np.allclose(streamed.project(u), x @ u)
    labels = rng.integers(0, 4, size=1000)
    got, want = streamed.group_sums(labels, 4), memory.group_sums(labels, 4)
    assert np.allclose(got[0], want[0]) and np.array_equal(got[1], want[1])


# -- bounded stalls (issue 23, item 4) -----------------------------------------------------


def _sqlite_baskets(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE baskets (tid INTEGER, item INTEGER)")
    con.executemany("INSERT INTO baskets VALUES (?, ?)", [(t, t % 5) for t in range(50)])
    con.commit()
    con.close()


def test_a_locked_sqlite_file_fails_within_the_bound_as_source_locked(tmp_path):
    from ppdm.errors import PublicError, SourceError
    from ppdm.sources import read_time_limit

    _sqlite_baskets(tmp_path / "shop.db")
    writer = sqlite3.connect(tmp_path / "shop.db", isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")  # a writer holds the file
    entry = {"kind": "sql", "url": "sqlite:///shop.db", "table": "baskets"}
    try:
        with read_time_limit(0.3):
            src = open_source({"b": entry}, "b", base_dir=tmp_path, party="alice")
        with src, pytest.raises(SourceError) as caught:
            src.transactions()
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert caught.value.fault == "source-locked"
    assert PublicError.of(caught.value, "alice").code == "source-locked"
    with open_source({"b": entry}, "b", base_dir=tmp_path, party="alice") as src:
        assert src.transactions().n_transactions == 50  # released: read again


def test_a_sqlite_query_running_past_the_bound_is_interrupted_as_source_timeout(tmp_path):
    from ppdm.errors import SourceError
    from ppdm.sources import read_time_limit

    _sqlite_baskets(tmp_path / "shop.db")
    # A statement that runs past the bound before its first row: the aggregate of an
    # endless sequence. (The rows of the sequence itself streamed: each fetch of
    # FETCH_ROWS of them, one bounded read, took 0.05 s on a quiet machine, so the
    # bound never fired and the reader gathered rows until memory or the test's
    # timeout ran out; it passed only on a loaded host, where one fetch took > 0.3 s.)
    endless = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        "SELECT max(x) AS tid, 0 AS item FROM c"
    )
    entry = {"kind": "sql", "url": "sqlite:///shop.db", "query": endless}
    with read_time_limit(0.3):
        src = open_source({"b": entry}, "b", base_dir=tmp_path, party="alice")
    with src, pytest.raises(SourceError) as caught:
        src.transactions()
    assert caught.value.fault == "source-timeout"
    assert "tid" not in str(caught.value)  # the class and the source, no query text


def test_a_duckdb_scan_running_past_the_bound_is_interrupted_as_source_timeout(tmp_path):
    from ppdm.errors import SourceError
    from ppdm.sources import read_time_limit
    from ppdm.sources.files import _rows

    db = _random_db(1)
    root = _write_dataset(db, tmp_path / "ds", interleave=False)
    spec = parse_data_entry("t", {"kind": "parquet", "path": str(root)}, base_dir=tmp_path)
    with read_time_limit(0.3):
        src = open_spec(spec)
    with src:
        assert src.row_estimate() == len(_long(db)[0])  # a quick read passes the watchdog
        table = src._table
        slow = "SELECT count(*) FROM range(100000000000) a, range(10) b WHERE a.range % 7 = b.range"
        with pytest.raises(SourceError) as caught:
            table._run(slow, _rows)
        assert caught.value.fault == "source-timeout"
        with pytest.raises(SourceError) as streamed:
            list(table._stream("SELECT a.range FROM range(100000000000) a ORDER BY -a.range"))
        assert streamed.value.fault == "source-timeout"


def test_source_faults_are_public_codes_every_peer_accepts():
    from ppdm.errors import ERROR_CODES, SOURCE_FAULTS, PublicError, SourceError

    for fault in SOURCE_FAULTS:
        assert fault in ERROR_CODES
        public = PublicError.of(SourceError(fault, "secret 1234 in the message"), "alice")
        assert public.code == fault and "1234" not in public.text()
    assert SourceError("no-such-class", "x").fault == "source-malformed"
