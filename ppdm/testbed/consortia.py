"""Test beds: a whole consortium on 127.0.0.1, for tests and benchmarks.

:class:`GrpcTestbed` is the real thing: ``ppdm consortium init`` into a folder, one
``python -m ppdm party serve`` process per party, jobs started as one party's client
exactly as ``ppdm job run`` does::

    with GrpcTestbed(["alice", "bob", "carol"], tmp_path) as bed:
        doc = bed.run_job("secure-sum")
        print(doc["state"])  # succeeded

:class:`LoopbackConsortium` runs every party's node inside the current process (still
gRPC over 127.0.0.1 with mutual TLS) and can run *any* function per party on the gRPC
transport with the same semantics as :func:`ppdm.parties.local.simulate`; the network
contract tests use it to run one suite against both transports.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import grpc

import ppdm
from ppdm.errors import PPDMError
from ppdm.parties.consortium import (
    DEFAULT_MAX_MESSAGE_BYTES,
    NodeLimits,
    PartySettings,
    init_consortium,
    load_settings,
    update_toml_file,
    write_toml,
)
from ppdm.parties.local import Simulation, simulate
from ppdm.parties.network import DEFAULT_TIMEOUT, Endpoint, Network
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.service.client import NodeClient, health, run_job
from ppdm.service.node import PartyNode, to_struct
from ppdm.service.policy import DEFAULT_POLICY_TOML, SETTLE_S, parse_policy

__all__ = ["GrpcTestbed", "LoopbackConsortium", "free_ports"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

_REPO_ROOT = Path(ppdm.__file__).resolve().parent.parent


# -- processes that die with the process that started them ----------------------------------

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# One long-lived thread starts every node: Linux sends the parent-death signal when the
# *thread* that forked the child ends, so a node started from a short-lived test thread
# would die with that thread. This one lives until the interpreter exits.
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ppdm-testbed-spawner")


def _death_signal_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when this process dies, however
    it dies (SIGKILL included), or ``None`` where Linux's ``prctl`` is not available.

    The function only calls ``prctl`` (resolved here, in the parent) and ``getppid``
    in the child, which is safe between ``fork`` and ``exec`` in a threaded parent."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()
    kill = int(signal.SIGKILL)

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, kill, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return preexec


def spawn_tied(argv: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **popen)`` for a process that must not outlive this one:
    in its own process group (:func:`kill_tied` ends it and anything it started) and,
    on Linux, killed by the kernel (``PR_SET_PDEATHSIG``) as soon as this process ends,
    however it ends (a test timeout, SIGKILL of pytest). The death signal survives
    ``exec`` of ordinary programs (``ip netns exec`` included) but is cleared when a
    program changes its user (use ``setpriv --pdeathsig KILL`` after such a change)."""
    preexec = _death_signal_preexec()
    extra: dict[str, Any] = {"process_group": 0}
    if preexec is not None:
        extra["preexec_fn"] = preexec

    def start() -> subprocess.Popen[Any]:
        return subprocess.Popen(list(argv), **popen, **extra)

    return _spawner.submit(start).result()


def kill_tied(proc: subprocess.Popen[Any], *, wait: float = 60.0) -> None:
    """SIGKILL ``proc``'s process group (the process and anything it started there)
    and reap ``proc``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait(wait)


def write_policy(path: Path, text: str) -> None:
    """Check a policy text (:class:`~ppdm.errors.ConfigError` if it is not valid) and
    write it to ``path`` atomically (a running node re-reads it on its next job)."""
    parse_policy(tomllib.loads(text), source="<testbed policy>")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    # Written whole and renamed: mark it settled so that a running node takes it at once.
    past = time.time() - 2 * SETTLE_S
    os.utime(tmp, (past, past))
    os.replace(tmp, path)


def _ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of ephemeral ports (the source ports of outgoing connections
    and of ``bind(port 0)``); Linux's default where it cannot be read."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


#: The testbed's ports are drawn from here, below the ephemeral range.
_TESTBED_PORTS = (20000, 32768)


def _port_pool() -> range:
    low, high = _TESTBED_PORTS
    eph_low, eph_high = _ephemeral_ports()
    if eph_low < high and eph_high >= low:  # an unusual range overlapping ours
        low, high = 1024, eph_low
    if high - low < 1000:
        low, high = eph_high + 1, 65536
    return range(low, high)


def _bindable(host: str, port: int) -> socket.socket | None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        return None
    return sock


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct TCP ports that are free on ``host`` right now.

    They are drawn at random from outside the kernel's ephemeral range: a port the kernel
    hands out (``bind`` to port 0) can be taken, before the node that is to listen on it
    starts, as the source port of any outgoing connection on the machine, such as one
    node dialling another in a parallel test. Random draws keep parallel callers (test
    workers) apart.
    """
    pool = _port_pool()
    ports: list[int] = []
    socks: list[socket.socket] = []  # held until all are found: no port twice
    try:
        for _ in range(200 * max(n, 1)):
            if len(ports) == n:
                break
            port = pool[secrets.randbelow(len(pool))]
            if port in ports:
                continue
            sock = _bindable(host, port)
            if sock is not None:
                ports.append(port)
                socks.append(sock)
        if len(ports) < n:
            raise RuntimeError(f"no {n} free ports on {host} in {pool.start}-{pool.stop - 1}")
        return ports
    finally:
        for s in socks:
            s.close()


def free_port_range(n: int, host: str = "127.0.0.1") -> int:
    """The first of ``n`` consecutive TCP ports that are all free on ``host`` right now
    (for settings that take a base port, such as ``ppdm consortium init --base-port``),
    drawn like :func:`free_ports`."""
    pool = _port_pool()
    for _ in range(200):
        base = pool[secrets.randbelow(len(pool) - n)]
        socks = []
        try:
            for port in range(base, base + n):
                sock = _bindable(host, port)
                if sock is None:
                    break
                socks.append(sock)
            if len(socks) == n:
                return base
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports on {host}")


def wait_for_nodes_code(deadline_s: float) -> str:
    """Python source, for ``python -c CODE SETTINGS...`` in a shell script, that waits for
    the nodes of the given settings files: each node's own health call (``ppdm party
    health --self``'s) every 0.1 s until it answers, one process for the whole group; a
    group not up after ``deadline_s`` (a hang) exits naming the silent node. (A ``ppdm
    party health`` start per try costs about 0.7 CPU s.)"""
    return f"""
import sys, time
from ppdm.cli._output import load_settings
from ppdm.service.client import health
deadline = time.monotonic() + {float(deadline_s)}
for path in sys.argv[1:]:
    while True:
        try:
            report = health(load_settings(path), timeout=5.0, only_self=True)
            if all(r["ok"] for r in report.values()):
                break
            last = report
        except Exception as exc:
            last = exc
        if time.monotonic() > deadline:
            sys.exit(f"the node of {{path}} never answered its health call: {{last}}")
        time.sleep(0.1)
"""


def write_party_tables(
    path: Path, party: str, inputs: Any | None, data: Mapping[str, str] | None
) -> None:
    """Write ``party``'s private ``[inputs]`` (a table, or one ``secure_sum`` number)
    and ``[data]`` tables into its settings file, where a node reads them for every job
    (tests plant their secrets here, not in a settings object the node never re-reads)."""
    with path.open("rb") as f:
        doc = tomllib.load(f)
    if isinstance(inputs, Mapping):
        doc["inputs"] = dict(inputs)
    elif inputs is not None:
        doc.setdefault("inputs", {})["secure_sum"] = inputs
    if data is not None:
        doc["data"] = {k: str(v) for k, v in data.items()}
    path.write_text(write_toml(doc, header=f"Private settings of party {party!r} (testbed)."))


class GrpcTestbed:
    """A consortium of ``parties`` on 127.0.0.1, one ``ppdm party serve`` process each.

    Parameters
    ----------
    parties
        Party names, in roster order.
    workdir
        Folder for the consortium files and the nodes' logs (``logs/<party>.log``).
    base_port
        First port (party ``i`` gets ``base_port + i``); default: free ports.
    timeout
        Default job timeout (each receive) in seconds.
    max_message_bytes
        The consortium's maximum gRPC message size (envelopes above it are chunked).
    inputs
        Per party, its private ``secure_sum`` input, or a dict that becomes its whole
        ``[inputs]`` table (default: a random ``secure_sum`` sample each).
    data
        Per party, its ``[data]`` table (data file paths, absolute or relative to
        ``workdir``), read by jobs through ``ctx.data_path(key)``.
    start_timeout
        How long to wait for every node to answer ``Health``.
    """

    def __init__(
        self,
        parties: Sequence[str],
        workdir: str | Path,
        *,
        base_port: int | None = None,
        timeout: float = 60.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        inputs: Mapping[str, Any] | None = None,
        data: Mapping[str, Mapping[str, str]] | None = None,
        start_timeout: float = 60.0,
        log_level: str = "INFO",
        keep_ca_key: bool = False,
        policy: str | Mapping[str, str] | None = None,
        limits: NodeLimits | None = None,
    ) -> None:
        self.parties = tuple(parties)
        self.workdir = Path(workdir)
        self.timeout = float(timeout)
        self.start_timeout = float(start_timeout)
        self.log_level = log_level
        ports = (
            free_ports(len(self.parties))
            if base_port is None
            else [base_port + i for i in range(len(self.parties))]
        )
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.consortium_file = init_consortium(
            self.workdir,
            self.parties,
            ports=ports,
            job_timeout_s=self.timeout,
            max_message_bytes=max_message_bytes,
            keep_ca_key=keep_ca_key,
            overwrite=True,
            policy_text=DEFAULT_POLICY_TOML,
        )
        for party in self.parties:
            text = policy.get(party) if isinstance(policy, Mapping) else policy
            if text is not None:
                self.set_policy(party, text)
        for party in self.parties:
            if (inputs and party in inputs) or (data and party in data):
                self._update_settings(
                    party,
                    inputs.get(party) if inputs and party in inputs else None,
                    data.get(party) if data else None,
                )
        if limits is not None:
            for party in self.parties:
                self.set_limits(party, limits)
        self.settings: dict[str, PartySettings] = {
            p: load_settings(self.settings_path(p)) for p in self.parties
        }
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        (self.workdir / "logs").mkdir(exist_ok=True)

    def _update_settings(
        self, party: str, inputs: Any | None, data: Mapping[str, str] | None
    ) -> None:
        write_party_tables(self.settings_path(party), party, inputs, data)

    def set_limits(self, party: str, limits: NodeLimits) -> None:
        """Write ``limits`` (the fields that differ from the defaults) as the ``[limits]``
        table of ``party``'s settings file (a node takes them when it starts)."""
        table = {
            k: getattr(limits, k)
            for k in NodeLimits.__dataclass_fields__
            if getattr(limits, k) != getattr(NodeLimits, k)
        }
        update_toml_file(self.settings_path(party), {"limits": table})

    def policy_path(self, party: str) -> Path:
        return self.workdir / f"{party}.policy.toml"

    def set_policy(self, party: str, text: str) -> None:
        """Replace ``party``'s policy file (a running node re-reads it on its next job)."""
        write_policy(self.policy_path(party), text)

    def settings_path(self, party: str) -> Path:
        return self.workdir / f"{party}.toml"

    def log_path(self, party: str) -> Path:
        return self.workdir / "logs" / f"{party}.log"

    def private_inputs(self) -> dict[str, Any]:
        """Each party's ``[inputs]`` table (to compute expected results in tests)."""
        return {p: dict(s.raw.get("inputs", {})) for p, s in self.settings.items()}

    # Processes -------------------------------------------------------------------------

    def start(self) -> GrpcTestbed:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])]
        )
        for p in self.parties:
            self._spawn(p, env)
        self.wait_healthy()
        return self

    def _spawn(self, party: str, env: Mapping[str, str]) -> None:
        with self.log_path(party).open("ab") as logf:
            self._procs[party] = spawn_tied(
                [
                    sys.executable,
                    "-m",
                    "ppdm",
                    "party",
                    "serve",
                    str(self.settings_path(party)),
                    "--log-level",
                    self.log_level,
                ],
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=logf,
                env=dict(env),
                cwd=str(self.workdir),
            )

    def wait_healthy(self) -> None:
        """Wait until every running node answers ``Health`` (or raise with its log)."""
        deadline = time.monotonic() + self.start_timeout
        client = self.settings[self.parties[0]]
        waiting = set(self._procs)
        channels: dict[str, grpc.Channel] = {}
        try:
            from ppdm.parties.grpc_net import open_channel

            while waiting:
                for p in sorted(waiting):
                    proc = self._procs[p]
                    if proc.poll() is not None:
                        raise PPDMError(
                            f"node {p!r} exited with code {proc.returncode}:\n{self.log(p)}"
                        )
                    ch = channels.get(p) or channels.setdefault(p, open_channel(client, p))
                    try:
                        party_pb2_grpc.PartyStub(ch).Health(pb.HealthRequest(), timeout=1.0)
                        waiting.discard(p)
                    except grpc.RpcError:
                        # A fresh channel for the next poll: this one waits out gRPC's
                        # reconnect backoff (up to 2 s) before it tries the port again.
                        channels.pop(p).close()
                if waiting:
                    if time.monotonic() > deadline:
                        raise PPDMError(
                            f"nodes {sorted(waiting)} not healthy after {self.start_timeout:g} s"
                        )
                    time.sleep(0.1)
        finally:
            for ch in channels.values():
                ch.close()

    def log(self, party: str) -> str:
        try:
            return self.log_path(party).read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self, party: str) -> None:
        """Kill ``party``'s node at once (SIGKILL), as a crash would."""
        kill_tied(self._procs[party])

    def terminate(self, party: str, *, grace: float = 10.0) -> int:
        """Stop ``party``'s node with SIGTERM (SIGKILL after ``grace`` s); exit code."""
        proc = self._procs[party]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                kill_tied(proc)
        return proc.returncode

    def send_signal(self, party: str, signum: int) -> None:
        """Send ``signum`` to ``party``'s node (e.g. SIGHUP: re-read the policy)."""
        self._procs[party].send_signal(signum)

    def restart(self, party: str, *, grace: float = 10.0) -> None:
        """Stop ``party``'s node (SIGTERM) and start it again; wait until it is healthy."""
        self.terminate(party, grace=grace)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])]
        )
        self._spawn(party, env)
        self.wait_healthy()

    def stop(self) -> None:
        for p in list(self._procs):
            if self._procs[p].poll() is None:
                self._procs[p].send_signal(signal.SIGTERM)
        for p in list(self._procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._procs[p].wait(60)
            kill_tied(self._procs[p])  # and whatever the node left in its group

    def __enter__(self) -> GrpcTestbed:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Jobs ------------------------------------------------------------------------------

    def start_only_at(
        self,
        at: str,
        *,
        initiator: str | None = None,
        protocol: str = "secure-sum",
        timeout_s: float = 300.0,
    ) -> str:
        """Propose ``protocol`` to every member (all accept under an open policy) and start
        it at ``at`` only: it runs there while the others hold it pending, so ``at``'s
        messages wait at them (reliability tests). Returns the job id."""
        initiator = initiator or at
        settings = self.settings[initiator]
        job_id = uuid.uuid4().hex
        request = pb.JobRequest(
            consortium=settings.consortium.name,
            job_id=job_id,
            protocol=protocol,
            params=to_struct({}),
            initiator=initiator,
            parties=list(self.parties),
            timeout_s=timeout_s,
            roster_version=settings.consortium.version,
        )
        with NodeClient(settings) as client:
            for p in self.parties:
                client.stub(p).ProposeJob(request, timeout=timeout_s)
            client.stub(at).StartJob(pb.JobRef(job_id=job_id), timeout=timeout_s)
        return job_id

    def run_job(
        self,
        name: str,
        params: Mapping[str, Any] | None = None,
        *,
        initiator: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        parties: Sequence[str] | None = None,
        job_id: str | None = None,
    ) -> dict[str, Any]:
        """Run job ``name`` as ``initiator`` (default: the first party), like
        ``ppdm job run``; returns the job document (``docs/jobs.md``).

        ``deadline`` bounds the whole wait (default ``10 * timeout + 60`` s); ``job_id``
        defaults to a fresh one.
        """
        who = initiator or self.parties[0]
        t = self.timeout if timeout is None else float(timeout)
        return run_job(
            self.settings[who],
            name,
            params,
            timeout=t,
            parties=parties,
            deadline=deadline if deadline is not None else 10 * t + 60,
            job_id=job_id,
        )

    def health(self, *, as_party: str | None = None) -> dict[str, dict[str, Any]]:
        return health(self.settings[as_party or self.parties[0]])


#: The party :func:`freeze_a_ring_member` freezes, and the delay with which the others
#: than alice pass the ring's token on (the head start of the timeout that names it).
SILENT_PARTY = "carol"
RING_DELAY_S = 0.1


def silent_peer_named_after(
    root: Path, timeout: float, *, hang_s: float = 300.0
) -> tuple[dict[str, Any], dict[str, float], dict[str, str | None]]:
    """:func:`freeze_a_ring_member` on a new three-party consortium (alice, bob, carol,
    open policy) in ``root``, stopped after. Used by ``benchmarks/silent_peer.py``."""
    from ppdm.service.policy import OPEN_POLICY_TOML

    with GrpcTestbed(
        ["alice", "bob", "carol"], root, timeout=timeout, policy=OPEN_POLICY_TOML
    ) as bed:
        return freeze_a_ring_member(bed, timeout, hang_s=hang_s)


def freeze_a_ring_member(
    bed: GrpcTestbed, timeout: float, *, hang_s: float = 300.0
) -> tuple[dict[str, Any], dict[str, float], dict[str, str | None]]:
    """Freeze :data:`SILENT_PARTY` (``SIGSTOP``) in a running three-party ``ring-echo``
    job of ``bed`` (parties alice, bob, carol; a policy that runs it) with receive timeout
    ``timeout``, wake it again (``SIGCONT``) once the job has ended, and return the job
    document and, for the document and each surviving node's ledger, the seconds from
    the freeze to the recorded failure (the document's end; ``ended_at`` in alice's and
    bob's job tables), and the party each of those nodes blamed. Used by the silent-peer
    test (one bed for several timeouts) and :func:`silent_peer_named_after`; raises
    ``AssertionError`` if the job does not end within ``hang_s`` or a node did not record
    its failure within ``hang_s``.

    Why carol: the token goes alice -> bob -> carol -> alice and only bob and carol
    wait :data:`RING_DELAY_S` before passing it on. alice, which waits on carol, has
    waited since she passed the token on, at least that delay longer than bob (which
    waits on alice) has, so her timeout fires first and names carol however loaded the
    machine. With bob frozen instead, carol (waiting on bob) and alice (waiting on carol)
    start waiting within one hop of each other, and a loaded machine often fires alice's
    timeout first: she then names carol, not the frozen party."""
    import threading

    from ppdm.service.ledger import Ledger

    box: dict[str, Any] = {}
    job_id = uuid.uuid4().hex

    def run() -> None:
        box["called"] = time.time()
        box["doc"] = bed.run_job(
            "ring-echo",
            {"rounds": 1_000_000, "delay_s": RING_DELAY_S},
            timeout=timeout,
            deadline=hang_s,
            job_id=job_id,
        )

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    deadline = time.monotonic() + hang_s
    while job_id not in bed.health()["alice"]["running_jobs"] and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    frozen = time.time()
    bed.send_signal(SILENT_PARTY, signal.SIGSTOP)
    try:
        runner.join(hang_s)
        if runner.is_alive():
            raise AssertionError("the job did not end after a node froze")
    finally:
        bed.send_signal(SILENT_PARTY, signal.SIGCONT)
    doc = box["doc"]
    named = {"document": box["called"] + doc["wall_time_s"] - frozen}
    blamed: dict[str, str | None] = {}
    for party in ("alice", "bob"):
        # A node reports a job's end before its ledger has the record: wait for it (the
        # nodes still run), the time read is the recorded one.
        while True:
            ledger = Ledger(bed.workdir / "state" / party / "ledger.sqlite")
            try:
                rec = ledger.load_job(doc["job_id"])
            finally:
                ledger.close()
            if rec is not None and rec.get("ended_at"):  # 0.0 until the job ends
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{party} recorded no end of job {doc['job_id']}")
            time.sleep(0.05)
        if rec["state"] != "failed":
            raise AssertionError(f"{party} recorded no failure of job {doc['job_id']}")
        named[party] = rec["ended_at"] - frozen
        blamed[party] = (rec.get("error") or {}).get("party")
    return doc, named, blamed


class LoopbackConsortium:
    """Every party's :class:`~ppdm.service.node.PartyNode` in this process, over gRPC
    with mutual TLS on 127.0.0.1 (see the module docstring).

    :meth:`simulate` has the signature and semantics of
    :func:`ppdm.parties.local.simulate`, with the gRPC transport underneath.
    ``inputs`` and ``data`` (per party, as for :class:`GrpcTestbed`) are written into
    the settings files, which every node re-reads for each job.
    """

    def __init__(
        self,
        parties: Sequence[str],
        workdir: str | Path,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        probe_peers: bool = True,
        pending_wait_s: float = 30.0,
        keep_ca_key: bool = False,
        policy: str | Mapping[str, str] | None = None,
        limits: NodeLimits | None = None,
        inputs: Mapping[str, Any] | None = None,
        data: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.parties = tuple(parties)
        self.workdir = Path(workdir)
        init_consortium(
            self.workdir,
            self.parties,
            ports=free_ports(len(self.parties)),
            max_message_bytes=max_message_bytes,
            keep_ca_key=keep_ca_key,
            overwrite=True,
            policy_text=DEFAULT_POLICY_TOML,
        )
        for party in self.parties:
            text = policy.get(party) if isinstance(policy, Mapping) else policy
            if text is not None:
                write_policy(self.workdir / f"{party}.policy.toml", text)
        for party in self.parties:  # the settings files, which nodes re-read for every job
            if (inputs and party in inputs) or (data and party in data):
                write_party_tables(
                    self.workdir / f"{party}.toml",
                    party,
                    inputs.get(party) if inputs and party in inputs else None,
                    data.get(party) if data else None,
                )
        self.settings = {p: load_settings(self.workdir / f"{p}.toml") for p in self.parties}
        if limits is not None:
            self.settings = {p: replace(s, limits=limits) for p, s in self.settings.items()}
        self.nodes = {
            p: PartyNode(self.settings[p], probe_peers=probe_peers, pending_wait_s=pending_wait_s)
            for p in parties
        }

    def start(self) -> LoopbackConsortium:
        for node in self.nodes.values():
            node.start()
        return self

    def stop(self) -> None:
        for node in self.nodes.values():
            node.stop(grace=1.0)

    def __enter__(self) -> LoopbackConsortium:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def open(self, *, timeout: float = DEFAULT_TIMEOUT, job_id: str | None = None) -> _LoopbackJob:
        """Endpoints of one new job at every node (close it with :meth:`_LoopbackJob.close`)."""
        return _LoopbackJob(self, job_id or uuid.uuid4().hex, timeout)

    def simulate(
        self,
        fn: Callable[[Network, T], R],
        inputs: Mapping[str, T],
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Simulation[R]:
        """Run ``fn(endpoint, inputs[party])`` at every party of ``inputs`` over gRPC."""
        job = _LoopbackJob(self, uuid.uuid4().hex, timeout, parties=list(inputs))
        try:
            return simulate(fn, inputs, timeout=timeout, network=job)  # type: ignore[arg-type]
        finally:
            job.close()


class _LoopbackJob:
    """One job's gRPC endpoints at every node of a :class:`LoopbackConsortium`; quacks
    like :class:`~ppdm.parties.local.LocalNetwork` for :func:`simulate`."""

    def __init__(
        self,
        bed: LoopbackConsortium,
        job_id: str,
        timeout: float,
        parties: Sequence[str] | None = None,
    ) -> None:
        self.bed = bed
        self.job_id = job_id
        self.parties = tuple(parties or bed.parties)
        self._endpoints: dict[str, Endpoint] = {}
        for p in self.parties:
            ep, _links = bed.nodes[p].open_endpoint(job_id, self.parties, timeout=timeout)
            self._endpoints[p] = ep

    def endpoint(self, party: str) -> Endpoint:
        return self._endpoints[party]

    def __getitem__(self, party: str) -> Endpoint:
        return self._endpoints[party]

    def close(self, *, timeout: float = 10.0) -> None:
        for p in self.parties:
            self.bed.nodes[p].close_endpoint(self.job_id, timeout=timeout)
        for p in self.parties:
            self.bed.nodes[p].forget_endpoint(self.job_id)
