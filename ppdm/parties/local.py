"""The in-process network: every party of a job in one process, for simulation and tests.

Messages go through the same envelope encoding, validation and metering as on gRPC
(:class:`~ppdm.parties.network.Endpoint`), so costs in bytes are the real ones; only the
transport is a function call. :func:`run_local` runs one function per party, each in its
own thread, and re-raises the failing party's exception in the caller.

**WAN emulation.** With a :class:`LinkModel` (``simulate(..., link=LinkModel(delay_s=0.01,
bandwidth_bps=100e6))``) every directed link between two parties behaves like a pipe: a
message of ``B`` envelope bytes occupies its link for ``8 * B / bandwidth_bps`` seconds,
queued behind the messages sent on that link before it, and is delivered ``delay_s``
(one-way delay; RTT = 2 x delay) after it has left. A scheduler thread delivers each
message at its due time, so messages sent in parallel overlap as on a real network and
sequential round trips add up. Bytes counted are the envelope's (no TCP/TLS/HTTP/2
framing). Every message also carries its sequential-hop depth (see
:mod:`ppdm.parties.metrics`): each party's totals hold ``sequential_hops``, and
:attr:`Simulation.hops` is the job's.
"""

from __future__ import annotations

import heapq
import logging
import math
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ppdm.errors import ConfigError, PartyFailure, PPDMError, PublicError
from ppdm.parties.network import DEFAULT_TIMEOUT, Endpoint, Network

__all__ = [
    "LinkModel",
    "LocalNetwork",
    "Simulation",
    "parse_bandwidth",
    "parse_duration",
    "run_local",
    "simulate",
]

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)

_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(us|ms|s|)\s*$", re.IGNORECASE)
_DURATION_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "": 1.0}
_BANDWIDTH = re.compile(
    r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(bit|kbit|mbit|gbit|tbit)(?:/s)?\s*$", re.IGNORECASE
)
_BANDWIDTH_UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}


def parse_duration(text: str) -> float:
    """Seconds from ``"20ms"``, ``"0.5s"``, ``"250us"`` or a bare number of seconds."""
    m = _DURATION.match(str(text))
    if m is None:
        raise ConfigError(f"not a duration: {text!r} (use e.g. 20ms, 0.5s, 250us)")
    value = float(m.group(1)) * _DURATION_UNITS[m.group(2).lower()]
    if not math.isfinite(value) or value > 3600:
        raise ConfigError(f"duration {text!r} is out of range (at most one hour)")
    return value


def parse_bandwidth(text: str) -> float:
    """Bits per second from ``"100mbit"``, ``"1gbit"``, ``"512kbit"`` (SI prefixes, as tc
    writes them; ``/s`` may follow)."""
    m = _BANDWIDTH.match(str(text))
    if m is None:
        raise ConfigError(f"not a bandwidth: {text!r} (use e.g. 100mbit, 1gbit, 512kbit)")
    value = float(m.group(1)) * _BANDWIDTH_UNITS[m.group(2).lower()]
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"bandwidth {text!r} must be positive")
    return value


@dataclass(frozen=True)
class LinkModel:
    """An emulated link between every two parties (see the module docstring).

    ``delay_s`` is the one-way delay of every delivery (RTT = 2 x ``delay_s``);
    ``bandwidth_bps`` the bits per second of each directed link (``None``: unlimited).
    """

    delay_s: float = 0.0
    bandwidth_bps: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.delay_s) and 0.0 <= self.delay_s <= 3600.0):
            raise ConfigError(f"link delay must be in [0, 3600] s, got {self.delay_s!r}")
        bw = self.bandwidth_bps
        if bw is not None and not (math.isfinite(bw) and bw > 0):
            raise ConfigError(f"link bandwidth must be a positive number, got {bw!r}")

    @classmethod
    def parse(cls, delay: str | None = None, bandwidth: str | None = None) -> LinkModel:
        """From command-line text: ``LinkModel.parse("20ms", "100mbit")``."""
        return cls(
            delay_s=parse_duration(delay) if delay is not None else 0.0,
            bandwidth_bps=parse_bandwidth(bandwidth) if bandwidth is not None else None,
        )

    @classmethod
    def from_rtt(cls, rtt_s: float, bandwidth_bps: float | None = None) -> LinkModel:
        """A link whose round trip takes ``rtt_s`` seconds."""
        return cls(delay_s=rtt_s / 2.0, bandwidth_bps=bandwidth_bps)

    @property
    def rtt_s(self) -> float:
        return 2.0 * self.delay_s

    def transfer_time(self, nbytes: int) -> float:
        """Seconds ``nbytes`` occupy one link (0 when the bandwidth is unlimited)."""
        return 0.0 if self.bandwidth_bps is None else 8.0 * nbytes / self.bandwidth_bps

    def describe(self) -> dict[str, Any]:
        """The link as the job document reports it."""
        return {
            "one_way_delay_s": self.delay_s,
            "rtt_s": self.rtt_s,
            "bandwidth_bps": self.bandwidth_bps,
        }


class _LinkScheduler:
    """Delivers messages at their due times on one thread (module docstring)."""

    def __init__(self, link: LinkModel, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.link = link
        self._clock = clock
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._free_at: dict[tuple[str, str], float] = {}
        self._count = 0
        self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, sender: str, recipient: str, nbytes: int, fn: Callable[[], None]) -> float:
        """Queue ``fn`` (the delivery of ``nbytes`` from ``sender`` to ``recipient``) and
        return its due time on the scheduler's clock."""
        with self._cond:
            if self._closed:
                return math.inf
            now = self._clock()
            key = (sender, recipient)
            start = max(now, self._free_at.get(key, 0.0))
            done = start + self.link.transfer_time(nbytes)
            self._free_at[key] = done
            self._count += 1
            # Due times on one link never decrease, and ties keep the order of sending:
            # every link is FIFO, as the endpoints' sequence numbers require.
            due = done + self.link.delay_s
            heapq.heappush(self._heap, (due, self._count, fn))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ppdm-link", daemon=True)
                self._thread.start()
            self._cond.notify()
            return due

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    if self._heap:
                        wait = self._heap[0][0] - self._clock()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
                if self._closed:
                    return
                now = self._clock()
                due = []
                while self._heap and self._heap[0][0] <= now:
                    due.append(heapq.heappop(self._heap)[2])
            for fn in due:
                try:
                    fn()
                except Exception:  # a delivery failing must not stop the others
                    log.exception("emulated link: delivery failed")

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)


# The (step, depth) of the message the current thread is sending: set by
# _LocalEndpoint.send around Endpoint.send, read by the transmitter it calls.
_outgoing = threading.local()


class _LocalEndpoint(Endpoint):
    """An :class:`Endpoint` whose messages carry their sequential-hop depth out of band
    (the in-process network's stamps; nothing changes on the wire)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.metrics.track_depth()
        self._stamps: dict[tuple[str, str], deque[int]] = {}
        self._stamp_lock = threading.Lock()

    def send(self, to: str, step: str, value: Any) -> None:
        _outgoing.current = (step, self.metrics.stamp())
        try:
            super().send(to, step, value)
        finally:
            _outgoing.current = None

    def note_incoming(self, sender: str, step: str, depth: int) -> None:
        """The transport's stamp of the next message from ``sender`` under ``step``
        (called before that message is delivered)."""
        with self._stamp_lock:
            self._stamps.setdefault((sender, step), deque()).append(depth)

    def receive(
        self,
        frm: str,
        step: str,
        *,
        expect: type | tuple[type, ...] | None = None,
        timeout: float | None = None,
    ) -> Any:
        value = super().receive(frm, step, expect=expect, timeout=timeout)
        with self._stamp_lock:
            stamps = self._stamps.get((frm, step))
            depth = stamps.popleft() if stamps else 0
        self.metrics.observe(depth)
        return value


class LocalNetwork:
    """Endpoints of all ``parties`` for one job, wired to each other in memory.

    With ``link`` every delivery goes through an emulated link (module docstring); call
    :meth:`close` when the job is over to stop its scheduler thread.
    """

    def __init__(
        self,
        parties: Sequence[str],
        *,
        job_id: str | None = None,
        consortium: str = "local",
        timeout: float = DEFAULT_TIMEOUT,
        link: LinkModel | None = None,
    ) -> None:
        if len(parties) < 1:
            raise ValueError("a network needs at least one party")
        self.parties = tuple(parties)
        self.job_id = job_id or uuid.uuid4().hex
        self.link = link
        self._scheduler = _LinkScheduler(link) if link is not None else None
        self._endpoints: dict[str, _LocalEndpoint] = {}
        self._down: set[str] = set()
        for name in self.parties:
            self._endpoints[name] = _LocalEndpoint(
                name,
                self.parties,
                self._transmitter(name),
                job_id=self.job_id,
                consortium=consortium,
                timeout=timeout,
            )

    def _transmitter(self, sender: str) -> Callable[[str, bytes], None]:
        def transmit(to: str, data: bytes) -> None:
            if to in self._down:
                raise PartyFailure(to, "transport", "party is down")
            target = self._endpoints[to]
            current = getattr(_outgoing, "current", None)
            if current is not None:
                target.note_incoming(sender, current[0], current[1])
            if self._scheduler is None:
                target.deliver(data, sender=sender)
                return

            def arrive() -> None:
                if to not in self._down:
                    target.deliver(data, sender=sender)

            self._scheduler.submit(sender, to, len(data), arrive)

        return transmit

    def endpoint(self, party: str) -> Endpoint:
        return self._endpoints[party]

    def __getitem__(self, party: str) -> Endpoint:
        return self._endpoints[party]

    def take_down(self, party: str) -> None:
        """Simulate ``party`` dying: it stops receiving, and nobody hears from it again."""
        self._down.add(party)

    @property
    def hops(self) -> int:
        """The job's sequential hops so far (the longest message chain; see
        :mod:`ppdm.parties.metrics`)."""
        return max(ep.metrics.hops for ep in self._endpoints.values())

    def close(self) -> None:
        """Stop the emulated link's scheduler (messages still in flight are dropped)."""
        if self._scheduler is not None:
            self._scheduler.close()


@dataclass
class Simulation(Generic[R]):
    """Outcome of :func:`simulate`: each party's result and cost meter."""

    results: dict[str, R]
    metrics: dict[str, list[dict[str, Any]]]
    totals: dict[str, dict[str, Any]]
    wall_time_s: float
    job_id: str
    #: The emulated link the job ran on (``None``: instant in-process delivery).
    link: LinkModel | None = None
    #: The job's sequential hops (longest message chain, :mod:`ppdm.parties.metrics`);
    #: 0 when the network does not stamp messages (gRPC).
    hops: int = 0

    @property
    def rounds(self) -> float:
        """Sequential round trips: ``hops / 2``."""
        return self.hops / 2.0


def simulate(
    fn: Callable[[Network, T], R],
    inputs: Mapping[str, T],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    job_id: str | None = None,
    network: LocalNetwork | None = None,
    link: LinkModel | None = None,
) -> Simulation[R]:
    """Run ``fn(network, inputs[party])`` for every party in its own thread.

    Parties are the keys of ``inputs``, in order. If a party raises, it aborts the job
    (the others end with :class:`PartyFailure` naming it) and its exception is re-raised
    here, with the other parties' errors attached as notes. ``link`` emulates a WAN link
    between every two parties (module docstring); give it or ``network``, not both.
    """
    parties = list(inputs)
    if network is not None and link is not None:
        raise ValueError("give the link to the LocalNetwork, or no network to simulate")
    if network is None:
        own = LocalNetwork(parties, job_id=job_id, timeout=timeout, link=link)
        try:
            return simulate(fn, inputs, timeout=timeout, network=own)
        finally:
            own.close()
    net = network
    results: dict[str, R] = {}
    errors: list[tuple[float, str, BaseException]] = []
    lock = threading.Lock()

    def body(party: str) -> None:
        ep = net.endpoint(party)
        try:
            value = fn(ep, inputs[party])
            with lock:
                results[party] = value
        except BaseException as exc:
            with lock:
                errors.append((time.perf_counter(), party, exc))
            # Only the public form crosses to the other parties; the exception itself is
            # re-raised below to the caller, who runs every party of the simulation.
            public = PublicError.of(exc, party)
            ep.abort(public.text(), code=public.code, party=public.party, step=public.step)

    t0 = time.perf_counter()
    threads = [
        threading.Thread(target=body, args=(p,), name=f"ppdm-{p}", daemon=True) for p in parties
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 2 * timeout + 5
    for t in threads:
        t.join(max(deadline - time.monotonic(), 0.0))
    wall = time.perf_counter() - t0
    if any(t.is_alive() for t in threads):
        raise PPDMError(f"simulation did not finish within {2 * timeout + 5:g} s")
    if errors:
        errors.sort(key=lambda e: e[0])
        root = next((e for e in errors if not isinstance(e[2], PartyFailure)), errors[0])
        exc = root[2]
        for _, party, other in errors:
            if other is not exc:
                exc.add_note(f"party {party!r} then failed with: {other}")
        raise exc
    return Simulation(
        results={p: results[p] for p in parties},
        metrics={p: net.endpoint(p).metrics.as_list() for p in parties},
        totals={p: net.endpoint(p).metrics.totals() for p in parties},
        wall_time_s=wall,
        job_id=net.job_id,
        link=getattr(net, "link", None),
        hops=int(getattr(net, "hops", 0)),
    )


def run_local(
    fn: Callable[[Network, T], R],
    inputs: Mapping[str, T],
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, R]:
    """Like :func:`simulate` but returns only each party's result."""
    return simulate(fn, inputs, timeout=timeout).results
