"""A party's node: the gRPC ``Party`` service that runs this party's side of every job,
and the client that starts a job at every node and collects the outcome.

A node (``ppdm party serve alice.toml``) listens with mutual TLS on its roster address
and serves four calls (``proto/ppdm/v1/party.proto``):

``Exchange``
    A peer's stream of envelope frames for one job (:func:`ppdm.parties.grpc_net.handle_exchange`).
``StartJob``
    Run this party's side of a job: the caller must be a roster party and the job's
    initiator, and a member of the job. The node checks the job name and parameters,
    creates an :class:`~ppdm.parties.network.Endpoint` whose transport is a set of
    per-peer Exchange streams, and runs ``get_job(name).run(endpoint, params, ctx)`` in a
    worker thread on its *own* private inputs (``ctx`` is built from its own settings
    file; the initiator never sends inputs). A failing job aborts (its peers end with an
    error naming this party) and never takes the node down.
``GetJobStatus``
    State, result (JSON), per-step cost metrics and wall time of a job, for the job's
    members.
``Health``
    The node's party name, consortium, version and the running jobs the caller is a
    member of, for roster parties.

While a job runs, the node probes its peers' ``Health`` every second; a peer whose node
refuses connections twice in a row is declared dead (``Endpoint.fail_party``), so the
job ends with :class:`~ppdm.errors.PartyFailure` naming it well within the job timeout.

:func:`run_job` is the initiator's side (``ppdm job run``): it calls ``StartJob`` on every
node, polls ``GetJobStatus`` until every party is done, and returns the job document
described in ``docs/jobs.md``.

Results and parameters travel as JSON text in the one string field ``"json"`` of the
``google.protobuf.Struct`` message fields, because ``Struct`` numbers are doubles and
would round integers above 2**53 (sums, big counts, seeds).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import re
import signal
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import struct_pb2

from ppdm import __version__
from ppdm.errors import ConfigError, PPDMError
from ppdm.jobs.registry import PartyContext, get_job
from ppdm.parties.consortium import PartySettings
from ppdm.parties.grpc_net import (
    PENDING_JOB_WAIT_S,
    JobLinks,
    authenticate,
    channel_options,
    frame_bytes,
    handle_exchange,
    open_channel,
    server_credentials,
)
from ppdm.parties.network import Endpoint
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc

__all__ = [
    "JOB_SCHEMA",
    "NodeClient",
    "PartyNode",
    "health",
    "job_status",
    "run_job",
    "serve",
]

log = logging.getLogger(__name__)

JOB_SCHEMA = "ppdm.job/1"
MAX_RUNNING_JOBS = 16
MAX_FINISHED_JOBS = 256
MAX_TIMEOUT_S = 7 * 24 * 3600.0
PROBE_INTERVAL_S = 1.0
PROBE_FAILURES = 2

_STATE_NAMES = {
    pb.JOB_STATE_RUNNING: "running",
    pb.JOB_STATE_SUCCEEDED: "succeeded",
    pb.JOB_STATE_FAILED: "failed",
    pb.JOB_STATE_UNKNOWN: "unknown",
    pb.JOB_STATE_UNSPECIFIED: "unknown",
}


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


# The node --------------------------------------------------------------------------------


@dataclass
class Job:
    """One job at one node."""

    job_id: str
    protocol: str
    params: dict[str, Any]
    initiator: str
    parties: tuple[str, ...]
    timeout_s: float
    endpoint: Endpoint
    links: JobLinks
    state: pb.JobState = pb.JOB_STATE_RUNNING
    result: Any = None
    error: str = ""
    started: float = field(default_factory=time.perf_counter)
    wall_time_s: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)

    def status(self, party: str) -> pb.JobStatus:
        msg = pb.JobStatus(
            job_id=self.job_id,
            party=party,
            state=self.state,
            error=self.error,
            wall_time_s=(
                self.wall_time_s
                if self.state != pb.JOB_STATE_RUNNING
                else time.perf_counter() - self.started
            ),
        )
        if self.state == pb.JOB_STATE_SUCCEEDED:
            msg.result.CopyFrom(to_struct(self.result))
        for step in self.endpoint.metrics.as_list():
            msg.metrics.add(**step)
        return msg


class PartyNode:
    """A party's gRPC node (see the module docstring). ``start()``, then ``stop()``."""

    def __init__(
        self,
        settings: PartySettings,
        *,
        probe_peers: bool = True,
        pending_wait_s: float = PENDING_JOB_WAIT_S,
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self.consortium = settings.consortium
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._endpoints: dict[str, Endpoint] = {}
        self._links: dict[str, JobLinks] = {}
        self._cond = threading.Condition()
        self._channels: dict[str, grpc.Channel] = {}
        self._channel_lock = threading.Lock()
        self._server: grpc.Server | None = None
        self._stopping = threading.Event()
        self._probe_peers = probe_peers
        self.pending_wait_s = pending_wait_s
        self._monitor: threading.Thread | None = None
        self.port: int | None = None

    # Life cycle --------------------------------------------------------------------------

    def start(self) -> int:
        """Bind the listen address and start serving; returns the bound port."""
        server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=self.settings.max_workers, thread_name_prefix=f"ppdm-{self.name}"
            ),
            options=channel_options(self.consortium),
        )
        _add_party_service(_Servicer(self), server)
        try:
            port = server.add_secure_port(self.settings.listen, server_credentials(self.settings))
        except RuntimeError as exc:
            raise ConfigError(f"cannot listen on {self.settings.listen}: {exc}") from None
        if port == 0:
            raise ConfigError(f"cannot listen on {self.settings.listen} (address in use?)")
        server.start()
        self._server = server
        self.port = port
        if self._probe_peers:
            self._monitor = threading.Thread(
                target=self._watch_peers, name=f"ppdm-{self.name}-monitor", daemon=True
            )
            self._monitor.start()
        log.info(
            "party %s of consortium %s serving on %s (mutual TLS)",
            self.name,
            self.consortium.name,
            self.settings.listen,
        )
        return port

    def stop(self, grace: float = 5.0) -> None:
        """Stop serving: fail running jobs, let in-flight calls finish for ``grace`` s."""
        self._stopping.set()
        with self._cond:
            running = [j for j in self._jobs.values() if j.state == pb.JOB_STATE_RUNNING]
        for job in running:
            job.endpoint.abort(f"node of party {self.name!r} is shutting down")
        for job in running:
            job.done.wait(min(grace, 5.0))
        if self._server is not None:
            self._server.stop(grace).wait(grace + 1)
        with self._channel_lock:
            for ch in self._channels.values():
                ch.close()
            self._channels.clear()
        log.info("party %s stopped", self.name)

    def wait(self) -> None:
        if self._server is not None:
            self._server.wait_for_termination()

    def __enter__(self) -> PartyNode:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(grace=1.0)

    # Channels ----------------------------------------------------------------------------

    def channel(self, peer: str) -> grpc.Channel:
        """The node's shared mTLS channel to ``peer``."""
        with self._channel_lock:
            ch = self._channels.get(peer)
            if ch is None:
                ch = self._channels[peer] = open_channel(self.settings, peer)
            return ch

    # Endpoints ---------------------------------------------------------------------------

    def open_endpoint(
        self, job_id: str, parties: Sequence[str], *, timeout: float
    ) -> tuple[Endpoint, JobLinks]:
        """A gRPC-backed endpoint of job ``job_id`` at this node (what ``StartJob`` uses;
        tests use it to run arbitrary functions over the real transport)."""
        links = JobLinks(
            job_id,
            self.channel,
            max_chunk=frame_bytes(self.consortium),
            timeout=timeout,
        )
        endpoint = Endpoint(
            self.name,
            parties,
            links.transmit,
            job_id=job_id,
            consortium=self.consortium.name,
            timeout=timeout,
        )
        links.endpoint = endpoint
        with self._cond:
            if job_id in self._endpoints:
                raise ValueError(f"job {job_id!r} already exists at {self.name!r}")
            self._endpoints[job_id] = endpoint
            self._links[job_id] = links
            self._cond.notify_all()
        return endpoint, links

    def close_endpoint(self, job_id: str, *, timeout: float = 10.0) -> dict[str, str]:
        """Close a job's outgoing streams; the endpoint stays for late frames."""
        with self._cond:
            ep = self._endpoints.get(job_id)
            links = self._links.pop(job_id, None)
        errors = links.close(timeout) if links is not None else {}
        if ep is not None:
            ep.close()
        return errors

    def _lookup(self, job_id: str, wait_s: float) -> Endpoint | None:
        deadline = time.monotonic() + wait_s
        with self._cond:
            while True:
                ep = self._endpoints.get(job_id)
                if ep is not None or self._stopping.is_set():
                    return ep
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def forget_endpoint(self, job_id: str) -> None:
        """Drop a closed endpoint opened with :meth:`open_endpoint`."""
        with self._cond:
            self._endpoints.pop(job_id, None)
            self._links.pop(job_id, None)

    # Jobs --------------------------------------------------------------------------------

    def start_job(self, request: pb.JobRequest, caller: str) -> Job:
        """Check a StartJob request from ``caller`` and start the job's worker thread.

        Raises :class:`ConfigError` (bad request) or :class:`PermissionError`.
        """
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
        parties = self.consortium.order(list(request.parties) or list(self.consortium.names))
        if self.name not in parties:
            raise ConfigError(f"party {self.name!r} is not a member of job {job_id!r}")
        if caller not in parties:
            raise PermissionError(f"initiator {caller!r} is not a member of job {job_id!r}")
        timeout = request.timeout_s or self.settings.job_timeout_s
        if not 0 < timeout <= MAX_TIMEOUT_S:
            raise ConfigError(f"job timeout must be in (0, {MAX_TIMEOUT_S:g}] s")
        spec = get_job(request.protocol)
        try:
            given = from_struct(request.params, "job parameters")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if not isinstance(given, dict):
            raise ConfigError("job parameters must be a JSON object")
        params = spec.params(given)
        with self._cond:
            if job_id in self._jobs or job_id in self._endpoints:
                raise FileExistsError(f"job {job_id!r} already exists at {self.name!r}")
            running = sum(j.state == pb.JOB_STATE_RUNNING for j in self._jobs.values())
            # Every running job holds one server thread per incoming peer stream.
            streams = (running + 1) * (len(parties) - 1)
            if running >= MAX_RUNNING_JOBS or streams + 8 > self.settings.max_workers:
                raise OverflowError(
                    f"{running} jobs already running at {self.name!r} "
                    f"(node.max_workers = {self.settings.max_workers})"
                )
        try:
            endpoint, links = self.open_endpoint(job_id, parties, timeout=timeout)
        except ValueError as exc:  # the same id started twice at once
            raise FileExistsError(str(exc)) from None
        job = Job(
            job_id=job_id,
            protocol=spec.name,
            params=params,
            initiator=caller,
            parties=parties,
            timeout_s=timeout,
            endpoint=endpoint,
            links=links,
        )
        with self._cond:
            self._jobs[job_id] = job
            self._trim_jobs()
        threading.Thread(
            target=self._run_job, args=(job,), name=f"ppdm-job-{job_id[:8]}", daemon=True
        ).start()
        log.info("job %s (%s) started by %s with parties %s", job_id, spec.name, caller, parties)
        return job

    def _trim_jobs(self) -> None:
        finished = [k for k, j in self._jobs.items() if j.state != pb.JOB_STATE_RUNNING]
        for k in finished[: max(len(finished) - MAX_FINISHED_JOBS, 0)]:
            del self._jobs[k]
            self._endpoints.pop(k, None)
            self._links.pop(k, None)

    def _run_job(self, job: Job) -> None:
        spec = get_job(job.protocol)
        ctx = PartyContext(
            name=self.name, settings=self.settings.raw, base_dir=self.settings.base_dir
        )
        state, result, error = pb.JOB_STATE_FAILED, None, ""
        try:
            out = spec.run(job.endpoint, job.params, ctx)
            if not isinstance(out, dict):
                raise TypeError(f"job {job.protocol!r} returned a {type(out).__name__}, not a dict")
            result = json.loads(json.dumps(out))  # must be JSON; normalizes tuples etc.
            state = pb.JOB_STATE_SUCCEEDED
        except BaseException as exc:  # a failed job never takes the node down
            error = f"{type(exc).__name__}: {exc}"
            log.warning("job %s failed at %s: %s", job.job_id, self.name, error)
            job.endpoint.abort(error)
        errors = job.links.close(job.timeout_s)
        with self._cond:
            self._links.pop(job.job_id, None)
        for peer, err in errors.items():
            log.warning("job %s: closing the stream to %s: %s", job.job_id, peer, err)
        job.endpoint.close()
        with self._cond:
            job.result, job.error = result, error
            job.wall_time_s = time.perf_counter() - job.started
            job.state = state
            job.done.set()
            self._cond.notify_all()
        log.info(
            "job %s %s at %s in %.3f s",
            job.job_id,
            _STATE_NAMES[state],
            self.name,
            job.wall_time_s,
        )

    def job(self, job_id: str) -> Job | None:
        with self._cond:
            return self._jobs.get(job_id)

    def running_jobs(self, member: str | None = None) -> list[str]:
        """Ids of the running jobs (only those ``member`` takes part in, if given)."""
        with self._cond:
            return [
                k
                for k, j in self._jobs.items()
                if j.state == pb.JOB_STATE_RUNNING and (member is None or member in j.parties)
            ]

    # Peer monitor ------------------------------------------------------------------------

    def _watch_peers(self) -> None:
        """Declare a running job's peer dead when its node refuses connections."""
        failures: dict[str, int] = {}
        while not self._stopping.wait(PROBE_INTERVAL_S):
            with self._cond:
                running = [j for j in self._jobs.values() if j.state == pb.JOB_STATE_RUNNING]
            peers = {p for j in running for p in j.parties if p != self.name}
            for peer in sorted(peers):
                try:
                    party_pb2_grpc.PartyStub(self.channel(peer)).Health(
                        pb.HealthRequest(), timeout=max(PROBE_INTERVAL_S * 2, 2.0)
                    )
                    failures[peer] = 0
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
                        continue  # slow or busy is not dead; the receive timeout covers it
                    failures[peer] = failures.get(peer, 0) + 1
                    if failures[peer] >= PROBE_FAILURES:
                        for job in running:
                            if peer in job.parties:
                                job.endpoint.fail_party(
                                    peer, "the party's node is unreachable (connection refused)"
                                )


class _Servicer(party_pb2_grpc.PartyServicer):
    def __init__(self, node: PartyNode) -> None:
        self.node = node

    def Exchange(self, request_iterator: Any, context: grpc.ServicerContext) -> Any:
        return handle_exchange(
            request_iterator,
            context,
            consortium=self.node.consortium,
            lookup=self.node._lookup,
            pending_wait_s=self.node.pending_wait_s,
        )

    def StartJob(self, request: pb.JobRequest, context: grpc.ServicerContext) -> Any:
        caller = authenticate(context, self.node.consortium)
        try:
            job = self.node.start_job(request, caller)
        except PermissionError as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except FileExistsError as exc:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, str(exc))
        except OverflowError as exc:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except PPDMError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return pb.JobAccepted(job_id=job.job_id, party=self.node.name)

    def GetJobStatus(self, request: pb.JobStatusRequest, context: grpc.ServicerContext) -> Any:
        caller = authenticate(context, self.node.consortium)
        job = self.node.job(request.job_id)
        if job is None:
            return pb.JobStatus(
                job_id=request.job_id, party=self.node.name, state=pb.JOB_STATE_UNKNOWN
            )
        if caller not in job.parties:
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"party {caller!r} is not a member of job {request.job_id!r}",
            )
        status = job.status(self.node.name)
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
        )


def _add_party_service(servicer: _Servicer, server: grpc.Server) -> None:
    """Register the ``ppdm.v1.Party`` service like the generated
    ``add_PartyServicer_to_server``, except that ``Exchange`` gets its frames as raw
    bytes (parsed by :func:`ppdm.parties.grpc_net.parse_frame` without copying chunks)."""
    handlers = {
        "Exchange": grpc.stream_unary_rpc_method_handler(
            servicer.Exchange,
            request_deserializer=None,
            response_serializer=env_pb.ExchangeSummary.SerializeToString,
        ),
        "StartJob": grpc.unary_unary_rpc_method_handler(
            servicer.StartJob,
            request_deserializer=pb.JobRequest.FromString,
            response_serializer=pb.JobAccepted.SerializeToString,
        ),
        "GetJobStatus": grpc.unary_unary_rpc_method_handler(
            servicer.GetJobStatus,
            request_deserializer=pb.JobStatusRequest.FromString,
            response_serializer=pb.JobStatus.SerializeToString,
        ),
        "Health": grpc.unary_unary_rpc_method_handler(
            servicer.Health,
            request_deserializer=pb.HealthRequest.FromString,
            response_serializer=pb.HealthReply.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("ppdm.v1.Party", handlers),)
    )


def serve(settings: PartySettings, *, grace: float = 5.0) -> int:
    """Run a node until SIGINT or SIGTERM, then shut down cleanly; returns the exit code."""
    node = PartyNode(settings)
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signum)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        node.start()
        while not stop.wait(0.5):
            pass
        log.info(
            "party %s received %s, shutting down", settings.name, signal.Signals(received[0]).name
        )
    finally:
        node.stop(grace)
        for s, h in previous.items():
            signal.signal(s, h)
    return 0


# The initiator's client -----------------------------------------------------------------


class NodeClient:
    """mTLS channels from one party to every node of its consortium (the CLI's client)."""

    def __init__(self, settings: PartySettings) -> None:
        self.settings = settings
        self._channels: dict[str, grpc.Channel] = {}

    def stub(self, party: str) -> party_pb2_grpc.PartyStub:
        ch = self._channels.get(party)
        if ch is None:
            ch = self._channels[party] = open_channel(self.settings, party)
        return party_pb2_grpc.PartyStub(ch)

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()

    def __enter__(self) -> NodeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _rpc_error(exc: grpc.RpcError) -> str:
    code = exc.code() if hasattr(exc, "code") else None  # type: ignore[attr-defined]
    details = exc.details() if hasattr(exc, "details") else str(exc)  # type: ignore[attr-defined]
    return f"{code.name if code else 'UNKNOWN'}: {details}"


def health(settings: PartySettings, *, timeout: float = 5.0) -> dict[str, dict[str, Any]]:
    """Ask every node of the consortium for its health, as ``settings``' party."""
    out: dict[str, dict[str, Any]] = {}
    with NodeClient(settings) as client:
        for party in settings.consortium.names:
            try:
                reply = client.stub(party).Health(pb.HealthRequest(), timeout=timeout)
                out[party] = {
                    "ok": reply.party == party,
                    "party": reply.party,
                    "consortium": reply.consortium,
                    "version": reply.version,
                    "running_jobs": list(reply.running_jobs),
                }
            except grpc.RpcError as exc:
                out[party] = {"ok": False, "error": _rpc_error(exc)}
    return out


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
    totals = {
        k: sum(m[k] for m in metrics)
        for k in ("messages_sent", "messages_received", "bytes_sent", "bytes_received")
    }
    state = _STATE_NAMES[status.state]
    result = None
    error = status.error or None
    if status.state == pb.JOB_STATE_SUCCEEDED:
        try:
            result = from_struct(status.result, "job result")
        except ValueError as exc:
            state, error = "failed", f"node returned a bad result: {exc}"
    return {
        "state": state,
        "result": result,
        "error": error,
        "wall_time_s": round(status.wall_time_s, 6),
        "metrics": metrics,
        "totals": totals,
    }


def _failed_record(error: str) -> dict[str, Any]:
    return {
        "state": "failed",
        "result": None,
        "error": error,
        "wall_time_s": 0.0,
        "metrics": [],
        "totals": {
            "messages_sent": 0,
            "messages_received": 0,
            "bytes_sent": 0,
            "bytes_received": 0,
        },
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
        Stop waiting after this many seconds (default: wait until every node is done or
        unreachable; every receive at every node is bounded by ``timeout``).

    Returns
    -------
    dict
        The job document (schema ``ppdm.job/1`` in ``docs/jobs.md``); ``state`` is
        ``"succeeded"`` only if every party succeeded.
    """
    spec = get_job(name)
    merged = spec.params(params)
    try:
        json.dumps(merged)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"job parameters must be JSON values ({exc})") from None
    consortium = settings.consortium
    members = consortium.order(list(parties) if parties else list(consortium.names))
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
    )
    started_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    records: dict[str, dict[str, Any]] = {}
    with NodeClient(settings) as client:
        pending: list[str] = []
        for p in members:
            try:
                client.stub(p).StartJob(request, timeout=10.0)
                pending.append(p)
            except grpc.RpcError as exc:
                records[p] = _failed_record(f"job not started: {_rpc_error(exc)}")
        first_error: dict[str, float] = {}
        delay = 0.02
        while pending:
            if deadline is not None and time.perf_counter() - t0 > deadline:
                for p in pending:
                    records[p] = _failed_record(f"still running after the {deadline:g} s deadline")
                break
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)
            for p in list(pending):
                try:
                    status = client.stub(p).GetJobStatus(
                        pb.JobStatusRequest(job_id=job_id), timeout=5.0
                    )
                except grpc.RpcError as exc:
                    # A refused connection is a dead node; a node that stops answering
                    # (timeouts) is given the job timeout twice over.
                    since = first_error.setdefault(p, time.perf_counter())
                    refused = exc.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
                    limit = unreachable_after_s if refused else max(2 * wait, unreachable_after_s)
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
                if status.state in (pb.JOB_STATE_UNKNOWN, pb.JOB_STATE_UNSPECIFIED):
                    records[p] = _failed_record("node lost the job (restarted?)")
                else:
                    records[p] = _party_record(status)
                pending.remove(p)
    failed = [p for p in members if records[p]["state"] != "succeeded"]
    return {
        "schema": JOB_SCHEMA,
        "job_id": job_id,
        "protocol": spec.name,
        "params": dict(merged),
        "network": "grpc",
        "ok": not failed,
        "state": "failed" if failed else "succeeded",
        "failed_party": root_cause({p: records[p]["error"] for p in failed}),
        "failed_parties": failed,
        "error": "; ".join(f"{p}: {records[p]['error']}" for p in failed) or None,
        "consortium": consortium.name,
        "initiator": settings.name,
        "timeout_s": wait,
        "started_at": started_at,
        "wall_time_s": round(time.perf_counter() - t0, 6),
        "parties": {p: records[p] for p in members},
    }


_NAMES_PARTY = re.compile(
    r"^(PartyFailure: party|ProtocolError: protocol error from party) '([^']+)'"
)


def root_cause(errors: Mapping[str, str]) -> str | None:
    """The party that most likely caused a job's failure, from each failed party's error.

    A party that failed on its own (its job raised, its node was unreachable) comes first;
    else the party a ``ProtocolError`` names (it sent bad data); else the party most
    ``PartyFailure`` errors name.

    >>> root_cause({"alice": "PartyFailure: party 'bob' failed at step 's': gone",
    ...             "bob": "node unreachable during the job"})
    'bob'
    >>> root_cause({"alice": "ProtocolError: protocol error from party 'carol' at step 's': x",
    ...             "carol": "PartyFailure: party 'alice' failed at step '': aborted"})
    'carol'
    """
    named: dict[str, tuple[str, str] | None] = {}
    for party, error in errors.items():
        m = _NAMES_PARTY.match(error or "")
        named[party] = (m.group(1), m.group(2)) if m and m.group(2) != party else None
    for party, who in named.items():
        if who is None:
            return party
    for who in named.values():
        if who is not None and who[0].startswith("ProtocolError"):
            return who[1]
    counts: dict[str, int] = {}
    for who in named.values():
        if who is not None:
            counts[who[1]] = counts.get(who[1], 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else None
