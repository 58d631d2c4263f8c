"""Every error path of DAP-18 that the Leader and Helper implement, over real HTTP.

Each test asserts the draft's error (a per-report `ReportError` or a problem document
whose type is `urn:ietf:params:ppm:dap:error:<token>` with a `taskid` member) AND that
the stored state of both Aggregators did not change (`unchanged`: table counts and the
rows that matter -- reports, jobs, batch buckets, replay records, collected batches).
Hand-crafted requests are sent with aiohttp directly.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ppm_reference.dap.common import (
    BatchMode,
    Duration,
    Extension,
    HpkeCiphertext,
    HpkeConfig,
    HpkeConfigList,
    Interval,
    ReportError,
    ReportID,
    Role,
    Time,
    VerifyRespType,
    batch_checksum,
)
from ppm_reference.dap.hpke import generate_keypair, seal_input_share
from ppm_reference.dap.problems import PROBLEM_MEDIA_TYPE
from ppm_reference.dap.profiles.dap18.client import generate_report, input_share_aad, shard
from ppm_reference.dap.profiles.dap18.messages import (
    AggregateShareReq,
    AggregationJobContinueReq,
    AggregationJobExtension,
    AggregationJobInitReq,
    AggregationJobResp,
    BatchSelector,
    CollectionJobExtension,
    CollectionJobReq,
    PlaintextInputShare,
    Query,
    Report,
    ReportMetadata,
    ReportShare,
    UploadErrors,
    UploadRequest,
    VerifyContinue,
    VerifyInit,
)
from ppm_reference.dap.provision import ProvisionedTask
from ppm_reference.vdaf.ping_pong import Continued, ping_pong_leader_init
from ppm_reference.vdaf.prio3 import Prio3Histogram, Prio3Sum
from tests.dap_harness import AggregatorPair

URN = "urn:ietf:params:ppm:dap:error:"
PRECISION = 60
ADMIN = "admin-secret"


class OffsetClock:
    """Real-speed clock from a chosen start; `advance` jumps it forward."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.t0 = time.monotonic()

    def __call__(self) -> float:
        return self.start + (time.monotonic() - self.t0)

    def advance(self, seconds: float) -> None:
        self.start += seconds


def new_clock() -> OffsetClock:
    """A clock a second into a time_precision bucket, so that "now" in task units does
    not change during a test."""
    return OffsetClock(float((int(time.time()) // PRECISION + 1) * PRECISION + 1))


Mangle = Callable[[bytes, bytes], tuple[bytes, bytes]]


def flip_helper_seed(leader: bytes, helper: bytes) -> tuple[bytes, bytes]:
    """The Helper's Prio3 input share is seeds: a changed bit decodes but does not verify."""
    return leader, bytes([helper[0] ^ 1]) + helper[1:]


def truncate_leader(leader: bytes, helper: bytes) -> tuple[bytes, bytes]:
    return leader[:-1], helper


def truncate_helper(leader: bytes, helper: bytes) -> tuple[bytes, bytes]:
    return leader, helper[:-1]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(bytes(data)).rstrip(b"=").decode()


# -- looking at stored state ----------------------------------------------------------------


def sql(state: Any, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with state.datastore.transaction() as tx:
        return [tuple(r) for r in tx.c.execute(query, args).fetchall()]


def count(state: Any, query: str, *args: Any) -> int:
    return int(sql(state, query, *args)[0][0])


TABLES = ("tasks", "hpke_keys", "client_reports", "aggregation_jobs", "report_aggregations",
          "aggregated_reports", "batch_buckets", "collected_intervals", "collected_buckets",
          "collection_jobs", "aggregate_share_jobs", "leader_batches")
ROWS = {
    "client_reports": "report_id, time, state, aggregation_job_id, error",
    "aggregation_jobs": "job_id, role, state, step, agg_param, batch_id, response IS NULL",
    "report_aggregations": "job_id, ord, report_id, state, error",
    "aggregated_reports": "report_id",
    "batch_buckets": "bucket, agg_param, agg_share, report_count, checksum",
    "collected_intervals": "start, end_",
    "collected_buckets": "bucket",
    "collection_jobs": "job_id, request, state, batch_id, response, error",
    "aggregate_share_jobs": "share_id, request, state, response",
    "leader_batches": "batch_id, assigned, state",
}


def snapshot(state: Any) -> dict[str, Any]:
    out: dict[str, Any] = {t: count(state, f"SELECT COUNT(*) FROM {t}") for t in TABLES}
    for table, cols in ROWS.items():
        out[table + "_rows"] = sorted(sql(state, f"SELECT {cols} FROM {table}"), key=repr)
    return out


@contextlib.contextmanager
def unchanged(pair: AggregatorPair) -> Iterator[None]:
    """Neither Aggregator's stored state changes inside the block."""
    before = snapshot(pair.leader_state), snapshot(pair.helper_state)
    yield
    after = snapshot(pair.leader_state), snapshot(pair.helper_state)
    for name, b, a in (("leader", before[0], after[0]), ("helper", before[1], after[1])):
        changed = {k: (b[k], a[k]) for k in b if b[k] != a[k]}
        assert not changed, f"{name} state changed: {changed}"


async def wait_for(predicate: Callable[[], bool], timeout: float = 20.0,
                   what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def settle(pair: AggregatorPair) -> None:
    """Wait until neither Aggregator has work in flight (uploaded reports not yet
    aggregated, active jobs, aggregate shares being computed)."""
    def quiet() -> bool:
        return (count(pair.leader_state, "SELECT COUNT(*) FROM client_reports WHERE state IN "
                      "('new', 'in_job')") == 0
                and count(pair.leader_state, "SELECT COUNT(*) FROM aggregation_jobs WHERE "
                          "state='active'") == 0
                and count(pair.leader_state, "SELECT COUNT(*) FROM collection_jobs WHERE "
                          "state='collecting'") == 0
                and count(pair.helper_state, "SELECT COUNT(*) FROM aggregation_jobs WHERE "
                          "state='active' AND response IS NULL") == 0
                and count(pair.helper_state, "SELECT COUNT(*) FROM aggregate_share_jobs "
                          "WHERE state='start'") == 0)
    await wait_for(quiet, what="the Aggregators to settle")


# -- HTTP -----------------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def problem(self) -> dict[str, Any]:
        assert self.headers.get("Content-Type", "").startswith(PROBLEM_MEDIA_TYPE), self
        doc = json.loads(self.body)
        assert isinstance(doc, dict)
        return doc


class Env:
    """A provisioned task on an AggregatorPair and an HTTP session for hand-crafted
    requests."""

    def __init__(self, pair: AggregatorPair, pt: ProvisionedTask,
                 session: aiohttp.ClientSession) -> None:
        self.pair = pair
        self.pt = pt
        self.session = session
        self.vdaf = pt.task.vdaf()

    @property
    def task_id(self) -> bytes:
        return bytes(self.pt.task.task_id)

    @property
    def profile(self) -> Any:
        return self.pt.task.profile

    def url(self, resource: str, task_id: bytes | None = None, **ids: bytes) -> str:
        base = self.pair.helper_url if resource.startswith("aggregat") else self.pair.leader_url
        return self.profile.resource_url(resource, base, task_id=task_id or self.task_id,
                                         **ids)

    def media(self, message: str) -> str:
        return str(self.profile.media_type_for(message))

    async def request(self, method: str, url: str, body: bytes | None = None,
                      message: str | None = None, token: str | None = "helper",
                      content_type: str | None = None) -> Response:
        headers: dict[str, str] = {}
        if token == "helper":
            headers["Authorization"] = f"Bearer {self.pt.aggregator_auth_token}"
        elif token == "collector":
            headers["Authorization"] = f"Bearer {self.pt.collector_auth_token}"
        elif token is not None:
            headers["Authorization"] = token
        if content_type is not None:
            headers["Content-Type"] = content_type
        elif message is not None:
            headers["Content-Type"] = self.media(message)
        async with self.session.request(method, url, data=body, headers=headers,
                                        skip_auto_headers=["Content-Type"]) as resp:
            return Response(resp.status, dict(resp.headers), await resp.read())

    async def upload(self, reports: list[Report]) -> Response:
        return await self.request("POST", self.url("reports"),
                                  UploadRequest(tuple(reports)).encode(), "UploadRequest",
                                  token=None)

    async def init_job(self, body: bytes, token: str | None = "helper") -> Response:
        return await self.request("POST", self.url("aggregation_jobs"), body,
                                  "AggregationJobInitReq", token=token)

    async def share(self, body: bytes, token: str | None = "helper") -> Response:
        return await self.request("POST", self.url("aggregate_shares"), body,
                                  "AggregateShareReq", token=token)

    async def start_collection(self, body: bytes, token: str | None = "collector") -> Response:
        return await self.request("POST", self.url("collection_jobs"), body,
                                  "CollectionJobReq", token=token)

    def assert_problem(self, resp: Response, token: str, status: int = 400,
                       task_id: bytes | None = None) -> dict[str, Any]:
        """A problem document of the DAP type `token` (DAP-18 Section 3.6) with the
        task's ID in `taskid`."""
        assert resp.status == status, (resp.status, resp.body)
        doc = resp.problem
        assert doc["type"] == URN + token, doc
        assert doc["status"] == status
        assert doc["taskid"] == b64(task_id or self.task_id)
        return doc

    # -- reports --------------------------------------------------------------------------

    def hpke_configs(self) -> tuple[HpkeConfig, HpkeConfig]:
        leader = self.pair.leader_state.keyring().config_list().configs[0]
        helper = self.pair.helper_state.keyring().config_list().configs[0]
        return leader, helper

    def now(self) -> int:
        return int(self.pair.clock()) // self.pt.task.time_precision

    def report(self, measurement: Any, t: int | None = None, **kwargs: Any) -> Report:
        leader, helper = self.hpke_configs()
        return generate_report(self.pt.task, measurement, time=self.now() if t is None else t,
                               leader_hpke_config=leader, helper_hpke_config=helper,
                               vdaf=self.vdaf, **kwargs)

    def crafted(self, measurement: Any, t: int | None = None, *,
                leader_config: HpkeConfig | None = None,
                helper_config: HpkeConfig | None = None,
                report_id: bytes | None = None, public_extensions: tuple[Extension, ...] = (),
                leader_private: tuple[Extension, ...] = (),
                helper_private: tuple[Extension, ...] = (),
                mangle: Mangle | None = None, shard_task: Any = None,
                rand: bytes | None = None) -> tuple[Report, bytes]:
        """A report sealed by hand (no Client-side checks), and the Leader's plaintext
        input share. `mangle` changes the (Leader's, Helper's) encoded input shares before
        encryption; `shard_task` shards for another task (another VDAF context)."""
        leader, helper = self.hpke_configs()
        rid = ReportID(report_id or os.urandom(16))
        sharded = shard(shard_task or self.pt.task, self.vdaf, measurement, rid,
                        rand or os.urandom(self.vdaf.RAND_SIZE))
        md = ReportMetadata(rid, Time(self.now() if t is None else t), public_extensions)
        aad = input_share_aad(self.pt.task, md, sharded.public_share)
        leader_share, helper_share = sharded.input_shares
        if mangle is not None:
            leader_share, helper_share = mangle(leader_share, helper_share)
        cts = [seal_input_share(cfg, role, aad, PlaintextInputShare(private, share),
                                profile=self.profile)
               for cfg, role, private, share in (
                   (leader_config or leader, Role.LEADER, leader_private, leader_share),
                   (helper_config or helper, Role.HELPER, helper_private, helper_share))]
        return Report(md, sharded.public_share, cts[0], cts[1]), leader_share

    def verify_init(self, report: Report, leader_share: bytes,
                    verify_key: bytes | None = None) -> VerifyInit:
        """The Leader's side of aggregation initialization for one report."""
        md = report.report_metadata
        state = ping_pong_leader_init(self.vdaf, verify_key or self.pt.vdaf_verify_key,
                                      self.pt.task.vdaf_ctx(), b"", bytes(md.report_id),
                                      report.public_share, leader_share)
        assert isinstance(state, Continued)
        return VerifyInit(ReportShare(md, report.public_share,
                                      report.helper_encrypted_input_share), state.outbound)

    def init_body(self, inits: list[VerifyInit], batch_id: bytes | None = None,
                  extensions: tuple[AggregationJobExtension, ...] | None = None,
                  agg_param: bytes = b"", key_id: int = 0) -> bytes:
        if extensions is None:
            extensions = () if batch_id is None else (
                AggregationJobExtension.leader_selected_batch_id(batch_id),)
        return AggregationJobInitReq(key_id, agg_param, extensions, tuple(inits)).encode()

    def job_body(self, measurements: list[Any], t: int | None = None,
                 batch_id: bytes | None = None) -> tuple[bytes, list[Report]]:
        pairs = [self.crafted(m, t) for m in measurements]
        body = self.init_body([self.verify_init(r, s) for r, s in pairs], batch_id)
        return body, [r for r, _ in pairs]


@contextlib.asynccontextmanager
async def environment(tmp_path: Path, clock: OffsetClock | None = None,
                      leader: dict[str, Any] | None = None,
                      helper: dict[str, Any] | None = None,
                      **task: Any) -> Any:
    pair = AggregatorPair(tmp_path, leader_overrides=leader, helper_overrides=helper,
                          clock=clock or new_clock())
    async with pair:
        pt = pair.provision(task.pop("vdaf", None) or Prio3Sum(2, 100),
                            time_precision=PRECISION, **{"min_batch_size": 3, **task})
        async with aiohttp.ClientSession() as session:
            yield Env(pair, pt, session)


def verify_resps(resp: Response) -> list[tuple[VerifyRespType, ReportError | None]]:
    assert resp.headers["Content-Type"] == \
        "application/ppm-dap;message=aggregation-job-resp"
    return [(v.verify_resp_type, v.report_error)
            for v in AggregationJobResp.decode(resp.body).verify_resps]


def upload_errors(resp: Response) -> list[tuple[bytes, ReportError]]:
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "application/ppm-dap;message=upload-errors"
    return [(bytes(s.id), s.error) for s in UploadErrors.decode(resp.body).status]


def rid(report: Report) -> bytes:
    return bytes(report.report_metadata.report_id)


def raw_extensions(*types: int) -> bytes:
    """An encoded extension list in the given (possibly wrong) order, empty payloads."""
    items = b"".join(struct.pack(">HH", t, 0) for t in types)
    return struct.pack(">H", len(items)) + items


def collection_req(query: Query, agg_param: bytes = b"",
                   extensions: tuple[CollectionJobExtension, ...] = ()) -> bytes:
    return CollectionJobReq(query, agg_param, extensions).encode()


def interval_query(start: int, duration: int) -> Query:
    return Query.time_interval(Interval(Time(start), Duration(duration)))


async def collect_url(env: Env, body: bytes) -> str:
    resp = await env.start_collection(body)
    assert resp.status == 201, resp
    return str(resp.headers["Location"])


async def poll_collection(env: Env, location: str, timeout: float = 20.0) -> Response:
    """GET the collection job until it is no longer "not ready"."""
    url = env.pair.leader_url.rstrip("/") + location
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        resp = await env.request("GET", url, token="collector")
        if resp.status != 200 or resp.body:
            return resp
        assert "Retry-After" in resp.headers
        if loop.time() > deadline:
            raise AssertionError("collection job not ready")
        await asyncio.sleep(0.03)


# == upload (Section 4.4.2.2) ===============================================================


def test_upload_report_errors(tmp_path: Path) -> None:
    clock = new_clock()
    now = int(clock()) // PRECISION

    async def run() -> None:
        # clock_skew 120 s: reports up to 2 time_precision units ahead are accepted.
        async with environment(tmp_path, clock, leader={"clock_skew": 120}) as env:
            bounded = Env(env.pair, env.pair.provision(
                Prio3Sum(2, 100), time_precision=PRECISION, min_batch_size=3,
                task_interval=Interval(Time(now - 10), Duration(11))), env.session)
            first = env.report(5)
            assert (await env.upload([first])).status == 200
            await settle(env.pair)
            stranger = generate_keypair((env.hpke_configs()[0].id + 1) % 256).config
            too_early = env.report(1, now + 3)
            edge = env.report(1, now + 2)
            outdated, _ = env.crafted(1, leader_config=stranger)
            replayed = replace(env.report(7), report_metadata=first.report_metadata)
            # The Client refuses times outside the task interval: seal these by hand.
            before, _ = bounded.crafted(1, now - 11)
            after, _ = bounded.crafted(1, now + 1)
            with unchanged(env.pair):
                resp = await env.upload([replayed, too_early, outdated])
                # In the order of the request (Section 4.4.2.2).
                assert upload_errors(resp) == [
                    (rid(replayed), ReportError.REPORT_REPLAYED),
                    (rid(too_early), ReportError.REPORT_TOO_EARLY),
                    (rid(outdated), ReportError.OUTDATED_CONFIG)]
                resp = await bounded.upload([before, after])
                assert upload_errors(resp) == [(rid(before), ReportError.REPORT_DROPPED),
                                               (rid(after), ReportError.REPORT_DROPPED)]
            # At the edge of the clock skew a report is accepted.
            assert (await env.upload([edge])).status == 200
            # A report refused as too early stored nothing: later it is accepted.
            clock.advance(PRECISION)
            assert (await env.upload([too_early])).status == 200
            # Replayed after it has been aggregated.
            await settle(env.pair)
            assert sql(env.pair.leader_state, "SELECT state FROM client_reports WHERE "
                       "report_id=?", rid(first)) == [("aggregated",)]
            with unchanged(env.pair):
                resp = await env.upload([first])
            assert upload_errors(resp) == [(rid(first), ReportError.REPORT_REPLAYED)]
    asyncio.run(run())


def test_upload_request_errors(tmp_path: Path) -> None:
    async def run() -> None:
        async with environment(tmp_path) as env:
            good = env.report(1)
            ext, _ = env.crafted(2, public_extensions=(Extension(0x0042, b"x"),
                                                       Extension(0x1234, b"")))
            body = UploadRequest((good, ext)).encode()
            with unchanged(env.pair):
                # An unrecognized public extension aborts the whole request; the other
                # report is not stored either.
                resp = await env.upload([good, ext])
                doc = env.assert_problem(resp, "unsupportedExtension")
                assert doc["unsupported_extensions"] == [0x0042, 0x1234]
                # Malformed: truncated, trailing bytes, garbage.
                for malformed in (body[:-1], body + b"\x00", b"\xff" * 7):
                    resp = await env.request("POST", env.url("reports"), malformed,
                                             "UploadRequest", token=None)
                    env.assert_problem(resp, "invalidMessage")
                # Wrong or missing media type: 415.
                for content_type in (env.media("CollectionJobReq"), "application/json",
                                     None):
                    resp = await env.request("POST", env.url("reports"),
                                             UploadRequest((good,)).encode(),
                                             content_type=content_type, token=None)
                    assert resp.status == 415
                    assert resp.problem["taskid"] == b64(env.task_id)
                # Unknown task: 404 unrecognizedTask.
                other = os.urandom(32)
                resp = await env.request("POST", env.url("reports", task_id=other),
                                         UploadRequest((good,)).encode(), "UploadRequest",
                                         token=None)
                env.assert_problem(resp, "unrecognizedTask", 404, other)
                # A malformed task ID in the URL.
                resp = await env.request("POST", env.pair.leader_url + "tasks/xyz/reports",
                                         UploadRequest((good,)).encode(), "UploadRequest")
                assert resp.status == 404
                assert resp.problem["type"] == URN + "unrecognizedTask"
            assert (await env.upload([good])).status == 200
    asyncio.run(run())


# == aggregation: per-report errors (Sections 4.5.2.3, 4.5.2.4, 4.5.3.3) ====================


def test_report_errors_during_aggregation(tmp_path: Path) -> None:
    """Reports the Leader accepts at upload but that fail aggregation: the Leader records
    the error, neither Aggregator commits them, and the collection counts the others."""
    async def run() -> None:
        async with environment(tmp_path, vdaf=Prio3Histogram(2, 4, 2),
                               min_batch_size=3) as env:
            other_task = replace(env.pt.task, task_id=os.urandom(32))
            good = [env.report(b) for b in (0, 1, 1, 3)]
            leader_corrupt = env.report(2)
            ct = leader_corrupt.leader_encrypted_input_share
            leader_corrupt = replace(leader_corrupt, leader_encrypted_input_share=HpkeCiphertext(
                ct.config_id, ct.enc, bytes([ct.payload[0] ^ 1]) + ct.payload[1:]))
            stranger = generate_keypair((env.hpke_configs()[1].id + 1) % 256).config
            cases = {
                ReportError.HPKE_DECRYPT_ERROR: [
                    leader_corrupt,                                  # Leader cannot decrypt
                    env.crafted(2, helper_config=stranger)[0],       # Helper: unknown key
                    # Encrypted for another task (its ID is in the AAD).
                    generate_report(other_task, 2, time=env.now(),
                                    leader_hpke_config=env.hpke_configs()[0],
                                    helper_hpke_config=env.hpke_configs()[1])],
                ReportError.VDAF_VERIFY_ERROR: [
                    env.crafted(2, mangle=flip_helper_seed)[0],
                    # Sharded for another task (another VDAF context), sealed for this one.
                    env.crafted(2, shard_task=other_task)[0]],
                ReportError.INVALID_MESSAGE: [
                    env.crafted(2, leader_private=(Extension(0x0042, b""),))[0],
                    env.crafted(2, helper_private=(Extension(0x0042, b""),))[0],
                    # Input shares that do not decode (Section 4.5.2.4, first check).
                    env.crafted(2, mangle=truncate_leader)[0],
                    env.crafted(2, mangle=truncate_helper)[0]],
            }
            bad = [r for reports in cases.values() for r in reports]
            assert (await env.upload(good + bad)).status == 200
            await settle(env.pair)
            for error, reports in cases.items():
                for report in reports:
                    assert sql(env.pair.leader_state, "SELECT state, error FROM client_reports "
                               "WHERE report_id=?", rid(report)) == [("failed", int(error))]
            for state in (env.pair.leader_state, env.pair.helper_state):
                assert sorted(r for (r,) in sql(state, "SELECT report_id FROM "
                                                "aggregated_reports")) == \
                    sorted(rid(r) for r in good)
            # The Helper answered vdaf_verify_error / hpke_decrypt_error / invalid_message
            # for the reports the Leader sent it.
            helper_errors = sorted(e for (e,) in sql(env.pair.helper_state, "SELECT error FROM "
                                                     "report_aggregations WHERE state="
                                                     "'rejected'"))
            assert helper_errors == sorted([ReportError.HPKE_DECRYPT_ERROR,
                                            ReportError.VDAF_VERIFY_ERROR,
                                            ReportError.VDAF_VERIFY_ERROR,
                                            ReportError.INVALID_MESSAGE,
                                            ReportError.INVALID_MESSAGE])
            async with env.pair.collector(env.pt) as collector:
                result = await collector.collect(env.pair.current_interval_query(env.pt),
                                                 timeout=20, max_poll_interval=0.05)
            assert result.report_count == 4
            assert result.aggregate_result == [1, 2, 0, 1]
    asyncio.run(run())


def test_helper_report_errors(tmp_path: Path) -> None:
    """A hand-crafted AggregationJobInitReq whose reports the Helper must each reject."""
    clock = new_clock()
    now = int(clock()) // PRECISION
    task_interval = Interval(Time(now - 50), Duration(40))   # [now - 50, now - 10)

    async def run() -> None:
        async with environment(tmp_path, clock, helper={"clock_skew": 120},
                               task_interval=task_interval) as env:
            stranger = generate_keypair((env.hpke_configs()[1].id + 1) % 256).config
            corrupt, corrupt_share = env.crafted(1, now - 20)
            ct = corrupt.helper_encrypted_input_share
            corrupt = replace(corrupt, helper_encrypted_input_share=HpkeCiphertext(
                ct.config_id, ct.enc, ct.payload[:-1] + bytes([ct.payload[-1] ^ 1])))
            expected: list[tuple[ReportError, VerifyInit]] = []

            def case(error: ReportError, *args: Any, verify_key: bytes | None = None,
                     **kwargs: Any) -> None:
                report, share = env.crafted(*args, **kwargs)
                expected.append((error, env.verify_init(report, share, verify_key)))

            case(ReportError.TASK_NOT_STARTED, 1, now - 51)
            case(ReportError.TASK_EXPIRED, 1, now - 10)
            case(ReportError.REPORT_TOO_EARLY, 1, now + 3)
            case(ReportError.HPKE_DECRYPT_ERROR, 1, now - 20, helper_config=stranger)
            expected.append((ReportError.HPKE_DECRYPT_ERROR, env.verify_init(corrupt,
                                                                             corrupt_share)))
            case(ReportError.VDAF_VERIFY_ERROR, 1, now - 20, mangle=flip_helper_seed)
            # The Leader's verifier share made with another verification key.
            case(ReportError.VDAF_VERIFY_ERROR, 1, now - 20, verify_key=os.urandom(
                len(env.pt.vdaf_verify_key)))
            case(ReportError.INVALID_MESSAGE, 1, now - 20,
                 public_extensions=(Extension(0x0042, b""),))
            case(ReportError.INVALID_MESSAGE, 1, now - 20,
                 helper_private=(Extension(0x0042, b""),))
            case(ReportError.INVALID_MESSAGE, 1, now - 20, mangle=truncate_helper)
            body = env.init_body([vi for _, vi in expected])
            before = snapshot(env.pair.helper_state)
            resp = await env.init_job(body)
            assert resp.status == 201
            assert verify_resps(resp) == [(VerifyRespType.REJECT, e) for e, _ in expected]
            after = snapshot(env.pair.helper_state)
            # The job and its rejected reports are recorded; nothing was committed.
            for key in ("aggregated_reports_rows", "batch_buckets_rows",
                        "collected_intervals_rows"):
                assert after[key] == before[key]
            assert after["aggregation_jobs"] == before["aggregation_jobs"] + 1
            # Inside the clock skew and the task interval, the same kind of report is
            # accepted.
            ok_body, _ = env.job_body([4], now - 20)
            resp = await env.init_job(ok_body)
            assert [t for t, _ in verify_resps(resp)] == [VerifyRespType.CONTINUE]
            assert count(env.pair.helper_state, "SELECT COUNT(*) FROM aggregated_reports") == 1
    asyncio.run(run())


def test_replayed_report_at_helper(tmp_path: Path) -> None:
    async def run() -> None:
        async with environment(tmp_path) as env:
            rand = os.urandom(env.vdaf.RAND_SIZE)
            report, share = env.crafted(3, rand=rand)
            first = env.init_body([env.verify_init(report, share)])
            resp = await env.init_job(first)
            assert [t for t, _ in verify_resps(resp)] == [VerifyRespType.CONTINUE]
            # The same report in a new job (encrypted again, so the request differs).
            again, _ = env.crafted(3, t=int(report.report_metadata.time),
                                   report_id=rid(report), rand=rand)
            assert again.public_share == report.public_share
            second = env.init_body([env.verify_init(again, share)])
            assert second != first
            before = snapshot(env.pair.helper_state)
            resp = await env.init_job(second)
            assert verify_resps(resp) == [(VerifyRespType.REJECT, ReportError.REPORT_REPLAYED)]
            after = snapshot(env.pair.helper_state)
            for key in ("aggregated_reports_rows", "batch_buckets_rows"):
                assert after[key] == before[key]
            # Replays within one job: the whole job fails.
            with unchanged(env.pair):
                other, other_share = env.crafted(3)
                vi = env.verify_init(other, other_share)
                resp = await env.init_job(env.init_body([vi, vi]))
                env.assert_problem(resp, "invalidMessage")
    asyncio.run(run())


def test_batch_collected(tmp_path: Path) -> None:
    """A report arriving for an already collected batch: batch_collected at the Leader's
    upload (time-interval) and at the Helper (both batch modes)."""
    async def run() -> None:
        async with environment(tmp_path) as env:
            ls = env.pair.provision(Prio3Sum(2, 100), batch_mode=BatchMode.LEADER_SELECTED,
                                    min_batch_size=3, time_precision=PRECISION)
            ls_env = Env(env.pair, ls, env.session)
            for e in (env, ls_env):
                assert (await e.upload([e.report(m) for m in (1, 2, 3)])).status == 200
            async with env.pair.collector(env.pt) as collector:
                ti_result = await collector.collect(env.pair.current_interval_query(env.pt),
                                                    timeout=20, max_poll_interval=0.05)
            async with env.pair.collector(ls) as collector:
                ls_result = await collector.collect(Query.leader_selected(), timeout=20,
                                                    max_poll_interval=0.05)
            assert ti_result.aggregate_result == ls_result.aggregate_result == 6
            await settle(env.pair)
            late = env.report(50)
            with unchanged(env.pair):
                resp = await env.upload([late])
                # DRAFT AMBIGUITY: Section 4.4.2.2 says the Leader MAY answer
                # report_replayed for a report of a collected batch; batch_collected is
                # the ReportError the draft defines for exactly this case.
                assert upload_errors(resp) == [(rid(late), ReportError.BATCH_COLLECTED)]
            # The Helper, given such reports in a new job.
            body, _ = env.job_body([50])
            [(batch_id,)] = sql(env.pair.helper_state, "SELECT bucket FROM collected_buckets")
            ls_body, _ = ls_env.job_body([50], batch_id=batch_id)
            before = snapshot(env.pair.helper_state)
            for e, b in ((env, body), (ls_env, ls_body)):
                resp = await e.init_job(b)
                assert verify_resps(resp) == [(VerifyRespType.REJECT,
                                               ReportError.BATCH_COLLECTED)]
            after = snapshot(env.pair.helper_state)
            for key in ("aggregated_reports_rows", "batch_buckets_rows"):
                assert after[key] == before[key]
    asyncio.run(run())


# == aggregation jobs: request errors (Sections 4.5.2.2, 4.5.4.2, 4.5.5) ====================


def test_aggregation_job_init_errors(tmp_path: Path) -> None:
    async def run() -> None:
        async with environment(tmp_path) as env:
            ls = env.pair.provision(Prio3Sum(2, 100), batch_mode=BatchMode.LEADER_SELECTED,
                                    min_batch_size=3, time_precision=PRECISION)
            ls_env = Env(env.pair, ls, env.session)
            report, share = env.crafted(1)
            vi = env.verify_init(report, share)
            good = env.init_body([vi])
            batch_id = os.urandom(32)
            ls_report, ls_share = ls_env.crafted(1)
            ls_vi = ls_env.verify_init(ls_report, ls_share)
            with unchanged(env.pair):
                for body in (b"", b"\x00" * 3, good + b"\x00", good[:-1]):
                    env.assert_problem(await env.init_job(body), "invalidMessage")
                # Unrecognized aggregation job extension.
                body = env.init_body([vi], extensions=(AggregationJobExtension(0x4242, b""),))
                doc = env.assert_problem(await env.init_job(body), "unsupportedExtension")
                assert doc["unsupported_extensions"] == [0x4242]
                # Extensions out of order (encoded by hand).
                unsorted = good[:5] + raw_extensions(0x4242, 0x0001) + good[7:]
                env.assert_problem(await env.init_job(unsorted), "invalidMessage")
                # A batch ID in a time-interval task; none, or a malformed one, in a
                # leader-selected task.
                body = env.init_body([vi], batch_id=batch_id)
                env.assert_problem(await env.init_job(body), "invalidMessage")
                for exts in ((), (AggregationJobExtension(1, b"\x01" * 31),)):
                    body = ls_env.init_body([ls_vi], extensions=exts)
                    ls_env.assert_problem(await ls_env.init_job(body), "invalidMessage")
                # Duplicate report IDs, no reports, unknown verification key.
                for body in (env.init_body([vi, vi]), env.init_body([]),
                             env.init_body([vi], key_id=7)):
                    env.assert_problem(await env.init_job(body), "invalidMessage")
                # Prio3's only valid aggregation parameter is the empty string.
                body = env.init_body([vi], agg_param=b"\x00")
                env.assert_problem(await env.init_job(body), "invalidAggregationParameter")
                # Unknown task.
                other = os.urandom(32)
                resp = await env.request("POST", env.url("aggregation_jobs", task_id=other),
                                         good, "AggregationJobInitReq")
                env.assert_problem(resp, "unrecognizedTask", 404, other)
                # Media type.
                resp = await env.request("POST", env.url("aggregation_jobs"), good,
                                         "AggregationJobContinueReq")
                assert resp.status == 415
            # The same reports are accepted in a well-formed request.
            resp = await env.init_job(good)
            assert resp.status == 201
            assert [t for t, _ in verify_resps(resp)] == [VerifyRespType.CONTINUE]
            resp = await ls_env.init_job(ls_env.init_body([ls_vi], batch_id=batch_id))
            assert [t for t, _ in verify_resps(resp)] == [VerifyRespType.CONTINUE]
    asyncio.run(run())


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_aggregation_job_idempotency_steps_and_deletion(tmp_path: Path,
                                                        asynchronous: bool) -> None:
    async def run() -> None:
        helper = {"async_helper": asynchronous, "retry_after": 0}
        async with environment(tmp_path, helper=helper) as env:
            body, reports = env.job_body([1, 2])
            first = await env.init_job(body)
            assert first.status == 201
            location = first.headers["Location"].split("?")[0]
            job_url = env.pair.helper_url.rstrip("/") + location
            if asynchronous:
                # Deferred: an empty body, Location with ?step=0 (Section 4.5.2.2); poll.
                assert first.body == b""
                assert first.headers["Location"] == location + "?step=0"
                assert "Retry-After" in first.headers
                resp = await asyncio.wait_for(ready_at(env, first), 20)
            else:
                resp = await env.request("GET", job_url + "?step=0")
                assert resp.body == first.body
            assert resp.status == 200
            assert [t for t, _ in verify_resps(resp)] == [VerifyRespType.CONTINUE] * 2
            await settle(env.pair)
            # Answered: the Helper keeps the request's hash and its response, not the
            # request (every report's shares).
            with env.pair.helper_state.datastore.transaction() as tx:
                stored_job = tx.get_aggregation_job(env.task_id, base64.urlsafe_b64decode(
                    location.rsplit("/", 1)[1] + "=="))
            assert stored_job is not None and stored_job.request == b"" \
                and len(stored_job.request_hash) == 32 and stored_job.response == resp.body
            with unchanged(env.pair):
                # A retried identical POST: the same job, its current state.
                retry = await env.init_job(body)
                assert (retry.status, retry.headers["Location"].split("?")[0], retry.body) \
                    == (201, location, resp.body)
                # Step errors: polling another step; continuing to step 0, to a step
                # that skips one, or with reports that are not the job's.
                env.assert_problem(await env.request("GET", job_url + "?step=1"),
                                   "stepMismatch")
                cont = AggregationJobContinueReq(1, (VerifyContinue(rid(reports[0]), b"x"),))
                for req, token in (
                        (replace(cont, step=0), "invalidMessage"),
                        (replace(cont, step=2), "stepMismatch"),
                        (cont, "invalidMessage"),
                        # The job is finished: an empty continuation is refused too (it
                        # used to overwrite the stored response with an empty one).
                        (AggregationJobContinueReq(1, ()), "invalidMessage")):
                    resp2 = await env.request("POST", job_url, req.encode(),
                                              "AggregationJobContinueReq")
                    env.assert_problem(resp2, token)
                stored = await env.request("GET", job_url + "?step=0")
                assert (stored.status, stored.body) == (200, resp.body)
                resp2 = await env.request("POST", job_url, b"\x00",
                                          "AggregationJobContinueReq")
                env.assert_problem(resp2, "invalidMessage")
                # Unknown or malformed job IDs.
                unknown = env.url("aggregation_job", aggregation_job_id=os.urandom(16))
                for method, payload, message in (("GET", None, None),
                                                 ("POST", cont.encode(),
                                                  "AggregationJobContinueReq"),
                                                 ("DELETE", None, None)):
                    resp2 = await env.request(method, unknown, payload, message)
                    env.assert_problem(resp2, "unrecognizedAggregationJob", 404)
                resp2 = await env.request("GET", job_url[:-2] + "?step=0")
                env.assert_problem(resp2, "unrecognizedAggregationJob", 404)
            # DELETE (Section 4.5.5): the job is gone, its replay records stay.
            committed = snapshot(env.pair.helper_state)
            assert (await env.request("DELETE", job_url)).status == 200
            env.assert_problem(await env.request("GET", job_url + "?step=0"),
                               "unrecognizedAggregationJob", 404)
            after = snapshot(env.pair.helper_state)
            for key in ("aggregated_reports_rows", "batch_buckets_rows"):
                assert after[key] == committed[key]
            again = env.init_body([env.verify_init(*env.crafted(1, report_id=rid(r)))
                                   for r in reports])
            resp = await asyncio.wait_for(ready_at(env, await env.init_job(again)), 20)
            assert verify_resps(resp) == [(VerifyRespType.REJECT,
                                           ReportError.REPORT_REPLAYED)] * 2
    asyncio.run(run())


async def ready_at(env: Env, resp: Response) -> Response:
    url = env.pair.helper_url.rstrip("/") + resp.headers["Location"]
    while not resp.body:
        await asyncio.sleep(0.02)
        resp = await env.request("GET", url)
    return resp


def test_authentication(tmp_path: Path) -> None:
    """Leader -> Helper and Collector -> Leader bearer tokens: missing 401, wrong 403."""
    async def run() -> None:
        async with environment(tmp_path) as env:
            body, _ = env.job_body([1])
            job = await env.init_job(body)
            job_url = env.pair.helper_url.rstrip("/") + job.headers["Location"]
            cjr = collection_req(env.pair.current_interval_query(env.pt))
            location = await collect_url(env, cjr)
            coll_url = env.pair.leader_url.rstrip("/") + location
            share = AggregateShareReq(CollectionJobReq.decode(cjr), BatchSelector.time_interval(
                Interval(Time(env.now()), Duration(1))), 1, bytes(32)).encode()
            requests = [
                ("POST", env.url("aggregation_jobs"), body, "AggregationJobInitReq", "helper"),
                ("GET", job_url, None, None, "helper"),
                ("POST", job_url.split("?")[0], AggregationJobContinueReq(1, ()).encode(),
                 "AggregationJobContinueReq", "helper"),
                ("DELETE", job_url.split("?")[0], None, None, "helper"),
                ("POST", env.url("aggregate_shares"), share, "AggregateShareReq", "helper"),
                ("POST", env.url("collection_jobs"), collection_req(Query.time_interval(
                    Interval(Time(env.now() - 100), Duration(3)))), "CollectionJobReq",
                 "collector"),
                ("GET", coll_url, None, None, "collector"),
                ("DELETE", coll_url, None, None, "collector"),
            ]
            with unchanged(env.pair):
                for method, url, payload, message, owner in requests:
                    other = "collector" if owner == "helper" else "helper"
                    for token, status in ((None, 401), ("Bearer nope", 403),
                                          ("Basic " + b64(b"a:b"), 401), (other, 403)):
                        resp = await env.request(method, url, payload, message, token=token)
                        assert resp.status == status, (method, url, token, resp)
                        doc = resp.problem
                        assert doc["taskid"] == b64(env.task_id)
                        assert not doc["type"].startswith(URN)   # not a DAP error type
    asyncio.run(run())


# == collection (Sections 4.6.1 - 4.6.3) ====================================================


def test_collection_job_request_errors(tmp_path: Path) -> None:
    async def run() -> None:
        async with environment(tmp_path) as env:
            now = env.now()
            query = interval_query(now - 5, 10)
            good = collection_req(query)
            with unchanged(env.pair):
                cases = [
                    (collection_req(interval_query(now, 0)), "batchInvalid"),
                    (collection_req(Query.leader_selected()), "invalidMessage"),
                    (collection_req(query, agg_param=b"\x01"), "invalidAggregationParameter"),
                    (good[:-1], "invalidMessage"),
                    (good + b"\x00", "invalidMessage"),
                    (b"\x07\x00\x00", "invalidMessage"),
                    # Section 4.6.2: extensions out of order fail the job with
                    # invalidExtension.
                    (good[:-2] + raw_extensions(2, 1), "invalidExtension"),
                ]
                for body, token in cases:
                    env.assert_problem(await env.start_collection(body), token)
                body = collection_req(query, extensions=(CollectionJobExtension(0x99, b""),))
                doc = env.assert_problem(await env.start_collection(body),
                                         "unsupportedExtension")
                assert doc["unsupported_extensions"] == [0x99]
                resp = await env.request("POST", env.url("collection_jobs"), good,
                                         "AggregateShareReq", token="collector")
                assert resp.status == 415
                other = os.urandom(32)
                resp = await env.request("POST", env.url("collection_jobs", task_id=other),
                                         good, "CollectionJobReq", token="collector")
                env.assert_problem(resp, "unrecognizedTask", 404, other)
                unknown = env.url("collection_job", collection_job_id=os.urandom(16))
                for method in ("GET", "DELETE"):
                    resp = await env.request(method, unknown, token="collector")
                    assert resp.status == 404
                    assert resp.problem["taskid"] == b64(env.task_id)
    asyncio.run(run())


def test_collection_below_min_batch_size_and_overlap(tmp_path: Path) -> None:
    """A batch below min_batch_size is never released; once collected, it is never
    computed again (the same query gets the stored result) and an overlapping interval
    is refused."""
    async def run() -> None:
        async with environment(tmp_path, min_batch_size=3) as env:
            now = env.now()
            assert (await env.upload([env.report(m) for m in (1, 2)])).status == 200
            body = collection_req(interval_query(now - 5, 10))
            location = await collect_url(env, body)
            url = env.pair.leader_url.rstrip("/") + location
            await settle(env.pair)
            with unchanged(env.pair):
                # Poll for a while: always "not ready", nothing sent to the Helper.
                for _ in range(10):
                    resp = await env.request("GET", url, token="collector")
                    assert (resp.status, resp.body) == (200, b"")
                    assert "Retry-After" in resp.headers
                    await asyncio.sleep(0.03)
            assert count(env.pair.leader_state, "SELECT COUNT(*) FROM collected_intervals") == 0
            assert count(env.pair.helper_state, "SELECT COUNT(*) FROM aggregate_share_jobs") == 0
            # One more report: the batch is released.
            assert (await env.upload([env.report(3)])).status == 200
            resp = await poll_collection(env, location)
            assert resp.status == 200
            assert resp.headers["Content-Type"] == \
                "application/ppm-dap;message=collection-job-resp"
            released = resp.body
            await settle(env.pair)
            with unchanged(env.pair):
                # A retried identical POST: the same job, the same result.
                again = await env.start_collection(body)
                assert again.headers["Location"] == location
                assert (await poll_collection(env, location)).body == resp.body
                # Overlapping and containing intervals: batchOverlap.
                for q in (interval_query(now + 4, 3), interval_query(now - 10, 30),
                          interval_query(now, 1)):
                    env.assert_problem(await env.start_collection(collection_req(q)),
                                       "batchOverlap")
            # A disjoint interval is fine.
            assert (await env.start_collection(
                collection_req(interval_query(now + 5, 2)))).status == 201
            # DELETE (Section 4.6.3): the job goes away, the batch stays collected.
            assert (await env.request("DELETE", url, token="collector")).status == 200
            resp = await env.request("GET", url, token="collector")
            assert resp.status == 404
            assert resp.problem["taskid"] == b64(env.task_id)
            # The same query again: a new job with the stored result, byte for byte (the
            # batch is not computed, nor noised, a second time).
            again = await env.start_collection(body)
            assert again.status == 201 and again.headers["Location"] != location
            assert (await poll_collection(env, again.headers["Location"])).body == released
            assert count(env.pair.leader_state, "SELECT COUNT(*) FROM collected_intervals") == 1
            assert count(env.pair.helper_state,
                         "SELECT COUNT(*) FROM aggregate_share_jobs") == 1
    asyncio.run(run())


@pytest.mark.parametrize("mode", [BatchMode.TIME_INTERVAL, BatchMode.LEADER_SELECTED],
                         ids=["time_interval", "leader_selected"])
def test_collection_gives_up_with_invalid_batch_size(tmp_path: Path, mode: BatchMode) -> None:
    clock = new_clock()

    async def run() -> None:
        async with environment(tmp_path, clock, leader={"collection_give_up_after": 30.0},
                               batch_mode=mode, min_batch_size=3) as env:
            query = (interval_query(env.now() - 5, 10) if mode == BatchMode.TIME_INTERVAL
                     else Query.leader_selected())
            body = collection_req(query)
            assert (await env.upload([env.report(m) for m in (1, 2)])).status == 200
            location = await collect_url(env, body)
            url = env.pair.leader_url.rstrip("/") + location
            await settle(env.pair)
            resp = await env.request("GET", url, token="collector")
            assert (resp.status, resp.body) == (200, b"")
            before = snapshot(env.pair.leader_state), snapshot(env.pair.helper_state)
            clock.advance(60)

            async def failed() -> Response:
                while True:
                    resp = await env.request("GET", url, token="collector")
                    if resp.status != 200:
                        return resp
                    await asyncio.sleep(0.02)
            resp = await asyncio.wait_for(failed(), 20)
            env.assert_problem(resp, "invalidBatchSize")
            after = snapshot(env.pair.leader_state), snapshot(env.pair.helper_state)
            # Only the collection job's own row changed (to failed).
            assert after[1] == before[1]
            assert {k for k in before[0] if before[0][k] != after[0][k]} == \
                {"collection_jobs_rows"}
            assert count(env.pair.helper_state, "SELECT COUNT(*) FROM aggregate_share_jobs") == 0
            assert count(env.pair.leader_state, "SELECT COUNT(*) FROM collected_intervals") == 0
            assert count(env.pair.leader_state, "SELECT COUNT(*) FROM collected_buckets") == 0
            # The Collector may retry later (Section 4.6.1). An identical POST would name
            # the failed job, so it deletes it first (DRAFT AMBIGUITY, see the report).
            assert (await env.start_collection(body)).headers["Location"] == location
            assert (await env.request("DELETE", url, token="collector")).status == 200
            assert (await env.upload([env.report(m) for m in (3, 4)])).status == 200
            await settle(env.pair)
            retry = await collect_url(env, body)
            assert retry != location
            resp = await poll_collection(env, retry)
            assert resp.status == 200 and resp.body
    asyncio.run(run())


def test_overlapping_collection_jobs_created_together(tmp_path: Path) -> None:
    """Two overlapping collection jobs accepted before either batch was collected: the
    second to become ready fails with batchOverlap, and the Leader does not mark its
    interval collected (reports outside the first batch are still accepted)."""
    async def run() -> None:
        async with environment(tmp_path, min_batch_size=3) as env:
            now = env.now()
            first = await collect_url(env, collection_req(interval_query(now - 5, 6)))
            second = await collect_url(env, collection_req(interval_query(now, 6)))
            assert (await env.upload([env.report(m) for m in (1, 2, 3)])).status == 200
            results = [await poll_collection(env, loc) for loc in (first, second)]
            statuses = sorted(r.status for r in results)
            assert statuses == [200, 400]
            failed = next(r for r in results if r.status == 400)
            env.assert_problem(failed, "batchOverlap")
            won = results.index(next(r for r in results if r.status == 200))
            won_interval = [(now - 5, now + 1), (now, now + 6)][won]
            await settle(env.pair)
            for state in (env.pair.leader_state, env.pair.helper_state):
                assert sql(state, "SELECT start, end_ FROM collected_intervals") == \
                    [won_interval]
            # A report outside the collected interval, inside the failed job's one, is
            # still accepted.
            late = env.report(9, now + 3 if won == 0 else now - 3)
            assert (await env.upload([late])).status == 200
    asyncio.run(run())


def test_times_at_the_end_of_the_time_range(tmp_path: Path) -> None:
    """Times are uint64 (Section 4.1.1): an interval whose end is not a Time is malformed
    (batchInvalid), a report from the far future is too early, a query over all of time
    is valid -- never an internal error."""
    top = (1 << 64) - 1
    far = 1 << 63

    async def run() -> None:
        async with environment(tmp_path, min_batch_size=3) as env:
            cjr = CollectionJobReq(interval_query(top, 2), b"", ())
            bad_share = AggregateShareReq(cjr, BatchSelector.time_interval(
                Interval(Time(top), Duration(2))), 3, bytes(32)).encode()
            far_report, far_share = env.crafted(1, far + 5)
            last_report, _ = env.crafted(1, top)
            with unchanged(env.pair):
                for q in (interval_query(top, 2), interval_query(far, top - far + 1)):
                    env.assert_problem(await env.start_collection(collection_req(q)),
                                       "batchInvalid")
                env.assert_problem(await env.share(bad_share), "batchInvalid")
                resp = await env.upload([far_report, last_report])
                assert upload_errors(resp) == [(rid(far_report), ReportError.REPORT_TOO_EARLY),
                                               (rid(last_report),
                                                ReportError.REPORT_TOO_EARLY)]
            resp = await env.init_job(env.init_body([env.verify_init(far_report, far_share)]))
            assert verify_resps(resp) == [(VerifyRespType.REJECT,
                                           ReportError.REPORT_TOO_EARLY)]
            # All of time, [0, 2^64 - 1): a valid batch.
            assert (await env.upload([env.report(m) for m in (1, 2, 3)])).status == 200
            location = await collect_url(env, collection_req(interval_query(0, top)))
            assert (await poll_collection(env, location)).status == 200
            await settle(env.pair)
            with unchanged(env.pair):
                env.assert_problem(await env.start_collection(collection_req(
                    interval_query(far, 1))), "batchOverlap")
                far_cjr = CollectionJobReq(interval_query(far, 1), b"", ())
                body = AggregateShareReq(far_cjr, BatchSelector.time_interval(
                    Interval(Time(far), Duration(1))), 0, bytes(32)).encode()
                env.assert_problem(await env.share(body), "batchOverlap")
    asyncio.run(run())


# == aggregate shares (Section 4.6.4) =======================================================


def test_aggregate_share_errors(tmp_path: Path) -> None:
    async def run() -> None:
        async with environment(tmp_path, min_batch_size=3) as env:
            now = env.now()
            reports = [env.report(m) for m in (1, 2, 3, 4)]
            assert (await env.upload(reports)).status == 200
            await settle(env.pair)
            interval = Interval(Time(now - 5), Duration(10))
            cjr = CollectionJobReq(Query.time_interval(interval), b"", ())
            selector = BatchSelector.time_interval(interval)
            checksum = batch_checksum(rid(r) for r in reports)

            def req(report_count: int = 4, check: bytes = checksum, c: Any = cjr,
                    sel: Any = selector) -> bytes:
                return AggregateShareReq(c, sel, report_count, check).encode()

            empty = Interval(Time(now + 100), Duration(10))
            with unchanged(env.pair):
                # Leader and Helper disagree on the batch: batchMismatch.
                for body in (req(5), req(3), req(check=bytes(32)),
                             req(check=batch_checksum(rid(r) for r in reports[:3]))):
                    env.assert_problem(await env.share(body), "batchMismatch")
                cases = [
                    (req(0, bytes(32), CollectionJobReq(Query.time_interval(empty), b"", ()),
                         BatchSelector.time_interval(empty)), "invalidBatchSize"),
                    (req(sel=BatchSelector.time_interval(Interval(Time(now), Duration(0)))),
                     "batchInvalid"),
                    # The selector must be inside the query.
                    (req(sel=BatchSelector.time_interval(Interval(Time(now - 6),
                                                                  Duration(10)))),
                     "invalidMessage"),
                    (req(sel=BatchSelector.leader_selected(os.urandom(32))), "invalidMessage"),
                    (req(c=replace(cjr, agg_param=b"\x01")), "invalidMessage"),
                    (req()[:-1], "invalidMessage"),
                ]
                for body, token in cases:
                    env.assert_problem(await env.share(body), token)
                body = req(c=replace(cjr, extensions=(CollectionJobExtension(0x77, b""),)))
                doc = env.assert_problem(await env.share(body), "unsupportedExtension")
                assert doc["unsupported_extensions"] == [0x77]
                # Extensions out of order inside the CollectionJobReq (Section 4.6.4: the
                # Helper validates them independently): invalidExtension.
                cjr_bytes = cjr.encode()[:-2] + raw_extensions(2, 1)
                body = cjr_bytes + selector.encode() + struct.pack(">Q", 4) + checksum
                env.assert_problem(await env.share(body), "invalidExtension")
                resp = await env.request("POST", env.url("aggregate_shares"), req(),
                                         "CollectionJobReq")
                assert resp.status == 415
            # The right request: 201 with the share; a retry returns the same resource.
            first = await env.share(req())
            assert first.status == 201
            assert first.headers["Content-Type"] == "application/ppm-dap;message=aggregate-share"
            with unchanged(env.pair):
                retry = await env.share(req())
                assert (retry.status, retry.headers["Location"], retry.body) == \
                    (201, first.headers["Location"], first.body)
                share_url = env.pair.helper_url.rstrip("/") + first.headers["Location"]
                got = await env.request("GET", share_url)
                assert (got.status, got.body) == (200, first.body)
                # The batch is collected at the Helper: an overlapping request fails.
                overlap = Interval(Time(now - 1), Duration(3))
                body = req(c=CollectionJobReq(Query.time_interval(overlap), b"", ()),
                           sel=BatchSelector.time_interval(overlap))
                env.assert_problem(await env.share(body), "batchOverlap")
            assert sql(env.pair.helper_state, "SELECT start, end_ FROM collected_intervals") \
                == [(now - 5, now + 5)]
            # The Leader, asked for a batch the Helper refuses, fails the collection job
            # with the Helper's error (Section 4.6.1).
            location = await collect_url(env, collection_req(interval_query(now - 2, 5)))
            env.assert_problem(await poll_collection(env, location), "batchOverlap")
    asyncio.run(run())


def test_aggregate_share_errors_leader_selected(tmp_path: Path) -> None:
    async def run() -> None:
        async with environment(tmp_path, batch_mode=BatchMode.LEADER_SELECTED,
                               min_batch_size=3) as env:
            reports = [env.report(m) for m in (1, 2, 3)]
            assert (await env.upload(reports)).status == 200
            await settle(env.pair)
            [(batch_id,)] = sql(env.pair.leader_state, "SELECT batch_id FROM leader_batches")
            cjr = CollectionJobReq(Query.leader_selected(), b"", ())
            checksum = batch_checksum(rid(r) for r in reports)

            def req(bid: bytes = batch_id, report_count: int = 3,
                    check: bytes = checksum) -> bytes:
                return AggregateShareReq(cjr, BatchSelector.leader_selected(bid), report_count,
                                         check).encode()

            with unchanged(env.pair):
                for body in (req(report_count=2), req(report_count=4), req(check=bytes(32))):
                    env.assert_problem(await env.share(body), "batchMismatch")
                env.assert_problem(await env.share(req(os.urandom(32), 0, bytes(32))),
                                   "invalidBatchSize")
                body = AggregateShareReq(cjr, BatchSelector.time_interval(
                    Interval(Time(env.now()), Duration(1))), 3, checksum).encode()
                env.assert_problem(await env.share(body), "invalidMessage")
            first = await env.share(req())
            assert first.status == 201 and first.body
            with unchanged(env.pair):
                retry = await env.share(req())
                assert (retry.headers["Location"], retry.body) == \
                    (first.headers["Location"], first.body)
                env.assert_problem(await env.share(req(report_count=4)), "batchOverlap")
            # The Leader's own request for this batch is the same bytes (the batch
            # selector is a natural key, Section 4.6.4): the Helper answers it with the
            # existing aggregate share and the collection completes.
            async with env.pair.collector(env.pt) as collector:
                result = await collector.collect(Query.leader_selected(), timeout=20,
                                                 max_poll_interval=0.05)
            assert (result.report_count, result.aggregate_result) == (3, 6)
            assert count(env.pair.helper_state, "SELECT COUNT(*) FROM aggregate_share_jobs") == 1
    asyncio.run(run())


# == HPKE configurations (Section 4.4.1) ====================================================


def test_hpke_config_and_key_rotation(tmp_path: Path) -> None:
    admin = {"admin_token": ADMIN, "hpke_cache_max_age": 3600}

    async def run() -> None:
        async with environment(tmp_path, leader=admin, helper=admin, min_batch_size=2) as env:
            async def configs(base: str) -> list[int]:
                resp = await env.request("GET", base + "hpke_config", token=None)
                assert resp.status == 200
                assert resp.headers["Content-Type"] == \
                    "application/ppm-dap;message=hpke-config-list"
                assert resp.headers["Cache-Control"] == "max-age=3600"
                return [c.id for c in HpkeConfigList.decode(resp.body).configs]

            async def admin_call(base: str, method: str, path: str,
                                 data: dict[str, Any] | None = None) -> Any:
                async with env.session.request(
                        method, base + "internal/" + path, json=data,
                        headers={"Authorization": f"Bearer {ADMIN}"}) as resp:
                    assert resp.status in (200, 201), await resp.text()
                    return await resp.json() if resp.status == 201 else None

            bases = (env.pair.leader_url, env.pair.helper_url)
            old = [await configs(b) for b in bases]
            assert [len(o) for o in old] == [1, 1]
            # 1. A pending key decrypts but is not advertised.
            new = [await admin_call(b, "POST", "hpke_keys", {"state": "pending"})
                   for b in bases]
            assert [await configs(b) for b in bases] == old
            pending = [HpkeConfig.decode(base64.urlsafe_b64decode(
                k["config"] + "=" * (-len(k["config"]) % 4))) for k in new]
            to_pending = [env.crafted(1, leader_config=pending[0], helper_config=pending[1])[0]
                          for _ in range(2)]
            assert (await env.upload(to_pending)).status == 200
            await settle(env.pair)
            # 2. Active: advertised first (newest first).
            for b, k in zip(bases, new, strict=True):
                await admin_call(b, "PUT", f"hpke_keys/{k['config_id']}", {"state": "active"})
            assert [await configs(b) for b in bases] == \
                [[k["config_id"], o[0]] for k, o in zip(new, old, strict=True)]
            # 3. Expired: no longer advertised, still decrypts.
            for b, o in zip(bases, old, strict=True):
                await admin_call(b, "PUT", f"hpke_keys/{o[0]}", {"state": "expired"})
            assert [await configs(b) for b in bases] == [[k["config_id"]] for k in new]
            old_configs = [HpkeConfig.decode(r.config) for r in (
                next(k for k in st.keyring().records if k.config_id == o[0])
                for st, o in ((env.pair.leader_state, old[0]), (env.pair.helper_state, old[1])))]
            to_old = [env.crafted(2, leader_config=old_configs[0],
                                  helper_config=old_configs[1])[0] for _ in range(2)]
            assert (await env.upload(to_old)).status == 200
            await settle(env.pair)
            states = sql(env.pair.leader_state, "SELECT state FROM client_reports")
            assert states == [("aggregated",)] * 4
            # 4. Deleted: outdated_config at the Leader, hpke_decrypt_error at the Helper.
            for b, o in zip(bases, old, strict=True):
                await admin_call(b, "DELETE", f"hpke_keys/{o[0]}")
            gone, gone_share = env.crafted(3, leader_config=old_configs[0],
                                           helper_config=old_configs[1])
            with unchanged(env.pair):
                resp = await env.upload([gone])
            assert upload_errors(resp) == [(rid(gone), ReportError.OUTDATED_CONFIG)]
            resp = await env.init_job(env.init_body([env.verify_init(gone, gone_share)]))
            assert verify_resps(resp) == [(VerifyRespType.REJECT,
                                           ReportError.HPKE_DECRYPT_ERROR)]
            async with env.pair.collector(env.pt) as collector:
                result = await collector.collect(env.pair.current_interval_query(env.pt),
                                                 timeout=20, max_poll_interval=0.05)
            assert (result.report_count, result.aggregate_result) == (4, 6)
    asyncio.run(run())
