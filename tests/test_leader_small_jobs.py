"""The Leader's fixed per-job costs with many tasks of a few reports each (issue 14): one
read snapshot per pass of the background loop (`LeaderWorker.scan`), a task's few
reports made into a job in the transaction that reads them, a job made while a step slot
is free stored leased to the worker, wake-ups counted by `WorkEvent.news`, and the
storage operations they use (`list_task_work`, `tasks_with_new_reports`), on every
backend (`backend`: a SQLite file, or a fresh schema of the session's PostgreSQL
database)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from ppm_reference.dap.common import Role
from ppm_reference.dap.hpke import generate_keypair
from ppm_reference.dap.profiles.dap18.client import generate_report
from ppm_reference.dap.profiles.dap18.messages import UploadRequest
from ppm_reference.dap.provision import new_task
from ppm_reference.dap.server import leader as leader_server
from ppm_reference.dap.server.app import build_app
from ppm_reference.dap.server.common import STATE_KEY
from ppm_reference.dap.server.config import AggregatorConfig
from ppm_reference.dap.server.scheduling import WorkEvent
from ppm_reference.dap.storage import (
    AggregationJobRecord,
    ClientReportRecord,
    HpkeKeyRecord,
    HpkeKeyState,
    ReportState,
    TaskWorkRecord,
)
from ppm_reference.dap.storage import open_datastore as open_any_datastore
from ppm_reference.vdaf.prio3 import Prio3Count
from tests.pg_harness import BACKENDS


def _datastore(spec: str) -> Any:
    return open_any_datastore(spec, key_from_env=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_task_work_and_tasks_with_new_reports(datastore_spec: Callable[[str], str],
                                                   backend: str) -> None:
    ds = _datastore(datastore_spec("store"))
    rng = random.Random(3)
    tids = sorted({rng.randbytes(32) for _ in range(40)})
    try:
        with ds.transaction() as tx:
            reports = [ClientReportRecord(t, rng.randbytes(16), 60, b"r")
                       for t in tids for _ in range(1 + tids.index(t) % 3)]
            tx.put_client_reports(reports)
            # Two tasks have no new report left.
            for gone in (tids[0], tids[7]):
                tx.set_report_states(gone, [r.report_id for r in reports if r.task_id == gone],
                                     ReportState.FAILED)
            assert tx.list_task_work() == []
            tx.put_task_work(TaskWorkRecord(tids[3], 2, 123.0, "boom"))
            tx.put_task_work(TaskWorkRecord(tids[9], 1, 45.0, "bang"))
        with ds.read() as tx:
            new = [t for t in tids if t not in (tids[0], tids[7])]
            assert tx.tasks_with_new_reports(1000) == new
            assert tx.tasks_with_new_reports(5) == new[:5]
            assert tx.tasks_with_new_reports(0) == []
            # From after an ID (a window of the Leader's round, `Sweep`).
            assert tx.tasks_with_new_reports(1000, new[4]) == new[5:]
            assert tx.tasks_with_new_reports(3, new[4]) == new[5:8]
            assert tx.tasks_with_new_reports(3, tids[7]) == new[6:9]   # (not itself new)
            assert tx.tasks_with_new_reports(10, new[-1]) == []
            assert tx.tasks_with_new_reports(2, b"") == new[:2]
            work = {bytes(w.task_id): (w.attempts, w.next_attempt_at, w.error)
                    for w in tx.list_task_work()}
            assert work == {tids[3]: (2, 123.0, "boom"), tids[9]: (1, 45.0, "bang")}
    finally:
        ds.close()


def _leader(spec: Callable[[str], str], n_tasks: int, per_task: int, **overrides: Any
            ) -> tuple[Any, Any, list[Any]]:
    """A Leader app (no background work) on a fresh datastore with `n_tasks` tasks of
    `per_task` new reports each (`overrides`: of the Leader's configuration)."""
    path = spec("leader")
    vdaf = Prio3Count(2)
    keys = {"leader": generate_keypair(1), "helper": generate_keypair(2)}
    tasks = [new_task(vdaf, "http://127.0.0.1:9/", "http://127.0.0.1:9/", min_batch_size=1,
                      time_precision=60) for _ in range(n_tasks)]
    ds = _datastore(path)
    try:
        with ds.transaction() as tx:
            for pt in tasks:
                tx.put_task(pt.record("leader"))
            key = keys["leader"]
            tx.put_hpke_key(HpkeKeyRecord(key.config.id, key.config.encode(),
                                          key.private_key, HpkeKeyState.ACTIVE, time.time()))
    finally:
        ds.close()
    # min_job_size above the reports per task: their jobs are stragglers' (age 0).
    settings: dict[str, Any] = {"min_job_size": 50, "max_job_size": 100,
                                "straggler_age": 0.0, "job_concurrency": 2, **overrides}
    config = AggregatorConfig(role="leader", datastore=path, sqlite_synchronous="OFF",
                              **settings)
    app = build_app(config, background=False)
    st = app[STATE_KEY]
    rng = random.Random(5)
    now = int(time.time()) // 60
    for pt in tasks:
        reports = [generate_report(pt.task, rng.randrange(2), time=now,
                                   leader_hpke_config=keys["leader"].config,
                                   helper_hpke_config=keys["helper"].config, vdaf=vdaf)
                   for _ in range(per_task)]
        task = st.task(pt.task.task_id, Role.LEADER)
        assert leader_server.store_upload(st, task, st.keyring(),
                                          UploadRequest(tuple(reports)).encode()) == []
    return app, st, tasks


def _close(app: Any) -> None:
    app[STATE_KEY].close()
    app[STATE_KEY].datastore.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan_then_small_jobs_made_and_leased(datastore_spec: Callable[[str], str],
                                              backend: str) -> None:
    """The scan sees every task with new reports; a pass makes one job per task (a few
    reports: one transaction each) while a step slot is free (`step_now`), stored leased
    to the worker and handed to it; the other tasks wait (their reports would make
    larger jobs meanwhile), and the next pass takes them, beginning after the last task
    served (in turn, so that the first tasks do not starve the last ones)."""
    app, st, tasks = _leader(datastore_spec, n_tasks=5, per_task=3)
    try:
        worker = leader_server.LeaderWorker(app, st)
        ids = sorted(bytes(pt.task.task_id) for pt in tasks)
        with st.datastore.transaction() as tx:
            tx.put_task_work(TaskWorkRecord(ids[1], 1, 0.0, "an old failure"))
        pending = worker.scan()
        assert pending.new_tasks == ids
        assert pending.collections == [] and set(pending.task_work) == {ids[1]}
        assert pending.due is None  # no job yet
        started: list[AggregationJobRecord] = []
        steps: list[asyncio.Future[None]] = []

        def start(jobs: list[AggregationJobRecord]) -> None:
            started.extend(jobs)
            # Two slots (job_concurrency 2): each job taken, as a step in flight would be.
            for _ in jobs:
                steps.append(asyncio.Future())
                worker.in_flight.add(steps[-1])  # type: ignore[arg-type]

        worker._start_steps = start  # type: ignore[method-assign]
        assert asyncio.run(worker.create_jobs(pending, step_now=True))
        assert [bytes(j.task_id) for j in started] == ids[:2]
        # Every slot is taken: a pass makes nothing.
        assert not asyncio.run(worker.create_jobs(worker.scan(), step_now=True))
        now = st.clock()
        with st.datastore.transaction() as tx:
            for i, tid in enumerate(ids):
                assert tx.count_reports(tid, (ReportState.NEW,)) == (0 if i < 2 else 3)
                assert tx.count_reports(tid, (ReportState.IN_JOB,)) == (3 if i < 2 else 0)
            for job in started:
                stored = tx.get_leased_aggregation_job(job.task_id, job.job_id,
                                                       job.lease_token)
                assert stored is not None and len(job.lease_token) == 16
                assert stored.lease_expiry > now and stored.step == 0
                assert stored.request == job.request
            # Leased: nothing for acquire_aggregation_jobs.
            assert tx.acquire_aggregation_jobs("leader", now, 60.0, 10) == []
            # The task's recorded failure was cleared by its creation.
            assert tx.list_task_work() == []
            # The first task has new reports again: it waits for its turn.
            tx.put_client_reports([ClientReportRecord(ids[0], b"n" * 16, 0, b"r")])
        # One step ends: the next pass begins after the last task served.
        worker.in_flight.clear()
        worker.in_flight.add(steps[0])  # type: ignore[arg-type]
        assert asyncio.run(worker.create_jobs(worker.scan(), step_now=True))
        assert [bytes(j.task_id) for j in started] == ids[:3]
        worker.in_flight.clear()
        assert asyncio.run(worker.create_jobs(worker.scan(), step_now=True))
        assert [bytes(j.task_id) for j in started] == ids[:5]
        # The next scan finds only the first task's new report; its turn comes now.
        again = worker.scan()
        assert again.new_tasks == [ids[0]] and again.due is not None and again.due > now
    finally:
        _close(app)


@pytest.mark.parametrize("backend", BACKENDS)
def test_create_jobs_called_alone_only_creates(datastore_spec: Callable[[str], str],
                                               backend: str) -> None:
    """Without `step_now` (direct callers), jobs are made unleased and nothing is
    stepped."""
    app, st, tasks = _leader(datastore_spec, n_tasks=2, per_task=2)
    try:
        worker = leader_server.LeaderWorker(app, st)
        assert asyncio.run(worker.create_jobs())
        assert not worker.in_flight
        with st.datastore.transaction() as tx:
            acquired = tx.acquire_aggregation_jobs("leader", st.clock(), 60.0, 10)
        assert sorted(bytes(j.task_id) for j in acquired) == sorted(
            bytes(pt.task.task_id) for pt in tasks)
    finally:
        _close(app)


def test_work_event_counts_news_not_a_workers_own_wakeups() -> None:

    async def run() -> None:
        event = WorkEvent()
        assert event.news == 0
        event.set()                      # a handler: an upload, a collection job
        assert event.news == 1 and event.is_set()
        event.clear()
        asyncio.Event.set(event)         # a worker's own wake-up (end of a job step)
        assert event.news == 1 and event.is_set()

    asyncio.run(run())


def test_work_event_names_the_tasks_of_its_news() -> None:

    async def run() -> None:
        event = WorkEvent()
        assert event.take_news_tasks() == set()
        event.set([b"a"])
        event.set({b"b"})
        assert event.news == 2
        assert event.take_news_tasks() == {b"a", b"b"}
        assert event.take_news_tasks() == set()        # taken
        event.set([b"a"])
        event.set()                                      # news of any task
        event.set([b"c"])
        assert event.take_news_tasks() is None
        asyncio.Event.set(event)                         # a worker's own wake-up: no news
        assert event.take_news_tasks() == set()

    asyncio.run(run())


@pytest.mark.parametrize("backend", BACKENDS)
def test_news_brings_back_only_the_tasks_it_names(datastore_spec: Callable[[str], str],
                                                  backend: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A task that made no job (too few reports yet) is paused; news of an upload into
    another task does not bring it back (it used to: with many tasks, a write
    transaction per paused task after each upload, making nothing), news of its own
    does, and news that names no task (another process's notification) brings back
    every task."""
    app, st, tasks = _leader(datastore_spec, n_tasks=2, per_task=2, min_job_size=3,
                             straggler_age=3600.0)
    looked: list[bytes] = []
    ready = leader_server.core.reports_ready

    def spy(tx: Any, task: Any, *args: Any) -> Any:
        looked.append(bytes(task.task_id))
        return ready(tx, task, *args)

    monkeypatch.setattr(leader_server.core, "reports_ready", spy)
    try:
        worker = leader_server.LeaderWorker(app, st)
        first, second = sorted(bytes(pt.task.task_id) for pt in tasks)
        assert not asyncio.run(worker.create_jobs())
        assert sorted(looked) == [first, second]
        assert set(worker.create_not_before) == {first, second}
        wake = app[leader_server.WAKE_KEY]
        wake.set([second])
        worker.news_arrived()
        assert set(worker.create_not_before) == {first}
        looked.clear()
        assert not asyncio.run(worker.create_jobs())
        assert looked == [second]
        wake.set()
        worker.news_arrived()
        assert worker.create_not_before == {}
        looked.clear()
        assert not asyncio.run(worker.create_jobs())
        assert sorted(looked) == [first, second]
    finally:
        _close(app)


@pytest.mark.parametrize("backend", BACKENDS)
def test_news_leaves_a_task_another_process_is_creating_for(
        datastore_spec: Callable[[str], str], backend: str) -> None:
    """A task whose creation lease another process holds (it is making the task's jobs)
    is paused, and news does not bring it back, named or not (with several drivers,
    every upload's notification brought it back in each other driver, for a write
    transaction that found the lease taken); once the pause ends it is looked at again,
    and with the lease free its job is made."""
    app, st, tasks = _leader(datastore_spec, n_tasks=1, per_task=2, min_job_size=1,
                             work_poll_interval=0.5)
    tid = bytes(tasks[0].task.task_id)
    try:
        with st.datastore.transaction() as tx:
            assert tx.try_lease(leader_server.CREATE_JOBS, tid, b"another process",
                                st.clock(), 60.0)
        worker = leader_server.LeaderWorker(app, st)
        assert not asyncio.run(worker.create_jobs())
        assert tid in worker.create_not_before
        wake = app[leader_server.WAKE_KEY]
        for news, work in (([tid], False), (None, True)):
            wake.set(news)
            # News of this task alone makes no pass; news of any task does (but leaves
            # this one paused).
            assert worker.news_arrived() is work
            assert tid in worker.create_not_before       # still paused
        assert worker.held_elsewhere == {tid}
        with st.datastore.transaction() as tx:
            tx.release_lease(leader_server.CREATE_JOBS, tid, b"another process")
        assert not asyncio.run(worker.create_jobs())     # paused: not looked at
        assert _jobs_by_task(st) == {}
        worker.create_not_before[tid] = (time.monotonic() - 1, st.clock() - 1)  # ended
        assert asyncio.run(worker.create_jobs())
        assert _jobs_by_task(st) == {tid: 1}
        assert not worker.held_elsewhere
    finally:
        _close(app)


def _jobs_by_task(st: Any) -> dict[bytes, int]:
    with st.datastore.transaction() as tx:
        jobs = tx.acquire_aggregation_jobs("leader", st.clock(), 60.0, 100)
    out: dict[bytes, int] = {}
    for job in jobs:
        out[bytes(job.task_id)] = out.get(bytes(job.task_id), 0) + 1
    return out


@pytest.mark.parametrize("per_task,job_fill,waits",
                         [(3, True, True), (4, True, False), (3, False, False)])
def test_job_fill_waits_for_the_tasks_running_step(datastore_spec: Callable[[str], str],
                                                   per_task: int, job_fill: bool,
                                                   waits: bool) -> None:
    """Job fill: while one of a task's jobs is stepped by the worker, that task's next
    job is made only when full (max_job_size = 4 here) or when the step ends; another
    task (nothing in flight) gets its job at once, partial or not. `job_fill: false`
    turns it off."""
    app, st, tasks = _leader(datastore_spec, n_tasks=2, per_task=per_task, min_job_size=1,
                             max_job_size=4, straggler_age=3600.0, job_fill=job_fill)
    try:
        worker = leader_server.LeaderWorker(app, st)
        busy, idle = sorted(bytes(pt.task.task_id) for pt in tasks)
        worker.stepping[busy] = 1  # a job of `busy` is in flight
        assert asyncio.run(worker.create_jobs())
        made = _jobs_by_task(st)
        assert made.get(idle) == 1
        assert made.get(busy) == (None if waits else 1)
        assert (busy in worker.filling) is waits
        assert (busy in worker.create_not_before) is waits
        assert not worker.rescan
        # An upload's news brings back the tasks that made no job, not those that wait
        # for their running step.
        worker.create_not_before[b"other"] = (time.monotonic() + 60, st.clock() + 60)
        app[leader_server.WAKE_KEY].set([busy])  # an upload into the waiting task alone:
        assert worker.news_arrived() is not waits  # no pass for it
        app[leader_server.WAKE_KEY].set([b"other", busy])  # uploads into both
        assert worker.news_arrived()
        assert set(worker.create_not_before) == ({busy} if waits else set())
        # The step ends: a waiting task is looked at by the next pass, which scans.
        worker._step_ended(busy, None)  # type: ignore[arg-type]
        assert busy not in worker.stepping
        assert worker.rescan is waits and not worker.filling
        assert busy not in worker.create_not_before
        assert asyncio.run(worker.create_jobs()) is waits
        assert _jobs_by_task(st).get(busy) == (1 if waits else None)
        with st.datastore.read() as tx:
            assert tx.count_reports(busy, (ReportState.NEW,)) == 0
    finally:
        _close(app)


def test_job_fill_ends_for_stragglers(datastore_spec: Callable[[str], str]) -> None:
    """A task's partial job does not wait for its running step once its oldest report
    has waited straggler_age."""
    app, st, tasks = _leader(datastore_spec, n_tasks=1, per_task=2, min_job_size=1,
                             max_job_size=4, straggler_age=0.0)
    try:
        worker = leader_server.LeaderWorker(app, st)
        tid = bytes(tasks[0].task.task_id)
        worker.stepping[tid] = 2
        assert asyncio.run(worker.create_jobs())
        assert _jobs_by_task(st) == {tid: 1} and not worker.filling
        worker._step_ended(tid, None)  # type: ignore[arg-type]
        assert worker.stepping == {tid: 1} and not worker.rescan
    finally:
        _close(app)


class _Ids:
    """The one query `Sweep` makes, over a fixed set of task IDs."""

    def __init__(self, ids: set[bytes]) -> None:
        self.ids = sorted(ids)
        self.queries = 0

    def tasks_with_new_reports(self, limit: int, after: bytes | None = None) -> list[bytes]:
        self.queries += 1
        return [t for t in self.ids if after is None or t > after][:limit]


_ID = st_.binary(min_size=2, max_size=2)


@settings(max_examples=300, deadline=None)
@given(ids=st_.sets(_ID, max_size=30), start=st_.none() | _ID,
       windows=st_.lists(st_.integers(1, 7), min_size=1, max_size=40))
def test_sweep_reads_every_task_once_in_turn(ids: set[bytes], start: bytes | None,
                                             windows: list[int]) -> None:
    """A round of windows of any sizes reads each task with new reports once: those
    after `start` in ID order, then from the lowest up to `start` itself; then it is
    done, and a window reads at most its size."""
    tx = _Ids(ids)
    sweep = leader_server.Sweep(start)
    got: list[bytes] = []
    for size in windows:
        if sweep.done:
            break
        window = sweep.read(tx, size)
        assert len(window) <= size
        got += window
    ordered = sorted(ids)
    expected = ordered if start is None else \
        [t for t in ordered if t > start] + [t for t in ordered if t <= start]
    if sweep.done:
        assert got == expected
        assert sweep.read(tx, 5) == []
    else:
        assert got == expected[:len(got)] and len(got) == sum(windows)


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan_reads_a_window_and_creation_reads_on(datastore_spec: Callable[[str], str],
                                                   backend: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan reads one window of the tasks with new reports (not all of them: with
    thousands of tasks every pass read thousands of rows), from after the last task
    served; a pass whose window's tasks make no job (paused) reads the next windows
    while a step slot is free, so no task waits behind paused ones."""
    monkeypatch.setattr(leader_server, "CREATE_WINDOW", 2)
    app, st, tasks = _leader(datastore_spec, n_tasks=5, per_task=2, job_concurrency=1)
    try:
        worker = leader_server.LeaderWorker(app, st)
        ids = sorted(bytes(pt.task.task_id) for pt in tasks)
        pending = worker.scan()
        assert pending.new_tasks == ids[:2]
        far = (time.monotonic() + 3600, st.clock() + 3600)
        for tid in ids[:3]:
            worker.create_not_before[tid] = far     # made no job a moment ago
        started: list[AggregationJobRecord] = []

        def start(jobs: list[AggregationJobRecord]) -> None:
            started.extend(jobs)
            for _ in jobs:
                worker.in_flight.add(asyncio.Future())  # type: ignore[arg-type]

        worker._start_steps = start  # type: ignore[method-assign]
        assert asyncio.run(worker.create_jobs(pending, step_now=True))
        # The one slot went to the first task not paused, in the second window.
        assert [bytes(j.task_id) for j in started] == [ids[3]]
        assert worker.create_cursor == ids[3]
        # The next round begins after it, and wraps round to the lowest IDs.
        worker.in_flight.clear()
        again = worker.scan()
        assert again.new_tasks == [ids[4], ids[0]]
        assert asyncio.run(worker.create_jobs(again, step_now=True))
        assert [bytes(j.task_id) for j in started] == [ids[3], ids[4]]
    finally:
        _close(app)


class _Notifier:
    """A datastore's WorkNotifier hooks, recorded (dap.server.scheduling)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, set[bytes] | None]] = []
        self.listener: Any = None

    def notify_work(self, role: str, task_ids: Any = None) -> None:
        self.sent.append((role, None if task_ids is None else set(task_ids)))

    def listen_work(self, role: str, callback: Any, own: bool = True) -> None:
        self.listener = callback


def test_work_event_sends_and_receives_the_tasks_of_its_news() -> None:
    """Other processes hear which tasks the news is about (so that their drivers look
    again only at those tasks' job creation), and news from them names its tasks the
    same way, or none."""

    async def run() -> None:
        notifier = _Notifier()
        event = WorkEvent(notifier)
        event.set(iter([b"a", b"b"]))       # (an iterator: read once)
        event.set()
        assert notifier.sent == [("leader", {b"a", b"b"}), ("leader", None)]
        assert event.take_news_tasks() is None
        event.listen(notifier)
        event.clear()
        notifier.listener({b"c"})           # from the listener's thread
        await asyncio.wait_for(event.wait(), 5)
        notifier.listener({b"d"})
        await asyncio.sleep(0.01)
        assert event.news == 4 and event.take_news_tasks() == {b"c", b"d"}
        notifier.listener(None)
        await asyncio.sleep(0.01)
        assert event.take_news_tasks() is None
        assert len(notifier.sent) == 2      # received news is not sent on

    asyncio.run(run())
