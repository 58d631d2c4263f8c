"""A first end-to-end check over HTTP: both batch modes, synchronous and asynchronous
Helper. The full matrix is in test_dap_e2e.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.profiles.dap18.messages import Query
from ppm_reference.vdaf.prio3 import Prio3Histogram
from tests.dap_harness import AggregatorPair


@pytest.mark.parametrize("mode", [BatchMode.TIME_INTERVAL, BatchMode.LEADER_SELECTED])
@pytest.mark.parametrize("async_helper", [False, True])
def test_histogram_round_trip(tmp_path: Path, mode: BatchMode, async_helper: bool) -> None:
    async def run() -> None:
        async with AggregatorPair(tmp_path, helper_overrides={"async_helper": async_helper}) \
                as pair:
            pt = pair.provision(Prio3Histogram(2, 5, 2), batch_mode=mode, min_batch_size=10)
            measurements = [i % 5 for i in range(10)]
            async with pair.client(pt) as client:
                result = await client.upload(measurements)
            assert result.accepted == 10 and not result.rejected
            query = (pair.current_interval_query(pt) if mode == BatchMode.TIME_INTERVAL
                     else Query.leader_selected())
            async with pair.collector(pt) as collector:
                collection = await collector.collect(query, timeout=30)
            assert collection.report_count == 10
            assert collection.aggregate_result == [2, 2, 2, 2, 2]
    asyncio.run(run())


def test_successive_leader_selected_collections(tmp_path: Path) -> None:
    """Each Collector.collect() gets the next leader-selected batch: the finished job is
    deleted, so the identical CollectionJobReq creates a new job (DAP-18 Section 3.2)."""
    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(Prio3Histogram(2, 3, 2), batch_mode=BatchMode.LEADER_SELECTED,
                                min_batch_size=4)
            async with pair.client(pt) as client:
                await client.upload([0, 0, 0, 0])
            async with pair.collector(pt) as collector:
                first = await collector.collect(Query.leader_selected(), timeout=30)
                async with pair.client(pt) as client:
                    await client.upload([2, 2, 2, 2])
                second = await collector.collect(Query.leader_selected(), timeout=30)
            assert first.aggregate_result == [4, 0, 0]
            assert second.aggregate_result == [0, 0, 4]
            assert first.job_url != second.job_url
    asyncio.run(run())


def test_dap_auth_token_header_is_accepted(tmp_path: Path) -> None:
    """The Leader accepts the Collector's token in `DAP-Auth-Token` as well as in
    `Authorization: Bearer`; a wrong token in either is refused."""
    import aiohttp

    from ppm_reference.dap.profiles.dap18.messages import CollectionJobReq

    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(Prio3Histogram(2, 3, 2), min_batch_size=1)
            url = pt.task.profile.resource_url("collection_jobs", pair.leader_url,
                                               task_id=pt.task.task_id)
            body = CollectionJobReq(pair.current_interval_query(pt), b"", ()).encode()
            ctype = pt.task.profile.media_type_for("CollectionJobReq")
            async with aiohttp.ClientSession() as session:
                for headers, status in (
                        ({"DAP-Auth-Token": "wrong"}, 403),
                        ({"DAP-Auth-Token": pt.collector_auth_token}, 201),
                        ({"Authorization": f"Bearer {pt.collector_auth_token}"}, 201)):
                    async with session.post(url, data=body,
                                            headers={**headers, "Content-Type": ctype}) as r:
                        assert r.status == status, (headers, r.status, await r.text())
    asyncio.run(run())
