"""DAP-18 end to end: reports per second through upload, aggregation and end to end, and
the CPU the Aggregators spend per report beside the floor (issue 14).

The Leader and the Helper run as processes (`python -m ppm_reference.dap.server CONFIG`)
on 127.0.0.1, on this machine (they share its cores with this script, which plays the
Clients and the Collector). The rows are every combination of:

* ``--datastore``: ``sqlite`` (a file per Aggregator) and ``postgresql`` (a fresh
  database per Aggregator and row on ``--pg-url``, configured as ``"datastore":
  "postgresql://..."``); a server that refuses the URL gives a note row;
* ``--drivers``: 1 (the one-process default) or N (``"frontends": 1, "drivers": N`` in
  the Leader's configuration: one HTTP front end and N driver processes); a server that
  refuses those keys gives a note row;
* ``--uploads``: ``bulk`` (``--batch`` reports per request, one request at a time) and
  ``single`` (one report per request, ``--single-concurrency`` in flight);
* ``--tasks``: the reports spread round-robin over 1, 100 or 1,000 tasks;
* ``--vdaf``: Prio3Count and Prio3Histogram(length 100, chunk length 10).

For each row: fresh datastores get the tasks and both Aggregators' HPKE keys, the servers
start, the pre-encoded uploads are POSTed (report generation is not measured), and the
Leader's datastore is polled until every report is aggregated. Rates: upload = reports /
upload time; aggregation = reports aggregated after the upload ended / time from its end
to the last one (the drain; "-" when fewer than 20 % were left, i.e. aggregation kept pace
with the upload); end to end = reports / time from the upload's start to the last
aggregated. With one task a time-interval collection follows and its count and sum must
be exact; with more, the aggregated count must be exact.

CPU per report = (Leader + Helper CPU, every process of each, from the upload's start to
the last aggregated) / reports. Each row's line also gives the Leader's CPU during the
upload per report: with ``--phases separate`` (a front end alone) that is what an upload
costs it. The floor, measured in this process just before and just after each row (their
mean; a drift of more than 25 % is noted) on a sample of the same reports: HPKE open of
both input shares (`dap.hpke.open_base`, direct RFC 9180 on `cryptography`) and the VDAF
preparation of both Aggregators
(ping-pong init, Helper init, Leader continued) alone. The ratio is the main figure on a
shared machine: it is much less sensitive to other load than the rates.

``--repeat N`` runs every row N times, in rounds (each round runs every row once, so
SQLite's and PostgreSQL's runs of a round see the machine at about the same speed); the
table shows each row's medians, and the PostgreSQL / SQLite share of each round beside
the share of the medians. These machines' speed changes by up to 2x within minutes, so a
single run's rates, and the shares between two rows, are only indicative.

Targets (issue 14): CPU per report <= 2x the floor; aggregation >= 3,000 reports/s
(Count) and >= 1,500 (Histogram(100)) on 2 cores with SQLite; single-report uploads
>= 2,000 reports/s, durable (synchronous=FULL).

    .venv/bin/python benchmarks/dap_e2e.py --quick          # about a minute
    .venv/bin/python benchmarks/dap_e2e.py                  # the full table (long)
    .venv/bin/python benchmarks/dap_e2e.py --tasks 1 --drivers 1 --repeat 3   # medians
    .venv/bin/python benchmarks/dap_e2e.py --reports 3000 --vdaf count --uploads bulk \
        --tasks 1 --drivers 1 --datastore sqlite --py-spy /tmp/spy   # sample the servers

This is a benchmark, not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from ppm_reference.dap.collector import Collector  # noqa: E402
from ppm_reference.dap.common import Duration, Interval, Role, Time  # noqa: E402
from ppm_reference.dap.hpke import HpkeKeypair, generate_keypair, open_base  # noqa: E402
from ppm_reference.dap.profiles.dap18.client import generate_report, input_share_aad  # noqa: E402
from ppm_reference.dap.profiles.dap18.messages import PlaintextInputShare, Query, UploadRequest  # noqa: E402
from ppm_reference.dap.provision import ProvisionedTask, new_task  # noqa: E402
from ppm_reference.dap.storage import HpkeKeyRecord, HpkeKeyState  # noqa: E402
from ppm_reference.dap.storage.sqlite import SqliteDatastore  # noqa: E402
from ppm_reference.vdaf.ping_pong import (  # noqa: E402
    ping_pong_helper_init,
    ping_pong_leader_continued,
    ping_pong_leader_init,
)
from ppm_reference.vdaf.prio3 import Prio3Count, Prio3Histogram  # noqa: E402

TARGET_UPLOAD = 2000.0
VDAFS: dict[str, tuple[str, Any, float]] = {
    # name: (label, factory, aggregation target in reports/s)
    "count": ("Prio3Count", lambda: Prio3Count(2), 3000.0),
    "histogram": ("Prio3Histogram(100)", lambda: Prio3Histogram(2, 100, 10), 1500.0),
}
CPU_TARGET_RATIO = 2.0
# Tuned for throughput on a 2-core machine.
LEADER_CONFIG = {"max_job_size": 500, "min_job_size": 50, "straggler_age": 0.5,
                 "job_concurrency": 3, "worker_interval": 0.01}
HELPER_CONFIG = {"worker_interval": 0.01}
# How often the Leader's datastore is polled for the reports aggregated while a row runs
# (its end time's resolution).
POLL_INTERVAL = 0.05
PY_SPY_DIR: Path | None = None  # --py-spy DIR: sample both servers with py-spy
FLOOR_SAMPLE = 200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Workload:
    """Tasks, both Aggregators' HPKE keys, and pre-generated, pre-encoded reports."""

    label: str
    target: float
    vdaf: Any
    tasks: list[ProvisionedTask]
    keys: dict[str, HpkeKeypair]
    reports: list[tuple[int, Any]]        # (task index, report)
    expected: Any                         # the one task's aggregate (one task only)
    report_time: int
    ports: dict[str, int]


def make_workload(name: str, n: int, n_tasks: int, seed: int = 1) -> Workload:
    label, factory, target = VDAFS[name]
    vdaf = factory()
    # The endpoints are part of the task configuration, which the reports' encryption
    # binds: every row of this workload runs its servers on these ports.
    ports = {"leader": free_port(), "helper": free_port()}
    tasks = [new_task(vdaf, f"http://127.0.0.1:{ports['leader']}/",
                      f"http://127.0.0.1:{ports['helper']}/", min_batch_size=100,
                      time_precision=3600) for _ in range(n_tasks)]
    keys = {"leader": generate_keypair(1), "helper": generate_keypair(2)}
    rng = random.Random(seed)
    now = int(time.time()) // 3600
    if name == "count":
        measurements: list[Any] = [rng.randrange(2) for _ in range(n)]
        expected: Any = sum(measurements)
    else:
        measurements = [rng.randrange(100) for _ in range(n)]
        expected = [measurements.count(i) for i in range(100)]
    t0 = time.perf_counter()
    reports = [(i % n_tasks, generate_report(
        tasks[i % n_tasks].task, m, time=now, leader_hpke_config=keys["leader"].config,
        helper_hpke_config=keys["helper"].config, vdaf=vdaf))
        for i, m in enumerate(measurements)]
    print(f"  generated {n} {label} reports for {n_tasks} task(s) in "
          f"{time.perf_counter() - t0:.1f} s (not measured)", flush=True)
    return Workload(label, target, vdaf, tasks, keys, reports,
                    expected if n_tasks == 1 else None, now, ports)


def measure_floor(w: Workload, repeat: int = 3) -> float:
    """CPU seconds per report of the irreducible work, both Aggregators: HPKE open of the
    two input shares and the VDAF preparation (Leader init, Helper init, Leader
    continued), on a sample of the workload's reports, in this process: the least of
    `repeat` passes (a floor; one pass varied by up to 50 % on a shared machine)."""
    return min(_floor_pass(w) for _ in range(repeat))


def _floor_pass(w: Workload, sample: list[tuple[int, Any]] | None = None) -> float:
    """CPU seconds per report of one floor pass over `sample` (default: the workload's
    first FLOOR_SAMPLE reports)."""
    sample = w.reports[:FLOOR_SAMPLE] if sample is None else sample
    vdaf = w.vdaf
    t0 = time.process_time()
    for ti, report in sample:
        pt = w.tasks[ti]
        task = pt.task
        md, ps = report.report_metadata, report.public_share
        aad = input_share_aad(task, md, ps).encode()
        shares = []
        for role, ct in ((Role.LEADER, report.leader_encrypted_input_share),
                         (Role.HELPER, report.helper_encrypted_input_share)):
            plain = open_base(w.keys[role.name.lower()], ct,
                              task.profile.input_share_info(role), aad)
            shares.append(PlaintextInputShare.decode(plain).payload)
        ctx = task.vdaf_ctx()
        rid = bytes(md.report_id)
        leader = ping_pong_leader_init(vdaf, pt.vdaf_verify_key, ctx, b"", rid, ps, shares[0])
        helper = ping_pong_helper_init(vdaf, pt.vdaf_verify_key, ctx, b"", rid, ps, shares[1],
                                       leader.outbound)  # type: ignore[union-attr]
        ping_pong_leader_continued(vdaf, ctx, b"", leader,  # type: ignore[arg-type]
                                   helper.outbound)  # type: ignore[union-attr]
    return (time.process_time() - t0) / len(sample)


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and all its live descendants (Linux /proc)."""
    tck = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tck)
    total, frontier = 0.0, [pid]
    while frontier:
        p = frontier.pop()
        if p in stats:
            total += stats[p][1]
        frontier += [c for c, (ppid, _) in stats.items() if ppid == p]
    return total


class Refused(Exception):
    """The server refused its configuration (a note row, not a failure)."""


class Server:
    def __init__(self, role: str, port: int, workdir: Path, datastore: str,
                 synchronous: str, extra: dict[str, Any], name: str | None = None) -> None:
        self.role = role
        self.name = name or role
        self.port = port
        self.datastore = datastore
        self.listens = extra.get("mode") != "driver"
        self.config_path = workdir / f"{self.name}.json"
        self.log_path = workdir / f"{self.name}.log"
        self.config_path.write_text(json.dumps({
            "role": role, "datastore": datastore, "listen_host": "127.0.0.1",
            "listen_port": self.port, "sqlite_synchronous": synchronous, **extra}))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        cmd = [sys.executable]
        if PY_SPY_DIR is not None:
            # PY_SPY_EXTRA: more py-spy options (e.g. --gil: only the thread holding it);
            # PY_SPY_RATE: samples per second (200).
            cmd = [str(Path(sys.executable).parent / "py-spy"), "record", "--rate",
                   os.environ.get("PY_SPY_RATE", "200"),
                   *os.environ.get("PY_SPY_EXTRA", "").split(),
                   "--threads", "--subprocesses", "--format", "raw", "-o",
                   str(PY_SPY_DIR / f"{self.name}.txt"), "--", sys.executable]
        cmd += ["-m", "ppm_reference.dap.server", str(self.config_path)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=ROOT,
                                         start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                lines = [x for x in self.log_path.read_text().splitlines() if x.strip()]
                raise Refused(f"{self.name} exited: {(lines or ['?'])[-1][:160]}")
            if not self.listens:
                if time.monotonic() > deadline - 59:
                    return  # a driver (no listener) that is still running after 1 s
                time.sleep(0.05)
                continue
            try:
                with urllib.request.urlopen(f"{self.url}hpke_config", timeout=2):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start")

    def cpu_seconds(self) -> float:
        return float("nan") if self.proc is None else tree_cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)  # graceful (supervisor, py-spy write out)
        try:
            self.proc.wait(timeout=20)
            return
        except subprocess.TimeoutExpired:
            pass
        os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: the process tree
        self.proc.wait(timeout=30)


# -- datastores --------------------------------------------------------------------------


def _psql(url: str, sql: str) -> str:
    out = subprocess.run(["psql", url, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
                          "-c", sql], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip()[:200])
    return out.stdout


class Store:
    """One Aggregator's datastore for a row: a SQLite file or a fresh PostgreSQL database."""

    def __init__(self, kind: str, workdir: Path, role: str, pg_url: str) -> None:
        self.kind = kind
        self._poll: Any = None  # the connection `counts` polls on
        if kind == "sqlite":
            self.location = str(workdir / f"{role}.sqlite")
            self.admin_url = ""
        else:
            self.dbname = f"ppm_bench_{role}_{os.getpid()}_{int(time.time() * 1000) % 10**9}"
            self.admin_url = pg_url.rstrip("/") + "/postgres"
            self.location = pg_url.rstrip("/") + "/" + self.dbname
            _psql(self.admin_url, f'CREATE DATABASE "{self.dbname}"')

    def open(self) -> Any:
        """The project's datastore object for this location."""
        if self.kind == "sqlite":
            return SqliteDatastore(self.location, "FULL")
        import ppm_reference.dap.storage as storage
        opener = getattr(storage, "open_datastore", None)
        if opener is None:
            try:
                from ppm_reference.dap.storage import postgres  # type: ignore[attr-defined]
            except ImportError:
                raise Refused("no PostgreSQL datastore in ppm_reference.dap.storage"
                              ) from None
            return postgres.PostgresDatastore(self.location)
        return opener(self.location)

    def counts(self) -> dict[str, int]:
        """Leader: reports by state. Polled while a row runs, on one connection kept open
        (`POLL_INTERVAL`): a `psql` process per poll (a PostgreSQL backend forked for
        each) cost a good share of the 2 cores the servers are measured on."""
        sql = "SELECT state, COUNT(*) FROM client_reports GROUP BY state"
        if self._poll is None:
            if self.kind == "sqlite":
                self._poll = sqlite3.connect(f"file:{self.location}?mode=ro", uri=True,
                                             timeout=30, isolation_level=None)
            else:
                import psycopg
                self._poll = psycopg.connect(self.location, autocommit=True)
        return {str(state): int(c) for state, c in self._poll.execute(sql).fetchall()}

    def close_poll(self) -> None:
        if self._poll is not None:
            self._poll.close()
            self._poll = None

    def job_count(self) -> int:
        """Leader: aggregation jobs made (the reports per job show each job's fixed
        cost: a request to the Helper, transactions on both sides)."""
        sql = "SELECT COUNT(*) FROM aggregation_jobs"
        if self.kind == "sqlite":
            conn = sqlite3.connect(f"file:{self.location}?mode=ro", uri=True, timeout=30)
            try:
                return int(conn.execute(sql).fetchone()[0])
            finally:
                conn.close()
        return int(_psql(self.location, sql).strip())

    def backend_cpu(self) -> dict[int, float]:
        """PostgreSQL: CPU seconds of each server process connected to this database."""
        if self.kind != "postgresql":
            return {}
        out = _psql(self.admin_url, "SELECT pid FROM pg_stat_activity WHERE datname = "
                    f"'{self.dbname}'")
        cpu = {}
        # Not the backend of this script's polling connection (`counts`).
        mine = self._poll.info.backend_pid if self._poll is not None else None
        for pid in (int(p) for p in out.split() if p.strip().isdigit() and int(p) != mine):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            cpu[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return cpu

    def drop(self) -> None:
        self.close_poll()
        if self.kind == "postgresql":
            try:
                _psql(self.admin_url, f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(f"  (could not drop {self.dbname}: {exc})")


def provision(w: Workload, role: str, store: Store) -> None:
    key = w.keys[role]
    ds = store.open()
    try:
        with ds.transaction() as tx:
            for pt in w.tasks:
                tx.put_task(pt.record(role))
            tx.put_hpke_key(HpkeKeyRecord(key.config.id, key.config.encode(), key.private_key,
                                          HpkeKeyState.ACTIVE, time.time()))
    finally:
        ds.close()


async def upload(urls: list[str], content_type: str, bodies: list[tuple[int, bytes]],
                 concurrency: int) -> None:
    sem = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=600)
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(timeout=timeout, connector=conn) as session:
        async def post(ti: int, body: bytes) -> None:
            async with sem, session.post(urls[ti], data=body,
                                         headers={"Content-Type": content_type}) as resp:
                content = await resp.read()
                if resp.status != 200 or content:
                    raise RuntimeError(f"upload refused: {resp.status} {content[:200]!r}")
        await asyncio.gather(*(post(ti, b) for ti, b in bodies))


async def collect(w: Workload) -> Any:
    pt = w.tasks[0]
    query = Query.time_interval(Interval(Time(w.report_time - 1), Duration(3)))
    async with Collector(pt.task, pt.collector_keypair, pt.collector_auth_token) as c:
        return await c.collect(query, timeout=600, max_poll_interval=0.2)


def upload_bodies(w: Workload, per_request: int) -> list[tuple[int, bytes]]:
    """(task index, body): bulk bodies hold reports of one task."""
    by_task: dict[int, list[Any]] = {}
    for ti, r in w.reports:
        by_task.setdefault(ti, []).append(r)
    bodies = []
    for ti, rs in by_task.items():
        bodies += [(ti, UploadRequest(tuple(rs[i:i + per_request])).encode())
                   for i in range(0, len(rs), per_request)]
    if per_request == 1:
        random.Random(2).shuffle(bodies)
    return bodies


def run_row(w: Workload, datastore: str, drivers: int, mode: str, args: argparse.Namespace,
            floor: float) -> dict[str, Any]:
    n = len(w.reports)
    row: dict[str, Any] = {"vdaf": w.label, "reports": n, "datastore": datastore,
                           "drivers": drivers, "tasks": len(w.tasks),
                           "upload": mode + ("/sep" if args.phases == "separate" else ""),
                           "target": w.target, "floor_ms": floor * 1000, "note": ""}
    workdir = Path(tempfile.mkdtemp(prefix="dap-bench-"))
    stores: dict[str, Store] = {}
    servers: list[Server] = []
    try:
        for role in ("leader", "helper"):
            stores[role] = Store(datastore, workdir, role, args.pg_url)
        leader_extra = dict(LEADER_CONFIG)
        if args.phases == "separate":
            # The upload phase: a Leader front end alone (no background work); then
            # `drivers` driver processes aggregate what was stored.
            leader_extra["mode"] = "frontend"
        elif drivers > 1:
            leader_extra.update(frontends=1, drivers=drivers)
        helper = Server("helper", w.ports["helper"], workdir, stores["helper"].location,
                        args.sync, HELPER_CONFIG)
        leader = Server("leader", w.ports["leader"], workdir, stores["leader"].location,
                        args.sync, leader_extra)
        servers = [helper, leader]
        drivers_later = [Server("leader", 0, workdir, stores["leader"].location, args.sync,
                                {**LEADER_CONFIG, "mode": "driver"}, name=f"driver{i}")
                         for i in range(drivers)] if args.phases == "separate" else []
        try:
            for role in ("leader", "helper"):
                provision(w, role, stores[role])
        except Refused as exc:
            # No datastore object for the URL here: does the server take it? Its own
            # refusal is the clearer note.
            try:
                leader.start()
            except Refused as refused:
                raise Refused(f"server refused the datastore URL: {refused}") from None
            raise exc
        per_request = args.batch if mode == "bulk" else 1
        bodies = upload_bodies(w, per_request)
        concurrency = 1 if mode == "bulk" else args.single_concurrency
        profile = w.tasks[0].task.profile
        urls = [profile.resource_url("reports", leader.url, task_id=pt.task.task_id)
                for pt in w.tasks]
        content_type = profile.media_type_for("UploadRequest")
        # The floor of this row: measured just before it and just after it (the
        # machine's speed drifts by up to 30 % within minutes; the ratio uses the mean of
        # both, and a row whose two floors differ by more than 25 % says so).
        floor_before = measure_floor(w)
        helper.start()
        leader.start()
        cpu0 = {s.name: s.cpu_seconds() for s in servers}
        db0 = {pid: c for st in stores.values() for pid, c in st.backend_cpu().items()}
        t0 = time.perf_counter()
        asyncio.run(upload(urls, content_type, bodies, concurrency))
        t1 = time.perf_counter()
        upload_cpu = leader.cpu_seconds() - cpu0["leader"]
        at_upload_end = stores["leader"].counts().get("aggregated", 0)
        for driver in drivers_later:
            # Started now: the drain includes their start, and their CPU all of it
            # (start-up included, about 0.4 s).
            cpu0[driver.name] = 0.0
            driver.start()
            servers.append(driver)
        deadline = time.monotonic() + args.timeout
        while True:
            counts = stores["leader"].counts()
            if counts.get("failed"):
                raise RuntimeError(f"{counts['failed']} reports failed aggregation")
            if counts.get("aggregated", 0) == n:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"not aggregated after {args.timeout} s: {counts}")
            time.sleep(POLL_INTERVAL)
        t2 = time.perf_counter()
        cpu = {s.name: s.cpu_seconds() - cpu0[s.name] for s in servers}
        cpu["leader"] += sum(cpu.pop(d.name) for d in drivers_later)
        # The database server's own CPU (PostgreSQL: its processes serving this row's two
        # databases; those that ended meanwhile are missed). SQLite's is in the servers'.
        db1 = {pid: c for st in stores.values() for pid, c in st.backend_cpu().items()}
        db_cpu = sum(c - db0.get(pid, 0.0) for pid, c in db1.items())
        jobs = stores["leader"].job_count()
        if len(w.tasks) == 1:
            collection = asyncio.run(collect(w))
            correct = (collection.report_count == n and
                       collection.aggregate_result == w.expected)
        else:
            correct = True  # every report aggregated (checked above), once (the count)
    except Refused as exc:
        row["note"] = str(exc)
        return row
    finally:
        for server in servers:
            server.stop()
        for store in stores.values():
            store.drop()
    shutil.rmtree(workdir, ignore_errors=True)
    floor_after = measure_floor(w)
    floor = (floor_before + floor_after) / 2
    row["floor_ms"] = floor * 1000
    row["floor_drift"] = max(floor_before, floor_after) / min(floor_before, floor_after)
    drained = n - at_upload_end
    agg_rate = drained / (t2 - t1) if drained >= n // 5 and t2 > t1 else None
    cpu_per_report = (cpu["leader"] + cpu["helper"]) / n
    row.update({
        "upload_rate": n / (t1 - t0), "aggregation_rate": agg_rate,
        "aggregated_during_upload": at_upload_end, "end_to_end_rate": n / (t2 - t0),
        "correct": correct, "cpu_s": cpu, "cpu_ms": cpu_per_report * 1000,
        "upload_cpu_ms": upload_cpu / n * 1000,
        "ratio": cpu_per_report / floor, "wall_s": t2 - t0, "db_ms": db_cpu / n * 1000,
        "reports_per_job": n / jobs if jobs else None,
    })
    return row


_MEDIAN_KEYS = ("upload_rate", "aggregation_rate", "end_to_end_rate", "cpu_ms", "ratio",
                "upload_cpu_ms",
                "floor_ms", "wall_s", "db_ms", "reports_per_job")


def median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the table from the runs of one configuration: each measure's median
    over the runs that have it (a run that was not run makes the row's note); `runs`
    keeps the runs (the PostgreSQL/SQLite shares per round)."""
    row = dict(runs[0])
    row["runs"] = runs
    done = [r for r in runs if not r["note"]]
    if len(done) < len(runs):
        row["note"] = next(r["note"] for r in runs if r["note"])
        return row
    if len(runs) == 1:
        return row
    for key in _MEDIAN_KEYS:
        values = [r[key] for r in done if r.get(key) is not None]
        row[key] = statistics.median(values) if values else None
    row["correct"] = all(r["correct"] for r in done)
    row["floor_drift"] = max(r.get("floor_drift", 1.0) for r in done)
    return row


def fmt(v: float | None, spec: str = ".0f") -> str:
    return "-" if v is None else format(v, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (f"{'VDAF':<20} {'store':<10} {'drv':>3} {'upload':<10} {'tasks':>5} "
            f"{'reports':>7} {'upload/s':>8} {'agg/s':>6} {'e2e/s':>6} {'CPU ms':>7} "
            f"{'floor ms':>8} {'ratio':>5} {'db ms':>6} {'r/job':>5} {'ok':>3}  note")
    print(head)
    print("-" * len(head))
    for r in rows:
        lead = (f"{r['vdaf']:<20} {r['datastore']:<10} {r['drivers']:>3} {r['upload']:<10} "
                f"{r['tasks']:>5} {r['reports']:>7} ")
        if r["note"]:
            print(lead + f"{'':>8} {'':>6} {'':>6} {'':>7} {r['floor_ms']:>8.3f} "
                  f"{'':>5} {'':>6} {'':>5} {'':>3}  NOT RUN: {r['note']}")
            continue
        notes = []
        if r["upload"].startswith("single") and r["upload_rate"] < TARGET_UPLOAD:
            notes.append(f"upload < {TARGET_UPLOAD:.0f}")
        if r["aggregation_rate"] is not None and r["aggregation_rate"] < r["target"]:
            notes.append(f"agg < {r['target']:.0f}")
        if r["ratio"] > CPU_TARGET_RATIO:
            notes.append(f"CPU > {CPU_TARGET_RATIO:.0f}x floor")
        if r.get("floor_drift", 1.0) > 1.25:
            notes.append(f"floor drifted {r['floor_drift']:.2f}x during the row")
        db = fmt(r["db_ms"] if r["datastore"] != "sqlite" else None, ".3f")
        print(lead + f"{r['upload_rate']:>8.0f} {fmt(r['aggregation_rate']):>6} "
              f"{r['end_to_end_rate']:>6.0f} {r['cpu_ms']:>7.3f} {r['floor_ms']:>8.3f} "
              f"{r['ratio']:>5.2f} {db:>6} {fmt(r['reports_per_job']):>5} "
              f"{'yes' if r['correct'] else 'NO':>3}  " + ", ".join(notes))
    print("agg/s: reports aggregated after the upload / time from its end to the last "
          "('-': aggregation kept pace with the upload); e2e/s: all reports / time from "
          "the upload's start to the last aggregated; CPU ms: Leader + Helper CPU per "
          "report; floor: HPKE open x2 + VDAF preparation alone, the mean of its measures "
          "just before and just after the row; ratio = CPU / "
          "floor (target <= 2); db ms: PostgreSQL's own CPU per report (not in CPU ms); "
          "r/job: reports per aggregation job (the Leader's max_job_size at most)")
    # PostgreSQL beside SQLite, row for row (target: within 30 %).
    sqlite = {_twin(r): r for r in rows if r["datastore"] == "sqlite" and not r["note"]}
    pairs = [(r, sqlite[_twin(r)]) for r in rows if r["datastore"] == "postgresql"
             and not r["note"] and _twin(r) in sqlite]
    if pairs:
        print("PostgreSQL / SQLite (agg/s where both drained after the upload, else e2e/s; "
              "target >= 0.70):")
        for pg, lite in pairs:
            key = "aggregation_rate" if pg["aggregation_rate"] and lite["aggregation_rate"] \
                else "end_to_end_rate"
            share = pg[key] / lite[key]
            rounds = ""
            if len(pg.get("runs", ())) > 1 and len(pg["runs"]) == len(lite.get("runs", ())):
                # The share of each round (its PostgreSQL run against its SQLite run).
                per = [p[key] / q[key] for p, q in zip(pg["runs"], lite["runs"], strict=True)
                       if p.get(key) and q.get(key)]
                rounds = "  rounds: " + " ".join(f"{x:.2f}" for x in per)
            print(f"  {pg['vdaf']:<20} drv {pg['drivers']} {pg['upload']:<10} tasks "
                  f"{pg['tasks']:>4}: {key.split('_')[0]:<11} {share:.2f}"
                  f"{'' if share >= 0.7 else '  (< 0.70)'}{rounds}")


def _twin(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["vdaf"], r["drivers"], r["upload"], r["tasks"], r["reports"])


def main() -> None:
    global PY_SPY_DIR
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--vdaf", default="count,histogram",
                        help=f"comma-separated, of {sorted(VDAFS)}")
    parser.add_argument("--datastore", default="sqlite,postgresql",
                        help="comma-separated, of sqlite, postgresql")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432",
                        help="PostgreSQL server (a database is created and dropped per "
                             "Aggregator and row)")
    parser.add_argument("--drivers", default="1,2",
                        help="comma-separated Leader driver process counts")
    parser.add_argument("--max-job-size", type=int, default=None,
                        help="the Leader's max_job_size (default 500; smaller jobs show "
                             "the fixed cost of a job)")
    parser.add_argument("--straggler-age", type=float, default=None,
                        help="the Leader's straggler_age (default 0.5 s here, 2 s in the "
                        "server's defaults): how long fewer than min_job_size new reports "
                        "of a task wait before they make a job")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every row N times, in rounds (each round runs every row "
                        "once, so the machine's drift touches SQLite and PostgreSQL "
                        "alike); the table shows each row's medians, and the "
                        "PostgreSQL/SQLite shares of every round")
    parser.add_argument("--job-concurrency", type=int, default=None,
                        help="the Leader's job_concurrency (aggregation jobs stepped at once; "
                        "default 3)")
    parser.add_argument("--job-fill", choices=("on", "off"), default="on",
                        help="the Leader's job_fill (on: the default)")
    parser.add_argument("--event-loop", choices=("auto", "uvloop", "asyncio"), default=None,
                        help="both servers' event_loop (default: theirs, auto: uvloop "
                        "where installed)")
    parser.add_argument("--uploads", default="bulk,single",
                        help="comma-separated, of bulk, single (both: bulk,single)")
    parser.add_argument("--tasks", default="1,100,1000", help="comma-separated task counts")
    parser.add_argument("--batch", type=int, default=500, help="reports per bulk request")
    parser.add_argument("--single-concurrency", type=int, default=64,
                        help="requests in flight in the one-report-per-request rows")
    parser.add_argument("--sync", default="FULL", help="SQLite synchronous (FULL: durable)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds to wait for aggregation per row")
    parser.add_argument("--phases", choices=("together", "separate"), default="together",
                        help="together: one Leader uploads and aggregates at once (the "
                             "default); separate: a Leader front end alone takes the "
                             "uploads, then --drivers driver processes aggregate them "
                             "(upload/s without aggregation on the same cores; agg/s "
                             "the whole drain)")
    parser.add_argument("--quick", action="store_true",
                        help="about a minute: 1,000 reports, one task, both uploads, "
                             "SQLite and PostgreSQL, 1 and 2 drivers")
    parser.add_argument("--py-spy", type=Path, default=None, dest="py_spy",
                        help="sample both servers with py-spy (raw stacks in DIR; the "
                             "last row run wins)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args()
    LEADER_CONFIG["job_fill"] = args.job_fill == "on"
    if args.job_concurrency is not None:
        LEADER_CONFIG["job_concurrency"] = args.job_concurrency
    if args.straggler_age is not None:
        LEADER_CONFIG["straggler_age"] = args.straggler_age
    if args.event_loop is not None:
        LEADER_CONFIG["event_loop"] = HELPER_CONFIG["event_loop"] = args.event_loop
    if args.max_job_size is not None:
        LEADER_CONFIG["max_job_size"] = args.max_job_size
        LEADER_CONFIG["min_job_size"] = min(LEADER_CONFIG["min_job_size"], args.max_job_size)
    if args.quick:
        args.reports, args.tasks = min(args.reports, 1000), "1"
    if args.py_spy:
        PY_SPY_DIR = args.py_spy
        args.py_spy.mkdir(parents=True, exist_ok=True)
    print(f"DAP-18 end to end, {args.reports} reports, {os.cpu_count()} cores, load "
          f"average {os.getloadavg()[0]:.1f} at start; Leader {LEADER_CONFIG}, Helper "
          f"{HELPER_CONFIG}; bulk: {args.batch} reports/request, one at a time; single: "
          f"1 report/request, {args.single_concurrency} in flight; SQLite "
          f"synchronous={args.sync}", flush=True)
    if args.uploads == "both":
        args.uploads = "bulk,single"
    bad = set(args.uploads.split(",")) - {"bulk", "single"}
    if bad:
        parser.error(f"--uploads: unknown mode(s) {', '.join(sorted(bad))}")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    results = []
    for name in args.vdaf.split(","):
        for n_tasks in [int(t) for t in args.tasks.split(",")]:
            w = make_workload(name, args.reports, n_tasks)
            floor = measure_floor(w)
            print(f"  floor {w.label}: {floor * 1000:.3f} ms CPU per report (HPKE open x2 "
                  f"+ VDAF preparation, {min(FLOOR_SAMPLE, len(w.reports))} reports, least "
                  "of 3 passes)",
                  flush=True)
            configs = [(datastore, drivers, mode)
                       for datastore in args.datastore.split(",")
                       for drivers in [int(d) for d in args.drivers.split(",")]
                       for mode in args.uploads.split(",")]
            runs: dict[tuple[str, int, str], list[dict[str, Any]]] = {c: [] for c in configs}
            for round_ in range(args.repeat):
                for datastore, drivers, mode in configs:
                    r = run_row(w, datastore, drivers, mode, args, floor)
                    which = f" (round {round_ + 1}/{args.repeat})" if args.repeat > 1 else ""
                    if r["note"]:
                        print(f"  {w.label} {datastore} drivers={drivers} {mode} "
                              f"tasks={n_tasks}{which}: NOT RUN: {r['note']}", flush=True)
                    else:
                        print(f"  {w.label} {datastore} drivers={drivers} {mode} "
                              f"tasks={n_tasks}{which}: upload {r['upload_rate']:.0f}/s, agg "
                              f"{fmt(r['aggregation_rate'])}/s, e2e "
                              f"{r['end_to_end_rate']:.0f}/s, CPU "
                              f"{r['cpu_ms']:.3f} ms/report ({r['ratio']:.2f}x floor), "
                              f"leader {r['cpu_s']['leader']:.1f} s helper "
                              f"{r['cpu_s']['helper']:.1f} s over {r['wall_s']:.1f} s, "
                              f"Leader CPU during the upload {r['upload_cpu_ms']:.3f} "
                              f"ms/report, correct {r['correct']}", flush=True)
                    runs[(datastore, drivers, mode)].append(r)
            results += [median_row(runs[c]) for c in configs]
    print()
    if args.repeat > 1:
        print(f"Each row: the medians of its {args.repeat} runs (ratio: the median of the "
              "runs' ratios; ok: every run correct).")
    print_table(results)
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
