"""Parsing the JSON bodies of the interop test API (draft-dcook-ppm-dap-interop-test-design-07
Section 4) into this project's task parameters, and formatting results back.

Everything here is pure (no I/O) so that the four roles derive their task from the same
fields in exactly the same way: DAP-18 binds the whole ``TaskConfiguration`` into the HPKE
AAD of every input and aggregate share, so a Client, Leader, Helper and Collector that
computed different bytes could not decrypt each other's shares. :func:`task_from_fields`
is therefore the only place an interop request becomes a :class:`dap.task.Task`.

Errors are :class:`FieldError` with a message naming the field; the server turns them into
``{"status": "error", "error": ...}``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dap.dp import encode_spec
from dap.messages import BatchMode, Duration, HpkeConfig, Interval, Query, Time
from dap.profile import DEFAULT_PROFILE
from dap.task import Task, TaskError

# Largest uint64: the default end of a task interval with only a start.
_U64_MAX = 2**64 - 1


_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class FieldError(ValueError):
    """A request field that is missing or malformed."""


# ---------------------------------------------------------------------------------------
# Scalars
# ---------------------------------------------------------------------------------------


def b64encode(data: bytes) -> str:
    """Unpadded base64url, as the draft (Section 4) asks for binary values."""
    return base64.urlsafe_b64encode(bytes(data)).rstrip(b"=").decode("ascii")


def b64decode(value: Any, name: str) -> bytes:
    """Strict base64url (padding optional): anything else is a FieldError."""
    if not isinstance(value, str):
        raise FieldError(f"field {name} must be a base64url string")
    text = value.rstrip("=")
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise FieldError(f"field {name} is not valid base64url")
    try:
        out = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise FieldError(f"field {name} is not valid base64url") from None
    if b64encode(out) != text:
        raise FieldError(f"field {name} is not canonical base64url")
    return out


def integer(value: Any, name: str, minimum: int = 0) -> int:
    """An integer given as a JSON number or as a decimal string (the draft encodes VDAF
    parameters, measurements and results as strings, other integers as numbers; we
    accept both everywhere)."""
    if isinstance(value, bool):
        raise FieldError(f"field {name} must be an integer, got a boolean")
    if isinstance(value, int):
        out = value
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        out = int(value.strip())
    else:
        raise FieldError(f"field {name} must be an integer or a decimal string, got {value!r}")
    if out < minimum:
        raise FieldError(f"field {name} must be at least {minimum}, got {out}")
    return out


def require(body: Mapping[str, Any], name: str) -> Any:
    if name not in body or body[name] is None:
        raise FieldError(f"missing field {name}")
    return body[name]


def string(body: Mapping[str, Any], name: str) -> str:
    value = require(body, name)
    if not isinstance(value, str) or not value:
        raise FieldError(f"field {name} must be a non-empty string")
    return value


# ---------------------------------------------------------------------------------------
# VDAF descriptors (draft Section 4.1.1, plus Prio3MultihotCountVec)
# ---------------------------------------------------------------------------------------


def _max_measurement(desc: Mapping[str, Any]) -> int:
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


def _param(desc: Mapping[str, Any], name: str) -> int:
    return integer(require_vdaf(desc, name), f"vdaf.{name}", 1)


def require_vdaf(desc: Mapping[str, Any], name: str) -> Any:
    if name not in desc or desc[name] is None:
        raise FieldError(f"missing field vdaf.{name}")
    return desc[name]


def _prio3(name: str) -> type[Any]:
    from vdaf import prio3

    cls: type[Any] = getattr(prio3, name)
    return cls


# VDAF type -> builder of the (two-share) VDAF object from its descriptor.
VDAF_BUILDERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "Prio3Count": lambda d: _prio3("Prio3Count")(2),
    "Prio3Sum": lambda d: _prio3("Prio3Sum")(2, _max_measurement(d)),
    "Prio3SumVec": lambda d: _prio3("Prio3SumVec")(
        2, _param(d, "length"), _max_measurement(d), _param(d, "chunk_length")),
    "Prio3Histogram": lambda d: _prio3("Prio3Histogram")(
        2, _param(d, "length"), _param(d, "chunk_length")),
    "Prio3MultihotCountVec": lambda d: _prio3("Prio3MultihotCountVec")(
        2, _param(d, "length"), _param(d, "max_weight"), _param(d, "chunk_length")),
}


def vdaf_from_descriptor(desc: Any) -> Any:
    """The VDAF object a ``vdaf`` field describes."""
    if not isinstance(desc, dict):
        raise FieldError("field vdaf must be an object")
    kind = desc.get("type")
    if not isinstance(kind, str):
        raise FieldError("missing field vdaf.type")
    builder = VDAF_BUILDERS.get(kind)
    if builder is None:
        raise FieldError(f"unsupported VDAF type {kind!r}; supported: {sorted(VDAF_BUILDERS)}")
    try:
        return builder(desc)
    except (ValueError, TypeError) as exc:
        if isinstance(exc, FieldError):
            raise
        raise FieldError(f"invalid {kind} parameters: {exc}") from None


def measurement_from_json(vdaf: Any, value: Any) -> Any:
    """A measurement in the draft's encoding: decimal strings (Count, Sum, Histogram),
    arrays of decimal strings (SumVec), arrays of booleans or "0"/"1" (MultihotCountVec).
    It is checked against the VDAF's circuit before anything is sent."""
    kind = type(vdaf).__name__
    out: Any
    if kind in ("Prio3Count", "Prio3Sum", "Prio3Histogram"):
        out = integer(value, "measurement")
    elif not isinstance(value, list):
        raise FieldError(f"field measurement must be an array for {kind}")
    elif kind == "Prio3MultihotCountVec":
        out = [v if isinstance(v, bool) else bool(integer(v, "measurement[]"))
               for v in value]
    else:
        out = [integer(v, "measurement[]") for v in value]
    try:
        vdaf.flp.encode(out)
    except (ValueError, TypeError) as exc:
        raise FieldError(f"invalid measurement for {kind}: {exc}") from None
    return out


def result_to_json(result: Any) -> Any:
    """An aggregate result in the draft's encoding: a decimal string or an array of them
    (a DP-debiased float result is written with ``repr``)."""
    if isinstance(result, list | tuple):
        return [result_to_json(v) for v in result]
    if isinstance(result, bool):
        return str(int(result))
    if isinstance(result, int):
        return str(result)
    return repr(result)


# ---------------------------------------------------------------------------------------
# Batch mode and queries (draft Section 4.1.2)
# ---------------------------------------------------------------------------------------

_BATCH_MODE_NAMES = {"time_interval": BatchMode.TIME_INTERVAL,
                     "leader_selected": BatchMode.LEADER_SELECTED}


def _batch_mode_value(value: Any, name: str) -> BatchMode:
    if isinstance(value, str) and value in _BATCH_MODE_NAMES:
        return _BATCH_MODE_NAMES[value]
    code = integer(value, name, 1)
    try:
        return BatchMode(code)
    except ValueError:
        raise FieldError(f"field {name}: unknown batch mode {code}") from None


def batch_mode(body: Mapping[str, Any]) -> BatchMode:
    """``batch_mode`` (DAP-18, as Janus names it) or draft-07's ``query_type`` (1 time
    interval, 2 fixed size = leader-selected); both must agree when both are given."""
    modes = [_batch_mode_value(body[k], k) for k in ("batch_mode", "query_type")
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
    mode = _batch_mode_value(
        body.get("type", body.get("batch_mode")), "query.type")
    if mode != task.batch_mode:
        raise FieldError(f"query.type {int(mode)} does not match the task's batch mode "
                         f"{int(task.batch_mode)}")
    if mode == BatchMode.TIME_INTERVAL:
        tp = task.time_precision
        start = integer(require(body, "batch_interval_start"), "query.batch_interval_start")
        duration = integer(require(body, "batch_interval_duration"),
                           "query.batch_interval_duration", 1)
        if start % tp or duration % tp:
            raise FieldError(f"query batch interval must be aligned to time_precision {tp}")
        return Query.time_interval(Interval(Time(start // tp), Duration(duration // tp)))
    subtype = integer(body.get("subtype", 1), "query.subtype")
    if subtype != 1:
        raise FieldError("DAP-18 leader-selected queries have no batch ID: only subtype 1 "
                         "(current batch) is supported")
    return Query.leader_selected()


# ---------------------------------------------------------------------------------------
# Task parameters
# ---------------------------------------------------------------------------------------


def task_id_field(body: Mapping[str, Any]) -> bytes:
    """The 32-byte ``task_id`` (base64url)."""
    task_id = b64decode(require(body, "task_id"), "task_id")
    if len(task_id) != 32:
        raise FieldError(f"task_id must be 32 bytes, got {len(task_id)}")
    return task_id


def default_task_info(task_id: bytes) -> bytes:
    """The deterministic ``task_info`` when a request has none: ``"interop:"`` followed by
    the base64url task ID (so two tasks never share a configuration)."""
    return b"interop:" + b64encode(task_id).encode("ascii")


def task_interval(body: Mapping[str, Any], time_precision: int) -> Interval | None:
    """The ``task_interval`` extension from ``task_start`` / ``task_end`` (seconds;
    draft-07's ``task_expiration`` is ``task_end``). Absent both: no extension. The start
    is rounded down and the end up to the time precision; a missing start is 0, a missing
    end is the largest time."""
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
    end = -(-integer(end_s, "task_end") // tp) if end_s is not None else _U64_MAX
    if end <= start:
        raise FieldError("task_end must be after task_start")
    return Interval(Time(start), Duration(end - start))


@dataclass(frozen=True)
class TaskFields:
    """What a role learns about a task from an add_task (or upload) request."""

    task: Task
    vdaf: Any
    max_batch_size: int | None
    notes: tuple[str, ...]


def task_from_fields(body: Mapping[str, Any]) -> TaskFields:
    """The DAP-18 task of an add_task / upload request. Required: ``task_id``, ``leader``,
    ``helper``, ``vdaf``, ``time_precision``, ``min_batch_size``, ``batch_mode`` (or
    ``query_type``). Optional: ``task_info`` (base64url; default
    :func:`default_task_info`), ``task_start`` / ``task_end`` / ``task_expiration``,
    ``dp_policy`` (object), ``max_batch_size``, ``max_batch_query_count`` (ignored)."""
    notes: list[str] = []
    task_id = task_id_field(body)
    leader = string(body, "leader")
    helper = string(body, "helper")
    vdaf = vdaf_from_descriptor(require(body, "vdaf"))
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
    dp = body.get("dp_policy")
    dp_bytes: bytes | None = None
    if dp is not None:
        if not isinstance(dp, dict):
            raise FieldError("field dp_policy must be an object")
        try:
            dp_bytes = encode_spec(dp)
        except ValueError as exc:
            raise FieldError(f"dp_policy: {exc}") from None
    try:
        task = Task.for_vdaf(
            vdaf, task_id=task_id, task_info=info, leader_aggregator_endpoint=leader,
            helper_aggregator_endpoint=helper, time_precision=time_precision,
            min_batch_size=min_batch_size, batch_mode=mode, task_interval=interval,
            profile=DEFAULT_PROFILE, dp_policy=dp_bytes)
    except (TaskError, ValueError) as exc:
        raise FieldError(f"invalid task: {exc}") from None
    if isinstance(dp, dict):
        from dap.dp import policy_from_spec

        try:
            policy_from_spec(dp, vdaf)
        except ValueError as exc:
            raise FieldError(f"dp_policy: {exc}") from None
    return TaskFields(task, vdaf, max_batch_size, tuple(notes))


def hpke_config(body: Mapping[str, Any], name: str) -> HpkeConfig:
    raw = b64decode(require(body, name), name)
    try:
        return HpkeConfig.decode(raw)
    except ValueError as exc:
        raise FieldError(f"field {name} is not an encoded HpkeConfig: {exc}") from None


def auth_token(body: Mapping[str, Any], name: str) -> str:
    """A bearer token: printable ASCII without spaces (safe as an HTTP header value)."""
    token = string(body, name)
    if not token.isascii() or not token.isprintable() or " " in token:
        raise FieldError(f"field {name} is not safe as an HTTP header value")
    return token
