"""One job at one node: its states, its status message and its ledger record.

:class:`Job` follows a job at a node from its proposal to its end (the job lifecycle,
:mod:`ppdm.service.lifecycle`, moves it from state to state); :data:`STATE_NAMES` names
the ``JobState`` values as the ledger's job table and ``ppdm job`` write them. A job's
parameters and result travel as JSON text in the one string field ``"json"`` of a
``google.protobuf.Struct`` (:func:`to_struct`, :func:`from_struct`): ``Struct`` numbers
are doubles and would round integers above 2**53. :func:`owner_cause` is the local cause
of a refusal or failure, kept for the node's own owner only.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf import struct_pb2

from ppdm.errors import ConfigError, PublicError, with_local_cause
from ppdm.parties.grpc_net import JobLinks
from ppdm.parties.network import Endpoint
from ppdm.proto.ppdm.v1 import party_pb2 as pb

if TYPE_CHECKING:  # the job registry and the jobs' leakage: a node's first job imports them
    from ppdm.jobs.registry import PartyContext
    from ppdm.service.policy_decision import Decision
    from ppdm.service.profiles import Disclosure

STATE_NAMES: dict[int, str] = {
    pb.JOB_STATE_RUNNING: "running",
    pb.JOB_STATE_SUCCEEDED: "succeeded",
    pb.JOB_STATE_FAILED: "failed",
    pb.JOB_STATE_UNKNOWN: "unknown",
    pb.JOB_STATE_UNSPECIFIED: "unknown",
    pb.JOB_STATE_ACCEPTED: "accepted",
    pb.JOB_STATE_PENDING: "pending",
    pb.JOB_STATE_REFUSED: "refused",
    pb.JOB_STATE_CANCELLED: "cancelled",
}
_STATE_VALUES = {v: k for k, v in STATE_NAMES.items() if v != "unknown"}
_OPEN_STATES = (pb.JOB_STATE_ACCEPTED, pb.JOB_STATE_PENDING)
_DONE_STATES = (
    pb.JOB_STATE_SUCCEEDED,
    pb.JOB_STATE_FAILED,
    pb.JOB_STATE_REFUSED,
    pb.JOB_STATE_CANCELLED,
)


def to_struct(value: Any) -> struct_pb2.Struct:
    """``value`` as JSON text in the ``json`` field of a Struct (exact integers)."""
    s = struct_pb2.Struct()
    s.update({"json": json.dumps(value)})
    return s


def from_struct(s: struct_pb2.Struct, what: str) -> Any:
    """Inverse of :func:`to_struct`; ``ValueError`` naming ``what`` on a bad message."""
    text = s.fields["json"].string_value if "json" in s.fields else ""
    if not text:
        raise ValueError(f"{what} carries no 'json' field")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply") from None


MAX_PARAM_DEPTH = 32


def _check_depth(value: Any, depth: int = 0) -> None:
    """Refuse job parameters nested deeper than :data:`MAX_PARAM_DEPTH` (a peer could
    otherwise exhaust the recursion of every later walk over them)."""
    if depth > MAX_PARAM_DEPTH:
        raise ConfigError(f"job parameters are nested deeper than {MAX_PARAM_DEPTH} levels")
    if isinstance(value, dict):
        for v in value.values():
            _check_depth(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_depth(v, depth + 1)


MAX_CAUSE_CHARS = 1000


def owner_cause(exc: BaseException) -> str:
    """The local cause of a refusal or failure, for this node's own owner only (``ppdm
    job status`` / ``job explain`` with the party's own certificate from its own host):
    the exception's class and first line, as the node log has it. Never sent to a peer."""
    first = (str(exc).strip().splitlines() or [""])[0][:MAX_CAUSE_CHARS]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


@dataclass
class Job:
    """One job at one node, from its proposal to its end."""

    job_id: str
    protocol: str
    params: dict[str, Any]
    initiator: str
    parties: tuple[str, ...]
    timeout_s: float
    state: int = pb.JOB_STATE_ACCEPTED
    decision: Decision | None = None
    disclosure: Disclosure | None = None
    audit: dict[str, Any] | None = None
    endpoint: Endpoint | None = None
    links: JobLinks | None = None
    result: Any = None
    error: PublicError | None = None
    rule: str = ""
    reason: str = ""
    proposed: float = field(default_factory=time.monotonic)
    expires: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    wall_time_s: float = 0.0
    #: when the job started and ended at this node (seconds since the epoch; 0: not yet)
    started_at: float = 0.0
    ended_at: float = 0.0
    metrics: list[dict[str, Any]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    #: this party's inputs and data tables as decided on at the proposal (the run uses
    #: the same ones: one read of the settings file per job)
    context: PartyContext | None = None
    #: the local cause of a refusal (:func:`owner_cause`): for the node's own owner only
    cause: str = ""

    @property
    def results_to(self) -> str:
        return self.decision.results if self.decision is not None else "members"

    def error_text(self) -> str:
        if self.state == pb.JOB_STATE_REFUSED:
            return f"refused: party {self.error.party if self.error else ''!r} by rule {self.rule!r}: {self.reason}"
        return self.error.text() if self.error is not None else ""

    def status(self, party: str, *, show_result: bool, owner: bool = False) -> pb.JobStatus:
        """This node's status of the job; ``owner``: the caller is the node's own owner
        on its own host, who also reads the local cause of a refusal."""
        running = self.state == pb.JOB_STATE_RUNNING
        error = self.error_text()
        if owner and self.cause and error:
            error = with_local_cause(error, self.cause)
        msg = pb.JobStatus(
            job_id=self.job_id,
            party=party,
            state=self.state,  # type: ignore[arg-type]
            error=error,
            wall_time_s=time.perf_counter() - self.started if running else self.wall_time_s,
            rule=self.rule,
        )
        if self.error is not None:
            msg.error_code = self.error.code
            msg.error_party = self.error.party
            msg.error_step = self.error.step
        if self.state == pb.JOB_STATE_SUCCEEDED:
            if show_result:
                msg.result.CopyFrom(to_struct(self.result))
            else:
                msg.result_withheld = True
        steps = self.endpoint.metrics.as_list() if self.endpoint is not None else self.metrics
        for step in steps:
            msg.metrics.add(**step)
        return msg

    def record(self) -> dict[str, Any]:
        """What the ledger's job table keeps (survives a restart)."""
        steps = self.endpoint.metrics.as_list() if self.endpoint is not None else self.metrics
        return {
            "job_id": self.job_id,
            "protocol": self.protocol,
            "initiator": self.initiator,
            "parties": list(self.parties),
            "params": self.params,
            "state": STATE_NAMES[self.state],
            "result": self.result,
            "error": self.error.as_dict() if self.error is not None else None,
            "rule": self.rule,
            "reason": self.reason,
            "results_to": self.results_to,
            "wall_time_s": self.wall_time_s,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "metrics": steps,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Job:
        err = rec.get("error") or None
        job = cls(
            job_id=rec["job_id"],
            protocol=rec.get("protocol", ""),
            params=rec.get("params", {}),
            initiator=rec.get("initiator", ""),
            parties=tuple(rec.get("parties", ())),
            timeout_s=0.0,
            state=_STATE_VALUES.get(rec.get("state", ""), pb.JOB_STATE_FAILED),
            result=rec.get("result"),
            error=PublicError(err["code"], err["party"], err.get("step", "")) if err else None,
            rule=rec.get("rule", ""),
            reason=rec.get("reason", ""),
            wall_time_s=float(rec.get("wall_time_s", 0.0)),
            started_at=float(rec.get("started_at", 0.0)),
            ended_at=float(rec.get("ended_at", 0.0)),
            metrics=list(rec.get("metrics", [])),
        )
        from ppdm.service.policy_decision import Decision  # not at a node's start

        job.decision = Decision("accept", results=rec.get("results_to", "members"))
        job.done.set()
        return job
