"""Issue 12's attacks on the Leader and Helper, scaled down, as tests: a gzip bomb, an
oversized plain body, slow bodies, slow headers, many idle connections, a large legitimate
upload and a large aggregation job to the Helper; aiohttp's own parser errors; the admin
API's bad input.

After (and during) each attack, every endpoint of an unrelated task answers within
BOUND = 1 s (the issue's acceptance bound, measured on real HTTP, one fresh connection per
request); memory stays bounded (the process's resident size, sampled every 2 ms, grows by
less than the bound given, where the attack would need far more); and the datastore holds
nothing the server did not accept. The figures are printed (`pytest -s`).

Timing here is a correctness property that the issue states (one request never blocks
others), not a benchmark: the bound is generous against the few milliseconds a probe
takes on an idle machine, and the attacks are sized so that without the fixes they hold
the event loop for several seconds.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import gzip
import json
import os
import secrets
import threading
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ppm_reference.dap.collector import Collector
from ppm_reference.dap.common import ReportID
from ppm_reference.dap.problems import PROBLEM_MEDIA_TYPE
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.provision import ProvisionedTask
from tests.dap_harness import AggregatorPair, Proto

BOUND = 1.0          # seconds (issue 12: "every endpoint of an unrelated task ... within 1 s")
KiB, MiB = 1024, 1024 * 1024
_DAP18 = get_profile("dap-18")   # the harness's tasks (AggregatorPair.provision)
UPLOAD_TYPE = _DAP18.media_type_for(_DAP18.message_names["upload"])


# -- measuring ------------------------------------------------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRss:
    """The growth of the resident set size over its value at entry, sampled every 2 ms
    in a thread (Linux /proc; 0 elsewhere)."""

    def __init__(self) -> None:
        self.growth = 0
        self._stop = threading.Event()
        self._ok = os.path.exists("/proc/self/statm")

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            self.growth = max(self.growth, _rss() - self.base)

    def __enter__(self) -> PeakRss:
        if self._ok:
            self.base = _rss()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ok:
            self._stop.set()
            self._thread.join()


class Prober:
    """Times every endpoint of one task on both Aggregators, each request on a fresh
    connection: the Leader's hpke_config, upload, collection job creation, poll and
    deletion; the Helper's hpke_config, aggregation job init, poll and aggregate share
    (authenticated, with malformed bodies: answered with a problem document)."""

    def __init__(self, pair: AggregatorPair, pt: ProvisionedTask) -> None:
        self.pair = pair
        self.pt = pt
        self.worst: dict[str, float] = {}
        self.rounds = 0
        profile = pt.task.profile
        self.tid = pt.task.task_id.to_base64url()
        self.leader_auth = dict([profile.auth_header_for(pt.aggregator_auth_token)])
        self.reports: list[Any] = []

    async def prepare(self, n: int = 60) -> None:
        """Reports made in advance (sharding is the Client's time, not the server's)."""
        client = self.pair.client(self.pt)
        self.reports = await client.prepare([1] * n)
        await client.close()

    async def _timed(self, name: str, call: Callable[[], Awaitable[None]]) -> None:
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(10 * BOUND):
                await call()
            took = time.perf_counter() - t0
        except TimeoutError:
            took = float("inf")
        self.worst[name] = max(self.worst.get(name, 0.0), took)

    async def round(self) -> None:
        connector = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(connector=connector) as s:
            await self._round(s)
        self.rounds += 1

    async def _round(self, s: aiohttp.ClientSession) -> None:
        pair, pt = self.pair, self.pt
        leader, helper = pair.leader_url, pair.helper_url
        profile = pt.task.profile

        async def get(url: str, status: int, headers: dict[str, str] | None = None) -> None:
            async with s.get(url, headers=headers) as r:
                await r.read()
                assert r.status == status, (url, r.status)

        async def post(url: str, body: bytes, ctype: str, status: int) -> None:
            async with s.post(url, data=body, headers={**self.leader_auth,
                                                         "Content-Type": ctype}) as r:
                await r.read()
                assert r.status == status, (url, r.status)
                if status >= 400:
                    assert r.content_type == PROBLEM_MEDIA_TYPE

        async def upload() -> None:
            report = self.reports.pop() if self.reports else None
            assert report is not None, "probe reports exhausted"
            _, body = profile.flow.encode_upload([report])
            async with s.post(f"{leader}tasks/{self.tid}/reports", data=body,
                              headers={"Content-Type": UPLOAD_TYPE}) as r:
                await r.read()
                assert r.status == profile.statuses["upload"], r.status

        async def collection() -> None:
            collector = Collector(pt.task, pt.collector_keypair, pt.collector_auth_token,
                                  session=s)
            # An interval of its own each time, long past: never collected before.
            query = Proto(profile.name).interval_query(
                pt, int(pair.clock()) // pt.task.time_precision - 1000 - self.rounds, 1)
            url, _ = await collector.start(query)
            await collector.poll(url)
            await collector.delete(url)

        await self._timed("leader hpke_config",
                          lambda: get(f"{leader}hpke_config?task_id={self.tid}", 200))
        await self._timed("leader upload", upload)
        await self._timed("leader collection_jobs", collection)
        await self._timed("helper hpke_config",
                          lambda: get(f"{helper}hpke_config?task_id={self.tid}", 200))
        await self._timed("helper aggregation_jobs", lambda: post(
            f"{helper}tasks/{self.tid}/aggregation_jobs", b"\x00",
            profile.media_type_for("AggregationJobInitReq"), 400))
        job = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()
        await self._timed("helper aggregation_job poll", lambda: get(
            f"{helper}tasks/{self.tid}/aggregation_jobs/{job}", 404, self.leader_auth))
        await self._timed("helper aggregate_shares", lambda: post(
            f"{helper}tasks/{self.tid}/aggregate_shares", b"\x00",
            profile.media_type_for("AggregateShareReq"), 400))

    async def during(self, attack: Awaitable[Any]) -> Any:
        """Run `attack`, probing every endpoint again and again until it ends, then once
        more; returns the attack's result."""
        task = asyncio.ensure_future(attack)
        while not task.done():
            await self.round()
            await asyncio.sleep(0.05)
        await self.round()
        return task.result()

    def check(self, label: str) -> None:
        print(f"\n{label}: {self.rounds} probe rounds, worst latency per endpoint (s):")
        for name, took in sorted(self.worst.items()):
            print(f"  {name:30s} {took:.3f}")
        slow = {n: t for n, t in self.worst.items() if t >= BOUND}
        assert not slow, f"{label}: endpoints of an unrelated task slower than {BOUND} s: " \
                         f"{slow}"


def _rows(pair: AggregatorPair, role: str, table: str, task_id: bytes) -> int:
    st = pair.leader_state if role == "leader" else pair.helper_state
    with st.datastore.transaction() as tx:
        return int(tx.c.execute(f"SELECT COUNT(*) FROM {table} WHERE task_id=?",  # type: ignore[attr-defined]
                                (bytes(task_id),)).fetchone()[0])


def _db_size(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


async def _pair(tmp_path: Path, **overrides: Any) -> tuple[AggregatorPair, ProvisionedTask,
                                                           ProvisionedTask, Prober]:
    """A Leader and Helper with the attacked task A (Count) and the unrelated task B."""
    leader = {**overrides.pop("leader", {}), **overrides}
    helper = {**overrides.pop("helper", {}), **overrides} if "helper" in overrides else \
        dict(overrides)
    pair = await AggregatorPair(tmp_path, leader_overrides=leader,
                                helper_overrides=helper).start()
    from ppm_reference.dap.profiles import get_profile

    count = get_profile("dap-18").build_vdaf("Prio3Count", {})
    a = pair.provision(count, min_batch_size=1)
    b = pair.provision(count, min_batch_size=1)
    prober = Prober(pair, b)
    await prober.prepare()
    return pair, a, b, prober


def _check_problem(status: int, ctype: str, body: bytes, expected: int) -> dict[str, Any]:
    assert status == expected, (status, body[:200])
    assert ctype == PROBLEM_MEDIA_TYPE, ctype
    doc: dict[str, Any] = json.loads(body)
    assert doc["status"] == expected and doc["type"] == "about:blank", doc
    return doc


# -- attacks --------------------------------------------------------------------------------


def test_gzip_bomb_is_refused_without_inflating(tmp_path: Path) -> None:
    """A 64 KiB gzip body that inflates to 64 MiB (the issue's 760 KiB one inflated to
    gigabytes): refused with 415 before a byte of it is read or inflated, on the Leader's
    upload and on the Helper's aggregation jobs (authenticated), for every content
    coding; the unrelated task's endpoints answer meanwhile; nothing is stored."""
    inflated = 64 * MiB
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
    block = bytes(MiB)
    bomb = b"".join(packer.compress(block) for _ in range(inflated // MiB)) + packer.flush()
    assert len(bomb) < inflated // 500
    assert len(gzip.decompress(bomb)) == inflated

    async def go() -> None:
        pair, a, b, prober = await _pair(tmp_path)
        try:
            tid = a.task.task_id.to_base64url()
            before = _db_size(pair.leader_config.datastore)
            auth = dict([a.task.profile.auth_header_for(a.aggregator_auth_token)])

            async def attack() -> None:
                async with aiohttp.ClientSession() as s:
                    for encoding in ("gzip", "deflate", "br", "gzip, identity"):
                        for url, headers in (
                                (f"{pair.leader_url}tasks/{tid}/reports",
                                 {"Content-Type": UPLOAD_TYPE}),
                                (f"{pair.helper_url}tasks/{tid}/aggregation_jobs",
                                 {**auth, "Content-Type": a.task.profile.media_type_for(
                                     "AggregationJobInitReq")})):
                            async with s.post(url, data=bomb, headers={
                                    **headers, "Content-Encoding": encoding}) as r:
                                _check_problem(r.status, r.content_type, await r.read(), 415)
                                assert r.headers["Accept-Encoding"] == "identity"

            with PeakRss() as rss:
                await prober.during(attack())
            print(f"\ngzip bomb: {len(bomb)} bytes inflating to {inflated}; resident set "
                  f"grew by {rss.growth / MiB:.1f} MiB")
            assert rss.growth < 32 * MiB
            assert _rows(pair, "leader", "client_reports", a.task.task_id) == 0
            assert _rows(pair, "helper", "aggregation_jobs", a.task.task_id) == 0
            # The datastore (with its WAL) also grows with the probes' legitimate traffic
            # to task B (uploads, jobs, collections: a few hundred KiB of WAL frames);
            # 1 MiB is far below the refused body, which stored would add 4 MiB or more.
            assert _db_size(pair.leader_config.datastore) - before < 1 * MiB
            prober.check("gzip bomb")
        finally:
            await pair.stop()

    asyncio.run(go())


def test_oversized_plain_body_is_refused_at_the_limit(tmp_path: Path) -> None:
    """The issue's 64 MiB plain upload, scaled down: with a 256 KiB upload limit, a 4 MiB
    body is refused with 413 -- at once when it declares its length, as soon as the limit
    is passed when it is sent chunked -- and nothing of it is stored; the memory it takes
    is bounded by the limit, not by the body."""
    limit = 256 * KiB
    body = secrets.token_bytes(4 * MiB)

    async def go() -> None:
        pair, a, b, prober = await _pair(tmp_path, max_upload_bytes=limit)
        try:
            tid = a.task.task_id.to_base64url()
            url = f"{pair.leader_url}tasks/{tid}/reports"
            before = _db_size(pair.leader_config.datastore)

            async def chunks() -> AsyncIterator[bytes]:
                for i in range(0, len(body), 64 * KiB):
                    yield body[i:i + 64 * KiB]

            async def attack() -> list[int]:
                seen = []
                async with aiohttp.ClientSession() as s:
                    for data in (body, chunks()):
                        try:
                            async with s.post(url, data=data,
                                              headers={"Content-Type": UPLOAD_TYPE}) as r:
                                doc = _check_problem(r.status, r.content_type,
                                                     await r.read(), 413)
                                assert str(limit) in doc["detail"]
                                assert doc["taskid"] == tid
                                seen.append(r.status)
                        except aiohttp.ClientOSError:
                            # The server may close the connection while the rest of a
                            # chunked body is still being sent (RFC 9110 Section 15.5.14).
                            seen.append(0)
                return seen

            with PeakRss() as rss:
                seen = await prober.during(attack())
            print(f"\noversized body: {len(body)} bytes against a {limit} byte limit: "
                  f"answers {seen}; resident set grew by {rss.growth / MiB:.1f} MiB")
            assert seen[0] == 413
            assert rss.growth < 16 * MiB
            assert _rows(pair, "leader", "client_reports", a.task.task_id) == 0
            # The datastore (with its WAL) also grows with the probes' legitimate traffic
            # to task B (uploads, jobs, collections: a few hundred KiB of WAL frames);
            # 1 MiB is far below the refused body, which stored would add 4 MiB or more.
            assert _db_size(pair.leader_config.datastore) - before < 1 * MiB
            prober.check("oversized plain body")
        finally:
            await pair.stop()

    asyncio.run(go())


def test_large_legitimate_upload_does_not_block_other_tasks(tmp_path: Path) -> None:
    """An upload of 8,000 reports (1.9 MB) is decoded and stored off
    the event loop in bounded transactions: the unrelated task answers within the bound
    meanwhile, and exactly the accepted reports are stored."""
    n = 8_000

    async def go() -> None:
        # No aggregation during the test (the reports are copies of one, with new IDs).
        pair, a, b, prober = await _pair(tmp_path, min_job_size=10**6,
                                         max_job_size=10**6, straggler_age=1e9)
        try:
            client = pair.client(a)
            [report] = await client.prepare([1])
            await client.close()
            md = report.report_metadata
            reports = [dataclasses.replace(report, report_metadata=dataclasses.replace(
                md, report_id=ReportID(secrets.token_bytes(16)))) for _ in range(n)]
            _, body = a.task.profile.flow.encode_upload(reports)
            tid = a.task.task_id.to_base64url()

            async def attack() -> float:
                t0 = time.perf_counter()
                async with aiohttp.ClientSession() as s, s.post(
                        f"{pair.leader_url}tasks/{tid}/reports", data=body,
                        headers={"Content-Type": UPLOAD_TYPE}) as r:
                    await r.read()
                    assert r.status == a.task.profile.statuses["upload"], r.status
                return time.perf_counter() - t0

            took = await prober.during(attack())
            print(f"\nlegitimate upload of {n} reports ({len(body)} bytes) took {took:.2f} s")
            assert _rows(pair, "leader", "client_reports", a.task.task_id) == n
            prober.check("large legitimate upload")
        finally:
            await pair.stop()

    asyncio.run(go())


def test_slow_bodies_time_out(tmp_path: Path) -> None:
    """Twenty clients each declare a 100 kB body and send 10 bytes of it: each gets 408
    with a problem document once `body_timeout` (1 s here) has passed, and its connection
    is closed; the unrelated task answers meanwhile; nothing is stored."""

    async def go() -> None:
        pair, a, b, prober = await _pair(tmp_path, body_timeout=1.0)
        try:
            tid = a.task.task_id.to_base64url()

            async def slow_client() -> tuple[float, bytes]:
                reader, writer = await asyncio.open_connection("127.0.0.1", pair.leader_port)
                t0 = time.perf_counter()
                writer.write(f"POST /tasks/{tid}/reports HTTP/1.1\r\nHost: x\r\n"
                             f"Content-Type: {UPLOAD_TYPE}\r\nContent-Length: 100000\r\n\r\n"
                             .encode() + bytes(10))
                await writer.drain()
                data = await asyncio.wait_for(reader.read(), 10)  # until the server closes
                writer.close()
                return time.perf_counter() - t0, data

            async def attack() -> list[tuple[float, bytes]]:
                return list(await asyncio.gather(*(slow_client() for _ in range(20))))

            with PeakRss() as rss:
                results = await prober.during(attack())
            assert rss.growth < 32 * MiB, rss.growth
            for took, data in results:
                head, _, payload = data.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 408"), head
                assert f"Content-Type: {PROBLEM_MEDIA_TYPE}".encode() in head
                assert json.loads(payload)["status"] == 408
                assert 0.9 < took < 1.0 + 2.5, took
            print(f"\nslow bodies: answered 408 after {min(t for t, _ in results):.2f} to "
                  f"{max(t for t, _ in results):.2f} s")
            assert _rows(pair, "leader", "client_reports", a.task.task_id) == 0
            prober.check("slow bodies")
        finally:
            await pair.stop()

    asyncio.run(go())


def test_slow_headers_are_dropped(tmp_path: Path) -> None:
    """Twenty clients trickle a request header a byte every 0.2 s and never finish it:
    each connection is closed once `idle_timeout` (1 s here) has passed since it opened,
    whatever it keeps sending; the unrelated task answers meanwhile."""

    async def go() -> None:
        pair, a, b, prober = await _pair(tmp_path, idle_timeout=1.0)
        try:
            async def trickle() -> float:
                reader, writer = await asyncio.open_connection("127.0.0.1", pair.leader_port)
                t0 = time.perf_counter()
                header = b"POST /tasks/x/reports HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 60
                try:
                    for byte in header:
                        writer.write(bytes([byte]))
                        await writer.drain()
                        if reader.at_eof():
                            break
                        try:
                            if await asyncio.wait_for(reader.read(1), 0.2) == b"":
                                break
                        except TimeoutError:
                            pass
                except ConnectionError:
                    pass
                writer.close()
                return time.perf_counter() - t0

            async def attack() -> list[float]:
                return list(await asyncio.gather(*(trickle() for _ in range(20))))

            with PeakRss() as rss:
                took = await prober.during(attack())
            assert rss.growth < 32 * MiB, rss.growth
            print(f"\nslow headers: connections closed after {min(took):.2f} to "
                  f"{max(took):.2f} s (the whole header would take 14 s)")
            assert all(0.9 < t < 1.0 + 2.5 for t in took), took
            prober.check("slow headers")
        finally:
            await pair.stop()

    asyncio.run(go())


def test_many_idle_connections_cannot_lock_out_clients(tmp_path: Path) -> None:
    """The issue's 20,119 idle connections, scaled down: with `max_connections` 16, 300
    connections that send nothing hold at most 16 of the Leader's file descriptors, and a
    new client still gets in (the oldest idle connection makes way) and is answered
    within the bound."""
    cap = 16

    async def go() -> None:
        pair, a, b, prober = await _pair(tmp_path, max_connections=cap, idle_timeout=60.0)
        try:
            runner = pair.runners[-1]   # the Leader's (started last)
            guarded = runner.guarded    # type: ignore[attr-defined]
            assert guarded is not None
            idle: list[asyncio.StreamWriter] = []

            async def attack() -> int:
                peak = 0
                for _ in range(300):
                    _, writer = await asyncio.open_connection("127.0.0.1", pair.leader_port)
                    idle.append(writer)
                    await asyncio.sleep(0)
                    peak = max(peak, guarded.open_connections)
                await asyncio.sleep(0.2)
                return max(peak, guarded.open_connections)

            with PeakRss() as rss:
                peak = await prober.during(attack())
            print(f"\nidle connections: 300 opened, at most {peak} held by the Leader "
                  f"(cap {cap}); {guarded.evicted} idle ones evicted, {guarded.refused} "
                  f"refused; resident set grew by {rss.growth / MiB:.1f} MiB")
            assert rss.growth < 32 * MiB
            assert peak <= cap
            assert guarded.evicted >= 300 - cap
            prober.check("many idle connections")
            for writer in idle:
                writer.close()
        finally:
            await pair.stop()

    asyncio.run(go())


def test_large_aggregation_job_does_not_block_the_helper(tmp_path: Path) -> None:
    """One aggregation job of 1,500 reports (the issue's 50,000-share job blocked the
    Helper's event loop for 19.5 s): the Leader prepares it and the Helper decrypts and
    prepares every report in worker threads, the transaction only checking and
    committing; every endpoint of the unrelated task, on both Aggregators, answers within
    the bound meanwhile; then all the reports are aggregated, once."""
    n = 1500

    async def go() -> None:
        pair, a, b, prober = await _pair(tmp_path, min_job_size=n, max_job_size=n,
                                         straggler_age=1e9)
        try:
            client = pair.client(a)
            reports = await client.prepare([1] * n)
            await client.close()
            _, body = a.task.profile.flow.encode_upload(reports)
            tid = a.task.task_id.to_base64url()

            async def attack() -> float:
                t0 = time.perf_counter()
                async with aiohttp.ClientSession() as s, s.post(
                        f"{pair.leader_url}tasks/{tid}/reports", data=body,
                        headers={"Content-Type": UPLOAD_TYPE}) as r:
                    assert r.status == 201 or r.status == 200, r.status
                while _rows_where(pair, "helper", a) < n:
                    await asyncio.sleep(0.05)
                    assert time.perf_counter() - t0 < 120, "the job did not finish"
                return time.perf_counter() - t0

            took = await prober.during(attack())
            print(f"\naggregation job of {n} reports: aggregated by the Helper after "
                  f"{took:.2f} s")
            assert _rows(pair, "helper", "aggregated_reports", a.task.task_id) == n
            prober.check("large aggregation job")
        finally:
            await pair.stop()

    asyncio.run(go())


def _rows_where(pair: AggregatorPair, role: str, pt: ProvisionedTask) -> int:
    return _rows(pair, role, "aggregated_reports", pt.task.task_id)


# -- aiohttp's own errors and the admin API --------------------------------------------------


@pytest.mark.parametrize("request_bytes", [
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 20000 + b"\r\n\r\n",
    b"POST /hpke_config HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
])
def test_parser_errors_are_problem_documents(tmp_path: Path, request_bytes: bytes,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """A request aiohttp cannot parse is answered with a problem document (not
    text/plain), logged in one line without a traceback."""

    async def go() -> bytes:
        async with AggregatorPair(tmp_path) as pair:
            reader, writer = await asyncio.open_connection("127.0.0.1", pair.leader_port)
            writer.write(request_bytes)
            await writer.drain()
            data = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            return data

    data = asyncio.run(go())
    head, _, payload = data.partition(b"\r\n\r\n")
    assert head.split(b" ")[1][:1] == b"4", head
    assert f"Content-Type: {PROBLEM_MEDIA_TYPE}".encode() in head, head
    doc = json.loads(payload)
    assert doc["type"] == "about:blank" and 400 <= doc["status"] < 500
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


def test_admin_api_bad_input_is_400_not_500(tmp_path: Path) -> None:
    """The issue's admin API 500s: a non-integer or out-of-range key ID, a malformed task
    ID, epsilon 0 in a task's DP policy, an oversized body: each a 4xx problem document
    without exception text."""
    from ppm_reference.dap.profiles import get_profile

    async def go() -> None:
        async with AggregatorPair(tmp_path, leader_overrides={
                "admin_token": "t", "max_admin_bytes": 64 * KiB}) as pair:
            L = pair.leader_url
            auth = {"Authorization": "Bearer t"}
            hist = get_profile("dap-18").build_vdaf("Prio3Histogram",
                                                    {"length": 4, "chunk_length": 2})
            from ppm_reference.dap.provision import new_task
            # The epsilon 0: provisioning it makes the policy divide by zero.
            zero = new_task(hist, L, pair.helper_url, profile=get_profile("dap-18"),
                            dp_policy={"policy": "HistogramWithAggregatorLaplace",
                                       "epsilon": 0.0}).admin_json("leader")
            # A config ID no key has (the pair's keys get random ones: a fixed 77 was
            # taken once in 256 runs).
            async with aiohttp.ClientSession() as s, s.get(
                    L + "internal/hpke_keys", headers=auth) as r:
                used = {k["config_id"] for k in await r.json()}
            unused = min(set(range(256)) - used)
            cases = [
                ("PUT", "internal/hpke_keys/abc", {"state": "active"}, 400),
                ("PUT", "internal/hpke_keys/999", {"state": "active"}, 400),
                ("DELETE", "internal/hpke_keys/x1", None, 400),
                ("PUT", f"internal/hpke_keys/{unused}", {"state": "active"}, 404),
                ("POST", "internal/hpke_keys", {"config_id": "abc"}, 400),
                ("DELETE", "internal/tasks/%%%", None, 400),
                ("POST", "internal/tasks", zero, 400),
                ("POST", "internal/tasks", {"x": "y" * (70 * KiB)}, 413),
            ]
            async with aiohttp.ClientSession() as s:
                for method, path, body, expected in cases:
                    async with s.request(method, L + path, headers=auth,
                                         data=None if body is None else json.dumps(body)
                                         ) as r:
                        payload = await r.read()
                        assert r.status == expected, (method, path, r.status, payload)
                        assert r.content_type == PROBLEM_MEDIA_TYPE
                        text = payload.decode()
                        assert "Traceback" not in text and "invalid literal" not in text, \
                            text

    asyncio.run(go())


def test_connection_cap_fits_the_file_descriptor_limit(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """The issue's flood ended in "Too many open files": the cap is lowered below the
    process's descriptor limit, keeping descriptors for the datastore and the Helper."""
    import resource

    from ppm_reference.dap.server.serving import FD_RESERVE, connection_cap

    monkeypatch.setattr(resource, "getrlimit", lambda _which: (1024, 4096))
    assert connection_cap(1000) == 1024 - FD_RESERVE
    assert connection_cap(500) == 500
