"""Group commit of small uploads (dap/server/upload.py): concurrent uploads share a
transaction, each is answered only after that transaction committed, and each has the
outcome it would have had alone."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ppm_reference.dap.common import ReportError
from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.core.tasks import AggregatorTask, Keyring
from ppm_reference.dap.hpke import generate_keypair
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.profiles.dap18.client import generate_report
from ppm_reference.dap.profiles.dap18.messages import UploadRequest
from ppm_reference.dap.provision import new_task
from ppm_reference.dap.server.upload import UploadGroups
from ppm_reference.dap.storage import HpkeKeyRecord, HpkeKeyState
from ppm_reference.dap.storage.sqlite import SqliteDatastore
from ppm_reference.vdaf.prio3 import Prio3Count


class CountingDatastore:
    """A SqliteDatastore that counts committed transactions, can fail the next ones, and
    can hold a commit until released."""

    def __init__(self, path: Path) -> None:
        self.inner = SqliteDatastore(path)
        self.commits = 0
        self.fail_next = 0
        self.hold: threading.Event | None = None
        self.holding = threading.Event()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self.inner.transaction() as tx:
            yield tx
            if self.fail_next:
                self.fail_next -= 1
                raise RuntimeError("injected failure before commit")
            if self.hold is not None:
                self.holding.set()
                self.hold.wait(10)
        self.commits += 1

    def read(self) -> Any:
        return self.inner.read()

    def upload_transaction(self) -> Any:
        return self.transaction()   # (the uploads' transactions are those counted here)

    def stored(self) -> int:
        with self.inner.transaction() as tx:
            return int(tx.c.execute("SELECT COUNT(*) FROM client_reports").fetchone()[0])


class State:
    def __init__(self, ds: CountingDatastore) -> None:
        self.datastore = ds
        self.config = SimpleNamespace(clock_skew=60)

    def clock(self) -> float:
        return time.time()

    async def offload(self, func: Any, *args: Any) -> Any:
        return await asyncio.to_thread(func, *args)


@pytest.fixture
def setup(tmp_path: Path) -> tuple[State, AggregatorTask, Keyring, list[bytes]]:
    vdaf = Prio3Count(2)
    pt = new_task(vdaf, "https://l.example/", "https://h.example/", time_precision=3600)
    keys = {"leader": generate_keypair(1), "helper": generate_keypair(2)}
    ds = CountingDatastore(tmp_path / "leader.sqlite")
    record = HpkeKeyRecord(1, keys["leader"].config.encode(), keys["leader"].private_key,
                           HpkeKeyState.ACTIVE, time.time())
    with ds.inner.transaction() as tx:
        tx.put_task(pt.record("leader"))
        tx.put_hpke_key(record)
    task = AggregatorTask.from_record(pt.record("leader"), get_profile)
    now = int(time.time()) // 3600
    bodies = [UploadRequest((generate_report(
        pt.task, i % 2, time=now, leader_hpke_config=keys["leader"].config,
        helper_hpke_config=keys["helper"].config, vdaf=vdaf),)).encode() for i in range(12)]
    return State(ds), task, Keyring([record]), bodies


async def _upload_all(groups: UploadGroups, task: Any, keyring: Keyring,
                      bodies: list[bytes]) -> list[Any]:
    return await asyncio.gather(*(groups.store(task, keyring, b) for b in bodies),
                                return_exceptions=True)


def test_concurrent_uploads_share_commits(setup: Any) -> None:
    st, task, keyring, bodies = setup
    results = asyncio.run(_upload_all(UploadGroups(st), task, keyring, bodies))
    assert results == [[] for _ in bodies]
    assert st.datastore.stored() == len(bodies)
    # Submitted together: far fewer commits than uploads (one, with asyncio's FIFO order).
    assert 1 <= st.datastore.commits < len(bodies)


def test_outcomes_are_each_uploads_own(setup: Any) -> None:
    st, task, keyring, bodies = setup
    replay_id = UploadRequest.decode(bodies[0]).reports[0].report_metadata.report_id
    batch = [bodies[0], b"\x00garbage", bodies[1], bodies[0]]
    results = asyncio.run(_upload_all(UploadGroups(st), task, keyring, batch))
    assert results[0] == [] and results[2] == []
    assert isinstance(results[1], DapProblem) and results[1].token == "invalidMessage"
    # The same report again, in the same group: replayed, as one transaction later.
    assert results[3] == [(bytes(replay_id), ReportError.REPORT_REPLAYED)]
    assert st.datastore.stored() == 2


def test_failed_group_transaction_falls_back_to_one_per_upload(setup: Any) -> None:
    st, task, keyring, bodies = setup
    st.datastore.fail_next = 1
    results = asyncio.run(_upload_all(UploadGroups(st), task, keyring, bodies[:5]))
    assert results == [[] for _ in range(5)]
    assert st.datastore.stored() == 5


def test_answered_only_after_commit(setup: Any) -> None:
    st, task, keyring, bodies = setup
    st.datastore.hold = threading.Event()

    async def run() -> None:
        groups = UploadGroups(st)
        pending = asyncio.ensure_future(_upload_all(groups, task, keyring, bodies[:3]))
        await asyncio.to_thread(st.datastore.holding.wait, 10)
        await asyncio.sleep(0.05)
        assert not pending.done()  # stored, not yet committed: no answer
        assert st.datastore.commits == 0
        st.datastore.hold.set()  # type: ignore[union-attr]
        assert await pending == [[], [], []]
        assert st.datastore.commits >= 1

    asyncio.run(run())


def test_stored_callback_once_per_transaction(setup: Any) -> None:
    """The uploads of one group transaction call their `stored` callback (the Leader
    wakes its background worker) once, with their tasks' IDs; an upload refused on its
    own (a body that does not decode) does not call it, nor does a group of such uploads
    only."""
    st, task, keyring, bodies = setup
    calls: list[tuple[str, set[bytes]]] = []

    class Worker:
        def wake(self, task_ids: set[bytes], name: str = "a") -> None:
            calls.append((name, task_ids))

    worker = Worker()

    async def run() -> list[Any]:
        groups = UploadGroups(st)
        # A bound method, as the Leader passes: a new object per upload, equal ones.
        first = await asyncio.gather(*(groups.store(task, keyring, b, worker.wake)
                                       for b in [b"\x00garbage", *bodies[:4]]),
                                     return_exceptions=True)
        bad = await asyncio.gather(groups.store(task, keyring, b"\x01",
                                                lambda t: worker.wake(t, "b")),
                                   return_exceptions=True)
        return [*first, *bad]

    results = asyncio.run(run())
    assert isinstance(results[0], DapProblem) and isinstance(results[5], DapProblem)
    assert results[1:5] == [[], [], [], []]
    assert st.datastore.commits == 1
    # With the IDs of the tasks the group stored reports of.
    assert calls == [("a", {bytes(task.task_id)})]
