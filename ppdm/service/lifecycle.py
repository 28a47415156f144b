"""The job lifecycle at a node: a proposal's own checks and this node's decision on
it (with the cross-job audit's questions to co-members), the owner's consent (pending
jobs, their notification, approval, rejection and expiry), the start (this node's slots
and each initiator's share), the run in a worker thread, cancellation, and the ledger
record and status of every job, also after a restart.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import grpc

from ppdm.errors import ConfigError, PPDMError, PublicError
from ppdm.parties.consortium import NodeLimits, reload_party_tables
from ppdm.progress import job_log_context
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.service.decision import AuditHistoryUnavailable, decide
from ppdm.service.disclosure import DisclosureAuditor
from ppdm.service.host import trim_heap
from ppdm.service.jobstate import (
    _DONE_STATES,
    _OPEN_STATES,
    STATE_NAMES,
    Job,
    _check_depth,
    from_struct,
    owner_cause,
)
from ppdm.service.peers import NodePeers
from ppdm.service.policy import PolicyFile

if TYPE_CHECKING:  # the job registry and the jobs' leakage: a node's first job imports them
    from ppdm.jobs.registry import PartyContext
    from ppdm.service.policy_decision import Decision
    from ppdm.service.profiles import Disclosure

log = logging.getLogger(__name__)

MAX_RUNNING_JOBS = NodeLimits.max_running_jobs  # the default; settings [limits] override
#: Finished jobs kept in memory for status calls (older ones are read from the ledger's
#: job table): a node's memory does not grow with the number of jobs it ran.
MAX_FINISHED_JOBS = 64
MAX_TIMEOUT_S = 7 * 24 * 3600.0
#: An accepted job the initiator never starts is dropped after this (the default of
#: ``[limits] accepted_job_ttl_s``; the initiator's polls extend it while it waits for
#: other members' owners, up to the longest consent deadline).
ACCEPTED_TTL_S = NodeLimits.accepted_job_ttl_s
MAX_NOTIFY_RUNNING = 4  # pending-job notification commands running at once
SETTINGS_RULE = "settings"  # the refusal's rule when this party's settings cannot be read
AUDIT_HISTORY_TIMEOUT_S = 5.0  # a loaded peer answers well within; none: refused
FAILED_DRAIN_S = 2.0  # how long a failed job waits for its outgoing streams to close
MAX_AUDIT_HISTORY = 10_000


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class JobLifecycle(NodePeers):
    """The jobs' part of :class:`~ppdm.service.node.PartyNode` (a mixin of it, over the
    peers' part: the attributes below are set by ``PartyNode.__init__``)."""

    policy: PolicyFile
    auditor: DisclosureAuditor
    _rate: dict[str, deque[float]]
    _ended: deque[tuple[float, str]]
    _notify_slots: threading.BoundedSemaphore
    _audit_pool: ThreadPoolExecutor | None

    # Phase 1: proposal ---------------------------------------------------------------------

    def _context(self) -> PartyContext:
        """The job's view of this party: ``[inputs]`` and ``[data]`` re-read from the
        settings file for every job (a new data file needs no restart)."""
        try:
            raw = reload_party_tables(self.settings)
        except ConfigError as exc:
            log.error("cannot re-read this party's inputs and data: %s", exc)
            public = ConfigError(
                "this party's settings cannot be read now; its owner must fix them"
            )
            public.cause = owner_cause(exc)  # type: ignore[attr-defined]  # owner only
            raise public from None
        from ppdm.jobs.registry import PartyContext

        return PartyContext(name=self.name, settings=raw, base_dir=self.settings.base_dir)

    def _check_request(
        self, request: pb.JobRequest, caller: str
    ) -> tuple[tuple[str, ...], float, dict[str, Any]]:
        """The request's own checks (raise ConfigError / PermissionError)."""
        if request.consortium != self.consortium.name:
            raise ConfigError(
                f"job is for consortium {request.consortium!r}, this node is in "
                f"{self.consortium.name!r}"
            )
        if request.initiator != caller:
            raise PermissionError(
                f"party {caller!r} cannot start a job on behalf of {request.initiator!r}"
            )
        job_id = request.job_id
        if not job_id or len(job_id) > 128 or not job_id.isascii():
            raise ConfigError("job id must be 1 to 128 ASCII characters")
        if request.roster_version != self.consortium.version:
            raise ConfigError(
                f"roster version mismatch: the initiator {caller!r} holds roster version "
                f"{request.roster_version}, {self.name!r} holds version "
                f"{self.consortium.version} (push the newer roster: ppdm consortium push)"
            )
        if self.removed:
            raise ConfigError(f"{self.name!r} is not a member of the consortium's roster")
        parties = self.consortium.order(
            list(request.parties) or list(self.consortium.active_names())
        )
        for p in parties:
            problem = self.consortium.party(p).validity_problem()
            if problem is not None:
                raise ConfigError(f"{problem}: it cannot take part in jobs")
        if self.name not in parties:
            raise ConfigError(f"party {self.name!r} is not a member of job {job_id!r}")
        if caller not in parties:
            raise PermissionError(f"initiator {caller!r} is not a member of job {job_id!r}")
        timeout = request.timeout_s or self.settings.job_timeout_s
        if not 0 < timeout <= MAX_TIMEOUT_S:
            raise ConfigError(f"job timeout must be in (0, {MAX_TIMEOUT_S:g}] s")
        from ppdm.jobs.registry import get_job

        spec = get_job(request.protocol)
        try:
            given = from_struct(request.params, "job parameters")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if not isinstance(given, dict):
            raise ConfigError("job parameters must be a JSON object")
        _check_depth(given)
        return parties, float(timeout), spec.params(given)

    def decide(
        self,
        *,
        job_id: str,
        protocol: str,
        params: dict[str, Any],
        initiator: str,
        parties: Sequence[str],
        reserve: bool,
        ctx: PartyContext | None = None,
    ) -> tuple[Decision, Disclosure | None, dict[str, Any] | None]:
        """This node's decision on a job (see :func:`decide`), on ``ctx`` (default: the
        party's inputs and data as they are now)."""
        policy = self.policy.current()
        return decide(
            policy,
            auditor=self.auditor,
            ctx=ctx if ctx is not None else self._context(),
            job_id=job_id,
            protocol=protocol,
            params=params,
            initiator=initiator,
            parties=parties,
            recent_by_initiator=self._recent(initiator, policy.rules(protocol).rate_per_s),
            reserve=reserve,
            peer_history=self._peer_history,
        )

    def _peer_history(self, peers: Sequence[str], input_key: str) -> list[dict[str, Any]]:
        """What ``peers`` report of their audited sums on ``input_key``, asked in
        parallel. A peer that does not answer in time raises
        :class:`~ppdm.service.decision.AuditHistoryUnavailable` after all have been
        asked: the audit fails closed rather than rest on the histories it could read."""
        request = pb.AuditHistoryRequest(input_key=input_key)

        def ask(peer: str) -> Any:
            stub = party_pb2_grpc.PartyStub(self.channel(peer))
            return stub.AuditHistory(request, timeout=AUDIT_HISTORY_TIMEOUT_S)

        # Blocking calls on the node's own small pool: a gRPC future starts a thread per
        # call, which cost more than the round trip itself on loopback.
        with self._cond:
            if self._audit_pool is None:
                self._audit_pool = ThreadPoolExecutor(
                    max_workers=8, thread_name_prefix=f"audit-{self.name}"
                )
            pool = self._audit_pool
        calls = [(peer, pool.submit(ask, peer)) for peer in peers]
        names = set(self.consortium.names)
        out = []
        missing = []
        for peer, call in calls:
            try:
                reply = call.result()
            except grpc.RpcError as exc:
                log.warning("audit history from %s not available: %s", peer, exc.code())  # type: ignore[attr-defined]
                if exc.code() == grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
                    self.reset_channel(peer)
                missing.append(peer)
                continue
            for q in reply.queries[:MAX_AUDIT_HISTORY]:
                parties = list(q.parties)
                kind = q.kind or "sum"
                if (
                    q.job_id
                    and len(q.job_id) <= 128
                    and parties
                    and set(parties) <= names
                    and kind in ("sum", "union")
                ):
                    out.append({"job_id": q.job_id, "kind": kind, "parties": parties})
        if missing:
            raise AuditHistoryUnavailable(missing)
        return out

    def audit_history(self, input_key: str) -> list[dict[str, Any]]:
        """This node's audited sums on its current version of ``input_key``."""
        table, _, name = input_key.partition(".")
        if table not in ("inputs", "data") or not name or len(input_key) > 128:
            return []
        from ppdm.service.profiles import input_identity, input_version

        try:
            ctx = self._context()
            version = input_version(ctx, input_key)
            identity = input_identity(ctx, input_key)
        except (PPDMError, OSError, ValueError):
            return []
        return self.auditor.shareable(input_key, version, identity)[-MAX_AUDIT_HISTORY:]

    def _recent(self, initiator: str, window_s: float) -> int:
        now = time.monotonic()
        with self._cond:
            times = self._rate.get(initiator)
            if not times:
                return 0
            while times and now - times[0] > window_s:
                times.popleft()
            return len(times)

    def propose_job(self, request: pb.JobRequest, caller: str) -> Job:
        """Phase 1 (``ProposeJob``): decide on a job; returns it accepted, pending or
        refused. Raises :class:`ConfigError` / :class:`PermissionError` for a bad
        request, :class:`FileExistsError` for a known id."""
        with job_log_context(request.job_id[:128]):
            return self._propose_job(request, caller)

    def _propose_job(self, request: pb.JobRequest, caller: str) -> Job:
        self._expire()
        try:
            parties, timeout, params = self._check_request(request, caller)
        except (ConfigError, PermissionError) as exc:
            self.ledger.append(
                "request",
                {
                    "protocol": request.protocol,
                    "initiator": caller,
                    "parties": list(request.parties),
                    "decision": "invalid",
                    "reason": str(exc)[:500],
                },
                job_id=request.job_id[:128],
            )
            raise
        from ppdm.jobs.registry import get_job  # imported by _check_request already

        job_id = request.job_id
        with self._cond:
            known = job_id in self._jobs or job_id in self._endpoints
        if known or self.ledger.load_job(job_id):
            self.ledger.append(
                "request",
                {
                    "protocol": request.protocol,
                    "initiator": caller,
                    "parties": list(parties),
                    "decision": "invalid",
                    "reason": "a job with this id exists already",
                },
                job_id=job_id,
            )
            raise FileExistsError(f"job {job_id!r} already exists at {self.name!r}")
        ctx: PartyContext | None = None
        try:
            ctx = self._context()
        except ConfigError as exc:
            # This party's own settings are unreadable (invalid TOML, a bad [data] entry):
            # a refusal by this node, recorded like any other, naming this party.
            from ppdm.service.policy_decision import Decision

            decision = Decision("refuse", SETTINGS_RULE, str(exc))
            disclosure, audit = None, None
        else:
            decision, disclosure, audit = self.decide(
                job_id=job_id,
                protocol=request.protocol,
                params=params,
                initiator=caller,
                parties=parties,
                reserve=True,
                ctx=ctx,
            )
        state = {
            "accept": pb.JOB_STATE_ACCEPTED,
            "pending": pb.JOB_STATE_PENDING,
            "refuse": pb.JOB_STATE_REFUSED,
        }[decision.outcome]
        now = time.monotonic()
        job = Job(
            job_id=job_id,
            protocol=get_job(request.protocol).name,
            params=params,
            initiator=caller,
            parties=parties,
            timeout_s=timeout,
            state=state,
            decision=decision,
            disclosure=disclosure,
            audit=audit,
            rule=decision.rule,
            reason=decision.reason,
            cause=decision.cause,
            expires=now
            + (
                decision.expires_s
                if decision.outcome == "pending"
                else self.limits.accepted_job_ttl_s
            ),
            context=ctx,
        )
        if decision.refused:
            job.error = PublicError("refused", self.name)
            job.done.set()
        self.metrics.job(job.protocol, STATE_NAMES[state])
        with self._cond:
            if job_id in self._jobs:
                raise FileExistsError(f"job {job_id!r} already exists at {self.name!r}")
            self._jobs[job_id] = job
            if not decision.refused:
                self._rate.setdefault(caller, deque()).append(now)
            self._trim_jobs()
        self.ledger.append(
            "request",
            {
                "protocol": job.protocol,
                "initiator": caller,
                "parties": list(parties),
                "params": params,
                "leakage": disclosure.as_dict() if disclosure is not None else None,
                "decision": decision.outcome,
                "rule": decision.rule,
                "reason": decision.reason,
                "audit": audit,
            },
            job_id=job_id,
        )
        self.ledger.save_job(job_id, job.record())
        if job.state == pb.JOB_STATE_PENDING:
            self._notify_pending(job)
        log.info(
            "job %s (%s) from %s with parties %s: %s%s",
            job_id,
            job.protocol,
            caller,
            list(parties),
            decision.outcome,
            f" by rule {decision.rule!r}" if decision.rule else "",
        )
        return job

    # Phase 2: start ------------------------------------------------------------------------

    def start_job(self, job_id: str, caller: str) -> Job:
        """Phase 2 (``StartJob``): run an accepted job. Raises :class:`PermissionError`
        (not the initiator), :class:`LookupError` (unknown job), :class:`RuntimeError`
        (not accepted: refused, pending, cancelled, expired or started already) or
        :class:`OverflowError` (too many running jobs)."""
        self._expire()
        with self._cond:
            job = self._jobs.get(job_id)
            if job is None:
                raise LookupError(f"job {job_id!r} was not proposed at {self.name!r}")
            if caller != job.initiator:
                raise PermissionError(f"only the initiator may start job {job_id!r}")
            if job.state != pb.JOB_STATE_ACCEPTED:
                raise RuntimeError(
                    f"job {job_id!r} is {STATE_NAMES[job.state]} at {self.name!r}, not accepted"
                )
            self._check_slots(job)
            job.state = pb.JOB_STATE_RUNNING
        try:
            endpoint, links = self.open_endpoint(job_id, job.parties, timeout=job.timeout_s)
        except ValueError as exc:  # the same id started twice at once
            raise RuntimeError(str(exc)) from None
        job.endpoint, job.links = endpoint, links
        job.started = time.perf_counter()
        job.started_at = time.time()
        self.metrics.job(job.protocol, "started")
        self.auditor.record(job_id)  # a started job's answer counts, whatever its outcome
        self.ledger.append("start", {"parties": list(job.parties)}, job_id=job_id)
        self.ledger.save_job(job_id, job.record())
        threading.Thread(
            target=self._run_job, args=(job,), name=f"ppdm-job-{job_id[:8]}", daemon=True
        ).start()
        log.info("job %s (%s) started by %s", job_id, job.protocol, caller)
        return job

    def _check_slots(self, job: Job) -> None:
        """Raise :class:`OverflowError` if ``job`` may not start now: this node is full
        (``max_running_jobs``, or too few server threads for its streams), or its
        initiator already runs its share (``max_running_jobs_per_initiator``), so one
        member cannot take every slot. The message names this node, which refused, and
        why (the caller holds ``_cond``)."""
        limits = self.limits
        running = [j for j in self._jobs.values() if j.state == pb.JOB_STATE_RUNNING]
        # Every running job holds one server thread per incoming peer stream.
        streams = (len(running) + 1) * (len(job.parties) - 1)
        if len(running) >= limits.max_running_jobs or streams + 8 > self.settings.max_workers:
            raise OverflowError(
                f"node {self.name!r} is full: {len(running)} jobs running "
                f"(limits.max_running_jobs = {limits.max_running_jobs}, "
                f"node.max_workers = {self.settings.max_workers}); try again later"
            )
        share = min(limits.max_running_jobs_per_initiator, limits.max_running_jobs)
        own = sum(j.initiator == job.initiator for j in running)
        if own >= share:
            raise OverflowError(
                f"node {self.name!r} refused to start the job: initiator {job.initiator!r} "
                f"already runs {own} jobs there (limits.max_running_jobs_per_initiator = "
                f"{share}); try again when one ends"
            )

    def cancel_job(self, job_id: str, caller: str) -> Job:
        """``CancelJob``: the initiator withdraws a job (a running one is aborted)."""
        with self._cond:
            job = self._jobs.get(job_id)
            if job is None:
                raise LookupError(f"job {job_id!r} is not known at {self.name!r}")
            if caller not in (job.initiator, self.name):
                raise PermissionError(f"only the initiator may cancel job {job_id!r}")
            state = job.state
            if state in _OPEN_STATES:
                job.state = pb.JOB_STATE_CANCELLED
                job.error = PublicError("cancelled", caller)
                job.done.set()
                self._cond.notify_all()
        if state in _OPEN_STATES:
            self.metrics.job(job.protocol, "cancelled")
            self.auditor.release(job_id)
            self.ledger.append("finish", {"state": "cancelled", "by": caller}, job_id=job_id)
            self.ledger.save_job(job_id, job.record())
        elif state == pb.JOB_STATE_RUNNING and job.endpoint is not None:
            public = PublicError("cancelled", caller)
            job.endpoint.abort(public.text(), code=public.code, party=public.party)
        return job

    def owner_decision(self, job_id: str, *, approve: bool, reason: str, caller: str) -> Job:
        """``DecideJob``: the owner approves or rejects a pending job."""
        if caller != self.name:
            raise PermissionError("only this node's own party may approve or reject its jobs")
        self._expire()
        with self._cond:
            job = self._jobs.get(job_id)
            if job is None:
                raise LookupError(f"job {job_id!r} is not known at {self.name!r}")
            if job.state != pb.JOB_STATE_PENDING:
                raise RuntimeError(f"job {job_id!r} is {STATE_NAMES[job.state]}, not pending")
            if approve:
                job.state = pb.JOB_STATE_ACCEPTED
                job.expires = time.monotonic() + self.limits.accepted_job_ttl_s
                job.rule, job.reason = "", ""
            else:
                job.state = pb.JOB_STATE_REFUSED
                job.rule = "owner"
                job.reason = (reason or "rejected by the owner")[:500]
                job.error = PublicError("refused", self.name)
                job.done.set()
            self._cond.notify_all()
        if not approve:
            self.auditor.release(job_id)
        self.ledger.append("approval", {"approved": approve, "reason": reason[:500]}, job_id=job_id)
        self.ledger.save_job(job_id, job.record())
        log.info("job %s %s by the owner", job_id, "approved" if approve else "rejected")
        return job

    def _notify_pending(self, job: Job) -> None:
        """Run the policy's ``[notify] pending`` command for a job that waits for the
        owner, in a thread of its own: never blocking the node, at most
        ``notify_timeout_s`` seconds, at most :data:`MAX_NOTIFY_RUNNING` at once (more
        are skipped and logged), its failures logged. Its environment names the job
        (``PPDM_JOB_ID``, ``PPDM_INITIATOR``, ``PPDM_PROTOCOL``, ``PPDM_PARTIES``,
        ``PPDM_PARTY``, ``PPDM_EXPIRES_IN_S``): public facts of the proposal, never a
        private value."""
        policy = self.policy.current()
        command = list(policy.notify_pending)
        if not command:
            return
        if not self._notify_slots.acquire(blocking=False):
            log.warning("job %s: pending-job notification skipped (too many running)", job.job_id)
            return
        env = {
            **os.environ,
            "PPDM_JOB_ID": job.job_id,
            "PPDM_INITIATOR": job.initiator,
            "PPDM_PROTOCOL": job.protocol,
            "PPDM_PARTIES": ",".join(job.parties),
            "PPDM_PARTY": self.name,
            "PPDM_EXPIRES_IN_S": f"{max(job.expires - time.monotonic(), 0.0):.0f}",
        }
        timeout = policy.notify_timeout_s
        cwd = str(self.policy.path.parent) if self.policy.path is not None else None

        def run() -> None:
            try:
                done = subprocess.run(
                    command,
                    env=env,
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=timeout,
                    check=False,
                )
                if done.returncode != 0:
                    log.warning(
                        "job %s: pending-job notification %r exited with %d: %s",
                        job.job_id,
                        command[0],
                        done.returncode,
                        done.stderr[-500:].decode(errors="replace").strip(),
                    )
                else:
                    log.info("job %s: owner notified (%s)", job.job_id, command[0])
            except subprocess.TimeoutExpired:
                log.warning(
                    "job %s: pending-job notification %r killed after %g s",
                    job.job_id,
                    command[0],
                    timeout,
                )
            except OSError as exc:
                log.warning("job %s: pending-job notification failed: %s", job.job_id, exc)
            finally:
                self._notify_slots.release()

        threading.Thread(target=run, name=f"ppdm-notify-{job.job_id[:8]}", daemon=True).start()

    def keep_accepted(self, job: Job, caller: str) -> None:
        """The initiator asked about its accepted job: it is still waiting for other
        members' owners, so the job stays another ``accepted_job_ttl_s``. An accepted
        job thus lives as long as the longest consent deadline of the job's members
        (the initiator stops asking when the last pending member approves or expires),
        and is dropped ``accepted_job_ttl_s`` after an initiator that went away."""
        if caller != job.initiator:
            return
        with self._cond:
            if job.state == pb.JOB_STATE_ACCEPTED:
                job.expires = max(job.expires, time.monotonic() + self.limits.accepted_job_ttl_s)

    def pending_jobs(self) -> list[Job]:
        self._expire()
        with self._cond:
            return [j for j in self._jobs.values() if j.state == pb.JOB_STATE_PENDING]

    def _expire(self) -> None:
        """End pending jobs whose approval deadline passed and accepted jobs never started."""
        now = time.monotonic()
        ended: list[tuple[Job, str]] = []
        with self._cond:
            for job in self._jobs.values():
                if job.state in _OPEN_STATES and job.expires and now > job.expires:
                    if job.state == pb.JOB_STATE_PENDING:
                        job.state = pb.JOB_STATE_REFUSED
                        job.rule, job.reason = (
                            "consent.expired",
                            "the owner did not approve in time",
                        )
                        job.error = PublicError("expired", self.name)
                    else:
                        job.state = pb.JOB_STATE_CANCELLED
                        job.error = PublicError("cancelled", job.initiator)
                    job.done.set()
                    ended.append((job, STATE_NAMES[job.state]))
            if ended:
                self._cond.notify_all()
        for job, state in ended:
            self.metrics.job(job.protocol, "expired" if state == "refused" else state)
            self.auditor.release(job.job_id)
            self.ledger.append("finish", {"state": state, "rule": job.rule}, job_id=job.job_id)
            self.ledger.save_job(job.job_id, job.record())

    def _trim_jobs(self) -> None:
        finished = [k for k, j in self._jobs.items() if j.state in _DONE_STATES]
        for k in finished[: max(len(finished) - MAX_FINISHED_JOBS, 0)]:
            del self._jobs[k]
            self._endpoints.pop(k, None)
            self._links.pop(k, None)

    def _run_job(self, job: Job) -> None:
        with job_log_context(job.job_id):
            self._run_job_logged(job)

    def _run_job_logged(self, job: Job) -> None:
        from ppdm.jobs.registry import get_job

        spec = get_job(job.protocol)
        if job.endpoint is None or job.links is None:
            raise RuntimeError(f"job {job.job_id!r} was started without its endpoint")
        state, result, error = pb.JOB_STATE_FAILED, None, None
        try:
            from ppdm.compute.engine import job_scope
            from ppdm.sources.limits import read_time_limit

            # Each source read ends within T; an engine's remote work ends with the job.
            with (
                read_time_limit(job.timeout_s or None),
                job_scope(job.job_id, ended=job.endpoint.failure),
            ):
                out = spec.run(job.endpoint, job.params, job.context or self._context())
            if not isinstance(out, dict):
                raise TypeError(f"job {job.protocol!r} returned a {type(out).__name__}, not a dict")
            result = json.loads(json.dumps(out))  # must be JSON; normalizes tuples etc.
            state = pb.JOB_STATE_SUCCEEDED
        except BaseException as exc:  # a failed job never takes the node down
            error = PublicError.of(exc, self.name)
            job.cause = owner_cause(exc)  # for this node's owner only (Job.status)
            # The details stay in this node's log; peers get the code and the step only.
            log.warning(
                "job %s failed at %s: %s: %s", job.job_id, self.name, type(exc).__name__, exc
            )
            job.endpoint.abort(error.text(), code=error.code, party=error.party, step=error.step)
        # A successful job drains its streams (the peers may still be reading); a failed
        # one only gives them a moment: its peers are aborted already, and a frozen peer
        # must not hold this party for another whole timeout.
        errors = job.links.close(
            job.timeout_s if error is None else min(FAILED_DRAIN_S, job.timeout_s / 8)
        )
        with self._cond:
            self._links.pop(job.job_id, None)
        for peer, err in errors.items():
            log.warning("job %s: closing the stream to %s: %s", job.job_id, peer, err)
            if "UNAVAILABLE" in err:
                self.reset_channel(peer)
        if error is not None and error.code == "party_failure" and error.party != self.name:
            self.reset_channel(error.party)  # a peer failed: do not reuse its connection
        job.endpoint.close()
        with self._cond:
            job.result, job.error = result, error
            job.wall_time_s = time.perf_counter() - job.started
            job.ended_at = time.time()
            job.state = state
            # A finished job keeps its outcome and costs only: its streams, inputs and
            # endpoint go (the endpoint stays in _endpoints a little longer, for late
            # frames, see _forget_ended), so a node does not grow with every job.
            job.metrics = job.endpoint.metrics.as_list()
            job.endpoint, job.links, job.context = None, None, None
            self._ended.append((time.monotonic(), job.job_id))
            job.done.set()
            self._cond.notify_all()
        self.metrics.finished(job.protocol, STATE_NAMES[state], job.wall_time_s)
        self.ledger.append(
            "finish",
            {
                "state": STATE_NAMES[state],
                "result_sha256": _digest(result) if result is not None else None,
                "error": error.as_dict() if error is not None else None,
                "wall_time_s": round(job.wall_time_s, 6),
            },
            job_id=job.job_id,
        )
        self.ledger.save_job(job.job_id, job.record())
        log.info(
            "job %s %s at %s in %.3f s",
            job.job_id,
            STATE_NAMES[state],
            self.name,
            job.wall_time_s,
        )
        trim_heap()  # the job's buffers are free now: give their pages back

    def _forget_ended(self, grace_s: float) -> None:
        """Drop the endpoints of jobs that ended more than ``grace_s`` ago (until then
        late frames of a finished job are taken and dropped, not refused)."""
        cutoff = time.monotonic() - grace_s
        with self._cond:
            while self._ended and self._ended[0][0] < cutoff:
                _, job_id = self._ended.popleft()
                self._endpoints.pop(job_id, None)

    def job(self, job_id: str) -> Job | None:
        """A job of this node, from memory or (after a restart) from the ledger."""
        self._expire()
        with self._cond:
            job = self._jobs.get(job_id)
        if job is not None:
            return job
        rec = self.ledger.load_job(job_id)
        return Job.from_record(rec) if rec else None

    def running_jobs(self, member: str | None = None) -> list[str]:
        """Ids of the running jobs (only those ``member`` takes part in, if given)."""
        with self._cond:
            return [
                k
                for k, j in self._jobs.items()
                if j.state == pb.JOB_STATE_RUNNING and (member is None or member in j.parties)
            ]

    def may_see_result(self, job: Job, caller: str) -> bool:
        to = job.results_to
        if caller == self.name:
            return True
        if to == "owner":
            return False
        if to == "initiator":
            return caller == job.initiator
        return caller in job.parties
