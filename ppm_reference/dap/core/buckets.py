"""Batch buckets (DAP-18 Section 4.5.3.3) and batch selection (Section 5).

A time-interval bucket is identified by the encoded `Interval(t, 1)` of the report time
`t` (times are in units of time_precision); a leader-selected bucket by its BatchID.
Encoded Intervals are fixed-width big-endian, so their byte order is time order and a
batch interval is a range of bucket identifiers.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ppm_reference.dap.common import (
    BatchMode,
    Duration,
    Interval,
    ReportError,
    Time,
    batch_checksum,
)
from ppm_reference.dap.core import agg_params
from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.core.store import BatchBucketRecord, Transaction
from ppm_reference.dap.core.tasks import AggregatorTask

_TIME_BUCKET = struct.Struct(">QQ")


def time_bucket(time: int) -> bytes:
    """A time-interval report's batch bucket: the encoded ``Interval`` of its time unit,
    ``Interval(Time(time), Duration(1)).encode()``, packed directly (two uint64; it is
    computed for every report a job commits)."""
    return _TIME_BUCKET.pack(time, 1)


def bucket_for(task: AggregatorTask, report_time: int, batch_id: bytes | None) -> bytes:
    if task.batch_mode == BatchMode.TIME_INTERVAL:
        return time_bucket(report_time)
    if batch_id is None:
        raise ValueError("leader-selected report without a batch ID")
    return bytes(batch_id)


class CommitMemo:
    """What the commit checks read that one transaction does not change while it checks
    and commits a job's reports: the task's eviction horizon, whether a report time unit
    overlaps a collected interval, whether a bucket is collected. Read once per
    transaction (each job holds reports of a few time units and buckets) instead of once
    per report. Only for use inside the one transaction, before anything in it marks
    batches collected."""

    def __init__(self) -> None:
        self._horizon: tuple[int | None] | None = None
        self._collected_times: dict[int, bool] = {}
        self._collected_buckets: dict[bytes, bool] = {}
        self._checked: set[bytes] = set()       # report IDs whose replay state was read
        self._aggregated: set[bytes] = set()    # ... and of those, the aggregated ones

    def prefetch_aggregated(self, tx: Transaction, task: AggregatorTask,
                            report_ids: Sequence[bytes]) -> None:
        """Read whether each of `report_ids` is aggregated, in one query (the checks of a
        job's reports then make no round trip each)."""
        ids = [bytes(r) for r in report_ids if bytes(r) not in self._checked]
        if ids:
            self._aggregated |= tx.aggregated_among(task.task_id, ids)
            self._checked.update(ids)

    def prefetch(self, tx: Transaction, task: AggregatorTask, times: Iterable[int],
                 buckets: Iterable[bytes] = ()) -> None:
        """Read the horizon, and whether each of `times` (time-interval tasks) or
        `buckets` (leader-selected) is collected, in one query (`commit_context`) for
        what is not memoised yet: the checks of a job's or an upload's reports then make
        no round trip each."""
        if task.batch_mode == BatchMode.TIME_INTERVAL:
            ts = {int(t) for t in times} - self._collected_times.keys()
            bs: set[bytes] = set()
        else:
            ts = set()
            bs = {bytes(b) for b in buckets} - self._collected_buckets.keys()
        if not ts and not bs and self._horizon is not None:
            return
        horizon, times_in, buckets_in = tx.commit_context(task.task_id, sorted(ts),
                                                          sorted(bs))
        self._horizon = (horizon,)
        for t in ts:
            self._collected_times[t] = t in times_in
        for b in bs:
            self._collected_buckets[b] = b in buckets_in

    def known_aggregated(self, report_ids: Sequence[bytes], aggregated: set[bytes]) -> None:
        """Take whether each of `report_ids` is aggregated from a read made before the
        transaction (`aggregated`: those that are): for checks that are early outs only,
        whose commit checks again (the marking in `commit_output_shares`)."""
        ids = [bytes(r) for r in report_ids]
        self._checked.update(ids)
        self._aggregated |= {r for r in ids if r in aggregated}

    def report_aggregated(self, tx: Transaction, task: AggregatorTask,
                          report_id: bytes) -> bool:
        """`is_report_aggregated`, from the prefetch when it covered `report_id` (the
        transaction has not marked it since: `commit_output_shares` checks first)."""
        rid = bytes(report_id)
        if rid in self._checked:
            return rid in self._aggregated
        return tx.is_report_aggregated(task.task_id, rid)

    def horizon(self, tx: Transaction, task: AggregatorTask) -> int | None:
        if self._horizon is None:
            self._horizon = (tx.get_eviction_horizon(task.task_id),)
        return self._horizon[0]

    def time_collected(self, tx: Transaction, task: AggregatorTask, report_time: int) -> bool:
        hit = self._collected_times.get(report_time)
        if hit is None:
            hit = self._collected_times[report_time] = tx.interval_overlaps_collected(
                task.task_id, report_time, report_time + 1)
        return hit

    def bucket_collected(self, tx: Transaction, task: AggregatorTask, bucket: bytes) -> bool:
        hit = self._collected_buckets.get(bucket)
        if hit is None:
            hit = self._collected_buckets[bucket] = tx.is_bucket_collected(task.task_id,
                                                                            bucket)
        return hit


def commit_error(tx: Transaction, task: AggregatorTask, report_id: bytes, report_time: int,
                 bucket: bytes, agg_param: bytes = b"", memo: CommitMemo | None = None,
                 replay: bool = True) -> ReportError | None:
    """The checks before committing an output share (Section 4.5.3.3), and the report
    whose replay state this Aggregator may have evicted (`dap.core.retention`): DAP-18
    Section 4.5.2.4, "If an Aggregator cannot determine if an input share is valid ...
    it MUST mark the input share as invalid with error report_dropped". A VDAF with an
    aggregation parameter has its own replay checks (`agg_params.replay_error`).
    `memo`: the transaction's `CommitMemo` (none: read everything). `replay=False`: the
    replay check (last) is left to the caller, which marks the report aggregated with a
    statement that says whether it already was (`commit_output_shares`)."""
    memo = memo or CommitMemo()
    horizon = memo.horizon(tx, task)
    if horizon is not None and report_time < horizon:
        return ReportError.REPORT_DROPPED
    if agg_params.uses_agg_param(task):
        return agg_params.replay_error(tx, task, report_id, report_time, agg_param)
    if task.batch_mode == BatchMode.TIME_INTERVAL:
        if memo.time_collected(tx, task, report_time):
            return ReportError.BATCH_COLLECTED
    elif memo.bucket_collected(tx, task, bucket):
        return ReportError.BATCH_COLLECTED
    if replay and memo.report_aggregated(tx, task, report_id):
        return ReportError.REPORT_REPLAYED
    return None


@dataclass
class OutputShare:
    report_id: bytes
    time: int
    bucket: bytes
    out_share: Any
    min_batch_bound: int = 0        # the report's MIN_BATCH_SIZE_EXTENSION (0: none)


def commit_output_shares(tx: Transaction, task: AggregatorTask, agg_param: bytes,
                         shares: Sequence[OutputShare], memo: CommitMemo | None = None
                         ) -> dict[bytes, ReportError]:
    """Commit output shares to their batch buckets: update aggregate share, count and
    checksum, and record each report ID for replay checks. Returns the reports that could
    not be committed, with their error; the others are committed. `memo`: the
    transaction's `CommitMemo`, if its checks already read it."""
    memo = memo or CommitMemo()
    vdaf = task.vdaf
    decoded_param = vdaf.decode_agg_param(agg_param)
    failed: dict[bytes, ReportError] = {}
    per_param = agg_params.uses_agg_param(task)
    passed: list[OutputShare] = []
    if shares:
        memo.prefetch(tx, task, [s.time for s in shares], [s.bucket for s in shares])
    for share in shares:
        # Without an aggregation parameter the replay check is the marking below (it says
        # which reports were aggregated already, in one statement or two): it comes
        # last in `commit_error` too, so the errors are the same, and a job's reports
        # are not looked up once more (a statement over every report of the job, in the
        # transaction).
        err = commit_error(tx, task, share.report_id, share.time, share.bucket, agg_param,
                           memo, replay=per_param)
        if err is None and per_param and not agg_params.record_aggregated(
                tx, task, share.report_id, agg_param):
            err = ReportError.REPORT_REPLAYED
        if err is not None:
            failed[bytes(share.report_id)] = err
        else:
            passed.append(share)
    if not per_param:
        # Marked in one statement; a report ID twice in `shares` is committed once (the
        # first), the other is replayed, as with one statement per report.
        marked = tx.mark_reports_aggregated(task.task_id,
                                            [(s.report_id, s.time) for s in passed])
        first = []
        for share in passed:
            rid = bytes(share.report_id)
            if rid in marked:
                marked.discard(rid)
                first.append(share)
            else:
                failed[rid] = ReportError.REPORT_REPLAYED
        passed = first
    by_bucket: dict[bytes, list[OutputShare]] = {}
    for share in passed:
        by_bucket.setdefault(share.bucket, []).append(share)
    for bucket, items in by_bucket.items():
        record = tx.get_bucket(task.task_id, bucket, agg_param) or BatchBucketRecord(
            task.task_id, bucket, agg_param)
        agg = vdaf.agg_init(decoded_param) if record.agg_share is None else \
            vdaf.decode_agg_share(decoded_param, record.agg_share)
        for item in items:
            agg = vdaf.agg_update(decoded_param, agg, item.out_share)
        record.agg_share = vdaf.encode_agg_share(agg)
        record.report_count += len(items)
        record.checksum = xor_bytes(record.checksum, batch_checksum(i.report_id for i in items))
        times = [i.time for i in items]
        record.min_time = min(times) if record.min_time is None else min(record.min_time, *times)
        record.max_time = max(times) if record.max_time is None else max(record.max_time, *times)
        record.min_batch_bound = max(record.min_batch_bound,
                                     *(i.min_batch_bound for i in items))
        tx.put_bucket(record)
    return failed


def xor_bytes(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


@dataclass
class MergedBatch:
    agg_share: Any
    report_count: int
    checksum: bytes
    interval: Interval
    buckets: list[bytes]
    min_batch_bound: int = 0        # the largest bound of any report in the batch


def merge_buckets(task: AggregatorTask, agg_param: bytes,
                  records: Sequence[BatchBucketRecord]) -> MergedBatch:
    """Combine batch buckets: merge aggregate shares, sum counts, XOR checksums
    (Section 4.6.4). The interval is the smallest one containing every report time."""
    vdaf = task.vdaf
    decoded = vdaf.decode_agg_param(agg_param)
    shares = [vdaf.decode_agg_share(decoded, r.agg_share) for r in records
              if r.agg_share is not None]
    checksum = bytes(32)
    for r in records:
        checksum = xor_bytes(checksum, r.checksum)
    times = [t for r in records for t in (r.min_time, r.max_time) if t is not None]
    interval = Interval(Time(min(times)), Duration(max(times) - min(times) + 1)) if times \
        else Interval(Time(0), Duration(0))
    return MergedBatch(vdaf.merge(decoded, shares), sum(r.report_count for r in records),
                       checksum, interval, [r.bucket for r in records],
                       max((r.min_batch_bound for r in records), default=0))


def required_batch_size(task: AggregatorTask, merged: MergedBatch) -> int:
    """The fewest reports a batch may be released with: the task's min_batch_size and the
    largest minimum batch size bound any of its reports carries (paper 000 Section 4.8;
    paper 004 Section 3.1: "the protocol will only release the aggregate if the actual
    cohort size is greater than m")."""
    return max(int(task.task.min_batch_size), merged.min_batch_bound)


def rate_exceeded(task: AggregatorTask, merged: MergedBatch) -> str | None:
    """The rate guard (paper 000 Section 4.8, "Rate validation by leader and helper": an
    Aggregator "could reject batches when the rate of contributions exceeds twice the
    expected rate in a certain window"). With the task option `expected_report_rate`
    (reports per second, set by each Aggregator for itself), a batch whose reports
    arrived faster than twice that is held: not released, and left uncollected so that
    it can be collected once the operator has looked (and, if the rate was genuine,
    raised the option). The window is the span of the batch's report times at the
    task's time_precision granularity (`MergedBatch.interval`), the window the
    Aggregator can observe without per-report timestamps. Returns why, or None."""
    expected = task.options.expected_report_rate
    if expected is None or merged.report_count == 0:
        return None
    window = max(1, int(merged.interval.duration)) * int(task.task.time_precision)
    rate = merged.report_count / window
    if rate > 2.0 * expected:
        return (f"held by the rate guard: {merged.report_count} reports in {window} s "
                f"({rate:.4g}/s) exceed twice the expected rate {expected:g}/s")
    return None


def release_problem(task: AggregatorTask, merged: MergedBatch) -> DapProblem | None:
    """Why an Aggregator must not release an aggregate share of this batch, or None. Both
    Aggregators check this on their own before releasing anything."""
    tid = task.task_id
    required = required_batch_size(task, merged)
    if merged.report_count < required:
        why = (f"min_batch_size {task.task.min_batch_size}"
               if required == task.task.min_batch_size else
               f"the largest minimum batch size bound {required} of its reports")
        return DapProblem("invalidBatchSize", f"{merged.report_count} reports, fewer "
                          f"than {why}", task_id=tid)
    held = rate_exceeded(task, merged)
    if held is not None:
        return DapProblem("invalidBatchSize", held, task_id=tid)
    return None


def buckets_of_interval(tx: Transaction, task: AggregatorTask, interval: Interval,
                        agg_param: bytes) -> list[BatchBucketRecord]:
    """The existing buckets of a time-interval batch with this aggregation parameter."""
    low = time_bucket(int(interval.start))
    high = time_bucket(int(interval.start) + int(interval.duration))
    return [r for r in tx.list_buckets_in_range(task.task_id, low, high)
            if r.agg_param == agg_param]


def other_agg_params(tx: Transaction, task: AggregatorTask, buckets: Sequence[bytes] | None,
                     interval: Interval | None, agg_param: bytes) -> bool:
    """Whether any bucket of the batch was aggregated with another aggregation parameter."""
    if interval is not None:
        low = time_bucket(int(interval.start))
        high = time_bucket(int(interval.start) + int(interval.duration))
        records = tx.list_buckets_in_range(task.task_id, low, high)
    else:
        records = tx.list_buckets(task.task_id, list(buckets or []))
    return any(r.agg_param != agg_param for r in records)


def check_batch_interval(tx: Transaction, task: AggregatorTask, interval: Interval,
                         overlap: bool = True) -> None:
    """A time-interval batch must span at least one time_precision, end at a valid Time
    (Section 5.1), and overlap no collected batch (`batchOverlap`; unless not `overlap`:
    a VDAF with an aggregation parameter checks that itself, `agg_params.check_batch`)."""
    tid = task.task_id
    if int(interval.duration) < 1:
        raise DapProblem("batchInvalid", "batch interval shorter than time_precision",
                         task_id=tid)
    if interval.end > (1 << 64) - 1:  # start + duration is not a Time: malformed
        raise DapProblem("batchInvalid", "batch interval ends after the last Time",
                         task_id=tid)
    if overlap and tx.interval_overlaps_collected(tid, int(interval.start), interval.end):
        raise DapProblem("batchOverlap", "batch interval overlaps a collected batch",
                         task_id=tid)
