"""One party's local work on Spark, the others embedded, over real nodes (issue 28).

A 3-party consortium on 127.0.0.1 (``ppdm party serve`` processes): alice's node runs
``[compute] engine = "spark"`` with ``master = "local[2]"`` and reads her partitions from
Parquet (the long layout for transactions, with the rows shuffled and NULL-item rows for
baskets without items; a records table for k-means); bob and carol run the embedded
engine on FIMI and CSV files. Every result must equal the all-embedded in-process run of
the same job on the same partitions and the centralized references (pyfim and mlxtend
for the itemsets and rules, scikit-learn's Lloyd for k-means). A lost Spark driver ends
the next job with the fault class ``compute-failed`` at every party; the node then starts
a new session. A Spark step past a short job timeout is cancelled on Spark and the job
fails at every party naming alice.

One Spark session for the module (in alice's node): the JVM starts once.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppdm.jobs.document import simulate_job
from ppdm.jobs.mining import partition_file, set_party_data
from ppdm.jobs.registry import PartyContext
from ppdm.mining.itemsets import min_count
from ppdm.mining.readers import read_fimi
from ppdm.parties.consortium import update_toml_file

pytestmark = pytest.mark.grpc

PARTIES = ["alice", "bob", "carol"]
SUPPORT = 0.5
CONFIDENCE = 0.9
K = 3
COLUMNS = ["w", "x", "y", "z"]
#: JVM options of a short local session (docs/scale.md, "Short local sessions").
SHORT_SESSION_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _spark_or_tier_unavailable(tier_unavailable) -> None:
    import shutil

    try:
        import pyspark  # noqa: F401
    except ImportError:
        tier_unavailable("spark", 'pyspark is not installed (pip install -e ".[spark]")')
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        tier_unavailable("spark", "no Java runtime (apt-get install default-jre-headless)")


def _long_parquet(db, path: Path, seed: int) -> None:
    """``db`` in the long layout (one row per transaction and item; a NULL item marks a
    transaction without items), rows shuffled, written as Parquet."""
    tids, items = [], []
    for t, row in enumerate(db.transactions()):
        if not row:
            tids.append(t)
            items.append(None)
        for x in row:
            tids.append(t)
            items.append(int(x))
    df = pd.DataFrame({"tid": tids, "item": pd.array(items, dtype="Int64")})
    df.sample(frac=1.0, random_state=seed).to_parquet(path, index=False)


@pytest.fixture(scope="module")
def bed(tmp_path_factory, fimi_dir, tier_unavailable):
    _spark_or_tier_unavailable(tier_unavailable)
    from ppdm.testbed.consortia import GrpcTestbed

    root = tmp_path_factory.mktemp("spark-nodes")
    lines = (fimi_dir / "mushroom.dat").read_text().splitlines()[::40]  # 204 baskets
    (root / "baskets.dat").write_text("\n".join(lines) + "\n")
    rng = np.random.default_rng(28)
    centers = rng.normal(0, 8, size=(K, len(COLUMNS)))
    x = np.vstack([c + rng.normal(0, 1, size=(40, len(COLUMNS))) for c in centers])
    # Quarter steps: every sum of these records is exact in float64, so the engines'
    # different orders of addition give the same bits.
    x = np.round(x * 4) / 4
    pd.DataFrame(x, columns=COLUMNS).to_csv(root / "blobs.csv", index=False)
    policy = (
        'version = 1\n[defaults]\nexact_partners = ["*"]\nmin_aggregate = 0\n'
        "min_party_records = 0\nallow_records = true\n"
        "[jobs.assoc]\nmin_parties = 2\n[jobs.assoc.params]\n"
        "reveal_counts = { values = [false, true] }\n"
        "report_local = { values = [false, true] }\n[jobs.kmeans.params]\n"
        "include_labels = { values = [false, true] }\n"
        "report_local = { values = [false, true] }\n"
        'init = { values = ["first-k", "aggregate"] }\n'
    )
    testbed = GrpcTestbed(PARTIES, root / "bed", timeout=300, policy=policy)
    files = {}
    for key, source, mode, names in [
        ("baskets_h", "baskets.dat", "horizontal", PARTIES),
        ("baskets_v", "baskets.dat", "vertical", PARTIES[:2]),
        ("blobs_h", "blobs.csv", "horizontal", PARTIES),
        ("blobs_v", "blobs.csv", "vertical", PARTIES),
    ]:
        out = root / key
        manifest = partition_file(root / source, out, parties=names, mode=mode, seed=5)
        for p in names:
            set_party_data(testbed.settings_path(p), key, out / manifest["parties"][p]["file"])
        files[key] = (out, manifest)
    # Alice's partitions as Parquet, read by her Spark engine.
    spark_data = {}
    for key in ("baskets_h", "baskets_v"):
        out, manifest = files[key]
        target = root / f"alice-{key}.parquet"
        _long_parquet(read_fimi(out / manifest["parties"]["alice"]["file"]), target, seed=7)
        spark_data[key] = {"kind": "parquet", "path": str(target)}
    for key in ("blobs_h", "blobs_v"):
        out, manifest = files[key]
        target = root / f"alice-{key}.parquet"
        frame = pd.read_csv(out / manifest["parties"]["alice"]["file"])
        frame.sample(frac=1.0, random_state=3).to_parquet(target, index=False)
        spark_data[key] = {"kind": "parquet", "path": str(target)}
    # Vertical records with different, overlapping ids at each party (align=true):
    # alice's as Parquet for her Spark engine, a CSV copy of it for the embedded run.
    out, manifest = files["blobs_v"]
    aligned = root / "blobs_a"
    aligned.mkdir()
    held = {}
    for j, p in enumerate(PARTIES):
        frame = pd.read_csv(out / manifest["parties"][p]["file"])
        frame = frame[rng.random(len(frame)) < 0.9]
        extra = pd.DataFrame(rng.normal(size=(5, frame.shape[1] - 1)), columns=frame.columns[1:])
        extra.insert(0, "record_id", 1000 + 10 * np.arange(5) + j)  # ids only p has
        frame = pd.concat([frame, extra]).sample(frac=1.0, random_state=j)
        frame.to_csv(aligned / f"{p}.csv", index=False)
        held[p] = {"file": f"{p}.csv"}
        if p == "alice":
            frame.to_parquet(root / "alice-blobs_a.parquet", index=False)
            spark_data["blobs_a"] = {"kind": "parquet", "path": str(root / "alice-blobs_a.parquet")}
        else:
            set_party_data(testbed.settings_path(p), "blobs_a", aligned / f"{p}.csv")
    files["blobs_a"] = (aligned, {"parties": held})
    # A table that keeps alice's Spark counting busy for far longer than a 5 s job
    # timeout (8M rows); the others hold the small baskets under the same key.
    rng = np.random.default_rng(11)
    rows = 8_000_000
    pd.DataFrame(
        {"tid": np.arange(rows, dtype=np.int64) // 8, "item": rng.integers(0, 500, rows)}
    ).to_parquet(root / "alice-big.parquet", index=False)
    spark_data["big"] = {"kind": "parquet", "path": str(root / "alice-big.parquet")}
    for p in PARTIES[1:]:
        set_party_data(testbed.settings_path(p), "big", root / "baskets.dat")
    update_toml_file(
        testbed.settings_path("alice"),
        {
            "data": spark_data,
            "compute": {
                "engine": "spark",
                "master": "local[2]",
                "driver_memory": "768m",
                "conf": {
                    "spark.sql.shuffle.partitions": "2",
                    # a short session: C1 JIT only, serial GC (docs/scale.md)
                    "spark.driver.extraJavaOptions": SHORT_SESSION_JAVA_OPTIONS,
                },
            },
        },
    )
    with testbed:
        yield testbed, files, root


def _all_embedded(job, files, key, params):
    """The same job in process, every party on the embedded engine and its original
    partition file."""
    out, manifest = files[key]
    contexts = {
        p: PartyContext(p, {"data": {key: info["file"]}}, base_dir=out)
        for p, info in manifest["parties"].items()
    }
    return simulate_job(job, contexts, params, timeout=300)


def _results(doc):
    assert doc["ok"], doc["error"]
    return {p: e["result"] for p, e in doc["parties"].items()}


def _oracle(pooled):
    """Frequent itemsets with counts by pyfim and by mlxtend (which must agree) and the
    rules by mlxtend."""
    import fim
    from mlxtend.frequent_patterns import apriori
    from mlxtend.frequent_patterns import association_rules as mlx_rules
    from mlxtend.preprocessing import TransactionEncoder

    tx = [list(t) for t in pooled.transactions()]
    count = min_count(SUPPORT, len(tx))
    py = {
        frozenset(items): int(c)
        for items, c in fim.fpgrowth([*tx, []], target="s", supp=-count, zmin=1, report="a")
    }
    te = TransactionEncoder()
    onehot = pd.DataFrame(te.fit(tx).transform(tx), columns=te.columns_)
    fi = apriori(onehot, min_support=SUPPORT, use_colnames=True)
    mlx = {
        frozenset(int(i) for i in row.itemsets): round(row.support * len(tx))
        for row in fi.itertuples()
    }
    assert mlx == py, "the two oracles disagree"
    rules = mlx_rules(fi, metric="confidence", min_threshold=CONFIDENCE)
    want_rules = {
        (tuple(sorted(int(i) for i in a)), tuple(sorted(int(i) for i in c)))
        for a, c in zip(rules["antecedents"], rules["consequents"], strict=True)
    }
    return py, want_rules


def _check_assoc(doc, ref_doc, pooled, parties, *, counts):
    assert doc["state"] == "succeeded", doc["error"]
    got, ref = _results(doc), _results(ref_doc)
    assert set(got) == set(parties)
    for p in parties:
        assert got[p] == ref[p]  # alice on Spark == everyone embedded, bit for bit
    first = got[parties[0]]
    want, want_rules = _oracle(pooled)
    found = {frozenset(e["items"]): e["support_count"] for e in first["frequent_itemsets"]}
    assert set(found) == set(want)
    if counts:
        assert found == want
    assert {(tuple(r["antecedent"]), tuple(r["consequent"])) for r in first["rules"]} == (
        want_rules
    )


@pytest.mark.timeout(600)
def test_horizontal_assoc_with_one_spark_party(bed):
    testbed, files, root = bed
    params = {
        "mode": "horizontal",
        "min_support": SUPPORT,
        "min_confidence": CONFIDENCE,
        "min_aggregate": 0,
        "reveal_counts": True,
        "report_local": True,
        "data": "baskets_h",
    }
    doc = testbed.run_job("assoc", params, initiator="bob", timeout=300)
    ref = _all_embedded("assoc", files, "baskets_h", params)
    _check_assoc(doc, ref, read_fimi(root / "baskets.dat"), PARTIES, counts=True)
    assert "Spark session started" in testbed.log("alice")


#: A vertical association-rules job (alice and bob hold ``baskets_v``'s columns).
VERTICAL_ASSOC = {
    "mode": "vertical",
    "protect": "exact",
    "min_aggregate": 0,
    "min_support": SUPPORT,
    "min_confidence": CONFIDENCE,
}


@pytest.mark.timeout(600)
def test_vertical_assoc_with_one_spark_party(bed):
    testbed, files, root = bed
    params = {**VERTICAL_ASSOC, "data": "baskets_v"}
    doc = testbed.run_job("assoc", params, parties=["alice", "bob"], timeout=300)
    ref = _all_embedded("assoc", files, "baskets_v", params)
    _check_assoc(doc, ref, read_fimi(root / "baskets.dat"), ["alice", "bob"], counts=True)


def _kmeans_reference(x, init):
    from sklearn.cluster import KMeans

    km = KMeans(K, init=init, n_init=1, algorithm="lloyd", tol=0.0, max_iter=300).fit(x)
    return km.cluster_centers_, int(km.n_iter_)


def _same_kmeans(got, ref):
    """Equal results; the inertia (a float sum of squared distances to non-dyadic
    centres, added in another order on Spark) to rounding."""
    for p in got:
        a, b = dict(got[p]), dict(ref[p])
        ia, ib = a.pop("inertia"), b.pop("inertia")
        assert ia == pytest.approx(ib, rel=1e-12, abs=1e-9)
        for entries in (a.get("history", []), b.get("history", [])):
            for h in entries:
                h.pop("inertia", None)
        assert a == b


@pytest.mark.timeout(600)
@pytest.mark.parametrize("init", ["first-k", "aggregate"])
def test_horizontal_kmeans_with_one_spark_party(bed, init):
    testbed, files, _ = bed
    params = {
        "mode": "horizontal",
        "k": K,
        "init": init,
        "min_cluster_size": 0,
        "min_party_records": 0,
        "data": "blobs_h",
        "include_labels": True,
        "report_local": True,
    }
    doc = testbed.run_job("kmeans", params, timeout=300)
    assert doc["state"] == "succeeded", doc["error"]
    got, ref = _results(doc), _results(_all_embedded("kmeans", files, "blobs_h", params))
    out, _ = files["blobs_h"]
    parts = [pd.read_csv(out / f"{p}.csv").sort_values("record_id") for p in PARTIES]
    pooled = np.vstack([d[COLUMNS].to_numpy() for d in parts])
    if init == "first-k":
        _same_kmeans(got, ref)
        start = pooled[:K]
    else:
        # Aggregate starting centres come from a coin-tossed direction, new in every
        # job: the two runs agree on the clusters, not on their order; Lloyd from the
        # released starting centres is the reference.
        order = lambda c: sorted(map(tuple, np.round(c, 9)))  # noqa: E731
        assert order(got["alice"]["centers"]) == order(ref["alice"]["centers"])
        start = np.array(got["alice"]["initial_centers"])
    want, n_iter = _kmeans_reference(pooled, start)
    for p, part in zip(PARTIES, parts, strict=True):
        assert got[p]["record_ids"] == part["record_id"].tolist()
        assert got[p]["iterations"] == n_iter
        assert np.abs(np.array(got[p]["centers"]) - want).max() < 1e-6


@pytest.mark.timeout(600)
def test_vertical_kmeans_with_one_spark_party(bed):
    testbed, files, root = bed
    params = {
        "mode": "vertical",
        "k": K,
        "data": "blobs_v",
        "include_labels": True,
        "init": "first-k",
        "min_cluster_size": 0,
    }
    doc = testbed.run_job("kmeans", params, initiator="carol", timeout=300)
    assert doc["state"] == "succeeded", doc["error"]
    got, ref = _results(doc), _results(_all_embedded("kmeans", files, "blobs_v", params))
    _same_kmeans(got, ref)
    pooled = pd.read_csv(root / "blobs.csv")[COLUMNS].to_numpy()
    want, n_iter = _kmeans_reference(pooled, pooled[:K])
    schema = got["alice"]["schema"]
    full = np.zeros((K, len(COLUMNS)))
    for p in PARTIES:
        for j, c in enumerate(schema[p]):
            full[:, COLUMNS.index(c)] = np.array(got[p]["centers"])[:, j]
    assert np.abs(full - want).max() < 1e-6
    assert got["alice"]["iterations"] == n_iter


@pytest.mark.timeout(600)
def test_aligned_vertical_kmeans_with_one_spark_party(bed):
    """``align=true``: alice's ids are encoded on her executors and her node reads back
    the common records only; every party gets the all-embedded result, and the centres
    are scikit-learn's Lloyd on the pooled common records."""
    testbed, files, _ = bed
    params = {
        "mode": "vertical",
        "k": K,
        "data": "blobs_a",
        "align": True,
        "include_labels": True,
        "init": "first-k",
        "min_cluster_size": 0,
    }
    doc = testbed.run_job("kmeans", params, initiator="bob", timeout=300)
    assert doc["state"] == "succeeded", doc["error"]
    got, ref = _results(doc), _results(_all_embedded("kmeans", files, "blobs_a", params))
    _same_kmeans(got, ref)
    out, manifest = files["blobs_a"]
    frames = {p: pd.read_csv(out / manifest["parties"][p]["file"]) for p in PARTIES}
    common = sorted(set.intersection(*(set(f["record_id"]) for f in frames.values())))
    assert 60 < len(common) < 120 and got["alice"]["record_ids"] == common
    pooled = np.hstack([f.set_index("record_id").loc[common].to_numpy() for f in frames.values()])
    want, n_iter = _kmeans_reference(pooled, pooled[:K])
    full = np.hstack([np.array(got[p]["centers"]) for p in PARTIES])
    assert np.abs(full - want).max() < 1e-6 and got["alice"]["iterations"] == n_iter


def _java_children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` and whose command is a Java VM."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and cmd.endswith(b"java"):
            found.append(int(entry.name))
    return found


@pytest.mark.timeout(900)
def test_a_lost_spark_driver_fails_the_job_as_compute_failed_at_every_party(bed):
    """Alice's Spark JVM (driver and, in local mode, its executors) is killed between
    two jobs: the next job ends with the fault class ``compute-failed`` at every party,
    naming alice, and nothing of the engine's message; the job after it runs on a new
    session."""
    testbed, _, _ = bed
    params = {
        "mode": "horizontal",
        "min_support": SUPPORT,
        "min_confidence": CONFIDENCE,
        "min_aggregate": 0,
        "data": "baskets_h",
    }
    ok = testbed.run_job("assoc", params, timeout=300)  # the session is up
    assert ok["state"] == "succeeded", ok["error"]
    node = testbed._procs["alice"].pid
    javas = _java_children(node)
    assert javas, "alice's node has no Spark JVM"
    for pid in javas:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while _java_children(node) and time.monotonic() < deadline:
        time.sleep(0.2)
    doc = testbed.run_job("assoc", params, initiator="bob", timeout=300)
    assert doc["state"] == "failed", doc
    assert doc["failed_party"] == "alice", doc
    for p in PARTIES:
        entry = doc["parties"][p]
        assert entry["error_code"] == "compute-failed", (p, entry)
        assert entry["error_party"] == "alice", (p, entry)
    assert "compute-failed" in doc["error"]
    again = testbed.run_job("assoc", params, timeout=300)
    assert again["state"] == "succeeded", again["error"]
    assert again["parties"]["alice"]["result"] == ok["parties"]["alice"]["result"]


@pytest.mark.timeout(900)
def test_a_spark_job_past_the_job_timeout_is_cancelled_and_the_job_fails_everywhere(bed):
    """Alice's Spark counting of 8M rows under a 5 s job timeout: her Spark job group is
    cancelled (tasks interrupted) and the job fails at every party with a fault class
    naming alice -- ``source-timeout`` if her own bound fires first, ``party_failure``
    if a peer's receive gives up on her first and its abort ends her job; either way her
    executors are free for the next job."""
    testbed, _, _ = bed
    # Alice's session up first (a short job): the 5 s must fall on her counting, not on
    # the start of her JVM, which no cancel stops (with this test first in the module).
    warm = {**VERTICAL_ASSOC, "data": "baskets_v"}
    up = testbed.run_job("assoc", warm, parties=["alice", "bob"], timeout=300)
    assert up["state"] == "succeeded", up["error"]
    params = {
        "mode": "horizontal",
        "min_support": SUPPORT,
        "min_confidence": CONFIDENCE,
        "min_aggregate": 0,
        "data": "big",
    }
    seen = len(testbed.log("alice"))
    doc = testbed.run_job("assoc", params, initiator="bob", timeout=5)
    assert doc["state"] == "failed", doc
    for p in PARTIES:
        entry = doc["parties"][p]
        assert entry["error_party"] == "alice", (p, entry)
        assert entry["error_code"] in ("source-timeout", "party_failure"), (p, entry)
    # The cancel reached the running Spark job: it failed with the cancel (a scan left
    # to run to its end would return normally instead, and log no such line).
    deadline = time.monotonic() + 120
    while "stopped with the cancel" not in testbed.log("alice")[seen:]:
        assert time.monotonic() < deadline, "alice's Spark job was not stopped by the cancel"
        time.sleep(0.2)
    assert "cancelling Spark job group" in testbed.log("alice")[seen:]
    again = testbed.run_job("assoc", {**params, "data": "baskets_h"}, timeout=300)
    assert again["state"] == "succeeded", again["error"]
