"""Checks of a Leader: the suite plays the Client and the Collector.

Section numbers: DAP-18 (also DAP-19, whose changes to these sections are listed in
``draft-ietf-ppm-dap-19-changes``) and DAP-09. Where the Leader may refuse a report at
upload or drop it during aggregation (DAP-18 Section 4.4.2.2: the Leader MAY decrypt at
upload time), the check accepts either and then requires that a collection does not
count it.
"""

from __future__ import annotations

import asyncio
import secrets
import time

from ppm_reference.dap.common import ReportError
from ppm_reference.dap.provision import ProvisionedTask
from ppm_reference.interop.conformance.catalogue import Fail, Level, Skip, check
from ppm_reference.interop.conformance.context import Ctx, raw_exchange, request_head
from ppm_reference.interop.conformance.peer import (
    LeaderPeer,
    flip_first_byte,
    mutating_vdaf,
    off_by_one_first_element,
    out_of_range_first_element,
    with_ciphertext,
)
from ppm_reference.interop.conformance.provision import TaskNeeds

MUST, SHOULD, MAY = Level.MUST, Level.SHOULD, Level.MAY
ALL = ("dap-19", "dap-18", "dap-09")
DAP18 = ("dap-19", "dap-18")

# The slow-request checks: a body trickles in, a byte every 0.1 s, for SLOW_BYTES / 10
# seconds; another request must be answered within SLOW_DEADLINE seconds, before the slow
# one ends (a target that serves one request at a time answers only after it).
SLOW_BYTES = 50
SLOW_DEADLINE = 4.0

UPLOAD = {"dap-19": "4.4.2", "dap-18": "4.4.2", "dap-09": "4.4.2"}
COLLECT = {"dap-19": "4.6.1", "dap-18": "4.6.1", "dap-09": "4.6.1"}
ERRORS = {"dap-19": "3.6", "dap-18": "3.6", "dap-09": "3.2"}
AUTH = {"dap-19": "3.5", "dap-18": "3.5", "dap-09": "3.1"}


async def _peer(ctx: Ctx, needs: TaskNeeds | None = None) -> tuple[ProvisionedTask, LeaderPeer]:
    pt = await ctx.task(needs)
    return pt, LeaderPeer(ctx, pt)


def _expect_count(count: int, want: int, what: str) -> None:
    if count != want:
        raise Fail(f"{what}: the collection counted {count} reports, expected {want}")


async def _expect_refused_or_uncounted(ctx: Ctx, peer: LeaderPeer, bad: list[object],
                                       errors: tuple[ReportError, ...], what: str) -> None:
    """Upload min_batch_size good reports and the bad ones: each bad one is refused at
    upload with one of ``errors`` or accepted, and the collection counts only the good."""
    mbs = int(peer.task.min_batch_size)
    await peer.upload(await peer.reports(mbs))
    refused = await peer.upload(bad)
    for rid, err in refused.items():
        if err not in errors:
            raise Fail(f"{what}: report {rid.hex()} refused with {err.name.lower()}, "
                       f"expected one of {', '.join(e.name.lower() for e in errors)}")
    result = await peer.collect()
    _expect_count(int(result.report_count), mbs, what)


# -- HPKE configuration ---------------------------------------------------------------------


@check("L-HPKE-001", "leader", MUST, "GET hpke_config answers the HPKE configurations",
       refs={"dap-19": "4.4.1", "dap-18": "4.4.1", "dap-09": "4.4.1"},
       sends="GET {leader}/hpke_config (DAP-09: ?task_id=...)",
       expects="200, Content-Type of HpkeConfigList, a body that decodes as a non-empty "
               "HpkeConfigList with distinct config IDs", tags=("hpke",))
async def hpke_config(ctx: Ctx) -> None:
    from ppm_reference.dap.common import HpkeConfigList

    pt = await ctx.task()
    ans = await ctx.op("hpke_config", ctx.url(ctx.profile.request("hpke_config")[1], pt),
                       None, None)
    ctx.expect_success(ans, 200, "HpkeConfigList")
    try:
        configs = HpkeConfigList.decode(ans.body)
    except Exception as exc:  # noqa: BLE001 - decode errors
        raise Fail(f"HpkeConfigList does not decode: {exc}") from None
    if not configs.configs or not configs.has_distinct_ids():
        raise Fail("empty HpkeConfigList or repeated config IDs")


@check("L-HPKE-002", "leader", SHOULD, "hpke_config is cacheable",
       refs={"dap-19": "4.4.1", "dap-18": "4.4.1", "dap-09": "4.4.1"},
       sends="GET {leader}/hpke_config (DAP-09: ?task_id=...)",
       expects="a Cache-Control header on the answer (the drafts: SHOULD permit client-side "
               "caching, with the lifetime in Cache-Control)", tags=("hpke",))
async def hpke_cache(ctx: Ctx) -> None:
    pt = await ctx.task()
    ans = await ctx.op("hpke_config", ctx.url(ctx.profile.request("hpke_config")[1], pt),
                       None, None)
    ctx.expect_success(ans, 200)
    if "cache-control" not in ans.headers:
        raise Fail("no Cache-Control header")


@check("L-HPKE-003", "leader", MUST, "hpke_config of an unknown task is refused",
       refs={"dap-09": "4.4.1"}, profiles=("dap-09",),
       not_applicable="the hpke_config resource has no task ID after DAP-09",
       sends="GET {leader}/hpke_config?task_id=<random unknown task>",
       expects="4xx problem document of type unrecognizedTask", tags=("hpke", "task"))
async def hpke_unknown_task(ctx: Ctx) -> None:
    url = ctx.profile.resource_url("hpke_config_for_task", ctx.target,
                                   task_id=secrets.token_bytes(32))
    ctx.expect_problem(await ctx.send("GET", url), "unrecognizedTask")


# -- upload ------------------------------------------------------------------------------


@check("L-UPLOAD-001", "leader", MUST, "a valid upload is accepted",
       refs=UPLOAD, sends="the upload request of 2 valid reports (DAP-09: one PUT each)",
       expects="2xx (DAP-18/19: no report in UploadErrors), and a later collection counts "
               "them", tags=("upload", "collect"))
async def upload_valid(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    reports = await peer.reports(int(pt.task.min_batch_size))
    refused = await peer.upload(reports)
    if refused:
        raise Fail(f"valid reports refused: {[e.name for e in refused.values()]}")
    result = await peer.collect()
    _expect_count(int(result.report_count), len(reports), "valid reports")
    if result.aggregate_result != len(reports):
        raise Fail(f"Prio3Count of {len(reports)} ones gave {result.aggregate_result}")


@check("L-UPLOAD-002", "leader", MUST, "upload to an unknown task is refused",
       refs={**ERRORS}, sends="a valid upload request to /tasks/<random task ID>/reports",
       expects="4xx problem document of type unrecognizedTask", tags=("upload", "task"))
async def upload_unknown_task(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    _, body = peer.flow.encode_upload(await peer.reports(1))
    url = ctx.profile.resource_url("reports", ctx.target, task_id=secrets.token_bytes(32))
    ans = await ctx.op("upload", url, body, ctx.profile.message_names["upload"])
    ctx.expect_problem(ans, "unrecognizedTask")


@check("L-UPLOAD-003", "leader", MUST, "upload with a wrong media type changes nothing",
       refs=UPLOAD, sends="a valid upload body with Content-Type application/octet-stream, "
                          "then the same reports with the right type",
       expects="4xx for the first request; the reports are accepted afterwards and counted "
               "once", tags=("upload", "media-type", "state"))
async def upload_wrong_media_type(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    reports = await peer.reports(int(pt.task.min_batch_size))
    for r in reports if peer.flow.one_report_per_request else [reports[0]]:
        _, body = peer.flow.encode_upload([r] if peer.flow.one_report_per_request
                                          else reports)
        ctx.expect_problem(await peer.upload_raw(body, "application/octet-stream"))
    refused = await peer.upload(reports)
    if refused:
        raise Fail(f"reports refused after a refused request: "
                   f"{[e.name for e in refused.values()]}")
    _expect_count(int((await peer.collect()).report_count), len(reports), "after retry")


@check("L-UPLOAD-004", "leader", MUST, "a truncated upload body is refused",
       refs={**UPLOAD}, sends="the upload body of one report without its last byte",
       expects="4xx problem document of type invalidMessage", tags=("upload", "malformed"))
async def upload_truncated(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    _, body = peer.flow.encode_upload(await peer.reports(1))
    ctx.expect_problem(await peer.upload_raw(body[:-1]), "invalidMessage")


@check("L-UPLOAD-005", "leader", MUST, "an upload body with trailing bytes is refused",
       refs={"dap-19": "4.4.2", "dap-18": "4.4.2", "dap-09": "4.4.2"},
       sends="the upload body of one report followed by one byte 0x00",
       expects="4xx problem document of type invalidMessage (DAP-18/19: the trailing "
               "byte does not parse as a Report)", tags=("upload", "malformed"))
async def upload_trailing(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    _, body = peer.flow.encode_upload(await peer.reports(1))
    ctx.expect_problem(await peer.upload_raw(body + b"\x00"), "invalidMessage")


@check("L-UPLOAD-006", "leader", MUST, "a report for an unknown HPKE configuration is refused",
       refs=UPLOAD, sends="a report whose Leader ciphertext names a config ID the Leader "
                          "does not advertise",
       expects="the report refused with outdated_config (DAP-18), hpke_unknown_config_id "
               "(DAP-19) or outdatedConfig (DAP-09), so that the Client refreshes",
       tags=("upload", "hpke", "report-error"))
async def upload_unknown_config(ctx: Ctx) -> None:
    from ppm_reference.dap.client import RETRY_ERRORS

    pt, peer = await _peer(ctx)
    leader, _ = await peer.configs()
    known = {int(leader.id)}
    unknown = next(i for i in range(255, -1, -1) if i not in known)
    report = with_ciphertext((await peer.reports(1))[0], True, config_id=unknown)
    refused = await peer.upload([report])
    err = refused.get(peer.flow.report_id(report))
    if err not in RETRY_ERRORS:
        raise Fail(f"expected the report refused with "
                   f"{'/'.join(e.name.lower() for e in RETRY_ERRORS)}, got "
                   f"{err.name.lower() if err else 'accepted'}")


@check("L-UPLOAD-007", "leader", MUST, "a report with an undecryptable share is not counted",
       refs={"dap-19": "4.4.2.2, 4.5.3.3", "dap-18": "4.4.2.2, 4.5.3.3",
             "dap-09": "4.4.2, 4.5.1.3"},
       sends="min_batch_size valid reports and one whose Leader ciphertext payload has a "
             "flipped bit; then a collection",
       expects="the bad report refused at upload with hpke_decrypt_error or accepted, and "
               "the collection counts only the valid reports",
       tags=("upload", "hpke", "report-error", "collect"))
async def upload_undecryptable(ctx: Ctx) -> None:
    from ppm_reference.interop.conformance.peer import corrupt

    pt, peer = await _peer(ctx)
    r = (await peer.reports(1))[0]
    bad = with_ciphertext(r, True, payload=corrupt(r.leader_encrypted_input_share.payload))
    await _expect_refused_or_uncounted(ctx, peer, [bad], (ReportError.HPKE_DECRYPT_ERROR,),
                                       "undecryptable share")


@check("L-UPLOAD-008", "leader", SHOULD, "a report from the future is refused",
       refs={"dap-19": "4.4.2.2", "dap-18": "4.4.2.2", "dap-09": "4.4.2"},
       sends="a report whose time is two days ahead of now",
       expects="refused with report_too_early (DAP-09: problem reportTooEarly): the "
               "Leader SHOULD NOT accept it and SHOULD say why",
       tags=("upload", "time", "report-error"))
async def upload_too_early(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    r = (await peer.reports(1, seconds=time.time() + 2 * 86400))[0]
    refused = await peer.upload([r])
    err = refused.get(peer.flow.report_id(r))
    if err != ReportError.REPORT_TOO_EARLY:
        raise Fail(f"expected report_too_early, got {err.name.lower() if err else 'accepted'}")


@check("L-UPLOAD-009", "leader", SHOULD, "a report after the task's end is refused",
       refs={"dap-19": "4.4.2.2", "dap-18": "4.4.2.2", "dap-09": "4.4.2"},
       sends="a report of now to a task whose interval (DAP-09: expiration) ended an hour ago",
       expects="refused (task_expired or report_dropped in DAP-18, report_dropped in "
               "DAP-19, reportRejected in DAP-09): the Leader MUST discard it (DAP-09: MAY "
               "ignore it) and SHOULD say so", tags=("upload", "time", "report-error"),
       levels={"dap-09": MAY})
async def upload_after_end(ctx: Ctx) -> None:
    tp = 3600
    now = int(time.time()) // tp * tp
    pt, peer = await _peer(ctx, TaskNeeds(task_window=(now - 5 * tp, now - tp)))
    leader, helper = await peer.configs()
    # The draft's Client refuses to make such a report; built by hand with a task whose
    # interval includes now.
    r = await _report_outside_interval(peer, pt, leader, helper)
    refused = await peer.upload([r])
    err = refused.get(peer.flow.report_id(r))
    if err not in (ReportError.TASK_EXPIRED, ReportError.REPORT_DROPPED):
        raise Fail(f"expected task_expired/report_dropped/reportRejected, got "
                   f"{err.name.lower() if err else 'accepted'}")


async def _report_outside_interval(peer: LeaderPeer, pt: ProvisionedTask, leader: object,
                                   helper: object) -> object:
    """A report of now (the draft's Client refuses to make one outside the interval)."""
    from ppm_reference.interop.conformance.peer import task_without_interval_check

    t = peer.flow.report_time(pt.task, time.time())
    return peer.flow.generate_report(task_without_interval_check(pt.task), 1, time=t,
                                     leader_hpke_config=leader, helper_hpke_config=helper)


@check("L-UPLOAD-010", "leader", SHOULD, "a report before the task's start is refused",
       refs={"dap-19": "4.4.2.2", "dap-18": "4.4.2.2"}, profiles=DAP18,
       not_applicable="DAP-09 tasks have no start",
       sends="a report of now to a task whose interval starts in a day",
       expects="refused (task_not_started or report_dropped in DAP-18, report_dropped in "
               "DAP-19): the Leader MUST discard it and SHOULD say so",
       tags=("upload", "time", "report-error"))
async def upload_before_start(ctx: Ctx) -> None:
    tp = 3600
    now = int(time.time()) // tp * tp
    pt, peer = await _peer(ctx, TaskNeeds(task_window=(now + 24 * tp, now + 48 * tp)))
    if getattr(pt.task, "task_interval", None) is None:
        raise Skip("the provisioned task has no start")
    leader, helper = await peer.configs()
    r = await _report_outside_interval(peer, pt, leader, helper)
    refused = await peer.upload([r])
    err = refused.get(peer.flow.report_id(r))
    if err not in (ReportError.TASK_NOT_STARTED, ReportError.REPORT_DROPPED):
        raise Fail(f"expected task_not_started/report_dropped, got "
                   f"{err.name.lower() if err else 'accepted'}")


@check("L-UPLOAD-011", "leader", MUST, "a replayed report is counted once",
       refs={"dap-19": "4.4.2.2, 4.5.3.3", "dap-18": "4.4.2.2, 4.5.3.3",
             "dap-09": "4.4.2, 4.5.1.3"},
       sends="min_batch_size valid reports, then the first one again; then a collection",
       expects="the repeat refused with report_replayed or accepted; the collection counts "
               "min_batch_size reports", tags=("upload", "replay", "collect", "state"))
async def upload_replay(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    reports = await peer.reports(int(pt.task.min_batch_size))
    await peer.upload(reports)
    await asyncio.sleep(0.2)
    await _expect_refused_or_uncounted_after(ctx, peer, [reports[0]], len(reports))


async def _expect_refused_or_uncounted_after(ctx: Ctx, peer: LeaderPeer, again: list[object],
                                             want: int) -> None:
    refused = await peer.upload(again)
    for err in refused.values():
        if err != ReportError.REPORT_REPLAYED:
            raise Fail(f"replay refused with {err.name.lower()}, expected report_replayed")
    _expect_count(int((await peer.collect()).report_count), want, "replayed report")


@check("L-UPLOAD-012", "leader", MUST, "duplicate report IDs in one upload are counted once",
       refs={"dap-19": "4.4.2", "dap-18": "4.4.2"}, profiles=DAP18,
       not_applicable="DAP-09 uploads one report per request",
       sends="one UploadRequest with min_batch_size reports, the first twice; a collection",
       expects="the duplicate refused with report_replayed or accepted; the collection "
               "counts min_batch_size reports", tags=("upload", "replay", "collect"))
async def upload_duplicate_in_request(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    reports = await peer.reports(int(pt.task.min_batch_size))
    _, body = peer.flow.encode_upload([*reports, reports[0]])
    ans = await peer.upload_raw(body)
    for err in peer.report_errors(ans, reports).values():
        if err != ReportError.REPORT_REPLAYED:
            raise Fail(f"duplicate refused with {err.name.lower()}, expected report_replayed")
    _expect_count(int((await peer.collect()).report_count), len(reports), "duplicate IDs")


@check("L-UPLOAD-013", "leader", MUST, "a share with an out-of-range field element is not "
       "counted", refs={"dap-19": "4.5.3.4", "dap-18": "4.5.3.4", "dap-09": "4.5.1.4"},
       sends="min_batch_size valid reports and one whose Leader input share starts with "
             "a field element >= the modulus; a collection",
       expects="the bad report refused (invalid_message) or accepted; the collection "
               "counts only the valid reports", tags=("upload", "malformed", "collect"))
async def upload_out_of_range(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    vdaf = mutating_vdaf(peer.client.vdaf, 0, out_of_range_first_element)
    bad = await peer.reports(1, vdaf=vdaf)
    await _expect_refused_or_uncounted(ctx, peer, bad, (ReportError.INVALID_MESSAGE,
                                                        ReportError.VDAF_VERIFY_ERROR),
                                       "out-of-range field element")


@check("L-UPLOAD-014", "leader", MUST, "a report failing VDAF verification is not counted",
       refs={"dap-19": "4.5.3.4", "dap-18": "4.5.3.4", "dap-09": "4.5.1.4"},
       sends="min_batch_size valid reports and one whose Leader measurement share is off "
             "by one (the proof no longer verifies); a collection",
       expects="the collection counts only the valid reports (vdaf_verify_error)",
       tags=("upload", "verify", "collect"))
async def upload_verify_failure(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    vdaf = mutating_vdaf(peer.client.vdaf, 0, off_by_one_first_element)
    bad = await peer.reports(1, vdaf=vdaf)
    await _expect_refused_or_uncounted(ctx, peer, bad, (ReportError.VDAF_VERIFY_ERROR,),
                                       "verification failure")


@check("L-UPLOAD-015", "leader", MUST, "a report with a corrupted Helper share is not counted",
       refs={"dap-19": "4.5.3.4", "dap-18": "4.5.3.4", "dap-09": "4.5.1.4"},
       sends="min_batch_size valid reports and one whose Helper input share seed has a "
             "flipped bit (the Leader cannot tell; the Helper's verification fails)",
       expects="the collection counts only the valid reports", tags=("upload", "verify",
                                                                      "collect"))
async def upload_helper_share_bad(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    vdaf = mutating_vdaf(peer.client.vdaf, 1, flip_first_byte)
    bad = await peer.reports(1, vdaf=vdaf)
    await _expect_refused_or_uncounted(ctx, peer, bad, (ReportError.VDAF_VERIFY_ERROR,),
                                       "corrupted Helper share")


@check("L-UPLOAD-016", "leader", SHOULD, "a wrong method on the reports resource is refused",
       refs={"dap-19": "4.4.2", "dap-18": "4.4.2", "dap-09": "3.2"},
       sends="GET {leader}/tasks/{task-id}/reports",
       expects="4xx (405 Method Not Allowed)", tags=("upload", "method"))
async def upload_wrong_method(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    ctx.expect_problem(await ctx.send("GET", peer.upload_url()))


# -- collection ---------------------------------------------------------------------------


@check("L-COLL-001", "leader", MUST, "collection without authentication is refused",
       refs=AUTH, sends="a valid collection job request without the Collector's token",
       expects="4xx; no job is created (DAP-09: polling the job ID with the token is "
               "refused)", tags=("collect", "auth", "state"))
async def collect_no_auth(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await _collect_bad_auth(ctx, peer, {})


async def _collect_bad_auth(ctx: Ctx, peer: LeaderPeer, headers: dict[str, str]) -> None:
    message, body = peer.collection_body()
    job_id = secrets.token_bytes(16)
    ans, _ = await peer.start_collection(body, message, headers=headers, job_id=job_id)
    # DAP-09 defines unauthorizedRequest without requiring it; DAP-18/19 define none.
    ctx.expect_problem(ans)
    if peer.flow.collector_chooses_job_id:
        url = ctx.url("collection_job", peer.pt, collection_job_id=job_id)
        polled = await peer.poll(url)
        if 200 <= polled.status < 300:
            raise Fail(f"the refused request created the job: {polled.brief()}")


@check("L-COLL-002", "leader", MUST, "collection with a wrong token is refused",
       refs=AUTH, sends="a valid collection job request with a wrong Collector token",
       expects="4xx; no job is created",
       tags=("collect", "auth", "state"))
async def collect_wrong_auth(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await _collect_bad_auth(ctx, peer, ctx.auth(secrets.token_urlsafe(24)))


@check("L-COLL-003", "leader", MUST, "collection with another task's token is refused",
       refs=AUTH, sends="a collection job request carrying a token the Collector does not "
                        "hold (the Leader-Helper token of another task)",
       expects="4xx", tags=("collect", "auth"))
async def collect_other_token(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    other = await ctx.task()
    await _collect_bad_auth(ctx, peer, ctx.auth(other.collector_auth_token))


@check("L-COLL-004", "leader", MUST, "polling with a wrong token reveals nothing",
       refs=AUTH, sends="a collection job created with the right token, polled with a "
                        "wrong one", expects="4xx and no collection in the body",
       tags=("collect", "auth"))
async def collect_poll_wrong_auth(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await peer.upload(await peer.reports(int(pt.task.min_batch_size)))
    message, body = peer.collection_body()
    ans, url = await peer.start_collection(body, message)
    ctx.expect_success(ans)
    assert url is not None
    polled = await peer.poll(url, ctx.auth(secrets.token_urlsafe(24)))
    ctx.expect_problem(polled)


@check("L-COLL-005", "leader", MUST, "a batch below min_batch_size is not released",
       refs={"dap-19": "4.6.1", "dap-18": "4.6.1", "dap-09": "4.6.5.1.2"},
       sends="min_batch_size - 1 valid reports; a collection job of their interval, polled "
             "for the settle time",
       expects="never a collection: not ready, or 4xx invalidBatchSize",
       tags=("collect", "privacy", "batch-size"))
async def collect_below_min(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx, TaskNeeds(min_batch_size=3))
    mbs = int(pt.task.min_batch_size)
    await peer.upload(await peer.reports(mbs - 1))
    message, body = peer.collection_body()
    ans, url = await peer.start_collection(body, message)
    if ans.status >= 400:
        ctx.expect_problem(ans, "invalidBatchSize")
        return
    assert url is not None
    polled = await peer.poll_until(url, ctx.settle)
    if polled.status >= 400:
        ctx.expect_problem(polled, "invalidBatchSize")
    elif polled.body and polled.status != 202:
        raise Fail(f"released a batch of {mbs - 1} reports below min_batch_size {mbs}")


@check("L-COLL-006", "leader", MUST, "a batch interval not aligned to time_precision is "
       "refused", refs={"dap-09": "4.6.5.1.1"}, profiles=("dap-09",),
       not_applicable="DAP-18/19 intervals count time_precision units: always aligned",
       sends="a time-interval query whose start is half a time_precision past a boundary",
       expects="4xx problem document of type batchInvalid (at creation or when polled)",
       tags=("collect", "malformed", "batch-invalid"))
async def collect_unaligned(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await peer.upload(await peer.reports(int(pt.task.min_batch_size)))
    tp = int(pt.task.time_precision)
    start = (int(time.time()) // tp - 1) * tp + tp // 2
    q = _seconds_query(peer, start, 3 * tp)
    await _expect_collection_refused(ctx, peer, q, "batchInvalid")


def _seconds_query(peer: LeaderPeer, start: int, duration: int) -> object:
    m = peer.task.profile.messages
    return m.Query.time_interval(m.Interval(m.Time(start), m.Duration(duration)))


async def _expect_collection_refused(ctx: Ctx, peer: LeaderPeer, query: object,
                                     token: str) -> None:
    message, body = peer.collection_body(query)
    ans, url = await peer.start_collection(body, message)
    if ans.status >= 400:
        ctx.expect_problem(ans, token)
        return
    assert url is not None
    polled = await peer.poll_until(url, ctx.timeout)
    if polled.status < 400:
        raise Fail(f"expected {token}, got {polled.brief()}")
    ctx.expect_problem(polled, token)


@check("L-COLL-007", "leader", MUST, "a malformed collection request is refused",
       refs={"dap-19": "4.6.1", "dap-18": "4.6.1", "dap-09": "4.6.1"},
       sends="a collection job request whose query names batch mode 0x07",
       expects="4xx problem document of type invalidMessage", tags=("collect", "malformed"))
async def collect_malformed(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    message, body = peer.collection_body()
    ans, _ = await peer.start_collection(b"\x07" + body[1:], message)
    ctx.expect_problem(ans, "invalidMessage")


@check("L-COLL-008", "leader", MUST, "a collection request with a wrong media type is "
       "refused", refs=COLLECT,
       sends="a valid collection job request with Content-Type application/json",
       expects="4xx", tags=("collect", "media-type"))
async def collect_wrong_media(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    message, body = peer.collection_body()
    ans, _ = await peer.start_collection(body, message, content_type="application/json")
    ctx.expect_problem(ans)


@check("L-COLL-009", "leader", MUST, "overlapping batches are refused",
       refs={"dap-19": "4.6.1", "dap-18": "4.6.1", "dap-09": "4.6.5"},
       sends="a collection of [t-1, t+2) (in time_precision; the job is deleted once "
             "done), then one of [t, t+3)",
       expects="the second refused with a problem document of type batchOverlap",
       tags=("collect", "privacy", "batch-overlap"))
async def collect_overlap(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await peer.upload(await peer.reports(int(pt.task.min_batch_size)))
    now_unit = int(time.time()) // int(pt.task.time_precision)
    await peer.collect(peer.query(now_unit - 1, 3))
    await _expect_collection_refused(ctx, peer, peer.query(now_unit, 3), "batchOverlap")


@check("L-COLL-010", "leader", MUST, "a batch queried again gives no second, other result",
       refs={"dap-09": "4.6.5"}, profiles=("dap-09",),
       not_applicable="DAP-18/19 Prio3 batches are collected once; see L-COLL-011",
       sends="a collection of a batch, then another collection job (new ID) of the same "
             "interval and (empty) aggregation parameter, with max_batch_query_count 1",
       expects="the second refused with batchQueriedTooManyTimes, or answered with the "
               "same report count and aggregate (DAP-09 counts distinct aggregation "
               "parameters; Prio3 has one, so the limit itself needs a VDAF such as Poplar1)",
       tags=("collect", "privacy", "query-count"))
async def collect_too_often(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await peer.upload(await peer.reports(int(pt.task.min_batch_size)))
    first = await peer.collect()
    message, body = peer.collection_body()
    ans, url = await peer.start_collection(body, message)
    if ans.status >= 400:
        ctx.expect_problem(ans, "batchQueriedTooManyTimes")
        return
    assert url is not None
    polled = await peer.poll_until(url, ctx.timeout)
    if polled.status >= 400:
        ctx.expect_problem(polled, "batchQueriedTooManyTimes")
        return
    again = await peer.collect()
    if (again.report_count, again.aggregate_result) != (first.report_count,
                                                        first.aggregate_result):
        raise Fail(f"the batch was released twice with different results: "
                   f"{first.report_count}/{first.aggregate_result} then "
                   f"{again.report_count}/{again.aggregate_result}")


@check("L-COLL-011", "leader", MUST, "a repeated collection job request is idempotent",
       refs={"dap-19": "3.2, 4.6.1", "dap-18": "3.2, 4.6.1", "dap-09": "4.6.1"},
       sends="the same collection job request twice (DAP-09: PUT to the same job ID)",
       expects="2xx both times, the same job (DAP-18/19: the same Location), and one result",
       tags=("collect", "idempotent"))
async def collect_idempotent(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await peer.upload(await peer.reports(int(pt.task.min_batch_size)))
    message, body = peer.collection_body()
    job_id = secrets.token_bytes(16)
    a1, url1 = await peer.start_collection(body, message, job_id=job_id)
    a2, url2 = await peer.start_collection(body, message, job_id=job_id)
    ctx.expect_success(a1)
    ctx.expect_success(a2)
    if url1 != url2:
        raise Fail(f"two jobs for one request: {url1} and {url2}")


@check("L-COLL-012", "leader", MUST, "a collection job ID reused with other content is "
       "refused", refs={"dap-09": "4.6.1"}, profiles=("dap-09",),
       not_applicable="after DAP-09 the Leader names collection jobs",
       sends="PUT a collection job, then PUT the same job ID with another interval",
       expects="the second refused with 4xx", tags=("collect", "idempotent", "state"))
async def collect_job_reused(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    job_id = secrets.token_bytes(16)
    message, body = peer.collection_body()
    ctx.expect_success((await peer.start_collection(body, message, job_id=job_id))[0])
    now_unit = int(time.time()) // int(pt.task.time_precision)
    _, other = peer.collection_body(peer.query(now_unit - 2, 4))
    ctx.expect_problem((await peer.start_collection(other, message, job_id=job_id))[0])


@check("L-COLL-013", "leader", MUST, "an unknown collection job is refused",
       refs={"dap-19": "4.6.1", "dap-18": "4.6.1", "dap-09": "4.6.1"},
       sends="a poll of /tasks/{task-id}/collection_jobs/<random ID> with the token",
       expects="4xx", tags=("collect",))
async def collect_unknown_job(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    url = ctx.url("collection_job", pt, collection_job_id=secrets.token_bytes(16))
    ctx.expect_problem(await peer.poll(url))


@check("L-COLL-014", "leader", MUST, "a collection job can be deleted",
       refs={"dap-19": "4.6.3", "dap-18": "4.6.3", "dap-09": "4.6.1"},
       sends="create a collection job (its batch not ready), DELETE it, poll it",
       expects="DELETE answers 2xx; the poll afterwards is not a server error (the Leader "
               "MAY discard the job; what double collection checks need stays: see "
               "L-COLL-009, whose first collection is deleted)",
       tags=("collect", "delete"))
async def collect_delete(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    message, body = peer.collection_body()
    ans, url = await peer.start_collection(body, message)
    ctx.expect_success(ans)
    assert url is not None
    deleted = await ctx.send("DELETE", url, headers=ctx.auth(pt.collector_auth_token))
    ctx.expect_success(deleted)
    await peer.poll(url)  # any answer but a 5xx (ctx.send fails on those)


@check("L-COLL-015", "leader", MUST, "collection of an unknown task is refused",
       refs=ERRORS, sends="a collection job request to /tasks/<random task ID>/...",
       expects="4xx problem document of type unrecognizedTask", tags=("collect", "task"))
async def collect_unknown_task(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    message, body = peer.collection_body()
    tid = secrets.token_bytes(32)
    if peer.flow.collector_chooses_job_id:
        url = ctx.profile.resource_url("collection_job", ctx.target, task_id=tid,
                                       collection_job_id=secrets.token_bytes(16))
    else:
        url = ctx.profile.resource_url("collection_jobs", ctx.target, task_id=tid)
    ans = await ctx.op("collection_job_create", url, body, message,
                       ctx.auth(pt.collector_auth_token))
    ctx.expect_problem(ans, "unrecognizedTask")


@check("L-COLL-016", "leader", MUST, "leader-selected batches: the current batch is "
       "collected", refs={"dap-19": "5.2", "dap-18": "5.2", "dap-09": "4.1.2, 4.6.5.2"},
       batch_mode="leader_selected",
       sends="min_batch_size valid reports to a leader-selected (DAP-09 fixed_size) task "
             "with max_batch_size = min_batch_size; a current-batch collection",
       expects="a collection of min_batch_size reports", tags=("collect", "leader-selected"))
async def collect_leader_selected(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx, TaskNeeds(batch_mode="leader_selected"))
    mbs = int(pt.task.min_batch_size)
    await peer.upload(await peer.reports(mbs))
    result = await peer.collect(peer.flow.query_current_batch(pt.task))
    _expect_count(int(result.report_count), mbs, "current batch")


# -- problem documents --------------------------------------------------------------------


@check("L-PROBLEM-001", "leader", SHOULD, "problem documents carry the task ID",
       refs=ERRORS, sends="an upload with a truncated body to a known task",
       expects="the problem document has a taskid member (unpadded base64url of the "
               "task ID)", tags=("problem", "upload"))
async def problem_taskid(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    _, body = peer.flow.encode_upload(await peer.reports(1))
    ans = await peer.upload_raw(body[:-1])
    ctx.expect_problem(ans, "invalidMessage")
    ctx.expect_taskid(ans, pt)


# -- robustness ----------------------------------------------------------------------------


@check("L-ROBUST-001", "leader", MUST, "an oversized upload is refused, not a crash",
       refs={"dap-19": "3.6", "dap-18": "3.6", "dap-09": "3.2"},
       sends="an upload request of --oversize-bytes (default 64 MiB + 1) of zeros",
       expects="413 Content Too Large (or the connection closed), and the target answers "
               "afterwards", tags=("robustness", "upload"))
async def oversized_upload(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await _oversized(ctx, peer.upload_url(), ctx.profile.request("upload")[0],
                     ctx.profile.media_type_for(ctx.profile.message_names["upload"]), {})


async def _oversized(ctx: Ctx, url: str, method: str, content_type: str,
                     headers: dict[str, str]) -> None:
    body = bytes(ctx.oversize_bytes)
    try:
        ans = await ctx.send(method, url, body, content_type, headers)
    except Fail as exc:
        if "no answer" in str(exc):
            return  # the server hung up: acceptable, if it still answers (checked after)
        raise
    if ans.status == 413:
        return
    if 400 <= ans.status < 500 and ans.status != 413:
        raise Skip(f"the target read the whole body ({ans.brief()}): its limit is above "
                   f"{ctx.oversize_bytes} bytes; give a larger --oversize-bytes")
    raise Fail(f"expected HTTP 413, got {ans.brief()}")


@check("L-ROBUST-002", "leader", MUST, "a truncated request is survived",
       refs={"dap-19": "3", "dap-18": "3", "dap-09": "3"},
       sends="an upload whose Content-Length promises 1000 bytes; 10 are sent and the "
             "connection closed", expects="the target keeps answering",
       tags=("robustness", "upload"))
async def truncated_request(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    ct = ctx.profile.media_type_for(ctx.profile.message_names["upload"])
    head = request_head(ctx.profile.request("upload")[0], peer.upload_url(), ct, 1000)
    await raw_exchange(peer.upload_url(), head, [(bytes(10), 0.0)], close_early=True)


@check("L-ROBUST-003", "leader", MUST, "a slow request does not block others",
       refs={"dap-19": "3", "dap-18": "3", "dap-09": "3"},
       sends="an upload whose body trickles in (one byte every 0.1 s for 5 s); meanwhile, "
             "a valid upload", expects="the valid upload is answered within 4 s, while the "
                                      "slow one is still sending",
       tags=("robustness", "upload"))
async def slow_request(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    ct = ctx.profile.media_type_for(ctx.profile.message_names["upload"])
    head = request_head(ctx.profile.request("upload")[0], peer.upload_url(), ct, 1000)
    reports = await peer.reports(1)  # the HPKE configurations fetched beforehand
    slow = asyncio.create_task(raw_exchange(peer.upload_url(), head,
                                            [(b"\x00", 0.1)] * SLOW_BYTES, close_early=True))
    try:
        await asyncio.sleep(0.2)
        refused = await asyncio.wait_for(peer.upload(reports), SLOW_DEADLINE)
        if refused:
            raise Fail(f"valid report refused: {list(refused.values())}")
        if slow.done():
            raise Skip("the slow request ended before the check's request")
    except TimeoutError:
        raise Fail("a valid upload was not answered while another request trickled in")\
            from None
    finally:
        slow.cancel()
        try:
            await slow
        except (asyncio.CancelledError, OSError):
            pass



# -- extensions, aggregation parameters, optional behaviour ---------------------------------

UNKNOWN_EXTENSION = 0xFFFE  # no draft registers it (this project's is 0xFF01)


async def _expect_discarded(ctx: Ctx, peer: LeaderPeer, bodies: list[bytes],
                            tokens: tuple[str, ...], errors: tuple[ReportError, ...],
                            what: str) -> None:
    """Upload min_batch_size good reports and each bad upload body: the bad one is
    refused as a whole (4xx of one of ``tokens``), refused per report (one of
    ``errors``) or accepted; a collection then counts only the good reports."""
    mbs = int(peer.task.min_batch_size)
    await peer.upload(await peer.reports(mbs))
    for body in bodies:
        ans = await peer.upload_raw(body)
        if ans.status >= 400:
            ctx.expect_problem(ans, any_of=tokens)
            continue
        try:
            refused = peer.flow.decode_upload_errors(ans.body)
        except Exception as exc:  # noqa: BLE001 - decode errors
            raise Fail(f"upload answer does not decode: {exc}") from None
        for err in refused.values():
            if err not in errors:
                raise Fail(f"{what}: refused with {err.name.lower()}, expected one of "
                           f"{', '.join(e.name.lower() for e in errors)}")
    _expect_count(int((await peer.collect()).report_count), mbs, what)


@check("L-UPLOAD-017", "leader", MUST, "a report with an unknown extension is discarded",
       refs={"dap-19": "4.4.2.2, 4.5.3.4 (#789)", "dap-18": "4.4.2.2"}, profiles=DAP18,
       not_applicable="DAP-09's upload extensions are inside the encrypted shares",
       sends="min_batch_size valid reports and one with a public report extension of "
             "unregistered type 0xFFFE; a collection",
       expects="the report refused (DAP-18: the upload aborted with unsupportedExtension, "
               "or the report refused; DAP-19: unsupported_extension for the report) or "
               "accepted, and never counted", tags=("upload", "extension", "collect"))
async def upload_unknown_extension(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    leader, helper = await peer.configs()
    t = peer.flow.report_time(pt.task, time.time())
    bad = peer.flow.generate_report(pt.task, 1, time=t, leader_hpke_config=leader,
                                    helper_hpke_config=helper,
                                    extensions=[(UNKNOWN_EXTENSION, b"")])
    _, body = peer.flow.encode_upload([bad])
    await _expect_discarded(ctx, peer, [body], ("unsupportedExtension",),
                            (ReportError.UNSUPPORTED_EXTENSION, ReportError.INVALID_MESSAGE),
                            "unknown extension")


@check("L-UPLOAD-018", "leader", MUST, "a report with extensions out of order is discarded",
       refs={"dap-19": "4.4.3, 4.5.3.4", "dap-18": "4.4.3, 4.5.3.4"}, profiles=DAP18,
       not_applicable="DAP-09's upload extensions are inside the encrypted shares",
       sends="min_batch_size valid reports and one whose public extensions 0xFFF1, 0xFFF0 "
             "are not in increasing order; a collection",
       expects="the upload refused with invalidExtension/invalidMessage, or the report "
               "refused (invalid_message), or accepted; never counted",
       tags=("upload", "extension", "malformed", "collect"))
async def upload_unsorted_extensions(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    leader, helper = await peer.configs()
    t = peer.flow.report_time(pt.task, time.time())
    report = peer.flow.generate_report(pt.task, 1, time=t, leader_hpke_config=leader,
                                       helper_hpke_config=helper,
                                       extensions=[(0xFFF0, b""), (0xFFF1, b"")])
    _, body = peer.flow.encode_upload([report])
    # ReportMetadata: report_id (16), time (8), extensions length (2), then two
    # extensions of 4 bytes each (type, empty data): swap them.
    at = 16 + 8 + 2
    if body[at:at + 2] != b"\xff\xf0" or body[at + 4:at + 6] != b"\xff\xf1":
        raise Fail("the suite's report does not have the expected layout")
    swapped = body[:at] + body[at + 4:at + 8] + body[at:at + 4] + body[at + 8:]
    await _expect_discarded(ctx, peer, [swapped],
                            ("invalidExtension", "invalidMessage", "unsupportedExtension"),
                            (ReportError.INVALID_MESSAGE, ReportError.UNSUPPORTED_EXTENSION),
                            "unsorted extensions")


@check("L-UPLOAD-019", "leader", MAY, "a report into a collected batch is refused",
       refs={"dap-19": "4.4.2.2", "dap-18": "4.4.2.2", "dap-09": "4.4.2"},
       sends="a collection of the current interval, then a new report of now",
       expects="the report refused with batch_collected or report_replayed (DAP-09: "
               "reportRejected); the draft requires that it is discarded, and allows "
               "saying so", tags=("upload", "collect", "report-error"))
async def upload_into_collected(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await peer.upload(await peer.reports(int(pt.task.min_batch_size)))
    await peer.collect()
    late = await peer.reports(1)
    refused = await peer.upload(late)
    err = refused.get(peer.flow.report_id(late[0]))
    if err not in (ReportError.BATCH_COLLECTED, ReportError.REPORT_REPLAYED,
                   ReportError.REPORT_DROPPED):
        raise Fail(f"expected batch_collected/report_replayed, got "
                   f"{err.name.lower() if err else 'accepted'}")


@check("L-COLL-017", "leader", MUST, "an invalid aggregation parameter is refused",
       refs={"dap-19": "4.3, 4.6.1", "dap-18": "4.3, 4.6.1", "dap-09": "4.6.1"},
       sends="a collection job request with aggregation parameter 0x01 (Prio3 takes none)",
       expects="4xx of type invalidAggregationParameter (DAP-09: invalidMessage), at "
               "creation or when polled", tags=("collect", "malformed", "agg-param"))
async def collect_bad_agg_param(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    await peer.upload(await peer.reports(int(pt.task.min_batch_size)))
    message, body = peer.collection_body(agg_param=b"\x01")
    ans, url = await peer.start_collection(body, message)
    if ans.status >= 400:
        ctx.expect_problem(ans, "invalidAggregationParameter")
        return
    assert url is not None
    polled = await peer.poll_until(url, ctx.timeout)
    ctx.expect_problem(polled, "invalidAggregationParameter")


@check("L-COLL-018", "leader", MUST, "an unknown collection job extension is refused",
       refs={"dap-19": "4.6.1, 4.6.2", "dap-18": "4.6.1, 4.6.2"}, profiles=DAP18,
       not_applicable="DAP-09 collection requests have no extensions",
       sends="a collection job request with an extension of unregistered type 0xFFFE",
       expects="4xx problem document of type unsupportedExtension (at creation or when "
               "polled)", tags=("collect", "extension"))
async def collect_unknown_extension(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx)
    m = pt.task.profile.messages
    req = m.CollectionJobReq(peer.query(), b"",
                             (m.CollectionJobExtension(UNKNOWN_EXTENSION, b""),))
    ans, url = await peer.start_collection(bytes(req.encode()), "CollectionJobReq")
    if ans.status >= 400:
        ctx.expect_problem(ans, "unsupportedExtension")
        return
    assert url is not None
    ctx.expect_problem(await peer.poll_until(url, ctx.timeout), "unsupportedExtension")


@check("L-HPKE-004", "leader", MAY, "hpke_config without a task ID",
       refs={"dap-09": "4.4.1"}, profiles=("dap-09",),
       not_applicable="the hpke_config resource has no task ID after DAP-09",
       sends="GET {leader}/hpke_config without task_id",
       expects="200 with an HpkeConfigList (any media type: the request names no task, so "
               "no draft), or 4xx problem document of type missingTaskID",
       tags=("hpke",))
async def hpke_missing_task_id(ctx: Ctx) -> None:
    ans = await ctx.send("GET", ctx.profile.resource_url("hpke_config", ctx.target))
    from ppm_reference.dap.common import HpkeConfigList

    if ans.status >= 400:
        ctx.expect_problem(ans, "missingTaskID")
        return
    # An Aggregator that serves several drafts cannot tell which one a request without
    # a task ID speaks: its media type is not checked (ours answers DAP-19's).
    ctx.expect_success(ans, 200)
    try:
        HpkeConfigList.decode(ans.body)
    except Exception as exc:  # noqa: BLE001 - decode errors
        raise Fail(f"HpkeConfigList does not decode: {exc}") from None


@check("L-COLL-019", "leader", MUST, "leader-selected batches: a batch below min_batch_size "
       "is not released", refs={"dap-19": "4.6.1, 5.2", "dap-18": "4.6.1, 5.2",
                                "dap-09": "4.6.5.2.2"},
       batch_mode="leader_selected",
       sends="min_batch_size - 1 valid reports to a leader-selected (DAP-09 fixed_size) "
             "task; a current-batch collection job, polled for the settle time",
       expects="never a collection: not ready, or 4xx invalidBatchSize",
       tags=("collect", "privacy", "batch-size", "leader-selected"))
async def collect_leader_selected_below_min(ctx: Ctx) -> None:
    pt, peer = await _peer(ctx, TaskNeeds(batch_mode="leader_selected", min_batch_size=3))
    mbs = int(pt.task.min_batch_size)
    await peer.upload(await peer.reports(mbs - 1))
    message, body = peer.collection_body(peer.flow.query_current_batch(pt.task))
    ans, url = await peer.start_collection(body, message)
    if ans.status >= 400:
        ctx.expect_problem(ans, "invalidBatchSize")
        return
    assert url is not None
    polled = await peer.poll_until(url, ctx.settle)
    if polled.status >= 400:
        ctx.expect_problem(polled, "invalidBatchSize")
    elif polled.body and polled.status != 202:
        raise Fail(f"released a batch of {mbs - 1} reports below min_batch_size {mbs}")


async def garbage_request(ctx: Ctx) -> None:
    """Bytes that are not HTTP, then a request line with an absurd header: each answered
    with a 4xx or a closed connection, never a 5xx; the target keeps answering."""
    from urllib.parse import urlsplit

    host = urlsplit(ctx.target).netloc
    for head in (b"\x16\x03\x01\x00\xff not http at all\r\n\r\n",
                 f"GET /hpke_config HTTP/1.1\r\nHost: {host}\r\nX-Long: {'a' * 70000}"
                 "\r\n\r\n".encode()):
        answer = await raw_exchange(ctx.target, head, [], read_timeout=3.0)
        status_line = answer.split(b"\r\n", 1)[0]
        parts = status_line.split(b" ")
        if len(parts) >= 2 and parts[1][:1] == b"5":
            raise Fail(f"answered {status_line.decode(errors='replace')}")


@check("L-ROBUST-004", "leader", MUST, "a malformed HTTP request is survived",
       refs={"dap-19": "3", "dap-18": "3", "dap-09": "3"},
       sends="bytes that are not HTTP; a request with a 70000-byte header",
       expects="4xx or the connection closed (never 5xx); the target keeps answering",
       tags=("robustness",))
async def leader_garbage(ctx: Ctx) -> None:
    await garbage_request(ctx)
