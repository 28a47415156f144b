"""The one codec layer: Python/numpy values <-> ``ppdm.v1.Payload`` protobuf messages.

Protocol code sends and receives plain values; this module is the only place that turns
them into wire messages and back. Decoding validates structure (dtype allow-list, array
byte lengths, big-integer widths, nesting depth) and raises :class:`DecodeError`, which the
network layer turns into a :class:`ppdm.errors.ProtocolError` naming the peer and the step.
Semantic checks (a ciphertext in range, a point on the curve) belong to the protocol.

Value mapping (encode -> decode gives back an equal value of the same type):

========================  =====================  ==========================
Python value              Payload field          decoded as
========================  =====================  ==========================
``None``                  ``none``               ``None``
``bool``                  ``flag``               ``bool``
``int`` (64-bit)          ``int64``              ``int``
``int`` (larger)          ``bigint``             ``int``
``float``                 ``real``               ``float``
``str``                   ``text``               ``str``
``bytes``                 ``blob``               ``bytes``
``numpy.ndarray``         ``array``              ``numpy.ndarray`` (writable)
:class:`BigInts`          ``bigints``            :class:`BigInts`
:class:`ByteStrings`      ``bytes_batch``        :class:`ByteStrings`
``dict[str, ...]``        ``fields``             ``dict``
``list`` / ``tuple``      ``items``              ``list``
========================  =====================  ==========================
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ppdm.proto.ppdm.v1 import payload_pb2 as pb

__all__ = ["MAX_DEPTH", "BigInts", "ByteStrings", "DecodeError", "decode", "encode"]

MAX_DEPTH = 32

_ALLOWED_DTYPES = {
    np.dtype(t).str: np.dtype(t)
    for t in (
        np.bool_,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.float32,
        np.float64,
    )
}
# Little-endian names on the wire regardless of the host: "<i8", "|u1", "|b1", ...
_WIRE_NAME = {dt: dt.newbyteorder("<").str for dt in _ALLOWED_DTYPES.values()}
_FROM_WIRE = {name: dt.newbyteorder("<") for dt, name in _WIRE_NAME.items()}

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


#: Most dimensions of an array on the wire.
MAX_ARRAY_DIMS = 8


class DecodeError(ValueError):
    """A payload that does not decode to a valid value."""


class BigInts(list[int]):
    """A batch of non-negative big integers, sent in a compact fixed-width form.

    >>> BigInts([3, 2**200]) == [3, 2**200]
    True
    """

    def __init__(self, values: Iterable[Any] = ()) -> None:
        super().__init__(int(v) for v in values)


class ByteStrings(list[bytes]):
    """A batch of byte strings (e.g. curve points, encrypted items)."""

    def __init__(self, values: Iterable[bytes] = ()) -> None:
        super().__init__(bytes(v) for v in values)


def encode(value: Any) -> pb.Payload:
    """Encode a supported Python value as a ``Payload`` message (see module docs)."""
    msg = pb.Payload()
    _encode_into(msg, value, 0)
    return msg


def _encode_into(msg: pb.Payload, value: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise TypeError(f"value nested deeper than {MAX_DEPTH} levels")
    if value is None:
        msg.none.SetInParent()
    elif isinstance(value, bool | np.bool_):
        msg.flag = bool(value)
    elif isinstance(value, BigInts):
        _encode_bigints(msg.bigints, value)
    elif isinstance(value, ByteStrings):
        msg.bytes_batch.values.extend(value)
    elif isinstance(value, int | np.integer):
        v = int(value)
        if _INT64_MIN <= v <= _INT64_MAX:
            msg.int64 = v
        else:
            msg.bigint.negative = v < 0
            mag = abs(v)
            msg.bigint.magnitude = mag.to_bytes((mag.bit_length() + 7) // 8, "big")
    elif isinstance(value, float | np.floating):
        msg.real = float(value)
    elif isinstance(value, str):
        msg.text = value
    elif isinstance(value, bytes | bytearray | memoryview):
        msg.blob = bytes(value)
    elif isinstance(value, np.ndarray):
        dt = value.dtype
        if dt.newbyteorder("=") not in _WIRE_NAME and dt not in _WIRE_NAME:
            raise TypeError(f"numpy dtype {dt} cannot be sent")
        wire_dt = np.dtype(dt).newbyteorder("<")
        arr = np.asarray(value, dtype=wire_dt, order="C")
        msg.array.dtype = wire_dt.str
        msg.array.shape.extend(arr.shape)
        msg.array.data = arr.tobytes()
    elif isinstance(value, dict):
        fields = msg.fields.fields
        msg.fields.SetInParent()
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"dict keys must be str, not {type(key).__name__}")
            _encode_into(fields[key], item, depth + 1)
    elif isinstance(value, list | tuple):
        msg.items.SetInParent()
        for item in value:
            _encode_into(msg.items.items.add(), item, depth + 1)
    else:
        raise TypeError(f"cannot send a value of type {type(value).__name__}")


def _encode_bigints(msg: pb.BigIntBatch, values: BigInts) -> None:
    if not values:
        msg.width = 0
        msg.count = 0
        return
    lo = min(values)
    if lo < 0:
        raise TypeError("BigInts holds non-negative integers only")
    width = max((max(values).bit_length() + 7) // 8, 1)
    msg.width = width
    msg.count = len(values)
    msg.data = b"".join(v.to_bytes(width, "big") for v in values)


def decode(msg: pb.Payload) -> Any:
    """Decode and validate a ``Payload``; raises :class:`DecodeError` on bad input."""
    return _decode(msg, 0)


def _decode(msg: pb.Payload, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise DecodeError(f"payload nested deeper than {MAX_DEPTH} levels")
    kind = msg.WhichOneof("kind")
    if kind is None:
        raise DecodeError("empty payload (no value set)")
    if kind == "none":
        return None
    if kind == "flag":
        return bool(msg.flag)
    if kind == "int64":
        return int(msg.int64)
    if kind == "bigint":
        mag = int.from_bytes(msg.bigint.magnitude, "big")
        if msg.bigint.magnitude[:1] == b"\x00":
            raise DecodeError("big integer magnitude has a leading zero byte")
        return -mag if msg.bigint.negative else mag
    if kind == "real":
        return float(msg.real)
    if kind == "text":
        return str(msg.text)
    if kind == "blob":
        return bytes(msg.blob)
    if kind == "array":
        return _decode_array(msg.array)
    if kind == "bigints":
        return _decode_bigints(msg.bigints)
    if kind == "bytes_batch":
        return ByteStrings(msg.bytes_batch.values)
    if kind == "fields":
        return {k: _decode(v, depth + 1) for k, v in msg.fields.fields.items()}
    if kind == "items":
        return [_decode(v, depth + 1) for v in msg.items.items]
    raise DecodeError(f"unknown payload kind {kind!r}")  # pragma: no cover


def _decode_array(msg: pb.NdArray) -> np.ndarray:
    dt = _FROM_WIRE.get(msg.dtype)
    if dt is None:
        raise DecodeError(f"array dtype {msg.dtype!r} is not allowed")
    shape = tuple(int(s) for s in msg.shape)
    if len(shape) > MAX_ARRAY_DIMS or any(s >= 1 << 40 for s in shape):
        raise DecodeError(f"array shape {shape[: MAX_ARRAY_DIMS + 1]} is out of range")
    count = 1
    for s in shape:
        count *= s
    if count * dt.itemsize != len(msg.data):
        raise DecodeError(
            f"array of shape {shape} and dtype {msg.dtype} needs {count * dt.itemsize} "
            f"bytes, got {len(msg.data)}"
        )
    try:
        arr = np.frombuffer(msg.data, dtype=dt).reshape(shape)
    except ValueError as exc:  # a shape numpy cannot represent: the sender's fault
        raise DecodeError(f"array of shape {shape} cannot be built ({exc})") from None
    native = dt.newbyteorder("=")
    out = arr.astype(native, copy=True)
    if out.dtype == np.bool_ and count and np.frombuffer(msg.data, dtype=np.uint8).max() > 1:
        raise DecodeError("boolean array holds bytes other than 0 and 1")
    return out


def _decode_bigints(msg: pb.BigIntBatch) -> BigInts:
    width, count = int(msg.width), int(msg.count)
    if count == 0:
        if msg.data:
            raise DecodeError("empty big-integer batch carries data")
        return BigInts()
    if width == 0:
        raise DecodeError("big-integer batch with zero width")
    if width * count != len(msg.data):
        raise DecodeError(f"big-integer batch of {count} x {width} bytes has {len(msg.data)} bytes")
    data = msg.data
    out = BigInts()
    out.extend(int.from_bytes(data[i : i + width], "big") for i in range(0, len(data), width))
    return out
