"""Retention: what an Aggregator deletes, and when (DAP-18 Section 6.4.1, "Reducing
Storage Requirements"; DAP-09 Section 5.4.1 likewise).

Without it nothing is ever deleted: every report (failed ones included) stays in the
Leader's `client_reports` with its full encoding, every job keeps its request, every
report aggregation its verification state, on both Aggregators; a report costs about
five rows and two to three times its size for as long as the datastore lives
(`benchmarks/storage_amplification.py` measures it).

Three rules, each set in the server configuration (`dap.server.config`):

* **Report expiry** (`report_expiry_age`, default 30 days). The per-report state of
  reports older than that (by report time) is evicted: uploaded reports not in an
  active job, replay records (`aggregated_reports`), report aggregations of jobs that
  are over, batch buckets wholly before the horizon and their collected markers. The
  horizon is stored per task; from then on a report older than it is refused with
  `report_dropped`, at upload and at aggregation, by both Aggregators: "If an
  Aggregator cannot determine if an input share is valid--for example, the report
  timestamp may be so far in the past that the state required to perform the check
  has been evicted ... it MUST mark the input share as invalid with error
  report_dropped" (DAP-18 Section 4.5.3.4), and "Aggregators SHOULD take steps to
  mitigate the risk of dropping reports (e.g., by evicting the oldest data first)"
  (Section 6.4.1). So eviction never lets a report be counted twice.
* **Job retention** (`job_retention`, default 7 days). Aggregation jobs that are over
  (with their report aggregations), collection jobs and aggregate-share jobs that are
  finished, failed or deleted, the Leader's uploaded reports in a final state (failed,
  or aggregated once and for all: their encoding was dropped, `agg_params.uses_agg_param`;
  replay protection stays with `aggregated_reports`) and the released batch results
  are deleted that long after they were created. A Collector
  polling a deleted collection job gets 404; a repeated query for a batch whose result
  was deleted is refused (`batchOverlap`, or DAP-09 `batchInvalid`), never recomputed.
* **Task end** (`task_retention_after_end`, default 7 days). Once a task's end (DAP-18
  `task_interval`, DAP-09 `task_expiration`) is that long past, all its report state
  and jobs are deleted (the task itself stays until it is deleted through the admin
  API): "Where the task_interval extension is configured, Aggregators MAY delete all
  data for a task after the task_interval. Aggregators that delete data SHOULD allow
  the Collector adequate time to retrieve data from any final batches" (Section 6.4.1).

`None` disables a rule. Each pass is one transaction (`run_retention`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.core.leader import fail_collection
from ppm_reference.dap.core.store import CollectionJobState, Transaction
from ppm_reference.dap.core.tasks import AggregatorTask, ProfileLookup

DAY = 86400.0
# The horizon of a task past its end: after every time a report can have.
_EVERYTHING = 2**62


@dataclass(frozen=True)
class RetentionPolicy:
    report_expiry_age: float | None = 30 * DAY
    job_retention: float | None = 7 * DAY
    task_retention_after_end: float | None = 7 * DAY

    @classmethod
    def from_config(cls, config: Any) -> RetentionPolicy:
        """The policy of an `AggregatorConfig` (its keys of the same names)."""
        return cls(config.report_expiry_age, config.job_retention,
                   config.task_retention_after_end)


@dataclass
class RetentionStats:
    rows_deleted: int = 0
    horizons: dict[bytes, int] = field(default_factory=dict)  # task ID -> new horizon


def task_end_seconds(task: AggregatorTask) -> float | None:
    """The end of a task in POSIX seconds: DAP-18 `task_interval` (in time_precision
    units) or DAP-09 `task_expiration` (seconds); None if it has none."""
    t = task.task
    interval = getattr(t, "task_interval", None)
    if interval is not None:
        return float(interval.end * int(t.time_precision))
    expiration = getattr(t, "task_expiration", None)
    return float(expiration) if expiration is not None else None


def run_retention(tx: Transaction, policy: RetentionPolicy, now: float,
                  profiles: ProfileLookup) -> RetentionStats:
    """One retention pass over every task of this Aggregator (see the module)."""
    stats = RetentionStats()
    for record in tx.list_tasks():
        try:
            task = AggregatorTask.from_record(record, profiles)
        except ValueError:
            continue  # a task it cannot read keeps its data (job retention still applies)
        tp = int(task.task.time_precision)
        horizon_seconds: float | None = None
        if policy.report_expiry_age is not None:
            horizon_seconds = now - policy.report_expiry_age
        end = task_end_seconds(task)
        ended = end is not None and policy.task_retention_after_end is not None \
            and now >= end + policy.task_retention_after_end
        if horizon_seconds is not None and horizon_seconds > 0:
            horizon: int | None = int(horizon_seconds) // tp  # in time_precision units
        else:
            horizon = None
        if ended:
            # Every report the task will ever take is in already (later ones are refused
            # as task_expired): evict them all, collected markers past the end included,
            # and every job that is over.
            horizon = _EVERYTHING
            stats.rows_deleted += tx.delete_finished_jobs(task.task_id, now + 1.0)
        if horizon is None:
            continue
        previous = tx.get_eviction_horizon(task.task_id)
        if previous is not None and horizon <= previous:
            continue
        # The horizon is stored first, in the same transaction: from the commit on, a
        # report older than it is refused, so the evicted state is never needed again.
        tx.set_eviction_horizon(task.task_id, horizon)
        stats.horizons[task.task_id] = horizon
        stats.rows_deleted += tx.evict_reports_before(task.task_id, horizon)
        _fail_evicted_collections(tx, task, horizon)
    if policy.job_retention is not None:
        stats.rows_deleted += tx.delete_finished_jobs(None, now - policy.job_retention)
    return stats


def _fail_evicted_collections(tx: Transaction, task: AggregatorTask, horizon: int) -> None:
    """Leader: a pending time-interval collection job whose interval lies wholly before
    the horizon can never be answered (its reports are evicted and new ones refused):
    fail it with invalidBatchSize rather than let it wait for ever."""
    for job in tx.list_task_collection_jobs(task.task_id, (CollectionJobState.START,)):
        try:
            req = task.wire.decode_collection_req(task, job.request)
        except DapProblem:
            continue
        if req.interval is not None and req.interval.end <= horizon:
            fail_collection(tx, job, "invalidBatchSize", "the batch interval is older than "
                            "the reports this Aggregator keeps (report_expiry_age)")
