"""The receiving side of the gRPC transport (:mod:`ppdm.parties.grpc_net`): one incoming
``Exchange`` stream served by :func:`handle_exchange` (authenticate, reassemble, deliver),
the bytes of incomplete envelopes a node holds (:class:`ReassemblyBudget`), and the idle
streams it closes (:class:`StreamWatch`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import grpc

from ppdm.parties.channels import authenticate
from ppdm.parties.consortium import Consortium
from ppdm.parties.framing import FrameView, FramingError, Reassembler, parse_frame
from ppdm.parties.network import Endpoint
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb

__all__ = [
    "OVER_BUDGET_REASON",
    "PENDING_JOB_WAIT_S",
    "JobLookup",
    "ReassemblyBudget",
    "StreamWatch",
    "handle_exchange",
]

log = logging.getLogger(__name__)

# How long an Exchange stream for a job this node has not started yet waits for it.
PENDING_JOB_WAIT_S = 30.0


# Incoming streams -----------------------------------------------------------------------

JobLookup = Callable[[str, float], Endpoint | None]

OVER_BUDGET_REASON = "sent more incomplete envelope data than this party buffers for a job"


class ReassemblyBudget:
    """The bytes of incomplete (partly received, chunked) envelopes a node holds, per
    job and sender over all of that sender's streams, and per job, counted as chunks
    arrive against the node's ``[limits]``: ``max_unread_bytes_per_peer`` for one
    sender's incomplete envelopes in one job, ``max_unread_bytes_per_job`` for every
    sender's incomplete envelopes in one job plus what the job has received and not read
    yet. Without it, reassembly is bounded only by ``max_envelope_bytes`` per stream,
    and a member may open many streams."""

    def __init__(self, per_peer: int, per_job: int) -> None:
        self.per_peer = int(per_peer)
        self.per_job = int(per_job)
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], int] = {}
        self._job: dict[str, int] = {}

    def take(self, job_id: str, peer: str, nbytes: int, *, unread: int = 0) -> bool:
        """Count ``nbytes`` more of ``peer``'s incomplete envelopes in ``job_id``;
        ``False`` (nothing counted) if that would pass a limit (``unread``: what the
        job holds already, delivered and not read)."""
        with self._lock:
            held = self._held.get((job_id, peer), 0) + nbytes
            job = self._job.get(job_id, 0) + nbytes
            if held > self.per_peer or job + unread > self.per_job:
                return False
            self._held[(job_id, peer)] = held
            self._job[job_id] = job
            return True

    def give_back(self, job_id: str, peer: str, nbytes: int) -> None:
        """The envelope completed (its bytes are the endpoint's now) or its stream ended."""
        if nbytes <= 0:
            return
        with self._lock:
            held = self._held.get((job_id, peer), 0) - nbytes
            if held > 0:
                self._held[(job_id, peer)] = held
            else:
                self._held.pop((job_id, peer), None)
            job = self._job.get(job_id, 0) - nbytes
            if job > 0:
                self._job[job_id] = job
            else:
                self._job.pop(job_id, None)

    def held(self, job_id: str | None = None) -> int:
        """Bytes held for ``job_id`` (every job's, without one)."""
        with self._lock:
            if job_id is None:
                return sum(self._job.values())
            return self._job.get(job_id, 0)


class StreamWatch:
    """The incoming Exchange streams of a node, so that idle ones can be closed.

    :func:`handle_exchange` registers each stream and touches it on every frame; the
    node calls :meth:`reap` periodically, which cancels a stream that carried no frame
    for ``idle_s`` seconds, or for ``ended_grace_s`` seconds once its job has ended at
    this node (its thread is freed; a running job's endpoint learns the peer went quiet,
    naming it). Frames for an ended job are dropped on arrival meanwhile.
    """

    @dataclass
    class Entry:
        context: grpc.ServicerContext
        peer: str
        last: float
        endpoint: Endpoint | None = None
        reason: str = ""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, StreamWatch.Entry] = {}
        self._next = 0

    def register(self, context: grpc.ServicerContext, peer: str) -> tuple[int, Entry]:
        with self._lock:
            self._next += 1
            entry = StreamWatch.Entry(context, peer, time.monotonic())
            self._entries[self._next] = entry
            return self._next, entry

    def unregister(self, token: int) -> None:
        with self._lock:
            self._entries.pop(token, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def reap(self, idle_s: float, ended_grace_s: float) -> int:
        """Cancel idle streams and lingering streams of ended jobs; returns how many."""
        now = time.monotonic()
        victims: list[StreamWatch.Entry] = []
        with self._lock:
            for entry in self._entries.values():
                if entry.reason:
                    continue
                quiet = now - entry.last
                if entry.endpoint is not None and entry.endpoint.closed:
                    if quiet <= ended_grace_s:
                        continue
                    entry.reason = "its job has ended at this node"
                elif quiet > idle_s:
                    entry.reason = f"no frame for {idle_s:g} s"
                else:
                    continue
                victims.append(entry)
        for entry in victims:
            log.info("closing a stream from %s: %s", entry.peer, entry.reason)
            entry.context.cancel()
        return len(victims)


def handle_exchange(
    request_iterator: Iterator[bytes | env_pb.Frame],
    context: grpc.ServicerContext,
    *,
    consortium: Consortium,
    lookup: JobLookup,
    pending_wait_s: float = PENDING_JOB_WAIT_S,
    watch: StreamWatch | None = None,
    on_envelope: Callable[[str, int], None] | None = None,
    budget: ReassemblyBudget | None = None,
) -> env_pb.ExchangeSummary:
    """Serve one incoming Exchange stream: authenticate, reassemble, deliver.

    ``lookup(job_id, wait_s)`` returns the job's endpoint at this node, waiting up to
    ``wait_s`` seconds for a job whose ``StartJob`` has not arrived yet, or ``None``.
    With ``watch``, the stream is registered there so the node can close it when idle;
    ``on_envelope(peer, nbytes)`` is called for every reassembled envelope (metrics).
    With ``budget``, incomplete envelopes count against it as their chunks arrive; over
    it the stream ends (``RESOURCE_EXHAUSTED``) and the job's receives from the sender
    fail naming it.
    """
    peer = authenticate(context, consortium)
    if watch is None:
        return _serve_exchange(
            request_iterator,
            context,
            consortium,
            lookup,
            pending_wait_s,
            peer,
            None,
            on_envelope,
            budget,
        )
    token, entry = watch.register(context, peer)
    try:
        return _serve_exchange(
            request_iterator,
            context,
            consortium,
            lookup,
            pending_wait_s,
            peer,
            entry,
            on_envelope,
            budget,
        )
    finally:
        watch.unregister(token)


def _serve_exchange(
    request_iterator: Iterator[bytes | env_pb.Frame],
    context: grpc.ServicerContext,
    consortium: Consortium,
    lookup: JobLookup,
    pending_wait_s: float,
    peer: str,
    entry: StreamWatch.Entry | None,
    on_envelope: Callable[[str, int], None] | None,
    budget: ReassemblyBudget | None = None,
) -> env_pb.ExchangeSummary:
    reasm = Reassembler(consortium.max_envelope_bytes)
    counted = [0]  # bytes of this stream's incomplete envelope counted in the budget
    try:
        return _reassemble(
            request_iterator,
            context,
            lookup,
            pending_wait_s,
            peer,
            entry,
            on_envelope,
            budget,
            reasm,
            counted,
        )
    finally:
        if budget is not None and counted[0]:
            budget.give_back(reasm.job_id or "", peer, counted[0])


def _reassemble(
    request_iterator: Iterator[bytes | env_pb.Frame],
    context: grpc.ServicerContext,
    lookup: JobLookup,
    pending_wait_s: float,
    peer: str,
    entry: StreamWatch.Entry | None,
    on_envelope: Callable[[str, int], None] | None,
    budget: ReassemblyBudget | None,
    reasm: Reassembler,
    counted: list[int],
) -> env_pb.ExchangeSummary:
    endpoint: Endpoint | None = None
    while True:
        view: env_pb.Frame | FrameView | None = None
        try:
            frame = next(request_iterator)
        except StopIteration:
            break
        except Exception as exc:  # the caller went away, or the node closed the stream
            closed_here = entry is not None and entry.reason
            if endpoint is not None and not endpoint.closed:
                log.warning("stream from %s for job %s broke: %s", peer, reasm.job_id, exc)
                endpoint.fail_party(
                    peer,
                    f"the party's stream was closed: {entry.reason}"  # type: ignore[union-attr]
                    if closed_here
                    else "connection to the party's node was lost mid-job",
                )
            return env_pb.ExchangeSummary(frames=reasm.frames, envelopes=reasm.envelopes)
        if entry is not None:
            entry.last = time.monotonic()
        try:
            view = parse_frame(frame) if isinstance(frame, bytes | memoryview) else frame
        except FramingError as exc:
            _refuse_frames(context, endpoint or lookup(reasm.job_id or "", 0.0), peer, exc)
        if endpoint is None:
            # Find the job on the stream's first frame, before buffering anything: frames
            # for a job that does not exist (or has ended) are refused without holding
            # their bytes; while the job is awaited, flow control holds the sender.
            endpoint = lookup(view.job_id, pending_wait_s)  # type: ignore[union-attr]
            if endpoint is None:
                context.abort(
                    grpc.StatusCode.NOT_FOUND,
                    f"job {view.job_id!r} is not running at this node",  # type: ignore[union-attr]
                )
            if peer not in endpoint.parties:  # type: ignore[union-attr]
                context.abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"party {peer!r} is not a member of job {view.job_id!r}",  # type: ignore[union-attr]
                )
            if entry is not None:
                entry.endpoint = endpoint
        if budget is not None and view.chunk_count > 1:  # type: ignore[union-attr]
            # A chunk of a multi-chunk envelope is held until the envelope completes:
            # count it before keeping it.
            size = len(view.data)  # type: ignore[union-attr]
            # Counted under the stream's job (the endpoint's): a frame naming another job
            # is refused by the reassembler, and its bytes are given back under this one.
            job_id = endpoint.job_id  # type: ignore[union-attr]
            if not budget.take(job_id, peer, size, unread=endpoint.unread_bytes):  # type: ignore[union-attr]
                _refuse_over_budget(context, endpoint, peer)  # type: ignore[arg-type]
            counted[0] += size
        try:
            data = reasm.feed(view)  # type: ignore[arg-type]
        except FramingError as exc:
            _refuse_frames(context, endpoint, peer, exc)
        if data is None:
            continue
        view = None  # the last chunk's frame: held by ``data`` only from here on
        if budget is not None and counted[0]:
            budget.give_back(reasm.job_id, peer, counted[0])  # type: ignore[arg-type]
            counted[0] = 0
        # A memoryview is fine: deliver() only parses it and takes its length.
        endpoint.deliver(data, sender=peer)  # type: ignore[union-attr,arg-type]
        if on_envelope is not None:
            on_envelope(peer, len(data))
    try:
        reasm.finish()
    except FramingError as exc:
        job_id = reasm.job_id or ""
        _refuse_frames(context, endpoint or lookup(job_id, 0.0), peer, exc)
    return env_pb.ExchangeSummary(frames=reasm.frames, envelopes=reasm.envelopes)


def _refuse_over_budget(context: grpc.ServicerContext, endpoint: Endpoint, peer: str) -> None:
    """End a stream whose incomplete envelopes passed the node's ``[limits]``; the job
    fails naming the sender (its receives from it raise :class:`ProtocolError`, the
    others :class:`PartyFailure` naming it)."""
    log.warning("party %s: %s %s", peer, OVER_BUDGET_REASON, endpoint.job_id)
    endpoint.poison(peer, OVER_BUDGET_REASON)
    endpoint.fail_party(peer, OVER_BUDGET_REASON)
    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, OVER_BUDGET_REASON)


def _refuse_frames(
    context: grpc.ServicerContext, endpoint: Endpoint | None, peer: str, exc: FramingError
) -> None:
    reason = f"malformed frames: {exc}"
    log.warning("party %s sent %s", peer, reason)
    if endpoint is not None and peer in endpoint.parties:
        # The job's next receive from this peer raises ProtocolError naming it.
        endpoint.poison(peer, reason)
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, reason)
