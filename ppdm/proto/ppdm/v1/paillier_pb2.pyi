from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class PaillierPublicKey(_message.Message):
    __slots__ = ("n",)
    N_FIELD_NUMBER: _ClassVar[int]
    n: bytes
    def __init__(self, n: _Optional[bytes] = ...) -> None: ...

class PaillierPrivateKey(_message.Message):
    __slots__ = ("p", "q")
    P_FIELD_NUMBER: _ClassVar[int]
    Q_FIELD_NUMBER: _ClassVar[int]
    p: bytes
    q: bytes
    def __init__(self, p: _Optional[bytes] = ..., q: _Optional[bytes] = ...) -> None: ...

class PaillierCiphertexts(_message.Message):
    __slots__ = ("key_id", "width", "count", "data")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    key_id: bytes
    width: int
    count: int
    data: bytes
    def __init__(self, key_id: _Optional[bytes] = ..., width: _Optional[int] = ..., count: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...
