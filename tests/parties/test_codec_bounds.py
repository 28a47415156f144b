"""The codec's range checks on arrays a peer sends (issue 22: a mutation that drops them
went unnoticed): an empty array may not claim a huge length, and no array may have
more dimensions than the codec allows, even when its data size is consistent."""

from __future__ import annotations

import numpy as np
import pytest

from ppdm.parties.codec import MAX_ARRAY_DIMS, DecodeError, decode, encode
from ppdm.proto.ppdm.v1 import payload_pb2 as pb


@pytest.mark.parametrize(
    "shape",
    [
        [1 << 41, 0],  # zero bytes of data, yet len() of the array would be 2^41
        [0, 1 << 40],
        [1] * (MAX_ARRAY_DIMS + 1),  # one element, too many dimensions
    ],
)
def test_an_array_shape_out_of_range_is_refused(shape: list[int]) -> None:
    count = int(np.prod(shape, dtype=object))
    msg = pb.Payload(array=pb.NdArray(dtype="<i8", shape=shape, data=b"\0" * 8 * count))
    with pytest.raises(DecodeError):
        decode(msg)


def test_the_largest_allowed_shapes_still_decode() -> None:
    for shape in ([(1 << 40) - 1, 0], [1] * MAX_ARRAY_DIMS):
        arr = np.zeros(shape, dtype=np.int64)
        assert decode(encode(arr)).shape == tuple(shape)
