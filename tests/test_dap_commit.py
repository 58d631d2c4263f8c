"""Committing output shares (dap.core.buckets.commit_output_shares), on both backends:
each report is counted once. Without an aggregation parameter the replay check is the
marking itself (INSERT ... ON CONFLICT, one statement for the job), not a lookup before
it; the errors are those of the checks in their order (`commit_error`: evicted, batch
collected, replayed)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ppm_reference.dap.common import ReportError
from ppm_reference.dap.core.buckets import (
    CommitMemo,
    OutputShare,
    commit_output_shares,
    time_bucket,
)
from ppm_reference.dap.core.tasks import AggregatorTask
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.provision import new_task
from ppm_reference.dap.storage import open_datastore
from ppm_reference.vdaf.prio3 import Prio3Count
from tests.pg_harness import BACKENDS

pytestmark = pytest.mark.parametrize("backend", BACKENDS)

T0 = 1_000_000  # a report time (seconds); its time unit is T0 // 60 * 60
T_COLLECTED = 2_000_000


@pytest.fixture
def env(datastore_spec: Callable[[str], str]) -> Iterator[tuple[Any, AggregatorTask]]:
    vdaf = Prio3Count(2)
    pt = new_task(vdaf, "https://l.example/", "https://h.example/", time_precision=60)
    ds = open_datastore(datastore_spec("leader"), sqlite_synchronous="OFF",
                        key_from_env=False)
    with ds.transaction() as tx:
        tx.put_task(pt.record("leader"))
    try:
        yield ds, AggregatorTask.from_record(pt.record("leader"), get_profile)
    finally:
        ds.close()


def _share(task: AggregatorTask, i: int, t: int = T0, value: int = 1) -> OutputShare:
    return OutputShare(i.to_bytes(16, "big"), t, time_bucket(t), [value])  # field elements


def _bucket(ds: Any, task: AggregatorTask, t: int) -> tuple[int, int]:
    with ds.transaction() as tx:
        rec = tx.get_bucket(task.task_id, time_bucket(t), b"")
    if rec is None:
        return 0, 0
    agg = task.vdaf.decode_agg_share(None, rec.agg_share)
    return rec.report_count, int(agg[0])


def test_each_report_is_counted_once(env: tuple[Any, AggregatorTask], backend: str) -> None:
    ds, task = env
    tid = task.task_id
    with ds.transaction() as tx:
        assert tx.mark_report_aggregated(tid, (2).to_bytes(16, "big"), T0)
        # A report both replayed and in a collected interval: batch_collected comes first.
        assert tx.mark_report_aggregated(tid, (5).to_bytes(16, "big"), T_COLLECTED)
        tx.mark_interval_collected(tid, T_COLLECTED // 60 * 60, T_COLLECTED // 60 * 60 + 60)
    with ds.transaction() as tx:
        failed = commit_output_shares(tx, task, b"", [
            _share(task, 1, value=1), _share(task, 2, value=1),   # 2: aggregated before
            _share(task, 3, value=1), _share(task, 3, value=1),   # 3: twice in the job
            _share(task, 4, value=0),
            _share(task, 5, T_COLLECTED), _share(task, 6, T_COLLECTED)])
    assert failed == {(2).to_bytes(16, "big"): ReportError.REPORT_REPLAYED,
                      (3).to_bytes(16, "big"): ReportError.REPORT_REPLAYED,
                      (5).to_bytes(16, "big"): ReportError.BATCH_COLLECTED,
                      (6).to_bytes(16, "big"): ReportError.BATCH_COLLECTED}
    # Reports 1, 3 (once) and 4: three reports, two of them 1s.
    assert _bucket(ds, task, T0) == (3, 2)
    assert _bucket(ds, task, T_COLLECTED) == (0, 0)
    # A second job with the same reports: every one replayed, nothing counted again.
    with ds.transaction() as tx:
        again = commit_output_shares(tx, task, b"", [_share(task, i) for i in (1, 3, 4)],
                                     CommitMemo())
    assert set(again.values()) == {ReportError.REPORT_REPLAYED} and len(again) == 3
    assert _bucket(ds, task, T0) == (3, 2)
    with ds.transaction() as tx:
        assert tx.aggregated_among(tid, [i.to_bytes(16, "big") for i in range(1, 8)]) == {
            i.to_bytes(16, "big") for i in (1, 2, 3, 4, 5)}
