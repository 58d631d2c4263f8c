"""When an Aggregator's background work runs, with one process or several.

A process that does background work (a *driver*, or the single process of `--mode all`)
does not look at every task on a timer. It asks the datastore for the work that is due
(`Transaction.acquire_aggregation_jobs`, `tasks_with_new_reports`, the due collection
jobs: indexed queries whose cost grows with the work, not with the tasks) and then
sleeps until the earliest of:

* the next due time stored in the datastore (`Transaction.next_work_due`: a job's retry
  or poll time, a lease that expires, a collection job's next look) or kept in the
  process (a task's straggler age, the next retention pass);
* a notification: in one process, an asyncio event set by the upload and collection
  handlers and by finished job steps (`WorkEvent`); across processes, a datastore that
  offers notifications (the optional `WorkNotifier` hooks; PostgreSQL's NOTIFY/LISTEN
  provide them, dap.storage.postgres), else
* `work_poll_interval` seconds (configuration): the cheap poll of those indexed queries,
  which is how a driver learns of uploads that front ends in other processes stored.

Work is leased, so that any number of drivers can share one datastore and any of them may
die: aggregation jobs by `acquire_aggregation_jobs` (a lease token each, compared before
a commit: `get_leased_aggregation_job`), job creation per task, collection jobs and the
retention pass by named leases (`Transaction.try_lease`), which expire after a crash.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger("ppm.scheduling")

# This process's name in the leases it takes (random: a restarted process is another
# holder, and waits for the leases its predecessor held to expire).
HOLDER = os.urandom(16)

# Lease kinds (Transaction.try_lease)
CREATE_JOBS = "create_jobs"       # key: task ID; aggregation job creation for one task
COLLECTION = "collection"         # key: task ID + collection job ID
RETENTION = "retention"           # key: role; one retention pass per interval


@runtime_checkable
class WorkNotifier(Protocol):
    """Optional hooks of a datastore that can wake drivers in other processes (e.g.
    PostgreSQL's NOTIFY / LISTEN). Without them drivers poll every
    `work_poll_interval` seconds."""

    def notify_work(self, role: str, task_ids: Iterable[bytes] | None = None) -> None:
        """Work for `role`'s drivers was stored (an upload, a collection job), for the
        tasks `task_ids` (None: for any task)."""

    def listen_work(self, role: str, callback: Callable[[builtins.set[bytes] | None], None],
                    own: bool = True) -> None:
        """Call `callback` (from any thread) with the task IDs of the news (None: any
        task) whenever `notify_work(role)` is called by any process; not for this
        datastore's own notifications unless `own`."""


class WorkEvent(asyncio.Event):
    """The wake-up of a process's background worker. `set()` by a handler also notifies
    the drivers of other processes through the datastore, when it can
    (`WorkNotifier`)."""

    def __init__(self, datastore: Any = None, role: str = "leader") -> None:
        super().__init__()
        self._notify = datastore.notify_work if isinstance(datastore, WorkNotifier) else None
        self._role = role
        # Wake-ups that may bring new work (a handler's, another process's notification),
        # counted: a worker woken by nothing else (`asyncio.Event.set`, e.g. at the end of
        # one of its own steps) knows that nobody stored work since it looked.
        self.news = 0
        # The tasks the news since the last `take_news_tasks` was about; None: news of
        # any task (a `set()`, or another process's notification, naming none).
        self._news_tasks: builtins.set[bytes] | None = set()

    def set(self, task_ids: Iterable[bytes] | None = None) -> None:
        """News: work was stored, for `task_ids` (None: for any task)."""
        named = None if task_ids is None else {bytes(t) for t in task_ids}
        self._note(named)
        if self._notify is not None:
            try:
                self._notify(self._role, named)
            except Exception:  # noqa: BLE001 - a lost notification only costs a poll
                log.exception("work notification failed")

    def _note(self, named: builtins.set[bytes] | None) -> None:
        self.news += 1
        if named is None:
            self._news_tasks = None
        elif self._news_tasks is not None:
            self._news_tasks.update(named)
        super().set()

    def take_news_tasks(self) -> builtins.set[bytes] | None:
        """The tasks that the news since the last call named (None: any task may have
        new work), and start anew."""
        tasks, self._news_tasks = self._news_tasks, set()
        return tasks

    def listen(self, datastore: Any) -> None:
        """Be woken by other processes' notifications (called by a driver)."""
        if not isinstance(datastore, WorkNotifier):
            return
        loop = asyncio.get_running_loop()

        def wake(task_ids: builtins.set[bytes] | None) -> None:
            # (Another process's news names its tasks when they are few: see the
            # datastore's notify_work.)
            loop.call_soon_threadsafe(self._note, task_ids)

        # Not woken again by the echo of this process's own notifications (its handlers
        # set this event already): a pass of the worker saved per upload.
        datastore.listen_work(self._role, wake, own=False)


async def sleep_until_work(wake: asyncio.Event, now: float, due: float | None,
                           poll: float, floor: float) -> bool:
    """Sleep until `due` (a datastore time), at most `poll` seconds, at least `floor`
    (no busy loop on work that is due but cannot run yet), or until `wake` is set.
    Returns whether `wake` was set."""
    timeout = poll if due is None else min(poll, max(0.0, due - now))
    timeout = max(floor, timeout)
    woken = False
    # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation
    # that arrives as the wake-up does, and the worker would then never stop.
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            woken = await wake.wait()
    wake.clear()
    return woken


def next_due(datastore: Any, role: str, *others: float | None) -> float | None:
    """The earliest due time of the datastore's pending work and of `others`."""
    with datastore.read() as tx:
        stored = tx.next_work_due(role)
    times = [t for t in (stored, *others) if t is not None]
    return min(times) if times else None


__all__ = ["COLLECTION", "CREATE_JOBS", "HOLDER", "RETENTION", "WorkEvent", "WorkNotifier",
           "next_due", "sleep_until_work"]
