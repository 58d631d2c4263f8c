"""Simulation test: seeded random operation sequences against a Leader and a Helper,
with invariants checked after every operation (DESIGN.md: "a simulation test drives
random operation sequences against invariants").

The model
---------
*Aggregators.* Each Aggregator is the real application state
(`dap.server.app.build_app(..., background=False)`) on its own SQLite file. Requests are
handled by the real handlers of `dap.server.leader` / `dap.server.helper` (behind the real
problem-document middleware) and background work by the real code: the Leader's
`LeaderWorker.create_jobs`, `.step_jobs` and `.drive_collections`, the Helper's
`run_pending`. All of them call the protocol core (`dap.core`) in datastore transactions.
Nothing listens on a socket; one event loop runs everything, so a seed replays the
same run: the operations, task and report IDs and the VDAF randomness come from the
simulation's seeded generator, and everything the protocol core draws (job, batch and
aggregate share IDs, HPKE config IDs and key pairs) from a `dap.core.rand.SeededRng`
per Aggregator, passed to `build_app` (`test_simulation_is_reproducible` checks it).
Only HPKE encapsulation randomness (Clients' and Aggregators' ciphertexts) differs
between runs, which no decision depends on. The handlers and
background steps are thin layers over the core; driving them rather than the core
functions alone also covers the glue that makes work resumable (stored requests, leases,
retries, polling), at the same speed.

*Profiles.* Every shipped DAP profile runs the same simulation (`test_simulation` is
parametrized by profile and seed). Nothing here names a draft: routes come from the
profile's `requests` and `resources` (DAP-09 PUTs and POSTs where DAP-18 POSTs and
GETs), messages are written and read by `profile.flow` (Clients, Collector) and
`profile.wire` (the core's neutral view: report counts, intervals in time_precision
units, core `ReportError`s), and what differs is asked of the profile:
`flow.one_report_per_request` (DAP-09 uploads each report in its own PUT and refuses one
with a problem document, read through `flow.upload_problems`),
`flow.collector_chooses_job_id` (DAP-09 Collectors name their collection jobs), report
times from `flow.report_time` and result intervals in `flow.interval_unit`.

*Network.* A fake HTTP transport (`Network.send`) routes a request by host, method and
path (the profile's routes) to the Aggregator's handler. Leader->Helper, Client->Leader
and Collector->Leader exchanges can be: delivered; lost before delivery; delivered and
processed but the answer lost; delivered twice (the sender sees the second answer);
timed out; or delivered and also kept as a stale duplicate, delivered again much later
by the `stale_delivery` operation. Senders retry byte-identical requests, as the draft
requires.

*Crashes.* A crash of an Aggregator is armed at a random future datastore operation
(any call on a transaction, or the moment just before a transaction begins or just
after it commits). That call raises `Crash`, a BaseException no handler catches: the
open transaction rolls back and from then on every transaction and every request to
that Aggregator fails, as for a dead process (a Helper dying while handling a request
looks to the Leader like a dropped connection). `restart` builds a new app on the same
SQLite file: the task cache, the keyring, the worker's in-memory state (where the
Helper put deferred aggregate shares) are lost; leases taken by the dead process stay
in the datastore until they expire.

*Time.* A simulated clock, advanced by every operation and sometimes by a jump;
leases, Retry-After, backoff, straggler and give-up delays are measured on it.

*Tasks.* Two tasks run side by side in the same datastores: time-interval with
Prio3Histogram(length 4) and leader-selected (DAP-09: fixed_size, max_batch_size 10)
with Prio3Count (target batch size 10), the VDAFs of the profile's VDAF draft. The
Helper runs some seeds synchronously and some asynchronously (jobs answered by its
background worker, polled by the Leader).

Operations (weighted random choice): upload of new reports (sometimes a report twice in
one request, a replay of an earlier report, a report with a corrupted input share for
either Aggregator, a report for an older, possibly collected, interval, or from the
future); retry of an upload whose answer was lost; job creation; job stepping; Helper
background work; collection requests (random intervals; leader-selected) and their
retries; driving collections; polling them (and deleting finished leader-selected
jobs, so that the next identical request makes a new job); arming a crash; restarts;
clock jumps; stale deliveries; a forged replay (report shares the Helper already
aggregated, sent in a new job, as a misbehaving Leader would: all must be rejected).
The attacker's moves (`Simulation.ATTACKS`, issue 12), to the Leader's uploads or the
Helper's aggregation jobs: a body over the resource's limit (declared or chunked), a
compressed body, a body slower than the body timeout; each must be refused (413, 415,
408, problem document) and leave its table as it was. And `trickle`: a burst of
single-report uploads into one recent interval, interleaved with background work
(invariant I8: a pending collection never waits for them).

Invariants, after every operation, read from both SQLite files:
  I1  no report ID is in two finished report aggregations of one Aggregator, and the
      finished ones are exactly the Aggregator's `aggregated_reports` (and, Leader, the
      reports in state `aggregated`); a report in state `in_job` is in an active job;
  I2  every batch bucket's count and checksum are those of the finished report
      aggregations that belong to it (so no report is counted twice in the buckets);
  I3  once a batch is collected by either Aggregator its buckets never change, and
      the Leader and the Helper hold the same reports in it;
  I4  every released aggregate (Leader's collection, Helper's aggregate share)
      covers at least min_batch_size reports;
  I5  every released collection decrypts (collector key, both shares) to exactly the
      sum of the measurements of the reports the Leader and the Helper both counted,
      with that report count, and its interval holds every one of them; no report is in
      two released batches; no report with a corrupted share is ever counted;
  I6  no collection fails with batchMismatch (the Aggregators are honest);
  I7  the Leader freezes (marks collected) only batches that a collection job is
      releasing, and the Helper only batches the Leader froze;
  I8  a pending time-interval collection job never has reports of its interval that
      were uploaded after its cutoff aggregated while it waits (the `trickle` move:
      collection completes the pending jobs and moves on, DAP-18 Section 4.6.1).
At the end the faults stop and the system runs until quiet; then every stored report is
aggregated or failed for a legitimate reason (corrupted share, or its interval was
collected first), and the Leader and the Helper agree on every batch bucket.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import os
import random
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict

from ppm_reference.dap.common import (
    BatchMode,
    Duration,
    Interval,
    ReportError,
    Time,
    VerifyRespType,
    batch_checksum,
)
from ppm_reference.dap.core.buckets import time_bucket
from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.core.rand import SeededRng
from ppm_reference.dap.core.tasks import AggregatorTask, Keyring
from ppm_reference.dap.problems import ProblemDocument, ProblemDocumentError
from ppm_reference.dap.profiles import SHIPPED, Profile, get_profile
from ppm_reference.dap.provision import ProvisionedTask, new_task
from ppm_reference.dap.server import helper as helper_server
from ppm_reference.dap.server import leader as leader_server
from ppm_reference.dap.server.app import build_app
from ppm_reference.dap.server.common import STATE_KEY, AppState, problem_middleware
from ppm_reference.dap.server.config import AggregatorConfig
from ppm_reference.dap.storage import open_datastore
from tests.pg_harness import BACKENDS, raw_connect

# The attacker's moves (Simulation.ATTACKS) exceed these.
ATTACK_LIMITS = {"upload": 64 * 1024, "aggregation_job": 256 * 1024}
ATTACK_BODY_TIMEOUT = 0.02  # seconds of real time: a slow body's chunks come later

LEADER_URL = "http://leader.sim/"
HELPER_URL = "http://helper.sim/"
T0 = 1_750_000_020.0  # start of the simulated clock (seconds)
PRECISION = 60        # time_precision of both tasks



class Crash(BaseException):
    """A simulated process crash (BaseException: no handler of the code under test
    catches it, as nothing survives a real crash)."""


# -- processes that can crash ---------------------------------------------------------------


class Faults:
    """Whether a process is dead, and the crash armed to hit it."""

    def __init__(self, counts: dict[str, int], countdown: int | None = None) -> None:
        self.dead = False
        self.countdown = countdown
        self.counts = counts

    def tick(self) -> None:
        if self.dead:
            raise Crash("dead process")
        if self.countdown is not None:
            self.countdown -= 1
            if self.countdown <= 0:
                self.dead = True
                self.countdown = None
                self.counts["crashes"] = self.counts.get("crashes", 0) + 1
                raise Crash("crash")


class CrashingTransaction:
    """A transaction whose every call may be the one where the process dies."""

    def __init__(self, tx: Any, faults: Faults) -> None:
        self._tx = tx
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._tx, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._faults.tick()
            return attr(*args, **kwargs)
        return call


class CrashingDatastore:
    def __init__(self, spec: str, faults: Faults) -> None:
        # SQLite with synchronous=OFF: the model has process crashes, not power losses.
        self.inner = open_datastore(spec, sqlite_synchronous="OFF")
        self.faults = faults

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        self.faults.tick()
        with self.inner.transaction() as tx:
            yield CrashingTransaction(tx, self.faults)
        self.faults.tick()  # committed, then died before acting on it

    @contextmanager
    def read(self) -> Iterator[Any]:
        self.faults.tick()
        with self.inner.read() as tx:
            yield CrashingTransaction(tx, self.faults)

    def upload_transaction(self) -> Any:
        return self.transaction()

    def close(self) -> None:
        self.inner.close()


class Node:
    """One Aggregator process: restartable on the same SQLite file."""

    def __init__(self, sim: Simulation, config: AggregatorConfig) -> None:
        self.sim = sim
        self.config = config
        self.role = config.role
        # The protocol core's randomness; a restarted process continues the stream.
        self.core_rng = sim.core_rng.child(config.role)
        self.path = config.datastore    # a SQLite path or a PostgreSQL URL
        self.ds: CrashingDatastore | None = None
        self.faults = Faults(sim.counts)
        self.starts = 0
        self.start()

    def start(self) -> None:
        if self.ds is not None:
            self.ds.close()
        # A new process; a crash armed for the old one (if it is alive) stays armed.
        self.faults = Faults(self.sim.counts,
                             None if self.faults.dead else self.faults.countdown)
        self.ds = CrashingDatastore(self.path, self.faults)
        self.app = build_app(self.config, datastore=self.ds, clock=self.sim.clock,
                             background=False, rng=self.core_rng)
        self.st: AppState = self.app[STATE_KEY]
        self.worker: leader_server.LeaderWorker | None = None
        if self.role == "leader":
            self.worker = leader_server.LeaderWorker(self.app, self.st)
            self.worker.session = FakeSession(self.sim)  # type: ignore[assignment]
        self.starts += 1

    @property
    def dead(self) -> bool:
        return self.faults.dead


# -- the network ----------------------------------------------------------------------------

_ID = r"[A-Za-z0-9_-]+"
# The server's handler of each operation of `Profile.requests`, by HTTP method where the
# drafts differ (DAP-09 creates aggregation and collection jobs with PUT to an ID its
# sender chose, DAP-18 with POST to the collection).
HANDLERS: dict[tuple[str, str], Any] = {
    ("upload", "POST"): leader_server.put_or_post_reports,
    ("upload", "PUT"): leader_server.put_or_post_reports,
    ("collection_job_create", "POST"): leader_server.post_collection_jobs,
    ("collection_job_create", "PUT"): leader_server.put_collection_job,
    ("collection_job_poll", "GET"): leader_server.poll_collection_job,
    ("collection_job_poll", "POST"): leader_server.poll_collection_job,
    ("collection_job_delete", "DELETE"): leader_server.delete_collection_job,
    ("aggregation_job_init", "POST"): helper_server.post_aggregation_jobs,
    ("aggregation_job_init", "PUT"): helper_server.put_aggregation_job,
    ("aggregation_job_continue", "POST"): helper_server.post_aggregation_job,
    ("aggregation_job_poll", "GET"): helper_server.get_aggregation_job,
    ("aggregation_job_delete", "DELETE"): helper_server.delete_aggregation_job,
    ("aggregate_share_create", "POST"): helper_server.post_aggregate_shares,
    ("aggregate_share_poll", "GET"): helper_server.get_aggregate_share,
}
# Not simulated: the HPKE configurations are read from the keyrings.
UNROUTED = {"hpke_config"}
# URL template variable -> the handlers' match_info key.
URL_VARS = {"task-id": "task_id", "aggregation-job-id": "job_id",
            "collection-job-id": "job_id", "aggregate-share-id": "share_id"}
HOSTS = {"{leader}": "leader", "{helper}": "helper"}


def routes(profile: Profile) -> dict[str, list[tuple[str, re.Pattern[str], Any]]]:
    """The routes of each Aggregator, from the profile's operations and resources."""
    out: dict[str, list[tuple[str, re.Pattern[str], Any]]] = {"leader": [], "helper": []}
    for operation, (method, resource) in profile.requests.items():
        if operation in UNROUTED:
            continue
        handler = HANDLERS[(operation, method)]
        template = profile.resources[resource].split("?")[0]
        host, path = next((role, template[len(var):]) for var, role in HOSTS.items()
                          if template.startswith(var))
        pattern = re.escape(path)
        for var in re.findall(r"\{([a-z-]+)\}", path):
            pattern = pattern.replace(re.escape("{" + var + "}"),
                                      rf"(?P<{URL_VARS[var]}>{_ID})")
        out[host].append((method, re.compile(pattern), handler))
    for table in out.values():  # one handler per (method, path)
        keys = [(m, p.pattern) for m, p, _ in table]
        assert len(keys) == len(set(keys)), keys
    return out


class FakeBody:
    """What the handlers use of a request's `content` stream: chunks of the body, each
    after `delay` seconds (an attacker's slow body)."""

    def __init__(self, body: bytes, delay: float = 0.0, chunk: int = 65536) -> None:
        self._body = body
        self._delay = delay
        self._chunk = chunk

    def is_eof(self) -> bool:
        """Whether the whole body is in (aiohttp: it came with the header); a slow body
        is not."""
        return not self._delay

    def read_nowait(self) -> bytes:
        out, self._body = self._body, b""
        return out

    async def readany(self) -> bytes:
        if self._delay:
            await asyncio.sleep(self._delay)
        out, self._body = self._body[:self._chunk], self._body[self._chunk:]
        return out


class FakeRequest:
    """What the handlers use of `aiohttp.web.Request`. `chunked`: no Content-Length (the
    server counts the bytes as they come); `delay`: seconds before each chunk."""

    def __init__(self, app: web.Application, method: str, path: str, query: dict[str, str],
                 headers: dict[str, str], body: bytes, match_info: dict[str, str],
                 chunked: bool = False, delay: float = 0.0) -> None:
        self.app = app
        self.method = method
        self.path = path
        self.query = query
        self.headers = CIMultiDict(headers)
        self.match_info = match_info
        self._body = body
        self.content_length = None if chunked else len(body)
        self.content = FakeBody(body, delay)

    async def read(self) -> bytes:
        return self._body


@dataclass
class FakeResponse:
    status: int
    headers: CIMultiDict[str]
    body: bytes
    url: str = ""

    async def read(self) -> bytes:
        return self.body

    def __post_init__(self) -> None:
        self.content_length = len(self.body)
        self.content = FakeBody(self.body)  # what read_response reads


class _Exchange:
    def __init__(self, sim: Simulation, method: str, url: str, data: bytes | None,
                 headers: dict[str, str] | None) -> None:
        self.args = (method, url, data or b"", dict(headers or {}))
        self.sim = sim

    async def __aenter__(self) -> FakeResponse:
        return await self.sim.network.send(*self.args)

    async def __aexit__(self, *exc: object) -> None:
        return None


class FakeSession:
    """Stands in for the Leader worker's `aiohttp.ClientSession`."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def request(self, method: str, url: str, data: bytes | None = None,
                headers: dict[str, str] | None = None,
                allow_redirects: bool = True) -> _Exchange:
        # The Leader's credential never follows a redirect (dap/origin.py).
        assert not allow_redirects, "the Leader would follow a redirect with its token"
        return _Exchange(self.sim, method, url, data, headers)

    def delete(self, url: str, headers: dict[str, str] | None = None,
               allow_redirects: bool = True) -> _Exchange:
        assert not allow_redirects, "the Leader would follow a redirect with its token"
        return _Exchange(self.sim, "DELETE", url, None, headers)


class Network:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.routes = routes(sim.profile)
        self.faulty = True
        self.stale: list[tuple[str, str, bytes, dict[str, str]]] = []
        self.stats: dict[str, int] = {}
        # The init requests the Helper accepted, (path, body): the forged replay's shares
        # (the Helper does not keep a request once it has answered it).
        self.init_requests: list[tuple[str, bytes]] = []
        self.init_type = sim.profile.media_type_for("AggregationJobInitReq")

    def _fault(self) -> str:
        if not self.faulty:
            return "ok"
        r = self.sim.rng.random()
        for name, p in (("lose_request", 0.07), ("lose_response", 0.07), ("duplicate", 0.05),
                        ("timeout", 0.02), ("keep_stale", 0.04)):
            if r < p:
                return name
            r -= p
        return "ok"

    async def deliver(self, method: str, url: str, body: bytes,
                      headers: dict[str, str], chunked: bool = False,
                      delay: float = 0.0) -> FakeResponse:
        parts = urlsplit(url)
        node = self.sim.leader if parts.netloc == "leader.sim" else self.sim.helper
        if node.dead:
            raise aiohttp.ClientConnectionError("connection refused")
        for route_method, pattern, handler in self.routes[node.role]:
            m = pattern.fullmatch(parts.path)
            if route_method == method and m:
                request = FakeRequest(node.app, method, parts.path, dict(parse_qsl(parts.query)),
                                      headers, body, m.groupdict(), chunked, delay)
                try:
                    resp = await problem_middleware(request, handler)  # type: ignore[arg-type]
                except Crash:
                    raise aiohttp.ServerDisconnectedError() from None
                assert isinstance(resp, web.Response)
                if node is self.sim.helper and resp.status < 300 \
                        and headers.get("Content-Type") == self.init_type:
                    self.init_requests.append((parts.path, body))  # accepted
                return FakeResponse(resp.status, CIMultiDict(resp.headers),
                                    bytes(resp.body or b""))  # type: ignore[arg-type]
        return FakeResponse(404, CIMultiDict(), b"")

    async def send(self, method: str, url: str, body: bytes,
                   headers: dict[str, str]) -> FakeResponse:
        fault = self._fault()
        self.stats[fault] = self.stats.get(fault, 0) + 1
        if fault == "lose_request":
            raise aiohttp.ClientConnectionError("request lost")
        if fault == "timeout":
            raise TimeoutError()
        if fault == "keep_stale":
            self.stale.append((method, url, body, headers))
        resp = await self.deliver(method, url, body, headers)
        if fault == "duplicate":
            resp = await self.deliver(method, url, body, headers)
        if fault == "lose_response":
            raise aiohttp.ServerDisconnectedError()
        return resp


# -- the simulation -------------------------------------------------------------------------


@dataclass
class Collection:
    """A collection the Collector asked for: its request and, where the Collector names
    its jobs (DAP-09), the job ID it chose."""

    req: Any                                      # the profile's collection request
    job_id: bytes | None = None


@dataclass
class SimTask:
    pt: ProvisionedTask
    measure: Any                                  # rng -> measurement
    expected: Any                                 # list of measurements -> result
    reports: list[Any] = field(default_factory=list)
    measurement: dict[bytes, Any] = field(default_factory=dict)
    corrupted: set[bytes] = field(default_factory=set)
    pending_uploads: list[tuple[str, bytes]] = field(default_factory=list)
    pending_collections: list[Collection] = field(default_factory=list)
    collection_urls: dict[str, Any] = field(default_factory=dict)  # job URL -> request
    released: dict[bytes, str] = field(default_factory=dict)   # report ID -> job URL
    # job URL -> the result it released: a repeated query for a released batch gets the
    # stored result (the same bytes) under another job, which is not a second release.
    release_bodies: dict[str, bytes] = field(default_factory=dict)
    verified: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        # The task as the protocol core holds it: what the wire's decoders take.
        self.core = AggregatorTask.from_record(self.pt.record("leader"), get_profile)

    @property
    def tid(self) -> bytes:
        return bytes(self.pt.task.task_id)

    @property
    def ti(self) -> bool:
        return self.pt.task.batch_mode == BatchMode.TIME_INTERVAL


class Simulation:
    def __init__(self, tmp_path: Path, seed: int, async_helper: bool,
                 profile: Profile, spec: Callable[[str], str] | None = None) -> None:
        """`spec(role)` names each Aggregator's datastore (default: SQLite files in
        tmp_path; tests.pg_harness gives PostgreSQL schemas)."""
        spec = spec or (lambda role: str(tmp_path / f"{role}.sqlite"))
        self.profile = profile
        self.flow = profile.flow
        self.wire = profile.wire
        self.rng = random.Random(seed)
        self.core_rng = SeededRng(seed + 1000)
        self.counts: dict[str, int] = {}
        self.now = T0
        self.loop = asyncio.new_event_loop()
        self.network = Network(self)
        base = {"worker_interval": 0.05, "retry_after": 1, "straggler_age": 2.0,
                "min_job_size": 3, "max_job_size": 8, "job_concurrency": 3,
                "job_lease": 20.0, "collection_give_up_after": 400.0,
                # Blocking work on the event loop: a seed replays the same run.
                "worker_threads": 0,
                # Limits the attacker's moves exceed (honest requests stay far below).
                "max_upload_bytes": ATTACK_LIMITS["upload"],
                "max_aggregation_job_bytes": ATTACK_LIMITS["aggregation_job"],
                "body_timeout": ATTACK_BODY_TIMEOUT}
        self.leader = Node(self, AggregatorConfig(
            role="leader", datastore=spec("leader"), **base))  # type: ignore
        self.helper = Node(self, AggregatorConfig(
            role="helper", datastore=spec("helper"),
            async_helper=async_helper, **base))  # type: ignore[arg-type]
        self.tasks = [
            SimTask(new_task(profile.build_vdaf("Prio3Histogram",
                                                {"length": 4, "chunk_length": 2}),
                             LEADER_URL, HELPER_URL,
                             time_precision=PRECISION, min_batch_size=5,
                             task_id=self.rng.randbytes(32), profile=profile),
                    lambda rng: rng.randrange(4),
                    lambda ms: [ms.count(i) for i in range(4)]),
            SimTask(new_task(profile.build_vdaf("Prio3Count", {}), LEADER_URL, HELPER_URL,
                             batch_mode=BatchMode.LEADER_SELECTED, min_batch_size=6,
                             max_batch_size=10, time_precision=PRECISION,
                             task_id=self.rng.randbytes(32), profile=profile),
                    lambda rng: rng.randrange(2), sum),
        ]
        for node, role in ((self.leader, "leader"), (self.helper, "helper")):
            assert node.ds is not None
            with node.ds.inner.transaction() as tx:
                for t in self.tasks:
                    tx.put_task(t.pt.record(role))
        self.configs = {}
        for node in (self.leader, self.helper):
            assert node.ds is not None
            with node.ds.inner.transaction() as tx:
                self.configs[node.role] = Keyring.load(tx).config_list().configs[0]
        self.db = {node.role: raw_connect(node.path)
                   for node in (self.leader, self.helper)}
        # At least one crash per run (more are armed by `arm_crash`).
        self.rng.choice([self.leader, self.helper]).faults.countdown = \
            self.rng.randint(20, 150)
        self.snapshots: dict[tuple[str, bytes, bytes], tuple[Any, ...]] = {}
        # The upload errors a Client may legitimately see, as it reads them: a replay, a
        # report for a collected batch, a report from the future (as the profile's wire
        # writes them: DAP-09 ignores replays and refuses the others with problems).
        self.upload_errors = {
            task.tid: {self.client_reading(task, e) for e in (
                ReportError.REPORT_REPLAYED, ReportError.BATCH_COLLECTED,
                ReportError.REPORT_TOO_EARLY)} - {None}
            for task in self.tasks}

    def clock(self) -> float:
        return self.now

    def unit(self) -> int:
        return int(self.now) // PRECISION

    def close(self) -> None:
        for conn in self.db.values():
            conn.close()
        for node in (self.leader, self.helper):
            if node.ds is not None:
                node.ds.close()
        self.loop.close()

    def run(self, coro: Any) -> Any:
        """Run a coroutine; if a process crashed, what it had started dies with it."""
        try:
            return self.loop.run_until_complete(coro)
        finally:
            pending = asyncio.all_tasks(self.loop)
            for t in pending:
                t.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))

    # -- requests, as the profile writes them ----------------------------------------------

    def url(self, operation: str, base: str, task: SimTask, **ids: bytes) -> tuple[str, str]:
        """(method, URL) of an operation; ids the resource's URL does not name are left
        out (a Leader-named job in DAP-18, a Collector-named one in DAP-09)."""
        method, resource = self.profile.request(operation)
        template = self.profile.resources[resource]
        ids = {k: v for k, v in ids.items() if "{" + k.replace("_", "-") + "}" in template}
        return method, self.profile.resource_url(resource, base, task_id=task.tid, **ids)

    def auth(self, token: str) -> dict[str, str]:
        name, value = self.profile.auth_header_for(token)
        return {name: value}

    def problem(self, resp: FakeResponse) -> str | None:
        """The DAP error type of a problem-document answer, in the profile's spelling."""
        try:
            doc = ProblemDocument.from_json(resp.body)
        except ProblemDocumentError:
            return None
        token = doc.dap_problem(self.profile)
        return None if token is None else str(token)

    def client_reading(self, task: SimTask, error: ReportError) -> ReportError | None:
        """How a Client of the profile reads the Leader refusing a report with `error`
        (None: the Leader does not tell it)."""
        rid = bytes(16)
        try:
            body = self.wire.upload_answer(task.core, [(rid, error)])
        except DapProblem as exc:
            reading: ReportError = self.flow.upload_problems[
                self.profile.problem_token(exc.token)]
            return reading
        seen: dict[bytes, ReportError] = self.flow.decode_upload_errors(body or b"")
        return seen.get(rid)

    # -- operations ---------------------------------------------------------------------

    def op_upload(self) -> None:
        rng = self.rng
        task = rng.choice(self.tasks)
        reports: list[Any] = []
        for _ in range(rng.randint(1, 6)):
            if task.reports and rng.random() < 0.08:
                reports.append(rng.choice(task.reports))  # a replay
                continue
            m = task.measure(rng)
            r = rng.random()
            seconds = self.now - (rng.choice([1, 2, 4, 10]) * PRECISION if r < 0.15 else 0)
            if r > 0.98:
                seconds = self.now + 20 * PRECISION  # too early
            rid = rng.randbytes(16)
            vdaf = task.pt.task.vdaf()
            report = self.flow.generate_report(
                task.pt.task, m, time=self.flow.report_time(task.pt.task, seconds),
                leader_hpke_config=self.configs["leader"],
                helper_hpke_config=self.configs["helper"], vdaf=vdaf,
                report_id=rid, rand=rng.randbytes(vdaf.RAND_SIZE))
            if rng.random() < 0.05:
                report = corrupt(report, rng)
                task.corrupted.add(rid)
            task.measurement[rid] = m
            task.reports.append(report)
            reports.append(report)
        if rng.random() < 0.08:
            reports.append(reports[0])  # the same report twice in one request
        if self.flow.one_report_per_request:  # DAP-09: one PUT per report
            for report in reports:
                self.upload(task, self.flow.encode_upload([report]))
        else:
            self.upload(task, self.flow.encode_upload(reports))

    def upload(self, task: SimTask, message: tuple[str, bytes]) -> None:
        name, body = message
        method, url = self.url("upload", LEADER_URL, task)
        headers = {"Content-Type": self.profile.media_type_for(name)}
        try:
            resp = self.run(self.network.send(method, url, body, headers))
        except (aiohttp.ClientError, TimeoutError):
            task.pending_uploads.append(message)  # the Client will retry it
            return
        if resp.status == self.profile.statuses["upload"]:
            errors = self.flow.decode_upload_errors(resp.body)
        else:  # a report refused with a problem document (DAP-09)
            assert self.flow.one_report_per_request, (resp.status, resp.body)
            token = self.problem(resp)
            assert token in self.flow.upload_problems, (resp.status, resp.body)
            errors = {b"": self.flow.upload_problems[token]}
        for error in errors.values():
            assert error in self.upload_errors[task.tid], (error, resp.body)
            self.counts[f"upload_{error.name.lower()}"] = \
                self.counts.get(f"upload_{error.name.lower()}", 0) + 1

    def op_retry_upload(self) -> None:
        task = self.rng.choice(self.tasks)
        if task.pending_uploads:
            self.upload(task, task.pending_uploads.pop(0))

    def op_create_jobs(self) -> None:
        if not self.leader.dead:
            assert self.leader.worker is not None
            self.run(self.leader.worker.create_jobs())

    def op_step_jobs(self) -> None:
        if not self.leader.dead:
            assert self.leader.worker is not None
            self.run(self.step_jobs(self.leader.worker))

    @staticmethod
    async def step_jobs(worker: leader_server.LeaderWorker) -> None:
        """Start steps and let them finish (a Crash in one ends the operation)."""
        await worker.step_jobs()
        await asyncio.gather(*list(worker.in_flight))

    def op_helper_work(self) -> None:
        if not self.helper.dead:
            helper_server.run_pending(self.helper.st)

    def op_drive_collections(self) -> None:
        if not self.leader.dead:
            assert self.leader.worker is not None
            self.run(self.leader.worker.drive_collections())

    def op_collect(self) -> None:
        rng = self.rng
        task = rng.choice(self.tasks)
        if task.ti:
            start = rng.randint(int(T0) // PRECISION - 2, self.unit())
            query = self.flow.query_interval(
                task.pt.task, Interval(Time(start), Duration(rng.randint(1, 4))))
        else:
            query = self.flow.query_current_batch(task.pt.task)
        req = self.flow.collection_request(query, b"")
        # DAP-09: the Collector names the job (and retries to the same URL).
        job_id = rng.randbytes(16) if self.flow.collector_chooses_job_id else None
        self.start_collection(task, Collection(req, job_id))

    def start_collection(self, task: SimTask, coll: Collection) -> None:
        ids = {} if coll.job_id is None else {"collection_job_id": coll.job_id}
        method, url = self.url("collection_job_create", LEADER_URL, task, **ids)
        headers = {"Content-Type": self.profile.media_type_for(coll.req),
                   **self.auth(task.pt.collector_auth_token)}
        try:
            resp = self.run(self.network.send(method, url, coll.req.encode(), headers))
        except (aiohttp.ClientError, TimeoutError):
            task.pending_collections.append(coll)
            return
        if resp.status == 201:
            if coll.job_id is None:  # the Leader named the job
                url = f"{LEADER_URL}{resp.headers['Location'].lstrip('/')}"
            task.collection_urls[url] = coll.req
        else:
            assert resp.status == 400 and self.problem(resp) == "batchOverlap", resp.body

    def op_retry_collection(self) -> None:
        task = self.rng.choice(self.tasks)
        if task.pending_collections:
            self.start_collection(task, task.pending_collections.pop(0))

    def op_poll_collections(self) -> None:
        for task in self.tasks:
            for url in sorted(task.collection_urls):
                self.poll_collection(task, url)

    def poll_collection(self, task: SimTask, url: str) -> None:
        method, _ = self.profile.request("collection_job_poll")
        headers = self.auth(task.pt.collector_auth_token)
        try:
            resp = self.run(self.network.send(method, url, b"", headers))
        except (aiohttp.ClientError, TimeoutError):
            return
        if resp.status == 200 and resp.body:
            self.verify_collection(task, url, resp.body)
            if not task.ti and self.rng.random() < 0.5:
                self.delete_collection(task, url)
        elif resp.status == self.profile.statuses["collection_not_ready"] and not resp.body:
            return
        elif resp.status == 404:
            task.collection_urls.pop(url)  # deleted (an earlier DELETE went through)
        else:
            # Legitimate failures: too few reports after `collection_give_up_after`, or an
            # overlapping interval was collected after this job was created.
            assert resp.status == 400 and self.problem(resp) in (
                "invalidBatchSize", "batchOverlap"), (resp.status, resp.body)
            self.counts["collection_failed"] = self.counts.get("collection_failed", 0) + 1
            task.collection_urls.pop(url)

    def delete_collection(self, task: SimTask, url: str) -> None:
        method, _ = self.profile.request("collection_job_delete")
        headers = self.auth(task.pt.collector_auth_token)
        try:
            resp = self.run(self.network.send(method, url, b"", headers))
        except (aiohttp.ClientError, TimeoutError):
            return
        if resp.status == 200:
            task.collection_urls.pop(url)

    def verify_collection(self, task: SimTask, url: str, body: bytes) -> None:
        """I4, I5: a released batch, decrypted with the collector's key."""
        req = task.collection_urls[url]
        result = self.flow.collect_result(task.pt.task, task.pt.collector_keypair, req,
                                          self.flow.decode_collection(body))
        assert result.report_count >= task.pt.task.min_batch_size
        leader_ids = self.batch_reports("leader", task, req, url)
        helper_ids = self.batch_reports("helper", task, req, url)
        assert leader_ids == helper_ids
        assert result.report_count == len(leader_ids)
        assert not leader_ids & task.corrupted
        assert result.aggregate_result == task.expected(
            [task.measurement[r] for r in sorted(leader_ids)])
        # The result's interval (in the profile's interval_unit) holds every report.
        per_unit = PRECISION // self.flow.interval_unit(task.pt.task)
        start, duration = int(result.interval.start), int(result.interval.duration)
        assert start % per_unit == 0 and duration % per_unit == 0, result.interval
        finished = self.finished("leader", task)
        assert all(start // per_unit <= finished[r][0] < (start + duration) // per_unit
                   for r in leader_ids), (result.interval, leader_ids)
        if url not in task.verified:
            for rid in leader_ids:
                assert rid not in task.released or \
                    task.release_bodies[task.released[rid]] == body, \
                    "a report in two released batches"
                task.released.setdefault(rid, url)
            task.release_bodies[url] = body
            task.verified.add(url)
            self.counts["collections"] = self.counts.get("collections", 0) + 1

    def batch_reports(self, role: str, task: SimTask, req: Any, url: str) -> set[bytes]:
        finished = self.finished(role, task)
        if task.ti:
            iv = self.wire.decode_collection_req(task.core, req.encode()).interval
            return {rid for rid, (t, _) in finished.items()
                    if int(iv.start) <= t < iv.end}
        job_id = _unb64(url.rsplit("/", 1)[1])
        row = self.db["leader"].execute(
            "SELECT batch_id FROM collection_jobs WHERE task_id=? AND job_id=?",
            (task.tid, job_id)).fetchone()
        return {rid for rid, (_, b) in finished.items() if b == row[0]}

    def op_arm_crash(self) -> None:
        node = self.rng.choice([self.leader, self.helper])
        if not node.dead and node.faults.countdown is None:
            node.faults.countdown = self.rng.randint(1, 60)

    def op_restart(self) -> None:
        node = self.rng.choice([self.leader, self.helper])
        if node.dead or self.rng.random() < 0.3:
            node.start()

    def op_stale_delivery(self) -> None:
        if self.network.stale:
            item = self.network.stale.pop(self.rng.randrange(len(self.network.stale)))
            try:
                self.run(self.network.deliver(*item))
            except (aiohttp.ClientError, TimeoutError):
                pass

    def op_forged_replay(self) -> None:
        """A misbehaving Leader: report shares the Helper has already aggregated, sent again
        in a new aggregation job. The Helper must reject every one as replayed."""
        if self.helper.dead:
            return
        task = self.rng.choice(self.tasks)
        hconn = self.db["helper"]
        tid_b64 = base64.urlsafe_b64encode(task.tid).rstrip(b"=").decode()
        rows = [(body,) for path, body in self.network.init_requests
                if f"/{tid_b64}/" in path]
        aggregated = {bytes(r[0]) for r in hconn.execute(
            "SELECT report_id FROM aggregated_reports WHERE task_id=?", (task.tid,))}
        self.rng.shuffle(rows)
        for (request,) in rows:  # a job with shares the Helper has aggregated
            req = self.wire.decode_init_req(task.core, bytes(request))
            items = [i for i in req.items if i.report_id in aggregated]
            if items:
                break
        else:
            return
        items = self.rng.sample(items, self.rng.randint(1, len(items)))
        # The Client's reports carry the very shares the Leader sent the Helper.
        uploaded = {self.flow.report_id(r): r for r in task.reports}
        body = self.wire.encode_init_req(
            task.core, req.agg_param, req.batch_id,
            [(uploaded[i.report_id], i.payload) for i in items], req.verification_key_id)
        if hconn.execute("SELECT 1 FROM aggregation_jobs WHERE request_hash=?",
                         (hashlib.sha256(body).digest(),)).fetchone():
            return  # identical to an existing job: the Helper answers from it
        # A new job (DAP-09: named by the Leader, so a fresh ID).
        method, url = self.url("aggregation_job_init", HELPER_URL, task,
                               aggregation_job_id=self.rng.randbytes(16))
        headers = {"Content-Type": self.profile.media_type_for("AggregationJobInitReq"),
                   **self.auth(task.pt.aggregator_auth_token)}
        try:
            resp = self.run(self.network.deliver(method, url, body, headers))
        except aiohttp.ClientError:
            return
        assert resp.status == self.profile.statuses["aggregation_job_init"], resp.body
        if resp.body:  # an asynchronous Helper answers later; its RAs are checked anyway
            for vr in self.wire.decode_job_resp(resp.body):
                assert vr.kind == VerifyRespType.REJECT
                assert vr.error in (ReportError.REPORT_REPLAYED,
                                    ReportError.BATCH_COLLECTED), vr.error
        self.counts["forged_replays"] = self.counts.get("forged_replays", 0) + 1

    def op_jump(self) -> None:
        self.now += self.rng.choice([30.0, 65.0, 200.0])

    # -- attacker moves (issue 12): each a small op of its own ------------------------------

    def op_trickle(self) -> None:
        """A trickle of single-report uploads into one recent interval of the time-interval
        task, interleaved with the Leader's background work, as during a collection
        (issue 12: about 200 uploads/s into a past hour kept it uncollectable). Invariant
        I8 checks that a pending collection job never waits for them."""
        task = next(t for t in self.tasks if t.ti)
        seconds = self.now - self.rng.choice([0, 1, 2]) * PRECISION
        for _ in range(self.rng.randint(3, 12)):
            self.now += self.rng.uniform(0.0, 0.3)
            report = self.fresh_report(task, seconds)
            self.upload(task, self.flow.encode_upload([report]))
            if self.rng.random() < 0.5:
                step = self.rng.choice([self.op_create_jobs, self.op_step_jobs,
                                        self.op_helper_work, self.op_drive_collections])
                step()
        self.counts["trickled"] = self.counts.get("trickled", 0) + 1

    def fresh_report(self, task: SimTask, seconds: float) -> Any:
        """A new, valid report of `task` at `seconds`, recorded for the invariants."""
        m = task.measure(self.rng)
        rid = self.rng.randbytes(16)
        vdaf = task.pt.task.vdaf()
        report = self.flow.generate_report(
            task.pt.task, m, time=self.flow.report_time(task.pt.task, seconds),
            leader_hpke_config=self.configs["leader"],
            helper_hpke_config=self.configs["helper"], vdaf=vdaf,
            report_id=rid, rand=self.rng.randbytes(vdaf.RAND_SIZE))
        task.measurement[rid] = m
        task.reports.append(report)
        return report

    # -- the attacker (issue 12) ----------------------------------------------------------
    # Requests no honest peer sends, straight to an Aggregator (not through the faulty
    # network). Each is refused with an HTTP-level problem document and leaves nothing in
    # the datastore; the invariants are checked after it as after every operation. A move
    # is one entry of ATTACKS and one `op_<name>` method.

    def _attack_target(self) -> tuple[Node, str, SimTask, str, str, dict[str, str], int]:
        """(node, table its requests would fill, task, method, URL, headers, limit) of
        the Leader's upload or the Helper's aggregation job init (authenticated: the
        attacker may be a misbehaving Leader)."""
        task = self.rng.choice(self.tasks)
        if self.rng.random() < 0.5:
            method, url = self.url("upload", LEADER_URL, task)
            name = self.profile.message_names["upload"]
            return (self.leader, "client_reports", task, method, url,
                    {"Content-Type": self.profile.media_type_for(name)},
                    ATTACK_LIMITS["upload"])
        method, url = self.url("aggregation_job_init", HELPER_URL, task,
                               aggregation_job_id=self.rng.randbytes(16))
        return (self.helper, "aggregation_jobs", task, method, url,
                {"Content-Type": self.profile.media_type_for("AggregationJobInitReq"),
                 **self.auth(task.pt.aggregator_auth_token)},
                ATTACK_LIMITS["aggregation_job"])

    def _attack(self, target: tuple[Node, str, SimTask, str, str, dict[str, str], int],
                status: int, body: bytes, extra: dict[str, str] | None = None,
                chunked: bool = False, delay: float = 0.0) -> None:
        node, table, task, method, url, headers, _ = target
        if node.dead:
            return
        before = self.db[node.role].execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        try:
            resp = self.run(self.network.deliver(method, url, body, {**headers,
                                                                     **(extra or {})},
                                                 chunked, delay))
        except aiohttp.ClientError:
            return  # the process died under it (an armed crash)
        assert resp.status == status, (resp.status, resp.body[:200])
        assert resp.headers.get("Content-Type", "").startswith(
            "application/problem+json"), resp.headers
        doc = ProblemDocument.from_json(resp.body)
        assert doc.type == "about:blank" and doc.status == status, resp.body
        after = self.db[node.role].execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        assert after == before, f"{table} grew from {before} to {after} under an attack"
        self.counts[f"attack_{status}"] = self.counts.get(f"attack_{status}", 0) + 1

    def op_attack_oversized(self) -> None:
        """A body over the resource's limit, declared (Content-Length) or chunked."""
        target = self._attack_target()
        limit = target[-1]
        body = self.rng.randbytes(limit + 1 + self.rng.randrange(3 * limit))
        self._attack(target, 413, body, chunked=self.rng.random() < 0.5)

    def op_attack_compressed(self) -> None:
        """A compressed body (a small one: what matters is that nothing inflates it)."""
        import gzip

        target = self._attack_target()
        coding = self.rng.choice(["gzip", "deflate", "br"])
        self._attack(target, 415, gzip.compress(bytes(self.rng.randrange(1, 1 << 16))),
                     {"Content-Encoding": coding})

    def op_attack_slow(self) -> None:
        """A body whose chunks come slower than the body timeout allows."""
        self._attack(self._attack_target(), 408,
                     self.rng.randbytes(self.rng.randrange(1, 4096)),
                     delay=ATTACK_BODY_TIMEOUT * 2.5)

    ATTACKS: list[tuple[str, float]] = [
        ("attack_oversized", 1.0), ("attack_compressed", 1.0), ("attack_slow", 0.5),
    ]
    OPS: list[tuple[str, float]] = [
        ("upload", 14), ("retry_upload", 2), ("create_jobs", 12), ("step_jobs", 12),
        ("helper_work", 6), ("collect", 3), ("retry_collection", 1),
        ("drive_collections", 6), ("poll_collections", 3), ("arm_crash", 1.5),
        ("restart", 4), ("stale_delivery", 1.5), ("forged_replay", 1), ("jump", 0.7),
        ("trickle", 1.5),
        *ATTACKS,
    ]

    def step(self) -> str:
        names = [n for n, _ in self.OPS]
        name = self.rng.choices(names, weights=[w for _, w in self.OPS])[0]
        self.now += self.rng.uniform(0.0, 3.0)
        try:
            getattr(self, f"op_{name}")()
        except Crash:
            pass  # counted where it happened; the process is dead until restarted
        self.counts[name] = self.counts.get(name, 0) + 1
        return name

    # -- invariants ---------------------------------------------------------------------

    def finished(self, role: str, task: SimTask) -> dict[bytes, tuple[int, bytes | None]]:
        """Report ID -> (time, batch ID) of the finished report aggregations (I1: each
        report at most once)."""
        rows = self.db[role].execute(
            "SELECT r.report_id, r.time, j.batch_id FROM report_aggregations r "
            "JOIN aggregation_jobs j ON r.task_id=j.task_id AND r.job_id=j.job_id "
            "WHERE r.task_id=? AND r.state='finished'", (task.tid,)).fetchall()
        out = {bytes(r[0]): (int(r[1]), None if r[2] is None else bytes(r[2])) for r in rows}
        assert len(out) == len(rows), f"{role}: a report finished in two aggregations"
        return out

    def bucket_of(self, task: SimTask, time: int, batch_id: bytes | None) -> bytes:
        if task.ti:
            return time_bucket(time)
        assert batch_id is not None
        return batch_id

    def check(self) -> None:
        for conn in self.db.values():
            conn.execute("BEGIN")
        try:
            for task in self.tasks:
                self.check_task(task)
        finally:
            for conn in self.db.values():
                conn.execute("COMMIT")

    def check_task(self, task: SimTask) -> None:
        tid = task.tid
        finished_by_role = {}
        for role, conn in self.db.items():
            finished = self.finished(role, task)
            finished_by_role[role] = finished
            aggregated = {bytes(r[0]) for r in conn.execute(
                "SELECT report_id FROM aggregated_reports WHERE task_id=?", (tid,))}
            assert aggregated == set(finished), f"{role}: aggregated_reports != finished"
            assert not aggregated & task.corrupted, f"{role}: a corrupted report counted"
            # I2: buckets
            expected: dict[bytes, list[bytes]] = {}
            for rid, (t, b) in finished.items():
                expected.setdefault(self.bucket_of(task, t, b), []).append(rid)
            buckets = {bytes(r[0]): (int(r[1]), bytes(r[2]), r[3]) for r in conn.execute(
                "SELECT bucket, report_count, checksum, agg_share FROM batch_buckets "
                "WHERE task_id=?", (tid,))}
            assert set(buckets) == set(expected), f"{role}: bucket set"
            for bucket, ids in expected.items():
                count, checksum, _ = buckets[bucket]
                assert (count, checksum) == (len(ids), batch_checksum(ids)), \
                    f"{role}: bucket {bucket.hex()} count/checksum"
            # I3: collected buckets are frozen
            collected = self.collected_buckets(role, task, buckets)
            for bucket in collected:
                key = (role, tid, bucket)
                snap = buckets.get(bucket)
                if key in self.snapshots:
                    assert self.snapshots[key] == snap, f"{role}: collected bucket changed"
                else:
                    self.snapshots[key] = snap  # type: ignore[assignment]
        leader, helper = finished_by_role["leader"], finished_by_role["helper"]
        # I3: both hold the same reports in every batch the Leader has frozen.
        lconn = self.db["leader"]
        if task.ti:
            for start, end in lconn.execute("SELECT start, end_ FROM collected_intervals "
                                            "WHERE task_id=?", (tid,)):
                lset = {r for r, (t, _) in leader.items() if start <= t < end}
                hset = {r for r, (t, _) in helper.items() if start <= t < end}
                assert lset == hset, "Aggregators disagree on a collected interval"
        for (bucket,) in lconn.execute("SELECT bucket FROM collected_buckets WHERE task_id=?",
                                       (tid,)):
            lset = {r for r, (_, b) in leader.items() if b == bytes(bucket)}
            hset = {r for r, (_, b) in helper.items() if b == bytes(bucket)}
            assert lset == hset, "Aggregators disagree on a collected batch"
        # I7: the Leader freezes a batch only for a collection job that goes on to
        # release it (a frozen but unreleased batch would lose its reports).
        releasing: set[Any] = set()
        for request, batch_id in lconn.execute(
                "SELECT request, batch_id FROM collection_jobs WHERE task_id=? AND state IN "
                "('collecting', 'finished', 'deleted')", (tid,)):
            if task.ti:
                iv = self.wire.decode_collection_req(task.core, bytes(request)).interval
                releasing.add((int(iv.start), iv.end))
            elif batch_id is not None:
                releasing.add(bytes(batch_id))
        frozen = ({tuple(r) for r in lconn.execute(
            "SELECT start, end_ FROM collected_intervals WHERE task_id=?", (tid,))}
            if task.ti else {bytes(r[0]) for r in lconn.execute(
                "SELECT bucket FROM collected_buckets WHERE task_id=?", (tid,))})
        assert frozen <= releasing, "the Leader froze a batch that no job releases"
        # The Helper only freezes what the Leader froze first.
        hconn = self.db["helper"]
        assert {tuple(r) for r in hconn.execute(
            "SELECT start, end_ FROM collected_intervals WHERE task_id=?", (tid,))} <= \
            {tuple(r) for r in lconn.execute(
                "SELECT start, end_ FROM collected_intervals WHERE task_id=?", (tid,))}
        # I1 (Leader): report states
        states: dict[str, set[bytes]] = {}
        for rid, state in lconn.execute("SELECT report_id, state FROM client_reports "
                                        "WHERE task_id=?", (tid,)):
            states.setdefault(state, set()).add(bytes(rid))
        assert states.get("aggregated", set()) == set(leader)
        in_active = {bytes(r[0]) for r in lconn.execute(
            "SELECT r.report_id FROM report_aggregations r JOIN aggregation_jobs j "
            "ON r.task_id=j.task_id AND r.job_id=j.job_id WHERE r.task_id=? AND "
            "j.state='active' AND r.state IN ('active', 'finished_outbound')", (tid,))}
        assert states.get("in_job", set()) == in_active
        if task.ti:
            self.check_no_wait_on_late_reports(task)
        # I4 and I6
        minimum = task.pt.task.min_batch_size
        for resp, error in lconn.execute("SELECT response, error FROM collection_jobs "
                                         "WHERE task_id=?", (tid,)):
            assert error != "batchMismatch", "the Aggregators disagreed on a batch"
            if resp is not None:
                assert self.flow.decode_collection(bytes(resp)).report_count >= minimum
        for (req,) in hconn.execute("SELECT request FROM aggregate_share_jobs WHERE task_id=? "
                                    "AND state!='failed'", (tid,)):
            assert self.wire.decode_share_req(task.core, bytes(req)).report_count >= minimum

    def check_no_wait_on_late_reports(self, task: SimTask) -> None:
        """I8: a pending time-interval collection job completes the aggregation jobs it
        found and moves on: no report of its interval uploaded after its cutoff is put
        in an aggregation job while it waits (they wait for it instead)."""
        lconn = self.db["leader"]
        for request, cutoff, created in lconn.execute(
                "SELECT request, cutoff, created_at FROM collection_jobs WHERE task_id=? "
                "AND state='start'", (task.tid,)):
            iv = self.wire.decode_collection_req(task.core, bytes(request)).interval
            late = lconn.execute(
                "SELECT COUNT(*) FROM client_reports WHERE task_id=? AND state IN "
                "('in_job', 'aggregated') AND time>=? AND time<? AND created_at>?",
                (task.tid, int(iv.start), iv.end, cutoff or created)).fetchone()[0]
            assert late == 0, "I8: a collection job waits for reports uploaded after it"

    def collected_buckets(self, role: str, task: SimTask,
                          buckets: dict[bytes, Any]) -> list[bytes]:
        conn = self.db[role]
        out = [bytes(r[0]) for r in conn.execute(
            "SELECT bucket FROM collected_buckets WHERE task_id=?", (task.tid,))]
        if task.ti:
            for start, end in conn.execute("SELECT start, end_ FROM collected_intervals "
                                           "WHERE task_id=?", (task.tid,)):
                out += [time_bucket(t) for t in range(start, end)]
        return out

    # -- the end: no more faults, run until quiet -----------------------------------------

    def quiesce(self) -> None:
        self.network.faulty = False
        self.network.stale.clear()
        for node in (self.leader, self.helper):
            node.faults.countdown = None
            if node.dead:
                node.start()
        for task in self.tasks:
            while task.pending_uploads:
                self.upload(task, task.pending_uploads.pop(0))
            while task.pending_collections:
                self.start_collection(task, task.pending_collections.pop(0))
        for _ in range(400):
            self.now += 2.0
            self.op_create_jobs()
            self.op_step_jobs()
            self.op_helper_work()
            self.op_drive_collections()
            self.op_poll_collections()
            self.check()
            if self.quiet():
                return
        raise AssertionError("the system did not become quiet")

    def quiet(self) -> bool:
        lconn, hconn = self.db["leader"], self.db["helper"]
        busy = lconn.execute("SELECT COUNT(*) FROM client_reports WHERE state IN "
                             "('new', 'in_job')").fetchone()[0]
        busy += lconn.execute("SELECT COUNT(*) FROM collection_jobs WHERE state IN "
                              "('start', 'collecting')").fetchone()[0]
        busy += hconn.execute("SELECT COUNT(*) FROM aggregation_jobs WHERE state='active' "
                              "AND response IS NULL").fetchone()[0]
        busy += hconn.execute("SELECT COUNT(*) FROM aggregate_share_jobs WHERE "
                              "state='start'").fetchone()[0]
        return int(busy) == 0

    def final_checks(self) -> None:
        lconn = self.db["leader"]
        for task in self.tasks:
            leader = self.finished("leader", task)
            helper = self.finished("helper", task)
            assert leader == helper, "after quiescence the Aggregators must agree"
            for rid, state, error in lconn.execute(
                    "SELECT report_id, state, error FROM client_reports WHERE task_id=?",
                    (task.tid,)):
                rid = bytes(rid)
                if state == "aggregated" or rid in task.corrupted:
                    continue
                assert state == "failed" and error == ReportError.BATCH_COLLECTED, \
                    (state, error)
            self.counts[f"aggregated_{'ti' if task.ti else 'ls'}"] = len(leader)


def corrupt(report: Any, rng: random.Random) -> Any:
    """Flip a byte of one Aggregator's encrypted input share."""
    name = rng.choice(["leader_encrypted_input_share", "helper_encrypted_input_share"])
    ct = getattr(report, name)
    payload = bytearray(ct.payload)
    payload[rng.randrange(len(payload))] ^= 0x01
    return dataclasses.replace(report, **{name: dataclasses.replace(ct,
                                                                    payload=bytes(payload))})


def _unb64(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _cases() -> list[tuple[str, int]]:
    """(profile, seed) pairs. By default the ten seeds of the DAP-18-only simulation are
    dealt out over the shipped profiles (seed i to profile i mod 3), so that the file
    takes as long as it did and every profile runs with a synchronous and an
    asynchronous Helper (seed parity). For a soak run, DAP_SIM_SEEDS=200 runs seeds
    0..199 on every profile."""
    soak = os.environ.get("DAP_SIM_SEEDS")
    if soak is not None:
        return [(name, seed) for name in SHIPPED for seed in range(int(soak))]
    return [(name, seed) for i, name in enumerate(SHIPPED) for seed in range(10)
            if seed % len(SHIPPED) == i]


def _backend_cases() -> list[Any]:
    """Every (profile, seed) on SQLite; on PostgreSQL one seed per profile (the checks
    are the same, the datastore is the other backend)."""
    out = []
    seen: set[str] = set()
    for backend in BACKENDS:
        for profile, seed in _cases():
            if backend == "postgresql":
                if profile in seen:
                    continue
                seen.add(profile)
            out.append(pytest.param(backend, profile, seed,
                                    id=f"{backend}-{profile}-{seed}"))
    return out


@pytest.mark.parametrize(("backend", "profile", "seed"), _backend_cases())
def test_simulation(tmp_path: Path, datastore_spec: Callable[[str], str], backend: str,
                    profile: str, seed: int) -> None:
    sim = Simulation(tmp_path, seed, async_helper=seed % 2 == 1,
                     profile=get_profile(profile), spec=datastore_spec)
    try:
        for i in range(300):
            name = sim.step()
            try:
                sim.check()
            except AssertionError as exc:
                raise AssertionError(f"{profile} seed {seed}, step {i} ({name}): {exc}") \
                    from exc
        sim.quiesce()
        sim.final_checks()
    finally:
        sim.close()
    # The run exercised what it is meant to (a weak check that the model is not idle).
    assert sim.counts.get("crashes", 0) >= 1
    assert sim.counts.get("collections", 0) >= 1
    assert any(k.startswith("attack_4") for k in sim.counts), "no attack was refused"


def _fingerprint(sim: Simulation) -> dict[str, list[tuple[Any, ...]]]:
    """What the protocol core decided, as stored: IDs and states in insertion order (not
    the ciphertexts, whose HPKE encapsulation randomness is not seeded)."""
    queries = {
        "hpke_keys": "SELECT config_id, config, private_key, state FROM hpke_keys "
                     "ORDER BY config_id",
        "client_reports": "SELECT task_id, report_id, state, aggregation_job_id, error "
                          "FROM client_reports ORDER BY rowid",
        "aggregation_jobs": "SELECT task_id, job_id, role, state, step, batch_id "
                            "FROM aggregation_jobs ORDER BY rowid",
        "report_aggregations": "SELECT job_id, ord, report_id, state, error "
                               "FROM report_aggregations ORDER BY rowid",
        "collection_jobs": "SELECT job_id, state, batch_id, error FROM collection_jobs "
                           "ORDER BY rowid",
        "aggregate_share_jobs": "SELECT share_id, state FROM aggregate_share_jobs "
                                "ORDER BY rowid",
        "leader_batches": "SELECT batch_id, assigned, state FROM leader_batches "
                          "ORDER BY rowid",
    }
    out: dict[str, list[tuple[Any, ...]]] = {"counts": sorted(sim.counts.items())}
    for role, conn in sim.db.items():
        for table, sql in queries.items():
            try:
                out[f"{role}.{table}"] = [tuple(r) for r in conn.execute(sql)]
            except sqlite3.OperationalError:  # a table only the other role fills
                out[f"{role}.{table}"] = []
    return out


@pytest.mark.parametrize("profile", SHIPPED)
def test_simulation_is_reproducible(tmp_path: Path, profile: str) -> None:
    """The same seed replays the same run: every ID and key the protocol core drew
    comes from the seeded `Rng` handed to the apps (none from the OS CSPRNG)."""
    runs = []
    for attempt in ("a", "b"):
        (tmp_path / attempt).mkdir()
        sim = Simulation(tmp_path / attempt, 3, async_helper=True,
                         profile=get_profile(profile))
        try:
            for _ in range(120):
                sim.step()
            runs.append(_fingerprint(sim))
        finally:
            sim.close()
    assert runs[0]["leader.aggregation_jobs"], "the run made aggregation jobs"
    assert runs[0] == runs[1]
