"""What an operator (and `ppm task show`, `ppm collect`) can know about a task's progress:
the Aggregator's per-task counters, read from its datastore.

    reports       received, pending (waiting for or in an aggregation job), aggregated,
                  failed by reason (the core's ReportError names)
    jobs          aggregation jobs by state, collection jobs by state (Leader), and the
                  last error of an aggregation job being retried (a Helper down)
    batches       aggregated reports not yet collected, batch buckets holding at least
                  min_batch_size of them (ready), reports in collected buckets, and the
                  most recent buckets (time-interval: their start, in seconds)

Reports refused at upload are not stored, so they are not here: `/metrics` counts them
per process (`dap.server.metrics`). The counts come from the datastore's optional
`task_counters` (SQLite has it); a datastore without it reports `"counters": null`.
"""

from __future__ import annotations

from typing import Any

from ppm_reference.dap.common import BatchMode, Interval, ReportError
from ppm_reference.dap.core.store import ReportState
from ppm_reference.dap.storage import TaskRecord

# The most recent buckets listed per task.
MAX_BUCKETS = 48


def _error_name(code: Any) -> str:
    try:
        return ReportError(int(code)).name.lower()
    except (TypeError, ValueError):
        return "unknown" if code is None else f"error_{code}"


def summarize(raw: dict[str, Any], min_batch_size: int | None = None,
              batch_mode: Any = None, time_precision: int = 1) -> dict[str, Any]:
    """The counters of `task_counters` as JSON."""
    by_state: dict[str, int] = {}
    failed: dict[str, int] = {}
    for state, error, n in raw["reports"]:
        by_state[state] = by_state.get(state, 0) + n
        if state == ReportState.FAILED:
            name = _error_name(error)
            failed[name] = failed.get(name, 0) + n
    reports = {
        "received": sum(by_state.values()),
        "pending": by_state.get(ReportState.NEW, 0) + by_state.get(ReportState.IN_JOB, 0),
        "aggregated": by_state.get(ReportState.AGGREGATED, 0),
        "failed": sum(failed.values()), "failed_by_reason": failed}
    agg_jobs: dict[str, int] = {}
    for _role, state, n in raw["aggregation_jobs"]:
        agg_jobs[state] = agg_jobs.get(state, 0) + n
    coll_jobs = {state: n for state, n in raw["collection_jobs"]}
    uncollected = [(b, n) for b, n, collected in raw["buckets"] if not collected]
    batches: dict[str, Any] = {
        "aggregated_uncollected": sum(n for _, n in uncollected),
        "collected_reports": sum(n for _, n, c in raw["buckets"] if c)}
    if min_batch_size is not None:
        batches["min_batch_size"] = min_batch_size
        batches["ready"] = sum(1 for _, n in uncollected if n >= min_batch_size)
    buckets = []
    for bucket, n, collected in sorted(raw["buckets"])[-MAX_BUCKETS:]:
        entry: dict[str, Any] = {"reports": n, "collected": collected}
        if batch_mode == BatchMode.TIME_INTERVAL and len(bucket) == 16:
            try:
                entry["start"] = int(Interval.decode(bucket).start) * time_precision
            except ValueError:
                entry["bucket"] = bucket.hex()
        else:
            entry["bucket"] = bucket.hex()
        buckets.append(entry)
    return {"reports": reports, "aggregation_jobs": agg_jobs, "collection_jobs": coll_jobs,
            "aggregation_retrying": raw.get("aggregation_retrying"),
            "batches": batches, "buckets": buckets}


def task_status(tx: Any, record: TaskRecord, task: Any = None) -> dict[str, Any]:
    """A task's description and counters (`GET /internal/tasks/{task_id}`). `task` is
    the checked AggregatorTask when it could be built (None: counters without the batch
    parameters)."""
    from ppm_reference.dap.server.common import b64url

    out: dict[str, Any] = {"task_id": b64url(record.task_id), "role": record.role,
                           "profile": record.profile}
    min_batch_size = time_precision = None
    if task is not None:
        min_batch_size = int(task.task.min_batch_size)
        time_precision = int(task.task.time_precision)
        out.update({"min_batch_size": min_batch_size,
                    "batch_mode": task.batch_mode.name.lower().replace("_", "-"),
                    "time_precision": time_precision})
    counters = getattr(tx, "task_counters", None)
    if counters is None:
        out["counters"] = None
        return out
    out["counters"] = summarize(counters(record.task_id), min_batch_size,
                                None if task is None else task.batch_mode,
                                time_precision or 1)
    return out


#: The header of a not-ready collection job poll that says what the Leader waits for (our
#: addition, not in any DAP draft; other Collectors ignore it). Only the authenticated
#: Collector sees it, and it tells nothing the collection result would not (counts).
STATUS_HEADER = "PPM-Collection-Status"


_HINTS: dict[tuple[bytes, bytes], tuple[float, str]] = {}
#: Seconds a hint is reused: counting a task's reports is a scan of its index, and a
#: Collector polls every `retry_after`.
HINT_TTL = 2.0


def collection_hint(tx: Any, task: Any, job_id: bytes) -> str:
    """One line: what a not-ready collection job waits for (cached for HINT_TTL)."""
    import time

    key = (bytes(task.task_id), bytes(job_id))
    now = time.monotonic()
    cached = _HINTS.get(key)
    if cached is not None and now - cached[0] < HINT_TTL:
        return cached[1]
    if len(_HINTS) > 1000:
        _HINTS.clear()
    text = _collection_hint(tx, task, job_id)
    _HINTS[key] = (now, text)
    return text


def _collection_hint(tx: Any, task: Any, job_id: bytes) -> str:
    from ppm_reference.dap.core.store import CollectionJobState

    job = tx.get_collection_job(task.task_id, job_id)
    parts = []
    counters = getattr(tx, "task_counters", None)
    if counters is not None:
        raw = counters(task.task_id)
        c = summarize(raw, int(task.task.min_batch_size))
        r, b = c["reports"], c["batches"]
        in_interval = _aggregated_in_interval(task, job, raw)
        if in_interval is not None:
            parts.append(f"{in_interval} of min_batch_size {b['min_batch_size']} reports "
                         f"aggregated in this interval, {r['pending']} of the task's "
                         "waiting for aggregation")
        else:
            parts.append(f"{b['aggregated_uncollected']} reports aggregated and not yet "
                         f"collected (min_batch_size {b['min_batch_size']}), "
                         f"{r['pending']} waiting for aggregation")
        if c["aggregation_retrying"]:
            parts.append("aggregation jobs are being retried (the Helper unreachable or "
                         f"refusing?): {c['aggregation_retrying']}")
    if job is not None and job.state == CollectionJobState.COLLECTING:
        parts.append("waiting for the Helper's aggregate share")
    if job is not None and job.error_detail:
        parts.append(f"last attempt: {job.error_detail}")
    text = "; ".join(parts) or "waiting"
    # A header value is one line of visible ASCII.
    return "".join(ch if " " <= ch <= "~" else " " for ch in text)[:500]


def _aggregated_in_interval(task: Any, job: Any, raw: dict[str, Any]) -> int | None:
    """The aggregated reports in the batch interval of a time-interval collection job
    (None for another query, or a request that does not decode)."""
    if job is None:
        return None
    try:
        coll = task.wire.decode_collection_req(task, job.request)
    except Exception:  # noqa: BLE001 - only a hint: fall back to the task's counts
        return None
    if coll.interval is None:
        return None
    lo = int(coll.interval.start)
    hi = lo + int(coll.interval.duration)
    total = 0
    for bucket, n, _collected in raw["buckets"]:
        try:
            t = int(Interval.decode(bucket).start)
        except ValueError:
            return None
        if lo <= t < hi:
            total += n
    return total
