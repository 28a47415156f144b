"""Start-up time of the ``ppdm`` command and of a node (issue 16, item 4; issue 25,
item 5: a node serving within 0.3 s of its start).

Rows:

- ``help_s``: ``ppdm --help`` in a fresh interpreter, against the same interpreter also
  importing what every command module imported at start before the change (pandas,
  scipy.sparse, pyarrow, matplotlib, numpy, grpc, cryptography; the issue measured
  1.5-1.9 s for that);
- ``serve_s``: ``ppdm party serve SETTINGS`` from exec to its "serving" log line, on a
  fresh three-party testbed on 127.0.0.1, against the same plus those eager imports;
- ``serve_cpu_s``: the CPU seconds (user + system) the node has used when it logs
  "serving": the start's cost on a free core, which a loaded machine does not inflate
  the way it does the wall time.

Medians of several runs (the best run of each is printed under the table and written to
the JSON as ``*_best``). Goal: both <= 0.3 s on this 2-core machine (a loaded machine
gives more; the table says how many cores were busy). Where a node's start goes: the
interpreter and its site hooks, then gRPC (with asyncio), the certificate library (the
roster's and the party's certificates and keys are checked before serving) and protobuf,
about 4/5 of its instructions; ppdm's modules (with the standard ones they use), the
settings, the policy and the ledger about 1/5 (most of it the dataclasses the settings,
the roster, the policy, the ledger and a job's record are made of: 2-5 million
instructions each, counted with ``valgrind --tool=callgrind``). A node imports the one
command module that registers ``party``, and not what only a job needs: the jobs'
declared leakage, a job's rules and decision, signed ledger heads, the ledger's checks
(``tests/service/test_startup_imports.py``); it runs its start without the cyclic
garbage collector (what the start makes lives as long as the node, and is frozen once it
serves). The package's bytecode is written first, as an install writes it: a source tree
under ``PYTHONDONTWRITEBYTECODE``, or with modules edited since their bytecode, would
otherwise compile those at every start (1.6x the instructions for the whole package).

    python benchmarks/startup.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Report, Row

EAGER = "import numpy, pandas, scipy.sparse, pyarrow, matplotlib, grpc, cryptography.x509"


def _time(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - t0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _serve_time(settings: Path, prelude: str, cpu: list[float] | None = None) -> float:
    """Seconds from exec to the node's "serving" line; its CPU seconds by then are
    appended to ``cpu`` (what the start costs whatever the machine's load)."""
    code = f"{prelude}\nfrom ppdm.cli.main import main\nimport sys\nsys.exit(main(sys.argv[1:]))"
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "party", "serve", str(settings)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        for line in proc.stderr:
            if "serving on" in line:
                wall = time.perf_counter() - t0
                if cpu is not None:
                    cpu.append(_cpu_seconds(proc.pid))
                return wall
            if time.monotonic() > deadline:
                break
        raise SystemExit("the node did not report serving")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs")
    ap.add_argument("--json", help="write the figures as a flat JSON object")
    args = ap.parse_args()
    runs = 3 if args.quick else 7
    py = sys.executable
    import ppdm

    # as an install leaves it (pip compiles the package): starts measured from bytecode
    compileall.compile_dir(Path(ppdm.__file__).parent, quiet=1)
    helps = [_time([py, "-m", "ppdm", "--help"]) for _ in range(runs)]
    eager = [
        _time([py, "-c", f"{EAGER}\nfrom ppdm.cli.main import build_parser\nbuild_parser()"])
        for _ in range(runs)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        from ppdm.parties.consortium import init_consortium
        from ppdm.testbed.consortia import free_ports

        init_consortium(tmp, ["alice", "bob", "carol"], ports=free_ports(3))
        settings = Path(tmp) / "alice.toml"
        cpu: list[float] = []
        cpu_eager: list[float] = []
        serves = [_serve_time(settings, "", cpu) for _ in range(runs)]
        serves_eager = [_serve_time(settings, EAGER, cpu_eager) for _ in range(runs)]
    load = os.getloadavg()[0]
    report = Report(f"start-up, medians of {runs} runs (load average {load:.1f} on 2 cores)")
    report.add(
        Row(
            "help_s",
            statistics.median(helps),
            "s",
            statistics.median(eager),
            "eager imports of every command module (before)",
            "<= 0.3 s",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            "serve_s",
            statistics.median(serves),
            "s",
            statistics.median(serves_eager),
            "the same with the eager imports (before)",
            "<= 0.3 s to 'serving'",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            "serve_cpu_s",
            statistics.median(cpu),
            "CPU s",
            statistics.median(cpu_eager),
            "the same with the eager imports (before)",
            "<= 0.3 s on a free core (CPU seconds of the node until 'serving')",
            higher_is_better=False,
        )
    )
    report.extra["load_average"] = round(load, 2)
    report.extra.update(serve_s_best=min(serves), serve_cpu_s_best=min(cpu))
    report.finish(args.json)
    print(f"best of {runs}: serve_s {min(serves):.3f} s, serve_cpu_s {min(cpu):.2f} CPU s")
    for row in report.rows:
        print(f"goal {row.name} <= 0.3 s: {'met' if row.value <= 0.3 else 'NOT met'}")


if __name__ == "__main__":
    main()
