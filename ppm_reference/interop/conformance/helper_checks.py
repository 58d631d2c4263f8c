"""Checks of a Helper: the suite plays the Leader (``peer.HelperPeer``).

Section numbers: DAP-18 (and DAP-19, which changes only what ``dap-19-changes`` lists:
the per-report ``unknown_verification_key_id``) and DAP-09.
"""

from __future__ import annotations

import secrets
import time

from ppm_reference.dap.common import ReportError
from ppm_reference.dap.provision import ProvisionedTask
from ppm_reference.interop.conformance.catalogue import Fail, Level, Skip, check
from ppm_reference.interop.conformance.context import Ctx, raw_exchange, request_head
from ppm_reference.interop.conformance.leader_checks import (
    AUTH,
    DAP18,
    ERRORS,
    SLOW_BYTES,
    SLOW_DEADLINE,
    _oversized,
)
from ppm_reference.interop.conformance.peer import (
    HelperPeer,
    Prepared,
    corrupt,
    flip_first_byte,
    mutating_vdaf,
    task_without_interval_check,
    with_ciphertext,
)
from ppm_reference.interop.conformance.provision import TaskNeeds

MUST, SHOULD, MAY = Level.MUST, Level.SHOULD, Level.MAY
INIT = {"dap-19": "4.5.3.2", "dap-18": "4.5.3.2", "dap-09": "4.5.1.2"}
INIT_REPORT = {"dap-19": "4.5.3.3, 4.5.3.4", "dap-18": "4.5.3.3, 4.5.3.4",
               "dap-09": "4.5.1.3, 4.5.1.4"}
CONT = {"dap-19": "4.5.4.2", "dap-18": "4.5.4.2", "dap-09": "4.5.2.2"}
SHARE = {"dap-19": "4.6.4", "dap-18": "4.6.4", "dap-09": "4.6.2"}
REPLAY = {"dap-19": "4.5.4.3", "dap-18": "4.5.4.3", "dap-09": "4.5.1.4"}


async def _peer(ctx: Ctx, needs: TaskNeeds | None = None) -> tuple[ProvisionedTask, HelperPeer]:
    pt = await ctx.task(needs)
    return pt, HelperPeer(ctx, pt)


async def _expect_valid_after(peer: HelperPeer, items: list[Prepared],
                              job_id: bytes | None = None) -> None:
    """The state check after a refused request: the same reports in a valid job are
    continued (not report_replayed: the refused request changed nothing)."""
    ans, _ = await peer.init(peer.init_body(items), job_id=job_id)
    peer.finish(items, ans)


# -- aggregation job initialization --------------------------------------------------------


@check("H-AGG-INIT-001", "helper", MUST, "a valid aggregation job is continued",
       refs=INIT, sends="an AggregationJobInitReq of 2 valid reports (DAP-09: PUT to a "
                        "fresh job ID; DAP-18/19: POST, polled if the Helper is "
                        "asynchronous)",
       expects="2xx (201 in the drafts; DAP-18/19 may answer later, at the Location) with an "
               "AggregationJobResp of the draft's media type: one continue per report, in "
               "order, whose messages finish the Leader's verification",
       tags=("aggregate",))
async def init_valid(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    items = await peer.prepared(2)
    ans, _ = await peer.init(peer.init_body(items))
    # DAP-18 Section 3.3: any status of the class (201 Created is the draft's).
    ctx.expect_success(ans)
    peer.finish(items, ans)


@check("H-AGG-INIT-002", "helper", MUST, "an aggregation job of an unknown task is refused",
       refs=ERRORS, sends="a valid AggregationJobInitReq to /tasks/<random task ID>/...",
       expects="4xx problem document of type unrecognizedTask", tags=("aggregate", "task"))
async def init_unknown_task(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    body = peer.init_body(await peer.prepared(1))
    resource = ctx.profile.request("aggregation_job_init")[1]
    ids = {"task_id": secrets.token_bytes(32)}
    if "{aggregation-job-id}" in ctx.profile.resources[resource]:
        ids["aggregation_job_id"] = secrets.token_bytes(16)
    url = ctx.profile.resource_url(resource, ctx.target, **ids)
    ans = await ctx.op("aggregation_job_init", url, body, "AggregationJobInitReq",
                       peer.headers())
    ctx.expect_problem(ans, "unrecognizedTask")


async def _refused_then_valid(ctx: Ctx, peer: HelperPeer, headers: dict[str, str] | None,
                              token: str | None = None, content_type: str | None = None
                              ) -> None:
    items = await peer.prepared(2)
    job_id = secrets.token_bytes(16)
    ans, _ = await peer.init(peer.init_body(items), job_id=job_id, headers=headers,
                             content_type=content_type)
    ctx.expect_problem(ans, token)
    await _expect_valid_after(peer, items, job_id)


@check("H-AGG-INIT-003", "helper", MUST, "an aggregation job without authentication is "
       "refused and changes nothing", refs=AUTH,
       sends="a valid AggregationJobInitReq without the Leader's token; then the same "
             "reports with it",
       expects="4xx (a problem document of type unauthorizedRequest in DAP-09, none "
               "defined after it); the second request continues every report (none "
               "counted as replayed)", tags=("aggregate", "auth", "state"))
async def init_no_auth(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await _refused_then_valid(ctx, peer, {})


@check("H-AGG-INIT-004", "helper", MUST, "an aggregation job with a wrong token is refused "
       "and changes nothing", refs=AUTH,
       sends="a valid AggregationJobInitReq with a wrong token; then with the right one",
       expects="4xx; then every report continued",
       tags=("aggregate", "auth", "state"))
async def init_wrong_auth(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await _refused_then_valid(ctx, peer, ctx.auth(secrets.token_urlsafe(24)))


@check("H-AGG-INIT-005", "helper", MUST, "an aggregation job with a wrong media type is "
       "refused and changes nothing", refs=INIT,
       sends="a valid AggregationJobInitReq with Content-Type application/octet-stream; "
             "then with the right type", expects="4xx; then every report continued",
       tags=("aggregate", "media-type", "state"))
async def init_wrong_media(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await _refused_then_valid(ctx, peer, None, content_type="application/octet-stream")


@check("H-AGG-INIT-006", "helper", MUST, "a truncated AggregationJobInitReq is refused and "
       "changes nothing", refs=INIT,
       sends="an AggregationJobInitReq without its last byte; then the whole request",
       expects="4xx problem document of type invalidMessage; then every report continued",
       tags=("aggregate", "malformed", "state"))
async def init_truncated(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    items = await peer.prepared(2)
    job_id = secrets.token_bytes(16)
    ans, _ = await peer.init(peer.init_body(items)[:-1], job_id=job_id)
    ctx.expect_problem(ans, "invalidMessage")
    await _expect_valid_after(peer, items, job_id)


@check("H-AGG-INIT-007", "helper", MUST, "a report for an unknown HPKE configuration is "
       "rejected", refs=INIT_REPORT,
       sends="a job whose report's Helper ciphertext names a config ID the Helper does not "
             "advertise",
       expects="the report rejected with hpke_decrypt_error (the draft's words) or "
               "hpke_unknown_config_id", tags=("aggregate", "hpke",
                                                                         "report-error"))
async def init_unknown_config(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    helper = await peer.helper_config()
    report = (await peer.reports(1))[0]
    bad = with_ciphertext(report, False, config_id=(int(helper.id) + 1) % 256)
    item = peer.prepare(bad)
    ans, _ = await peer.init(peer.init_body([item]))
    # DAP-18 Section 4.5.3.3 (DAP-09 4.5.1.3): "If the HPKE configuration ID is
    # unrecognized or decryption fails", hpke_decrypt_error; the registry also has
    # hpke_unknown_config_id, which says it more precisely.
    peer.expect_rejected(ans, item, (ReportError.HPKE_DECRYPT_ERROR,
                                     ReportError.HPKE_UNKNOWN_CONFIG_ID))


@check("H-AGG-INIT-008", "helper", MUST, "a report with an undecryptable share is rejected",
       refs=INIT_REPORT, sends="a job whose report's Helper ciphertext payload has a "
                               "flipped bit",
       expects="the report rejected with hpke_decrypt_error", tags=("aggregate", "hpke",
                                                                    "report-error"))
async def init_undecryptable(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    r = (await peer.reports(1))[0]
    bad = with_ciphertext(r, False, payload=corrupt(r.helper_encrypted_input_share.payload))
    item = peer.prepare(bad)
    ans, _ = await peer.init(peer.init_body([item]))
    peer.expect_rejected(ans, item, (ReportError.HPKE_DECRYPT_ERROR,))


@check("H-AGG-INIT-009", "helper", MUST, "a replayed report is rejected",
       refs=REPLAY, sends="a valid job of a report, then a second job (new ID) with "
                          "the same report and a new one",
       expects="the report rejected in the second job with report_replayed",
       tags=("aggregate", "replay", "report-error"))
async def init_replay(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    items = await peer.prepared(1)
    ans, _ = await peer.init(peer.init_body(items))
    peer.finish(items, ans)
    # With a new report next to it: a byte-identical request would be a retry of the
    # first job (resource creation is idempotent, DAP-18 Section 3.2).
    again = [peer.prepare(items[0].report), *(await peer.prepared(1))]
    ans2, _ = await peer.init(peer.init_body(again))
    peer.expect_rejected(ans2, again[0], (ReportError.REPORT_REPLAYED,))


@check("H-AGG-INIT-010", "helper", MUST, "duplicate report IDs in one job are refused",
       refs=INIT,
       sends="an AggregationJobInitReq with the same report twice",
       expects="4xx problem document of type invalidMessage (or both rejected with "
               "report_replayed/invalid_message), never both continued",
       tags=("aggregate", "replay", "malformed"))
async def init_duplicate(ctx: Ctx) -> None:
    from ppm_reference.dap.common import VerifyRespType

    pt, peer = await _peer(ctx)
    items = await peer.prepared(1)
    ans, _ = await peer.init(peer.init_body([items[0], items[0]]))
    if ans.status >= 400:
        ctx.expect_problem(ans, "invalidMessage")
        return
    resps = peer.responses(ans)
    if sum(1 for r in resps if r.kind != VerifyRespType.REJECT) > 1:
        raise Fail("both copies of the report were continued")


@check("H-AGG-INIT-011", "helper", MUST, "a repeated aggregation job request is idempotent",
       refs={"dap-19": "3.2, 4.5.3.2", "dap-18": "3.2, 4.5.3.2", "dap-09": "4.5.1.2"},
       sends="the same AggregationJobInitReq twice to the same job (DAP-09: PUT to one job "
             "ID; DAP-18/19: the same POST)",
       expects="2xx both times with the same AggregationJobResp (the reports are not "
               "rejected as replayed the second time)", tags=("aggregate", "idempotent"))
async def init_idempotent(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    items = await peer.prepared(2)
    job_id = secrets.token_bytes(16)
    body = peer.init_body(items)
    a1, _ = await peer.init(body, job_id=job_id)
    peer.finish(items, a1)
    a2, _ = await peer.init(body, job_id=job_id)
    peer.finish(items, a2)


@check("H-AGG-INIT-012", "helper", MUST, "a job ID reused with other content is refused",
       refs={"dap-09": "4.5.1.2"}, profiles=("dap-09",),
       not_applicable="after DAP-09 the Helper names aggregation jobs",
       sends="PUT a valid job, then PUT other reports to the same job ID",
       expects="the second refused with 4xx", tags=("aggregate", "idempotent", "state"))
async def init_job_reused(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    job_id = secrets.token_bytes(16)
    items = await peer.prepared(1)
    a1, _ = await peer.init(peer.init_body(items), job_id=job_id)
    peer.finish(items, a1)
    other = await peer.prepared(1)
    a2, _ = await peer.init(peer.init_body(other), job_id=job_id)
    ctx.expect_problem(a2)


@check("H-AGG-INIT-013", "helper", SHOULD, "a report from the future is rejected",
       refs=INIT_REPORT, sends="a job of a report whose time is two days ahead",
       expects="the report rejected with report_too_early", tags=("aggregate", "time",
                                                                  "report-error"))
async def init_too_early(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    item = (await peer.prepared(1, seconds=time.time() + 2 * 86400))[0]
    ans, _ = await peer.init(peer.init_body([item]))
    peer.expect_rejected(ans, item, (ReportError.REPORT_TOO_EARLY,))


@check("H-AGG-INIT-014", "helper", MUST, "a report after the task's end is rejected",
       refs=INIT_REPORT, sends="a job of a report of now, for a task that ended an hour ago",
       expects="the report rejected with task_expired (DAP-18/09) or report_dropped (DAP-19)",
       tags=("aggregate", "time", "report-error"), levels={"dap-09": MAY})
async def init_expired(ctx: Ctx) -> None:
    tp = 3600
    now = int(time.time()) // tp * tp
    pt, peer = await _peer(ctx, TaskNeeds(task_window=(now - 5 * tp, now - tp)))
    open_task = task_without_interval_check(pt.task)
    helper = await peer.helper_config()
    report = peer.flow.generate_report(open_task, 1, time=peer.flow.report_time(
        pt.task, time.time()), leader_hpke_config=peer.keypair.config,
        helper_hpke_config=helper)
    item = peer.prepare(report)
    ans, _ = await peer.init(peer.init_body([item]))
    peer.expect_rejected(ans, item, (ReportError.TASK_EXPIRED, ReportError.REPORT_DROPPED))


@check("H-AGG-INIT-015", "helper", MUST, "an out-of-range field element is rejected",
       refs=INIT_REPORT,
       sends="a job whose Leader message (ping-pong initialize) carries a verifier share "
             "starting with a field element >= the modulus",
       expects="the report rejected (invalid_message or vdaf_verify_error); no 5xx",
       tags=("aggregate", "malformed", "report-error"))
async def init_out_of_range(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    item = (await peer.prepared(1))[0]
    n = peer.vdaf.field.ENCODED_SIZE
    payload = item.payload[:5] + b"\xff" * n + item.payload[5 + n:]
    ans, _ = await peer.init(peer.init_body([item], payloads=[payload]))
    peer.expect_rejected(ans, item, (ReportError.INVALID_MESSAGE,
                                     ReportError.VDAF_VERIFY_ERROR))


@check("H-AGG-INIT-016", "helper", MUST, "a report failing verification is rejected",
       refs=INIT_REPORT,
       sends="a job of a report whose Helper input share seed has a flipped bit",
       expects="the report rejected with vdaf_verify_error", tags=("aggregate", "verify",
                                                                   "report-error"))
async def init_verify_failure(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    vdaf = mutating_vdaf(peer.vdaf, 1, flip_first_byte)
    item = peer.prepare((await peer.reports(1, vdaf=vdaf))[0])
    ans, _ = await peer.init(peer.init_body([item]))
    peer.expect_rejected(ans, item, (ReportError.VDAF_VERIFY_ERROR,))


@check("H-AGG-INIT-017", "helper", MUST, "a job under an unknown verification key is refused",
       refs={"dap-19": "4.5.3.2 (#784)", "dap-18": "4.5.3.2"}, profiles=DAP18,
       not_applicable="DAP-09 has no verification_key_id",
       sends="an AggregationJobInitReq with verification_key_id 200 (not the task's)",
       expects="DAP-19: each report rejected with unknown_verification_key_id; DAP-18 "
               "(which does not say): 4xx invalidMessage or every report rejected",
       tags=("aggregate", "malformed"))
async def init_unknown_key(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    item = (await peer.prepared(1))[0]
    ans, _ = await peer.init(peer.init_body([item], key_id=200))
    if ctx.profile.name == "dap-19":
        # DAP-19 (#784): each report rejected with unknown_verification_key_id.
        peer.expect_rejected(ans, item, (ReportError.UNKNOWN_VERIFICATION_KEY_ID,))
        return
    # DAP-18 does not say how an unknown key ID fails: the job, or each report.
    if ans.status >= 400:
        ctx.expect_problem(ans, "invalidMessage")
        return
    from ppm_reference.dap.common import VerifyRespType

    if any(r.kind != VerifyRespType.REJECT for r in peer.responses(ans)):
        raise Fail("a report was continued under an unknown verification key")


@check("H-AGG-INIT-018", "helper", MUST, "a report of a collected batch is rejected",
       refs=REPLAY,
       sends="a job and an aggregate share request of its batch; then a job of a new "
             "report in that batch",
       expects="the new report rejected with batch_collected",
       tags=("aggregate", "collect", "report-error"))
async def init_batch_collected(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    outs = await peer.aggregate(int(pt.task.min_batch_size))
    interval = peer.interval()
    ans = await peer.share(peer.share_body(interval, [p.report_id for p, _ in outs]))
    ctx.expect_success(ans, message="AggregateShare")
    item = (await peer.prepared(1))[0]
    ans2, _ = await peer.init(peer.init_body([item]))
    peer.expect_rejected(ans2, item, (ReportError.BATCH_COLLECTED,))


@check("H-AGG-INIT-019", "helper", SHOULD, "problem documents carry the task ID",
       refs=ERRORS, sends="a truncated AggregationJobInitReq to a known task",
       expects="a problem document with a taskid member", tags=("problem", "aggregate"))
async def init_taskid(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    ans, _ = await peer.init(peer.init_body(await peer.prepared(1))[:-1])
    ctx.expect_problem(ans, "invalidMessage")
    ctx.expect_taskid(ans, pt)


@check("H-AGG-INIT-020", "helper", SHOULD, "a wrong method on an aggregation resource is "
       "refused", refs={"dap-19": "4.5.3.2", "dap-18": "4.5.3.2", "dap-09": "3.2"},
       sends="PATCH to the aggregation job resource", expects="4xx (405)",
       tags=("aggregate", "method"))
async def init_wrong_method(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    url, _ = peer.init_url()
    ctx.expect_problem(await ctx.send("PATCH", url, b"", headers=peer.headers()))


# -- continuation, polling, deletion ---------------------------------------------------------


@check("H-AGG-CONT-001", "helper", MUST, "a continuation with the wrong step is refused",
       refs=CONT, profiles=DAP18,
       not_applicable="a DAP-09 continuation names at least one report, and with a "
                      "one-round VDAF (Prio3) none awaits one: the report-ID check "
                      "(invalidMessage) comes before the step check",
       sends="a valid job (at step 0), then an AggregationJobContinueReq for step 5 with "
             "no reports",
       expects="4xx problem document of type stepMismatch", tags=("aggregate", "step"))
async def cont_step_mismatch(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    items = await peer.prepared(1)
    ans, job_url = await peer.init(peer.init_body(items))
    peer.finish(items, ans)
    # No report in the request: the report-ID checks that precede the step check
    # (DAP-18 Section 4.5.4.2) hold vacuously, so stepMismatch is the one right answer.
    body = peer.wire.encode_continue_req(5, [])
    cont = await ctx.op("aggregation_job_continue", job_url, body,
                        "AggregationJobContinueReq", peer.headers())
    ctx.expect_problem(cont, "stepMismatch")


@check("H-AGG-CONT-002", "helper", MUST, "a continuation of an unknown job is refused",
       refs=CONT, sends="an AggregationJobContinueReq for step 1 to a random job ID",
       expects="4xx problem document of type unrecognizedAggregationJob",
       tags=("aggregate", "step"))
async def cont_unknown_job(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    items = await peer.prepared(1)
    url = ctx.url("aggregation_job", pt, aggregation_job_id=secrets.token_bytes(16))
    body = peer.wire.encode_continue_req(1, [(items[0].report_id, items[0].payload)])
    ans = await ctx.op("aggregation_job_continue", url, body, "AggregationJobContinueReq",
                       peer.headers())
    ctx.expect_problem(ans, "unrecognizedAggregationJob")


@check("H-AGG-CONT-003", "helper", MUST, "a continuation without authentication is refused",
       refs=AUTH, sends="a valid job, then an AggregationJobContinueReq without the token",
       expects="4xx", tags=("aggregate", "auth"))
async def cont_no_auth(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    items = await peer.prepared(1)
    ans, job_url = await peer.init(peer.init_body(items))
    peer.finish(items, ans)
    body = peer.wire.encode_continue_req(1, [(items[0].report_id, items[0].payload)])
    ctx.expect_problem(await ctx.op("aggregation_job_continue", job_url, body,
                                    "AggregationJobContinueReq", {}))


@check("H-AGG-GET-001", "helper", MUST, "a job can be polled",
       refs={"dap-19": "3.1, 4.5.3.2", "dap-18": "3.1, 4.5.3.2"}, profiles=DAP18,
       not_applicable="DAP-09 aggregation jobs are answered synchronously",
       sends="a valid job, then GET of its URL (?step=0)",
       expects="200 with the same AggregationJobResp", tags=("aggregate", "poll"))
async def get_job(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    items = await peer.prepared(1)
    ans, job_url = await peer.init(peer.init_body(items))
    peer.finish(items, ans)
    polled = await ctx.send("GET", job_url + "?step=0", headers=peer.headers())
    ctx.expect_success(polled, 200, "AggregationJobResp")
    if polled.body != ans.body:
        raise Fail("the polled AggregationJobResp differs from the first answer")


@check("H-AGG-DEL-001", "helper", MUST, "a deleted job keeps its replay records",
       refs={"dap-19": "4.5.5", "dap-18": "4.5.5", "dap-09": "4.5.2.1"},
       sends="a valid job of a report, DELETE of the job, then a job (new ID) of that "
             "report and a new one",
       expects="DELETE answers 2xx; the old report is rejected with report_replayed "
               "(deletion MUST NOT delete what replay checks need), the new one continued",
       tags=("aggregate", "delete", "replay", "state"))
async def delete_job(ctx: Ctx) -> None:
    from ppm_reference.dap.common import VerifyRespType

    pt, peer = await _peer(ctx)
    items = await peer.prepared(1)
    ans, job_url = await peer.init(peer.init_body(items))
    peer.finish(items, ans)
    ctx.expect_success(await ctx.send("DELETE", job_url, headers=peer.headers()))
    again = [peer.prepare(items[0].report), *(await peer.prepared(1))]
    ans2, _ = await peer.init(peer.init_body(again))
    peer.expect_rejected(ans2, again[0], (ReportError.REPORT_REPLAYED,))
    fresh = {bytes(r.report_id): r for r in peer.responses(ans2)}.get(again[1].report_id)
    if fresh is None or fresh.kind != VerifyRespType.CONTINUE:
        raise Fail("the new report next to the replayed one was not continued")


# -- aggregate shares --------------------------------------------------------------------------


@check("H-SHARE-001", "helper", MUST, "a valid aggregate share request is answered",
       refs=SHARE, sends="a job of min_batch_size valid reports (measurement 1), then an "
                         "AggregateShareReq of their interval with the right count and "
                         "checksum",
       expects="2xx with an AggregateShare (media type of the draft) that opens with the "
               "Collector's key and, with the suite's Leader share, unshards to the count",
       tags=("collect",))
async def share_valid(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    if pt.collector_keypair is None:
        raise Skip("the task file has no collector_private_key")
    outs = await peer.aggregate(int(pt.task.min_batch_size))
    interval = peer.interval()
    ans = await peer.share(peer.share_body(interval, [p.report_id for p, _ in outs]))
    result = peer.check_share(ans, interval, outs)
    if result != len(outs):
        raise Fail(f"the aggregate of {len(outs)} ones is {result}")


async def _share_refused(ctx: Ctx, count_delta: int = 0, bad_checksum: bool = False,
                         token: str = "batchMismatch") -> None:
    pt, peer = await _peer(ctx)
    outs = await peer.aggregate(int(pt.task.min_batch_size))
    interval = peer.interval()
    ids = [p.report_id for p, _ in outs]
    body = peer.share_body(interval, ids, report_count=len(ids) + count_delta,
                           checksum=bytes(32) if bad_checksum else None)
    ans = await peer.share(body)
    ctx.expect_problem(ans, token)
    # State: the refused request did not collect the batch; the right request works.
    ctx.expect_success(await peer.share(peer.share_body(interval, ids)),
                       message="AggregateShare")


@check("H-SHARE-002", "helper", MUST, "a report count mismatch is refused and changes nothing",
       refs=SHARE, sends="an AggregateShareReq whose report_count is one more than "
                         "aggregated; then the right request",
       expects="4xx problem document of type batchMismatch; then 2xx with an AggregateShare",
       tags=("collect", "batch-mismatch", "state"))
async def share_count_mismatch(ctx: Ctx) -> None:
    await _share_refused(ctx, count_delta=1)


@check("H-SHARE-003", "helper", MUST, "a checksum mismatch is refused and changes nothing",
       refs=SHARE, sends="an AggregateShareReq with a checksum of zeros; then the right one",
       expects="4xx problem document of type batchMismatch; then 2xx with an AggregateShare",
       tags=("collect", "batch-mismatch", "state"))
async def share_checksum_mismatch(ctx: Ctx) -> None:
    await _share_refused(ctx, bad_checksum=True)


@check("H-SHARE-004", "helper", MUST, "a batch below min_batch_size is not released",
       refs={"dap-19": "4.6.4", "dap-18": "4.6.4", "dap-09": "4.6.5.1.2"},
       sends="a job of min_batch_size - 1 reports, then an AggregateShareReq of them",
       expects="4xx problem document of type invalidBatchSize",
       tags=("collect", "privacy", "batch-size"))
async def share_below_min(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx, TaskNeeds(min_batch_size=3))
    outs = await peer.aggregate(int(pt.task.min_batch_size) - 1)
    interval = peer.interval()
    ans = await peer.share(peer.share_body(interval, [p.report_id for p, _ in outs]))
    ctx.expect_problem(ans, "invalidBatchSize")


@check("H-SHARE-005", "helper", MUST, "overlapping batches are refused",
       refs={"dap-19": "4.6.4", "dap-18": "4.6.4", "dap-09": "4.6.5"},
       sends="an aggregate share of [t-1, t+2), then a request for [t, t+3) (in "
             "time_precision units)",
       expects="the second refused with batchOverlap (or batchMismatch: its count and "
               "checksum cannot match a new batch)", tags=("collect", "privacy",
                                                         "batch-overlap"))
async def share_overlap(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    outs = await peer.aggregate(int(pt.task.min_batch_size))
    ids = [p.report_id for p, _ in outs]
    now_unit = int(time.time()) // int(pt.task.time_precision)
    first = peer.interval(now_unit - 1, 3)
    ctx.expect_success(await peer.share(peer.share_body(first, ids)),
                       message="AggregateShare")
    ans = await peer.share(peer.share_body(peer.interval(now_unit, 3), ids))
    ctx.expect_problem(ans, any_of=("batchOverlap", "batchQueriedTooManyTimes")
                       if ctx.profile.name == "dap-09" else ("batchOverlap",))


@check("H-SHARE-006", "helper", MUST, "a repeated aggregate share request is idempotent",
       refs=SHARE, sends="the same AggregateShareReq twice",
       expects="2xx both times with an AggregateShare that opens to the same result",
       tags=("collect", "idempotent"))
async def share_idempotent(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    if pt.collector_keypair is None:
        raise Skip("the task file has no collector_private_key")
    outs = await peer.aggregate(int(pt.task.min_batch_size))
    interval = peer.interval()
    body = peer.share_body(interval, [p.report_id for p, _ in outs])
    r1 = peer.check_share(await peer.share(body), interval, outs)
    r2 = peer.check_share(await peer.share(body), interval, outs)
    if r1 != r2:
        raise Fail(f"the repeated request gave another result: {r1} then {r2}")


@check("H-SHARE-007", "helper", MUST, "an aggregate share request without authentication "
       "is refused and changes nothing", refs=AUTH,
       sends="an AggregateShareReq without the Leader's token; then with it",
       expects="4xx; then 2xx with an AggregateShare", tags=("collect", "auth", "state"))
async def share_no_auth(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    outs = await peer.aggregate(int(pt.task.min_batch_size))
    interval = peer.interval()
    body = peer.share_body(interval, [p.report_id for p, _ in outs])
    ctx.expect_problem(await peer.share(body, headers={}))
    ctx.expect_success(await peer.share(body), message="AggregateShare")


@check("H-SHARE-008", "helper", MUST, "a malformed AggregateShareReq is refused",
       refs=SHARE, sends="an AggregateShareReq without its last byte",
       expects="4xx problem document of type invalidMessage", tags=("collect", "malformed"))
async def share_truncated(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    outs = await peer.aggregate(int(pt.task.min_batch_size))
    body = peer.share_body(peer.interval(), [p.report_id for p, _ in outs])
    ctx.expect_problem(await peer.share(body[:-1]), "invalidMessage")


@check("H-SHARE-009", "helper", MUST, "an aggregate share of an unknown task is refused",
       refs=ERRORS, sends="an AggregateShareReq to /tasks/<random task ID>/aggregate_shares",
       expects="4xx problem document of type unrecognizedTask", tags=("collect", "task"))
async def share_unknown_task(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    body = peer.share_body(peer.interval(), [secrets.token_bytes(16)] * 2)
    url = ctx.profile.resource_url("aggregate_shares", ctx.target,
                                   task_id=secrets.token_bytes(32))
    ans = await ctx.op("aggregate_share_create", url, body, "AggregateShareReq",
                       peer.headers())
    ctx.expect_problem(ans, "unrecognizedTask")


# -- robustness ------------------------------------------------------------------------------


@check("H-ROBUST-001", "helper", MUST, "an oversized aggregation job is refused, not a crash",
       refs={"dap-19": "3.6", "dap-18": "3.6", "dap-09": "3.2"},
       sends="an aggregation job initialization of --oversize-bytes of zeros",
       expects="413 Content Too Large (or the connection closed); the target answers "
               "afterwards", tags=("robustness", "aggregate"))
async def oversized_init(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    url, _ = peer.init_url()
    await _oversized(ctx, url, ctx.profile.request("aggregation_job_init")[0],
                     ctx.profile.media_type_for("AggregationJobInitReq"), peer.headers())


@check("H-ROBUST-002", "helper", MUST, "a truncated request is survived",
       refs={"dap-19": "3", "dap-18": "3", "dap-09": "3"},
       sends="an aggregation job whose Content-Length promises 1000 bytes; 10 are sent and "
             "the connection closed", expects="the target keeps answering",
       tags=("robustness", "aggregate"))
async def truncated_init(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    url, _ = peer.init_url()
    head = request_head(ctx.profile.request("aggregation_job_init")[0], url,
                        ctx.profile.media_type_for("AggregationJobInitReq"), 1000,
                        peer.headers())
    await raw_exchange(url, head, [(bytes(10), 0.0)], close_early=True)


@check("H-ROBUST-003", "helper", MUST, "a slow request does not block others",
       refs={"dap-19": "3", "dap-18": "3", "dap-09": "3"},
       sends="an aggregation job whose body trickles in (a byte every 0.1 s for 5 s); "
             "meanwhile a valid job",
       expects="the valid job is answered within 4 s, while the slow one is still sending",
       tags=("robustness", "aggregate"))
async def slow_init(ctx: Ctx) -> None:
    import asyncio

    pt, peer = await _peer(ctx)
    url, _ = peer.init_url()
    head = request_head(ctx.profile.request("aggregation_job_init")[0], url,
                        ctx.profile.media_type_for("AggregationJobInitReq"), 1000,
                        peer.headers())
    items = await peer.prepared(1)  # the HPKE configuration fetched beforehand
    slow = asyncio.create_task(raw_exchange(url, head, [(b"\x00", 0.1)] * SLOW_BYTES,
                                            close_early=True))
    try:
        await asyncio.sleep(0.2)
        ans, _ = await asyncio.wait_for(peer.init(peer.init_body(items)), SLOW_DEADLINE)
        peer.finish(items, ans)
        if slow.done():
            raise Skip("the slow request ended before the check's request")
    except TimeoutError:
        raise Fail("a valid job was not answered while another request trickled in") \
            from None
    finally:
        slow.cancel()
        try:
            await slow
        except (asyncio.CancelledError, OSError):
            pass


# -- HPKE configuration, extensions, aggregation parameters, share resources ----------------


@check("H-HPKE-001", "helper", MUST, "GET hpke_config answers the HPKE configurations",
       refs={"dap-19": "4.4.1", "dap-18": "4.4.1", "dap-09": "4.4.1"},
       sends="GET {helper}/hpke_config (DAP-09: ?task_id=...)",
       expects="200, Content-Type of HpkeConfigList, a non-empty HpkeConfigList with "
               "distinct config IDs", tags=("hpke",))
async def helper_hpke_config(ctx: Ctx) -> None:
    from ppm_reference.interop.conformance.leader_checks import hpke_config

    await hpke_config(ctx)


@check("H-AGG-INIT-021", "helper", MUST, "an unknown aggregation job extension is refused",
       refs={"dap-19": "4.5.1, 4.5.3.2", "dap-18": "4.5.1, 4.5.3.2"}, profiles=DAP18,
       not_applicable="DAP-09 aggregation jobs have no extensions",
       sends="an AggregationJobInitReq with an extension of unregistered type 0xFFFE",
       expects="4xx problem document of type unsupportedExtension",
       tags=("aggregate", "extension"))
async def init_unknown_job_extension(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    items = await peer.prepared(1)
    m = pt.task.profile.messages
    req = m.AggregationJobInitReq.decode(peer.init_body(items))
    import dataclasses as dc

    bad = dc.replace(req, extensions=(m.AggregationJobExtension(0xFFFE, b""),))
    ans, _ = await peer.init(bytes(bad.encode()))
    ctx.expect_problem(ans, "unsupportedExtension")


@check("H-AGG-INIT-022", "helper", MUST, "an invalid aggregation parameter is refused",
       refs={"dap-19": "4.3, 4.5.3.2", "dap-18": "4.3, 4.5.3.2", "dap-09": "4.5.1.2"},
       sends="an AggregationJobInitReq with aggregation parameter 0x01 (Prio3 takes none)",
       expects="4xx of type invalidAggregationParameter (DAP-09: invalidMessage), or every "
               "report rejected", tags=("aggregate", "malformed", "agg-param"))
async def init_bad_agg_param(ctx: Ctx) -> None:
    from ppm_reference.dap.common import VerifyRespType

    pt, peer = await _peer(ctx)
    items = await peer.prepared(1)
    body = bytes(peer.wire.encode_init_req(peer.atask, b"\x01", None,
                                           [(p.report, p.payload) for p in items]))
    ans, _ = await peer.init(body)
    if ans.status >= 400:
        ctx.expect_problem(ans, "invalidAggregationParameter")
        return
    if any(r.kind != VerifyRespType.REJECT for r in peer.responses(ans)):
        raise Fail("a report was continued under an invalid aggregation parameter")


@check("H-AGG-INIT-023", "helper", MUST, "a report with an unknown extension is rejected",
       refs={"dap-19": "4.5.3.4 (#789)", "dap-18": "4.5.3.4"}, profiles=DAP18,
       not_applicable="DAP-09's extensions are checked the same way inside the share; "
                      "not covered",
       sends="a job of a report with a public report extension of unregistered type 0xFFFE",
       expects="the report rejected (DAP-18: invalid_message; DAP-19: "
               "unsupported_extension)", tags=("aggregate", "extension", "report-error"))
async def init_unknown_report_extension(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    helper = await peer.helper_config()
    report = peer.flow.generate_report(pt.task, 1, time=peer.flow.report_time(
        pt.task, time.time()), leader_hpke_config=peer.keypair.config,
        helper_hpke_config=helper, extensions=[(0xFFFE, b"")])
    item = peer.prepare(report)
    ans, _ = await peer.init(peer.init_body([item]))
    peer.expect_rejected(ans, item, (ReportError.INVALID_MESSAGE,
                                     ReportError.UNSUPPORTED_EXTENSION))


@check("H-SHARE-010", "helper", MUST, "an aggregate share can be fetched again",
       refs={"dap-19": "3.1, 4.6.4", "dap-18": "3.1, 4.6.4"}, profiles=DAP18,
       not_applicable="DAP-09 aggregate shares are not resources",
       sends="a valid AggregateShareReq, then GET of its Location",
       expects="200 with the same AggregateShare", tags=("collect", "poll"))
async def share_get(ctx: Ctx) -> None:
    from ppm_reference.dap.origin import resolve_location

    pt, peer = await _peer(ctx)
    outs = await peer.aggregate(int(pt.task.min_batch_size))
    ans = await peer.share(peer.share_body(peer.interval(), [p.report_id for p, _ in outs]))
    ctx.expect_success(ans, message="AggregateShare")
    loc = ans.headers.get("location")
    if not loc:
        raise Fail("the aggregate share has no Location")
    url = resolve_location(ctx.url("aggregate_shares", pt), loc)
    again = await ctx.send("GET", url, headers=peer.headers())
    ctx.expect_success(again, 200, "AggregateShare")
    if again.body != ans.body:
        raise Fail("the fetched AggregateShare differs from the first answer")


@check("H-SHARE-011", "helper", MUST, "a deleted aggregate share keeps the batch collected",
       refs={"dap-19": "4.6.5", "dap-18": "4.6.5"}, profiles=DAP18,
       not_applicable="DAP-09 aggregate shares are not resources",
       sends="a valid AggregateShareReq of [t-1, t+2), DELETE of its Location, then an "
             "AggregateShareReq of [t, t+3)",
       expects="DELETE answers 2xx; the second request is refused with batchOverlap "
               "(deletion MUST NOT delete what double-collection checks need)",
       tags=("collect", "delete", "batch-overlap", "state"))
async def share_delete(ctx: Ctx) -> None:
    from ppm_reference.dap.origin import resolve_location

    pt, peer = await _peer(ctx)
    outs = await peer.aggregate(int(pt.task.min_batch_size))
    ids = [p.report_id for p, _ in outs]
    now_unit = int(time.time()) // int(pt.task.time_precision)
    ans = await peer.share(peer.share_body(peer.interval(now_unit - 1, 3), ids))
    ctx.expect_success(ans, message="AggregateShare")
    loc = ans.headers.get("location")
    if not loc:
        raise Fail("the aggregate share has no Location")
    url = resolve_location(ctx.url("aggregate_shares", pt), loc)
    ctx.expect_success(await ctx.send("DELETE", url, headers=peer.headers()))
    again = await peer.share(peer.share_body(peer.interval(now_unit, 3), ids))
    ctx.expect_problem(again, "batchOverlap")


@check("H-SHARE-012", "helper", MUST, "leader-selected batches: a batch is aggregated and "
       "its share answered", refs={"dap-19": "5.2", "dap-18": "5.2",
                                   "dap-09": "4.5.1.1, 4.6.2"},
       batch_mode="leader_selected",
       sends="a job of min_batch_size reports in a batch the suite names (DAP-18/19: the "
             "leader_selected_batch_id extension; DAP-09: the partial batch selector), then "
             "an AggregateShareReq of that batch ID",
       expects="every report continued; 2xx with an AggregateShare that unshards to the "
               "count", tags=("aggregate", "collect", "leader-selected"))
async def share_leader_selected(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx, TaskNeeds(batch_mode="leader_selected"))
    if pt.collector_keypair is None:
        raise Skip("the task file has no collector_private_key")
    batch_id = secrets.token_bytes(32)
    outs = await peer.aggregate(int(pt.task.min_batch_size), batch_id=batch_id)
    ans = await peer.share(peer.share_body(None, [p.report_id for p, _ in outs],
                                           batch_id=batch_id))
    result = peer.check_share(ans, None, outs, batch_id=batch_id)
    if result != len(outs):
        raise Fail(f"the aggregate of {len(outs)} ones is {result}")


@check("H-ROBUST-004", "helper", MUST, "a malformed HTTP request is survived",
       refs={"dap-19": "3", "dap-18": "3", "dap-09": "3"},
       sends="bytes that are not HTTP; a request with a 70000-byte header",
       expects="4xx or the connection closed (never 5xx); the target keeps answering",
       tags=("robustness",))
async def helper_garbage(ctx: Ctx) -> None:
    from ppm_reference.interop.conformance.leader_checks import garbage_request

    await garbage_request(ctx)
