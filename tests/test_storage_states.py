"""Record states are StrEnums whose stored form is exactly the former string literals,
so datastores written before the enums existed keep working (on SQLite and on
PostgreSQL: `backend`, see tests.pg_harness)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

import pytest

from ppm_reference.dap.storage import (
    AggregateShareJobRecord,
    AggregateShareJobState,
    AggregationJobRecord,
    AggregationJobState,
    ClientReportRecord,
    CollectionJobRecord,
    CollectionJobState,
    HpkeKeyRecord,
    HpkeKeyState,
    LeaderBatchRecord,
    LeaderBatchState,
    ReportAggregationRecord,
    ReportAggregationState,
    ReportState,
    open_datastore,
)
from tests.pg_harness import BACKENDS, is_pg, raw_connect

# The literals the code stored before the enums (spelled out, not derived from them).
OLD_LITERALS: dict[type[StrEnum], set[str]] = {
    HpkeKeyState: {"pending", "active", "expired"},
    ReportState: {"new", "in_job", "aggregated", "failed"},
    AggregationJobState: {"active", "finished", "abandoned", "deleted"},
    ReportAggregationState: {"active", "finished_outbound", "finished", "rejected"},
    CollectionJobState: {"start", "collecting", "finished", "failed", "deleted"},
    AggregateShareJobState: {"start", "finished", "failed", "deleted"},
    LeaderBatchState: {"open", "collecting", "collected"},
}

TID = bytes(range(32))


@pytest.mark.parametrize("enum", list(OLD_LITERALS), ids=lambda e: e.__name__)
def test_values_are_the_old_literals(enum: type[StrEnum]) -> None:
    assert {m.value for m in enum} == OLD_LITERALS[enum]
    for member in enum:
        assert member == member.value and str(member) == member.value
        assert f"{member}" == member.value and hash(member) == hash(member.value)
        assert enum(member.value) is member


def _raw(spec: str, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    conn = raw_connect(spec)
    try:
        return [tuple(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


def _store_and_load(tx: Any, enum: type[StrEnum], member: Any, i: int) -> tuple[Any, str, str]:
    """Store a record in state `member`; return (the record read back, table, key SQL)."""
    key = bytes([i]) * 16
    if enum is HpkeKeyState:
        tx.put_hpke_key(HpkeKeyRecord(i, b"config", b"sk", member, 1.0))
        rec = next(k for k in tx.list_hpke_keys() if k.config_id == i)
        return rec, "hpke_keys", f"config_id={i}"
    if enum is ReportState:
        tx.put_client_report(ClientReportRecord(TID, key, 10, b"report", member, created_at=1.0))
        return tx.get_client_reports(TID, [key])[0], "client_reports", f"report_id=x'{key.hex()}'"
    if enum is AggregationJobState:
        tx.put_aggregation_job(AggregationJobRecord(TID, key, "leader", member, 0, b""))
        return tx.get_aggregation_job(TID, key), "aggregation_jobs", f"job_id=x'{key.hex()}'"
    if enum is ReportAggregationState:
        tx.put_report_aggregations([ReportAggregationRecord(TID, key, 0, key, 10, member)])
        return (tx.get_report_aggregations(TID, key)[0], "report_aggregations",
                f"job_id=x'{key.hex()}'")
    if enum is CollectionJobState:
        tx.put_collection_job(CollectionJobRecord(TID, key, b"req", key, member))
        return tx.get_collection_job(TID, key), "collection_jobs", f"job_id=x'{key.hex()}'"
    if enum is AggregateShareJobState:
        tx.put_aggregate_share_job(AggregateShareJobRecord(TID, key, b"req", key, member))
        return (tx.get_aggregate_share_job(TID, key), "aggregate_share_jobs",
                f"share_id=x'{key.hex()}'")
    assert enum is LeaderBatchState
    tx.put_leader_batch(LeaderBatchRecord(TID, key, state=member, created_at=1.0))
    rec = next(b for b in tx.list_leader_batches(TID, tuple(LeaderBatchState))
               if b.batch_id == key)
    return rec, "leader_batches", f"batch_id=x'{key.hex()}'"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("enum", list(OLD_LITERALS), ids=lambda e: e.__name__)
def test_every_state_round_trips(datastore_spec: Callable[[str], str], backend: str,
                                 enum: type[StrEnum]) -> None:
    spec = datastore_spec("ds")
    ds = open_datastore(spec, sqlite_synchronous="OFF")
    typeof = "pg_typeof(state)::text" if is_pg(spec) else "typeof(state)"
    try:
        for i, member in enumerate(enum, start=1):
            with ds.transaction() as tx:
                rec, table, where = _store_and_load(tx, enum, member, i)
            assert rec.state is member  # read back as the enum member
            # Stored as the same TEXT bytes as the old literal.
            (value, kind), = _raw(spec, f"SELECT state, {typeof} FROM {table} WHERE {where}",
                                  ())
            assert kind == "text" and value == member.value
            assert type(value) is str
    finally:
        ds.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_datastore_written_with_literals_reads_as_enums(
        datastore_spec: Callable[[str], str], backend: str) -> None:
    """Rows stored as plain strings (as before the enums) load, and queries that name a
    state find them."""
    spec = datastore_spec("ds")
    ds = open_datastore(spec, sqlite_synchronous="OFF")
    try:
        conn = raw_connect(spec)
        rid, jid = b"r" * 16, b"j" * 16
        conn.execute("INSERT INTO client_reports VALUES (?,?,?,?,?,?,?,?)",
                     (TID, rid, 10, b"report", "new", None, None, 1.0))
        conn.execute("INSERT INTO aggregation_jobs (task_id, job_id, role, state, step, "
                     "agg_param, request, request_hash, last_continue_hash, attempts, "
                     "next_attempt_at, lease_expiry, created_at) VALUES "
                     "(?,?,?,?,?,?,?,?,?,?,?,?,?)",
                     (TID, jid, "leader", "active", 0, b"", b"", b"", b"", 0, 0.0, 0.0, 1.0))
        conn.execute("INSERT INTO leader_batches VALUES (?,?,?,?,?)",
                     (TID, b"b" * 32, 0, "collecting", 1.0))
        conn.close()
        with ds.transaction() as tx:
            assert [r.report_id for r in tx.list_new_reports(TID, 10)] == [rid]
            assert tx.get_client_reports(TID, [rid])[0].state is ReportState.NEW
            assert tx.count_reports(TID, (ReportState.NEW,)) == 1
            assert tx.oldest_new_report_age(TID, 3.0) == 2.0
            assert tx.count_active_aggregation_jobs(TID) == 1
            jobs = tx.acquire_aggregation_jobs("leader", 5.0, 10.0, 5)
            assert [j.state for j in jobs] == [AggregationJobState.ACTIVE]
            batches = tx.list_leader_batches(TID, (LeaderBatchState.COLLECTING,))
            assert [b.state for b in batches] == [LeaderBatchState.COLLECTING]
            tx.set_report_states(TID, [rid], ReportState.AGGREGATED, jid)
        assert _raw(spec, "SELECT state FROM client_reports", ()) == [("aggregated",)]
    finally:
        ds.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_unknown_stored_state_is_refused(datastore_spec: Callable[[str], str],
                                         backend: str) -> None:
    spec = datastore_spec("ds")
    ds = open_datastore(spec, sqlite_synchronous="OFF")
    try:
        conn = raw_connect(spec)
        conn.execute("INSERT INTO leader_batches VALUES (?,?,?,?,?)",
                     (TID, b"b" * 32, 0, "bogus", 1.0))
        conn.close()
        with pytest.raises(ValueError, match="bogus"), ds.transaction() as tx:
            tx.list_leader_batches(TID, ("bogus",))  # type: ignore[arg-type]
    finally:
        ds.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_task_counters_count_every_state(datastore_spec: Callable[[str], str],
                                         backend: str) -> None:
    """`task_counters` (the admin API's status and /metrics) on both datastores: one
    record in each state is counted once, under its state, for the task and overall."""
    spec = datastore_spec("ds")
    ds = open_datastore(spec, sqlite_synchronous="OFF")
    enums = (ReportState, AggregationJobState, CollectionJobState)
    try:
        with ds.transaction() as tx:
            for enum in enums:
                for i, member in enumerate(enum, start=1):
                    _store_and_load(tx, enum, member, i)
        for task_id in (TID, None):
            with ds.transaction() as tx:
                counters = tx.task_counters(task_id)
            reports = {str(state): n for state, _error, n in counters["reports"]}
            assert reports == {m.value: 1 for m in ReportState}
            jobs = {str(state): n for _role, state, n in counters["aggregation_jobs"]}
            assert jobs == {m.value: 1 for m in AggregationJobState}
            collections = {str(state): n for state, n in counters["collection_jobs"]}
            assert collections == {m.value: 1 for m in CollectionJobState}
            assert counters["aggregation_retrying"] is None
    finally:
        ds.close()
