"""WAN emulation on the in-process network and the sequential-hop count (issue 16).

The link model's schedule is checked on a fake clock (exact due times: per-link
serialization, overlap across links); end to end, a job on an emulated link must give
the same result as on loopback and take at least its hops x one-way delay (a lower bound:
no test asserts that something is fast). Hop counts are checked against protocols whose
message chains are known by construction.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from ppdm.cli.main import build_parser, main
from ppdm.errors import ConfigError
from ppdm.parties.local import (
    LinkModel,
    LocalNetwork,
    _LinkScheduler,
    parse_bandwidth,
    parse_duration,
    simulate,
)
from ppdm.protocols.secure_sum import secure_sum

pytestmark = pytest.mark.timeout(60)

PARTIES = ["alice", "bob", "carol"]


# -- parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20ms", 0.02), ("0.5s", 0.5), ("250us", 0.00025), ("2", 2.0), (" 10 MS ", 0.01)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "ms", "-5ms", "20 minutes", "1e3ms", "5h", "7200s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "bps"),
    [("100mbit", 100e6), ("1gbit", 1e9), ("512kbit", 512e3), ("64bit", 64.0), ("2.5Gbit/s", 2.5e9)],
)
def test_parse_bandwidth(text: str, bps: float) -> None:
    assert parse_bandwidth(text) == pytest.approx(bps)


@pytest.mark.parametrize("text", ["", "100", "100mb", "100mbps", "0mbit", "fast", "-1gbit"])
def test_parse_bandwidth_rejects(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_bandwidth(text)


def test_link_model_checks_and_describes() -> None:
    with pytest.raises(ConfigError):
        LinkModel(delay_s=-0.001)
    with pytest.raises(ConfigError):
        LinkModel(delay_s=float("nan"))
    with pytest.raises(ConfigError):
        LinkModel(bandwidth_bps=0.0)
    link = LinkModel.parse("10ms", "100mbit")
    assert link == LinkModel.from_rtt(0.02, 100e6)
    assert link.describe() == {"one_way_delay_s": 0.01, "rtt_s": 0.02, "bandwidth_bps": 100e6}
    assert link.transfer_time(1_250_000) == pytest.approx(0.1)  # 10 Mbit at 100 Mbit/s
    assert LinkModel(0.01).transfer_time(10**9) == 0.0


# -- the schedule, on a fake clock ---------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_schedule_serializes_each_link_and_overlaps_links() -> None:
    clock = FakeClock()
    # 8 Mbit/s: 1,000 bytes occupy a link for 1 ms; one-way delay 10 ms.
    sched = _LinkScheduler(LinkModel(delay_s=0.010, bandwidth_bps=8e6), clock=clock)
    try:
        t = clock.now
        first = sched.submit("a", "b", 10_000, lambda: None)  # 10 ms on the wire
        second = sched.submit("a", "b", 1_000, lambda: None)  # queued behind the first
        other_link = sched.submit("a", "c", 1_000, lambda: None)  # its own pipe
        reverse = sched.submit("b", "a", 1_000, lambda: None)  # each direction its own
        assert first == pytest.approx(t + 0.010 + 0.010)
        assert second == pytest.approx(t + 0.010 + 0.001 + 0.010)
        assert other_link == pytest.approx(t + 0.001 + 0.010)
        assert reverse == pytest.approx(t + 0.001 + 0.010)
        # Once the link has drained, a message waits for nobody.
        clock.now += 1.0
        assert sched.submit("a", "b", 1_000, lambda: None) == pytest.approx(clock.now + 0.011)
    finally:
        sched.close()


def test_schedule_without_bandwidth_is_pure_delay() -> None:
    clock = FakeClock()
    sched = _LinkScheduler(LinkModel(delay_s=0.040), clock=clock)
    try:
        dues = [sched.submit("a", "b", 10**8, lambda: None) for _ in range(3)]
        assert dues == pytest.approx([clock.now + 0.040] * 3)
    finally:
        sched.close()


def test_closed_scheduler_drops_messages() -> None:
    sched = _LinkScheduler(LinkModel(delay_s=0.5))
    hits: list[int] = []
    sched.submit("a", "b", 10, lambda: hits.append(1))
    sched.close()
    assert sched.submit("a", "b", 10, lambda: hits.append(2)) == float("inf")
    time.sleep(0.05)
    assert hits == []


# -- sequential hops -----------------------------------------------------------------------


def ping_pong(rounds: int):
    def party(net, _):
        other = "bob" if net.me == "alice" else "alice"
        for r in range(rounds):
            if net.me == "alice":
                net.send(other, "ping", r)
                assert net.receive(other, "pong") == r
            else:
                net.send(other, "pong", net.receive(other, "ping"))
        return None

    return party


@pytest.mark.parametrize("rounds", [1, 3, 7])
def test_hops_of_a_ping_pong(rounds: int) -> None:
    sim = simulate(ping_pong(rounds), {"alice": None, "bob": None})
    assert sim.hops == 2 * rounds
    assert sim.rounds == rounds
    assert all(t["sequential_hops"] == 2 * rounds for t in sim.totals.values())


def test_parallel_sends_are_one_hop() -> None:
    def party(net, _):
        net.broadcast("hello", net.me)
        return sorted(net.gather("hello").values())

    sim = simulate(party, {p: None for p in PARTIES})
    assert sim.hops == 1
    assert sim.results["alice"] == ["bob", "carol"]


def test_send_before_reading_does_not_chain() -> None:
    # Both send first and read after: two crossing messages, one hop.
    def party(net, _):
        other = net.others[0]
        net.send(other, "x", 1)
        return net.receive(other, "x")

    assert simulate(party, {"alice": None, "bob": None}).hops == 1


@pytest.mark.parametrize("n", [2, 3, 5])
def test_hops_of_the_ring_secure_sum(n: int) -> None:
    # n ring messages, then the initiator's result broadcast: n + 1 (the docstring's cost).
    inputs = {f"p{i}": i * 7 - 3 for i in range(n)}
    sim = simulate(lambda net, v: secure_sum(net, v), inputs)
    assert set(sim.results.values()) == {sum(inputs.values())}
    assert sim.hops == n + 1


# -- end to end on an emulated link ---------------------------------------------------------


def test_emulated_link_same_result_and_at_least_hops_times_delay() -> None:
    delay = 0.02
    inputs = {p: np.arange(50, dtype=np.int64) * (i + 1) for i, p in enumerate(PARTIES)}
    want = sum(inputs.values())
    t0 = time.perf_counter()
    sim = simulate(lambda net, v: secure_sum(net, v), inputs, link=LinkModel(delay_s=delay))
    wall = time.perf_counter() - t0
    assert all(np.array_equal(r, want) for r in sim.results.values())
    assert sim.hops == len(PARTIES) + 1
    assert sim.link == LinkModel(delay_s=delay)
    assert wall >= sim.hops * delay


def test_bandwidth_paces_a_large_message() -> None:
    payload = bytes(20_000)
    bandwidth = 800_000.0  # 100 kB/s: 20 kB take 0.2 s on the wire

    def party(net, _):
        if net.me == "alice":
            net.send("bob", "blob", payload)
            return 0
        return len(net.receive("alice", "blob", expect=bytes))

    t0 = time.perf_counter()
    sim = simulate(party, {"alice": None, "bob": None}, link=LinkModel(0.0, bandwidth))
    wall = time.perf_counter() - t0
    assert sim.results["bob"] == len(payload)
    assert wall >= 8 * len(payload) / bandwidth


def test_messages_keep_their_order_on_an_emulated_link() -> None:
    # Sizes vary so that a pipe that reordered by size would break the sequence numbers.
    sizes = [5000, 10, 3000, 1, 800, 20000, 7]

    def party(net, _):
        if net.me == "alice":
            for i, s in enumerate(sizes):
                net.send("bob", "m", bytes([i]) * s)
            return None
        return [len(net.receive("alice", "m", expect=bytes)) for _ in sizes]

    sim = simulate(party, {"alice": None, "bob": None}, link=LinkModel(0.001, 50e6))
    assert sim.results["bob"] == sizes


def test_link_and_network_are_exclusive() -> None:
    with pytest.raises(ValueError):
        simulate(lambda n, v: v, {"a": 1}, network=LocalNetwork(["a"]), link=LinkModel(0.01))


def test_failure_on_an_emulated_link_reaches_the_others() -> None:
    def party(net, _):
        if net.me == "bob":
            raise RuntimeError("bob breaks")
        return net.receive("bob", "never")

    with pytest.raises(RuntimeError, match="bob breaks"):
        simulate(party, {p: None for p in PARTIES}, link=LinkModel(0.01), timeout=10)


# -- the command line ----------------------------------------------------------------------


def test_every_simulate_subcommand_takes_the_link_flags() -> None:
    parser = build_parser()
    sub = next(a for a in parser._subparsers._group_actions if "simulate" in a.choices)
    jobs = sub.choices["simulate"]._subparsers._group_actions[0].choices
    assert {"secure-sum", "assoc", "kmeans"} <= set(jobs)
    for name, job_parser in jobs.items():
        dests = {a.dest for a in job_parser._actions}
        assert {"link_delay", "link_bandwidth"} <= dests, name


def test_cli_secure_sum_reports_the_link(tmp_path, capsys) -> None:
    out = tmp_path / "doc.json"
    code = main(
        [
            "simulate",
            "secure-sum",
            "--values",
            "3,5,9",
            "--link-delay",
            "5ms",
            "--link-bandwidth",
            "1gbit",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["link"]["one_way_delay_s"] == pytest.approx(0.005)
    assert doc["link"]["rtt_s"] == pytest.approx(0.010)
    assert doc["link"]["bandwidth_bps"] == pytest.approx(1e9)
    assert doc["link"]["sequential_hops"] == 4 and doc["link"]["rounds"] == 2
    assert doc["wall_time_s"] >= 4 * 0.005
    assert {e["result"]["sum"] for e in doc["parties"].values()} == {17}


def test_cli_mining_subcommand_passes_the_link(tmp_path) -> None:
    data = tmp_path / "baskets.dat"
    data.write_text("".join(f"{i % 3} {i % 5 + 3} 9\n" for i in range(60)))
    out = tmp_path / "doc.json"
    code = main(
        [
            "simulate",
            "assoc",
            "--input",
            str(data),
            "--min-support",
            "0.2",
            "--link-delay",
            "1ms",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["link"]["one_way_delay_s"] == pytest.approx(0.001)
    assert doc["link"]["bandwidth_bps"] is None
    assert doc["link"]["sequential_hops"] > 4


def test_cli_rejects_a_bad_link(capsys) -> None:
    code = main(["simulate", "secure-sum", "--values", "1,2", "--link-bandwidth", "100mbps"])
    assert code == 2
    assert "not a bandwidth" in capsys.readouterr().err


# -- rounds cut in ppdm.protocols.threshold -------------------------------------------------


def test_threshold_overlaps_the_ring_with_the_ot_setup() -> None:
    from ppdm.protocols.threshold import secure_sum_nonnegative

    vals = {p: np.array([5, -9, 0, 7]) * (i - 1) for i, p in enumerate(PARTIES)}
    sim = simulate(secure_sum_nonnegative, vals)
    want = np.sum(list(vals.values()), axis=0) >= 0
    assert all(np.array_equal(r, want) for r in sim.results.values())
    # 16 before the comparison's first AND level rode in its leaf tables (issue 25,
    # item 4); 18 when the two-hop ring ran before the 8-hop OT setup; 14 before the
    # second IKNP direction took its base OTs from the first (one round trip, not two).
    assert sim.hops == 12


def test_threshold_reuses_an_ot_session_across_calls() -> None:
    from ppdm.protocols.ot.extension import OTSession
    from ppdm.protocols.threshold import secure_sum_nonnegative

    gen = np.random.default_rng(7)
    levels = [{p: gen.integers(-1000, 1000, size=6) for p in PARTIES} for _ in range(3)]

    def party(net, _):
        session = None
        if net.me in (PARTIES[0], PARTIES[-1]):
            peer = PARTIES[-1] if net.me == PARTIES[0] else PARTIES[0]
            session = OTSession(net.scoped("job-ot"), peer)
        return [secure_sum_nonnegative(net, lv[net.me], session=session) for lv in levels]

    sim = simulate(party, {p: None for p in PARTIES})
    for i, level in enumerate(levels):
        want = np.sum(list(level.values()), axis=0) >= 0
        assert all(np.array_equal(r[i], want) for r in sim.results.values())
    # The setup once (12 hops; 14 with Chou-Orlandi in both IKNP directions), then 7
    # hops a call (9 before).
    assert sim.hops == 12 + 2 * 7


def test_threshold_refuses_a_session_with_the_wrong_peer() -> None:
    from ppdm.protocols.ot.extension import OTSession
    from ppdm.protocols.threshold import secure_sum_nonnegative

    net = LocalNetwork(PARTIES)
    with pytest.raises(ValueError, match="OT session"):
        secure_sum_nonnegative(net["alice"], np.array([1]), session=OTSession(net["alice"], "bob"))
