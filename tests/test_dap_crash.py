"""Crash recovery with real processes: the Leader and the Helper run as separate
`python -m ppm_reference.dap.server CONFIG` processes on 127.0.0.1, each on its own SQLite file
(synchronous=FULL). Reports are uploaded, one Aggregator is killed with SIGKILL while
aggregation jobs are in flight, restarted on the same datastore and port, and the
collected result must count every uploaded report exactly once.

How the kills are placed (the Leader's datastore is read through a separate read-only
connection, so the test never writes to a running Aggregator's file):

* `test_leader_sigkill_mid_aggregation` (time-interval, and leader-selected with one
  batch that takes every report): two crashes of the Leader. The first is a plain
  SIGKILL once some but not all reports are aggregated. For the second the Leader is
  frozen with SIGSTOP until the Helper has answered a request that the Leader has not
  processed yet (the Helper has committed the job's output shares, the Leader has not),
  then killed: the restarted Leader must resend the byte-identical request, get the
  stored answer, and count those reports once.
* `test_helper_sigkill_mid_aggregation`: the Helper (asynchronous mode: it stores jobs
  and answers later) is killed while the Leader is stepping and polling jobs; the
  Leader retries until the restarted Helper answers.

Each test runs on SQLite and on PostgreSQL (`backend`; a schema of its own per
Aggregator in the session's scratch database, see tests.pg_harness; skipped with the
reason where no PostgreSQL server answers); on PostgreSQL one protocol and one batch
mode, to keep the suite short.

Small aggregation jobs (`max_job_size`) make many jobs, so a kill lands between them;
`job_lease` is short so that jobs held by a killed process resume within seconds.
Every process is killed at the end of the test whatever happens (fixture finalizer).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ppm_reference import dap  # noqa: F401
from ppm_reference.dap.client import Client
from ppm_reference.dap.collector import Collector
from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.provision import ProvisionedTask, new_task
from ppm_reference.dap.storage import open_datastore
from tests.dap_harness import PROTOS, Proto, free_port
from tests.pg_harness import BACKENDS, raw_connect

PROJECT_ROOT = Path(__file__).resolve().parent.parent
_FALLBACK = ("import sys; from ppm_reference.dap.server.app import run; "
             "from ppm_reference.dap.server.config import AggregatorConfig; "
             "run(AggregatorConfig.load(sys.argv[1]))")


def server_command(config_path: Path) -> list[str]:
    """`python -m ppm_reference.dap.server CONFIG`, or the equivalent one-liner if the package has no
    `__main__` yet."""
    if (Path(dap.server.__file__).parent / "__main__.py").exists():
        return [sys.executable, "-m", "ppm_reference.dap.server", str(config_path)]
    return [sys.executable, "-c", _FALLBACK, str(config_path)]


def _die_with_parent() -> None:
    """Linux: the child gets SIGKILL if the test process dies (no orphaned servers)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class AggregatorProcess:
    """One Aggregator process, restartable on the same configuration (port, datastore)."""

    role: str
    config_path: Path
    datastore: str                  # a SQLite path or a PostgreSQL URL
    port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 30.0) -> None:
        assert not self.alive(), f"{self.role} is already running"
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== start {self.starts} ===\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                server_command(self.config_path), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=PROJECT_ROOT, preexec_fn=_die_with_parent)
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.role} exited with {self.proc.returncode}:\n"
                                     f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}hpke_config", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.05)
        raise AssertionError(f"{self.role} did not come up in {timeout} s:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        assert self.proc is not None and self.alive()
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL (also ends a stopped process) and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class Cluster:
    tmp_path: Path
    spec: Callable[[str], str]
    processes: list[AggregatorProcess] = field(default_factory=list)

    def aggregator(self, role: str, **overrides: Any) -> AggregatorProcess:
        port = free_port()
        datastore = self.spec(role)
        config = {"role": role, "datastore": datastore, "listen_host": "127.0.0.1",
                  "listen_port": port, "sqlite_synchronous": "FULL", "worker_interval": 0.02,
                  "straggler_age": 0.0, "min_job_size": 1, "job_lease": 3.0,
                  "http_timeout": 2.0, **overrides}
        config_path = self.tmp_path / f"{role}.json"
        config_path.write_text(json.dumps(config, indent=2))
        agg = AggregatorProcess(role, config_path, datastore, port,
                                self.tmp_path / f"{role}.log")
        self.processes.append(agg)
        return agg

    def kill_all(self) -> None:
        for agg in self.processes:
            agg.kill()


@pytest.fixture
def cluster(tmp_path: Path, datastore_spec: Callable[[str], str]) -> Iterator[Cluster]:
    c = Cluster(tmp_path, datastore_spec)
    try:
        yield c
    finally:
        c.kill_all()


# -- reading an Aggregator's datastore without writing to it -------------------------------


def read_only(spec: str) -> Any:
    return raw_connect(spec, read_only=True)


def report_states(path: str) -> dict[str, int]:
    conn = read_only(path)
    try:
        return dict(conn.execute("SELECT state, COUNT(*) FROM client_reports GROUP BY state"))
    finally:
        conn.close()


def count_rows(path: str, sql: str) -> int:
    conn = read_only(path)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def helper_answered_unprocessed(leader_db: str, helper_db: str) -> int:
    """Jobs that the Helper has answered (its output shares are committed) but the Leader
    has not processed: the Leader's active jobs whose stored request the Helper knows."""
    import hashlib

    conn = read_only(leader_db)
    try:
        hashes = {hashlib.sha256(r[0]).digest() for r in conn.execute(
            "SELECT request FROM aggregation_jobs WHERE role='leader' AND state='active' "
            "AND step=0")}
    finally:
        conn.close()
    conn = read_only(helper_db)
    try:
        answered = {bytes(r[0]) for r in conn.execute(
            "SELECT request_hash FROM aggregation_jobs WHERE role='helper' "
            "AND response IS NOT NULL")}
    finally:
        conn.close()
    return len(hashes & answered)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str,
               interval: float = 0.005) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# -- the scenario --------------------------------------------------------------------------


def provision(pt: ProvisionedTask, leader: AggregatorProcess,
              helper: AggregatorProcess) -> None:
    """Write the task into each Aggregator's datastore before it starts."""
    for agg, record in ((leader, pt.leader_record), (helper, pt.helper_record)):
        ds = open_datastore(agg.datastore)
        try:
            with ds.transaction() as tx:
                tx.put_task(record)
        finally:
            ds.close()


async def upload(pt: ProvisionedTask, measurements: list[Any], per_request: int) -> None:
    async with Client(pt.task) as client:
        reports = await client.prepare(measurements)
        for i in range(0, len(reports), per_request):
            result = await client.upload_reports(reports[i : i + per_request])
            assert result.accepted == len(reports[i : i + per_request]), result.rejected


async def collect(pt: ProvisionedTask, query: Any) -> Any:
    async with Collector(pt.task, pt.collector_keypair, pt.collector_auth_token) as collector:
        return await collector.collect(query, timeout=40, max_poll_interval=0.2)


def query_around_now(pt: ProvisionedTask) -> Any:
    now = int(time.time()) // pt.task.time_precision
    return Proto(pt.task.profile.name).interval_query(pt, now - 10, 20)


def diagnostics(*aggs: AggregatorProcess) -> str:
    return "\n".join(f"--- {a.role} log ---\n{a.log_tail()}" for a in aggs)


def check_exactly_once(pt: ProvisionedTask, leader: AggregatorProcess,
                       helper: AggregatorProcess, measurements: list[Any], expected: Any,
                       query: Any = None) -> None:
    n = len(measurements)
    wait_until(lambda: report_states(leader.datastore).get("aggregated", 0) == n
               or report_states(leader.datastore).get("failed", 0) > 0, 40,
               "every report to be aggregated")
    states = report_states(leader.datastore)
    assert states == {"aggregated": n}, f"{states}\n{diagnostics(leader, helper)}"
    collection = asyncio.run(collect(pt, query or query_around_now(pt)))
    assert collection.report_count == n
    assert collection.aggregate_result == expected
    # Each report is recorded once on each side, and the Helper's buckets count each once.
    for agg in (leader, helper):
        assert count_rows(agg.datastore, "SELECT COUNT(*) FROM aggregated_reports") == n
        assert count_rows(agg.datastore, "SELECT SUM(report_count) FROM batch_buckets") == n


def _cases(*axes: list[Any]) -> list[Any]:
    """Every combination on SQLite; on PostgreSQL the first protocol and the first
    value of the other axes only (each case takes tens of seconds on 2 cores)."""
    import itertools

    out = []
    for backend in BACKENDS:
        for combo in itertools.product(*axes):
            if backend == "postgresql" and any(c is not axis[0]
                                               for c, axis in zip(combo, axes, strict=True)):
                continue
            out.append(pytest.param(backend, *combo,
                                    id="-".join([backend, *(getattr(c, "name", None)
                                                            or str(c) for c in combo)])))
    return out


@pytest.mark.parametrize(("backend", "proto", "mode"),
                         _cases(PROTOS, [BatchMode.TIME_INTERVAL, BatchMode.LEADER_SELECTED]))
def test_leader_sigkill_mid_aggregation(cluster: Cluster, backend: str, mode: BatchMode,
                                        proto: Proto) -> None:
    """A restarted Leader resends its stored requests byte for byte (DAP-09: the same
    PUT to the same aggregation job ID, which the Helper answers from the stored job)."""
    rng = random.Random(1)
    n = 600
    helper = cluster.aggregator("helper")
    leader = cluster.aggregator("leader", max_job_size=8, job_concurrency=4)
    vdaf = proto.count()
    # Leader-selected: one batch that takes every report and is released only when full.
    pt = new_task(vdaf, leader.url, helper.url, batch_mode=mode,
                  min_batch_size=100 if mode == BatchMode.TIME_INTERVAL else n,
                  max_batch_size=None if mode == BatchMode.TIME_INTERVAL else n,
                  profile=proto.profile)
    provision(pt, leader, helper)
    helper.start()
    leader.start()

    measurements = [rng.randrange(2) for _ in range(n)]
    asyncio.run(upload(pt, measurements, per_request=n))

    # Crash 1: plain SIGKILL once aggregation is under way.
    wait_until(lambda: report_states(leader.datastore).get("aggregated", 0) >= n // 5, 30,
               "aggregation to start")
    leader.kill()
    done = report_states(leader.datastore).get("aggregated", 0)
    assert done < n, "aggregation finished before the kill: make the test slower"
    leader.start()

    # Crash 2: freeze the Leader until the Helper is ahead of it, then SIGKILL.
    wait_until(lambda: report_states(leader.datastore).get("aggregated", 0) > done, 30,
               "aggregation to resume after the restart")
    ahead = 0
    for _ in range(200):
        leader.signal(signal.SIGSTOP)
        time.sleep(0.2)  # let the Helper answer what is in flight
        ahead = helper_answered_unprocessed(leader.datastore, helper.datastore)
        if ahead:
            break
        leader.signal(signal.SIGCONT)
        time.sleep(rng.uniform(0.0, 0.02))
    assert ahead, "never caught the Helper ahead of the Leader"
    leader.kill()
    at_kill = report_states(leader.datastore)
    assert at_kill.get("aggregated", 0) < n, at_kill
    leader.start()

    query = None if mode == BatchMode.TIME_INTERVAL else proto.current_batch_query()
    check_exactly_once(pt, leader, helper, measurements, sum(measurements), query)


@pytest.mark.parametrize(("backend", "proto"), _cases(PROTOS))
def test_helper_sigkill_mid_aggregation(cluster: Cluster, backend: str, proto: Proto) -> None:
    rng = random.Random(2)
    helper = cluster.aggregator("helper", async_helper=True)  # (DAP-09: synchronous)
    leader = cluster.aggregator("leader", max_job_size=10, job_concurrency=4)
    vdaf = proto.histogram(10, 4)
    pt = new_task(vdaf, leader.url, helper.url, min_batch_size=100, profile=proto.profile)
    provision(pt, leader, helper)
    helper.start()
    leader.start()

    n = 300
    measurements = [rng.randrange(10) for _ in range(n)]
    asyncio.run(upload(pt, measurements, per_request=100))

    wait_until(lambda: report_states(leader.datastore).get("aggregated", 0) >= n // 4, 30,
               "aggregation to start")
    helper.kill()
    at_kill = report_states(leader.datastore)
    assert at_kill.get("aggregated", 0) < n, "aggregation finished before the kill"
    time.sleep(0.5)  # the Leader's requests fail meanwhile; it backs off and retries
    helper.start()

    expected = [measurements.count(i) for i in range(10)]
    check_exactly_once(pt, leader, helper, measurements, expected)
