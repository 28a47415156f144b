"""What data-owner control costs at a job's start: the policy check and the ledger writes.

Issue 11's goal: the policy check and the ledger write add at most 5 ms to a job's start.
Measured in one run, on in-process nodes of a 3-party consortium over gRPC + mutual TLS on
127.0.0.1 (``ppdm.service.testbed.LoopbackConsortium``):

- ``decide_ms``: one node's whole decision on a ``secure-sum`` proposal (policy
  evaluation on the declared leakage, input check, disclosure audit with the co-members'
  histories fetched over gRPC), median;
- ``ledger_ms``: the ledger writes of one proposal (the chained ``request`` entry and the
  job record), median;
- ``propose_phase_ms``: the initiator's whole phase 1 at three nodes (``ProposeJob`` to
  each), median, beside the same phase at nodes whose governance is switched off (decide
  = accept, ledger = no-op) — the baseline — and the difference;
- ``job_start_ms``: initiator-side time from the first call to every node running, with
  and without governance.

Assumptions named in each row: loopback network, warm channels, a node's audit history of
a few hundred answered sums.

    python benchmarks/governance.py --quick
    python benchmarks/governance.py --json governance.json
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Report, Row, parser

from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.service.client import NodeClient, run_job
from ppdm.service.node import PartyNode, to_struct
from ppdm.service.policy import Decision
from ppdm.service.testbed import LoopbackConsortium

PARTIES = ("alice", "bob", "carol")


class _NullLedger:
    def append(self, *a: Any, **k: Any) -> None:
        return None

    def save_job(self, *a: Any, **k: Any) -> None:
        return None

    def load_job(self, *a: Any, **k: Any) -> None:
        return None

    def jobs(self, *a: Any, **k: Any) -> list[Any]:
        return []

    def close(self) -> None:
        return None


def _ungoverned(node: PartyNode) -> None:
    """Switch a node's governance off: every job accepted, nothing recorded."""
    node.ledger = _NullLedger()  # type: ignore[assignment]
    node.decide = lambda **kw: (Decision("accept"), None, None)  # type: ignore[method-assign]


def _propose_phase(bed: LoopbackConsortium, n: int) -> tuple[list[float], list[float]]:
    """Times of phase 1 alone, and of phase 1 + StartJob everywhere (then cancelled)."""
    settings = bed.settings["alice"]
    phase, start = [], []
    with NodeClient(settings) as client:
        for _ in range(n):
            job_id = uuid.uuid4().hex
            req = pb.JobRequest(
                consortium=settings.consortium.name,
                job_id=job_id,
                protocol="ring-echo",
                params=to_struct({"size": 64, "rounds": 1, "delay_s": 0.0}),
                initiator="alice",
                parties=list(PARTIES),
                timeout_s=10.0,
            )
            t0 = time.perf_counter()
            for p in PARTIES:
                d = client.stub(p).ProposeJob(req, timeout=10)
                assert d.decision == pb.DECISION_ACCEPTED, d
            phase.append(time.perf_counter() - t0)
            for p in PARTIES:
                client.stub(p).CancelJob(pb.JobRef(job_id=job_id), timeout=10)
    return phase, start


def _job_start(bed: LoopbackConsortium, n: int, job: str) -> list[float]:
    """Whole ``run_job`` wall times of a short job (the start dominates)."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        doc = run_job(bed.settings["alice"], job, timeout=10)
        out.append(time.perf_counter() - t0)
        assert doc["state"] == "succeeded", doc["error"]
    return out


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    n = 30 if args.quick else 300
    history = 20 if args.quick else 300
    report = Report(
        "data-owner control at job start: 3 parties, gRPC + mTLS on 127.0.0.1 (medians, ms)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        policy = "version = 1\n[defaults]\nrate_limit = { jobs = 1000000, per_s = 1 }\n"
        with LoopbackConsortium(PARTIES, Path(tmp) / "gov", policy=policy) as gov:
            # An audit history of `history` answered sums at every node.
            for _ in range(history):
                doc = run_job(gov.settings["alice"], "secure-sum", timeout=10)
                assert doc["state"] == "succeeded", doc["error"]
            node = gov.nodes["bob"]
            decide, ledger = [], []
            for _ in range(n):
                job_id = uuid.uuid4().hex
                t0 = time.perf_counter()
                decision, _, audit = node.decide(
                    job_id=job_id,
                    protocol="secure-sum",
                    params={"modulus": None},
                    initiator="alice",
                    parties=PARTIES,
                    reserve=False,
                )
                t1 = time.perf_counter()
                node.ledger.append(
                    "request", {"decision": decision.outcome, "audit": audit}, job_id=job_id
                )
                node.ledger.save_job(job_id, {"job_id": job_id, "state": "accepted"})
                t2 = time.perf_counter()
                assert decision.outcome == "accept"
                decide.append(t1 - t0)
                ledger.append(t2 - t1)
            gov_phase, _ = _propose_phase(gov, n)
            gov_start = _job_start(gov, n // 3 or 1, "ring-echo")
        with LoopbackConsortium(PARTIES, Path(tmp) / "null", policy=policy) as null:
            for node in null.nodes.values():
                _ungoverned(node)
            null_phase, _ = _propose_phase(null, n)
            null_start = _job_start(null, n // 3 or 1, "ring-echo")
    med = statistics.median
    d_ms, l_ms = med(decide) * 1e3, med(ledger) * 1e3
    report.add(
        Row(
            "decide_ms",
            d_ms,
            "ms",
            goal="decide + ledger <= 5 ms",
            higher_is_better=False,
            baseline_name=f"(secure-sum, audit over {history} answered sums, 2 peer histories over loopback gRPC)",
        )
    )
    report.add(
        Row(
            "ledger_ms",
            l_ms,
            "ms",
            higher_is_better=False,
            baseline_name="(SQLite WAL, one chained entry + job record)",
        )
    )
    report.add(
        Row("decide_plus_ledger_ms", d_ms + l_ms, "ms", higher_is_better=False, goal="<= 5 ms")
    )
    gp, np_ = med(gov_phase) * 1e3, med(null_phase) * 1e3
    report.add(
        Row(
            "propose_phase_ms",
            gp,
            "ms",
            baseline=np_,
            baseline_name="same phase, governance off",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            "propose_phase_added_ms",
            gp - np_,
            "ms",
            higher_is_better=False,
            goal="<= 5 ms per node x 3 nodes",
        )
    )
    gs, ns = med(gov_start) * 1e3, med(null_start) * 1e3
    report.add(
        Row(
            "ring_echo_job_ms",
            gs,
            "ms",
            baseline=ns,
            baseline_name="same job, governance off",
            higher_is_better=False,
        )
    )
    report.extra.update({"samples": n, "audit_history": history})
    report.finish(args.json)
    ok = d_ms + l_ms <= 5.0
    print(f"goal (policy check + ledger write <= 5 ms at a node): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
