"""A party's local counting over a large Parquet dataset (issue 17).

One party (alice) holds T10I4D100K repeated with shifted transaction ids as a Parquet
dataset of 1M and 10M transactions (``--quick``: 100k and 1M), written once into a cache
folder under /tmp and reused; bob and carol hold 5,000 baskets each in FIMI files. The
three run horizontal association rules at 1 % support (``reveal_counts``, so that the
result can be checked count by count). Each run is its own process, so that its peak
memory (``ru_maxrss``; the process holds all three parties, an upper bound for alice's
node) is measured cleanly.

Printed: alice's local counting time (opening the source, the first scan, and the count
of every level's candidates) with the streamed engine (DuckDB scan, chunks of whole
transactions) at both sizes, the in-memory path (the whole table as a
``TransactionDB``) at the small size as the baseline, the growth factor of the counting
time per transaction from the small to the large size (goal: at most linear, <= 1), and
the peak memory at the large size (goal < 2 GiB).

Checks: the streamed result equals the in-memory result at the small size, and every
result equals the centralized one: the frequent itemsets of the pooled data with their
exact counts, computed level by level as ``repeats * count_T10I4(X) + count_bob(X) +
count_carol(X)`` (the pooled data is that multiset).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks._common import Report, Row, parser

CACHE = Path("/tmp/ppdm-bench-sources")
SUPPORT = 0.01
BASE = 100_000  # transactions of T10I4D100K
SMALL = 5_000  # baskets of bob and carol each


def build_dataset(fimi: Path, n: int) -> Path:
    """T10I4D100K repeated ``n / 100,000`` times with shifted ids, as a Parquet dataset
    (one file per 1M transactions, sorted by id); written once, then reused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ppdm.mining.readers import read_fimi

    out = CACHE / f"t10i4-{n}"
    done = out / "_COMPLETE"
    if done.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    db = read_fimi(fimi)
    tids = db.row_ids()
    items = db.items[db.indices].astype(np.int32)
    reps = n // BASE
    per_file = max(1, min(reps, 10))
    for first in range(0, reps, per_file):
        count = min(per_file, reps - first)
        t = np.concatenate([tids + (first + r) * BASE for r in range(count)])
        i = np.tile(items, count)
        pq.write_table(
            pa.table({"tid": t, "item": i}),
            out / f"part-{first // per_file:04d}.parquet",
            row_group_size=1 << 20,
        )
    done.write_text("ok\n")
    return out


def small_files(fimi: Path) -> dict[str, Path]:
    lines = fimi.read_text().splitlines()
    out = {}
    for k, party in enumerate(("bob", "carol")):
        path = CACHE / f"{party}.dat"
        if not path.exists():
            path.write_text("\n".join(lines[k * SMALL : (k + 1) * SMALL]) + "\n")
        out[party] = path
    return out


# ---------------------------------------------------------------------------------------
# One run (a child process)


class _Timed:
    """A local counter that adds the time of its counts to ``seconds``."""

    def __init__(self, inner: Any, seconds: list[float]) -> None:
        self.inner = inner
        self.seconds = seconds
        self.n_transactions = inner.n_transactions
        self.items = inner.items
        self.n_items = len(inner.items)

    def count(self, candidates: Any) -> np.ndarray:
        t0 = time.perf_counter()
        out = self.inner.count(candidates)
        self.seconds[0] += time.perf_counter() - t0
        return out


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    import resource

    from ppdm.jobs.document import simulate_job
    from ppdm.jobs.registry import PartyContext
    from ppdm.mining.horizontal_rules import TransactionCounter
    from ppdm.mining.itemsets import TransactionDB
    from ppdm.sources.base import DataSource

    big = Path(spec["dataset"])
    seconds = [0.0]
    original = DataSource.local_counter

    def timed_counter(self: DataSource) -> Any:
        if self.spec.path != big:
            return original(self)
        t0 = time.perf_counter()
        got = original(self)
        seconds[0] += time.perf_counter() - t0
        if isinstance(got, TransactionDB):
            got = TransactionCounter(got)
        return _Timed(got, seconds)

    DataSource.local_counter = timed_counter  # type: ignore[method-assign]
    contexts = {
        "alice": PartyContext(
            "alice",
            {
                "data": {
                    "transactions": {"kind": "parquet", "path": str(big), "engine": spec["engine"]}
                }
            },
            base_dir=CACHE,
        ),
        **{
            p: PartyContext(p, {"data": {"transactions": spec["files"][p]}}, base_dir=CACHE)
            for p in ("bob", "carol")
        },
    }
    params = {
        "mode": "horizontal",
        "min_support": SUPPORT,
        "min_confidence": 0.5,
        "reveal_counts": True,
    }
    t0 = time.perf_counter()
    doc = simulate_job("assoc", contexts, params, timeout=3600)
    job_s = time.perf_counter() - t0
    if not doc["ok"]:
        raise SystemExit(f"job failed: {doc['error']}")
    result = doc["parties"]["alice"]["result"]
    return {
        "count_s": seconds[0],
        "job_s": job_s,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "n_total": result.get("n_transactions"),
        "itemsets": sorted(
            [sorted(e["items"]), e["support_count"]] for e in result["frequent_itemsets"]
        ),
    }


def run(dataset: Path, engine: str, files: dict[str, Path]) -> dict[str, Any]:
    spec = {
        "dataset": str(dataset),
        "engine": engine,
        "files": {k: str(v) for k, v in files.items()},
    }
    done = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------
# The centralized reference


def centralized(fimi: Path, files: dict[str, Path], reps: int) -> list[list[Any]]:
    """Frequent itemsets (with counts) of ``reps`` x T10I4D100K + bob's + carol's baskets,
    Apriori level by level on the exact pooled counts."""
    from ppdm.mining.itemsets import apriori_gen, min_count, support_counts
    from ppdm.mining.readers import read_fimi

    t10 = read_fimi(fimi)
    smalls = [read_fimi(p) for p in files.values()]
    n = reps * t10.n_transactions + sum(s.n_transactions for s in smalls)
    threshold = min_count(SUPPORT, n)
    labels = sorted({int(x) for db in (t10, *smalls) for x in db.items})
    cands: list[tuple] = [(x,) for x in labels]
    found: list[list[Any]] = []
    while cands:
        counts = reps * support_counts(t10, cands) + sum(support_counts(s, cands) for s in smalls)
        large = [c for c, k in zip(cands, counts, strict=True) if k >= threshold]
        found += [[list(c), int(k)] for c, k in zip(cands, counts, strict=True) if k >= threshold]
        cands = apriori_gen(large)
    return sorted(found)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--worker", help=__import__("argparse").SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    fimi = Path(args.shared) / "data" / "fimi" / "T10I4D100K.dat"
    small, large = (100_000, 1_000_000) if args.quick else (1_000_000, 10_000_000)
    CACHE.mkdir(parents=True, exist_ok=True)
    files = small_files(fimi)
    t0 = time.perf_counter()
    ds_small, ds_large = build_dataset(fimi, small), build_dataset(fimi, large)
    print(f"datasets ready in {time.perf_counter() - t0:.1f} s ({CACHE})")
    memory = run(ds_small, "memory", files)
    stream_small = run(ds_small, "stream", files)
    stream_large = run(ds_large, "stream", files)
    # Checks: streamed == in memory, and every result == the centralized one.
    if stream_small["itemsets"] != memory["itemsets"]:
        raise SystemExit("streamed and in-memory results differ")
    for size, got in ((small, stream_small), (large, stream_large)):
        want = centralized(fimi, files, size // BASE)
        if got["itemsets"] != want:
            raise SystemExit(f"the result at {size:,} transactions is not the centralized one")
    print(
        f"checked: results equal the centralized frequent itemsets ({len(stream_large['itemsets'])} at {large:,})"
    )
    growth = (stream_large["count_s"] / stream_small["count_s"]) / (large / small)
    gib = stream_large["peak_rss_bytes"] / 2**30
    label = lambda n: f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"  # noqa: E731
    report = Report(f"alice's local counting over a Parquet dataset, {SUPPORT:.0%} support")
    report.add(
        Row(
            f"count_s_{label(small)}",
            stream_small["count_s"],
            "s",
            memory["count_s"],
            "in-memory TransactionDB",
            higher_is_better=False,
        )
    )
    report.add(Row(f"count_s_{label(large)}", stream_large["count_s"], "s", higher_is_better=False))
    report.add(
        Row(
            f"transactions_counted_{label(large)}_per_s",
            large / stream_large["count_s"],
            "tx/s",
            small / memory["count_s"],
            f"in-memory at {label(small)}",
        )
    )
    report.add(
        Row("growth_per_transaction", growth, "x", goal="<= 1 (linear)", higher_is_better=False)
    )
    report.add(
        Row(
            f"peak_rss_gib_{label(large)}",
            gib,
            "GiB",
            memory["peak_rss_bytes"] / 2**30,
            f"in-memory at {label(small)}",
            goal="< 2",
            higher_is_better=False,
        )
    )
    report.add(Row(f"job_s_{label(large)}", stream_large["job_s"], "s", higher_is_better=False))
    report.extra.update(
        {
            "peak_rss_gib_small_stream": stream_small["peak_rss_bytes"] / 2**30,
            "small_transactions": small,
            "large_transactions": large,
        }
    )
    report.finish(args.json)


if __name__ == "__main__":
    main()
