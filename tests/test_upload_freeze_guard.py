"""The uploads of a time-interval task and the freeze of its collected intervals take
turns (`Transaction.guard_uploads`; issue 14's "every acknowledged report is counted
exactly once"). On PostgreSQL upload transactions run beside the exclusive mode's lock
(`upload_transaction`), so without the guard an upload could check that its interval is
not collected, a collection could then count the reports still to aggregate (not yet
seeing the upload's) and freeze the interval, and the upload would then commit: an
acknowledged report that job creation later refuses as `batch_collected`.

Here: the core takes the guard where it must, on every backend (a transaction that
records the calls): `commit_uploads` shared, for its time-interval tasks, before it
reads their collected intervals; `prepare_collection` exclusive, for its task, before it
counts the reports to aggregate. What the guard does on PostgreSQL is
tests/test_storage_batch.py::test_the_freeze_and_the_uploads_of_a_task_take_turns."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from ppm_reference.dap.common import Interval, Role
from ppm_reference.dap.core import leader as core
from ppm_reference.dap.profiles.dap18.messages import CollectionJobReq, Query, UploadRequest
from tests.pg_harness import BACKENDS
from tests.test_leader_small_jobs import _close, _leader


class Recording:
    """A transaction that records the names and arguments of the operations called."""

    def __init__(self, tx: Any) -> None:
        self._tx = tx
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._tx, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return attr(*args, **kwargs)
        return call

    def names(self) -> list[str]:
        return [name for name, _, _ in self.calls]


@pytest.mark.parametrize("backend", BACKENDS)
def test_uploads_and_the_freeze_take_the_task_guard(datastore_spec: Callable[[str], str],
                                                    backend: str) -> None:
    app, st, tasks = _leader(datastore_spec, n_tasks=2, per_task=2)
    try:
        pts = sorted(tasks, key=lambda pt: bytes(pt.task.task_id))
        agg = [st.task(pt.task.task_id, Role.LEADER) for pt in pts]
        tids = [bytes(t.task_id) for t in agg]
        keyring = st.keyring()
        now = time.time()
        # One group of two uploads, one to each task (as UploadGroups stores them): a
        # stored report of each again (a replay: the checks and the guard are the same).
        uploads = []
        for task in agg:
            with st.datastore.read() as rtx:
                stored = rtx.list_new_reports(task.task_id, 10)
            report_time = stored[0].time // 60 * 60
            body = UploadRequest((task.wire.decode_report(stored[0].report),)).encode()
            uploads.append((task, keyring, core.decode_upload(task, body)))
        prepared = core.prepare_uploads(uploads, now, st.config.clock_skew)
        with st.datastore.upload_transaction() as tx:
            rec = Recording(tx)
            core.commit_uploads(rec, prepared)
        names = rec.names()
        assert names[0] == "guard_uploads", names
        assert rec.calls[0][1] == (tids,) and not rec.calls[0][2].get("exclusive", False)
        assert names.count("guard_uploads") == 1
        assert "commit_context" in names and "put_client_reports" in names

        # A collection job of the stored reports' interval (of the last task, the one
        # report_time is of): its freeze check takes the guard exclusive before it counts
        # the reports to aggregate; two are new, so it waits.
        body = CollectionJobReq(Query.time_interval(Interval(report_time, 60)), b"",
                                ()).encode()
        with st.datastore.transaction() as tx:
            job_id = core.create_collection_job(tx, agg[1], body, now, rng=st.rng)
            job = tx.get_collection_job(agg[1].task_id, job_id)
        assert job is not None
        with st.datastore.transaction() as tx:
            rec = Recording(tx)
            assert core.prepare_collection(rec, agg[1], job, time.time(), None) is None
        names = rec.names()
        assert "guard_uploads" in names and "count_reports" in names, names
        assert names.index("guard_uploads") < names.index("count_reports")
        _, args, kwargs = rec.calls[names.index("guard_uploads")]
        assert args == ([tids[1]],) and kwargs == {"exclusive": True}
        # It stopped at the count (reports to aggregate first): no bucket was read.
        assert "list_buckets_in_range" not in names, names
    finally:
        _close(app)
