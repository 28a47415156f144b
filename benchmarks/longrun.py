"""A node's memory over many jobs (issue 23, item 7: no per-job growth).

A four-party consortium on 127.0.0.1, one ``ppdm party serve`` process per party
(``ppdm.testbed.consortia.GrpcTestbed``). Alice, bob and carol run ``N`` ``secure-sum``
jobs one after another (initiators in turn); dave's node is up the whole time and runs
none of them: it is the baseline, the drift of a node that only idles for the same time.
Every 100 jobs (every 25 with ``--quick``) the resident memory (``VmRSS``) of every node
is read from ``/proc`` and printed, with each member's growth since the previous
sample in KiB per job.

Rows:

- ``growth_kb_per_job``: the least-squares slope of RSS over the job count after the
  warm-up (the first third of the run: caches fill, the finished-job table reaches its
  cap), in KiB per job, of the member that grew most, beside dave's slope over the same
  samples (the idle node, expressed per job of the others) -- the noise floor;
- ``growth_kb_per_job_<member>``: each member's slope;
- ``rss_mib_end``: that member's RSS at the end, beside dave's;
- ``jobs_per_s``: how fast the jobs ran (for context).

Goal: flat within noise, i.e. the slope at most 1 KiB per job at every member (issue 23
measured about 28 KiB per job; 22.8 KiB per job at alice over 500 jobs before each
finished job's streams stopped waiting in reference cycles for the garbage collector's
full pass). The run checks every job succeeded and each node's ledger verifies.

    python benchmarks/longrun.py --quick
    python benchmarks/longrun.py --jobs 1000 --json longrun.json
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Report, Row, parser

from ppdm.service.ledger import verify_file
from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.testbed.consortia import GrpcTestbed

MEMBERS = ("alice", "bob", "carol")
IDLE = "dave"
GOAL_KB_PER_JOB = 1.0


def rss_kib(pid: int) -> int:
    """Resident memory of process ``pid`` in KiB (``VmRSS`` of ``/proc/PID/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise LookupError(f"no VmRSS for process {pid}")


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``ys`` over ``xs``.

    >>> slope([0, 1, 2], [1, 3, 5])
    2.0
    """
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0


def main() -> None:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=None, help="jobs to run (default 1000)")
    args = ap.parse_args()
    jobs = args.jobs or (200 if args.quick else 1000)
    every = 25 if args.quick else 100
    if jobs < 4 * every:
        raise SystemExit(f"--jobs must be at least {4 * every}")
    samples: list[tuple[int, dict[str, int]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        with GrpcTestbed(
            (*MEMBERS, IDLE), tmp, timeout=60, policy=OPEN_POLICY_TOML, log_level="WARNING"
        ) as bed:
            pids = {p: bed._procs[p].pid for p in bed.parties}
            samples.append((0, {p: rss_kib(pid) for p, pid in pids.items()}))
            print(
                f"{'jobs':>6} "
                + " ".join(f"{p + ' MiB':>10}" for p in bed.parties)
                + " "
                + " ".join(f"{p + ' KiB/job':>14}" for p in MEMBERS)
            )
            t0 = time.perf_counter()
            for i in range(1, jobs + 1):
                doc = bed.run_job(
                    "secure-sum", initiator=MEMBERS[i % len(MEMBERS)], parties=MEMBERS
                )
                if doc["state"] != "succeeded":
                    raise SystemExit(f"job {i} did not succeed: {doc['error']}")
                if i % every == 0:
                    rss = {p: rss_kib(pid) for p, pid in pids.items()}
                    last = samples[-1][1]
                    samples.append((i, rss))
                    print(
                        f"{i:>6} "
                        + " ".join(f"{rss[p] / 1024:>10.1f}" for p in bed.parties)
                        + " "
                        + " ".join(f"{(rss[p] - last[p]) / every:>14.2f}" for p in MEMBERS)
                    )
            elapsed = time.perf_counter() - t0
        for p in bed.parties:
            report = verify_file(Path(tmp) / "state" / p / "ledger.sqlite")
            if not report.ok:
                raise SystemExit(f"{p}'s ledger does not verify: {report.problems[:3]}")
    warm = [(n, r) for n, r in samples if n >= jobs // 3]
    xs = [float(n) for n, _ in warm]
    slopes = {p: slope(xs, [float(r[p]) for _, r in warm]) for p in MEMBERS}
    worst = max(MEMBERS, key=lambda p: slopes[p])
    growth = slopes[worst]
    idle = slope(xs, [float(r[IDLE]) for _, r in warm])
    report = Report(f"node memory over {jobs} secure-sum jobs (3 members; dave idles)")
    report.add(
        Row(
            "growth_kb_per_job",
            growth,
            "KiB/job",
            idle,
            f"idle node over the same jobs (noise); worst member: {worst}",
            f"<= {GOAL_KB_PER_JOB:g} KiB/job",
            higher_is_better=False,
        )
    )
    for p in MEMBERS:
        report.add(
            Row(
                f"growth_kb_per_job_{p}",
                slopes[p],
                "KiB/job",
                idle,
                "idle node (noise)",
                f"<= {GOAL_KB_PER_JOB:g} KiB/job",
                higher_is_better=False,
            )
        )
    report.add(
        Row(
            "rss_mib_end",
            samples[-1][1][worst] / 1024,
            "MiB",
            samples[-1][1][IDLE] / 1024,
            "idle node",
            "",
            higher_is_better=False,
        )
    )
    report.add(Row("jobs_per_s", jobs / elapsed, "jobs/s"))
    report.extra["rss_kib"] = {str(n): r for n, r in samples}
    report.finish(args.json)
    print(
        f"goal growth <= {GOAL_KB_PER_JOB:g} KiB/job at every member: "
        f"{'met' if growth <= GOAL_KB_PER_JOB else 'NOT met'} "
        f"({growth:.2f} KiB/job at {worst}; "
        + ", ".join(f"{p} {slopes[p]:.2f}" for p in MEMBERS)
        + f"; idle {IDLE} {idle:.2f})"
    )


if __name__ == "__main__":
    main()
