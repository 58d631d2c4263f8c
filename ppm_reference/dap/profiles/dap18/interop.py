"""The interop test API's reading of DAP-18 requests (:class:`Interop18`; see
``interop/__init__.py`` for the fields).

DAP-18 binds the whole ``TaskConfiguration`` into the HPKE AAD of every input and
aggregate share, so a Client, Leader, Helper and Collector that computed different bytes
could not decrypt each other's shares: :func:`task_from_fields` is the only place an
interop request becomes a DAP-18 :class:`~dap.profiles.dap18.task.Task`, and every role
gets the same fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ppm_reference.dap.common import BatchMode, Duration, Interval, Time
from ppm_reference.dap.fields import (
    FieldError,
    b64decode,
    batch_interval_units,
    batch_mode_value,
    dp_policy_field,
    integer,
    require,
    string,
    task_id_field,
)
from ppm_reference.dap.profiles.dap18.client import ClientError
from ppm_reference.dap.profiles.dap18.messages import Query
from ppm_reference.dap.profiles.dap18.task import Task, TaskError
from ppm_reference.dap.profiles.interop_base import InteropFields, Json, TaskBodies, TaskFields

if TYPE_CHECKING:
    from ppm_reference.dap.profiles.base import Profile

# Largest uint64: the default end of a task interval with only a start.
_U64_MAX = 2**64 - 1


def max_measurement(desc: Mapping[str, Any]) -> int:
    """DAP-18 VDAFs take ``max_measurement``; draft-07 sends ``bits`` (the VDAF-08
    parameter), which means ``max_measurement = 2^bits - 1``."""
    if desc.get("max_measurement") is not None:
        value = integer(desc["max_measurement"], "vdaf.max_measurement", 1)
        if "bits" in desc and desc["bits"] is not None:
            bits = integer(desc["bits"], "vdaf.bits", 1)
            if value != 2**bits - 1:
                raise FieldError("vdaf.bits and vdaf.max_measurement disagree")
        return value
    if desc.get("bits") is not None:
        bits = integer(desc["bits"], "vdaf.bits", 1)
        if bits > 64:
            raise FieldError("vdaf.bits must be at most 64")
        return int(2**bits - 1)
    raise FieldError("missing field vdaf.max_measurement (or vdaf.bits)")


def batch_mode(body: Mapping[str, Any]) -> BatchMode:
    """``batch_mode`` (DAP-18, as Janus names it) or draft-07's ``query_type`` (1 time
    interval, 2 fixed size = leader-selected); both must agree when both are given."""
    modes = [batch_mode_value(body[k], k) for k in ("batch_mode", "query_type")
             if body.get(k) is not None]
    if not modes:
        raise FieldError("missing field batch_mode (or query_type)")
    if len(set(modes)) > 1:
        raise FieldError("batch_mode and query_type disagree")
    return modes[0]


def query_from_json(body: Any, task: Task) -> Query:
    """The ``query`` object of collection_start. Times are in seconds (draft) and must be
    aligned to the task's time precision (DAP-18 counts them in time_precision units)."""
    if not isinstance(body, dict):
        raise FieldError("field query must be an object")
    mode = batch_mode_value(body.get("type", body.get("batch_mode")), "query.type")
    if mode != task.batch_mode:
        raise FieldError(f"query.type {int(mode)} does not match the task's batch mode "
                         f"{int(task.batch_mode)}")
    if mode == BatchMode.TIME_INTERVAL:
        return Query.time_interval(batch_interval_units(body, task.time_precision))
    subtype = integer(body.get("subtype", 1), "query.subtype")
    if subtype != 1:
        raise FieldError("DAP-18 leader-selected queries have no batch ID: only subtype 1 "
                         "(current batch) is supported")
    return Query.leader_selected()


#: The ``task_info`` of a request that has none: the bytes Janus's interop binaries bind
#: (``b"task-info"``), so that a task added to Janus and to us without one has the same
#: TaskConfiguration. The draft defines no ``task_info``; the task ID in every AAD already
#: keeps two tasks' shares apart.
DEFAULT_TASK_INFO = b"task-info"


def default_task_info(task_id: bytes) -> bytes:
    """The ``task_info`` when a request has none: :data:`DEFAULT_TASK_INFO`, whatever the
    task (see there)."""
    return DEFAULT_TASK_INFO


def task_interval(body: Mapping[str, Any], time_precision: int) -> Interval | None:
    """The ``task_interval`` extension from ``task_start`` / ``task_end`` (seconds;
    draft-07's ``task_expiration`` is ``task_end``). Absent both: no extension. Both are
    rounded down to the time precision, as Janus's interop binaries do (DAP-18 counts
    times in time_precision units; the draft says nothing), so that both derive the same
    TaskConfiguration; a missing start is 0, a missing end the largest time."""
    start_s = body.get("task_start")
    end_s = body.get("task_end")
    expiration = body.get("task_expiration")
    if expiration is not None:
        exp = integer(expiration, "task_expiration")
        if end_s is not None and integer(end_s, "task_end") != exp:
            raise FieldError("task_end and task_expiration disagree")
        end_s = exp
    if start_s is None and end_s is None:
        return None
    tp = time_precision
    start = integer(start_s, "task_start") // tp if start_s is not None else 0
    end = integer(end_s, "task_end") // tp if end_s is not None else _U64_MAX
    if end <= start:
        raise FieldError("task_end must be after task_start")
    return Interval(Time(start), Duration(end - start))


def task_from_fields(body: Mapping[str, Any], profile: Profile) -> TaskFields:
    """The DAP-18 task (of ``profile``) of an add_task / upload request.
    Required: ``task_id``, ``leader``, ``helper``, ``vdaf``, ``time_precision``,
    ``min_batch_size``, ``batch_mode`` (or ``query_type``). Optional: ``task_info``
    (base64url; default :func:`default_task_info`), ``task_start`` / ``task_end`` /
    ``task_expiration``, ``dp_policy`` (object), ``max_batch_size``,
    ``max_batch_query_count`` (ignored)."""
    return INTEROP_18.task_fields(profile, body, "client")


class Interop18(InteropFields):
    """DAP-18 (VDAF-18): every role is sent, and derives, the same TaskConfiguration."""

    query_reader = staticmethod(query_from_json)
    parameter_readers = MappingProxyType({"max_measurement": max_measurement})

    report_errors = (ClientError,)
    runner_vdafs = InteropFields.runner_cases(
        Prio3Sum={"type": "Prio3Sum", "max_measurement": "255"},
        Prio3MultihotCountVec={"type": "Prio3MultihotCountVec", "length": "4",
                               "max_weight": "2", "chunk_length": "2"},
        Prio3L1BoundSum={"type": "Prio3L1BoundSum", "length": "3", "max_value": "10",
                         "chunk_length": "4"})

    def task_fields(self, profile: Profile, body: Mapping[str, Any], role: str) -> TaskFields:
        """Every role reads the same fields (see :func:`task_from_fields`)."""
        notes: list[str] = []
        task_id = task_id_field(body)
        leader = string(body, "leader")
        helper = string(body, "helper")
        vdaf = self.vdaf_from_descriptor(profile, require(body, "vdaf"))
        time_precision = integer(require(body, "time_precision"), "time_precision", 1)
        min_batch_size = integer(require(body, "min_batch_size"), "min_batch_size", 1)
        mode = batch_mode(body)
        info = (b64decode(body["task_info"], "task_info") if body.get("task_info") is not None
                else default_task_info(task_id))
        interval = task_interval(body, time_precision)
        max_batch_size: int | None = None
        if body.get("max_batch_size") is not None:
            max_batch_size = integer(body["max_batch_size"], "max_batch_size", min_batch_size)
        if body.get("max_batch_query_count") is not None:
            count = integer(body["max_batch_query_count"], "max_batch_query_count", 1)
            if count != 1:
                notes.append(f"max_batch_query_count {count} ignored: DAP-18 collects a batch "
                             "at most once")
        dp_bytes = dp_policy_field(body, vdaf)
        try:
            task = Task.for_vdaf(
                vdaf, task_id=task_id, task_info=info, leader_aggregator_endpoint=leader,
                helper_aggregator_endpoint=helper, time_precision=time_precision,
                min_batch_size=min_batch_size, batch_mode=mode, task_interval=interval,
                profile=profile, dp_policy=dp_bytes)
        except (TaskError, ValueError) as exc:
            raise FieldError(f"invalid task: {exc}") from None
        return TaskFields(task, vdaf, max_batch_size, tuple(notes))

    def task_bodies(self, profile: Profile, *, task_id: str, leader: str, helper: str,
                    vdaf: Json, batch_mode: int, min_batch_size: int, time_precision: int,
                    task_end: int, collector_token: str) -> TaskBodies:
        """The DAP-18 fields to every role (a TaskConfiguration needs them all), with
        draft-07's spellings (query_type, task_expiration, max_batch_query_count) where
        they do not conflict."""
        common: Json = {
            "dap_version": profile.name, "task_id": task_id, "leader": leader,
            "helper": helper, "vdaf": vdaf, "batch_mode": batch_mode,
            "query_type": batch_mode, "min_batch_size": min_batch_size,
            "time_precision": time_precision, "task_end": task_end}
        return TaskBodies(
            collector={**common, "collector_authentication_token": collector_token},
            aggregator={**common, "max_batch_query_count": 1, "task_expiration": task_end},
            upload=common)


INTEROP_18 = Interop18()

__all__ = ["DEFAULT_TASK_INFO", "INTEROP_18", "Interop18", "batch_mode", "default_task_info",
           "max_measurement", "query_from_json", "task_from_fields", "task_interval"]
