"""Per-step cost accounting: messages, bytes and wall time, as each party sees them.

A :class:`CostMeter` can also count a job's *sequential hops* (when the transport stamps
messages, as the in-process network does): a Lamport-style depth. A party's depth starts
at 0; a message it sends carries its depth + 1; reading a message raises the reader's depth
to at least the message's. The largest depth of any message is the length of the longest
chain of messages each sent after its sender had read the previous one: the number of
one-way latencies no schedule can overlap. On a link with one-way delay ``d`` a job takes
at least ``hops * d`` longer than on loopback; a round trip is two hops, so
``rounds = hops / 2`` round trips (``rounds * RTT`` is the same bound).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class StepCost:
    """What one party spent on one protocol step."""

    step: str
    messages_sent: int = 0
    messages_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    first_event: float = 0.0
    last_event: float = 0.0

    @property
    def wall_time_s(self) -> float:
        return max(self.last_event - self.first_event, 0.0)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("first_event")
        d.pop("last_event")
        d["wall_time_s"] = round(self.wall_time_s, 6)
        return d


class CostMeter:
    """Thread-safe record of :class:`StepCost` per step tag, in first-seen order.

    The wall time of a step runs from the start of the first send/receive call with that
    tag to the end of the last one, so it includes time spent waiting for peers.
    """

    def __init__(self) -> None:
        self._steps: dict[str, StepCost] = {}
        self._lock = threading.Lock()
        self._depth = 0  # this party's Lamport depth (module docstring)
        self._max_sent_depth = 0
        self._depth_tracked = False

    # Sequential hops (module docstring) ------------------------------------------------

    def track_depth(self) -> None:
        """Count sequential hops (the transport stamps every message it carries)."""
        with self._lock:
            self._depth_tracked = True

    def stamp(self) -> int:
        """The depth of a message this party sends now (its depth + 1)."""
        with self._lock:
            depth = self._depth + 1
            self._max_sent_depth = max(self._max_sent_depth, depth)
            return depth

    def observe(self, depth: int) -> None:
        """This party read a message of ``depth``."""
        with self._lock:
            self._depth = max(self._depth, int(depth))

    @property
    def hops(self) -> int:
        """The longest message chain this party took part in (sent or read)."""
        with self._lock:
            return max(self._depth, self._max_sent_depth)

    @property
    def depth_tracked(self) -> bool:
        return self._depth_tracked

    def _get(self, step: str, now: float) -> StepCost:
        cost = self._steps.get(step)
        if cost is None:
            cost = StepCost(step=step, first_event=now, last_event=now)
            self._steps[step] = cost
        return cost

    def sent(self, step: str, nbytes: int, started: float) -> None:
        now = time.perf_counter()
        with self._lock:
            c = self._get(step, started)
            c.messages_sent += 1
            c.bytes_sent += nbytes
            c.last_event = max(c.last_event, now)

    def received(self, step: str, nbytes: int, started: float) -> None:
        now = time.perf_counter()
        with self._lock:
            c = self._get(step, started)
            c.messages_received += 1
            c.bytes_received += nbytes
            c.last_event = max(c.last_event, now)

    def steps(self) -> list[StepCost]:
        with self._lock:
            return list(self._steps.values())

    def as_list(self) -> list[dict[str, Any]]:
        return [c.as_dict() for c in self.steps()]

    def totals(self) -> dict[str, Any]:
        steps = self.steps()
        out: dict[str, Any] = {
            "messages_sent": sum(c.messages_sent for c in steps),
            "messages_received": sum(c.messages_received for c in steps),
            "bytes_sent": sum(c.bytes_sent for c in steps),
            "bytes_received": sum(c.bytes_received for c in steps),
        }
        if steps:
            out["wall_time_s"] = round(
                max(c.last_event for c in steps) - min(c.first_event for c in steps), 6
            )
        else:
            out["wall_time_s"] = 0.0
        if self._depth_tracked:
            out["sequential_hops"] = self.hops
        return out
