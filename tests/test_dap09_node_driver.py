"""The divviup-ts DAP-09 client (`@divviup/dap` 0.9.1) against a fake DAP-09 Leader/Helper.

tests/dap09_node.py runs tests/interop_node_dap/dap_upload.mjs, which uploads
measurements with the package's own `Task.sendMeasurement`. Here the Leader and the
Helper are two small aiohttp apps on 127.0.0.1 (free ports) that serve
`GET /hpke_config` (an HpkeConfigList of ours, `application/dap-hpke-config-list`) and
accept `PUT /tasks/{task_id}/reports` with 200 (as DAP-09 Leaders answer: the
dap-09 profile), recording every request. The tests check,
for Prio3Count, Prio3Sum, Prio3Histogram and Prio3SumVec:

* the requests: method, path, query (`task_id` on hpke_config), Accept/Content-Type
  headers, no authentication header, one hpke_config fetch per Aggregator per run;
* each body decodes as our `dap.profiles.dap09.messages.Report`; our code decrypts both input shares
  (`dap.profiles.dap09.client.decrypt_input_share`) with the fake Aggregators' keys; the VDAF-08
  input shares verify (verify_init, verifier_shares_to_message, verify_next for both
  Aggregators) and aggregate to the exact sum of the measurements;
* report times: the client rounds them down to `time_precision`;

and how the client behaves around that: a Leader mounted under a path, the exact
Content-Type it demands of hpke_config, the `outdatedConfig` retry after a key rotation,
and upload errors (problem documents with and without `taskid`, a plain 500).

Skips with a visible reason when node or npm is missing or npm cannot reach the registry.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from ppm_reference.dap.hpke import HpkeKeypair, generate_keypair
from ppm_reference.dap.profiles.dap09 import DAP_09
from ppm_reference.dap.profiles.dap09.client import decrypt_input_share, report_share_for
from ppm_reference.dap.profiles.dap09.messages import HpkeConfigList, QueryType, Report, Role
from ppm_reference.dap.profiles.dap09.task import Task09
from ppm_reference.vdaf.prio3 import (
    Prio3,
    Prio3CountV08,
    Prio3HistogramV08,
    Prio3SumV08,
    Prio3SumVecV08,
)
from tests.dap09_node import PACKAGE_VERSION, install_dap_client, run_dap_upload, task_id_b64

HPKE_CONFIG_LIST = "application/dap-hpke-config-list"
REPORT = "application/dap-report"
PROBLEM = "application/problem+json"
DAP_ERROR = "urn:ietf:params:ppm:dap:error:"
SHARES = 2
AUTH_HEADERS = ("authorization", "dap-auth-token")
AnyPrio3 = Prio3[Any, Any]


def test_media_types_are_the_profiles() -> None:
    assert DAP_09.media_type_for("HpkeConfigList") == HPKE_CONFIG_LIST
    assert DAP_09.media_type_for("Report") == REPORT


# ---------------------------------------------------------------------------------------
# The fake Aggregators.


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes


# An upload answer: (status, content type, body).
Answer = tuple[int, str | None, bytes]


@dataclass
class FakeAggregator:
    """One Aggregator of a DAP-09 task, as far as a Client sees it.

    ``upload_answers`` are used in turn for the PUTs (then 200); an answer may be a
    callable (run on the aggregator before answering, e.g. to rotate its key) returning
    one. ``hpke_content_type`` overrides the Content-Type of the hpke_config answer."""

    config_id: int
    prefix: str = ""
    hpke_content_type: str = HPKE_CONFIG_LIST
    upload_answers: list[Answer | Callable[[FakeAggregator], Answer]] = field(
        default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    keypairs: list[HpkeKeypair] = field(default_factory=list)  # current key first
    origin: str = ""  # http://127.0.0.1:port, once started

    def __post_init__(self) -> None:
        self.keypairs.append(generate_keypair(self.config_id))

    def rotate(self, config_id: int) -> None:
        self.keypairs.insert(0, generate_keypair(config_id))

    def of(self, method: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method]

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.requests.append(Recorded(
            request.method, request.path,
            {k: request.query.getall(k) for k in request.query},
            {k.lower(): v for k, v in request.headers.items()}, body))
        if request.method == "GET" and request.path == f"{self.prefix}/hpke_config":
            configs = HpkeConfigList([self.keypairs[0].config]).encode()
            return web.Response(status=200, body=configs,
                                headers={"Content-Type": self.hpke_content_type})
        if request.method == "PUT" and request.path.startswith(f"{self.prefix}/tasks/") \
                and request.path.endswith("/reports"):
            answer: Any = self.upload_answers.pop(0) if self.upload_answers else (200, None, b"")
            if callable(answer):
                answer = answer(self)
            status, content_type, payload = answer
            headers = {"Content-Type": content_type} if content_type else {}
            return web.Response(status=status, body=payload, headers=headers)
        return web.Response(status=404, text="not a route of the fake")


def problem(task_id: bytes | None, short_type: str, status: int = 400) -> Answer:
    doc: dict[str, Any] = {"type": DAP_ERROR + short_type, "title": f"{short_type} (fake)",
                           "status": status, "detail": "from the fake Leader"}
    if task_id is not None:
        doc["taskid"] = task_id_b64(task_id)
    return status, PROBLEM, json.dumps(doc).encode()


async def _start(agg: FakeAggregator) -> web.AppRunner:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", agg.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    agg.origin = f"http://{host}:{port}"
    return runner


def upload(leader: FakeAggregator, helper: FakeAggregator, spec: dict[str, Any], *,
           leader_path: str | None = None, helper_path: str | None = None) -> dict[str, Any]:
    """Start both fakes, run the driver on ``spec`` with their URLs (origin + the given
    path, by default the fake's prefix), stop them; the driver's answer."""

    async def main() -> dict[str, Any]:
        runners = [await _start(leader), await _start(helper)]
        try:
            full = {"leader": leader.origin + (leader.prefix if leader_path is None
                                               else leader_path),
                    "helper": helper.origin + (helper.prefix if helper_path is None
                                               else helper_path),
                    **spec}
            return await asyncio.to_thread(run_dap_upload, full)
        finally:
            for runner in runners:
                await runner.cleanup()

    return asyncio.run(main())


@pytest.fixture(scope="module")
def dap_client(request: pytest.FixtureRequest) -> None:
    install_dap_client(request=request)


# ---------------------------------------------------------------------------------------
# The four VDAFs.


@dataclass
class Case:
    ours: AnyPrio3
    js: dict[str, Any]
    measurements: list[Any]
    exact: Any


def _cases() -> dict[str, Case]:
    return {
        "Prio3Count": Case(Prio3CountV08(SHARES), {"type": "Prio3Count"},
                           [1, 0, 1, 1, 0], 3),
        "Prio3Sum": Case(Prio3SumV08(SHARES, 8), {"type": "Prio3Sum", "bits": 8},
                         [0, 255, 17, 100], 372),
        "Prio3Histogram": Case(
            Prio3HistogramV08(SHARES, 5, 2),
            {"type": "Prio3Histogram", "length": 5, "chunk_length": 2},
            [0, 4, 4, 2, 1], [1, 1, 1, 0, 2]),
        "Prio3SumVec": Case(  # 12 measurement elements in chunks of 5: a partial last chunk
            Prio3SumVecV08(SHARES, 4, 3, 5),
            {"type": "Prio3SumVec", "length": 4, "bits": 3, "chunk_length": 5},
            [[0, 7, 1, 2], [7, 7, 0, 5], [3, 0, 6, 1]], [10, 14, 7, 8]),
    }


CASES = _cases()


def _task(vdaf: AnyPrio3, task_id: bytes, precision: int) -> Task09:
    return Task09.for_vdaf(vdaf, task_id=task_id,
                           leader_aggregator_endpoint="http://leader.invalid/",
                           helper_aggregator_endpoint="http://helper.invalid/",
                           query_type=QueryType.TIME_INTERVAL, time_precision=precision,
                           min_batch_size=1, profile=DAP_09)


def _run_vdaf(vdaf: AnyPrio3, ctx: bytes, verify_key: bytes, nonce: bytes,
              public_share: bytes, input_shares: list[bytes]) -> list[Any]:
    """Both Aggregators' VDAF-08 preparation of one report: their output shares."""
    public = vdaf.decode_public_share(public_share)
    states, verifier_shares = [], []
    for agg_id, encoded in enumerate(input_shares):
        share = vdaf.decode_input_share(agg_id, encoded)
        state, verifier_share = vdaf.verify_init(verify_key, ctx, agg_id, None, nonce,
                                                 public, share)
        states.append(state)
        verifier_shares.append(vdaf.decode_verifier_share(
            state, vdaf.encode_verifier_share(verifier_share)))
    message = vdaf.verifier_shares_to_message(ctx, None, verifier_shares)
    return [vdaf.verify_next(ctx, s, vdaf.decode_verifier_message(
        s, vdaf.encode_verifier_message(message))) for s in states]


def check_uploads(case: Case, task: Task09, leader: FakeAggregator, helper: FakeAggregator,
                  puts: list[Recorded]) -> list[Report]:
    """Every PUT is a well-formed upload of a report of ``task`` whose input shares
    decrypt with our code and, through VDAF-08, sum to ``case.exact``."""
    tid = task_id_b64(task.task_id)
    vdaf = case.ours
    ctx = task.vdaf_ctx()
    verify_key = bytes(range(vdaf.VERIFY_KEY_SIZE))
    agg_shares = [vdaf.agg_init(None) for _ in range(SHARES)]
    reports = []
    for put in puts:
        assert put.path == f"{leader.prefix}/tasks/{tid}/reports"
        assert put.query == {}
        assert put.headers["content-type"] == REPORT
        assert not [h for h in AUTH_HEADERS if h in put.headers]
        report = Report.decode(put.body)
        assert report.encode() == put.body
        reports.append(report)
        assert report.leader_encrypted_input_share.config_id == leader.keypairs[0].config.id
        assert report.helper_encrypted_input_share.config_id == helper.keypairs[0].config.id
        payloads = []
        for role, agg in ((Role.LEADER, leader), (Role.HELPER, helper)):
            plain = decrypt_input_share(task, agg.keypairs, role, report_share_for(report, role))
            assert list(plain.extensions) == []  # the client sends no extensions
            payloads.append(plain.payload)
        out_shares = _run_vdaf(vdaf, ctx, verify_key, bytes(report.report_metadata.report_id),
                               report.public_share, payloads)
        for agg_id in range(SHARES):
            agg_shares[agg_id] = vdaf.agg_update(None, agg_shares[agg_id], out_shares[agg_id])
    ids = [bytes(r.report_metadata.report_id) for r in reports]
    assert len(set(ids)) == len(ids)
    assert vdaf.unshard(None, agg_shares, len(reports)) == case.exact
    return reports


def check_hpke_config_fetches(agg: FakeAggregator, task_id: bytes, count: int = 1) -> None:
    gets = agg.of("GET")
    assert len(gets) == count, [(r.method, r.path) for r in agg.requests]
    for get in gets:
        assert get.path == f"{agg.prefix}/hpke_config"
        assert get.query == {"task_id": [task_id_b64(task_id)]}
        assert get.headers["accept"] == HPKE_CONFIG_LIST
        assert not [h for h in AUTH_HEADERS if h in get.headers]
        assert get.body == b""


def _spec(task_id: bytes, precision: int, case: Case, **extra: Any) -> dict[str, Any]:
    return {"task_id": task_id_b64(task_id), "time_precision": precision, "vdaf": case.js,
            "measurements": case.measurements, **extra}


def _task_id(label: str) -> bytes:
    return label.encode().ljust(32, b"\xa5")[:32]


# ---------------------------------------------------------------------------------------
# Uploads of every VDAF.


@pytest.mark.parametrize("name", list(CASES))
def test_upload_every_vdaf(dap_client: None, name: str) -> None:
    case = CASES[name]
    task_id = _task_id(name)
    precision = 3600
    leader, helper = FakeAggregator(config_id=7), FakeAggregator(config_id=9)
    before = int(time.time())
    out = upload(leader, helper, _spec(task_id, precision, case))
    after = int(time.time())
    assert out == {"uploaded": len(case.measurements), "package": f"@divviup/dap@{PACKAGE_VERSION}",
                   "protocol": "dap-09"}, out.get("stderr")

    check_hpke_config_fetches(leader, task_id)
    check_hpke_config_fetches(helper, task_id)
    assert helper.of("PUT") == []
    puts = leader.of("PUT")
    assert len(puts) == len(case.measurements)
    assert len(leader.requests) == 1 + len(puts)
    reports = check_uploads(case, _task(case.ours, task_id, precision), leader, helper, puts)

    # Report times: "now", rounded down to time_precision.
    for report in reports:
        t = int(report.report_metadata.time)
        assert t % precision == 0
        assert before - before % precision <= t <= after - after % precision


@pytest.mark.parametrize("precision", [1, 7, 60, 86400])
def test_report_time_is_rounded_down(dap_client: None, precision: int) -> None:
    case = CASES["Prio3Count"]
    task_id = _task_id(f"time-{precision}")
    given = 1_700_000_123
    leader, helper = FakeAggregator(config_id=1), FakeAggregator(config_id=2)
    out = upload(leader, helper, _spec(task_id, precision, case, time=given))
    assert out["uploaded"] == len(case.measurements), out
    reports = check_uploads(case, _task(case.ours, task_id, precision), leader, helper,
                            leader.of("PUT"))
    assert {int(r.report_metadata.time) for r in reports} == {given - given % precision}


# ---------------------------------------------------------------------------------------
# How the client treats URLs, media types and errors.


@pytest.mark.parametrize("leader_prefix", ["/dap", "/dap/"])
def test_aggregator_url_with_a_path(dap_client: None, leader_prefix: str) -> None:
    """A URL with a path is a directory: `hpke_config` and `tasks/...` go under it,
    with or without a trailing slash."""
    case = CASES["Prio3Sum"]
    task_id = _task_id("prefix")
    leader = FakeAggregator(config_id=3, prefix="/dap")
    helper = FakeAggregator(config_id=4, prefix="/helper/v9")
    out = upload(leader, helper, _spec(task_id, 60, case), leader_path=leader_prefix)
    assert out["uploaded"] == len(case.measurements), out
    check_hpke_config_fetches(leader, task_id)
    check_hpke_config_fetches(helper, task_id)
    check_uploads(case, _task(case.ours, task_id, 60), leader, helper, leader.of("PUT"))


@pytest.mark.parametrize(("content_type", "accepted"), [
    (HPKE_CONFIG_LIST, True),
    ("Application/DAP-HPKE-Config-List", True),  # fetch lower-cases type and subtype
    (HPKE_CONFIG_LIST + "; charset=utf-8", False),  # any parameter is refused
    ("application/octet-stream", False),
])
def test_hpke_config_content_type(dap_client: None, content_type: str, accepted: bool) -> None:
    case = CASES["Prio3Count"]
    task_id = _task_id("content-type")
    leader = FakeAggregator(config_id=5, hpke_content_type=content_type)
    helper = FakeAggregator(config_id=6)
    out = upload(leader, helper, _spec(task_id, 60, case))
    if accepted:
        assert out["uploaded"] == len(case.measurements), out
    else:
        assert out["uploaded"] == 0
        assert out["error"] == (f"Error: expected {HPKE_CONFIG_LIST} content-type header, "
                                "aborting")
        assert leader.of("PUT") == []


def test_outdated_config_refetches_and_resends(dap_client: None) -> None:
    """On an `outdatedConfig` problem the client fetches both HPKE configs again and
    sends a fresh report of the same measurement, once. The fresh report is made
    without the caller's `timestamp` option: its time is "now"."""
    case = CASES["Prio3Histogram"]
    task_id = _task_id("outdated")
    precision = 60
    given = 1_600_000_000

    def rotate_and_refuse(agg: FakeAggregator) -> Answer:
        agg.rotate(config_id=8)
        return problem(task_id, "outdatedConfig")

    leader = FakeAggregator(config_id=7, upload_answers=[rotate_and_refuse])
    helper = FakeAggregator(config_id=9)
    out = upload(leader, helper, _spec(task_id, precision, case, time=given))
    assert out["uploaded"] == len(case.measurements), out

    check_hpke_config_fetches(leader, task_id, count=2)
    check_hpke_config_fetches(helper, task_id, count=2)
    puts = leader.of("PUT")
    assert len(puts) == len(case.measurements) + 1
    task = _task(case.ours, task_id, precision)
    refused = Report.decode(puts[0].body)
    assert refused.leader_encrypted_input_share.config_id == 7
    # The resent report and all later ones are sealed to the new key; together they
    # carry every measurement once.
    reports = check_uploads(case, task, leader, helper, puts[1:])
    assert bytes(refused.report_metadata.report_id) not in {
        bytes(r.report_metadata.report_id) for r in reports}
    times = [int(r.report_metadata.time) for r in reports]
    rounded = given - given % precision
    assert int(refused.report_metadata.time) == rounded
    assert times[0] != rounded and times[0] % precision == 0  # the retry dropped `timestamp`
    assert set(times[1:]) == {rounded}


def test_outdated_config_is_retried_once_only(dap_client: None) -> None:
    case = CASES["Prio3Count"]
    task_id = _task_id("outdated-twice")
    leader = FakeAggregator(config_id=1, upload_answers=[
        problem(task_id, "outdatedConfig"), problem(task_id, "outdatedConfig")])
    helper = FakeAggregator(config_id=2)
    out = upload(leader, helper, _spec(task_id, 60, case))
    assert out["uploaded"] == 0
    assert out["dap_error"]["short_type"] == "outdatedConfig"
    assert len(leader.of("PUT")) == 2


@pytest.mark.parametrize("failing", [0, 2])
def test_upload_error_with_problem_document(dap_client: None, failing: int) -> None:
    case = CASES["Prio3Count"]
    task_id = _task_id("rejected")
    # The accepted uploads answer 200 (DAP-09 Leaders) and 201 (the draft's text).
    accepted: list[Any] = [(200, None, b""), (201, None, b"")]
    answers: list[Any] = accepted[:failing] + [problem(task_id, "reportRejected")]
    leader = FakeAggregator(config_id=1, upload_answers=answers)
    helper = FakeAggregator(config_id=2)
    out = upload(leader, helper, _spec(task_id, 60, case))
    assert out["uploaded"] == failing  # stops at the first failure
    assert out["error"] == "Error: reportRejected: reportRejected (fake)"
    assert out["dap_error"] == {
        "type": DAP_ERROR + "reportRejected", "short_type": "reportRejected",
        "title": "reportRejected (fake)", "status": 400, "detail": "from the fake Leader",
        "context": "report upload failed"}
    assert len(leader.of("PUT")) == failing + 1


def test_problem_document_without_taskid_breaks_the_client_error(dap_client: None) -> None:
    """The package builds its DAPError with `new TaskId(problem.taskid)`: a problem
    document without `taskid` turns into a TypeError instead (a Leader should always
    send `taskid` in problem documents about a task)."""
    case = CASES["Prio3Count"]
    task_id = _task_id("no-taskid")
    leader = FakeAggregator(config_id=1, upload_answers=[problem(None, "outdatedConfig")])
    helper = FakeAggregator(config_id=2)
    out = upload(leader, helper, _spec(task_id, 60, case))
    assert out["uploaded"] == 0
    assert out["error"].startswith("TypeError:"), out["error"]
    assert "dap_error" not in out
    assert len(leader.of("PUT")) == 1  # and so no outdatedConfig retry either


@pytest.mark.parametrize(("status", "content_type"), [(500, "text/plain"), (400, None)])
def test_upload_error_without_problem_document(dap_client: None, status: int,
                                               content_type: str | None) -> None:
    case = CASES["Prio3Count"]
    task_id = _task_id("plain-error")
    leader = FakeAggregator(config_id=1, upload_answers=[(status, content_type, b"no")])
    helper = FakeAggregator(config_id=2)
    out = upload(leader, helper, _spec(task_id, 60, case))
    assert out["uploaded"] == 0
    assert out["error"] == "Error: report upload failed"


def test_hpke_config_error(dap_client: None) -> None:
    case = CASES["Prio3Count"]
    task_id = _task_id("hpke-404")
    leader = FakeAggregator(config_id=1)
    helper = FakeAggregator(config_id=2, prefix="/elsewhere")
    # The helper's URL without its prefix: the fake answers 404 to /hpke_config.
    out = upload(leader, helper, _spec(task_id, 60, case), helper_path="")
    assert out["uploaded"] == 0
    assert out["error"] == "Error: fetchKeyConfiguration received a 404 response, aborting"
    assert leader.of("PUT") == []
