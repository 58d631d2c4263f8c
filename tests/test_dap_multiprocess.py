"""One Aggregator as several processes on one datastore (dap/server/processes.py,
dap/server/scheduling.py), and SIGKILL of any of them in the middle of the work.

A Leader with two front ends (sharing a port through SO_REUSEPORT) and two drivers, and
a Helper with two front ends, as separate processes (`python -m ppm_reference.dap.server CONFIG
--mode ...`). While a Client uploads, a random front end or driver is SIGKILLed and
restarted, again and again (each of the six at least once, MIN_KILLS in all unless the
machine is too slow to restart them that often). Then:

* every acknowledged report (its upload answered 200; the Client retries the very same
  bytes after a connection error, as a real one would) is counted exactly once: the
  collection's report count and sum are those of the measurements;
* nothing is released below `min_batch_size`: a batch with fewer reports is refused
  (`invalidBatchSize`) after `collection_give_up_after`.

Leases are short (`job_lease` 3 s) so that the work of a killed driver resumes quickly.

The datastore is a fixture parameter (`datastore_spec`): SQLite files, or PostgreSQL (each
Aggregator a fresh schema of the session's scratch database, tests/pg_harness.py; the
test holds the PostgreSQL test lock, shared, while it runs).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ppm_reference.dap.collector import CollectionError, Collector
from ppm_reference.dap.common import Duration, Interval, Time
from ppm_reference.dap.hpke import generate_keypair
from ppm_reference.dap.profiles.dap18.client import generate_report
from ppm_reference.dap.profiles.dap18.messages import (
    Query,
    ReportError,
    UploadErrors,
    UploadRequest,
)
from ppm_reference.dap.provision import new_task
from ppm_reference.dap.storage import HpkeKeyRecord, HpkeKeyState, ReportState
from ppm_reference.dap.storage import open_datastore as open_any_datastore
from ppm_reference.vdaf.prio3 import Prio3Sum
from tests.dap_harness import free_port, wait_ready
from tests.pg_harness import BACKENDS, PgDatabase, pg_use

ROOT = Path(__file__).resolve().parent.parent
REPORTS = 160
PER_REQUEST = 4
MIN_BATCH_SIZE = 10
SEED = 14
MIN_KILLS = 10

pytestmark = pytest.mark.skipif(not hasattr(__import__("socket"), "SO_REUSEPORT"),
                                reason="needs SO_REUSEPORT (front ends sharing a port)")


@pytest.fixture(params=BACKENDS)
def datastore_spec(request: pytest.FixtureRequest, tmp_path: Path
                   ) -> Iterator[Callable[[str], str]]:
    """role -> the `datastore` of that Aggregator's configuration: a SQLite file, or a
    PostgreSQL URL (a fresh schema per role, the same one at every call)."""
    if request.param == "postgresql":
        db: PgDatabase = request.getfixturevalue("pg_database")
        urls: dict[str, str] = {}

        def url(role: str) -> str:
            if role not in urls:
                urls[role] = db.new_url(role)
            return urls[role]

        with pg_use():
            yield url
    else:
        yield lambda role: str(tmp_path / f"{role}.sqlite")


def open_datastore(spec: str) -> Any:
    """The datastore a configuration's `datastore` names (only through the Transaction
    interface below, so that any backend serves)."""
    return open_any_datastore(spec, sqlite_synchronous="NORMAL", key_from_env=False)


class Proc:
    """One process of an Aggregator, restartable; its log appended to across restarts."""

    def __init__(self, name: str, config: Path, mode: str, log: Path) -> None:
        self.name, self.config, self.mode, self.log = name, config, mode, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self.starts = 0
        self.log_offset = 0

    def start(self) -> None:
        args = [sys.executable, "-m", "ppm_reference.dap.server", str(self.config), "--mode", self.mode]
        if self.mode == "frontend":
            args.append("--reuse-port")
        env = {k: v for k, v in os.environ.items() if k != "PPM_DATASTORE_KEY"}
        with open(self.log, "ab") as log:
            self.log_offset = log.tell()
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT)
        self.starts += 1

    def ready(self) -> bool:
        """Whether it is up: alive, and its log says so since its latest start."""
        said = b"listening on" if self.mode == "frontend" else b"driver (background work"
        if not self.alive():
            return False
        with open(self.log, "rb") as log:
            log.seek(self.log_offset)
            return said in log.read()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.kills += 1

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def write_config(path: Path, role: str, port: int, datastore: str) -> None:
    path.write_text(json.dumps({
        "role": role, "listen_port": port, "datastore": datastore,
        "sqlite_synchronous": "NORMAL", "worker_interval": 0.02, "straggler_age": 0.0,
        "max_job_size": 10, "job_lease": 3.0, "http_timeout": 2.0,
        "work_poll_interval": 0.2, "collection_give_up_after": 3.0, "retry_after": 1,
        "worker_threads": 2}))


def provision(datastore: str, record: Any, key: Any) -> None:
    ds = open_datastore(datastore)
    try:
        with ds.transaction() as tx:
            tx.put_task(record)
            tx.put_hpke_key(HpkeKeyRecord(key.config.id, key.config.encode(), key.private_key,
                                          HpkeKeyState.ACTIVE, time.time()))
    finally:
        ds.close()


async def upload_all(url: str, content_type: str, bodies: list[bytes]) -> int:
    """POST every body until it is acknowledged (200), retrying the same bytes after a
    connection error or a 5xx; returns the attempts that failed. A first attempt has
    every report accepted; a retry may find some or all of them stored by an attempt
    whose answer was lost (the front end killed after its commit): those, and only
    those, are answered report_replayed (DAP-18 Section 4.4.2.2)."""
    failures = 0
    sem = asyncio.Semaphore(3)
    timeout = aiohttp.ClientTimeout(total=10)

    async def post(session: aiohttp.ClientSession, body: bytes) -> None:
        nonlocal failures
        ids = {bytes(r.report_metadata.report_id) for r in UploadRequest.decode(body).reports}
        retried = False
        async with sem:
            while True:
                try:
                    async with session.post(url, data=body,
                                            headers={"Content-Type": content_type}) as resp:
                        content = await resp.read()
                        if resp.status == 200:
                            refused = UploadErrors.decode(content).status
                            assert retried or not refused, \
                                f"reports refused: {content[:200]!r}"
                            assert all(r.error == ReportError.REPORT_REPLAYED
                                       and bytes(r.id) in ids for r in refused), refused
                            return
                        assert resp.status >= 500, f"upload refused: {resp.status} {content!r}"
                except (aiohttp.ClientError, TimeoutError):
                    pass
                failures += 1
                retried = True
                await asyncio.sleep(0.1)

    # A new connection per request: a killed front end's connections do not linger.
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        for i in range(0, len(bodies), 8):  # paced: the killing happens during the upload
            await asyncio.gather(*(post(session, b) for b in bodies[i:i + 8]))
            await asyncio.sleep(0.6)
    return failures


async def kill_repeatedly(procs: list[Proc], stop: asyncio.Event, rng: random.Random) -> None:
    """SIGKILL a process that is up, restart it; every process first (in a random
    order), then random ones, until `stop` is set. A process is killed only while the
    other one of its kind (the Aggregator's other front end or driver) is up: on a
    loaded machine a restart takes seconds, and killing faster than processes come up
    would only stall the test."""
    order = rng.sample(procs, len(procs))
    give_up = time.monotonic() + 25  # on a loaded machine, fewer than MIN_KILLS will do

    def eligible(p: Proc) -> bool:
        return p.ready() and all(q.ready() for q in procs
                                 if q.config == p.config and q.mode == p.mode)

    def more() -> bool:
        return sum(p.kills for p in procs) < MIN_KILLS and time.monotonic() < give_up

    while not stop.is_set() or order or more():
        await asyncio.sleep(rng.uniform(0.3, 0.8))
        candidates = [p for p in (order[-1:] if order else procs) if eligible(p)]
        if not candidates:
            continue
        victim = rng.choice(candidates)
        if order:
            order.pop()
        victim.kill()
        await asyncio.sleep(rng.uniform(0.0, 0.3))
        victim.start()


def counts(datastore: str, task_id: bytes) -> dict[str, int]:
    """The task's uploaded reports by state."""
    ds = open_datastore(datastore)
    try:
        with ds.transaction() as tx:
            return {state.value: tx.count_reports(task_id, (state,)) for state in ReportState}
    finally:
        ds.close()


@pytest.fixture
def cluster(tmp_path: Path, datastore_spec: Callable[[str], str]) -> Iterator[dict[str, Any]]:
    ports = {"leader": free_port(), "helper": free_port()}
    vdaf = Prio3Sum(2, 100)
    pt = new_task(vdaf, f"http://127.0.0.1:{ports['leader']}/",
                  f"http://127.0.0.1:{ports['helper']}/", min_batch_size=MIN_BATCH_SIZE,
                  time_precision=60)
    keys = {"leader": generate_keypair(1), "helper": generate_keypair(2)}
    procs: dict[str, list[Proc]] = {}
    for role in ("helper", "leader"):
        config = tmp_path / f"{role}.json"
        write_config(config, role, ports[role], datastore_spec(role))
        provision(datastore_spec(role), pt.record(role), keys[role])
        modes = ["frontend", "frontend"] + (["driver", "driver"] if role == "leader" else [])
        procs[role] = [Proc(f"{role} {mode} {i}", config, mode,
                            tmp_path / f"{role}-{mode}-{i}.log")
                       for i, mode in enumerate(modes)]
    everyone = procs["helper"] + procs["leader"]
    try:
        for p in everyone:
            p.start()
        for role in ("helper", "leader"):
            for p in procs[role]:
                if p.mode == "frontend":
                    wait_ready(p.proc, ports[role], timeout=60, log=p.log)
        yield {"pt": pt, "keys": keys, "vdaf": vdaf, "procs": everyone, "ports": ports,
               "datastore": datastore_spec("leader"), "tmp_path": tmp_path}
    finally:
        for p in everyone:
            p.stop()


def logs_tail(tmp_path: Path) -> str:
    return "\n".join(f"== {log.name}\n{log.read_text(errors='replace')[-1500:]}"
                     for log in sorted(tmp_path.glob("*.log")))


@pytest.mark.timeout(180)
def test_sigkill_any_process_counts_every_acknowledged_report_once(
        cluster: dict[str, Any]) -> None:
    pt, keys, vdaf = cluster["pt"], cluster["keys"], cluster["vdaf"]
    procs: list[Proc] = cluster["procs"]
    rng = random.Random(SEED)
    now = int(time.time()) // pt.task.time_precision
    measurements = [rng.randrange(101) for _ in range(REPORTS)]
    reports = [generate_report(pt.task, m, time=now, leader_hpke_config=keys["leader"].config,
                               helper_hpke_config=keys["helper"].config, vdaf=vdaf)
               for m in measurements]
    # A batch one report short of min_batch_size, in an interval of its own.
    short = [generate_report(pt.task, 1, time=now - 10,
                             leader_hpke_config=keys["leader"].config,
                             helper_hpke_config=keys["helper"].config, vdaf=vdaf)
             for _ in range(MIN_BATCH_SIZE - 1)]
    bodies = [UploadRequest(tuple(reports[i:i + PER_REQUEST])).encode()
              for i in range(0, REPORTS, PER_REQUEST)]
    bodies.append(UploadRequest(tuple(short)).encode())
    url = pt.task.profile.resource_url("reports", f"http://127.0.0.1:{cluster['ports']['leader']}/",
                                       task_id=pt.task.task_id)
    content_type = pt.task.profile.media_type_for("UploadRequest")

    async def upload_while_killing() -> int:
        stop = asyncio.Event()
        killer = asyncio.create_task(kill_repeatedly(procs, stop, rng))
        try:
            failures = await upload_all(url, content_type, bodies)
            # The aggregation continues under the killing for a moment.
            await asyncio.sleep(2.0)
        finally:
            stop.set()
        await killer
        return failures

    asyncio.run(upload_while_killing())
    assert all(p.kills >= 1 for p in procs), [(p.name, p.kills) for p in procs]
    for p in procs:
        if not p.alive():
            p.start()
    deadline = time.monotonic() + 60
    while not all(p.ready() for p in procs):
        assert all(p.alive() for p in procs), logs_tail(cluster["tmp_path"])
        assert time.monotonic() < deadline, logs_tail(cluster["tmp_path"])
        time.sleep(0.1)

    # Every report is aggregated (nothing failed: a killed process's work resumed).
    deadline = time.monotonic() + 60
    total = REPORTS + len(short)
    while True:
        state = counts(cluster["datastore"], bytes(pt.task.task_id))
        if state.get("aggregated", 0) == total:
            break
        assert not state.get("failed"), f"{state}\n{logs_tail(cluster['tmp_path'])}"
        assert time.monotonic() < deadline, f"{state}\n{logs_tail(cluster['tmp_path'])}"
        time.sleep(0.2)

    async def collect(query: Any) -> Any:
        async with Collector(pt.task, pt.collector_keypair, pt.collector_auth_token) as c:
            return await c.collect(query, timeout=60, max_poll_interval=0.2)

    result = asyncio.run(collect(Query.time_interval(Interval(Time(now - 1), Duration(3)))))
    assert result.report_count == REPORTS
    assert result.aggregate_result == sum(measurements)

    with pytest.raises(CollectionError) as refused:
        asyncio.run(collect(Query.time_interval(Interval(Time(now - 11), Duration(3)))))
    assert "invalidBatchSize" in refused.value.problem_type


def children(pid: int) -> set[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return {int(p) for p in path.read_text().split()} if path.exists() else set()


@pytest.mark.timeout(120)
def test_supervisor_runs_restarts_and_stops_its_processes(tmp_path: Path) -> None:
    """`python -m ppm_reference.dap.server CONFIG --frontends 2 --drivers 1`: three children, the
    front ends serving one port; a SIGKILLed child is replaced; SIGTERM stops all."""
    if not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists():
        pytest.skip("needs /proc/PID/task/PID/children (Linux) to see the children")
    port, health = free_port(), free_port()
    config = tmp_path / "leader.json"
    write_config(config, "leader", port, str(tmp_path / "leader.sqlite"))
    config.write_text(json.dumps({**json.loads(config.read_text()), "health_port": health}))
    log = tmp_path / "supervisor.log"
    env = {k: v for k, v in os.environ.items() if k != "PPM_DATASTORE_KEY"}
    with open(log, "wb") as out:
        sup = subprocess.Popen([sys.executable, "-m", "ppm_reference.dap.server", str(config),
                                "--frontends", "2", "--drivers", "1"], cwd=ROOT, env=env,
                               stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_ready(sup, port, timeout=60, log=log)
        deadline = time.monotonic() + 60
        while len(children(sup.pid)) < 3 or log.read_text().count("driver (background") < 1:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        first = children(sup.pid)
        assert len(first) == 3
        # The driver's health check (it listens just after the driver logs its start).
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz",
                                            timeout=10) as r:
                    assert r.status == 200
                    assert json.loads(r.read()) == {"role": "leader", "mode": "driver",
                                                    "worker": "running"}
                    break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            except urllib.error.URLError as exc:
                assert isinstance(exc.reason, ConnectionRefusedError), exc
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        while True:
            now = children(sup.pid)
            if len(now) == 3 and victim not in now:
                break
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert "restarting" in log.read_text()
        wait_ready(sup, port, timeout=60, log=log)
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(30) == 0
        for pid in now:
            assert not running(pid)
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait()


def test_process_options_are_checked(tmp_path: Path) -> None:
    """A bad process option, in the file or on the command line, is a one-line error
    before anything is opened."""
    from ppm_reference.dap.cli.errors import CliError
    from ppm_reference.dap.cli.serve import serve
    from ppm_reference.dap.server.config import ConfigError, load_config_file

    config = tmp_path / "leader.json"
    write_config(config, "leader", free_port(), str(tmp_path / "leader.sqlite"))
    data = json.loads(config.read_text())
    config.write_text(json.dumps({**data, "mode": "everything"}))
    with pytest.raises(ConfigError, match="mode must be one of all, frontend, driver"):
        load_config_file(config)
    config.write_text(json.dumps({**data, "work_poll_interval": 0}))
    with pytest.raises(ConfigError, match="work_poll_interval must be a positive number"):
        load_config_file(config)
    config.write_text(json.dumps(data))
    with pytest.raises(CliError, match="frontends must be a non-negative integer"):
        serve(config, "leader", {"frontends": -1})
    assert not (tmp_path / "leader.sqlite").exists()  # nothing was opened


@pytest.mark.timeout(120)
def test_supervisor_killed_takes_its_processes_along(tmp_path: Path) -> None:
    """SIGKILL of the supervisor: its children get SIGTERM (PR_SET_PDEATHSIG), so no
    orphaned front end keeps the port."""
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    port = free_port()
    config = tmp_path / "leader.json"
    write_config(config, "leader", port, str(tmp_path / "leader.sqlite"))
    log = tmp_path / "supervisor.log"
    env = {k: v for k, v in os.environ.items() if k != "PPM_DATASTORE_KEY"}
    with open(log, "wb") as out:
        sup = subprocess.Popen([sys.executable, "-m", "ppm_reference.dap.server", str(config),
                                "--frontends", "1"], cwd=ROOT, env=env,
                               stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_ready(sup, port, timeout=60, log=log)
        (child,) = children(sup.pid)
    finally:
        sup.kill()
        sup.wait()
    deadline = time.monotonic() + 30
    while running(child):
        assert time.monotonic() < deadline, f"child {child} outlived its supervisor"
        time.sleep(0.1)


def running(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text(errors="replace")
    except OSError:
        return False


def test_two_creators_never_put_a_report_in_two_jobs(tmp_path: Path) -> None:
    """Two Leader workers (two datastore connections, two lease holders: what two
    driver processes are) making aggregation jobs for one task at once, in their worker
    threads: every report ends in exactly one job."""
    from ppm_reference.dap.common import Role
    from ppm_reference.dap.server import leader as leader_server
    from ppm_reference.dap.server.app import build_app
    from ppm_reference.dap.server.common import STATE_KEY
    from ppm_reference.dap.server.config import AggregatorConfig

    path = str(tmp_path / "leader.sqlite")
    vdaf = Prio3Sum(2, 100)
    pt = new_task(vdaf, "http://127.0.0.1:9/", "http://127.0.0.1:9/",
                  min_batch_size=MIN_BATCH_SIZE, time_precision=60)
    keys = {"leader": generate_keypair(1), "helper": generate_keypair(2)}
    provision(path, pt.record("leader"), keys["leader"])
    config = AggregatorConfig(role="leader", datastore=path, sqlite_synchronous="OFF",
                              max_job_size=7, straggler_age=0.0, worker_threads=2)
    now = int(time.time()) // pt.task.time_precision
    rng = random.Random(SEED)
    reports = [generate_report(pt.task, rng.randrange(101), time=now,
                               leader_hpke_config=keys["leader"].config,
                               helper_hpke_config=keys["helper"].config, vdaf=vdaf)
               for _ in range(120)]

    async def run() -> None:
        apps = [build_app(config, background=False) for _ in range(2)]
        workers = []
        for i, app in enumerate(apps):
            st = app[STATE_KEY]
            worker = leader_server.LeaderWorker(app, st)
            worker.holder = bytes([i]) * 16
            workers.append(worker)
        st0 = apps[0][STATE_KEY]
        task = st0.task(pt.task.task_id, Role.LEADER)
        errors = leader_server.store_upload(st0, task, st0.keyring(),
                                            UploadRequest(tuple(reports)).encode())
        assert errors == []
        for _ in range(200):
            # Job creation only: nothing is stepped (in_flight stays empty).
            await asyncio.gather(*(w.create_jobs() for w in workers))
            with st0.datastore.transaction() as tx:
                if tx.count_reports(pt.task.task_id, (ReportState.NEW,)) == 0:
                    break
            for w in workers:
                w.create_not_before.clear()
        for app in apps:
            app[STATE_KEY].close()
            app[STATE_KEY].datastore.close()

    asyncio.run(run())
    ds = open_datastore(path)
    try:
        with ds.transaction() as tx:
            assert tx.count_reports(pt.task.task_id, (ReportState.IN_JOB,)) == len(reports)
            jobs = {bytes(r.aggregation_job_id or b"") for r in tx.get_client_reports(
                pt.task.task_id, [bytes(r.report_metadata.report_id) for r in reports])}
            in_jobs = [bytes(ra.report_id) for job_id in jobs
                       for ra in tx.get_report_aggregations(pt.task.task_id, job_id)]
    finally:
        ds.close()
    assert sorted(in_jobs) == sorted(bytes(r.report_metadata.report_id) for r in reports)
