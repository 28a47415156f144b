from google.protobuf import struct_pb2 as _struct_pb2
from ppdm.proto.ppdm.v1 import envelope_pb2 as _envelope_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Decision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_UNSPECIFIED: _ClassVar[Decision]
    DECISION_ACCEPTED: _ClassVar[Decision]
    DECISION_PENDING: _ClassVar[Decision]
    DECISION_REFUSED: _ClassVar[Decision]

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_SUCCEEDED: _ClassVar[JobState]
    JOB_STATE_FAILED: _ClassVar[JobState]
    JOB_STATE_UNKNOWN: _ClassVar[JobState]
    JOB_STATE_ACCEPTED: _ClassVar[JobState]
    JOB_STATE_PENDING: _ClassVar[JobState]
    JOB_STATE_REFUSED: _ClassVar[JobState]
    JOB_STATE_CANCELLED: _ClassVar[JobState]
DECISION_UNSPECIFIED: Decision
DECISION_ACCEPTED: Decision
DECISION_PENDING: Decision
DECISION_REFUSED: Decision
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_SUCCEEDED: JobState
JOB_STATE_FAILED: JobState
JOB_STATE_UNKNOWN: JobState
JOB_STATE_ACCEPTED: JobState
JOB_STATE_PENDING: JobState
JOB_STATE_REFUSED: JobState
JOB_STATE_CANCELLED: JobState

class JobRequest(_message.Message):
    __slots__ = ("consortium", "job_id", "protocol", "params", "initiator", "parties", "timeout_s", "roster_version", "initiator_head")
    CONSORTIUM_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    INITIATOR_FIELD_NUMBER: _ClassVar[int]
    PARTIES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    ROSTER_VERSION_FIELD_NUMBER: _ClassVar[int]
    INITIATOR_HEAD_FIELD_NUMBER: _ClassVar[int]
    consortium: str
    job_id: str
    protocol: str
    params: _struct_pb2.Struct
    initiator: str
    parties: _containers.RepeatedScalarFieldContainer[str]
    timeout_s: float
    roster_version: int
    initiator_head: LedgerHead
    def __init__(self, consortium: _Optional[str] = ..., job_id: _Optional[str] = ..., protocol: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., initiator: _Optional[str] = ..., parties: _Optional[_Iterable[str]] = ..., timeout_s: _Optional[float] = ..., roster_version: _Optional[int] = ..., initiator_head: _Optional[_Union[LedgerHead, _Mapping]] = ...) -> None: ...

class JobRef(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class JobDecision(_message.Message):
    __slots__ = ("job_id", "party", "decision", "rule", "reason", "expires_in_s", "head")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PARTY_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_S_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    party: str
    decision: Decision
    rule: str
    reason: str
    expires_in_s: float
    head: LedgerHead
    def __init__(self, job_id: _Optional[str] = ..., party: _Optional[str] = ..., decision: _Optional[_Union[Decision, str]] = ..., rule: _Optional[str] = ..., reason: _Optional[str] = ..., expires_in_s: _Optional[float] = ..., head: _Optional[_Union[LedgerHead, _Mapping]] = ...) -> None: ...

class JobAccepted(_message.Message):
    __slots__ = ("job_id", "party")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PARTY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    party: str
    def __init__(self, job_id: _Optional[str] = ..., party: _Optional[str] = ...) -> None: ...

class JobStatusRequest(_message.Message):
    __slots__ = ("job_id", "wait_s")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    wait_s: float
    def __init__(self, job_id: _Optional[str] = ..., wait_s: _Optional[float] = ...) -> None: ...

class StepMetrics(_message.Message):
    __slots__ = ("step", "messages_sent", "messages_received", "bytes_sent", "bytes_received", "wall_time_s")
    STEP_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_SENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    WALL_TIME_S_FIELD_NUMBER: _ClassVar[int]
    step: str
    messages_sent: int
    messages_received: int
    bytes_sent: int
    bytes_received: int
    wall_time_s: float
    def __init__(self, step: _Optional[str] = ..., messages_sent: _Optional[int] = ..., messages_received: _Optional[int] = ..., bytes_sent: _Optional[int] = ..., bytes_received: _Optional[int] = ..., wall_time_s: _Optional[float] = ...) -> None: ...

class JobStatus(_message.Message):
    __slots__ = ("job_id", "party", "state", "error", "result", "metrics", "wall_time_s", "error_code", "error_party", "error_step", "rule", "result_withheld")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PARTY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    WALL_TIME_S_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_PARTY_FIELD_NUMBER: _ClassVar[int]
    ERROR_STEP_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    RESULT_WITHHELD_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    party: str
    state: JobState
    error: str
    result: _struct_pb2.Struct
    metrics: _containers.RepeatedCompositeFieldContainer[StepMetrics]
    wall_time_s: float
    error_code: str
    error_party: str
    error_step: str
    rule: str
    result_withheld: bool
    def __init__(self, job_id: _Optional[str] = ..., party: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., error: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., metrics: _Optional[_Iterable[_Union[StepMetrics, _Mapping]]] = ..., wall_time_s: _Optional[float] = ..., error_code: _Optional[str] = ..., error_party: _Optional[str] = ..., error_step: _Optional[str] = ..., rule: _Optional[str] = ..., result_withheld: _Optional[bool] = ...) -> None: ...

class PendingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PendingJob(_message.Message):
    __slots__ = ("job_id", "protocol", "initiator", "parties", "params_json", "leakage", "expires_in_s", "age_s")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    INITIATOR_FIELD_NUMBER: _ClassVar[int]
    PARTIES_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    LEAKAGE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_S_FIELD_NUMBER: _ClassVar[int]
    AGE_S_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    protocol: str
    initiator: str
    parties: _containers.RepeatedScalarFieldContainer[str]
    params_json: str
    leakage: str
    expires_in_s: float
    age_s: float
    def __init__(self, job_id: _Optional[str] = ..., protocol: _Optional[str] = ..., initiator: _Optional[str] = ..., parties: _Optional[_Iterable[str]] = ..., params_json: _Optional[str] = ..., leakage: _Optional[str] = ..., expires_in_s: _Optional[float] = ..., age_s: _Optional[float] = ...) -> None: ...

class PendingJobs(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[PendingJob]
    def __init__(self, jobs: _Optional[_Iterable[_Union[PendingJob, _Mapping]]] = ...) -> None: ...

class OwnerDecision(_message.Message):
    __slots__ = ("job_id", "approve", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    approve: bool
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., approve: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthReply(_message.Message):
    __slots__ = ("party", "consortium", "version", "running_jobs", "roster_version")
    PARTY_FIELD_NUMBER: _ClassVar[int]
    CONSORTIUM_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOBS_FIELD_NUMBER: _ClassVar[int]
    ROSTER_VERSION_FIELD_NUMBER: _ClassVar[int]
    party: str
    consortium: str
    version: str
    running_jobs: _containers.RepeatedScalarFieldContainer[str]
    roster_version: int
    def __init__(self, party: _Optional[str] = ..., consortium: _Optional[str] = ..., version: _Optional[str] = ..., running_jobs: _Optional[_Iterable[str]] = ..., roster_version: _Optional[int] = ...) -> None: ...

class RosterUpdate(_message.Message):
    __slots__ = ("roster_toml",)
    ROSTER_TOML_FIELD_NUMBER: _ClassVar[int]
    roster_toml: str
    def __init__(self, roster_toml: _Optional[str] = ...) -> None: ...

class RosterReply(_message.Message):
    __slots__ = ("party", "version", "accepted", "reason")
    PARTY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    party: str
    version: int
    accepted: bool
    reason: str
    def __init__(self, party: _Optional[str] = ..., version: _Optional[int] = ..., accepted: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class AuditHistoryRequest(_message.Message):
    __slots__ = ("input_key",)
    INPUT_KEY_FIELD_NUMBER: _ClassVar[int]
    input_key: str
    def __init__(self, input_key: _Optional[str] = ...) -> None: ...

class AuditQuery(_message.Message):
    __slots__ = ("job_id", "parties", "kind")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PARTIES_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    parties: _containers.RepeatedScalarFieldContainer[str]
    kind: str
    def __init__(self, job_id: _Optional[str] = ..., parties: _Optional[_Iterable[str]] = ..., kind: _Optional[str] = ...) -> None: ...

class AuditHistoryReply(_message.Message):
    __slots__ = ("queries",)
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    queries: _containers.RepeatedCompositeFieldContainer[AuditQuery]
    def __init__(self, queries: _Optional[_Iterable[_Union[AuditQuery, _Mapping]]] = ...) -> None: ...

class LedgerHead(_message.Message):
    __slots__ = ("party", "seq", "hash", "signature")
    PARTY_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    party: str
    seq: int
    hash: str
    signature: bytes
    def __init__(self, party: _Optional[str] = ..., seq: _Optional[int] = ..., hash: _Optional[str] = ..., signature: _Optional[bytes] = ...) -> None: ...

class LedgerHeadsRequest(_message.Message):
    __slots__ = ("after_seq",)
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    def __init__(self, after_seq: _Optional[int] = ...) -> None: ...

class LedgerHeadsReply(_message.Message):
    __slots__ = ("party", "heads", "more", "conflicts")
    PARTY_FIELD_NUMBER: _ClassVar[int]
    HEADS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    party: str
    heads: _containers.RepeatedCompositeFieldContainer[LedgerHead]
    more: bool
    conflicts: _containers.RepeatedCompositeFieldContainer[LedgerHead]
    def __init__(self, party: _Optional[str] = ..., heads: _Optional[_Iterable[_Union[LedgerHead, _Mapping]]] = ..., more: _Optional[bool] = ..., conflicts: _Optional[_Iterable[_Union[LedgerHead, _Mapping]]] = ...) -> None: ...
