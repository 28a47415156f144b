"""How soon a silent peer is named (issue 23, item 6: within 2 T for every T >= 1 s).

A three-party consortium on 127.0.0.1, one ``ppdm party serve`` process per party
(``ppdm.testbed.consortia.GrpcTestbed``), the job's receive timeout ``T``. While a long
``ring-echo`` job runs, carol's node is frozen (``SIGSTOP``); the figures are the times,
counted from the freeze, at which the system itself recorded the failure naming the
silent party: each surviving node's ``ended_at`` in its ledger's job table, and the end of
the initiator's job document. The baseline of each row is ``T`` itself (the earliest any
design can tell silence from slowness) and the goal is a ratio of at most 2.

The run checks that the job failed and that the document blames bob. Wall-clock figures:
run on a quiet machine (a loaded one delays every process, not the design's bound).

    python benchmarks/silent_peer.py --quick
    python benchmarks/silent_peer.py --json silent.json
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Report, Row, parser

from ppdm.testbed.consortia import SILENT_PARTY, silent_peer_named_after


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()
    timeouts = [1.0, 2.0] if args.quick else [1.0, 2.0, 5.0]
    report = Report("a silent peer named after (s), against the job's timeout T")
    for t in timeouts:
        with tempfile.TemporaryDirectory() as tmp:
            doc, times, blamed = silent_peer_named_after(Path(tmp) / "bed", t)
        if doc["failed_party"] != SILENT_PARTY or SILENT_PARTY not in blamed.values():
            raise SystemExit(f"T = {t:g}: the silent party was not named: {doc['error']}")
        for who, after in times.items():
            report.add(
                Row(
                    f"silent_named_T{t:g}_{who}_s",
                    after,
                    "s",
                    baseline=t,
                    baseline_name="T (the timeout)",
                    goal="<= 2 T (ratio >= 0.5)",
                    higher_is_better=False,
                )
            )
    report.finish(args.json)
    worst = max(r.value / float(r.baseline or 1) for r in report.rows)
    print(f"worst: named after {worst:.2f} T (goal at most 2 T)")


if __name__ == "__main__":
    main()
