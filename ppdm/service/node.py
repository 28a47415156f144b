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

This module is the node process: :class:`PartyNode` (start, stop, health, reload, the
peer monitor) and :func:`serve` (signals). The rest sits in one module per
responsibility: the job lifecycle (:mod:`ppdm.service.lifecycle`, a part of
``PartyNode``), the peers (:mod:`ppdm.service.peers`: channels, pinning, roster and
certificate updates, also a part of ``PartyNode``), the gRPC servicer, a thin adapter
over the lifecycle (:mod:`ppdm.service.servicer`), the decision and its dry run
(:mod:`ppdm.service.decision`), the job's states and records
(:mod:`ppdm.service.jobstate`) and what a node holds on its host
(:mod:`ppdm.service.host`). The names other code imports still import from here.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from ppdm import __version__
from ppdm.errors import ConfigError, PPDMError, PublicError
from ppdm.parties.consortium import PartySettings, load_settings
from ppdm.parties.grpc_net import (
    JobLinks,
    ReassemblyBudget,
    StreamWatch,
    channel_options,
    dynamic_server_credentials,
)
from ppdm.parties.network import Endpoint
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.service.decision import decide as decide
from ppdm.service.decision import dry_run as dry_run
from ppdm.service.decision import policy_path
from ppdm.service.disclosure import DisclosureAuditor
from ppdm.service.host import StateLock, check_port_free, tune_allocator
from ppdm.service.jobstate import STATE_NAMES as STATE_NAMES
from ppdm.service.jobstate import Job
from ppdm.service.jobstate import from_struct as from_struct
from ppdm.service.jobstate import to_struct as to_struct
from ppdm.service.ledger import Ledger, ledger_path
from ppdm.service.lifecycle import MAX_NOTIFY_RUNNING, JobLifecycle
from ppdm.service.lifecycle import MAX_TIMEOUT_S as MAX_TIMEOUT_S
from ppdm.service.lifecycle import SETTINGS_RULE as SETTINGS_RULE
from ppdm.service.metrics import NodeMetrics, OpsServer
from ppdm.service.policy import PolicyFile
from ppdm.service.servicer import MAX_STREAMS_PER_PEER as MAX_STREAMS_PER_PEER
from ppdm.service.servicer import _add_party_service, _Servicer

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

PROBE_INTERVAL_S = 1.0
PROBE_FAILURES = 2
PEER_UP_INTERVAL_S = 15.0  # every member probed this often for ppdm_peer_up (with http_listen)


# The node ------------------------------------------------------------------------------


class PartyNode(JobLifecycle):
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
        self.metrics = NodeMetrics(self.name, version=__version__)  # collectors at first use
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
        data = self.settings.raw.get("data", {})
        if not isinstance(data, dict) or data:  # no entries: nothing to check (nor import)
            from ppdm.sources.config import parse_data_table

            # The [data] entries' form (kinds, paths, credentials' places) is checked now;
            # the files and databases themselves are read afresh by each job.
            parse_data_table(
                data,
                base_dir=self.settings.base_dir,
                where=f"{self.settings.path or 'settings'}: [data]",
            )
        compute = self.settings.raw.get("compute")
        if compute is not None:  # none: the embedded engine, nothing to check (nor import)
            from ppdm.compute import parse_compute_table

            # The [compute] engine is checked now; a Spark session starts with the first job.
            parse_compute_table(compute, where=f"{self.settings.path or 'settings'}: [compute]")
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
            # A call waiting on the node's state (a peer's frames for a job not started
            # here yet, up to [limits] pending_job_wait_s) wakes now and sees the stop:
            # such a wait once kept a stopped node's process alive for minutes.
            self._cond.notify_all()
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
        workers = sys.modules.get("ppdm.workers")  # not imported: no job started a pool
        if workers is not None:
            workers.shutdown_pools(wait=False)  # the worker processes go with the node
        compute = sys.modules.get("ppdm.compute")  # not imported: no job opened an engine
        if compute is not None:
            compute.close_engines()  # and the node's Spark session, if a job started one
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


def serve(
    settings: PartySettings,
    *,
    grace: float = 5.0,
    addons: Sequence[Callable[[PartyNode], Any]] = (),
) -> int:
    """Run a node until SIGINT or SIGTERM, then shut down cleanly; returns the exit code.
    SIGHUP re-reads the policy file, the settings and a newer signed roster. ``addons``
    start with the node and stop with it (``PartyNode``)."""
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
    if not gc.isenabled():  # held off for the start by the caller (``ppdm party serve``):
        gc.freeze()  # what the start made lives as long as the node, never rescanned,
        gc.enable()  # and collection resumes
    tune_allocator()  # for the jobs' frames: none has come yet, the node only now serves
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
