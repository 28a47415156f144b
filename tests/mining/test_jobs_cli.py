"""``ppdm partition``, ``ppdm simulate assoc|kmeans``, ``ppdm demo`` and the mining jobs.

Round trips on small generated data: partitions put back together give the pooled file;
simulated runs equal the centralized reference (Apriori on the pooled transactions,
scikit-learn's Lloyd on the pooled records); bad input is one line on stderr, exit 2;
a peer that sends malformed job messages is named with its step.
"""

from __future__ import annotations

import csv
import json
import tomllib
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.cli.main import main
from ppdm.errors import ConfigError, ProtocolError
from ppdm.jobs.document import simulate_job
from ppdm.jobs.mining import (
    check_params,
    partition_file,
    read_records,
    read_transactions,
    set_party_data,
)
from ppdm.jobs.registry import PartyContext, get_job
from ppdm.mining.itemsets import frequent_itemsets
from ppdm.mining.readers import from_transactions, read_basket_csv, read_fimi
from ppdm.mining.rules import association_rules
from ppdm.parties.local import simulate

NAMES = ["alice", "bob", "carol", "dave", "erin"]


def _baskets(seed: int, n: int, n_items: int, density: float = 0.35) -> list[list[int]]:
    """Random baskets with a few correlated items, so that rules exist."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        row = rng.random(n_items) < density
        if row[0]:
            row[1] = rng.random() < 0.9
        out.append([int(i) for i in np.flatnonzero(row)])
    return out


def _write_fimi(path: Path, baskets: list[list[int]]) -> Path:
    path.write_text("".join(" ".join(map(str, b)) + "\n" for b in baskets))
    return path


def _blobs(seed: int, n_per: int = 40, k: int = 3, d: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 8, size=(k, d))
    return np.vstack([c + rng.normal(0, 1, size=(n_per, d)) for c in centers])


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code: int, err: str) -> str:
    assert code == 2
    assert err.startswith("ppdm: error: ")
    assert err.strip().count("\n") == 0, err
    return err


def _rule_keys(rules) -> set[tuple]:
    return {(tuple(sorted(r.antecedent)), tuple(sorted(r.consequent))) for r in rules}


# ---------------------------------------------------------------------------------------
# Partitioning


@given(
    seed=st.integers(0, 10_000),
    n=st.integers(5, 40),
    n_items=st.integers(5, 12),
    parties=st.integers(2, 5),
    mode=st.sampled_from(["horizontal", "vertical"]),
)
def test_partition_transactions_round_trip(tmp_path_factory, seed, n, n_items, parties, mode):
    tmp = tmp_path_factory.mktemp("part")
    baskets = _baskets(seed, n, n_items)
    src = _write_fimi(tmp / "pooled.dat", baskets)
    names = NAMES[:parties]
    if mode == "vertical" and len({x for b in baskets for x in b}) < parties:
        with pytest.raises(ConfigError, match="cannot split"):
            partition_file(src, tmp / "out", parties=names, mode=mode, seed=seed)
        return
    manifest = partition_file(src, tmp / "out", parties=names, mode=mode, seed=seed)
    assert manifest["rows"] == n
    assert json.loads((tmp / "out" / "partition.json").read_text()) == manifest
    dbs = {p: read_fimi(tmp / "out" / manifest["parties"][p]["file"]) for p in names}
    if mode == "horizontal":
        assert sum(db.n_transactions for db in dbs.values()) == n
        got = Counter(t for db in dbs.values() for t in db.transactions())
        assert got == Counter(tuple(b) for b in baskets)
        assert all(db.n_transactions >= n // parties for db in dbs.values())
    else:
        assert all(db.n_transactions == n for db in dbs.values())
        rows = [list(db.transactions()) for db in dbs.values()]
        owners: dict[int, str] = {}
        for p, db in dbs.items():
            for item in db.items.tolist():
                assert owners.setdefault(item, p) == p  # each item at one party
        for t in range(n):
            assert sorted(x for r in rows for x in r[t]) == baskets[t]


def test_partition_records_keeps_a_common_record_id(tmp_path):
    x = _blobs(1, n_per=10)
    pd.DataFrame(x, columns=["a", "b", "c"]).to_csv(tmp_path / "t.csv", index=False)
    h = partition_file(tmp_path / "t.csv", tmp_path / "h", parties=NAMES[:3], mode="horizontal")
    parts = [pd.read_csv(tmp_path / "h" / h["parties"][p]["file"]) for p in NAMES[:3]]
    pooled = pd.concat(parts).sort_values("record_id")
    assert pooled["record_id"].tolist() == list(range(30))
    assert np.allclose(pooled[["a", "b", "c"]].to_numpy(), x)
    v = partition_file(
        tmp_path / "t.csv", tmp_path / "v", parties=NAMES[:2], mode="vertical", seed=4
    )
    cols = [v["parties"][p]["columns"] for p in NAMES[:2]]
    assert sorted(cols[0] + cols[1]) == ["a", "b", "c"] and not set(cols[0]) & set(cols[1])
    for p in NAMES[:2]:
        rec = read_records(tmp_path / "v" / f"{p}.csv")
        assert rec.ids.tolist() == list(range(30))
        assert np.allclose(rec.x, x[:, ["abc".index(c) for c in rec.columns]])
    # An existing id column is kept (not renumbered); columns keeps a subset.
    df = pd.DataFrame({"record_id": [30 - i for i in range(30)], "a": x[:, 0], "b": x[:, 1]})
    df["c"] = "text"
    df.to_csv(tmp_path / "ids.csv", index=False)
    m = partition_file(
        tmp_path / "ids.csv",
        tmp_path / "s",
        parties=NAMES[:2],
        mode="vertical",
        columns=["b", "a"],
    )
    assert sorted(m["parties"]["alice"]["columns"] + m["parties"]["bob"]["columns"]) == [
        "a",
        "b",
    ]
    for p in NAMES[:2]:
        part = pd.read_csv(tmp_path / "s" / f"{p}.csv")
        assert part.columns.tolist() == ["record_id", *m["parties"][p]["columns"]]
        assert sorted(part["record_id"]) == list(range(1, 31))
    with pytest.raises(ConfigError, match="cannot split 1 columns"):
        partition_file(
            tmp_path / "ids.csv", tmp_path / "s", parties=NAMES[:2], mode="vertical", columns=["a"]
        )


def test_partition_basket_csv_with_string_items(tmp_path):
    baskets = [["milk", "bread, white"], [], ["beer"], ["milk", "beer", "eggs"]]
    with open(tmp_path / "b.csv", "w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(baskets)
    for mode in ("horizontal", "vertical"):
        m = partition_file(
            tmp_path / "b.csv", tmp_path / mode, parties=NAMES[:2], mode=mode, fmt="basket"
        )
        dbs = [read_basket_csv(tmp_path / mode / m["parties"][p]["file"]) for p in NAMES[:2]]
        if mode == "horizontal":
            got = Counter(t for db in dbs for t in db.transactions())
            assert got == Counter(tuple(sorted(b)) for b in baskets)
        else:
            rows = [list(db.transactions()) for db in dbs]
            assert [sorted(rows[0][t] + rows[1][t]) for t in range(4)] == [
                sorted(b) for b in baskets
            ]


def test_partition_cli_writes_settings_data(tmp_path, capsys):
    src = _write_fimi(tmp_path / "p.dat", _baskets(3, 30, 6))
    settings = tmp_path / "bed"
    settings.mkdir()
    for p in NAMES[:2]:
        (settings / f"{p}.toml").write_text(
            f'party = "{p}"\nconsortium = "consortium.toml"\n\n[inputs]\nsecure_sum = 4\n'
        )
    code, out, err = _cli(
        [
            "partition",
            "--json",
            "--input",
            str(src),
            "--parties",
            "2",
            "--mode",
            "vertical",
            "--seed",
            "5",
            "--out",
            str(settings / "data"),
            "--settings-dir",
            str(settings),
        ],
        capsys,
    )
    assert code == 0, err
    manifest = json.loads(out)
    assert manifest["settings_key"] == "transactions"
    for p in NAMES[:2]:
        doc = tomllib.loads((settings / f"{p}.toml").read_text())
        assert doc["data"]["transactions"] == f"data/{p}.dat"
        assert doc["inputs"]["secure_sum"] == 4 and doc["party"] == p
        ctx = PartyContext(p, doc, base_dir=settings)
        assert read_transactions(ctx.data_path("transactions")).n_transactions == 30
    # An absolute path outside the settings folder stays absolute.
    set_party_data(settings / "alice.toml", "other", tmp_path / "p.dat")
    doc = tomllib.loads((settings / "alice.toml").read_text())
    assert doc["data"]["other"] == str((tmp_path / "p.dat").resolve())


# ---------------------------------------------------------------------------------------
# ppdm simulate assoc


@pytest.mark.parametrize(
    ("mode", "parties", "reveal"),
    [("horizontal", 3, False), ("horizontal", 4, True), ("vertical", 2, False)],
)
def test_simulate_assoc_equals_centralized(tmp_path, capsys, mode, parties, reveal):
    baskets = _baskets(7 + parties, 120, 9)
    src = _write_fimi(tmp_path / "pooled.dat", baskets)
    out = tmp_path / "out.json"
    argv = [
        "simulate",
        "assoc",
        "--input",
        str(src),
        "--parties",
        str(parties),
        "--partition",
        mode,
        "--seed",
        "2",
        "--min-support",
        "0.2",
        "--min-confidence",
        "0.6",
        "--output",
        str(out),
    ]
    # exact results, as a centralized run gives: no noise, no minimum aggregation
    argv += ["--protect", "exact", "--min-aggregate", "0"]
    code, stdout, err = _cli(argv + (["--reveal-counts"] if reveal else []), capsys)
    assert code == 0, err
    assert stdout == "" and err.startswith(f"wrote {out}:")
    doc = json.loads(out.read_text())
    assert doc["network"] == "in-process" and doc["ok"]
    assert list(doc["parties"]) == NAMES[:parties]
    pooled = from_transactions(baskets)
    want = frequent_itemsets(pooled, 0.2)
    want_rules = association_rules(want, len(baskets), min_confidence=0.6)
    assert want_rules, "the data should have rules"
    results = [e["result"] for e in doc["parties"].values()]
    for r in results:
        assert r["mode"] == mode and r["n_transactions"] == 120
        found = {frozenset(e["items"]): e["support_count"] for e in r["frequent_itemsets"]}
        if mode == "horizontal" and not reveal:
            assert set(found) == set(want) and set(found.values()) == {None}
        else:
            assert found == want
        assert {(tuple(x["antecedent"]), tuple(x["consequent"])) for x in r["rules"]} == (
            _rule_keys(want_rules)
        )
    assert sum(r["local"]["transactions"] for r in results) == (
        120 if mode == "horizontal" else 120 * parties
    )
    assert all(e["metrics"] and e["totals"]["bytes_sent"] > 0 for e in doc["parties"].values())


def test_simulate_assoc_string_baskets_prints_document(tmp_path, capsys):
    baskets = [["whole milk", "bread"], ["whole milk"], ["bread", "eggs"], ["whole milk"]] * 5
    with open(tmp_path / "b.csv", "w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(baskets)
    code, out, err = _cli(
        [
            "simulate",
            "assoc",
            "--json",
            "--input",
            str(tmp_path / "b.csv"),
            "--parties",
            "2",
            "--min-support",
            "0.4",
            "--min-confidence",
            "0.1",
            "--reveal-counts",
            "--min-aggregate",
            "0",
        ],
        capsys,
    )
    assert code == 0, err
    result = json.loads(out)["parties"]["bob"]["result"]
    got = {frozenset(e["items"]): e["support_count"] for e in result["frequent_itemsets"]}
    assert got == {frozenset({"whole milk"}): 15, frozenset({"bread"}): 10}
    assert result["rules"] == []
    # With the default minimum aggregation (10 baskets without either party's own),
    # itemsets that rest on one party's baskets are not released.
    code, out, err = _cli(
        [
            "simulate",
            "assoc",
            "--json",
            "--input",
            str(tmp_path / "b.csv"),
            "--parties",
            "2",
            "--min-support",
            "0.4",
            "--min-confidence",
            "0.1",
        ],
        capsys,
    )
    assert code == 0, err
    result = json.loads(out)["parties"]["bob"]["result"]
    assert all(len(e["items"]) == 1 for e in result["frequent_itemsets"])
    assert {frozenset(e["items"]) for e in result["frequent_itemsets"]} < {
        frozenset({"whole milk"}),
        frozenset({"bread"}),
    }


# ---------------------------------------------------------------------------------------
# ppdm simulate kmeans


def _sklearn(x: np.ndarray, init: np.ndarray) -> tuple[np.ndarray, int]:
    from sklearn.cluster import KMeans

    km = KMeans(len(init), init=init, n_init=1, algorithm="lloyd", tol=0.0).fit(x)
    return km.cluster_centers_, int(km.n_iter_)


@pytest.mark.parametrize(("mode", "parties"), [("horizontal", 3), ("vertical", 3)])
def test_simulate_kmeans_equals_sklearn(tmp_path, capsys, mode, parties):
    x = _blobs(5, n_per=30, k=3, d=4)
    cols = ["a", "b", "c", "d"]
    pd.DataFrame(x, columns=cols).to_csv(tmp_path / "t.csv", sep=";", index=False)
    out = tmp_path / "k.json"
    code, _, err = _cli(
        [
            "simulate",
            "kmeans",
            "--input",
            str(tmp_path / "t.csv"),
            "--sep",
            ";",
            "--parties",
            str(parties),
            "--partition",
            mode,
            "--k",
            "3",
            "--seed",
            "1",
            "--include-labels",
            # the reference starts from the first k pooled records, with no size floors
            "--init",
            "first-k",
            "--min-cluster-size",
            "0",
            "--min-party-records",
            "0",
            "--output",
            str(out),
        ],
        capsys,
    )
    assert code == 0, err
    res = {p: e["result"] for p, e in json.loads(out.read_text())["parties"].items()}
    if mode == "horizontal":
        ids = np.concatenate([res[p]["record_ids"] for p in NAMES[:parties]])
        pooled = x[ids]  # consortium order: what "first-k" takes the first k of
        centers = np.array(res["alice"]["centers"])
        assert all(res[p]["centers"] == res["alice"]["centers"] for p in res)
    else:
        pooled = x
        centers = np.zeros((3, 4))
        for p in NAMES[:parties]:
            assert res[p]["record_ids"] == list(range(len(x)))
            for j, c in enumerate(res[p]["columns"]):
                centers[:, cols.index(c)] = np.array(res[p]["centers"])[:, j]
    want, n_iter = _sklearn(pooled, pooled[:3])
    assert np.abs(centers - want).max() < 1e-6
    assert res["alice"]["iterations"] == n_iter and res["alice"]["converged"]
    assert res["alice"]["inertia"] == pytest.approx(
        ((pooled - want[np.argmin(((pooled[:, None] - want) ** 2).sum(2), 1)]) ** 2).sum(),
        rel=1e-6,
    )


def test_vertical_kmeans_aligns_rows_on_the_record_id(tmp_path):
    x = _blobs(9, n_per=15)
    pd.DataFrame(x, columns=["a", "b", "c"]).to_csv(tmp_path / "t.csv", index=False)
    m = partition_file(tmp_path / "t.csv", tmp_path / "v", parties=NAMES[:2], mode="vertical")
    base = tmp_path / "v"
    params = {
        "mode": "vertical",
        "k": 3,
        "include_labels": True,
        "init": "first-k",
        "min_cluster_size": 0,
    }

    def contexts():
        return {
            p: PartyContext(p, {"data": {"records": f"{p}.csv"}}, base_dir=base)
            for p in m["parties"]
        }

    before = simulate_job("kmeans", contexts(), params)
    bob = pd.read_csv(base / "bob.csv")
    bob.sample(frac=1.0, random_state=3).to_csv(base / "bob.csv", index=False)  # shuffled
    after = simulate_job("kmeans", contexts(), params)
    for p in NAMES[:2]:
        assert after["parties"][p]["result"]["labels"] == before["parties"][p]["result"]["labels"]
        assert after["parties"][p]["result"]["centers"] == before["parties"][p]["result"]["centers"]
    bob.iloc[1:].to_csv(base / "bob.csv", index=False)  # bob lacks one record
    with pytest.raises(ConfigError, match="other record ids"):
        simulate_job("kmeans", contexts(), params)


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit code 2


@pytest.fixture
def small_files(tmp_path):
    _write_fimi(tmp_path / "p.dat", _baskets(1, 20, 5))
    x = _blobs(2, n_per=5)
    df = pd.DataFrame(x, columns=["a", "b", "c"])
    df["colour"] = ["red", "blue", "green"] * 5
    df.to_csv(tmp_path / "t.csv", index=False)
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "assoc", "--input", "{d}/missing.dat", "--min-support", "0.3"], "not found"),
        (["simulate", "assoc", "--input", "{d}/p.dat", "--min-support", "1.5"], "min_support"),
        (
            ["simulate", "assoc", "--input", "{d}/p.dat", "--min-support", "0.3", "--parties", "1"],
            "at least 2",
        ),
        (
            [
                "simulate",
                "assoc",
                "--input",
                "{d}/p.dat",
                "--min-support",
                "0.3",
                "--min-confidence",
                "-0.1",
            ],
            "min_confidence",
        ),
        (
            [
                "simulate",
                "assoc",
                "--input",
                "{d}/p.dat",
                "--min-support",
                "0.3",
                "--output",
                "{d}/no/such/dir/out.json",
            ],
            "does not exist",
        ),
        (
            [
                "simulate",
                "kmeans",
                "--input",
                "{d}/t.csv",
                "--k",
                "2",
                "--partition",
                "vertical",
                "--init",
                "kmeans++",
            ],
            "k-means++",
        ),
        (["simulate", "kmeans", "--input", "{d}/t.csv", "--k", "2"], "'colour' is not numeric"),
        (
            [
                "simulate",
                "kmeans",
                "--input",
                "{d}/t.csv",
                "--k",
                "99",
                "--columns",
                "a,b",
                "--partition",
                "vertical",
                "--parties",
                "2",
            ],
            "exceeds the number of records",
        ),
        (
            ["simulate", "kmeans", "--input", "{d}/t.csv", "--k", "99", "--columns", "a,b"],
            "exceeds the pooled number of records",
        ),
        (
            ["simulate", "kmeans", "--input", "{d}/t.csv", "--k", "2", "--columns", "a,zz"],
            "'zz'",
        ),
        (
            [
                "partition",
                "--input",
                "{d}/p.xyz",
                "--parties",
                "2",
                "--mode",
                "horizontal",
                "--out",
                "{d}/o",
            ],
            "not found",
        ),
        (
            [
                "partition",
                "--input",
                "{d}/t.csv",
                "--parties",
                "2",
                "--mode",
                "horizontal",
                "--out",
                "{d}/o",
                "--names",
                "a,b,c",
            ],
            "--names lists 3",
        ),
        (
            [
                "partition",
                "--input",
                "{d}/p.dat",
                "--parties",
                "2",
                "--mode",
                "vertical",
                "--out",
                "{d}/o",
                "--settings-dir",
                "{d}",
            ],
            "no settings file",
        ),
        (
            [
                "partition",
                "--input",
                "{d}/p.dat",
                "--parties",
                "50",
                "--mode",
                "vertical",
                "--out",
                "{d}/o",
            ],
            "cannot split",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(small_files, capsys, argv, message):
    argv = [a.replace("{d}", str(small_files)) for a in argv]
    code, _, err = _cli(argv, capsys)
    assert message in _one_line_error(code, err)


def test_unknown_suffix_and_format(small_files, capsys):
    (small_files / "p.xyz").write_text("1 2\n3\n")
    argv = ["partition", "--input", str(small_files / "p.xyz"), "--parties", "2"]
    code, _, err = _cli([*argv, "--mode", "horizontal", "--out", str(small_files / "o")], capsys)
    assert "cannot tell the format" in _one_line_error(code, err)
    code, _, err = _cli(
        [*argv, "--mode", "horizontal", "--out", str(small_files / "o"), "--format", "fimi"],
        capsys,
    )
    assert code == 0, err


def test_job_parameters_are_checked():
    assert get_job("assoc").params({"min_support": 0.2})["min_confidence"] == 0.8
    with pytest.raises(ConfigError, match="no parameter 'support'"):
        get_job("assoc").params({"support": 0.2})
    bad = [
        ("assoc", {"mode": "diagonal"}),
        ("assoc", {"reveal_counts": "yes"}),
        ("assoc", {"max_len": 0}),
        ("assoc", {"method": "magic"}),
        ("assoc", {"label_bytes": 300}),
        ("assoc", {"sep": ""}),
        ("assoc", {"data": ""}),
        ("kmeans", {"k": 0}),
        ("kmeans", {"k": True}),
        ("kmeans", {"tol": -1}),
        ("kmeans", {"init": "random"}),
        ("kmeans", {"init": 3}),
        ("kmeans", {"columns": []}),
        ("kmeans", {"fraction_bits": 60}),
    ]
    for job, params in bad:
        with pytest.raises(ConfigError):
            check_params(job, params)
    assert check_params("kmeans", {"k": 4.0, "mode": "vertical", "init": "random"})["k"] == 4


def test_explicit_initial_centers(tmp_path):
    x = _blobs(4, n_per=12)
    pd.DataFrame(x, columns=["a", "b", "c"]).to_csv(tmp_path / "t.csv", index=False)
    init = x[[0, 13, 30]]
    want, _ = _sklearn(x, init)
    for mode in ("horizontal", "vertical"):
        m = partition_file(tmp_path / "t.csv", tmp_path / mode, parties=NAMES[:2], mode=mode)
        ctx = {
            p: PartyContext(p, {"data": {"records": f"{p}.csv"}}, base_dir=tmp_path / mode)
            for p in m["parties"]
        }
        by_col = {c: init[:, j].tolist() for j, c in enumerate("abc")}
        doc = simulate_job(
            "kmeans", ctx, {"mode": mode, "k": 3, "init": by_col, "min_cluster_size": 0}
        )
        for p in NAMES[:2]:
            r = doc["parties"][p]["result"]
            got = np.array(r["centers"])
            assert np.abs(got - want[:, ["abc".index(c) for c in r["columns"]]]).max() < 1e-6
    doc = simulate_job(
        "kmeans", ctx, {"mode": "vertical", "k": 3, "init": "first-k", "min_cluster_size": 0}
    )
    with pytest.raises(ConfigError, match="initial centers"):
        simulate_job(
            "kmeans", ctx, {"mode": "vertical", "k": 2, "init": by_col, "min_cluster_size": 0}
        )


# ---------------------------------------------------------------------------------------
# Malicious peers


def _malicious(tmp_path, job, params, key, bad_step, bad_value):
    """alice runs ``job``; bob sends ``bad_value`` at ``bad_step`` instead."""
    src = tmp_path / ("t.csv" if key == "records" else "p.dat")
    if key == "records":
        pd.DataFrame(_blobs(1, 5), columns=["a", "b", "c"]).to_csv(src, index=False)
    else:
        _write_fimi(src, _baskets(1, 20, 5))
    partition_file(src, tmp_path / "parts", parties=NAMES[:2], mode=params["mode"])
    ext = src.suffix
    ctx = PartyContext("alice", {"data": {key: f"alice{ext}"}}, base_dir=tmp_path / "parts")

    def party(net, _):
        if net.me == "alice":
            return get_job(job).run(net, get_job(job).params(params), ctx)
        net.broadcast(bad_step, bad_value)
        return None

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, timeout=10)
    assert info.value.party == "bob" and info.value.step == bad_step


@pytest.mark.parametrize(
    ("job", "params", "key", "step", "value"),
    [
        ("assoc", {"mode": "horizontal"}, "transactions", "assoc/schema", "float"),
        ("kmeans", {"mode": "vertical"}, "records", "vkmeans/schema", [1, 2]),
        ("kmeans", {"mode": "horizontal"}, "records", "kmeans/schema", "abc"),
    ],
)
def test_malformed_job_messages_name_the_peer(tmp_path, job, params, key, step, value):
    _malicious(tmp_path, job, params, key, step, value)


def test_malformed_record_digest_names_the_peer(tmp_path):
    pd.DataFrame(_blobs(1, 5), columns=["a", "b", "c"]).to_csv(tmp_path / "t.csv", index=False)
    partition_file(tmp_path / "t.csv", tmp_path / "parts", parties=NAMES[:2], mode="vertical")
    ctx = PartyContext("alice", {"data": {"records": "alice.csv"}}, base_dir=tmp_path / "parts")
    params = get_job("kmeans").params({"mode": "vertical", "k": 2, "min_cluster_size": 0})

    def party(net, _):
        if net.me == "alice":
            return get_job("kmeans").run(net, params, ctx)
        net.broadcast("vkmeans/schema", ["bob-only"])
        net.broadcast("vkmeans/ids", b"short")
        return None

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, timeout=10)
    assert (info.value.party, info.value.step) == ("bob", "vkmeans/ids")


# ---------------------------------------------------------------------------------------
# ppdm demo and ppdm job list


def test_demo_mines_the_shipped_baskets(tmp_path, capsys):
    out = tmp_path / "demo.json"
    code, stdout, err = _cli(["demo", "--top", "3", "--output", str(out)], capsys)
    assert code == 0, err
    text = " ".join(stdout.split())  # rich wraps lines at the console width
    assert (
        "identical to centralized mining of the pooled baskets with pyfim (independent): yes"
        in text
    )
    assert "Top 3 of" in stdout and "What the chains revealed" in stdout
    assert "Cost per protocol phase" in stdout
    doc = json.loads(out.read_text())
    assert doc["protocol"] == "assoc" and list(doc["parties"]) == ["alice", "bob", "carol"]
    assert doc["parties"]["alice"]["result"]["n_transactions"] == 6000
    code, _, err = _cli(["demo", "--min-support", "0"], capsys)
    assert "--min-support" in _one_line_error(code, err)


def test_job_list_names_the_mining_jobs(capsys):
    code, out, _ = _cli(["job", "list"], capsys)
    assert code == 0
    assert any(line.startswith("assoc ") for line in out.splitlines())
    assert any(line.startswith("kmeans ") for line in out.splitlines())


def test_job_results_hold_no_local_statistics_by_default(tmp_path):
    """The initiator sees every party's result: by default it holds only protocol outputs."""
    baskets = _baskets(3, 60, 8)
    paths = {}
    for i, p in enumerate(["alice", "bob"]):
        paths[p] = _write_fimi(tmp_path / f"{p}.dat", baskets[i::2])
    contexts = {
        p: PartyContext(p, {"data": {"transactions": str(path)}}, base_dir=tmp_path)
        for p, path in paths.items()
    }
    doc = simulate_job("assoc", contexts, {"mode": "horizontal", "min_support": 0.3})
    for entry in doc["parties"].values():
        assert "local" not in entry["result"]
    doc = simulate_job(
        "assoc", contexts, {"mode": "horizontal", "min_support": 0.3, "report_local": True}
    )
    assert doc["parties"]["bob"]["result"]["local"]["transactions"] == 30
