"""The gRPC transport of the party network: mutual TLS, identity from the roster, framing.

Every party runs a node (:mod:`ppdm.service.node`, the job service above this layer) serving the ``ppdm.v1.Party`` service
on its roster address. This module is what moves a job's envelopes between nodes:

- **Channels and credentials.** Both sides of every connection present a certificate
  (mutual TLS, :func:`server_credentials`, :func:`open_channel`). A node accepts clients
  from the consortium's CA only (then pins them in :func:`authenticate`), and a client
  accepts exactly the roster's certificate of the party it dialled, which must name it
  (the party name is the TLS target name): certificates are pinned in both directions.
- **Identity.** :func:`authenticate` maps the caller's TLS certificate to a roster party:
  the certificate must be exactly the roster's certificate for a party and name it (see
  :meth:`Consortium.identify <ppdm.parties.consortium.Consortium.identify>`). Anything
  else — no certificate, another CA (both refused in the TLS handshake), a certificate
  not on the roster or listed under another name — is refused with ``PERMISSION_DENIED``.
  The authenticated name is what :meth:`Endpoint.deliver
  <ppdm.parties.network.Endpoint.deliver>` checks each envelope's ``sender`` against.
- **Framing.** Per job and peer, the sender opens one client-streaming ``Exchange`` call
  (:class:`PeerStream`) and writes each serialized envelope as one or more ``Frame``
  messages of at most :func:`frame_bytes` data bytes (2 MiB, or less if the
  consortium's ``max_message_bytes`` requires) (:func:`encode_frames`: the frames are
  encoded by hand so each chunk is copied once); the receiver parses them without
  copying (:func:`parse_frame`) and its :class:`Reassembler` checks the frames
  (one job per stream, consecutive envelope numbers and chunk indices, a bound on the
  reassembled size) and hands whole envelopes to the job's endpoint. A malformed stream
  makes the job fail with :class:`~ppdm.errors.ProtocolError` naming the peer.
- **Early frames.** A peer may start sending before this node has received the job's
  ``StartJob``; the stream then waits (bounded by :data:`PENDING_JOB_WAIT_S`) for the job
  to appear. While it waits gRPC flow control stops the sender, so the memory held for a
  job that has not started is bounded by one stream window per peer.
- **Failures.** A broken outgoing stream (node gone, refused stream) or an incoming
  stream cancelled mid-job calls :meth:`Endpoint.fail_party
  <ppdm.parties.network.Endpoint.fail_party>`, so the job ends with
  :class:`~ppdm.errors.PartyFailure` naming the peer, before the receive timeout.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from ppdm.errors import PartyFailure
from ppdm.parties.consortium import Consortium, PartySettings
from ppdm.parties.network import Endpoint
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb

__all__ = [
    "FRAME_OVERHEAD",
    "PENDING_JOB_WAIT_S",
    "PREFERRED_FRAME_BYTES",
    "FramingError",
    "JobLinks",
    "PeerStream",
    "Reassembler",
    "ReassemblyBudget",
    "StreamWatch",
    "authenticate",
    "channel_options",
    "dynamic_server_credentials",
    "encode_frames",
    "frame_bytes",
    "handle_exchange",
    "open_channel",
    "parse_frame",
    "server_credentials",
    "split_envelope",
]

log = logging.getLogger(__name__)

# Room left in each gRPC message for the Frame fields around the chunk.
FRAME_OVERHEAD = 1024
# Preferred frame payload: moderate frames let the sender's and the receiver's threads
# work on different frames of one large envelope at the same time (on a loaded 2-core
# loopback, 2 MiB frames moved 1-8 MiB envelopes at least as fast as 1 or 4 MiB frames);
# frames are never larger than the consortium's max_message_bytes allows.
PREFERRED_FRAME_BYTES = 2 << 20
# How long an Exchange stream for a job this node has not started yet waits for it.
PENDING_JOB_WAIT_S = 30.0
# Frames queued per outgoing stream before send() blocks (back-pressure).
QUEUE_FRAMES = 8
_CLOSE = object()
EXCHANGE_METHOD = "/ppdm.v1.Party/Exchange"


# Channels and credentials ---------------------------------------------------------------


def channel_options(consortium: Consortium) -> list[tuple[str, Any]]:
    """gRPC options shared by nodes and clients: message size limits, keep-alive, and a
    short reconnect backoff (gRPC's default grows to 120 s, so a channel to a node that
    was down for a while would keep failing long after the node is back)."""
    limit = consortium.max_message_bytes + FRAME_OVERHEAD
    return [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[0]),
        ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[1]),
        # gRPC takes this as the shortest time one connection attempt may take (TCP, TLS
        # and the first SETTINGS frame): it must leave room for long round trips.
        ("grpc.min_reconnect_backoff_ms", CONNECT_TIMEOUT_MS),
    ]


#: First and largest delay (ms) between reconnection attempts to a peer's node.
RECONNECT_BACKOFF_MS = (200, 2000)
#: The least time one connection attempt gets (links of several hundred ms round trip).
CONNECT_TIMEOUT_MS = 10_000


def frame_bytes(consortium: Consortium) -> int:
    """Largest chunk of an envelope carried in one Frame for this consortium."""
    return min(consortium.max_message_bytes - FRAME_OVERHEAD, PREFERRED_FRAME_BYTES)


def server_credentials(settings: PartySettings) -> grpc.ServerCredentials:
    """TLS server credentials that require a client certificate from the consortium CA."""
    return grpc.ssl_server_credentials(
        [(settings.private_key_pem, settings.certificate_pem)],
        root_certificates=settings.consortium.ca_certificate_pem,
        require_client_auth=True,
    )


def dynamic_server_credentials(
    current: Callable[[], PartySettings],
) -> grpc.ServerCredentials:
    """Like :func:`server_credentials`, but every new TLS handshake presents the key and
    certificate of ``current()`` (a node takes a rotated certificate without a restart)."""

    def config(settings: PartySettings) -> Any:
        return grpc.ssl_server_certificate_configuration(
            [(settings.private_key_pem, settings.certificate_pem)],
            root_certificates=settings.consortium.ca_certificate_pem,
        )

    first = current()
    state = {"cert": first.certificate_pem}

    def fetch() -> Any:
        settings = current()
        if settings.certificate_pem == state["cert"]:
            return None  # unchanged: gRPC keeps the configuration it has
        state["cert"] = settings.certificate_pem
        return config(settings)

    return grpc.dynamic_ssl_server_credentials(
        config(first), fetch, require_client_authentication=True
    )


def open_channel(settings: PartySettings, peer: str) -> grpc.Channel:
    """An mTLS channel from ``settings``' party to ``peer``'s node.

    The client presents its own certificate and accepts only *the* certificate the roster
    lists for ``peer`` (pinned: that certificate is the channel's only trust anchor, so
    another certificate for the same name -- an old one after a rotation, a mis-issued
    one, even from the consortium CA -- fails the TLS handshake), and it must name
    ``peer`` (TLS target name override = party name). Incoming calls are pinned the same
    way by :func:`authenticate`.
    """
    entry = settings.consortium.party(peer)
    creds = grpc.ssl_channel_credentials(
        root_certificates=entry.certificate_pem,
        private_key=settings.private_key_pem,
        certificate_chain=settings.certificate_pem,
    )
    options = [*channel_options(settings.consortium), ("grpc.ssl_target_name_override", peer)]
    return grpc.secure_channel(entry.address, creds, options=options)


def peer_certificate(context: grpc.ServicerContext) -> bytes | None:
    """The PEM certificate the caller presented in the TLS handshake, if any."""
    auth = context.auth_context() or {}
    certs = auth.get("x509_pem_cert") or []
    return bytes(certs[0]) if certs else None


def authenticate(context: grpc.ServicerContext, consortium: Consortium) -> str:
    """The roster name of the caller; aborts the RPC if the caller is not a roster party."""
    pem = peer_certificate(context)
    if pem is None:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "a client certificate is required")
        raise AssertionError("unreachable")  # pragma: no cover - abort raises
    name = consortium.identify(pem)
    if name is None:
        log.warning("refused a caller from %s: certificate not on the roster", context.peer())
        context.abort(
            grpc.StatusCode.PERMISSION_DENIED,
            f"certificate is not the roster certificate of any party of consortium "
            f"{consortium.name!r}",
        )
    problem = consortium.party(name).validity_problem()  # type: ignore[arg-type]
    if problem is not None:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, problem)
    return name  # type: ignore[return-value]


# Framing ---------------------------------------------------------------------------------


class FramingError(ValueError):
    """Frames on an Exchange stream that do not form whole envelopes of one job."""


# Frames are written and read by hand (ppdm.v1.Frame wire format, identical bytes to
# Frame.SerializeToString) so that a chunk is copied once on each side instead of going
# through a protobuf message object: this is the bulk-data path.
_WIRE_VARINT, _WIRE_I64, _WIRE_LEN, _WIRE_I32 = 0, 1, 2, 5


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _frame_header(job_id: bytes, seq: int, index: int, count: int, size: int) -> bytes:
    parts = [b"\x0a", _varint(len(job_id)), job_id] if job_id else []
    if seq:
        parts += [b"\x10", _varint(seq)]
    if index:
        parts += [b"\x18", _varint(index)]
    if count:
        parts += [b"\x20", _varint(count)]
    if size:
        parts += [b"\x2a", _varint(size)]
    return b"".join(parts)


def encode_frames(data: bytes, *, job_id: str, seq: int, max_chunk: int) -> list[bytes]:
    """One serialized envelope as wire-encoded ``Frame`` messages of at most
    ``max_chunk`` data bytes each (what :class:`PeerStream` writes to the stream).

    >>> from ppdm.proto.ppdm.v1.envelope_pb2 import Frame
    >>> [Frame.FromString(f).data for f in encode_frames(b"abcde", job_id="j", seq=1, max_chunk=2)]
    [b'ab', b'cd', b'e']
    """
    if max_chunk < 1:
        raise ValueError("max_chunk must be positive")
    jid = job_id.encode()
    if len(data) <= max_chunk:
        return [_frame_header(jid, seq, 0, 1, len(data)) + data]
    view = memoryview(data)
    count = -(-len(data) // max_chunk)
    frames = []
    for i in range(count):
        chunk = view[i * max_chunk : (i + 1) * max_chunk]
        frames.append(_frame_header(jid, seq, i, count, len(chunk)) + chunk)
    return frames


def split_envelope(data: bytes, *, job_id: str, seq: int, max_chunk: int) -> list[env_pb.Frame]:
    """Like :func:`encode_frames`, as ``Frame`` messages (for tests and tools).

    >>> [len(f.data) for f in split_envelope(b"x" * 10, job_id="j", seq=1, max_chunk=4)]
    [4, 4, 2]
    """
    return [
        env_pb.Frame.FromString(f)
        for f in encode_frames(data, job_id=job_id, seq=seq, max_chunk=max_chunk)
    ]


@dataclass
class FrameView:
    """A parsed ``Frame`` whose ``data`` is a zero-copy view of the received bytes."""

    job_id: str = ""
    seq: int = 0
    chunk_index: int = 0
    chunk_count: int = 0
    data: memoryview | bytes = b""


def _read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise FramingError("truncated varint in a frame")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise FramingError("varint longer than 64 bits in a frame")


def parse_frame(raw: bytes | memoryview) -> FrameView:
    """Parse a wire-encoded ``Frame`` (unknown fields skipped, as protobuf does);
    :class:`FramingError` on bytes that are not one."""
    buf = memoryview(raw)
    frame = FrameView()
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise FramingError("field number 0 in a frame")
        if wire == _WIRE_VARINT:
            value, pos = _read_varint(buf, pos)
            if field == 2:
                frame.seq = value
            elif field == 3:
                frame.chunk_index = value & 0xFFFFFFFF
            elif field == 4:
                frame.chunk_count = value & 0xFFFFFFFF
        elif wire == _WIRE_LEN:
            size, pos = _read_varint(buf, pos)
            if pos + size > end:
                raise FramingError("length-delimited field runs past the end of the frame")
            value_view = buf[pos : pos + size]
            pos += size
            if field == 1:
                try:
                    frame.job_id = str(value_view, "utf-8")
                except UnicodeDecodeError:
                    raise FramingError("job id is not UTF-8") from None
            elif field == 5:
                frame.data = value_view
        elif wire in (_WIRE_I64, _WIRE_I32):
            pos += 8 if wire == _WIRE_I64 else 4
            if pos > end:
                raise FramingError("fixed-width field runs past the end of the frame")
        else:
            raise FramingError(f"wire type {wire} in a frame")
    return frame


class Reassembler:
    """Turns the frames of one Exchange stream back into serialized envelopes.

    Checks that every frame belongs to the stream's job (the first frame's), that
    envelopes are numbered 1, 2, ... and their chunks ``0 .. chunk_count - 1`` in order,
    that no chunk is empty (unless the envelope is), and that no envelope exceeds
    ``max_envelope_bytes``. Any violation raises :class:`FramingError`.
    """

    def __init__(self, max_envelope_bytes: int) -> None:
        self.max_envelope_bytes = int(max_envelope_bytes)
        self.job_id: str | None = None
        self.frames = 0
        self.envelopes = 0
        self._parts: list[bytes | memoryview] = []
        self._size = 0
        self._count = 0

    @property
    def partial(self) -> bool:
        """Whether an envelope has started but not all of its chunks have arrived."""
        return bool(self._count)

    def feed(self, frame: env_pb.Frame | FrameView) -> bytes | memoryview | None:
        """Take one frame; return a whole envelope when this frame completes one (a
        zero-copy view when a single parsed frame carried it)."""
        if self.job_id is None:
            if not frame.job_id:
                raise FramingError("frame without a job id")
            self.job_id = frame.job_id
        elif frame.job_id != self.job_id:
            raise FramingError(
                f"frame for job {frame.job_id!r} on the stream of job {self.job_id!r}"
            )
        expected_seq = self.envelopes + 1
        if frame.seq != expected_seq:
            raise FramingError(f"frame of envelope {frame.seq}, expected {expected_seq}")
        if self._count == 0:
            if frame.chunk_count < 1:
                raise FramingError("frame with chunk_count 0")
            if frame.chunk_index != 0:
                raise FramingError(f"envelope starts with chunk {frame.chunk_index}, not 0")
            self._count = frame.chunk_count
        else:
            if frame.chunk_count != self._count:
                raise FramingError(
                    f"chunk_count changed from {self._count} to {frame.chunk_count} "
                    "inside an envelope"
                )
            if frame.chunk_index != len(self._parts):
                raise FramingError(
                    f"chunk {frame.chunk_index} arrived, expected {len(self._parts)}"
                )
        chunk = frame.data  # a Frame's data is copied on access: read it once
        if not chunk and self._count > 1:
            raise FramingError("empty chunk in a multi-chunk envelope")
        self._size += len(chunk)
        if self._size > self.max_envelope_bytes:
            raise FramingError(f"envelope larger than the {self.max_envelope_bytes}-byte limit")
        self.frames += 1
        self._parts.append(chunk)
        if len(self._parts) < self._count:
            return None
        data = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        self._parts, self._size, self._count = [], 0, 0
        self.envelopes += 1
        return data

    @property
    def partial_bytes(self) -> int:
        """Bytes of the incomplete envelope held now (0 between envelopes)."""
        return self._size

    def finish(self) -> None:
        """The stream ended: raise :class:`FramingError` if an envelope is incomplete."""
        if self._count:
            raise FramingError(
                f"stream ended after chunk {len(self._parts) - 1} of a {self._count}-chunk envelope"
            )


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


# Outgoing streams -----------------------------------------------------------------------


def _rpc_reason(exc: BaseException) -> str:
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        code = exc.code()
        details = exc.details() if hasattr(exc, "details") else ""
        name = code.name if code is not None else "UNKNOWN"
        return f"{name}: {details}" if details else name
    return f"{type(exc).__name__}: {exc}"


class PeerStream:
    """One client-streaming Exchange call carrying a job's envelopes to one peer.

    :meth:`send` splits an envelope into frames and queues them (blocking while
    :data:`QUEUE_FRAMES` frames are in flight, at most ``timeout`` seconds); gRPC's own
    thread writes them to the stream. When the call fails, ``on_failure(peer, reason)``
    is called once and later sends raise :class:`PartyFailure`.
    """

    def __init__(
        self,
        channel: grpc.Channel,
        peer: str,
        job_id: str,
        *,
        max_chunk: int,
        timeout: float,
        on_failure: Callable[[str, str], None],
    ) -> None:
        self.peer = peer
        self.job_id = job_id
        self.max_chunk = max_chunk
        self.timeout = timeout
        self._on_failure = on_failure
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=QUEUE_FRAMES)
        self._seq = 0
        self._closing = False
        self._close_queued = False
        self.error: str | None = None
        exchange = channel.stream_unary(
            EXCHANGE_METHOD,
            request_serializer=None,  # frames are already wire-encoded bytes
            response_deserializer=env_pb.ExchangeSummary.FromString,
        )
        self._future = exchange.future(self._frames())
        self._future.add_done_callback(self._done)

    def _frames(self) -> Iterator[bytes]:
        while True:
            item = self._queue.get()
            if item is _CLOSE:
                return
            yield item

    def _done(self, future: grpc.Future) -> None:
        exc = future.exception() if not future.cancelled() else None
        if exc is None and not future.cancelled():
            return
        reason = "stream cancelled" if exc is None else _rpc_reason(exc)
        self.error = reason
        self._drain_and_close()
        if not self._closing or exc is not None:
            self._on_failure(self.peer, reason)

    def _drain_and_close(self) -> None:
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        with contextlib.suppress(queue.Full):  # just drained: cannot be full
            self._queue.put_nowait(_CLOSE)

    def _put(self, item: Any) -> None:
        waited = 0.0
        while True:
            if self.error is not None:
                raise PartyFailure(self.peer, "transport", f"stream failed: {self.error}")
            try:
                self._queue.put(item, timeout=0.25)
                return
            except queue.Full:
                waited += 0.25
                if waited >= self.timeout:
                    raise PartyFailure(
                        self.peer,
                        "transport",
                        f"node did not accept data within the {self.timeout:g} s timeout",
                    ) from None

    def send(self, data: bytes) -> None:
        """Queue one serialized envelope for the peer."""
        self._seq += 1
        for frame in encode_frames(
            data, job_id=self.job_id, seq=self._seq, max_chunk=self.max_chunk
        ):
            self._put(frame)

    def half_close(self, timeout: float | None = None) -> bool:
        """Queue the end of the stream (waiting up to ``timeout`` s for room; ``None``:
        do not wait); ``False`` if there was no room."""
        self._closing = True
        if self.error is not None or self._close_queued:
            return True
        try:
            if timeout is None:
                self._queue.put_nowait(_CLOSE)
            else:
                self._queue.put(_CLOSE, timeout=max(timeout, 0.0))
        except queue.Full:
            return False
        self._close_queued = True
        return True

    def close(self, timeout: float) -> str | None:
        """Half-close the stream and wait up to ``timeout`` s; returns an error, if any."""
        deadline = time.monotonic() + timeout
        if not self.half_close(timeout):
            self._future.cancel()
            return "stream did not drain before the close timeout"
        try:
            self._future.result(timeout=max(deadline - time.monotonic(), 0.0))
        except grpc.FutureTimeoutError:
            self._future.cancel()
            return "stream did not finish before the close timeout"
        except Exception as exc:  # reported to the caller
            return _rpc_reason(exc)
        return self.error


class JobLinks:
    """A job's outgoing streams at one node: the ``transmit`` function of its endpoint.

    Streams are opened on first use and share the node's per-peer channels.
    """

    def __init__(
        self,
        job_id: str,
        channel_for: Callable[[str], grpc.Channel],
        *,
        max_chunk: int,
        timeout: float,
    ) -> None:
        self.job_id = job_id
        self._channel_for = channel_for
        self._max_chunk = max_chunk
        self._timeout = timeout
        self._streams: dict[str, PeerStream] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.endpoint: Endpoint | None = None

    def _failed(self, peer: str, reason: str) -> None:
        if self.endpoint is not None and not self._closed:
            log.warning("job %s: stream to %s failed: %s", self.job_id, peer, reason)
            self.endpoint.fail_party(peer, f"connection to the party's node failed ({reason})")

    def transmit(self, recipient: str, data: bytes) -> None:
        with self._lock:
            if self._closed:
                raise PartyFailure(recipient, "transport", "the job's streams are closed")
            stream = self._streams.get(recipient)
            if stream is None:
                stream = PeerStream(
                    self._channel_for(recipient),
                    recipient,
                    self.job_id,
                    max_chunk=self._max_chunk,
                    timeout=self._timeout,
                    on_failure=self._failed,
                )
                self._streams[recipient] = stream
        stream.send(data)

    def close(self, timeout: float) -> dict[str, str]:
        """Close every stream, waiting up to ``timeout`` s in all; errors by peer."""
        deadline = time.monotonic() + timeout
        with self._lock:
            self._closed = True
            streams = list(self._streams.values())
        for s in streams:  # half-close them all first, so they drain in parallel
            s.half_close()
        errors = {}
        for s in streams:
            err = s.close(max(deadline - time.monotonic(), 0.0))
            if err is not None:
                errors[s.peer] = err
        return errors
