"""Every message of draft-ietf-ppm-dap-18 as a frozen dataclass.

The types every draft shares (identifiers, times, intervals, HPKE configurations, report
extensions, the ping-pong message) are defined in :mod:`dap.common` and re-exported here,
so that this module names every DAP-18 message.

Each message has ``Msg.decode(data) -> Msg`` (strict: the whole of ``data``, nothing
more) and ``msg.encode() -> bytes``; field names are the draft's. Section numbers refer to
the rendered draft-ietf-ppm-dap-18: 3 HTTP Usage, 4.1 Basic Type Definitions, 4.2 Task
Configuration, 4.4 Uploading Reports, 4.5 Verifying and Aggregating Reports, 4.6 Collecting
Results, 5 Batch Modes, Appendix B VDAF Configuration Encodings.

Identifiers are ``bytes`` subclasses and times are ``int`` subclasses, so they can be
used directly as VDAF nonces, dictionary keys and in arithmetic, while keeping their
fixed-size wire form (``ReportID(os.urandom(16)).encode()``).

Construction normalizes values: vector fields accept any sequence and hold tuples (so
messages are hashable), time fields accept ints and hold :class:`Time` / :class:`Duration`,
identifier fields accept bytes and hold the identifier type. Fields are annotated with the
accepted types.

Codepoints that this module declares as enumerations (``Role``, ``ReportError``,
``BatchMode``, ``VerifyRespType``) decode only to the values the draft declares;
``reserved(0)`` never decodes. Extension types are kept as plain integers because the
draft handles unknown extensions as a protocol error with its own error code
(``unsupportedExtension``, ``invalid_message``), not as a malformed message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from ppm_reference.dap.codec import (
    U8,
    U16,
    U32,
    U64,
    DecodeError,
    EnumCodec,
    Fixed,
    Opaque,
    Rest,
    Struct,
    StructCodec,
    Vector,
    wire,
)
from ppm_reference.dap.common import (
    BATCH_ID_CODEC,
    BATCH_MODE,
    DP_POLICY_EXTENSION,
    REPORT_EXTENSIONS,
    REPORT_ID,
    TASK_ID,
    TIME,
    TIME_PRECISION,
    URL,
    AggregateShare,
    AggregateShareID,
    AggregationJobID,
    BatchID,
    BatchMode,
    CollectionJobID,
    Duration,
    Empty,
    Extension,
    HpkeCiphertext,
    HpkeConfig,
    HpkeConfigList,
    Interval,
    PerReportAnswer,
    PingPongMessage,
    ReportID,
    TaskID,
    Time,
    VerifyRespType,
    _ext_type,
)

# Re-exported: with the above, every type a DAP-18 message is built from.
from ppm_reference.dap.common import DURATION as DURATION
from ppm_reference.dap.common import PingPongMessageType as PingPongMessageType
from ppm_reference.dap.common import Role as Role
from ppm_reference.dap.common import batch_checksum as batch_checksum

# ---------------------------------------------------------------------------------------
# Enumerations
# ---------------------------------------------------------------------------------------


class ReportError(IntEnum):
    """``ReportError`` (Section 4.1). ``reserved(0)`` is not a member and never decodes.

    Values above ``outdated_config(11)`` are undeclared in DAP-18 and rejected too
    (RFC 8446 Section 3.5: an enum can only take its declared values), although the
    registry (Section 9.2.6) may grow: a peer speaking a later document would see its
    UploadErrors or AggregationJobResp rejected as malformed."""

    BATCH_COLLECTED = 1
    REPORT_REPLAYED = 2
    REPORT_DROPPED = 3
    HPKE_UNKNOWN_CONFIG_ID = 4
    HPKE_DECRYPT_ERROR = 5
    VDAF_VERIFY_ERROR = 6
    TASK_EXPIRED = 7
    INVALID_MESSAGE = 8
    REPORT_TOO_EARLY = 9
    TASK_NOT_STARTED = 10
    OUTDATED_CONFIG = 11


class TaskExtensionType(IntEnum):
    """Known ``TaskExtensionType`` codepoints (Section 4.2.2). Fields hold plain ints."""

    TASK_INTERVAL = 1
    # Not in DAP-18: this project's private-use codepoint binding a DP policy
    # (draft-wang-ppm-differential-privacy) to the task; see dap/dp.py. DAP-18 defines no
    # private-use range, so 0xFF00 is a convention of ours, documented in the README.
    DP_POLICY = DP_POLICY_EXTENSION


class AggregationJobExtensionType(IntEnum):
    """Known ``AggregationJobExtensionType`` codepoints (Sections 4.5.1, 5.2.2)."""

    LEADER_SELECTED_BATCH_ID = 1


# ExtensionType (report extensions, Section 4.4.3) and CollectionJobExtensionType
# (Section 4.6.2) have no codepoints other than reserved(0) in DAP-18.

REPORT_ERROR = EnumCodec(ReportError, 1)


# ---------------------------------------------------------------------------------------
# Basic types (Section 4.1)
# ---------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------
# Extensions (Sections 4.2.2, 4.4.3, 4.5.1, 4.6.2)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskExtension(Struct):
    """``TaskExtension`` (Section 4.2.2)."""

    extension_type: int = wire(U16)
    extension_data: bytes = wire(Opaque(2))

    def _check(self) -> None:
        if self.extension_type == TaskExtensionType.TASK_INTERVAL:
            try:
                Interval.decode(self.extension_data)
            except DecodeError as exc:
                raise ValueError(f"task_interval extension_data: {exc}") from None

    @classmethod
    def task_interval(cls, interval: Interval) -> TaskExtension:
        """The ``task_interval`` extension (Section 4.2.3)."""
        return cls(TaskExtensionType.TASK_INTERVAL, interval.encode())


@dataclass(frozen=True)
class AggregationJobExtension(Struct):
    """``AggregationJobExtension`` (Section 4.5.1)."""

    extension_type: int = wire(U16)
    extension_data: bytes = wire(Opaque(2))

    @classmethod
    def leader_selected_batch_id(cls, batch_id: bytes) -> AggregationJobExtension:
        """The ``leader_selected_batch_id`` extension (Section 5.2.2)."""
        return cls(AggregationJobExtensionType.LEADER_SELECTED_BATCH_ID, BatchID(batch_id))


@dataclass(frozen=True)
class CollectionJobExtension(Struct):
    """``CollectionJobExtension`` (Section 4.6.2)."""

    extension_type: int = wire(U16)
    extension_data: bytes = wire(Opaque(2))


TASK_EXTENSIONS = Vector(StructCodec(TaskExtension), 2, increasing=_ext_type)
AGGREGATION_JOB_EXTENSIONS = Vector(StructCodec(AggregationJobExtension), 2, increasing=_ext_type)
# Section 4.6.2: unsorted collection job extensions fail the job with invalidExtension,
# while Section 4.5.3.2 fails an aggregation job with unsorted extensions with
# invalidMessage. AMBIGUITY: the error table of Section 3.6 describes invalidExtension as
# "an extensions list is out of order", for any list; we follow each section's own text.
COLLECTION_JOB_EXTENSIONS = Vector(
    StructCodec(CollectionJobExtension), 2, increasing=_ext_type,
    unsorted_problem="invalidExtension",
)


# ---------------------------------------------------------------------------------------
# Task configuration (Section 4.2)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskConfiguration(Struct):
    """``TaskConfiguration`` (Section 4.2).

    Build it with :func:`dap.profiles.dap18.task.build_task_configuration` (or
    ``Task.configuration()``),
    the one place its bytes are made. ``batch_config`` must be empty for the two batch
    modes of DAP-18 (Section 4.2); a ``task_interval`` extension must carry an Interval.
    """

    task_info: bytes = wire(Opaque(1, min_len=1))
    leader_aggregator_endpoint: bytes = wire(URL)
    helper_aggregator_endpoint: bytes = wire(URL)
    time_precision: int = wire(TIME_PRECISION)
    min_batch_size: int = wire(U64)
    batch_mode: BatchMode = wire(BATCH_MODE)
    batch_config: bytes = wire(Opaque(2))
    vdaf_type: int = wire(U32)
    vdaf_configuration: bytes = wire(Opaque(2))
    extensions: Sequence[TaskExtension] = wire(TASK_EXTENSIONS)

    def _check(self) -> None:
        if self.batch_config:
            raise ValueError(f"batch_config must be empty for batch mode {self.batch_mode.name}")

    def task_interval(self) -> Interval | None:
        for ext in self.extensions:
            if ext.extension_type == TaskExtensionType.TASK_INTERVAL:
                return Interval.decode(ext.extension_data)
        return None


# ---------------------------------------------------------------------------------------
# Upload (Section 4.4)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportMetadata(Struct):
    """``ReportMetadata`` (Section 4.4.2)."""

    report_id: ReportID = wire(REPORT_ID)
    time: int = wire(TIME)  # a Time
    public_extensions: Sequence[Extension] = wire(REPORT_EXTENSIONS)


@dataclass(frozen=True)
class Report(Struct):
    """``Report`` (Section 4.4.2)."""

    report_metadata: ReportMetadata = wire(StructCodec(ReportMetadata))
    public_share: bytes = wire(Opaque(4))
    leader_encrypted_input_share: HpkeCiphertext = wire(StructCodec(HpkeCiphertext))
    helper_encrypted_input_share: HpkeCiphertext = wire(StructCodec(HpkeCiphertext))


@dataclass(frozen=True)
class UploadRequest(Struct):
    """``UploadRequest`` (Section 4.4.2): reports fill the HTTP message content."""

    reports: Sequence[Report] = wire(Rest(StructCodec(Report)))


@dataclass(frozen=True)
class PlaintextInputShare(Struct):
    """``PlaintextInputShare`` (Section 4.4.2.1): what a Client encrypts to an Aggregator."""

    private_extensions: Sequence[Extension] = wire(REPORT_EXTENSIONS)
    payload: bytes = wire(Opaque(4, min_len=1))


@dataclass(frozen=True)
class InputShareAad(Struct):
    """``InputShareAad`` (Section 4.4.2.1): HPKE associated data of an input share."""

    task_id: TaskID = wire(TASK_ID)
    task_configuration: TaskConfiguration = wire(StructCodec(TaskConfiguration))
    report_metadata: ReportMetadata = wire(StructCodec(ReportMetadata))
    public_share: bytes = wire(Opaque(4))


@dataclass(frozen=True)
class ReportUploadStatus(Struct):
    """``ReportUploadStatus`` (Section 4.4.2.2)."""

    id: ReportID = wire(REPORT_ID)
    error: ReportError = wire(REPORT_ERROR)


@dataclass(frozen=True)
class UploadErrors(Struct):
    """``UploadErrors`` (Section 4.4.2.2): statuses fill the HTTP message content."""

    status: Sequence[ReportUploadStatus] = wire(Rest(StructCodec(ReportUploadStatus)))


# ---------------------------------------------------------------------------------------
# Aggregation (Section 4.5)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportShare(Struct):
    """``ReportShare`` (Section 4.5.3.1)."""

    report_metadata: ReportMetadata = wire(StructCodec(ReportMetadata))
    public_share: bytes = wire(Opaque(4))
    encrypted_input_share: HpkeCiphertext = wire(StructCodec(HpkeCiphertext))


@dataclass(frozen=True)
class VerifyInit(Struct):
    """``VerifyInit`` (Section 4.5.3.1). ``payload`` is the Leader's first ping-pong
    message (VDAF Section 5.7)."""

    report_share: ReportShare = wire(StructCodec(ReportShare))
    payload: bytes = wire(Opaque(4, min_len=1))


@dataclass(frozen=True)
class AggregationJobInitReq(Struct):
    """``AggregationJobInitReq`` (Section 4.5.3.1); ``verify_inits`` fill the rest of
    the HTTP message content."""

    verification_key_id: int = wire(U8)
    agg_param: bytes = wire(Opaque(4))
    extensions: Sequence[AggregationJobExtension] = wire(AGGREGATION_JOB_EXTENSIONS)
    verify_inits: Sequence[VerifyInit] = wire(Rest(StructCodec(VerifyInit)))

    def leader_selected_batch_id(self) -> BatchID | None:
        """The batch ID of the ``leader_selected_batch_id`` extension, if present.

        Raises :class:`DecodeError` if the extension's payload is not a BatchID (the
        Helper then aborts with ``invalidMessage``, Section 5.2.2)."""
        for ext in self.extensions:
            if ext.extension_type == AggregationJobExtensionType.LEADER_SELECTED_BATCH_ID:
                return BatchID.decode(ext.extension_data)
        return None


@dataclass(frozen=True)
class VerifyResp(PerReportAnswer, Struct):
    """``VerifyResp`` (Section 4.5.3.2), a ``select`` on ``verify_resp_type``:

    * ``continue``: ``payload`` (the next ping-pong message) is set;
    * ``finish``: no body (``Empty``);
    * ``reject``: ``report_error`` is set.

    Use the constructors :meth:`continue_`, :meth:`finish` and :meth:`reject`.
    """

    report_id: ReportID = wire(REPORT_ID)
    verify_resp_type: VerifyRespType = wire(EnumCodec(VerifyRespType, 1))
    payload: bytes | None = wire(
        Opaque(4, min_len=1), when=("verify_resp_type", VerifyRespType.CONTINUE)
    )
    report_error: ReportError | None = wire(
        REPORT_ERROR, when=("verify_resp_type", VerifyRespType.REJECT)
    )

    answer_states = (VerifyRespType.CONTINUE, VerifyRespType.FINISH, VerifyRespType.REJECT)
    error_field = "report_error"


@dataclass(frozen=True)
class AggregationJobResp(Struct):
    """``AggregationJobResp`` (Section 4.5.3.2): responses fill the message content."""

    verify_resps: Sequence[VerifyResp] = wire(Rest(StructCodec(VerifyResp)))


@dataclass(frozen=True)
class VerifyContinue(Struct):
    """``VerifyContinue`` (Section 4.5.4.1)."""

    report_id: ReportID = wire(REPORT_ID)
    payload: bytes = wire(Opaque(4, min_len=1))


@dataclass(frozen=True)
class AggregationJobContinueReq(Struct):
    """``AggregationJobContinueReq`` (Section 4.5.4.1). ``step`` 0 is a valid encoding but
    a protocol error the Helper answers with ``invalidMessage`` (Section 4.5.4.2)."""

    step: int = wire(U16)
    verify_continues: Sequence[VerifyContinue] = wire(Rest(StructCodec(VerifyContinue)))


# ---------------------------------------------------------------------------------------
# Batch modes (Section 5) and collection (Section 4.6)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeIntervalQueryConfig(Struct):
    """``TimeIntervalQueryConfig`` (Section 5.1.1)."""

    batch_interval: Interval = wire(StructCodec(Interval))


@dataclass(frozen=True)
class TimeIntervalBatchSelectorConfig(Struct):
    """``TimeIntervalBatchSelectorConfig`` (Section 5.1.2)."""

    batch_interval: Interval = wire(StructCodec(Interval))


@dataclass(frozen=True)
class LeaderSelectedBatchSelectorConfig(Struct):
    """``LeaderSelectedBatchSelectorConfig`` (Section 5.2.3)."""

    batch_id: BatchID = wire(BATCH_ID_CODEC)


class _BatchModeSelected(Struct):
    """Common part of ``Query`` and ``BatchSelector``: a batch mode and its ``config``,
    whose content is checked against the batch mode."""

    batch_mode: BatchMode
    config: bytes
    _CONFIGS: ClassVar[dict[BatchMode, type[Struct]]]

    def _check(self) -> None:
        cls = self._CONFIGS[self.batch_mode]
        try:
            cls.decode(self.config)
        except DecodeError as exc:
            raise ValueError(f"config for {self.batch_mode.name}: {exc}") from None

    @property
    def batch_interval(self) -> Interval:
        """The batch interval of a time-interval query or selector."""
        if self.batch_mode != BatchMode.TIME_INTERVAL:
            raise ValueError(f"no batch interval in batch mode {self.batch_mode.name}")
        return Interval.decode(self.config)


@dataclass(frozen=True)
class Query(_BatchModeSelected):
    """``Query`` (Section 4.6.1). ``config`` is a ``TimeIntervalQueryConfig`` for
    time-interval and empty for leader-selected (Sections 5.1.1, 5.2.1)."""

    batch_mode: BatchMode = wire(BATCH_MODE)
    config: bytes = wire(Opaque(2))

    _CONFIGS = {
        BatchMode.TIME_INTERVAL: TimeIntervalQueryConfig,
        BatchMode.LEADER_SELECTED: Empty,
    }

    @classmethod
    def time_interval(cls, batch_interval: Interval) -> Query:
        return cls(BatchMode.TIME_INTERVAL, TimeIntervalQueryConfig(batch_interval).encode())

    @classmethod
    def leader_selected(cls) -> Query:
        return cls(BatchMode.LEADER_SELECTED, b"")


@dataclass(frozen=True)
class BatchSelector(_BatchModeSelected):
    """``BatchSelector`` (Section 4.6.4). ``config`` is a
    ``TimeIntervalBatchSelectorConfig`` or a ``LeaderSelectedBatchSelectorConfig``
    (Sections 5.1.2, 5.2.3)."""

    batch_mode: BatchMode = wire(BATCH_MODE)
    config: bytes = wire(Opaque(2))

    _CONFIGS = {
        BatchMode.TIME_INTERVAL: TimeIntervalBatchSelectorConfig,
        BatchMode.LEADER_SELECTED: LeaderSelectedBatchSelectorConfig,
    }

    @classmethod
    def time_interval(cls, batch_interval: Interval) -> BatchSelector:
        config = TimeIntervalBatchSelectorConfig(batch_interval).encode()
        return cls(BatchMode.TIME_INTERVAL, config)

    @classmethod
    def leader_selected(cls, batch_id: bytes) -> BatchSelector:
        config = LeaderSelectedBatchSelectorConfig(BatchID(batch_id)).encode()
        return cls(BatchMode.LEADER_SELECTED, config)

    @property
    def batch_id(self) -> BatchID:
        if self.batch_mode != BatchMode.LEADER_SELECTED:
            raise ValueError(f"no batch ID in batch mode {self.batch_mode.name}")
        return LeaderSelectedBatchSelectorConfig.decode(self.config).batch_id


@dataclass(frozen=True)
class CollectionJobReq(Struct):
    """``CollectionJobReq`` (Section 4.6.1)."""

    query: Query = wire(StructCodec(Query))
    agg_param: bytes = wire(Opaque(4))
    extensions: Sequence[CollectionJobExtension] = wire(COLLECTION_JOB_EXTENSIONS)


@dataclass(frozen=True)
class CollectionJobResp(Struct):
    """``CollectionJobResp`` (Section 4.6.1).

    ``interval`` is "the smallest interval of time that contains the timestamps of all
    reports included in the batch"; with times counted in ``time_precision`` units that
    is ``Interval(min, max - min + 1)`` (our reading: intervals are half-open)."""

    report_count: int = wire(U64)
    interval: Interval = wire(StructCodec(Interval))
    leader_encrypted_agg_share: HpkeCiphertext = wire(StructCodec(HpkeCiphertext))
    helper_encrypted_agg_share: HpkeCiphertext = wire(StructCodec(HpkeCiphertext))


@dataclass(frozen=True)
class AggregateShareReq(Struct):
    """``AggregateShareReq`` (Section 4.6.4)."""

    collection_job_req: CollectionJobReq = wire(StructCodec(CollectionJobReq))
    batch_selector: BatchSelector = wire(StructCodec(BatchSelector))
    report_count: int = wire(U64)
    checksum: bytes = wire(Fixed(32))


@dataclass(frozen=True)
class AggregateShareAad(Struct):
    """``AggregateShareAad`` (Section 4.6.7): HPKE associated data of an aggregate share.

    The prose of Section 4.6.7 speaks of decrypting "for a given batch selector", but the
    struct binds the ``CollectionJobReq`` (not the ``BatchSelector``); we follow the
    struct."""

    task_id: TaskID = wire(TASK_ID)
    task_configuration: TaskConfiguration = wire(StructCodec(TaskConfiguration))
    collection_job_req: CollectionJobReq = wire(StructCodec(CollectionJobReq))


# Every struct of this module, for tests and tooling (ordered as in the draft).
ALL_STRUCTS: tuple[type[Struct], ...] = (
    Empty,
    Interval,
    HpkeCiphertext,
    Extension,
    TaskExtension,
    AggregationJobExtension,
    CollectionJobExtension,
    TaskConfiguration,
    HpkeConfig,
    HpkeConfigList,
    ReportMetadata,
    Report,
    UploadRequest,
    PlaintextInputShare,
    InputShareAad,
    ReportUploadStatus,
    UploadErrors,
    ReportShare,
    VerifyInit,
    AggregationJobInitReq,
    VerifyResp,
    PingPongMessage,
    AggregationJobResp,
    VerifyContinue,
    AggregationJobContinueReq,
    TimeIntervalQueryConfig,
    TimeIntervalBatchSelectorConfig,
    LeaderSelectedBatchSelectorConfig,
    Query,
    BatchSelector,
    CollectionJobReq,
    CollectionJobResp,
    AggregateShareReq,
    AggregateShare,
    AggregateShareAad,
)

# The fixed-size identifiers and times, which are bytes / int subclasses.
ALL_SCALARS: tuple[type, ...] = (
    ReportID,
    TaskID,
    BatchID,
    AggregationJobID,
    CollectionJobID,
    AggregateShareID,
    Time,
    Duration,
)

__all__ = [
    "AGGREGATION_JOB_EXTENSIONS",
    "ALL_SCALARS",
    "ALL_STRUCTS",
    "AggregateShare",
    "AggregateShareAad",
    "AggregateShareID",
    "AggregateShareReq",
    "AggregationJobContinueReq",
    "AggregationJobExtension",
    "AggregationJobExtensionType",
    "AggregationJobID",
    "AggregationJobInitReq",
    "AggregationJobResp",
    "BATCH_ID_CODEC",
    "BATCH_MODE",
    "BatchID",
    "BatchMode",
    "BatchSelector",
    "COLLECTION_JOB_EXTENSIONS",
    "CollectionJobExtension",
    "CollectionJobID",
    "CollectionJobReq",
    "CollectionJobResp",
    "DURATION",
    "Duration",
    "Empty",
    "Extension",
    "HpkeCiphertext",
    "HpkeConfig",
    "HpkeConfigList",
    "InputShareAad",
    "Interval",
    "LeaderSelectedBatchSelectorConfig",
    "PingPongMessage",
    "PingPongMessageType",
    "PlaintextInputShare",
    "Query",
    "REPORT_ERROR",
    "REPORT_EXTENSIONS",
    "REPORT_ID",
    "Report",
    "ReportError",
    "ReportID",
    "ReportMetadata",
    "ReportShare",
    "ReportUploadStatus",
    "Role",
    "TASK_EXTENSIONS",
    "TASK_ID",
    "TIME",
    "TIME_PRECISION",
    "TaskConfiguration",
    "TaskExtension",
    "TaskExtensionType",
    "TaskID",
    "Time",
    "TimeIntervalBatchSelectorConfig",
    "TimeIntervalQueryConfig",
    "URL",
    "UploadErrors",
    "UploadRequest",
    "VerifyContinue",
    "VerifyInit",
    "VerifyResp",
    "VerifyRespType",
    "_ext_type",
    "batch_checksum",
]
