"""Issue 23 item 6 over real node processes: a silent (frozen) peer is named within 2 T
for T = 1, 2 and 5 s, by the other nodes and in the initiator's job document (the 2 T
figure itself is measured by ``benchmarks/silent_peer.py``; this test checks who is named
and that the naming is tied to T, with a bound that only catches hangs).

The bound is checked on the times the system itself records: each surviving node's
``ended_at`` (when its job failed naming the silent party, in its ledger's job table)
and the job document's ``wall_time_s`` counted from the call, both against the moment
the test froze the node (SIGSTOP), never on how long the test took."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.testbed.consortia import SILENT_PARTY, GrpcTestbed, freeze_a_ring_member

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(900)]

HANG = 300  # a deadline that only catches hangs


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcTestbed]:
    """One consortium for every T: each job carries its own receive timeout, and the
    frozen node is woken once its job has ended."""
    root = tmp_path_factory.mktemp("silent") / "bed"
    with GrpcTestbed(["alice", "bob", "carol"], root, policy=OPEN_POLICY_TOML) as testbed:
        yield testbed


@pytest.mark.parametrize("T", [1.0, 2.0, 5.0])
def test_a_silent_peer_is_named_within_two_T(bed, T):
    doc, named, blamed = freeze_a_ring_member(bed, T, hang_s=HANG)
    silent = SILENT_PARTY  # carol: see freeze_a_ring_member
    assert doc["state"] == "failed" and doc["failed_party"] == silent, doc["error"]
    # The node that waited on the silent one names it; the other may name the node whose
    # abort ended its job (the document's root cause is the silent party either way).
    assert silent in blamed.values(), blamed
    assert set(blamed.values()) <= {"bob", "alice", "carol"}, blamed
    print(f"T = {T:g} s: named after " + ", ".join(f"{k} {v:.2f} s" for k, v in named.items()))
    # The 2 T goal itself is a speed figure, measured on a quiet machine by
    # benchmarks/silent_peer.py; here only a bound that catches a wait tied to no timeout
    # (a loaded test machine delays every process, not the design).
    for who, after in named.items():
        assert after <= 2 * T + 60, f"{who} named the silent party {after:.2f} s after it froze"
