"""The initiator's and the owner's side of the job service (``ppdm job ...``).

:func:`run_job` starts a job at every node and returns the job document of
``docs/jobs.md``, in two phases:

1. ``ProposeJob`` at every member: each node answers accepted, pending (its owner must
   approve) or refused, from its own policy (:mod:`ppdm.service.node`). The request
   carries the initiator's signed ledger head and each answer the member's; the
   initiator's ledger keeps the members' heads (``docs/ledger.md``).
2. If any member refused (or did not answer), ``CancelJob`` at every other member: the
   job ends everywhere at once, and the document names the refusing party and rule.
   While members are pending, the initiator waits (``on_wait`` is told whom it waits
   for) until each approves, rejects or expires. Once all accepted, ``StartJob``
   everywhere, then ``GetJobStatus`` until every party is done.

:func:`pending_jobs` and :func:`decide_job` are the owner's calls to its *own* node
(``ppdm job pending``, ``approve``, ``reject``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc

from ppdm.errors import ConfigError
from ppdm.jobs.registry import get_job
from ppdm.parties.consortium import Consortium, PartySettings
from ppdm.parties.grpc_net import open_channel
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.service.jobstate import _check_depth
from ppdm.service.ledger import head_to_proto, record_peer_heads, signed_head_of_file
from ppdm.service.node import MAX_TIMEOUT_S, STATE_NAMES, from_struct, to_struct

__all__ = [
    "CERT_WARNING_DAYS",
    "JOB_SCHEMA",
    "NodeClient",
    "certificate_warnings",
    "decide_job",
    "health",
    "job_status",
    "pending_jobs",
    "root_cause",
    "run_job",
]

log = logging.getLogger(__name__)

JOB_SCHEMA = "ppdm.job/1"
STATUS_TIMEOUT_S = 2.0  # one GetJobStatus call, beyond its long-poll wait
STATUS_WAIT_S = 1.0  # how long a node may hold a status call while the job runs
SILENT_GRACE_S = 4.0  # a silent node's grace once every other party has finished


class NodeClient:
    """mTLS channels from one party to every node of its consortium (the CLI's client)."""

    def __init__(self, settings: PartySettings) -> None:
        self.settings = settings
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, party_pb2_grpc.PartyStub] = {}

    def stub(self, party: str) -> party_pb2_grpc.PartyStub:
        """The stub of ``party``'s node (its channel opened on first use; built once:
        a stub makes one callable per RPC of the service)."""
        stub = self._stubs.get(party)
        if stub is None:
            ch = self._channels.get(party)
            if ch is None:
                ch = self._channels[party] = open_channel(self.settings, party)
            stub = self._stubs[party] = party_pb2_grpc.PartyStub(ch)
        return stub

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
        self._stubs.clear()

    def __enter__(self) -> NodeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _rpc_error(exc: grpc.RpcError) -> str:
    code = exc.code() if hasattr(exc, "code") else None  # type: ignore[attr-defined]
    details = exc.details() if hasattr(exc, "details") else str(exc)  # type: ignore[attr-defined]
    return f"{code.name if code else 'UNKNOWN'}: {details}"


CERT_WARNING_DAYS = 30


def certificate_warnings(settings: PartySettings, *, days: int = CERT_WARNING_DAYS) -> list[str]:
    """One line per roster certificate that has expired or expires within ``days``."""
    now = _dt.datetime.now(_dt.UTC)
    out = []
    for entry in settings.consortium.parties:
        if entry.not_after is None:
            continue
        left = (entry.not_after - now).total_seconds() / 86400
        if left < 0:
            out.append(f"the certificate of {entry.name!r} expired on {entry.not_after:%Y-%m-%d}")
        elif left <= days:
            out.append(
                f"the certificate of {entry.name!r} expires on {entry.not_after:%Y-%m-%d} "
                f"(in {left:.0f} days)"
            )
    return out


def health(
    settings: PartySettings, *, timeout: float = 5.0, only_self: bool = False
) -> dict[str, dict[str, Any]]:
    """Ask every node of the consortium (``only_self``: this party's own node) for its
    health, as ``settings``' party; each record also holds the party's certificate
    expiry (``certificate_expires``, ``certificate_days_left``)."""
    out: dict[str, dict[str, Any]] = {}
    now = _dt.datetime.now(_dt.UTC)
    names = (settings.name,) if only_self else settings.consortium.names
    with NodeClient(settings) as client:
        for party in names:
            entry = settings.consortium.party(party)
            problem = entry.validity_problem()
            if problem is not None:
                out[party] = {"ok": False, "error": problem}
                _add_expiry(out[party], entry, now)
                continue
            try:
                reply = client.stub(party).Health(pb.HealthRequest(), timeout=timeout)
                out[party] = {
                    "ok": reply.party == party,
                    "party": reply.party,
                    "consortium": reply.consortium,
                    "version": reply.version,
                    "running_jobs": list(reply.running_jobs),
                    "roster_version": reply.roster_version,
                    "same_roster": reply.roster_version == settings.consortium.version,
                }
            except grpc.RpcError as exc:
                out[party] = {"ok": False, "error": _rpc_error(exc)}
            _add_expiry(out[party], entry, now)
    return out


def push_roster(
    settings: PartySettings, roster: Consortium, *, timeout: float = 5.0
) -> dict[str, dict[str, Any]]:
    """Hand ``roster`` (signed by the CA) to every member it lists, as ``settings``'
    party; each node takes it only if it is newer than its own. Per party: ``accepted``,
    the node's ``version`` afterwards and the ``reason`` it gave, or the call's ``error``.

    The calls dial with the *new* roster's pins, so a member whose certificate was
    rotated answers once it runs with its new key (reload it with SIGHUP first).
    """
    from dataclasses import replace

    from ppdm.parties.roster import roster_toml

    text = roster_toml(roster)
    dialer = replace(settings, consortium=roster) if settings.name in roster.names else settings
    out: dict[str, dict[str, Any]] = {}
    with NodeClient(dialer) as client:
        for party in roster.names:
            try:
                reply = client.stub(party).PushRoster(
                    pb.RosterUpdate(roster_toml=text), timeout=timeout
                )
                out[party] = {
                    "accepted": reply.accepted,
                    "version": reply.version,
                    "reason": reply.reason,
                    "ok": reply.accepted or reply.version == roster.version,
                }
            except grpc.RpcError as exc:
                out[party] = {"ok": False, "error": _rpc_error(exc)}
    return out


def _add_expiry(record: dict[str, Any], entry: Any, now: _dt.datetime) -> None:
    if entry.not_after is not None:
        record["certificate_expires"] = entry.not_after.isoformat(timespec="seconds")
        record["certificate_days_left"] = round((entry.not_after - now).total_seconds() / 86400, 1)


_TOTALS = ("messages_sent", "messages_received", "bytes_sent", "bytes_received")


def _party_record(status: pb.JobStatus) -> dict[str, Any]:
    metrics = [
        {
            "step": m.step,
            "messages_sent": m.messages_sent,
            "messages_received": m.messages_received,
            "bytes_sent": m.bytes_sent,
            "bytes_received": m.bytes_received,
            "wall_time_s": round(m.wall_time_s, 6),
        }
        for m in status.metrics
    ]
    state = STATE_NAMES[status.state]
    result = None
    error = status.error or None
    if status.state == pb.JOB_STATE_SUCCEEDED and not status.result_withheld:
        try:
            result = from_struct(status.result, "job result")
        except ValueError as exc:
            state, error = "failed", f"node returned a bad result: {exc}"
    record: dict[str, Any] = {
        "state": state,
        "result": result,
        "error": error,
        "wall_time_s": round(status.wall_time_s, 6),
        "metrics": metrics,
        "totals": {k: sum(m[k] for m in metrics) for k in _TOTALS},
    }
    if status.error_code:
        record["error_code"] = status.error_code
        record["error_party"] = status.error_party
        record["error_step"] = status.error_step
    if status.rule:
        record["rule"] = status.rule
    if status.result_withheld:
        record["result_withheld"] = True
    return record


def _failed_record(error: str, *, state: str = "failed") -> dict[str, Any]:
    return {
        "state": state,
        "result": None,
        "error": error,
        "wall_time_s": 0.0,
        "metrics": [],
        "totals": dict.fromkeys(_TOTALS, 0),
    }


def job_status(
    settings: PartySettings,
    job_id: str,
    *,
    parties: Sequence[str] | None = None,
    timeout: float = 5.0,
) -> dict[str, dict[str, Any]]:
    """Each node's record of job ``job_id`` (state, result, error, metrics)."""
    names = settings.consortium.order(list(parties or settings.consortium.names))
    out = {}
    with NodeClient(settings) as client:
        for p in names:
            try:
                out[p] = _party_record(
                    client.stub(p).GetJobStatus(pb.JobStatusRequest(job_id=job_id), timeout=timeout)
                )
            except grpc.RpcError as exc:
                out[p] = _failed_record(f"node unreachable ({_rpc_error(exc)})")
    return out


def _own_head(settings: PartySettings) -> pb.LedgerHead | None:
    """The initiator's ledger head, signed with its party key, for the job request
    (``None`` if its node's ledger is not on this machine; docs/ledger.md)."""
    try:
        head = signed_head_of_file(settings)
    except (ConfigError, OSError) as exc:
        log.warning("ledger head not sent: %s", exc)
        return None
    return head_to_proto(head) if head is not None else None


def _keep_heads(settings: PartySettings, heads: Mapping[str, Any]) -> None:
    """Record the signed heads the members answered with in the initiator's ledger
    (conflicts and bad signatures are chained and logged there; never fatal to the job)."""
    try:
        record_peer_heads(settings, heads)
    except (ConfigError, OSError, sqlite3.Error) as exc:
        log.warning("peer ledger heads not recorded: %s", exc)


def run_job(
    settings: PartySettings,
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    timeout: float | None = None,
    parties: Sequence[str] | None = None,
    deadline: float | None = None,
    job_id: str | None = None,
    unreachable_after_s: float = 3.0,
    on_wait: Callable[[list[str], float], None] | None = None,
) -> dict[str, Any]:
    """Start job ``name`` at every node as ``settings``' party and wait for the outcome.

    Parameters
    ----------
    settings
        The initiator's settings (its certificate authenticates the calls).
    name, params
        The job and its public parameters (checked against the job's defaults here, and
        again at every node).
    timeout
        Each receive's timeout at every node (default: the initiator's
        ``node.job_timeout_s``).
    parties
        The job's members (default: the whole roster); must include the initiator.
    deadline
        Stop waiting after this many seconds, approvals included (default: wait until
        every node is done, refused, expired or unreachable).
    on_wait
        Called while members' owners have not approved yet, with those members and the
        seconds waited so far.

    Returns
    -------
    dict
        The job document (schema ``ppdm.job/1`` in ``docs/jobs.md``); ``state`` is
        ``"succeeded"`` only if every party succeeded, ``"refused"`` if a member's
        policy or owner refused it (``decisions`` holds every member's answer).
    """
    spec = get_job(name)
    merged = spec.params(params)
    _check_depth(merged)
    try:
        json.dumps(merged)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"job parameters must be JSON values ({exc})") from None
    consortium = settings.consortium
    # By default every member whose certificate is valid now; a member whose certificate
    # expired is left out (and refused by name if listed explicitly).
    members = consortium.order(list(parties) if parties else list(consortium.active_names()))
    for p in members:
        problem = consortium.party(p).validity_problem()
        if problem is not None:
            raise ConfigError(f"{problem}: leave it out of --parties or renew it")
    if settings.name not in members:
        raise ConfigError(f"the initiator {settings.name!r} must be a member of the job")
    wait = float(timeout if timeout is not None else settings.job_timeout_s)
    if not 0 < wait <= MAX_TIMEOUT_S:
        raise ConfigError(f"--timeout must be in (0, {MAX_TIMEOUT_S:g}] seconds")
    job_id = job_id or uuid.uuid4().hex
    request = pb.JobRequest(
        consortium=consortium.name,
        job_id=job_id,
        protocol=spec.name,
        params=to_struct(dict(merged)),
        initiator=settings.name,
        parties=list(members),
        timeout_s=wait,
        roster_version=consortium.version,
    )
    own_head = _own_head(settings)
    if own_head is not None:
        request.initiator_head.CopyFrom(own_head)
    started_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    records: dict[str, dict[str, Any]] = {}
    decisions: dict[str, dict[str, Any]] = {}

    def document() -> dict[str, Any]:
        failed = [p for p in members if records[p]["state"] != "succeeded"]
        refused = [p for p in members if records[p]["state"] == "refused"]
        state = "refused" if refused else ("failed" if failed else "succeeded")
        return {
            "schema": JOB_SCHEMA,
            "job_id": job_id,
            "protocol": spec.name,
            "params": dict(merged),
            "network": "grpc",
            "ok": not failed,
            "state": state,
            "failed_party": refused[0]
            if refused
            else root_cause({p: records[p]["error"] for p in failed}),
            "failed_parties": failed,
            "error": "; ".join(f"{p}: {records[p]['error']}" for p in failed) or None,
            "consortium": consortium.name,
            "initiator": settings.name,
            "timeout_s": wait,
            "started_at": started_at,
            "wall_time_s": round(time.perf_counter() - t0, 6),
            "decisions": decisions,
            "parties": {p: records[p] for p in members},
        }

    def over_deadline() -> bool:
        return deadline is not None and time.perf_counter() - t0 > deadline

    with NodeClient(settings) as client:
        # Phase 1: every member decides (the calls go out at once: one round trip).
        waiting: list[str] = []
        proposals = {p: client.stub(p).ProposeJob.future(request, timeout=30.0) for p in members}
        heads: dict[str, Any] = {}
        for p in members:
            try:
                d = proposals[p].result()
            except grpc.RpcError as exc:
                decisions[p] = {"decision": "error", "rule": "", "reason": _rpc_error(exc)}
                records[p] = _failed_record(f"job not accepted: {_rpc_error(exc)}")
                continue
            if d.HasField("head"):
                heads[p] = d.head
            outcome = {
                pb.DECISION_ACCEPTED: "accepted",
                pb.DECISION_PENDING: "pending",
            }.get(d.decision, "refused")
            decisions[p] = {"decision": outcome, "rule": d.rule, "reason": d.reason}
            if outcome == "refused":
                records[p] = _failed_record(
                    f"refused by rule {d.rule!r}: {d.reason}", state="refused"
                )
                records[p]["rule"] = d.rule
            elif outcome == "pending":
                waiting.append(p)
        _keep_heads(settings, heads)
        # Wait for the owners of pending members.
        delay = 0.1
        while waiting and not records:
            if over_deadline():
                for p in waiting:
                    records[p] = _failed_record(
                        f"not approved within the {deadline:g} s deadline", state="refused"
                    )
                break
            if on_wait is not None:
                on_wait(list(waiting), time.perf_counter() - t0)
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)
            asked = {
                p: client.stub(p).GetJobStatus.future(
                    pb.JobStatusRequest(job_id=job_id), timeout=5.0
                )
                for p in waiting
            }
            # The members that accepted keep the job while its initiator asks about it
            # (their [limits] accepted_job_ttl_s is shorter than a consent deadline).
            kept = {
                p: client.stub(p).GetJobStatus.future(
                    pb.JobStatusRequest(job_id=job_id), timeout=5.0
                )
                for p in members
                if p not in waiting and p not in records
            }
            for p, call in kept.items():
                with contextlib.suppress(grpc.RpcError):  # unreachable: StartJob tells
                    st = call.result()
                    if st.state != pb.JOB_STATE_ACCEPTED:
                        records[p] = _party_record(st)
            for p in list(waiting):
                try:
                    st = asked[p].result()
                except grpc.RpcError as exc:
                    records[p] = _failed_record(f"node unreachable ({_rpc_error(exc)})")
                    waiting.remove(p)
                    continue
                if st.state == pb.JOB_STATE_ACCEPTED:
                    decisions[p] = {"decision": "approved", "rule": "consent", "reason": ""}
                    waiting.remove(p)
                elif st.state != pb.JOB_STATE_PENDING:
                    decisions[p] = {"decision": "refused", "rule": st.rule, "reason": st.error}
                    records[p] = _party_record(st)
                    records[p]["state"] = "refused"
                    waiting.remove(p)
        if records:
            # Someone refused or failed to answer: withdraw the job everywhere else.
            for p in members:
                if p in records:
                    continue
                try:
                    client.stub(p).CancelJob(pb.JobRef(job_id=job_id), timeout=5.0)
                    records[p] = _failed_record(
                        "cancelled: another party did not accept", state="cancelled"
                    )
                except grpc.RpcError as exc:
                    records[p] = _failed_record(
                        f"cancel failed ({_rpc_error(exc)})", state="cancelled"
                    )
            return document()
        # Phase 2: start everywhere, at once.
        pending: list[str] = []
        starts = {
            p: client.stub(p).StartJob.future(pb.JobRef(job_id=job_id), timeout=10.0)
            for p in members
        }
        for p in members:
            try:
                starts[p].result()
                pending.append(p)
            except grpc.RpcError as exc:
                records[p] = _failed_record(f"job not started: {_rpc_error(exc)}")
        if records:
            for p in pending:
                with contextlib.suppress(grpc.RpcError):
                    client.stub(p).CancelJob(pb.JobRef(job_id=job_id), timeout=5.0)
        first_error: dict[str, float] = {}
        delay = 0.02
        quick = False
        # A silent node is named within 2 T for every T >= 1 s (issue 23): below their
        # defaults, the long poll, the poll's own timeout and the grace scale with T.
        status_wait = min(STATUS_WAIT_S, wait / 8)
        status_timeout = min(STATUS_TIMEOUT_S, max(wait / 8, 0.25))
        silent_grace = min(SILENT_GRACE_S, wait / 4)
        while pending:
            if over_deadline():
                for p in pending:
                    records[p] = _failed_record(f"still running after the {deadline:g} s deadline")
                break
            if quick:  # the last answers came back at once: do not spin
                time.sleep(delay)
                delay = min(delay * 1.5, 0.25)
            # Long polls, all at once: each node answers when its side ends (or after
            # STATUS_WAIT_S), so the outcome arrives half a round trip after the job ends.
            asked_at = time.perf_counter()
            polls = {
                p: client.stub(p).GetJobStatus.future(
                    pb.JobStatusRequest(job_id=job_id, wait_s=status_wait),
                    timeout=status_timeout + status_wait,
                )
                for p in pending
            }
            finished_any = False
            # The answers first, then the calls that failed: a silent node is judged
            # knowing whether every other party has finished in this round.
            for p in sorted(pending, key=lambda q: polls[q].exception() is not None):
                try:
                    status = polls[p].result()
                except grpc.RpcError as exc:
                    # A refused connection is a dead node. A node that stops answering
                    # (timeouts: frozen, overloaded) is given the job timeout -- its peers'
                    # receives fail within it -- and once every other party has finished,
                    # only a short grace more: a silent node is named within about T.
                    since = first_error.setdefault(p, time.perf_counter())
                    refused = exc.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
                    others_done = all(q == p or q not in pending for q in members)
                    limit = (
                        unreachable_after_s
                        if refused
                        else (silent_grace if others_done else max(wait, unreachable_after_s))
                    )
                    if time.perf_counter() - since >= limit:
                        what = "unreachable" if refused else "not answering"
                        records[p] = _failed_record(
                            f"node {what} during the job ({_rpc_error(exc)})"
                        )
                        pending.remove(p)
                    continue
                first_error.pop(p, None)
                if status.state == pb.JOB_STATE_RUNNING:
                    continue
                finished_any = True
                if status.state in (pb.JOB_STATE_UNKNOWN, pb.JOB_STATE_UNSPECIFIED):
                    records[p] = _failed_record("node lost the job (restarted?)")
                else:
                    records[p] = _party_record(status)
                pending.remove(p)
            quick = not finished_any and time.perf_counter() - asked_at < status_wait / 2
    return document()


_NAMES_PARTY = re.compile(r"^([a-z_]+): party '([^']+)'")


def root_cause(errors: Mapping[str, str | None]) -> str | None:
    """The party that most likely caused a job's failure, from each failed party's error
    (the public form ``CODE: party 'NAME' at step ...`` of :class:`ppdm.errors.PublicError`).

    A party that failed on its own (its job raised, its node was unreachable) comes first;
    else the party a ``protocol_error`` names (it sent bad data); else the party most
    errors name.

    >>> root_cause({"alice": "party_failure: party 'bob' at step 's' (...)",
    ...             "bob": "node unreachable during the job"})
    'bob'
    >>> root_cause({"alice": "protocol_error: party 'carol' at step 's' (...)",
    ...             "carol": "party_failure: party 'alice' at step '' (...)"})
    'carol'
    """
    named: dict[str, tuple[str, str] | None] = {}
    for party, error in errors.items():
        m = _NAMES_PARTY.match(error or "")
        named[party] = (m.group(1), m.group(2)) if m and m.group(2) != party else None
    for party, who in named.items():
        # A party whose job was only cancelled (another member did not start it) did
        # not cause the failure.
        if who is None and not (errors[party] or "").startswith("cancelled"):
            return party
    for who in named.values():
        if who is not None and who[0] == "protocol_error":
            return who[1]
    counts: dict[str, int] = {}
    for who in named.values():
        if who is not None:
            counts[who[1]] = counts.get(who[1], 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else None


# The owner's calls ---------------------------------------------------------------------------


def pending_jobs(settings: PartySettings, *, timeout: float = 5.0) -> list[dict[str, Any]]:
    """The jobs waiting for this party's approval at its own node."""
    with NodeClient(settings) as client:
        try:
            reply = client.stub(settings.name).ListPending(pb.PendingRequest(), timeout=timeout)
        except grpc.RpcError as exc:
            raise ConfigError(f"cannot reach this party's node: {_rpc_error(exc)}") from None
    return [
        {
            "job_id": j.job_id,
            "protocol": j.protocol,
            "initiator": j.initiator,
            "parties": list(j.parties),
            "params": json.loads(j.params_json or "{}"),
            "leakage": j.leakage,
            "expires_in_s": round(j.expires_in_s, 1),
            "age_s": round(j.age_s, 1),
        }
        for j in reply.jobs
    ]


def decide_job(
    settings: PartySettings, job_id: str, *, approve: bool, reason: str = "", timeout: float = 5.0
) -> dict[str, Any]:
    """Approve or reject a pending job at this party's own node; its new status."""
    with NodeClient(settings) as client:
        try:
            status = client.stub(settings.name).DecideJob(
                pb.OwnerDecision(job_id=job_id, approve=approve, reason=reason), timeout=timeout
            )
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None  # type: ignore[attr-defined]
            details = exc.details() if hasattr(exc, "details") else str(exc)  # type: ignore[attr-defined]
            if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
                raise ConfigError(details) from None
            raise ConfigError(f"cannot reach this party's node: {_rpc_error(exc)}") from None
    return _party_record(status)
