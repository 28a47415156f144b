"""Horizontal association rules (Kantarcioglu & Clifton) against centralized pyfim, with
the CPU time of each phase per party (issue 25, item 3).

The ``assoc`` job runs in process (``simulate_job``, as ``benchmarks/mining.py`` runs it),
3 parties, job defaults (private counts, ``min_aggregate=10``), on

* retail at 1 % (``--quick``: 20,000 baskets) -- goal within 5x of pyfim;
* BMS-WebView-1 at 0.5 % (click-stream; ``--quick``: 20,000 sessions) -- goal within 10x.

Each case runs ``--repeat`` times (default 3; the machine may be loaded): the rows give
the best wall time and the best process CPU time (all three parties: they share one
interpreter, so the wall time in process is at least their summed CPU) against pyfim's
faster of FP-growth and Eclat on the pooled baskets (best of 3, same run). Every run's
frequent itemsets are checked against pyfim's. The per-phase figures (JSON and the
``*_phase_*`` rows) are the mean over the parties of each phase's thread CPU time in the
best run: reading the partition, the secure unions (and their scalar multiplications),
the threshold tests, local counting. Usage::

    python benchmarks/horizontal_profile.py --quick
    python benchmarks/horizontal_profile.py --json horizontal.json
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Report, Row, parser

PARTIES = ["alice", "bob", "carol"]

#: (tag, file, rows with --quick, min_support, goal ratio to pyfim)
CASES = (
    ("retail_1pct", "retail.dat", 20_000, 0.01, 5.0),
    ("bms1_0.5pct", "BMS1.dat", 20_000, 0.005, 10.0),
)


def _phases() -> list[tuple[Any, str, str]]:
    """(module or class, attribute, phase name) of what is timed per party."""
    import ppdm.jobs.mining as job
    import ppdm.mining.horizontal_rules as hr
    from ppdm.protocols import commutative

    return [
        (job, "read_party_transactions", "read"),
        (hr, "horizontal_association_rules", "miner"),
        (hr, "secure_set_union", "union"),
        (commutative, "_mult_array", "union_scalar_mult"),
        (hr, "secure_all_nonnegative", "threshold"),
        (hr, "secure_sum_nonnegative", "threshold"),
        (hr, "secure_sum", "threshold"),
        (hr.TransactionCounter, "count", "count"),
        (hr.TransactionCounter, "pair_counts", "count"),
        (hr, "_single_items", "count"),
        (hr, "_candidates" if hasattr(hr, "_candidates") else "apriori_gen", "candidates"),
    ]


@contextmanager
def phase_clock() -> Iterator[dict[str, dict[str, float]]]:
    """Wrap each phase function so that its thread CPU time is summed per party thread
    (``ppdm-<party>``, the in-process network's threads); restore them on exit."""
    acc: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    saved = []
    for owner, name, phase in _phases():
        fn = owner.__dict__.get(name)
        if fn is None:  # not in this version of the miner
            continue
        saved.append((owner, name, fn))

        def timed_fn(*a: Any, _fn: Callable = fn, _phase: str = phase, **k: Any) -> Any:
            t0 = time.thread_time()
            try:
                return _fn(*a, **k)
            finally:
                who = threading.current_thread().name
                if who.startswith("ppdm-"):
                    acc[who[5:]][_phase] += time.thread_time() - t0

        setattr(owner, name, timed_fn)
    try:
        yield acc
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def pyfim_best(tx: list[list[int]], minc: int) -> tuple[float, dict[frozenset, int]]:
    import fim

    data = [*tx, []]  # pyfim leaves out items present in every basket otherwise
    best, result = float("inf"), None
    for fn in (fim.fpgrowth, fim.eclat):
        for _ in range(3):
            t0 = time.perf_counter()
            res = fn(data, target="s", supp=-minc, zmin=1, report="a")
            if time.perf_counter() - t0 < best:
                best, result = time.perf_counter() - t0, res
    return best, {frozenset(s): int(c) for s, c in result}


def run_case(report: Report, tmp: Path, fimi: Path, case: tuple, quick: bool, repeat: int) -> None:
    from mining import (
        _in_process,
        check_assoc,
        partition_file,
        read_fimi_lines,
        write_fimi_lines,
    )

    from ppdm.mining.itemsets import min_count

    tag, name, quick_rows, s, goal = case
    tx = read_fimi_lines(fimi / name, quick_rows if quick else None)
    write_fimi_lines(tx, tmp / f"{tag}.dat")
    partition_file(tmp / f"{tag}.dat", tmp / tag, parties=PARTIES, mode="horizontal", seed=1)
    base_s, want = pyfim_best(tx, min_count(s, len(tx)))
    params = {"mode": "horizontal", "min_support": s, "min_confidence": 0.5, "data": tag}
    best: tuple[float, float, dict, dict] | None = None
    for _ in range(repeat):
        with phase_clock() as acc:
            w0, c0 = time.perf_counter(), time.process_time()
            doc = _in_process("assoc", tmp / tag, params)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        check_assoc(doc, want, 0.5, counts=False)  # itemsets and rules, every party
        if best is None or cpu < best[1]:
            best = (wall, cpu, {p: dict(v) for p, v in acc.items()}, doc)
    assert best is not None
    wall, cpu, phases, doc = best
    hops = max(e["totals"].get("sequential_hops", 0) for e in doc["parties"].values())
    report.extra[f"{tag}_rounds"] = hops / 2
    report.extra[f"{tag}_itemsets"] = len(want)
    report.add(
        Row(
            f"{tag}_3p_wall_s",
            wall,
            "s",
            base_s,
            "pyfim best, centralized",
            f"<= {goal:g}x pyfim",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            f"{tag}_3p_process_cpu_s",
            cpu,
            "s",
            base_s,
            "pyfim best, centralized",
            "report (3 parties' CPU summed)",
            higher_is_better=False,
        )
    )
    names = sorted({ph for v in phases.values() for ph in v})
    for ph in names:
        mean = sum(v.get(ph, 0.0) for v in phases.values()) / len(PARTIES)
        report.add(
            Row(
                f"{tag}_phase_{ph}_cpu_s",
                mean,
                "s",
                None,
                "",
                "report (mean per party)",
                higher_is_better=False,
            )
        )


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="runs per case (the best is kept)")
    args = p.parse_args()
    fimi = Path(args.shared) / "data" / "fimi"
    report = Report("Horizontal association rules, 3 parties in process, against pyfim")
    with tempfile.TemporaryDirectory() as d:
        for case in CASES:
            run_case(report, Path(d), fimi, case, args.quick, max(args.repeat, 1))
    report.finish(args.json)


if __name__ == "__main__":
    main()
