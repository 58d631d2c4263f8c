"""PostgreSQL driver choice for `dap.storage.postgres`: psycopg 3 (+ psycopg-pool) vs
asyncpg, measured on the datastore's typical statements.

The datastore interface is synchronous (`with datastore.transaction() as tx:` from the
servers' worker threads), so asyncpg is measured twice: natively (awaited on its own
loop, its best case) and as we would have to use it, from a calling thread through an
event loop in another thread (`run_coroutine_threadsafe`, one hop per statement).

Operations (each a whole transaction unless said otherwise):
  upload   BEGIN; INSERT one report (~1 KiB) ON CONFLICT DO NOTHING; COMMIT
  get      BEGIN; SELECT one row by primary key; COMMIT
  job tx   BEGIN; SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1; UPDATE it; 3 SELECTs; COMMIT
  bulk     BEGIN; INSERT 1,000 rows (executemany); COMMIT   (per row)

A second table measures the datastore interface itself: SQLite (synchronous=FULL) and
PostgreSQL (`dap.storage.postgres`, both concurrency modes), per transaction, from one
thread and from four.

Run: python benchmarks/pg_driver.py [--url postgresql://postgres@127.0.0.1:5432/postgres]
It creates and drops its own database (ppm_bench_<random>).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import asyncpg
import psycopg
from psycopg_pool import ConnectionPool

SCHEMA = """
CREATE TABLE reports (task_id BYTEA NOT NULL, report_id BYTEA NOT NULL, time BIGINT NOT NULL,
    report BYTEA NOT NULL, state TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (task_id, report_id));
CREATE TABLE jobs (task_id BYTEA NOT NULL, job_id BYTEA NOT NULL, state TEXT NOT NULL,
    lease_expiry DOUBLE PRECISION NOT NULL, PRIMARY KEY (task_id, job_id));
"""
TASK = bytes(32)
REPORT = os.urandom(1024)
N = 600          # transactions per single-row operation
BULK = 1000      # rows per bulk transaction
BULK_TX = 5


def timed(n: int, op: Callable[[], None]) -> tuple[float, float]:
    """(median µs per call, calls per second) over n calls."""
    samples = []
    start = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        op()
        samples.append(time.perf_counter() - t)
    total = time.perf_counter() - start
    return statistics.median(samples) * 1e6, n / total


def bench_psycopg(dsn: str) -> dict[str, tuple[float, float]]:
    pool = ConnectionPool(dsn, min_size=1, max_size=2, open=True,
                          kwargs={"autocommit": False})
    out = {}

    def upload() -> None:
        with pool.connection() as conn:
            conn.execute("INSERT INTO reports VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                         (TASK, secrets.token_bytes(16), 1, REPORT, "new", time.time()))

    rid = secrets.token_bytes(16)
    upload_fixed = (TASK, rid, 1, REPORT, "new", 0.0)
    with pool.connection() as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO reports VALUES (%s,%s,%s,%s,%s,%s)", upload_fixed)
        cur.executemany("INSERT INTO jobs VALUES (%s,%s,%s,%s)",
                         [(TASK, secrets.token_bytes(16), "active", 0.0) for _ in range(N)])

    def get() -> None:
        with pool.connection() as conn:
            conn.execute("SELECT * FROM reports WHERE task_id=%s AND report_id=%s",
                         (TASK, rid)).fetchone()

    def job_tx() -> None:
        with pool.connection() as conn:
            row = conn.execute("SELECT task_id, job_id FROM jobs WHERE state='active' AND "
                               "lease_expiry<1 LIMIT 1 FOR UPDATE SKIP LOCKED").fetchone()
            conn.execute("UPDATE jobs SET lease_expiry=2 WHERE task_id=%s AND job_id=%s", row)
            for _ in range(3):
                conn.execute("SELECT * FROM reports WHERE task_id=%s AND report_id=%s",
                             (TASK, rid)).fetchone()

    def bulk() -> None:
        rows = [(TASK, secrets.token_bytes(16), 1, REPORT, "new", 0.0) for _ in range(BULK)]
        with pool.connection() as conn, conn.cursor() as cur:
            cur.executemany("INSERT INTO reports VALUES (%s,%s,%s,%s,%s,%s)", rows)

    out["upload"] = timed(N, upload)
    out["get"] = timed(N, get)
    out["job tx"] = timed(N, job_tx)
    us, _ = timed(BULK_TX, bulk)
    out["bulk (per row)"] = (us / BULK, BULK * 1e6 / us)
    pool.close()
    return out


async def _asyncpg_ops(dsn: str, run: Callable[[Coroutine[Any, Any, Any]], Any]
                       ) -> dict[str, tuple[float, float]]:
    """The operations on an asyncpg pool; `run` awaits a coroutine (natively or from
    another thread)."""
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    assert pool is not None
    rid = secrets.token_bytes(16)
    async with pool.acquire() as conn:
        await conn.execute("DELETE FROM reports; DELETE FROM jobs")
        await conn.execute("INSERT INTO reports VALUES ($1,$2,$3,$4,$5,$6)",
                           TASK, rid, 1, REPORT, "new", 0.0)
        await conn.executemany("INSERT INTO jobs VALUES ($1,$2,$3,$4)",
                               [(TASK, secrets.token_bytes(16), "active", 0.0)
                                for _ in range(N)])

    async def upload() -> None:
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("INSERT INTO reports VALUES ($1,$2,$3,$4,$5,$6) "
                               "ON CONFLICT DO NOTHING",
                               TASK, secrets.token_bytes(16), 1, REPORT, "new", time.time())

    async def get() -> None:
        async with pool.acquire() as conn, conn.transaction():
            await conn.fetchrow("SELECT * FROM reports WHERE task_id=$1 AND report_id=$2",
                                TASK, rid)

    async def job_tx() -> None:
        async with pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow("SELECT task_id, job_id FROM jobs WHERE state='active' "
                                      "AND lease_expiry<1 LIMIT 1 FOR UPDATE SKIP LOCKED")
            await conn.execute("UPDATE jobs SET lease_expiry=2 WHERE task_id=$1 AND job_id=$2",
                               row[0], row[1])
            for _ in range(3):
                await conn.fetchrow("SELECT * FROM reports WHERE task_id=$1 AND "
                                    "report_id=$2", TASK, rid)

    async def bulk() -> None:
        rows = [(TASK, secrets.token_bytes(16), 1, REPORT, "new", 0.0) for _ in range(BULK)]
        async with pool.acquire() as conn, conn.transaction():
            await conn.executemany("INSERT INTO reports VALUES ($1,$2,$3,$4,$5,$6)", rows)

    out: dict[str, tuple[float, float]] = {}
    for name, op, n in (("upload", upload, N), ("get", get, N), ("job tx", job_tx, N),
                        ("bulk (per row)", bulk, BULK_TX)):
        samples = []
        start = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await run(op())
            samples.append(time.perf_counter() - t)
        total = time.perf_counter() - start
        us = statistics.median(samples) * 1e6
        out[name] = (us / BULK, BULK * n / total) if n == BULK_TX else (us, n / total)
    await pool.close()
    return out


def bench_asyncpg_native(dsn: str) -> dict[str, tuple[float, float]]:
    async def direct(coro: Coroutine[Any, Any, Any]) -> Any:
        return await coro
    return asyncio.run(_asyncpg_ops(dsn, direct))


def bench_asyncpg_sync(dsn: str) -> dict[str, tuple[float, float]]:
    """What a synchronous Transaction on asyncpg costs: every statement (BEGIN, each query,
    COMMIT) is one blocking hop from the calling thread to the driver's loop thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def call(coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    async def make_pool() -> asyncpg.Pool:
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
        assert pool is not None
        return pool

    pool = call(make_pool())
    rid = secrets.token_bytes(16)

    async def prep(conn: Any) -> None:
        await conn.execute("DELETE FROM reports; DELETE FROM jobs")
        await conn.execute("INSERT INTO reports VALUES ($1,$2,$3,$4,$5,$6)",
                           TASK, rid, 1, REPORT, "new", 0.0)
        await conn.executemany("INSERT INTO jobs VALUES ($1,$2,$3,$4)",
                               [(TASK, secrets.token_bytes(16), "active", 0.0)
                                for _ in range(N)])

    async def acquire() -> Any:
        return await pool.acquire()

    conn = call(acquire())
    call(prep(conn))

    def tx(body: Callable[[], None]) -> None:
        call(conn.execute("BEGIN"))
        body()
        call(conn.execute("COMMIT"))

    def upload() -> None:
        tx(lambda: call(conn.execute("INSERT INTO reports VALUES ($1,$2,$3,$4,$5,$6) ON "
                                     "CONFLICT DO NOTHING", TASK, secrets.token_bytes(16), 1,
                                     REPORT, "new", time.time())))

    def get() -> None:
        tx(lambda: call(conn.fetchrow("SELECT * FROM reports WHERE task_id=$1 AND "
                                      "report_id=$2", TASK, rid)))

    def job_body() -> None:
        row = call(conn.fetchrow("SELECT task_id, job_id FROM jobs WHERE state='active' AND "
                                 "lease_expiry<1 LIMIT 1 FOR UPDATE SKIP LOCKED"))
        call(conn.execute("UPDATE jobs SET lease_expiry=2 WHERE task_id=$1 AND job_id=$2",
                          row[0], row[1]))
        for _ in range(3):
            call(conn.fetchrow("SELECT * FROM reports WHERE task_id=$1 AND report_id=$2",
                               TASK, rid))

    def job_tx() -> None:
        tx(job_body)

    def bulk() -> None:
        rows = [(TASK, secrets.token_bytes(16), 1, REPORT, "new", 0.0) for _ in range(BULK)]
        tx(lambda: call(conn.executemany("INSERT INTO reports VALUES ($1,$2,$3,$4,$5,$6)",
                                         rows)))

    out = {"upload": timed(N, upload), "get": timed(N, get), "job tx": timed(N, job_tx)}
    us, _ = timed(BULK_TX, bulk)
    out["bulk (per row)"] = (us / BULK, BULK * 1e6 / us)
    call(pool.release(conn))
    call(pool.close())
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    return out


def bench_datastores(dsn: str, tmp: str) -> dict[str, dict[str, tuple[float, float]]]:
    """The datastore as the servers use it: SQLite (synchronous=FULL) and PostgreSQL in
    both modes (durable commits), one thread and four threads."""
    import concurrent.futures

    from ppm_reference.dap.storage import (
        AggregationJobRecord,
        ClientReportRecord,
        StorageError,
        open_datastore,
    )
    from ppm_reference.dap.storage.postgres import PostgresDatastore

    out: dict[str, dict[str, tuple[float, float]]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema in ("excl", "ser"):
            conn.execute(f"CREATE SCHEMA {schema}")
    stores = {
        "SQLite (FULL)": open_datastore(f"{tmp}/bench.sqlite", key_from_env=False),
        "PostgreSQL exclusive": PostgresDatastore(
            dsn + "?options=-csearch_path%3Dexcl", key_from_env=False),
        "PostgreSQL serializable": PostgresDatastore(
            dsn + "?options=-csearch_path%3Dser", key_from_env=False,
            concurrency="serializable"),
    }
    for name, ds in stores.items():
        counter = iter(range(10**9))

        def upload(ds: Any = ds, counter: Any = counter) -> None:
            with ds.transaction() as tx:
                tx.put_client_report(ClientReportRecord(TASK, next(counter).to_bytes(16, "big"),
                                                        1, REPORT))

        def read(ds: Any = ds) -> None:
            with ds.transaction() as tx:
                tx.get_client_reports(TASK, [bytes(16)])
                tx.get_task(TASK)

        def job(ds: Any = ds, counter: Any = counter) -> None:
            with ds.transaction() as tx:
                tx.put_aggregation_job(AggregationJobRecord(
                    TASK, next(counter).to_bytes(16, "big"), "leader", "active", 0, b""))  # type: ignore[arg-type]
                tx.acquire_aggregation_jobs("leader", time.time(), 60.0, 1)

        res: dict[str, tuple[float, float]] = {}
        for op_name, op in (("upload tx", upload), ("read tx", read), ("job tx", job)):
            res[op_name] = timed(300, op)
            failed = [0]

            def attempt(_: int, op: Callable[[], None] = op, failed: list[int] = failed
                        ) -> None:
                try:
                    op()
                except StorageError:  # serializable: a conflict that could not be retried
                    failed[0] += 1

            start = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                list(pool.map(attempt, range(400)))
            res[op_name + " x4"] = (float(failed[0]), 400 / (time.perf_counter() - start))
        out[name] = res
        ds.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    name = "ppm_bench_" + secrets.token_hex(4)
    try:
        admin = psycopg.connect(args.url, autocommit=True)
    except psycopg.OperationalError as exc:
        print(f"no PostgreSQL at {args.url}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    version = admin.info.server_version
    admin.execute(f"CREATE DATABASE {name}")
    dsn = args.url.rsplit("/", 1)[0] + "/" + name
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SCHEMA)
        results = {"psycopg 3 (sync, pool)": bench_psycopg(dsn)}
        results["asyncpg, native async"] = bench_asyncpg_native(dsn)
        results["asyncpg, sync via loop thread"] = bench_asyncpg_sync(dsn)
        with tempfile.TemporaryDirectory() as tmp:
            stores = bench_datastores(dsn, tmp)
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()
    ops = ["upload", "get", "job tx", "bulk (per row)"]
    print(f"{'driver':32}" + "".join(f"{op + ' µs':>19}{'/s':>8}" for op in ops))
    for driver, res in results.items():
        print(f"{driver:32}" + "".join(f"{res[op][0]:19.1f}{res[op][1]:8.0f}" for op in ops))
    print(f"(median µs per operation and operations/s; {N} transactions each, bulk: "
          f"{BULK_TX} x {BULK} rows; PostgreSQL {version})")
    print()
    ops = ["upload tx", "read tx", "job tx"]
    print(f"{'datastore':26}" + "".join(f"{op + ' µs':>14}{'/s':>7}{'x4 /s':>8}{'fail':>5}"
                                        for op in ops))
    for store, res in stores.items():
        print(f"{store:26}" + "".join(f"{res[op][0]:14.1f}{res[op][1]:7.0f}"
                                      f"{res[op + ' x4'][1]:8.0f}{res[op + ' x4'][0]:5.0f}"
                                      for op in ops))
    print("(the datastore interface: median µs and transactions/s from one thread; x4: "
          "400 from four threads at once, fail: of them aborted as conflicts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
