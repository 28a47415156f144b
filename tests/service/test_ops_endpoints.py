"""Standard health and metrics (issue 16, item 1): grpc.health.v1 on the node's port,
plain HTTP /healthz, /readyz and Prometheus /metrics, and JSON logs with party and job."""

from __future__ import annotations

import io
import json
import logging
import urllib.error
import urllib.request
from dataclasses import replace

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from ppdm.parties.grpc_net import open_channel
from ppdm.progress import JsonLogFormatter, job_log_context
from ppdm.service.client import run_job
from ppdm.service.node import PartyNode
from ppdm.testbed.consortia import LoopbackConsortium, free_ports

pytestmark = pytest.mark.grpc

INPUTS = {"alice": 424_242, "bob": 737_373, "carol": 919_191}


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def bed(tmp_path):
    # The inputs go into the settings files, which a node re-reads for every job.
    inputs = {p: {"secure_sum": v} for p, v in INPUTS.items()}
    bed = LoopbackConsortium(("alice", "bob", "carol"), tmp_path, inputs=inputs)
    ports = free_ports(3)
    for (name, node), port in zip(bed.nodes.items(), ports, strict=True):
        settings = replace(node.settings, http_listen=f"127.0.0.1:{port}")
        bed.settings[name] = settings
        bed.nodes[name] = PartyNode(settings)
    with bed:
        yield bed


def test_grpc_health_service_on_the_node_port(bed):
    alice = bed.nodes["alice"]
    channel = open_channel(bed.settings["bob"], alice.name)
    stub = health_pb2_grpc.HealthStub(channel)
    for service in ("", "ppdm.v1.Party"):
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as info:
        stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
    channel.close()


def test_http_probes_and_metrics_follow_the_jobs(bed):
    alice = bed.nodes["alice"]
    port = alice.http_port
    assert port is not None
    assert _get(port, "/healthz") == (200, "ok\n")
    assert _get(port, "/readyz") == (200, "ready\n")
    assert _get(port, "/nope")[0] == 404

    doc = run_job(bed.settings["alice"], "secure-sum", {}, timeout=120, deadline=600)
    assert doc["state"] == "succeeded", doc
    # positive control: the job computed on the inputs whose absence is checked below
    assert doc["parties"]["alice"]["result"]["sum"] == sum(INPUTS.values())
    refused = run_job(  # min_parties: refused at every node
        bed.settings["alice"], "secure-sum", {}, parties=["alice", "bob"], deadline=600
    )
    assert refused["state"] != "succeeded", refused

    status, text = _get(port, "/metrics")
    assert status == 200
    m = _samples(text)
    assert m[("ppdm_jobs_total", (("job", "secure-sum"), ("outcome", "succeeded")))] == 1
    assert m[("ppdm_jobs_total", (("job", "secure-sum"), ("outcome", "started")))] == 1
    assert m[("ppdm_jobs_total", (("job", "secure-sum"), ("outcome", "refused")))] == 1
    count = ("ppdm_job_duration_seconds_count", (("job", "secure-sum"), ("state", "succeeded")))
    assert m[count] == 1
    # the ring: alice sends to her successor and hears from her predecessor
    sent = m[("ppdm_peer_messages_total", (("direction", "sent"), ("peer", "bob")))]
    heard = m[("ppdm_peer_bytes_total", (("direction", "received"), ("peer", "carol")))]
    assert sent >= 1 and heard > 0
    assert m[("ppdm_running_jobs", ())] == 0
    # Nothing private on the page: no party's input, not even the sum.
    for secret in [*INPUTS.values(), sum(INPUTS.values())]:
        assert str(secret) not in text

    alice.stop(grace=0.5)
    # stopped: the listener is gone with the node
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)


def test_readiness_reasons(bed):
    alice = bed.nodes["alice"]
    assert alice.not_ready() is None
    alice._stopping.set()
    try:
        assert _get(alice.http_port, "/readyz") == (503, "not ready: shutting down\n")
        assert _get(alice.http_port, "/healthz")[0] == 503
    finally:
        alice._stopping.clear()


def test_json_log_lines_carry_party_and_job():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLogFormatter(party="alice"))
    logger = logging.getLogger("ppdm.test.jsonlogs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logger.info("outside")
        with job_log_context("job-42"):
            logger.warning("inside %s", "x")
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [d["job_id"] for d in lines] == [None, "job-42"]
    assert {d["party"] for d in lines} == {"alice"}
    assert lines[1]["message"] == "inside x" and lines[1]["level"] == "WARNING"
