"""The job threads' baton (dap.server.common.Baton): one holder at a time, and `pace`
hands it to the longest waiting job between chunks of reports."""

from __future__ import annotations

import threading
import time

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
