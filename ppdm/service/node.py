"""A party's node: the gRPC ``Party`` service that runs this party's side of every job,
under its owner's control.

A node (``ppdm party serve alice.toml``) listens with mutual TLS on its roster address.
Nothing runs at a node until the node's *own* checks pass; a job goes through:

``ProposeJob`` (phase 1)
    The initiator asks every member. The node checks the request (consortium, initiator
    is the caller and a member, job and parameters known), then the owner's policy
    (:mod:`ppdm.service.policy`) on the job's declared leakage
    (:mod:`ppdm.service.profiles`), then the parameters against its own data
    (``input_check``), then the cross-job disclosure audit
    (:mod:`ppdm.service.disclosure`). It answers *accepted*, *pending* (the owner must
    approve: ``ppdm job approve``) or *refused* with the deciding rule and a fixed reason
    (never data). Every request and decision goes into the node's hash-chained ledger
    (:mod:`ppdm.service.ledger`).
``StartJob`` (phase 2)
    Once every member accepted, the initiator starts the job everywhere. The node runs
    ``get_job(name).run(endpoint, params, ctx)`` in a worker thread on its *own* private
    inputs (the initiator never sends inputs). If any member refused, the initiator
    sends ``CancelJob`` instead, and every node ends the job at once.
``GetJobStatus``
    State, result, per-step costs and wall time, for the job's members; the result only
    to those the policy's ``results`` rule names. Finished jobs are kept in the ledger's
    job table, so their status survives a restart.
``ListPending``, ``DecideJob``
    The owner's calls (the caller must be the node's own party): jobs waiting for
    approval, and the approval or rejection of one.

No private value crosses the node's boundary in an error: peers receive an ``Abort``
with one code of :data:`ppdm.errors.ERROR_CODES` and the step, the initiator a status
with the same code, party and step; the exception itself goes to the local log only.

While a job runs, the node probes its peers' ``Health`` every second; a peer whose node
refuses connections twice in a row is declared dead (``Endpoint.fail_party``), so the
job ends with :class:`~ppdm.errors.PartyFailure` naming it well within the job timeout.

Results and parameters travel as JSON text in the one string field ``"json"`` of the
``google.protobuf.Struct`` message fields, because ``Struct`` numbers are doubles and
would round integers above 2**53 (sums, big counts, seeds).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import hashlib
import json
import logging
import math
import os
import signal
import socket
import subprocess
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import struct_pb2

from ppdm import __version__
from ppdm.errors import ConfigError, PPDMError, PublicError, with_local_cause
from ppdm.jobs.registry import PartyContext, get_job
from ppdm.parties.consortium import (
    Consortium,
    NodeLimits,
    PartySettings,
    certificate_fingerprint,
    load_settings,
    loads_consortium,
    reload_party_tables,
)
from ppdm.parties.grpc_net import (
    JobLinks,
    ReassemblyBudget,
    StreamWatch,
    authenticate,
    channel_options,
    dynamic_server_credentials,
    frame_bytes,
    handle_exchange,
    open_channel,
)
from ppdm.parties.network import Endpoint
from ppdm.parties.roster import check_successor, members_changed, roster_toml
from ppdm.progress import job_log_context
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.service.disclosure import DisclosureAuditor
from ppdm.service.ledger import Ledger, ledger_path, read_state
from ppdm.service.metrics import NodeMetrics, OpsServer
from ppdm.service.policy import Decision, Policy, PolicyFile, evaluate
from ppdm.service.profiles import Disclosure, get_profile, input_identity, input_version
from ppdm.workers import shutdown_pools

__all__ = [
    "Job",
    "PartyNode",
    "decide",
    "dry_run",
    "from_struct",
    "policy_path",
    "serve",
    "to_struct",
]

log = logging.getLogger(__name__)

MAX_RUNNING_JOBS = NodeLimits.max_running_jobs  # the default; settings [limits] override
#: Finished jobs kept in memory for status calls (older ones are read from the ledger's
#: job table): a node's memory does not grow with the number of jobs it ran.
MAX_FINISHED_JOBS = 64
MAX_TIMEOUT_S = 7 * 24 * 3600.0
PROBE_INTERVAL_S = 1.0
PROBE_FAILURES = 2
PEER_UP_INTERVAL_S = 15.0  # every member probed this often for ppdm_peer_up (with http_listen)
#: An accepted job the initiator never starts is dropped after this (the default of
#: ``[limits] accepted_job_ttl_s``; the initiator's polls extend it while it waits for
#: other members' owners, up to the longest consent deadline).
ACCEPTED_TTL_S = NodeLimits.accepted_job_ttl_s
MAX_NOTIFY_RUNNING = 4  # pending-job notification commands running at once
NODE_LOCK_NAME = "node.lock"  # in the party's state folder, held while a node runs
INPUT_CHECK_REASON = "the job's parameters do not fit this party's data"
SETTINGS_RULE = "settings"  # the refusal's rule when this party's settings cannot be read
AUDIT_HISTORY_TIMEOUT_S = 2.0
FAILED_DRAIN_S = 2.0  # how long a failed job waits for its outgoing streams to close
#: Incoming Exchange streams one peer may hold open at once (one per running job it shares
#: with this node, and slack): a member cannot take every server thread. The default;
#: ``max_streams_per_peer`` in the settings' ``[limits]`` overrides it.
MAX_STREAMS_PER_PEER = NodeLimits.max_streams_per_peer
MAX_AUDIT_HISTORY = 10_000
MAX_STATUS_WAIT_S = 2.0  # the longest GetJobStatus long poll
MAX_ROSTER_BYTES = 4 << 20  # a pushed roster (inline certificates: ~1 kB per member)

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


def policy_path(settings: PartySettings) -> Path | None:
    """The policy file named by ``[node] policy`` in the settings (``None``: the default
    policy applies)."""
    node = settings.raw.get("node", {})
    ref = node.get("policy") if isinstance(node, dict) else None
    if ref is None:
        return None
    if not isinstance(ref, str) or not ref:
        raise ConfigError(f"{settings.path}: node.policy must be the path of a policy file")
    p = Path(ref)
    return p if p.is_absolute() else settings.base_dir / p


MAX_CAUSE_CHARS = 1000


def owner_cause(exc: BaseException) -> str:
    """The local cause of a refusal or failure, for this node's own owner only (``ppdm
    job status`` / ``job explain`` with the party's own certificate from its own host):
    the exception's class and first line, as the node log has it. Never sent to a peer."""
    first = (str(exc).strip().splitlines() or [""])[0][:MAX_CAUSE_CHARS]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


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


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def decide(
    policy: Policy,
    *,
    auditor: DisclosureAuditor,
    ctx: PartyContext,
    job_id: str,
    protocol: str,
    params: Mapping[str, Any],
    initiator: str,
    parties: Sequence[str],
    recent_by_initiator: int = 0,
    reserve: bool = False,
    peer_history: Callable[[Sequence[str], str], list[dict[str, Any]]] | None = None,
) -> tuple[Decision, Disclosure | None, dict[str, Any] | None]:
    """A node's decision on a job, in order: the policy on the job's declared leakage
    (:func:`ppdm.service.policy.evaluate`), the parameters against the party's own data
    (rule ``input_check``), then the cross-job disclosure audit (rule ``audit``). What
    ``ProposeJob`` and ``ppdm policy check`` use. With ``reserve``, an accepted or
    pending job's aggregate is reserved in the audit.

    ``peer_history(peers, input_key)`` returns what those co-members report of their
    audited sums on that input (the node asks over ``AuditHistory``; the dry run does
    not).

    Returns the decision, the job's declared leakage and the audit record (or ``None``).
    Refusals carry fixed reasons; the data-dependent details go to the local log.
    """
    me = ctx.name
    profile = get_profile(protocol)
    rules = policy.rules(protocol)

    def refuse(rule: str, reason: str, cause: BaseException | None = None) -> Decision:
        return Decision(
            "refuse",
            rule,
            reason,
            results=rules.results,
            colluders=rules.colluders,
            cause=owner_cause(cause) if cause is not None else "",
        )

    disclosure: Disclosure | None = None
    if profile is not None:
        try:
            disclosure = profile.disclosure(params, parties, me, ctx)
        except (PPDMError, OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("job %s: cannot read its declared leakage: %s", job_id, exc)
            return refuse("input_check", INPUT_CHECK_REASON, exc), None, None
    decision = evaluate(
        policy,
        job=protocol,
        params=params,
        initiator=initiator,
        parties=parties,
        me=me,
        disclosure=disclosure,
        recent_by_initiator=recent_by_initiator,
    )
    if decision.refused:
        return decision, disclosure, None
    if profile is not None and profile.precheck is not None:
        try:
            profile.precheck(params, parties, me, ctx)
        except (PPDMError, OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("job %s refused by the input check: %s", job_id, exc)
            return refuse("input_check", INPUT_CHECK_REASON, exc), disclosure, None
    audit: dict[str, Any] | None = None
    if decision.audit and disclosure is not None and disclosure.aggregate and disclosure.audit_key:
        try:
            version = input_version(ctx, disclosure.audit_key)
            identity = input_identity(ctx, disclosure.audit_key)
            length = None
            if disclosure.aggregate == "dot":
                raw = ctx.private_input(disclosure.audit_key.partition(".")[2])
                length = len(raw) if isinstance(raw, list) else 1
        except (PPDMError, OSError, ValueError) as exc:
            log.warning("job %s: cannot read its input for the audit: %s", job_id, exc)
            return refuse("input_check", INPUT_CHECK_REASON, exc), disclosure, None
        reported: list[dict[str, Any]] = []
        if peer_history is not None and disclosure.aggregate in ("sum", "union"):
            peers = [p for p in disclosure.participants if p != me]
            reported = peer_history(peers, disclosure.audit_key)
        limits = decision.limits
        verdict = auditor.check(
            input_key=disclosure.audit_key,
            version=version,
            identity=identity,
            kind=disclosure.aggregate,
            parties=disclosure.participants,
            colluders=decision.colluders,
            length=length,
            reported=reported,
            epsilon=disclosure.epsilon,
            epsilon_budget=float(limits.get("epsilon_budget", math.inf)),
            max_probes=limits.get("max_probes"),
        )
        if not verdict.ok:
            return refuse("audit", verdict.reason), disclosure, None
        audit = {
            "input_key": disclosure.audit_key,
            "version": version,
            "kind": disclosure.aggregate,
            "parties": list(disclosure.participants),
        }
        if disclosure.aggregate == "dp":
            audit["epsilon"] = disclosure.epsilon
        if reserve:
            auditor.reserve(
                job_id,
                input_key=disclosure.audit_key,
                version=version,
                identity=identity,
                kind=disclosure.aggregate,
                parties=disclosure.participants,
                epsilon=disclosure.epsilon,
            )
        audit["reported"] = len(reported)
    return decision, disclosure, audit


# One node per party ---------------------------------------------------------------------


class StateLock:
    """An exclusive ``flock`` on ``node.lock`` in a party's state folder, held for the
    node's lifetime: a second node of the same party (same settings, or another
    settings file naming the same state folder) fails at once instead of appending to
    the same ledger. The lock file holds the holder's pid (for the refusal's message);
    the kernel drops the lock when the process ends, however it ends."""

    def __init__(self, folder: Path, party: str) -> None:
        self._fd: int | None = None
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / NODE_LOCK_NAME
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise ConfigError(
                f"party {party!r} is already served by {holder} "
                f"(it holds {self.path}); stop that node first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Give the lock up (the node stopped)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        self.release()


def _lock_holder(fd: int) -> str:
    """``process PID`` from a lock file held by another node (or a vaguer phrase)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).split()[0])
        return f"process {pid}"
    return "another process"


def port_holder(port: int) -> str:
    """``process PID (NAME)`` listening on TCP ``port`` on this host, read from
    ``/proc`` (only processes this user may inspect); ``another process`` otherwise."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f, None)
            for line in f:
                cols = line.split()
                # local address "HEX_IP:HEX_PORT", state 0A = LISTEN
                if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{cols[9]}]")
    if inodes:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        name = Path(f"/proc/{pid}/comm").read_text().strip()
                        return f"process {pid} ({name})"
    return "another process"


def check_port_free(listen: str) -> None:
    """Raise :class:`ConfigError` naming the holder if another process (a node of this
    or another party, or anything else) listens on ``listen``'s port, before gRPC binds
    it (exclusively: ``grpc.so_reuseport`` is off, so a race would fail there too)."""
    host, _, port_text = listen.rpartition(":")
    if not port_text.isdigit() or int(port_text) == 0:
        return
    port = int(port_text)
    try:
        addresses = socket.getaddrinfo(host.strip("[]") or None, port, type=socket.SOCK_STREAM)
    except OSError:
        return  # gRPC reports an address it cannot resolve
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise ConfigError(
                        f"cannot listen on {listen}: the port is held by {port_holder(port)}"
                    ) from None


# Memory given back ---------------------------------------------------------------------

_M_MMAP_THRESHOLD = -3  # <malloc.h>
#: Blocks at least this large get their own mapping, unmapped when freed: a node's frames
#: (up to 2 MiB each) go back to the system when their stream or job ends instead of
#: staying in the heap (glibc raises its threshold as large blocks are freed, after which
#: a flood of frames would stay resident after the streams ended).
MMAP_THRESHOLD_BYTES = 256 << 10


@functools.cache
def _glibc() -> Any:
    """The C library, once (a new ``CDLL`` per call would leak a ctypes class each)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim"):
            return libc
    return None


def tune_allocator() -> None:
    """Make this process's large buffers return to the system when freed (glibc; a no-op
    elsewhere). What ``ppdm party serve`` does at start."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def trim_heap() -> None:
    """Give the heap's free pages back to the system (glibc ``malloc_trim``)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


# The node ------------------------------------------------------------------------------


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
        job.decision = Decision("accept", results=rec.get("results_to", "members"))
        job.done.set()
        return job


class PartyNode:
    """A party's gRPC node (see the module docstring). ``start()``, then ``stop()``."""

    def __init__(
        self,
        settings: PartySettings,
        *,
        probe_peers: bool = True,
        pending_wait_s: float | None = None,
        addons: Sequence[Callable[[PartyNode], Any]] = (),
    ) -> None:
        self.settings = settings
        self.limits = settings.limits
        self.name = settings.name
        self.consortium = settings.consortium
        self.policy = PolicyFile(policy_path(settings))
        self._state_lock: StateLock | None = None  # taken by start()
        self.ledger = Ledger(ledger_path(settings))
        # a policy change the file watcher picks up is chained like a SIGHUP reload
        self.policy.on_change = lambda ok: self.ledger.append(
            "policy", {"event": "change", "ok": ok, "path": str(self.policy.path)}
        )
        self.auditor = DisclosureAuditor(self.name, self.ledger)
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._endpoints: dict[str, Endpoint] = {}
        self._links: dict[str, JobLinks] = {}
        self._rate: dict[str, deque[float]] = {}
        self._streams: dict[str, int] = {}  # open incoming Exchange streams per peer
        self._ended: deque[tuple[float, str]] = deque()  # (when, job id) of ended jobs
        self._notify_slots = threading.BoundedSemaphore(MAX_NOTIFY_RUNNING)
        self._cond = threading.Condition()
        self._audit_pool: ThreadPoolExecutor | None = None
        self._channels: dict[str, grpc.Channel] = {}
        self._channel_lock = threading.Lock()
        self._server: grpc.Server | None = None
        self._stopping = threading.Event()
        self._probe_peers = probe_peers
        self.pending_wait_s = (
            self.limits.pending_job_wait_s if pending_wait_s is None else pending_wait_s
        )
        self.streams = StreamWatch()
        self.reassembly = ReassemblyBudget(
            self.limits.max_unread_bytes_per_peer, self.limits.max_unread_bytes_per_job
        )
        self._roster_lock = threading.Lock()
        self.removed = False
        self.own_certificate_stale = False
        self.metrics = NodeMetrics(self.name)
        self.metrics.info.labels(party=self.name, version=__version__).set(1)
        self._ops: OpsServer | None = None
        #: started with the node after its listeners, each returning what ``stop()`` stops
        #: (e.g. the owner's console, ``ppdm.console``, a layer above this one)
        self._addon_starters = tuple(addons)
        self._addons: list[Any] = []
        self._health: Any = None  # grpc.health.v1 servicer, set by start()
        self._monitor: threading.Thread | None = None
        self.port: int | None = None

    def _recover(self) -> None:
        """Jobs a previous run of this node left open ended with it: record that."""
        for rec in self.ledger.jobs(states=("running", "accepted", "pending")):
            was = rec.get("state")
            rec["state"] = "failed" if was == "running" else "cancelled"
            rec["error"] = PublicError(
                "shutting_down" if was == "running" else "cancelled", self.name
            ).as_dict()
            self.ledger.save_job(rec["job_id"], rec)
            self.ledger.append(
                "finish",
                {"state": rec["state"], "error": rec["error"], "note": "node restarted"},
                job_id=rec["job_id"],
            )

    # Life cycle --------------------------------------------------------------------------

    def start(self) -> int:
        """Lock this party's state folder, end the jobs a previous run left open, bind
        the listen address and start serving; returns the bound port. A second node of
        the same party, or a port another process holds, is a :class:`ConfigError`
        naming the holder."""
        # One node per party: lock the state folder before anything is written to the
        # ledger (a second node's recovery would end the first one's jobs in it).
        if self._state_lock is None:
            self._state_lock = StateLock(ledger_path(self.settings).parent, self.name)
            self._recover()
        from ppdm.sources.config import parse_data_table

        # The [data] entries' form (kinds, paths, credentials' places) is checked now; the
        # files and databases themselves are read afresh by each job.
        parse_data_table(
            self.settings.raw.get("data", {}),
            base_dir=self.settings.base_dir,
            where=f"{self.settings.path or 'settings'}: [data]",
        )
        from ppdm.compute import parse_compute_table

        # The [compute] engine is checked now; a Spark session starts with the first job.
        parse_compute_table(
            self.settings.raw.get("compute"), where=f"{self.settings.path or 'settings'}: [compute]"
        )
        check_port_free(self.settings.listen)
        server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=self.settings.max_workers, thread_name_prefix=f"ppdm-{self.name}"
            ),
            # An exclusive bind: without SO_REUSEPORT a port another process holds fails.
            options=[*channel_options(self.consortium), ("grpc.so_reuseport", 0)],
        )
        _add_party_service(_Servicer(self), server)
        from grpc_health.v1 import health, health_pb2_grpc

        self._health = health.HealthServicer(experimental_non_blocking=True)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        try:
            port = server.add_secure_port(
                self.settings.listen, dynamic_server_credentials(lambda: self.settings)
            )
        except RuntimeError as exc:
            raise ConfigError(f"cannot listen on {self.settings.listen}: {exc}") from None
        if port == 0:
            raise ConfigError(f"cannot listen on {self.settings.listen} (address in use?)")
        server.start()
        self._server = server
        self.port = port
        self._set_health(serving=True)
        if self.settings.http_listen is not None:
            host, _, http_port = self.settings.http_listen.rpartition(":")
            try:
                self._ops = OpsServer(
                    (host.strip("[]"), int(http_port)),
                    self.metrics,
                    alive=lambda: self._server is not None and not self._stopping.is_set(),
                    ready=self.not_ready,
                    before_scrape=self._refresh_gauges,
                )
            except OSError as exc:
                server.stop(0)
                raise ConfigError(
                    f"cannot listen on node.http_listen {self.settings.http_listen}: {exc}"
                ) from None
            self._ops.start()
        for start_addon in self._addon_starters:
            self._addons.append(start_addon(self))
        self._monitor = threading.Thread(
            target=self._watch, name=f"ppdm-{self.name}-monitor", daemon=True
        )
        self._monitor.start()
        self.ledger.append(
            "node",
            {
                "event": "start",
                "version": __version__,
                "policy": str(self.policy.path or "<default>"),
                "consortium": self.consortium.name,
            },
        )
        log.info(
            "party %s of consortium %s serving on %s (mutual TLS, policy %s)",
            self.name,
            self.consortium.name,
            self.settings.listen,
            self.policy.path or "<default>",
        )
        return port

    def stop(self, grace: float = 5.0) -> None:
        """Stop serving: fail running jobs, let in-flight calls finish for ``grace`` s."""
        self._stopping.set()
        with self._cond:
            pool, self._audit_pool = self._audit_pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        self._set_health(serving=False)
        with self._cond:
            running = [j for j in self._jobs.values() if j.state == pb.JOB_STATE_RUNNING]
        public = PublicError("shutting_down", self.name)
        for job in running:
            if job.endpoint is not None:
                job.endpoint.abort(public.text(), code=public.code, party=public.party)
        for job in running:
            job.done.wait(min(grace, 5.0))
        if self._server is not None:
            self._server.stop(grace).wait(grace + 1)
        self._drop_channels()
        if self._ops is not None:
            self._ops.stop()
            self._ops = None
        for addon in reversed(self._addons):
            addon.stop()
        self._addons.clear()
        self.ledger.close()
        self.release_state()
        shutdown_pools(wait=False)  # the worker processes go with the node
        from ppdm.compute import close_engines

        close_engines()  # and the node's Spark session, if a job started one
        log.info("party %s stopped", self.name)

    def release_state(self) -> None:
        """Give the state folder's lock back (``stop`` does; so does a failed start)."""
        lock, self._state_lock = self._state_lock, None
        if lock is not None:
            lock.release()

    # Operations ----------------------------------------------------------------------------

    @property
    def http_port(self) -> int | None:
        """The bound port of the HTTP listener (``None`` without ``http_listen``)."""
        return self._ops.port if self._ops is not None else None

    def _set_health(self, *, serving: bool) -> None:
        if self._health is None:
            return
        from grpc_health.v1 import health_pb2

        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for service in ("", "ppdm.v1.Party"):
            self._health.set(service, status)

    def not_ready(self) -> str | None:
        """``None`` if the node accepts jobs, else why not (for ``/readyz``)."""
        if self._server is None:
            return "not started"
        if self._stopping.is_set():
            return "shutting down"
        if self.removed:
            return "this party is not in the roster"
        if self.own_certificate_stale:
            return "the roster lists a new certificate for this party; install it and reload"
        if not self.settings.entry.valid_now():
            return "this party's certificate is not valid now"
        return None

    def _refresh_gauges(self) -> None:
        with self._cond:
            running = sum(j.state == pb.JOB_STATE_RUNNING for j in self._jobs.values())
        self.metrics.running.set(running)
        self.metrics.streams.set(len(self.streams))

    def wait(self) -> None:
        if self._server is not None:
            self._server.wait_for_termination()

    def __enter__(self) -> PartyNode:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(grace=1.0)

    def reload_policy(self) -> bool:
        """Re-read the policy file (also done on SIGHUP and whenever the file changes)."""
        ok = self.policy.reload()
        self.ledger.append("policy", {"event": "reload", "ok": ok, "path": str(self.policy.path)})
        return ok

    def reload(self) -> bool:
        """What SIGHUP does: re-read the policy, then the settings file and the roster it
        names; a newer signed roster (and this party's rotated key and certificate) is
        taken without a restart. ``False`` if anything could not be taken (logged)."""
        ok = self.reload_policy()
        if self.settings.path is None:
            return ok
        try:
            fresh = load_settings(self.settings.path, verify_own_certificate=False)
        except PPDMError as exc:
            log.error("reload: settings not taken: %s", exc)
            return False
        new = fresh.consortium
        if new.version != self.consortium.version or new.payload() != self.consortium.payload():
            try:
                self.update_roster(new, source="reload")
            except ConfigError as exc:
                log.error("reload: roster not taken: %s", exc)
                return False
        return self._take_own_credentials(fresh) and ok

    def update_roster(self, new: Consortium, *, source: str) -> None:
        """Take a newer roster signed by the CA (:func:`ppdm.parties.roster.check_successor`
        decides): pin its certificates at once, inbound and outbound, and keep it on disk.
        Raises :class:`ConfigError` naming why a roster is not taken."""
        with self._roster_lock:
            current = self.consortium
            check_successor(current, new)
            changed = members_changed(current, new)
            path = current.path
            if source != "reload" and path is not None:
                tmp = path.with_name(path.name + ".incoming")
                tmp.write_text(roster_toml(new))
                os.replace(tmp, path)
                new = replace(new, path=path)
            self.consortium = new
            self.settings = replace(self.settings, consortium=new)
            self.removed = self.name not in new.names
            self._drop_channels()  # the next call dials with the new pins
            if not self.removed:
                self._take_own_credentials(self.settings)
        self.ledger.append(
            "roster",
            {
                "event": source,
                "from_version": current.version,
                "version": new.version,
                "changed": list(changed),
                "removed_self": self.removed,
            },
        )
        log.info(
            "roster version %d taken (%s; was %d; changed: %s)",
            new.version,
            source,
            current.version,
            ", ".join(changed) or "nothing",
        )
        if self.removed:
            log.error("this party %r is not in roster version %d", self.name, new.version)

    def _take_own_credentials(self, fresh: PartySettings) -> bool:
        """Use ``fresh``'s key and certificate if they are this party's roster entry now
        (after rotate-cert): new TLS handshakes present them at once."""
        entry = self.consortium.party(self.name) if not self.removed else None
        if entry is None:
            return False
        if certificate_fingerprint(fresh.certificate_pem) != entry.fingerprint:
            log.error(
                "the roster lists a new certificate for %r that this node does not hold yet: "
                "install the new key and certificate, then send SIGHUP",
                self.name,
            )
            self.own_certificate_stale = True
            return False
        if fresh.certificate_pem != self.settings.certificate_pem:
            self.settings = replace(
                self.settings,
                certificate_pem=fresh.certificate_pem,
                private_key_pem=fresh.private_key_pem,
            )
            self._drop_channels()  # the next call presents the new certificate
            log.info("this party's rotated certificate is in use")
        self.own_certificate_stale = False
        return True

    # Channels ----------------------------------------------------------------------------

    def channel(self, peer: str) -> grpc.Channel:
        """The node's shared mTLS channel to ``peer``."""
        with self._channel_lock:
            ch = self._channels.get(peer)
            if ch is None:
                ch = self._channels[peer] = open_channel(self.settings, peer)
            return ch

    def _drop_channels(self) -> None:
        """Close every cached peer channel (the roster or this party's own certificate
        changed)."""
        with self._channel_lock:
            channels = list(self._channels.values())
            self._channels.clear()
        for ch in channels:
            ch.close()

    def reset_channel(self, peer: str) -> None:
        """Drop the cached channel to ``peer`` (its node went away): the next use dials
        afresh, at once, instead of waiting out a broken channel's reconnect backoff.
        Streams still open on the old channel end with it."""
        with self._channel_lock:
            ch = self._channels.pop(peer, None)
        if ch is not None:
            ch.close()
            log.info("channel to %s reset", peer)

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
        metrics = self.metrics

        def transmit(recipient: str, data: bytes) -> None:
            links.transmit(recipient, data)
            metrics.sent(recipient, len(data))

        endpoint = Endpoint(
            self.name,
            parties,
            transmit,
            job_id=job_id,
            consortium=self.consortium.name,
            timeout=timeout,
            max_unread_bytes_per_peer=self.limits.max_unread_bytes_per_peer,
            max_unread_bytes_per_job=self.limits.max_unread_bytes_per_job,
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
                job = self._jobs.get(job_id)
                if job is not None and job.state in _DONE_STATES:
                    return None  # refused, cancelled or over: refuse its frames at once
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def forget_endpoint(self, job_id: str) -> None:
        """Drop a closed endpoint opened with :meth:`open_endpoint`."""
        with self._cond:
            self._endpoints.pop(job_id, None)
            self._links.pop(job_id, None)

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
        parallel (a peer that does not answer in time adds nothing: the audit then rests
        on this node's own history and the others')."""
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
        for peer, call in calls:
            try:
                reply = call.result()
            except grpc.RpcError as exc:
                log.warning("audit history from %s not available: %s", peer, exc.code())  # type: ignore[attr-defined]
                if exc.code() == grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
                    self.reset_channel(peer)
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
        return out

    def audit_history(self, input_key: str) -> list[dict[str, Any]]:
        """This node's audited sums on its current version of ``input_key``."""
        table, _, name = input_key.partition(".")
        if table not in ("inputs", "data") or not name or len(input_key) > 128:
            return []
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
        spec = get_job(job.protocol)
        if job.endpoint is None or job.links is None:
            raise RuntimeError(f"job {job.job_id!r} was started without its endpoint")
        state, result, error = pb.JOB_STATE_FAILED, None, None
        try:
            from ppdm.sources.limits import read_time_limit

            with read_time_limit(job.timeout_s or None):  # each source read ends within T
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

    # Housekeeping and peer monitor -----------------------------------------------------------

    def _watch(self) -> None:
        """Expire old proposals, close idle streams; declare a running job's peer dead when
        its node refuses connections; with the HTTP listener, probe every member now and
        then for the ``ppdm_peer_up`` gauge."""
        failures: dict[str, int] = {}
        last_roster_probe = 0.0
        while not self._stopping.wait(PROBE_INTERVAL_S):
            self._expire()
            self.streams.reap(self.limits.idle_stream_s, self.limits.ended_stream_grace_s)
            self._forget_ended(self.limits.ended_stream_grace_s)
            if not self._probe_peers:
                continue
            with self._cond:
                running = [j for j in self._jobs.values() if j.state == pb.JOB_STATE_RUNNING]
            peers = {p for j in running for p in j.parties if p != self.name}
            if self._ops is not None and time.monotonic() - last_roster_probe > PEER_UP_INTERVAL_S:
                last_roster_probe = time.monotonic()
                peers |= {p.name for p in self.consortium.parties if p.name != self.name}
            for peer in sorted(peers):
                try:
                    party_pb2_grpc.PartyStub(self.channel(peer)).Health(
                        pb.HealthRequest(), timeout=max(PROBE_INTERVAL_S * 2, 2.0)
                    )
                    failures[peer] = 0
                    self.metrics.peer_up.labels(peer=peer).set(1)
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
                        continue  # slow or busy is not dead; the receive timeout covers it
                    self.metrics.peer_up.labels(peer=peer).set(0)
                    failures[peer] = failures.get(peer, 0) + 1
                    self.reset_channel(peer)
                    if failures[peer] >= PROBE_FAILURES:
                        for job in running:
                            if peer in job.parties and job.endpoint is not None:
                                job.endpoint.fail_party(
                                    peer, "the party's node is unreachable (connection refused)"
                                )


class _Servicer(party_pb2_grpc.PartyServicer):
    def __init__(self, node: PartyNode) -> None:
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


def serve(
    settings: PartySettings,
    *,
    grace: float = 5.0,
    addons: Sequence[Callable[[PartyNode], Any]] = (),
) -> int:
    """Run a node until SIGINT or SIGTERM, then shut down cleanly; returns the exit code.
    SIGHUP re-reads the policy file, the settings and a newer signed roster. ``addons``
    start with the node and stop with it (``PartyNode``)."""
    tune_allocator()
    node = PartyNode(settings, addons=addons)
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signum)
        stop.set()

    def on_hup(_signum: int, _frame: Any) -> None:
        threading.Thread(target=node.reload, daemon=True).start()

    try:
        node.start()
    except BaseException:  # nothing served yet: give the state folder back quietly
        node.ledger.close()
        node.release_state()
        raise
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_hup)
    try:
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


# Dry run ---------------------------------------------------------------------------------


class _ReadOnlyState:
    """The ledger's state table, read without writing (the node may be running)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load_state(self, key: str) -> dict[str, Any] | None:
        return read_state(self.path, key)

    def save_state(self, key: str, value: Mapping[str, Any]) -> None:
        raise RuntimeError("the dry run records nothing")


def dry_run(
    settings: PartySettings,
    name: str,
    params: Mapping[str, Any],
    *,
    parties: Sequence[str],
    initiator: str,
) -> dict[str, Any]:
    """What this party's node would decide on job ``name`` (``ppdm policy check``):
    the same :func:`decide` as ``ProposeJob``, with the audit history read from the
    node's ledger; nothing is sent, recorded or reserved. Rate limits are not
    simulated (they depend on the running node's recent jobs)."""
    path = policy_path(settings)
    policy = PolicyFile(path).current()
    auditor = DisclosureAuditor(settings.name, _ReadOnlyState(ledger_path(settings)))
    ctx = PartyContext(name=settings.name, settings=settings.raw, base_dir=settings.base_dir)
    spec = get_job(name)
    decision, disclosure, audit = decide(
        policy,
        auditor=auditor,
        ctx=ctx,
        job_id="dry-run",
        protocol=spec.name,
        params=dict(params),
        initiator=initiator,
        parties=settings.consortium.order(list(parties)),
    )
    return {
        "job": spec.name,
        "party": settings.name,
        "initiator": initiator,
        "parties": list(settings.consortium.order(list(parties))),
        "decision": decision.outcome,
        "rule": decision.rule,
        "reason": decision.reason,
        "cause": decision.cause,  # the local cause: a dry run is the owner's own
        "results_to": decision.results,
        "leakage": disclosure.as_dict() if disclosure is not None else None,
        "audit": audit,
        "policy": str(path) if path is not None else "<default policy>",
    }
