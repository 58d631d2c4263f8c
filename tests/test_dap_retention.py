"""Retention (`dap.core.retention`): finished jobs, final-state reports and released
results are deleted after `job_retention`; per-report state (replay records, buckets,
collected markers) after `report_expiry_age`, after which such old reports are refused
with `report_dropped`; all of a task's data after its end plus
`task_retention_after_end`. Nothing is deleted that a live report or job needs, and no
report is counted twice after an eviction. Also: an old (version 1) datastore is
migrated when opened."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.dap.collector import CollectionError
from ppm_reference.dap.common import Duration, Interval, ReportError, Time
from ppm_reference.dap.core.buckets import commit_error, time_bucket
from ppm_reference.dap.core.retention import RetentionPolicy, run_retention
from ppm_reference.dap.core.tasks import AggregatorTask
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.storage import CollectionJobState
from ppm_reference.dap.storage.sqlite import _SCHEMA, SCHEMA_VERSION, SqliteDatastore
from tests.dap_harness import PROTOS, AggregatorPair
from tests.pg_harness import BACKENDS

PROTO = PROTOS[0]
DAY = 86400.0
TABLES = ("client_reports", "aggregation_jobs", "report_aggregations", "aggregated_reports",
          "batch_buckets", "collected_intervals", "collection_jobs", "aggregate_share_jobs",
          "batch_results")


def sizes(state: Any) -> dict[str, int]:
    with state.datastore.transaction() as tx:
        return {t: int(tx.c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                for t in TABLES}


def retain(state: Any) -> int:
    with state.datastore.transaction() as tx:
        stats = run_retention(tx, RetentionPolicy.from_config(state.config), state.clock(),
                              get_profile)
    return stats.rows_deleted


async def wait_for(predicate: Any, what: str) -> None:
    for _ in range(400):
        if predicate():
            return
        await asyncio.sleep(0.025)
    raise AssertionError(what)


def corrupt(report: Any) -> Any:
    ct = report.helper_encrypted_input_share
    payload = bytes([ct.payload[0] ^ 1]) + ct.payload[1:]
    return dataclasses.replace(report, helper_encrypted_input_share=dataclasses.replace(
        ct, payload=payload))


def _on(spec: Callable[[str], str], **options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Leader and Helper overrides: the test's datastores (`backend`) and `options`."""
    return ({"datastore": spec("leader"), **options}, {"datastore": spec("helper"), **options})


@pytest.mark.parametrize("backend", BACKENDS)
def test_retention_deletes_what_is_no_longer_needed(tmp_path: Path, backend: str,
                                                    datastore_spec: Callable[[str], str]
                                                    ) -> None:
    offset = [0.0]

    def clock() -> float:
        return time.time() + offset[0]

    async def run() -> None:
        lead, help_ = _on(datastore_spec, retention_interval=0.05)
        async with AggregatorPair(tmp_path, clock=clock, leader_overrides=lead,
                                  helper_overrides=help_) as pair:
            pt = pair.provision(PROTO.count(), min_batch_size=3, profile=PROTO.profile,
                                time_precision=3600)
            ls, hs = pair.leader_state, pair.helper_state
            async with pair.client(pt) as client:
                reports = await client.prepare([1, 1, 0, 1])
                assert (await client.upload_reports(reports)).accepted == 4
                bad = corrupt((await client.prepare([1]))[0])
                await client.upload_reports([bad])
                await wait_for(lambda: sizes(ls)["aggregated_reports"] == 4
                               and sizes(hs)["report_aggregations"] == 5, "aggregation")
                async with pair.collector(pt) as collector:
                    result = await collector.collect(pair.current_interval_query(pt),
                                                     timeout=30, max_poll_interval=0.05)
                assert result.report_count == 4
                await asyncio.sleep(0.3)  # the background passes ran: nothing live went
                before = (sizes(ls), sizes(hs))
                assert before[0]["client_reports"] == 5 and before[0]["batch_results"] == 1
                # Final reports keep their row but not their encoding (Prio3 aggregates a
                # report once); finished report aggregations drop their verify state.
                with ls.datastore.transaction() as tx:
                    assert tx.c.execute("SELECT COUNT(*) FROM client_reports WHERE "
                                        "length(report) > 0").fetchone()[0] == 0
                    assert tx.c.execute("SELECT COUNT(*) FROM report_aggregations WHERE "
                                        "verify_state IS NOT NULL").fetchone()[0] == 0
                assert before[1]["aggregate_share_jobs"] == 1

                # 8 days on: jobs, final-state reports and results are deleted by the
                # background workers; replay records, buckets and markers stay.
                offset[0] = 8 * DAY
                await wait_for(lambda: sizes(ls)["aggregation_jobs"] == 0
                               and sizes(hs)["aggregation_jobs"] == 0, "job retention")
                lead, help_ = sizes(ls), sizes(hs)
                for table in ("client_reports", "report_aggregations", "collection_jobs",
                              "batch_results"):
                    assert lead[table] == 0, (table, lead)
                assert help_["report_aggregations"] == help_["aggregate_share_jobs"] == 0
                for s in (lead, help_):
                    assert (s["aggregated_reports"], s["batch_buckets"],
                            s["collected_intervals"]) == (4, 1, 1), s
                # A replay of an aggregated report is still refused (its interval was
                # collected), and the batch is unchanged.
                replay = await client.upload_reports(reports[:1])
                assert list(replay.rejected.values()) == [ReportError.BATCH_COLLECTED]
                await asyncio.sleep(0.2)
                assert sizes(ls)["aggregated_reports"] == 4
                rid = bytes(reports[0].report_metadata.report_id)

                # A collection job for an old interval without reports: pending.
                unit = int(time.time()) // 3600
                async with pair.collector(pt) as collector:
                    url, _ = await collector.start(PROTO.interval_query(pt, unit - 20, 10))

                # 31 days on (past report_expiry_age): per-report state is evicted, and
                # such old reports are refused at upload with report_dropped; the pending
                # job for an evicted interval fails rather than wait for ever.
                offset[0] = 31 * DAY
                retain(ls)
                retain(hs)
                # (failed, and then deleted at once: it is older than job_retention)
                async with pair.collector(pt) as collector:
                    with pytest.raises(CollectionError) as err:
                        await collector.poll(url)
                    assert err.value.status == 404 or \
                        err.value.problem_type.endswith("invalidBatchSize")
                    # A new one for an evicted interval is refused at once.
                    with pytest.raises(CollectionError) as err:
                        await collector.start(PROTO.interval_query(pt, unit - 20, 10))
                    assert err.value.problem_type.endswith("invalidBatchSize")
                for s in (sizes(ls), sizes(hs)):
                    assert all(n == 0 for n in s.values()), s
                again = await client.upload_reports(reports[1:2])
                assert list(again.rejected.values()) == [ReportError.REPORT_DROPPED]
                # ... and by the Helper, which evicted its replay records too.
                task = AggregatorTask.from_record(pt.helper_record, get_profile)
                t = int(reports[1].report_metadata.time) // pt.task.time_precision \
                    if PROTO.dap09 else int(reports[1].report_metadata.time)
                with hs.datastore.transaction() as tx:
                    assert commit_error(tx, task, rid, t, time_bucket(t)) == \
                        ReportError.REPORT_DROPPED
                    assert tx.get_eviction_horizon(task.task_id) is not None
    asyncio.run(run())


@pytest.mark.parametrize("backend", BACKENDS)
def test_task_data_deleted_after_its_end(tmp_path: Path, backend: str,
                                         datastore_spec: Callable[[str], str]) -> None:
    offset = [0.0]

    def clock() -> float:
        return time.time() + offset[0]

    async def run() -> None:
        lead, help_ = _on(datastore_spec)
        async with AggregatorPair(tmp_path, clock=clock, leader_overrides=lead,
                                  helper_overrides=help_) as pair:
            now = int(time.time()) // 3600
            pt = pair.provision(PROTO.count(), min_batch_size=2, profile=PROTO.profile,
                                time_precision=3600,
                                task_interval=Interval(Time(now - 1), Duration(3)))
            async with pair.client(pt) as client:
                await client.upload([1, 1])
            async with pair.collector(pt) as collector:
                await collector.collect(pair.current_interval_query(pt), timeout=30,
                                        max_poll_interval=0.05)
            await wait_for(lambda: sizes(pair.helper_state)["aggregate_share_jobs"] == 1,
                           "collected")
            end = (now + 2) * 3600
            offset[0] = end + 6 * DAY - time.time()  # not yet: a Collector's grace period
            retain(pair.leader_state)
            assert sizes(pair.leader_state)["aggregated_reports"] == 2
            offset[0] = end + 7 * DAY + 60 - time.time()  # well before report expiry
            for st in (pair.leader_state, pair.helper_state):
                retain(st)
                assert all(n == 0 for n in sizes(st).values()), sizes(st)
    asyncio.run(run())


def test_version_1_datastore_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT INTO schema_version VALUES (1)")
    tid, jid, rid = b"t" * 32, b"j" * 16, b"r" * 16
    conn.execute("INSERT INTO collection_jobs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                 (tid, jid, b"req", b"h" * 32, "start", None, None, None, None, 0, 5.0, 42.0))
    conn.execute("INSERT INTO report_aggregations (task_id, job_id, ord, report_id, time, "
                 "state, verify_state, error) VALUES (?,?,?,?,?,?,?,?)",
                 (tid, jid, 0, rid, 1234, "finished", None, None))
    conn.execute("INSERT INTO aggregated_reports VALUES (?,?)", (tid, rid))
    conn.execute("INSERT INTO aggregate_share_jobs VALUES (?,?,?,?,?,?,?,?,?)",
                 (tid, b"s" * 16, b"req", b"h" * 32, "start", None, None, None, 7.0))
    conn.commit()
    conn.close()
    ds = SqliteDatastore(path, "OFF")
    try:
        with ds.transaction() as tx:
            assert tx.c.execute("SELECT version FROM schema_version").fetchone()[0] == \
                SCHEMA_VERSION == 2
            job = tx.get_collection_job(tid, jid)
            assert job is not None and job.state == CollectionJobState.START
            assert (job.created_at, job.cutoff) == (42.0, 42.0)
            assert tx.c.execute("SELECT time FROM aggregated_reports").fetchone()[0] == 1234
            (share,) = tx.list_aggregate_share_jobs(("start",), now=0.0)  # type: ignore
            assert (share.attempts, share.next_attempt_at) == (0, 0.0)
            assert tx.get_batch_result(tid, b"x", b"") is None
            assert tx.get_task_work(tid) is None and tx.get_eviction_horizon(tid) is None
    finally:
        ds.close()
    SqliteDatastore(path, "OFF").close()  # opening it again changes nothing


def test_reports_of_a_vdaf_with_an_aggregation_parameter_keep_their_encoding() -> None:
    """Only Prio3 (empty aggregation parameter) drops an aggregated report's encoding; a
    VDAF that aggregates a report again for each parameter (Poplar1) keeps it, and job
    retention then keeps the report (it deletes aggregated reports without encoding)."""
    from types import SimpleNamespace

    from ppm_reference.dap.core.agg_params import uses_agg_param
    from ppm_reference.vdaf.poplar1 import Poplar1

    assert not uses_agg_param(SimpleNamespace(vdaf=PROTO.count()))  # type: ignore[arg-type]
    assert uses_agg_param(SimpleNamespace(vdaf=Poplar1(4)))  # type: ignore[arg-type]


def test_job_retention_keeps_aggregated_reports_with_their_encoding(tmp_path: Path) -> None:
    from ppm_reference.dap.storage import ClientReportRecord, ReportState

    ds = SqliteDatastore(tmp_path / "ds.sqlite", "OFF")
    tid = b"t" * 32
    try:
        with ds.transaction() as tx:
            for i, (state, body) in enumerate(((ReportState.AGGREGATED, b"kept"),
                                               (ReportState.AGGREGATED, b""),
                                               (ReportState.FAILED, b"x"),
                                               (ReportState.NEW, b"y"))):
                tx.put_client_report(ClientReportRecord(tid, bytes([i]) * 16, 5, body, state,
                                                        created_at=1.0))
            assert tx.delete_finished_jobs(None, 100.0) == 2
            left = tx.c.execute("SELECT state, report FROM client_reports ORDER BY report_id")
            assert [(s, bytes(r)) for s, r in left] == [("aggregated", b"kept"), ("new", b"y")]
    finally:
        ds.close()
