"""Issue 23 item 7: a node keeps nothing per job once the job is over.

Measured on real nodes (``benchmarks/longrun.py``), a node grew about 23 KiB per job:
each finished job left a reference cycle (its endpoint, the endpoint's ``transmit``
closure, the job's :class:`~ppdm.parties.grpc_net.JobLinks`, its peer streams and their
gRPC calls) that only the garbage collector's rare full pass freed, so the gRPC calls'
C memory piled up between passes and fragmented the heap. These tests run real jobs on
three in-process nodes over gRPC on 127.0.0.1 (``LoopbackConsortium``, the initiator's
client in this process too) and check, with no wall-clock bound:

- a finished job leaves no garbage cycle (reference counting frees it at once) and no
  transport object (endpoint, links, stream, gRPC call) alive;
- the Python objects and memory a node retains (after a full collection) do not grow
  between ``N`` and ``2N`` more jobs, nor do its Prometheus series (no label per job);

and, over real ``ppdm party serve`` processes, that a node's resident memory grows by
far less per job than the 23 KiB measured before (``benchmarks/longrun.py`` measures it
against the 1 KiB goal).
"""

from __future__ import annotations

import collections
import gc
import time
import tracemalloc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from ppdm.parties.consortium import NodeLimits
from ppdm.parties.grpc_net import JobLinks
from ppdm.parties.network import Endpoint
from ppdm.service.client import run_job
from ppdm.service.lifecycle import MAX_FINISHED_JOBS
from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.testbed.consortia import GrpcTestbed, LoopbackConsortium

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(900)]

MEMBERS = ("alice", "bob", "carol")
#: Enough jobs to fill every node's table of finished jobs (kept for status calls, capped
#: at MAX_FINISHED_JOBS) and the caches that fill once (channels, thread pools).
WARM_UP = MAX_FINISHED_JOBS + 10
#: Jobs per measured interval of the retained objects and memory. Measured after the
#: warm-up, the objects moved by at most 2 over any 10 jobs (0.1 per job over 20; bound
#: 1.0) and the traced memory by 460 to 870 bytes per job over 20 or 40 (bound 2048);
#: one leaked record per job is several objects per job, whatever the interval.
N = 20
#: Jobs whose garbage cycles and surviving transport objects are counted: before the fix
#: each job left about 200 objects in cycles (bound 2 per job: 20 here) and its transport
#: alive until the collector's full pass (bound 0); after it none of either.
GARBAGE_JOBS = 10
HANG = 300.0  # generous deadlines that only catch hangs
#: Per job, objects of these kinds must not outlive it (the job's transport).
TRANSPORT = ("Endpoint", "JobLinks", "PeerStream", "_MultiThreadedRendezvous", "_RPCState")
#: Before the fix a job left about 200 objects in garbage cycles at three nodes; after
#: it none. The bound leaves room for a stray cycle elsewhere (an exception's traceback).
MAX_GARBAGE_PER_JOB = 2.0
#: Objects retained per job after a full collection (beyond a constant): one leaked
#: record per job (a dict, a dataclass, a list entry) is several objects.
MAX_RETAINED_OBJECTS_PER_JOB = 1.0
#: Python memory retained per job at three nodes and the client together, after a full
#: collection; generous beside the sawtooth noted in :func:`_retained`.
MAX_RETAINED_BYTES_PER_JOB = 2048
#: Resident memory of a node process per job, least-squares over the measured jobs: about
#: 23 KiB before the fix, about 1-3 KiB after it in the first few hundred jobs (the heap
#: settles: ``benchmarks/longrun.py`` measures about 1 KiB over 1,000 jobs, 0.4 over 2,000).
MAX_RSS_KIB_PER_JOB = 8.0


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackConsortium]:
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(1)  # before the nodes: everything they keep is traced
    workdir = tmp_path_factory.mktemp("memory-per-job")
    # A short grace for late frames: ended jobs' endpoints are dropped soon after.
    limits = NodeLimits(ended_stream_grace_s=0.5)
    try:
        with LoopbackConsortium(
            MEMBERS, workdir, policy=OPEN_POLICY_TOML, probe_peers=False, limits=limits
        ) as consortium:
            _run_jobs(consortium, WARM_UP)
            yield consortium
    finally:
        if started:
            tracemalloc.stop()


def _run_jobs(bed: LoopbackConsortium, n: int) -> None:
    """``n`` secure sums, initiators in turn, each checked; then wait until every node
    dropped the ended jobs' endpoints (kept for late frames for the grace)."""
    for i in range(n):
        doc = run_job(
            bed.settings[MEMBERS[i % len(MEMBERS)]],
            "secure-sum",
            parties=MEMBERS,
            timeout=60,
            deadline=HANG,
        )
        assert doc["state"] == "succeeded", doc["error"]
    deadline = time.monotonic() + HANG
    while any(node._endpoints for node in bed.nodes.values()):
        assert time.monotonic() < deadline, "ended jobs' endpoints never dropped"
        time.sleep(0.1)


def _count(kinds: tuple[str, ...]) -> dict[str, int]:
    counts = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
    return {k: counts[k] for k in kinds}


def _series(bed: LoopbackConsortium) -> int:
    """Prometheus samples the nodes expose (a label set per job would grow them)."""
    return sum(
        len(family.samples)
        for node in bed.nodes.values()
        for family in node.metrics.registry.collect()
    )


def _retained() -> tuple[int, int]:
    """Objects the collector tracks and Python memory traced, after a full collection.

    Weak references are left out of the count: sqlite3 keeps a list of weak references
    to a connection's cursors and prunes it every 200 cursors (a sawtooth, not growth).
    """
    gc.collect()
    objects = sum(1 for o in gc.get_objects() if type(o) is not weakref.ReferenceType)
    return objects, tracemalloc.get_traced_memory()[0]


def test_links_hold_their_endpoint_weakly():
    """The endpoint's ``transmit`` holds the links; the links must not hold the endpoint
    back, or the pair (with its streams) waits for the collector's full pass."""
    links = JobLinks("j", lambda peer: None, max_chunk=1 << 16, timeout=1.0)  # type: ignore[arg-type,return-value]
    endpoint = Endpoint("alice", ("alice", "bob"), links.transmit, job_id="j", timeout=1.0)
    links.endpoint = endpoint
    assert links.endpoint is endpoint
    gone = weakref.ref(endpoint)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del endpoint, links
        assert gone() is None  # freed by reference counting alone
    finally:
        if enabled:
            gc.enable()


def test_a_finished_job_leaves_no_garbage_and_no_transport(bed: LoopbackConsortium):
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()  # what the jobs leave in cycles stays until the count below
    try:
        _run_jobs(bed, GARBAGE_JOBS)
        alive = _count(TRANSPORT)
        garbage = gc.collect()
    finally:
        if enabled:
            gc.enable()
    assert alive == dict.fromkeys(TRANSPORT, 0), f"transport objects outlived their jobs: {alive}"
    assert garbage <= MAX_GARBAGE_PER_JOB * GARBAGE_JOBS, (
        f"{garbage / GARBAGE_JOBS:.1f} objects per job in garbage cycles "
        f"(at most {MAX_GARBAGE_PER_JOB})"
    )


def test_retained_objects_and_memory_do_not_grow_with_jobs(bed: LoopbackConsortium):
    _run_jobs(bed, N)
    objects_n, bytes_n = _retained()
    series_n = _series(bed)
    _run_jobs(bed, N)
    objects_2n, bytes_2n = _retained()
    assert _series(bed) == series_n, "the nodes' metrics gained series with the jobs"
    per_job_objects = (objects_2n - objects_n) / N
    per_job_bytes = (bytes_2n - bytes_n) / N
    assert per_job_objects <= MAX_RETAINED_OBJECTS_PER_JOB, (
        f"{per_job_objects:.2f} more objects per job ({objects_n} -> {objects_2n})"
    )
    assert per_job_bytes <= MAX_RETAINED_BYTES_PER_JOB, (
        f"{per_job_bytes:.0f} more bytes per job ({bytes_n} -> {bytes_2n})"
    )


def _rss_kib(pid: int) -> int:
    """Resident memory of process ``pid`` in KiB (``VmRSS`` of ``/proc/PID/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise LookupError(f"no VmRSS for process {pid}")


def _slope(xs: list[float], ys: list[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def test_node_process_memory_is_flat_over_jobs(tmp_path):
    # The slope over jobs 80 to 240, sampled every 10 jobs (the heap settles in the first
    # few dozen jobs), was at most 3.1 and 3.3 KiB per job in two runs (8 allowed); with
    # the cycle put back (JobLinks holding its endpoint and its streams) 24 at one node and
    # 12.8 at the least grown one, as over jobs 100 to 400 (23.3 and 12.0).
    warm_up, jobs, every = 80, 160, 10
    with GrpcTestbed(MEMBERS, tmp_path, timeout=60, policy=OPEN_POLICY_TOML) as bed:
        pids = {p: bed._procs[p].pid for p in MEMBERS}
        samples: dict[str, list[float]] = {p: [] for p in MEMBERS}
        xs: list[float] = []
        for i in range(1, warm_up + jobs + 1):
            doc = bed.run_job(
                "secure-sum", initiator=MEMBERS[i % len(MEMBERS)], parties=MEMBERS, deadline=HANG
            )
            assert doc["state"] == "succeeded", doc["error"]
            if i >= warm_up and i % every == 0:
                xs.append(float(i))
                for p, pid in pids.items():
                    samples[p].append(float(_rss_kib(pid)))
    growth = {p: _slope(xs, samples[p]) for p in MEMBERS}
    assert max(growth.values()) <= MAX_RSS_KIB_PER_JOB, f"KiB per job: {growth}"
