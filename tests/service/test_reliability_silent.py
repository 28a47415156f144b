"""Issue 23 item 6 over real node processes: a silent (frozen) peer is named within 2 T
for T = 1, 2 and 5 s, by the other nodes and in the initiator's job document (the 2 T
figure itself is measured by ``benchmarks/silent_peer.py``; this test checks who is named
and that the naming is tied to T, with a bound that only catches hangs).

The bound is checked on the times the system itself records: each surviving node's
``ended_at`` (when its job failed naming the silent party, in its ledger's job table)
and the job document's ``wall_time_s`` counted from the call, both against the moment
the test froze the node (SIGSTOP), never on how long the test took."""

from __future__ import annotations

import pytest

from ppdm.testbed.consortia import silent_peer_named_after

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(900)]

HANG = 300  # a deadline that only catches hangs


@pytest.mark.parametrize("T", [1.0, 2.0, 5.0])
def test_a_silent_peer_is_named_within_two_T(tmp_path, T):
    doc, named, blamed = silent_peer_named_after(tmp_path / "bed", T, hang_s=HANG)
    assert doc["state"] == "failed" and doc["failed_party"] == "bob", doc["error"]
    # The node that waited on bob names bob; the other may name the node whose abort
    # ended its job (the document's root cause is bob either way).
    assert "bob" in blamed.values(), blamed
    assert set(blamed.values()) <= {"bob", "alice", "carol"}, blamed
    print(f"T = {T:g} s: named after " + ", ".join(f"{k} {v:.2f} s" for k, v in named.items()))
    # The 2 T goal itself is a speed figure, measured on a quiet machine by
    # benchmarks/silent_peer.py; here only a bound that catches a wait tied to no timeout
    # (a loaded test machine delays every process, not the design).
    for who, after in named.items():
        assert after <= 2 * T + 60, f"{who} named the silent party {after:.2f} s after it froze"
