"""The protocol core's view of DAP-18's messages (:class:`dap.core.wire.Wire`).

See :mod:`dap.core.wire` for what a wire does; the section numbers are
draft-ietf-ppm-dap-18's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ppm_reference.dap.codec import DecodeError
from ppm_reference.dap.common import (
    BatchMode,
    HpkeCiphertext,
    Interval,
    ReportError,
    ReportID,
    Role,
    VerifyRespType,
)
from ppm_reference.dap.core import wire as core
from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.hpke import HpkeKeypair, open_base
from ppm_reference.dap.profiles.dap18 import fast
from ppm_reference.dap.profiles.dap18 import messages as m18
from ppm_reference.dap.profiles.dap18.client import (
    encrypt_aggregate_share,
    input_share_aad,
    open_input_share,
)
from ppm_reference.dap.profiles.dap18.messages import AggregationJobExtensionType

# ---------------------------------------------------------------------------------------
# DAP-18


class Wire18(core.Wire):
    # The draft's message module (DAP-19 replaces the messages carrying a ReportError).
    m: Any = m18
    # DAP-18 fails a job whose verification_key_id the Helper does not know with
    # invalidMessage (Section 4.5.2.2); DAP-19 rejects each report instead (#784).
    unknown_key_per_report = False
    # DAP-18: a report with an unrecognized extension is core.invalid_message (Section
    # 4.5.2.4) and the Leader aborts an upload carrying one with unsupportedExtension
    # (Section 4.4.2.2); DAP-19 makes both per-report unsupported_extension (#789).
    extension_error = ReportError.INVALID_MESSAGE
    extension_errors_per_report = False
    # DAP-18 has every error of the core but the two DAP-19 added: a Helper of DAP-18
    # fails the whole job for an unknown verification key (`invalidMessage`), and a report
    # with an unsupported extension is `core.invalid_message` (Section 4.5.3.4).
    errors = core.ErrorTranslation.by_name(m18.ReportError, substitutes={
        ReportError.UNKNOWN_VERIFICATION_KEY_ID: "INVALID_MESSAGE",
        ReportError.UNSUPPORTED_EXTENSION: "INVALID_MESSAGE",
    })
    report_cls = m18.Report

    def __init__(self) -> None:
        self._decoded = fast.DecodedReports()
    continue_req_cls = m18.AggregationJobContinueReq
    continue_item_cls = m18.VerifyContinue

    def upload_answer(self, task: Any, errors: Sequence[tuple[bytes, ReportError]]
                      ) -> bytes | None:
        """`UploadErrors` listing the refused reports (Section 4.4.2.2)."""
        if not errors:
            return None
        return bytes(self.m.UploadErrors(tuple(
            self.m.ReportUploadStatus(ReportID(rid), self.errors.encode(err))
                                      for rid, err in errors)).encode())

    def decode_upload(self, body: bytes) -> list[Any]:
        decoded = fast.decode_upload_reports(body)
        if decoded is None:
            return list(m18.UploadRequest.decode(body).reports)
        self._decoded.remember(decoded)
        return [report for report, _ in decoded]

    def encode_report(self, report: Any) -> bytes:
        return fast.report_encoding(report)

    def decode_report(self, body: bytes) -> Any:
        """The Leader decodes a report at upload and needs it again to create its
        aggregation job: the report decoded at upload, if this process took it (looked up
        by its encoding), else the fast decoder, else the generic one."""
        report = self._decoded.take(body)
        if report is None:
            report = fast.decode_report(body)
        return report if report is not None else self.report_cls.decode(body)

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

    def public_extensions(self, metadata: Any) -> list[tuple[int, bytes]]:
        return [(int(e.extension_type), bytes(e.extension_data))
                for e in metadata.public_extensions]

    def open_input_share(self, task: Any, keypair: HpkeKeypair, role: Role, metadata: Any,
                         public_share: bytes, ciphertext: HpkeCiphertext
                         ) -> tuple[bytes, list[tuple[int, bytes]]]:
        dap_task = task.task
        if issubclass(dap_task.profile.messages.InputShareAad, m18.InputShareAad):
            # The same bytes as input_share_aad(...).encode(), the task's part encoded once.
            aad = fast.input_share_aad(dap_task.input_share_aad_prefix, metadata,
                                       public_share)
            plain = open_base(keypair, ciphertext,
                              task.profile.input_share_info(role), aad)
            opened = fast.decode_plaintext_input_share(plain)
            if opened is not None:
                return opened
            decoded = self.m.PlaintextInputShare.decode(plain)  # raises the DecodeError
            return decoded.payload, [(int(e.extension_type), bytes(e.extension_data))
                                     for e in decoded.private_extensions]
        aad_msg = input_share_aad(dap_task, metadata, public_share)
        plaintext = open_input_share(keypair, role, aad_msg, ciphertext, profile=task.profile)
        return plaintext.payload, [(int(e.extension_type), bytes(e.extension_data))
                                   for e in plaintext.private_extensions]

    def encode_init_req(self, task: Any, agg_param: bytes, batch_id: bytes | None,
                        items: Sequence[tuple[Any, bytes]],
                        verification_key_id: int = 0) -> bytes:
        extensions: tuple[m18.AggregationJobExtension, ...] = ()
        if batch_id is not None:
            extensions = (m18.AggregationJobExtension.leader_selected_batch_id(batch_id),)
        encoded = fast.encode_init_req(self.m.AggregationJobInitReq, verification_key_id,
                                       agg_param, extensions, items)
        if encoded is not None:
            return encoded
        inits = tuple(
            m18.VerifyInit(m18.ReportShare(r.report_metadata, r.public_share,
                                           r.helper_encrypted_input_share), outbound)
            for r, outbound in items)
        return bytes(m18.AggregationJobInitReq(verification_key_id, agg_param, extensions,
                                              inits).encode())

    def decode_init_req(self, task: Any, body: bytes) -> core.InitReq:
        tid = task.task_id
        # The fast path builds DAP-18's VerifyInit and ReportShare (which DAP-19 keeps).
        same_items = self.m.VerifyInit is m18.VerifyInit and \
            self.m.ReportShare is m18.ReportShare
        req = fast.decode_init_req(body, self.m.AggregationJobInitReq) if same_items \
            else None
        if req is None:
            try:
                req = self.m.AggregationJobInitReq.decode(body)
            except DecodeError as exc:
                raise core.invalid_message(task, exc) from None
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
        items = [core.InitItem(v.report_share.report_metadata,
                          bytes(v.report_share.report_metadata.report_id),
                          int(v.report_share.report_metadata.time),
                          v.report_share.public_share, v.report_share.encrypted_input_share,
                          v.payload) for v in req.verify_inits]
        return core.InitReq(req.agg_param, bytes(batch_id) if batch_id is not None else None,
                       req.verification_key_id, items)

    def encode_job_resp(self, resps: Sequence[core.Resp]) -> bytes:
        encoded = fast.encode_job_resp(
            [(r.report_id, r.kind, r.payload,
              int(self.errors.encode(r.error)) if r.error is not None else None)
             for r in resps], self.m.ReportError)
        if encoded is not None:
            return encoded
        out = []
        for r in resps:
            if r.kind == VerifyRespType.CONTINUE:
                out.append(self.m.VerifyResp.continue_(r.report_id, r.payload or b""))
            elif r.kind == VerifyRespType.FINISH:
                out.append(self.m.VerifyResp.finish(r.report_id))
            else:
                assert r.error is not None
                out.append(self.m.VerifyResp.reject(r.report_id, self.errors.encode(r.error)))
        return bytes(self.m.AggregationJobResp(tuple(out)).encode())

    def decode_job_resp(self, body: bytes) -> list[core.Resp]:
        decoded = fast.decode_job_resp(body, self.m.ReportError)
        if decoded is not None:
            return [core.Resp(rid, kind, payload,
                              self.errors.decode(err) if err is not None else None)
                    for rid, kind, payload, err in decoded]
        resp = self.m.AggregationJobResp.decode(body)
        return [core.Resp(bytes(v.report_id), v.verify_resp_type, v.payload,
                     self.errors.decode(v.report_error) if v.report_error is not None else None)
                for v in resp.verify_resps]

    def decode_collection_req(self, task: Any, body: bytes) -> core.CollReq:
        try:
            req = m18.CollectionJobReq.decode(body)
        except DecodeError as exc:
            # invalidExtension for unsorted extensions (Section 4.6.2), else invalidMessage.
            raise core.invalid_message(task, exc, exc.problem_type) from None
        if req.extensions:
            raise DapProblem("unsupportedExtension", "unknown collection job extension",
                             task_id=task.task_id,
                             unsupported_extensions=[e.extension_type for e in req.extensions])
        interval = req.query.batch_interval \
            if req.query.batch_mode == BatchMode.TIME_INTERVAL else None
        return core.CollReq(req.agg_param, req.query.batch_mode, interval, None, req)

    def encode_share_req(self, task: Any, coll: core.CollReq, interval: Interval | None,
                         batch_id: bytes | None, report_count: int, checksum: bytes) -> bytes:
        selector = m18.BatchSelector.time_interval(interval) if interval is not None \
            else m18.BatchSelector.leader_selected(batch_id or b"")
        return m18.AggregateShareReq(coll.cjr, selector, report_count, checksum).encode()

    def decode_share_req(self, task: Any, body: bytes) -> core.ShareReq:
        try:
            req = m18.AggregateShareReq.decode(body)
        except DecodeError as exc:
            raise core.invalid_message(task, exc, exc.problem_type) from None
        cjr = req.collection_job_req
        if req.batch_selector.batch_mode != cjr.query.batch_mode:
            raise DapProblem("invalidMessage", "batch selector and query differ in batch mode",
                             task_id=task.task_id)
        if cjr.extensions:
            raise DapProblem("unsupportedExtension", "unknown collection job extension",
                             task_id=task.task_id,
                             unsupported_extensions=[e.extension_type for e in cjr.extensions])
        time_interval = cjr.query.batch_mode == BatchMode.TIME_INTERVAL
        coll = core.CollReq(cjr.agg_param, cjr.query.batch_mode,
                       cjr.query.batch_interval if time_interval else None, None, cjr)
        sel = req.batch_selector
        return core.ShareReq(coll, sel.batch_interval if time_interval else None,
                        None if time_interval else bytes(sel.batch_id),
                        req.report_count, bytes(req.checksum))

    def encrypt_agg_share(self, task: Any, role: Role, coll: core.CollReq,
                          interval: Interval | None, batch_id: bytes | None,
                          encoded: bytes, *, ephemeral_ikm: bytes | None = None
                          ) -> HpkeCiphertext:
        return encrypt_aggregate_share(task.task, task.collector_hpke_config, role, coll.cjr,
                                       encoded, ephemeral_ikm=ephemeral_ikm)

    def encode_collection(self, task: Any, coll: core.CollReq, batch_id: bytes | None,
                          report_count: int, interval: Interval, leader: HpkeCiphertext,
                          helper: HpkeCiphertext) -> bytes:
        return m18.CollectionJobResp(report_count, interval, leader, helper).encode()


