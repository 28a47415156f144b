"""A stopped node's process ends even while a peer's call waits on the node's state.

A peer's frames for a job this node accepted but has not started yet wait for the job
(up to ``[limits] pending_job_wait_s``) in a gRPC handler thread. Python joins those
threads when the process exits, so a ``stop`` that set its flag without waking the waiters
left the process alive for the rest of that wait after "party ... stopped" (the envelope
flood test spent two minutes in its testbed's teardown this way). The wait here is ten
minutes; SIGTERM must end the process long before, and with exit code 0 (SIGTERM's
orderly stop, not the testbed's SIGKILL).
"""

from __future__ import annotations

import subprocess
import time

import pytest

from ppdm.parties.consortium import NodeLimits
from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.testbed.consortia import GrpcTestbed

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(600)]

HANG = 120.0  # only catches a hang: far below the 600 s wait a missed wake-up would take
PENDING_WAIT_S = 600.0


@pytest.mark.parametrize("stopped", ["bob", "carol"])
def test_sigterm_ends_a_node_whose_peer_waits_for_a_pending_job(tmp_path, stopped):
    limits = NodeLimits(pending_job_wait_s=PENDING_WAIT_S)
    with GrpcTestbed(
        ["alice", "bob", "carol"], tmp_path, policy=OPEN_POLICY_TOML, limits=limits
    ) as bed:
        bed.start_only_at("alice", timeout_s=HANG)
        time.sleep(1.0)  # alice's frames reach the others and wait there for the job
        proc = bed._procs[stopped]
        proc.terminate()
        try:
            code = proc.wait(HANG)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{stopped}'s node was still running {HANG:g} s after SIGTERM")
        assert code == 0, f"{stopped}'s node exited with {code}"
