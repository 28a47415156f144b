"""The ``ppdm.v1.Party`` gRPC service of a node, a thin adapter over its job
lifecycle (:class:`~ppdm.service.lifecycle.JobLifecycle`): each call authenticates its
caller by the roster certificate, calls the node and turns the node's exceptions into
gRPC status codes; a refusal's local cause goes only to the node's own owner on its own
host (:func:`is_own_host`). ``Exchange`` takes its frames as raw bytes
(:func:`_add_party_service`).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import grpc

from ppdm import __version__
from ppdm.errors import ConfigError, PPDMError, with_local_cause
from ppdm.parties.consortium import NodeLimits, loads_consortium
from ppdm.parties.grpc_net import authenticate, handle_exchange
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.service.lifecycle import JobLifecycle

log = logging.getLogger(__name__)

#: Incoming Exchange streams one peer may hold open at once (one per running job it shares
#: with this node, and slack): a member cannot take every server thread. The default;
#: ``max_streams_per_peer`` in the settings' ``[limits]`` overrides it.
MAX_STREAMS_PER_PEER = NodeLimits.max_streams_per_peer
MAX_STATUS_WAIT_S = 2.0  # the longest GetJobStatus long poll
MAX_ROSTER_BYTES = 4 << 20  # a pushed roster (inline certificates: ~1 kB per member)


def is_own_host(context: grpc.ServicerContext) -> bool:
    """Whether a gRPC call comes from this host (a loopback address or a Unix socket)."""
    peer = context.peer() or ""
    kind, _, rest = peer.partition(":")
    if kind == "unix":
        return True
    if kind == "ipv4":
        return rest.startswith("127.")
    if kind == "ipv6":
        return rest.startswith(("[::1]", "%5B::1%5D", "[::ffff:127.", "%5B::ffff:127."))
    return False


class _Servicer(party_pb2_grpc.PartyServicer):
    def __init__(self, node: JobLifecycle) -> None:
        self.node = node

    def Exchange(self, request_iterator: Any, context: grpc.ServicerContext) -> Any:
        peer = authenticate(context, self.node.consortium)
        cap = self.node.limits.max_streams_per_peer
        with self.node._cond:
            open_now = self.node._streams.get(peer, 0)
            if open_now >= cap:
                refuse = True
            else:
                refuse = False
                self.node._streams[peer] = open_now + 1
        if refuse:
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"party {peer!r} already has {cap} streams open at this node",
            )
        try:
            return handle_exchange(
                request_iterator,
                context,
                consortium=self.node.consortium,
                lookup=self.node._lookup,
                pending_wait_s=self.node.pending_wait_s,
                watch=self.node.streams,
                on_envelope=self.node.metrics.received,
                budget=self.node.reassembly,
            )
        finally:
            with self.node._cond:
                self.node._streams[peer] -= 1

    def ProposeJob(self, request: pb.JobRequest, context: grpc.ServicerContext) -> Any:
        caller = authenticate(context, self.node.consortium)
        try:
            job = self.node.propose_job(request, caller)
        except PermissionError as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except FileExistsError as exc:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, str(exc))
        except PPDMError as exc:
            text, cause = str(exc), getattr(exc, "cause", "")
            if cause and caller == self.node.name and is_own_host(context):
                text = with_local_cause(text, cause)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, text)
        decision = {
            pb.JOB_STATE_ACCEPTED: pb.DECISION_ACCEPTED,
            pb.JOB_STATE_PENDING: pb.DECISION_PENDING,
        }.get(job.state, pb.DECISION_REFUSED)  # type: ignore[call-overload]
        return pb.JobDecision(
            job_id=job.job_id,
            party=self.node.name,
            decision=decision,
            rule=job.rule,
            reason=(
                with_local_cause(job.reason, job.cause)
                if job.cause and caller == self.node.name and is_own_host(context)
                else job.reason
            ),
            expires_in_s=max(job.expires - time.monotonic(), 0.0)
            if job.state == pb.JOB_STATE_PENDING
            else 0.0,
            head=self._exchange_heads(request, caller),
        )

    def _exchange_heads(self, request: pb.JobRequest, caller: str) -> pb.LedgerHead | None:
        """Keep the initiator's signed ledger head (checked against its roster
        certificate; a conflict or a bad signature is chained and logged, never fatal to
        the job), then sign this node's own head for the answer (docs/ledger.md)."""
        from ppdm.service.ledger import head_from_proto, head_to_proto

        node = self.node
        head = (
            head_from_proto(request.initiator_head) if request.HasField("initiator_head") else None
        )
        if head is not None and caller != node.name:
            node.ledger.receive_head(head, consortium=node.consortium, sender=caller)
        try:
            own = node.ledger.signed_head(node.settings)
        except ConfigError as exc:
            log.warning("ledger head not signed: %s", exc)
            return None
        return head_to_proto(own) if own is not None else None

    def StartJob(self, request: pb.JobRef, context: grpc.ServicerContext) -> Any:
        caller = authenticate(context, self.node.consortium)
        try:
            job = self.node.start_job(request.job_id, caller)
        except PermissionError as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except LookupError as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except OverflowError as exc:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except RuntimeError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return pb.JobAccepted(job_id=job.job_id, party=self.node.name)

    def CancelJob(self, request: pb.JobRef, context: grpc.ServicerContext) -> Any:
        caller = authenticate(context, self.node.consortium)
        try:
            job = self.node.cancel_job(request.job_id, caller)
        except PermissionError as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except LookupError as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        return job.status(self.node.name, show_result=False)

    def GetJobStatus(self, request: pb.JobStatusRequest, context: grpc.ServicerContext) -> Any:
        caller = authenticate(context, self.node.consortium)
        job = self.node.job(request.job_id)
        if job is None:
            return pb.JobStatus(
                job_id=request.job_id, party=self.node.name, state=pb.JOB_STATE_UNKNOWN
            )
        if caller not in job.parties and caller != self.node.name:
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"party {caller!r} is not a member of job {request.job_id!r}",
            )
        self.node.keep_accepted(job, caller)
        if request.wait_s > 0 and job.state == pb.JOB_STATE_RUNNING:
            job.done.wait(min(request.wait_s, MAX_STATUS_WAIT_S))
        status = job.status(
            self.node.name,
            show_result=self.node.may_see_result(job, caller),
            owner=caller == self.node.name and is_own_host(context),
        )
        limit = self.node.consortium.max_message_bytes
        if status.ByteSize() > limit:
            size = status.ByteSize()
            status.ClearField("result")
            status.state = pb.JOB_STATE_FAILED
            status.error = (
                f"the job's result ({size} bytes) does not fit in one message of at most "
                f"{limit} bytes; raise max_message_bytes in the consortium file"
            )
        return status

    def Health(self, request: pb.HealthRequest, context: grpc.ServicerContext) -> Any:
        caller = authenticate(context, self.node.consortium)
        return pb.HealthReply(
            party=self.node.name,
            consortium=self.node.consortium.name,
            version=__version__,
            running_jobs=self.node.running_jobs(caller),
            roster_version=self.node.consortium.version,
        )

    def PushRoster(self, request: pb.RosterUpdate, context: grpc.ServicerContext) -> Any:
        caller = authenticate(context, self.node.consortium)
        node = self.node
        try:
            if len(request.roster_toml) > MAX_ROSTER_BYTES:
                raise ConfigError(f"the roster is larger than {MAX_ROSTER_BYTES} bytes")
            new = loads_consortium(request.roster_toml, f"roster pushed by {caller!r}")
            node.update_roster(new, source=f"pushed by {caller}")
        except ConfigError as exc:
            return pb.RosterReply(
                party=node.name, version=node.consortium.version, accepted=False, reason=str(exc)
            )
        return pb.RosterReply(party=node.name, version=node.consortium.version, accepted=True)

    def ListPending(self, request: pb.PendingRequest, context: grpc.ServicerContext) -> Any:
        caller = authenticate(context, self.node.consortium)
        if caller != self.node.name:
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                "only this node's own party may list its pending jobs",
            )
        now = time.monotonic()
        out = pb.PendingJobs()
        for job in self.node.pending_jobs():
            out.jobs.add(
                job_id=job.job_id,
                protocol=job.protocol,
                initiator=job.initiator,
                parties=list(job.parties),
                params_json=json.dumps(job.params),
                leakage=(
                    f"{job.disclosure.leakage} [{job.disclosure.describe()}]"
                    if job.disclosure is not None
                    else ""
                ),
                expires_in_s=max(job.expires - now, 0.0),
                age_s=now - job.proposed,
            )
        return out

    def DecideJob(self, request: pb.OwnerDecision, context: grpc.ServicerContext) -> Any:
        caller = authenticate(context, self.node.consortium)
        try:
            job = self.node.owner_decision(
                request.job_id, approve=request.approve, reason=request.reason, caller=caller
            )
        except PermissionError as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except LookupError as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except RuntimeError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return job.status(self.node.name, show_result=False)

    def AuditHistory(self, request: pb.AuditHistoryRequest, context: grpc.ServicerContext) -> Any:
        authenticate(context, self.node.consortium)
        out = pb.AuditHistoryReply()
        for q in self.node.audit_history(request.input_key):
            out.queries.add(job_id=q["job_id"], parties=q["parties"], kind=q["kind"])
        return out

    def LedgerHeads(self, request: pb.LedgerHeadsRequest, context: grpc.ServicerContext) -> Any:
        """The signed ledger heads this node holds of the *caller* (one page), and the
        caller's heads it recorded as conflicts; nothing about any other member."""
        from ppdm.service.ledger import head_to_proto

        caller = authenticate(context, self.node.consortium)
        heads, more = self.node.ledger.peer_heads(caller, after_seq=request.after_seq)
        out = pb.LedgerHeadsReply(party=self.node.name, more=more)
        out.heads.extend(head_to_proto(h) for h in heads)
        if request.after_seq == 0:
            out.conflicts.extend(
                head_to_proto(h) for h in self.node.ledger.peer_head_conflicts(caller)
            )
        return out


def _add_party_service(servicer: _Servicer, server: grpc.Server) -> None:
    """Register the ``ppdm.v1.Party`` service like the generated
    ``add_PartyServicer_to_server``, except that ``Exchange`` gets its frames as raw
    bytes (parsed by :func:`ppdm.parties.grpc_net.parse_frame` without copying chunks)."""

    def unary(method: Any, request: Any, response: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            method,
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )

    handlers = {
        "Exchange": grpc.stream_unary_rpc_method_handler(
            servicer.Exchange,
            request_deserializer=None,
            response_serializer=env_pb.ExchangeSummary.SerializeToString,
        ),
        "ProposeJob": unary(servicer.ProposeJob, pb.JobRequest, pb.JobDecision),
        "StartJob": unary(servicer.StartJob, pb.JobRef, pb.JobAccepted),
        "CancelJob": unary(servicer.CancelJob, pb.JobRef, pb.JobStatus),
        "GetJobStatus": unary(servicer.GetJobStatus, pb.JobStatusRequest, pb.JobStatus),
        "Health": unary(servicer.Health, pb.HealthRequest, pb.HealthReply),
        "ListPending": unary(servicer.ListPending, pb.PendingRequest, pb.PendingJobs),
        "DecideJob": unary(servicer.DecideJob, pb.OwnerDecision, pb.JobStatus),
        "AuditHistory": unary(servicer.AuditHistory, pb.AuditHistoryRequest, pb.AuditHistoryReply),
        "PushRoster": unary(servicer.PushRoster, pb.RosterUpdate, pb.RosterReply),
        "LedgerHeads": unary(servicer.LedgerHeads, pb.LedgerHeadsRequest, pb.LedgerHeadsReply),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("ppdm.v1.Party", handlers),)
    )
