"""The Leader's HTTP resources (DAP-18 Appendix A: reports, collection jobs) and its
background work, all resumable from the datastore after a restart:

* turning uploaded reports into aggregation jobs;
* stepping aggregation jobs with the Helper (retries with exponential backoff; polling
  with the Helper's Retry-After when it answers asynchronously);
* driving collection jobs: waiting for the batch, obtaining the Helper's aggregate share,
  assembling the CollectionJobResp.

Every request to the Helper is stored before it is sent, so a retried or resumed request
is byte-identical and the Helper answers it from its existing resource.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import logging
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from ppm_reference.dap.common import Role
from ppm_reference.dap.core import agg_params
from ppm_reference.dap.core import leader as core
from ppm_reference.dap.core.errors import DapProblem, NotReady
from ppm_reference.dap.core.tasks import auth_header_for
from ppm_reference.dap.origin import (
    MAX_RESPONSE_BYTES,
    NO_COMPRESSION,
    ForeignLocation,
    read_response,
    resolve_location,
)
from ppm_reference.dap.problems import ProblemDocument, ProblemDocumentError
from ppm_reference.dap.server.common import (
    AppState,
    authenticate,
    b64url,
    id_param,
    message_response,
    not_ready_response,
    read_body,
    require_method,
    state,
    task_id_param,
)
from ppm_reference.dap.server.metrics import count_rejections
from ppm_reference.dap.server.retention import RetentionTimer
from ppm_reference.dap.server.scheduling import (
    COLLECTION,
    CREATE_JOBS,
    HOLDER,
    WorkEvent,
    next_due,
    sleep_until_work,
)
from ppm_reference.dap.server.serving import client_ssl_context
from ppm_reference.dap.server.status import STATUS_HEADER, collection_hint
from ppm_reference.dap.server.upload import GROUP_MAX_BODY, groups_of, store_upload
from ppm_reference.dap.storage import (
    AggregationJobRecord,
    AggregationJobState,
    CollectionJobRecord,
    CollectionJobState,
    TaskWorkRecord,
)
from ppm_reference.dap.taskprov import advertisement_headers

log = logging.getLogger("ppm.leader")
WAKE_KEY: web.AppKey[WorkEvent] = web.AppKey("leader_wake", WorkEvent)
# Collection jobs the background worker still drives.
_PENDING_COLLECTION = (CollectionJobState.START, CollectionJobState.COLLECTING)
# Tasks with new reports read at a time for job creation (from an index, in turn from the
# task after the last one served: see `Sweep`). A pass makes a job per free step slot (a
# few), so it seldom needs more than one window; reading every such task at every pass
# cost, with 5,000 tasks, 8 % of the Leader's and Helper's CPU (a pass per job or so).
CREATE_WINDOW = 128
# The Helper's answers up to this size (a dozen reports or so) are processed in the
# committing transaction, without a read transaction and VDAF work before it.
SMALL_RESPONSE_BYTES = 1024
# Up to this many new reports, a task's job is made in the transaction that reads them
# (with the decryption and VDAF work: a short hold of the datastore), not in a second one.
SMALL_CREATE_REPORTS = 16
# Far in the future: every pending collection job, whatever its next attempt time.
_ANY_TIME = 1e300


@dataclass
class Sweep:
    """Where job creation is in its round over the tasks with new reports, in task ID
    order from after `start` (the task served last; None: from the first) to the
    highest, then from the lowest up to `start` itself. `after`: the last ID read;
    `wrapped`: in the second part; `done`: the round is over."""

    start: bytes | None
    after: bytes | None = field(init=False)
    wrapped: bool = False
    done: bool = False

    def __post_init__(self) -> None:
        self.after = self.start

    def read(self, tx: Any, limit: int) -> list[bytes]:
        """The next (at most) `limit` IDs of the round, from `tx`."""
        out: list[bytes] = []
        while len(out) < limit and not self.done:
            want = limit - len(out)
            ids = tx.tasks_with_new_reports(want, self.after)
            if self.wrapped:
                assert self.start is not None
                mine = [t for t in ids if t <= self.start]
                if len(mine) < len(ids) or len(ids) < want or \
                        (mine and mine[-1] == self.start):
                    self.done = True
                ids = mine
            out += ids
            if ids:
                self.after = ids[-1]
            if not self.wrapped and len(ids) < want:
                if self.start is None:
                    self.done = True    # read from the first: nothing beyond
                else:
                    self.wrapped = True
                    self.after = None   # on from the lowest
        return out


@dataclass
class PendingWork:
    """What one pass of the Leader's background loop works from, read in one snapshot
    (`LeaderWorker.scan`) instead of one transaction per kind of work: the tasks with new
    reports, the pending collection jobs (any due time), the tasks whose job creation
    failed lately, and the earliest due time of the stored work."""

    now: float
    new_tasks: list[bytes]
    collections: list[CollectionJobRecord]
    task_work: dict[bytes, TaskWorkRecord]
    due: float | None
    # The round over the tasks with new reports that `new_tasks` (its first window) began.
    sweep: Sweep | None = None


async def put_or_post_reports(request: web.Request) -> web.StreamResponse:
    """Upload: POST (DAP-18 Section 4.4.2.2, `UploadRequest`) or PUT (DAP-09 Section
    4.4.2, one `Report`) {leader}/tasks/{task-id}/reports."""
    st = state(request)
    task = st.task(task_id_param(request), Role.LEADER)
    require_method(request, task, "upload")
    body = await read_body(request, task, task.profile.message_names["upload"],
                           st.config.max_upload_bytes)
    return await upload_response(request.app, st, task, body)


async def upload_response(app: web.Application, st: AppState, task: Any,
                          body: bytes) -> web.Response:
    """Store an upload's reports (in a worker thread, `store_upload`) and answer it: the
    resource above, and the Oblivious HTTP gateway (`dap.server.gateway`) for an upload
    that came through a relay."""
    keyring = st.keyring()
    if len(body) <= GROUP_MAX_BODY:
        # Small uploads (one report per request) share commits (dap.server.upload), and
        # the wake-up of the background worker (a notification to other processes).
        errors = await groups_of(st).store(task, keyring, body, app[WAKE_KEY].set)
    else:
        errors = await st.offload(store_upload, st, task, keyring, body)
        app[WAKE_KEY].set((task.task_id,))
    if errors:
        count_rejections(app, task, errors)  # /metrics, GET /internal/tasks/{id}
    answer = task.wire.upload_answer(task, errors)  # raises a DAP-09 refused report's problem
    if answer is None:
        return web.Response(status=task.profile.statuses["upload"])
    return message_response(task, "UploadErrors", answer)


async def post_collection_jobs(request: web.Request) -> web.StreamResponse:
    """POST {leader}/tasks/{task-id}/collection_jobs (DAP-18 Section 4.6.1)."""
    st = state(request)
    task = st.task(task_id_param(request), Role.LEADER)
    require_method(request, task, "collection_job_create")
    authenticate(request, task, collector=True)
    body = await read_body(request, task, "CollectionJobReq", st.config.max_collection_bytes)
    job_id = await st.transact(core.create_collection_job, task, body, st.clock(),
                               rng=st.rng)
    request.app[WAKE_KEY].set((task.task_id,))
    return not_ready_response(st.config, f"{request.path}/{b64url(job_id)}", status=201)


async def put_collection_job(request: web.Request) -> web.StreamResponse:
    """PUT {leader}/tasks/{task-id}/collection_jobs/{id} (DAP-09 Section 4.6.1): the
    Collector names the job; answered 201 Created."""
    st = state(request)
    task = st.task(task_id_param(request), Role.LEADER)
    require_method(request, task, "collection_job_create")
    authenticate(request, task, collector=True)
    job_id = id_param(request, "job_id", 16, "unrecognizedCollectionJob")
    body = await read_body(request, task, "CollectionReq", st.config.max_collection_bytes)
    await st.transact(core.create_collection_job, task, body, st.clock(), job_id=job_id,
                      rng=st.rng)
    request.app[WAKE_KEY].set((task.task_id,))
    return web.Response(status=201)


async def poll_collection_job(request: web.Request) -> web.StreamResponse:
    """Poll: GET (DAP-18, 200 with Retry-After until ready) or POST (DAP-09 Section 4.6.1,
    202 Accepted until ready) {leader}/tasks/{task-id}/collection_jobs/{id}."""
    st = state(request)
    task = st.task(task_id_param(request), Role.LEADER)
    require_method(request, task, "collection_job_poll")
    authenticate(request, task, collector=True)
    job_id = id_param(request, "job_id", 16, "unrecognizedCollectionJob")
    try:
        body = await st.transact(core.get_collection_job, task, job_id)
    except NotReady:
        resp = not_ready_response(st.config,
                                  status=task.profile.statuses["collection_not_ready"])
        # What it waits for (dap.server.status).
        resp.headers[STATUS_HEADER] = await st.transact(collection_hint, task, job_id)
        return resp
    return message_response(task, task.profile.message_names["collection"], body)


async def delete_collection_job(request: web.Request) -> web.StreamResponse:
    st = state(request)
    task = st.task(task_id_param(request), Role.LEADER)
    authenticate(request, task, collector=True)
    job_id = id_param(request, "job_id", 16, "unrecognizedCollectionJob")
    await st.transact(core.delete_collection_job, task, job_id)
    return web.Response(status=200)


def add_routes(app: web.Application) -> None:
    reports = "/tasks/{task_id}/reports"
    job = "/tasks/{task_id}/collection_jobs/{job_id}"
    app.router.add_post(reports, put_or_post_reports)
    app.router.add_put(reports, put_or_post_reports)
    app.router.add_post("/tasks/{task_id}/collection_jobs", post_collection_jobs)
    app.router.add_put(job, put_collection_job)
    app.router.add_get(job, poll_collection_job)
    app.router.add_post(job, poll_collection_job)
    app.router.add_delete(job, delete_collection_job)


# -- background work -----------------------------------------------------------------------


def backoff(attempts: int, cap: float = 30.0) -> float:
    return float(min(cap, 0.1 * 2 ** min(attempts, 20)))


def describe(exc: BaseException) -> str:
    """An exception as the one line recorded on the item whose work raised it."""
    return f"{type(exc).__name__}: {exc}"[:500]


def task_gone(exc: BaseException) -> bool:
    """Whether work failed because its task no longer exists (deleted through the admin
    API) or can no longer be loaded: retrying cannot help."""
    return isinstance(exc, DapProblem) and exc.token == "unrecognizedTask"


class LeaderWorker:
    def __init__(self, app: web.Application, st: AppState) -> None:
        self.app = app
        self.st = st
        self.session: aiohttp.ClientSession | None = None
        # Where the Helper said a deferred resource is (job id -> URL). Lost on restart,
        # which only means re-sending the stored, byte-identical request.
        self.share_locations: dict[bytes, str] = {}
        self.sem = asyncio.Semaphore(max(1, st.config.job_concurrency))
        # The Helper's answers are at most about the size of the Leader's requests.
        self.response_limit = max(MAX_RESPONSE_BYTES, st.config.max_aggregation_job_bytes)
        # Job steps in flight. They run beside job creation and collection, so that the
        # Leader prepares the next jobs while the Helper works on the current ones.
        self.in_flight: set[asyncio.Task[None]] = set()
        # Job fill (see `create_jobs`): this worker's job steps in flight per task, and
        # the tasks whose reports wait for one of those steps to end to make a job.
        self.stepping: dict[bytes, int] = {}
        self.filling: set[bytes] = set()
        self.rescan = False
        self.retention = RetentionTimer(st)
        # Tasks whose new reports made no job (fewer than min_job_size, or held back by
        # a collection job): not looked at again while both deadlines (time.monotonic(),
        # the injectable clock) are ahead, unless the worker is woken (an upload,
        # dap.server.scheduling). The pause ends when either has passed: they move
        # together in production; a test's frozen clock must not freeze job creation, and
        # a simulated clock that jumps ahead must end it too.
        self.create_not_before: dict[bytes, tuple[float, float]] = {}
        # Of those, the tasks whose creation lease another process held (it is making
        # their jobs, and with job fill makes the next one when its step ends): news does
        # not bring them back before the pause ends. With several drivers, every upload's
        # notification brought such a task back in each other driver, for a write
        # transaction that found the lease taken (134 of 149 attempts in a run of one task,
        # 2 drivers, PostgreSQL, one-report uploads).
        self.held_elsewhere: set[bytes] = set()
        # The task whose job this worker's last pass made last: the next pass begins
        # after it (`create_jobs` makes jobs only while a step slot is free, so it takes
        # the tasks in turn).
        self.create_cursor: bytes | None = None
        # This worker's name in the leases it takes (the process's; a test running two
        # workers in one process gives each its own).
        self.holder = HOLDER

    def wake_self(self) -> None:
        """Run the next pass now (work this process made: no other process is told)."""
        asyncio.Event.set(self.app[WAKE_KEY])

    async def run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=self.st.config.http_timeout)
        connector = aiohttp.TCPConnector(ssl=client_ssl_context(self.st.config.tls_ca_file))
        # Answers uncompressed and bounded (dap/origin.py): read with read_response.
        async with aiohttp.ClientSession(timeout=timeout, connector=connector,
                                         auto_decompress=False,
                                         headers=NO_COMPRESSION) as session:
            self.session = session
            wake = self.app[WAKE_KEY]
            wake.listen(self.st.datastore)  # other processes' notifications, if any
            cfg = self.st.config
            quiet = woken = False
            news = None
            try:
                while True:
                    busy = False
                    # A pass woken only by the end of a job step (no upload, collection
                    # job or other process's notification since the last scan, which
                    # found nothing to create or collect) takes the next due jobs, and
                    # that is all: no scan.
                    seen = wake.news
                    light = woken and quiet and seen == news and not self.rescan
                    self.rescan = False
                    news = seen
                    work: PendingWork | None = None
                    if not light:
                        try:
                            # In a worker thread: the event loop answers requests meanwhile.
                            work = await self.st.offload(self.scan)
                        except Exception:  # noqa: BLE001 - each step then reads for itself
                            log.exception("leader: cannot read the pending work")
                        quiet = work is not None and not work.new_tasks \
                            and not work.collections
                    stepped = False
                    for name in ("step_jobs",) if light else (
                            "step_jobs", "create_jobs", "drive_collections"):
                        try:
                            if name == "step_jobs":
                                done = await self.step_jobs(work)
                            elif name == "create_jobs":
                                done = await self.create_jobs(work, step_now=True)
                            else:
                                done = await self.drive_collections(work)
                        except Exception:  # noqa: BLE001 - keep working; log and retry
                            log.exception("leader background step %s failed", name)
                            continue
                        # Jobs taken by step_jobs need no pass at once: it took every
                        # due job a slot was free for, and each wakes the worker when
                        # its step ends.
                        if name == "step_jobs":
                            stepped = done
                        elif name == "create_jobs" and done and len(self.in_flight) >= \
                                max(1, cfg.job_concurrency):
                            # Jobs made and every step slot taken: the next pass would
                            # find nothing to do until a step ends, which wakes the
                            # worker (a scan saved per job).
                            pass
                        else:
                            busy = done or busy
                    self.retention.maybe_run()
                    if not busy:
                        # Due-time scheduling (dap.server.scheduling): sleep until the
                        # earliest stored due time, a wake-up, or the poll for work other
                        # processes stored; never for every task.
                        retry = min((m for m, _ in self.create_not_before.values()),
                                    default=None)
                        try:
                            others = [self.retention.next_at,
                                      None if retry is None else self.st.clock()
                                      + max(0.0, retry - time.monotonic())]
                            if light and stepped:
                                due = min((t for t in others if t is not None),
                                          default=None)  # (see below)
                            elif work is None:
                                due = await self.st.offload(next_due, self.st.datastore,
                                                            "leader", *others)
                            else:
                                if stepped:
                                    # The scan's due time is that of the jobs just taken;
                                    # the end of each one's step wakes the worker, and the
                                    # next scan reads the due time again. Meanwhile: the
                                    # collection jobs' (scanned) and the others.
                                    others += [j.next_attempt_at for j in work.collections]
                                else:
                                    # Nothing was done since the scan: its due time holds
                                    # (or is early: a look too many, never a wake-up
                                    # missed; work stored meanwhile wakes the worker).
                                    others.append(work.due)
                                due = min((t for t in others if t is not None), default=None)
                        except Exception:  # noqa: BLE001 - the datastore is unavailable
                            log.exception("leader: cannot read the next due time")
                            due = None
                        # Until due, a wake-up, or the poll; news only of tasks whose
                        # pause it does not end (see news_arrived) makes no pass: every
                        # upload into a task whose job is being made or stepped woke the
                        # worker for a scan that found nothing to do (with 2 drivers and
                        # one-report uploads, about 500 scans in 5 s, 10 % of the Leader's
                        # CPU on PostgreSQL).
                        poll_at = self.st.clock() + cfg.work_poll_interval
                        while True:
                            now = self.st.clock()
                            woken = await sleep_until_work(wake, now, due,
                                                           max(0.0, poll_at - now),
                                                           cfg.worker_interval)
                            if not woken or wake.news == news or self.news_arrived():
                                break
                            news = wake.news  # heard; nothing it names can be done now
                    else:
                        woken = False
                        await asyncio.sleep(0)
            finally:
                for t in list(self.in_flight):  # their leases expire; a restart resumes them
                    t.cancel()

    def scan(self) -> PendingWork:
        """The pending work, in one read-only snapshot (see `PendingWork`)."""
        st = self.st
        now = st.clock()
        sweep = Sweep(self.create_cursor)
        with st.datastore.read() as tx:
            return PendingWork(now, sweep.read(tx, CREATE_WINDOW),
                               tx.list_collection_jobs(_PENDING_COLLECTION, _ANY_TIME),
                               {bytes(w.task_id): w for w in tx.list_task_work()},
                               tx.next_work_due("leader"), sweep)

    def read_window(self, sweep: Sweep) -> list[bytes]:
        """The next window of `sweep` (a read transaction, in a worker thread)."""
        with self.st.datastore.read() as tx:
            return sweep.read(tx, CREATE_WINDOW)

    # aggregation job creation
    async def create_jobs(self, pending: PendingWork | None = None,
                          step_now: bool = False) -> bool:
        """Turn new reports into a job per task, when a step slot would otherwise be idle:
        jobs are made as fast as the Helper takes them, and requests (uploads) are served
        in between. `pending`: this pass's scan (else read here). `step_now`: a job made
        while a step slot is free is stored leased to this worker and stepped at once
        (no acquiring transaction before its step)."""
        st = self.st
        cfg = st.config
        if len(self.in_flight) >= max(1, cfg.job_concurrency):
            return False
        # One job per pass: it goes to the Helper at once, and uploads are not held up
        # behind a long stretch of decryption and VDAF work.
        sizes = core.JobSizes(cfg.min_job_size, cfg.max_job_size, cfg.straggler_age,
                              jobs_per_pass=1)
        # Job fill: while one of a task's jobs is being stepped by this worker, the task's
        # next job is made only once it is full (max_job_size reports) or its oldest
        # report has waited straggler_age; otherwise when that step ends. Reports that
        # trickle in (one per upload) then make jobs of about what arrives during a step,
        # not whatever arrived since the last pass: each job has a fixed cost on both
        # Aggregators (a request, transactions), and a partial job sent beside a running
        # one gains no time, since the Helper is busy with that one. With many tasks
        # (a job per task in flight) nothing waits.
        fill = core.JobSizes(cfg.max_job_size, cfg.max_job_size, cfg.straggler_age,
                             jobs_per_pass=1)
        keyring = st.keyring()
        now = st.clock()
        # Only the tasks with work, from indexes (not every task): new reports, or (a VDAF
        # with an aggregation parameter) collection jobs waiting for their aggregation.
        # (Each task's creation then takes its lease.)
        if pending is None:
            pending = self.scan()
        task_ids = sorted(set(pending.new_tasks).union(
            bytes(j.task_id) for j in pending.collections
            if j.state == CollectionJobState.START))
        if step_now and self.create_cursor is not None:
            # In turn: the tasks after the last one served first (see below).
            cut = bisect.bisect_right(task_ids, self.create_cursor)
            task_ids = task_ids[cut:] + task_ids[:cut]
        failing = pending.task_work
        mono = time.monotonic()
        self.create_not_before = {t: v for t, v in self.create_not_before.items()
                                  if self._paused(t, mono, now)}
        self.held_elsewhere.intersection_update(self.create_not_before)
        sweep = pending.sweep

        async def candidates() -> AsyncIterator[bytes]:
            # The scan's window, then (while step slots are free) the next windows of its
            # round over the tasks with new reports, each read when it is reached.
            seen = set(task_ids)
            for tid in task_ids:
                yield tid
            while sweep is not None and not sweep.done:
                for tid in await st.offload(self.read_window, sweep):
                    if tid not in seen:
                        seen.add(tid)
                        yield tid

        created = 0
        async for tid in candidates():
            if step_now and len(self.in_flight) >= max(1, cfg.job_concurrency):
                # Every step slot is taken: a job made now would only wait for one, and
                # the reports that arrive meanwhile would make the task's next job larger
                # (a job has a fixed cost on both Aggregators: with reports trickling
                # into many tasks, jobs made ahead of the steps held one or two reports
                # each). The pass that follows a step's end goes on from here; another
                # process with a free slot takes the tasks meanwhile.
                break
            work = failing.get(tid)
            if work is not None and work.next_attempt_at > now:
                continue  # backing off after an error (recorded in task_work)
            if tid in self.create_not_before:
                continue  # made no job a moment ago (see below)
            # Per task: one task that cannot be loaded or whose reports make the core
            # raise (a bad option, a VDAF too large for memory) is recorded and retried
            # with backoff; the other tasks go on.
            try:
                task = st.task(tid, Role.LEADER)
                # (With step_now a step slot is free here: the loop stops when none is.)
                token = os.urandom(16) if step_now else None
                leased: list[AggregationJobRecord] = []
                filling = cfg.job_fill and self.stepping.get(tid, 0) > 0

                def create(task: Any = task, work: Any = work, tid: bytes = tid,
                           token: bytes | None = token,
                           leased: list[AggregationJobRecord] = leased,
                           sizes: core.JobSizes = fill if filling else sizes) -> int:
                    # One creator per task at a time (a lease, so that a creator that
                    # dies holds nobody up for long); the commit below also re-reads the
                    # reports still new, so no report is ever put into two jobs.
                    now = st.clock()
                    jobs: list[AggregationJobRecord] | None = None
                    with st.datastore.transaction() as tx:
                        if not tx.try_lease(CREATE_JOBS, tid, self.holder, now,
                                            cfg.job_lease):
                            return -1  # another process is making this task's jobs
                        new = core.reports_ready(tx, task, now, sizes)
                        if not new and not agg_params.uses_agg_param(task):
                            tx.release_lease(CREATE_JOBS, tid, self.holder)
                            return 0
                        if 0 < len(new) <= SMALL_CREATE_REPORTS \
                                and not agg_params.uses_agg_param(task):
                            # A few reports (many tasks, few reports each): their job is
                            # made in this transaction, the VDAF work included, which
                            # costs less than a second transaction.
                            jobs = core.create_aggregation_jobs(
                                tx, task, keyring, now, sizes, cfg.clock_skew, rng=st.rng,
                                new_reports=new, lease=None if token is None
                                else (token, st.clock() + cfg.job_lease))
                            if work is not None:
                                tx.delete_task_work(tid)
                            tx.release_lease(CREATE_JOBS, tid, self.holder)
                    if jobs is not None:
                        # Committed: the jobs are this worker's (leased) to step.
                        if token is not None:
                            leased.extend(jobs)
                        return len(jobs)
                    prepared = None
                    aggregated = None
                    if new:
                        # Decryption and VDAF preparation outside the transaction, which
                        # then only checks and commits (a short hold of the datastore).
                        prepared = core.prepare_aggregation_jobs(
                            task, keyring, new, now, cfg.clock_skew, pace=st.baton.pace)
                        if not agg_params.uses_agg_param(task):
                            # The replay check of job creation, from a read beside the
                            # writers (the commit of each report's output share is the
                            # check that counts: dap.core.buckets.commit_output_shares).
                            with st.datastore.read() as rtx:
                                aggregated = rtx.aggregated_among(
                                    tid, [r.report_id for r in new])
                    with st.datastore.transaction() as tx:
                        # Compare-and-set: commit only while the lease is still ours.
                        again = st.clock()
                        if not tx.try_lease(CREATE_JOBS, tid, self.holder, again,
                                            cfg.job_lease):
                            return -1
                        # Held since the first transaction (taken at `now` for job_lease,
                        # not yet expired; half of it left for other hosts' clocks), so no
                        # other creator took these reports: they are still new, and not
                        # read again (a statement over the job's reports, in the lock).
                        # Their other change, eviction, is seen in the transaction's
                        # horizon check. Otherwise the reports still new are read again.
                        held = again < now + cfg.job_lease / 2
                        count = len(core.create_aggregation_jobs(
                            tx, task, keyring, now, sizes, cfg.clock_skew, rng=st.rng,
                            prepared=prepared, new_reports=new if held else None,
                            aggregated=aggregated if held else None))
                        if work is not None:
                            tx.delete_task_work(tid)
                        tx.release_lease(CREATE_JOBS, tid, self.holder)
                    return count

                # In a worker thread, not on the event loop.
                count = await st.offload_job(create)
                self.create_cursor = tid
                self._start_steps(leased)
                if count > 0:
                    created += count
                    self.filling.discard(tid)
                else:
                    if filling and count == 0:
                        self.filling.add(tid)  # looked at again when the step ends
                    # Nothing made (too few reports yet, reports held back, or another
                    # process at work on it): look again after a poll interval, or once
                    # the stragglers are old enough.
                    pause = max(cfg.worker_interval,
                                min(cfg.work_poll_interval, cfg.straggler_age))
                    self.create_not_before[tid] = (time.monotonic() + pause,
                                                   st.clock() + pause)
                    if count < 0:
                        self.held_elsewhere.add(tid)
            except Exception as exc:  # noqa: BLE001 - isolate the task, record the error
                await st.offload(self._task_failed, tid, work, exc)
        return created > 0

    def _task_failed(self, task_id: bytes, work: TaskWorkRecord | None,
                     exc: BaseException) -> None:
        st = self.st
        attempts = (work.attempts if work is not None else 0) + 1
        # After max_item_attempts the task is tried every 10 minutes (a task is never
        # failed for good: provisioning it again fixes it).
        delay = backoff(attempts, cap=30.0 if attempts < st.config.max_item_attempts
                        else 600.0)
        log.warning("task %s: creating aggregation jobs failed (attempt %d, next in %.0f s): "
                    "%s", task_id.hex(), attempts, delay, describe(exc))
        with st.datastore.transaction() as tx:
            tx.put_task_work(TaskWorkRecord(task_id, attempts, st.clock() + delay,
                                            describe(exc)))
            tx.release_lease(CREATE_JOBS, task_id, self.holder)

    # stepping aggregation jobs
    async def step_jobs(self, pending: PendingWork | None = None) -> bool:
        """Start stepping jobs, up to `job_concurrency` in flight; does not wait for them
        (they are in `in_flight`). `pending`: this pass's scan, whose due time spares the
        acquiring transaction when no job can be due."""
        st = self.st
        free = max(1, st.config.job_concurrency) - len(self.in_flight)
        if free <= 0:
            return False
        if pending is not None and (pending.due is None or pending.due > pending.now):
            return False  # nothing due (jobs made or stepped since wake the worker)

        def acquire() -> list[AggregationJobRecord]:
            with st.datastore.transaction() as tx:
                return tx.acquire_aggregation_jobs("leader", st.clock(), st.config.job_lease,
                                                   free)

        # In a worker thread, not on the event loop: the transaction waits for the
        # datastore's writer (PostgreSQL's exclusive lock, SQLite's connection), which a
        # job creation or commit may hold for milliseconds, and the loop meanwhile steps
        # the jobs in flight and answers requests.
        jobs = await st.offload(acquire)
        self._start_steps(jobs)
        return bool(jobs)

    def _start_steps(self, jobs: list[AggregationJobRecord]) -> None:
        """Step leased jobs, each in an asyncio task of `in_flight`."""
        for job in jobs:
            tid = bytes(job.task_id)
            self.stepping[tid] = self.stepping.get(tid, 0) + 1
            step = asyncio.create_task(self._step_job(job))
            self.in_flight.add(step)
            step.add_done_callback(self.in_flight.discard)
            step.add_done_callback(functools.partial(self._step_ended, tid))

    def news_arrived(self) -> bool:
        """Woken by news (an upload, a collection job; not the end of a step): new
        reports may have come for the tasks that made no job, which are looked at again
        at the next pass: the tasks the news named when every piece of it named its
        tasks (this process's uploads and collection jobs; another process's
        notification when it names them, see WorkNotifier), else all. (An upload into
        one task does not make another's job: with many tasks, looking at every paused
        one after each upload was a write transaction per task, most making nothing.)
        Not those waiting for their running step (job fill): the step's end brings them
        back, and looking at them at every upload would read their reports again and
        again. Nor those whose creation another process held (`held_elsewhere`): they
        are looked at again when their pause ends (a process that dies holding the lease
        loses it after job_lease).

        Returns whether the news may make work now: False when it named only tasks that
        stay paused for those reasons (the worker then makes no pass for it; a collection
        job among that news is taken by the pass that follows the step's end, or the
        pause's)."""
        named = self.app[WAKE_KEY].take_news_tasks()
        self.create_not_before = {t: v for t, v in self.create_not_before.items()
                                  if self._news_proof(t)
                                  or (named is not None and t not in named)}
        if not named:
            return True  # news of any task (or of none named: as before, a pass)
        mono, now = time.monotonic(), self.st.clock()
        return not all(self._news_proof(t) and self._paused(t, mono, now) for t in named)

    def _news_proof(self, task_id: bytes) -> bool:
        """Whether news leaves the task's pause alone (see `news_arrived`)."""
        return task_id in self.filling or task_id in self.held_elsewhere

    def _paused(self, task_id: bytes, mono: float, now: float) -> bool:
        """Whether the task's pause (`create_not_before`) runs at `mono`
        (time.monotonic()) and `now` (the clock): it ends when either has passed."""
        pause = self.create_not_before.get(task_id)
        return pause is not None and pause[0] > mono and pause[1] > now

    def _step_ended(self, task_id: bytes, _step: asyncio.Task[None]) -> None:
        left = self.stepping.get(task_id, 1) - 1
        if left > 0:
            self.stepping[task_id] = left
            return
        self.stepping.pop(task_id, None)
        if task_id in self.filling:
            # Its reports waited for this step (job fill): make their job at the next
            # pass, which scans (the step's end alone would make a light pass).
            self.filling.discard(task_id)
            self.create_not_before.pop(task_id, None)
            self.rescan = True
            self.wake_self()

    async def _step_job(self, job: AggregationJobRecord) -> None:
        async with self.sem:
            try:
                await self._step_job_inner(job)
            except Exception as exc:  # noqa: BLE001 - isolate the job, record the error
                log.exception("stepping aggregation job %s failed", job.job_id.hex())
                await self.st.offload(self._job_failed, job, exc)
            finally:
                self.wake_self()  # a step slot is free

    def _job_failed(self, job: AggregationJobRecord, exc: BaseException) -> None:
        """Our own code raised on a job: retry it with backoff, recording the error on
        the job, and abandon it (its reports fail) once it has used `max_item_attempts`
        or when its task is gone. (Network errors and the Helper's transient answers
        are retried without a limit, in `_retry_job`.)"""
        st = self.st
        with st.datastore.transaction() as tx:
            fresh = tx.get_leased_aggregation_job(job.task_id, job.job_id, job.lease_token)
            if fresh is None or fresh.state != AggregationJobState.ACTIVE:
                return  # another process leased the job since (ours expired)
            if task_gone(exc) or fresh.attempts + 1 >= st.config.max_item_attempts:
                log.warning("aggregation job %s abandoned: %s", job.job_id.hex(),
                            describe(exc))
                core.abandon_aggregation_job(tx, None, fresh, describe(exc))
                return
        self._retry_job(job, describe(exc))

    async def _step_job_inner(self, job: AggregationJobRecord) -> None:
        st = self.st
        task = st.task(job.task_id, Role.LEADER)
        assert self.session is not None
        headers = _auth_headers(task)
        profile = task.profile
        polling = job.response == b"poll" and job.helper_url
        if polling:
            url = f"{job.helper_url}"
            method, body = "GET", None
        elif job.step == 0:
            method, url = _request(task, "aggregation_job_init", aggregation_job_id=job.job_id)
            body = job.request
            headers["Content-Type"] = profile.media_type_for("AggregationJobInitReq")
        else:
            method, url = _request(task, "aggregation_job_continue",
                                   aggregation_job_id=job.job_id)
            if job.helper_url:  # where the Helper said the job is (DAP-18 Location)
                url = job.helper_url.split("?")[0]
            body = job.request
            headers["Content-Type"] = profile.media_type_for("AggregationJobContinueReq")
        try:
            # Never follow a redirect: the token is for the Helper's origin (dap/origin.py).
            async with self.session.request(method, url, data=body, headers=headers,
                                            allow_redirects=False) as resp:
                content = await read_response(resp, self.response_limit)
                status = resp.status
                location = resp.headers.get("Location")
                retry_after = resp.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError) as exc:
            await st.offload(self._retry_job, job, f"{type(exc).__name__}: {exc}")
            return
        if 300 <= status < 400:
            await st.offload(self._retry_job, job, f"HTTP {status}: the Helper redirected to "
                             f"{location!r}; redirects are not followed")
            return
        if location:
            try:
                job.helper_url = resolve_location(url, location)
            except ForeignLocation as exc:
                # Ignored: the job is then polled or continued at its own URL.
                log.warning("aggregation job %s: %s", job.job_id.hex(), exc)
        if 200 <= status < 300 and content:
            def process() -> bool | None:
                # The VDAF work outside the transaction, which then checks and commits.
                # (Read beside the writers: the commit below checks the lease, step and
                # each report's stored state against these.) A small answer's (a few
                # reports) is done in the transaction: less than a read transaction.
                prepared = None
                records = None
                if len(content) > SMALL_RESPONSE_BYTES:
                    with st.datastore.read() as tx:
                        records = tx.get_report_aggregations(job.task_id, job.job_id)
                    prepared = core.prepare_job_response(task, job, records, content,
                                                         pace=st.baton.pace)
                with st.datastore.transaction() as tx:
                    # Compare-and-set on the lease token: a worker whose lease expired
                    # (another process took the job) does not commit. Only the lease's
                    # holder changes an active job, its step and request (the request
                    # changes with the step), and its report aggregations; and this
                    # worker's lease was committed before `records` were read. So if the
                    # token, state and step are still these, the stored request is
                    # `job.request` (not read again: every report's shares) and the
                    # stored report aggregations are `records` (not read again either).
                    fresh = tx.get_leased_aggregation_job(job.task_id, job.job_id,
                                                          job.lease_token, with_request=False)
                    if fresh is None or fresh.state != AggregationJobState.ACTIVE \
                            or fresh.step != job.step:
                        return None  # a late answer to a step another worker processed
                    fresh.request = job.request
                    fresh.helper_url = job.helper_url
                    fresh.response = None
                    fresh.lease_expiry = 0.0
                    new_state = core.process_aggregation_job_response(
                        tx, task, fresh, content, prepared=prepared, records=records)
                    return new_state == AggregationJobState.ABANDONED

            # The Leader's VDAF work on the answer (at most max_job_size reports) runs in
            # a worker thread, not on the event loop.
            abandoned = await st.offload_job(process)
            if abandoned is None:
                return
            # A job done: DEBUG (one line per job is noise at thousands a minute); an
            # abandoned one: INFO.
            log.log(logging.INFO if abandoned else logging.DEBUG,
                    "aggregation job %s (task %s) step %d: %s", job.job_id.hex(),
                    job.task_id.hex()[:16], job.step, "abandoned" if abandoned else "done")
            if abandoned:
                await self._delete_helper_job(task, job)
            self.wake_self()
        elif 200 <= status < 300:
            # Deferred by the Helper: poll the resource after Retry-After.
            delay = _retry_after(retry_after, st.config.retry_after)

            def deferred(tx: Any) -> None:
                fresh = tx.get_leased_aggregation_job(job.task_id, job.job_id,
                                                      job.lease_token)
                if fresh is None or fresh.state != AggregationJobState.ACTIVE:
                    return
                fresh.helper_url = job.helper_url
                fresh.response = b"poll" if job.helper_url else None
                fresh.next_attempt_at = st.clock() + delay
                fresh.lease_expiry = 0.0
                tx.update_aggregation_job(fresh)
            await st.transact(deferred)
        elif status in (401, 403, 404, 408, 429) or status >= 500:
            # Transient, or a Helper not (yet) provisioned for the task: retry later.
            await st.offload(self._retry_job, job, f"HTTP {status}: {_problem_text(content)}")
        else:
            def refused(tx: Any) -> None:
                fresh = tx.get_leased_aggregation_job(job.task_id, job.job_id,
                                                      job.lease_token)
                if fresh is not None and fresh.state == AggregationJobState.ACTIVE:
                    core.abandon_aggregation_job(tx, task, fresh,
                                                 f"Helper answered {status}: "
                                                 f"{_problem_text(content)}")
            await st.transact(refused)
            await self._delete_helper_job(task, job)

    def _retry_job(self, job: AggregationJobRecord, reason: str) -> None:
        st = self.st
        log.info("aggregation job %s: will retry (%s)", job.job_id.hex(), reason)
        with st.datastore.transaction() as tx:
            fresh = tx.get_leased_aggregation_job(job.task_id, job.job_id, job.lease_token)
            if fresh is None or fresh.state != AggregationJobState.ACTIVE:
                return
            fresh.attempts += 1
            fresh.error = reason
            fresh.next_attempt_at = st.clock() + backoff(fresh.attempts)
            fresh.lease_expiry = 0.0
            tx.update_aggregation_job(fresh)

    async def _delete_helper_job(self, task: Any, job: AggregationJobRecord) -> None:
        """Tell the Helper it may clean up an abandoned job (best effort)."""
        if self.session is None:
            return
        _, url = _request(task, "aggregation_job_delete", aggregation_job_id=job.job_id)
        if job.helper_url:
            url = job.helper_url.split("?")[0]
        elif job.step == 0 and "aggregation_jobs" in task.profile.resources:
            return  # DAP-18: the Helper never named the job
        try:
            async with self.session.delete(url, headers=_auth_headers(task),
                                           allow_redirects=False):
                pass
        except (aiohttp.ClientError, TimeoutError):
            pass

    # collection jobs
    async def drive_collections(self, pending: PendingWork | None = None) -> bool:
        """Drive the due collection jobs (`pending`: this pass's scan, else read here)."""
        st = self.st
        if pending is None:
            def listing() -> list[CollectionJobRecord]:
                with st.datastore.read() as tx:  # each is then leased (compare-and-set)
                    return list(tx.list_collection_jobs(_PENDING_COLLECTION, st.clock()))
            jobs = await st.offload(listing)
        else:
            jobs = [j for j in pending.collections if j.next_attempt_at <= pending.now]
        progressed = False
        for job in jobs:
            # One driver per collection job at a time (a lease: see _lease_collection).
            key = bytes(job.task_id) + bytes(job.job_id)
            if not await st.transact(lambda tx, key=key: tx.try_lease(
                    COLLECTION, key, self.holder, st.clock(), st.config.job_lease)):
                continue
            # Per job: an error is recorded on the job, which is retried with backoff and
            # failed after max_item_attempts (at once if its task was deleted); the other
            # collection jobs go on.
            try:
                progressed = await self._drive_collection(job) or progressed
            except Exception as exc:  # noqa: BLE001 - isolate the job, record the error
                await st.offload(self._collection_failed, job, exc)
            finally:
                await st.transact(lambda tx, key=key: tx.release_lease(COLLECTION, key,
                                                                       self.holder))
        return progressed

    def _lease_collection(self, tx: Any, job: CollectionJobRecord) -> bool:
        """Whether this process still holds the job's lease (renewed): the compare of a
        compare-and-set before the job's state changes."""
        return bool(tx.try_lease(COLLECTION, bytes(job.task_id) + bytes(job.job_id),
                                 self.holder, self.st.clock(), self.st.config.job_lease))

    def _collection_failed(self, job: CollectionJobRecord, exc: BaseException) -> None:
        st = self.st
        log.warning("collection job %s failed: %s", job.job_id.hex(), describe(exc))
        with st.datastore.transaction() as tx:
            fresh = tx.get_collection_job(job.task_id, job.job_id)
            if fresh is None or fresh.state not in _PENDING_COLLECTION:
                return
            if task_gone(exc):
                core.fail_collection(tx, fresh, "unrecognizedTask", "the task was deleted")
                return
            fresh.attempts += 1
            if fresh.attempts >= st.config.max_item_attempts:
                try:
                    task = st.task(job.task_id, Role.LEADER)
                except Exception:  # noqa: BLE001 - the task cannot be loaded either
                    core.fail_collection(tx, fresh, "invalidMessage", describe(exc))
                    return
                # Nothing was released: unfreeze the batch as for a refusal.
                try:
                    core.release_refused_collection(tx, task, fresh, "invalidMessage",
                                                    f"internal error: {describe(exc)}")
                except Exception:  # noqa: BLE001 - it decodes the request first
                    core.fail_collection(tx, fresh, "invalidMessage", describe(exc))
                return
            fresh.error_detail = f"attempt {fresh.attempts} failed: {describe(exc)}"
            fresh.next_attempt_at = st.clock() + backoff(fresh.attempts)
            tx.update_collection_job(fresh)

    async def _drive_collection(self, job: CollectionJobRecord) -> bool:
        st = self.st
        task = st.task(job.task_id, Role.LEADER)

        def prepare(tx: Any) -> Any:
            fresh = tx.get_collection_job(job.task_id, job.job_id)
            if fresh is None or fresh.state not in _PENDING_COLLECTION \
                    or not self._lease_collection(tx, fresh):
                return None
            share_request = core.prepare_collection(tx, task, fresh, st.clock(),
                                                    st.config.collection_give_up_after)
            if share_request is None and fresh.state in _PENDING_COLLECTION:
                fresh.next_attempt_at = st.clock() + st.config.worker_interval * 4
                tx.update_collection_job(fresh)
            return share_request

        share_request = await st.transact(prepare)
        if share_request is None:
            return False
        assert self.session is not None
        headers = _auth_headers(task)
        location = self.share_locations.get(job.job_id)
        if location:
            method, url, body = "GET", location, None
        else:
            method, url = _request(task, "aggregate_share_create")
            body = share_request.body
            headers["Content-Type"] = task.profile.media_type_for("AggregateShareReq")
        try:
            async with self.session.request(method, url, data=body, headers=headers,
                                            allow_redirects=False) as resp:
                content = await read_response(resp, self.response_limit)
                status = resp.status
                loc = resp.headers.get("Location")
                retry_after = resp.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError) as exc:
            await st.offload(self._retry_collection, job, f"{type(exc).__name__}: {exc}")
            return False
        if 300 <= status < 400:
            await st.offload(self._retry_collection, job, f"HTTP {status}: the Helper "
                             f"redirected to {loc!r}; redirects are not followed")
            return False
        if loc:
            try:
                self.share_locations[job.job_id] = resolve_location(url, loc)
            except ForeignLocation as exc:
                log.warning("collection job %s: %s", job.job_id.hex(), exc)
        if 200 <= status < 300 and content:
            def finish(tx: Any) -> None:
                fresh = tx.get_collection_job(job.task_id, job.job_id)
                if fresh is not None and fresh.state == CollectionJobState.COLLECTING \
                        and self._lease_collection(tx, fresh):
                    core.finish_collection(tx, task, fresh, share_request, content,
                                           rng=st.rng)
                    log.info("collection job %s (task %s): finished", job.job_id.hex(),
                             job.task_id.hex()[:16])
            await st.transact(finish)
            self.share_locations.pop(job.job_id, None)
            return True
        if 200 <= status < 300:
            delay = _retry_after(retry_after, st.config.retry_after)

            def later(tx: Any) -> None:
                fresh = tx.get_collection_job(job.task_id, job.job_id)
                if fresh is not None:
                    fresh.next_attempt_at = st.clock() + delay
                    tx.update_collection_job(fresh)
            await st.transact(later)
            return False
        if status in (401, 403, 408, 429) or status >= 500:
            await st.offload(self._retry_collection, job,
                             f"HTTP {status}: {_problem_text(content)}")
            return False
        token, detail = _problem_token(content, status, task.profile)

        def refused(tx: Any) -> None:
            fresh = tx.get_collection_job(job.task_id, job.job_id)
            if fresh is not None and fresh.state in _PENDING_COLLECTION:
                core.release_refused_collection(tx, task, fresh, token, f"Helper: {detail}")
                log.info("collection job %s (task %s): refused by the Helper: %s %s",
                         job.job_id.hex(), job.task_id.hex()[:16], token, detail)
        await st.transact(refused)
        return True

    def _retry_collection(self, job: CollectionJobRecord, reason: str) -> None:
        st = self.st
        log.info("collection job %s: will retry (%s)", job.job_id.hex(), reason)
        with st.datastore.transaction() as tx:
            fresh = tx.get_collection_job(job.task_id, job.job_id)
            if fresh is None:
                return
            fresh.attempts += 1
            fresh.next_attempt_at = st.clock() + backoff(fresh.attempts)
            tx.update_collection_job(fresh)


def _auth_headers(task: Any) -> dict[str, str]:
    """The Leader's credential towards the Helper, in the task's profile's header, and
    for a taskprov task its advertisement: "The Leader MUST advertise the task to the
    Helper in every request incident to the task" (draft-ietf-ppm-dap-taskprov, Sections
    3.7.2 and 3.7.3)."""
    token = task.record.aggregator_auth_token
    if task.options.auth_header is not None:
        name, value = auth_header_for(task.options.auth_header, token)
    else:
        name, value = task.profile.auth_header_for(token)
    return {name: value, **advertisement_headers(task.task)}


def _request(task: Any, operation: str, **ids: bytes) -> tuple[str, str]:
    """(method, URL) of a request to the Helper, from the task's profile."""
    method, resource = task.profile.request(operation)
    template = task.profile.resources[resource]
    ids = {k: v for k, v in ids.items() if "{" + k.replace("_", "-") + "}" in template}
    return method, task.profile.resource_url(resource, task.task.helper_aggregator_endpoint,
                                             task_id=task.task_id, **ids)


def _retry_after(value: str | None, default: int) -> float:
    try:
        return max(0.0, float(value)) if value is not None else float(default)
    except ValueError:
        return float(default)


def _problem_token(content: bytes, status: int, profile: Any) -> tuple[str, str]:
    try:
        doc = ProblemDocument.from_json(content)
    except ProblemDocumentError:
        return "invalidMessage", f"HTTP {status}"
    token = doc.dap_problem(profile)
    return (str(token) if token else "invalidMessage"), (doc.detail or doc.title or doc.type)


def _problem_text(content: bytes) -> str:
    try:
        doc = ProblemDocument.from_json(content)
        return f"{doc.type} {doc.detail or ''}".strip()
    except ProblemDocumentError:
        return content[:200].decode(errors="replace")
