from ppdm.proto.ppdm.v1 import payload_pb2 as _payload_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Envelope(_message.Message):
    __slots__ = ("consortium", "job_id", "step", "sender", "recipient", "seq", "payload", "abort")
    CONSORTIUM_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    RECIPIENT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    consortium: str
    job_id: str
    step: str
    sender: str
    recipient: str
    seq: int
    payload: _payload_pb2.Payload
    abort: Abort
    def __init__(self, consortium: _Optional[str] = ..., job_id: _Optional[str] = ..., step: _Optional[str] = ..., sender: _Optional[str] = ..., recipient: _Optional[str] = ..., seq: _Optional[int] = ..., payload: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., abort: _Optional[_Union[Abort, _Mapping]] = ...) -> None: ...

class Abort(_message.Message):
    __slots__ = ("reason", "code", "party", "step")
    REASON_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    PARTY_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    reason: str
    code: str
    party: str
    step: str
    def __init__(self, reason: _Optional[str] = ..., code: _Optional[str] = ..., party: _Optional[str] = ..., step: _Optional[str] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("job_id", "seq", "chunk_index", "chunk_count", "data")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    CHUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    seq: int
    chunk_index: int
    chunk_count: int
    data: bytes
    def __init__(self, job_id: _Optional[str] = ..., seq: _Optional[int] = ..., chunk_index: _Optional[int] = ..., chunk_count: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class ExchangeSummary(_message.Message):
    __slots__ = ("frames", "envelopes")
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    ENVELOPES_FIELD_NUMBER: _ClassVar[int]
    frames: int
    envelopes: int
    def __init__(self, frames: _Optional[int] = ..., envelopes: _Optional[int] = ...) -> None: ...
