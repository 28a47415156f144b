"""The ``assoc`` job against the library call it wraps (issue 25, item 2): goal <= 1.2x.

The job is what ``ppdm simulate assoc`` and a node run
(:func:`ppdm.jobs.document.simulate_job`): each party reads its ``[data]`` file through
its compute engine, checks the parameters, agrees the label kind with the others, mines,
and builds its result document. The library call is what a user writes with the same
split: each party reads the same file with :func:`ppdm.mining.readers.read_fimi` and calls
:func:`ppdm.mining.horizontal_rules.horizontal_association_rules` with the parameters the
job passes it (``min_aggregate=10``, ``colluders=1``, ``fake_ratio=0.25``, 4-byte labels),
and reads the result's rules (:class:`~ppdm.mining.rules.Rule` objects, made when first
read).
Both run on the in-process network, 3 parties, in the same run, alternately, ``--repeat``
times (the best kept; a warm-up run of each first, so imports are not counted; the
garbage of the previous call collected before each):

* retail at 1 % (``--quick``: 20,000 baskets), split as ``benchmarks/mining.py`` splits it
  (:func:`ppdm.jobs.mining.partition_file`, seed 1), confidence 0.5: private counts (the
  job's default) and ``reveal_counts``;
* mushroom at 30 % (``--quick``: 40 %), confidence 0.5, ``reveal_counts``: the rule-heavy
  case (tens of thousands of rules with their measures), where writing the rule records
  is most of what the job adds.

Rows: the job's wall time and process CPU time (the three parties share one interpreter)
against the library call's; goal: the job within 1.2x. Every timed pair is checked: each
party's frequent itemsets and rules in the job document (items, measures, order) equal the
library result, its rules written one :class:`~ppdm.mining.rules.Rule` at a time
(:func:`ppdm.mining.rules.rules_to_records`). Usage::

    python benchmarks/job_overhead.py --quick
    python benchmarks/job_overhead.py --json job_overhead.json
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Report, Row, parser

from ppdm.jobs.document import simulate_job
from ppdm.jobs.mining import partition_file
from ppdm.jobs.registry import PartyContext
from ppdm.mining.horizontal_rules import horizontal_association_rules
from ppdm.mining.readers import read_fimi
from ppdm.mining.rules import rules_to_records
from ppdm.parties.local import simulate

PARTIES = ["alice", "bob", "carol"]

#: (tag, file, baskets with --quick, min_support, min_support with --quick, reveal_counts)
CASES = (
    ("retail_1pct", "retail.dat", 20_000, 0.01, 0.01, False),
    ("retail_1pct_counts", "retail.dat", 20_000, 0.01, 0.01, True),
    ("mushroom_counts", "mushroom.dat", None, 0.3, 0.4, True),
)
CONFIDENCE = 0.5


def measure(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and process CPU seconds of one call, and its result (the garbage of earlier
    calls collected first, so that neither side pays for scanning the other's objects)."""
    gc.collect()
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


def job_text(doc: dict) -> dict[str, str]:
    """Each party's itemsets and rules in the job document, as JSON text (one object each
    while the library call runs)."""
    return {
        party: json.dumps([e["result"]["frequent_itemsets"], e["result"]["rules"]])
        for party, e in doc["parties"].items()
    }


def check_same(job: dict[str, str], lib: dict[str, Any], reveal: bool) -> int:
    """Every party's job result equals its library result; the number of rules."""
    for party, result in lib.items():
        itemsets, rules = json.loads(job[party])
        if itemsets != result.to_json()["frequent_itemsets"]:
            raise SystemExit(f"{party}: the job's itemsets differ from the library call's")
        if reveal:
            # The library's Rule objects, written one at a time (the per-rule path).
            expected = rules_to_records(result.rules)
        else:
            keys = ("antecedent", "consequent")
            expected = [{k: r[k] for k in keys} for r in result.rules]
            rules = [{k: r[k] for k in keys} for r in rules]
        if rules != expected:
            raise SystemExit(f"{party}: the job's rules differ from the library call's")
    return len(next(iter(lib.values())).rules)


def run_case(report: Report, tmp: Path, fimi: Path, case: tuple, quick: bool, repeat: int) -> None:
    tag, name, quick_rows, s, quick_s, reveal = case
    s = quick_s if quick else s
    from mining import read_fimi_lines, write_fimi_lines

    pooled = tmp / f"{tag}.dat"
    write_fimi_lines(read_fimi_lines(fimi / name, quick_rows if quick else None), pooled)
    out = tmp / tag
    partition_file(pooled, out, parties=PARTIES, mode="horizontal", seed=1)
    manifest = json.loads((out / "partition.json").read_text())
    files = {p: out / e["file"] for p, e in manifest["parties"].items()}
    contexts = {
        p: PartyContext(p, {"data": {"transactions": e["file"]}}, base_dir=out)
        for p, e in manifest["parties"].items()
    }
    params = {
        "mode": "horizontal",
        "min_support": s,
        "min_confidence": CONFIDENCE,
        "reveal_counts": reveal,
    }

    def job() -> dict:
        return simulate_job("assoc", contexts, params, timeout=600)

    def library() -> dict[str, Any]:
        def party(net: Any, path: Path) -> Any:
            return horizontal_association_rules(
                net,
                read_fimi(path),
                min_support=s,
                min_confidence=CONFIDENCE,
                reveal_counts=reveal,
                label_bytes=4,
                fake_ratio=0.25,
                min_aggregate=10,
                colluders=1,
            )

        results = simulate(party, files, timeout=600).results
        for result in results.values():
            # what the call returns: its Rule objects (built when first read)
            if not isinstance(result.rules, list):
                raise SystemExit("the library call returned no rule list")
        return results

    job()
    library()  # warm-up: imports and first-use set-up are not counted
    best = {"job": (float("inf"), float("inf")), "library": (float("inf"), float("inf"))}
    n_rules = 0
    for _ in range(repeat):
        jw, jc, doc = measure(job)
        text = job_text(doc)
        del doc
        lw, lc, lib = measure(library)
        n_rules = check_same(text, lib, reveal)
        del lib
        best["job"] = (min(best["job"][0], jw), min(best["job"][1], jc))
        best["library"] = (min(best["library"][0], lw), min(best["library"][1], lc))
    report.extra[f"{tag}_rules"] = n_rules
    report.extra[f"{tag}_min_support"] = s
    for i, what in enumerate(("wall", "cpu")):
        job_s, library_s = best["job"][i], best["library"][i]
        report.extra[f"{tag}_job_over_library_{what}"] = job_s / library_s
        report.add(
            Row(
                f"{tag}_job_{what}_s",
                job_s,
                "s",
                library_s,
                f"library call, same split ({n_rules:,} rules)",
                f"job <= 1.2x library (ratio >= 0.83x): {job_s / library_s:.2f}x",
                higher_is_better=False,
            )
        )


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5, help="runs of each (the best is kept)")
    args = p.parse_args()
    fimi = Path(args.shared) / "data" / "fimi"
    report = Report("The assoc job against the library call, 3 parties in process")
    with tempfile.TemporaryDirectory() as d:
        for case in CASES:
            run_case(report, Path(d), fimi, case, args.quick, max(args.repeat, 1))
    report.finish(args.json)


if __name__ == "__main__":
    main()
