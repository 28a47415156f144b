"""A party's local counting on the embedded engine and on Spark ``local[2]`` (issue 28).

The data: T10I4D100K repeated with shifted transaction ids as a Parquet dataset in the
long layout (``benchmarks/sources.py``'s generator, written once into a folder under
/tmp and reused) at 10M and 100M transactions (``--quick``: 1M; ``--sizes`` picks).

The work: what horizontal association rules ask a party's local counter for at 1 %
support -- the first scan (transaction count, item labels, item supports) and the
support counts of every pair of locally frequent items (the largest level). Each run is
its own process: the embedded engine (:class:`~ppdm.sources.StreamedCounter`, DuckDB's
scan in chunks of whole transactions) and the Spark engine (the same kernels in
``mapInPandas`` over a ``local[2]`` session with ``driver_memory = 1g``; in local mode
the executors live in the driver's JVM, so that is the executors' bound).

Printed: the counting time of each engine at each size (the embedded engine is the
baseline, measured in the same run), and the peak memory of each run: the resident
memory of the whole process tree (the Python process, and for Spark its JVM and Python
workers), sampled every 0.2 s.

Checks: both engines' counts are equal, and equal ``repeats x`` the counts of
T10I4D100K itself (the dataset is that multiset), for every frequent item and pair.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from benchmarks._common import Report, Row, parser

SUPPORT = 0.01
BASE = 100_000  # transactions of T10I4D100K
SPARK = {"engine": "spark", "master": "local[2]", "driver_memory": "1g"}


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants (from /proc)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text().split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        rss[pid] = int(statm[1]) * page
    total, frontier = 0, [root]
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    while frontier:
        pid = frontier.pop()
        total += rss.get(pid, 0)
        frontier.extend(children.get(pid, []))
    return total


class _PeakSampler:
    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss(me))
            self._stop.wait(0.2)

    def __enter__(self) -> _PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One engine on one dataset: level 1 and the pairs of frequent items."""
    from ppdm.compute import engine_for
    from ppdm.mining.itemsets import min_count
    from ppdm.sources import parse_data_entry

    settings = {"compute": SPARK} if spec["engine"] == "spark" else {}
    entry = {"kind": "parquet", "path": spec["dataset"]}
    if spec["engine"] == "embedded":
        entry["engine"] = "stream"
    source = parse_data_entry("transactions", entry, base_dir=Path("/tmp"))
    engine = engine_for(settings, party="alice")
    start_s = 0.0
    with _PeakSampler() as sampler:
        if spec["engine"] == "spark":
            t0 = time.perf_counter()
            engine.session()  # the JVM's start, reported apart from the counting
            start_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        counter = engine.local_counter(source)
        n = counter.n_transactions
        threshold = min_count(SUPPORT, n)
        counts = counter.item_counts()
        frequent = [
            x for x, c in zip(counter.items.tolist(), counts, strict=True) if c >= threshold
        ]
        pairs = [(a, b) for i, a in enumerate(frequent) for b in frequent[i + 1 :]]
        pair_counts = counter.count(pairs)
        count_s = time.perf_counter() - t0
    engine.close()
    return {
        "count_s": count_s,
        "start_s": start_s,
        "peak_bytes": sampler.peak,
        "n": int(n),
        "items": [[x, int(c)] for x, c in zip(counter.items.tolist(), counts, strict=True)],
        "pairs": [[a, b, int(c)] for (a, b), c in zip(pairs, pair_counts, strict=True)],
    }


def run(dataset: Path, engine: str) -> dict[str, Any]:
    spec = {"dataset": str(dataset), "engine": engine}
    done = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{engine} worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def check(got: dict[str, Any], fimi: Path, reps: int) -> None:
    """``got`` equals ``reps`` x the counts of T10I4D100K."""
    from ppdm.mining.itemsets import support_counts
    from ppdm.mining.readers import read_fimi

    base = read_fimi(fimi)
    if got["n"] != reps * base.n_transactions:
        raise SystemExit("wrong number of transactions")
    want_items = dict(zip(base.items.tolist(), base.item_counts().tolist(), strict=True))
    for x, c in got["items"]:
        if c != reps * want_items.get(x, -1):
            raise SystemExit(f"wrong support of item {x}")
    pairs = [(a, b) for a, b, _ in got["pairs"]]
    want = reps * support_counts(base, pairs)
    if [c for *_, c in got["pairs"]] != want.tolist():
        raise SystemExit("wrong pair supports")


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--worker", help=__import__("argparse").SUPPRESS)
    p.add_argument(
        "--sizes",
        help="comma-separated transaction counts (default 10000000,100000000; --quick 1000000)",
    )
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    from benchmarks.sources import CACHE, build_dataset

    fimi = Path(args.shared) / "data" / "fimi" / "T10I4D100K.dat"
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
    else:
        sizes = [1_000_000] if args.quick else [10_000_000, 100_000_000]
    CACHE.mkdir(parents=True, exist_ok=True)
    report = Report(f"a party's local counting (level 1 and frequent pairs, {SUPPORT:.0%} support)")
    label = lambda n: f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"  # noqa: E731
    for size in sizes:
        t0 = time.perf_counter()
        dataset = build_dataset(fimi, size)
        print(f"dataset of {size:,} transactions ready in {time.perf_counter() - t0:.1f} s")
        embedded = run(dataset, "embedded")
        print(f"embedded at {label(size)}: {embedded['count_s']:.1f} s", flush=True)
        spark = run(dataset, "spark")
        print(f"spark at {label(size)}: {spark['count_s']:.1f} s", flush=True)
        if spark["items"] != embedded["items"] or spark["pairs"] != embedded["pairs"]:
            raise SystemExit(f"the engines' counts differ at {size:,} transactions")
        check(embedded, fimi, size // BASE)
        print(f"checked at {label(size)}: both engines equal {size // BASE} x T10I4D100K's counts")
        report.add(
            Row(
                f"spark_count_s_{label(size)}",
                spark["count_s"],
                "s",
                embedded["count_s"],
                "embedded engine",
                higher_is_better=False,
            )
        )
        report.add(
            Row(
                f"spark_peak_gib_{label(size)}",
                spark["peak_bytes"] / 2**30,
                "GiB",
                embedded["peak_bytes"] / 2**30,
                "embedded engine",
                goal="bounded by driver_memory 1g + workers",
                higher_is_better=False,
            )
        )
        report.add(
            Row(
                f"transactions_counted_{label(size)}_per_s",
                size / spark["count_s"],
                "tx/s",
                size / embedded["count_s"],
                "embedded engine",
            )
        )
        report.extra[f"spark_session_start_s_{label(size)}"] = spark["start_s"]
        report.extra[f"candidate_pairs_{label(size)}"] = len(spark["pairs"])
    report.finish(args.json)


if __name__ == "__main__":
    main()
