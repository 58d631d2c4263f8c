"""The DAP-09 resources of our Leader and Helper, request by request (the end-to-end
scenarios are in test_dap_e2e.py, run for both profiles; a real DAP-09 client is in
test_dap09_divviup_dap.py).

What peers rely on: `hpke_config?task_id=` answered with exactly
`Content-Type: application/dap-hpke-config-list`; uploads by PUT answered 200 (the
erratum Janus 0.7 and Firefox follow; the draft's text says 201), refusals
as problem documents of the DAP-09 types carrying `taskid` (divviup-ts needs it to retry
after `outdatedConfig`); aggregation jobs PUT by the Leader with its job ID and answered
synchronously; collection jobs PUT by the Collector with its job ID and polled by POST
(202 until ready); `DAP-Auth-Token`; the draft's errors.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp

from ppm_reference.dap.collector import CollectionError
from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.core.tasks import Keyring
from ppm_reference.dap.hpke import HpkeConfig
from ppm_reference.dap.problems import ProblemDocument
from ppm_reference.dap.profiles.dap09 import DAP_09
from ppm_reference.dap.profiles.dap09 import client as client09
from ppm_reference.dap.profiles.dap09 import messages as m09
from ppm_reference.dap.provision import ProvisionedTask, b64
from ppm_reference.vdaf.ping_pong import ping_pong_leader_init
from ppm_reference.vdaf.prio3 import Prio3CountV08
from tests.dap_harness import AggregatorPair

PRECISION = 60
URN = "urn:ietf:params:ppm:dap:error:"


async def _configs(session: aiohttp.ClientSession, pair: AggregatorPair,
                   pt: ProvisionedTask) -> tuple[HpkeConfig, HpkeConfig]:
    out = []
    for url in (pair.leader_url, pair.helper_url):
        async with session.get(f"{url}hpke_config?task_id={b64(pt.task.task_id)}") as resp:
            assert resp.status == 200
            out.append(m09.HpkeConfigList.decode(await resp.read()).configs[0])
    return out[0], out[1]


def _report(pt: ProvisionedTask, configs: tuple[HpkeConfig, HpkeConfig], measurement: int,
            t: float | None = None) -> m09.Report:
    return client09.generate_report(pt.task, measurement,
                                    time=int(time.time() if t is None else t),
                                    leader_hpke_config=configs[0],
                                    helper_hpke_config=configs[1])


async def _put(session: aiohttp.ClientSession, url: str, body: bytes, message: str,
               headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    h = {"Content-Type": DAP_09.media_type_for(message), **(headers or {})}
    async with session.put(url, data=body, headers=h) as resp:
        return resp.status, await resp.read(), dict(resp.headers)


def _problem(body: bytes, token: str, task_id: bytes) -> ProblemDocument:
    doc = ProblemDocument.from_json(body)
    assert doc.type == URN + token, doc
    assert doc.taskid == b64(task_id), doc
    return doc


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_hpke_config_and_upload(tmp_path: Path) -> None:
    async def go() -> None:
        async with AggregatorPair(tmp_path) as pair, aiohttp.ClientSession() as session:
            pt = pair.provision(Prio3CountV08(2), min_batch_size=2, profile=DAP_09,
                                time_precision=PRECISION)
            tid = bytes(pt.task.task_id)
            # Exactly the DAP-09 media type for a dap-09 task; DAP-18's without a task.
            async with session.get(f"{pair.leader_url}hpke_config?task_id={b64(tid)}") as r:
                assert r.headers["Content-Type"] == "application/dap-hpke-config-list"
            async with session.get(f"{pair.leader_url}hpke_config") as r:
                assert r.headers["Content-Type"] == "application/ppm-dap;message=hpke-config-list"
            unknown = secrets.token_bytes(32)
            async with session.get(f"{pair.leader_url}hpke_config?task_id={b64(unknown)}") as r:
                assert r.status == 404
                _problem(await r.read(), "unrecognizedTask", unknown)

            configs = await _configs(session, pair, pt)
            url = f"{pair.leader_url}tasks/{b64(tid)}/reports"
            report = _report(pt, configs, 1)
            status, body, _ = await _put(session, url, report.encode(), "Report")
            assert (status, body) == (200, b"")
            # A replay is ignored: the same answer, and it is stored once.
            status, _, _ = await _put(session, url, report.encode(), "Report")
            assert status == 200
            # DAP-18's method and media type are not DAP-09's.
            async with session.post(url, data=report.encode(), headers={
                    "Content-Type": "application/dap-report"}) as r:
                assert r.status == 405
            status, body, _ = await _put(session, url, report.encode(), "Report",
                                         {"Content-Type": "application/ppm-dap;message=report"})
            assert status == 415
            # outdatedConfig (unknown HPKE config ID), reportTooEarly, reportRejected.
            bad_id = (configs[0].id + 1) % 256
            wrong = HpkeConfig(bad_id, configs[0].kem_id, configs[0].kdf_id,
                               configs[0].aead_id, configs[0].public_key)
            status, body, _ = await _put(session, url,
                                         _report(pt, (wrong, configs[1]), 1).encode(), "Report")
            assert status == 400
            _problem(body, "outdatedConfig", tid)
            status, body, _ = await _put(
                session, url, _report(pt, configs, 1, time.time() + 3600).encode(), "Report")
            assert status == 400
            _problem(body, "reportTooEarly", tid)
            status, body, _ = await _put(session, url, b"\x00" * 5, "Report")
            assert status == 400
            _problem(body, "invalidMessage", tid)
            with pair.leader_state.datastore.transaction() as tx:
                assert tx.count_reports(tid, ("new", "in_job", "aggregated", "failed")) == 1
    run(go())


def test_expired_task_rejects_reports(tmp_path: Path) -> None:
    from ppm_reference.dap.common import Duration, Interval, Time

    async def go() -> None:
        async with AggregatorPair(tmp_path) as pair, aiohttp.ClientSession() as session:
            # task_expiration = one time_precision after the epoch: long past.
            pt = pair.provision(Prio3CountV08(2), min_batch_size=2, profile=DAP_09,
                                time_precision=PRECISION,
                                task_interval=Interval(Time(0), Duration(1)))
            assert pt.task.task_expiration == PRECISION
            configs = await _configs(session, pair, pt)
            tid = bytes(pt.task.task_id)
            # Our Client refuses to make such a report: make it for the same task without
            # the expiration (only the task ID is in the AAD).
            unexpired = replace(pt.task, task_expiration=None)
            report = client09.generate_report(unexpired, 1, time=int(time.time()),
                                              leader_hpke_config=configs[0],
                                              helper_hpke_config=configs[1])
            status, body, _ = await _put(session, f"{pair.leader_url}tasks/{b64(tid)}/reports",
                                         report.encode(), "Report")
            assert status == 400
            _problem(body, "reportRejected", tid)
    run(go())


def test_helper_aggregation_job_resource(tmp_path: Path) -> None:
    """The Helper's PUT aggregation_jobs/{id}: authenticated with DAP-Auth-Token, 201 with
    the AggregationJobResp; the same ID with another request is refused; an unknown
    report's HPKE config gives a per-report PrepareError."""
    async def go() -> None:
        # The Leader is not started: this test plays the Leader.
        async with AggregatorPair(tmp_path) as pair, aiohttp.ClientSession() as session:
            pt = pair.provision(Prio3CountV08(2), min_batch_size=2, profile=DAP_09,
                                time_precision=PRECISION)
            tid = bytes(pt.task.task_id)
            configs = await _configs(session, pair, pt)
            vdaf = pt.task.vdaf()

            inits = []
            for m in (1, 0):
                report = _report(pt, configs, m)
                md = report.report_metadata
                # The Leader's own share, decrypted with the Leader's key from its datastore.
                with pair.leader_state.datastore.transaction() as tx:
                    keyring = Keyring.load(tx)
                keypair = keyring.get(report.leader_encrypted_input_share.config_id)
                assert keypair is not None
                plaintext = client09.decrypt_input_share(
                    pt.task, [keypair], m09.Role.LEADER,
                    client09.report_share_for(report, m09.Role.LEADER))
                state = ping_pong_leader_init(vdaf, pt.vdaf_verify_key, b"", b"",
                                              bytes(md.report_id), report.public_share,
                                              plaintext.payload)
                inits.append(m09.PrepareInit(client09.report_share_for(report,
                                                                       m09.Role.HELPER),
                                             state.outbound))
            bad = inits[1].report_share
            bad_ct = m09.HpkeCiphertext((bad.encrypted_input_share.config_id + 1) % 256,
                                        bad.encrypted_input_share.enc,
                                        bad.encrypted_input_share.payload)
            inits[1] = m09.PrepareInit(m09.ReportShare(bad.report_metadata, bad.public_share,
                                                       bad_ct), inits[1].payload)
            req = m09.AggregationJobInitReq(b"", m09.PartialBatchSelector.time_interval(),
                                            tuple(inits))
            job_id = secrets.token_bytes(16)
            url = f"{pair.helper_url}tasks/{b64(tid)}/aggregation_jobs/{b64(job_id)}"
            auth = {"DAP-Auth-Token": pt.aggregator_auth_token}
            status, body, _ = await _put(session, url, req.encode(), "AggregationJobInitReq")
            assert status == 401
            _problem(body, "unauthorizedRequest", tid)
            status, body, headers = await _put(session, url, req.encode(),
                                               "AggregationJobInitReq", auth)
            assert status == 201, body
            assert headers["Content-Type"] == "application/dap-aggregation-job-resp"
            resp = m09.AggregationJobResp.decode(body)
            states = [r.prepare_resp_state for r in resp.prepare_resps]
            assert states == [m09.PrepareRespState.CONTINUE, m09.PrepareRespState.REJECT]
            assert resp.prepare_resps[1].prepare_error == m09.PrepareError.HPKE_DECRYPT_ERROR
            # The same request again: the same answer. Another request: a client error.
            again = await _put(session, url, req.encode(), "AggregationJobInitReq", auth)
            assert again[:2] == (201, body)
            other = m09.AggregationJobInitReq(b"", m09.PartialBatchSelector.time_interval(),
                                              tuple(inits[:1]))
            status, body, _ = await _put(session, url, other.encode(), "AggregationJobInitReq",
                                         auth)
            assert status == 409
            _problem(body, "invalidMessage", tid)
            # A fixed_size selector in a time_interval task.
            wrong = m09.AggregationJobInitReq(
                b"", m09.PartialBatchSelector.fixed_size(bytes(32)), tuple(inits))
            status, body, _ = await _put(
                session, url[: url.rindex("/") + 1] + b64(secrets.token_bytes(16)),
                wrong.encode(), "AggregationJobInitReq", auth)
            assert status == 400
            _problem(body, "invalidMessage", tid)
    run(go())


def test_collection_job_resource(tmp_path: Path) -> None:
    async def go() -> None:
        async with AggregatorPair(tmp_path) as pair, aiohttp.ClientSession() as session:
            pt = pair.provision(Prio3CountV08(2), min_batch_size=3, profile=DAP_09,
                                time_precision=PRECISION)
            tid = bytes(pt.task.task_id)
            auth = {"DAP-Auth-Token": pt.collector_auth_token}
            now = int(time.time()) // PRECISION * PRECISION
            query = m09.Query.time_interval(m09.Interval(m09.Time(now - PRECISION),
                                                         m09.Duration(3 * PRECISION)))
            creq = m09.CollectionReq(query, b"")
            job = f"{pair.leader_url}tasks/{b64(tid)}/collection_jobs/" \
                  f"{b64(secrets.token_bytes(16))}"
            status, body, _ = await _put(session, job, creq.encode(), "CollectionReq")
            assert status == 401
            _problem(body, "unauthorizedRequest", tid)
            status, body, _ = await _put(session, job, creq.encode(), "CollectionReq", auth)
            assert (status, body) == (201, b"")
            # Same ID, same request: fine; another request: a client error.
            assert (await _put(session, job, creq.encode(), "CollectionReq", auth))[0] == 201
            other = m09.CollectionReq(m09.Query.time_interval(
                m09.Interval(m09.Time(now), m09.Duration(PRECISION))), b"")
            status, body, _ = await _put(session, job, other.encode(), "CollectionReq", auth)
            assert status == 409
            # Not ready (no reports): 202 Accepted with Retry-After.
            async with session.post(job, headers=auth) as r:
                assert r.status == 202 and "Retry-After" in r.headers
            # Boundary check: start and duration multiples of time_precision.
            for interval, token in ((m09.Interval(m09.Time(now + 1), m09.Duration(PRECISION)),
                                     "batchInvalid"),
                                    (m09.Interval(m09.Time(now), m09.Duration(0)),
                                     "batchInvalid")):
                bad = m09.CollectionReq(m09.Query.time_interval(interval), b"")
                status, body, _ = await _put(
                    session, job[: job.rindex("/") + 1] + b64(secrets.token_bytes(16)),
                    bad.encode(), "CollectionReq", auth)
                assert status == 400
                _problem(body, token, tid)
            # A fixed_size query in a time_interval task.
            fixed = m09.CollectionReq(m09.Query.fixed_size(m09.FixedSizeQuery.current_batch()),
                                      b"")
            status, body, _ = await _put(
                session, job[: job.rindex("/") + 1] + b64(secrets.token_bytes(16)),
                fixed.encode(), "CollectionReq", auth)
            assert status == 400
            _problem(body, "invalidMessage", tid)
            # Reports, then the result: 200 with a Collection.
            async with pair.client(pt) as client:
                assert (await client.upload([1, 1, 0])).accepted == 3
            for _ in range(300):
                async with session.post(job, headers=auth) as r:
                    if r.status == 200:
                        assert r.headers["Content-Type"] == "application/dap-collection"
                        collection = m09.Collection.decode(await r.read())
                        break
                    assert r.status == 202
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("collection never ready")
            assert collection.report_count == 3
            assert collection.part_batch_selector == m09.PartialBatchSelector.time_interval()
            result = client09.collect_result(pt.task, pt.collector_keypair, creq, collection)
            assert result.aggregate_result == 2
            async with session.delete(job, headers=auth) as r:
                assert r.status == 200
            async with session.post(job, headers=auth) as r:
                assert r.status == 404
    run(go())


def test_fixed_size_by_batch_id(tmp_path: Path) -> None:
    """fixed_size: current_batch gives a batch ID; asking for it by_batch_id gets the
    result already released for it (Section 4.6.5.2.1: a batch ID "it returned in a
    previous collection"; the same result, not computed nor noised again); a batch ID
    never returned (unknown, or a batch still filling) is batchInvalid."""
    async def go() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(Prio3CountV08(2), min_batch_size=2, profile=DAP_09,
                                batch_mode=BatchMode.LEADER_SELECTED,
                                time_precision=PRECISION)
            async with pair.client(pt) as client:
                assert (await client.upload([1, 0])).accepted == 2
            async with pair.collector(pt) as collector:
                first = await collector.collect(
                    m09.Query.fixed_size(m09.FixedSizeQuery.current_batch()), timeout=30)
                assert first.report_count == 2 and first.aggregate_result == 1
                assert first.batch_id is not None
                again = await collector.collect(m09.Query.fixed_size(
                    m09.FixedSizeQuery.by_batch_id(first.batch_id)), timeout=10)
                assert (again.batch_id, again.report_count, again.aggregate_result) == \
                    (first.batch_id, 2, 1)
            async with pair.client(pt) as client:  # a new batch, still filling
                assert (await client.upload([1])).accepted == 1
            for _ in range(200):
                with pair.leader_state.datastore.transaction() as tx:
                    filling = tx.list_leader_batches(bytes(pt.task.task_id), ("open",))
                if filling:
                    break
                await asyncio.sleep(0.02)
            async with pair.collector(pt) as collector:
                for batch_id, token in ((filling[0].batch_id, "batchInvalid"),
                                        (secrets.token_bytes(32), "batchInvalid")):
                    try:
                        await collector.collect(m09.Query.fixed_size(
                            m09.FixedSizeQuery.by_batch_id(batch_id)), timeout=10)
                    except CollectionError as exc:
                        assert exc.problem_type == URN + token, exc
                    else:
                        raise AssertionError(f"by_batch_id accepted, expected {token}")
    run(go())


def test_client_accepts_200_and_201_uploads() -> None:
    """Our DAP-09 Client takes 200 (what our Leader, Janus 0.7 and Firefox use: the
    draft's erratum) and 201 (the published text of Section 4.4.2, which other DAP-09
    Leaders may still answer) as an accepted upload; a non-problem 4xx is an error."""
    import functools

    from aiohttp import web

    from ppm_reference.dap.client import Client, UploadError
    from ppm_reference.dap.hpke import generate_keypair
    from ppm_reference.dap.provision import new_task

    async def go() -> None:
        keys = {"leader": generate_keypair(1), "helper": generate_keypair(2)}
        answers: list[int] = []
        puts: list[bytes] = []

        async def handle(role: str, request: web.Request) -> web.Response:
            if request.method == "GET" and request.path == "/hpke_config":
                return web.Response(body=m09.HpkeConfigList([keys[role].config]).encode(),
                                    content_type="application/dap-hpke-config-list")
            assert request.method == "PUT" and request.path.endswith("/reports")
            puts.append(await request.read())
            return web.Response(status=answers.pop(0))

        runners, urls = [], {}
        for role in ("leader", "helper"):
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", functools.partial(handle, role))
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            runners.append(runner)
            host, port = runner.addresses[0][:2]
            urls[role] = f"http://{host}:{port}/"
        try:
            pt = new_task(Prio3CountV08(2), urls["leader"], urls["helper"], profile=DAP_09,
                          min_batch_size=1, time_precision=PRECISION)
            async with Client(pt.task) as client:
                answers.extend([200, 201])
                assert (await client.upload([1, 0])).accepted == 2
                answers.append(409)
                try:
                    await client.upload([1])
                except UploadError as exc:
                    assert exc.status == 409
                else:
                    raise AssertionError("a 409 upload was taken as accepted")
            assert len(puts) == 3 and not answers
        finally:
            for runner in runners:
                await runner.cleanup()
    run(go())
