"""A collection the Helper refuses does not burn the batch at the Leader."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ppm_reference.dap.collector import CollectionError
from ppm_reference.vdaf.prio3 import Prio3Count
from tests.dap_harness import AggregatorPair


def test_refused_time_interval_collection_is_released(tmp_path: Path) -> None:
    """The Helper answers batchMismatch (here: its bucket holds one report more than the
    Leader's). Its transaction rolled back, so nothing was collected anywhere: the Leader
    unfreezes the interval, and a later collection of it succeeds."""
    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(Prio3Count(2), min_batch_size=3)
            async with pair.client(pt) as client:
                await client.upload([1, 1, 0, 1])
            query = pair.current_interval_query(pt)

            def shift(delta: int) -> None:
                with pair.helper_state.datastore.transaction() as tx:
                    tx.c.execute("UPDATE batch_buckets SET report_count = report_count + ?",
                                 (delta,))

            async with pair.collector(pt) as collector:
                # Wait until both Aggregators committed every report, then skew the Helper.
                for _ in range(200):
                    with pair.helper_state.datastore.transaction() as tx:
                        done = tx.c.execute("SELECT SUM(report_count) FROM batch_buckets"
                                            ).fetchone()[0]
                    if done == 4:
                        break
                    await asyncio.sleep(0.05)
                shift(+1)
                with pytest.raises(CollectionError) as err:
                    await collector.collect(query, timeout=30, max_poll_interval=0.05)
                assert "batchMismatch" in err.value.problem_type
                with pair.leader_state.datastore.transaction() as tx:
                    assert tx.c.execute("SELECT COUNT(*) FROM collected_intervals"
                                        ).fetchone()[0] == 0
                shift(-1)
                result = await collector.collect(query, timeout=30, max_poll_interval=0.05)
            assert result.report_count == 4 and result.aggregate_result == 3
    asyncio.run(run())
