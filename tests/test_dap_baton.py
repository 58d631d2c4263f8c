"""The job threads' baton (dap.server.common.Baton): one holder at a time, and `pace`
hands it to the longest waiting job between chunks of reports."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from ppm_reference.dap.server.common import Baton


def _wait_for_waiter(baton: Baton) -> None:
    deadline = time.monotonic() + 10
    while not baton._lock.has_waiters():
        assert time.monotonic() < deadline, "the other thread never waited"
        time.sleep(0.001)


def test_pace_hands_the_baton_to_a_waiting_job_and_takes_it_back() -> None:
    baton = Baton()
    order: list[str] = []

    def other(name: str) -> None:
        with baton:
            order.append(name)

    with baton:
        first = threading.Thread(target=other, args=("waiting 1",))
        first.start()
        _wait_for_waiter(baton)
        second = threading.Thread(target=other, args=("waiting 2",))
        second.start()
        deadline = time.monotonic() + 10
        while len(baton._lock._waiters) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.001)
        order.append("chunk 1")
        baton.pace()  # both waiters go first (in arrival order), then this holder again
        order.append("chunk 2")
    first.join(10)
    second.join(10)
    assert order == ["chunk 1", "waiting 1", "waiting 2", "chunk 2"]


def test_pace_without_waiters_keeps_the_baton() -> None:
    baton = Baton()
    with baton:
        baton.pace()
        assert baton._lock._owner == threading.get_ident()
    assert baton._lock._owner is None


def test_one_holder_at_a_time() -> None:
    baton = Baton()
    inside = 0
    most = 0
    guard = threading.Lock()

    def job() -> None:
        nonlocal inside, most
        for _ in range(50):
            with baton:
                for _chunk in range(2):
                    with guard:
                        inside += 1
                        most = max(most, inside)
                    time.sleep(0.0005)
                    with guard:
                        inside -= 1
                    baton.pace()  # between chunks: another job may run

    threads = [threading.Thread(target=job) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert most == 1


def test_the_asynchronous_helper_prepares_holding_the_baton(tmp_path: Path,
                                                            monkeypatch: Any) -> None:
    """The asynchronous Helper (`async_helper`: the background worker answers the jobs)
    prepares each job in a job thread holding the baton, as the synchronous answers do,
    and passes `pace` on: its preparation never runs beside another job's."""
    from ppm_reference.dap.server import helper as helper_server
    from tests.dap_harness import PROTOS, AggregatorPair
    from tests.test_dap_e2e import collect, upload

    proto = next(p for p in PROTOS if not p.dap09)
    seen: list[tuple[bool, bool]] = []
    pair_box: list[Any] = []
    real = helper_server.core.prepare_aggregation_job

    def spy(*args: Any, **kwargs: Any) -> Any:
        baton = pair_box[0].helper_state.baton
        seen.append((baton._lock._owner == threading.get_ident(),
                     kwargs.get("pace") == baton.pace))
        return real(*args, **kwargs)

    monkeypatch.setattr(helper_server.core, "prepare_aggregation_job", spy)

    async def run() -> None:
        async with AggregatorPair(tmp_path, helper_overrides={
                "async_helper": True, "retry_after": 0}) as pair:
            pair_box.append(pair)
            pt = pair.provision(proto.count(), min_batch_size=4, profile=proto.profile)
            await upload(pair, pt, [1, 0, 1, 1])
            result = await collect(pair, pt, pair.current_interval_query(pt))
            assert result.aggregate_result == 3

    asyncio.run(run())
    assert seen and all(holds and paced for holds, paced in seen), seen
