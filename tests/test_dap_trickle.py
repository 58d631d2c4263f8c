"""Collection completes the aggregation jobs pending when it starts and moves on, however
many reports keep arriving into its interval (DAP-18 Section 4.6.1: "If the Leader has a
pending aggregation job that overlaps with the batch for the collection job, the Leader
MUST first complete the aggregation job before proceeding").

Issue 12: about 200 uploads/s into a past hour kept it uncollectable for as long as they
lasted (the Leader waited for an empty aggregation pipeline). Here, scaled down, a
Client keeps uploading small requests into the interval of a collection job for as long
as the job runs; the job completes while they go on, and every report is accounted for:
counted in the released batch, or (uploaded after its cutoff) failed with
`batch_collected` once the batch was collected, as the draft requires ("The Leader MUST
discard any report pertaining to a batch that has already been collected").
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ppm_reference.dap.common import ReportError
from tests.dap_harness import PROTOS, AggregatorPair, Proto


@pytest.mark.parametrize("proto", PROTOS, ids=str)
def test_collection_completes_under_a_trickle(tmp_path: Path, proto: Proto) -> None:
    async def run() -> None:
        # Jobs of one report, made as soon as it arrives, each in flight for a second (an
        # asynchronous Helper, polled after Retry-After: 1): a pipeline never empty.
        async with AggregatorPair(tmp_path, leader_overrides={"max_job_size": 1},
                                  helper_overrides={"async_helper": True}) as pair:
            pt = pair.provision(proto.count(), min_batch_size=5, profile=proto.profile)
            tid = bytes(pt.task.task_id)
            now = time.time()
            async with pair.client(pt) as client:
                first = await client.upload([1] * 6, time_seconds=now)
                assert first.accepted == 6
                stop = asyncio.Event()
                trickled = 0

                async def trickle() -> None:
                    nonlocal trickled
                    while not stop.is_set():
                        result = await client.upload([1, 0], time_seconds=now)
                        trickled += result.accepted
                        await asyncio.sleep(0.01)

                uploader = asyncio.create_task(trickle())
                await asyncio.sleep(0.3)  # the trickle is under way
                try:
                    async with pair.collector(pt) as collector:
                        result = await collector.collect(pair.current_interval_query(pt),
                                                         timeout=15, max_poll_interval=0.05)
                    assert not uploader.done()  # it completed while the uploads went on
                finally:
                    stop.set()
                    await uploader
            assert trickled > 0
            # Every accepted report: counted in the batch, or failed batch_collected.
            for _ in range(400):
                with pair.leader_state.datastore.transaction() as tx:
                    rows = tx.c.execute("SELECT state, error, COUNT(*) FROM client_reports "
                                        "WHERE task_id=? GROUP BY state, error",
                                        (tid,)).fetchall()
                states = {(s, e): n for s, e, n in rows}
                if not any(s in ("new", "in_job") for s, _ in states):
                    break
                await asyncio.sleep(0.025)
            aggregated = states.pop(("aggregated", None), 0)
            late = states.pop(("failed", int(ReportError.BATCH_COLLECTED)), 0)
            assert states == {}, states
            assert aggregated == result.report_count >= 6
            assert aggregated + late == 6 + trickled
    asyncio.run(run())
