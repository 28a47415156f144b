"""The in-process network: every party of a job in one process, for simulation and tests.

Messages go through the same envelope encoding, validation and metering as on gRPC
(:class:`~ppdm.parties.network.Endpoint`), so costs in bytes are the real ones; only the
transport is a function call. :func:`run_local` runs one function per party, each in its
own thread, and re-raises the failing party's exception in the caller.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ppdm.errors import PartyFailure, PPDMError, PublicError
from ppdm.parties.network import DEFAULT_TIMEOUT, Endpoint, Network

__all__ = ["LocalNetwork", "Simulation", "run_local", "simulate"]

T = TypeVar("T")
R = TypeVar("R")


class LocalNetwork:
    """Endpoints of all ``parties`` for one job, wired to each other in memory."""

    def __init__(
        self,
        parties: Sequence[str],
        *,
        job_id: str | None = None,
        consortium: str = "local",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if len(parties) < 1:
            raise ValueError("a network needs at least one party")
        self.parties = tuple(parties)
        self.job_id = job_id or uuid.uuid4().hex
        self._endpoints: dict[str, Endpoint] = {}
        self._down: set[str] = set()
        for name in self.parties:
            self._endpoints[name] = Endpoint(
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
            self._endpoints[to].deliver(data, sender=sender)

        return transmit

    def endpoint(self, party: str) -> Endpoint:
        return self._endpoints[party]

    def __getitem__(self, party: str) -> Endpoint:
        return self._endpoints[party]

    def take_down(self, party: str) -> None:
        """Simulate ``party`` dying: it stops receiving, and nobody hears from it again."""
        self._down.add(party)


@dataclass
class Simulation(Generic[R]):
    """Outcome of :func:`simulate`: each party's result and cost meter."""

    results: dict[str, R]
    metrics: dict[str, list[dict[str, Any]]]
    totals: dict[str, dict[str, Any]]
    wall_time_s: float
    job_id: str


def simulate(
    fn: Callable[[Network, T], R],
    inputs: Mapping[str, T],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    job_id: str | None = None,
    network: LocalNetwork | None = None,
) -> Simulation[R]:
    """Run ``fn(network, inputs[party])`` for every party in its own thread.

    Parties are the keys of ``inputs``, in order. If a party raises, it aborts the job
    (the others end with :class:`PartyFailure` naming it) and its exception is re-raised
    here, with the other parties' errors attached as notes.
    """
    parties = list(inputs)
    net = network or LocalNetwork(parties, job_id=job_id, timeout=timeout)
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
    )


def run_local(
    fn: Callable[[Network, T], R],
    inputs: Mapping[str, T],
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, R]:
    """Like :func:`simulate` but returns only each party's result."""
    return simulate(fn, inputs, timeout=timeout).results
