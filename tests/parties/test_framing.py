"""Wire framing without a network: envelopes cut into frames and put back together,
partial, oversized and malformed streams fed straight to the reassembler."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.parties.grpc_net import (
    FramingError,
    Reassembler,
    encode_frames,
    parse_frame,
    split_envelope,
)
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb
from ppdm.service.node import from_struct, to_struct


def frames_of(envelopes: list[bytes], chunk: int, job_id: str = "job") -> list[env_pb.Frame]:
    out = []
    for i, data in enumerate(envelopes, start=1):
        out.extend(split_envelope(data, job_id=job_id, seq=i, max_chunk=chunk))
    return out


def feed_all(reasm: Reassembler, frames: list[env_pb.Frame]) -> list[bytes]:
    got = [reasm.feed(f) for f in frames]
    return [g for g in got if g is not None]


@given(
    envelopes=st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=6),
    chunk=st.integers(min_value=1, max_value=64),
)
def test_split_then_reassemble_gives_back_every_envelope(envelopes, chunk):
    frames = frames_of(envelopes, chunk)
    assert all(len(f.data) <= chunk for f in frames)
    # Frames survive their own wire encoding (what gRPC sends).
    frames = [env_pb.Frame.FromString(f.SerializeToString()) for f in frames]
    reasm = Reassembler(max_envelope_bytes=10_000)
    assert feed_all(reasm, frames) == envelopes
    assert reasm.envelopes == len(envelopes)
    assert not reasm.partial
    reasm.finish()


def test_chunk_counts():
    frames = split_envelope(b"abcdefghij", job_id="j", seq=1, max_chunk=3)
    assert [(f.chunk_index, f.chunk_count, f.data) for f in frames] == [
        (0, 4, b"abc"),
        (1, 4, b"def"),
        (2, 4, b"ghi"),
        (3, 4, b"j"),
    ]
    empty = split_envelope(b"", job_id="j", seq=1, max_chunk=3)
    assert [(f.chunk_count, f.data) for f in empty] == [(1, b"")]
    with pytest.raises(ValueError):
        split_envelope(b"x", job_id="j", seq=1, max_chunk=0)


def test_partial_envelope_is_held_until_complete():
    frames = frames_of([b"0123456789"], 4)
    reasm = Reassembler(100)
    assert reasm.feed(frames[0]) is None
    assert reasm.partial
    assert reasm.feed(frames[1]) is None
    assert reasm.feed(frames[2]) == b"0123456789"


def test_stream_ending_inside_an_envelope_is_refused():
    frames = frames_of([b"0123456789"], 4)
    reasm = Reassembler(100)
    reasm.feed(frames[0])
    with pytest.raises(FramingError, match="stream ended"):
        reasm.finish()


def _frame(**kw):
    base = {"job_id": "job", "seq": 1, "chunk_index": 0, "chunk_count": 1, "data": b"x"}
    base.update(kw)
    return env_pb.Frame(**base)


@pytest.mark.parametrize(
    ("frames", "message"),
    [
        ([_frame(job_id="")], "without a job id"),
        ([_frame(), _frame(job_id="other", seq=2)], "on the stream of job"),
        ([_frame(seq=2)], "envelope 2, expected 1"),
        ([_frame(), _frame(seq=1)], "envelope 1, expected 2"),
        ([_frame(chunk_count=0)], "chunk_count 0"),
        ([_frame(chunk_index=1, chunk_count=2)], "starts with chunk 1"),
        ([_frame(chunk_count=3), _frame(chunk_index=2, chunk_count=3)], "chunk 2 arrived"),
        ([_frame(chunk_count=3), _frame(chunk_index=1, chunk_count=4)], "chunk_count changed"),
        ([_frame(chunk_count=2), _frame(chunk_index=1, chunk_count=2, data=b"")], "empty chunk"),
        (
            [
                _frame(chunk_count=3, data=b"x" * 60),
                _frame(chunk_index=1, chunk_count=3, data=b"y" * 60),
            ],
            "larger than",
        ),
    ],
)
def test_malformed_frames_are_refused(frames, message):
    reasm = Reassembler(max_envelope_bytes=100)
    with pytest.raises(FramingError, match=message):
        for f in frames:
            reasm.feed(f)


def test_oversized_single_frame_is_refused():
    with pytest.raises(FramingError, match="larger than"):
        Reassembler(10).feed(_frame(data=b"x" * 11))


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=20),
        lambda kids: (
            st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4)
        ),
        max_leaves=10,
    )
)
def test_struct_carries_exact_json(value):
    # Struct numbers are doubles; big integers must survive exactly.
    doc = {"v": value, "big": 2**127 + 1}
    msg = to_struct(doc)
    back = from_struct(type(msg).FromString(msg.SerializeToString()), "x")
    assert back == doc


def test_struct_without_json_is_refused():
    from google.protobuf import struct_pb2

    with pytest.raises(ValueError, match="no 'json'"):
        from_struct(struct_pb2.Struct(), "job result")
    s = struct_pb2.Struct()
    s.update({"json": "{not json"})
    with pytest.raises(ValueError, match="not valid JSON"):
        from_struct(s, "job result")


@given(
    data=st.binary(max_size=200),
    job_id=st.text(max_size=40),
    seq=st.integers(min_value=0, max_value=2**64 - 1),
    chunk=st.integers(min_value=1, max_value=80),
)
def test_hand_encoded_frames_are_protobuf_frames(data, job_id, seq, chunk):
    wire = encode_frames(data, job_id=job_id, seq=seq, max_chunk=chunk)
    count = max(1, -(-len(data) // chunk))
    assert len(wire) == count
    for i, raw in enumerate(wire):
        expected = env_pb.Frame(
            job_id=job_id,
            seq=seq,
            chunk_index=i,
            chunk_count=count,
            data=data[i * chunk : (i + 1) * chunk],
        )
        assert raw == expected.SerializeToString()
        view = parse_frame(raw)
        assert (view.job_id, view.seq, view.chunk_index, view.chunk_count) == (
            job_id,
            seq,
            i,
            count,
        )
        assert bytes(view.data) == expected.data


def test_parse_frame_skips_unknown_fields_like_protobuf():
    raw = env_pb.Frame(job_id="j", seq=1, chunk_count=1, data=b"abc").SerializeToString()
    # field 9 varint, field 10 fixed64, field 11 length-delimited, field 12 fixed32
    extra = b"\x48\x05" + b"\x51" + b"\x00" * 8 + b"\x5a\x02hi" + b"\x65" + b"\x00" * 4
    view = parse_frame(extra + raw)
    assert (view.job_id, view.seq, bytes(view.data)) == ("j", 1, b"abc")
    assert env_pb.Frame.FromString(extra + raw).data == b"abc"


@pytest.mark.parametrize(
    "raw",
    [
        b"\x0a\x05ab",  # job id runs past the end
        b"\x10\xff\xff",  # truncated varint
        b"\x10" + b"\xff" * 10 + b"\x01",  # varint too long
        b"\x0b",  # wire type 3 (groups) is not used
        b"\x00\x01",  # field number 0
        b"\x0a\x02\xff\xfe",  # job id not UTF-8
        b"\x51\x00\x00",  # fixed64 runs past the end
    ],
)
def test_parse_frame_refuses_bytes_that_are_not_a_frame(raw):
    with pytest.raises(FramingError):
        parse_frame(raw)


@given(st.binary(max_size=64))
def test_parse_frame_never_fails_otherwise(raw):
    try:
        view = parse_frame(raw)
    except FramingError:
        return
    assert isinstance(view.job_id, str) and view.seq >= 0


def test_reassembler_accepts_parsed_views():
    wire = encode_frames(b"0123456789", job_id="job", seq=1, max_chunk=3)
    reasm = Reassembler(100)
    got = [reasm.feed(parse_frame(w)) for w in wire]
    assert got[-1] == b"0123456789" and got[:-1] == [None] * 3
