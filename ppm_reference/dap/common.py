"""The vocabulary every DAP profile shares, and that the engine speaks.

Identifiers, times and intervals, roles, batch modes, HPKE configurations and
ciphertexts, report extensions, the VDAF ping-pong message and the batch checksum have
the same encoding in every draft this project implements (draft-ietf-ppm-dap-09 Sections
4.1 and 4.4.1, draft-ietf-ppm-dap-18 Sections 4.1 and 4.4.1, and DAP-19, which changed
none of them). A profile's own messages (``dap.profiles.<draft>.messages``) build on
these; code outside ``dap/profiles/`` uses only this module.

:class:`ReportError` here is the protocol core's set of per-report errors, a union of
every draft's. Its numbers are what the datastore keeps, never what goes on the wire:
each profile translates it to and from its own wire enumeration (DAP-18 and DAP-19 give
the same byte different meanings), by name, never by casting the number.

Times and intervals are in the units the core counts in (``time_precision`` units, as
DAP-18 Section 4.1.1 defines ``Time``); a profile whose draft counts seconds (DAP-09)
converts at its wire.
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

from ppm_reference.dap.codec import (
    U8,
    U16,
    U64,
    DecodeError,
    Decoder,
    EnumCodec,
    Fixed,
    Opaque,
    Struct,
    StructCodec,
    Uint,
    Vector,
    wire,
)

_U64_MAX = (1 << 64) - 1

#: This project's private-use task extension binding a DP policy
#: (draft-wang-ppm-differential-privacy) to a task (see dap/dp.py and the README).
DP_POLICY_EXTENSION = 0xFF00

#: This project's private-use REPORT extension carrying the smallest batch the Client
#: accepts its report to be released in (paper 000 Section 4.8, "the parameter B itself
#: is part of the encrypted shares from the client"; paper 004 Section 3.1, "the minimum
#: cohort is communicated from the device to the aggregation protocol"). Its data is a
#: uint32 in network byte order, at least 1. No DAP draft reserves a private-use range
#: of report extension types; 0xFF01 is beside our task extension 0xFF00 and clear of
#: the taskprov drafts' report extension (0xFF00 in its early versions). DAP-18/19 carry
#: it among the public extensions (in ReportMetadata, bound into both Aggregators' HPKE
#: associated data); DAP-09, which has no public extensions, in both Aggregators'
#: PlaintextInputShare (inside the AEAD). Stripping or changing it makes the report
#: undecryptable. Each Aggregator refuses to release an aggregate share for a batch
#: smaller than the largest bound of its reports (`dap.core.buckets.release_problem`).
MIN_BATCH_SIZE_EXTENSION = 0xFF01

#: Report extension types the Aggregators recognize.
RECOGNIZED_REPORT_EXTENSIONS = frozenset({MIN_BATCH_SIZE_EXTENSION})


def encode_min_batch_size(bound: int) -> bytes:
    """The data of a MIN_BATCH_SIZE_EXTENSION."""
    if not 1 <= bound <= 0xFFFFFFFF:
        raise ValueError("a minimum batch size bound is a uint32 of at least 1")
    return bound.to_bytes(4, "big")


def decode_min_batch_size(data: bytes) -> int:
    """The bound in a MIN_BATCH_SIZE_EXTENSION's data; ValueError unless exactly a uint32
    of at least 1."""
    if len(data) != 4:
        raise ValueError(f"minimum batch size extension of {len(data)} bytes, not 4")
    bound = int.from_bytes(data, "big")
    if bound < 1:
        raise ValueError("minimum batch size bound 0")
    return bound


class ReportError(IntEnum):
    """The protocol core's per-report errors (every draft's ``ReportError`` /
    ``PrepareError`` by name). The values are storage codes: 1 to 11 are those of
    DAP-18's registry, so that datastores written before DAP-19 read the same; later
    members follow. A profile's wire translates by name (``dap.core.wire.Wire``)."""

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
    # DAP-19 (#784, #789).
    UNKNOWN_VERIFICATION_KEY_ID = 12
    UNSUPPORTED_EXTENSION = 13


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


class Role(IntEnum):
    """``Role`` (Section 4.1)."""

    COLLECTOR = 0
    CLIENT = 1
    LEADER = 2
    HELPER = 3


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


BATCH_MODE = EnumCodec(BatchMode, 1)


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


@dataclass(frozen=True)
class Extension(Struct):
    """Report extension ``Extension`` (Section 4.4.3)."""

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


def batch_checksum(report_ids: Iterable[bytes]) -> bytes:
    """The batch checksum (Section 4.5.4.3): the XOR of SHA-256 of each report ID, starting
    from 32 zero bytes. It is ``AggregateShareReq.checksum``."""
    acc = 0
    for report_id in report_ids:
        acc ^= int.from_bytes(hashlib.sha256(bytes(ReportID(report_id))).digest(), "big")
    return acc.to_bytes(32, "big")


@dataclass(frozen=True)
class AggregateShare(Struct):
    """``AggregateShare``: one aggregate share encrypted to the Collector, the same struct
    in DAP-09 (Section 4.6.2) and DAP-18 (Section 4.6.4)."""

    encrypted_aggregate_share: HpkeCiphertext = wire(StructCodec(HpkeCiphertext))


class PerReportAnswer:
    """The constructors of a per-report answer: a report ID and a ``select`` on its state
    (continue with a payload, finished, or rejected with an error). DAP-18's
    ``VerifyResp`` (Section 4.5.3.2) and DAP-09's ``PrepareResp`` (Section 4.5.1.2) are
    such answers, with their own names for the state and the error field."""

    # The struct's (continue, finished, reject) state members and its error field.
    answer_states: ClassVar[tuple[Any, Any, Any]]
    error_field: ClassVar[str]

    @classmethod
    def _answer(cls, report_id: bytes, state: int, **fields: Any) -> Self:
        make: Any = cls
        answer: Self = make(ReportID(report_id), cls.answer_states[state], **fields)
        return answer

    @classmethod
    def continue_(cls, report_id: bytes, payload: bytes) -> Self:
        return cls._answer(report_id, 0, payload=payload)

    @classmethod
    def finish(cls, report_id: bytes) -> Self:
        return cls._answer(report_id, 1)

    @classmethod
    def reject(cls, report_id: bytes, error: Any) -> Self:
        return cls._answer(report_id, 2, **{cls.error_field: error})
