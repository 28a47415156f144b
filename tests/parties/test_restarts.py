"""A restarted node is a live node: peers reconnect at once, so the first job after each
restart succeeds (issue 13, item 1)."""

from __future__ import annotations

import threading
import time

import pytest

from ppdm.service.testbed import GrpcTestbed

pytestmark = [pytest.mark.grpc, pytest.mark.slow]

RESTARTS = 20


def test_twenty_restarts_no_failed_job(tmp_path):
    with GrpcTestbed(["alice", "bob", "carol"], tmp_path / "bed", timeout=20) as bed:
        first = bed.run_job("ring-echo", {"rounds": 2})
        assert first["state"] == "succeeded", first["error"]
        failures = []
        waits = []
        for i in range(RESTARTS):
            victim = ("bob", "carol")[i % 2]
            if i % 5:
                # Between jobs: a clean stop, then a start.
                bed.restart(victim)
                t0 = time.perf_counter()
                doc = bed.run_job("ring-echo", {"rounds": 2}, initiator="alice", deadline=30)
                waits.append(time.perf_counter() - t0)
                if doc["state"] != "succeeded":
                    failures.append((i, victim, doc["error"]))
                continue
            # Every fifth: kill the victim in the middle of a job (its peers' channels
            # break mid-stream), then start it again.
            box: dict = {}
            runner = threading.Thread(
                target=lambda box=box: box.setdefault(
                    "doc",
                    bed.run_job("ring-echo", {"rounds": 100_000, "delay_s": 0.01}, deadline=30),
                )
            )
            runner.start()
            time.sleep(0.6)
            bed.kill(victim)
            runner.join(40)
            assert box["doc"]["state"] != "succeeded"
            bed.restart(victim)
            t0 = time.perf_counter()
            doc = bed.run_job("ring-echo", {"rounds": 2}, initiator="alice", deadline=30)
            waits.append(time.perf_counter() - t0)
            if doc["state"] != "succeeded":
                failures.append((i, victim, doc["error"]))
        assert not failures, failures
        assert max(waits) < 5.0, waits


def test_a_frozen_node_is_named_within_twice_the_timeout(tmp_path):
    """SIGSTOP a node mid-job: every other party and the runner end the job, naming it,
    within 2 T; after SIGCONT the node serves the next job."""
    import signal

    timeout = 6.0
    with GrpcTestbed(["alice", "bob", "carol"], tmp_path / "bed", timeout=timeout) as bed:
        box: dict = {}
        runner = threading.Thread(
            target=lambda: box.setdefault(
                "doc",
                bed.run_job(
                    "ring-echo", {"rounds": 100_000, "delay_s": 0.01}, timeout=timeout, deadline=60
                ),
            )
        )
        runner.start()
        time.sleep(1.0)
        bed.send_signal("bob", signal.SIGSTOP)
        frozen = time.perf_counter()
        try:
            runner.join(4 * timeout)
            elapsed = time.perf_counter() - frozen
        finally:
            bed.send_signal("bob", signal.SIGCONT)
        doc = box["doc"]
        assert doc["state"] == "failed" and doc["failed_party"] == "bob", doc["error"]
        assert elapsed < 2 * timeout, elapsed
        for p in ("alice", "carol"):
            assert doc["parties"][p]["state"] == "failed"
        again = bed.run_job("ring-echo", {"rounds": 2}, timeout=timeout)
        assert again["state"] == "succeeded", again["error"]
