"""Issue 12: Aggregators draw their DP noise off the request path, from their injectable
rng. Each Aggregator keeps a reserve of whole noise vectors per DP task, filled by a
background loop in a worker thread; computing an aggregate share (the DAP-09 Helper does
it inside the AggregateShareReq) only takes one. No timing is measured here: the tests
check the code path (no sampler runs on the event loop's thread while a batch is
collected, and the noise in the result is exactly the pre-drawn vectors)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from ppm_reference.dap import dp
from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.core.rand import SeededRng
from ppm_reference.dap.server.app import build_app
from ppm_reference.dp_policy import mechanisms, policies
from tests.dap_harness import PROTOS, AggregatorPair, Proto


def laplace_policy() -> policies.SumVecWithAggregatorLaplace:
    return policies.SumVecWithAggregatorLaplace(1.0, 5, 3)


def test_reserve_hands_out_pre_drawn_vectors_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = laplace_policy()
    reserve = dp.NoiseReserve(policy, 5, SeededRng(1), depth=3)
    assert reserve.missing() == 3 and reserve.fill() == 3 and len(reserve) == 3
    # The same stream drawn directly gives the same vectors, in the same order.
    direct = SeededRng(1)
    expected = [policy.sample_agg_share_noise(5, direct) for _ in range(3)]
    # While vectors are left, `take` runs no sampler.
    def no_sampling(self: Any, dimension: int) -> list[int]:
        raise AssertionError("sampled on take")
    monkeypatch.setattr(mechanisms.AdditiveIntegerNoise, "sample_noise", no_sampling)
    assert [reserve.take() for _ in range(3)] == expected
    assert reserve.synchronous_draws == 0
    monkeypatch.undo()
    # Empty: drawn on the spot (correct, but counted: its timing depends on the noise).
    assert reserve.take() == policy.sample_agg_share_noise(5, direct)
    assert reserve.synchronous_draws == 1


def test_seeded_noise_is_reproducible_per_task() -> None:
    policy = laplace_policy()

    def first(seed: int, task_id: bytes, role: str) -> list[int]:
        reserve = dp.NoiseReserve(policy, 5, dp.noise_rng(SeededRng(seed), task_id, role))
        reserve.fill()
        return reserve.take()

    a = first(7, b"\x01" * 32, "helper")
    assert a == first(7, b"\x01" * 32, "helper")
    # Other seeds, tasks and roles draw from other streams (each coincidence has
    # probability below 1e-6 for 5 discrete-Laplace(5) values).
    assert a != first(8, b"\x01" * 32, "helper")
    assert a != first(7, b"\x02" * 32, "helper")
    assert a != first(7, b"\x01" * 32, "leader")


def test_os_rng_has_no_child_and_is_used_directly() -> None:
    from ppm_reference.dap.core.rand import OS_RNG
    assert dp.noise_rng(OS_RNG, b"\x00" * 32, "leader") is OS_RNG


def test_no_reserve_without_aggregator_noise() -> None:
    class Task:
        dp_policy = policies.MultiHotHistogramWithClientRandomization(2.0, 8, 1e-9)
    assert dp.noise_reserve(Task(), SeededRng(0)) is None
    assert dp.noise_agg_share(Task(), [1, 2], SeededRng(0)) == [1, 2]


class SeededPair(AggregatorPair):
    """Aggregators whose every random draw (IDs, keys, DP noise) comes from a seed."""

    async def _start(self, config: Any) -> web.Application:
        app = build_app(config, clock=self.clock, rng=SeededRng(f"{config.role}-12".encode()))
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", config.listen_port).start()
        self.runners.append(runner)
        return app


@pytest.mark.parametrize("proto", PROTOS, ids=[p.name for p in PROTOS])
def test_collection_uses_the_pre_drawn_noise_and_samples_nothing_on_the_loop(
        tmp_path: Path, proto: Proto, monkeypatch: pytest.MonkeyPatch) -> None:
    vdaf = proto.sumvec(5, 3, 2)
    measurements = [[1, 2, 3, 0, 1], [3, 3, 0, 0, 2], [0, 1, 1, 1, 1]]
    exact = [sum(c) for c in zip(*measurements, strict=True)]
    draws_on_loop: list[str] = []
    original = mechanisms.AdditiveIntegerNoise.sample_noise

    def watched(self: Any, dimension: int) -> list[int]:
        if threading.current_thread() is threading.main_thread():
            draws_on_loop.append(type(self).__name__)
        return original(self, dimension)
    monkeypatch.setattr(mechanisms.AdditiveIntegerNoise, "sample_noise", watched)

    async def full_reserve(state: Any, task_id: bytes, rng: Any) -> dp.NoiseReserve:
        for _ in range(500):
            task = state.tasks.peek(task_id)
            reserve = dp.noise_reserve(task, rng) if task is not None else None
            if reserve is not None and reserve.missing() == 0:
                return reserve
            await asyncio.sleep(0.02)
        raise AssertionError("the noise reserve was never filled")

    async def run() -> None:
        async with SeededPair(tmp_path) as pair:
            pt = pair.provision(vdaf, batch_mode=BatchMode.TIME_INTERVAL,
                                min_batch_size=len(measurements), profile=proto.profile,
                                dp_policy={"policy": "SumVecWithAggregatorLaplace",
                                           "epsilon": 1.0})
            tid = bytes(pt.task.task_id)
            async with pair.client(pt) as client:
                assert (await client.upload(measurements)).accepted == len(measurements)
            reserves = [await full_reserve(st, tid, st.rng)
                        for st in (pair.leader_state, pair.helper_state)]
            # The next vector of each reserve, and what a seeded stream says it is.
            upcoming = [list(r._vectors[0]) for r in reserves]
            for role, r, vec in zip(("leader", "helper"), reserves, upcoming, strict=True):
                replay = dp.NoiseReserve(r.policy, 5, dp.noise_rng(SeededRng(f"{role}-12".encode()),
                                                                   tid, role))
                assert replay.fill() and replay.take() == vec
            draws_on_loop.clear()
            async with pair.collector(pt) as collector:
                result = await collector.collect(pair.current_interval_query(pt),
                                                 timeout=30, max_poll_interval=0.05)
            assert result.report_count == len(measurements)
            assert [r.synchronous_draws for r in reserves] == [0, 0]
            assert draws_on_loop == []
            noise = [a + b for a, b in zip(*upcoming, strict=True)]
            assert list(result.debiased_result) == \
                [x + z for x, z in zip(exact, noise, strict=True)]
    asyncio.run(run())


def test_fill_stops_when_asked_and_chunks_draw_the_same_values() -> None:
    import threading

    policy = laplace_policy()
    stop = threading.Event()
    stop.set()
    reserve = dp.NoiseReserve(policy, 5, SeededRng(3))
    assert reserve.fill(stop) == 0 and len(reserve) == 0
    # Drawn DRAW_CHUNK coordinates at a time: the same stream as in one go.
    chunked = dp.NoiseReserve(policy, 10, SeededRng(4), depth=1)
    old, dp.DRAW_CHUNK = dp.DRAW_CHUNK, 3
    try:
        chunked.fill()
    finally:
        dp.DRAW_CHUNK = old
    assert chunked.take() == policy.sample_agg_share_noise(10, SeededRng(4))


def test_keep_noise_reserves_fills_and_survives_a_failing_task() -> None:
    class Broken:
        task_id = b"\x09" * 32

        @property
        def dp_policy(self) -> Any:
            raise RuntimeError("broken task")

    class Good:
        task_id = b"\x0a" * 32
        role = type("R", (), {"name": "HELPER"})()
        dp_policy = laplace_policy()
        vdaf = dp_policy.vdaf

    good = Good()

    async def run() -> None:
        loop = asyncio.create_task(dp.keep_noise_reserves(lambda: [Broken(), good],
                                                          SeededRng(5), interval=0.01))
        for _ in range(200):
            reserve = dp.noise_reserve(good, SeededRng(5))
            if reserve is not None and reserve.missing() == 0:
                break
            await asyncio.sleep(0.01)
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loop
        reserve = dp.noise_reserve(good, SeededRng(5))
        assert reserve is not None and len(reserve) == dp.RESERVE_DEPTH
    asyncio.run(run())
