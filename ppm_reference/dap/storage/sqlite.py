"""SQLite backend of the datastore: WAL mode, one `BEGIN IMMEDIATE` transaction per
state change, versioned schema.

`synchronous=FULL` by default: a transaction that returned is on disk, so a report
acknowledged to a client survives a process crash and a power loss. `NORMAL` (still
crash-safe for the process, not for power loss) may be chosen for speed.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import astuple, fields
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar

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
    iter_chunks,
)
from ppm_reference.dap.storage.counters import task_counters
from ppm_reference.dap.storage.secrets import (
    KEY_ENV,
    DatastoreKeyError,
    SecretBox,
    is_sealed,
)
from ppm_reference.dap.storage.secrets import (
    key_from_env as secrets_key_from_env,
)

SCHEMA_VERSION = 2

# Version 1, the tables every datastore starts from; `_MIGRATIONS` bring it up to date.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    task_id BLOB PRIMARY KEY, role TEXT NOT NULL, profile TEXT NOT NULL, config BLOB NOT NULL,
    vdaf_verify_key BLOB NOT NULL, collector_hpke_config BLOB NOT NULL,
    aggregator_auth_token TEXT NOT NULL, collector_auth_token TEXT, options TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hpke_keys (
    config_id INTEGER PRIMARY KEY, config BLOB NOT NULL, private_key BLOB NOT NULL,
    state TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS client_reports (
    task_id BLOB NOT NULL, report_id BLOB NOT NULL, time INTEGER NOT NULL, report BLOB NOT NULL,
    state TEXT NOT NULL, aggregation_job_id BLOB, error INTEGER, created_at REAL NOT NULL,
    PRIMARY KEY (task_id, report_id));
CREATE INDEX IF NOT EXISTS client_reports_state ON client_reports (task_id, state, time);
-- The order of list_new_reports (and oldest_new_report_age's MIN): the next new reports
-- are read from the index, O(limit), instead of sorting the task's whole backlog.
CREATE INDEX IF NOT EXISTS client_reports_new
    ON client_reports (task_id, state, created_at, report_id);
CREATE TABLE IF NOT EXISTS aggregation_jobs (
    task_id BLOB NOT NULL, job_id BLOB NOT NULL, role TEXT NOT NULL, state TEXT NOT NULL,
    step INTEGER NOT NULL, agg_param BLOB NOT NULL, batch_id BLOB, request BLOB NOT NULL,
    request_hash BLOB NOT NULL, last_continue_hash BLOB NOT NULL, response BLOB,
    helper_url TEXT, attempts INTEGER NOT NULL, next_attempt_at REAL NOT NULL,
    lease_expiry REAL NOT NULL, error TEXT, created_at REAL NOT NULL,
    PRIMARY KEY (task_id, job_id));
CREATE INDEX IF NOT EXISTS aggregation_jobs_hash ON aggregation_jobs (task_id, request_hash);
CREATE INDEX IF NOT EXISTS aggregation_jobs_state ON aggregation_jobs (role, state);
CREATE TABLE IF NOT EXISTS report_aggregations (
    task_id BLOB NOT NULL, job_id BLOB NOT NULL, ord INTEGER NOT NULL, report_id BLOB NOT NULL,
    time INTEGER NOT NULL, state TEXT NOT NULL, verify_state BLOB, error INTEGER,
    min_batch_bound INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, job_id, ord));
CREATE TABLE IF NOT EXISTS aggregated_reports (
    task_id BLOB NOT NULL, report_id BLOB NOT NULL, PRIMARY KEY (task_id, report_id));
CREATE TABLE IF NOT EXISTS batch_buckets (
    task_id BLOB NOT NULL, bucket BLOB NOT NULL, agg_param BLOB NOT NULL, agg_share BLOB,
    report_count INTEGER NOT NULL, checksum BLOB NOT NULL, min_time INTEGER, max_time INTEGER,
    min_batch_bound INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, bucket, agg_param));
CREATE TABLE IF NOT EXISTS collected_intervals (
    task_id BLOB NOT NULL, start INTEGER NOT NULL, end_ INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS collected_intervals_task ON collected_intervals (task_id, start);
CREATE TABLE IF NOT EXISTS report_agg_params (
    task_id BLOB NOT NULL, report_id BLOB NOT NULL, agg_param BLOB NOT NULL,
    seq INTEGER PRIMARY KEY AUTOINCREMENT, UNIQUE (task_id, report_id, agg_param));
CREATE TABLE IF NOT EXISTS collected_agg_params (
    task_id BLOB NOT NULL, start INTEGER NOT NULL, end_ INTEGER NOT NULL,
    agg_param BLOB NOT NULL, PRIMARY KEY (task_id, start, end_, agg_param));
CREATE TABLE IF NOT EXISTS collected_buckets (
    task_id BLOB NOT NULL, bucket BLOB NOT NULL, PRIMARY KEY (task_id, bucket));
CREATE TABLE IF NOT EXISTS collection_jobs (
    task_id BLOB NOT NULL, job_id BLOB NOT NULL, request BLOB NOT NULL,
    request_hash BLOB NOT NULL, state TEXT NOT NULL, batch_id BLOB, response BLOB, error TEXT,
    error_detail TEXT, attempts INTEGER NOT NULL, next_attempt_at REAL NOT NULL,
    created_at REAL NOT NULL, PRIMARY KEY (task_id, job_id));
CREATE INDEX IF NOT EXISTS collection_jobs_hash ON collection_jobs (task_id, request_hash);
CREATE TABLE IF NOT EXISTS aggregate_share_jobs (
    task_id BLOB NOT NULL, share_id BLOB NOT NULL, request BLOB NOT NULL,
    request_hash BLOB NOT NULL, state TEXT NOT NULL, response BLOB, error TEXT,
    error_detail TEXT, created_at REAL NOT NULL, PRIMARY KEY (task_id, share_id));
CREATE INDEX IF NOT EXISTS aggregate_share_jobs_hash
    ON aggregate_share_jobs (task_id, request_hash);
CREATE TABLE IF NOT EXISTS secrets_meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS leader_batches (
    task_id BLOB NOT NULL, batch_id BLOB NOT NULL, assigned INTEGER NOT NULL, state TEXT NOT NULL,
    created_at REAL NOT NULL, PRIMARY KEY (task_id, batch_id));
-- Several processes per Aggregator (dap.server.scheduling), additive (no version change):
-- named leases (job creation per task, collection jobs, retention) and the indexes of
-- the queries that find due work without looking at every task.
CREATE TABLE IF NOT EXISTS work_leases (
    kind TEXT NOT NULL, key BLOB NOT NULL, holder BLOB NOT NULL, expiry REAL NOT NULL,
    PRIMARY KEY (kind, key));
CREATE INDEX IF NOT EXISTS client_reports_new_tasks ON client_reports (state, task_id);
CREATE INDEX IF NOT EXISTS aggregation_jobs_due
    ON aggregation_jobs (role, state, next_attempt_at);
CREATE INDEX IF NOT EXISTS collection_jobs_due ON collection_jobs (state, next_attempt_at);
CREATE INDEX IF NOT EXISTS aggregate_share_jobs_state ON aggregate_share_jobs (state);
"""

# (table, column, declaration) added to the schema after version 1, in order: the
# minimum batch size bounds of reports (dap.common.MIN_BATCH_SIZE_EXTENSION).
_ADDED_COLUMNS = (
    ("report_aggregations", "min_batch_bound", "INTEGER NOT NULL DEFAULT 0"),
    ("batch_buckets", "min_batch_bound", "INTEGER NOT NULL DEFAULT 0"),
    # The aggregation job lease's holder (AggregationJobRecord.lease_token).
    ("aggregation_jobs", "lease_token", "BLOB NOT NULL DEFAULT x''"),
)

# Schema version -> the statements that bring the previous version to it. A datastore of
# an older version is migrated when it is opened (in one transaction).
_MIGRATIONS: dict[int, list[str]] = {
    2: [
        # Collection that completes the pending jobs and moves on (dap.core.leader).
        "ALTER TABLE collection_jobs ADD COLUMN cutoff REAL NOT NULL DEFAULT 0",
        "UPDATE collection_jobs SET cutoff = created_at",
        # Retention: replay records are evicted by report time (dap.core.retention).
        "ALTER TABLE aggregated_reports ADD COLUMN time INTEGER",
        "UPDATE aggregated_reports SET time = (SELECT MIN(r.time) FROM report_aggregations r"
        " WHERE r.task_id = aggregated_reports.task_id"
        " AND r.report_id = aggregated_reports.report_id)",
        "CREATE INDEX IF NOT EXISTS aggregated_reports_time ON aggregated_reports (task_id, time)",
        "CREATE INDEX IF NOT EXISTS client_reports_time ON client_reports (task_id, time)",
        "CREATE INDEX IF NOT EXISTS aggregation_jobs_created ON aggregation_jobs (created_at)",
        # Error isolation: failed background attempts of the Helper's aggregate shares.
        "ALTER TABLE aggregate_share_jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE aggregate_share_jobs ADD COLUMN next_attempt_at REAL NOT NULL DEFAULT 0",
        # What the Leader released per batch (never computed or noised twice).
        "CREATE TABLE IF NOT EXISTS batch_results (task_id BLOB NOT NULL, batch BLOB NOT NULL,"
        " agg_param BLOB NOT NULL, request BLOB NOT NULL, response BLOB NOT NULL,"
        " created_at REAL NOT NULL, PRIMARY KEY (task_id, batch, agg_param))",
        "CREATE TABLE IF NOT EXISTS task_work (task_id BLOB PRIMARY KEY,"
        " attempts INTEGER NOT NULL, next_attempt_at REAL NOT NULL, error TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS eviction_horizons (task_id BLOB PRIMARY KEY,"
        " horizon INTEGER NOT NULL)",
    ],
}

R = TypeVar("R")

# Times are uint64 (DAP-18 Section 4.1.1), SQLite's INTEGER is int64: times and interval
# starts are clamped to T = 2^63 - 2, interval ends to T + 1. No accepted report has a time
# near T (it would be too early), so no comparison with a report's time changes, and an
# overlap of intervals is never missed (one beyond T, where no report can be, may be seen).
_TIME_MAX = (1 << 63) - 2


def _t(value: int) -> int:
    return min(value, _TIME_MAX)


def _end(value: int) -> int:
    return min(value, _TIME_MAX + 1)


# Rows per multi-row statement: at most 9 values each, under SQLite's 32,766 bound
# parameters.
_ROWS_PER_INSERT = 500

# Statements over many rows are set-based here (one statement per chunk of rows, not one
# per row: `executemany`, or RETURNING, which steps once per row returned). The sqlite3
# module releases the GIL at every step of a statement, and while another thread waits
# for it (the event loop serving requests beside a job's transaction) each release hands
# it over and back. Measured (10-row updates in a transaction, a busy thread beside it):
# 0.29 ms per transaction with a statement per row, 0.10 ms with one statement; 0.071 and
# 0.021 ms alone. UPDATE ... FROM needs SQLite 3.33.
_UPDATE_FROM = sqlite3.sqlite_version_info >= (3, 33, 0)


def _row(cls: type[R], row: sqlite3.Row | tuple[Any, ...] | None) -> R | None:
    # The sqlite3 module returns a BLOB as bytes (no text_factory or converters are set
    # here), so a row's values are the record's as they are.
    return None if row is None else cls(*row)


class SqliteTransaction:
    """One transaction on a SQLite connection (see `dap.storage.Transaction`). With a
    `box`, the secrets of tasks and HPKE keys are sealed when written (dap.storage.secrets)
    and opened when read."""

    def __init__(self, conn: sqlite3.Connection, box: SecretBox | None = None) -> None:
        self.c = conn
        self.box = box

    def _one(self, cls: type[R], sql: str, args: tuple[Any, ...]) -> R | None:
        return _row(cls, self.c.execute(sql, args).fetchone())

    def _all(self, cls: type[R], sql: str, args: tuple[Any, ...]) -> list[R]:
        return [r for r in (_row(cls, row) for row in self.c.execute(sql, args)) if r is not None]

    # -- tasks and keys ------------------------------------------------------------------

    def put_task(self, task: TaskRecord) -> None:
        self.c.execute("INSERT OR REPLACE INTO tasks VALUES (?,?,?,?,?,?,?,?,?)",
                       _seal_task(self.box, astuple(task)))

    def get_task(self, task_id: bytes) -> TaskRecord | None:
        row = self.c.execute("SELECT * FROM tasks WHERE task_id=?",
                             (bytes(task_id),)).fetchone()
        return None if row is None else _row(TaskRecord, _open_task(self.box, tuple(row)))

    def list_tasks(self) -> list[TaskRecord]:
        rows = self.c.execute("SELECT * FROM tasks ORDER BY task_id").fetchall()
        return [r for r in (_row(TaskRecord, _open_task(self.box, tuple(row)))
                            for row in rows) if r is not None]

    def delete_task(self, task_id: bytes) -> None:
        self.c.execute("DELETE FROM tasks WHERE task_id=?", (bytes(task_id),))

    def put_hpke_key(self, key: HpkeKeyRecord) -> None:
        if not key.created_at:
            key.created_at = time.time()
        values = list(astuple(key))
        if self.box is not None:
            values[2] = self.box.seal(bytes(key.private_key), _key_aad(key.config_id))
        try:
            self.c.execute("INSERT INTO hpke_keys VALUES (?,?,?,?,?)", values)
        except sqlite3.IntegrityError:
            raise StorageError(f"HPKE config id {key.config_id} is already in use") from None

    def list_hpke_keys(self) -> list[HpkeKeyRecord]:
        rows = self.c.execute("SELECT * FROM hpke_keys ORDER BY created_at DESC").fetchall()
        out = []
        for row in rows:
            values = list(row)
            values[2] = _open_value(self.box, values[2], _key_aad(values[0]))
            rec = _row(HpkeKeyRecord, tuple(values))
            assert rec is not None
            out.append(rec)
        return out

    def set_hpke_key_state(self, config_id: int, state: HpkeKeyState) -> None:
        cur = self.c.execute("UPDATE hpke_keys SET state=? WHERE config_id=?",
                             (HpkeKeyState(state), config_id))
        if cur.rowcount != 1:
            raise StorageError(f"no HPKE key with config id {config_id}")

    def delete_hpke_key(self, config_id: int) -> None:
        self.c.execute("DELETE FROM hpke_keys WHERE config_id=?", (config_id,))

    # -- Leader: uploaded reports ---------------------------------------------------------

    def put_client_report(self, report: ClientReportRecord) -> bool:
        return bool(self.put_client_reports([report]))

    def put_client_reports(self, reports: Sequence[ClientReportRecord]
                           ) -> set[tuple[bytes, bytes]]:
        # A statement per report cost a tenth of an upload's commit in Python calls; one
        # INSERT ... RETURNING per chunk still stepped once per report (see the note on
        # set-based statements above _UPDATE_FROM).
        now = time.time()
        for r in reports:
            if not r.created_at:
                r.created_at = now
        # The IDs already stored, in one statement per chunk; then the others are inserted
        # (the first of a pair repeated in `reports`), in one statement per chunk. The
        # transaction holds the write lock: nothing is stored in between.
        keys = [(bytes(r.task_id), bytes(r.report_id)) for r in reports]
        taken = self._stored_report_keys(keys)
        rows = []
        inserted: set[tuple[bytes, bytes]] = set()
        for key, r in zip(keys, reports, strict=True):
            if key not in taken and key not in inserted:
                inserted.add(key)
                rows.append((*key, r.time, r.report, r.state, r.aggregation_job_id, r.error,
                             r.created_at))
        self._insert_many("INSERT INTO client_reports VALUES", rows)
        return inserted

    def _stored_report_keys(self, keys: Sequence[tuple[bytes, bytes]]
                            ) -> set[tuple[bytes, bytes]]:
        """Which (task_id, report_id) of `keys` client_reports holds: a join with the
        keys (a search of the primary key each; `(a, b) IN (VALUES ...)` would scan the
        table)."""
        out: set[tuple[bytes, bytes]] = set()
        for chunk in iter_chunks(keys, _ROWS_PER_INSERT):
            out.update(self.c.execute(
                f"WITH k(t, r) AS (VALUES {','.join(['(?,?)'] * len(chunk))}) "
                "SELECT x.task_id, x.report_id FROM k JOIN client_reports x "
                "ON x.task_id = k.t AND x.report_id = k.r",
                [v for key in chunk for v in key]))
        return out

    def _insert_many(self, insert: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """`insert` VALUES (one group per row), one statement per _ROWS_PER_INSERT rows."""
        for chunk in iter_chunks(rows, _ROWS_PER_INSERT):
            group = "(" + ",".join("?" * len(chunk[0])) + ")"
            self.c.execute(f"{insert} {','.join([group] * len(chunk))}",
                           [v for row in chunk for v in row])

    def get_client_reports(self, task_id: bytes, report_ids: list[bytes]
                           ) -> list[ClientReportRecord]:
        out: list[ClientReportRecord] = []
        for chunk in iter_chunks([bytes(r) for r in report_ids]):
            marks = ",".join("?" * len(chunk))
            out += self._all(ClientReportRecord,
                             f"SELECT * FROM client_reports WHERE task_id=? AND report_id IN "
                             f"({marks})", (bytes(task_id), *chunk))
        return out

    def list_new_reports(self, task_id: bytes, limit: int,
                         held: Sequence[tuple[int, int, float]] = ()
                         ) -> list[ClientReportRecord]:
        """New reports, oldest first, without the `held` ones: (start, end, cutoff) holds
        back the reports with start <= time < end uploaded after cutoff."""
        sql = "SELECT * FROM client_reports WHERE task_id=? AND state=?"
        args: list[Any] = [bytes(task_id), ReportState.NEW]
        for start, end, cutoff in held:
            sql += " AND NOT (time>=? AND time<? AND created_at>?)"
            args += [_t(start), _end(end), cutoff]
        return self._all(ClientReportRecord, sql + " ORDER BY created_at, report_id LIMIT ?",
                         (*args, limit))

    def count_reports(self, task_id: bytes, states: tuple[ReportState, ...],
                      time_from: int | None = None, time_to: int | None = None,
                      created_before: float | None = None) -> int:
        sql = (f"SELECT COUNT(*) FROM client_reports WHERE task_id=? AND state IN "
               f"({','.join('?' * len(states))})")
        args: list[Any] = [bytes(task_id), *states]
        if created_before is not None:
            sql += " AND created_at < ?"
            args.append(created_before)
        if time_from is not None:
            sql += " AND time >= ?"
            args.append(_t(time_from))
        if time_to is not None:
            sql += " AND time < ?"
            args.append(_end(time_to))
        return int(self.c.execute(sql, args).fetchone()[0])

    def oldest_new_report_age(self, task_id: bytes, now: float) -> float | None:
        row = self.c.execute("SELECT MIN(created_at) FROM client_reports WHERE task_id=? AND "
                             "state=?", (bytes(task_id), ReportState.NEW)).fetchone()
        return None if row[0] is None else now - float(row[0])

    def set_report_states(self, task_id: bytes, report_ids: list[bytes], state: ReportState,
                          job_id: bytes | None = None, error: int | None = None,
                          drop_encodings: bool = False) -> None:
        drop = ", report=x''" if drop_encodings else ""
        for chunk in iter_chunks([bytes(r) for r in report_ids]):
            self.c.execute(
                f"UPDATE client_reports SET state=?, aggregation_job_id=?, error=?{drop} "
                f"WHERE task_id=? AND report_id IN ({','.join('?' * len(chunk))})",
                (state, job_id, error, bytes(task_id), *chunk))

    # -- aggregation jobs -----------------------------------------------------------------

    _AGG_COLS = ("task_id, job_id, role, state, step, agg_param, batch_id, request, request_hash,"
                 " last_continue_hash, response, helper_url, attempts, next_attempt_at,"
                 " lease_expiry, error, created_at, lease_token")

    def put_aggregation_job(self, job: AggregationJobRecord) -> None:
        if not job.created_at:
            job.created_at = time.time()
        try:
            self.c.execute(f"INSERT INTO aggregation_jobs ({self._AGG_COLS}) VALUES "
                           f"({','.join('?' * 18)})", _bytes_tuple(job))
        except sqlite3.IntegrityError:
            raise StorageError("aggregation job exists") from None

    def update_aggregation_job(self, job: AggregationJobRecord) -> None:
        cols = [f.name for f in fields(job)][2:]
        values = _bytes_tuple(job)
        self.c.execute(
            f"UPDATE aggregation_jobs SET {', '.join(c + '=?' for c in cols)} "
            "WHERE task_id=? AND job_id=?", (*values[2:], values[0], values[1]))

    def get_aggregation_job(self, task_id: bytes, job_id: bytes) -> AggregationJobRecord | None:
        return self._one(AggregationJobRecord,
                         f"SELECT {self._AGG_COLS} FROM aggregation_jobs WHERE task_id=? AND "
                         "job_id=?", (bytes(task_id), bytes(job_id)))

    def find_aggregation_job_by_hash(self, task_id: bytes, request_hash: bytes
                                     ) -> AggregationJobRecord | None:
        return self._one(AggregationJobRecord,
                         f"SELECT {self._AGG_COLS} FROM aggregation_jobs WHERE task_id=? AND "
                         "request_hash=?", (bytes(task_id), request_hash))

    def acquire_aggregation_jobs(self, role: str, now: float, lease: float, limit: int
                                 ) -> list[AggregationJobRecord]:
        jobs = self._all(AggregationJobRecord,
                         f"SELECT {self._AGG_COLS} FROM aggregation_jobs WHERE role=? AND "
                         "state=? AND lease_expiry<=? AND next_attempt_at<=? "
                         "ORDER BY next_attempt_at, created_at LIMIT ?",
                         (role, AggregationJobState.ACTIVE, now, now, limit))
        # BEGIN IMMEDIATE: no other process reads between the SELECT and the UPDATEs.
        for job in jobs:
            job.lease_expiry = now + lease
            job.lease_token = os.urandom(16)
            self.c.execute("UPDATE aggregation_jobs SET lease_expiry=?, lease_token=? WHERE "
                           "task_id=? AND job_id=?",
                           (job.lease_expiry, job.lease_token, job.task_id, job.job_id))
        return jobs

    def get_leased_aggregation_job(self, task_id: bytes, job_id: bytes, lease_token: bytes,
                                   with_request: bool = True) -> AggregationJobRecord | None:
        cols = self._AGG_COLS if with_request else self._AGG_COLS.replace(
            " request,", " x'' AS request,", 1)
        return self._one(AggregationJobRecord,
                         f"SELECT {cols} FROM aggregation_jobs WHERE task_id=? AND "
                         "job_id=? AND lease_token=?",
                         (bytes(task_id), bytes(job_id), bytes(lease_token)))

    def count_active_aggregation_jobs(self, task_id: bytes, batch_id: bytes | None = None,
                                      time_from: int | None = None,
                                      time_to: int | None = None) -> int:
        sql = "SELECT COUNT(*) FROM aggregation_jobs j WHERE j.task_id=? AND j.state=?"
        args: list[Any] = [bytes(task_id), AggregationJobState.ACTIVE]
        if batch_id is not None:
            sql += " AND j.batch_id=?"
            args.append(bytes(batch_id))
        if time_from is not None and time_to is not None:
            sql += (" AND EXISTS (SELECT 1 FROM report_aggregations r WHERE r.task_id=j.task_id"
                    " AND r.job_id=j.job_id AND r.time>=? AND r.time<?)")
            args += [_t(time_from), _end(time_to)]
        return int(self.c.execute(sql, args).fetchone()[0])

    def put_report_aggregations(self, records: list[ReportAggregationRecord]) -> None:
        self._insert_many("INSERT INTO report_aggregations VALUES",
                          [(*v[:4], _t(v[4]), *v[5:]) for v in map(_bytes_tuple, records)])

    def get_report_aggregations(self, task_id: bytes, job_id: bytes
                                ) -> list[ReportAggregationRecord]:
        return self._all(ReportAggregationRecord,
                         "SELECT * FROM report_aggregations WHERE task_id=? AND job_id=? "
                         "ORDER BY ord", (bytes(task_id), bytes(job_id)))

    def update_report_aggregation(self, record: ReportAggregationRecord) -> None:
        self.c.execute("UPDATE report_aggregations SET state=?, verify_state=?, error=? "
                       "WHERE task_id=? AND job_id=? AND ord=?",
                       (record.state, record.verify_state, record.error, bytes(record.task_id),
                        bytes(record.job_id), record.ord))

    def update_report_aggregations(self, records: Sequence[ReportAggregationRecord]
                                   ) -> None:
        rows = [(bytes(r.task_id), bytes(r.job_id), r.ord, r.state, r.verify_state, r.error)
                for r in records]
        if not _UPDATE_FROM:
            self.c.executemany(
                "UPDATE report_aggregations SET state=?4, verify_state=?5, error=?6 "
                "WHERE task_id=?1 AND job_id=?2 AND ord=?3", rows)
            return
        for chunk in iter_chunks(rows, _ROWS_PER_INSERT):
            self.c.execute(
                "WITH u(task_id, job_id, ord, state, verify_state, error) AS (VALUES "
                f"{','.join(['(?,?,?,?,?,?)'] * len(chunk))}) UPDATE report_aggregations "
                "SET state=u.state, verify_state=u.verify_state, error=u.error FROM u "
                "WHERE report_aggregations.task_id=u.task_id AND "
                "report_aggregations.job_id=u.job_id AND report_aggregations.ord=u.ord",
                [v for row in chunk for v in row])

    # -- replay protection and batch buckets ----------------------------------------------

    def is_report_aggregated(self, task_id: bytes, report_id: bytes) -> bool:
        return self.c.execute("SELECT 1 FROM aggregated_reports WHERE task_id=? AND report_id=?",
                              (bytes(task_id), bytes(report_id))).fetchone() is not None

    def mark_report_aggregated(self, task_id: bytes, report_id: bytes,
                               time: int | None = None) -> bool:
        return bool(self.mark_reports_aggregated(task_id, [(report_id, time)]))

    def aggregated_among(self, task_id: bytes, report_ids: Sequence[bytes]) -> set[bytes]:
        out: set[bytes] = set()
        for chunk in iter_chunks([bytes(r) for r in report_ids]):
            marks = ",".join("?" * len(chunk))
            out.update(bytes(row[0]) for row in self.c.execute(
                f"SELECT report_id FROM aggregated_reports WHERE task_id=? AND report_id IN "
                f"({marks})", (bytes(task_id), *chunk)))
        return out

    def guard_uploads(self, task_ids: Sequence[bytes], exclusive: bool = False) -> None:
        pass  # one writer at a time (BEGIN IMMEDIATE): never beside the freeze

    def mark_reports_aggregated(self, task_id: bytes,
                                reports: Sequence[tuple[bytes, int | None]]) -> set[bytes]:
        # As put_client_reports: the IDs marked already, then the others inserted.
        tid = bytes(task_id)
        taken = self.aggregated_among(tid, [rid for rid, _ in reports])
        rows = []
        marked: set[bytes] = set()
        for rid, t in reports:
            rid = bytes(rid)
            if rid not in taken and rid not in marked:
                marked.add(rid)
                rows.append((tid, rid, None if t is None else _t(t)))
        self._insert_many("INSERT INTO aggregated_reports (task_id, report_id, time) VALUES",
                          rows)
        return marked

    def get_bucket(self, task_id: bytes, bucket: bytes, agg_param: bytes
                   ) -> BatchBucketRecord | None:
        row = self.c.execute("SELECT * FROM batch_buckets WHERE task_id=? AND bucket=? AND "
                             "agg_param=?", (bytes(task_id), bytes(bucket), agg_param)).fetchone()
        if row is None:
            return None
        rec = _row(BatchBucketRecord, (*row, False))
        assert rec is not None
        rec.collected = self.is_bucket_collected(task_id, bucket)
        return rec

    def put_bucket(self, record: BatchBucketRecord) -> None:
        self.c.execute("INSERT OR REPLACE INTO batch_buckets VALUES (?,?,?,?,?,?,?,?,?)",
                       _bytes_tuple(record)[:9])

    def list_buckets(self, task_id: bytes, buckets: list[bytes] | None = None
                     ) -> list[BatchBucketRecord]:
        rows: list[Any] = []
        if buckets is None:
            rows = list(self.c.execute("SELECT * FROM batch_buckets WHERE task_id=?",
                                       (bytes(task_id),)))
        else:
            for chunk in iter_chunks([bytes(b) for b in buckets]):
                rows += list(self.c.execute(
                    f"SELECT * FROM batch_buckets WHERE task_id=? AND bucket IN "
                    f"({','.join('?' * len(chunk))})", (bytes(task_id), *chunk)))
        collected = {bytes(r[0]) for r in self.c.execute(
            "SELECT bucket FROM collected_buckets WHERE task_id=?", (bytes(task_id),))}
        out = []
        for row in rows:
            rec = _row(BatchBucketRecord, (*row, False))
            assert rec is not None
            rec.collected = rec.bucket in collected
            out.append(rec)
        return out

    def is_bucket_collected(self, task_id: bytes, bucket: bytes) -> bool:
        return self.c.execute("SELECT 1 FROM collected_buckets WHERE task_id=? AND bucket=?",
                              (bytes(task_id), bytes(bucket))).fetchone() is not None

    def list_buckets_in_range(self, task_id: bytes, low: bytes, high: bytes
                              ) -> list[BatchBucketRecord]:
        """Buckets with `low <= bucket < high` (bytewise; encoded Intervals sort by start)."""
        rows = self.c.execute("SELECT * FROM batch_buckets WHERE task_id=? AND bucket>=? AND "
                              "bucket<?", (bytes(task_id), low, high))
        out = []
        for row in rows:
            rec = _row(BatchBucketRecord, (*row, False))
            assert rec is not None
            out.append(rec)
        return out

    def mark_interval_collected(self, task_id: bytes, start: int, end: int) -> None:
        self.c.execute("INSERT INTO collected_intervals VALUES (?,?,?)",
                       (bytes(task_id), _t(start), _end(end)))

    def unmark_interval_collected(self, task_id: bytes, start: int, end: int) -> None:
        self.c.execute("DELETE FROM collected_intervals WHERE task_id=? AND start=? AND end_=?",
                       (bytes(task_id), _t(start), _end(end)))

    def unmark_buckets_collected(self, task_id: bytes, buckets: list[bytes]) -> None:
        self.c.executemany("DELETE FROM collected_buckets WHERE task_id=? AND bucket=?",
                           [(bytes(task_id), bytes(b)) for b in buckets])

    def interval_overlaps_collected(self, task_id: bytes, start: int, end: int) -> bool:
        return self.c.execute("SELECT 1 FROM collected_intervals WHERE task_id=? AND start<? "
                              "AND end_>? LIMIT 1", (bytes(task_id), _end(end), _t(start))
                              ).fetchone() is not None

    def commit_context(self, task_id: bytes, times: Sequence[int], buckets: Sequence[bytes]
                       ) -> tuple[int | None, set[int], set[bytes]]:
        # In process: no round trip to save, the queries one by one.
        return (self.get_eviction_horizon(task_id),
                {t for t in set(times) if self.interval_overlaps_collected(task_id, t, t + 1)},
                {bytes(b) for b in set(buckets) if self.is_bucket_collected(task_id, b)})

    # -- VDAFs with an aggregation parameter ---------------------------------------------

    def record_report_agg_param(self, task_id: bytes, report_id: bytes,
                                agg_param: bytes) -> bool:
        cur = self.c.execute("INSERT OR IGNORE INTO report_agg_params (task_id, report_id, "
                             "agg_param) VALUES (?,?,?)",
                             (bytes(task_id), bytes(report_id), bytes(agg_param)))
        return cur.rowcount == 1

    def report_agg_params(self, task_id: bytes, report_ids: list[bytes]
                          ) -> dict[bytes, list[bytes]]:
        """Each report's aggregation parameters, in the order they were recorded."""
        out: dict[bytes, list[bytes]] = {bytes(r): [] for r in report_ids}
        for chunk in iter_chunks([bytes(r) for r in report_ids]):
            marks = ",".join("?" * len(chunk))
            for rid, param in self.c.execute(
                    f"SELECT report_id, agg_param FROM report_agg_params WHERE task_id=? AND "
                    f"report_id IN ({marks}) ORDER BY seq", (bytes(task_id), *chunk)):
                out[bytes(rid)].append(bytes(param))
        return out

    def mark_agg_param_collected(self, task_id: bytes, start: int, end: int,
                                 agg_param: bytes) -> None:
        self.c.execute("INSERT OR IGNORE INTO collected_agg_params VALUES (?,?,?,?)",
                       (bytes(task_id), _t(start), _end(end), bytes(agg_param)))

    def unmark_agg_param_collected(self, task_id: bytes, start: int, end: int,
                                   agg_param: bytes) -> None:
        self.c.execute("DELETE FROM collected_agg_params WHERE task_id=? AND start=? AND "
                       "end_=? AND agg_param=?",
                       (bytes(task_id), _t(start), _end(end), bytes(agg_param)))

    def list_collected_agg_params(self, task_id: bytes, start: int, end: int
                                  ) -> list[tuple[int, int, bytes]]:
        """The (start, end, agg_param) collections whose interval overlaps [start, end)."""
        rows = self.c.execute("SELECT start, end_, agg_param FROM collected_agg_params WHERE "
                              "task_id=? AND start<? AND end_>? ORDER BY agg_param",
                              (bytes(task_id), _end(end), _t(start)))
        return [(int(a), int(b), bytes(p)) for a, b, p in rows]

    def list_reports_in_interval(self, task_id: bytes, states: tuple[ReportState, ...],
                                 time_from: int, time_to: int) -> list[ClientReportRecord]:
        return self._all(ClientReportRecord,
                         f"SELECT * FROM client_reports WHERE task_id=? AND state IN "
                         f"({','.join('?' * len(states))}) AND time>=? AND time<? "
                         "ORDER BY created_at, report_id",
                         (bytes(task_id), *states, _t(time_from), _end(time_to)))

    def count_reports_in_active_jobs(self, task_id: bytes, batch_id: bytes) -> int:
        return int(self.c.execute(
            "SELECT COUNT(*) FROM report_aggregations r JOIN aggregation_jobs j ON "
            "r.task_id=j.task_id AND r.job_id=j.job_id WHERE j.task_id=? AND j.batch_id=? AND "
            "j.state=? AND r.state=?", (bytes(task_id), bytes(batch_id),
                                        AggregationJobState.ACTIVE, ReportAggregationState.ACTIVE)
        ).fetchone()[0])

    def mark_buckets_collected(self, task_id: bytes, buckets: list[bytes]) -> None:
        self.c.executemany("INSERT OR IGNORE INTO collected_buckets VALUES (?,?)",
                           [(bytes(task_id), bytes(b)) for b in buckets])

    # -- collection jobs and aggregate share jobs -----------------------------------------

    def put_collection_job(self, job: CollectionJobRecord) -> None:
        if not job.created_at:
            job.created_at = time.time()
        self.c.execute("INSERT INTO collection_jobs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       _bytes_tuple(job))

    def update_collection_job(self, job: CollectionJobRecord) -> None:
        v = _bytes_tuple(job)
        self.c.execute("UPDATE collection_jobs SET request=?, request_hash=?, state=?, "
                       "batch_id=?, response=?, error=?, error_detail=?, attempts=?, "
                       "next_attempt_at=?, created_at=?, cutoff=? WHERE task_id=? AND job_id=?",
                       (*v[2:], v[0], v[1]))

    def get_collection_job(self, task_id: bytes, job_id: bytes) -> CollectionJobRecord | None:
        return self._one(CollectionJobRecord, "SELECT * FROM collection_jobs WHERE task_id=? "
                         "AND job_id=?", (bytes(task_id), bytes(job_id)))

    def find_collection_job_by_hash(self, task_id: bytes, request_hash: bytes
                                    ) -> CollectionJobRecord | None:
        return self._one(CollectionJobRecord, "SELECT * FROM collection_jobs WHERE task_id=? "
                         "AND request_hash=? AND state!=?",
                         (bytes(task_id), request_hash, CollectionJobState.DELETED))

    def list_collection_jobs(self, states: tuple[CollectionJobState, ...], now: float
                             ) -> list[CollectionJobRecord]:
        return self._all(CollectionJobRecord,
                         f"SELECT * FROM collection_jobs WHERE state IN "
                         f"({','.join('?' * len(states))}) AND next_attempt_at<=? "
                         "ORDER BY created_at", (*states, now))

    def put_aggregate_share_job(self, job: AggregateShareJobRecord) -> None:
        if not job.created_at:
            job.created_at = time.time()
        self.c.execute("INSERT INTO aggregate_share_jobs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                       _bytes_tuple(job))

    def update_aggregate_share_job(self, job: AggregateShareJobRecord) -> None:
        v = _bytes_tuple(job)
        self.c.execute("UPDATE aggregate_share_jobs SET request=?, request_hash=?, state=?, "
                       "response=?, error=?, error_detail=?, created_at=?, attempts=?, "
                       "next_attempt_at=? WHERE task_id=? AND share_id=?",
                       (*v[2:], v[0], v[1]))

    def get_aggregate_share_job(self, task_id: bytes, share_id: bytes
                                ) -> AggregateShareJobRecord | None:
        return self._one(AggregateShareJobRecord, "SELECT * FROM aggregate_share_jobs WHERE "
                         "task_id=? AND share_id=?", (bytes(task_id), bytes(share_id)))

    def find_aggregate_share_job_by_hash(self, task_id: bytes, request_hash: bytes
                                         ) -> AggregateShareJobRecord | None:
        return self._one(AggregateShareJobRecord, "SELECT * FROM aggregate_share_jobs WHERE "
                         "task_id=? AND request_hash=?", (bytes(task_id), request_hash))

    def list_aggregate_share_jobs(self, states: tuple[AggregateShareJobState, ...],
                                  now: float | None = None) -> list[AggregateShareJobRecord]:
        sql = (f"SELECT * FROM aggregate_share_jobs WHERE state IN "
               f"({','.join('?' * len(states))})")
        args: list[Any] = list(states)
        if now is not None:
            sql += " AND next_attempt_at<=?"
            args.append(now)
        return self._all(AggregateShareJobRecord, sql + " ORDER BY created_at", tuple(args))

    def list_task_collection_jobs(self, task_id: bytes, states: tuple[CollectionJobState, ...]
                                  ) -> list[CollectionJobRecord]:
        return self._all(CollectionJobRecord,
                         f"SELECT * FROM collection_jobs WHERE task_id=? AND state IN "
                         f"({','.join('?' * len(states))}) ORDER BY created_at",
                         (bytes(task_id), *states))

    def get_batch_result(self, task_id: bytes, batch: bytes, agg_param: bytes
                         ) -> BatchResultRecord | None:
        return self._one(BatchResultRecord, "SELECT * FROM batch_results WHERE task_id=? AND "
                         "batch=? AND agg_param=?", (bytes(task_id), bytes(batch), agg_param))

    def list_batch_results(self, task_id: bytes, batch: bytes) -> list[BatchResultRecord]:
        return self._all(BatchResultRecord, "SELECT * FROM batch_results WHERE task_id=? AND "
                         "batch=?", (bytes(task_id), bytes(batch)))

    def put_batch_result(self, record: BatchResultRecord) -> bool:
        """Store a released result; False (and nothing changed) if the batch already has
        one for this aggregation parameter."""
        if not record.created_at:
            record.created_at = time.time()
        cur = self.c.execute("INSERT OR IGNORE INTO batch_results VALUES (?,?,?,?,?,?)",
                             _bytes_tuple(record))
        return cur.rowcount == 1

    # -- Leader: leader-selected batches --------------------------------------------------

    def put_leader_batch(self, batch: LeaderBatchRecord) -> None:
        if not batch.created_at:
            batch.created_at = time.time()
        self.c.execute("INSERT INTO leader_batches VALUES (?,?,?,?,?)",
                       (bytes(batch.task_id), bytes(batch.batch_id), batch.assigned, batch.state,
                        batch.created_at))

    def update_leader_batch(self, batch: LeaderBatchRecord) -> None:
        self.c.execute("UPDATE leader_batches SET assigned=?, state=? WHERE task_id=? AND "
                       "batch_id=?", (batch.assigned, batch.state, bytes(batch.task_id),
                                      bytes(batch.batch_id)))

    def list_leader_batches(self, task_id: bytes, states: tuple[LeaderBatchState, ...]
                            ) -> list[LeaderBatchRecord]:
        rows = self.c.execute(f"SELECT * FROM leader_batches WHERE task_id=? AND state IN "
                              f"({','.join('?' * len(states))}) ORDER BY created_at",
                              (bytes(task_id), *states))
        return [LeaderBatchRecord(bytes(r[0]), bytes(r[1]), r[2], r[3], r[4]) for r in rows]


    # -- background work that failed, per task ------------------------------------------

    def get_task_work(self, task_id: bytes) -> TaskWorkRecord | None:
        return self._one(TaskWorkRecord, "SELECT * FROM task_work WHERE task_id=?",
                         (bytes(task_id),))

    def list_task_work(self) -> list[TaskWorkRecord]:
        return self._all(TaskWorkRecord, "SELECT * FROM task_work", ())

    def put_task_work(self, record: TaskWorkRecord) -> None:
        self.c.execute("INSERT OR REPLACE INTO task_work VALUES (?,?,?,?)",
                       _bytes_tuple(record))

    # -- status (operators: the admin API and /metrics, dap/server/status.py) -----------

    def task_counters(self, task_id: bytes | None = None) -> dict[str, Any]:
        """The task's counters (dap.storage.counters), read-only. An optional capability
        of a datastore (`dap.server.status` says when one lacks it)."""
        return task_counters(lambda sql, args: self.c.execute(sql, args).fetchall(),
                             "?", task_id)

    def delete_task_work(self, task_id: bytes) -> None:
        self.c.execute("DELETE FROM task_work WHERE task_id=?", (bytes(task_id),))

    # -- several processes: leases and due work -------------------------------------------

    def try_lease(self, kind: str, key: bytes, holder: bytes, now: float, duration: float
                  ) -> bool:
        # One statement: insert, or take over a lease that expired or is ours already.
        cur = self.c.execute(
            "INSERT INTO work_leases VALUES (?,?,?,?) ON CONFLICT (kind, key) DO UPDATE SET "
            "holder=excluded.holder, expiry=excluded.expiry "
            "WHERE work_leases.expiry<=? OR work_leases.holder=excluded.holder",
            (kind, bytes(key), bytes(holder), now + duration, now))
        return cur.rowcount == 1

    def release_lease(self, kind: str, key: bytes, holder: bytes) -> None:
        self.c.execute("DELETE FROM work_leases WHERE kind=? AND key=? AND holder=?",
                       (kind, bytes(key), bytes(holder)))

    def tasks_with_new_reports(self, limit: int, after: bytes | None = None) -> list[bytes]:
        # A loose index scan of client_reports_new_tasks: one probe per task with work, in
        # one statement (a recursive query, evaluated only as far as the LIMIT asks).
        # (An empty blob sorts before every task ID: `after` None starts at the first.)
        rows = self.c.execute(
            "WITH RECURSIVE t(task_id) AS ("
            " SELECT MIN(task_id) FROM client_reports WHERE state=?1 AND task_id>?3"
            " UNION ALL"
            " SELECT (SELECT MIN(c.task_id) FROM client_reports c WHERE c.state=?1 AND"
            " c.task_id>t.task_id) FROM t WHERE t.task_id IS NOT NULL)"
            " SELECT task_id FROM t WHERE task_id IS NOT NULL LIMIT ?2",
            (ReportState.NEW, max(0, limit), b"" if after is None else bytes(after))
        ).fetchall()
        return [bytes(row[0]) for row in rows]

    def next_work_due(self, role: str) -> float | None:
        times = [self.c.execute(
            "SELECT MIN(MAX(next_attempt_at, lease_expiry)) FROM aggregation_jobs WHERE role=? "
            "AND state=?", (role, AggregationJobState.ACTIVE)).fetchone()[0]]
        if role == "leader":
            times.append(self.c.execute(
                "SELECT MIN(next_attempt_at) FROM collection_jobs WHERE state IN (?,?)",
                (CollectionJobState.START, CollectionJobState.COLLECTING)).fetchone()[0])
        else:
            times.append(self.c.execute(
                "SELECT MIN(next_attempt_at) FROM aggregate_share_jobs WHERE state=?",
                (AggregateShareJobState.START,)).fetchone()[0])
        due = [float(t) for t in times if t is not None]
        return min(due) if due else None

    # -- retention -------------------------------------------------------------------------

    def get_eviction_horizon(self, task_id: bytes) -> int | None:
        row = self.c.execute("SELECT horizon FROM eviction_horizons WHERE task_id=?",
                             (bytes(task_id),)).fetchone()
        return None if row is None else int(row[0])

    def set_eviction_horizon(self, task_id: bytes, horizon: int) -> None:
        self.c.execute("INSERT OR REPLACE INTO eviction_horizons VALUES (?,?)",
                       (bytes(task_id), _t(horizon)))

    def evict_reports_before(self, task_id: bytes, horizon: int) -> int:
        """Delete the per-report state of reports with time < horizon (in the task's time
        units): uploaded reports not in an active job, replay records, the report
        aggregations of jobs that are no longer active, batch buckets wholly before the
        horizon and their collected markers. Returns the rows deleted."""
        tid, h = bytes(task_id), _t(horizon)
        active = AggregationJobState.ACTIVE
        deleted = 0
        for sql, args in (
            ("DELETE FROM client_reports WHERE task_id=? AND time<? AND state!=?",
             (tid, h, ReportState.IN_JOB)),
            ("DELETE FROM aggregated_reports WHERE task_id=? AND time<?", (tid, h)),
            ("DELETE FROM report_aggregations WHERE task_id=? AND time<? AND job_id IN "
             "(SELECT job_id FROM aggregation_jobs WHERE task_id=? AND state!=?)",
             (tid, h, tid, active)),
            ("DELETE FROM batch_buckets WHERE task_id=? AND max_time<?", (tid, h)),
            ("DELETE FROM collected_intervals WHERE task_id=? AND end_<=?", (tid, h)),
            ("DELETE FROM collected_agg_params WHERE task_id=? AND end_<=?", (tid, h)),
            ("DELETE FROM collected_buckets WHERE task_id=? AND length(bucket)=32 AND bucket "
             "NOT IN (SELECT bucket FROM batch_buckets WHERE task_id=?)", (tid, tid)),
            ("DELETE FROM leader_batches WHERE task_id=? AND state=? AND batch_id NOT IN "
             "(SELECT bucket FROM batch_buckets WHERE task_id=?)",
             (tid, LeaderBatchState.COLLECTED, tid)),
        ):
            deleted += self.c.execute(sql, args).rowcount
        return deleted

    def delete_finished_jobs(self, task_id: bytes | None, created_before: float) -> int:
        """Delete the jobs that are over (aggregation jobs not active, with their report
        aggregations; collection and aggregate share jobs finished, failed or deleted),
        the Leader's uploaded reports in a final state and released batch results, all
        created before `created_before` (of one task, or of every task). Returns the rows
        deleted."""
        task_sql, task_args = ("task_id=? AND ", (bytes(task_id),)) if task_id is not None \
            else ("", ())
        agg_done = (AggregationJobState.FINISHED, AggregationJobState.ABANDONED,
                    AggregationJobState.DELETED)
        coll_done = (CollectionJobState.FINISHED, CollectionJobState.FAILED,
                     CollectionJobState.DELETED)
        share_done = (AggregateShareJobState.FINISHED, AggregateShareJobState.FAILED,
                      AggregateShareJobState.DELETED)
        deleted = 0
        for sql, args in (
            (f"DELETE FROM report_aggregations WHERE {task_sql}(task_id, job_id) IN "
             f"(SELECT task_id, job_id FROM aggregation_jobs WHERE {task_sql}created_at<? "
             f"AND state IN (?,?,?))", (*task_args, *task_args, created_before, *agg_done)),
            (f"DELETE FROM aggregation_jobs WHERE {task_sql}created_at<? AND state IN (?,?,?)",
             (*task_args, created_before, *agg_done)),
            # Failed reports, and aggregated ones whose encoding was dropped (a VDAF with
            # an aggregation parameter aggregates them again: they are kept).
            (f"DELETE FROM client_reports WHERE {task_sql}created_at<? AND (state=? OR "
             f"(state=? AND length(report)=0))",
             (*task_args, created_before, ReportState.FAILED, ReportState.AGGREGATED)),
            (f"DELETE FROM collection_jobs WHERE {task_sql}created_at<? AND state IN (?,?,?)",
             (*task_args, created_before, *coll_done)),
            (f"DELETE FROM aggregate_share_jobs WHERE {task_sql}created_at<? AND "
             f"state IN (?,?,?)", (*task_args, created_before, *share_done)),
            (f"DELETE FROM batch_results WHERE {task_sql}created_at<?",
             (*task_args, created_before)),
        ):
            deleted += self.c.execute(sql, args).rowcount
        return deleted


# -- secrets at rest (dap.storage.secrets) ----------------------------------------------

# Columns of `tasks` holding secrets: VDAF verify key, tokens, and the options (which may
# hold further verify keys). index -> whether the column is text.
_TASK_SECRETS = {4: False, 6: True, 7: True, 8: True}
_TASK_COLUMNS = ("task_id", "role", "profile", "config", "vdaf_verify_key",
                 "collector_hpke_config", "aggregator_auth_token", "collector_auth_token",
                 "options")
_CHECK = b"ppm datastore key check"


def _task_aad(index: int, task_id: bytes) -> bytes:
    return b"tasks|" + _TASK_COLUMNS[index].encode() + b"|" + bytes(task_id)


def _key_aad(config_id: int) -> bytes:
    return b"hpke_keys|private_key|" + bytes([config_id & 0xFF])


def _seal_task(box: SecretBox | None, values: tuple[Any, ...]) -> tuple[Any, ...]:
    out = [bytes(v) if isinstance(v, bytes) else v for v in values]
    if box is None:
        return tuple(out)
    for i, text in _TASK_SECRETS.items():
        value: Any = out[i]
        if value is None or is_sealed(value):
            continue
        plain = str(value).encode() if text else bytes(value)
        out[i] = box.seal(plain, _task_aad(i, out[0]))
    return tuple(out)


def _open_value(box: SecretBox | None, value: Any, aad: bytes) -> Any:
    if not is_sealed(value):
        return value
    if box is None:
        raise DatastoreKeyError(f"this datastore's secrets are encrypted: set {KEY_ENV}")
    return box.open(bytes(value), aad)


def _open_task(box: SecretBox | None, values: tuple[Any, ...]) -> tuple[Any, ...]:
    out = [bytes(v) if isinstance(v, memoryview) else v for v in values]
    for i, text in _TASK_SECRETS.items():
        if is_sealed(out[i]):
            plain = _open_value(box, out[i], _task_aad(i, out[0]))
            out[i] = plain.decode() if text else plain
    return tuple(out)


def _private_file(path: str) -> None:
    """Create the datastore file 0600 (SQLite creates its -wal and -shm files with the
    database file's permissions), and take group and other access away from an existing
    datastore and its companions."""
    if path == ":memory:" or path.startswith("file:") or not path:
        return
    p = Path(path)
    if not p.exists():
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
    for f in (p, Path(path + "-wal"), Path(path + "-shm"), Path(path + "-journal")):
        try:
            if f.exists() and f.stat().st_mode & 0o077:
                f.chmod(0o600)
        except OSError:
            pass


def _bytes_tuple(record: Any) -> tuple[Any, ...]:
    """Record fields as SQLite values (bytes subclasses such as TaskID become bytes). The
    records' fields are flat values: no deep copy (`astuple`) is needed."""
    getter = _FIELD_GETTERS.get(type(record))
    if getter is None:
        names = [f.name for f in fields(record)]
        # (attrgetter of one name returns the value itself, of several a tuple)
        getter = attrgetter(*names) if len(names) > 1 \
            else (lambda r, n=names[0]: (getattr(r, n),))
        _FIELD_GETTERS[type(record)] = getter
    return tuple(bytes(v) if isinstance(v, bytes) else v for v in getter(record))


# A record class's fields in order, read at once (`dataclasses.fields` per call was a
# tenth of a job creation's datastore time).
_FIELD_GETTERS: dict[type, Any] = {}


class FairRLock:
    """A re-entrant lock that hands itself to the longest waiting thread.

    `threading.RLock` is not fair: a thread that releases it and asks again at once (a
    worker storing a large upload chunk by chunk) usually gets it back before a woken
    waiter (the event loop thread) is scheduled, and on a loaded machine the waiter
    starves for seconds. Here a release with waiters makes the first of them the owner."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._owner: int | None = None
        self._count = 0
        self._waiters: deque[tuple[int, threading.Lock]] = deque()

    def acquire(self) -> None:
        me = threading.get_ident()
        with self._mutex:
            if self._owner == me:
                self._count += 1
                return
            if self._owner is None:
                self._owner, self._count = me, 1
                return
            gate = threading.Lock()
            gate.acquire()
            self._waiters.append((me, gate))
        gate.acquire()  # released by the thread that handed us the lock

    def release(self) -> None:
        with self._mutex:
            if self._owner != threading.get_ident():
                raise RuntimeError("release of a lock not held by this thread")
            self._count -= 1
            if self._count:
                return
            if self._waiters:
                self._owner, gate = self._waiters.popleft()
                self._count = 1
                gate.release()
            else:
                self._owner = None

    def has_waiters(self) -> bool:
        """Whether a thread is waiting for the lock (a hint: it may change at once)."""
        return bool(self._waiters)

    def __enter__(self) -> FairRLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class SqliteDatastore:
    """The embedded datastore. One connection, serialised by a lock; callers on an
    asyncio loop use it directly (transactions are short)."""

    def __init__(self, path: str | Path, synchronous: str = "FULL", *,
                 key: bytes | None = None, key_from_env: bool = True) -> None:
        """Open (or create, mode 0600) the datastore at `path`. Secrets are sealed with
        `key`, or with the key in the environment's PPM_DATASTORE_KEY when `key_from_env`
        (dap.storage.secrets); a plaintext datastore opened with a key is migrated (its
        secrets sealed) at once."""
        if synchronous not in ("FULL", "NORMAL", "OFF"):
            raise ValueError("synchronous must be FULL, NORMAL or OFF")
        self.path = str(path)
        if key is None and key_from_env:
            key = secrets_key_from_env()
        self._box = SecretBox(key) if key is not None else None
        self._lock = FairRLock()
        _private_file(self.path)
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                     timeout=30.0)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous}")
            self._conn.execute("PRAGMA foreign_keys=ON")
            if self._box is not None:
                # Overwrite deleted and updated content (a migrated plaintext secret).
                self._conn.execute("PRAGMA secure_delete=ON")
            self._migrate()
            _private_file(self.path)
        except BaseException:
            self._conn.close()
            raise

    @property
    def encrypted(self) -> bool:
        return self._box is not None

    def _migrate(self) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
                # Columns added without a version change (additive, with defaults): a
                # datastore created before them gains them here.
                for table, column, decl in _ADDED_COLUMNS:
                    have = {r[1] for r in self._conn.execute(f"PRAGMA table_info({table})")}
                    if column not in have:
                        self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
                row = self._conn.execute("SELECT version FROM schema_version").fetchone()
                if row is None:  # a new datastore: version 1's tables, migrated below
                    self._conn.execute("INSERT INTO schema_version VALUES (1)")
                    version = 1
                else:
                    version = int(row[0])
                if version > SCHEMA_VERSION:
                    raise StorageError(f"datastore schema version {version}, this code knows "
                                       f"up to {SCHEMA_VERSION}")
                for target in range(version + 1, SCHEMA_VERSION + 1):
                    for statement in _MIGRATIONS[target]:
                        self._conn.execute(statement)
                    self._conn.execute("UPDATE schema_version SET version=?", (target,))
                migrated = self._check_key()
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        if migrated:
            # Old plaintext pages leave the WAL for the (overwritten) database pages.
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _check_key(self) -> bool:
        """Check the key against the datastore's sealed check value; seal the secrets of
        a plaintext datastore opened with a key. Returns whether it migrated."""
        row = self._conn.execute("SELECT value FROM secrets_meta WHERE name='key_check'"
                                 ).fetchone()
        box = self._box
        if row is not None:
            if box is None:
                raise DatastoreKeyError(f"the datastore {self.path} has encrypted secrets: "
                                        f"set {KEY_ENV} to its key")
            try:
                right = box.open(bytes(row[0]), b"secrets_meta|key_check") == _CHECK
            except DatastoreKeyError:
                right = False
            if not right:
                raise DatastoreKeyError(f"{KEY_ENV} is not the key of the datastore "
                                        f"{self.path} (its secrets do not open)")
            return False
        if box is None:
            return False
        tx = SqliteTransaction(self._conn, box)
        for task in SqliteTransaction(self._conn, None).list_tasks():
            tx.put_task(task)                                # INSERT OR REPLACE: sealed
        for key_row in self._conn.execute("SELECT config_id, private_key FROM hpke_keys"
                                          ).fetchall():
            if not is_sealed(key_row[1]):
                self._conn.execute("UPDATE hpke_keys SET private_key=? WHERE config_id=?",
                                   (box.seal(bytes(key_row[1]), _key_aad(key_row[0])),
                                    key_row[0]))
        self._conn.execute("INSERT INTO secrets_meta VALUES ('key_check', ?)",
                           (box.seal(_CHECK, b"secrets_meta|key_check"),))
        return True

    @contextmanager
    def transaction(self) -> Iterator[SqliteTransaction]:
        """A `BEGIN IMMEDIATE` transaction: committed on success, rolled back on error."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield SqliteTransaction(self._conn, self._box)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def read(self) -> AbstractContextManager[SqliteTransaction]:
        """A transaction that only reads (see dap.core.store.Datastore.read): here the
        one connection's ordinary transaction."""
        return self.transaction()

    def upload_transaction(self) -> AbstractContextManager[SqliteTransaction]:
        """A transaction that stores uploaded reports (see
        dap.core.store.Datastore.upload_transaction): here an ordinary one."""
        return self.transaction()

    def close(self) -> None:
        with self._lock:
            self._conn.close()
