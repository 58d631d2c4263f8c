"""No batch is released to a second collection job, in every profile and batch mode; a
repeated identical query gets the stored result, byte for byte (neither Aggregator
computes, nor noises, the batch again). DAP-09 `by_batch_id` queries only name a batch
already handed to the Collector (DAP-09 Section 4.6.5.2.1).

The attack of issue 12: a `by_batch_id` query for a batch still filling, and the batch
re-opening to further queries, gave one batch six releases with six draws of the
Leader's DP noise (whose average removes it). Every release here goes through the real
servers (`tests.dap_harness`), with a DP policy on the task; a second computation would
show as different bytes (fresh noise, and a fresh HPKE encapsulation in any case)."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.dap.collector import CollectionError, Collector
from ppm_reference.dap.common import BatchMode
from tests.dap_harness import PROTOS, AggregatorPair, Proto

POLICY = {"policy": "HistogramWithAggregatorLaplace", "epsilon": 1.0}


async def raw_collect(collector: Collector, query: Any, timeout: float = 30.0) -> bytes:
    """Run a collection job and return the raw body of its result; the job is deleted
    afterwards (as `Collector.collect` does)."""
    url, _ = await collector.start(query)
    method, _ = collector.task.profile.request("collection_job_poll")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while True:
            async with collector.session.request(method, url,
                                                 headers=collector._headers()) as resp:
                body = await resp.read()
                status = resp.status
            if status >= 400:
                from ppm_reference.dap.collector import _error
                raise _error(status, body)
            if body and status == 200:
                return body
            assert loop.time() < deadline, "collection not ready"
            await asyncio.sleep(0.05)
    finally:
        await collector._delete_quietly(url)


def count(pair_state: Any, sql: str) -> int:
    with pair_state.datastore.transaction() as tx:
        return int(tx.c.execute(sql).fetchone()[0])


async def wait_aggregated(pair: AggregatorPair, n: int) -> None:
    for _ in range(400):
        if count(pair.leader_state, "SELECT COUNT(*) FROM client_reports WHERE "
                 "state='aggregated'") >= n:
            return
        await asyncio.sleep(0.025)
    raise AssertionError("reports not aggregated")


@pytest.mark.parametrize("proto", PROTOS, ids=str)
def test_time_interval_batch_released_once(tmp_path: Path, proto: Proto) -> None:
    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(proto.histogram(4, 2), min_batch_size=3, profile=proto.profile,
                                dp_policy=POLICY)
            async with pair.client(pt) as client:
                await client.upload([0, 1, 1, 3])
            await wait_aggregated(pair, 4)
            query = pair.current_interval_query(pt)
            async with pair.collector(pt) as collector:
                first = await raw_collect(collector, query)
                # The first job was deleted: the same query makes a new job, answered
                # with the stored bytes.
                again = await raw_collect(collector, query)
                assert again == first
                # A different interval overlapping the released one: refused.
                with pytest.raises(CollectionError) as err:
                    await collector.collect(pair.current_interval_query(pt, back=6),
                                            timeout=10)
                assert err.value.problem_type.endswith("batchOverlap")
            # One aggregate share at the Helper, one released result at the Leader.
            assert count(pair.helper_state, "SELECT COUNT(*) FROM aggregate_share_jobs") == 1
            assert count(pair.leader_state, "SELECT COUNT(*) FROM batch_results") == 1
    asyncio.run(run())


@pytest.mark.parametrize("proto", PROTOS, ids=str)
def test_leader_selected_batch_released_once(tmp_path: Path, proto: Proto) -> None:
    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(proto.histogram(4, 2), min_batch_size=3, max_batch_size=3,
                                profile=proto.profile, dp_policy=POLICY,
                                batch_mode=BatchMode.LEADER_SELECTED)
            async with pair.client(pt) as client:
                await client.upload([0, 1, 1])
            await wait_aggregated(pair, 3)
            async with pair.collector(pt) as collector:
                first = await raw_collect(collector, proto.current_batch_query(pt))
                result = proto.profile.flow.decode_collection(first)
                assert result.report_count == 3
                with pair.leader_state.datastore.transaction() as tx:
                    (batch_id,) = [bytes(r[0]) for r in tx.c.execute(
                        "SELECT batch FROM batch_results")]
                # The next current-batch query never gets the released batch: with no
                # reports left, it waits.
                url, _ = await collector.start(proto.current_batch_query(pt))
                await asyncio.sleep(0.5)
                assert (await collector.poll(url))[0] is None
                await collector.delete(url)
                if proto.dap09:
                    # by_batch_id of the released batch: the stored bytes.
                    flow = proto.profile.flow
                    again = await raw_collect(collector, flow.query_batch_id(pt.task, batch_id))
                    assert again == first
                    # A batch never handed to the Collector (filling) or unknown: refused.
                    async with pair.client(pt) as client:
                        await client.upload([2])
                    await wait_aggregated(pair, 4)
                    with pair.leader_state.datastore.transaction() as tx:
                        (filling,) = [b.batch_id for b in tx.list_leader_batches(
                            bytes(pt.task.task_id), ("open",))]
                    for bid in (filling, secrets.token_bytes(32)):
                        with pytest.raises(CollectionError) as err:
                            await collector.collect(flow.query_batch_id(pt.task, bid),
                                                    timeout=10)
                        assert err.value.problem_type.endswith("batchInvalid")
            assert count(pair.helper_state, "SELECT COUNT(*) FROM aggregate_share_jobs") == 1
            assert count(pair.leader_state, "SELECT COUNT(*) FROM batch_results") == 1
            assert count(pair.leader_state, "SELECT COUNT(*) FROM collected_buckets") == 1
    asyncio.run(run())


def test_second_job_on_a_collected_batch_is_refused(tmp_path: Path) -> None:
    """The guard below the rules: should a second collection job hold a batch that
    another job has frozen (white box: written into the datastore), it fails instead
    of releasing the batch again, and no second result is stored."""
    proto = PROTOS[0]

    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(proto.count(), min_batch_size=2, profile=proto.profile,
                                batch_mode=BatchMode.LEADER_SELECTED)
            async with pair.client(pt) as client:
                await client.upload([1, 0])
            await wait_aggregated(pair, 2)
            async with pair.collector(pt) as collector:
                url, _ = await collector.start(proto.current_batch_query(pt))
                for _ in range(400):
                    resp, _ = await collector.poll(url)
                    if resp is not None:
                        break
                    await asyncio.sleep(0.025)
                tid = bytes(pt.task.task_id)
                with pair.leader_state.datastore.transaction() as tx:
                    (job,) = tx.list_task_collection_jobs(tid, ("finished",))
                    from dataclasses import replace

                    from ppm_reference.dap.storage import CollectionJobState
                    twin = replace(job, job_id=secrets.token_bytes(16),
                                   request_hash=secrets.token_bytes(32),
                                   state=CollectionJobState.START, response=None)
                    tx.put_collection_job(twin)
                for _ in range(400):
                    with pair.leader_state.datastore.transaction() as tx:
                        got = tx.get_collection_job(tid, twin.job_id)
                    assert got is not None
                    if got.state != CollectionJobState.START:
                        break
                    await asyncio.sleep(0.025)
                assert (got.state, got.error) == (CollectionJobState.FAILED,
                                                  "batchQueriedTooManyTimes")
            assert count(pair.leader_state, "SELECT COUNT(*) FROM batch_results") == 1
            assert count(pair.helper_state, "SELECT COUNT(*) FROM aggregate_share_jobs") == 1
    asyncio.run(run())
