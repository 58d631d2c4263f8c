"""Every message of draft-ietf-ppm-dap-18 as a frozen dataclass.

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

import base64
import binascii
import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, Self

from dap.codec import (
    U8,
    U16,
    U32,
    U64,
    DecodeError,
    Decoder,
    EnumCodec,
    Fixed,
    Opaque,
    Rest,
    Struct,
    StructCodec,
    Uint,
    Vector,
    wire,
)

# ---------------------------------------------------------------------------------------
# Identifiers and times (Sections 4.1, 4.1.1, 4.2, 5.2)
# ---------------------------------------------------------------------------------------


class _Id(bytes):
    """A fixed-size opaque identifier. ``SIZE`` is set by subclasses."""

    SIZE: ClassVar[int]

    def __new__(cls, value: bytes | bytearray | memoryview) -> Self:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError(f"{cls.__name__} takes bytes, not {type(value).__name__}")
        b = bytes(value)
        if len(b) != cls.SIZE:
            raise ValueError(f"{cls.__name__} must be {cls.SIZE} bytes, got {len(b)}")
        return super().__new__(cls, b)

    @classmethod
    def random(cls) -> Self:
        """A fresh identifier from the operating system CSPRNG."""
        return cls(os.urandom(cls.SIZE))

    def encode(self) -> bytes:
        return bytes(self)

    @classmethod
    def decode(cls, data: bytes) -> Self:  # type: ignore[override]
        """Decode the wire form (``opaque[SIZE]``). Shadows ``bytes.decode``."""
        dec = Decoder(data, cls.__name__)
        out = cls(dec.read(cls.SIZE))
        dec.finish()
        return out

    def to_base64url(self) -> str:
        """URL-safe base64 without padding, as used in resource URLs (Section 3)."""
        return base64.urlsafe_b64encode(self).rstrip(b"=").decode("ascii")

    @classmethod
    def from_base64url(cls, text: str) -> Self:
        """Strict inverse of :meth:`to_base64url`: no padding, URL-safe alphabet only."""
        if not isinstance(text, str) or not text.isascii() or "=" in text:
            raise DecodeError("not unpadded URL-safe base64", field=cls.__name__)
        if any(c in "+/" for c in text) or len(text) % 4 == 1:
            raise DecodeError("not unpadded URL-safe base64", field=cls.__name__)
        try:
            raw = base64.b64decode(
                text + "=" * (-len(text) % 4), altchars=b"-_", validate=True
            )
        except binascii.Error as exc:
            raise DecodeError(f"invalid base64url: {exc}", field=cls.__name__) from None
        if len(raw) != cls.SIZE:
            raise DecodeError(f"expected {cls.SIZE} bytes, got {len(raw)}", field=cls.__name__)
        out = cls(raw)
        if out.to_base64url() != text:  # non-canonical trailing bits
            raise DecodeError("non-canonical base64url", field=cls.__name__)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({bytes(self).hex()})"


class ReportID(_Id):
    """``opaque ReportID[16]`` (Section 4.1); also the VDAF nonce of the report."""

    SIZE = 16


class TaskID(_Id):
    """``opaque TaskID[32]`` (Section 4.2)."""

    SIZE = 32


class BatchID(_Id):
    """``opaque BatchID[32]`` (Section 5.2, leader-selected batch mode)."""

    SIZE = 32


class AggregationJobID(_Id):
    """Aggregation job identifier, used only in URLs (Sections 3, 4.5).

    DAP-18 no longer defines this type in the presentation language: the Helper selects
    the identifier (Section 3.2). We use 16 bytes, the size of the draft's URL example
    (Section 3) and of ``AggregationJobID`` in earlier drafts.
    """

    SIZE = 16


class CollectionJobID(_Id):
    """Collection job identifier, used only in URLs (Sections 3, 4.6). 16 bytes; see
    :class:`AggregationJobID` for why the size is our choice."""

    SIZE = 16


class AggregateShareID(_Id):
    """Helper aggregate share identifier, used only in URLs (Section 4.6.4). 16 bytes;
    DAP-18 suggests the Leader may reuse the collection job ID."""

    SIZE = 16


_U64_MAX = (1 << 64) - 1


class _Uint64(int):
    """A ``uint64`` value."""

    def __new__(cls, value: int) -> Self:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{cls.__name__} takes an int, not {type(value).__name__}")
        if not 0 <= value <= _U64_MAX:
            raise ValueError(f"{cls.__name__} {value} out of range for uint64")
        return super().__new__(cls, value)

    def encode(self) -> bytes:
        return int(self).to_bytes(8, "big")

    @classmethod
    def decode(cls, data: bytes) -> Self:
        dec = Decoder(data, cls.__name__)
        out = cls(dec.uint(8))
        dec.finish()
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"


class Time(_Uint64):
    """``uint64 Time`` (Section 4.1.1): a number of ``time_precision`` units since the Epoch."""

    @classmethod
    def from_seconds(cls, posix_seconds: int, time_precision: int) -> Time:
        """The time containing ``posix_seconds`` (rounded down to the precision)."""
        return cls(posix_seconds // time_precision)

    def to_seconds(self, time_precision: int) -> int:
        return int(self) * time_precision


class Duration(_Uint64):
    """``uint64 Duration`` (Section 4.1.1): a number of ``time_precision`` units."""


TIME = Uint(8, Time)
DURATION = Uint(8, Duration)
TIME_PRECISION = U64  # uint64 TimePrecision: seconds


# ---------------------------------------------------------------------------------------
# Enumerations
# ---------------------------------------------------------------------------------------


class Role(IntEnum):
    """``Role`` (Section 4.1)."""

    COLLECTOR = 0
    CLIENT = 1
    LEADER = 2
    HELPER = 3


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


class BatchMode(IntEnum):
    """``BatchMode`` (Section 5). ``reserved(0)`` never decodes.

    Batch modes are extensible through a registry, but a batch mode's ``Query`` and
    ``BatchSelector`` configurations cannot be checked without knowing it, so this
    implementation rejects batch modes it does not know at decoding time.
    """

    TIME_INTERVAL = 1
    LEADER_SELECTED = 2


class VerifyRespType(IntEnum):
    """``VerifyRespType`` (Section 4.5.3.2), the selector of ``VerifyResp``.

    (The draft's definition lacks a comma after ``finish(1)``; the values are clear.)"""

    CONTINUE = 0
    FINISH = 1
    REJECT = 2


class TaskExtensionType(IntEnum):
    """Known ``TaskExtensionType`` codepoints (Section 4.2.2). Fields hold plain ints."""

    TASK_INTERVAL = 1
    # Not in DAP-18: this project's private-use codepoint binding a DP policy
    # (draft-wang-ppm-differential-privacy) to the task; see dap/dp.py. DAP-18 defines no
    # private-use range, so 0xFF00 is a convention of ours, documented in the README.
    DP_POLICY = 0xFF00


class AggregationJobExtensionType(IntEnum):
    """Known ``AggregationJobExtensionType`` codepoints (Sections 4.5.1, 5.2.2)."""

    LEADER_SELECTED_BATCH_ID = 1


# ExtensionType (report extensions, Section 4.4.3) and CollectionJobExtensionType
# (Section 4.6.2) have no codepoints other than reserved(0) in DAP-18.

BATCH_MODE = EnumCodec(BatchMode, 1)
REPORT_ERROR = EnumCodec(ReportError, 1)


# ---------------------------------------------------------------------------------------
# Basic types (Section 4.1)
# ---------------------------------------------------------------------------------------

REPORT_ID = Fixed(16, ReportID)
TASK_ID = Fixed(32, TaskID)
BATCH_ID_CODEC = Fixed(32, BatchID)
# opaque Url<1..2^16-1> (Section 4.1), "the encoding of a URL as ASCII bytes": we reject
# bytes outside 7-bit ASCII when decoding (our reading; the draft does not say what a
# receiver does with non-ASCII bytes) and never re-encode the bytes.
URL = Opaque(2, min_len=1, ascii=True)


@dataclass(frozen=True)
class Empty(Struct):
    """``struct {} Empty`` (Section 4.1)."""


@dataclass(frozen=True)
class Interval(Struct):
    """``Interval`` (Section 4.1.1): the half-open interval [start, start + duration)."""

    start: int = wire(TIME)  # a Time
    duration: int = wire(DURATION)  # a Duration

    @property
    def end(self) -> int:
        """``start + duration`` (may exceed uint64 for malformed intervals)."""
        return int(self.start) + int(self.duration)

    def contains(self, time: int) -> bool:
        return int(self.start) <= time < self.end


@dataclass(frozen=True)
class HpkeCiphertext(Struct):
    """``HpkeCiphertext`` (Section 4.1): the output of HPKE ``SealBase()``."""

    config_id: int = wire(U8)
    enc: bytes = wire(Opaque(2, min_len=1))
    payload: bytes = wire(Opaque(4, min_len=1))


# ---------------------------------------------------------------------------------------
# Extensions (Sections 4.2.2, 4.4.3, 4.5.1, 4.6.2)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Extension(Struct):
    """Report extension ``Extension`` (Section 4.4.3)."""

    extension_type: int = wire(U16)
    extension_data: bytes = wire(Opaque(2))


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


def _ext_type(ext: Any) -> int:
    return int(ext.extension_type)


# Extension lists: "MUST be encoded in strictly increasing order of extension_type".
#
# AMBIGUITY (report extensions): Section 4.5.3.4 treats unsorted report extensions as a
# per-report error (mark the input share invalid with ``invalid_message``), but a strict
# decoder rejects the whole message that contains them. We decode strictly, as the
# encoding rule says. For private extensions (inside the encrypted PlaintextInputShare)
# this is still per report: the Aggregator decodes each decrypted share on its own. For
# public extensions, a Leader receiving such a report in an UploadRequest rejects the
# whole upload with invalidMessage, and a Helper receiving it in an AggregationJobInitReq
# (which an honest Leader never sends, having validated the report first) fails the job.
REPORT_EXTENSIONS = Vector(StructCodec(Extension), 2, increasing=_ext_type)
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

    Build it with :func:`dap.task.build_task_configuration` (or ``Task.configuration()``),
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
class HpkeConfig(Struct):
    """``HpkeConfig`` (Section 4.4.1). Algorithm ids are HPKE registry values (RFC 9180
    Section 7); unknown algorithms decode, since a Client must skip configs it does not
    support rather than reject the list."""

    id: int = wire(U8)
    kem_id: int = wire(U16)
    kdf_id: int = wire(U16)
    aead_id: int = wire(U16)
    public_key: bytes = wire(Opaque(2, min_len=1))


@dataclass(frozen=True)
class HpkeConfigList(Struct):
    """``HpkeConfig HpkeConfigList<10..2^16-1>`` (Section 4.4.1), in decreasing order of
    preference. The floor of 10 bytes (one minimal HpkeConfig) makes it non-empty.
    Distinctness of ``id`` values is an Aggregator obligation that this codec does not
    check; see :meth:`has_distinct_ids`."""

    configs: Sequence[HpkeConfig] = wire(Vector(StructCodec(HpkeConfig), 2, min_len=10))

    def has_distinct_ids(self) -> bool:
        return len({c.id for c in self.configs}) == len(self.configs)


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
class VerifyResp(Struct):
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

    @classmethod
    def continue_(cls, report_id: bytes, payload: bytes) -> VerifyResp:
        return cls(ReportID(report_id), VerifyRespType.CONTINUE, payload=payload)

    @classmethod
    def finish(cls, report_id: bytes) -> VerifyResp:
        return cls(ReportID(report_id), VerifyRespType.FINISH)

    @classmethod
    def reject(cls, report_id: bytes, report_error: ReportError) -> VerifyResp:
        return cls(ReportID(report_id), VerifyRespType.REJECT, report_error=report_error)


class PingPongMessageType(IntEnum):
    """``MessageType`` of the VDAF ping-pong topology (draft-irtf-cfrg-vdaf-20 Section 5.7)."""

    INITIALIZE = 0
    CONTINUE = 1
    FINISH = 2


@dataclass(frozen=True)
class PingPongMessage(Struct):
    """The VDAF ping-pong ``Message`` (draft-irtf-cfrg-vdaf-20 Section 5.7).

    Not a DAP message, but what ``VerifyInit.payload``, ``VerifyResp.payload`` and
    ``VerifyContinue.payload`` carry (``state.outbound``, Section 4.5.3.1)::

        initialize: opaque verifier_share<0..2^32-1>;
        continue:   opaque verifier_message<0..2^32-1>; opaque verifier_share<0..2^32-1>;
        finish:     opaque verifier_message<0..2^32-1>;
    """

    type: PingPongMessageType = wire(EnumCodec(PingPongMessageType, 1))
    verifier_message: bytes | None = wire(
        Opaque(4), when=("type", {PingPongMessageType.CONTINUE, PingPongMessageType.FINISH})
    )
    verifier_share: bytes | None = wire(
        Opaque(4), when=("type", {PingPongMessageType.INITIALIZE, PingPongMessageType.CONTINUE})
    )

    @classmethod
    def initialize(cls, verifier_share: bytes) -> PingPongMessage:
        return cls(PingPongMessageType.INITIALIZE, verifier_share=verifier_share)

    @classmethod
    def continue_(cls, verifier_message: bytes, verifier_share: bytes) -> PingPongMessage:
        return cls(
            PingPongMessageType.CONTINUE,
            verifier_message=verifier_message,
            verifier_share=verifier_share,
        )

    @classmethod
    def finish(cls, verifier_message: bytes) -> PingPongMessage:
        return cls(PingPongMessageType.FINISH, verifier_message=verifier_message)


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
class AggregateShare(Struct):
    """``AggregateShare`` (Section 4.6.4)."""

    encrypted_aggregate_share: HpkeCiphertext = wire(StructCodec(HpkeCiphertext))


@dataclass(frozen=True)
class AggregateShareAad(Struct):
    """``AggregateShareAad`` (Section 4.6.7): HPKE associated data of an aggregate share.

    The prose of Section 4.6.7 speaks of decrypting "for a given batch selector", but the
    struct binds the ``CollectionJobReq`` (not the ``BatchSelector``); we follow the
    struct."""

    task_id: TaskID = wire(TASK_ID)
    task_configuration: TaskConfiguration = wire(StructCodec(TaskConfiguration))
    collection_job_req: CollectionJobReq = wire(StructCodec(CollectionJobReq))


def batch_checksum(report_ids: Iterable[bytes]) -> bytes:
    """The batch checksum (Section 4.5.4.3): the XOR of SHA-256 of each report ID, starting
    from 32 zero bytes. It is ``AggregateShareReq.checksum``."""
    acc = 0
    for report_id in report_ids:
        acc ^= int.from_bytes(hashlib.sha256(bytes(ReportID(report_id))).digest(), "big")
    return acc.to_bytes(32, "big")


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
