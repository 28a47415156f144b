"""Worker pools are owned by their node (issue 13, item 3): a node killed with SIGKILL
leaves no worker or resource tracker behind, and concurrent jobs asking for different
pool sizes both succeed."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from ppdm.protocols.commutative import _PARALLEL_THRESHOLD
from ppdm.testbed.consortia import GrpcTestbed

pytestmark = [pytest.mark.grpc, pytest.mark.slow]

# Items per party: every batch of a set union this size is above the size at which it
# goes to the worker pool (``_PARALLEL_THRESHOLD`` points), so each job uses its pool.
SMALL, BIG = 4200, 4800


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_killed_node_leaves_no_process_and_concurrent_pools_work(tmp_path):
    assert _PARALLEL_THRESHOLD < SMALL < BIG
    with GrpcTestbed(["alice", "bob", "carol"], tmp_path / "bed", timeout=120) as bed:
        box: dict = {}

        def run(initiator: str, workers: int) -> None:
            box[initiator] = bed.run_job(
                "set-union", {"generate_n": BIG, "workers": workers}, initiator=initiator
            )

        threads = [
            threading.Thread(target=run, args=("alice", 2)),
            threading.Thread(target=run, args=("carol", 3)),
        ]
        # A small pooled job whose thread ends first must not take workers with it.
        small = bed.run_job("set-union", {"generate_n": SMALL, "workers": 2}, initiator="bob")
        assert small["state"] == "succeeded", small["error"]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        for who in ("alice", "carol"):
            assert box[who]["state"] == "succeeded", (
                box[who]["error"],
                [ln for p in bed.parties for ln in bed.log(p).splitlines() if "failed at" in ln],
            )
        bob = bed._procs["bob"].pid
        kids = _descendants(bob)
        assert kids, "the set union ran without worker processes"
        bed.kill("bob")
        deadline = time.monotonic() + 10
        while any(_alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [k for k in kids if _alive(k)]
        assert not left, f"processes left behind: {left}"
        assert os.getpid() not in kids
