"""Idle CPU of a Leader with many tasks (issue 14: under 5 % of a core with 1,000 tasks).

For each datastore (`--datastore`: a SQLite file, or a fresh PostgreSQL database on
`--pg-url`, dropped after) and task count: the datastore gets that many Leader tasks
(Prio3Count, time-interval, no reports), then the Leader runs as a process
(`python -m ppm_reference.dap.server CONFIG`, `--mode` as given: `all` by default, the
one-process Aggregator) with nothing to do. After `--settle` seconds, its CPU time (user +
system, from /proc/PID/stat) is read over `--seconds` seconds; the table prints it as a
percentage of one core.

    .venv/bin/python benchmarks/idle_tasks.py                  # 1, 100, 1,000 tasks
    .venv/bin/python benchmarks/idle_tasks.py --tasks 1000 --mode driver
    .venv/bin/python benchmarks/idle_tasks.py --datastore sqlite,postgresql
    .venv/bin/python benchmarks/idle_tasks.py --source /work/main   # another checkout

`--source DIR` runs the server from another checkout of this repository (PYTHONPATH),
to compare with a version before due-time scheduling; the tasks are written by this one
(the datastore schema is compatible). The other Leader configuration keys are the
defaults (`worker_interval` 0.05 s, `work_poll_interval` 0.5 s).

This is a benchmark, not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppm_reference.dap.provision import new_task  # noqa: E402
from ppm_reference.dap.storage import open_datastore  # noqa: E402
from ppm_reference.vdaf.prio3 import Prio3Count  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def wait_ready(proc: subprocess.Popen[bytes], port: int, mode: str, timeout: float = 60.0
               ) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the Leader exited with status {proc.returncode}")
        if mode == "driver":
            return  # no listener: started is all we can see
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/hpke_config", timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the Leader did not start")


class PgDatabase:
    """A fresh database on the server of `base` (a postgresql:// URL), dropped on exit."""

    def __init__(self, base: str) -> None:
        import psycopg

        self.base = base.rstrip("/")
        self.name = f"ppm_idle_{os.getpid()}_{time.monotonic_ns()}"
        with psycopg.connect(self.base + "/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.url = f"{self.base}/{self.name}"

    def __enter__(self) -> str:
        return self.url

    def __exit__(self, *exc: object) -> None:
        import psycopg

        with psycopg.connect(self.base + "/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def measure(tasks: int, seconds: float, settle: float, mode: str, source: str | None,
            datastore_kind: str = "sqlite", pg_url: str = "") -> tuple[float, float]:
    """(CPU % of one core while idle, seconds to write the tasks)."""
    with tempfile.TemporaryDirectory(prefix="ppm-idle-") as tmp:
        if datastore_kind == "postgresql":
            with PgDatabase(pg_url) as url:
                return _measure(tasks, seconds, settle, mode, source, Path(tmp), url)
        return _measure(tasks, seconds, settle, mode, source, Path(tmp),
                        str(Path(tmp) / "leader.sqlite"))


def _measure(tasks: int, seconds: float, settle: float, mode: str, source: str | None,
             tmp: Path, datastore: str) -> tuple[float, float]:
    port = free_port()
    started = time.perf_counter()
    ds = open_datastore(datastore, sqlite_synchronous="OFF", key_from_env=False)
    vdaf = Prio3Count(2)
    with ds.transaction() as tx:
        for _ in range(tasks):
            pt = new_task(vdaf, f"http://127.0.0.1:{port}/", "http://127.0.0.1:9/")
            tx.put_task(pt.leader_record)
    ds.close()
    setup = time.perf_counter() - started
    config = tmp / "leader.json"
    config.write_text(json.dumps({"role": "leader", "listen_port": port,
                                  "datastore": str(datastore),
                                  "sqlite_synchronous": "NORMAL"}))
    env = dict(os.environ)
    env.pop("PPM_DATASTORE_KEY", None)
    args = [sys.executable, "-m", "ppm_reference.dap.server", str(config)]
    if source is not None:
        env["PYTHONPATH"] = source
    if mode != "all":
        args += ["--mode", mode]
    proc = subprocess.Popen(args, cwd=source or ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(proc, port, mode)
        time.sleep(settle)
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = cpu_seconds(proc.pid), time.monotonic()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return 100.0 * (cpu1 - cpu0) / (t1 - t0), setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured, per row")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds after start before measuring")
    parser.add_argument("--mode", choices=("all", "driver", "frontend"), default="all")
    parser.add_argument("--source", help="run the server from this checkout")
    parser.add_argument("--datastore", default="sqlite",
                        help="comma-separated, of sqlite, postgresql")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432",
                        help="PostgreSQL server (a database is created and dropped per row)")
    args = parser.parse_args()
    print(f"Idle Leader, mode {args.mode}{' from ' + args.source if args.source else ''}: "
          f"CPU over {args.seconds:.0f} s (target with 1,000 tasks: < 5 % of a core)")
    print(f"{'store':>10} | {'tasks':>6} | {'CPU % of a core':>15} | {'setup s':>7}")
    print(f"{'-' * 10}-+-{'-' * 6}-+-{'-' * 15}-+-{'-' * 7}")
    for kind in args.datastore.split(","):
        for n in args.tasks:
            cpu, setup = measure(n, args.seconds, args.settle, args.mode, args.source,
                                 kind, args.pg_url)
            print(f"{kind:>10} | {n:>6} | {cpu:>15.1f} | {setup:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
