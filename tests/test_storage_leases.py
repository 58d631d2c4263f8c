"""The datastore operations that let several processes share an Aggregator's work
(dap/server/scheduling.py), on several connections to one datastore: what several
processes see. Written against the `Transaction` interface and run on every backend
(`backend`: a SQLite file, or a fresh schema of the session's PostgreSQL database)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from ppm_reference.dap.storage import (
    AggregateShareJobRecord,
    AggregateShareJobState,
    AggregationJobRecord,
    AggregationJobState,
    ClientReportRecord,
    CollectionJobRecord,
    CollectionJobState,
    Datastore,
    ReportState,
    open_datastore,
)
from tests.pg_harness import BACKENDS

T1, T2, T3 = bytes([1]) * 32, bytes([2]) * 32, bytes([3]) * 32

pytestmark = pytest.mark.parametrize("backend", BACKENDS)


@pytest.fixture
def datastores(datastore_spec: Callable[[str], str], backend: str
               ) -> Iterator[Callable[[], Datastore]]:
    """Opens another connection (as another process would) to one datastore."""
    spec = datastore_spec("shared")
    opened: list[Datastore] = []

    def open_one() -> Datastore:
        ds = open_datastore(spec, sqlite_synchronous="OFF", key_from_env=False)
        opened.append(ds)
        return ds

    yield open_one
    for ds in opened:
        ds.close()


def job(job_id: bytes, role: str = "leader", next_attempt_at: float = 0.0
        ) -> AggregationJobRecord:
    return AggregationJobRecord(T1, job_id, role, AggregationJobState.ACTIVE, 0, b"",
                                request=b"req", next_attempt_at=next_attempt_at)


def test_a_leased_job_goes_to_one_process_and_only_the_holder_commits(
        datastores: Callable[[], Datastore]) -> None:
    a, b = datastores(), datastores()
    with a.transaction() as tx:
        for i in range(3):
            tx.put_aggregation_job(job(bytes([i]) * 16))
    with a.transaction() as tx:
        mine = tx.acquire_aggregation_jobs("leader", 100.0, 10.0, 2)
    with b.transaction() as tx:
        theirs = tx.acquire_aggregation_jobs("leader", 101.0, 10.0, 5)
    assert len(mine) == 2 and len(theirs) == 1
    assert {j.job_id for j in mine}.isdisjoint({j.job_id for j in theirs})
    assert all(len(j.lease_token) == 16 for j in mine + theirs)
    # Nothing more while the leases run; once a's expire, b takes them over.
    with b.transaction() as tx:
        assert tx.acquire_aggregation_jobs("leader", 109.0, 10.0, 5) == []
    with b.transaction() as tx:
        taken = tx.acquire_aggregation_jobs("leader", 110.5, 10.0, 5)
    assert {j.job_id for j in taken} == {j.job_id for j in mine}
    assert {j.lease_token for j in taken}.isdisjoint({j.lease_token for j in mine})
    # a's lease is gone: its compare fails; b's holds, and b's update keeps the token.
    first = mine[0]
    with a.transaction() as tx:
        assert tx.get_leased_aggregation_job(T1, first.job_id, first.lease_token) is None
    token = next(j.lease_token for j in taken if j.job_id == first.job_id)
    with b.transaction() as tx:
        fresh = tx.get_leased_aggregation_job(T1, first.job_id, token)
        assert fresh is not None and fresh.lease_token == token and fresh.request == b"req"
        # Without its request (a caller that holds it): the rest of the record alike.
        bare = tx.get_leased_aggregation_job(T1, first.job_id, token, with_request=False)
        assert bare is not None and bare.request == b""
        bare.request = fresh.request
        assert bare == fresh
        assert tx.get_leased_aggregation_job(T1, first.job_id, first.lease_token,
                                             with_request=False) is None
        fresh.step = 1
        tx.update_aggregation_job(fresh)
    with a.transaction() as tx:
        again = tx.get_aggregation_job(T1, first.job_id)
    assert again is not None and again.step == 1 and again.lease_token == token


def test_named_leases(datastores: Callable[[], Datastore]) -> None:
    a, b = datastores(), datastores()
    with a.transaction() as tx:
        assert tx.try_lease("create_jobs", T1, b"A", 100.0, 5.0)
        assert tx.try_lease("create_jobs", T1, b"A", 101.0, 5.0)       # renewed: to 106
        assert tx.try_lease("create_jobs", T2, b"A", 101.0, 5.0)       # another key
    with b.transaction() as tx:
        assert not tx.try_lease("create_jobs", T1, b"B", 105.9, 5.0)
        assert tx.try_lease("collection", T1, b"B", 105.9, 5.0)        # another kind
        assert tx.try_lease("create_jobs", T1, b"B", 106.0, 5.0)       # expired: taken
    with a.transaction() as tx:
        assert not tx.try_lease("create_jobs", T1, b"A", 107.0, 5.0)   # the CAS fails
        tx.release_lease("create_jobs", T1, b"A")                       # not A's: no-op
    with b.transaction() as tx:
        assert not tx.try_lease("create_jobs", T1, b"C", 107.0, 5.0)
        tx.release_lease("create_jobs", T1, b"B")
        assert tx.try_lease("create_jobs", T1, b"C", 107.0, 5.0)       # released: free


def test_one_of_many_concurrent_takers_gets_a_lease(
        datastores: Callable[[], Datastore]) -> None:
    stores = [datastores() for _ in range(6)]
    won: list[int] = []
    start = threading.Barrier(len(stores))

    def take(i: int) -> None:
        start.wait()
        with stores[i].transaction() as tx:
            if tx.try_lease("retention", b"leader", bytes([i]), 50.0, 300.0):
                won.append(i)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1


def test_tasks_with_new_reports_and_next_work_due(
        datastores: Callable[[], Datastore]) -> None:
    ds = datastores()
    with ds.transaction() as tx:
        assert tx.tasks_with_new_reports(10) == []
        assert tx.next_work_due("leader") is None and tx.next_work_due("helper") is None
        for tid, n, state in ((T1, 3, ReportState.NEW), (T2, 2, ReportState.AGGREGATED),
                              (T3, 1, ReportState.NEW)):
            for i in range(n):
                tx.put_client_report(ClientReportRecord(tid, bytes([i]) * 16, 5, b"r", state))
        assert tx.tasks_with_new_reports(10) == [T1, T3]
        assert tx.tasks_with_new_reports(1) == [T1]
        tx.put_aggregation_job(job(b"j" * 16, next_attempt_at=40.0))
        done = job(b"k" * 16, next_attempt_at=5.0)
        done.state = AggregationJobState.FINISHED
        tx.put_aggregation_job(done)
        tx.put_aggregation_job(job(b"h" * 16, role="helper", next_attempt_at=70.0))
        assert tx.next_work_due("leader") == 40.0
        tx.put_collection_job(CollectionJobRecord(T1, b"c" * 16, b"q", b"h",
                                                  CollectionJobState.START,
                                                  next_attempt_at=30.0))
        assert tx.next_work_due("leader") == 30.0
        tx.put_aggregate_share_job(AggregateShareJobRecord(T1, b"s" * 16, b"q", b"h",
                                                           AggregateShareJobState.START,
                                                           next_attempt_at=60.0))
        assert tx.next_work_due("helper") == 60.0
    with ds.transaction() as tx:
        leased = tx.acquire_aggregation_jobs("leader", 45.0, 100.0, 1)
        assert [j.job_id for j in leased] == [b"j" * 16]
        # A leased job is due again when its lease expires.
        tx.delete_task(T1)  # (no effect on the jobs: only to show the query is by role)
        assert tx.next_work_due("leader") == 30.0
        tx.update_collection_job(CollectionJobRecord(T1, b"c" * 16, b"q", b"h",
                                                     CollectionJobState.FINISHED))
        assert tx.next_work_due("leader") == 145.0
