"""A consortium of real nodes in Linux network namespaces behind a delaying relay.

WAN test bed for one machine (issue 16): every party's ``ppdm party serve`` process runs
in its own network namespace, joined to the root namespace by a veth pair in a private
``10.X.(i+1).0/24`` that exists only between the namespaces this module creates. A
userspace TCP relay (:class:`DelayRelay`, asyncio) in the root namespace listens for
every party on ``10.X.1.1:PORT_i`` (the roster's address of party ``i``) and forwards to
the node at ``10.X.(i+1).2:PORT_i``, holding every chunk for ``delay_s`` (one-way delay,
RTT = 2 x ``delay_s``) in each direction before passing it on; chunks keep their order.
This machine's kernel has no ``tc netem``, hence the relay; it delays data, not the TCP
handshake with the relay (a new connection costs no emulated round trip, its TLS
handshake does).

Needs root and ``ip netns`` (iproute2): :func:`netns_unavailable` says why not. Every
namespace is deleted again by :meth:`NetnsConsortium.stop` (also on errors during
start); every command and wait is bounded.

::

    with NetnsConsortium(["alice", "bob", "carol"], tmp_path) as bed:
        bed.set_rtt(0.020)
        doc = bed.run_job("secure-sum")
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import ppdm
from ppdm.errors import PPDMError
from ppdm.testbed.consortia import kill_tied, spawn_tied

__all__ = ["DelayRelay", "NetnsConsortium", "netns_unavailable"]

log = logging.getLogger(__name__)

_REPO_ROOT = Path(ppdm.__file__).resolve().parent.parent
_COMMAND_TIMEOUT_S = 20.0
_instances = itertools.count()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", *args],
        capture_output=True,
        text=True,
        timeout=_COMMAND_TIMEOUT_S,
        check=check,
    )


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be used here (``None`` if they can)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    if shutil.which("ip") is None:
        return "no `ip` command (install iproute2)"
    probe = f"ppdm-probe-{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return f"`ip netns add` does not work here: {detail.strip()[:200]}"
    finally:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            _ip("netns", "delete", probe, check=False)
    return None


def _free_subnet() -> int:
    """A second octet ``X`` such that no interface has an address in ``10.X.0.0/16``."""
    shown = _ip("-4", "-o", "addr", "show").stdout + _ip("-4", "route", "show").stdout
    used = {int(m) for m in re.findall(r"\b10\.(\d+)\.", shown)}
    for octet in range(250, 200, -1):
        if octet not in used:
            return octet
    raise PPDMError("no free 10.X.0.0/16 subnet for the namespaces")


@contextlib.contextmanager
def _subnet_claim() -> Iterator[None]:
    """Held from choosing a subnet (:func:`_free_subnet`) until its addresses exist: two
    testbeds starting at once on one host (two test workers, two users) would otherwise
    both see ``10.250.0.0/16`` free and take it, and neither's nodes would be reachable.
    A lock on a file every process on the host sees (``flock``: released when its holder
    dies, however it dies)."""
    path = Path(tempfile.gettempdir()) / "ppdm-netns-subnets.lock"
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class DelayRelay:
    """A TCP relay adding ``delay_s`` to every chunk in each direction (module docstring).

    ``routes`` maps a listening ``(host, port)`` to the ``(host, port)`` it forwards to.
    The delay can be changed while it runs (:attr:`delay_s`); chunks keep their order.
    """

    def __init__(
        self,
        routes: Mapping[tuple[str, int], tuple[str, int]],
        *,
        delay_s: float = 0.0,
    ) -> None:
        self.routes = dict(routes)
        self.delay_s = float(delay_s)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        # Strong references to the running connections' tasks: the event loop holds
        # tasks weakly, and an idle long-lived connection (gRPC keeps its channels open)
        # must not be garbage-collected while it waits for data.
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self, *, timeout: float = 10.0) -> DelayRelay:
        self._thread = threading.Thread(target=self._main, name="ppdm-relay", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise PPDMError(f"relay did not start within {timeout:g} s")
        if self._error is not None:
            raise PPDMError(f"relay could not listen: {self._error}")
        return self

    def stop(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout=10.0)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to start(); the thread just ends
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        servers = []
        try:
            for (host, port), target in self.routes.items():

                async def handle(
                    r: asyncio.StreamReader, w: asyncio.StreamWriter, t: tuple[str, int] = target
                ) -> None:
                    await self._connection(r, w, t)

                servers.append(await asyncio.start_server(handle, host, port))
        except OSError as exc:
            self._error = exc
        self._ready.set()
        try:
            if self._error is None:
                await self._stop.wait()
        finally:
            for server in servers:
                server.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()

    async def _connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: tuple[str, int]
    ) -> None:
        me = asyncio.current_task()
        if me is not None:
            self._tasks.add(me)
        try:
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection(*target), 10.0
                )
            except (OSError, TimeoutError):
                writer.close()
                return
            pipes = [
                asyncio.create_task(self._pipe(reader, up_writer)),
                asyncio.create_task(self._pipe(up_reader, writer)),
            ]
            self._tasks.update(pipes)
            try:
                await asyncio.gather(*pipes)
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                for task in pipes:
                    task.cancel()
                    self._tasks.discard(task)
                for w in (writer, up_writer):
                    with contextlib.suppress(Exception):
                        w.close()
        finally:
            if me is not None:
                self._tasks.discard(me)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy ``reader`` to ``writer``, each chunk ``delay_s`` after it arrived."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    with contextlib.suppress(OSError, RuntimeError):
                        if writer.can_write_eof():
                            writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(deliver())
        self._tasks.add(sender)
        sender.add_done_callback(self._tasks.discard)
        try:
            while True:
                data = await reader.read(1 << 16)
                queue.put_nowait((loop.time() + self.delay_s, data))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()


class NetnsConsortium:
    """Nodes of ``parties`` in their own network namespaces behind a :class:`DelayRelay`.

    Parameters
    ----------
    parties
        Party names, in roster order.
    workdir
        Folder for the consortium files and the nodes' logs (``logs/<party>.log``).
    inputs, data
        Per party, its ``[inputs]`` and ``[data]`` tables (absolute data paths).
    timeout
        Default job timeout (each receive) in seconds.
    start_timeout
        How long to wait for every node to answer ``Health`` through the relay.
    """

    def __init__(
        self,
        parties: Sequence[str],
        workdir: str | Path,
        *,
        inputs: Mapping[str, Mapping[str, Any]] | None = None,
        data: Mapping[str, Mapping[str, str]] | None = None,
        timeout: float = 60.0,
        start_timeout: float = 60.0,
    ) -> None:
        self.parties = tuple(parties)
        self.workdir = Path(workdir)
        self.inputs = {p: dict(v) for p, v in (inputs or {}).items()}
        self.data = {p: dict(v) for p, v in (data or {}).items()}
        self.timeout = float(timeout)
        self.start_timeout = float(start_timeout)
        tag = f"{os.getpid() % 100000}{next(_instances)}"
        self._namespaces = [f"ppdm-wan-{tag}-{i}" for i in range(len(self.parties))]
        self._veths = [f"pw{tag}r{i}" for i in range(len(self.parties))]
        self._inner = [f"pw{tag}n{i}" for i in range(len(self.parties))]
        self._created: list[str] = []
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self.relay: DelayRelay | None = None
        self.settings: dict[str, Any] = {}

    # Set-up ----------------------------------------------------------------------------

    def start(self) -> NetnsConsortium:
        reason = netns_unavailable()
        if reason is not None:
            raise PPDMError(reason)
        with _subnet_claim():
            octet = _free_subnet()
            for i, ns in enumerate(self._namespaces):
                self._make_namespace(i, ns, octet)
        relay_ip = f"10.{octet}.1.1"
        ports = self._relay_ports(relay_ip)
        self._write_consortium(relay_ip, ports)
        routes = {(relay_ip, port): (f"10.{octet}.{i + 1}.2", port) for i, port in enumerate(ports)}
        self.relay = DelayRelay(routes).start()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])]
        )
        (self.workdir / "logs").mkdir(exist_ok=True)
        for party, ns in zip(self.parties, self._namespaces, strict=True):
            with (self.workdir / "logs" / f"{party}.log").open("ab") as logf:
                self._procs[party] = spawn_tied(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        sys.executable,
                        "-m",
                        "ppdm",
                        "party",
                        "serve",
                        str(self.workdir / f"{party}.toml"),
                        "--log-level",
                        "WARNING",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=logf,
                    env=env,
                    cwd=str(self.workdir),
                )
        self._wait_healthy()
        return self

    def _make_namespace(self, i: int, ns: str, octet: int) -> None:
        outer, inner = self._veths[i], self._inner[i]
        _ip("netns", "add", ns)
        self._created.append(ns)
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", ns)
        _ip("addr", "add", f"10.{octet}.{i + 1}.1/24", "dev", outer)
        _ip("link", "set", outer, "up")
        _ip("-n", ns, "addr", "add", f"10.{octet}.{i + 1}.2/24", "dev", inner)
        _ip("-n", ns, "link", "set", inner, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "route", "add", "default", "via", f"10.{octet}.{i + 1}.1")

    def _relay_ports(self, relay_ip: str) -> list[int]:
        socks = []
        try:
            for _ in self.parties:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind((relay_ip, 0))
                socks.append(s)
            return [s.getsockname()[1] for s in socks]
        finally:
            for s in socks:
                s.close()

    def _write_consortium(self, relay_ip: str, ports: Sequence[int]) -> None:
        import tomllib

        from ppdm.parties.consortium import init_consortium, load_settings, write_toml
        from ppdm.service.policy import OPEN_POLICY_TOML

        self.workdir.mkdir(parents=True, exist_ok=True)
        init_consortium(
            self.workdir,
            self.parties,
            host=relay_ip,
            ports=ports,
            job_timeout_s=self.timeout,
            overwrite=True,
            policy_text=OPEN_POLICY_TOML,
        )
        for party, port in zip(self.parties, ports, strict=True):
            path = self.workdir / f"{party}.toml"
            doc = tomllib.loads(path.read_text())
            # The roster names the relay; the node itself listens in its namespace.
            doc.setdefault("node", {})["listen"] = f"0.0.0.0:{port}"
            if party in self.inputs:
                doc["inputs"] = self.inputs[party]
            if party in self.data:
                doc["data"] = self.data[party]
            path.write_text(write_toml(doc, header=f"Private settings of party {party!r}."))
        self.settings = {p: load_settings(self.workdir / f"{p}.toml") for p in self.parties}

    def _wait_healthy(self) -> None:
        from ppdm.service.client import health

        deadline = time.monotonic() + self.start_timeout
        first = self.settings[self.parties[0]]
        while True:
            for party, proc in self._procs.items():
                if proc.poll() is not None:
                    raise PPDMError(f"node {party!r} exited with code {proc.returncode}")
            report = health(first, timeout=1.0)
            if all(report.get(p, {}).get("ok") for p in self.parties):
                return
            if time.monotonic() > deadline:
                bad = sorted(p for p in self.parties if not report.get(p, {}).get("ok"))
                raise PPDMError(f"nodes {bad} not healthy after {self.start_timeout:g} s")
            time.sleep(0.2)

    # Use -------------------------------------------------------------------------------

    def set_rtt(self, rtt_s: float) -> None:
        """Emulate a round trip of ``rtt_s`` between every node (and the initiator)."""
        if self.relay is None:
            raise PPDMError("the consortium is not started")
        self.relay.delay_s = rtt_s / 2.0

    def run_job(
        self,
        name: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        initiator: str | None = None,
    ) -> dict[str, Any]:
        """Run job ``name`` as ``initiator`` (default: the first party) from the root
        namespace, through the relay; returns the job document."""
        from ppdm.service.client import run_job

        t = self.timeout if timeout is None else float(timeout)
        return run_job(
            self.settings[initiator or self.parties[0]],
            name,
            params,
            timeout=t,
            deadline=10 * t + 60,
        )

    def log(self, party: str) -> str:
        try:
            return (self.workdir / "logs" / f"{party}.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # Tear-down -------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the nodes and the relay and delete every namespace this created."""
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self._procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(60)
            kill_tied(proc)  # and whatever the node left in its group
        if self.relay is not None:
            self.relay.stop()
        for ns in self._created:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                _ip("netns", "delete", ns, check=False)
        for veth in self._veths:  # gone with its namespace's peer; this is a safety net
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                _ip("link", "delete", veth, check=False)
        self._created.clear()

    def __enter__(self) -> NetnsConsortium:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
