"""One failing job or task does not stop background work for the others (issue 12): the
error is recorded on the item (its `error` column, or the `task_work` table for a task),
the item is retried with backoff and failed after `max_item_attempts` (at once when its
task is gone), and every other task's uploads are aggregated and collected meanwhile.

Triggers, as in the issue: a task deleted through the admin API while it has a pending
collection job; stored tasks the provisioning checks now refuse (option
`max_batch_size: "abc"`, `max_batch_size: -5` -- which hung the Leader inside a
transaction -- and a Prio3Histogram of length 2^30, a MemoryError on every pass), written
straight into the datastore as an older version could have; and an asynchronous Helper
whose processing of one task's jobs raises."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.core import helper as core_helper
from ppm_reference.dap.provision import ProvisionedTask, b64, new_task
from ppm_reference.dap.storage import AggregationJobState, ClientReportRecord, CollectionJobState
from tests.dap_harness import PROTOS, AggregatorPair

PROTO = PROTOS[0]
ADMIN = {"admin_token": "admin-secret"}


def rows(state: Any, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with state.datastore.transaction() as tx:
        return [tuple(r) for r in tx.c.execute(sql, args).fetchall()]


async def collect_ok(pair: AggregatorPair, pt: ProvisionedTask, expected: int) -> None:
    async with pair.collector(pt) as collector:
        result = await collector.collect(pair.current_interval_query(pt), timeout=30,
                                         max_poll_interval=0.05)
    assert result.report_count == expected


def healthy(pair: AggregatorPair) -> ProvisionedTask:
    return pair.provision(PROTO.count(), min_batch_size=3, profile=PROTO.profile)


def test_deleted_task_with_a_pending_collection_job(tmp_path: Path) -> None:
    async def run() -> None:
        async with AggregatorPair(tmp_path, leader_overrides=ADMIN) as pair:
            doomed = pair.provision(PROTO.count(), min_batch_size=100, profile=PROTO.profile)
            ok = healthy(pair)
            async with pair.client(doomed) as client:
                await client.upload([1, 1])
            async with pair.collector(doomed) as collector:
                url, _ = await collector.start(pair.current_interval_query(doomed))
            async with aiohttp.ClientSession() as s, s.delete(
                    f"{pair.leader_url}internal/tasks/{b64(doomed.task.task_id)}",
                    headers={"Authorization": "Bearer admin-secret"}) as resp:
                assert resp.status == 200
            # The other task's collection job comes after the orphan's, and completes.
            async with pair.client(ok) as client:
                await client.upload([1, 0, 1])
            await collect_ok(pair, ok, 3)
            for _ in range(200):
                (job,) = rows(pair.leader_state, "SELECT state, error FROM collection_jobs "
                              "WHERE task_id=?", bytes(doomed.task.task_id))
                if job[0] != CollectionJobState.START:
                    break
                await asyncio.sleep(0.025)
            assert job == (CollectionJobState.FAILED, "unrecognizedTask")
    asyncio.run(run())


def _stored_bad_tasks(pair: AggregatorPair) -> dict[str, ProvisionedTask]:
    """Tasks an older version could have stored, written straight into both datastores
    under task IDs that sort before the healthy one (they come first in every pass)."""
    bad: dict[str, ProvisionedTask] = {}
    ls = BatchMode.LEADER_SELECTED
    for i, (name, vdaf, options) in enumerate((
            ("abc", PROTO.count(), {"max_batch_size": "abc"}),
            ("minus5", PROTO.count(), {"max_batch_size": -5}),
            ("huge", PROTO.histogram(2**30, 2**15), {}))):
        pt = new_task(vdaf, pair.leader_url, pair.helper_url, min_batch_size=2,
                      batch_mode=ls if options else BatchMode.TIME_INTERVAL,
                      profile=PROTO.profile, task_id=bytes([0, i]) + bytes(30))
        pt = dataclasses.replace(pt, options=options)
        for st, record in ((pair.leader_state, pt.leader_record),
                           (pair.helper_state, pt.helper_record)):
            with st.datastore.transaction() as tx:
                tx.put_task(record)
        bad[name] = pt
    return bad


def test_stored_tasks_that_cannot_run_do_not_stop_the_others(tmp_path: Path) -> None:
    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            bad = _stored_bad_tasks(pair)
            # Each with a report waiting (stored by that older version): the worker looks
            # only at tasks with work (dap.server.scheduling), and these have some.
            with pair.leader_state.datastore.transaction() as tx:
                for pt in bad.values():
                    tx.put_client_report(ClientReportRecord(pt.task.task_id, bytes(16), 0,
                                                            b"stored report"))
            ok = healthy(pair)
            async with pair.client(ok) as client:
                await client.upload([1, 1, 0, 1])
            await collect_ok(pair, ok, 4)
            for _ in range(200):
                work = {bytes(tid): (attempts, error) for tid, attempts, error in rows(
                    pair.leader_state, "SELECT task_id, attempts, error FROM task_work")}
                if len(work) == 3:
                    break
                await asyncio.sleep(0.025)
            for name, needle in (("abc", "max_batch_size must be an integer, got 'abc'"),
                                 ("minus5", "max_batch_size must be in [1,"),
                                 ("huge", "at most 65536")):
                attempts, error = work[bytes(bad[name].task.task_id)]
                assert attempts >= 1 and needle in error, (name, error)
            # Backing off: a few attempts in the time the healthy task took, not one per
            # pass of the worker (every 20 ms here).
            assert all(a <= 8 for a, _ in work.values()), work
    asyncio.run(run())


def test_helper_job_that_keeps_raising_is_failed(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """An asynchronous Helper whose processing of one task's jobs raises MemoryError:
    the error is recorded on the job, retried, then the job fails (max_item_attempts 2);
    the Leader abandons it and fails its reports; the other task is unaffected."""
    real = core_helper.process_aggregation_job
    victims: set[bytes] = set()

    def flaky(tx: Any, task: Any, job: Any, *args: Any, **kwargs: Any) -> None:
        if task.task_id in victims:
            raise MemoryError("simulated")
        real(tx, task, job, *args, **kwargs)

    monkeypatch.setattr(core_helper, "process_aggregation_job", flaky)

    async def run() -> None:
        async with AggregatorPair(tmp_path, helper_overrides={
                "async_helper": True, "max_item_attempts": 2}) as pair:
            victim = pair.provision(PROTO.count(), min_batch_size=2, profile=PROTO.profile)
            victims.add(bytes(victim.task.task_id))
            ok = healthy(pair)
            async with pair.client(victim) as client:
                await client.upload([1, 1])
            async with pair.client(ok) as client:
                await client.upload([1, 0, 1])
            await collect_ok(pair, ok, 3)
            tid = bytes(victim.task.task_id)
            for _ in range(400):
                leader = rows(pair.leader_state, "SELECT state FROM client_reports WHERE "
                              "task_id=?", tid)
                if leader and all(s == "failed" for (s,) in leader):
                    break
                await asyncio.sleep(0.025)
            assert leader and all(s == "failed" for (s,) in leader), leader
            (helper_job,) = rows(pair.helper_state, "SELECT state, attempts, error FROM "
                                 "aggregation_jobs WHERE task_id=?", tid)
            # Failed by the Helper, then deleted by the Leader that abandoned it.
            assert helper_job[0] == AggregationJobState.DELETED
            assert helper_job[1] == 2 and "MemoryError: simulated" in helper_job[2]
            (leader_job,) = rows(pair.leader_state, "SELECT state, error FROM "
                                 "aggregation_jobs WHERE task_id=?", tid)
            assert leader_job[0] == AggregationJobState.ABANDONED
            assert "the aggregation job failed" in leader_job[1]
    asyncio.run(run())


def test_options_json_written_as_an_older_version_did(tmp_path: Path) -> None:
    """A stored task whose options are valid is unaffected by the checks (the JSON an
    older version wrote is read back as before)."""
    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(PROTO.count(), min_batch_size=2, profile=PROTO.profile,
                                batch_mode=BatchMode.LEADER_SELECTED, max_batch_size=3)
            assert json.loads(pt.leader_record.options) == {"max_batch_size": 3}
            async with pair.client(pt) as client:
                await client.upload([1, 1, 1])
            async with pair.collector(pt) as collector:
                result = await collector.collect(PROTO.current_batch_query(pt), timeout=30,
                                                 max_poll_interval=0.05)
            assert result.report_count == 3
    asyncio.run(run())
