"""The per-task counters of the admin API's status and of /metrics (dap.server.status,
dap.server.metrics): one set of read-only queries for both backends, which differ only in
their parameter placeholder (SQLite ``?``, psycopg ``%s``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Query = Callable[[str, Sequence[Any]], list[Any]]


def task_counters(query: Query, placeholder: str, task_id: bytes | None) -> dict[str, Any]:
    """Counts of a task's state (of every task with None): reports by state and by error
    code, aggregation and collection jobs by state, and per batch bucket its aggregated
    report count and whether it was collected, plus the last error of an aggregation job
    being retried. `query(sql, args)` returns all rows."""
    p = placeholder
    where, args = (f"WHERE task_id={p}", (bytes(task_id),)) if task_id is not None \
        else ("", ())
    reports = [tuple(r) for r in query(
        f"SELECT state, error, COUNT(*) FROM client_reports {where} "  # noqa: S608
        "GROUP BY state, error", args)]
    agg_jobs = [tuple(r) for r in query(
        f"SELECT role, state, COUNT(*) FROM aggregation_jobs {where} "  # noqa: S608
        "GROUP BY role, state", args)]
    coll_jobs = [tuple(r) for r in query(
        f"SELECT state, COUNT(*) FROM collection_jobs {where} "  # noqa: S608
        "GROUP BY state", args)]
    b_where = f"WHERE b.task_id={p}" if task_id is not None else ""
    buckets = [(bytes(r[0]), int(r[1]), bool(r[2])) for r in query(
        "SELECT b.bucket, MAX(b.report_count), EXISTS (SELECT 1 FROM collected_buckets "
        "c WHERE c.task_id=b.task_id AND c.bucket=b.bucket) FROM batch_buckets b "
        f"{b_where} GROUP BY b.task_id, b.bucket", args)]  # noqa: S608
    a_where = f"AND task_id={p}" if task_id is not None else ""
    rows = query(
        "SELECT error FROM aggregation_jobs WHERE state='active' AND error IS NOT NULL "
        f"{a_where} ORDER BY next_attempt_at DESC LIMIT 1", args)  # noqa: S608
    return {"reports": reports, "aggregation_jobs": agg_jobs,
            "collection_jobs": coll_jobs, "buckets": buckets,
            "aggregation_retrying": str(rows[0][0]) if rows else None}
