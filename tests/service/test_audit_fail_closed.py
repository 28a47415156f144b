"""The cross-node audit fails closed: a co-member whose history cannot be read refuses the
job instead of letting the audit rest on the histories it could read.

Found under load (the banks consortium example, step 4): with a 2 s deadline on
``AuditHistory``, a loaded co-member's reply came too late, the deciding node audited on
its own history alone and accepted a second sum that, with the first one, singles out a
member. A member that makes its honest co-members slow (or a machine that is slow) must
not turn a refusal into an acceptance. The attack from the issue's governance test
(dave took part in no earlier job; only co-members' histories show the differencing) is
run on in-process nodes over gRPC, with the co-members' history answers made to fail in
different ways: slow past the deadline, an error, or only one of the two co-members.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ppdm.service import lifecycle
from ppdm.service.client import run_job
from ppdm.service.decision import AuditHistoryUnavailable
from ppdm.testbed.consortia import LoopbackConsortium

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(600)]

PARTIES = ("alice", "bob", "carol", "dave", "mallory")
FIRST = ["alice", "bob", "carol", "mallory"]
SECOND = ["alice", "carol", "dave", "mallory"]  # with the first: bob's input (bob colluding)
HANG = 300.0


def _inputs() -> dict[str, dict]:
    return {p: {"secure_sum": 100 + i} for i, p in enumerate(PARTIES)}


@pytest.fixture
def bed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackConsortium]:
    monkeypatch.setattr(lifecycle, "AUDIT_HISTORY_TIMEOUT_S", 1.0)  # the test's slowness
    with LoopbackConsortium(PARTIES, tmp_path, probe_peers=False, inputs=_inputs()) as b:
        yield b


def _run(bed: LoopbackConsortium, parties: list[str]) -> dict:
    return run_job(
        bed.settings["mallory"], "secure-sum", parties=parties, timeout=30, deadline=HANG
    )


def _slow(original: Callable[..., list]) -> Callable[..., list]:
    def answer(input_key: str) -> list:
        time.sleep(2.5)  # past the (patched) deadline
        return original(input_key)

    return answer


def _broken(original: Callable[..., list]) -> Callable[..., list]:
    def answer(input_key: str) -> list:
        raise RuntimeError("history store unreadable")

    return answer


@pytest.mark.parametrize(
    ("who", "fault"),
    [
        (("alice", "carol"), _slow),
        (("alice", "carol"), _broken),
        (("carol",), _slow),  # one honest co-member's history would have decided
    ],
    ids=["both-slow", "both-broken", "one-slow"],
)
def test_a_co_member_history_that_cannot_be_read_refuses_the_differencing_job(bed, who, fault):
    first = _run(bed, FIRST)
    assert first["state"] == "succeeded", first["error"]
    for name in who:
        node = bed.nodes[name]
        node.audit_history = fault(node.audit_history)  # type: ignore[method-assign]
    second = _run(bed, SECOND)
    assert second["state"] == "refused", second
    decision = second["decisions"]["dave"]
    assert decision["rule"] == "audit", second["decisions"]
    for name in who:
        assert name in decision["reason"]
    # nothing of dave's input left in the refusal
    # as a token, not inside a job id, a clock time or a decimal ("1.103 s" matched once)
    secret = re.escape(str(_inputs()["dave"]["secure_sum"]))
    assert not re.search(rf"(?<![0-9A-Za-z.:]){secret}(?![0-9A-Za-z.:])", str(second))


def test_with_every_history_readable_the_same_job_is_refused_on_its_merits(bed):
    """The control: the refusal above is the audit's, and it needs the co-members'
    histories (dave took part in no earlier job)."""
    assert _run(bed, FIRST)["state"] == "succeeded"
    second = _run(bed, SECOND)
    assert second["state"] == "refused"
    assert second["decisions"]["dave"]["rule"] == "audit"
    assert "could not be read" not in second["decisions"]["dave"]["reason"]


def test_a_job_no_history_decides_runs_when_every_co_member_answers(bed):
    """Failing closed costs nothing when the histories arrive: a first sum runs."""
    assert _run(bed, FIRST)["state"] == "succeeded"


def test_peer_history_raises_naming_every_silent_peer(bed):
    bed.nodes["carol"].stop(0)  # a member that is not serving
    with pytest.raises(AuditHistoryUnavailable) as info:
        bed.nodes["dave"]._peer_history(["alice", "carol"], "inputs.secure_sum")
    assert info.value.peers == ["carol"]
