from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NdArray(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class BigIntBatch(_message.Message):
    __slots__ = ("width", "count", "data")
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    width: int
    count: int
    data: bytes
    def __init__(self, width: _Optional[int] = ..., count: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class BigInt(_message.Message):
    __slots__ = ("negative", "magnitude")
    NEGATIVE_FIELD_NUMBER: _ClassVar[int]
    MAGNITUDE_FIELD_NUMBER: _ClassVar[int]
    negative: bool
    magnitude: bytes
    def __init__(self, negative: _Optional[bool] = ..., magnitude: _Optional[bytes] = ...) -> None: ...

class BytesBatch(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, values: _Optional[_Iterable[bytes]] = ...) -> None: ...

class Fields(_message.Message):
    __slots__ = ("fields",)
    class FieldsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Payload
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Payload, _Mapping]] = ...) -> None: ...
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.MessageMap[str, Payload]
    def __init__(self, fields: _Optional[_Mapping[str, Payload]] = ...) -> None: ...

class PayloadList(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Payload]
    def __init__(self, items: _Optional[_Iterable[_Union[Payload, _Mapping]]] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Payload(_message.Message):
    __slots__ = ("array", "bigints", "bytes_batch", "blob", "int64", "bigint", "real", "text", "flag", "fields", "items", "none")
    ARRAY_FIELD_NUMBER: _ClassVar[int]
    BIGINTS_FIELD_NUMBER: _ClassVar[int]
    BYTES_BATCH_FIELD_NUMBER: _ClassVar[int]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    INT64_FIELD_NUMBER: _ClassVar[int]
    BIGINT_FIELD_NUMBER: _ClassVar[int]
    REAL_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NONE_FIELD_NUMBER: _ClassVar[int]
    array: NdArray
    bigints: BigIntBatch
    bytes_batch: BytesBatch
    blob: bytes
    int64: int
    bigint: BigInt
    real: float
    text: str
    flag: bool
    fields: Fields
    items: PayloadList
    none: Empty
    def __init__(self, array: _Optional[_Union[NdArray, _Mapping]] = ..., bigints: _Optional[_Union[BigIntBatch, _Mapping]] = ..., bytes_batch: _Optional[_Union[BytesBatch, _Mapping]] = ..., blob: _Optional[bytes] = ..., int64: _Optional[int] = ..., bigint: _Optional[_Union[BigInt, _Mapping]] = ..., real: _Optional[float] = ..., text: _Optional[str] = ..., flag: _Optional[bool] = ..., fields: _Optional[_Union[Fields, _Mapping]] = ..., items: _Optional[_Union[PayloadList, _Mapping]] = ..., none: _Optional[_Union[Empty, _Mapping]] = ...) -> None: ...
