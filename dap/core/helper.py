"""The Helper (DAP-18 Sections 4.5.2.2, 4.5.4.2, 4.6.4) without I/O.

Each function runs inside one datastore transaction supplied by the caller, so that a
response is stored together with every state change it reports (output shares
committed, batches marked collected): a retried request gets the stored response.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dap.client_core import encrypt_aggregate_share, input_share_aad
from dap.codec import DecodeError
from dap.core.buckets import (
    OutputShare,
    bucket_for,
    buckets_of_interval,
    check_batch_interval,
    commit_error,
    commit_output_shares,
    merge_buckets,
    other_agg_params,
)
from dap.core.errors import DapProblem, NotReady
from dap.core.tasks import AggregatorTask, Keyring
from dap.hpke import HpkeError, open_input_share
from dap.messages import (
    AggregateShare,
    AggregateShareReq,
    AggregationJobContinueReq,
    AggregationJobExtensionType,
    AggregationJobInitReq,
    AggregationJobResp,
    BatchMode,
    BatchSelector,
    CollectionJobReq,
    Extension,
    PlaintextInputShare,
    ReportError,
    ReportMetadata,
    Role,
    VerifyResp,
)
from dap.storage import (
    AggregateShareJobRecord,
    AggregationJobRecord,
    ReportAggregationRecord,
    Transaction,
)
from vdaf.ping_pong import (
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


def validate_report(task: AggregatorTask, metadata: ReportMetadata,
                    private_extensions: Sequence[Extension], now: float,
                    clock_skew: int) -> ReportError | None:
    """Input share validation (Section 4.5.2.4) for checks that do not need the datastore."""
    report_time = int(metadata.time)
    skew_units = -(-clock_skew // task.task.time_precision)
    if report_time > task.now_time(now) + skew_units:
        return ReportError.REPORT_TOO_EARLY
    interval = task.task.task_interval
    if interval is not None:
        if report_time < int(interval.start):
            return ReportError.TASK_NOT_STARTED
        if report_time >= interval.end:
            return ReportError.TASK_EXPIRED
    # DAP-18 defines no report extension types: any extension is unrecognized.
    public = [e.extension_type for e in metadata.public_extensions]
    private = [e.extension_type for e in private_extensions]
    if public or private:
        return ReportError.INVALID_MESSAGE
    if len(set(public + private)) != len(public) + len(private):
        return ReportError.INVALID_MESSAGE
    return None


def decrypt_input_share(task: AggregatorTask, keyring: Keyring, role: Role,
                        metadata: ReportMetadata, public_share: bytes,
                        ciphertext: Any) -> PlaintextInputShare | ReportError:
    """Input share decryption (Section 4.5.2.3)."""
    keypair = keyring.get(ciphertext.config_id)
    if keypair is None:
        # The draft: "If the HPKE configuration ID is unrecognized or decryption fails,
        # the Aggregator marks the report share as invalid with the error
        # hpke_decrypt_error" (although hpke_unknown_config_id exists).
        return ReportError.HPKE_DECRYPT_ERROR
    aad = input_share_aad(task.task, metadata, public_share)
    try:
        return open_input_share(keypair, role, aad, ciphertext, profile=task.profile)
    except HpkeError:
        return ReportError.HPKE_DECRYPT_ERROR
    except DecodeError:
        return ReportError.INVALID_MESSAGE


# -- aggregation job initialization (Section 4.5.2.2) --------------------------------------


def _check_init_request(task: AggregatorTask, req: AggregationJobInitReq) -> bytes | None:
    """The checks that fail the whole job. Returns the leader-selected batch ID."""
    tid = task.task_id
    unknown = [e.extension_type for e in req.extensions
               if e.extension_type != AggregationJobExtensionType.LEADER_SELECTED_BATCH_ID]
    if unknown:
        raise DapProblem("unsupportedExtension", "unknown aggregation job extension",
                         task_id=tid, unsupported_extensions=unknown)
    try:
        batch_id = req.leader_selected_batch_id()
    except DecodeError as exc:
        raise DapProblem("invalidMessage", f"bad batch ID extension: {exc}", task_id=tid) from None
    if task.batch_mode == BatchMode.LEADER_SELECTED and batch_id is None:
        raise DapProblem("invalidMessage", "leader_selected_batch_id extension missing",
                         task_id=tid)
    if task.batch_mode == BatchMode.TIME_INTERVAL and batch_id is not None:
        raise DapProblem("invalidMessage", "batch ID extension in a time-interval task",
                         task_id=tid)
    if req.verification_key_id not in task.verify_keys:
        raise DapProblem("invalidMessage", f"unknown verification key id "
                         f"{req.verification_key_id}", task_id=tid)
    vdaf = task.vdaf
    try:
        if not vdaf.is_valid(vdaf.decode_agg_param(req.agg_param), []):
            raise ValueError("not valid")
    except ValueError as exc:
        raise DapProblem("invalidAggregationParameter", str(exc), task_id=tid) from None
    ids = [bytes(v.report_share.report_metadata.report_id) for v in req.verify_inits]
    if len(set(ids)) != len(ids):
        raise DapProblem("invalidMessage", "duplicate report IDs", task_id=tid)
    if not ids:
        raise DapProblem("invalidMessage", "aggregation job without reports", task_id=tid)
    return bytes(batch_id) if batch_id is not None else None


def create_aggregation_job(tx: Transaction, task: AggregatorTask, body: bytes,
                           asynchronous: bool, keyring: Keyring, now: float,
                           clock_skew: int) -> JobResult:
    """Handle a POST to `aggregation_jobs`: validate, create the job (or return the
    existing one for a byte-identical request) and, unless asynchronous, process it."""
    request_hash = digest(body)
    existing = tx.find_aggregation_job_by_hash(task.task_id, request_hash)
    if existing is not None and existing.role == "helper" and existing.state != "deleted":
        return JobResult(existing.job_id, existing.response, existing.step)
    try:
        req = AggregationJobInitReq.decode(body)
    except DecodeError as exc:
        raise DapProblem("invalidMessage", str(exc), task_id=task.task_id) from None
    batch_id = _check_init_request(task, req)
    job = AggregationJobRecord(task_id=task.task_id, job_id=secrets.token_bytes(16),
                               role="helper", state="active", step=0, agg_param=req.agg_param,
                               batch_id=batch_id, request=body, request_hash=request_hash)
    tx.put_aggregation_job(job)
    if not asynchronous:
        process_aggregation_job(tx, task, job, keyring, now, clock_skew)
    return JobResult(job.job_id, job.response, job.step)


def process_aggregation_job(tx: Transaction, task: AggregatorTask, job: AggregationJobRecord,
                            keyring: Keyring, now: float, clock_skew: int) -> None:
    """Compute the response to a stored init request and commit what finished."""
    req = AggregationJobInitReq.decode(job.request)
    vdaf = task.vdaf
    ctx = task.task.vdaf_ctx()
    verify_key = task.verify_keys[req.verification_key_id]
    responses: list[VerifyResp | None] = []
    records: list[ReportAggregationRecord] = []
    to_commit: list[tuple[int, OutputShare]] = []
    outbound: dict[int, bytes] = {}
    for ord_, vi in enumerate(req.verify_inits):
        share = vi.report_share
        md = share.report_metadata
        rid = bytes(md.report_id)
        rec = ReportAggregationRecord(task.task_id, job.job_id, ord_, rid, int(md.time),
                                      "rejected")
        records.append(rec)
        error = _init_one(tx, task, keyring, job, md, share, now, clock_skew)
        if isinstance(error, ReportError):
            rec.error = int(error)
            responses.append(VerifyResp.reject(rid, error))
            continue
        state = ping_pong_helper_init(vdaf, verify_key, ctx, req.agg_param, rid,
                                      share.public_share, error.payload, vi.payload)
        if isinstance(state, Rejected):
            rec.error = int(ReportError.VDAF_VERIFY_ERROR)
            responses.append(VerifyResp.reject(rid, ReportError.VDAF_VERIFY_ERROR))
        elif isinstance(state, FinishedWithOutbound):
            rec.state = "finished"
            bucket = bucket_for(task, int(md.time), job.batch_id)
            to_commit.append((ord_, OutputShare(rid, int(md.time), bucket, state.out_share)))
            outbound[ord_] = state.outbound
            responses.append(None)
        else:
            assert isinstance(state, Continued)
            rec.state = "active"
            rec.verify_state = vdaf.encode_verify_state(state.verify_state)
            responses.append(VerifyResp.continue_(rid, state.outbound))
    failed = commit_output_shares(tx, task, job.agg_param, [s for _, s in to_commit])
    for ord_, committed in to_commit:
        err = failed.get(bytes(committed.report_id))
        if err is not None:
            records[ord_].state = "rejected"
            records[ord_].error = int(err)
            responses[ord_] = VerifyResp.reject(committed.report_id, err)
        else:
            responses[ord_] = VerifyResp.continue_(committed.report_id, outbound[ord_])
    tx.put_report_aggregations(records)
    job.response = AggregationJobResp(tuple(r for r in responses if r is not None)).encode()
    job.state = "active" if any(r.state == "active" for r in records) else "finished"
    tx.update_aggregation_job(job)


def _init_one(tx: Transaction, task: AggregatorTask, keyring: Keyring, job: AggregationJobRecord,
              md: ReportMetadata, share: Any, now: float,
              clock_skew: int) -> PlaintextInputShare | ReportError:
    rid = bytes(md.report_id)
    bucket = bucket_for(task, int(md.time), job.batch_id)
    err = commit_error(tx, task, rid, int(md.time), bucket)
    if err is not None:
        return err
    plaintext = decrypt_input_share(task, keyring, Role.HELPER, md, share.public_share,
                                    share.encrypted_input_share)
    if isinstance(plaintext, ReportError):
        return plaintext
    err = validate_report(task, md, plaintext.private_extensions, now, clock_skew)
    if err is not None:
        return err
    try:
        task.vdaf.decode_input_share(1, plaintext.payload)
        task.vdaf.decode_public_share(share.public_share)
    except ValueError:
        return ReportError.INVALID_MESSAGE
    return plaintext


# -- continuation, polling, deletion (Sections 4.5.4.2, 4.5.5) -----------------------------


def _get_job(tx: Transaction, task: AggregatorTask, job_id: bytes) -> AggregationJobRecord:
    job = tx.get_aggregation_job(task.task_id, job_id)
    if job is None or job.role != "helper" or job.state == "deleted":
        raise DapProblem("unrecognizedAggregationJob", "unknown aggregation job", 404,
                         task_id=task.task_id)
    return job


def continue_aggregation_job(tx: Transaction, task: AggregatorTask, job_id: bytes,
                             body: bytes) -> JobResult:
    job = _get_job(tx, task, job_id)
    tid = task.task_id
    try:
        req = AggregationJobContinueReq.decode(body)
    except DecodeError as exc:
        raise DapProblem("invalidMessage", str(exc), task_id=tid) from None
    if req.step == 0:
        raise DapProblem("invalidMessage", "continuation step 0", task_id=tid)
    if req.step == job.step and job.last_continue_hash:
        if digest(body) != job.last_continue_hash:
            raise DapProblem("invalidMessage", "a different request for the same step",
                             task_id=tid)
        return JobResult(job.job_id, job.response, job.step)
    if req.step != job.step + 1:
        raise DapProblem("stepMismatch", f"job is at step {job.step}, request for step "
                         f"{req.step}", task_id=tid)
    records = tx.get_report_aggregations(tid, job.job_id)
    active = {r.report_id: r for r in records if r.state == "active"}
    ids = [bytes(c.report_id) for c in req.verify_continues]
    if len(set(ids)) != len(ids) or any(i not in active for i in ids):
        raise DapProblem("invalidMessage", "report IDs do not match the job's reports",
                         task_id=tid)
    order = [r.report_id for r in records if r.report_id in active]
    positions = [order.index(i) for i in ids]
    if positions != sorted(positions):
        raise DapProblem("invalidMessage", "reports out of order", task_id=tid)
    vdaf = task.vdaf
    ctx = task.task.vdaf_ctx()
    responses: list[VerifyResp] = []
    to_commit: list[tuple[ReportAggregationRecord, OutputShare, bytes | None]] = []
    for c in req.verify_continues:
        rec = active.pop(bytes(c.report_id))
        prev = Continued(vdaf.decode_verify_state(rec.verify_state or b""), job.step,
                         b"")
        state = ping_pong_helper_continued(vdaf, ctx, job.agg_param, prev, c.payload)
        if isinstance(state, Rejected):
            rec.state, rec.error = "rejected", int(ReportError.VDAF_VERIFY_ERROR)
            responses.append(VerifyResp.reject(rec.report_id, ReportError.VDAF_VERIFY_ERROR))
        elif isinstance(state, Continued):
            rec.verify_state = vdaf.encode_verify_state(state.verify_state)
            responses.append(VerifyResp.continue_(rec.report_id, state.outbound))
        else:
            assert isinstance(state, Finished | FinishedWithOutbound)
            out = state.outbound if isinstance(state, FinishedWithOutbound) else None
            bucket = bucket_for(task, rec.time, job.batch_id)
            to_commit.append((rec, OutputShare(rec.report_id, rec.time, bucket,
                                               state.out_share), out))
            responses.append(VerifyResp.finish(rec.report_id))  # replaced below
        tx.update_report_aggregation(rec)
    for rec in active.values():  # omitted by the Leader: it rejected them
        rec.state, rec.error = "rejected", int(ReportError.VDAF_VERIFY_ERROR)
        tx.update_report_aggregation(rec)
    failed = commit_output_shares(tx, task, job.agg_param, [s for _, s, _ in to_commit])
    by_id = {bytes(r.report_id): i for i, r in enumerate(responses)}
    for rec, _share, out in to_commit:
        err = failed.get(rec.report_id)
        if err is not None:
            rec.state, rec.error = "rejected", int(err)
            responses[by_id[rec.report_id]] = VerifyResp.reject(rec.report_id, err)
        else:
            rec.state = "finished"
            responses[by_id[rec.report_id]] = (VerifyResp.continue_(rec.report_id, out)
                                               if out is not None
                                               else VerifyResp.finish(rec.report_id))
        tx.update_report_aggregation(rec)
    job.step = req.step
    job.last_continue_hash = digest(body)
    job.response = AggregationJobResp(tuple(responses)).encode()
    still_active = any(r.state == "active" for r in tx.get_report_aggregations(tid, job.job_id))
    job.state = "active" if still_active else "finished"
    tx.update_aggregation_job(job)
    return JobResult(job.job_id, job.response, job.step)


def get_aggregation_job(tx: Transaction, task: AggregatorTask, job_id: bytes,
                        step: int | None) -> JobResult:
    job = _get_job(tx, task, job_id)
    if step is not None and step != job.step:
        raise DapProblem("stepMismatch", f"job is at step {job.step}", task_id=task.task_id)
    if job.response is None:
        raise NotReady()
    return JobResult(job.job_id, job.response, job.step)


def delete_aggregation_job(tx: Transaction, task: AggregatorTask, job_id: bytes) -> None:
    """Abandon a job (Section 4.5.5). Replay and collection records are kept."""
    job = _get_job(tx, task, job_id)
    job.state = "deleted"
    tx.update_aggregation_job(job)


# -- aggregate shares (Section 4.6.4) -------------------------------------------------------


@dataclass
class ShareResult:
    share_id: bytes
    response: bytes | None


def create_aggregate_share(tx: Transaction, task: AggregatorTask, body: bytes,
                           asynchronous: bool) -> ShareResult:
    """Handle a POST to `aggregate_shares`. Validation, the batch-mismatch check and
    marking the batch collected happen here, in the request's transaction; computing
    the (noised) encrypted share happens here too unless `asynchronous`, in which case
    `finish_aggregate_share` does it in the background (DP noise is then drawn off the
    request path)."""
    request_hash = digest(body)
    existing = tx.find_aggregate_share_job_by_hash(task.task_id, request_hash)
    if existing is not None:
        if existing.state == "failed":
            raise DapProblem(existing.error or "invalidMessage", existing.error_detail or "",
                             task_id=task.task_id)
        return ShareResult(existing.share_id, existing.response)
    tid = task.task_id
    try:
        req = AggregateShareReq.decode(body)
    except DecodeError as exc:
        # invalidExtension for unsorted collection job extensions (Sections 4.6.2, 4.6.4).
        raise DapProblem(exc.problem_type, str(exc), task_id=tid) from None
    merged = _select_batch(tx, task, req.collection_job_req, req.batch_selector)
    if merged.report_count < task.task.min_batch_size:
        raise DapProblem("invalidBatchSize", f"{merged.report_count} reports, fewer than "
                         f"min_batch_size {task.task.min_batch_size}", task_id=tid)
    if merged.report_count != req.report_count or merged.checksum != bytes(req.checksum):
        raise DapProblem("batchMismatch", f"Helper has {merged.report_count} reports, Leader "
                         f"{req.report_count}, or the checksums differ", task_id=tid)
    _mark_collected(tx, task, req.batch_selector)
    job = AggregateShareJobRecord(tid, secrets.token_bytes(16), body, request_hash, "start")
    tx.put_aggregate_share_job(job)
    if not asynchronous:
        finish_aggregate_share(tx, task, job)
    return ShareResult(job.share_id, job.response)


def _select_batch(tx: Transaction, task: AggregatorTask, cjr: CollectionJobReq,
                  selector: BatchSelector) -> Any:
    tid = task.task_id
    if selector.batch_mode != task.batch_mode or cjr.query.batch_mode != task.batch_mode:
        raise DapProblem("invalidMessage", "batch mode does not match the task", task_id=tid)
    if cjr.extensions:
        raise DapProblem("unsupportedExtension", "unknown collection job extension",
                         task_id=tid,
                         unsupported_extensions=[e.extension_type for e in cjr.extensions])
    vdaf = task.vdaf
    try:
        if not vdaf.is_valid(vdaf.decode_agg_param(cjr.agg_param), []):
            raise ValueError("invalid")
    except ValueError:
        raise DapProblem("invalidMessage", "invalid aggregation parameter",
                         task_id=tid) from None
    if task.batch_mode == BatchMode.TIME_INTERVAL:
        interval = selector.batch_interval
        query = cjr.query.batch_interval
        if int(interval.start) < int(query.start) or interval.end > query.end:
            raise DapProblem("invalidMessage", "batch selector outside the query",
                             task_id=tid)
        check_batch_interval(tx, task, interval)
        if other_agg_params(tx, task, None, interval, cjr.agg_param):
            raise DapProblem("invalidMessage", "batch aggregated with another aggregation "
                             "parameter", task_id=tid)
        records = buckets_of_interval(tx, task, interval, cjr.agg_param)
    else:
        batch_id = bytes(selector.batch_id)
        if tx.is_bucket_collected(tid, batch_id):
            raise DapProblem("batchOverlap", "batch already collected", task_id=tid)
        if other_agg_params(tx, task, [batch_id], None, cjr.agg_param):
            raise DapProblem("invalidMessage", "batch aggregated with another aggregation "
                             "parameter", task_id=tid)
        records = [r for r in tx.list_buckets(tid, [batch_id]) if r.agg_param == cjr.agg_param]
    return merge_buckets(task, cjr.agg_param, records)


def _mark_collected(tx: Transaction, task: AggregatorTask, selector: BatchSelector) -> None:
    if task.batch_mode == BatchMode.TIME_INTERVAL:
        interval = selector.batch_interval
        tx.mark_interval_collected(task.task_id, int(interval.start), interval.end)
    else:
        tx.mark_buckets_collected(task.task_id, [bytes(selector.batch_id)])


def finish_aggregate_share(tx: Transaction, task: AggregatorTask,
                           job: AggregateShareJobRecord) -> None:
    """Compute, noise (DP policy) and encrypt the Helper's aggregate share. The batch is
    already collected, so its buckets no longer change."""
    req = AggregateShareReq.decode(job.request)
    cjr = req.collection_job_req
    if task.batch_mode == BatchMode.TIME_INTERVAL:
        records = buckets_of_interval(tx, task, req.batch_selector.batch_interval, cjr.agg_param)
    else:
        records = [r for r in tx.list_buckets(task.task_id, [bytes(req.batch_selector.batch_id)])
                   if r.agg_param == cjr.agg_param]
    merged = merge_buckets(task, cjr.agg_param, records)
    agg_share = merged.agg_share
    if task.dp_policy is not None:
        agg_share = task.dp_policy.add_noise_to_agg_share(agg_share)
    encoded = task.vdaf.encode_agg_share(agg_share)
    ciphertext = encrypt_aggregate_share(task.task, task.collector_hpke_config, Role.HELPER,
                                         cjr, encoded)
    job.response = AggregateShare(ciphertext).encode()
    job.state = "finished"
    tx.update_aggregate_share_job(job)


def get_aggregate_share(tx: Transaction, task: AggregatorTask, share_id: bytes) -> ShareResult:
    job = tx.get_aggregate_share_job(task.task_id, share_id)
    if job is None:
        raise DapProblem("unrecognizedAggregateShare", "unknown aggregate share", 404,
                         task_id=task.task_id, dap_type=False)
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
    job.state = "deleted"
    tx.update_aggregate_share_job(job)
