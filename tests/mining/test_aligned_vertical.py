"""Vertical mining on records the parties align privately (issue 14, items 1 and 4).

Three parties hold different columns of *different, overlapping* sets of patients, each
file with its own ids in its own order. ``kmeans`` / ``assoc`` with ``align=true`` first
run private record alignment (:func:`ppdm.protocols.psi.align`), then mine the aligned
rows; the results must equal scikit-learn's Lloyd (and mlxtend's Apriori) on the pooled
records of the common ids. The ``psi-align`` job must give every party the Python set
intersection. One gRPC test runs both jobs between real ``ppdm party serve`` nodes.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from ppdm.errors import ConfigError
from ppdm.jobs.document import simulate_job
from ppdm.jobs.mining import check_params
from ppdm.jobs.mining_data import read_id_transactions
from ppdm.jobs.registry import PartyContext

PARTIES = ["alice", "bob", "carol"]
COLUMNS = {"alice": ["age", "bmi"], "bob": ["glucose", "insulin"], "carol": ["bp", "hr"]}
K = 3


def _patients(tmp_path, *, n=240, seed=5):
    """Pooled records of ``n`` patients and every party's file: its own columns for its
    own (random, overlapping) patients, rows shuffled, plus patients nobody else has."""
    x, _ = make_blobs(n_samples=n, n_features=6, centers=K, cluster_std=1.5, random_state=seed)
    ids = [f"p{i:05d}" for i in range(n)]
    rng = np.random.default_rng(seed)
    files, held = {}, {}
    col = 0
    for p in PARTIES:
        keep = np.flatnonzero(rng.random(n) < 0.8)
        extra = [f"{p}-only-{i}" for i in range(15)]
        rows = [ids[i] for i in keep] + extra
        values = np.vstack([x[keep, col : col + 2], rng.normal(size=(15, 2))])
        order = rng.permutation(len(rows))
        frame = pd.DataFrame(values[order], columns=COLUMNS[p])
        frame.insert(0, "record_id", [rows[i] for i in order])
        files[p] = tmp_path / f"{p}.csv"
        frame.to_csv(files[p], index=False)
        held[p] = set(rows)
        col += 2
    common = sorted(set.intersection(*held.values()))
    index = [ids.index(c) for c in common]
    return files, common, x[index], held


def _contexts(files, key="records"):
    return {p: PartyContext(p, {"data": {key: str(f)}}) for p, f in files.items()}


def _results(doc):
    assert doc["ok"], doc["error"]
    return {p: e["result"] for p, e in doc["parties"].items()}


def test_aligned_vertical_kmeans_equals_sklearn_on_pooled_aligned_records(tmp_path):
    files, common, pooled, _ = _patients(tmp_path)
    params = {"mode": "vertical", "k": K, "align": True, "include_labels": True, "init": "first-k"}
    got = _results(simulate_job("kmeans", _contexts(files), params, timeout=60))
    ref = KMeans(K, init=pooled[:K], n_init=1, algorithm="lloyd", tol=0.0, max_iter=300).fit(pooled)
    centers = np.hstack([np.array(got[p]["centers"]) for p in PARTIES])
    assert np.abs(centers - ref.cluster_centers_).max() < 1e-6
    for p in PARTIES:
        assert got[p]["record_ids"] == common
        assert got[p]["labels"] == ref.labels_.tolist()
        assert got[p]["iterations"] == ref.n_iter_


def test_without_align_the_same_files_are_refused(tmp_path):
    files, *_ = _patients(tmp_path)
    with pytest.raises(ConfigError, match="other record ids"):
        simulate_job("kmeans", _contexts(files), {"mode": "vertical", "k": K}, timeout=60)


def test_psi_align_job_gives_the_set_intersection(tmp_path):
    files, common, _, _held = _patients(tmp_path)
    for method in ("oprf", "ec"):
        got = _results(simulate_job("psi-align", _contexts(files), {"method": method}))
        digests = {r["ids_sha256"] for r in got.values()}
        assert len(digests) == 1
        for p in PARTIES:
            assert got[p]["ids"] == common and got[p]["size"] == len(common)
            # the leader is drawn by coin toss, the same at every party
            assert got[p]["leader"] == got["alice"]["leader"] in PARTIES
    inputs = {"alice": [3, 1, 2, 7], "bob": [7, 2, 9], "carol": [2, 7, 1]}
    contexts = {p: PartyContext(p, {"inputs": {"ids": v}}) for p, v in inputs.items()}
    got = _results(simulate_job("psi-align", contexts, {"inputs": "ids", "min_set_size": 0}))
    assert all(r["ids"] == [2, 7] for r in got.values())
    gen = _results(
        simulate_job(
            "psi-align",
            {p: PartyContext(p) for p in PARTIES},
            {"generate_n": 500, "overlap": 0.3, "return_ids": False},
        )
    )
    assert all(r["size"] == 150 and "ids" not in r for r in gen.values())


def _fimi_parts(tmp_path, fimi_dir):
    """Two parties, item columns split in two, different overlapping transactions; each
    line starts with the transaction id."""
    lines = (fimi_dir / "mushroom.dat").read_text().splitlines()[::25][:300]
    tx = [[int(t) for t in line.split()] for line in lines]
    items = sorted({i for t in tx for i in t})
    half = set(items[::2])
    rng = np.random.default_rng(2)
    files, held = {}, {}
    for p, mine in (("alice", half), ("bob", set(items) - half)):
        keep = np.flatnonzero(rng.random(len(tx)) < 0.85)
        rows = [(f"t{i}", [j for j in tx[i] if j in mine]) for i in keep]
        rows += [(f"{p}-x{i}", sorted(mine)[:3]) for i in range(10)]
        order = rng.permutation(len(rows))
        text = "\n".join(" ".join([rows[i][0], *map(str, rows[i][1])]) for i in order)
        files[p] = tmp_path / f"{p}.dat"
        files[p].write_text(text + "\n")
        held[p] = {r[0] for r in rows}
    common = sorted(held["alice"] & held["bob"])
    pooled = [tx[int(c[1:])] for c in common]
    return files, pooled


def test_aligned_vertical_assoc_equals_apriori(tmp_path, fimi_dir):
    from mlxtend.frequent_patterns import apriori
    from mlxtend.preprocessing import TransactionEncoder

    files, pooled = _fimi_parts(tmp_path, fimi_dir)
    params = {
        "mode": "vertical",
        "min_support": 0.6,
        "min_confidence": 0.9,
        "align": True,
        "protect": "exact",  # the job's default "dp" gives noisy counts
        "min_aggregate": 0,
    }
    contexts = {p: PartyContext(p, {"data": {"transactions": str(f)}}) for p, f in files.items()}
    got = _results(simulate_job("assoc", contexts, params, timeout=120))
    te = TransactionEncoder()
    onehot = pd.DataFrame(te.fit(pooled).transform(pooled), columns=te.columns_)
    want = {
        frozenset(int(i) for i in row.itemsets): round(row.support * len(pooled))
        for row in apriori(onehot, min_support=0.6, use_colnames=True).itertuples()
    }
    for p in files:
        assert got[p]["aligned"] == len(pooled)
        found = {frozenset(e["items"]): e["support_count"] for e in got[p]["frequent_itemsets"]}
        assert found == want


def test_id_transactions_reader_and_align_parameters(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("t1,milk,bread\nt2\n\nt3,bread\n")
    ids, db = read_id_transactions(path)
    assert ids == ["t1", "t2", "t3"]
    assert list(db.transactions()) == [("bread", "milk"), (), ("bread",)]
    path.write_text("t1,milk\nt1,bread\n")
    with pytest.raises(ConfigError, match="repeat"):
        read_id_transactions(path)
    with pytest.raises(ConfigError, match="vertical"):
        check_params("kmeans", {"mode": "horizontal", "align": True})
    with pytest.raises(ConfigError, match="id_column"):
        check_params("kmeans", {"mode": "vertical", "align": True, "id_column": None})
    with pytest.raises(ConfigError):
        check_params("assoc", {"mode": "vertical", "align": True, "align_method": "rsa"})
    assert check_params("assoc", {"mode": "vertical", "align": True})["align_method"] == "oprf"


@pytest.mark.grpc
@pytest.mark.timeout(120)
def test_psi_align_and_aligned_kmeans_between_nodes(tmp_path):
    from ppdm.jobs.mining import set_party_data
    from ppdm.testbed.consortia import GrpcTestbed

    files, common, pooled, _ = _patients(tmp_path)
    # The default policy, with the one opt-in line vertical k-means needs: its output is
    # every record's cluster label (docs/governance.md, allow_records).
    from ppdm.service.policy import DEFAULT_POLICY_TOML

    policy = DEFAULT_POLICY_TOML.replace("allow_records = false", "allow_records = true ")
    testbed = GrpcTestbed(PARTIES, tmp_path / "bed", timeout=60, policy=policy)
    for p in PARTIES:
        set_party_data(testbed.settings_path(p), "records", files[p])
    with testbed:
        doc = testbed.run_job("psi-align", {}, initiator="bob", timeout=60)
        assert doc["network"] == "grpc" and doc["state"] == "succeeded", doc["error"]
        assert all(r["ids"] == common for r in _results(doc).values())
        params = {"mode": "vertical", "k": K, "align": True, "init": "first-k"}
        doc = testbed.run_job("kmeans", params, timeout=60)
        assert doc["state"] == "succeeded", doc["error"]
    got = _results(doc)
    ref = KMeans(K, init=pooled[:K], n_init=1, algorithm="lloyd", tol=0.0).fit(pooled)
    centers = np.hstack([np.array(got[p]["centers"]) for p in PARTIES])
    assert np.abs(centers - ref.cluster_centers_).max() < 1e-6


def test_simulate_psi_align_command(tmp_path, monkeypatch, capsys):
    from ppdm.cli.main import main

    files, common, _, _ = _patients(tmp_path)
    out = tmp_path / "psi.json"
    monkeypatch.chdir(tmp_path)
    names = ",".join(f.name for f in files.values())
    assert main(["simulate", "psi-align", "--inputs", names, "--output", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [e["result"]["ids"] for e in doc["parties"].values()] == [common] * 3
    assert main(["simulate", "psi-align", "--generate", "300", "--method", "ec", "--json"]) == 0
    assert '"size": 150' in capsys.readouterr().out
    assert main(["simulate", "psi-align", "--inputs", "nope.csv,other.csv"]) == 2
