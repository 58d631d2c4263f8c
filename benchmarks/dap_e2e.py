"""DAP-18 end to end: reports per second through upload and through aggregation.

The Leader and the Helper run as two processes (`python -m dap.server CONFIG`) on
127.0.0.1, each on its own SQLite file, on this machine (both share its cores with this
script, which plays the Client and the Collector). For every row:

1. fresh datastores get the task and both Aggregators' HPKE keys, then both servers start;
2. upload: the pre-encoded UploadRequests are POSTed (bulk: `--batch` reports per request,
   one request at a time; single: one report per request, `--single-concurrency`
   requests in flight). Report generation (sharding, HPKE) is done before and is NOT
   measured; the same reports serve every row of a VDAF;
3. aggregation: the Leader's datastore is polled (read-only connection) until every
   report is aggregated. The Leader aggregates while it takes uploads, so two rates are
   given: "aggregation" = reports aggregated after the upload ended / time from the end of
   the upload until the last one was aggregated (the drain, no upload competing), and
   "end to end" = all reports / time from the start of the upload to the last aggregated;
4. collection: one time-interval collection job; its report count and result must be
   exact (a wrong run is flagged in the table).

Targets: upload >= 2,000 reports/s; aggregation >= 1,000 reports/s (Prio3Count),
>= 500 reports/s (Prio3Histogram, length 100, chunk length 10).

    .venv/bin/python benchmarks/dap_e2e.py                 # the full table, 10,000 reports
    .venv/bin/python benchmarks/dap_e2e.py --reports 2000 --vdaf count --rows bulk-full
    .venv/bin/python benchmarks/dap_e2e.py --vdaf histogram --rows bulk-full \
        --profile /tmp/prof      # cProfile both servers (one row: a later row overwrites)

Each row also prints the CPU seconds the Leader, the Helper and the client (this script)
used, to show which process bounds the rate.

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

from dap.collector import Collector  # noqa: E402
from dap.common import Duration, Interval, Time
from dap.hpke import HpkeKeypair, generate_keypair  # noqa: E402
from dap.profiles.dap18.client import generate_report  # noqa: E402
from dap.profiles.dap18.messages import Query, UploadRequest  # noqa: E402
from dap.provision import ProvisionedTask, new_task  # noqa: E402
from dap.storage import HpkeKeyRecord, HpkeKeyState  # noqa: E402
from dap.storage.sqlite import SqliteDatastore  # noqa: E402
from vdaf.prio3 import Prio3Count, Prio3Histogram  # noqa: E402

TARGET_UPLOAD = 2000.0
VDAFS: dict[str, tuple[str, Any, float]] = {
    # name: (label, factory, aggregation target in reports/s)
    "count": ("Prio3Count", lambda: Prio3Count(2), 1000.0),
    "histogram": ("Prio3Histogram(100)", lambda: Prio3Histogram(2, 100, 10), 500.0),
}
# name: (upload mode, sqlite_synchronous)
ROWS: dict[str, tuple[str, str]] = {
    "bulk-full": ("bulk", "FULL"),
    "bulk-normal": ("bulk", "NORMAL"),
    "single-full": ("single", "FULL"),
    "single-normal": ("single", "NORMAL"),
}
DEFAULT_ROWS = "bulk-full,bulk-normal,single-full,single-normal"
# Tuned for throughput on a 2-core machine (see the notes printed with the table).
LEADER_CONFIG = {"max_job_size": 100, "min_job_size": 50, "straggler_age": 0.5,
                 "job_concurrency": 3, "worker_interval": 0.01}
HELPER_CONFIG = {"worker_interval": 0.01}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Workload:
    """A task, both Aggregators' HPKE keys, and pre-generated, pre-encoded reports."""

    label: str
    target: float
    pt: ProvisionedTask
    keys: dict[str, HpkeKeypair]
    reports: list[Any]
    expected: Any
    report_time: int
    ports: dict[str, int]


def make_workload(name: str, n: int, seed: int = 1) -> Workload:
    label, factory, target = VDAFS[name]
    vdaf = factory()
    # The endpoints are part of the task configuration, which the reports' encryption
    # binds: every row of this VDAF runs its servers on these ports.
    ports = {"leader": free_port(), "helper": free_port()}
    pt = new_task(vdaf, f"http://127.0.0.1:{ports['leader']}/",
                  f"http://127.0.0.1:{ports['helper']}/", min_batch_size=100,
                  time_precision=3600)
    keys = {"leader": generate_keypair(1), "helper": generate_keypair(2)}
    rng = random.Random(seed)
    now = int(time.time()) // pt.task.time_precision
    if name == "count":
        measurements: list[Any] = [rng.randrange(2) for _ in range(n)]
        expected: Any = sum(measurements)
    else:
        measurements = [rng.randrange(100) for _ in range(n)]
        expected = [measurements.count(i) for i in range(100)]
    t0 = time.perf_counter()
    reports = [generate_report(pt.task, m, time=now, leader_hpke_config=keys["leader"].config,
                               helper_hpke_config=keys["helper"].config, vdaf=vdaf)
               for m in measurements]
    print(f"  generated {n} {label} reports in {time.perf_counter() - t0:.1f} s "
          f"(not measured)", flush=True)
    return Workload(label, target, pt, keys, reports, expected, now, ports)


class Server:
    def __init__(self, role: str, port: int, workdir: Path, synchronous: str,
                 extra: dict[str, Any], profile_dir: Path | None) -> None:
        self.role = role
        self.port = port
        self.datastore = workdir / f"{role}.sqlite"
        self.config_path = workdir / f"{role}.json"
        self.log_path = workdir / f"{role}.log"
        self.config_path.write_text(json.dumps({
            "role": role, "datastore": str(self.datastore), "listen_host": "127.0.0.1",
            "listen_port": self.port, "sqlite_synchronous": synchronous, **extra}))
        self.profile_path = profile_dir / f"{role}.prof" if profile_dir else None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        cmd = [sys.executable]
        if self.profile_path is not None:
            cmd += ["-m", "cProfile", "-o", str(self.profile_path)]
        cmd += ["-m", "dap.server", str(self.config_path)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.role} exited: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}hpke_config", timeout=2):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)
        raise RuntimeError(f"{self.role} did not start")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process so far (Linux /proc)."""
        if self.proc is None:
            return float("nan")
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if self.profile_path is not None:
            self.proc.send_signal(signal.SIGINT)  # graceful: cProfile writes its output
            try:
                self.proc.wait(timeout=30)
                return
            except subprocess.TimeoutExpired:
                pass
        self.proc.kill()
        self.proc.wait(timeout=30)


def provision(w: Workload, server: Server) -> None:
    key = w.keys[server.role]
    ds = SqliteDatastore(server.datastore, "FULL")
    try:
        with ds.transaction() as tx:
            tx.put_task(w.pt.record(server.role))
            tx.put_hpke_key(HpkeKeyRecord(key.config.id, key.config.encode(), key.private_key,
                                          HpkeKeyState.ACTIVE, time.time()))
    finally:
        ds.close()


def aggregated(path: Path) -> tuple[int, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        counts = dict(conn.execute("SELECT state, COUNT(*) FROM client_reports GROUP BY state"))
    finally:
        conn.close()
    return counts.get("aggregated", 0), counts.get("failed", 0)


async def upload(url: str, content_type: str, bodies: list[bytes], concurrency: int) -> None:
    sem = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=300)
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(timeout=timeout, connector=conn) as session:
        async def post(body: bytes) -> None:
            async with sem, session.post(url, data=body,
                                         headers={"Content-Type": content_type}) as resp:
                content = await resp.read()
                if resp.status != 200 or content:
                    raise RuntimeError(f"upload refused: {resp.status} {content[:200]!r}")
        await asyncio.gather(*(post(b) for b in bodies))


async def collect(w: Workload) -> Any:
    query = Query.time_interval(Interval(Time(w.report_time - 1), Duration(3)))
    async with Collector(w.pt.task, w.pt.collector_keypair, w.pt.collector_auth_token) as c:
        return await c.collect(query, timeout=600, max_poll_interval=0.2)


def run_row(w: Workload, mode: str, synchronous: str, batch: int, single_concurrency: int,
            profile_dir: Path | None) -> dict[str, Any]:
    n = len(w.reports)
    workdir = Path(tempfile.mkdtemp(prefix="dap-bench-"))
    helper = Server("helper", w.ports["helper"], workdir, synchronous, HELPER_CONFIG,
                    profile_dir)
    leader = Server("leader", w.ports["leader"], workdir, synchronous, LEADER_CONFIG,
                    profile_dir)
    for server in (leader, helper):
        provision(w, server)
    per_request = batch if mode == "bulk" else 1
    bodies = [UploadRequest(tuple(w.reports[i : i + per_request])).encode()
              for i in range(0, n, per_request)]
    concurrency = 1 if mode == "bulk" else single_concurrency
    url = w.pt.task.profile.resource_url("reports", leader.url, task_id=w.pt.task.task_id)
    content_type = w.pt.task.profile.media_type_for("UploadRequest")
    try:
        helper.start()
        leader.start()
        cpu0 = {s.role: s.cpu_seconds() for s in (leader, helper)}
        client_cpu0 = time.process_time()
        t0 = time.perf_counter()
        asyncio.run(upload(url, content_type, bodies, concurrency))
        t1 = time.perf_counter()
        client_cpu = time.process_time() - client_cpu0
        done_at_upload_end, _ = aggregated(leader.datastore)
        while True:
            done, failed = aggregated(leader.datastore)
            if failed:
                raise RuntimeError(f"{failed} reports failed aggregation")
            if done == n:
                break
            time.sleep(0.02)
        t2 = time.perf_counter()
        cpu = {s.role: s.cpu_seconds() - cpu0[s.role] for s in (leader, helper)}
        collection = asyncio.run(collect(w))
        t3 = time.perf_counter()
        correct = (collection.report_count == n and
                   collection.aggregate_result == w.expected)
    finally:
        leader.stop()
        helper.stop()
    shutil.rmtree(workdir, ignore_errors=True)  # kept (with the logs) if the row failed
    drained = n - done_at_upload_end
    # The drain rate means something only if a good part of the work was left after the
    # upload; otherwise aggregation kept pace with the upload and has no rate of its own.
    measurable = drained >= n // 5 and t2 > t1
    agg_rate = drained / (t2 - t1) if measurable else None
    return {
        "vdaf": w.label, "reports": n,
        "upload": f"{per_request}/request" + (f" x{concurrency}" if concurrency > 1 else ""),
        "synchronous": synchronous,
        "upload_s": t1 - t0, "upload_rate": n / (t1 - t0),
        "aggregated_during_upload": done_at_upload_end,
        "drain_s": t2 - t1, "aggregation_rate": agg_rate,
        "end_to_end_rate": n / (t2 - t0), "collect_s": t3 - t2, "correct": correct,
        "cpu_s": {"leader": cpu["leader"], "helper": cpu["helper"], "client": client_cpu},
        "wall_s": t2 - t0,
        "target": w.target,
        "upload_met": correct and n / (t1 - t0) >= TARGET_UPLOAD,
        "aggregation_met": None if agg_rate is None else correct and agg_rate >= w.target,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    """Rates in reports/s. target: upload / aggregation. met?: upload / aggregation
    ("-": the Leader aggregated as fast as reports came in, so the upload bounds it)."""
    head = (f"{'VDAF':<20} {'reports':>7} {'upload':<14} {'sync':<6} {'upload r/s':>10} "
            f"{'agg r/s':>8} {'e2e r/s':>8} {'agg during up':>13} {'target':>11} "
            f"{'correct':>7} {'met?':>8}")
    print(head)
    print("-" * len(head))

    def yes(v: bool | None) -> str:
        return "-" if v is None else "yes" if v else "no"

    for r in rows:
        target = f"{TARGET_UPLOAD:.0f}/{r['target']:.0f}"
        agg = "-" if r["aggregation_rate"] is None else f"{r['aggregation_rate']:.0f}"
        met = f"{yes(r['upload_met'])}/{yes(r['aggregation_met'])}"
        print(f"{r['vdaf']:<20} {r['reports']:>7} {r['upload']:<14} {r['synchronous']:<6} "
              f"{r['upload_rate']:>10.0f} {agg:>8} "
              f"{r['end_to_end_rate']:>8.0f} {r['aggregated_during_upload']:>13} "
              f"{target:>11} {'yes' if r['correct'] else 'NO':>7} {met:>8}")
    print("agg r/s: reports aggregated after the upload / time from its end to the last "
          "one; e2e: all reports / time from the upload's start to the last aggregated; "
          "'-': aggregation kept pace with the upload (fewer than 20% left at its end)")


def print_profile(profile_dir: Path, top: int) -> None:
    import pstats

    for role in ("leader", "helper"):
        path = profile_dir / f"{role}.prof"
        if path.exists():
            print(f"\n== {role}: top {top} by cumulative time ==")
            pstats.Stats(str(path)).sort_stats("cumulative").print_stats(top)
            print(f"\n== {role}: top {top} by own time ==")
            pstats.Stats(str(path)).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--vdaf", default="count,histogram",
                        help=f"comma-separated, of {sorted(VDAFS)}")
    parser.add_argument("--rows", default=DEFAULT_ROWS,
                        help=f"comma-separated, of {list(ROWS)}")
    parser.add_argument("--batch", type=int, default=500, help="reports per bulk request")
    parser.add_argument("--single-concurrency", type=int, default=8,
                        help="requests in flight in the one-report-per-request row")
    parser.add_argument("--profile", type=Path, default=None,
                        help="run both servers under cProfile, write and print to DIR")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args()
    print(f"DAP-18 end to end, {args.reports} reports, {os.cpu_count()} cores; "
          f"Leader config {LEADER_CONFIG}, Helper config {HELPER_CONFIG}; bulk upload "
          f"{args.batch} reports/request, one request at a time; single upload 1 "
          f"report/request, {args.single_concurrency} in flight", flush=True)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.vdaf.split(","):
        w = make_workload(name, args.reports)
        for row in args.rows.split(","):
            mode, synchronous = ROWS[row]
            r = run_row(w, mode, synchronous, args.batch, args.single_concurrency,
                        args.profile)
            agg = ("-" if r["aggregation_rate"] is None
                   else f"{r['aggregation_rate']:.0f}")
            print(f"  {w.label} {row}: upload {r['upload_rate']:.0f} r/s, aggregation "
                  f"{agg} r/s ({r['aggregated_during_upload']} done "
                  f"during upload), end to end {r['end_to_end_rate']:.0f} r/s, collect "
                  f"{r['collect_s']:.2f} s, correct: {r['correct']}; CPU s over "
                  f"{r['wall_s']:.1f} s: " + ", ".join(f"{k} {v:.1f}" for k, v in
                                                     r["cpu_s"].items()), flush=True)
            results.append(r)
    print()
    print_table(results)
    if args.json:
        print(json.dumps(results, indent=2))
    if args.profile:
        print_profile(args.profile, 25)


if __name__ == "__main__":
    main()
