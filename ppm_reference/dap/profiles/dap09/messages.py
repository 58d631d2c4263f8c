"""Every message of draft-ietf-ppm-dap-09 as a frozen dataclass.

The DAP-09 counterpart of :mod:`dap.profiles.dap18.messages` (DAP-18), built on the same
strict codec
(:mod:`dap.codec`): ``Msg.decode(data)`` parses the whole of ``data`` and nothing more,
``msg.encode()`` produces it, construction validates every field. Field names are the
draft's. Section numbers refer to the rendered draft-ietf-ppm-dap-09: 3.2 Errors,
4 Protocol Definition (basic types), 4.1 Queries, 4.2 Task Configuration, 4.4 Uploading
Reports, 4.5 Verifying and Aggregating Reports, 4.6 Collecting Results.

Types whose definition is byte-for-byte the same in both drafts are shared with
:mod:`dap.profiles.dap18.messages` (and re-exported here): ``ReportID``, ``TaskID``, ``BatchID``,
``Role``, ``Empty``, ``HpkeCiphertext``, ``HpkeConfig`` and the VDAF ping-pong
``PingPongMessage``. Everything else is defined here, because it differs:

* ``Time`` and ``Duration`` count *seconds* (DAP-18 counts ``time_precision`` units), so
  ``Interval`` is a separate class too;
* ``HpkeConfigList`` is ``HpkeConfig HpkeConfigList<1..2^16-1>`` (DAP-18: ``<10..>``);
* ``ReportMetadata`` has no public extensions; ``PlaintextInputShare`` has
  ``extensions`` and may have an empty ``payload``; extension lists are *not* required
  to be sorted (duplicates are a per-report ``invalid_message`` error, Section 4.5.1.4,
  which :func:`has_duplicate_extension_types` detects);
* ``InputShareAad`` binds ``task_id``, ``report_metadata`` and ``public_share`` only:
  DAP-09 has no ``TaskConfiguration`` struct;
* queries are ``Query``/``FixedSizeQuery``/``PartialBatchSelector``/``BatchSelector``
  ``select``\\ s on ``QueryType`` (time_interval / fixed_size) instead of DAP-18's batch
  modes with opaque configs;
* aggregation uses ``PrepareInit``/``PrepareResp``/``PrepareContinue`` with
  ``PrepareRespState`` and ``PrepareError`` (whose ``batch_collected`` is 0);
  ``prepare_inits``, ``prepare_resps`` and ``prepare_continues`` are length-prefixed
  vectors ``<1..2^32-1>`` (DAP-18: the rest of the message);
* collection is ``CollectionReq``/``Collection``; ``AggregateShareAad`` binds
  ``task_id``, ``agg_param`` and the ``BatchSelector``.

Enumerations decode only to their declared values (``reserved(0)`` of ``QueryType``
never decodes). ``ExtensionType`` declares only ``TBD(0)``; extension types are kept as
plain integers, since an unknown extension is a per-report error (Section 4.4.3), not a
malformed message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Self

from ppm_reference.dap import common
from ppm_reference.dap.codec import (
    U16,
    U64,
    EnumCodec,
    Fixed,
    Opaque,
    Struct,
    StructCodec,
    Uint,
    Vector,
    wire,
)
from ppm_reference.dap.common import (
    AggregateShare,
    BatchID,
    Empty,
    HpkeCiphertext,
    HpkeConfig,
    PerReportAnswer,
    PingPongMessage,
    PingPongMessageType,
    ReportID,
    Role,
    TaskID,
    _Id,
    _Uint64,
    batch_checksum,
)
from ppm_reference.dap.profiles.dap18 import messages as m18

__all__ = [
    "ALL_SCALARS",
    "ALL_STRUCTS",
    "AggregateShare",
    "AggregateShareAad",
    "AggregateShareReq",
    "AggregationJobContinueReq",
    "AggregationJobID",
    "AggregationJobInitReq",
    "AggregationJobResp",
    "BatchID",
    "BatchSelector",
    "Collection",
    "CollectionJobID",
    "CollectionReq",
    "Duration",
    "Empty",
    "Extension",
    "ExtensionType",
    "FixedSizeQuery",
    "FixedSizeQueryType",
    "HpkeCiphertext",
    "HpkeConfig",
    "HpkeConfigList",
    "InputShareAad",
    "Interval",
    "PartialBatchSelector",
    "PingPongMessage",
    "PingPongMessageType",
    "PlaintextInputShare",
    "PrepareContinue",
    "PrepareError",
    "PrepareInit",
    "PrepareResp",
    "PrepareRespState",
    "Query",
    "QueryType",
    "Report",
    "ReportID",
    "ReportMetadata",
    "ReportShare",
    "Role",
    "TaskID",
    "Time",
    "batch_checksum",
    "has_duplicate_extension_types",
]

# ---------------------------------------------------------------------------------------
# Identifiers and times (Sections 4, 4.5.1, 4.6.1)
# ---------------------------------------------------------------------------------------


class AggregationJobID(_Id):
    """``opaque AggregationJobID[16]`` (Section 4.5.1), chosen by the Leader."""

    SIZE = 16


class CollectionJobID(_Id):
    """``opaque CollectionJobID[16]`` (Section 4.6.1), chosen by the Collector."""

    SIZE = 16


class Time(_Uint64):
    """``uint64 Time`` (Section 4): seconds since the start of the UNIX epoch.

    (DAP-18's ``Time`` counts ``time_precision`` units; these are seconds.)"""

    @classmethod
    def rounded(cls, posix_seconds: int, time_precision: int) -> Time:
        """``posix_seconds`` rounded down to a multiple of ``time_precision`` (the
        Client SHOULD do so, Section 4.4.2)."""
        if time_precision <= 0:
            raise ValueError("time_precision must be positive")
        return cls(posix_seconds - posix_seconds % time_precision)


class Duration(_Uint64):
    """``uint64 Duration`` (Section 4): a number of seconds."""


TIME = Uint(8, Time)
DURATION = Uint(8, Duration)
REPORT_ID = Fixed(16, ReportID)
TASK_ID = Fixed(32, TaskID)
BATCH_ID = Fixed(32, BatchID)


# ---------------------------------------------------------------------------------------
# Enumerations
# ---------------------------------------------------------------------------------------


class QueryType(IntEnum):
    """``QueryType`` (Section 4.1). ``reserved(0)`` (for testing) never decodes."""

    TIME_INTERVAL = 1
    FIXED_SIZE = 2


class FixedSizeQueryType(IntEnum):
    """``FixedSizeQueryType`` (Section 4.1)."""

    BY_BATCH_ID = 0
    CURRENT_BATCH = 1


class PrepareRespState(IntEnum):
    """``PrepareRespState`` (Section 4.5.1.2). (The draft's enum lacks a comma after
    ``finished(1)``; the values are clear.)"""

    CONTINUE = 0
    FINISHED = 1
    REJECT = 2


class PrepareError(IntEnum):
    """``PrepareError`` (Section 4.5.1.2). Unlike DAP-18's ``ReportError`` it has no
    reserved value: ``batch_collected`` is 0."""

    BATCH_COLLECTED = 0
    REPORT_REPLAYED = 1
    REPORT_DROPPED = 2
    HPKE_UNKNOWN_CONFIG_ID = 3
    HPKE_DECRYPT_ERROR = 4
    VDAF_PREP_ERROR = 5
    BATCH_SATURATED = 6
    TASK_EXPIRED = 7
    INVALID_MESSAGE = 8
    REPORT_TOO_EARLY = 9


class ExtensionType(IntEnum):
    """``ExtensionType`` (Section 4.4.3): DAP-09 declares only ``TBD(0)``."""

    TBD = 0


QUERY_TYPE = EnumCodec(QueryType, 1)


def _non_empty(items: Sequence[Any], name: str) -> None:
    # Vectors <1..2^N-1> of structs: the 1-byte floor means "at least one item".
    if not items:
        raise ValueError(f"{name} must not be empty")


# ---------------------------------------------------------------------------------------
# Basic structs (Section 4)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval(common.Interval):
    """``Interval`` (Section 4): the seconds [start, start + duration). The shared
    interval with DAP-09's ``Time`` and ``Duration`` (seconds, not time_precision units)."""

    start: int = wire(TIME)  # a Time
    duration: int = wire(DURATION)  # a Duration


@dataclass(frozen=True)
class HpkeConfigList(Struct):
    """``HpkeConfig HpkeConfigList<1..2^16-1>`` (Section 4.4.1), in decreasing order of
    preference. The floor of 1 byte only says "not empty" (an HpkeConfig takes at least 10
    bytes). Distinct ``id`` values are an Aggregator obligation; see
    :meth:`has_distinct_ids`."""

    configs: Sequence[HpkeConfig] = wire(Vector(StructCodec(HpkeConfig), 2, min_len=1))

    def _check(self) -> None:
        _non_empty(self.configs, "configs")

    def has_distinct_ids(self) -> bool:
        return len({c.id for c in self.configs}) == len(self.configs)


# ---------------------------------------------------------------------------------------
# Upload (Section 4.4)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Extension(Struct):
    """``Extension`` (Section 4.4.3)."""

    extension_type: int = wire(U16)
    extension_data: bytes = wire(Opaque(2))


# Section 4.4.2: ``Extension extensions<0..2^16-1>``, with no ordering rule.
EXTENSIONS = Vector(StructCodec(Extension), 2)


def has_duplicate_extension_types(extensions: Sequence[Extension]) -> bool:
    """Whether two extensions share a type: the Aggregator then marks the input share
    invalid with ``invalid_message`` (Section 4.5.1.4)."""
    types = [int(e.extension_type) for e in extensions]
    return len(set(types)) != len(types)


@dataclass(frozen=True)
class ReportMetadata(Struct):
    """``ReportMetadata`` (Section 4.4.2)."""

    report_id: ReportID = wire(REPORT_ID)
    time: int = wire(TIME)  # a Time, in seconds


@dataclass(frozen=True)
class Report(m18.Report):
    """``Report`` (Section 4.4.2): the body of an upload (``application/dap-report``).
    DAP-18's ``Report`` has the same fields; only ``ReportMetadata`` differs (DAP-09's has
    no public extensions), so this states that difference alone."""

    report_metadata: ReportMetadata = wire(StructCodec(ReportMetadata))  # type: ignore[assignment]


@dataclass(frozen=True)
class PlaintextInputShare(Struct):
    """``PlaintextInputShare`` (Section 4.4.2): what a Client encrypts to an Aggregator."""

    extensions: Sequence[Extension] = wire(EXTENSIONS)
    payload: bytes = wire(Opaque(4))


@dataclass(frozen=True)
class InputShareAad(Struct):
    """``InputShareAad`` (Section 4.4.2): HPKE associated data of an input share."""

    task_id: TaskID = wire(TASK_ID)
    report_metadata: ReportMetadata = wire(StructCodec(ReportMetadata))
    public_share: bytes = wire(Opaque(4))


# ---------------------------------------------------------------------------------------
# Queries and batch selectors (Sections 4.1, 4.5.1.1, 4.6.2)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FixedSizeQuery(Struct):
    """``FixedSizeQuery`` (Section 4.1)."""

    query_type: FixedSizeQueryType = wire(EnumCodec(FixedSizeQueryType, 1))
    batch_id: BatchID | None = wire(BATCH_ID, when=("query_type", FixedSizeQueryType.BY_BATCH_ID))

    @classmethod
    def by_batch_id(cls, batch_id: bytes) -> FixedSizeQuery:
        return cls(FixedSizeQueryType.BY_BATCH_ID, BatchID(batch_id))

    @classmethod
    def current_batch(cls) -> FixedSizeQuery:
        return cls(FixedSizeQueryType.CURRENT_BATCH)


@dataclass(frozen=True)
class Query(Struct):
    """``Query`` (Section 4.1): a batch interval or a ``FixedSizeQuery``."""

    query_type: QueryType = wire(QUERY_TYPE)
    batch_interval: Interval | None = wire(
        StructCodec(Interval), when=("query_type", QueryType.TIME_INTERVAL)
    )
    fixed_size_query: FixedSizeQuery | None = wire(
        StructCodec(FixedSizeQuery), when=("query_type", QueryType.FIXED_SIZE)
    )

    @classmethod
    def time_interval(cls, batch_interval: Interval) -> Query:
        return cls(QueryType.TIME_INTERVAL, batch_interval=batch_interval)

    @classmethod
    def fixed_size(cls, fixed_size_query: FixedSizeQuery) -> Query:
        return cls(QueryType.FIXED_SIZE, fixed_size_query=fixed_size_query)


@dataclass(frozen=True)
class PartialBatchSelector(Struct):
    """``PartialBatchSelector`` (Section 4.5.1.1): nothing for time_interval, the batch
    ID for fixed_size."""

    query_type: QueryType = wire(QUERY_TYPE)
    batch_id: BatchID | None = wire(BATCH_ID, when=("query_type", QueryType.FIXED_SIZE))

    @classmethod
    def time_interval(cls) -> PartialBatchSelector:
        return cls(QueryType.TIME_INTERVAL)

    @classmethod
    def fixed_size(cls, batch_id: bytes) -> PartialBatchSelector:
        """The selector of a fixed_size job or collection: the batch the Leader chose
        (the Helper learns the batch ID from it; DAP-18 moved it to an extension)."""
        return cls(QueryType.FIXED_SIZE, BatchID(batch_id))


@dataclass(frozen=True)
class BatchSelector(Struct):
    """``BatchSelector`` (Section 4.6.2): the batch interval or the batch ID."""

    query_type: QueryType = wire(QUERY_TYPE)
    batch_interval: Interval | None = wire(
        StructCodec(Interval), when=("query_type", QueryType.TIME_INTERVAL)
    )
    batch_id: BatchID | None = wire(BATCH_ID, when=("query_type", QueryType.FIXED_SIZE))

    @classmethod
    def time_interval(cls, batch_interval: Interval) -> BatchSelector:
        return cls(QueryType.TIME_INTERVAL, batch_interval=batch_interval)

    @classmethod
    def fixed_size(cls, batch_id: bytes) -> BatchSelector:
        return cls(QueryType.FIXED_SIZE, batch_id=BatchID(batch_id))

    @classmethod
    def for_collection(cls, query: Query, part_batch_selector: PartialBatchSelector) -> Self:
        """The batch selector the Collector puts in ``AggregateShareAad`` (Section
        4.6.4): the query's batch interval (time_interval) or the batch ID of the
        ``Collection``'s partial batch selector (fixed_size)."""
        if query.query_type != part_batch_selector.query_type:
            raise ValueError(
                f"query type {query.query_type.name} does not match the collection's "
                f"{part_batch_selector.query_type.name}"
            )
        if query.query_type == QueryType.TIME_INTERVAL:
            assert query.batch_interval is not None
            return cls(QueryType.TIME_INTERVAL, batch_interval=query.batch_interval)
        assert part_batch_selector.batch_id is not None
        return cls(QueryType.FIXED_SIZE, batch_id=part_batch_selector.batch_id)


# ---------------------------------------------------------------------------------------
# Aggregation (Section 4.5)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportShare(m18.ReportShare):
    """``ReportShare`` (Section 4.5.1.1): DAP-18's fields with DAP-09's ``ReportMetadata``."""

    report_metadata: ReportMetadata = wire(StructCodec(ReportMetadata))  # type: ignore[assignment]


@dataclass(frozen=True)
class PrepareInit(Struct):
    """``PrepareInit`` (Section 4.5.1.1). ``payload`` is the Leader's first ping-pong
    message (VDAF-08 Section 5.8)."""

    report_share: ReportShare = wire(StructCodec(ReportShare))
    payload: bytes = wire(Opaque(4))


@dataclass(frozen=True)
class AggregationJobInitReq(Struct):
    """``AggregationJobInitReq`` (Section 4.5.1.1)."""

    agg_param: bytes = wire(Opaque(4))
    part_batch_selector: PartialBatchSelector = wire(StructCodec(PartialBatchSelector))
    prepare_inits: Sequence[PrepareInit] = wire(Vector(StructCodec(PrepareInit), 4, min_len=1))

    def _check(self) -> None:
        _non_empty(self.prepare_inits, "prepare_inits")


@dataclass(frozen=True)
class PrepareResp(PerReportAnswer, Struct):
    """``PrepareResp`` (Section 4.5.1.2), a ``select`` on ``prepare_resp_state``:
    ``payload`` for continue, nothing for finished, ``prepare_error`` for reject. Use
    :meth:`continue_`, :meth:`finished` and :meth:`reject`."""

    report_id: ReportID = wire(REPORT_ID)
    prepare_resp_state: PrepareRespState = wire(EnumCodec(PrepareRespState, 1))
    payload: bytes | None = wire(
        Opaque(4), when=("prepare_resp_state", PrepareRespState.CONTINUE)
    )
    prepare_error: PrepareError | None = wire(
        EnumCodec(PrepareError, 1), when=("prepare_resp_state", PrepareRespState.REJECT)
    )

    answer_states = (PrepareRespState.CONTINUE, PrepareRespState.FINISHED,
                     PrepareRespState.REJECT)
    error_field = "prepare_error"

    @classmethod
    def finished(cls, report_id: bytes) -> PrepareResp:
        """DAP-09's name of the finished answer."""
        return cls.finish(report_id)


@dataclass(frozen=True)
class AggregationJobResp(Struct):
    """``AggregationJobResp`` (Section 4.5.1.2)."""

    prepare_resps: Sequence[PrepareResp] = wire(Vector(StructCodec(PrepareResp), 4, min_len=1))

    def _check(self) -> None:
        _non_empty(self.prepare_resps, "prepare_resps")


@dataclass(frozen=True)
class PrepareContinue(Struct):
    """``PrepareContinue`` (Section 4.5.2.1)."""

    report_id: ReportID = wire(REPORT_ID)
    payload: bytes = wire(Opaque(4))


@dataclass(frozen=True)
class AggregationJobContinueReq(Struct):
    """``AggregationJobContinueReq`` (Section 4.5.2.1). ``step`` 0 decodes but the Helper
    answers it with ``invalidMessage`` (Section 4.5.2.2)."""

    step: int = wire(U16)
    prepare_continues: Sequence[PrepareContinue] = wire(
        Vector(StructCodec(PrepareContinue), 4, min_len=1)
    )

    def _check(self) -> None:
        _non_empty(self.prepare_continues, "prepare_continues")


# ---------------------------------------------------------------------------------------
# Collection (Section 4.6)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CollectionReq(Struct):
    """``CollectionReq`` (Section 4.6.1), media type ``application/dap-collect-req``."""

    query: Query = wire(StructCodec(Query))
    agg_param: bytes = wire(Opaque(4))


@dataclass(frozen=True)
class Collection(Struct):
    """``Collection`` (Section 4.6.1). ``interval`` (seconds) is the smallest interval
    containing the batch's report times whose start and duration are multiples of
    ``time_precision``."""

    part_batch_selector: PartialBatchSelector = wire(StructCodec(PartialBatchSelector))
    report_count: int = wire(U64)
    interval: Interval = wire(StructCodec(Interval))
    leader_encrypted_agg_share: HpkeCiphertext = wire(StructCodec(HpkeCiphertext))
    helper_encrypted_agg_share: HpkeCiphertext = wire(StructCodec(HpkeCiphertext))

    def batch_selector(self, query: Query) -> BatchSelector:
        """The ``BatchSelector`` of this collection for the ``query`` that asked for it,
        as the aggregate shares' AAD binds it (Section 4.6.4). Raises ValueError if the
        query is of another query type."""
        return BatchSelector.for_collection(query, self.part_batch_selector)


@dataclass(frozen=True)
class AggregateShareReq(Struct):
    """``AggregateShareReq`` (Section 4.6.2). ``checksum`` is :func:`batch_checksum`.
    Unlike DAP-18's, it carries the batch selector and aggregation parameter itself, not
    the Collector's request (DAP-09 binds no collection request into the AAD)."""

    batch_selector: BatchSelector = wire(StructCodec(BatchSelector))
    agg_param: bytes = wire(Opaque(4))
    report_count: int = wire(U64)
    checksum: bytes = wire(Fixed(32))


@dataclass(frozen=True)
class AggregateShareAad(Struct):
    """``AggregateShareAad`` (Section 4.6.4): HPKE associated data of an aggregate share."""

    task_id: TaskID = wire(TASK_ID)
    agg_param: bytes = wire(Opaque(4))
    batch_selector: BatchSelector = wire(StructCodec(BatchSelector))


# Every struct of this module, in the draft's order (shared ones included).
ALL_STRUCTS: tuple[type[Struct], ...] = (
    # Basic types and upload (Sections 4.1, 4.4)
    Empty, Interval, HpkeCiphertext, HpkeConfig, HpkeConfigList, Extension, ReportMetadata,
    Report, PlaintextInputShare, InputShareAad,
    # Queries and batch selectors (Sections 4.1, 4.5.1.1, 4.6.2)
    FixedSizeQuery, Query, PartialBatchSelector, BatchSelector,
    # Aggregation (Section 4.5)
    ReportShare, PrepareInit, AggregationJobInitReq, PrepareResp, AggregationJobResp,
    PrepareContinue, AggregationJobContinueReq,
    # Collection (Section 4.6)
    CollectionReq, Collection, AggregateShareReq, AggregateShare, AggregateShareAad,
)

# The HTTP message bodies (Section 8.1), by class name: what the profile's media types name.
HTTP_MESSAGES: tuple[type[Struct], ...] = (
    HpkeConfigList,
    Report,
    AggregationJobInitReq,
    AggregationJobResp,
    AggregationJobContinueReq,
    AggregateShareReq,
    AggregateShare,
    CollectionReq,
    Collection,
)

ALL_SCALARS: tuple[type[Any], ...] = (
    ReportID,
    TaskID,
    BatchID,
    AggregationJobID,
    CollectionJobID,
    Time,
    Duration,
)
