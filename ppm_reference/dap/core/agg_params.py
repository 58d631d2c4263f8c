"""Aggregation parameters chosen by the Collector (Poplar1): the rules the Aggregators
enforce when a report may be aggregated, and a batch collected, more than once.

Prio3 has one aggregation parameter (the empty string); its tasks never reach this
module. For a VDAF whose parameter the Collector chooses (`vdaf.registry.
takes_agg_param`), the drafts say:

- The Aggregators cannot aggregate before the Collector names the parameter (DAP-18
  Section 4.5.1, "Eager Aggregation"): the Leader creates the aggregation jobs of a
  collection job when it accepts it (`dap.core.leader`).
- A report may be aggregated again with another parameter only if
  `Vdaf.is_valid(current, previous)` holds for the parameters it was aggregated with
  before; otherwise it is rejected with `report_replayed` (DAP-09 Section 4.5.1.4, and
  the VDAF draft's "Aggregation Parameter" security considerations: Poplar1 must never
  verify a report twice at one level).
- A batch may be collected once per distinct parameter, at most `max_batch_query_count`
  times (`batchQueriedTooManyTimes`, DAP-09 Section 4.6.6); a report that was not in
  every previous collection of its batch is rejected with `batch_collected` (DAP-09
  Section 4.5.1.4).

DAP-18 and DAP-19 have no `max_batch_query_count` and say that "DAP ... only allows
each measurement to be aggregated once" (DAP-18 Section 1; its change log for draft 14:
aggregation parameter validity "is relevant for VDAFs for which validity depends on how
many times a report might be aggregated (at most once in DAP)"); they do keep
`invalidAggregationParameter`, `Vdaf.is_valid` (Section 4.5.2) and eager aggregation as
an option. To run heavy hitters over them we apply DAP-09's rules above to these drafts
too (a deviation, stated here and in ARCHITECTURE.md): a batch is re-collected only with
the *same* batch interval, once per parameter, each parameter valid after the previous
ones; with no task parameter the limit is what `is_valid` allows (Poplar1: one
collection per level). Only the time-interval batch mode supports this: a DAP-18
leader-selected query cannot name a batch again, so such tasks are refused.

The batch's history (its previous parameters) is the set of parameters it was collected
with, ordered by their encoding: Poplar1's encoding starts with the level (big-endian),
so this is the order of the levels, the only order `is_valid` accepts.
"""

from __future__ import annotations

from typing import Any

from ppm_reference.dap.common import BatchMode, Interval, ReportError
from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.core.store import Transaction
from ppm_reference.dap.core.tasks import AggregatorTask
from ppm_reference.vdaf import registry


def uses_agg_param(task: AggregatorTask) -> bool:
    """Whether the task's VDAF has a Collector-chosen aggregation parameter."""
    return registry.takes_agg_param(getattr(task.vdaf, "NAME", ""))


def query_limit(task: AggregatorTask) -> int | None:
    """The task's `max_batch_query_count` (DAP-09; DAP-18/19 tasks have none)."""
    limit = getattr(task.task, "max_batch_query_count", None)
    return int(limit) if limit is not None else None


def _decode(task: AggregatorTask, agg_param: bytes) -> Any:
    return task.vdaf.decode_agg_param(agg_param)


def _valid_after(task: AggregatorTask, agg_param: bytes, previous: list[bytes]) -> bool:
    vdaf = task.vdaf
    try:
        return bool(vdaf.is_valid(_decode(task, agg_param),
                                  [_decode(task, p) for p in previous]))
    except ValueError:
        return False


def collected_params(tx: Transaction, task: AggregatorTask, start: int,
                     end: int) -> list[bytes]:
    """The parameters the batch overlapping [start, end) was collected with, in order."""
    return sorted({p for _, _, p in tx.list_collected_agg_params(task.task_id, start, end)})


def replay_error(tx: Transaction, task: AggregatorTask, report_id: bytes, report_time: int,
                 agg_param: bytes) -> ReportError | None:
    """Whether a report may be aggregated (or committed) with `agg_param`: not with this
    parameter before, valid after its previous ones (else `report_replayed`); its batch
    not collected with this parameter, and the report in every previous collection of
    its batch (else `batch_collected`)."""
    rid = bytes(report_id)
    history = tx.report_agg_params(task.task_id, [rid])[rid]
    if agg_param in history or not _valid_after(task, agg_param, history):
        return ReportError.REPORT_REPLAYED
    collected = collected_params(tx, task, report_time, report_time + 1)
    if agg_param in collected or (collected and sorted(history) != collected):
        return ReportError.BATCH_COLLECTED
    return None


def record_aggregated(tx: Transaction, task: AggregatorTask, report_id: bytes,
                      agg_param: bytes) -> bool:
    """Record that the report was aggregated with `agg_param` (False if it already was)."""
    return tx.record_report_agg_param(task.task_id, bytes(report_id), agg_param)


def check_batch(tx: Transaction, task: AggregatorTask, interval: Interval | None,
                agg_param: bytes) -> list[bytes]:
    """The checks of a collection (Leader) or an aggregate share request (Helper) for a
    batch with this parameter; returns the batch's previous parameters. Raises the
    draft's problem."""
    tid = task.task_id
    if task.batch_mode != BatchMode.TIME_INTERVAL or interval is None:
        raise DapProblem("invalidMessage", f"{getattr(task.vdaf, 'NAME', 'this VDAF')} tasks "
                         "collect by time interval only: a leader-selected query cannot name "
                         "a batch again for another aggregation parameter", task_id=tid)
    start, end = int(interval.start), interval.end
    rows = tx.list_collected_agg_params(tid, start, end)
    if any((s, e) != (start, end) for s, e, _ in rows):
        raise DapProblem("batchOverlap", "batch interval overlaps a batch collected with "
                         "another interval", task_id=tid)
    previous = sorted({p for _, _, p in rows})
    if agg_param in previous:
        raise DapProblem("batchOverlap", "the batch was already collected with this "
                         "aggregation parameter", task_id=tid)
    limit = query_limit(task)
    if limit is not None and len(previous) >= limit:
        token = "batchQueriedTooManyTimes" \
            if "batchQueriedTooManyTimes" in task.profile.problem_types else "batchOverlap"
        raise DapProblem(token, f"the batch was collected {len(previous)} times, the task's "
                         f"max_batch_query_count is {limit}", task_id=tid)
    if not _valid_after(task, agg_param, previous):
        raise DapProblem("invalidAggregationParameter", "the aggregation parameter is not "
                         "valid after the batch's previous ones", task_id=tid)
    return previous


def mark_collected(tx: Transaction, task: AggregatorTask, interval: Interval,
                   agg_param: bytes) -> None:
    """Freeze the batch for this parameter (and for new reports, at its first collection)."""
    start, end = int(interval.start), interval.end
    if not tx.list_collected_agg_params(task.task_id, start, end):
        tx.mark_interval_collected(task.task_id, start, end)
    tx.mark_agg_param_collected(task.task_id, start, end, agg_param)


def unmark_collected(tx: Transaction, task: AggregatorTask, interval: Interval,
                     agg_param: bytes) -> None:
    """Undo `mark_collected` for a collection the Helper refused."""
    start, end = int(interval.start), interval.end
    tx.unmark_agg_param_collected(task.task_id, start, end, agg_param)
    if not tx.list_collected_agg_params(task.task_id, start, end):
        tx.unmark_interval_collected(task.task_id, start, end)


__all__ = ["check_batch", "collected_params", "mark_collected", "query_limit",
           "record_aggregated", "replay_error", "unmark_collected", "uses_agg_param"]
