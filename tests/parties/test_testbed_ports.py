"""The testbed's ports come from outside the kernel's ephemeral range.

A port from ``bind(port 0)`` is an ephemeral port: before the node meant to listen on it
starts, any outgoing connection on the machine (one node dialling another in a parallel
test worker) may take it as its source port, and the node then fails to start ("the port
is held by ..."). :func:`~ppdm.testbed.consortia.free_ports` and
:func:`~ppdm.testbed.consortia.free_port_range` draw at random below that range instead.
"""

from __future__ import annotations

import socket

from ppdm.testbed.consortia import _ephemeral_ports, free_port_range, free_ports


def test_free_ports_are_distinct_bindable_and_not_ephemeral() -> None:
    low, high = _ephemeral_ports()
    seen: set[int] = set()
    for _ in range(50):
        ports = free_ports(4)
        assert len(set(ports)) == 4
        assert all(1024 <= p < 65536 and not low <= p <= high for p in ports), ports
        for p in ports:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))
        seen.update(ports)
    # Random draws: parallel workers do not walk the same sequence.
    assert len(seen) > 150


def test_free_port_range_is_a_bindable_run_outside_the_ephemeral_range() -> None:
    low, high = _ephemeral_ports()
    bases = set()
    for _ in range(20):
        base = free_port_range(8)
        assert not any(low <= p <= high for p in range(base, base + 8))
        socks = []
        try:
            for p in range(base, base + 8):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
        finally:
            for s in socks:
                s.close()
        bases.add(base)
    assert len(bases) > 15


def test_a_held_port_is_never_handed_out() -> None:
    held = []
    try:
        for p in free_ports(400):
            s = socket.socket()
            s.bind(("127.0.0.1", p))
            s.listen()
            held.append(s)
        taken = {s.getsockname()[1] for s in held}
        # 320 draws against 400 held of about 12,800 ports: a draw that skipped the
        # check would hit a held port about 10 times.
        for _ in range(40):
            assert not taken & set(free_ports(8))
    finally:
        for s in held:
            s.close()
