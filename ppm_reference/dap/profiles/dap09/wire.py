"""The protocol core's view of DAP-09's messages (:class:`dap.core.wire.Wire`).

What a wire does is in :mod:`dap.core.wire`; sections are draft-ietf-ppm-dap-09's. Times
are seconds on this draft's wire and time_precision units in the core.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ppm_reference.dap.codec import DecodeError
from ppm_reference.dap.common import (
    BatchMode,
    Duration,
    HpkeCiphertext,
    Interval,
    ReportError,
    Role,
    Time,
    VerifyRespType,
)
from ppm_reference.dap.core import wire as core
from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.hpke import HpkeKeypair
from ppm_reference.dap.profiles.dap09 import messages as m09
from ppm_reference.dap.profiles.dap09.client import encrypt_aggregate_share as encrypt_agg_share09
from ppm_reference.dap.profiles.dap09.client import open_input_share as open_input_share09

# ---------------------------------------------------------------------------------------
# DAP-09

_UPLOAD_PROBLEMS: dict[ReportError, str | None] = {
    ReportError.OUTDATED_CONFIG: "outdatedConfig",
    ReportError.REPORT_TOO_EARLY: "reportTooEarly",
    ReportError.REPORT_REPLAYED: None,
}
_RESP_STATE = {
    m09.PrepareRespState.CONTINUE: VerifyRespType.CONTINUE,
    m09.PrepareRespState.FINISHED: VerifyRespType.FINISH,
    m09.PrepareRespState.REJECT: VerifyRespType.REJECT,
}


# DAP-09's PrepareError (Section 4.5.1.2) by name, with its spellings: vdaf_prep_error is
# the core's vdaf_verify_error, and batch_saturated (fixed_size: the batch is full) is read
# as report_dropped. Errors DAP-09 lacks are written as the nearest it has: a report
# before the task's start cannot happen (DAP-09 tasks have no start), an outdated config
# is an upload error only, and the DAP-19 errors never arise in a DAP-09 job.
ERRORS = core.ErrorTranslation.by_name(m09.PrepareError, substitutes={
    ReportError.VDAF_VERIFY_ERROR: "VDAF_PREP_ERROR",
    ReportError.TASK_NOT_STARTED: "REPORT_DROPPED",
    ReportError.OUTDATED_CONFIG: "HPKE_UNKNOWN_CONFIG_ID",
    ReportError.UNKNOWN_VERIFICATION_KEY_ID: "INVALID_MESSAGE",
    ReportError.UNSUPPORTED_EXTENSION: "INVALID_MESSAGE",
}, read_as={"VDAF_PREP_ERROR": ReportError.VDAF_VERIFY_ERROR,
            "BATCH_SATURATED": ReportError.REPORT_DROPPED})


def to_prepare_error(error: ReportError) -> m09.PrepareError:
    return m09.PrepareError(ERRORS.encode(error))


class Wire09(core.Wire):
    m: Any = m09
    errors = ERRORS
    report_cls = m09.Report
    continue_req_cls = m09.AggregationJobContinueReq
    continue_item_cls = m09.PrepareContinue
    result_bound_to_request = False  # the AggregateShareAad binds the BatchSelector

    def upload_answer(self, task: Any, errors: Sequence[tuple[bytes, ReportError]]
                      ) -> bytes | None:
        """DAP-09 Section 4.4.2: errors are problem documents. A replayed report is
        ignored ("the Leader MUST ignore it"), so that a Client retrying an upload whose
        answer it lost is not told it failed."""
        for _, error in errors:
            token = _UPLOAD_PROBLEMS.get(error, "reportRejected")
            if token is not None:
                raise DapProblem(token, f"report refused: {error.name.lower()}",
                                 task_id=task.task_id)
        return None

    def decode_upload(self, body: bytes) -> list[Any]:
        return [m09.Report.decode(body)]

    def report_time(self, task: Any, metadata: Any) -> int:
        return int(metadata.time) // int(task.task.time_precision)

    def time_error(self, task: Any, metadata: Any, now: float, clock_skew: int,
                   check_too_early: bool = True) -> ReportError | None:
        t = int(metadata.time)
        if check_too_early and t > int(now) + clock_skew:
            return ReportError.REPORT_TOO_EARLY
        # "past the task's task_expiration" (DAP-09 Section 4.4.2): a report at the
        # expiration itself is still in (as our Client, which refuses t > expiration).
        expiration = task.task.task_expiration
        if expiration is not None and t > expiration:
            return ReportError.TASK_EXPIRED
        return None

    def open_input_share(self, task: Any, keypair: HpkeKeypair, role: Role, metadata: Any,
                         public_share: bytes, ciphertext: HpkeCiphertext
                         ) -> tuple[bytes, list[tuple[int, bytes]]]:
        aad = task.task.input_share_aad(metadata, public_share)
        plaintext = open_input_share09(keypair, role, aad, ciphertext, profile=task.profile)
        if m09.has_duplicate_extension_types(plaintext.extensions):
            # Section 4.5.1.4: the input share is invalid (invalid_message).
            raise DecodeError("duplicate report extension types")
        return plaintext.payload, [(int(e.extension_type), bytes(e.extension_data))
                                   for e in plaintext.extensions]

    def _units(self, task: Any, interval: m09.Interval) -> Interval:
        """A DAP-09 batch interval (seconds) in units; `batchInvalid` unless aligned
        (DAP-09 Section 4.6.5.1.1)."""
        p = task.task.time_precision
        start, duration = int(interval.start), int(interval.duration)
        if start % p or duration % p:
            raise DapProblem("batchInvalid", "batch interval not a multiple of "
                             f"time_precision {p}", task_id=task.task_id)
        return Interval(Time(start // p), Duration(duration // p))

    @staticmethod
    def _seconds(task: Any, interval: Interval) -> m09.Interval:
        p = task.task.time_precision
        return m09.Interval(m09.Time(int(interval.start) * p),
                            m09.Duration(int(interval.duration) * p))

    def encode_init_req(self, task: Any, agg_param: bytes, batch_id: bytes | None,
                        items: Sequence[tuple[Any, bytes]],
                        verification_key_id: int = 0) -> bytes:
        pbs = m09.PartialBatchSelector.fixed_size(batch_id) if batch_id is not None \
            else m09.PartialBatchSelector.time_interval()
        inits = tuple(
            m09.PrepareInit(m09.ReportShare(r.report_metadata, r.public_share,
                                            r.helper_encrypted_input_share), outbound)
            for r, outbound in items)
        return m09.AggregationJobInitReq(agg_param, pbs, inits).encode()

    def decode_init_req(self, task: Any, body: bytes) -> core.InitReq:
        try:
            req = m09.AggregationJobInitReq.decode(body)
        except DecodeError as exc:
            raise core.invalid_message(task, exc) from None
        if req.part_batch_selector.query_type != task.task.query_type:
            raise DapProblem("invalidMessage", "partial batch selector of another query type",
                             task_id=task.task_id)
        batch_id = req.part_batch_selector.batch_id
        items = [core.InitItem(p.report_share.report_metadata,
                          bytes(p.report_share.report_metadata.report_id),
                          self.report_time(task, p.report_share.report_metadata),
                          p.report_share.public_share, p.report_share.encrypted_input_share,
                          p.payload) for p in req.prepare_inits]
        return core.InitReq(req.agg_param, bytes(batch_id) if batch_id is not None else None, 0,
                       items)

    def encode_job_resp(self, resps: Sequence[core.Resp]) -> bytes:
        out = []
        for r in resps:
            if r.kind == VerifyRespType.CONTINUE:
                out.append(m09.PrepareResp.continue_(r.report_id, r.payload or b""))
            elif r.kind == VerifyRespType.FINISH:
                out.append(m09.PrepareResp.finished(r.report_id))
            else:
                assert r.error is not None
                out.append(m09.PrepareResp.reject(r.report_id, to_prepare_error(r.error)))
        return m09.AggregationJobResp(tuple(out)).encode()

    def decode_job_resp(self, body: bytes) -> list[core.Resp]:
        resp = m09.AggregationJobResp.decode(body)
        return [core.Resp(bytes(p.report_id), _RESP_STATE[p.prepare_resp_state], p.payload,
                     ERRORS.decode(p.prepare_error) if p.prepare_error is not None
                     else None)
                for p in resp.prepare_resps]

    def decode_collection_req(self, task: Any, body: bytes) -> core.CollReq:
        try:
            req = m09.CollectionReq.decode(body)
        except DecodeError as exc:
            raise core.invalid_message(task, exc) from None
        query = req.query
        if query.query_type != task.task.query_type:
            raise DapProblem("invalidMessage", "query type does not match the task",
                             task_id=task.task_id)
        if query.query_type == m09.QueryType.TIME_INTERVAL:
            assert query.batch_interval is not None
            return core.CollReq(req.agg_param, BatchMode.TIME_INTERVAL,
                           self._units(task, query.batch_interval))
        fsq = query.fixed_size_query
        assert fsq is not None
        batch_id = bytes(fsq.batch_id) if fsq.batch_id is not None else None
        return core.CollReq(req.agg_param, BatchMode.LEADER_SELECTED, None, batch_id)

    def _selector(self, task: Any, interval: Interval | None,
                  batch_id: bytes | None) -> m09.BatchSelector:
        if interval is not None:
            return m09.BatchSelector.time_interval(self._seconds(task, interval))
        assert batch_id is not None
        return m09.BatchSelector.fixed_size(batch_id)

    def encode_share_req(self, task: Any, coll: core.CollReq, interval: Interval | None,
                         batch_id: bytes | None, report_count: int, checksum: bytes) -> bytes:
        return m09.AggregateShareReq(self._selector(task, interval, batch_id), coll.agg_param,
                                     report_count, checksum).encode()

    def decode_share_req(self, task: Any, body: bytes) -> core.ShareReq:
        try:
            req = m09.AggregateShareReq.decode(body)
        except DecodeError as exc:
            raise core.invalid_message(task, exc) from None
        sel = req.batch_selector
        if sel.query_type != task.task.query_type:
            raise DapProblem("invalidMessage", "batch selector of another query type",
                             task_id=task.task_id)
        if sel.query_type == m09.QueryType.TIME_INTERVAL:
            assert sel.batch_interval is not None
            interval = self._units(task, sel.batch_interval)
            coll = core.CollReq(req.agg_param, BatchMode.TIME_INTERVAL, interval)
            return core.ShareReq(coll, interval, None, req.report_count, bytes(req.checksum))
        assert sel.batch_id is not None
        coll = core.CollReq(req.agg_param, BatchMode.LEADER_SELECTED, None, bytes(sel.batch_id))
        return core.ShareReq(coll, None, bytes(sel.batch_id), req.report_count, bytes(req.checksum))

    def encrypt_agg_share(self, task: Any, role: Role, coll: core.CollReq,
                          interval: Interval | None, batch_id: bytes | None,
                          encoded: bytes, *, ephemeral_ikm: bytes | None = None
                          ) -> HpkeCiphertext:
        # The batch selector is the query's interval (time_interval) or the batch ID
        # (fixed_size) (DAP-09 Section 4.6.4).
        return encrypt_agg_share09(task.task, task.collector_hpke_config, role,
                                   coll.agg_param, self._selector(task, interval, batch_id),
                                   encoded, ephemeral_ikm=ephemeral_ikm)

    def encode_collection(self, task: Any, coll: core.CollReq, batch_id: bytes | None,
                          report_count: int, interval: Interval, leader: HpkeCiphertext,
                          helper: HpkeCiphertext) -> bytes:
        pbs = m09.PartialBatchSelector.fixed_size(batch_id) if batch_id is not None \
            else m09.PartialBatchSelector.time_interval()
        # "The smallest interval ... whose start and duration are multiples of
        # time_precision" (Section 4.6.1): the units interval, in seconds.
        return m09.Collection(pbs, report_count, self._seconds(task, interval), leader,
                              helper).encode()


