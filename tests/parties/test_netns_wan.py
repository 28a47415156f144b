"""Real nodes in separate network namespaces behind a delaying relay (issue 16).

Three ``ppdm party serve`` processes, each in its own network namespace (veth pairs to
the root namespace in a private 10.X.0.0/16 that exists only between the namespaces the
test creates), reach each other and the initiator only through
:class:`ppdm.testbed.netns.DelayRelay`, which holds every chunk for RTT / 2 per
direction. Jobs must succeed with the right results (Python's sum, pyfim's FP-growth)
and take at least their sequential hops x RTT / 2 plus one round trip for proposing the
job before it starts (a lower bound: the delay is really applied, without it the
secure sum takes well under this; the hop count comes from the same job on the
in-process network).

Needs root and ``ip netns`` (iproute2, installed with apt-get when missing and possible,
as ``.ci/run`` does first); otherwise the namespace tests are skipped with the reason
printed and listed at the end of the run, and fail under ``CI=true``. The relay itself
is also tested alone on 127.0.0.1, which needs neither.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ppdm.jobs.document import simulate_job
from ppdm.jobs.mining import partition_file
from ppdm.jobs.registry import PartyContext
from ppdm.testbed.consortia import free_ports
from ppdm.testbed.netns import DelayRelay, NetnsConsortium, netns_unavailable

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(900)]

PARTIES = ["alice", "bob", "carol"]
RTT = 0.030


# -- the relay alone, on loopback ------------------------------------------------------------


def _echo_server() -> tuple[socket.socket, int]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(10)

    def serve() -> None:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(10)
            while data := conn.recv(65536):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    return srv, srv.getsockname()[1]


def _free_port() -> int:
    return free_ports(1)[0]


def test_relay_delays_each_direction_and_keeps_the_bytes() -> None:
    srv, target = _echo_server()
    port = _free_port()
    relay = DelayRelay({("127.0.0.1", port): ("127.0.0.1", target)}, delay_s=0.05).start()
    try:
        payload = bytes(range(256)) * 400  # 100 kB in many chunks
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.settimeout(10)
            t0 = time.perf_counter()
            c.sendall(payload)
            got = b""
            while len(got) < len(payload):
                chunk = c.recv(65536)
                assert chunk, "relay closed early"
                got += chunk
            elapsed = time.perf_counter() - t0
        assert got == payload
        assert elapsed >= 2 * 0.05  # one delay each way
    finally:
        relay.stop()
        srv.close()


def test_relay_refuses_cleanly_when_the_target_is_down() -> None:
    port = _free_port()
    relay = DelayRelay({("127.0.0.1", port): ("127.0.0.1", _free_port())}).start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.settimeout(10)
            assert c.recv(10) == b""  # closed, no hang
    finally:
        relay.stop()


def test_relay_reports_a_taken_address() -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        relay = DelayRelay({("127.0.0.1", busy.getsockname()[1]): ("127.0.0.1", 9)})
        with pytest.raises(Exception, match="relay could not listen"):
            relay.start()
    finally:
        busy.close()


# -- real nodes in namespaces ---------------------------------------------------------------


def _ensure_iproute2() -> None:
    """Install iproute2 with apt-get when ``ip`` is missing and we may (bounded)."""
    import os

    if shutil.which("ip") is not None or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "iproute2"]):
        try:
            subprocess.run(cmd, capture_output=True, timeout=180, check=False)
        except (subprocess.SubprocessError, OSError):
            return


@pytest.fixture(scope="module")
def retail_small(tmp_path_factory: pytest.TempPathFactory, fimi_dir: Path) -> dict:
    retail = fimi_dir / "retail.dat"
    assert retail.is_file(), f"shared data missing: {retail}"
    tmp = tmp_path_factory.mktemp("retail")
    lines = retail.read_text().splitlines()[:1500]
    (tmp / "retail.dat").write_text("\n".join(lines) + "\n")
    manifest = partition_file(tmp / "retail.dat", tmp / "h", parties=PARTIES, mode="horizontal")
    files = {p: str(tmp / "h" / manifest["parties"][p]["file"]) for p in PARTIES}
    tx = [sorted({int(x) for x in line.split()}) for line in lines]
    return {"files": files, "tx": tx, "dir": tmp / "h"}


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory, retail_small: dict, tier_unavailable):
    _ensure_iproute2()
    reason = netns_unavailable()
    if reason is not None:
        tier_unavailable("network-namespace", reason)
    inputs = {p: {"secure_sum": v} for p, v in zip(PARTIES, [11, -4, 1000], strict=True)}
    data = {p: {"transactions": f} for p, f in retail_small["files"].items()}
    workdir = tmp_path_factory.mktemp("netns")
    with NetnsConsortium(PARTIES, workdir, inputs=inputs, data=data, timeout=120) as consortium:
        created = list(consortium._created)
        yield consortium
    # Torn down: none of the namespaces is left behind.
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=120)
    assert created and not any(ns in listed.stdout for ns in created)


def _in_process_hops(job: str, settings: dict, params: dict, base_dir: Path) -> int:
    contexts = {p: PartyContext(p, settings[p], base_dir=base_dir) for p in PARTIES}
    doc = simulate_job(job, contexts, params, timeout=120)
    return max(e["totals"]["sequential_hops"] for e in doc["parties"].values())


def test_secure_sum_across_namespaces(bed: NetnsConsortium, tmp_path: Path) -> None:
    settings = {
        p: {"inputs": {"secure_sum": v}} for p, v in zip(PARTIES, [11, -4, 1000], strict=True)
    }
    hops = _in_process_hops("secure-sum", settings, {}, tmp_path)
    bed.set_rtt(0.0)
    doc = bed.run_job("secure-sum")
    assert doc["state"] == "succeeded", doc["error"]
    bed.set_rtt(RTT)
    t0 = time.perf_counter()
    doc = bed.run_job("secure-sum")
    elapsed = time.perf_counter() - t0
    assert doc["state"] == "succeeded", doc["error"]
    assert {e["result"]["sum"] for e in doc["parties"].values()} == {1007}
    assert elapsed >= (hops / 2 + 1) * RTT


def test_assoc_across_namespaces(bed: NetnsConsortium, retail_small: dict) -> None:
    import fim

    params = {"mode": "horizontal", "min_support": 0.05, "min_confidence": 0.5}
    settings = {p: {"data": {"transactions": f}} for p, f in retail_small["files"].items()}
    hops = _in_process_hops("assoc", settings, params, retail_small["dir"])
    bed.set_rtt(RTT)
    t0 = time.perf_counter()
    doc = bed.run_job("assoc", params)
    elapsed = time.perf_counter() - t0
    assert doc["state"] == "succeeded", doc["error"]
    tx = retail_small["tx"]
    min_count = -(-5 * len(tx) // 100)
    want = {frozenset(s) for s, _ in fim.fpgrowth(tx, target="s", supp=-min_count, report="a")}
    for party, entry in doc["parties"].items():
        got = {frozenset(i["items"]) for i in entry["result"]["frequent_itemsets"]}
        assert got == want, party
    assert elapsed >= (hops / 2 + 1) * RTT


def test_namespaces_are_private(bed: NetnsConsortium) -> None:
    # Every address the test bed uses is on the relay or inside its own namespaces.
    for settings in bed.settings.values():
        for name in settings.consortium.names:
            host = settings.consortium.party(name).host
            assert host.startswith("10.") and host.endswith(".1.1"), host
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=120)
    assert all(ns in listed.stdout for ns in bed._created)


def test_a_long_haul_link_can_start_a_job(bed: NetnsConsortium) -> None:
    # A TLS + HTTP/2 handshake takes about two round trips: every connection attempt
    # gets CONNECT_TIMEOUT_MS (gRPC's min_reconnect_backoff_ms), so a 150 ms link works.
    bed.set_rtt(0.150)
    try:
        doc = bed.run_job("secure-sum", timeout=120)
    finally:
        bed.set_rtt(0.0)
    assert doc["state"] == "succeeded", doc["error"]


def test_testbeds_starting_at_once_take_different_subnets(tier_unavailable) -> None:
    """Two testbeds starting on one host at the same moment (two test workers did) each
    choose a free 10.X.0.0/16 and then create their addresses; without a claim held
    across both steps they chose the same X and neither's nodes were reachable. Each
    thread here waits between its choice and its address, so an unclaimed choice would
    collide every time."""
    import os

    from ppdm.testbed import netns

    _ensure_iproute2()
    reason = netns_unavailable()
    if reason is not None:
        tier_unavailable("network-namespace", reason)
    links = [f"ppdmt{os.getpid() % 100000}{i}" for i in range(2)]
    chosen: dict[int, int] = {}
    errors: list[BaseException] = []

    def claim(i: int) -> None:
        try:
            with netns._subnet_claim():
                octet = netns._free_subnet()
                time.sleep(0.5)
                netns._ip("link", "add", links[i], "type", "veth", "peer", "name", f"{links[i]}p")
                netns._ip("addr", "add", f"10.{octet}.1.1/24", "dev", links[i])
                chosen[i] = octet
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(2)]
    try:
        for t in threads:
            t.start()
            time.sleep(0.05)
        for t in threads:
            t.join(60)
    finally:
        for name in links:
            netns._ip("link", "del", name, check=False)
    assert not errors, errors
    assert len(chosen) == 2 and chosen[0] != chosen[1], chosen
