"""Nodes die with their test (issue 22, item 5).

A pytest-like parent process starts a :class:`~ppdm.testbed.consortia.GrpcTestbed` (three
``ppdm party serve`` processes), writes the nodes' pids, and is then killed with SIGKILL,
as a CI runner kills a hung pytest: no ``finally`` and no ``atexit`` runs. Every node
must be gone soon after (the kernel's parent-death signal), which the test waits for
with a deadline that only catches a leak. A second parent starts its testbed from a
short-lived thread: the nodes must outlive that thread (Linux sends the parent-death
signal when the forking *thread* ends) and still die with the process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.grpc,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG: Linux"),
]

REPO = Path(__file__).resolve().parents[2]
HANG_SECONDS = 120.0

PARENT = textwrap.dedent(
    """
    import json, sys, threading, time
    from pathlib import Path
    from ppdm.testbed.consortia import GrpcTestbed

    workdir, out, from_thread = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1"
    bed = GrpcTestbed(["alice", "bob", "carol"], workdir, timeout=30)
    if from_thread:  # started by a thread that ends at once
        t = threading.Thread(target=bed.start)
        t.start()
        t.join()
    else:
        bed.start()
    pids = {p: proc.pid for p, proc in bed._procs.items()}
    out.write_text(json.dumps(pids))
    time.sleep(3600)  # holds the testbed until killed
    """
)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody has reaped yet counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in {"Z", "X"}


def _parent_holding_a_testbed(tmp_path: Path, *, from_thread: bool) -> tuple[int, dict]:
    out = tmp_path / "pids.json"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PARENT,
            str(tmp_path / "bed"),
            str(out),
            "1" if from_thread else "0",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # our own SIGKILL below must reach only this parent
    )
    deadline = time.monotonic() + HANG_SECONDS
    try:
        while not out.exists():
            if parent.poll() is not None:
                pytest.fail(f"the parent exited: {parent.stderr.read().decode()[-3000:]}")  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the testbed did not start"
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written in one call; let it be complete
        pids = json.loads(out.read_text())
    except BaseException:
        parent.kill()
        parent.wait(HANG_SECONDS)
        raise
    return parent, pids


def _kill_and_check(parent: subprocess.Popen, pids: dict) -> None:
    try:
        assert sorted(pids) == ["alice", "bob", "carol"]
        assert all(_alive(pid) for pid in pids.values()), "a node is not running"
        os.kill(parent.pid, signal.SIGKILL)  # no finally, no atexit: only the kernel acts
        parent.wait(HANG_SECONDS)
        deadline = time.monotonic() + HANG_SECONDS
        while any(_alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {p: pid for p, pid in pids.items() if _alive(pid)}
        assert not left, f"nodes outlived the killed parent: {left}"
    finally:
        for pid in pids.values():  # never leave one behind, even when the test fails
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
            parent.wait(HANG_SECONDS)


def test_nodes_die_when_the_process_holding_the_testbed_is_killed(tmp_path: Path) -> None:
    parent, pids = _parent_holding_a_testbed(tmp_path, from_thread=False)
    _kill_and_check(parent, pids)


def test_nodes_started_from_a_thread_outlive_the_thread_not_the_process(
    tmp_path: Path,
) -> None:
    parent, pids = _parent_holding_a_testbed(tmp_path, from_thread=True)
    # The starting thread has ended (the parent joined it before writing the pids): the
    # nodes must still be up, then go with the process.
    time.sleep(0.5)
    _kill_and_check(parent, pids)
