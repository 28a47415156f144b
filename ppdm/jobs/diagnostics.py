"""Testbed jobs that exercise the party network itself (latency, throughput, failures).

``ring-echo``
    The first party sends a random token of ``size`` bytes around the ring of all
    parties ``rounds`` times; every other party waits ``delay_s`` before forwarding it.
    The first party checks the token comes back unchanged and reports each round-trip
    time. With a delay it keeps a job running for a known time (failure tests).
``stream``
    Party ``sender`` (default: the first) sends ``count`` messages of ``size`` bytes to
    ``receiver`` (default: the second), which acknowledges the last one; both report the
    bytes moved and the rate (throughput benchmark). Other parties do nothing.

Neither job touches private inputs; they carry random bytes only.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from typing import Any

from ppdm.errors import ConfigError, ProtocolError
from ppdm.jobs.registry import JobSpec, PartyContext, register_job
from ppdm.parties.network import Network

MAX_TOKEN_BYTES = 1 << 30


def _int_param(params: Mapping[str, Any], key: str, lo: int, hi: int) -> int:
    value = params.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"parameter {key!r} must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def _float_param(params: Mapping[str, Any], key: str, lo: float, hi: float) -> float:
    value = params.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise ConfigError(f"parameter {key!r} must be a number in [{lo}, {hi}], got {value!r}")
    return float(value)


def ring_echo(net: Network, params: Mapping[str, Any], ctx: PartyContext) -> dict[str, Any]:
    """Pass a token around the ring; the first party reports round-trip times."""
    size = _int_param(params, "size", 1, MAX_TOKEN_BYTES)
    rounds = _int_param(params, "rounds", 1, 1_000_000)
    delay = _float_param(params, "delay_s", 0.0, 3600.0)
    step = "ring-echo/token"
    if len(net.parties) == 1:
        return {"rounds": rounds, "size": size, "round_trip_s": [0.0] * rounds}
    nxt, prev = net.successor(), net.predecessor()
    if net.index == 0:
        times = []
        for _ in range(rounds):
            token = secrets.token_bytes(size)
            t0 = time.perf_counter()
            net.send(nxt, step, token)
            back = net.receive(prev, step, expect=bytes)
            times.append(round(time.perf_counter() - t0, 6))
            if back != token:
                raise ProtocolError(prev, step, "the token came back changed")
        return {"rounds": rounds, "size": size, "round_trip_s": times}
    for _ in range(rounds):
        token = net.receive(prev, step, expect=bytes)
        if len(token) != size:
            raise ProtocolError(prev, step, f"token of {len(token)} bytes, expected {size}")
        if delay:
            time.sleep(delay)
        net.send(nxt, step, token)
    return {"rounds": rounds, "size": size, "forwarded": rounds}


def stream(net: Network, params: Mapping[str, Any], ctx: PartyContext) -> dict[str, Any]:
    """Send ``count`` messages of ``size`` bytes from ``sender`` to ``receiver``."""
    size = _int_param(params, "size", 1, MAX_TOKEN_BYTES)
    count = _int_param(params, "count", 1, 10_000_000)
    sender = params.get("sender") or net.parties[0]
    receiver = params.get("receiver") or (net.parties[1] if len(net.parties) > 1 else None)
    if receiver is None or sender == receiver:
        raise ConfigError("the stream job needs two different parties")
    for who in (sender, receiver):
        if who not in net.parties:
            raise ConfigError(f"party {who!r} is not a member of the job")
    if net.me not in (sender, receiver):
        return {"role": "idle"}
    if net.me == sender:
        block = secrets.token_bytes(size)
        t0 = time.perf_counter()
        for _ in range(count):
            net.send(receiver, "stream/data", block)
        ack = net.receive(receiver, "stream/ack", expect=int)
        seconds = time.perf_counter() - t0
        if ack != count * size:
            raise ProtocolError(receiver, "stream/ack", f"acknowledged {ack} bytes")
        return {
            "role": "sender",
            "bytes": count * size,
            "seconds": round(seconds, 6),
            "bytes_per_s": count * size / seconds,
        }
    total = 0
    t0 = 0.0
    for i in range(count):
        block = net.receive(sender, "stream/data", expect=bytes)
        if i == 0:
            t0 = time.perf_counter()
        if len(block) != size:
            raise ProtocolError(sender, "stream/data", f"{len(block)} bytes, expected {size}")
        total += len(block)
    seconds = time.perf_counter() - t0
    net.send(sender, "stream/ack", total)
    # The first message's arrival starts the clock, so count - 1 messages were timed.
    timed = total - size
    return {
        "role": "receiver",
        "bytes": total,
        "seconds": round(seconds, 6),
        "bytes_per_s": timed / seconds if seconds > 0 else 0.0,
    }


register_job(
    JobSpec(
        name="ring-echo",
        summary="testbed: pass a random token around the ring (latency, failure tests)",
        run=ring_echo,
        defaults={"size": 64, "rounds": 1, "delay_s": 0.0},
    )
)
register_job(
    JobSpec(
        name="stream",
        summary="testbed: stream random bytes from one party to another (throughput)",
        run=stream,
        defaults={"size": 1 << 20, "count": 64, "sender": None, "receiver": None},
    )
)
