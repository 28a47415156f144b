"""Issue 24 item 1 over real node processes: consent that waits as long as the policy
says. The members that accepted keep the job while the initiator waits for a pending
member's owner (``[limits] accepted_job_ttl_s`` is made short here so that the approval
arrives well after it), and the policy's ``[notify] pending`` command tells the owner."""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import grpc
import pytest

from ppdm.parties.consortium import NodeLimits
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.service.client import NodeClient, decide_job, pending_jobs, run_job
from ppdm.service.node import to_struct
from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.testbed.consortia import GrpcTestbed

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(600)]

HANG = 120  # generous deadlines that only catch hangs
TTL_S = 2.0  # each node's accepted_job_ttl_s in these tests


def _consent_policy(notify_file: str) -> str:
    hook = (
        "import json, os, sys; "
        "json.dump({k: v for k, v in os.environ.items() if k.startswith('PPDM_')}, "
        "open(sys.argv[1], 'w'))"
    )
    return (
        OPEN_POLICY_TOML
        + "\n[notify]\n"
        + f"pending = {json.dumps([sys.executable, '-c', hook, notify_file])}\n"
        + "timeout_s = 30\n"
    ).replace("[defaults]\n", "[defaults]\nconsent = true\nconsent_timeout_s = 90\n", 1)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcTestbed]:
    """alice and bob run the open policy, carol's owner decides (told through the
    ``[notify]`` command, into ``notified.json`` beside the bed's folder); every node
    drops an accepted job after ``TTL_S``."""
    root = tmp_path_factory.mktemp("consent")
    policies = {
        "alice": OPEN_POLICY_TOML,
        "bob": OPEN_POLICY_TOML,
        "carol": _consent_policy(str(root / "notified.json")),
    }
    limits = NodeLimits(accepted_job_ttl_s=TTL_S)
    with GrpcTestbed(
        ["alice", "bob", "carol"], root / "bed", policy=policies, limits=limits
    ) as testbed:
        yield testbed


def test_an_approval_long_after_the_accepted_ttl_still_runs_the_job(bed):
    notify_file = bed.workdir.parent / "notified.json"
    box: dict = {}
    waits: list[float] = []
    runner = threading.Thread(
        target=lambda: box.setdefault(
            "doc",
            run_job(
                bed.settings["alice"],
                "secure-sum",
                deadline=HANG,
                on_wait=lambda who, s: waits.append(s),
            ),
        )
    )
    runner.start()
    jobs: list = []
    deadline = time.monotonic() + HANG
    while not jobs and time.monotonic() < deadline:
        jobs = pending_jobs(bed.settings["carol"])
        time.sleep(0.1)
    assert len(jobs) == 1
    job_id = jobs[0]["job_id"]
    # The owner's notification names the job and its initiator, nothing private.
    while not notify_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    told = json.loads(notify_file.read_text())
    assert told["PPDM_JOB_ID"] == job_id and told["PPDM_INITIATOR"] == "alice"
    assert told["PPDM_PARTY"] == "carol" and told["PPDM_PROTOCOL"] == "secure-sum"
    private = {str(v) for v in bed.private_inputs()["carol"].values()}
    assert not private & set(told.values())
    # Approve after three times the accepted jobs' TTL at alice and bob.
    while (not waits or waits[-1] < 3 * TTL_S) and time.monotonic() < deadline:
        time.sleep(0.1)
    decide_job(bed.settings["carol"], job_id, approve=True)
    runner.join(HANG)
    doc = box["doc"]
    assert doc["state"] == "succeeded", doc["error"]
    assert doc["decisions"]["carol"]["decision"] == "approved"
    assert max(waits) >= 3 * TTL_S
    inputs = bed.private_inputs()
    assert doc["parties"]["alice"]["result"]["sum"] == sum(
        inputs[p]["secure_sum"] for p in bed.parties
    )


def test_an_accepted_job_nobody_asks_about_is_dropped_after_the_ttl(bed):
    # (bob, the only node asked here, runs the open policy)
    settings = bed.settings["alice"]
    job_id = uuid.uuid4().hex
    request = pb.JobRequest(
        consortium=settings.consortium.name,
        job_id=job_id,
        protocol="secure-sum",
        params=to_struct({}),
        initiator="alice",
        parties=list(bed.parties),
        roster_version=settings.consortium.version,
    )
    with NodeClient(settings) as client:
        assert client.stub("bob").ProposeJob(request, timeout=HANG).decision == (
            pb.DECISION_ACCEPTED
        )
        # the initiator went away: nothing keeps the job past its TTL
        time.sleep(4 * TTL_S)
        state = (
            client.stub("bob").GetJobStatus(pb.JobStatusRequest(job_id=job_id), timeout=HANG)
        ).state
        assert state == pb.JOB_STATE_CANCELLED
        with pytest.raises(grpc.RpcError) as info:
            client.stub("bob").StartJob(pb.JobRef(job_id=job_id), timeout=HANG)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_a_hanging_or_failing_notification_never_blocks_the_node(tmp_path, caplog):
    import logging

    from ppdm.service.node import Job, PartyNode
    from ppdm.testbed.consortia import write_policy

    bed = GrpcTestbed(["alice", "bob", "carol"], tmp_path / "bed")
    started = tmp_path / "started"
    finished = tmp_path / "finished"
    hang = (
        "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(60); "
        "pathlib.Path(sys.argv[2]).touch()"
    )
    policy = OPEN_POLICY_TOML + (
        "\n[notify]\n"
        f"pending = {json.dumps([sys.executable, '-c', hang, str(started), str(finished)])}\n"
        "timeout_s = 1\n"
    )
    write_policy(bed.policy_path("alice"), policy)
    node = PartyNode(bed.settings["alice"], probe_peers=False)
    job = Job(
        job_id="j1",
        protocol="secure-sum",
        params={},
        initiator="bob",
        parties=("alice", "bob", "carol"),
        timeout_s=10.0,
    )
    with caplog.at_level(logging.INFO, logger="ppdm.service.lifecycle"):
        node._notify_pending(job)  # returns at once: the command runs in its own thread
        assert "killed after" not in caplog.text  # it did not wait for the command
        deadline = time.monotonic() + HANG
        while "killed after" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "killed after 1 s" in caplog.text
        assert started.exists() and not finished.exists()
        # a command that fails is logged with its exit code
        write_policy(
            bed.policy_path("alice"),
            OPEN_POLICY_TOML
            + f"\n[notify]\npending = {json.dumps([sys.executable, '-c', 'raise SystemExit(3)'])}\n",
        )
        node.policy.reload()
        node._notify_pending(job)
        while "exited with 3" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "exited with 3" in caplog.text
    node.stop(0)
