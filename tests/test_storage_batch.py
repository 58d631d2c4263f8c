"""The datastore's batch operations (one statement per job, not per report: issue 14) on
both backends (`backend`, see tests.pg_harness): each behaves as the one-report operation
applied in order; PostgreSQL's binary array parameters round-trip (a codec: hypothesis);
its pipelined writes are replayed after a lost connection; its read-only transactions
run beside a transaction that holds the exclusive lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppm_reference.dap.storage import (
    ClientReportRecord,
    ReportAggregationRecord,
    ReportAggregationState,
    ReportState,
    open_datastore,
)
from tests.pg_harness import BACKENDS, PgDatabase, pg_unavailable, pg_use, raw_connect

TID = bytes(range(32))
OTHER = bytes(32)


def _rid(i: int) -> bytes:
    return i.to_bytes(16, "big")


@pytest.fixture
def store(datastore_spec: Callable[[str], str]) -> Iterator[Any]:
    ds = open_datastore(datastore_spec("ds"), sqlite_synchronous="OFF")
    try:
        yield ds
    finally:
        ds.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_put_client_reports_is_put_client_report_in_order(store: Any, backend: str) -> None:
    with store.transaction() as tx:
        assert tx.put_client_report(ClientReportRecord(TID, _rid(1), 5, b"old",
                                                       created_at=1.0))
    batch = [ClientReportRecord(TID, _rid(1), 6, b"replayed", created_at=2.0),
             ClientReportRecord(TID, _rid(2), 7, b"first", created_at=2.0),
             ClientReportRecord(TID, _rid(2), 8, b"second", created_at=2.0),
             ClientReportRecord(OTHER, _rid(1), 9, b"other task", created_at=2.0),
             ClientReportRecord(TID, _rid(3), 2**63 - 1, b"", ReportState.FAILED,
                                aggregation_job_id=b"j" * 16, error=7, created_at=2.5)]
    with store.transaction() as tx:
        stored = tx.put_client_reports(batch)
        assert tx.put_client_reports([]) == set()
    assert stored == {(TID, _rid(2)), (OTHER, _rid(1)), (TID, _rid(3))}
    with store.transaction() as tx:
        got = {bytes(r.report_id): r for r in tx.get_client_reports(
            TID, [_rid(i) for i in (1, 2, 3, 4)])}
        other = tx.get_client_reports(OTHER, [_rid(1)])
    assert set(got) == {_rid(1), _rid(2), _rid(3)}
    assert got[_rid(1)].report == b"old" and got[_rid(1)].time == 5  # not overwritten
    assert got[_rid(2)].report == b"first" and got[_rid(2)].time == 7  # the first wins
    r3 = got[_rid(3)]
    assert (r3.time, r3.report, r3.state, r3.aggregation_job_id, r3.error, r3.created_at) \
        == (2**63 - 1, b"", ReportState.FAILED, b"j" * 16, 7, 2.5)
    assert [r.report for r in other] == [b"other task"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_batches_longer_than_one_statement(store: Any, backend: str) -> None:
    """Past a statement's rows (SQLite: 500 per multi-row INSERT): a report ID repeated
    in a later chunk is still the replay, and every other one is stored and marked."""
    batch = [ClientReportRecord(TID, _rid(i), i, b"r%d" % i, created_at=1.0)
             for i in range(1200)]
    batch.insert(700, ClientReportRecord(TID, _rid(3), 0, b"again", created_at=1.0))
    with store.transaction() as tx:
        assert tx.put_client_reports(batch) == {(TID, _rid(i)) for i in range(1200)}
        marked = tx.mark_reports_aggregated(
            TID, [(_rid(i), i) for i in range(1100)] + [(_rid(5), 5)])
        assert marked == {_rid(i) for i in range(1100)}
    with store.transaction() as tx:
        got = tx.get_client_reports(TID, [_rid(3), _rid(1199)])
        assert sorted(r.report for r in got) == [b"r1199", b"r3"]
        assert tx.aggregated_among(TID, [_rid(i) for i in range(1095, 1105)]) == \
            {_rid(i) for i in range(1095, 1100)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_replay_marks_in_batches(store: Any, backend: str) -> None:
    with store.transaction() as tx:
        assert tx.mark_report_aggregated(TID, _rid(1), 10)
        assert tx.aggregated_among(TID, []) == set()
        assert tx.aggregated_among(TID, [_rid(1), _rid(2), _rid(1)]) == {_rid(1)}
        marked = tx.mark_reports_aggregated(
            TID, [(_rid(1), 10), (_rid(2), None), (_rid(3), 2**64 - 1), (_rid(3), 4)])
        assert marked == {_rid(2), _rid(3)}
        assert tx.mark_reports_aggregated(TID, []) == set()
        # Per task.
        assert tx.aggregated_among(OTHER, [_rid(1), _rid(2)]) == set()
        assert tx.mark_reports_aggregated(OTHER, [(_rid(2), 1)]) == {_rid(2)}
    with store.transaction() as tx:
        assert tx.aggregated_among(TID, [_rid(i) for i in range(6)]) == \
            {_rid(1), _rid(2), _rid(3)}
        assert all(tx.is_report_aggregated(TID, _rid(i)) for i in (1, 2, 3))
        assert not tx.is_report_aggregated(TID, _rid(4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_report_aggregations_and_states_with_encodings(store: Any,
                                                              backend: str) -> None:
    job, other_job = b"j" * 16, b"k" * 16
    records = [ReportAggregationRecord(TID, job, i, _rid(i), 100 + i,
                                       ReportAggregationState.ACTIVE, b"state%d" % i,
                                       min_batch_bound=i)
               for i in range(4)]
    untouched = ReportAggregationRecord(TID, other_job, 0, _rid(0), 1,
                                        ReportAggregationState.ACTIVE, b"keep")
    with store.transaction() as tx:
        tx.put_report_aggregations([*records, untouched])
        tx.put_client_reports([ClientReportRecord(TID, _rid(i), 100 + i, b"enc%d" % i,
                                                  created_at=1.0) for i in range(4)])
    records[0].state, records[0].verify_state = ReportAggregationState.FINISHED, None
    records[2].state, records[2].error = ReportAggregationState.REJECTED, 5
    records[2].verify_state = None
    with store.transaction() as tx:
        tx.update_report_aggregations([records[0], records[2]])
        tx.update_report_aggregations([])
        tx.set_report_states(TID, [_rid(0)], ReportState.AGGREGATED, job,
                             drop_encodings=True)
        tx.set_report_states(TID, [_rid(2)], ReportState.FAILED, job, 5)
        tx.set_report_states(TID, [], ReportState.FAILED, drop_encodings=True)
    with store.transaction() as tx:
        got = tx.get_report_aggregations(TID, job)
        kept = tx.get_report_aggregations(TID, other_job)
        reports = {bytes(r.report_id): r for r in tx.get_client_reports(
            TID, [_rid(i) for i in range(4)])}
    assert [(r.ord, r.state, r.verify_state, r.error, r.time, r.min_batch_bound)
            for r in got] == [
        (0, ReportAggregationState.FINISHED, None, None, 100, 0),
        (1, ReportAggregationState.ACTIVE, b"state1", None, 101, 1),
        (2, ReportAggregationState.REJECTED, None, 5, 102, 2),
        (3, ReportAggregationState.ACTIVE, b"state3", None, 103, 3)]
    assert [(r.state, r.verify_state) for r in kept] == \
        [(ReportAggregationState.ACTIVE, b"keep")]
    assert (reports[_rid(0)].state, reports[_rid(0)].report) == \
        (ReportState.AGGREGATED, b"")
    assert (reports[_rid(2)].state, reports[_rid(2)].report, reports[_rid(2)].error) == \
        (ReportState.FAILED, b"enc2", 5)  # without drop_encodings: kept
    assert (reports[_rid(1)].state, reports[_rid(1)].report) == (ReportState.NEW, b"enc1")


@pytest.mark.parametrize("backend", BACKENDS)
def test_read_sees_what_was_committed(store: Any, backend: str) -> None:
    with store.transaction() as tx:
        tx.put_client_reports([ClientReportRecord(TID, _rid(1), 5, b"r", created_at=1.0)])
    with store.read() as tx:
        assert [r.report for r in tx.get_client_reports(TID, [_rid(1)])] == [b"r"]


_TIMES = st.integers(0, 40) | st.just(2**64 - 1) | st.just(2**63 - 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_commit_context_is_the_single_queries(store: Any, backend: str) -> None:
    """`commit_context` (one query) answers what `get_eviction_horizon`,
    `interval_overlaps_collected(t, t + 1)` and `is_bucket_collected` answer one by one,
    for random collected intervals (touching, overlapping, open-ended at the largest
    time), buckets and horizons, and leaves another task's alone."""
    counter = iter(range(10**6))

    @settings(max_examples=40, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(intervals=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 10)), max_size=4),
           open_ended=st.booleans(), horizon=st.none() | st.integers(0, 40),
           collected=st.lists(st.binary(min_size=1, max_size=4), max_size=3),
           times=st.lists(_TIMES, max_size=8),
           buckets=st.lists(st.binary(min_size=1, max_size=4), max_size=4))
    def check(intervals: list[tuple[int, int]], open_ended: bool, horizon: int | None,
              collected: list[bytes], times: list[int], buckets: list[bytes]) -> None:
        tid = next(counter).to_bytes(32, "big")
        with store.transaction() as tx:
            for start, length in intervals:
                tx.mark_interval_collected(tid, start, start + length)
            if open_ended:
                tx.mark_interval_collected(tid, 35, 2**64)
            tx.mark_buckets_collected(tid, collected)
            if horizon is not None:
                tx.set_eviction_horizon(tid, horizon)
            tx.mark_interval_collected(OTHER, 0, 2**64)        # another task's
            tx.mark_buckets_collected(OTHER, buckets)
        with store.transaction() as tx:
            got = tx.commit_context(tid, times, buckets)
            want = (tx.get_eviction_horizon(tid),
                    {t for t in times if tx.interval_overlaps_collected(tid, t, t + 1)},
                    {b for b in buckets if tx.is_bucket_collected(tid, b)})
            assert tx.commit_context(tid, [], []) == (want[0], set(), set())
        assert got == want
        assert got[0] == horizon

    check()


# -- PostgreSQL only ---------------------------------------------------------------------


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    reason = pg_unavailable()
    if reason is not None:
        pytest.skip(reason)
    db: PgDatabase = request.getfixturevalue("pg_database")
    with pg_use():
        yield db.new_url("batch")


_ELEMENTS: dict[str, tuple[str, Any]] = {
    "_Bytea": ("bytea", st.binary(max_size=40)),
    "_Int8": ("bigint", st.integers(-2**63, 2**63 - 1)),
    "_Int4": ("integer", st.integers(-2**31, 2**31 - 1)),
    "_Text": ("text", st.text(alphabet=st.characters(exclude_characters="\x00",
                                                   exclude_categories=("Cs",)),
                              max_size=20)),
    "_Float8": ("double precision", st.floats(allow_nan=False)),
}


@pytest.mark.parametrize("kind", list(_ELEMENTS))
def test_binary_array_parameters_round_trip(pg_url: str, kind: str) -> None:
    """The array parameters (dap.storage.postgres._PgArray, PostgreSQL's binary array
    format) are read back by PostgreSQL as the lists they encode: NULLs, the empty
    array, extreme values."""
    from ppm_reference.dap.storage import postgres

    cls = getattr(postgres, kind)
    sql_type, elements = _ELEMENTS[kind]
    conn = raw_connect(pg_url)

    @settings(max_examples=60, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.none() | elements, max_size=12))
    def check(items: list[Any]) -> None:
        (back,), = conn.execute(f"SELECT %s::{sql_type}[]", (cls(items),))
        assert back == items
        # As unnest sees it (the batch statements' form), in order.
        rows = conn.execute(f"SELECT u FROM unnest(%s::{sql_type}[]) WITH ORDINALITY "
                            "AS t(u, n) ORDER BY n", (cls(items),))
        assert [r[0] for r in rows] == items

    try:
        check()
    finally:
        conn.close()


def test_report_lookups_are_index_probes_whatever_the_statistics(pg_url: str) -> None:
    """A table that grew since it was last analysed (here: never): the lookup of a job's
    report IDs still probes the primary key per ID instead of reading the task's rows."""
    from ppm_reference.dap.storage.postgres import _by_report_ids

    ds = open_datastore(pg_url)
    try:
        with ds.transaction() as tx:
            tx.mark_reports_aggregated(TID, [(_rid(i), i) for i in range(3000)])
    finally:
        ds.close()
    conn = raw_connect(pg_url)
    try:
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN " + _by_report_ids("aggregated_reports", "t.report_id"),
            ([_rid(i) for i in range(0, 3000, 30)], TID)))
    finally:
        conn.close()
    assert "Index" in plan and "Bitmap Heap Scan" not in plan and "Seq Scan on aggr" \
        not in plan, plan


def test_pipelined_writes_are_replayed_after_a_lost_connection(pg_url: str) -> None:
    """Writes held for the pipeline (dap.storage.postgres._write) are logged as their
    statements; when the connection is lost mid-transaction, the replay on a new one
    sends them again, and the transaction commits everything once."""
    from ppm_reference.dap.storage.postgres import PostgresDatastore

    ds = PostgresDatastore(pg_url, key_from_env=False)
    job = b"j" * 16
    try:
        with ds.transaction() as tx:
            tx.put_report_aggregations([ReportAggregationRecord(
                TID, job, i, _rid(i), 1, ReportAggregationState.ACTIVE, b"s")
                for i in range(3)])
            assert len(tx.get_report_aggregations(TID, job)) == 3  # sent (a read)
            tx.set_report_states(TID, [_rid(0)], ReportState.FAILED)  # held
            pid = tx.c.info.backend_pid
            killer = raw_connect(pg_url)
            try:
                killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
            finally:
                killer.close()
            time.sleep(0.2)
            # Lost: this read starts a new transaction, replays the log, then runs.
            assert tx.aggregated_among(TID, [_rid(0)]) == set()
            assert tx.c.info.backend_pid != pid
            tx.mark_reports_aggregated(TID, [(_rid(0), 1)])
        with ds.read() as tx:
            assert [r.ord for r in tx.get_report_aggregations(TID, job)] == [0, 1, 2]
            assert tx.aggregated_among(TID, [_rid(0), _rid(1)]) == {_rid(0)}
    finally:
        ds.close()


def test_a_failed_pipelined_write_rolls_the_transaction_back(pg_url: str) -> None:
    """A held write that fails (a duplicate key) fails the transaction when it is sent
    (here at the commit): nothing of the transaction is stored."""
    from ppm_reference.dap.storage import StorageError
    from ppm_reference.dap.storage.postgres import PostgresDatastore

    ds = PostgresDatastore(pg_url, key_from_env=False)
    job = b"j" * 16
    rec = ReportAggregationRecord(TID, job, 0, _rid(0), 1, ReportAggregationState.ACTIVE)
    try:
        with ds.transaction() as tx:
            tx.put_report_aggregations([rec])
        with pytest.raises((StorageError, Exception)), ds.transaction() as tx:
            tx.mark_reports_aggregated(TID, [(_rid(5), 1)])
            tx.put_report_aggregations([rec])  # held: the duplicate is found at COMMIT
        with ds.read() as tx:
            assert tx.aggregated_among(TID, [_rid(5)]) == set()
            assert len(tx.get_report_aggregations(TID, job)) == 1
    finally:
        ds.close()


def test_read_only_transactions_do_not_wait_for_the_exclusive_lock(pg_url: str) -> None:
    """The exclusive mode's transactions run one at a time; `read()` neither waits for
    one that holds the lock nor may write."""
    from ppm_reference.dap.storage.postgres import PostgresDatastore

    ds = PostgresDatastore(pg_url, key_from_env=False)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with ds.transaction() as tx:
            tx.put_client_reports([ClientReportRecord(TID, _rid(9), 1, b"x",
                                                      created_at=1.0)])
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(30)
        started = time.monotonic()
        with ds.read() as tx:
            # Not yet committed: not seen.
            assert tx.get_client_reports(TID, [_rid(9)]) == []
        assert time.monotonic() - started < 5
        with pytest.raises(Exception, match="read-only"), ds.read() as tx:
            tx.set_report_states(TID, [_rid(9)], ReportState.FAILED)
    finally:
        release.set()
        thread.join()
        ds.close()


def test_upload_transactions_run_beside_the_exclusive_lock(pg_url: str) -> None:
    """`upload_transaction` (the Leader's uploads) does not wait for a transaction that
    holds the exclusive mode's lock: it commits while that one is still open."""
    from ppm_reference.dap.storage.postgres import PostgresDatastore

    ds = PostgresDatastore(pg_url, key_from_env=False)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with ds.transaction() as tx:
            tx.put_client_reports([ClientReportRecord(TID, _rid(1), 1, b"held",
                                                      created_at=1.0)])
            holding.set()
            release.wait(60)

    stored: list[set[tuple[bytes, bytes]]] = []

    def upload() -> None:
        with ds.upload_transaction() as tx:
            stored.append(tx.put_client_reports([ClientReportRecord(TID, _rid(2), 1, b"up",
                                                                    created_at=1.0)]))

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30)
        uploader = threading.Thread(target=upload)
        uploader.start()
        uploader.join(30)
        assert not uploader.is_alive(), "the upload waited for the exclusive lock"
        assert not release.is_set() and holder.is_alive()
        assert stored == [{(TID, _rid(2))}]
        with ds.read() as tx:  # committed, while the holder's report is not yet
            assert [r.report for r in tx.get_client_reports(TID, [_rid(1), _rid(2)])] \
                == [b"up"]
    finally:
        release.set()
        holder.join()
    try:
        with ds.read() as tx:
            assert len(tx.get_client_reports(TID, [_rid(1), _rid(2)])) == 2
    finally:
        ds.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrent_upload_transactions_store_each_report_once(store: Any,
                                                               backend: str) -> None:
    """Uploads of overlapping report IDs, in opposite orders, at once (on PostgreSQL
    beside each other, without the exclusive lock): each report ID is stored by exactly
    one of them (the others get it as a replay), and none fails (PostgreSQL inserts a
    statement's rows in key order, so that two of them wait for one another in one order;
    a deadlock, were one to arise, aborts one transaction, which is retried)."""
    ids = [_rid(i) for i in range(40)]
    orders = [ids, ids[::-1], ids[::2] + ids[1::2], ids[1::2][::-1] + ids[::2]]
    barrier = threading.Barrier(len(orders))
    results: list[set[tuple[bytes, bytes]]] = []
    errors: list[BaseException] = []

    def upload(order: list[bytes]) -> None:
        try:
            barrier.wait(30)
            for i in range(0, len(order), 8):
                with store.upload_transaction() as tx:
                    results.append(tx.put_client_reports(
                        [ClientReportRecord(TID, rid, 1, rid, created_at=1.0)
                         for rid in order[i:i + 8]]))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=upload, args=(order,)) for order in orders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    stored = [key for keys in results for key in keys]
    assert sorted(stored) == sorted((TID, rid) for rid in ids)  # each once
    with store.read() as tx:
        got = tx.get_client_reports(TID, ids)
    assert sorted(bytes(r.report_id) for r in got) == sorted(ids)
    assert all(bytes(r.report) == bytes(r.report_id) for r in got)


def test_the_freeze_and_the_uploads_of_a_task_take_turns(pg_url: str) -> None:
    """`guard_uploads` (PostgreSQL, where upload transactions run beside the exclusive
    mode's lock): a freeze (exclusive) waits for an upload transaction of its task that
    is in flight and then counts its report; an upload that starts during the freeze
    waits for it; another task's upload does not wait."""
    from ppm_reference.dap.storage.postgres import PostgresDatastore

    ds = PostgresDatastore(pg_url, key_from_env=False)
    in_flight, commit_upload = threading.Event(), threading.Event()

    def upload(task_id: bytes, i: int, started: threading.Event | None = None,
               hold: threading.Event | None = None) -> None:
        with ds.upload_transaction() as tx:
            tx.guard_uploads([task_id])
            if started is not None:
                started.set()
            tx.put_client_reports([ClientReportRecord(task_id, _rid(i), 1, b"r",
                                                      created_at=1.0)])
            if hold is not None:
                assert hold.wait(30)

    counted: list[int] = []
    frozen, end_freeze = threading.Event(), threading.Event()

    def freeze() -> None:
        with ds.transaction() as tx:
            tx.guard_uploads([TID], exclusive=True)
            counted.append(tx.count_reports(TID, (ReportState.NEW,)))
            frozen.set()
            assert end_freeze.wait(30)

    try:
        uploader = threading.Thread(target=upload, args=(TID, 1, in_flight, commit_upload))
        uploader.start()
        assert in_flight.wait(30)
        freezer = threading.Thread(target=freeze)
        freezer.start()
        # The freeze waits for the upload in flight (the upload itself is held open).
        assert not frozen.wait(0.5), "the freeze did not wait for the upload in flight"
        commit_upload.set()
        uploader.join(30)
        assert frozen.wait(30)
        assert counted == [1]  # it sees the report committed while it waited
        # During the freeze: this task's next upload waits, another task's does not.
        late_started = threading.Event()
        late = threading.Thread(target=upload, args=(TID, 2, late_started))
        late.start()
        other = threading.Thread(target=upload, args=(OTHER, 3))
        other.start()
        other.join(30)
        assert not other.is_alive(), "another task's upload waited for the freeze"
        assert not late_started.wait(0.5), "an upload ran during the freeze of its task"
        end_freeze.set()
        freezer.join(30)
        late.join(30)
        assert late_started.is_set() and not late.is_alive()
        with ds.read() as tx:
            assert tx.count_reports(TID, (ReportState.NEW,)) == 2
            assert tx.count_reports(OTHER, (ReportState.NEW,)) == 1
    finally:
        commit_upload.set()
        end_freeze.set()
        ds.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_guard_uploads_of_no_task_or_on_sqlite_is_free(store: Any, backend: str) -> None:
    with store.transaction() as tx:
        tx.guard_uploads([])
        tx.guard_uploads([TID, OTHER, TID], exclusive=True)
    with store.upload_transaction() as tx:
        tx.guard_uploads([OTHER, TID])
        assert tx.put_client_reports([ClientReportRecord(TID, _rid(1), 1, b"r",
                                                         created_at=1.0)])


_IDS = st.integers(0, 12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_writes_are_the_one_report_writes(store: Any, backend: str) -> None:
    """A property: for random batches (report IDs repeated within a batch and already
    stored, two tasks interleaved, verify states kept or cleared), put_client_reports,
    mark_reports_aggregated, update_report_aggregations and set_report_states store and
    return what the one-report operations applied in order store and return. SQLite's
    are set-based (one statement per chunk, not per report or per row returned)."""
    counter = iter(range(10**6))

    @settings(max_examples=40, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(before=st.lists(_IDS, max_size=5),
           batch=st.lists(st.tuples(st.integers(0, 1), _IDS, st.binary(max_size=3)),
                          max_size=12),
           marked=st.lists(_IDS, max_size=4),
           marks=st.lists(st.tuples(_IDS, st.none() | st.integers(0, 2**64 - 1)),
                          max_size=10),
           updates=st.lists(st.tuples(st.integers(0, 5), st.sampled_from(
               list(ReportAggregationState)), st.none() | st.binary(max_size=3),
               st.none() | st.integers(0, 9)), max_size=6, unique_by=lambda u: u[0]),
           states=st.lists(_IDS, max_size=8))
    def check(before: list[int], batch: list[tuple[int, int, bytes]], marked: list[int],
              marks: list[tuple[int, int | None]],
              updates: list[tuple[int, ReportAggregationState, bytes | None, int | None]],
              states: list[int]) -> None:
        n = next(counter)
        # Tasks (a pair for the batch operations, a pair for the one-report ones).
        batch_tasks = [(4 * n + k).to_bytes(32, "big") for k in (0, 1)]
        one_tasks = [(4 * n + k).to_bytes(32, "big") for k in (2, 3)]
        job = b"j" * 16
        outcome = []
        for tasks, batched in ((batch_tasks, True), (one_tasks, False)):
            with store.transaction() as tx:
                for i in before:
                    tx.put_client_report(ClientReportRecord(tasks[0], _rid(i), 1, b"old",
                                                            created_at=1.0))
                for i in marked:
                    tx.mark_report_aggregated(tasks[0], _rid(i), 3)
                tx.put_report_aggregations([ReportAggregationRecord(
                    tasks[0], job, o, _rid(o), 10 + o, ReportAggregationState.ACTIVE,
                    b"v%d" % o, min_batch_bound=o) for o in range(6)])
            records = [ClientReportRecord(tasks[t], _rid(i), 2, body, created_at=2.0)
                       for t, i, body in batch]
            ras = [ReportAggregationRecord(tasks[0], job, o, _rid(o), 10 + o, state, vs,
                                           err, min_batch_bound=o)
                   for o, state, vs, err in updates]
            with store.transaction() as tx:
                if batched:
                    stored = tx.put_client_reports(records)
                    got_marks = tx.mark_reports_aggregated(
                        tasks[0], [(_rid(i), t) for i, t in marks])
                    tx.update_report_aggregations(ras)
                    tx.set_report_states(tasks[0], [_rid(i) for i in states],
                                         ReportState.IN_JOB, job)
                else:
                    stored = {(bytes(r.task_id), bytes(r.report_id)) for r in records
                              if tx.put_client_report(r)}
                    got_marks = {_rid(i) for i, t in marks
                                 if tx.mark_report_aggregated(tasks[0], _rid(i), t)}
                    for ra in ras:
                        tx.update_report_aggregation(ra)
                    for i in states:
                        tx.set_report_states(tasks[0], [_rid(i)], ReportState.IN_JOB, job)
            ids = [_rid(i) for i in range(13)]
            with store.transaction() as tx:
                reports = [sorted((bytes(r.report_id), r.time, r.report, r.state,
                                   r.aggregation_job_id)
                                  for r in tx.get_client_reports(t, ids)) for t in tasks]
                aggs = [(r.ord, r.state, r.verify_state, r.error, r.time, r.min_batch_bound)
                        for r in tx.get_report_aggregations(tasks[0], job)]
                replay = tx.aggregated_among(tasks[0], ids)
            index = {t: k for k, t in enumerate(tasks)}
            outcome.append(({(index[t], r) for t, r in stored}, got_marks, reports, aggs,
                            replay))
        assert outcome[0] == outcome[1]

    check()


def test_sqlite_update_without_update_from(tmp_path: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An SQLite older than 3.33 (no UPDATE ... FROM): update_report_aggregations falls
    back to a statement per record, with the same result."""
    from ppm_reference.dap.storage import sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "_UPDATE_FROM", False)
    ds = sqlite_store.SqliteDatastore(tmp_path / "ds.sqlite", synchronous="OFF")
    try:
        job = b"j" * 16
        records = [ReportAggregationRecord(TID, job, o, _rid(o), 10 + o,
                                           ReportAggregationState.ACTIVE, b"v%d" % o)
                   for o in range(3)]
        with ds.transaction() as tx:
            tx.put_report_aggregations(records)
            records[1].state, records[1].verify_state, records[1].error = \
                ReportAggregationState.REJECTED, None, 4
            tx.update_report_aggregations([records[1]])
            got = [(r.ord, r.state, r.verify_state, r.error)
                   for r in tx.get_report_aggregations(TID, job)]
        assert got == [(0, ReportAggregationState.ACTIVE, b"v0", None),
                       (1, ReportAggregationState.REJECTED, None, 4),
                       (2, ReportAggregationState.ACTIVE, b"v2", None)]
    finally:
        ds.close()
