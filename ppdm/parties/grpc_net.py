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

The code is in four modules, every name re-exported here: :mod:`~ppdm.parties.channels`
(channels, credentials, identity), :mod:`~ppdm.parties.framing` (frames and their
reassembly, no network), :mod:`~ppdm.parties.exchange` (incoming streams) and this one
(outgoing streams: :class:`PeerStream`, :class:`JobLinks`).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from ppdm.errors import PartyFailure
from ppdm.parties.channels import CONNECT_TIMEOUT_MS as CONNECT_TIMEOUT_MS
from ppdm.parties.channels import RECONNECT_BACKOFF_MS as RECONNECT_BACKOFF_MS
from ppdm.parties.channels import authenticate as authenticate
from ppdm.parties.channels import channel_options as channel_options
from ppdm.parties.channels import dynamic_server_credentials as dynamic_server_credentials
from ppdm.parties.channels import open_channel as open_channel
from ppdm.parties.channels import peer_certificate as peer_certificate
from ppdm.parties.channels import server_credentials as server_credentials
from ppdm.parties.exchange import OVER_BUDGET_REASON as OVER_BUDGET_REASON
from ppdm.parties.exchange import PENDING_JOB_WAIT_S as PENDING_JOB_WAIT_S
from ppdm.parties.exchange import JobLookup as JobLookup
from ppdm.parties.exchange import ReassemblyBudget as ReassemblyBudget
from ppdm.parties.exchange import StreamWatch as StreamWatch
from ppdm.parties.exchange import handle_exchange as handle_exchange
from ppdm.parties.framing import FRAME_OVERHEAD as FRAME_OVERHEAD
from ppdm.parties.framing import PREFERRED_FRAME_BYTES as PREFERRED_FRAME_BYTES
from ppdm.parties.framing import FrameView as FrameView
from ppdm.parties.framing import FramingError as FramingError
from ppdm.parties.framing import Reassembler as Reassembler
from ppdm.parties.framing import encode_frames as encode_frames
from ppdm.parties.framing import frame_bytes as frame_bytes
from ppdm.parties.framing import parse_frame as parse_frame
from ppdm.parties.framing import split_envelope as split_envelope
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

# Frames queued per outgoing stream before send() blocks (back-pressure).
QUEUE_FRAMES = 8
_CLOSE = object()
EXCHANGE_METHOD = "/ppdm.v1.Party/Exchange"


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
        self._endpoint: weakref.ref[Endpoint] | None = None

    @property
    def endpoint(self) -> Endpoint | None:
        """The job's endpoint, held weakly: the endpoint holds these links (its
        ``transmit``), and a cycle between them would keep both, with every stream's gRPC
        call, until the garbage collector's rare full pass (issue 23, item 7)."""
        return self._endpoint() if self._endpoint is not None else None

    @endpoint.setter
    def endpoint(self, endpoint: Endpoint | None) -> None:
        self._endpoint = weakref.ref(endpoint) if endpoint is not None else None

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
            # Each stream refers back to these links (its failure callback): dropped
            # here, a closed stream and its gRPC call go when this call returns.
            self._streams.clear()
        for s in streams:  # half-close them all first, so they drain in parallel
            s.half_close()
        errors = {}
        for s in streams:
            err = s.close(max(deadline - time.monotonic(), 0.0))
            if err is not None:
                errors[s.peer] = err
        return errors
