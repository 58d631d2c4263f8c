"""PostgreSQL backend of the datastore (`PostgresDatastore`), for Aggregators whose
processes (or machines) share one database. Selected by a ``postgresql://`` URL as the
datastore (`dap.storage.open_datastore`); SQLite stays the embedded default.

Driver: psycopg 3 with psycopg-pool, chosen by measurement (`benchmarks/pg_driver.py`,
4 runs on a loaded 2-core machine, PostgreSQL 15). The datastore interface is synchronous
(`with datastore.transaction() as tx:` from the servers' worker threads): psycopg's
blocking calls fit it directly, while asyncpg would need its own event loop and a
cross-thread hop per statement. Measured as it would be used, the short statements that
dominate favour psycopg (a primary-key read in its transaction: psycopg 0.13-0.43 ms,
asyncpg from a synchronous caller 0.35-0.94 ms); fsync-bound commits (one-report upload,
4-8 ms) are alike; asyncpg's binary `executemany` is faster for bulk inserts (28-56 vs
38-67 µs per 1 KiB row), which does not outweigh a second event loop per process and
a hop per statement. psycopg also has libpq's URL and option handling and `psycopg[binary]`
wheels.

Semantics are SQLite's (`dap.storage.sqlite`, where `BEGIN IMMEDIATE` runs transactions
one at a time). By default (`concurrency="exclusive"`) every transaction first takes a
transaction-scoped advisory lock, so that transactions of every thread and process
sharing the database run one at a time, each statement (READ COMMITTED) seeing every
earlier commit: no transaction is aborted for a conflict, and the callers (which treat
a failed transaction as a failed attempt of their work) behave as on SQLite. Measured:
with concurrent SERIALIZABLE transactions the Leader's concurrent aggregation jobs (one
batch bucket) had about 200 conflict aborts in one crash test, and jobs were abandoned.
`concurrency="serializable"` is that concurrent mode, for callers that retry their work.
Two kinds of transactions run beside the others, without the lock: `read()` snapshots,
and `upload_transaction()`, the Leader's uploads, which only insert new report rows
(under their primary key) after checks that job creation makes again under the lock.
Measured (1,000 tasks, bulk uploads of 10 reports): uploads 1,181-1,603 reports/s
against 608-636 when they queued for the lock behind job creation.

A transaction may also lose its connection (a server restart) or, in the serializable
mode, be aborted (serialization failure, deadlock). It is then retried where that is
safe: its operations so far are replayed on a fresh transaction, and it continues only
if every operation returns exactly what it returned before (the caller's decisions, made
from those results, are then still right); otherwise `TransactionConflict` is raised, as
any failed transaction. A commit whose connection is lost is never retried: its outcome
is unknown, and the error says so (an Aggregator answers 500 and the client's retry
finds its report stored or not).

Round trips. Each statement is a round trip (0.1 ms idle on loopback here, several ms on
a loaded machine) made while the exclusive mode's lock is held, so a transaction makes
few: a job's reports are read and written by one statement each (the batch operations,
arrays bound in PostgreSQL's binary format, see `_PgArray`; report IDs looked up by
index probe whatever the table's statistics, see `_by_report_ids`); the writes whose
outcome nobody reads (`_DEFERRED`) are held and sent in one pipeline with the next
statement that reads, or with COMMIT (`PostgresTransaction._write`); and what only
reads runs in `read()`, a READ ONLY snapshot that does not take the lock.

Leases: `acquire_aggregation_jobs` takes its jobs with ``FOR UPDATE SKIP LOCKED``, so
that processes acquiring at the same time (serializable mode) take different jobs
without waiting, and gives each a new lease token; `get_leased_aggregation_job` compares
it (``FOR UPDATE``), `try_lease` takes named leases (``INSERT ... ON CONFLICT DO UPDATE
... WHERE`` expired or ours), as on SQLite (dap.server.scheduling). Drivers in other
processes are woken by NOTIFY / LISTEN (`notify_work`, `listen_work`).

Every public method of `PostgresTransaction` is logged for replay
(`_RetryingTransaction`): a method added there is covered without more code. A held
write is logged as the statements it queued (already encoded, immutable).

Schema: versioned (`schema_version`), migrated when the datastore is opened, under an
advisory lock (processes starting together migrate once); a schema newer than this
code is refused. Secrets (HPKE private keys, verify keys, tokens) are sealed with
PPM_DATASTORE_KEY exactly as on SQLite (`dap.storage.secrets`).
"""

from __future__ import annotations

import logging
import pickle
import random
import re
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import fields
from typing import Any, TypeVar
from urllib.parse import urlsplit

import psycopg
import psycopg.errors
from psycopg.adapt import Dumper
from psycopg_pool import ConnectionPool, PoolTimeout

from ppm_reference.dap.storage import (
    AggregateShareJobRecord,
    AggregateShareJobState,
    AggregationJobRecord,
    AggregationJobState,
    BatchBucketRecord,
    BatchResultRecord,
    ClientReportRecord,
    CollectionJobRecord,
    CollectionJobState,
    HpkeKeyRecord,
    HpkeKeyState,
    LeaderBatchRecord,
    LeaderBatchState,
    ReportAggregationRecord,
    ReportAggregationState,
    ReportState,
    StorageError,
    TaskRecord,
    TaskWorkRecord,
    redact_url,
)
from ppm_reference.dap.storage.counters import task_counters
from ppm_reference.dap.storage.secrets import KEY_ENV, DatastoreKeyError, SecretBox, is_sealed
from ppm_reference.dap.storage.secrets import key_from_env as secrets_key_from_env
from ppm_reference.dap.storage.sqlite import (
    _CHECK,
    _TIME_MAX,
    _key_aad,
    _open_task,
    _open_value,
    _seal_task,
)

SCHEMA_VERSION = 1

# Several processes per Aggregator (dap.server.scheduling): the aggregation job lease's
# holder (AggregationJobRecord.lease_token), named leases (job creation per task,
# collection jobs, retention), and the indexes of the queries that find due work without
# looking at every task. Part of version 1 (never released without them); a version-1
# schema created before they were added gets them when opened (`_V1_LATE`).
# (aggregation_jobs (role, state, next_attempt_at) is aggregation_jobs_state, and
# collection_jobs (state, next_attempt_at) is collection_jobs_state, below.)
_LEASES = [
    """CREATE TABLE work_leases (
        kind TEXT NOT NULL, key BYTEA NOT NULL, holder BYTEA NOT NULL,
        expiry DOUBLE PRECISION NOT NULL, PRIMARY KEY (kind, key))""",
    "CREATE INDEX client_reports_new_tasks ON client_reports (state, task_id)",
    "CREATE INDEX aggregate_share_jobs_state ON aggregate_share_jobs (state)",
]
_V1_LATE = [
    "ALTER TABLE aggregation_jobs ADD COLUMN IF NOT EXISTS lease_token BYTEA NOT NULL "
    "DEFAULT ''",
    *(re.sub(r"^CREATE (TABLE|INDEX) ", r"CREATE \1 IF NOT EXISTS ", s) for s in _LEASES),
]

# Schema version -> the statements that bring the previous version to it (version 0: an
# empty database). Column order is the records' field order (`SELECT *` builds them).
_MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE tasks (
            task_id BYTEA PRIMARY KEY, role TEXT NOT NULL, profile TEXT NOT NULL,
            config BYTEA NOT NULL, vdaf_verify_key BYTEA NOT NULL,
            collector_hpke_config BYTEA NOT NULL, aggregator_auth_token TEXT NOT NULL,
            collector_auth_token TEXT, options TEXT NOT NULL)""",
        """CREATE TABLE hpke_keys (
            config_id INTEGER PRIMARY KEY, config BYTEA NOT NULL, private_key BYTEA NOT NULL,
            state TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL)""",
        """CREATE TABLE client_reports (
            task_id BYTEA NOT NULL, report_id BYTEA NOT NULL, time BIGINT NOT NULL,
            report BYTEA NOT NULL, state TEXT NOT NULL, aggregation_job_id BYTEA,
            error INTEGER, created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (task_id, report_id))""",
        "CREATE INDEX client_reports_state ON client_reports (task_id, state, created_at)",
        "CREATE INDEX client_reports_time ON client_reports (task_id, time)",
        """CREATE TABLE aggregation_jobs (
            task_id BYTEA NOT NULL, job_id BYTEA NOT NULL, role TEXT NOT NULL,
            state TEXT NOT NULL, step INTEGER NOT NULL, agg_param BYTEA NOT NULL,
            batch_id BYTEA, request BYTEA NOT NULL, request_hash BYTEA NOT NULL,
            last_continue_hash BYTEA NOT NULL, response BYTEA, helper_url TEXT,
            attempts INTEGER NOT NULL, next_attempt_at DOUBLE PRECISION NOT NULL,
            lease_expiry DOUBLE PRECISION NOT NULL, error TEXT,
            created_at DOUBLE PRECISION NOT NULL, lease_token BYTEA NOT NULL DEFAULT '',
            PRIMARY KEY (task_id, job_id))""",
        "CREATE INDEX aggregation_jobs_hash ON aggregation_jobs (task_id, request_hash)",
        "CREATE INDEX aggregation_jobs_state ON aggregation_jobs (role, state, next_attempt_at)",
        "CREATE INDEX aggregation_jobs_created ON aggregation_jobs (created_at)",
        """CREATE TABLE report_aggregations (
            task_id BYTEA NOT NULL, job_id BYTEA NOT NULL, ord INTEGER NOT NULL,
            report_id BYTEA NOT NULL, time BIGINT NOT NULL, state TEXT NOT NULL,
            verify_state BYTEA, error INTEGER, min_batch_bound BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (task_id, job_id, ord))""",
        """CREATE TABLE aggregated_reports (
            task_id BYTEA NOT NULL, report_id BYTEA NOT NULL, time BIGINT,
            PRIMARY KEY (task_id, report_id))""",
        "CREATE INDEX aggregated_reports_time ON aggregated_reports (task_id, time)",
        """CREATE TABLE batch_buckets (
            task_id BYTEA NOT NULL, bucket BYTEA NOT NULL, agg_param BYTEA NOT NULL,
            agg_share BYTEA, report_count BIGINT NOT NULL, checksum BYTEA NOT NULL,
            min_time BIGINT, max_time BIGINT, min_batch_bound BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (task_id, bucket, agg_param))""",
        """CREATE TABLE collected_intervals (
            task_id BYTEA NOT NULL, start BIGINT NOT NULL, end_ BIGINT NOT NULL)""",
        "CREATE INDEX collected_intervals_task ON collected_intervals (task_id, start)",
        """CREATE TABLE report_agg_params (
            task_id BYTEA NOT NULL, report_id BYTEA NOT NULL, agg_param BYTEA NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            UNIQUE (task_id, report_id, agg_param))""",
        """CREATE TABLE collected_agg_params (
            task_id BYTEA NOT NULL, start BIGINT NOT NULL, end_ BIGINT NOT NULL,
            agg_param BYTEA NOT NULL, PRIMARY KEY (task_id, start, end_, agg_param))""",
        """CREATE TABLE collected_buckets (
            task_id BYTEA NOT NULL, bucket BYTEA NOT NULL, PRIMARY KEY (task_id, bucket))""",
        """CREATE TABLE collection_jobs (
            task_id BYTEA NOT NULL, job_id BYTEA NOT NULL, request BYTEA NOT NULL,
            request_hash BYTEA NOT NULL, state TEXT NOT NULL, batch_id BYTEA, response BYTEA,
            error TEXT, error_detail TEXT, attempts INTEGER NOT NULL,
            next_attempt_at DOUBLE PRECISION NOT NULL, created_at DOUBLE PRECISION NOT NULL,
            cutoff DOUBLE PRECISION NOT NULL DEFAULT 0, PRIMARY KEY (task_id, job_id))""",
        "CREATE INDEX collection_jobs_hash ON collection_jobs (task_id, request_hash)",
        "CREATE INDEX collection_jobs_state ON collection_jobs (state, next_attempt_at)",
        """CREATE TABLE aggregate_share_jobs (
            task_id BYTEA NOT NULL, share_id BYTEA NOT NULL, request BYTEA NOT NULL,
            request_hash BYTEA NOT NULL, state TEXT NOT NULL, response BYTEA, error TEXT,
            error_detail TEXT, created_at DOUBLE PRECISION NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at DOUBLE PRECISION NOT NULL DEFAULT 0,
            PRIMARY KEY (task_id, share_id))""",
        "CREATE INDEX aggregate_share_jobs_hash ON aggregate_share_jobs (task_id, request_hash)",
        "CREATE TABLE secrets_meta (name TEXT PRIMARY KEY, value BYTEA NOT NULL)",
        """CREATE TABLE leader_batches (
            task_id BYTEA NOT NULL, batch_id BYTEA NOT NULL, assigned BIGINT NOT NULL,
            state TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (task_id, batch_id))""",
        """CREATE TABLE batch_results (
            task_id BYTEA NOT NULL, batch BYTEA NOT NULL, agg_param BYTEA NOT NULL,
            request BYTEA NOT NULL, response BYTEA NOT NULL,
            created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (task_id, batch, agg_param))""",
        """CREATE TABLE task_work (
            task_id BYTEA PRIMARY KEY, attempts INTEGER NOT NULL,
            next_attempt_at DOUBLE PRECISION NOT NULL, error TEXT NOT NULL)""",
        """CREATE TABLE eviction_horizons (
            task_id BYTEA PRIMARY KEY, horizon BIGINT NOT NULL)""",
        *_LEASES,
    ],
}

# The advisory lock keys serialising migrations ("ppm schema") and, in the exclusive
# mode, transactions ("ppm tx").
_MIGRATION_LOCK = 0x70706D5F736368
_TRANSACTION_LOCK = 0x70706D5F7478
# The first key of the per-task upload guards (`guard_uploads`, "ppmu"); the second is
# the task ID's first four bytes (a collision only makes two tasks wait for each other).
_UPLOAD_GUARD = 0x70706D75
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_BEGIN_UNLOCKED = "BEGIN ISOLATION LEVEL READ COMMITTED"  # (`upload_transaction`)
# Task IDs named in a work notification at most (hex, 65 bytes each: the payload stays
# under PostgreSQL's 8,000 bytes); news of more tasks names none (any task).
NOTIFY_MAX_TASKS = 100
_IDLE = psycopg.pq.TransactionStatus.IDLE
_INTRANS = psycopg.pq.TransactionStatus.INTRANS

R = TypeVar("R")

log = logging.getLogger("ppm.storage.postgres")


class TransactionConflict(StorageError):
    """A transaction aborted by PostgreSQL (serialization failure, deadlock, lost
    connection) that could not be retried safely: the data it read had changed."""


def _t(value: int) -> int:
    """Times are uint64, BIGINT is int64: clamped as on SQLite (see dap.storage.sqlite)."""
    return min(value, _TIME_MAX)


def _end(value: int) -> int:
    return min(value, _TIME_MAX + 1)


def _b(value: Any) -> Any:
    return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else value


def _vals(record: Any) -> tuple[Any, ...]:
    return tuple(_b(getattr(record, f.name)) for f in fields(record))


# -- array parameters --------------------------------------------------------------------
#
# The batch statements (one per job, not per report) pass columns as arrays. psycopg's
# generic list dumper costs about 0.5 ms per 100 bytea values (measured), paid while the
# transaction holds the datastore; these are dumped in PostgreSQL's binary array format
# (array_recv: ndim, has-null flag, element type OID, then per dimension its length and
# lower bound, then each element as a 4-byte length, -1 for NULL, and its bytes) in one
# pass, about 30 times faster.

_I32 = struct.Struct("!i")
_I64 = struct.Struct("!q")
_F64 = struct.Struct("!d")
_NULL = _I32.pack(-1)


class _PgArray:
    """A one-dimensional array parameter, encoded when made (see above)."""

    __slots__ = ("data",)
    element_oid = 0
    array_oid = 0

    def __init__(self, items: Sequence[Any]) -> None:
        parts = []
        nulls = 0
        encode = self._encode
        for item in items:
            if item is None:
                parts.append(_NULL)
                nulls = 1
            else:
                data = encode(item)
                parts.append(_I32.pack(len(data)))
                parts.append(data)
        header = (struct.pack("!iiIii", 1, nulls, self.element_oid, len(items), 1) if items
                  else struct.pack("!iiI", 0, 0, self.element_oid))
        self.data = header + b"".join(parts)

    @staticmethod
    def _encode(item: Any) -> bytes:
        raise NotImplementedError


class _Bytea(_PgArray):
    element_oid, array_oid = 17, 1001

    @staticmethod
    def _encode(item: Any) -> bytes:
        return bytes(item)


class _Int8(_PgArray):
    element_oid, array_oid = 20, 1016

    @staticmethod
    def _encode(item: Any) -> bytes:
        return _I64.pack(item)


class _Int4(_PgArray):
    element_oid, array_oid = 23, 1007

    @staticmethod
    def _encode(item: Any) -> bytes:
        return _I32.pack(item)


class _Text(_PgArray):
    element_oid, array_oid = 25, 1009

    @staticmethod
    def _encode(item: Any) -> bytes:
        return str(item).encode()


class _Float8(_PgArray):
    element_oid, array_oid = 701, 1022

    @staticmethod
    def _encode(item: Any) -> bytes:
        return _F64.pack(item)


def _array_dumper(cls: type[_PgArray]) -> type[Dumper]:
    class ArrayDumper(Dumper):
        format = psycopg.pq.Format.BINARY
        oid = cls.array_oid

        def dump(self, obj: Any) -> bytes:
            return obj.data  # type: ignore[no-any-return]

    return ArrayDumper


for _cls in (_Bytea, _Int8, _Int4, _Text, _Float8):
    psycopg.adapters.register_dumper(_cls, _array_dumper(_cls))


def _blist(items: Sequence[bytes]) -> list[bytes]:
    return [bytes(i) for i in items]


def _by_report_ids(table: str, columns: str = "t.ctid") -> str:
    """The rows of `table` of one task (first parameter: the report IDs, a bytea array;
    second: the task ID) found one index lookup per report ID. A plain ``task_id=%s AND
    report_id = ANY(%s)`` is planned from the table's statistics, and while they are
    stale (a table that grew fast since autovacuum last analysed it, minutes on a new
    Aggregator) the planner reads every row of the task and filters: measured, 3 ms
    instead of 0.4 ms for 100 IDs among 5,000 rows, with the exclusive transaction lock
    held. The LIMIT keeps the subquery a per-ID index lookup whatever the statistics.
    UPDATEs then take the rows by ctid: in the exclusive mode no other transaction
    writes meanwhile, and in the serializable mode a concurrent update of one of them
    aborts this transaction (retried), as for any update."""
    return (f"SELECT {columns.replace('t.', 'x.')} FROM unnest(%s::bytea[]) AS u(r) "
            f"CROSS JOIN LATERAL (SELECT {columns} FROM {table} t WHERE t.task_id=%s AND "
            "t.report_id=u.r LIMIT 1) x")


def _slist(states: Sequence[str]) -> list[str]:
    return [str(s) for s in states]


def is_postgres_url(spec: str) -> bool:
    return re.match(r"(?i)^postgres(ql)?://", spec) is not None


def _check_url(url: str) -> None:
    if not is_postgres_url(url):
        raise StorageError(f"not a PostgreSQL URL: {redact_url(url)!r} "
                           "(expected postgresql://USER@HOST:PORT/DATABASE)")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
        psycopg.conninfo.conninfo_to_dict(url)
    except (ValueError, psycopg.ProgrammingError) as exc:
        raise StorageError(f"invalid datastore URL {redact_url(url)!r}: "
                           f"{_one_line(exc)}") from None
    if not parts.path.strip("/"):
        raise StorageError(f"invalid datastore URL {redact_url(url)!r}: name the database "
                           "(postgresql://USER@HOST:PORT/DATABASE)")


def _upload_guard_key(task_id: bytes) -> int:
    return int.from_bytes(bytes(task_id)[:4], "big", signed=True)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# The errors after which a transaction may be retried (by replay, see the module doc).
_CONFLICTS = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, _CONFLICTS):
        return True
    # A lost connection (server restart: AdminShutdown, or the socket closed).
    return isinstance(exc, psycopg.OperationalError)


class PostgresTransaction:
    """The operations of one transaction (see `dap.storage.Transaction`) on a psycopg
    connection, SQL for SQL the SQLite backend's. With a `box`, secrets are sealed when
    written and opened when read (dap.storage.secrets)."""

    def __init__(self, conn: psycopg.Connection[Any], box: SecretBox | None = None) -> None:
        self.c = conn
        self.box = box
        # Writes whose outcome nobody reads, held until the next statement that reads (or
        # the commit) and then sent together in one pipeline: one round trip for all of
        # them (`_write`, `_flush`). None: sent at once (no pipelining).
        self._pending: list[tuple[str, tuple[Any, ...]]] | None = None

    def _write(self, sql: str, args: Sequence[Any]) -> None:
        """A statement whose result is not needed (an UPDATE or DELETE whose row count
        nobody reads): deferred to the next `_flush` when pipelining."""
        if self._pending is None:
            self.c.execute(sql, args)
        else:
            self._pending.append((sql, tuple(args)))

    def _flush(self, then: str | None = None) -> None:
        """Send the deferred writes (and `then`, e.g. COMMIT) in one round trip; an error
        of any of them is raised here."""
        pending = self._pending or []
        if then is not None:
            pending.append((then, ()))
        if not pending:
            return
        if self._pending is not None:
            self._pending = []
        if len(pending) == 1:
            self.c.execute(pending[0][0], pending[0][1] or None)
            return
        with self.c.pipeline():
            for sql, args in pending:
                self.c.execute(sql, args or None)

    def _one(self, cls: type[R], sql: str, args: Sequence[Any]) -> R | None:
        row = self.c.execute(sql, args).fetchone()
        return None if row is None else cls(*row)

    def _all(self, cls: type[R], sql: str, args: Sequence[Any]) -> list[R]:
        return [cls(*row) for row in self.c.execute(sql, args).fetchall()]

    def _count(self, sql: str, args: Sequence[Any]) -> int:
        row = self.c.execute(sql, args).fetchone()
        return int(row[0]) if row is not None else 0

    # -- tasks and keys ------------------------------------------------------------------

    _TASK_COLS = ("task_id, role, profile, config, vdaf_verify_key, collector_hpke_config, "
                  "aggregator_auth_token, collector_auth_token, options")

    def put_task(self, task: TaskRecord) -> None:
        values = _seal_task(self.box, _vals(task))
        self.c.execute(
            "INSERT INTO tasks VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (task_id) DO "
            "UPDATE SET role=EXCLUDED.role, profile=EXCLUDED.profile, config=EXCLUDED.config, "
            "vdaf_verify_key=EXCLUDED.vdaf_verify_key, "
            "collector_hpke_config=EXCLUDED.collector_hpke_config, "
            "aggregator_auth_token=EXCLUDED.aggregator_auth_token, "
            "collector_auth_token=EXCLUDED.collector_auth_token, options=EXCLUDED.options",
            _texts(values))

    def _task_rows(self, sql: str, args: Sequence[Any]) -> list[TaskRecord]:
        return [TaskRecord(*_open_task(self.box, _untexts(tuple(row))))
                for row in self.c.execute(sql, args).fetchall()]

    def get_task(self, task_id: bytes) -> TaskRecord | None:
        rows = self._task_rows(f"SELECT {self._TASK_COLS} FROM tasks WHERE task_id=%s",
                               (bytes(task_id),))
        return rows[0] if rows else None

    def list_tasks(self) -> list[TaskRecord]:
        return self._task_rows(f"SELECT {self._TASK_COLS} FROM tasks ORDER BY task_id", ())

    def delete_task(self, task_id: bytes) -> None:
        self.c.execute("DELETE FROM tasks WHERE task_id=%s", (bytes(task_id),))

    def put_hpke_key(self, key: HpkeKeyRecord) -> None:
        if not key.created_at:
            key.created_at = time.time()
        values = list(_vals(key))
        values[3] = str(values[3])
        if self.box is not None:
            values[2] = self.box.seal(bytes(key.private_key), _key_aad(key.config_id))
        cur = self.c.execute("INSERT INTO hpke_keys VALUES (%s,%s,%s,%s,%s) "
                             "ON CONFLICT DO NOTHING", values)
        if cur.rowcount != 1:
            raise StorageError(f"HPKE config id {key.config_id} is already in use")

    def list_hpke_keys(self) -> list[HpkeKeyRecord]:
        rows = self.c.execute("SELECT config_id, config, private_key, state, created_at FROM "
                              "hpke_keys ORDER BY created_at DESC").fetchall()
        out = []
        for row in rows:
            values = list(row)
            values[2] = _open_value(self.box, values[2], _key_aad(values[0]))
            out.append(HpkeKeyRecord(*values))
        return out

    def set_hpke_key_state(self, config_id: int, state: HpkeKeyState) -> None:
        cur = self.c.execute("UPDATE hpke_keys SET state=%s WHERE config_id=%s",
                             (str(HpkeKeyState(state)), config_id))
        if cur.rowcount != 1:
            raise StorageError(f"no HPKE key with config id {config_id}")

    def delete_hpke_key(self, config_id: int) -> None:
        self.c.execute("DELETE FROM hpke_keys WHERE config_id=%s", (config_id,))

    # -- Leader: uploaded reports ---------------------------------------------------------

    _REPORT_COLS = ("task_id, report_id, time, report, state, aggregation_job_id, error, "
                    "created_at")

    def put_client_report(self, report: ClientReportRecord) -> bool:
        if not report.created_at:
            report.created_at = time.time()
        cur = self.c.execute(
            "INSERT INTO client_reports VALUES (%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
            (bytes(report.task_id), bytes(report.report_id), report.time, bytes(report.report),
             str(report.state), _b(report.aggregation_job_id), report.error,
             report.created_at))
        return cur.rowcount == 1

    def put_client_reports(self, reports: Sequence[ClientReportRecord]
                           ) -> set[tuple[bytes, bytes]]:
        """One statement for all of them (a round trip each would hold the exclusive
        transaction lock that long)."""
        if not reports:
            return set()
        now = time.time()
        for r in reports:
            if not r.created_at:
                r.created_at = now
        # Inserted in key order (a stable sort: of one report ID twice, the first is still
        # the one stored), so that two uploads inserting the same IDs at once, beside each
        # other (`upload_transaction`), wait for one another in one order, not deadlock.
        reports = sorted(reports, key=lambda r: (bytes(r.task_id), bytes(r.report_id)))
        rows = self.c.execute(
            "INSERT INTO client_reports SELECT * FROM unnest(%s::bytea[], %s::bytea[], "
            "%s::bigint[], %s::bytea[], %s::text[], %s::bytea[], %s::integer[], "
            "%s::double precision[]) ON CONFLICT DO NOTHING RETURNING task_id, report_id",
            (_Bytea([r.task_id for r in reports]), _Bytea([r.report_id for r in reports]),
             _Int8([r.time for r in reports]), _Bytea([r.report for r in reports]),
             _Text([r.state for r in reports]), _Bytea([r.aggregation_job_id for r in reports]),
             _Int4([r.error for r in reports]), _Float8([r.created_at for r in reports]))
        ).fetchall()
        return {(bytes(t), bytes(i)) for t, i in rows}

    def get_client_reports(self, task_id: bytes, report_ids: list[bytes]
                           ) -> list[ClientReportRecord]:
        if not report_ids:
            return []
        cols = ", ".join(f"t.{c}" for c in self._REPORT_COLS.split(", "))
        return self._all(ClientReportRecord, _by_report_ids("client_reports", cols),
                         (_blist(report_ids), bytes(task_id)))

    def list_new_reports(self, task_id: bytes, limit: int,
                         held: Sequence[tuple[int, int, float]] = ()
                         ) -> list[ClientReportRecord]:
        """New reports, oldest first, without the `held` ones: (start, end, cutoff) holds
        back the reports with start <= time < end uploaded after cutoff."""
        sql = (f"SELECT {self._REPORT_COLS} FROM client_reports WHERE task_id=%s "
               "AND state=%s")
        args: list[Any] = [bytes(task_id), str(ReportState.NEW)]
        for start, end, cutoff in held:
            sql += " AND NOT (time>=%s AND time<%s AND created_at>%s)"
            args += [_t(start), _end(end), cutoff]
        return self._all(ClientReportRecord, sql + " ORDER BY created_at, report_id LIMIT %s",
                         (*args, limit))

    def count_reports(self, task_id: bytes, states: tuple[ReportState, ...],
                      time_from: int | None = None, time_to: int | None = None,
                      created_before: float | None = None) -> int:
        sql = "SELECT COUNT(*) FROM client_reports WHERE task_id=%s AND state = ANY(%s)"
        args: list[Any] = [bytes(task_id), _slist(states)]
        if created_before is not None:
            sql += " AND created_at < %s"
            args.append(created_before)
        if time_from is not None:
            sql += " AND time >= %s"
            args.append(_t(time_from))
        if time_to is not None:
            sql += " AND time < %s"
            args.append(_end(time_to))
        return self._count(sql, args)

    def oldest_new_report_age(self, task_id: bytes, now: float) -> float | None:
        row = self.c.execute("SELECT MIN(created_at) FROM client_reports WHERE task_id=%s AND "
                             "state=%s", (bytes(task_id), str(ReportState.NEW))).fetchone()
        return None if row is None or row[0] is None else now - float(row[0])

    def set_report_states(self, task_id: bytes, report_ids: list[bytes], state: ReportState,
                          job_id: bytes | None = None, error: int | None = None,
                          drop_encodings: bool = False) -> None:
        if report_ids:
            drop = ", report=''::bytea" if drop_encodings else ""
            self._write("UPDATE client_reports SET state=%s, aggregation_job_id=%s, "
                           f"error=%s{drop} WHERE ctid = ANY(ARRAY("
                           + _by_report_ids("client_reports") + "))",
                           (str(state), _b(job_id), error, _blist(report_ids),
                            bytes(task_id)))

    # -- aggregation jobs -----------------------------------------------------------------

    _AGG_COLS = ("task_id, job_id, role, state, step, agg_param, batch_id, request, request_hash,"
                 " last_continue_hash, response, helper_url, attempts, next_attempt_at,"
                 " lease_expiry, error, created_at, lease_token")

    def put_aggregation_job(self, job: AggregationJobRecord) -> None:
        if not job.created_at:
            job.created_at = time.time()
        values = list(_vals(job))
        values[3] = str(values[3])
        cur = self.c.execute(f"INSERT INTO aggregation_jobs ({self._AGG_COLS}) VALUES "
                             f"({','.join(['%s'] * 18)}) ON CONFLICT DO NOTHING", values)
        if cur.rowcount != 1:
            raise StorageError("aggregation job exists")

    def update_aggregation_job(self, job: AggregationJobRecord) -> None:
        cols = [f.name for f in fields(job)][2:]
        values = list(_vals(job))
        values[3] = str(values[3])
        self._write(
            f"UPDATE aggregation_jobs SET {', '.join(c + '=%s' for c in cols)} "
            "WHERE task_id=%s AND job_id=%s", (*values[2:], values[0], values[1]))

    def get_aggregation_job(self, task_id: bytes, job_id: bytes) -> AggregationJobRecord | None:
        return self._one(AggregationJobRecord,
                         f"SELECT {self._AGG_COLS} FROM aggregation_jobs WHERE task_id=%s AND "
                         "job_id=%s", (bytes(task_id), bytes(job_id)))

    def find_aggregation_job_by_hash(self, task_id: bytes, request_hash: bytes
                                     ) -> AggregationJobRecord | None:
        return self._one(AggregationJobRecord,
                         f"SELECT {self._AGG_COLS} FROM aggregation_jobs WHERE task_id=%s AND "
                         "request_hash=%s LIMIT 1", (bytes(task_id), bytes(request_hash)))

    def acquire_aggregation_jobs(self, role: str, now: float, lease: float, limit: int
                                 ) -> list[AggregationJobRecord]:
        """Lease up to `limit` due active jobs (as SQLite: lease expired, next attempt
        due, oldest due first). Rows another transaction is leasing are skipped (``FOR
        UPDATE SKIP LOCKED``), so that concurrent drivers take different jobs. Each job
        gets a fresh random 16-byte lease token (gen_random_uuid: 122 random bits from
        the server's strong random source), as SQLite's os.urandom(16). (A transaction
        replayed after a lost connection draws other tokens, so its replay is refused:
        the acquisition fails, as any failed transaction, and the jobs stay unleased.)"""
        jobs = self._all(AggregationJobRecord,
                         f"UPDATE aggregation_jobs SET lease_expiry=%s, "
                         f"lease_token=uuid_send(gen_random_uuid()) WHERE (task_id, job_id) "
                         f"IN (SELECT task_id, job_id FROM aggregation_jobs WHERE role=%s AND "
                         f"state=%s AND lease_expiry<=%s AND next_attempt_at<=%s "
                         f"ORDER BY next_attempt_at, created_at LIMIT %s "
                         f"FOR UPDATE SKIP LOCKED) RETURNING {self._AGG_COLS}",
                         (now + lease, role, str(AggregationJobState.ACTIVE), now, now, limit))
        jobs.sort(key=lambda j: (j.next_attempt_at, j.created_at))
        return jobs

    def get_leased_aggregation_job(self, task_id: bytes, job_id: bytes, lease_token: bytes,
                                   with_request: bool = True) -> AggregationJobRecord | None:
        # Without the request: its value (100 KB and more, compressed out of line) is
        # neither decompressed nor sent.
        cols = self._AGG_COLS if with_request else self._AGG_COLS.replace(
            " request,", " ''::bytea AS request,", 1)
        return self._one(AggregationJobRecord,
                         f"SELECT {cols} FROM aggregation_jobs WHERE task_id=%s AND "
                         "job_id=%s AND lease_token=%s FOR UPDATE",
                         (bytes(task_id), bytes(job_id), bytes(lease_token)))

    def count_active_aggregation_jobs(self, task_id: bytes, batch_id: bytes | None = None,
                                      time_from: int | None = None,
                                      time_to: int | None = None) -> int:
        sql = "SELECT COUNT(*) FROM aggregation_jobs j WHERE j.task_id=%s AND j.state=%s"
        args: list[Any] = [bytes(task_id), str(AggregationJobState.ACTIVE)]
        if batch_id is not None:
            sql += " AND j.batch_id=%s"
            args.append(bytes(batch_id))
        if time_from is not None and time_to is not None:
            sql += (" AND EXISTS (SELECT 1 FROM report_aggregations r WHERE "
                    "r.task_id=j.task_id AND r.job_id=j.job_id AND r.time>=%s AND r.time<%s)")
            args += [_t(time_from), _end(time_to)]
        return self._count(sql, args)

    def put_report_aggregations(self, records: list[ReportAggregationRecord]) -> None:
        if not records:
            return
        # One statement (executemany would send a statement per record).
        self._write(
            "INSERT INTO report_aggregations SELECT * FROM unnest(%s::bytea[], %s::bytea[], "
            "%s::integer[], %s::bytea[], %s::bigint[], %s::text[], %s::bytea[], "
            "%s::integer[], %s::bigint[])",
            (_Bytea([r.task_id for r in records]), _Bytea([r.job_id for r in records]),
             _Int4([r.ord for r in records]), _Bytea([r.report_id for r in records]),
             _Int8([_t(r.time) for r in records]), _Text([r.state for r in records]),
             _Bytea([r.verify_state for r in records]), _Int4([r.error for r in records]),
             _Int8([r.min_batch_bound for r in records])))

    def get_report_aggregations(self, task_id: bytes, job_id: bytes
                                ) -> list[ReportAggregationRecord]:
        return self._all(ReportAggregationRecord,
                         "SELECT task_id, job_id, ord, report_id, time, state, verify_state, "
                         "error, min_batch_bound FROM report_aggregations WHERE task_id=%s AND "
                         "job_id=%s ORDER BY ord", (bytes(task_id), bytes(job_id)))

    def update_report_aggregation(self, record: ReportAggregationRecord) -> None:
        self.c.execute("UPDATE report_aggregations SET state=%s, verify_state=%s, error=%s "
                       "WHERE task_id=%s AND job_id=%s AND ord=%s",
                       (str(record.state), _b(record.verify_state), record.error,
                        bytes(record.task_id), bytes(record.job_id), record.ord))

    def update_report_aggregations(self, records: Sequence[ReportAggregationRecord]
                                   ) -> None:
        if not records:
            return
        self._write(
            "UPDATE report_aggregations AS r SET state=u.state, verify_state=u.verify_state, "
            "error=u.error FROM unnest(%s::bytea[], %s::bytea[], %s::integer[], %s::text[], "
            "%s::bytea[], %s::integer[]) AS u(task_id, job_id, ord, state, verify_state, error)"
            " WHERE r.task_id=u.task_id AND r.job_id=u.job_id AND r.ord=u.ord",
            (_Bytea([r.task_id for r in records]), _Bytea([r.job_id for r in records]),
             _Int4([r.ord for r in records]), _Text([r.state for r in records]),
             _Bytea([r.verify_state for r in records]), _Int4([r.error for r in records])))

    # -- replay protection and batch buckets ----------------------------------------------

    def is_report_aggregated(self, task_id: bytes, report_id: bytes) -> bool:
        return self.c.execute("SELECT 1 FROM aggregated_reports WHERE task_id=%s AND "
                              "report_id=%s", (bytes(task_id), bytes(report_id))
                              ).fetchone() is not None

    def mark_report_aggregated(self, task_id: bytes, report_id: bytes,
                               time: int | None = None) -> bool:
        cur = self.c.execute("INSERT INTO aggregated_reports (task_id, report_id, time) "
                             "VALUES (%s,%s,%s) ON CONFLICT DO NOTHING",
                             (bytes(task_id), bytes(report_id),
                              None if time is None else _t(time)))
        return cur.rowcount == 1

    def aggregated_among(self, task_id: bytes, report_ids: Sequence[bytes]) -> set[bytes]:
        if not report_ids:
            return set()
        return {bytes(row[0]) for row in self.c.execute(
            _by_report_ids("aggregated_reports", "t.report_id"),
            (_blist(report_ids), bytes(task_id)))}

    def mark_reports_aggregated(self, task_id: bytes,
                                reports: Sequence[tuple[bytes, int | None]]) -> set[bytes]:
        if not reports:
            return set()
        return {bytes(row[0]) for row in self.c.execute(
            "INSERT INTO aggregated_reports (task_id, report_id, time) SELECT %s, u.r, u.t "
            "FROM unnest(%s::bytea[], %s::bigint[]) AS u(r, t) ON CONFLICT DO NOTHING "
            "RETURNING report_id",
            (bytes(task_id), _Bytea([r for r, _ in reports]),
             _Int8([None if t is None else _t(t) for _, t in reports])))}

    _BUCKET_COLS = ("task_id, bucket, agg_param, agg_share, report_count, checksum, min_time, "
                    "max_time, min_batch_bound")

    def _buckets(self, sql: str, args: Sequence[Any]) -> list[BatchBucketRecord]:
        return [BatchBucketRecord(*row) for row in self.c.execute(sql, args).fetchall()]

    def get_bucket(self, task_id: bytes, bucket: bytes, agg_param: bytes
                   ) -> BatchBucketRecord | None:
        rows = self._buckets(f"SELECT {self._BUCKET_COLS} FROM batch_buckets WHERE "
                             "task_id=%s AND bucket=%s AND agg_param=%s",
                             (bytes(task_id), bytes(bucket), bytes(agg_param)))
        if not rows:
            return None
        # The class's own method: a call inside an operation is not an operation.
        rows[0].collected = PostgresTransaction.is_bucket_collected(self, task_id, bucket)
        return rows[0]

    def put_bucket(self, record: BatchBucketRecord) -> None:
        self._write(
            f"INSERT INTO batch_buckets ({self._BUCKET_COLS}) VALUES "
            "(%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (task_id, bucket, agg_param) DO UPDATE "
            "SET agg_share=EXCLUDED.agg_share, report_count=EXCLUDED.report_count, "
            "checksum=EXCLUDED.checksum, min_time=EXCLUDED.min_time, "
            "max_time=EXCLUDED.max_time, min_batch_bound=EXCLUDED.min_batch_bound",
            _vals(record)[:9])

    def list_buckets(self, task_id: bytes, buckets: list[bytes] | None = None
                     ) -> list[BatchBucketRecord]:
        if buckets is None:
            out = self._buckets(f"SELECT {self._BUCKET_COLS} FROM batch_buckets WHERE "
                                "task_id=%s", (bytes(task_id),))
        elif not buckets:
            return []
        else:
            out = self._buckets(f"SELECT {self._BUCKET_COLS} FROM batch_buckets WHERE "
                                "task_id=%s AND bucket = ANY(%s)",
                                (bytes(task_id), _blist(buckets)))
        collected = {bytes(r[0]) for r in self.c.execute(
            "SELECT bucket FROM collected_buckets WHERE task_id=%s", (bytes(task_id),))}
        for rec in out:
            rec.collected = rec.bucket in collected
        return out

    def is_bucket_collected(self, task_id: bytes, bucket: bytes) -> bool:
        return self.c.execute("SELECT 1 FROM collected_buckets WHERE task_id=%s AND "
                              "bucket=%s", (bytes(task_id), bytes(bucket))).fetchone() is not None

    def mark_buckets_collected(self, task_id: bytes, buckets: list[bytes]) -> None:
        if buckets:
            self.c.execute("INSERT INTO collected_buckets SELECT %s, b FROM unnest(%s::bytea[]) "
                           "AS b ON CONFLICT DO NOTHING", (bytes(task_id), _blist(buckets)))

    def list_buckets_in_range(self, task_id: bytes, low: bytes, high: bytes
                              ) -> list[BatchBucketRecord]:
        """Buckets with `low <= bucket < high` (bytewise; encoded Intervals sort by start)."""
        return self._buckets(f"SELECT {self._BUCKET_COLS} FROM batch_buckets WHERE task_id=%s "
                             "AND bucket>=%s AND bucket<%s",
                             (bytes(task_id), bytes(low), bytes(high)))

    def mark_interval_collected(self, task_id: bytes, start: int, end: int) -> None:
        self.c.execute("INSERT INTO collected_intervals VALUES (%s,%s,%s)",
                       (bytes(task_id), _t(start), _end(end)))

    def unmark_interval_collected(self, task_id: bytes, start: int, end: int) -> None:
        self.c.execute("DELETE FROM collected_intervals WHERE task_id=%s AND start=%s AND "
                       "end_=%s", (bytes(task_id), _t(start), _end(end)))

    def unmark_buckets_collected(self, task_id: bytes, buckets: list[bytes]) -> None:
        if buckets:
            self.c.execute("DELETE FROM collected_buckets WHERE task_id=%s AND "
                           "bucket = ANY(%s)", (bytes(task_id), _blist(buckets)))

    def guard_uploads(self, task_ids: Sequence[bytes], exclusive: bool = False) -> None:
        # Transaction-scoped advisory locks, one per task (the two-key form: apart from
        # the one-key locks of migrations and the exclusive mode), taken in key order so
        # that two upload transactions never wait for each other in a cycle. Upload
        # transactions run beside the exclusive mode's lock (`upload_transaction`): they
        # would otherwise check a task's collected intervals, let a freeze commit, and
        # then store a report it no longer counts, acknowledged but never aggregated.
        keys = sorted({_upload_guard_key(t) for t in task_ids})
        if not keys:
            return
        fn = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        self.c.execute(f"SELECT {fn}(%s, k) FROM unnest(%s::int[]) AS k",
                       (_UPLOAD_GUARD, keys)).fetchall()

    def interval_overlaps_collected(self, task_id: bytes, start: int, end: int) -> bool:
        return self.c.execute("SELECT 1 FROM collected_intervals WHERE task_id=%s AND "
                              "start<%s AND end_>%s LIMIT 1",
                              (bytes(task_id), _end(end), _t(start))).fetchone() is not None

    def commit_context(self, task_id: bytes, times: Sequence[int], buckets: Sequence[bytes]
                       ) -> tuple[int | None, set[int], set[bytes]]:
        # One round trip for what would be one per query (each in the transaction lock).
        tid = bytes(task_id)
        ts = sorted(set(times))
        row = self.c.execute(
            "SELECT (SELECT horizon FROM eviction_horizons WHERE task_id=%s), "
            "ARRAY(SELECT u.t FROM unnest(%s::bigint[]) AS u(t) WHERE EXISTS (SELECT 1 FROM "
            "collected_intervals c WHERE c.task_id=%s AND c.start<u.t+1 AND c.end_>u.t)), "
            "ARRAY(SELECT b.bucket FROM collected_buckets b WHERE b.task_id=%s AND "
            "b.bucket = ANY(%s::bytea[]))",
            (tid, _Int8(sorted({_t(t) for t in ts})), tid, tid,
             _Bytea(sorted({bytes(b) for b in buckets})))
        ).fetchone()
        assert row is not None
        held = {int(t) for t in row[1] or ()}
        return (None if row[0] is None else int(row[0]),
                {t for t in ts if _t(t) in held},  # (as clamped when stored)
                {bytes(b) for b in row[2] or ()})

    def count_reports_in_active_jobs(self, task_id: bytes, batch_id: bytes) -> int:
        return self._count(
            "SELECT COUNT(*) FROM report_aggregations r JOIN aggregation_jobs j ON "
            "r.task_id=j.task_id AND r.job_id=j.job_id WHERE j.task_id=%s AND j.batch_id=%s "
            "AND j.state=%s AND r.state=%s",
            (bytes(task_id), bytes(batch_id), str(AggregationJobState.ACTIVE),
             str(ReportAggregationState.ACTIVE)))

    # -- VDAFs with an aggregation parameter ---------------------------------------------

    def record_report_agg_param(self, task_id: bytes, report_id: bytes,
                                agg_param: bytes) -> bool:
        cur = self.c.execute("INSERT INTO report_agg_params (task_id, report_id, agg_param) "
                             "VALUES (%s,%s,%s) ON CONFLICT DO NOTHING",
                             (bytes(task_id), bytes(report_id), bytes(agg_param)))
        return cur.rowcount == 1

    def report_agg_params(self, task_id: bytes, report_ids: list[bytes]
                          ) -> dict[bytes, list[bytes]]:
        """Each report's aggregation parameters, in the order they were recorded."""
        out: dict[bytes, list[bytes]] = {bytes(r): [] for r in report_ids}
        if report_ids:
            for rid, param in self.c.execute(
                    "SELECT report_id, agg_param FROM report_agg_params WHERE task_id=%s AND "
                    "report_id = ANY(%s) ORDER BY seq", (bytes(task_id), _blist(report_ids))):
                out[bytes(rid)].append(bytes(param))
        return out

    def mark_agg_param_collected(self, task_id: bytes, start: int, end: int,
                                 agg_param: bytes) -> None:
        self.c.execute("INSERT INTO collected_agg_params VALUES (%s,%s,%s,%s) "
                       "ON CONFLICT DO NOTHING",
                       (bytes(task_id), _t(start), _end(end), bytes(agg_param)))

    def unmark_agg_param_collected(self, task_id: bytes, start: int, end: int,
                                   agg_param: bytes) -> None:
        self.c.execute("DELETE FROM collected_agg_params WHERE task_id=%s AND start=%s AND "
                       "end_=%s AND agg_param=%s",
                       (bytes(task_id), _t(start), _end(end), bytes(agg_param)))

    def list_collected_agg_params(self, task_id: bytes, start: int, end: int
                                  ) -> list[tuple[int, int, bytes]]:
        """The (start, end, agg_param) collections whose interval overlaps [start, end)."""
        rows = self.c.execute("SELECT start, end_, agg_param FROM collected_agg_params WHERE "
                              "task_id=%s AND start<%s AND end_>%s ORDER BY agg_param",
                              (bytes(task_id), _end(end), _t(start))).fetchall()
        return [(int(a), int(b), bytes(p)) for a, b, p in rows]

    def list_reports_in_interval(self, task_id: bytes, states: tuple[ReportState, ...],
                                 time_from: int, time_to: int) -> list[ClientReportRecord]:
        return self._all(ClientReportRecord,
                         f"SELECT {self._REPORT_COLS} FROM client_reports WHERE task_id=%s AND "
                         "state = ANY(%s) AND time>=%s AND time<%s "
                         "ORDER BY created_at, report_id",
                         (bytes(task_id), _slist(states), _t(time_from), _end(time_to)))

    # -- collection jobs and aggregate share jobs -----------------------------------------

    _COLL_COLS = ("task_id, job_id, request, request_hash, state, batch_id, response, error, "
                  "error_detail, attempts, next_attempt_at, created_at, cutoff")

    def put_collection_job(self, job: CollectionJobRecord) -> None:
        if not job.created_at:
            job.created_at = time.time()
        values = list(_vals(job))
        values[4] = str(values[4])
        cur = self.c.execute(f"INSERT INTO collection_jobs ({self._COLL_COLS}) VALUES "
                             f"({','.join(['%s'] * 13)}) ON CONFLICT DO NOTHING", values)
        if cur.rowcount != 1:
            raise StorageError("collection job exists")

    def update_collection_job(self, job: CollectionJobRecord) -> None:
        v = list(_vals(job))
        v[4] = str(v[4])
        self.c.execute("UPDATE collection_jobs SET request=%s, request_hash=%s, state=%s, "
                       "batch_id=%s, response=%s, error=%s, error_detail=%s, attempts=%s, "
                       "next_attempt_at=%s, created_at=%s, cutoff=%s "
                       "WHERE task_id=%s AND job_id=%s", (*v[2:], v[0], v[1]))

    def get_collection_job(self, task_id: bytes, job_id: bytes) -> CollectionJobRecord | None:
        return self._one(CollectionJobRecord, f"SELECT {self._COLL_COLS} FROM collection_jobs "
                         "WHERE task_id=%s AND job_id=%s", (bytes(task_id), bytes(job_id)))

    def find_collection_job_by_hash(self, task_id: bytes, request_hash: bytes
                                    ) -> CollectionJobRecord | None:
        return self._one(CollectionJobRecord, f"SELECT {self._COLL_COLS} FROM collection_jobs "
                         "WHERE task_id=%s AND request_hash=%s AND state!=%s LIMIT 1",
                         (bytes(task_id), bytes(request_hash),
                          str(CollectionJobState.DELETED)))

    def list_collection_jobs(self, states: tuple[CollectionJobState, ...], now: float
                             ) -> list[CollectionJobRecord]:
        return self._all(CollectionJobRecord,
                         f"SELECT {self._COLL_COLS} FROM collection_jobs WHERE "
                         "state = ANY(%s) AND next_attempt_at<=%s ORDER BY created_at",
                         (_slist(states), now))

    _SHARE_COLS = ("task_id, share_id, request, request_hash, state, response, error, "
                   "error_detail, created_at, attempts, next_attempt_at")

    def put_aggregate_share_job(self, job: AggregateShareJobRecord) -> None:
        if not job.created_at:
            job.created_at = time.time()
        values = list(_vals(job))
        values[4] = str(values[4])
        cur = self.c.execute(f"INSERT INTO aggregate_share_jobs ({self._SHARE_COLS}) VALUES "
                             f"({','.join(['%s'] * 11)}) ON CONFLICT DO NOTHING", values)
        if cur.rowcount != 1:
            raise StorageError("aggregate share job exists")

    def update_aggregate_share_job(self, job: AggregateShareJobRecord) -> None:
        v = list(_vals(job))
        v[4] = str(v[4])
        self.c.execute("UPDATE aggregate_share_jobs SET request=%s, request_hash=%s, state=%s, "
                       "response=%s, error=%s, error_detail=%s, created_at=%s, attempts=%s, "
                       "next_attempt_at=%s WHERE task_id=%s AND share_id=%s",
                       (*v[2:], v[0], v[1]))

    def get_aggregate_share_job(self, task_id: bytes, share_id: bytes
                                ) -> AggregateShareJobRecord | None:
        return self._one(AggregateShareJobRecord, f"SELECT {self._SHARE_COLS} FROM "
                         "aggregate_share_jobs WHERE task_id=%s AND share_id=%s",
                         (bytes(task_id), bytes(share_id)))

    def find_aggregate_share_job_by_hash(self, task_id: bytes, request_hash: bytes
                                         ) -> AggregateShareJobRecord | None:
        return self._one(AggregateShareJobRecord, f"SELECT {self._SHARE_COLS} FROM "
                         "aggregate_share_jobs WHERE task_id=%s AND request_hash=%s LIMIT 1",
                         (bytes(task_id), bytes(request_hash)))

    def list_aggregate_share_jobs(self, states: tuple[AggregateShareJobState, ...],
                                  now: float | None = None) -> list[AggregateShareJobRecord]:
        sql = f"SELECT {self._SHARE_COLS} FROM aggregate_share_jobs WHERE state = ANY(%s)"
        args: list[Any] = [_slist(states)]
        if now is not None:
            sql += " AND next_attempt_at<=%s"
            args.append(now)
        return self._all(AggregateShareJobRecord, sql + " ORDER BY created_at", args)

    def list_task_collection_jobs(self, task_id: bytes, states: tuple[CollectionJobState, ...]
                                  ) -> list[CollectionJobRecord]:
        return self._all(CollectionJobRecord,
                         f"SELECT {self._COLL_COLS} FROM collection_jobs WHERE task_id=%s AND "
                         "state = ANY(%s) ORDER BY created_at", (bytes(task_id), _slist(states)))

    _RESULT_COLS = "task_id, batch, agg_param, request, response, created_at"

    def get_batch_result(self, task_id: bytes, batch: bytes, agg_param: bytes
                         ) -> BatchResultRecord | None:
        return self._one(BatchResultRecord, f"SELECT {self._RESULT_COLS} FROM batch_results "
                         "WHERE task_id=%s AND batch=%s AND agg_param=%s",
                         (bytes(task_id), bytes(batch), bytes(agg_param)))

    def list_batch_results(self, task_id: bytes, batch: bytes) -> list[BatchResultRecord]:
        return self._all(BatchResultRecord, f"SELECT {self._RESULT_COLS} FROM batch_results "
                         "WHERE task_id=%s AND batch=%s", (bytes(task_id), bytes(batch)))

    def put_batch_result(self, record: BatchResultRecord) -> bool:
        """Store a released result; False (and nothing changed) if the batch already has
        one for this aggregation parameter."""
        if not record.created_at:
            record.created_at = time.time()
        cur = self.c.execute("INSERT INTO batch_results VALUES (%s,%s,%s,%s,%s,%s) "
                             "ON CONFLICT DO NOTHING", _vals(record))
        return cur.rowcount == 1

    # -- Leader: leader-selected batches --------------------------------------------------

    def put_leader_batch(self, batch: LeaderBatchRecord) -> None:
        if not batch.created_at:
            batch.created_at = time.time()
        cur = self.c.execute("INSERT INTO leader_batches VALUES (%s,%s,%s,%s,%s) "
                             "ON CONFLICT DO NOTHING",
                             (bytes(batch.task_id), bytes(batch.batch_id), batch.assigned,
                              str(batch.state), batch.created_at))
        if cur.rowcount != 1:
            raise StorageError("leader-selected batch exists")

    def update_leader_batch(self, batch: LeaderBatchRecord) -> None:
        self.c.execute("UPDATE leader_batches SET assigned=%s, state=%s WHERE task_id=%s AND "
                       "batch_id=%s", (batch.assigned, str(batch.state), bytes(batch.task_id),
                                       bytes(batch.batch_id)))

    def list_leader_batches(self, task_id: bytes, states: tuple[LeaderBatchState, ...]
                            ) -> list[LeaderBatchRecord]:
        return self._all(LeaderBatchRecord,
                         "SELECT task_id, batch_id, assigned, state, created_at FROM "
                         "leader_batches WHERE task_id=%s AND state = ANY(%s) "
                         "ORDER BY created_at", (bytes(task_id), _slist(states)))

    # -- background work that failed, per task ------------------------------------------

    def get_task_work(self, task_id: bytes) -> TaskWorkRecord | None:
        return self._one(TaskWorkRecord, "SELECT task_id, attempts, next_attempt_at, error "
                         "FROM task_work WHERE task_id=%s", (bytes(task_id),))

    def list_task_work(self) -> list[TaskWorkRecord]:
        return self._all(TaskWorkRecord, "SELECT task_id, attempts, next_attempt_at, error "
                         "FROM task_work", ())

    def put_task_work(self, record: TaskWorkRecord) -> None:
        self.c.execute("INSERT INTO task_work VALUES (%s,%s,%s,%s) ON CONFLICT (task_id) DO "
                       "UPDATE SET attempts=EXCLUDED.attempts, "
                       "next_attempt_at=EXCLUDED.next_attempt_at, error=EXCLUDED.error",
                       _vals(record))

    def task_counters(self, task_id: bytes | None = None) -> dict[str, Any]:
        """The task's counters (dap.storage.counters), read-only. An optional capability
        of a datastore (`dap.server.status` says when one lacks it)."""
        return task_counters(lambda sql, args: self.c.execute(sql, args).fetchall(),
                             "%s", task_id)

    def delete_task_work(self, task_id: bytes) -> None:
        self._write("DELETE FROM task_work WHERE task_id=%s", (bytes(task_id),))

    # -- several processes: leases and due work (as SQLite's) ------------------------------

    def try_lease(self, kind: str, key: bytes, holder: bytes, now: float, duration: float
                  ) -> bool:
        # One statement: insert, or take over a lease that expired or is ours already.
        # ON CONFLICT DO UPDATE locks the row (even when its WHERE refuses): a True holds
        # until the transaction ends.
        cur = self.c.execute(
            "INSERT INTO work_leases VALUES (%s,%s,%s,%s) ON CONFLICT (kind, key) DO UPDATE "
            "SET holder=EXCLUDED.holder, expiry=EXCLUDED.expiry "
            "WHERE work_leases.expiry<=%s OR work_leases.holder=EXCLUDED.holder",
            (kind, bytes(key), bytes(holder), now + duration, now))
        return cur.rowcount == 1

    def release_lease(self, kind: str, key: bytes, holder: bytes) -> None:
        self._write("DELETE FROM work_leases WHERE kind=%s AND key=%s AND holder=%s",
                       (kind, bytes(key), bytes(holder)))

    def tasks_with_new_reports(self, limit: int, after: bytes | None = None) -> list[bytes]:
        # A loose index scan of client_reports_new_tasks (a recursive query, evaluated
        # only as far as the LIMIT asks): one index probe per task with work. (An empty
        # bytea sorts before every task ID: `after` None starts at the first.)
        new = str(ReportState.NEW)
        rows = self.c.execute(
            "WITH RECURSIVE t(task_id) AS ("
            " (SELECT task_id FROM client_reports WHERE state=%s AND task_id>%s"
            " ORDER BY task_id LIMIT 1)"
            " UNION ALL"
            " SELECT (SELECT c.task_id FROM client_reports c WHERE c.state=%s AND"
            " c.task_id>t.task_id ORDER BY c.task_id LIMIT 1) FROM t"
            " WHERE t.task_id IS NOT NULL)"
            " SELECT task_id FROM t WHERE task_id IS NOT NULL LIMIT %s",
            (new, b"" if after is None else bytes(after), new, max(0, limit))).fetchall()
        return [bytes(row[0]) for row in rows]

    def _min(self, sql: str, args: Sequence[Any]) -> float | None:
        row = self.c.execute(sql, args).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def next_work_due(self, role: str) -> float | None:
        times = [self._min("SELECT MIN(GREATEST(next_attempt_at, lease_expiry)) FROM "
                           "aggregation_jobs WHERE role=%s AND state=%s",
                           (role, str(AggregationJobState.ACTIVE)))]
        if role == "leader":
            times.append(self._min(
                "SELECT MIN(next_attempt_at) FROM collection_jobs WHERE state IN (%s,%s)",
                (str(CollectionJobState.START), str(CollectionJobState.COLLECTING))))
        else:
            times.append(self._min(
                "SELECT MIN(next_attempt_at) FROM aggregate_share_jobs WHERE state=%s",
                (str(AggregateShareJobState.START),)))
        due = [t for t in times if t is not None]
        return min(due) if due else None

    # -- retention -------------------------------------------------------------------------

    def get_eviction_horizon(self, task_id: bytes) -> int | None:
        row = self.c.execute("SELECT horizon FROM eviction_horizons WHERE task_id=%s",
                             (bytes(task_id),)).fetchone()
        return None if row is None else int(row[0])

    def set_eviction_horizon(self, task_id: bytes, horizon: int) -> None:
        self.c.execute("INSERT INTO eviction_horizons VALUES (%s,%s) ON CONFLICT (task_id) "
                       "DO UPDATE SET horizon=EXCLUDED.horizon", (bytes(task_id), _t(horizon)))

    def evict_reports_before(self, task_id: bytes, horizon: int) -> int:
        """As `SqliteTransaction.evict_reports_before`. Returns the rows deleted."""
        tid, h = bytes(task_id), _t(horizon)
        active = str(AggregationJobState.ACTIVE)
        deleted = 0
        for sql, args in (
            ("DELETE FROM client_reports WHERE task_id=%s AND time<%s AND state!=%s",
             (tid, h, str(ReportState.IN_JOB))),
            ("DELETE FROM aggregated_reports WHERE task_id=%s AND time<%s", (tid, h)),
            ("DELETE FROM report_aggregations WHERE task_id=%s AND time<%s AND job_id IN "
             "(SELECT job_id FROM aggregation_jobs WHERE task_id=%s AND state!=%s)",
             (tid, h, tid, active)),
            ("DELETE FROM batch_buckets WHERE task_id=%s AND max_time<%s", (tid, h)),
            ("DELETE FROM collected_intervals WHERE task_id=%s AND end_<=%s", (tid, h)),
            ("DELETE FROM collected_agg_params WHERE task_id=%s AND end_<=%s", (tid, h)),
            ("DELETE FROM collected_buckets WHERE task_id=%s AND length(bucket)=32 AND bucket "
             "NOT IN (SELECT bucket FROM batch_buckets WHERE task_id=%s)", (tid, tid)),
            ("DELETE FROM leader_batches WHERE task_id=%s AND state=%s AND batch_id NOT IN "
             "(SELECT bucket FROM batch_buckets WHERE task_id=%s)",
             (tid, str(LeaderBatchState.COLLECTED), tid)),
        ):
            deleted += self.c.execute(sql, args).rowcount
        return deleted

    def delete_finished_jobs(self, task_id: bytes | None, created_before: float) -> int:
        """As `SqliteTransaction.delete_finished_jobs`. Returns the rows deleted."""
        task_sql, task_args = (("task_id=%s AND ", (bytes(task_id),)) if task_id is not None
                               else ("", ()))
        agg_done = _slist((AggregationJobState.FINISHED, AggregationJobState.ABANDONED,
                           AggregationJobState.DELETED))
        coll_done = _slist((CollectionJobState.FINISHED, CollectionJobState.FAILED,
                            CollectionJobState.DELETED))
        share_done = _slist((AggregateShareJobState.FINISHED, AggregateShareJobState.FAILED,
                             AggregateShareJobState.DELETED))
        deleted = 0
        for sql, args in (
            (f"DELETE FROM report_aggregations WHERE {task_sql}(task_id, job_id) IN "
             f"(SELECT task_id, job_id FROM aggregation_jobs WHERE {task_sql}created_at<%s "
             f"AND state = ANY(%s))", (*task_args, *task_args, created_before, agg_done)),
            (f"DELETE FROM aggregation_jobs WHERE {task_sql}created_at<%s AND "
             f"state = ANY(%s)", (*task_args, created_before, agg_done)),
            (f"DELETE FROM client_reports WHERE {task_sql}created_at<%s AND (state=%s OR "
             f"(state=%s AND length(report)=0))",
             (*task_args, created_before, str(ReportState.FAILED),
              str(ReportState.AGGREGATED))),
            (f"DELETE FROM collection_jobs WHERE {task_sql}created_at<%s AND "
             f"state = ANY(%s)", (*task_args, created_before, coll_done)),
            (f"DELETE FROM aggregate_share_jobs WHERE {task_sql}created_at<%s AND "
             f"state = ANY(%s)", (*task_args, created_before, share_done)),
            (f"DELETE FROM batch_results WHERE {task_sql}created_at<%s",
             (*task_args, created_before)),
        ):
            deleted += self.c.execute(sql, args).rowcount
        return deleted


# The text columns of `tasks` that may hold a sealed (binary) value (tokens, options):
# a sealed value is stored as its marked hex form and read back as bytes.
_TASK_TEXT = (6, 7, 8)
_SEALED_TEXT = "ppmsealed:"


def _texts(values: tuple[Any, ...]) -> tuple[Any, ...]:
    out = list(values)
    for i in _TASK_TEXT:
        if isinstance(out[i], bytes):
            out[i] = _SEALED_TEXT + out[i].hex()
    return tuple(out)


def _untexts(values: tuple[Any, ...]) -> tuple[Any, ...]:
    out = list(values)
    for i in _TASK_TEXT:
        if isinstance(out[i], str) and out[i].startswith(_SEALED_TEXT):
            out[i] = bytes.fromhex(out[i][len(_SEALED_TEXT):])
    return tuple(out)


_PUBLIC = [name for name, value in vars(PostgresTransaction).items()
           if callable(value) and not name.startswith("_")]
# The methods that only `_write` (return nothing, read nothing): pipelined.
_DEFERRED = frozenset({
    "update_aggregation_job", "put_bucket", "delete_task_work", "release_lease",
    "set_report_states", "put_report_aggregations",
    "update_report_aggregations"})
assert _DEFERRED <= set(_PUBLIC), _DEFERRED - set(_PUBLIC)


class _Entry:
    """One operation of a transaction, as replayed after an abort: the method, its
    arguments and its outcome (pickled when it returned: the caller may change them); or,
    for a pipelined write (method None), the statements it queued."""

    __slots__ = ("method", "args", "outcome")

    def __init__(self, method: Callable[..., Any] | None, args: Any, outcome: bytes) -> None:
        self.method, self.args, self.outcome = method, args, outcome


def _outcome(result: Any = None, exc: BaseException | None = None) -> bytes:
    if exc is not None:
        return pickle.dumps(("raised", type(exc).__name__, str(exc)))
    if isinstance(result, set):
        # A set's pickle follows its iteration order, which may differ for equal sets.
        return pickle.dumps(("returned set", sorted(result)),
                            protocol=pickle.HIGHEST_PROTOCOL)
    return pickle.dumps(("returned", result), protocol=pickle.HIGHEST_PROTOCOL)


_NONE = _outcome(None)


class _RetryingTransaction(PostgresTransaction):
    """A transaction that survives a serialization failure, a deadlock or a lost
    connection by replaying its operations on a new one (see the module docstring)."""

    def __init__(self, store: PostgresDatastore, read_only: bool = False,
                 exclusive: bool = True) -> None:
        self._read_only = read_only
        self._exclusive = exclusive
        super().__init__(store._begin(read_only, exclusive), store._box)
        self._store = store
        self._log: list[_Entry] = []
        self._retries = 0
        self._owned = True          # self.c is this transaction's, not yet returned
        # Writes pipelined (see PostgresTransaction._write); in a read-only transaction
        # sent at once, to fail there.
        self._pending = None if read_only else []

    def _run(self, method: Callable[..., Any], args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
        while True:
            deferred = method.__name__ in _DEFERRED
            try:
                if not deferred:
                    self._flush()   # what it reads sees the writes before it
                before = len(self._pending or ())
                result = method(self, *args, **kwargs)
            except Exception as exc:
                if _retryable(exc):
                    self._recover(exc)
                    continue
                if not isinstance(exc, psycopg.Error):  # the transaction goes on
                    self._log.append(_Entry(method, pickle.dumps((args, kwargs)),
                                            _outcome(exc=exc)))
                raise
            if deferred and self._pending is not None:
                # Logged as the statements it queued (immutable, already encoded): no
                # pickled copy of its records, which the caller may change afterwards.
                self._log.append(_Entry(None, self._pending[before:], _NONE))
                return result
            # Arguments as they are after the call (it may set created_at on them).
            self._log.append(_Entry(method, pickle.dumps((args, kwargs)), _outcome(result)))
            return result

    def _recover(self, exc: BaseException) -> None:
        """Start a new transaction and replay the log; raises `TransactionConflict` when
        a replayed operation's outcome differs, or the retries are exhausted."""
        store = self._store
        deadline = time.monotonic() + store.reconnect_timeout
        while True:
            self._retries += 1
            lost = not isinstance(exc, _CONFLICTS)
            if self._retries > store.max_retries and not lost:
                raise TransactionConflict(f"transaction aborted {self._retries - 1} times "
                                          f"by PostgreSQL: {_one_line(exc)}") from None
            store._putconn(self.c, broken=lost)
            self._owned = False
            if lost and time.monotonic() > deadline:
                raise StorageError(f"PostgreSQL connection lost: {_one_line(exc)}") from None
            time.sleep(random.uniform(0, 0.005 * min(self._retries, 20)) if not lost
                       else min(0.05 * self._retries, 0.5))
            try:
                self.c = store._begin(self._read_only, self._exclusive)
                self._owned = True
                self._pending = None    # replayed writes are sent at once
                for entry in self._log:
                    if entry.method is None:    # a deferred write's statements
                        for sql, params in entry.args:
                            self.c.execute(sql, params or None)
                        continue
                    args, kwargs = pickle.loads(entry.args)
                    try:
                        outcome = _outcome(entry.method(self, *args, **kwargs))
                    except Exception as replay_exc:
                        if _retryable(replay_exc):
                            raise
                        outcome = _outcome(exc=replay_exc)
                    if outcome != entry.outcome:
                        raise TransactionConflict(
                            "transaction aborted by PostgreSQL and not retried: the data "
                            f"it read changed meanwhile ({_one_line(exc)})") from None
                self._pending = None if self._read_only else []
                return
            except TransactionConflict:
                raise
            except Exception as again:
                if not _retryable(again):
                    raise
                exc = again

    def _commit(self) -> None:
        while True:
            try:
                if self.c.pgconn.transaction_status != _INTRANS:
                    # An operation failed and the caller went on: COMMIT would roll back.
                    raise StorageError("the transaction failed; it was rolled back")
                self._flush("COMMIT")   # the deferred writes and COMMIT: one round trip
                return
            except _CONFLICTS as exc:
                self._recover(exc)
            except psycopg.OperationalError as exc:
                # Committed or not: unknown. Never retried (the caller's answer says so).
                raise StorageError("PostgreSQL connection lost while committing (the "
                                   f"transaction may or may not be stored): {_one_line(exc)}"
                                   ) from None

    def _rollback(self) -> None:
        if not self._owned:
            return
        self._owned = False
        self._store._putconn(self.c, broken=False)


def _logged(name: str) -> Callable[..., Any]:
    method = getattr(PostgresTransaction, name)

    def call(self: _RetryingTransaction, *args: Any, **kwargs: Any) -> Any:
        return self._run(method, args, kwargs)

    call.__name__ = name
    call.__doc__ = method.__doc__
    return call


for _name in _PUBLIC:
    setattr(_RetryingTransaction, _name, _logged(_name))


class PostgresDatastore:
    """The datastore on PostgreSQL (`url`: ``postgresql://USER[:PASSWORD]@HOST:PORT/DB``
    or ``postgres://...``, libpq parameters as query string). A pool of up to
    `pool_size` connections; transactions exclusive (default) or SERIALIZABLE, retried
    where safe (see the module docstring)."""

    def __init__(self, url: str, *, key: bytes | None = None, key_from_env: bool = True,
                 pool_size: int = 4, connect_timeout: float = 10.0,
                 reconnect_timeout: float = 60.0, max_retries: int = 10,
                 concurrency: str = "exclusive") -> None:
        """`concurrency`: "exclusive" (the default) runs one transaction at a time over
        every process sharing the database, as SQLite does (a transaction-scoped advisory
        lock, READ COMMITTED: each statement sees every earlier commit), so no
        transaction is ever aborted for a conflict; "serializable" runs them
        concurrently at SERIALIZABLE, retried where safe and otherwise failing with
        `TransactionConflict` (for callers that retry their work)."""
        if concurrency not in ("exclusive", "serializable"):
            raise StorageError("concurrency must be 'exclusive' or 'serializable'")
        self.concurrency = concurrency
        _check_url(url)
        self.url = url
        self.reconnect_timeout = reconnect_timeout
        self.max_retries = max_retries
        if key is None and key_from_env:
            key = secrets_key_from_env()
        self._box = SecretBox(key) if key is not None else None
        self._closed = False
        self._lock = threading.Lock()
        self._notify_wake = threading.Condition(self._lock)
        # Per role, the tasks of the news to send (None: any task).
        self._notify_roles: dict[str, set[bytes] | None] = {}
        self._notifier: threading.Thread | None = None
        self._listeners: list[tuple[threading.Thread, threading.Event]] = []
        # The server process of this datastore's notifying connection (listen_work(own=)).
        self._notifier_pid = 0
        try:
            conn = psycopg.connect(url, connect_timeout=max(1, int(connect_timeout)),
                                   autocommit=False)
        except psycopg.Error as exc:
            raise StorageError(f"cannot connect to the datastore {redact_url(url)}: "
                               f"{_one_line(exc)}") from None
        try:
            if self._migrate(conn):
                # The plaintext secrets' old row versions: rewritten away (as SQLite's
                # secure_delete; the WAL and old disk blocks are the server's to recycle).
                conn.autocommit = True
                conn.execute("VACUUM FULL tasks")
                conn.execute("VACUUM FULL hpke_keys")
        except psycopg.Error as exc:
            raise StorageError(f"cannot open the datastore {redact_url(url)}: "
                               f"{_one_line(exc)}") from None
        finally:
            conn.close()

        # Transactions are begun and ended by hand (autocommit connections), so that
        # BEGIN and the exclusive mode's lock take one round trip.
        self._begin_sql = ("BEGIN ISOLATION LEVEL SERIALIZABLE" if concurrency == "serializable"
                           else "BEGIN ISOLATION LEVEL READ COMMITTED; "
                                f"SELECT pg_advisory_xact_lock({_TRANSACTION_LOCK})")

        def configure(c: psycopg.Connection[Any]) -> None:
            c.autocommit = True

        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url, min_size=1, max_size=max(1, pool_size), open=False, configure=configure,
            kwargs={"connect_timeout": max(1, int(connect_timeout))}, name="ppm-datastore",
            reconnect_timeout=reconnect_timeout)
        self._pool.open(wait=False)

    @property
    def encrypted(self) -> bool:
        return self._box is not None

    def _migrate(self, conn: psycopg.Connection[Any]) -> bool:
        """Create or migrate the schema, check the datastore key: one transaction, under
        an advisory lock; nothing is written when it fails. Returns whether plaintext
        secrets were sealed."""
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = conn.execute("SELECT version FROM schema_version").fetchone()
            version = 0 if row is None else int(row[0])
            if version > SCHEMA_VERSION:
                raise StorageError(
                    f"the datastore {redact_url(self.url)} has schema version {version}, "
                    f"newer than this code knows ({SCHEMA_VERSION}): upgrade ppm")
            if row is None:
                conn.execute("INSERT INTO schema_version VALUES (0)")
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[target]:
                    conn.execute(statement)
                conn.execute("UPDATE schema_version SET version=%s", (target,))
            if version == 1 and conn.execute("SELECT to_regclass('work_leases')"
                                             ).fetchone() == (None,):
                for statement in _V1_LATE:
                    conn.execute(statement)
            sealed = self._check_key(conn)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        return sealed

    def _check_key(self, conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute("SELECT value FROM secrets_meta WHERE name='key_check'").fetchone()
        box = self._box
        where = redact_url(self.url)
        if row is not None:
            if box is None:
                raise DatastoreKeyError(f"the datastore {where} has encrypted secrets: "
                                        f"set {KEY_ENV} to its key")
            try:
                right = box.open(bytes(row[0]), b"secrets_meta|key_check") == _CHECK
            except DatastoreKeyError:
                right = False
            if not right:
                raise DatastoreKeyError(f"{KEY_ENV} is not the key of the datastore {where} "
                                        "(its secrets do not open)")
            return False
        if box is None:
            return False
        plain = PostgresTransaction(conn, None)
        sealed = PostgresTransaction(conn, box)
        for task in plain.list_tasks():
            sealed.put_task(task)
        for config_id, private_key in conn.execute(
                "SELECT config_id, private_key FROM hpke_keys").fetchall():
            if not is_sealed(private_key):
                conn.execute("UPDATE hpke_keys SET private_key=%s WHERE config_id=%s",
                             (box.seal(bytes(private_key), _key_aad(config_id)), config_id))
        conn.execute("INSERT INTO secrets_meta VALUES ('key_check', %s)",
                     (box.seal(_CHECK, b"secrets_meta|key_check"),))
        return True

    def _getconn(self) -> psycopg.Connection[Any]:
        if self._closed:
            raise StorageError("the datastore is closed")
        try:
            return self._pool.getconn(timeout=self.reconnect_timeout)
        except PoolTimeout:
            raise StorageError(f"no connection to the datastore {redact_url(self.url)} "
                               f"within {self.reconnect_timeout:g} s") from None

    def _begin(self, read_only: bool = False, exclusive: bool = True
               ) -> psycopg.Connection[Any]:
        """A connection of the pool in a new transaction (exclusive: holding the
        transaction lock; `read_only`: a REPEATABLE READ READ ONLY snapshot, without
        it; not `exclusive`: READ COMMITTED without it, see `upload_transaction`)."""
        begin = (_BEGIN_READ if read_only
                 else _BEGIN_UNLOCKED if not exclusive and self.concurrency == "exclusive"
                 else self._begin_sql)
        deadline = time.monotonic() + self.reconnect_timeout
        attempt = 0
        while True:
            conn = self._getconn()
            try:
                conn.execute(begin)
                return conn
            except psycopg.OperationalError as exc:  # a connection lost (server restart)
                self._putconn(conn, broken=True)
                attempt += 1
                if time.monotonic() > deadline:
                    raise StorageError(f"PostgreSQL connection lost: {_one_line(exc)}"
                                       ) from None
                time.sleep(min(0.05 * attempt, 0.5))
            except BaseException:
                self._putconn(conn, broken=True)
                raise

    def _putconn(self, conn: psycopg.Connection[Any], broken: bool) -> None:
        if broken:
            try:
                conn.close()
            except psycopg.Error:
                pass
        elif conn.pgconn.transaction_status != _IDLE:
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                conn.close()
        self._pool.putconn(conn)

    def transaction(self) -> AbstractContextManager[PostgresTransaction]:
        """A transaction (the exclusive mode's, or SERIALIZABLE): committed on success
        (retried where safe), rolled back on error."""
        return self._writing(exclusive=True)

    @contextmanager
    def _writing(self, exclusive: bool) -> Iterator[PostgresTransaction]:
        tx = _RetryingTransaction(self, exclusive=exclusive)
        try:
            yield tx
        except BaseException:
            tx._rollback()
            raise
        try:
            tx._commit()
        except BaseException:
            tx._rollback()
            raise
        tx._owned = False
        self._pool.putconn(tx.c)  # idle: committed

    def upload_transaction(self) -> AbstractContextManager[PostgresTransaction]:
        """A transaction that stores uploaded reports (see
        dap.core.store.Datastore.upload_transaction): in the exclusive mode it runs
        beside the others, READ COMMITTED without the lock (in the serializable mode it
        is any other). What it reads (the eviction horizon, the collected intervals) may
        change before it commits, and job creation checks both again under the lock;
        what it writes is new report rows, whose primary key refuses a report ID twice
        whatever runs beside it (a concurrent insert of the same ID waits for the first
        to end). A deadlock between two of them (report IDs inserted in opposite orders)
        aborts one, which is retried."""
        return self._writing(exclusive=False)

    @contextmanager
    def read(self) -> Iterator[PostgresTransaction]:
        """A transaction that only reads (see dap.core.store.Datastore.read): one
        REPEATABLE READ READ ONLY snapshot, without the exclusive mode's lock, so that it
        neither waits for the writers nor holds them up."""
        tx = _RetryingTransaction(self, read_only=True)
        try:
            yield tx
        finally:
            tx._rollback()

    # -- work notifications (dap.server.scheduling.WorkNotifier): NOTIFY / LISTEN --------
    #
    # Channel "ppm_work_<role>", payload the schema (current_schema()): Aggregators
    # sharing one database in different schemas do not wake each other. Then, space
    # separated, the hex IDs of the tasks the news is about (at most NOTIFY_MAX_TASKS;
    # none: any task), so that a driver looks again only at those tasks' job creation.
    # (A listener of an older version, which compares the whole payload with its schema,
    # ignores such a notification and polls instead.) Each side has a
    # connection of its own (not the pool's: a LISTEN outlives transactions) and a
    # thread: `notify_work` is called by request handlers on an event loop, so it only
    # queues the role; a notification lost (a lost connection) costs the listener one
    # `work_poll_interval`, and a listener that reconnects wakes once (it may have
    # missed some).

    def _side_connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url, autocommit=True, connect_timeout=10)

    def notify_work(self, role: str, task_ids: Iterable[bytes] | None = None) -> None:
        """Wake `role`'s drivers in every process listening on this datastore, with news
        of `task_ids` (None: of any task)."""
        with self._lock:
            if self._closed:
                return
            named = self._notify_roles.get(role, set())
            self._notify_roles[role] = None if task_ids is None or named is None \
                else named | {bytes(t) for t in task_ids}
            if self._notifier is None:
                self._notifier = threading.Thread(target=self._notify_loop, daemon=True,
                                                  name="ppm-pg-notify")
                self._notifier.start()
            self._notify_wake.notify()

    def _notify_loop(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        try:
            while True:
                with self._lock:
                    while not self._notify_roles and not self._closed:
                        self._notify_wake.wait()
                    if self._closed:
                        return
                    roles, self._notify_roles = self._notify_roles, {}
                try:
                    if conn is None or conn.closed:
                        conn = self._side_connect()
                        self._notifier_pid = conn.info.backend_pid
                    for role, named in sorted(roles.items()):
                        names = "" if named is None or len(named) > NOTIFY_MAX_TASKS \
                            else "".join(" " + t.hex() for t in sorted(named))
                        conn.execute("SELECT pg_notify(%s, current_schema() || %s)",
                                     (_channel(role), names))
                except psycopg.Error as exc:
                    log.warning("work notification lost: %s", _one_line(exc))
                    if conn is not None:
                        conn.close()
                    conn = None
                    time.sleep(0.5)
        finally:
            if conn is not None:
                conn.close()

    def listen_work(self, role: str, callback: Callable[[set[bytes] | None], None],
                    own: bool = True) -> None:
        """Call `callback` (from a thread of its own) with the task IDs of the news (None:
        any task) whenever any process calls `notify_work(role)` on this datastore (same
        database and schema); not for this datastore's own notifications unless
        `own`."""
        ready = threading.Event()
        thread = threading.Thread(target=self._listen_loop,
                                  args=(role, callback, ready, own),
                                  daemon=True, name=f"ppm-pg-listen-{role}")
        with self._lock:
            if self._closed:
                raise StorageError("the datastore is closed")
            self._listeners.append((thread, ready))
        thread.start()

    def wait_listening(self, timeout: float) -> bool:
        """Whether every `listen_work` listener is listening (waits up to `timeout`
        seconds): from then on no notification is missed (a listener starts in the
        background, not to block the caller's event loop)."""
        deadline = time.monotonic() + timeout
        return all(ready.wait(max(0.0, deadline - time.monotonic()))
                   for _, ready in list(self._listeners))

    def _listen_loop(self, role: str, callback: Callable[[set[bytes] | None], None],
                     ready: threading.Event, own: bool) -> None:
        failures = 0
        while not self._closed:
            try:
                with self._side_connect() as conn:
                    schema = conn.execute("SELECT current_schema()").fetchone()
                    mine = None if schema is None else schema[0]
                    conn.execute(f'LISTEN "{_channel(role)}"')
                    ready.set()
                    if failures and not _call(callback, None):
                        return  # (notifications may have been missed meanwhile)
                    failures = 0
                    while not self._closed:
                        for note in conn.notifies(timeout=0.5):
                            ours, task_ids = _news_of(note.payload, mine)
                            if ours and (own or note.pid != self._notifier_pid) \
                                    and not _call(callback, task_ids):
                                return
            except psycopg.Error as exc:
                if self._closed:
                    return
                failures += 1
                log.warning("work notifications: %s; listening again", _one_line(exc))
                time.sleep(min(0.2 * failures, 5.0))

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._notify_wake.notify_all()
                self._pool.close()
        for thread, _ in self._listeners:
            if thread is not threading.current_thread():
                thread.join(timeout=5)


def _news_of(payload: str, schema: str | None) -> tuple[bool, set[bytes] | None]:
    """Whether a work notification's payload is for `schema` (the listener's), and the
    task IDs it names (None: any task). The payload is the schema, then " " and a hex ID
    per task. A (quoted) schema name may itself contain spaces: the schema is matched as
    a whole, and a rest that is not hex IDs is another schema's name ("a b" is not
    schema "a" naming a task)."""
    if schema is None or not (payload == schema or payload.startswith(schema + " ")):
        return False, None
    try:
        ids = {bytes.fromhex(name) for name in payload[len(schema):].split()}
    except ValueError:
        return False, None
    return True, ids or None


def _call(callback: Callable[[set[bytes] | None], None], task_ids: set[bytes] | None
          ) -> bool:
    """Run a listener's callback; False (stop listening) when it fails (e.g. its event
    loop was closed)."""
    try:
        callback(task_ids)
    except Exception as exc:  # noqa: BLE001 - the listener stops, the datastore goes on
        log.info("work listener stopped: %s", _one_line(exc))
        return False
    return True


def _channel(role: str) -> str:
    return "ppm_work_" + re.sub(r"[^a-z0-9_]", "_", role.lower())

