"""The protocol core's view of a profile's wire messages.

The Leader and Helper logic (`dap.core.leader`, `dap.core.helper`) is written once; what
differs between DAP-18 and DAP-09 on the wire is here, behind one small interface
(`Wire18`, `Wire09`, chosen by the task's profile: `wire_for(task)`):

* message shapes: DAP-18 `VerifyInit` / `VerifyResp` / `CollectionJobReq` against DAP-09
  `PrepareInit` / `PrepareResp` / `CollectionReq`, the batch ID of an aggregation job in an
  extension (DAP-18 Section 5.2.2) or a `PartialBatchSelector` (DAP-09 Section 4.5.1.1);
* time: DAP-18 counts report times and intervals in `time_precision` units (Section
  4.1.1), DAP-09 in seconds. The core always works in units (batch buckets are one unit
  wide); a DAP-09 report at second `t` is in unit `t // time_precision`, and a DAP-09
  batch interval must be a whole number of units (DAP-09 Section 4.6.5.1.1, boundary
  check) so it converts exactly;
* report errors: the core uses DAP-18 `ReportError`; DAP-09 `PrepareError` codes are
  mapped at the wire (`task_not_started` and `outdated_config` have no DAP-09 value);
* HPKE associated data: DAP-18 binds the `TaskConfiguration` and the `CollectionJobReq`,
  DAP-09 the task ID, report metadata and the `BatchSelector` (DAP-09 Sections 4.4.2,
  4.6.4);
* upload results: DAP-18 answers a batch of reports with `UploadErrors`; DAP-09 takes one
  report per request and answers errors with problem documents (Section 4.4.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dap import messages as m18
from dap import messages09 as m09
from dap.client09 import encrypt_aggregate_share as encrypt_agg_share09
from dap.client09 import open_input_share as open_input_share09
from dap.client_core import encrypt_aggregate_share, input_share_aad
from dap.codec import DecodeError
from dap.core.errors import DapProblem
from dap.hpke import HpkeKeypair, open_input_share
from dap.messages import (
    AggregationJobExtensionType,
    BatchMode,
    Duration,
    HpkeCiphertext,
    Interval,
    ReportError,
    Role,
    Time,
    VerifyRespType,
)


@dataclass
class InitItem:
    """One report of an aggregation job initialization request."""

    metadata: Any                   # the profile's ReportMetadata (bound into the AAD)
    report_id: bytes
    time: int                       # in time_precision units
    public_share: bytes
    ciphertext: HpkeCiphertext
    payload: bytes                  # the Leader's first ping-pong message


@dataclass
class InitReq:
    agg_param: bytes
    batch_id: bytes | None
    verification_key_id: int
    items: list[InitItem]


@dataclass
class Resp:
    """A per-report response (`VerifyResp` / `PrepareResp`)."""

    report_id: bytes
    kind: VerifyRespType
    payload: bytes | None = None
    error: ReportError | None = None


@dataclass
class CollReq:
    """A collection request (`CollectionJobReq` / `CollectionReq`), times in units.

    `batch_id` is set for a DAP-09 `by_batch_id` query; `cjr` is the DAP-18
    `CollectionJobReq` (bound into DAP-18's AggregateShareAad)."""

    agg_param: bytes
    batch_mode: BatchMode
    interval: Interval | None = None
    batch_id: bytes | None = None
    cjr: Any = None


@dataclass
class ShareReq:
    """An `AggregateShareReq`, times in units."""

    coll: CollReq
    interval: Interval | None       # the batch selector's interval (time-interval)
    batch_id: bytes | None          # the batch selector's batch ID (leader-selected)
    report_count: int
    checksum: bytes


class Wire:
    """What the core needs from a profile's messages. Decoders raise `DapProblem`."""

    report_cls: Any
    # HTTP statuses of successful answers that differ between the drafts.
    statuses: dict[str, int]
    # Message names (for media types) of request and response bodies that differ.
    messages: dict[str, str]

    def upload_answer(self, task: Any, errors: Sequence[tuple[bytes, ReportError]]
                      ) -> bytes | None:
        """The body answering an upload (None: no body), or a raised `DapProblem`."""
        raise NotImplementedError

    # -- reports and time ---------------------------------------------------------------
    def decode_report(self, body: bytes) -> Any:
        return self.report_cls.decode(body)

    def decode_upload(self, body: bytes) -> list[Any]:
        """The reports of an upload request. Raises `DecodeError`."""
        raise NotImplementedError

    def report_time(self, task: Any, metadata: Any) -> int:
        raise NotImplementedError

    def time_error(self, task: Any, metadata: Any, now: float, clock_skew: int,
                   check_too_early: bool = True) -> ReportError | None:
        raise NotImplementedError

    def public_extension_types(self, metadata: Any) -> list[int]:
        return []

    def open_input_share(self, task: Any, keypair: HpkeKeypair, role: Role, metadata: Any,
                         public_share: bytes, ciphertext: HpkeCiphertext
                         ) -> tuple[bytes, list[int]]:
        """Decrypt an input share: (VDAF input share, extension types). Raises
        `HpkeError` or `DecodeError`."""
        raise NotImplementedError

    # -- aggregation --------------------------------------------------------------------
    def encode_init_req(self, task: Any, agg_param: bytes, batch_id: bytes | None,
                        items: Sequence[tuple[Any, bytes]]) -> bytes:
        raise NotImplementedError

    def decode_init_req(self, task: Any, body: bytes) -> InitReq:
        raise NotImplementedError

    def encode_job_resp(self, resps: Sequence[Resp]) -> bytes:
        raise NotImplementedError

    def decode_job_resp(self, body: bytes) -> list[Resp]:
        """Raises `DecodeError`."""
        raise NotImplementedError

    # The continuation request has the same shape in both drafts: (step, [(id, msg)]).
    continue_req_cls: Any
    continue_item_cls: Any

    def encode_continue_req(self, step: int, items: Sequence[tuple[bytes, bytes]]) -> bytes:
        return bytes(self.continue_req_cls(step, tuple(
            self.continue_item_cls(m18.ReportID(rid), payload)
            for rid, payload in items)).encode())

    def decode_continue_req(self, task: Any, body: bytes) -> tuple[int, list[tuple[bytes,
                                                                                  bytes]]]:
        try:
            req = self.continue_req_cls.decode(body)
        except DecodeError as exc:
            raise _invalid(task, exc) from None
        items = req.verify_continues if hasattr(req, "verify_continues") \
            else req.prepare_continues
        return int(req.step), [(bytes(c.report_id), bytes(c.payload)) for c in items]

    # -- collection ---------------------------------------------------------------------
    def decode_collection_req(self, task: Any, body: bytes) -> CollReq:
        raise NotImplementedError

    def encode_share_req(self, task: Any, coll: CollReq, interval: Interval | None,
                         batch_id: bytes | None, report_count: int, checksum: bytes) -> bytes:
        raise NotImplementedError

    def decode_share_req(self, task: Any, body: bytes) -> ShareReq:
        raise NotImplementedError

    def encrypt_agg_share(self, task: Any, role: Role, coll: CollReq,
                          interval: Interval | None, batch_id: bytes | None,
                          encoded: bytes) -> HpkeCiphertext:
        raise NotImplementedError

    def encode_agg_share(self, ciphertext: HpkeCiphertext) -> bytes:
        raise NotImplementedError

    def decode_agg_share(self, body: bytes) -> HpkeCiphertext:
        """Raises `DecodeError`."""
        raise NotImplementedError

    def encode_collection(self, task: Any, coll: CollReq, batch_id: bytes | None,
                          report_count: int, interval: Interval, leader: HpkeCiphertext,
                          helper: HpkeCiphertext) -> bytes:
        raise NotImplementedError


def _invalid(task: Any, exc: Exception, token: str = "invalidMessage") -> DapProblem:
    return DapProblem(token, str(exc), task_id=task.task_id)


# ---------------------------------------------------------------------------------------
# DAP-18


class Wire18(Wire):
    report_cls = m18.Report
    continue_req_cls = m18.AggregationJobContinueReq
    continue_item_cls = m18.VerifyContinue
    statuses = {"upload": 200, "collection_not_ready": 200, "aggregation_job_init": 201,
                "aggregate_share": 201}
    messages = {"upload": "UploadRequest", "collection": "CollectionJobResp"}

    def upload_answer(self, task: Any, errors: Sequence[tuple[bytes, ReportError]]
                      ) -> bytes | None:
        """`UploadErrors` listing the refused reports (Section 4.4.2.2)."""
        if not errors:
            return None
        return m18.UploadErrors(tuple(m18.ReportUploadStatus(m18.ReportID(rid), err)
                                      for rid, err in errors)).encode()

    def decode_upload(self, body: bytes) -> list[Any]:
        return list(m18.UploadRequest.decode(body).reports)

    def report_time(self, task: Any, metadata: Any) -> int:
        return int(metadata.time)

    def time_error(self, task: Any, metadata: Any, now: float, clock_skew: int,
                   check_too_early: bool = True) -> ReportError | None:
        t = int(metadata.time)
        skew_units = -(-clock_skew // task.task.time_precision)
        if check_too_early and t > task.now_time(now) + skew_units:
            return ReportError.REPORT_TOO_EARLY
        interval = task.task.task_interval
        if interval is not None:
            if t < int(interval.start):
                return ReportError.TASK_NOT_STARTED
            if t >= interval.end:
                return ReportError.TASK_EXPIRED
        return None

    def public_extension_types(self, metadata: Any) -> list[int]:
        return [int(e.extension_type) for e in metadata.public_extensions]

    def open_input_share(self, task: Any, keypair: HpkeKeypair, role: Role, metadata: Any,
                         public_share: bytes, ciphertext: HpkeCiphertext
                         ) -> tuple[bytes, list[int]]:
        aad = input_share_aad(task.task, metadata, public_share)
        plaintext = open_input_share(keypair, role, aad, ciphertext, profile=task.profile)
        return plaintext.payload, [int(e.extension_type) for e in plaintext.private_extensions]

    def encode_init_req(self, task: Any, agg_param: bytes, batch_id: bytes | None,
                        items: Sequence[tuple[Any, bytes]]) -> bytes:
        extensions: tuple[m18.AggregationJobExtension, ...] = ()
        if batch_id is not None:
            extensions = (m18.AggregationJobExtension.leader_selected_batch_id(batch_id),)
        inits = tuple(
            m18.VerifyInit(m18.ReportShare(r.report_metadata, r.public_share,
                                           r.helper_encrypted_input_share), outbound)
            for r, outbound in items)
        return m18.AggregationJobInitReq(0, agg_param, extensions, inits).encode()

    def decode_init_req(self, task: Any, body: bytes) -> InitReq:
        tid = task.task_id
        try:
            req = m18.AggregationJobInitReq.decode(body)
        except DecodeError as exc:
            raise _invalid(task, exc) from None
        unknown = [e.extension_type for e in req.extensions
                   if e.extension_type != AggregationJobExtensionType.LEADER_SELECTED_BATCH_ID]
        if unknown:
            raise DapProblem("unsupportedExtension", "unknown aggregation job extension",
                             task_id=tid, unsupported_extensions=unknown)
        try:
            batch_id = req.leader_selected_batch_id()
        except DecodeError as exc:
            raise DapProblem("invalidMessage", f"bad batch ID extension: {exc}",
                             task_id=tid) from None
        items = [InitItem(v.report_share.report_metadata,
                          bytes(v.report_share.report_metadata.report_id),
                          int(v.report_share.report_metadata.time),
                          v.report_share.public_share, v.report_share.encrypted_input_share,
                          v.payload) for v in req.verify_inits]
        return InitReq(req.agg_param, bytes(batch_id) if batch_id is not None else None,
                       req.verification_key_id, items)

    def encode_job_resp(self, resps: Sequence[Resp]) -> bytes:
        out = []
        for r in resps:
            if r.kind == VerifyRespType.CONTINUE:
                out.append(m18.VerifyResp.continue_(r.report_id, r.payload or b""))
            elif r.kind == VerifyRespType.FINISH:
                out.append(m18.VerifyResp.finish(r.report_id))
            else:
                assert r.error is not None
                out.append(m18.VerifyResp.reject(r.report_id, r.error))
        return m18.AggregationJobResp(tuple(out)).encode()

    def decode_job_resp(self, body: bytes) -> list[Resp]:
        resp = m18.AggregationJobResp.decode(body)
        return [Resp(bytes(v.report_id), v.verify_resp_type, v.payload,
                     ReportError(v.report_error) if v.report_error is not None else None)
                for v in resp.verify_resps]

    def decode_collection_req(self, task: Any, body: bytes) -> CollReq:
        try:
            req = m18.CollectionJobReq.decode(body)
        except DecodeError as exc:
            # invalidExtension for unsorted extensions (Section 4.6.2), else invalidMessage.
            raise _invalid(task, exc, exc.problem_type) from None
        if req.extensions:
            raise DapProblem("unsupportedExtension", "unknown collection job extension",
                             task_id=task.task_id,
                             unsupported_extensions=[e.extension_type for e in req.extensions])
        interval = req.query.batch_interval \
            if req.query.batch_mode == BatchMode.TIME_INTERVAL else None
        return CollReq(req.agg_param, req.query.batch_mode, interval, None, req)

    def encode_share_req(self, task: Any, coll: CollReq, interval: Interval | None,
                         batch_id: bytes | None, report_count: int, checksum: bytes) -> bytes:
        selector = m18.BatchSelector.time_interval(interval) if interval is not None \
            else m18.BatchSelector.leader_selected(batch_id or b"")
        return m18.AggregateShareReq(coll.cjr, selector, report_count, checksum).encode()

    def decode_share_req(self, task: Any, body: bytes) -> ShareReq:
        try:
            req = m18.AggregateShareReq.decode(body)
        except DecodeError as exc:
            raise _invalid(task, exc, exc.problem_type) from None
        cjr = req.collection_job_req
        if req.batch_selector.batch_mode != cjr.query.batch_mode:
            raise DapProblem("invalidMessage", "batch selector and query differ in batch mode",
                             task_id=task.task_id)
        if cjr.extensions:
            raise DapProblem("unsupportedExtension", "unknown collection job extension",
                             task_id=task.task_id,
                             unsupported_extensions=[e.extension_type for e in cjr.extensions])
        time_interval = cjr.query.batch_mode == BatchMode.TIME_INTERVAL
        coll = CollReq(cjr.agg_param, cjr.query.batch_mode,
                       cjr.query.batch_interval if time_interval else None, None, cjr)
        sel = req.batch_selector
        return ShareReq(coll, sel.batch_interval if time_interval else None,
                        None if time_interval else bytes(sel.batch_id),
                        req.report_count, bytes(req.checksum))

    def encrypt_agg_share(self, task: Any, role: Role, coll: CollReq,
                          interval: Interval | None, batch_id: bytes | None,
                          encoded: bytes) -> HpkeCiphertext:
        return encrypt_aggregate_share(task.task, task.collector_hpke_config, role, coll.cjr,
                                       encoded)

    def encode_agg_share(self, ciphertext: HpkeCiphertext) -> bytes:
        return m18.AggregateShare(ciphertext).encode()

    def decode_agg_share(self, body: bytes) -> HpkeCiphertext:
        return m18.AggregateShare.decode(body).encrypted_aggregate_share

    def encode_collection(self, task: Any, coll: CollReq, batch_id: bytes | None,
                          report_count: int, interval: Interval, leader: HpkeCiphertext,
                          helper: HpkeCiphertext) -> bytes:
        return m18.CollectionJobResp(report_count, interval, leader, helper).encode()


# ---------------------------------------------------------------------------------------
# DAP-09

_TO_PREPARE_ERROR = {
    ReportError.BATCH_COLLECTED: m09.PrepareError.BATCH_COLLECTED,
    ReportError.REPORT_REPLAYED: m09.PrepareError.REPORT_REPLAYED,
    ReportError.REPORT_DROPPED: m09.PrepareError.REPORT_DROPPED,
    ReportError.HPKE_UNKNOWN_CONFIG_ID: m09.PrepareError.HPKE_UNKNOWN_CONFIG_ID,
    ReportError.HPKE_DECRYPT_ERROR: m09.PrepareError.HPKE_DECRYPT_ERROR,
    ReportError.VDAF_VERIFY_ERROR: m09.PrepareError.VDAF_PREP_ERROR,
    ReportError.TASK_EXPIRED: m09.PrepareError.TASK_EXPIRED,
    ReportError.INVALID_MESSAGE: m09.PrepareError.INVALID_MESSAGE,
    ReportError.REPORT_TOO_EARLY: m09.PrepareError.REPORT_TOO_EARLY,
    # No DAP-09 counterpart: a report before the task's start cannot happen (DAP-09 tasks
    # have no start), an outdated config is an upload error only.
    ReportError.TASK_NOT_STARTED: m09.PrepareError.REPORT_DROPPED,
    ReportError.OUTDATED_CONFIG: m09.PrepareError.HPKE_UNKNOWN_CONFIG_ID,
}
_FROM_PREPARE_ERROR = {
    m09.PrepareError.BATCH_COLLECTED: ReportError.BATCH_COLLECTED,
    m09.PrepareError.REPORT_REPLAYED: ReportError.REPORT_REPLAYED,
    m09.PrepareError.REPORT_DROPPED: ReportError.REPORT_DROPPED,
    m09.PrepareError.HPKE_UNKNOWN_CONFIG_ID: ReportError.HPKE_UNKNOWN_CONFIG_ID,
    m09.PrepareError.HPKE_DECRYPT_ERROR: ReportError.HPKE_DECRYPT_ERROR,
    m09.PrepareError.VDAF_PREP_ERROR: ReportError.VDAF_VERIFY_ERROR,
    m09.PrepareError.TASK_EXPIRED: ReportError.TASK_EXPIRED,
    m09.PrepareError.INVALID_MESSAGE: ReportError.INVALID_MESSAGE,
    m09.PrepareError.REPORT_TOO_EARLY: ReportError.REPORT_TOO_EARLY,
    # batch_saturated (fixed_size: the batch is full) has no DAP-18 counterpart.
    m09.PrepareError.BATCH_SATURATED: ReportError.REPORT_DROPPED,
}
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


def to_prepare_error(error: ReportError) -> m09.PrepareError:
    return _TO_PREPARE_ERROR[ReportError(error)]


class Wire09(Wire):
    report_cls = m09.Report
    continue_req_cls = m09.AggregationJobContinueReq
    continue_item_cls = m09.PrepareContinue
    statuses = {"upload": 201, "collection_not_ready": 202, "aggregation_job_init": 201,
                "aggregate_share": 200}
    messages = {"upload": "Report", "collection": "Collection"}

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
                         ) -> tuple[bytes, list[int]]:
        aad = task.task.input_share_aad(metadata, public_share)
        plaintext = open_input_share09(keypair, role, aad, ciphertext, profile=task.profile)
        return plaintext.payload, [int(e.extension_type) for e in plaintext.extensions]

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
                        items: Sequence[tuple[Any, bytes]]) -> bytes:
        pbs = m09.PartialBatchSelector.fixed_size(batch_id) if batch_id is not None \
            else m09.PartialBatchSelector.time_interval()
        inits = tuple(
            m09.PrepareInit(m09.ReportShare(r.report_metadata, r.public_share,
                                            r.helper_encrypted_input_share), outbound)
            for r, outbound in items)
        return m09.AggregationJobInitReq(agg_param, pbs, inits).encode()

    def decode_init_req(self, task: Any, body: bytes) -> InitReq:
        try:
            req = m09.AggregationJobInitReq.decode(body)
        except DecodeError as exc:
            raise _invalid(task, exc) from None
        if req.part_batch_selector.query_type != task.task.query_type:
            raise DapProblem("invalidMessage", "partial batch selector of another query type",
                             task_id=task.task_id)
        batch_id = req.part_batch_selector.batch_id
        items = [InitItem(p.report_share.report_metadata,
                          bytes(p.report_share.report_metadata.report_id),
                          self.report_time(task, p.report_share.report_metadata),
                          p.report_share.public_share, p.report_share.encrypted_input_share,
                          p.payload) for p in req.prepare_inits]
        return InitReq(req.agg_param, bytes(batch_id) if batch_id is not None else None, 0,
                       items)

    def encode_job_resp(self, resps: Sequence[Resp]) -> bytes:
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

    def decode_job_resp(self, body: bytes) -> list[Resp]:
        resp = m09.AggregationJobResp.decode(body)
        return [Resp(bytes(p.report_id), _RESP_STATE[p.prepare_resp_state], p.payload,
                     _FROM_PREPARE_ERROR[p.prepare_error] if p.prepare_error is not None
                     else None)
                for p in resp.prepare_resps]

    def decode_collection_req(self, task: Any, body: bytes) -> CollReq:
        try:
            req = m09.CollectionReq.decode(body)
        except DecodeError as exc:
            raise _invalid(task, exc) from None
        query = req.query
        if query.query_type != task.task.query_type:
            raise DapProblem("invalidMessage", "query type does not match the task",
                             task_id=task.task_id)
        if query.query_type == m09.QueryType.TIME_INTERVAL:
            assert query.batch_interval is not None
            return CollReq(req.agg_param, BatchMode.TIME_INTERVAL,
                           self._units(task, query.batch_interval))
        fsq = query.fixed_size_query
        assert fsq is not None
        batch_id = bytes(fsq.batch_id) if fsq.batch_id is not None else None
        return CollReq(req.agg_param, BatchMode.LEADER_SELECTED, None, batch_id)

    def _selector(self, task: Any, interval: Interval | None,
                  batch_id: bytes | None) -> m09.BatchSelector:
        if interval is not None:
            return m09.BatchSelector.time_interval(self._seconds(task, interval))
        assert batch_id is not None
        return m09.BatchSelector.fixed_size(batch_id)

    def encode_share_req(self, task: Any, coll: CollReq, interval: Interval | None,
                         batch_id: bytes | None, report_count: int, checksum: bytes) -> bytes:
        return m09.AggregateShareReq(self._selector(task, interval, batch_id), coll.agg_param,
                                     report_count, checksum).encode()

    def decode_share_req(self, task: Any, body: bytes) -> ShareReq:
        try:
            req = m09.AggregateShareReq.decode(body)
        except DecodeError as exc:
            raise _invalid(task, exc) from None
        sel = req.batch_selector
        if sel.query_type != task.task.query_type:
            raise DapProblem("invalidMessage", "batch selector of another query type",
                             task_id=task.task_id)
        if sel.query_type == m09.QueryType.TIME_INTERVAL:
            assert sel.batch_interval is not None
            interval = self._units(task, sel.batch_interval)
            coll = CollReq(req.agg_param, BatchMode.TIME_INTERVAL, interval)
            return ShareReq(coll, interval, None, req.report_count, bytes(req.checksum))
        assert sel.batch_id is not None
        coll = CollReq(req.agg_param, BatchMode.LEADER_SELECTED, None, bytes(sel.batch_id))
        return ShareReq(coll, None, bytes(sel.batch_id), req.report_count, bytes(req.checksum))

    def encrypt_agg_share(self, task: Any, role: Role, coll: CollReq,
                          interval: Interval | None, batch_id: bytes | None,
                          encoded: bytes) -> HpkeCiphertext:
        # The batch selector is the query's interval (time_interval) or the batch ID
        # (fixed_size) (DAP-09 Section 4.6.4).
        return encrypt_agg_share09(task.task, task.collector_hpke_config, role,
                                   coll.agg_param, self._selector(task, interval, batch_id),
                                   encoded)

    def encode_agg_share(self, ciphertext: HpkeCiphertext) -> bytes:
        return m09.AggregateShare(ciphertext).encode()

    def decode_agg_share(self, body: bytes) -> HpkeCiphertext:
        return m09.AggregateShare.decode(body).encrypted_aggregate_share

    def encode_collection(self, task: Any, coll: CollReq, batch_id: bytes | None,
                          report_count: int, interval: Interval, leader: HpkeCiphertext,
                          helper: HpkeCiphertext) -> bytes:
        pbs = m09.PartialBatchSelector.fixed_size(batch_id) if batch_id is not None \
            else m09.PartialBatchSelector.time_interval()
        # "The smallest interval ... whose start and duration are multiples of
        # time_precision" (Section 4.6.1): the units interval, in seconds.
        return m09.Collection(pbs, report_count, self._seconds(task, interval), leader,
                              helper).encode()


WIRES: dict[str, Wire] = {"dap-18": Wire18(), "dap-09": Wire09()}


def wire_for(profile_name: str) -> Wire:
    return WIRES[profile_name]
