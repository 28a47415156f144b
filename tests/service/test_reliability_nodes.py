"""Issue 23 over real node processes: one node per party (the state folder is locked, the
port is bound exclusively) and fair job slots (a per-initiator cap, a refusal that names
the full node)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator

import grpc
import pytest

from ppdm.errors import ConfigError
from ppdm.parties.consortium import NodeLimits, load_settings, update_toml_file
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.service.client import NodeClient, root_cause
from ppdm.service.ledger import verify_file
from ppdm.service.node import PartyNode, StateLock, to_struct
from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.testbed.consortia import GrpcTestbed, free_ports, kill_tied, spawn_tied

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(600)]

HANG = 120  # a generous deadline that only catches hangs


def _serve(bed: GrpcTestbed, settings_path) -> subprocess.CompletedProcess[str]:
    """``ppdm party serve SETTINGS`` as a separate process tied to the test."""
    proc = spawn_tied(
        [sys.executable, "-m", "ppdm", "party", "serve", str(settings_path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(bed.workdir),
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        out, err = proc.communicate(timeout=HANG)
    finally:
        kill_tied(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _verify_ledgers(bed: GrpcTestbed) -> None:
    for party in bed.parties:
        report = verify_file(bed.workdir / "state" / party / "ledger.sqlite")
        assert report.ok, (party, report.problems)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcTestbed]:
    """One consortium for the tests that start a second node beside a running one; its
    ledgers are verified again once its nodes have stopped."""
    root = tmp_path_factory.mktemp("nodes")
    with GrpcTestbed(["alice", "bob", "carol"], root, policy=OPEN_POLICY_TOML) as testbed:
        yield testbed
    _verify_ledgers(testbed)


def test_a_second_node_of_a_party_exits_naming_the_holder(bed):
    assert bed.run_job("secure-sum")["state"] == "succeeded"
    holder = bed._procs["carol"].pid
    done = _serve(bed, bed.settings_path("carol"))
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert f"process {holder}" in lines[0] and "carol" in lines[0]
    # The running node is untouched: jobs still succeed, the ledger stays whole.
    for _ in range(3):
        assert bed.run_job("secure-sum")["state"] == "succeeded"
    _verify_ledgers(bed)  # a serving node's ledger (again after the stop: the fixture)


def test_a_port_another_process_holds_is_refused_naming_it(bed):
    # carol's settings with its own state folder, but alice's port
    other = bed.workdir / "carol-on-alice.toml"
    other.write_text(bed.settings_path("carol").read_text())
    alice_port = bed.settings["alice"].listen.rpartition(":")[2]
    update_toml_file(other, {"node": {"listen": f"127.0.0.1:{alice_port}", "state_dir": "state/x"}})
    done = _serve(bed, other)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert alice_port in lines[0] and f"process {bed._procs['alice'].pid}" in lines[0]
    assert bed.run_job("secure-sum")["state"] == "succeeded"

    # any other process: this test's own listening socket
    (port,) = free_ports(1)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        update_toml_file(other, {"node": {"listen": f"127.0.0.1:{port}", "state_dir": "state/y"}})
        done = _serve(bed, other)
    assert done.returncode != 0
    assert f"127.0.0.1:{port}" in done.stderr and f"process {os.getpid()}" in done.stderr


def test_state_lock_is_exclusive_and_released(tmp_path):
    first = StateLock(tmp_path, "alice")
    with pytest.raises(ConfigError, match=f"process {os.getpid()}"):
        StateLock(tmp_path, "alice")
    first.release()
    StateLock(tmp_path, "alice").release()


def test_a_node_object_of_a_running_party_is_refused(tmp_path):
    bed = GrpcTestbed(["alice", "bob", "carol"], tmp_path)
    node = PartyNode(bed.settings["alice"], probe_peers=False)
    node.start()
    try:
        second = PartyNode(load_settings(bed.settings_path("alice")), probe_peers=False)
        with pytest.raises(ConfigError, match="already served"):
            second.start()
        second.stop(0)
    finally:
        node.stop(0)
    again = PartyNode(bed.settings["alice"], probe_peers=False)
    again.start()
    again.stop(0)


# Fair job slots ------------------------------------------------------------------------------


def _hold_slot(bed: GrpcTestbed, initiator: str, at: str) -> str:
    """What a greedy member can do: propose a job to every member, start it only at
    ``at``; there it holds a running slot until its receive timeout or a cancel."""
    settings = bed.settings[initiator]
    members = list(bed.parties)
    job_id = uuid.uuid4().hex
    request = pb.JobRequest(
        consortium=settings.consortium.name,
        job_id=job_id,
        protocol="secure-sum",
        params=to_struct({}),
        initiator=initiator,
        parties=members,
        timeout_s=HANG,
        roster_version=settings.consortium.version,
    )
    with NodeClient(settings) as client:
        for p in members:
            client.stub(p).ProposeJob(request, timeout=HANG)
        client.stub(at).StartJob(pb.JobRef(job_id=job_id), timeout=HANG)
    return job_id


def _cancel(bed: GrpcTestbed, initiator: str, job_ids: list[str]) -> None:
    with NodeClient(bed.settings[initiator]) as client:
        for job_id in job_ids:
            for p in bed.parties:
                with contextlib.suppress(grpc.RpcError):
                    client.stub(p).CancelJob(pb.JobRef(job_id=job_id), timeout=HANG)


def test_one_initiator_cannot_take_every_slot_and_the_full_node_is_named(tmp_path):
    limits = NodeLimits(
        max_running_jobs=3, max_running_jobs_per_initiator=2, pending_job_wait_s=600.0
    )
    # A short receive timeout: the refused jobs below end as soon as their peers notice.
    with GrpcTestbed(
        ["alice", "bob", "carol"], tmp_path, policy=OPEN_POLICY_TOML, limits=limits, timeout=5
    ) as bed:
        held = {"bob": [_hold_slot(bed, "bob", "alice") for _ in range(2)], "carol": []}
        try:
            assert len(bed.health()["alice"]["running_jobs"]) == 2
            # bob's third job at alice is over bob's share: alice refuses and says why
            with pytest.raises(grpc.RpcError) as info:
                _hold_slot(bed, "bob", "alice")
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "node 'alice'" in info.value.details()
            assert "max_running_jobs_per_initiator" in info.value.details()
            doc = bed.run_job("secure-sum", initiator="bob")
            assert doc["state"] == "failed" and doc["failed_party"] == "alice", doc
            # an honest member's job still runs
            assert bed.run_job("secure-sum", initiator="carol")["state"] == "succeeded"
            # alice full: the document blames alice, not the initiator
            held["carol"].append(_hold_slot(bed, "carol", "alice"))
            doc = bed.run_job("secure-sum", initiator="carol")
            assert doc["state"] == "failed" and doc["failed_party"] == "alice", doc
            assert "node 'alice' is full" in doc["parties"]["alice"]["error"]
        finally:
            for who, ids in held.items():
                _cancel(bed, who, ids)
        assert bed.run_job("secure-sum", initiator="bob")["state"] == "succeeded"


def test_root_cause_skips_parties_that_were_only_cancelled():
    errors = {
        "alice": "cancelled: party 'alice' (the job was cancelled)",
        "bob": "job not started: RESOURCE_EXHAUSTED: node 'bob' is full",
        "carol": "cancelled: party 'alice' (the job was cancelled)",
    }
    assert root_cause(errors) == "bob"
