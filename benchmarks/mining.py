"""Distributed mining (issue 5): association rules and k-means, local and between parties.

Rows (baselines measured in the same run, on the pooled data):

* local frequent itemsets against pyfim (Borgelt's C miners, the fastest peer; its faster
  of ``fpgrowth`` and ``eclat`` in this run) on every FIMI set we ship -- mushroom, chess,
  retail, BMS-WebView-1 and T10I4D100K -- at two thresholds each (``--quick``: one), each
  library from its own input structure (ppdm's ``TransactionDB``, pyfim's lists), every
  result checked equal to pyfim's. Two ppdm figures per case: ``..._s`` the kernel's
  result (:func:`ppdm.mining.eclat_forest`, arrays, the compiled Eclat when built) and
  ``..._dict_s`` the ``{frozenset: count}`` of :func:`ppdm.mining.frequent_itemsets`
  (one Python frozenset per itemset; pyfim builds tuples in C). A row slower than pyfim
  says why in its goal column;
* rules in bulk (mushroom 30 %, confidence 0.5, ~79K rules): ppdm's
  ``association_rules_df`` on mlxtend's itemset frame against mlxtend's
  ``association_rules`` on the same frame, against the per-itemset ``ap-genrules`` path
  (the previous design, still ppdm's exact fallback) and against pyfim mining and
  generating its rules (single-item consequents only, a subset it is checked against);

* local frequent itemsets, ppdm's Apriori and FP-growth against mlxtend's ``apriori``
  and ``fpgrowth`` on the same data (mushroom at 30%, retail at 1%); mining time only,
  each library from its own input structure (ppdm's ``TransactionDB``, mlxtend's one-hot
  DataFrame, sparse for retail), the build times go to the JSON; goal >= mlxtend's speed;
* horizontal association rules (Kantarcioglu & Clifton), retail split among 3 parties,
  minimum support 1%, the ``assoc`` job on the in-process network and between three
  ``ppdm party serve`` processes over gRPC; baseline: the *fastest* centralized miner on
  the pooled transactions, measured in the same run among pyfim's FP-growth (C), ppdm's
  own local FP-growth and mlxtend's Apriori (all three checked equal); mlxtend is kept
  as a second row (``..._vs_mlxtend``, goal <= 2x). The private mode (no count revealed)
  is the main row; ``reveal_counts`` is reported too;
* vertical association rules (Vaidya & Clifton), mushroom's 119 items split 60/59
  between 2 parties, minimum support 30%, over gRPC; goal <= 60 s;
* vertical association rules, fast paths (issue 14): BMS-WebView-1 at 0.5% between 2
  parties with the default column dot products against the previous path
  (``method="gilboa"``, one correlated OT per candidate and transaction) in the same run,
  in process: seconds and bytes (goals >= 5x faster, >= 10x fewer bytes; the bytes per
  candidate and transaction go to the JSON); and 3 parties (mushroom at 30% and BMS1 at
  0.5%, items in thirds; GMW-style counting for candidates over all three) against the
  same data between 2 parties (goal: within 2x), in process and over gRPC (the ``assoc``
  job). ``--quick``: 15,000 BMS1 rows at 1%, mushroom at 50%;
* horizontal and vertical k-means, 10,000 records (Gaussian blobs, 6 attributes),
  k = 5, 3 parties, ``first-k`` initialization: seconds per iteration (the job's whole
  wall time divided by its iterations, so setup is included), in process and over gRPC;
  baseline: scikit-learn's Lloyd per iteration on the pooled data.

Cost models (issue 25, item 3): beside each in-process distributed run (horizontal and
vertical rules, both k-means), ``..._on_lan_vs_model_s`` and ``..._on_wan_vs_model_s``
price the job on a 1 Gbit/s, 1 ms link and a 100 Mbit/s, 40 ms link: the measured time
plus that link's wire time (the busiest party's bytes over the bandwidth + rounds x RTT,
rounds from the sequential hops the in-process network counts) against the floor, the
slowest party's local mining + the same wire time. The ratio is what the protocol's own
computation (cryptography, encoding) costs above that floor; the JSON has each component
(``..._model_local_s``, ``..._model_busiest_party_bytes``, ``..._model_rounds``,
``..._model_protocol_compute_s``). ``--distributed-only`` skips the local rows.

Every distributed result is checked against the centralized one before it is reported.
``--quick`` runs smaller data (retail 20,000 rows, mushroom at 50%, 2,000 records).

    python benchmarks/mining.py --quick
    python benchmarks/mining.py --json mining.json
"""

from __future__ import annotations

import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Report, Row, parser, timed

from ppdm.jobs.document import simulate_job
from ppdm.jobs.mining import partition_file, set_party_data
from ppdm.jobs.registry import PartyContext
from ppdm.mining import kernel
from ppdm.mining import rules as rules_mod
from ppdm.mining.itemsets import eclat_forest, frequent_itemsets, min_count
from ppdm.mining.readers import from_transactions, read_fimi
from ppdm.mining.rules import association_rules, association_rules_df

PARTIES = ["alice", "bob", "carol"]


# -- data --------------------------------------------------------------------------------


def read_fimi_lines(path: Path, rows: int | None = None, seed: int = 0) -> list[list[int]]:
    """Transactions of a FIMI file (plain Python), or a seeded random sample of them."""
    with open(path) as fh:
        tx = [sorted({int(x) for x in line.split()}) for line in fh]
    if rows is not None and rows < len(tx):
        idx = np.sort(np.random.default_rng(seed).choice(len(tx), rows, replace=False))
        tx = [tx[i] for i in idx]
    return tx


def write_fimi_lines(tx: list[list[int]], path: Path) -> None:
    path.write_text("".join(" ".join(map(str, t)) + "\n" for t in tx))


def onehot(tx: list[list[int]], *, sparse: bool) -> pd.DataFrame:
    from mlxtend.preprocessing import TransactionEncoder

    te = TransactionEncoder().fit(tx)
    if sparse:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return pd.DataFrame.sparse.from_spmatrix(
                te.transform(tx, sparse=True), columns=te.columns_
            )
    return pd.DataFrame(te.transform(tx), columns=te.columns_)


def mlx_counts(fi: pd.DataFrame, n: int) -> dict[frozenset, int]:
    return {
        frozenset(int(x) for x in s): round(v * n)
        for s, v in zip(fi.itemsets, fi.support, strict=True)
    }


def fastest_centralized(tx: list[list[int]], s: float, *, sparse: bool) -> dict[str, Any]:
    """The centralized baselines on the pooled data, each checked against the others:
    pyfim's FP-growth (C), ppdm's own local FP-growth and mlxtend's Apriori. Returns the
    fastest (``seconds``, ``name``), mlxtend's seconds and the itemset counts."""
    import math

    import fim

    threshold = math.ceil(s * len(tx) - 1e-9)
    times: dict[str, float] = {}
    # pyfim leaves out items present in every transaction; one extra empty transaction
    # changes no count and avoids that (as in the tests).
    padded = [*tx, []]
    t, found = timed(lambda: fim.fpgrowth(padded, target="s", supp=-threshold, zmin=1, report="a"))
    times["pyfim fpgrowth (C)"] = t
    want = {frozenset(items): int(count) for items, count in found}
    t, ours = timed(lambda: frequent_itemsets(from_transactions(tx), s, method="fpgrowth"))
    times["ppdm local fpgrowth"] = t
    t, mlx = mlxtend_centralized(tx, s, sparse=sparse)
    times["mlxtend apriori"] = t
    if ours != want or mlx != want:
        raise SystemExit("the centralized miners disagree (pyfim, ppdm, mlxtend)")
    name = min(times, key=lambda k: times[k])
    return {"seconds": times[name], "name": name, "mlxtend": times["mlxtend apriori"], "want": want}


def mlxtend_centralized(tx: list[list[int]], s: float, *, sparse: bool) -> tuple[float, dict]:
    """Seconds of centralized mlxtend (encode + Apriori) and its itemset counts."""
    from mlxtend.frequent_patterns import apriori

    def run() -> pd.DataFrame:
        return apriori(onehot(tx, sparse=sparse), min_support=s, use_colnames=True)

    seconds, fi = timed(run)
    return seconds, mlx_counts(fi, len(tx))


def blobs_csv(n: int, path: Path) -> np.ndarray:
    from sklearn.datasets import make_blobs

    x, _ = make_blobs(n_samples=n, n_features=6, centers=5, cluster_std=3.0, random_state=5)
    pd.DataFrame(x, columns=[f"a{i}" for i in range(6)]).to_csv(path, index=False)
    return x


# -- checks ------------------------------------------------------------------------------


def check_assoc(doc: dict, want: dict[frozenset, int], conf: float, *, counts: bool) -> None:
    """Every party's itemsets equal the centralized ones; rules equal ppdm's reference
    rules over the centralized counts."""
    if not doc["ok"]:
        raise SystemExit(f"assoc job failed: {doc['error']}")
    n = next(iter(doc["parties"].values()))["result"]["n_transactions"]
    want_rules = {
        (r.antecedent, r.consequent) for r in association_rules(want, n, min_confidence=conf)
    }
    for party, entry in doc["parties"].items():
        res = entry["result"]
        got = {frozenset(i["items"]): i["support_count"] for i in res["frequent_itemsets"]}
        if set(got) != set(want) or (counts and got != want):
            raise SystemExit(f"assoc at {party}: itemsets differ from mlxtend's")
        rules = {(frozenset(r["antecedent"]), frozenset(r["consequent"])) for r in res["rules"]}
        if rules != want_rules:
            raise SystemExit(f"assoc at {party}: rules differ from the reference")


def pooled_records(out: Path, manifest: dict, mode: str) -> np.ndarray:
    """The pooled table as the job sees it: horizontal parties' rows in consortium order,
    vertical parties' columns side by side (rows sorted by id)."""
    frames = []
    for p in PARTIES:
        df = pd.read_csv(out / manifest["parties"][p]["file"])
        frames.append(df.sort_values("record_id").drop(columns="record_id"))
    if mode == "horizontal":
        return pd.concat(frames).to_numpy(dtype=np.float64)
    return pd.concat([f.reset_index(drop=True) for f in frames], axis=1).to_numpy(np.float64)


def check_kmeans(doc: dict, pooled: np.ndarray, k: int) -> tuple[int, float]:
    """Centers equal scikit-learn's Lloyd from the same initial centers within 1e-6;
    returns the iterations and sklearn's seconds per iteration."""
    from sklearn.cluster import KMeans

    if not doc["ok"]:
        raise SystemExit(f"kmeans job failed: {doc['error']}")
    results = [e["result"] for e in doc["parties"].values()]
    iters = results[0]["iterations"]
    km = KMeans(k, init=pooled[:k], n_init=1, algorithm="lloyd", max_iter=iters, tol=0.0)
    seconds, km = timed(lambda: km.fit(pooled), repeat=3)
    if results[0]["mode"] == "horizontal":
        centers = np.array(results[0]["centers"])
    else:
        centers = np.concatenate([np.array(r["centers"]) for r in results], axis=1)
    if km.n_iter_ != iters or not np.allclose(centers, km.cluster_centers_, rtol=0, atol=1e-6):
        raise SystemExit("k-means centers differ from scikit-learn's")
    return iters, seconds / km.n_iter_


# -- rows ----------------------------------------------------------------------------------


def local_rows(report: Report, fimi: Path, quick: bool) -> None:
    """ppdm's local miners against mlxtend's on the same data."""
    from mlxtend.frequent_patterns import apriori, fpgrowth

    cases = [
        ("mushroom", None, 0.4 if quick else 0.3, False),
        ("retail", 20000 if quick else None, 0.01, True),
    ]
    for name, rows, s, sparse in cases:
        tx = read_fimi_lines(fimi / f"{name}.dat", rows)
        build_ppdm, db = timed(lambda tx=tx: from_transactions(tx))
        build_mlx, df = timed(lambda tx=tx, sparse=sparse: onehot(tx, sparse=sparse))
        report.extra[f"build_{name}_ppdm_s"] = build_ppdm
        report.extra[f"build_{name}_mlxtend_s"] = build_mlx
        pct = f"{round(100 * s)}pct"
        for method, mlx_fn in (("apriori", apriori), ("fpgrowth", fpgrowth)):
            ours_s, ours = timed(lambda db=db, m=method, s=s: frequent_itemsets(db, s, method=m))
            theirs_s, fi = timed(
                lambda df=df, f=mlx_fn, s=s: f(df, min_support=s, use_colnames=True)
            )
            if ours != mlx_counts(fi, len(tx)):
                raise SystemExit(f"local {method} on {name} differs from mlxtend")
            report.add(
                Row(
                    f"local_{method}_{name}_{pct}_s",
                    ours_s,
                    "s",
                    theirs_s,
                    f"mlxtend {method}",
                    ">= mlxtend speed",
                    higher_is_better=False,
                )
            )


# (name, rows or None for all, thresholds); --quick keeps the first threshold.
PYFIM_CASES = [
    ("mushroom", None, (0.3, 0.1)),
    ("chess", None, (0.8, 0.6)),
    ("retail", None, (0.01, 0.001)),
    ("BMS1", None, (0.005, 0.001)),
    ("T10I4D100K", None, (0.01, 0.001)),
]


def _pyfim_best(tx: list[list[int]], minc: int, repeat: int) -> tuple[float, str, dict]:
    """pyfim's faster of FP-growth and Eclat (best of ``repeat``) and its result. One
    empty transaction is added: pyfim leaves out items present in every transaction
    otherwise; it changes no count."""
    import fim

    data = [*tx, []]
    best, name, result = float("inf"), "", None
    for fn in (fim.fpgrowth, fim.eclat):
        t, res = timed(
            lambda fn=fn: fn(data, target="s", supp=-minc, zmin=1, report="a"), repeat=repeat
        )
        if t < best:
            best, name, result = t, f"pyfim {fn.__name__}", res
    return best, name, {frozenset(s): int(c) for s, c in result}


def pyfim_rows(report: Report, fimi: Path, quick: bool) -> None:
    """Local mining against pyfim on every FIMI set, exact."""
    repeat = 2 if quick else 3
    report.extra["kernel_compiled"] = kernel.COMPILED
    for name, rows, thresholds in PYFIM_CASES:
        build, db = timed(lambda name=name: read_fimi(fimi / f"{name}.dat"))
        if rows is not None:
            db = db.subset(np.arange(rows))
        tx = [list(t) for t in db.transactions()]
        report.extra[f"read_{name}_ppdm_s"] = build
        for s in thresholds[:1] if quick else thresholds:
            pct = f"{100 * s:g}pct".replace(".", "_")
            minc = min_count(s, db.n_transactions)
            theirs_s, theirs_name, want = _pyfim_best(tx, minc, repeat)
            ours_s, forest = timed(lambda db=db, s=s: eclat_forest(db, s), repeat=repeat)
            dict_s, found = timed(lambda db=db, s=s: frequent_itemsets(db, s), repeat=repeat)
            if forest.to_dict() != want or found != want:
                raise SystemExit(f"local mining on {name} at {s} differs from pyfim")
            report.extra[f"pyfim_{name}_{pct}_itemsets"] = len(want)
            why = (
                ""
                if ours_s <= theirs_s
                else (
                    " NOT MET: "
                    + (
                        "numpy fallback (extension not built)"
                        if not kernel.COMPILED
                        else "bitset Eclat without diffsets; see docs/mining.md"
                    )
                )
            )
            report.add(
                Row(
                    f"pyfim_{name}_{pct}_s",
                    ours_s,
                    "s",
                    theirs_s,
                    theirs_name,
                    ">= pyfim speed (arrays)" + why,
                    higher_is_better=False,
                )
            )
            why = (
                ""
                if dict_s <= theirs_s
                else (f" NOT MET: {len(want):,} frozensets built in Python")
            )
            report.add(
                Row(
                    f"pyfim_{name}_{pct}_dict_s",
                    dict_s,
                    "s",
                    theirs_s,
                    theirs_name,
                    ">= pyfim speed (dict)" + why,
                    higher_is_better=False,
                )
            )


def rules_rows(report: Report, fimi: Path, quick: bool) -> None:
    """Rules in bulk on mushroom: ppdm against mlxtend, the per-itemset path and pyfim."""
    import fim
    from mlxtend.frequent_patterns import association_rules as mlx_rules
    from mlxtend.frequent_patterns import fpgrowth as mlx_fpgrowth

    s, conf = (0.4, 0.5) if quick else (0.3, 0.5)
    pct = f"{round(100 * s)}pct"
    tx = read_fimi_lines(fimi / "mushroom.dat")
    n = len(tx)
    db = from_transactions(tx)
    fi = mlx_fpgrowth(onehot(tx, sparse=False), min_support=s, use_colnames=True)
    counts = frequent_itemsets(db, s)
    repeat = 2 if quick else 3
    ours_s, ours = timed(
        lambda: association_rules_df(fi, n, metric="confidence", min_threshold=conf),
        repeat=repeat,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mlx_s, want = timed(
            lambda: mlx_rules(fi, num_itemsets=n, metric="confidence", min_threshold=conf),
            repeat=repeat,
        )
    key = set(zip(ours["antecedents"], ours["consequents"], strict=True))
    if key != set(zip(want["antecedents"], want["consequents"], strict=True)):
        raise SystemExit("bulk rules differ from mlxtend's association_rules")
    list_s, rule_list = timed(
        lambda: association_rules(counts, n, min_confidence=conf), repeat=repeat
    )

    def previous_list() -> list:
        # the previous design: ap-genrules one itemset at a time in Python, Rule objects
        return rules_mod._rule_table_slow(rules_mod.ItemsetTable.from_mapping(counts), conf)

    slow_s, slow = timed(lambda: previous_list().to_rules(n))
    # ... and its frame: one row of measures per Rule, then one DataFrame of the rows
    slow_df_s, slow_df = timed(lambda: rules_mod.rules_to_frame(previous_list().to_rules(n)))
    bulk_df_s, bulk_df = timed(
        lambda: association_rules_df(counts, n, min_confidence=conf), repeat=repeat
    )
    if slow != rule_list or {r.key for r in rule_list} != key or len(slow_df) != len(bulk_df):
        raise SystemExit("bulk rules differ from the per-itemset path")

    minc = min_count(s, n)
    fim_s, fim_rules = timed(
        lambda: fim.fpgrowth(
            # mode "o": the rule's support is that of body and head (as ppdm and mlxtend)
            [*tx, []],
            target="r",
            supp=-minc,
            conf=100 * conf,
            zmin=2,
            report="a",
            mode="o",
        ),
        repeat=repeat,
    )
    single = {(a, c) for a, c in key if len(c) == 1}
    if {(frozenset(b), frozenset([h])) for h, b, _ in fim_rules} != single:
        raise SystemExit("single-consequent rules differ from pyfim's")
    report.extra[f"rules_mushroom_{pct}_count"] = len(key)
    report.extra[f"rules_mushroom_{pct}_pyfim_count"] = len(fim_rules)
    report.add(
        Row(
            f"rules_df_mushroom_{pct}_s",
            ours_s,
            "s",
            mlx_s,
            "mlxtend association_rules",
            ">= mlxtend speed",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            f"rules_df_counts_mushroom_{pct}_s",
            bulk_df_s,
            "s",
            slow_df_s,
            "per-itemset ap-genrules + per-rule rows (previous)",
            ">= 10x faster",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            f"rules_list_mushroom_{pct}_s",
            list_s,
            "s",
            slow_s,
            "per-itemset ap-genrules (previous)",
            "report (Rule objects built one by one)",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            f"rules_df_mushroom_{pct}_vs_pyfim_s",
            ours_s,
            "s",
            fim_s,
            f"pyfim mining+rules ({len(fim_rules):,} 1-item heads)",
            "report (pyfim makes 1-item heads only; ppdm time excludes mining)",
            higher_is_better=False,
        )
    )


def assoc_rows(report: Report, fimi: Path, tmp: Path, quick: bool, bed: Any) -> None:
    # Horizontal: retail among 3 parties.
    retail = read_fimi_lines(tmp / "retail.dat")  # the pooled file make_partitions wrote
    base = fastest_centralized(retail, 0.01, sparse=True)
    base_s, base_name, want = base["seconds"], f"{base['name']}, centralized", base["want"]
    report.extra["retail_centralized_mlxtend_s"] = base["mlxtend"]
    report.extra["retail_rows"] = len(retail)
    report.extra["retail_frequent_itemsets"] = len(want)
    h = {"mode": "horizontal", "min_support": 0.01, "min_confidence": 0.5, "data": "retail_h"}
    for reveal in (False, True):
        params = {**h, "reveal_counts": reveal}
        tag = "hassoc_retail_3p" + ("_counts" if reveal else "")
        doc = _in_process("assoc", tmp / "retail_h", params)
        check_assoc(doc, want, 0.5, counts=reveal)
        if not reveal:
            model_rows(report, tag, doc["wall_time_s"], doc, local_mining_s(tmp / "retail_h", 0.01))
        report.add(
            Row(
                f"{tag}_local_s",
                doc["wall_time_s"],
                "s",
                base_s,
                base_name,
                "(3 parties in one process)",
                higher_is_better=False,
            )
        )
        if bed is not None:
            wall, doc = timed(lambda p=params: bed.run_job("assoc", p, timeout=300))
            check_assoc(doc, want, 0.5, counts=reveal)
            report.add(
                Row(
                    f"{tag}_grpc_s",
                    wall,
                    "s",
                    base_s,
                    base_name,
                    "(3 processes, loopback gRPC + mTLS)",
                    higher_is_better=False,
                )
            )
            report.add(
                Row(
                    f"{tag}_grpc_s_vs_mlxtend",
                    wall,
                    "s",
                    base["mlxtend"],
                    "mlxtend apriori, centralized (second column)",
                    "<= 2x mlxtend" if not reveal else "",
                    higher_is_better=False,
                )
            )
            report.extra[f"{tag}_grpc_bytes"] = _bytes(doc)
    # Vertical: mushroom's items split between 2 parties.
    s = 0.5 if quick else 0.3
    mushroom = read_fimi_lines(fimi / "mushroom.dat")
    base = fastest_centralized(mushroom, s, sparse=False)
    base_s, base_name, want = base["seconds"], f"{base['name']}, centralized", base["want"]
    report.extra[f"mushroom_{round(100 * s)}pct_centralized_mlxtend_s"] = base["mlxtend"]
    # exact counts: the job's default (protect = "dp") adds each owner's noise to them
    v = {
        "mode": "vertical",
        "min_support": s,
        "min_confidence": 0.9,
        "data": "mushroom_v",
        "protect": "exact",
    }
    pct = f"{round(100 * s)}pct"
    doc = _in_process("assoc", tmp / "mushroom_v", v, parties=PARTIES[:2])
    check_assoc(doc, want, 0.9, counts=True)
    # a vertical party has no local mining: its local work is reading its columns
    model_rows(report, f"vassoc_mushroom_2p_{round(100 * s)}pct", doc["wall_time_s"], doc, 0.0)
    report.extra[f"vassoc_mushroom_2p_{pct}_local_bytes"] = _bytes(doc)
    report.extra["mushroom_frequent_itemsets"] = len(want)
    report.add(
        Row(
            f"vassoc_mushroom_2p_{pct}_local_s",
            doc["wall_time_s"],
            "s",
            base_s,
            base_name,
            "<= 100x (issue 25, at 30 %)",
            higher_is_better=False,
        )
    )
    if bed is not None:
        wall, doc = timed(lambda: bed.run_job("assoc", v, parties=PARTIES[:2], timeout=300))
        check_assoc(doc, want, 0.9, counts=True)
        report.add(
            Row(
                f"vassoc_mushroom_2p_{pct}_grpc_s",
                wall,
                "s",
                base_s,
                base_name,
                "<= 60 s",
                higher_is_better=False,
            )
        )
        report.extra[f"vassoc_mushroom_2p_{pct}_grpc_bytes"] = _bytes(doc)


def _vertical_sim(
    src: Path, tmp: Path, parties: list[str], s: float, conf: float = 0.5, **kw: Any
) -> tuple[float, int, Any]:
    """Vertical association rules in process (items split at random among ``parties``
    with ``ppdm partition``'s split), timed: seconds, bytes sent by all, the result."""
    from ppdm.jobs.mining import read_transactions
    from ppdm.mining.vertical_rules import vertical_association_rules
    from ppdm.parties.local import simulate

    out = tmp / f"{src.stem}_v{len(parties)}"
    manifest = partition_file(src, out, parties=parties, mode="vertical", seed=1)
    dbs = {p: read_transactions(out / manifest["parties"][p]["file"]) for p in parties}

    def run() -> Any:
        return simulate(
            lambda net, db: vertical_association_rules(
                net, db, min_support=s, min_confidence=conf, **kw
            ),
            dbs,
            timeout=900,
        )

    seconds, sim = timed(run)
    return seconds, sum(t["bytes_sent"] for t in sim.totals.values()), sim.results


def _check_vertical(results: dict, want: dict[frozenset, int], what: str) -> Any:
    for party, res in results.items():
        if res.itemsets != want:
            raise SystemExit(f"{what} at {party}: itemsets or counts differ from the oracle")
    return next(iter(results.values()))


def vertical_fast_rows(report: Report, fimi: Path, tmp: Path, quick: bool) -> dict[str, Any]:
    """Issue 14: vertical association rules, the default paths (column dot products with
    packed corrections; GMW-style AND-and-count over three parties) against the previous
    two-party path (``method="gilboa"``: one correlated OT with a 64-bit correction per
    candidate and transaction), in process, in the same run. Counts checked against the
    centralized miners (pyfim, ppdm's local FP-growth and mlxtend, which must agree).
    Returns each data set's minimum support and oracle counts for the gRPC rows."""
    bms_s = 0.01 if quick else 0.005
    bms = read_fimi_lines(tmp / "bms1.dat")  # make_partitions wrote it (a sample if quick)
    want = fastest_centralized(bms, bms_s, sparse=False)["want"]
    pct = f"{100 * bms_s:g}pct".replace(".", "_")
    tag = f"vassoc_bms1_2p_{pct}"
    report.extra[f"{tag}_rows"] = len(bms)
    report.extra[f"{tag}_frequent_itemsets"] = len(want)
    old_s, old_b, old = _vertical_sim(
        tmp / "bms1.dat", tmp, PARTIES[:2], bms_s, method="gilboa", multiparty="intersection"
    )
    _check_vertical(old, want, "vertical gilboa")
    new_s, new_b, new = _vertical_sim(tmp / "bms1.dat", tmp, PARTIES[:2], bms_s)
    first = _check_vertical(new, want, "vertical ot")
    cands = sum(lv["shared_candidates"] for lv in first.levels)
    report.extra[f"{tag}_shared_candidates"] = cands
    for name, b in (("gilboa", old_b), ("ot", new_b)):
        report.extra[f"{tag}_{name}_bytes_per_candidate_transaction"] = b / (cands * len(bms))
    report.add(
        Row(
            f"{tag}_local_s",
            new_s,
            "s",
            old_s,
            "same job, method=gilboa (before)",
            ">= 5x faster",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            f"{tag}_local_bytes",
            new_b,
            "B",
            old_b,
            "same job, method=gilboa (before)",
            ">= 10x fewer",
            higher_is_better=False,
        )
    )
    # Three parties against two on the same data (each of the two in the same run).
    mush_s = 0.5 if quick else 0.3
    mush = read_fimi_lines(fimi / "mushroom.dat")
    cases = [
        (
            "mushroom",
            fimi / "mushroom.dat",
            mush_s,
            fastest_centralized(mush, mush_s, sparse=False),
        ),
        ("bms1", tmp / "bms1.dat", bms_s, {"want": want}),
    ]
    for name, src, s, base in cases:
        conf = 0.9 if name == "mushroom" else 0.5  # mushroom: as the row above
        two_s = new_s if name == "bms1" else None
        if two_s is None:
            two_s, _, res = _vertical_sim(src, tmp, PARTIES[:2], s, conf)
            _check_vertical(res, base["want"], f"vertical {name} 2 parties")
        three_s, three_b, res = _vertical_sim(src, tmp, PARTIES, s, conf)
        first = _check_vertical(res, base["want"], f"vertical {name} 3 parties")
        spans = sum(lv["groups"].get("+".join(PARTIES), 0) for lv in first.levels)
        key = f"vassoc_{name}_3p_{100 * s:g}pct".replace(".", "_")
        report.extra[f"{key}_three_party_candidates"] = spans
        report.extra[f"{key}_bytes"] = three_b
        report.add(
            Row(
                f"{key}_local_s",
                three_s,
                "s",
                two_s,
                "the same data split between 2 parties",
                "ratio >= 0.5 (within 2x)",
                higher_is_better=False,
            )
        )
    return {
        name: (s, base["want"], 0.9 if name == "mushroom" else 0.5) for name, _, s, base in cases
    }


def vertical_fast_grpc_rows(report: Report, wants: dict[str, Any], bed: Any) -> None:
    """Issue 14 over gRPC (``ppdm party serve`` processes, loopback, mTLS): the ``assoc``
    job (default paths) on the same data between 2 and among 3 parties."""
    for name, (s, want, conf) in wants.items():
        v = {"mode": "vertical", "min_support": s, "min_confidence": conf, "protect": "exact"}
        two_s, doc = timed(
            lambda v=v, n=name: bed.run_job(
                "assoc", {**v, "data": f"{n}_v2"}, parties=PARTIES[:2], timeout=900
            )
        )
        check_assoc(doc, want, conf, counts=True)
        three_s, doc3 = timed(
            lambda v=v, n=name: bed.run_job("assoc", {**v, "data": f"{n}_v3"}, timeout=900)
        )
        check_assoc(doc3, want, conf, counts=True)
        pct = f"{100 * s:g}pct".replace(".", "_")
        report.extra[f"vassoc_{name}_2p_{pct}_grpc_s"] = two_s
        report.extra[f"vassoc_{name}_2p_{pct}_grpc_bytes"] = _bytes(doc)
        report.extra[f"vassoc_{name}_3p_{pct}_grpc_bytes"] = _bytes(doc3)
        report.add(
            Row(
                f"vassoc_{name}_3p_{pct}_grpc_s",
                three_s,
                "s",
                two_s,
                "the same data between 2 parties, gRPC",
                "ratio >= 0.5 (within 2x)",
                higher_is_better=False,
            )
        )


def kmeans_rows(report: Report, tmp: Path, n: int, bed: Any) -> None:
    for mode in ("horizontal", "vertical"):
        key = f"blobs_{mode[0]}"
        out = tmp / key
        manifest = _manifest(out)
        pooled = pooled_records(out, manifest, mode)
        params = {"mode": mode, "k": 5, "init": "first-k", "data": key}
        tag = f"{mode[0]}kmeans_{n}_k5_3p"
        doc = _in_process("kmeans", out, params)
        iters, sk = check_kmeans(doc, pooled, 5)
        model_rows(report, tag, doc["wall_time_s"], doc, 0.0)  # local sums: microseconds
        report.add(
            Row(
                f"{tag}_local_s_per_iter",
                doc["wall_time_s"] / iters,
                "s/iter",
                sk,
                "sklearn Lloyd",
                "report",
                higher_is_better=False,
            )
        )
        report.extra[f"{tag}_iterations"] = iters
        if bed is not None:
            wall, doc = timed(lambda p=params: bed.run_job("kmeans", p, timeout=300))
            iters, sk = check_kmeans(doc, pooled, 5)
            report.add(
                Row(
                    f"{tag}_grpc_s_per_iter",
                    wall / iters,
                    "s/iter",
                    sk,
                    "sklearn Lloyd",
                    "report",
                    higher_is_better=False,
                )
            )
            report.extra[f"{tag}_grpc_bytes_per_iter"] = _bytes(doc) / iters


# -- cost models (issue 25, item 3) ------------------------------------------------------

#: The links a cost model is priced on: (name, bandwidth in bit/s, round-trip time in s).
LINKS = (("lan", 1e9, 0.001), ("wan", 1e8, 0.040))


def critical_party(doc: dict) -> tuple[int, int]:
    """The busiest party's bytes on its link (sent + received) and the job's sequential
    hops (the in-process network stamps every message: ``ppdm.parties.metrics``)."""
    busiest = max(
        e["totals"]["bytes_sent"] + e["totals"]["bytes_received"] for e in doc["parties"].values()
    )
    hops = max(e["totals"].get("sequential_hops", 0) for e in doc["parties"].values())
    return busiest, hops


def local_mining_s(out: Path, s: float) -> float:
    """The slowest party's local frequent-itemset mining on its own partition (the
    parties mine in parallel, so the slowest one is on the critical path)."""
    manifest = _manifest(out)
    worst = 0.0
    for entry in manifest["parties"].values():
        db = read_fimi(out / entry["file"])
        worst = max(worst, timed(lambda db=db: eclat_forest(db, s))[0])
    return worst


def model_rows(report: Report, tag: str, measured_s: float, doc: dict, local_s: float) -> None:
    """The floor a job's time could reach on each link of :data:`LINKS`: the slowest
    party's local work + the busiest party's bytes over the bandwidth + round trips (hops
    / 2) x RTT, beside the job measured in process (loopback: no wire time). What the
    measured time has above ``local_s`` on loopback is the protocol's own computation
    (cryptography, encoding): the part a protocol change can cut."""
    nbytes, hops = critical_party(doc)
    report.extra[f"{tag}_model_local_s"] = local_s
    report.extra[f"{tag}_model_busiest_party_bytes"] = nbytes
    report.extra[f"{tag}_model_rounds"] = hops / 2
    report.extra[f"{tag}_model_protocol_compute_s"] = max(measured_s - local_s, 0.0)
    for link, bps, rtt in LINKS:
        wire = 8 * nbytes / bps + hops / 2 * rtt
        model = local_s + wire
        report.extra[f"{tag}_model_{link}_wire_s"] = wire
        report.add(
            Row(
                f"{tag}_on_{link}_vs_model_s",
                measured_s + wire,
                "s",
                model,
                f"model: local {local_s:.2f} s + {nbytes / 1e6:.1f} MB at {bps / 1e6:.0f} "
                f"Mbit/s + {hops / 2:.0f} rounds x {rtt * 1e3:.0f} ms",
                "report (measured in process + the same wire time)",
                higher_is_better=False,
            )
        )


# -- plumbing ------------------------------------------------------------------------------


def _manifest(out: Path) -> dict:
    import json

    return json.loads((out / "partition.json").read_text())


def _in_process(job: str, out: Path, params: dict, parties: list[str] | None = None) -> dict:
    """The job on the in-process network, each party reading its partition file."""
    manifest = _manifest(out)
    key = params["data"]
    contexts = {
        p: PartyContext(p, {"data": {key: manifest["parties"][p]["file"]}}, base_dir=out)
        for p in (parties or list(manifest["parties"]))
    }
    return simulate_job(job, contexts, params, timeout=300)


def _bytes(doc: dict) -> int:
    return sum(e["totals"]["bytes_sent"] for e in doc["parties"].values())


def make_partitions(tmp: Path, fimi: Path, quick: bool, n_records: int) -> dict[str, Path]:
    """Pooled files and their party partitions (before the nodes start)."""
    retail = read_fimi_lines(fimi / "retail.dat", 20000 if quick else None)
    write_fimi_lines(retail, tmp / "retail.dat")
    blobs_csv(n_records, tmp / "blobs.csv")
    write_fimi_lines(read_fimi_lines(fimi / "BMS1.dat", 15000 if quick else None), tmp / "bms1.dat")
    mushroom = str(fimi / "mushroom.dat")
    specs = {
        "retail_h": ("retail.dat", "horizontal", PARTIES),
        "mushroom_v": (str(fimi / "mushroom.dat"), "vertical", PARTIES[:2]),
        "blobs_h": ("blobs.csv", "horizontal", PARTIES),
        "blobs_v": ("blobs.csv", "vertical", PARTIES),
        "mushroom_v2": (mushroom, "vertical", PARTIES[:2]),
        "mushroom_v3": (mushroom, "vertical", PARTIES),
        "bms1_v2": ("bms1.dat", "vertical", PARTIES[:2]),
        "bms1_v3": ("bms1.dat", "vertical", PARTIES),
    }
    outs = {}
    for key, (source, mode, names) in specs.items():
        src = Path(source) if Path(source).is_absolute() else tmp / source
        partition_file(src, tmp / key, parties=names, mode=mode, seed=1)
        outs[key] = tmp / key
    return outs


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--no-grpc", action="store_true", help="skip the rows over gRPC")
    p.add_argument(
        "--local-only",
        action="store_true",
        help="only the local rows (pyfim, mlxtend and rules), not the distributed ones",
    )
    p.add_argument(
        "--distributed-only",
        action="store_true",
        help="only the distributed rows (with their cost models), not the local ones",
    )
    args = p.parse_args()
    quick = args.quick
    fimi = Path(args.shared) / "data" / "fimi"
    n_records = 2000 if quick else 10_000
    report = Report("Distributed mining (ppdm.mining): association rules and k-means")
    t0 = time.perf_counter()
    if not args.distributed_only:
        pyfim_rows(report, fimi, quick)
        rules_rows(report, fimi, quick)
        local_rows(report, fimi, quick)
    if args.local_only:
        report.extra["benchmark_wall_s"] = time.perf_counter() - t0
        report.finish(args.json)
        return
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        outs = make_partitions(tmp, fimi, quick, n_records)
        wants = vertical_fast_rows(report, fimi, tmp, quick)
        if args.no_grpc:
            assoc_rows(report, fimi, tmp, quick, None)
            kmeans_rows(report, tmp, n_records, None)
        else:
            from ppdm.service.policy import OPEN_POLICY_TOML
            from ppdm.testbed.consortia import GrpcTestbed

            # Benchmark data, not private data: the open policy lets the two-party
            # vertical rows and reveal_counts run (a real owner opts in per job).
            bed = GrpcTestbed(
                PARTIES,
                tmp / "bed",
                timeout=300,
                max_message_bytes=64 << 20,
                log_level="WARNING",
                policy=OPEN_POLICY_TOML,
            )
            for key, out in outs.items():
                manifest = _manifest(out)
                for party, info in manifest["parties"].items():
                    set_party_data(bed.settings_path(party), key, out / info["file"])
            with bed:
                bed.run_job("secure-sum")  # warm up the connections
                assoc_rows(report, fimi, tmp, quick, bed)
                vertical_fast_grpc_rows(report, wants, bed)
                kmeans_rows(report, tmp, n_records, bed)
    report.extra["benchmark_wall_s"] = time.perf_counter() - t0
    report.finish(args.json)


if __name__ == "__main__":
    main()
