"""The wire framing of the gRPC transport (:mod:`ppdm.parties.grpc_net`), without a network.

A serialized envelope travels as one or more ``ppdm.v1.Frame`` messages of at most
:func:`frame_bytes` data bytes: :func:`encode_frames` writes them, :func:`parse_frame`
reads one without copying its chunk, and :class:`Reassembler` checks the frames of one
stream and joins them back into whole envelopes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb

if TYPE_CHECKING:
    from ppdm.parties.consortium import Consortium

__all__ = [
    "FRAME_OVERHEAD",
    "PREFERRED_FRAME_BYTES",
    "FrameView",
    "FramingError",
    "Reassembler",
    "encode_frames",
    "frame_bytes",
    "parse_frame",
    "split_envelope",
]

# Room left in each gRPC message for the Frame fields around the chunk.
FRAME_OVERHEAD = 1024
# Preferred frame payload: moderate frames let the sender's and the receiver's threads
# work on different frames of one large envelope at the same time (on a loaded 2-core
# loopback, 2 MiB frames moved 1-8 MiB envelopes at least as fast as 1 or 4 MiB frames);
# frames are never larger than the consortium's max_message_bytes allows.
PREFERRED_FRAME_BYTES = 2 << 20


def frame_bytes(consortium: Consortium) -> int:
    """Largest chunk of an envelope carried in one Frame for this consortium."""
    return min(consortium.max_message_bytes - FRAME_OVERHEAD, PREFERRED_FRAME_BYTES)


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
