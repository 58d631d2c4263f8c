"""The Leader (DAP-18 Sections 4.4.2.2, 4.5.2.1, 4.5.4.1, 4.6) without I/O.

The Leader's work is split at each network exchange with the Helper: one transaction
prepares the request and stores it (so that a restarted Leader resends the same bytes),
the server sends it, and another transaction processes the response.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ppm_reference.dap.codec import DecodeError
from ppm_reference.dap.common import (
    RECOGNIZED_REPORT_EXTENSIONS,
    BatchID,
    BatchMode,
    Interval,
    ReportError,
    Role,
    VerifyRespType,
)
from ppm_reference.dap.core import agg_params
from ppm_reference.dap.core.buckets import (
    CommitMemo,
    MergedBatch,
    OutputShare,
    bucket_for,
    buckets_of_interval,
    check_batch_interval,
    commit_output_shares,
    merge_buckets,
    rate_exceeded,
    required_batch_size,
)
from ppm_reference.dap.core.errors import DapProblem, NotReady
from ppm_reference.dap.core.helper import (
    PACE_REPORTS,
    decrypt_input_share,
    digest,
    extensions_error,
    min_batch_bound,
    validate_report,
)
from ppm_reference.dap.core.rand import OS_RNG, Rng
from ppm_reference.dap.core.store import (
    AggregationJobRecord,
    AggregationJobState,
    BatchResultRecord,
    ClientReportRecord,
    CollectionJobRecord,
    CollectionJobState,
    LeaderBatchRecord,
    LeaderBatchState,
    ReportAggregationRecord,
    ReportAggregationState,
    ReportState,
    Transaction,
)
from ppm_reference.dap.core.tasks import AggregatorTask, Keyring
from ppm_reference.dap.core.wire import CollReq
from ppm_reference.dap.dp import noise_agg_share
from ppm_reference.vdaf.ping_pong import (
    Continued,
    Finished,
    FinishedWithOutbound,
    Rejected,
    ping_pong_leader_continued,
    ping_pong_leader_init_decoded,
)

# -- upload (Section 4.4.2.2) ---------------------------------------------------------------


def upload(tx: Transaction, task: AggregatorTask, keyring: Keyring, body: bytes, now: float,
           clock_skew: int) -> list[tuple[bytes, ReportError]]:
    """Store the accepted reports of an upload (DAP-18 `UploadRequest`, Section 4.4.2.2;
    DAP-09 one `Report`, Section 4.4.2); returns the others with their ReportError (the
    server turns them into `UploadErrors` or a DAP-09 problem document).

    Checks that need decryption (private extensions, the input share itself) and the
    anti-replay check against aggregated reports happen before aggregation, as the draft
    allows. A report with public extensions aborts the request with
    `unsupportedExtension` (DAP-18 defines no report extension), so nothing is stored."""
    return store_reports(tx, task, keyring, decode_upload(task, body), now, clock_skew)


def decode_upload(task: AggregatorTask, body: bytes) -> list[Any]:
    """The reports of an upload body, or the problem that refuses the whole request (no
    datastore needed: a server decodes a large body outside any transaction)."""
    tid = task.task_id
    w = task.wire
    try:
        reports = w.decode_upload(body)
    except DecodeError as exc:
        raise DapProblem("invalidMessage", str(exc), task_id=tid) from None
    unsupported = sorted({t for r in reports
                          for t in w.public_extension_types(r.report_metadata)
                          if t not in RECOGNIZED_REPORT_EXTENSIONS})
    if unsupported and not w.extension_errors_per_report:
        raise DapProblem("unsupportedExtension", "unrecognized public report extensions",
                         task_id=tid, unsupported_extensions=unsupported)
    return list(reports)


def store_reports(tx: Transaction, task: AggregatorTask, keyring: Keyring,
                  reports: Sequence[Any], now: float, clock_skew: int
                  ) -> list[tuple[bytes, ReportError]]:
    """Store decoded reports (see `upload`); a server may call it once per bounded chunk
    of an upload, each in its own transaction."""
    return commit_uploads(tx, prepare_uploads([(task, keyring, reports)], now,
                                              clock_skew))[0]


@dataclass
class PreparedUpload:
    """An upload's reports checked and encoded without the datastore
    (`prepare_uploads`): per report, its position, ID, time and either its error or its
    encoding for storage."""

    task: AggregatorTask
    reports: list[tuple[int, bytes, int, ReportError | None, bytes]]
    now: float


def prepare_uploads(uploads: Sequence[tuple[AggregatorTask, Keyring, Sequence[Any]]],
                    now: float, clock_skew: int) -> list[PreparedUpload]:
    """The checks of each report that need no datastore, and its encoding for storage
    (done before the transaction, which then stays short)."""
    out = []
    for task, keyring, reports in uploads:
        w = task.wire
        items: list[tuple[int, bytes, int, ReportError | None, bytes]] = []
        for pos, report in enumerate(reports):
            md = report.report_metadata
            rid = bytes(md.report_id)
            t = w.report_time(task, md)
            error: ReportError | None = None
            window = w.time_error(task, md, now, clock_skew)
            public_error = extensions_error(task, md, [])
            if public_error is not None:
                # DAP-19 (#789): a per-report error only (DAP-18 aborted above for an
                # unrecognized one; a malformed recognized one is this report's error).
                error = public_error
            elif keyring.get(report.leader_encrypted_input_share.config_id) is None:
                error = ReportError.OUTDATED_CONFIG
            elif window == ReportError.REPORT_TOO_EARLY:
                error = window
            elif window is not None:
                error = ReportError.REPORT_DROPPED
            items.append((pos, rid, t, error, b"" if error is not None
                          else w.encode_report(report)))
        out.append(PreparedUpload(task, items, now))
    return out


def commit_uploads(tx: Transaction, prepared: Sequence[PreparedUpload]
                   ) -> list[list[tuple[bytes, ReportError]]]:
    """The checks against stored state (`prepare_uploads` did the others) and the
    insert, for several uploads in one transaction (the group commit of
    `dap.server.upload`): each upload's refused reports with their error, in report
    order, exactly as if the uploads were stored one after the other. The reports that
    pass the checks are inserted in one `put_client_reports` (a report ID already
    stored, or earlier in the group, is `report_replayed`)."""
    memos: dict[bytes, CommitMemo] = {}
    statuses: list[list[tuple[int, bytes, ReportError]]] = [[] for _ in prepared]
    candidates: list[tuple[int, int, ClientReportRecord]] = []
    times: dict[bytes, set[int]] = {}
    for upload in prepared:
        times.setdefault(bytes(upload.task.task_id), set()).update(
            t for _, _, t, error, _ in upload.reports if error is None)
    # Before the collected-interval checks: a freeze of one of these tasks' intervals
    # (`prepare_collection`) waits for this transaction, or this one for it.
    tx.guard_uploads(sorted({bytes(u.task.task_id) for u in prepared
                             if u.task.batch_mode == BatchMode.TIME_INTERVAL}))
    for i, upload in enumerate(prepared):
        task = upload.task
        tid = bytes(task.task_id)
        memo = memos.get(tid)
        if memo is None:
            # Each task's horizon and collected intervals, one query per task.
            memo = memos[tid] = CommitMemo()
            memo.prefetch(tx, task, times[tid])
        horizon = memo.horizon(tx, task)  # (memoised: no query)
        for pos, rid, t, error, encoded in upload.reports:
            if error is None and horizon is not None and t < horizon:
                # Its replay state may be evicted (DAP-18 Section 4.5.3.4, last check).
                error = ReportError.REPORT_DROPPED
            elif error is None and task.batch_mode == BatchMode.TIME_INTERVAL and \
                    memo.time_collected(tx, task, t):
                # The draft says the Leader MUST discard such a report and MAY report it
                # as report_replayed; batch_collected is the more precise ReportError.
                error = ReportError.BATCH_COLLECTED
            elif error is None:
                candidates.append((i, pos, ClientReportRecord(tid, rid, t, encoded,
                                                              created_at=upload.now)))
            if error is not None:
                statuses[i].append((pos, rid, error))
    stored = tx.put_client_reports([rec for _, _, rec in candidates])
    for i, pos, rec in candidates:
        key = (bytes(rec.task_id), bytes(rec.report_id))
        if key in stored:
            stored.discard(key)     # a second one of the same ID is a replay
        else:
            statuses[i].append((pos, bytes(rec.report_id), ReportError.REPORT_REPLAYED))
    return [[(rid, err) for _, rid, err in sorted(st, key=lambda s: s[0])]
            for st in statuses]


# -- aggregation job creation (Section 4.5.2.1) ---------------------------------------------


@dataclass
class JobSizes:
    min_job_size: int = 1
    max_job_size: int = 500
    straggler_age: float = 2.0
    jobs_per_pass: int = 4      # at most this many jobs' worth of reports per call


# (verification key ID, report ID -> (the decoded report, the Leader's init state and the
# report's minimum batch size bound, or the report's error))
PreparedReports = tuple[int, dict[bytes, tuple[Any, "tuple[Continued, int] | ReportError"]]]


def reports_ready(tx: Transaction, task: AggregatorTask, now: float, sizes: JobSizes
                  ) -> list[ClientReportRecord]:
    """The new reports that the next jobs take: none while there are fewer than
    `min_job_size`, unless the oldest has waited `straggler_age` seconds. Reports uploaded
    into the interval of a pending time-interval collection job after its cutoff wait
    (see `held_back_reports`)."""
    tid = task.task_id
    limit = sizes.max_job_size * sizes.jobs_per_pass
    held = held_back_reports(tx, task)
    reports = tx.list_new_reports(tid, limit, held)
    if reports and len(reports) < sizes.min_job_size:
        if not held and len(reports) < limit:
            # Every new report is in the list, oldest (created_at) first: no query.
            age: float | None = now - reports[0].created_at
        else:
            age = tx.oldest_new_report_age(tid, now)
        if age is None or age < sizes.straggler_age:
            return []
    return reports


def prepare_aggregation_jobs(task: AggregatorTask, keyring: Keyring,
                             reports: Sequence[ClientReportRecord], now: float,
                             clock_skew: int, pace: Callable[[], None] | None = None
                             ) -> PreparedReports:
    """The Leader's decryption and VDAF preparation (ping-pong init) of new reports,
    outside any transaction: the verification key ID used and, by report ID, each
    report's state or error, for `create_aggregation_jobs(prepared=...)`, whose
    transaction then only checks against stored state and commits. `pace`: called every
    PACE_REPORTS reports (`dap.core.helper`)."""
    key_id = task.leader_key_id()
    if key_id is None or agg_params.uses_agg_param(task):
        # A VDAF with an aggregation parameter is aggregated for collection jobs only.
        return -1, {}
    vdaf = task.vdaf
    ctx = task.task.vdaf_ctx()
    verify_key = task.verify_keys[key_id]
    out: dict[bytes, tuple[Any, tuple[Continued, int] | ReportError]] = {}
    for i, rec in enumerate(reports):
        if pace is not None and i and not i % PACE_REPORTS:
            pace()
        report = task.wire.decode_report(rec.report)
        out[bytes(rec.report_id)] = (report, _leader_open_one(
            task, keyring, report, vdaf, ctx, verify_key, now, clock_skew))
    return key_id, out


def create_aggregation_jobs(tx: Transaction, task: AggregatorTask, keyring: Keyring,
                            now: float, sizes: JobSizes, clock_skew: int, *, rng: Rng,
                            prepared: PreparedReports | None = None,
                            new_reports: Sequence[ClientReportRecord] | None = None,
                            lease: tuple[bytes, float] | None = None,
                            aggregated: set[bytes] | None = None
                            ) -> list[AggregationJobRecord]:
    """Turn uploaded reports into aggregation jobs. Fewer than `min_job_size` reports
    wait, unless the oldest has waited `straggler_age` seconds (stragglers do not stall
    collection). Job IDs and new leader-selected batch IDs are drawn from `rng`.
    `prepared` (from `prepare_aggregation_jobs`) spares the transaction the decryption
    and VDAF work of the reports it covers. `new_reports`: what `reports_ready` returned in this
    same transaction, or in an earlier one of a creation lease held since (not read
    again). `lease`: (token, expiry) of a lease the new jobs
    are stored with, as `Transaction.acquire_aggregation_jobs` would give them (the
    caller steps them at once). `aggregated` (with `new_reports`): which of those were
    found aggregated already, read before the transaction (not read in it); the replay check
    here only spares the Helper a report, the commit's is the one that counts.

    Reports uploaded into the interval of a pending time-interval collection job after
    its cutoff wait (`reports_ready`): the job completes the aggregation jobs already
    pending and moves on, however many reports keep arriving.

    A VDAF with an aggregation parameter (Poplar1) is not aggregated eagerly: its jobs are
    made for the collection jobs waiting for them (`create_jobs_for_collections`)."""
    if agg_params.uses_agg_param(task):
        return create_jobs_for_collections(tx, task, keyring, now, sizes, clock_skew, rng=rng)
    tid = task.task_id
    if task.max_batch_size < 1:
        raise ValueError(f"task {tid.hex()}: max_batch_size {task.max_batch_size} < 1")
    if prepared is not None and prepared[0] >= 0:
        # Only the prepared reports (the transaction does no VDAF work); the others wait
        # for the next pass. (-1: nothing could be prepared, no verification key: the
        # reports are failed below.)
        reports = [r for r in (reports_ready(tx, task, now, sizes) if new_reports is None
                                 else new_reports)
                   if bytes(r.report_id) in prepared[1]]
    else:
        reports = list(reports_ready(tx, task, now, sizes) if new_reports is None
                       else new_reports)
    if not reports:
        return []
    vdaf = task.vdaf
    ctx = task.task.vdaf_ctx()
    key_id = task.leader_key_id()
    if key_id is None:
        # The Helper refused every key this Leader has: the reports cannot be aggregated.
        tx.set_report_states(tid, [r.report_id for r in reports], ReportState.FAILED,
                             error=int(ReportError.UNKNOWN_VERIFICATION_KEY_ID),
                             drop_encodings=True)
        return []
    verify_key = task.verify_keys[key_id]
    # Prepared under another verification key: not used.
    outcomes = prepared[1] if prepared is not None and prepared[0] == key_id else {}
    ready: list[tuple[ClientReportRecord, Any, Continued]] = []
    bounds: dict[bytes, int] = {}
    memo = CommitMemo()
    if aggregated is not None and new_reports is not None:
        memo.known_aggregated([r.report_id for r in reports], aggregated)
    else:
        memo.prefetch_aggregated(tx, task, [r.report_id for r in reports])
    if reports:
        memo.prefetch(tx, task, [r.time for r in reports])  # (no bucket checked here)
    failures: dict[int, list[bytes]] = {}
    for rec in reports:
        pre = outcomes.get(bytes(rec.report_id))
        report = pre[0] if pre is not None else task.wire.decode_report(rec.report)
        outcome = _leader_init_one(tx, task, keyring, rec, report, vdaf, ctx, verify_key, now,
                                   clock_skew, prepared=pre[1] if pre is not None else None,
                                   memo=memo)
        if isinstance(outcome, ReportError):
            failures.setdefault(int(outcome), []).append(rec.report_id)
        else:
            state, bounds[bytes(rec.report_id)] = outcome
            ready.append((rec, report, state))
    for error, ids in failures.items():
        tx.set_report_states(tid, ids, ReportState.FAILED, error=error, drop_encodings=True)
    jobs = []
    for batch_id, chunk in _group(tx, task, ready, sizes.max_job_size, now, rng):
        jobs.append(_store_job(tx, task, batch_id, chunk, now, rng, key_id, bounds,
                               lease=lease))
    return jobs


def _leader_init_one(tx: Transaction, task: AggregatorTask, keyring: Keyring,
                     rec: ClientReportRecord, report: Any, vdaf: Any, ctx: bytes,
                     verify_key: bytes, now: float, clock_skew: int,
                     agg_param: bytes = b"",
                     prepared: tuple[Continued, int] | ReportError | None = None,
                     memo: CommitMemo | None = None
                     ) -> tuple[Continued, int] | ReportError:
    """The Leader's checks and first ping-pong step of one report: (state, the report's
    minimum batch size bound), or the report's error. `prepared`: the outcome of
    `_leader_open_one` computed outside the transaction."""
    md = report.report_metadata
    rid = bytes(md.report_id)
    t = rec.time
    memo = memo or CommitMemo()
    horizon = memo.horizon(tx, task)
    if horizon is not None and t < horizon:
        return ReportError.REPORT_DROPPED
    if agg_params.uses_agg_param(task):
        replayed = agg_params.replay_error(tx, task, rid, t, agg_param)
        if replayed is not None:
            return replayed
    elif memo.report_aggregated(tx, task, rid):
        return ReportError.REPORT_REPLAYED
    elif task.batch_mode == BatchMode.TIME_INTERVAL and memo.time_collected(tx, task, t):
        return ReportError.BATCH_COLLECTED
    if prepared is not None:
        return prepared
    return _leader_open_one(task, keyring, report, vdaf, ctx, verify_key, now, clock_skew,
                            agg_param)


def _leader_open_one(task: AggregatorTask, keyring: Keyring, report: Any, vdaf: Any,
                     ctx: bytes, verify_key: bytes, now: float, clock_skew: int,
                     agg_param: bytes = b"") -> tuple[Continued, int] | ReportError:
    """The checks and preparation of one report that need no datastore."""
    md = report.report_metadata
    rid = bytes(md.report_id)
    plaintext = decrypt_input_share(task, keyring, Role.LEADER, md, report.public_share,
                                    report.leader_encrypted_input_share)
    if isinstance(plaintext, ReportError):
        return plaintext
    # The report was within the clock skew when uploaded; it is not re-judged "too early".
    err = validate_report(task, md, plaintext.extensions, now, clock_skew,
                          check_too_early=False)
    if err is not None:
        return err
    try:
        input_share = vdaf.decode_input_share(0, plaintext.payload)
        public_share = vdaf.decode_public_share(report.public_share)
    except ValueError:
        return ReportError.INVALID_MESSAGE
    state = ping_pong_leader_init_decoded(vdaf, verify_key, ctx, agg_param, rid, public_share,
                                          input_share)
    if isinstance(state, Rejected):
        return ReportError.VDAF_VERIFY_ERROR
    return state, min_batch_bound(task, md, plaintext.extensions)


def _group(tx: Transaction, task: AggregatorTask,
           ready: list[tuple[ClientReportRecord, Any, Continued]], max_job_size: int,
           now: float, rng: Rng) -> list[tuple[bytes | None, list[tuple[ClientReportRecord,
                                                                        Any, Continued]]]]:
    """Split reports into jobs: by size for time-interval; for leader-selected, also by
    batch, filling the oldest open batch up to the task's target batch size."""
    if task.batch_mode == BatchMode.TIME_INTERVAL:
        return [(None, ready[i : i + max_job_size]) for i in range(0, len(ready), max_job_size)]
    tid = task.task_id
    groups: list[tuple[bytes | None, list[Any]]] = []
    batches = tx.list_leader_batches(tid, (LeaderBatchState.OPEN,))
    capacity = {b.batch_id: _capacity(tx, task, b) for b in batches}
    pos = 0
    while pos < len(ready):
        batch = next((b for b in batches if capacity[b.batch_id] > 0), None)
        if batch is None:
            batch = LeaderBatchRecord(tid, rng.token_bytes(32), created_at=now)
            tx.put_leader_batch(batch)
            batches.append(batch)
            capacity[batch.batch_id] = task.max_batch_size
        take = min(capacity[batch.batch_id], max_job_size)
        chunk = ready[pos : pos + take]
        pos += len(chunk)
        capacity[batch.batch_id] -= len(chunk)
        batch.assigned += len(chunk)
        tx.update_leader_batch(batch)
        groups.append((batch.batch_id, chunk))
    return groups


def _capacity(tx: Transaction, task: AggregatorTask, batch: LeaderBatchRecord) -> int:
    buckets = tx.list_buckets(task.task_id, [batch.batch_id])
    committed = sum(b.report_count for b in buckets)
    in_flight = tx.count_reports_in_active_jobs(task.task_id, batch.batch_id)
    target = task.max_batch_size
    if task.batch_size_limit is None:
        # A batch whose reports ask for a larger batch (minimum batch size bounds) is
        # filled up to that size, so that it can be released; a draft's hard
        # max_batch_size (DAP-09 fixed_size) is not exceeded.
        target = max(target, max((b.min_batch_bound for b in buckets), default=0))
    return target - committed - in_flight


def _store_job(tx: Transaction, task: AggregatorTask, batch_id: bytes | None,
               chunk: Sequence[tuple[ClientReportRecord, Any, Continued]],
               now: float, rng: Rng, key_id: int,
               bounds: dict[bytes, int] | None = None,
               agg_param: bytes = b"",
               lease: tuple[bytes, float] | None = None) -> AggregationJobRecord:
    tid = task.task_id
    job_id = rng.token_bytes(16)
    body = task.wire.encode_init_req(task, agg_param, batch_id,
                                     [(report, state.outbound) for _, report, state in chunk],
                                     key_id)
    job = AggregationJobRecord(tid, job_id, "leader", AggregationJobState.ACTIVE, 0,
                               agg_param, batch_id, body, digest(body), created_at=now,
                               next_attempt_at=now)
    if lease is not None:
        job.lease_token, job.lease_expiry = lease
    tx.put_aggregation_job(job)
    vdaf = task.vdaf
    tx.put_report_aggregations([
        ReportAggregationRecord(tid, job_id, i, rec.report_id, rec.time,
                                ReportAggregationState.ACTIVE,
                                vdaf.encode_verify_state(state.verify_state),
                                min_batch_bound=(bounds or {}).get(bytes(rec.report_id), 0))
        for i, (rec, _, state) in enumerate(chunk)])
    tx.set_report_states(tid, [rec.report_id for rec, _, _ in chunk], ReportState.IN_JOB, job_id)
    return job


# -- aggregation jobs of a collection (VDAFs with an aggregation parameter) -----------------

# Far in the future: every waiting collection job, whatever its next attempt time.
_ANY_TIME = 1e300


def _eligible_reports(tx: Transaction, task: AggregatorTask, job: CollectionJobRecord,
                      interval: Interval, agg_param: bytes) -> list[ClientReportRecord]:
    """The reports of a collection job's batch still to aggregate with its parameter:
    never aggregated (uploaded before the job, for the batch's first collection), or
    aggregated with exactly the batch's previous parameters (`dap.core.agg_params`)."""
    tid = task.task_id
    start, end = int(interval.start), interval.end
    previous = agg_params.collected_params(tx, task, start, end)
    states = (ReportState.AGGREGATED,) if previous else (ReportState.NEW,)
    reports = tx.list_reports_in_interval(tid, states, start, end)
    if not previous:
        return [r for r in reports if r.created_at < job.created_at + 1]
    histories = tx.report_agg_params(tid, [r.report_id for r in reports])
    return [r for r in reports if sorted(histories[bytes(r.report_id)]) == previous]


def create_jobs_for_collections(tx: Transaction, task: AggregatorTask, keyring: Keyring,
                                now: float, sizes: JobSizes, clock_skew: int, *, rng: Rng
                                ) -> list[AggregationJobRecord]:
    """For a VDAF with an aggregation parameter: aggregate the batch of each waiting
    collection job with the job's parameter (DAP-18 Section 4.6.1: for such VDAFs the
    aggregation jobs start once the Collector has named the parameter)."""
    tid = task.task_id
    key_id = task.leader_key_id()
    waiting = [j for j in tx.list_collection_jobs((CollectionJobState.START,), _ANY_TIME)
               if bytes(j.task_id) == tid]
    jobs: list[AggregationJobRecord] = []
    budget = sizes.max_job_size * sizes.jobs_per_pass
    for coll in waiting:
        req = task.wire.decode_collection_req(task, coll.request)
        if req.interval is None or budget <= 0:
            continue
        reports = _eligible_reports(tx, task, coll, req.interval, req.agg_param)[:budget]
        if not reports:
            continue
        if key_id is None:
            tx.set_report_states(tid, [r.report_id for r in reports], ReportState.FAILED,
                                 error=int(ReportError.UNKNOWN_VERIFICATION_KEY_ID))
            continue
        budget -= len(reports)
        verify_key = task.verify_keys[key_id]
        ctx = task.task.vdaf_ctx()
        ready: list[tuple[ClientReportRecord, Any, Continued]] = []
        bounds: dict[bytes, int] = {}
        for rec in reports:
            report = task.wire.decode_report(rec.report)
            outcome = _leader_init_one(tx, task, keyring, rec, report, task.vdaf, ctx,
                                       verify_key, now, clock_skew, req.agg_param)
            if isinstance(outcome, ReportError):
                tx.set_report_states(tid, [rec.report_id], ReportState.FAILED,
                                     error=int(outcome))
            else:
                state, bounds[bytes(rec.report_id)] = outcome
                ready.append((rec, report, state))
        for i in range(0, len(ready), sizes.max_job_size):
            jobs.append(_store_job(tx, task, None, ready[i : i + sizes.max_job_size], now,
                                   rng, key_id, bounds, req.agg_param))
    return jobs


def _pending_for_collection(tx: Transaction, task: AggregatorTask, job: CollectionJobRecord,
                            interval: Interval, agg_param: bytes) -> int:
    """Reports of the batch not yet aggregated with the job's parameter, or in a job."""
    in_job = tx.count_reports(task.task_id, (ReportState.IN_JOB,), int(interval.start),
                              interval.end)
    return in_job + len(_eligible_reports(tx, task, job, interval, agg_param))


# -- stepping a job with the Helper (Sections 4.5.2.1, 4.5.4.1) ------------------------------

# A job's reports that still expect an answer from the Helper.
_UNFINISHED = (ReportAggregationState.ACTIVE, ReportAggregationState.FINISHED_OUTBOUND)


def prepare_job_response(task: AggregatorTask, job: AggregationJobRecord,
                         records: Sequence[ReportAggregationRecord], body: bytes,
                         pace: Callable[[], None] | None = None
                         ) -> dict[bytes, tuple[bytes | None, Any]]:
    """The Leader's VDAF work on a Helper's answer, outside any transaction: for each
    report the Helper continued, (the verify state it started from, the ping-pong
    outcome), for `process_aggregation_job_response(prepared=...)`, which uses an outcome
    only if the report's stored state is still the one it started from. `pace`: called
    every PACE_REPORTS reports (`dap.core.helper`)."""
    try:
        resps = {bytes(v.report_id): v for v in task.wire.decode_job_resp(body)}
    except DecodeError:
        return {}
    vdaf = task.vdaf
    ctx = task.task.vdaf_ctx()
    out: dict[bytes, tuple[bytes | None, Any]] = {}
    for i, rec in enumerate(records):
        if pace is not None and i and not i % PACE_REPORTS:
            pace()
        vr = resps.get(bytes(rec.report_id))
        if vr is not None and vr.kind == VerifyRespType.CONTINUE \
                and rec.state == ReportAggregationState.ACTIVE:
            # The stored state at step s is of ping-pong round 2s (see below).
            prev = Continued(vdaf.decode_verify_state(rec.verify_state or b""), 2 * job.step,
                             b"")
            out[bytes(rec.report_id)] = (rec.verify_state, ping_pong_leader_continued(
                vdaf, ctx, job.agg_param, prev, vr.payload or b""))
    return out


def process_aggregation_job_response(tx: Transaction, task: AggregatorTask,
                                     job: AggregationJobRecord, body: bytes, *,
                                     prepared: dict[bytes, tuple[bytes | None, Any]]
                                     | None = None,
                                     records: Sequence[ReportAggregationRecord] | None = None
                                     ) -> AggregationJobState:
    """Process the Helper's `AggregationJobResp` to the job's current request: commit
    finished output shares, reject what was rejected, and prepare the next request if
    verification continues. A response that does not match abandons the job. Returns the
    job's new state. `prepared` (from `prepare_job_response`) spares the transaction the
    VDAF work. `records`: the job's report aggregations as the caller read them at this
    step (not read again; they are changed here); only for a caller that knows they are
    still the stored ones (the holder of the job's lease, see dap.server.leader)."""
    tid = task.task_id
    vdaf = task.vdaf
    ctx = task.task.vdaf_ctx()
    records = [r for r in (tx.get_report_aggregations(tid, job.job_id) if records is None
                           else records)
               if r.state in _UNFINISHED]
    try:
        resps = task.wire.decode_job_resp(body)
    except DecodeError as exc:
        abandon_aggregation_job(tx, task, job, f"malformed AggregationJobResp: {exc}")
        return job.state
    if [v.report_id for v in resps] != [r.report_id for r in records]:
        abandon_aggregation_job(tx, task, job, "report IDs of the response do not match")
        return job.state
    to_commit: list[tuple[ReportAggregationRecord, OutputShare]] = []
    continues: list[tuple[bytes, bytes]] = []
    for rec, vr in zip(records, resps, strict=True):
        if vr.kind == VerifyRespType.REJECT:
            rec.state, rec.error = ReportAggregationState.REJECTED, int(vr.error or 0)
        elif vr.kind == VerifyRespType.CONTINUE and rec.state == ReportAggregationState.ACTIVE:
            pre = (prepared or {}).get(bytes(rec.report_id))
            if pre is not None and pre[0] == rec.verify_state:
                state = pre[1]
            else:
                # The Leader's stored state at step s is of ping-pong round 2s (VDAF
                # Section 5.7.1: each exchange moves two rounds; round 0 after init).
                prev = Continued(vdaf.decode_verify_state(rec.verify_state or b""),
                                 2 * job.step, b"")
                state = ping_pong_leader_continued(vdaf, ctx, job.agg_param, prev,
                                                   vr.payload or b"")
            if isinstance(state, Finished):
                to_commit.append((rec, OutputShare(rec.report_id, rec.time,
                                                   bucket_for(task, rec.time, job.batch_id),
                                                   state.out_share, rec.min_batch_bound)))
            elif isinstance(state, Continued):
                rec.verify_state = vdaf.encode_verify_state(state.verify_state)
                continues.append((rec.report_id, state.outbound))
            elif isinstance(state, FinishedWithOutbound):
                rec.state = ReportAggregationState.FINISHED_OUTBOUND
                rec.verify_state = vdaf.encode_out_share(state.out_share)
                continues.append((rec.report_id, state.outbound))
            else:
                rec.state = ReportAggregationState.REJECTED
                rec.error = int(ReportError.VDAF_VERIFY_ERROR)
        elif vr.kind == VerifyRespType.FINISH and \
                rec.state == ReportAggregationState.FINISHED_OUTBOUND:
            out_share = vdaf.decode_out_share(vdaf.decode_agg_param(job.agg_param),
                                              rec.verify_state or b"")
            to_commit.append((rec, OutputShare(rec.report_id, rec.time,
                                               bucket_for(task, rec.time, job.batch_id),
                                               out_share, rec.min_batch_bound)))
        else:
            abandon_aggregation_job(tx, task, job, "response type incompatible with the "
                                    "report's state")
            return job.state
    failed = commit_output_shares(tx, task, job.agg_param, [s for _, s in to_commit])
    for rec, _share in to_commit:
        err = failed.get(rec.report_id)
        rec.state, rec.error = ((ReportAggregationState.REJECTED, int(err)) if err
                                else (ReportAggregationState.FINISHED, None))
    for rec in records:
        if rec.state in (ReportAggregationState.FINISHED, ReportAggregationState.REJECTED):
            rec.verify_state = None  # no longer needed (a Histogram's is L field elements)
    tx.update_report_aggregations(records)
    done = [r.report_id for r in records if r.state == ReportAggregationState.FINISHED]
    # Prio3 (its one, empty aggregation parameter, VDAF Section 7) aggregates a report
    # once: its encoding is no longer needed (a Poplar1 report's is, per level).
    tx.set_report_states(tid, done, ReportState.AGGREGATED, job.job_id,
                         drop_encodings=not agg_params.uses_agg_param(task))
    unknown_key = int(ReportError.UNKNOWN_VERIFICATION_KEY_ID)
    retry = [r.report_id for r in records
             if r.state == ReportAggregationState.REJECTED and r.error == unknown_key
             and job.step == 0]
    if retry:
        # DAP-19 (#784): the Helper does not know this job's verification key. Remember
        # it, and give the reports back to job creation, which picks another key.
        key_id = task.wire.decode_init_req(task, job.request).verification_key_id
        task.record_helper_unknown_key(tx, key_id)
        tx.set_report_states(tid, retry, ReportState.NEW)
    rejected: dict[int | None, list[bytes]] = {}
    for rec in records:
        if rec.state == ReportAggregationState.REJECTED and rec.report_id not in retry:
            rejected.setdefault(rec.error, []).append(rec.report_id)
    for error, ids in rejected.items():
        tx.set_report_states(tid, ids, ReportState.FAILED, job.job_id, error,
                             drop_encodings=True)
    if continues:
        job.step += 1
        job.request = task.wire.encode_continue_req(job.step, continues)
    else:
        job.state = AggregationJobState.FINISHED
        job.request = b""  # never sent again (it holds every report's shares)
    job.attempts = 0
    tx.update_aggregation_job(job)
    return job.state


def abandon_aggregation_job(tx: Transaction, task: AggregatorTask | None,
                            job: AggregationJobRecord, reason: str) -> None:
    """Abandon a job (Section 4.5.5). Its unfinished reports are not retried: the Helper
    may have committed some of them, and aggregating them again elsewhere could make the
    Aggregators' batches disagree. (`task` may be None: a job whose task was deleted, or
    cannot be loaded, is abandoned all the same.)"""
    job.state = AggregationJobState.ABANDONED
    job.error = reason
    job.lease_expiry = 0.0
    job.request = b""
    tx.update_aggregation_job(job)
    pending = [r.report_id for r in tx.get_report_aggregations(job.task_id, job.job_id)
               if r.state in _UNFINISHED]
    tx.set_report_states(job.task_id, pending, ReportState.FAILED, job.job_id,
                         drop_encodings=True)


# -- collection (Section 4.6) --------------------------------------------------------------


def create_collection_job(tx: Transaction, task: AggregatorTask, body: bytes,
                          now: float, job_id: bytes | None = None, *, rng: Rng) -> bytes:
    """Validate a collection request and create the job.

    DAP-18 (POST, Section 4.6.1): a byte-identical request returns the existing job
    (Section 3.2); a new job's ID is drawn from `rng`. DAP-09 (PUT, Section 4.6.1): the
    Collector chose `job_id`; the same ID with the same request is the same job, with
    another request an error."""
    tid = task.task_id
    request_hash = digest(body)
    if job_id is not None:
        existing = tx.get_collection_job(tid, job_id)
        if existing is not None:
            if existing.request_hash != request_hash or \
                    existing.state == CollectionJobState.DELETED:
                raise DapProblem("invalidMessage", "the collection job exists with another "
                                 "request", 409, task_id=tid)
            return existing.job_id
    else:
        existing = tx.find_collection_job_by_hash(tid, request_hash)
        if existing is not None:
            return existing.job_id
    req = task.wire.decode_collection_req(task, body)
    if req.batch_mode != task.batch_mode:
        raise DapProblem("invalidMessage", "query batch mode does not match the task",
                         task_id=tid)
    vdaf = task.vdaf
    try:
        if not vdaf.is_valid(vdaf.decode_agg_param(req.agg_param), []):
            raise ValueError("invalid")
    except ValueError:
        raise DapProblem("invalidAggregationParameter", "invalid aggregation parameter",
                         task_id=tid) from None
    new_id = job_id or rng.token_bytes(16)
    # A batch is released once: a query for a batch already released gets the stored
    # result (the same bytes, no new noise) or is refused; it never computes it again.
    stored = released_result(tx, task, req, body)
    if stored is not None:
        job = CollectionJobRecord(tid, new_id, body, request_hash, CollectionJobState.FINISHED,
                                  batch_id=req.batch_id, response=stored.response,
                                  created_at=now, next_attempt_at=now, cutoff=now)
        tx.put_collection_job(job)
        return job.job_id
    if agg_params.uses_agg_param(task):
        # Collected once per parameter, by time interval only (dap.core.agg_params).
        agg_params.check_batch(tx, task, req.interval, req.agg_param)
        assert req.interval is not None
        check_batch_interval(tx, task, req.interval, overlap=False)
    elif req.interval is not None:
        check_batch_interval(tx, task, req.interval)
        horizon = tx.get_eviction_horizon(tid)
        if horizon is not None and req.interval.end <= horizon:
            raise DapProblem("invalidBatchSize", "the batch interval is older than the "
                             "reports this Aggregator keeps (report_expiry_age)", task_id=tid)
    if req.batch_id is not None:
        # DAP-09 by_batch_id (Section 4.6.5.2.1, boundary check): "the Leader checks that
        # the provided batch ID corresponds to a batch ID it returned in a previous
        # collection for the task". Such a batch was answered above from its stored
        # result; a batch never handed to the Collector (still filling, or unknown) is
        # not a valid batch to query by ID.
        if tx.list_batch_results(tid, req.batch_id):
            # Released for another aggregation parameter: Prio3 has one, so the batch has
            # been queried as often as DAP-09 Section 4.6.5 allows.
            raise DapProblem("batchQueriedTooManyTimes", "the batch was already collected",
                             task_id=tid)
        raise DapProblem("batchInvalid", "the batch ID was not returned by a previous "
                         "collection (DAP-09 Section 4.6.5.2.1)", task_id=tid)
    job = CollectionJobRecord(tid, new_id, body, request_hash, CollectionJobState.START,
                              created_at=now, next_attempt_at=now, cutoff=now)
    tx.put_collection_job(job)
    return job.job_id


def batch_key(req: CollReq, batch_id: bytes | None) -> bytes:
    """How a batch is named among released results: its encoded Interval (time-interval,
    in time_precision units) or its BatchID (leader-selected)."""
    if req.interval is not None:
        return bytes(req.interval.encode())
    assert batch_id is not None
    return bytes(batch_id)


def released_result(tx: Transaction, task: AggregatorTask, req: CollReq, body: bytes
                    ) -> BatchResultRecord | None:
    """The stored result that answers a query for a batch already released, if any: the
    batch's result for the same aggregation parameter, provided the Collector can
    decrypt it under this request (`Wire.result_bound_to_request`)."""
    if req.interval is None and req.batch_id is None:
        return None  # leader-selected current batch: the Leader picks an unreleased one
    stored = tx.get_batch_result(task.task_id, batch_key(req, req.batch_id), req.agg_param)
    if stored is None:
        return None
    if task.wire.result_bound_to_request and stored.request != body:
        return None
    return stored


def held_back_reports(tx: Transaction, task: AggregatorTask) -> list[tuple[int, int, float]]:
    """(start, end, cutoff) per pending time-interval collection job: the reports with
    start <= time < end uploaded after cutoff wait until the job has frozen its batch
    (and then fail with batch_collected) or has moved its cutoff on.

    DAP-18 Section 4.6.1 (DAP-09 likewise): "If the Leader has a pending aggregation job
    that overlaps with the batch for the collection job, the Leader MUST first complete
    the aggregation job before proceeding". The Leader completes the jobs pending when
    the collection job arrived; it does not start new ones for the batch meanwhile, so
    a trickle of uploads into the interval cannot keep the batch from being collected.
    Reports uploaded after the batch is collected are the draft's: "The Leader MUST
    discard any report pertaining to a batch that has already been collected"."""
    if task.batch_mode != BatchMode.TIME_INTERVAL:
        return []  # a leader-selected batch being collected takes no new jobs anyway
    held = []
    for job in tx.list_task_collection_jobs(task.task_id, (CollectionJobState.START,)):
        try:
            req = task.wire.decode_collection_req(task, job.request)
        except DapProblem:
            continue
        if req.interval is not None:
            held.append((int(req.interval.start), req.interval.end,
                         job.cutoff or job.created_at))
    return held


@dataclass
class ShareRequest:
    """What the Leader sends the Helper for a collection job."""

    body: bytes                 # encoded AggregateShareReq (resent byte for byte)
    merged: MergedBatch


def prepare_collection(tx: Transaction, task: AggregatorTask, job: CollectionJobRecord,
                       now: float, give_up_after: float | None) -> ShareRequest | None:
    """Decide whether the collection job's batch is ready; if so freeze it (mark it
    collected: no more output shares are committed to it) and build the
    `AggregateShareReq`. Returns None to wait. A job already past this point returns the
    same request again."""
    tid = task.task_id
    req = task.wire.decode_collection_req(task, job.request)
    sel_interval: Interval | None = None
    sel_batch: bytes | None = None
    if task.batch_mode == BatchMode.TIME_INTERVAL:
        interval = req.interval
        assert interval is not None
        sel_interval = interval
        if job.state == CollectionJobState.START:
            # The uploads in flight to this task commit first, and are counted below
            # (Transaction.guard_uploads); later ones wait, then see the freeze.
            tx.guard_uploads([tid], exclusive=True)
        if job.state == CollectionJobState.START and agg_params.uses_agg_param(task):
            try:
                agg_params.check_batch(tx, task, interval, req.agg_param)
            except DapProblem as problem:  # another job collected the batch since
                fail_collection(tx, job, problem.token, problem.detail)
                return None
            if _pending_for_collection(tx, task, job, interval, req.agg_param):
                return None
            records = buckets_of_interval(tx, task, interval, req.agg_param)
            merged = merge_buckets(task, req.agg_param, records)
            if merged.report_count < required_batch_size(task, merged):
                _maybe_give_up(tx, task, job, now, give_up_after, merged)
                return None
            held = rate_exceeded(task, merged)
            if held is not None:
                fail_collection(tx, job, "invalidBatchSize", held)
                return None
            agg_params.mark_collected(tx, task, interval, req.agg_param)
        elif job.state == CollectionJobState.START:
            if tx.interval_overlaps_collected(tid, int(interval.start), interval.end):
                # Another job froze an overlapping interval since this one was created.
                fail_collection(tx, job, "batchOverlap",
                                "batch interval overlaps a collected batch")
                return None
            # Reports uploaded up to the job's cutoff must be aggregated first, and no
            # aggregation job touching the interval may be in flight (Section 4.6.1: the
            # Leader MUST first complete overlapping aggregation jobs). Reports uploaded
            # after the cutoff are held back (`held_back_reports`), so this converges
            # under a steady trickle of uploads. The check and the freeze below are one
            # transaction, so no job can start in between.
            cutoff = job.cutoff or job.created_at
            pending = tx.count_reports(tid, (ReportState.NEW,), int(interval.start), interval.end,
                                       created_before=math.nextafter(cutoff, math.inf))
            pending += tx.count_reports(tid, (ReportState.IN_JOB,), int(interval.start),
                                        interval.end)
            if pending:
                return None
            records = buckets_of_interval(tx, task, interval, req.agg_param)
            merged = merge_buckets(task, req.agg_param, records)
            if merged.report_count < required_batch_size(task, merged):
                _maybe_give_up(tx, task, job, now, give_up_after, merged)
                if job.state == CollectionJobState.START:
                    # Too few: let the reports uploaded since into the batch.
                    job.cutoff = now
                    tx.update_collection_job(job)
                return None
            held = rate_exceeded(task, merged)
            if held is not None:
                # Held: not frozen, so it can be collected after review (see
                # `rate_exceeded`); this job fails.
                fail_collection(tx, job, "invalidBatchSize", held)
                return None
            tx.mark_interval_collected(tid, int(interval.start), interval.end)
        else:
            merged = merge_buckets(task, req.agg_param,
                                   buckets_of_interval(tx, task, interval, req.agg_param))
    else:
        if job.batch_id is None and not _choose_batch(tx, task, job):
            _maybe_give_up(tx, task, job, now, give_up_after, None)
            return None
        assert job.batch_id is not None
        batch_id = job.batch_id
        sel_batch = batch_id
        if job.state == CollectionJobState.START:
            if tx.is_bucket_collected(tid, batch_id):
                # Never released to a second collection job (a batch is chosen while
                # open, and only its own job freezes it: this is a guard).
                fail_collection(tx, job, "batchQueriedTooManyTimes",
                                "the batch was collected by another collection job")
                return None
            if tx.count_active_aggregation_jobs(tid, batch_id=batch_id):
                return None
            records = [r for r in tx.list_buckets(tid, [batch_id]) if r.agg_param == req.agg_param]
            merged = merge_buckets(task, req.agg_param, records)
            held = rate_exceeded(task, merged)
            if merged.report_count < required_batch_size(task, merged) or held is not None:
                # Rejections left the batch short (or its reports carry a larger minimum
                # batch size bound): let it take more reports. A batch held by the rate
                # guard stays open too; this job fails.
                if held is not None:
                    fail_collection(tx, job, "invalidBatchSize", held)
                for b in tx.list_leader_batches(tid, (LeaderBatchState.COLLECTING,)):
                    if b.batch_id == batch_id:
                        b.state = LeaderBatchState.OPEN
                        tx.update_leader_batch(b)
                if req.batch_id is None:  # by_batch_id (DAP-09) stays with its batch
                    job.batch_id = None
                    tx.update_collection_job(job)
                return None
            tx.mark_buckets_collected(tid, [batch_id])
        else:
            merged = merge_buckets(task, req.agg_param, [
                r for r in tx.list_buckets(tid, [batch_id]) if r.agg_param == req.agg_param])
    body = task.wire.encode_share_req(task, req, sel_interval, sel_batch, merged.report_count,
                                      merged.checksum)
    if job.state == CollectionJobState.START:
        job.state = CollectionJobState.COLLECTING
        tx.update_collection_job(job)
    return ShareRequest(body, merged)


def _choose_batch(tx: Transaction, task: AggregatorTask, job: CollectionJobRecord) -> bool:
    """Leader-selected: pick the oldest open batch that can reach min_batch_size and the
    largest minimum batch size bound of its reports aggregated so far."""
    tid = task.task_id
    for batch in tx.list_leader_batches(tid, (LeaderBatchState.OPEN,)):
        buckets = tx.list_buckets(tid, [batch.batch_id])
        committed = sum(b.report_count for b in buckets)
        in_flight = tx.count_reports_in_active_jobs(tid, batch.batch_id)
        bound = max((b.min_batch_bound for b in buckets), default=0)
        if committed + in_flight >= max(task.task.min_batch_size, bound):
            batch.state = LeaderBatchState.COLLECTING
            tx.update_leader_batch(batch)
            job.batch_id = batch.batch_id
            tx.update_collection_job(job)
            return True
    return False


def _maybe_give_up(tx: Transaction, task: AggregatorTask, job: CollectionJobRecord, now: float,
                   give_up_after: float | None, merged: MergedBatch | None) -> None:
    if give_up_after is not None and now - job.created_at > give_up_after:
        job.state = CollectionJobState.FAILED
        job.error = "invalidBatchSize"
        count = merged.report_count if merged is not None else 0
        required = (required_batch_size(task, merged) if merged is not None
                    else task.task.min_batch_size)
        job.error_detail = (f"{count} reports after {give_up_after:.0f} s, fewer than "
                            f"{required} (min_batch_size {task.task.min_batch_size} and the "
                            "largest minimum batch size bound of its reports)")
        tx.update_collection_job(job)


def finish_collection(tx: Transaction, task: AggregatorTask, job: CollectionJobRecord,
                      share_request: ShareRequest, helper_body: bytes, *,
                      rng: Rng = OS_RNG, ephemeral_ikm: bytes | None = None) -> None:
    """Combine the Helper's `AggregateShare` with the Leader's own (noised by the task's
    DP policy, with the next vector of the task's noise reserve, drawn beforehand from
    the Aggregator's `rng`: `dap.dp.noise_agg_share`) into the `CollectionJobResp`.

    `ephemeral_ikm` derives the HPKE ephemeral key of the Leader's encrypted aggregate
    share: FOR TEST VECTORS ONLY (the example vectors pin the `CollectionJobResp` bytes).
    The servers never pass it; without it HPKE draws a fresh key from the OS CSPRNG."""
    try:
        helper_ct = task.wire.decode_agg_share(helper_body)
    except DecodeError as exc:
        fail_collection(tx, job, "invalidMessage", f"malformed AggregateShare: {exc}")
        return
    req = task.wire.decode_collection_req(task, job.request)
    key = batch_key(req, job.batch_id)
    if tx.get_batch_result(task.task_id, key, req.agg_param) is not None:
        # Guard: the batch was released already; its noise is never drawn again.
        fail_collection(tx, job, "batchQueriedTooManyTimes", "the batch was already "
                        "released to another collection job")
        return
    agg_share = share_request.merged.agg_share
    agg_share = noise_agg_share(task, agg_share, rng)
    leader_ct = task.wire.encrypt_agg_share(task, Role.LEADER, req, req.interval, job.batch_id,
                                            task.vdaf.encode_agg_share(agg_share),
                                            ephemeral_ikm=ephemeral_ikm)
    merged = share_request.merged
    job.response = task.wire.encode_collection(task, req, job.batch_id, merged.report_count,
                                               merged.interval, leader_ct, helper_ct)
    job.state = CollectionJobState.FINISHED
    tx.update_collection_job(job)
    # Stored with the batch: a repeated query gets these bytes (no second noise draw).
    tx.put_batch_result(BatchResultRecord(task.task_id, key, req.agg_param, job.request,
                                          job.response))
    if job.batch_id is not None:
        for b in tx.list_leader_batches(task.task_id, (LeaderBatchState.COLLECTING,)):
            if b.batch_id == job.batch_id:
                b.state = LeaderBatchState.COLLECTED
                tx.update_leader_batch(b)


def fail_collection(tx: Transaction, job: CollectionJobRecord, token: str, detail: str) -> None:
    job.state = CollectionJobState.FAILED
    job.error = token
    job.error_detail = detail
    tx.update_collection_job(job)


def release_refused_collection(tx: Transaction, task: AggregatorTask,
                               job: CollectionJobRecord, token: str, detail: str) -> None:
    """The Helper refused the job's AggregateShareReq with an error: its transaction was
    rolled back, so it did not collect the batch, and the Leader released nothing. Fail
    the job and unfreeze the batch, so that its reports can still be collected later
    (rather than being refused as `batch_collected` forever)."""
    if job.state == CollectionJobState.COLLECTING:
        req = task.wire.decode_collection_req(task, job.request)
        if req.interval is not None and agg_params.uses_agg_param(task):
            agg_params.unmark_collected(tx, task, req.interval, req.agg_param)
        elif req.interval is not None:
            interval = req.interval
            tx.unmark_interval_collected(task.task_id, int(interval.start), interval.end)
        elif job.batch_id is not None:
            tx.unmark_buckets_collected(task.task_id, [job.batch_id])
            for b in tx.list_leader_batches(task.task_id, (LeaderBatchState.COLLECTING,)):
                if b.batch_id == job.batch_id:
                    b.state = LeaderBatchState.OPEN
                    tx.update_leader_batch(b)
    fail_collection(tx, job, token, detail)


def get_collection_job(tx: Transaction, task: AggregatorTask, job_id: bytes) -> bytes:
    job = tx.get_collection_job(task.task_id, job_id)
    if job is None or job.state == CollectionJobState.DELETED:
        raise DapProblem("unrecognizedCollectionJob", "unknown collection job", 404,
                         task_id=task.task_id, dap_type=False)
    if job.state == CollectionJobState.FAILED:
        raise DapProblem(job.error or "invalidMessage", job.error_detail or "",
                         task_id=task.task_id)
    if job.response is None:
        raise NotReady()
    return job.response


def delete_collection_job(tx: Transaction, task: AggregatorTask, job_id: bytes) -> None:
    """Section 4.6.3: discard the job; the batch stays collected if it was."""
    job = tx.get_collection_job(task.task_id, job_id)
    if job is None or job.state == CollectionJobState.DELETED:
        raise DapProblem("unrecognizedCollectionJob", "unknown collection job", 404,
                         task_id=task.task_id, dap_type=False)
    job.state = CollectionJobState.DELETED
    job.response = None
    tx.update_collection_job(job)
    if job.batch_id is not None:
        for b in tx.list_leader_batches(task.task_id, (LeaderBatchState.COLLECTING,)):
            if b.batch_id == job.batch_id and not tx.is_bucket_collected(task.task_id,
                                                                         b.batch_id):
                b.state = LeaderBatchState.OPEN
                tx.update_leader_batch(b)


__all__ = [
    "BatchID", "JobSizes", "ShareRequest", "upload", "create_aggregation_jobs",
    "create_jobs_for_collections",
    "process_aggregation_job_response", "abandon_aggregation_job", "create_collection_job",
    "prepare_collection", "finish_collection", "fail_collection", "get_collection_job",
    "delete_collection_job",
]
