"""The ``assoc`` and ``kmeans`` jobs between real ``ppdm party serve`` processes (gRPC).

One consortium (alice, bob, carol on 127.0.0.1) serves the four mining modes; each party
reads its own partition from the ``[data]`` table of its settings file. Every result must
equal the in-process run of the same job on the same files and the centralized reference
on the pooled data (Apriori / scikit-learn's Lloyd).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ppdm.jobs.document import simulate_job
from ppdm.jobs.mining import partition_file, set_party_data
from ppdm.jobs.registry import PartyContext
from ppdm.mining.itemsets import min_count
from ppdm.mining.readers import read_fimi

pytestmark = pytest.mark.grpc

PARTIES = ["alice", "bob", "carol"]
SUPPORT = 0.5
CONFIDENCE = 0.9
K = 3


@pytest.fixture(scope="module")
def bed(tmp_path_factory, fimi_dir):
    """A running 3-party testbed whose parties hold the four partitions; yields
    ``(bed, files)`` where ``files[key]`` is the partition folder."""
    from ppdm.testbed.consortia import GrpcTestbed

    root = tmp_path_factory.mktemp("mining-grpc")
    lines = (fimi_dir / "mushroom.dat").read_text().splitlines()[::20]  # 407 baskets
    (root / "baskets.dat").write_text("\n".join(lines) + "\n")
    rng = np.random.default_rng(11)
    centers = rng.normal(0, 6, size=(K, 4))
    x = np.vstack([c + rng.normal(0, 1, size=(80, 4)) for c in centers])
    pd.DataFrame(x, columns=["w", "x", "y", "z"]).to_csv(root / "blobs.csv", index=False)
    # The owners opt in to what these tests use beyond the default policy: two-party
    # vertical rules, and k-means labels and local statistics in the results.
    # These tests compare exact results with centralized ones, so the owners also opt
    # out of the default protections: exact vertical counts, no minimum aggregation,
    # records as starting centres and per-record labels.
    policy = (
        'version = 1\n[defaults]\nexact_partners = ["*"]\nmin_aggregate = 0\n'
        "min_party_records = 0\nallow_records = true\n"
        "[jobs.assoc]\nmin_parties = 2\n[jobs.kmeans.params]\n"
        "include_labels = { values = [false, true] }\n"
        "report_local = { values = [false, true] }\n"
        'init = { values = ["first-k", "aggregate"] }\n'
    )
    testbed = GrpcTestbed(PARTIES, root / "bed", timeout=60, policy=policy)
    files = {}
    for key, source, mode, names in [
        ("baskets_h", "baskets.dat", "horizontal", PARTIES),
        ("baskets_v", "baskets.dat", "vertical", PARTIES[:2]),
        ("baskets_v3", "baskets.dat", "vertical", PARTIES),
        ("blobs_h", "blobs.csv", "horizontal", PARTIES),
        ("blobs_v", "blobs.csv", "vertical", PARTIES),
    ]:
        out = root / key
        manifest = partition_file(root / source, out, parties=names, mode=mode, seed=3)
        for p in names:
            set_party_data(testbed.settings_path(p), key, out / manifest["parties"][p]["file"])
        files[key] = (out, manifest)
    with testbed:
        yield testbed, files, root


def _in_process(job, files, key, params):
    out, manifest = files[key]
    contexts = {
        p: PartyContext(p, {"data": {key: info["file"]}}, base_dir=out)
        for p, info in manifest["parties"].items()
    }
    return simulate_job(job, contexts, params, timeout=60)


def _results(doc):
    assert doc["ok"], doc["error"]
    return {p: e["result"] for p, e in doc["parties"].items()}


def _without_party(result):
    return {k: v for k, v in result.items() if k not in ("party", "local")}


def _assoc_check(doc, ref_doc, pooled, parties, *, counts):
    got, ref = _results(doc), _results(ref_doc)
    assert set(got) == set(parties)
    first = got[parties[0]]
    for p in parties:
        assert _without_party(got[p]) == _without_party(first)  # every party learns the same
        assert got[p] == ref[p]  # gRPC == in process
    want, want_rules = _independent_oracle(pooled)
    found = {frozenset(e["items"]): e["support_count"] for e in first["frequent_itemsets"]}
    assert set(found) == set(want)
    if counts:
        assert found == want
    assert {(tuple(r["antecedent"]), tuple(r["consequent"])) for r in first["rules"]} == (
        want_rules
    )


def _independent_oracle(pooled):
    """Frequent itemsets (with counts) by pyfim and by mlxtend, which must agree, and the
    rules by mlxtend's association_rules: none of it from ppdm's own miner."""
    import fim
    from mlxtend.frequent_patterns import apriori
    from mlxtend.frequent_patterns import association_rules as mlx_rules
    from mlxtend.preprocessing import TransactionEncoder

    tx = [list(t) for t in pooled.transactions()]
    count = min_count(SUPPORT, len(tx))
    # pyfim leaves out items present in every transaction; an empty one changes no count.
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


@pytest.mark.timeout(120)
def test_horizontal_assoc_over_grpc(bed):
    testbed, files, root = bed
    params = {
        "mode": "horizontal",
        "min_support": SUPPORT,
        "min_confidence": CONFIDENCE,
        "min_aggregate": 0,
    }
    params["data"] = "baskets_h"
    doc = testbed.run_job("assoc", params, initiator="bob", timeout=60)
    assert doc["network"] == "grpc" and doc["state"] == "succeeded", doc["error"]
    ref = _in_process("assoc", files, "baskets_h", params)
    _assoc_check(doc, ref, read_fimi(root / "baskets.dat"), PARTIES, counts=False)
    result = doc["parties"]["alice"]["result"]
    assert result["counts_revealed"] is False
    assert all(e["support_count"] is None for e in result["frequent_itemsets"])
    steps = {m["step"] for m in doc["parties"]["alice"]["metrics"]}
    assert "assoc/level1/union/set-union/encrypt" in steps


@pytest.mark.timeout(120)
def test_vertical_assoc_over_grpc(bed):
    testbed, files, root = bed
    params = {
        "mode": "vertical",
        "protect": "exact",
        "min_aggregate": 0,
        "min_support": SUPPORT,
        "min_confidence": CONFIDENCE,
        "data": "baskets_v",
    }
    doc = testbed.run_job("assoc", params, parties=["alice", "bob"], timeout=60)
    assert doc["state"] == "succeeded", doc["error"]
    ref = _in_process("assoc", files, "baskets_v", params)
    _assoc_check(doc, ref, read_fimi(root / "baskets.dat"), ["alice", "bob"], counts=True)


def test_vertical_assoc_three_parties_over_grpc(bed):
    """Candidates spanning all three parties go through the GMW-style chain of OT
    multiplications (issue 14, item 3); the result equals pyfim and mlxtend."""
    testbed, files, root = bed
    params = {
        "mode": "vertical",
        "protect": "exact",
        "min_aggregate": 0,
        "min_support": SUPPORT,
        "min_confidence": CONFIDENCE,
        "data": "baskets_v3",
        "multiparty": "gmw",
    }
    doc = testbed.run_job("assoc", params, parties=PARTIES, timeout=60)
    assert doc["state"] == "succeeded", doc["error"]
    ref = _in_process("assoc", files, "baskets_v3", params)
    _assoc_check(doc, ref, read_fimi(root / "baskets.dat"), PARTIES, counts=True)


def _kmeans_reference(x, init):
    from sklearn.cluster import KMeans

    km = KMeans(K, init=init, n_init=1, algorithm="lloyd", tol=0.0, max_iter=300).fit(x)
    return km.cluster_centers_, int(km.n_iter_)


@pytest.mark.timeout(120)
def test_horizontal_kmeans_over_grpc(bed):
    testbed, files, _ = bed
    params = {
        "mode": "horizontal",
        "k": K,
        "init": "first-k",
        "min_cluster_size": 0,
        "min_party_records": 0,
        "data": "blobs_h",
        "include_labels": True,
        "report_local": True,
    }
    doc = testbed.run_job("kmeans", params, timeout=60)
    assert doc["state"] == "succeeded", doc["error"]
    got, ref = _results(doc), _results(_in_process("kmeans", files, "blobs_h", params))
    out, _ = files["blobs_h"]
    # The pooled records in consortium order (each party's rows sorted by record id).
    parts = [pd.read_csv(out / f"{p}.csv").sort_values("record_id") for p in PARTIES]
    pooled = np.vstack([d[["w", "x", "y", "z"]].to_numpy() for d in parts])
    want, n_iter = _kmeans_reference(pooled, pooled[:K])
    for p, part in zip(PARTIES, parts, strict=True):
        assert got[p]["record_ids"] == part["record_id"].tolist()
        assert np.allclose(got[p]["centers"], ref[p]["centers"], rtol=0, atol=1e-12)
        assert got[p]["iterations"] == n_iter
        assert np.abs(np.array(got[p]["centers"]) - want).max() < 1e-6
        assert got[p]["local"]["records"] == len(part)
        assert sum(got[p]["local"]["cluster_sizes"]) == len(part)
    assert (
        sum(np.array(got[p]["local"]["cluster_sizes"]) for p in PARTIES).tolist()
        == (got["alice"]["cluster_sizes"])
    )


@pytest.mark.timeout(120)
def test_vertical_kmeans_over_grpc(bed):
    testbed, files, root = bed
    params = {
        "mode": "vertical",
        "k": K,
        "data": "blobs_v",
        "include_labels": True,
        "init": "first-k",
        "min_cluster_size": 0,
    }
    doc = testbed.run_job("kmeans", params, initiator="carol", timeout=60)
    assert doc["state"] == "succeeded", doc["error"]
    got, ref = _results(doc), _results(_in_process("kmeans", files, "blobs_v", params))
    pooled = pd.read_csv(root / "blobs.csv").to_numpy()
    want, n_iter = _kmeans_reference(pooled, pooled[:K])
    full = np.zeros((K, 4))
    for p in PARTIES:
        assert got[p]["schema"] == got["alice"]["schema"]
        assert got[p]["labels"] == got["alice"]["labels"] == ref[p]["labels"]
        assert got[p]["iterations"] == n_iter
        for j, col in enumerate(got[p]["columns"]):
            full[:, "wxyz".index(col)] = np.array(got[p]["centers"])[:, j]
    assert np.abs(full - want).max() < 1e-6
    assert got["alice"]["inertia"] == pytest.approx(
        ((pooled - want[got["alice"]["labels"]]) ** 2).sum(), rel=1e-6
    )
