"""The Aggregators' datastore as the protocol core sees it: records and the narrow
interface the core uses. The core owns this interface; the backends in ``dap.storage``
implement it (so the core imports no backend: an import-linter contract).

Every state change of the protocol is one transaction (`Datastore.transaction()`), so
that a crash leaves either the state before or the state after it: nothing answered
to a client or peer is lost and no report is counted twice. Records hold encoded DAP
messages as bytes; the datastore knows no protocol logic. The interface is kept small
so that a PostgreSQL backend can follow (several replicas then coordinate through row
leases, see `lease_*` on jobs).

Backends: `dap.storage.sqlite.SqliteDatastore` (embedded, the default) and
`dap.storage.postgres.PostgresDatastore` (transactions one at a time over every process,
so the same serial semantics; picked by a ``postgresql://`` datastore URL,
`dap.storage.open_datastore`).
`dap.storage` re-exports everything here for them and for the servers.

States. The state of each record is a `StrEnum` defined here, beside the record that
holds it (the core, the servers and the backends import them from here; a backend may
name them in its queries). A member is a `str` equal to
its value, so what is stored is byte-identical to the former string literals and existing
datastores keep working; records read back are converted to the enum (`__post_init__`),
which also refuses an unknown stored value.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypeVar


class StorageError(Exception):
    """A datastore failure (not a protocol error)."""


class HpkeKeyState(StrEnum):
    """`HpkeKeyRecord.state` (rotation: pending -> active -> expired -> deleted)."""

    PENDING = "pending"             # decrypts, not advertised yet
    ACTIVE = "active"               # advertised in hpke_config
    EXPIRED = "expired"             # no longer advertised, still decrypts


class ReportState(StrEnum):
    """`ClientReportRecord.state`: a report uploaded to the Leader."""

    NEW = "new"                     # waiting for an aggregation job
    IN_JOB = "in_job"               # in an active aggregation job
    AGGREGATED = "aggregated"       # its output share is committed
    FAILED = "failed"               # rejected (see `error`) or its job abandoned


class AggregationJobState(StrEnum):
    """`AggregationJobRecord.state` (Leader and Helper)."""

    ACTIVE = "active"
    FINISHED = "finished"
    ABANDONED = "abandoned"         # Leader: given up (Section 4.5.5)
    DELETED = "deleted"             # Helper: deleted by the Leader


class ReportAggregationState(StrEnum):
    """`ReportAggregationRecord.state`: one report in one aggregation job."""

    ACTIVE = "active"               # verification continues (verify_state is stored)
    FINISHED_OUTBOUND = "finished_outbound"  # Leader: finished, last message not yet
    #                                          acknowledged (verify_state: the out share)
    FINISHED = "finished"           # output share committed
    REJECTED = "rejected"           # see `error`


class CollectionJobState(StrEnum):
    """`CollectionJobRecord.state` (Leader)."""

    START = "start"                 # waiting for its batch
    COLLECTING = "collecting"       # batch frozen, AggregateShareReq sent to the Helper
    FINISHED = "finished"
    FAILED = "failed"
    DELETED = "deleted"


class AggregateShareJobState(StrEnum):
    """`AggregateShareJobRecord.state` (Helper)."""

    START = "start"                 # batch collected, share not yet computed
    FINISHED = "finished"
    FAILED = "failed"
    DELETED = "deleted"


class LeaderBatchState(StrEnum):
    """`LeaderBatchRecord.state` (Leader, leader-selected batch mode)."""

    OPEN = "open"                   # takes reports
    COLLECTING = "collecting"       # chosen by a collection job
    COLLECTED = "collected"


@dataclass
class TaskRecord:
    """An Aggregator's view of a task: the agreed configuration plus its secrets."""

    task_id: bytes
    role: str                       # "leader" or "helper"
    profile: str                    # the profile's name (dap.profiles)
    config: bytes                   # encoded TaskConfiguration (profile's encoding)
    vdaf_verify_key: bytes
    collector_hpke_config: bytes    # encoded HpkeConfig
    aggregator_auth_token: str      # Leader -> Helper bearer token
    collector_auth_token: str | None = None   # Collector -> Leader (Leader only)
    options: str = "{}"             # JSON: DP policy, job sizes, ... (see dap.core.tasks)


@dataclass
class HpkeKeyRecord:
    config_id: int
    config: bytes                   # encoded HpkeConfig
    private_key: bytes
    state: HpkeKeyState
    created_at: float = 0.0

    def __post_init__(self) -> None:
        self.state = HpkeKeyState(self.state)


@dataclass
class ClientReportRecord:
    """A report uploaded to the Leader, waiting for (or assigned to) an aggregation job."""

    task_id: bytes
    report_id: bytes
    time: int
    report: bytes                   # encoded Report (emptied once it is never needed again)
    state: ReportState = ReportState.NEW
    aggregation_job_id: bytes | None = None
    error: int | None = None
    created_at: float = 0.0

    def __post_init__(self) -> None:
        self.state = ReportState(self.state)


@dataclass
class AggregationJobRecord:
    task_id: bytes
    job_id: bytes
    role: str
    state: AggregationJobState
    step: int
    agg_param: bytes
    batch_id: bytes | None = None   # leader-selected batch mode
    request: bytes = b""            # Leader: the init request body (resent byte for byte)
    request_hash: bytes = b""       # Helper: digest of the init request (idempotency)
    last_continue_hash: bytes = b""
    response: bytes | None = None   # Helper: last AggregationJobResp; Leader: unused
    helper_url: str | None = None   # Leader: location of the job at the Helper
    attempts: int = 0
    next_attempt_at: float = 0.0
    lease_expiry: float = 0.0
    error: str | None = None
    created_at: float = 0.0
    # Who holds the lease (`acquire_aggregation_jobs` draws a new token each time): a
    # worker commits its work on the job only while the token is still its own
    # (`get_leased_aggregation_job`), so one whose lease expired and was taken by another
    # process cannot write over that process's work.
    lease_token: bytes = b""

    def __post_init__(self) -> None:
        self.state = AggregationJobState(self.state)


@dataclass
class ReportAggregationRecord:
    task_id: bytes
    job_id: bytes
    ord: int
    report_id: bytes
    time: int
    state: ReportAggregationState
    verify_state: bytes | None = None
    error: int | None = None
    min_batch_bound: int = 0        # the report's minimum batch size bound (0: none)

    def __post_init__(self) -> None:
        self.state = ReportAggregationState(self.state)


@dataclass
class BatchBucketRecord:
    """Batch bucket (DAP-18 Section 4.5.3.3): running aggregate share, count, checksum."""

    task_id: bytes
    bucket: bytes                   # encoded Interval (time-interval) or BatchID
    agg_param: bytes
    agg_share: bytes | None = None  # encoded aggregate share (None: agg_init)
    report_count: int = 0
    checksum: bytes = bytes(32)
    min_time: int | None = None
    max_time: int | None = None
    min_batch_bound: int = 0        # the largest minimum batch size bound of its reports
    collected: bool = False


@dataclass
class CollectionJobRecord:
    task_id: bytes
    job_id: bytes
    request: bytes                  # encoded CollectionJobReq
    request_hash: bytes
    state: CollectionJobState
    batch_id: bytes | None = None   # leader-selected: chosen batch
    response: bytes | None = None   # encoded CollectionJobResp
    error: str | None = None        # problem type token
    error_detail: str | None = None
    attempts: int = 0
    next_attempt_at: float = 0.0
    created_at: float = 0.0
    # Time-interval: reports uploaded after this (Leader clock) wait for the job to
    # freeze its batch; it moves on when the batch is still short (`leader.py`). 0: not
    # yet looked at by the Leader's worker (created_at applies).
    cutoff: float = 0.0

    def __post_init__(self) -> None:
        self.state = CollectionJobState(self.state)


@dataclass
class AggregateShareJobRecord:
    task_id: bytes
    share_id: bytes
    request: bytes                  # encoded AggregateShareReq
    request_hash: bytes
    state: AggregateShareJobState
    response: bytes | None = None   # encoded AggregateShare
    error: str | None = None
    error_detail: str | None = None
    created_at: float = 0.0
    attempts: int = 0               # failed background attempts (see `error_detail`)
    next_attempt_at: float = 0.0

    def __post_init__(self) -> None:
        self.state = AggregateShareJobState(self.state)


@dataclass
class LeaderBatchRecord:
    """A batch of the leader-selected batch mode, as the Leader fills it."""

    task_id: bytes
    batch_id: bytes
    assigned: int = 0               # reports put into aggregation jobs for this batch
    state: LeaderBatchState = LeaderBatchState.OPEN
    created_at: float = 0.0

    def __post_init__(self) -> None:
        self.state = LeaderBatchState(self.state)


@dataclass
class BatchResultRecord:
    """What the Leader released for a batch: the collection result it gave the Collector
    (encoded `CollectionJobResp` / DAP-09 `Collection`), kept so that the same batch is
    never computed (and noised) twice: a repeated query is answered with these bytes."""

    task_id: bytes
    batch: bytes                    # encoded Interval (time-interval) or BatchID
    agg_param: bytes
    request: bytes                  # the collection request that released it
    response: bytes
    created_at: float = 0.0


@dataclass
class TaskWorkRecord:
    """Background work on a task that failed (Leader job creation): the error, and when
    to try again (backoff), so that one broken task does not hold up the others."""

    task_id: bytes
    attempts: int
    next_attempt_at: float
    error: str


class Transaction(Protocol):
    """The operations of one transaction."""

    # tasks and keys
    def put_task(self, task: TaskRecord) -> None: ...
    def get_task(self, task_id: bytes) -> TaskRecord | None: ...
    def list_tasks(self) -> list[TaskRecord]: ...
    def delete_task(self, task_id: bytes) -> None: ...
    def put_hpke_key(self, key: HpkeKeyRecord) -> None: ...
    def list_hpke_keys(self) -> list[HpkeKeyRecord]: ...
    def set_hpke_key_state(self, config_id: int, state: HpkeKeyState) -> None: ...
    def delete_hpke_key(self, config_id: int) -> None: ...

    # Leader: uploaded reports
    def put_client_report(self, report: ClientReportRecord) -> bool: ...
    def put_client_reports(self, reports: Sequence[ClientReportRecord]
                           ) -> set[tuple[bytes, bytes]]:
        """`put_client_report` of each, in one statement where the backend can: returns
        the (task ID, report ID) of those stored (of a pair repeated in `reports`, the
        caller counts only the first stored)."""
        ...
    def get_client_reports(self, task_id: bytes, report_ids: list[bytes]
                           ) -> list[ClientReportRecord]: ...
    def list_new_reports(self, task_id: bytes, limit: int,
                         held: Sequence[tuple[int, int, float]] = ()
                         ) -> list[ClientReportRecord]: ...
    def count_reports(self, task_id: bytes, states: tuple[ReportState, ...],
                      time_from: int | None = None, time_to: int | None = None,
                      created_before: float | None = None) -> int: ...
    def oldest_new_report_age(self, task_id: bytes, now: float) -> float | None: ...
    def set_report_states(self, task_id: bytes, report_ids: list[bytes], state: ReportState,
                          job_id: bytes | None = None, error: int | None = None,
                          drop_encodings: bool = False) -> None:
        """Set the reports' state, job and error; `drop_encodings`: also replace their
        stored encodings by empty ones (no longer needed once aggregated or failed)."""
        ...

    # aggregation jobs
    def put_aggregation_job(self, job: AggregationJobRecord) -> None: ...
    def update_aggregation_job(self, job: AggregationJobRecord) -> None: ...
    def get_aggregation_job(self, task_id: bytes, job_id: bytes) -> AggregationJobRecord | None: ...
    def find_aggregation_job_by_hash(self, task_id: bytes, request_hash: bytes
                                     ) -> AggregationJobRecord | None: ...
    def acquire_aggregation_jobs(self, role: str, now: float, lease: float, limit: int
                                 ) -> list[AggregationJobRecord]: ...
    # (Above: active jobs of `role` due (next_attempt_at <= now) and not leased (lease
    # expired), oldest due first; each gets lease_expiry = now + lease and a fresh random
    # lease_token. Concurrent callers in other processes never get the same job while its
    # lease runs: SQLite's BEGIN IMMEDIATE, PostgreSQL's FOR UPDATE SKIP LOCKED.)
    def get_leased_aggregation_job(self, task_id: bytes, job_id: bytes, lease_token: bytes,
                                   with_request: bool = True) -> AggregationJobRecord | None:
        """The job if its lease token is still `lease_token` (nobody acquired it since),
        locked until the transaction ends (PostgreSQL: SELECT ... FOR UPDATE); None
        otherwise. The compare of a compare-and-set: the caller then updates it.
        `with_request=False`: its `request` (the Leader's stored request, every report's
        shares) is not read, and is b"" in the record: for a caller that holds it already
        and sets it before writing the record back."""
        ...
    def count_active_aggregation_jobs(self, task_id: bytes, batch_id: bytes | None = None,
                                      time_from: int | None = None,
                                      time_to: int | None = None) -> int: ...
    def put_report_aggregations(self, records: list[ReportAggregationRecord]) -> None: ...
    def get_report_aggregations(self, task_id: bytes, job_id: bytes
                                ) -> list[ReportAggregationRecord]: ...
    def update_report_aggregation(self, record: ReportAggregationRecord) -> None: ...
    def update_report_aggregations(self, records: Sequence[ReportAggregationRecord]
                                   ) -> None:
        """`update_report_aggregation` of each (state, verify_state, error), in one
        statement where the backend can."""
        ...

    # replay protection and batch buckets
    def is_report_aggregated(self, task_id: bytes, report_id: bytes) -> bool: ...
    def mark_report_aggregated(self, task_id: bytes, report_id: bytes,
                               time: int | None = None) -> bool: ...
    def aggregated_among(self, task_id: bytes, report_ids: Sequence[bytes]) -> set[bytes]:
        """Those of `report_ids` that `is_report_aggregated` (one query)."""
        ...
    def mark_reports_aggregated(self, task_id: bytes,
                                reports: Sequence[tuple[bytes, int | None]]) -> set[bytes]:
        """`mark_report_aggregated` of each (report ID, time), in one statement where the
        backend can: returns the report IDs newly marked (of an ID repeated in `reports`,
        the caller counts only the first)."""
        ...
    def get_bucket(self, task_id: bytes, bucket: bytes, agg_param: bytes
                   ) -> BatchBucketRecord | None: ...
    def put_bucket(self, record: BatchBucketRecord) -> None: ...
    def list_buckets(self, task_id: bytes, buckets: list[bytes] | None = None
                     ) -> list[BatchBucketRecord]: ...
    def is_bucket_collected(self, task_id: bytes, bucket: bytes) -> bool: ...
    def mark_buckets_collected(self, task_id: bytes, buckets: list[bytes]) -> None: ...
    def list_buckets_in_range(self, task_id: bytes, low: bytes, high: bytes
                              ) -> list[BatchBucketRecord]: ...
    def mark_interval_collected(self, task_id: bytes, start: int, end: int) -> None: ...
    def interval_overlaps_collected(self, task_id: bytes, start: int, end: int) -> bool: ...
    def guard_uploads(self, task_ids: Sequence[bytes], exclusive: bool = False) -> None:
        """Until this transaction ends, keep the uploads to these tasks apart from the
        freeze of their collected intervals: an upload transaction takes it shared (for
        its tasks, before it checks their collected intervals), the freeze exclusive (for
        its task, before it counts the reports still to aggregate). The freeze then waits
        for the uploads in flight, and sees their reports; an upload that starts later
        waits for the freeze and is refused (`batch_collected`). A backend with one
        writer at a time (SQLite) needs nothing: an upload transaction and the freeze
        never overlap there."""
        ...
    def commit_context(self, task_id: bytes, times: Sequence[int], buckets: Sequence[bytes]
                       ) -> tuple[int | None, set[int], set[bytes]]:
        """What the commit checks read, in one query: the task's eviction horizon
        (`get_eviction_horizon`), those of `times` that a collected interval holds
        (`interval_overlaps_collected(t, t + 1)`) and those of `buckets` that are
        collected (`is_bucket_collected`)."""
        ...
    def unmark_interval_collected(self, task_id: bytes, start: int, end: int) -> None: ...
    def unmark_buckets_collected(self, task_id: bytes, buckets: list[bytes]) -> None: ...
    def count_reports_in_active_jobs(self, task_id: bytes, batch_id: bytes) -> int: ...

    # VDAFs with an aggregation parameter (Poplar1): a report is aggregated once per
    # parameter, and a batch collected once per parameter (see dap.core.agg_params)
    def record_report_agg_param(self, task_id: bytes, report_id: bytes,
                                agg_param: bytes) -> bool: ...
    def report_agg_params(self, task_id: bytes, report_ids: list[bytes]
                          ) -> dict[bytes, list[bytes]]: ...
    def mark_agg_param_collected(self, task_id: bytes, start: int, end: int,
                                 agg_param: bytes) -> None: ...
    def unmark_agg_param_collected(self, task_id: bytes, start: int, end: int,
                                   agg_param: bytes) -> None: ...
    def list_collected_agg_params(self, task_id: bytes, start: int, end: int
                                  ) -> list[tuple[int, int, bytes]]: ...
    def list_reports_in_interval(self, task_id: bytes, states: tuple[ReportState, ...],
                                 time_from: int, time_to: int) -> list[ClientReportRecord]: ...

    # collection (Leader) and aggregate shares (Helper)
    def put_collection_job(self, job: CollectionJobRecord) -> None: ...
    def update_collection_job(self, job: CollectionJobRecord) -> None: ...
    def get_collection_job(self, task_id: bytes, job_id: bytes) -> CollectionJobRecord | None: ...
    def find_collection_job_by_hash(self, task_id: bytes, request_hash: bytes
                                    ) -> CollectionJobRecord | None: ...
    def list_collection_jobs(self, states: tuple[CollectionJobState, ...], now: float
                             ) -> list[CollectionJobRecord]: ...
    def put_aggregate_share_job(self, job: AggregateShareJobRecord) -> None: ...
    def update_aggregate_share_job(self, job: AggregateShareJobRecord) -> None: ...
    def get_aggregate_share_job(self, task_id: bytes, share_id: bytes
                                ) -> AggregateShareJobRecord | None: ...
    def find_aggregate_share_job_by_hash(self, task_id: bytes, request_hash: bytes
                                         ) -> AggregateShareJobRecord | None: ...
    def list_aggregate_share_jobs(self, states: tuple[AggregateShareJobState, ...],
                                  now: float | None = None) -> list[AggregateShareJobRecord]: ...
    def list_task_collection_jobs(self, task_id: bytes, states: tuple[CollectionJobState, ...]
                                  ) -> list[CollectionJobRecord]: ...
    def get_batch_result(self, task_id: bytes, batch: bytes, agg_param: bytes
                         ) -> BatchResultRecord | None: ...
    def list_batch_results(self, task_id: bytes, batch: bytes) -> list[BatchResultRecord]: ...
    def put_batch_result(self, record: BatchResultRecord) -> bool: ...

    # Leader: leader-selected batches
    def put_leader_batch(self, batch: LeaderBatchRecord) -> None: ...
    def update_leader_batch(self, batch: LeaderBatchRecord) -> None: ...
    def list_leader_batches(self, task_id: bytes, states: tuple[LeaderBatchState, ...]
                            ) -> list[LeaderBatchRecord]: ...

    # background work that failed, per task (error isolation)
    def get_task_work(self, task_id: bytes) -> TaskWorkRecord | None: ...
    def list_task_work(self) -> list[TaskWorkRecord]:
        """Every task's record (the tasks whose work failed lately: a few rows)."""
    def put_task_work(self, record: TaskWorkRecord) -> None: ...
    def delete_task_work(self, task_id: bytes) -> None: ...

    # several processes per Aggregator (dap.server.scheduling): named leases, and the
    # indexed queries that find work without looking at every task
    def try_lease(self, kind: str, key: bytes, holder: bytes, now: float, duration: float
                  ) -> bool:
        """Take (or renew) the lease `kind`/`key` for `holder` until `now + duration`,
        if it is free, expired, or already `holder`'s. Returns whether `holder` holds it
        now. Within a transaction that then writes, a True is a compare-and-set: nobody
        else took the lease meanwhile (PostgreSQL: the row stays locked until commit)."""
        ...
    def release_lease(self, kind: str, key: bytes, holder: bytes) -> None:
        """Give the lease up, if `holder` holds it."""
        ...
    def tasks_with_new_reports(self, limit: int, after: bytes | None = None) -> list[bytes]:
        """IDs of the tasks that have reports in state NEW (at most `limit`, in task ID
        order; with `after`, only the IDs greater than it), from an index: the cost grows
        with the IDs returned, not with the tasks or the reports."""
        ...
    def next_work_due(self, role: str) -> float | None:
        """The earliest time at which background work of `role` becomes due: an active
        aggregation job's max(next_attempt_at, lease_expiry), and the Leader's pending
        collection jobs' / the Helper's started aggregate shares' next_attempt_at. None:
        nothing pending. (Work that is due now gives a time <= now.)"""
        ...

    # retention (dap.core.retention): what the Aggregator has evicted, and the evictions
    def get_eviction_horizon(self, task_id: bytes) -> int | None: ...
    def set_eviction_horizon(self, task_id: bytes, horizon: int) -> None: ...
    def evict_reports_before(self, task_id: bytes, horizon: int) -> int: ...
    def delete_finished_jobs(self, task_id: bytes | None, created_before: float) -> int: ...


class Datastore(Protocol):
    def transaction(self) -> AbstractContextManager[Transaction]: ...
    def read(self) -> AbstractContextManager[Transaction]:
        """A transaction that only reads (a write in it fails): a consistent snapshot of
        what was committed. It may run beside the others (PostgreSQL: without the
        exclusive mode's lock), so what it reads may be stale by the time it is used:
        for decisions that a later transaction checks again (compare-and-set) or that
        only cost work (when to look again)."""
        ...
    def upload_transaction(self) -> AbstractContextManager[Transaction]:
        """A transaction for the Leader's uploads only (`dap.core.leader.commit_uploads`:
        the eviction horizon and collected-interval checks, then `put_client_reports`).
        It may run beside the other transactions (PostgreSQL's exclusive mode: without
        its lock), so that uploads do not queue behind job creation and response
        processing: the reports it inserts are new rows under a unique key, and what it
        checks, job creation checks again under the lock."""
        ...
    def close(self) -> None: ...


_Item = TypeVar("_Item")


def iter_chunks(items: Sequence[_Item], size: int = 500) -> Iterator[Sequence[_Item]]:
    """`items` in slices of at most `size` (a statement's bound parameters are limited)."""
    for i in range(0, len(items), size):
        yield items[i : i + size]
