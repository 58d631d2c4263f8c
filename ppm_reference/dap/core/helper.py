"""The Helper (DAP-18 Sections 4.5.2.2, 4.5.4.2, 4.6.4) without I/O.

Each function runs inside one datastore transaction supplied by the caller, so that a
response is stored together with every state change it reports (output shares
committed, batches marked collected): a retried request gets the stored response.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ppm_reference.dap.codec import DecodeError
from ppm_reference.dap.common import (
    MIN_BATCH_SIZE_EXTENSION,
    RECOGNIZED_REPORT_EXTENSIONS,
    BatchMode,
    ReportError,
    Role,
    VerifyRespType,
    decode_min_batch_size,
)
from ppm_reference.dap.core import agg_params
from ppm_reference.dap.core.buckets import (
    CommitMemo,
    OutputShare,
    bucket_for,
    buckets_of_interval,
    check_batch_interval,
    commit_error,
    commit_output_shares,
    merge_buckets,
    other_agg_params,
    release_problem,
)
from ppm_reference.dap.core.errors import DapProblem, NotReady
from ppm_reference.dap.core.rand import OS_RNG, Rng
from ppm_reference.dap.core.store import (
    AggregateShareJobRecord,
    AggregateShareJobState,
    AggregationJobRecord,
    AggregationJobState,
    ReportAggregationRecord,
    ReportAggregationState,
    Transaction,
)
from ppm_reference.dap.core.tasks import AggregatorTask, Keyring
from ppm_reference.dap.core.wire import InitItem, InitReq, Resp, ShareReq
from ppm_reference.dap.dp import noise_agg_share
from ppm_reference.dap.hpke import HpkeError
from ppm_reference.vdaf.ping_pong import (
    Continued,
    Finished,
    FinishedWithOutbound,
    Rejected,
    ping_pong_helper_continued,
    ping_pong_helper_init,
)


def digest(body: bytes) -> bytes:
    return hashlib.sha256(body).digest()


@dataclass
class JobResult:
    """A created or polled aggregation job: its ID and, when ready, its response."""

    job_id: bytes
    response: bytes | None
    step: int


# -- report validation shared with the Leader (Section 4.5.2.4) ----------------------------


def validate_report(task: AggregatorTask, metadata: Any,
                    extensions: Sequence[tuple[int, bytes]], now: float, clock_skew: int,
                    check_too_early: bool = True) -> ReportError | None:
    """Input share validation (DAP-18 Section 4.5.2.4, DAP-09 Section 4.5.1.4) for the
    checks that do not need the datastore. `extensions` are the input share's private
    extensions as (type, data)."""
    err = task.wire.time_error(task, metadata, now, clock_skew, check_too_early)
    if err is not None:
        return err
    return extensions_error(task, metadata, extensions)


def extensions_error(task: AggregatorTask, metadata: Any,
                     private: Sequence[tuple[int, bytes]]) -> ReportError | None:
    """The report extension checks: no draft defines a report extension type, so the only
    one recognized is this project's MIN_BATCH_SIZE_EXTENSION (`dap.common`), whose data
    must be a valid bound; any other is unrecognized (the draft's error). A type both
    public and private is invalid (DAP-18 Section 4.5.2.4)."""
    public = task.wire.public_extensions(metadata)
    if {t for t, _ in public} & {t for t, _ in private}:
        return ReportError.INVALID_MESSAGE
    for ext_type, data in (*public, *private):
        if ext_type not in RECOGNIZED_REPORT_EXTENSIONS:
            return task.wire.extension_error
        if ext_type == MIN_BATCH_SIZE_EXTENSION:
            try:
                decode_min_batch_size(data)
            except ValueError:
                return ReportError.INVALID_MESSAGE
    return None


def min_batch_bound(task: AggregatorTask, metadata: Any,
                    private: Sequence[tuple[int, bytes]]) -> int:
    """The report's minimum batch size bound (0: none), from a report that passed
    `extensions_error`. The Aggregator read it from data bound into its HPKE decryption
    (DAP-18/19: public extension in the AAD; DAP-09: its own plaintext)."""
    return max((decode_min_batch_size(data)
                for ext_type, data in (*task.wire.public_extensions(metadata), *private)
                if ext_type == MIN_BATCH_SIZE_EXTENSION), default=0)


@dataclass
class Decrypted:
    payload: bytes                  # the VDAF input share
    extensions: list[tuple[int, bytes]]  # private report extensions (type, data)


def decrypt_input_share(task: AggregatorTask, keyring: Keyring, role: Role,
                        metadata: Any, public_share: bytes,
                        ciphertext: Any) -> Decrypted | ReportError:
    """Input share decryption (DAP-18 Section 4.5.2.3, DAP-09 Section 4.5.1.3)."""
    keypair = keyring.get(ciphertext.config_id)
    if keypair is None:
        # The draft: "If the HPKE configuration ID is unrecognized or decryption fails,
        # the Aggregator marks the report share as invalid with the error
        # hpke_decrypt_error" (although hpke_unknown_config_id exists).
        return ReportError.HPKE_DECRYPT_ERROR
    try:
        payload, exts = task.wire.open_input_share(task, keypair, role, metadata,
                                                   public_share, ciphertext)
    except HpkeError:
        return ReportError.HPKE_DECRYPT_ERROR
    except DecodeError:
        return ReportError.INVALID_MESSAGE
    return Decrypted(payload, exts)


# -- aggregation job initialization (Section 4.5.2.2) --------------------------------------


def _check_init_request(task: AggregatorTask, req: InitReq) -> bytes | None:
    """The checks that fail the whole job. Returns the leader-selected batch ID."""
    tid = task.task_id
    batch_id = req.batch_id
    if task.batch_mode == BatchMode.LEADER_SELECTED and batch_id is None:
        raise DapProblem("invalidMessage", "leader_selected_batch_id extension missing",
                         task_id=tid)
    if task.batch_mode == BatchMode.TIME_INTERVAL and batch_id is not None:
        raise DapProblem("invalidMessage", "batch ID extension in a time-interval task",
                         task_id=tid)
    if req.verification_key_id not in task.verify_keys and not task.wire.unknown_key_per_report:
        raise DapProblem("invalidMessage", f"unknown verification key id "
                         f"{req.verification_key_id}", task_id=tid)
    vdaf = task.vdaf
    try:
        if not vdaf.is_valid(vdaf.decode_agg_param(req.agg_param), []):
            raise ValueError("not valid")
    except ValueError as exc:
        raise DapProblem("invalidAggregationParameter", str(exc), task_id=tid) from None
    ids = [item.report_id for item in req.items]
    if len(set(ids)) != len(ids):
        raise DapProblem("invalidMessage", "duplicate report IDs", task_id=tid)
    if not ids:
        raise DapProblem("invalidMessage", "aggregation job without reports", task_id=tid)
    return batch_id


def create_aggregation_job(tx: Transaction, task: AggregatorTask, body: bytes,
                           asynchronous: bool, keyring: Keyring, now: float,
                           clock_skew: int, job_id: bytes | None = None, *,
                           rng: Rng, prepared: PreparedInit | None = None) -> JobResult:
    """Handle a request creating an aggregation job: validate, create the job (or return
    the existing one for a byte-identical request) and, unless asynchronous, process it.

    DAP-18 (POST, Section 4.5.2.2): the Helper chooses the job ID (drawn from `rng`).
    DAP-09 (PUT, Section 4.5.1.2): the Leader chose `job_id`; the same ID with another
    request, or once the job has been continued, is refused.

    `prepared` (from `prepare_aggregation_job`, computed outside the transaction for this
    `body`) spares the transaction the decryption and VDAF work."""
    request_hash = digest(body)
    tid = task.task_id
    if job_id is not None:
        existing = tx.get_aggregation_job(tid, job_id)
        if existing is not None:
            if existing.role != "helper" or existing.request_hash != request_hash:
                raise DapProblem("invalidMessage", "the aggregation job exists with another "
                                 "request", 409, task_id=tid)
            if existing.step != 0 or existing.state == AggregationJobState.DELETED:
                raise DapProblem("invalidMessage", "the aggregation job was continued or "
                                 "deleted", 409, task_id=tid)
            return JobResult(existing.job_id, existing.response, existing.step)
    else:
        existing = tx.find_aggregation_job_by_hash(tid, request_hash)
        if existing is not None and existing.role == "helper" \
                and existing.state != AggregationJobState.DELETED:
            return JobResult(existing.job_id, existing.response, existing.step)
    if prepared is not None and prepared.request_hash != request_hash:
        prepared = None
    req = prepared.req if prepared is not None else task.wire.decode_init_req(task, body)
    batch_id = _check_init_request(task, req)
    job = AggregationJobRecord(task_id=tid, job_id=job_id or rng.token_bytes(16),
                               role="helper", state=AggregationJobState.ACTIVE, step=0,
                               agg_param=req.agg_param,
                               batch_id=batch_id, request=body, request_hash=request_hash)
    if asynchronous:
        tx.put_aggregation_job(job)
    else:
        # Stored once, processed (one statement: not inserted, then updated).
        process_aggregation_job(tx, task, job, keyring, now, clock_skew, prepared=prepared,
                                stored=False)
    return JobResult(job.job_id, job.response, job.step)


@dataclass
class PreparedInit:
    """What initializing an aggregation job computes without the datastore: the decoded
    request and, per report (by position), its decryption or VDAF preparation outcome.
    The transaction then only does the checks against stored state (replay, collected
    batches) and the commit, so that it stays short whatever the job's size."""

    request_hash: bytes
    req: InitReq
    # ord -> the report's error, or (its ping-pong state, its minimum batch size bound);
    # None: unknown verification key
    outcomes: dict[int, ReportError | tuple[Any, int]] | None


# A job's preparation calls its `pace` callback every this many reports (a server lets
# another job's thread run then: dap.server.common.Baton).
PACE_REPORTS = 16


def prepare_aggregation_job(task: AggregatorTask, keyring: Keyring, body: bytes,
                            now: float, clock_skew: int,
                            pace: Callable[[], None] | None = None) -> PreparedInit | None:
    """Decrypt and prepare (ping-pong init) every report of an init request, outside any
    transaction; None when the request does not decode (the transaction answers it).
    `pace`: called every PACE_REPORTS reports."""
    try:
        req = task.wire.decode_init_req(task, body)
    except (DapProblem, DecodeError, ValueError):
        return None
    verify_key = task.verify_keys.get(req.verification_key_id)
    if verify_key is None:
        return PreparedInit(digest(body), req, None)
    ctx = task.task.vdaf_ctx()
    outcomes: dict[int, ReportError | tuple[Any, int]] = {}
    for ord_, item in enumerate(req.items):
        if pace is not None and ord_ and not ord_ % PACE_REPORTS:
            pace()
        opened = _open_one(task, keyring, item, now, clock_skew)
        outcomes[ord_] = opened if isinstance(opened, ReportError) else (
            ping_pong_helper_init(task.vdaf, verify_key, ctx, req.agg_param, item.report_id,
                                  item.public_share, opened.payload, item.payload),
            min_batch_bound(task, item.metadata, opened.extensions))
    return PreparedInit(digest(body), req, outcomes)


def _reject_all(tx: Transaction, task: AggregatorTask, job: AggregationJobRecord,
                req: Any, error: ReportError, stored: bool = True) -> None:
    """Answer an init request by rejecting every report with ``error`` (`stored`: see
    `process_aggregation_job`)."""
    records = [ReportAggregationRecord(task.task_id, job.job_id, i, item.report_id, item.time,
                                       ReportAggregationState.REJECTED, error=int(error))
               for i, item in enumerate(req.items)]
    tx.put_report_aggregations(records)
    job.response = task.wire.encode_job_resp([_reject(item.report_id, error)
                                              for item in req.items])
    job.state = AggregationJobState.FINISHED
    job.request = b""  # answered (as in `process_aggregation_job`)
    (tx.update_aggregation_job if stored else tx.put_aggregation_job)(job)


def process_aggregation_job(tx: Transaction, task: AggregatorTask, job: AggregationJobRecord,
                            keyring: Keyring, now: float, clock_skew: int, *,
                            prepared: PreparedInit | None = None, stored: bool = True) -> None:
    """Compute the response to a stored init request and commit what finished (with the
    decryption and preparation taken from `prepared` when given). `stored=False`: the
    job is new, stored here with its outcome."""
    if prepared is not None and prepared.request_hash != job.request_hash:
        prepared = None
    req = prepared.req if prepared is not None else task.wire.decode_init_req(task,
                                                                              job.request)
    vdaf = task.vdaf
    ctx = task.task.vdaf_ctx()
    verify_key = task.verify_keys.get(req.verification_key_id)
    if verify_key is None:
        # DAP-19 (#784): each report is rejected with unknown_verification_key_id, so that
        # the Leader may retry them under a key ID this Helper knows.
        _reject_all(tx, task, job, req, ReportError.UNKNOWN_VERIFICATION_KEY_ID, stored)
        return
    responses: list[Resp | None] = []
    records: list[ReportAggregationRecord] = []
    to_commit: list[tuple[int, OutputShare]] = []
    outbound: dict[int, bytes] = {}
    memo = CommitMemo()
    # Without an aggregation parameter the replay check is left to the commit (the
    # marking in `commit_output_shares` says which reports were aggregated already):
    # "Helpers may perform these checks at any time before commitment" (DAP-18 Section
    # 4.5.3.3), and the job's reports are not looked up one more time in the
    # transaction. A replay is then verified before it is refused (the verification ran
    # before the transaction, `prepared`), and a replay that also fails verification is
    # refused with vdaf_verify_error rather than report_replayed (the checks are "in any
    # order", Section 4.5.2.4).
    early_replay = agg_params.uses_agg_param(task)
    memo.prefetch(tx, task, [item.time for item in req.items],
                  [job.batch_id] if job.batch_id is not None else [])
    for ord_, item in enumerate(req.items):
        rid = item.report_id
        rec = ReportAggregationRecord(task.task_id, job.job_id, ord_, rid, item.time,
                                      ReportAggregationState.REJECTED)
        records.append(rec)
        bucket = bucket_for(task, item.time, job.batch_id)
        error = commit_error(tx, task, item.report_id, item.time, bucket, job.agg_param, memo,
                             replay=early_replay)
        bound = 0
        if error is None and prepared is not None and prepared.outcomes is not None:
            outcome = prepared.outcomes[ord_]
            if isinstance(outcome, ReportError):
                error = outcome
            else:
                state, bound = outcome
        elif error is None:
            opened = _open_one(task, keyring, item, now, clock_skew)
            if isinstance(opened, ReportError):
                error = opened
            else:
                bound = min_batch_bound(task, item.metadata, opened.extensions)
                state = ping_pong_helper_init(vdaf, verify_key, ctx, req.agg_param, rid,
                                              item.public_share, opened.payload,
                                              item.payload)
        if error is not None:
            rec.error = int(error)
            responses.append(_reject(rid, error))
            continue
        rec.min_batch_bound = bound
        if isinstance(state, Rejected):
            rec.error = int(ReportError.VDAF_VERIFY_ERROR)
            responses.append(_reject(rid, ReportError.VDAF_VERIFY_ERROR))
        elif isinstance(state, FinishedWithOutbound):
            rec.state = ReportAggregationState.FINISHED
            to_commit.append((ord_, OutputShare(rid, item.time, bucket, state.out_share,
                                                rec.min_batch_bound)))
            outbound[ord_] = state.outbound
            responses.append(None)
        else:
            assert isinstance(state, Continued)
            rec.state = ReportAggregationState.ACTIVE
            rec.verify_state = vdaf.encode_verify_state(state.verify_state)
            responses.append(Resp(rid, VerifyRespType.CONTINUE, state.outbound))
    failed = commit_output_shares(tx, task, job.agg_param, [s for _, s in to_commit], memo)
    for ord_, committed in to_commit:
        err = failed.get(bytes(committed.report_id))
        if err is not None:
            records[ord_].state = ReportAggregationState.REJECTED
            records[ord_].error = int(err)
            responses[ord_] = _reject(committed.report_id, err)
        else:
            responses[ord_] = Resp(committed.report_id, VerifyRespType.CONTINUE,
                                   outbound[ord_])
    tx.put_report_aggregations(records)
    job.response = task.wire.encode_job_resp([r for r in responses if r is not None])
    job.state = (AggregationJobState.ACTIVE
                 if any(r.state == ReportAggregationState.ACTIVE for r in records)
                 else AggregationJobState.FINISHED)
    # Answered: the request (every report's shares) is not stored beyond this point. A
    # retry of it is recognised by its hash and answered with the stored response; a
    # continuation works from the report aggregations.
    job.request = b""
    (tx.update_aggregation_job if stored else tx.put_aggregation_job)(job)


def _reject(report_id: bytes, error: ReportError) -> Resp:
    return Resp(bytes(report_id), VerifyRespType.REJECT, error=error)


def _open_one(task: AggregatorTask, keyring: Keyring, item: InitItem, now: float,
              clock_skew: int) -> Decrypted | ReportError:
    """The checks of one report that need no datastore: decryption, validation, decoding
    (after `commit_error`, which needs it)."""
    plaintext = decrypt_input_share(task, keyring, Role.HELPER, item.metadata,
                                    item.public_share, item.ciphertext)
    if isinstance(plaintext, ReportError):
        return plaintext
    err = validate_report(task, item.metadata, plaintext.extensions, now, clock_skew)
    if err is not None:
        return err
    try:
        task.vdaf.decode_input_share(1, plaintext.payload)
        task.vdaf.decode_public_share(item.public_share)
    except ValueError:
        return ReportError.INVALID_MESSAGE
    return plaintext


# -- continuation, polling, deletion (Sections 4.5.4.2, 4.5.5) -----------------------------


def _get_job(tx: Transaction, task: AggregatorTask, job_id: bytes) -> AggregationJobRecord:
    job = tx.get_aggregation_job(task.task_id, job_id)
    if job is None or job.role != "helper" or job.state == AggregationJobState.DELETED:
        raise DapProblem("unrecognizedAggregationJob", "unknown aggregation job", 404,
                         task_id=task.task_id)
    return job


def continue_aggregation_job(tx: Transaction, task: AggregatorTask, job_id: bytes,
                             body: bytes) -> JobResult:
    job = _get_job(tx, task, job_id)
    tid = task.task_id
    step, continues = task.wire.decode_continue_req(task, body)
    if step == 0:
        raise DapProblem("invalidMessage", "continuation step 0", task_id=tid)
    if step == job.step and job.last_continue_hash:
        if digest(body) != job.last_continue_hash:
            raise DapProblem("invalidMessage", "a different request for the same step",
                             task_id=tid)
        return JobResult(job.job_id, job.response, job.step)
    if step != job.step + 1:
        raise DapProblem("stepMismatch", f"job is at step {job.step}, request for step "
                         f"{step}", task_id=tid)
    if job.state != AggregationJobState.ACTIVE or job.response is None:
        # No report of a finished job awaits a continuation (Section 4.5.4.2: each report
        # ID must correspond to a Continued state, else invalidMessage). Checked for the
        # job as a whole, so that an empty request does not pass vacuously and overwrite
        # the stored response; a job an asynchronous Helper has not initialized yet has
        # no Continued state either.
        raise DapProblem("invalidMessage", f"the aggregation job is {job.state}: no report "
                         "awaits a continuation", task_id=tid)
    records = tx.get_report_aggregations(tid, job.job_id)
    active = {r.report_id: r for r in records if r.state == ReportAggregationState.ACTIVE}
    ids = [rid for rid, _ in continues]
    if len(set(ids)) != len(ids) or any(i not in active for i in ids):
        raise DapProblem("invalidMessage", "report IDs do not match the job's reports",
                         task_id=tid)
    order = [r.report_id for r in records if r.report_id in active]
    positions = [order.index(i) for i in ids]
    if positions != sorted(positions):
        raise DapProblem("invalidMessage", "reports out of order", task_id=tid)
    vdaf = task.vdaf
    ctx = task.task.vdaf_ctx()
    responses: list[Resp] = []
    to_commit: list[tuple[ReportAggregationRecord, OutputShare, bytes | None]] = []
    changed: dict[int, ReportAggregationRecord] = {}
    for rid, payload in continues:
        rec = active.pop(rid)
        # Each exchange moves the ping-pong two rounds (VDAF Section 5.7.1): the Helper's
        # stored state for continuation step s is of round 2s - 1 (round 1 after init).
        prev = Continued(vdaf.decode_verify_state(rec.verify_state or b""), 2 * step - 1,
                         b"")
        state = ping_pong_helper_continued(vdaf, ctx, job.agg_param, prev, payload)
        if isinstance(state, Rejected):
            rec.state = ReportAggregationState.REJECTED
            rec.error = int(ReportError.VDAF_VERIFY_ERROR)
            rec.verify_state = None
            responses.append(_reject(rec.report_id, ReportError.VDAF_VERIFY_ERROR))
        elif isinstance(state, Continued):
            rec.verify_state = vdaf.encode_verify_state(state.verify_state)
            responses.append(Resp(rec.report_id, VerifyRespType.CONTINUE, state.outbound))
        else:
            assert isinstance(state, Finished | FinishedWithOutbound)
            out = state.outbound if isinstance(state, FinishedWithOutbound) else None
            bucket = bucket_for(task, rec.time, job.batch_id)
            to_commit.append((rec, OutputShare(rec.report_id, rec.time, bucket,
                                               state.out_share, rec.min_batch_bound), out))
            responses.append(Resp(rec.report_id, VerifyRespType.FINISH))  # replaced below
        changed[rec.ord] = rec
    for rec in active.values():  # omitted by the Leader: it rejected them
        rec.state, rec.error = ReportAggregationState.REJECTED, int(ReportError.VDAF_VERIFY_ERROR)
        rec.verify_state = None
        changed[rec.ord] = rec
    failed = commit_output_shares(tx, task, job.agg_param, [s for _, s, _ in to_commit])
    by_id = {r.report_id: i for i, r in enumerate(responses)}
    for rec, _share, out in to_commit:
        err = failed.get(rec.report_id)
        if err is not None:
            rec.state, rec.error = ReportAggregationState.REJECTED, int(err)
            responses[by_id[rec.report_id]] = _reject(rec.report_id, err)
        else:
            rec.state = ReportAggregationState.FINISHED
            responses[by_id[rec.report_id]] = (Resp(rec.report_id, VerifyRespType.CONTINUE,
                                                    out) if out is not None
                                               else Resp(rec.report_id, VerifyRespType.FINISH))
        rec.verify_state = None  # final: no longer needed
    tx.update_report_aggregations(list(changed.values()))
    job.step = step
    job.last_continue_hash = digest(body)
    job.response = task.wire.encode_job_resp(responses)
    still_active = any(r.state == ReportAggregationState.ACTIVE
                       for r in tx.get_report_aggregations(tid, job.job_id))
    job.state = AggregationJobState.ACTIVE if still_active else AggregationJobState.FINISHED
    tx.update_aggregation_job(job)
    return JobResult(job.job_id, job.response, job.step)


def get_aggregation_job(tx: Transaction, task: AggregatorTask, job_id: bytes,
                        step: int | None) -> JobResult:
    job = _get_job(tx, task, job_id)
    if job.state == AggregationJobState.ABANDONED:
        raise DapProblem("invalidMessage", f"the aggregation job failed: {job.error}",
                         task_id=task.task_id)
    if step is not None and step != job.step:
        raise DapProblem("stepMismatch", f"job is at step {job.step}", task_id=task.task_id)
    if job.response is None:
        raise NotReady()
    return JobResult(job.job_id, job.response, job.step)


def delete_aggregation_job(tx: Transaction, task: AggregatorTask, job_id: bytes) -> None:
    """Abandon a job (Section 4.5.5). Replay and collection records are kept."""
    job = _get_job(tx, task, job_id)
    job.state = AggregationJobState.DELETED
    tx.update_aggregation_job(job)


# -- aggregate shares (Section 4.6.4) -------------------------------------------------------


@dataclass
class ShareResult:
    share_id: bytes
    response: bytes | None


def create_aggregate_share(tx: Transaction, task: AggregatorTask, body: bytes,
                           asynchronous: bool, *, rng: Rng,
                           ephemeral_ikm: bytes | None = None) -> ShareResult:
    """Handle a POST to `aggregate_shares` (DAP-18 Section 4.6.4, DAP-09 Section 4.6.2).
    Validation, the batch-mismatch check and marking the batch collected happen here, in
    the request's transaction; computing the (noised) encrypted share happens here too
    unless `asynchronous`, in which case `finish_aggregate_share` does it in the
    background (DP noise is then drawn off the request path; DAP-09 has no asynchronous
    answer). The share job's ID is drawn from `rng`. `ephemeral_ikm` is FOR TEST VECTORS
    ONLY (see `finish_aggregate_share`)."""
    request_hash = digest(body)
    existing = tx.find_aggregate_share_job_by_hash(task.task_id, request_hash)
    if existing is not None:
        # The same request gets the same answer: the stored share (its DP noise is drawn
        # once per batch) or the stored failure.
        if existing.state == AggregateShareJobState.FAILED:
            raise DapProblem(existing.error or "invalidMessage", existing.error_detail or "",
                             task_id=task.task_id)
        if existing.state == AggregateShareJobState.DELETED:
            raise DapProblem("batchOverlap", "the batch was collected and its aggregate "
                             "share deleted", task_id=task.task_id)
        return ShareResult(existing.share_id, existing.response)
    tid = task.task_id
    req = task.wire.decode_share_req(task, body)
    merged = _select_batch(tx, task, req)
    # min_batch_size, the largest bound of the batch's reports, and the rate guard: the
    # Helper refuses on its own, whatever the Leader checked (paper 000 Section 4.4).
    problem = release_problem(task, merged)
    if problem is not None:
        raise problem
    limit = task.batch_size_limit
    if limit is not None and merged.report_count > limit:
        raise DapProblem("invalidBatchSize", f"{merged.report_count} reports, more than "
                         f"max_batch_size {limit}", task_id=tid)
    if merged.report_count != req.report_count or merged.checksum != req.checksum:
        raise DapProblem("batchMismatch", f"Helper has {merged.report_count} reports, Leader "
                         f"{req.report_count}, or the checksums differ", task_id=tid)
    _mark_collected(tx, task, req)
    job = AggregateShareJobRecord(tid, rng.token_bytes(16), body, request_hash,
                                  AggregateShareJobState.START)
    tx.put_aggregate_share_job(job)
    if not asynchronous:
        finish_aggregate_share(tx, task, job, rng=rng, ephemeral_ikm=ephemeral_ikm)
    return ShareResult(job.share_id, job.response)


def _select_batch(tx: Transaction, task: AggregatorTask, req: ShareReq) -> Any:
    tid = task.task_id
    coll = req.coll
    if coll.batch_mode != task.batch_mode:
        raise DapProblem("invalidMessage", "batch mode does not match the task", task_id=tid)
    vdaf = task.vdaf
    try:
        if not vdaf.is_valid(vdaf.decode_agg_param(coll.agg_param), []):
            raise ValueError("invalid")
    except ValueError:
        raise DapProblem("invalidMessage", "invalid aggregation parameter",
                         task_id=tid) from None
    if agg_params.uses_agg_param(task):
        # Collected once per parameter (dap.core.agg_params), by time interval only.
        interval = req.interval
        query = coll.interval
        if interval is not None and query is not None and (
                int(interval.start) < int(query.start) or interval.end > query.end):
            raise DapProblem("invalidMessage", "batch selector outside the query",
                             task_id=tid)
        agg_params.check_batch(tx, task, interval, coll.agg_param)
        assert interval is not None
        check_batch_interval(tx, task, interval, overlap=False)
        return merge_buckets(task, coll.agg_param,
                             buckets_of_interval(tx, task, interval, coll.agg_param))
    if task.batch_mode == BatchMode.TIME_INTERVAL:
        interval = req.interval
        query = coll.interval
        assert interval is not None and query is not None
        if int(interval.start) < int(query.start) or interval.end > query.end:
            raise DapProblem("invalidMessage", "batch selector outside the query",
                             task_id=tid)
        check_batch_interval(tx, task, interval)
        if other_agg_params(tx, task, None, interval, coll.agg_param):
            raise DapProblem("invalidMessage", "batch aggregated with another aggregation "
                             "parameter", task_id=tid)
        records = buckets_of_interval(tx, task, interval, coll.agg_param)
    else:
        assert req.batch_id is not None
        batch_id = req.batch_id
        if tx.is_bucket_collected(tid, batch_id):
            raise DapProblem("batchOverlap", "batch already collected", task_id=tid)
        if other_agg_params(tx, task, [batch_id], None, coll.agg_param):
            raise DapProblem("invalidMessage", "batch aggregated with another aggregation "
                             "parameter", task_id=tid)
        records = [r for r in tx.list_buckets(tid, [batch_id]) if r.agg_param == coll.agg_param]
    return merge_buckets(task, coll.agg_param, records)


def _mark_collected(tx: Transaction, task: AggregatorTask, req: ShareReq) -> None:
    if agg_params.uses_agg_param(task):
        assert req.interval is not None
        agg_params.mark_collected(tx, task, req.interval, req.coll.agg_param)
        return
    if req.interval is not None:
        tx.mark_interval_collected(task.task_id, int(req.interval.start), req.interval.end)
    else:
        assert req.batch_id is not None
        tx.mark_buckets_collected(task.task_id, [req.batch_id])


def finish_aggregate_share(tx: Transaction, task: AggregatorTask,
                           job: AggregateShareJobRecord, *, rng: Rng = OS_RNG,
                           ephemeral_ikm: bytes | None = None) -> None:
    """Compute, noise (DP policy) and encrypt the Helper's aggregate share. The batch is
    already collected, so its buckets no longer change. The DP noise is the next vector
    of the task's noise reserve (`dap.dp.noise_agg_share`: drawn beforehand, off the
    request path, from the Aggregator's `rng`), once for the batch: the encrypted share
    is stored in the job.

    `ephemeral_ikm` derives the HPKE ephemeral key of the encryption: FOR TEST VECTORS
    ONLY (the example vectors pin the `AggregateShare` bytes). The servers never pass it;
    without it HPKE draws a fresh key from the OS CSPRNG."""
    req = task.wire.decode_share_req(task, job.request)
    agg_param = req.coll.agg_param
    if req.interval is not None:
        records = buckets_of_interval(tx, task, req.interval, agg_param)
    else:
        assert req.batch_id is not None
        records = [r for r in tx.list_buckets(task.task_id, [req.batch_id])
                   if r.agg_param == agg_param]
    merged = merge_buckets(task, agg_param, records)
    agg_share = merged.agg_share
    agg_share = noise_agg_share(task, agg_share, rng)
    encoded = task.vdaf.encode_agg_share(agg_share)
    ciphertext = task.wire.encrypt_agg_share(task, Role.HELPER, req.coll, req.interval,
                                             req.batch_id, encoded, ephemeral_ikm=ephemeral_ikm)
    job.response = task.wire.encode_agg_share(ciphertext)
    job.state = AggregateShareJobState.FINISHED
    tx.update_aggregate_share_job(job)


def get_aggregate_share(tx: Transaction, task: AggregatorTask, share_id: bytes) -> ShareResult:
    job = tx.get_aggregate_share_job(task.task_id, share_id)
    if job is None or job.state == AggregateShareJobState.DELETED:
        raise DapProblem("unrecognizedAggregateShare", "unknown aggregate share", 404,
                         task_id=task.task_id, dap_type=False)
    if job.state == AggregateShareJobState.FAILED:
        raise DapProblem(job.error or "invalidMessage", job.error_detail or "",
                         task_id=task.task_id)
    if job.response is None:
        raise NotReady()
    return ShareResult(job.share_id, job.response)


def delete_aggregate_share(tx: Transaction, task: AggregatorTask, share_id: bytes) -> None:
    """Section 4.6.5: the share may be deleted; the batch stays collected."""
    job = tx.get_aggregate_share_job(task.task_id, share_id)
    if job is None:
        raise DapProblem("unrecognizedAggregateShare", "unknown aggregate share", 404,
                         task_id=task.task_id, dap_type=False)
    job.response = None
    job.state = AggregateShareJobState.DELETED
    tx.update_aggregate_share_job(job)


# -- background work that keeps failing (error isolation) ----------------------------------


def fail_aggregation_job(tx: Transaction, job: AggregationJobRecord, reason: str) -> None:
    """Give up an asynchronous aggregation job whose processing keeps raising: nothing of
    it was committed (each attempt's transaction rolled back). Polling it answers a
    problem, and the Leader abandons it (Section 4.5.5)."""
    job.state = AggregationJobState.ABANDONED
    job.error = reason
    job.lease_expiry = 0.0
    tx.update_aggregation_job(job)


def fail_aggregate_share(tx: Transaction, task: AggregatorTask | None,
                         job: AggregateShareJobRecord, reason: str) -> None:
    """Give up an aggregate share whose computation keeps raising. No share was
    released, so the batch is no longer considered collected here (as the Leader's
    `release_refused_collection` does on its side); polling answers the error."""
    try:
        req = task.wire.decode_share_req(task, job.request) if task is not None else None
    except DapProblem:
        req = None
    if task is not None and req is not None:
        if req.interval is not None:
            tx.unmark_interval_collected(task.task_id, int(req.interval.start),
                                         req.interval.end)
        elif req.batch_id is not None:
            tx.unmark_buckets_collected(task.task_id, [req.batch_id])
    job.state = AggregateShareJobState.FAILED
    job.error = "invalidMessage"
    job.error_detail = reason
    tx.update_aggregate_share_job(job)
