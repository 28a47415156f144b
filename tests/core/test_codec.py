"""The codec round-trips every supported value and rejects malformed payloads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ppdm.parties.codec import BigInts, ByteStrings, DecodeError, decode, encode
from ppdm.proto.ppdm.v1 import payload_pb2 as pb


def roundtrip(value):
    msg = encode(value)
    return decode(pb.Payload.FromString(msg.SerializeToString()))


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=5), children, max_size=4),
    ),
    max_leaves=20,
)


@given(values)
def test_roundtrip_plain_values(value):
    assert roundtrip(value) == value


@given(st.lists(st.integers(min_value=0, max_value=2**4096), max_size=20))
def test_roundtrip_bigints(xs):
    out = roundtrip(BigInts(xs))
    assert isinstance(out, BigInts)
    assert out == xs


@given(st.lists(st.binary(max_size=40), max_size=20))
def test_roundtrip_bytestrings(xs):
    out = roundtrip(ByteStrings(xs))
    assert isinstance(out, ByteStrings)
    assert out == xs


@given(
    hnp.arrays(
        dtype=st.sampled_from([np.int8, np.int64, np.uint16, np.uint64, np.float64, np.bool_]),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=5),
    )
)
def test_roundtrip_arrays(arr):
    out = roundtrip(arr)
    assert out.dtype == arr.dtype and out.shape == arr.shape
    np.testing.assert_array_equal(out, arr)
    out.flat[:1] = out.flat[:1]  # decoded arrays are writable


def test_big_endian_array_is_sent_little_endian():
    arr = np.arange(4, dtype=">i4")
    out = roundtrip(arr)
    np.testing.assert_array_equal(out, arr)


@pytest.mark.parametrize(
    "bad",
    [
        pb.Payload(),  # nothing set
        pb.Payload(array=pb.NdArray(dtype="<i8", shape=[3], data=b"\0" * 23)),
        pb.Payload(array=pb.NdArray(dtype="O", shape=[1], data=b"\0" * 8)),
        pb.Payload(array=pb.NdArray(dtype="|b1", shape=[2], data=b"\x00\x02")),
        pb.Payload(bigints=pb.BigIntBatch(width=4, count=3, data=b"\0" * 11)),
        pb.Payload(bigints=pb.BigIntBatch(width=0, count=3, data=b"")),
        pb.Payload(bigints=pb.BigIntBatch(width=0, count=0, data=b"x")),
        pb.Payload(bigint=pb.BigInt(magnitude=b"\x00\x01")),
    ],
)
def test_malformed_payloads_raise_decode_error(bad):
    with pytest.raises(DecodeError):
        decode(pb.Payload.FromString(bad.SerializeToString()))


def test_too_deep_nesting_is_rejected():
    msg = pb.Payload(int64=1)
    for _ in range(40):
        outer = pb.Payload()
        outer.items.items.add().CopyFrom(msg)
        msg = outer
    with pytest.raises(DecodeError):
        decode(msg)


def test_unsupported_types_are_refused_on_encode():
    with pytest.raises(TypeError):
        encode(object())
    with pytest.raises(TypeError):
        encode({1: 2})
    with pytest.raises(TypeError):
        encode(BigInts([-1]))
    with pytest.raises(TypeError):
        encode(np.array(["a"], dtype=object))
