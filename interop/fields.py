"""Parsing the JSON bodies of the interop test API (draft-dcook-ppm-dap-interop-test-design-07
Section 4) into this project's task parameters, and formatting results back.

Everything here is pure (no I/O) so that the four roles derive their task from the same
fields in exactly the same way: DAP-18 binds the whole ``TaskConfiguration`` into the HPKE
AAD of every input and aggregate share, so a Client, Leader, Helper and Collector that
computed different bytes could not decrypt each other's shares. :func:`task_from_fields`
is therefore the only place an interop request becomes a DAP-18
:class:`dap.profiles.dap18.task.Task`, and :func:`task09_from_fields` the only place one
becomes a DAP-09 :class:`dap.profiles.dap09.task.Task09`
(DAP-09 binds only the task ID into its AADs, so each role needs, and the draft sends it,
only the parameters that role uses). :func:`request_version` decides which of the two a
request is.

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

from dap.common import BatchMode, Duration, HpkeConfig, Interval, Time
from dap.dp import encode_spec
from dap.profiles import DEFAULT_PROFILE
from dap.profiles.dap09 import DAP_09
from dap.profiles.dap09 import messages as m09
from dap.profiles.dap09.messages import FixedSizeQuery, QueryType
from dap.profiles.dap09.task import Task09, Task09Error
from dap.profiles.dap18.messages import Query
from dap.profiles.dap18.task import Task, TaskError

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


def _bits(desc: Mapping[str, Any]) -> int:
    """VDAF-08 Prio3Sum / Prio3SumVec take ``bits`` (draft-07's field). ``max_measurement``
    (the DAP-18 spelling) is accepted when it is ``2^bits - 1``, the only values VDAF-08
    can express."""
    bits: int | None = None
    if desc.get("bits") is not None:
        bits = integer(desc["bits"], "vdaf.bits", 1)
    if desc.get("max_measurement") is not None:
        value = integer(desc["max_measurement"], "vdaf.max_measurement", 1)
        if value & (value + 1):
            raise FieldError(f"vdaf.max_measurement {value} is not 2^bits - 1: VDAF-08 "
                             "(dap-09) Prio3Sum and Prio3SumVec take bits")
        if bits is not None and value != 2**bits - 1:
            raise FieldError("vdaf.bits and vdaf.max_measurement disagree")
        bits = value.bit_length()
    if bits is None:
        raise FieldError("missing field vdaf.bits")
    return bits


def _vdaf08(name: str) -> type[Any]:
    return DAP_09.vdaf_class(name)


# VDAF type -> builder of the (two-share) VDAF object from its descriptor, per version:
# DAP-18 runs VDAF-18 (draft-irtf-cfrg-vdaf-18 and later), DAP-09 runs VDAF-08.
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

VDAF08_BUILDERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "Prio3Count": lambda d: _vdaf08("Prio3Count")(2),
    "Prio3Sum": lambda d: _vdaf08("Prio3Sum")(2, _bits(d)),
    "Prio3SumVec": lambda d: _vdaf08("Prio3SumVec")(
        2, _param(d, "length"), _bits(d), _param(d, "chunk_length")),
    "Prio3Histogram": lambda d: _vdaf08("Prio3Histogram")(
        2, _param(d, "length"), _param(d, "chunk_length")),
}

BUILDERS_BY_VERSION = {"dap-18": VDAF_BUILDERS, "dap-09": VDAF08_BUILDERS}

# Types a version refuses with a specific reason rather than "unsupported".
_REFUSED = {
    ("dap-09", "Prio3MultihotCountVec"):
        "Prio3MultihotCountVec is not a VDAF of draft-irtf-cfrg-vdaf-08, which dap-09 "
        "tasks run (it first appears in VDAF-10); use it with dap_version dap-18",
}


def vdaf_from_descriptor(desc: Any, dap_version: str = "dap-18") -> Any:
    """The VDAF object a ``vdaf`` field describes, in the VDAF draft of ``dap_version``
    (VDAF-08 classes for ``"dap-09"``)."""
    if not isinstance(desc, dict):
        raise FieldError("field vdaf must be an object")
    kind = desc.get("type")
    if not isinstance(kind, str):
        raise FieldError("missing field vdaf.type")
    builders = BUILDERS_BY_VERSION[dap_version]
    builder = builders.get(kind)
    if builder is None:
        refused = _REFUSED.get((dap_version, kind))
        if refused is not None:
            raise FieldError(refused)
        raise FieldError(f"unsupported VDAF type {kind!r} for {dap_version}; supported: "
                         f"{sorted(builders)}")
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
    kind = getattr(vdaf, "NAME", type(vdaf).__name__)
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

# DAP-09's query types have the values of the DAP-18 batch modes that replaced them.
_BATCH_MODE_NAMES = {"time_interval": BatchMode.TIME_INTERVAL,
                     "leader_selected": BatchMode.LEADER_SELECTED,
                     "fixed_size": BatchMode.LEADER_SELECTED}


def _batch_mode_value(value: Any, name: str) -> BatchMode:
    if isinstance(value, str) and value in _BATCH_MODE_NAMES:
        return _BATCH_MODE_NAMES[value]
    code = integer(value, name, 1)
    try:
        return BatchMode(code)
    except ValueError:
        raise FieldError(f"field {name}: unknown batch mode or query type {code}") from None


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


def _query_type_value(value: Any, name: str) -> QueryType:
    return QueryType(int(_batch_mode_value(value, name)))


def query_type(body: Mapping[str, Any], required: bool = True) -> QueryType | None:
    """DAP-09's ``query_type`` (1 time_interval, 2 fixed_size); DAP-18's ``batch_mode``
    spelling (2 leader-selected = fixed_size) is accepted, and both must agree."""
    types = [_query_type_value(body[k], k) for k in ("query_type", "batch_mode")
             if body.get(k) is not None]
    if not types:
        if required:
            raise FieldError("missing field query_type")
        return None
    if len(set(types)) > 1:
        raise FieldError("query_type and batch_mode disagree")
    return types[0]


def query09_from_json(body: Any, task: Task09) -> m09.Query:
    """The ``query`` object of a DAP-09 collection_start: a time interval in seconds
    (aligned to the task's time_precision when the Collector was given one; the Leader
    checks it in any case), or a fixed-size query, ``subtype`` 1 current batch (the
    default) or 0 by batch ID (``batch_id``, base64url, 32 bytes)."""
    if not isinstance(body, dict):
        raise FieldError("field query must be an object")
    if body.get("type") is None and body.get("query_type") is None:
        raise FieldError("missing field query.type")
    qt = _query_type_value(body.get("type", body.get("query_type")), "query.type")
    if qt != task.query_type:
        raise FieldError(f"query.type {int(qt)} does not match the task's query_type "
                         f"{int(task.query_type)}")
    if qt == QueryType.TIME_INTERVAL:
        tp = task.time_precision
        start = integer(require(body, "batch_interval_start"), "query.batch_interval_start")
        duration = integer(require(body, "batch_interval_duration"),
                           "query.batch_interval_duration", 1)
        if start % tp or duration % tp:
            raise FieldError(f"query batch interval must be aligned to time_precision {tp}")
        return m09.Query.time_interval(m09.Interval(m09.Time(start), m09.Duration(duration)))
    subtype = integer(body.get("subtype", 1), "query.subtype")
    if subtype == 1:
        return m09.Query.fixed_size(FixedSizeQuery.current_batch())
    if subtype == 0:
        batch_id = b64decode(require(body, "batch_id"), "query.batch_id")
        if len(batch_id) != 32:
            raise FieldError(f"query.batch_id must be 32 bytes, got {len(batch_id)}")
        return m09.Query.fixed_size(FixedSizeQuery.by_batch_id(batch_id))
    raise FieldError(f"field query.subtype: unknown fixed-size query type {subtype} "
                     "(0 by_batch_id, 1 current_batch)")


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

    task: Task | Task09
    vdaf: Any
    max_batch_size: int | None      # DAP-18 Leader option (a DAP-09 task holds its own)
    notes: tuple[str, ...]


def _dp_policy(body: Mapping[str, Any], vdaf: Any) -> bytes | None:
    """The optional ``dp_policy`` object, encoded, after checking it applies to the VDAF."""
    dp = body.get("dp_policy")
    if dp is None:
        return None
    if not isinstance(dp, dict):
        raise FieldError("field dp_policy must be an object")
    from dap.dp import policy_from_spec

    try:
        encoded = encode_spec(dp)
        policy_from_spec(dp, vdaf)
    except ValueError as exc:
        raise FieldError(f"dp_policy: {exc}") from None
    return encoded


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
    dp_bytes = _dp_policy(body, vdaf)
    try:
        task = Task.for_vdaf(
            vdaf, task_id=task_id, task_info=info, leader_aggregator_endpoint=leader,
            helper_aggregator_endpoint=helper, time_precision=time_precision,
            min_batch_size=min_batch_size, batch_mode=mode, task_interval=interval,
            profile=DEFAULT_PROFILE, dp_policy=dp_bytes)
    except (TaskError, ValueError) as exc:
        raise FieldError(f"invalid task: {exc}") from None
    return TaskFields(task, vdaf, max_batch_size, tuple(notes))


# Stands for the Helper's URL in a Collector's DAP-09 task when the request has none (the
# draft sends the Collector no ``helper``; a DAP-09 Collector only talks to the Leader).
# ``.invalid`` never resolves (RFC 6761).
PLACEHOLDER_HELPER = "http://helper.invalid/"


def task09_from_fields(body: Mapping[str, Any], role: str) -> TaskFields:
    """The DAP-09 task of a request to ``role`` (``"client"`` upload, ``"collector"``,
    ``"leader"`` or ``"helper"`` add_task), from the draft-07 fields.

    DAP-09 binds nothing but the task ID into its HPKE associated data, so a role only
    needs the parameters it uses, and the draft sends each role just those:

    * every role: ``task_id``, ``leader``, ``vdaf`` (VDAF-08 parameters, see
      :data:`VDAF08_BUILDERS`);
    * Client, Leader, Helper: ``helper`` and ``time_precision`` (a Collector without them
      uses :data:`PLACEHOLDER_HELPER` and precision 1, i.e. no alignment check of its
      own: the Leader checks batch intervals);
    * Collector, Leader, Helper: ``query_type`` (1 time_interval, 2 fixed_size; the
      DAP-18 ``batch_mode`` spelling is accepted); a Client without it uses
      time_interval, which its reports do not depend on;
    * Leader, Helper: ``min_batch_size``; optional ``max_batch_size`` (fixed_size only;
      null or absent: no maximum), ``max_batch_query_count`` (default 1) and
      ``task_expiration`` (seconds; ``task_end`` is the same field spelled as for
      DAP-18). Clients refuse to upload past ``task_expiration`` when they are given it.

    Optional for every role: ``dp_policy`` (as for DAP-18; DAP-09 binds no task
    configuration, so each role must be given the same one). ``task_info`` and
    ``task_start`` have no DAP-09 counterpart: ignored, with a note."""
    notes: list[str] = []
    aggregator = role in ("leader", "helper")
    task_id = task_id_field(body)
    leader = string(body, "leader")
    vdaf = vdaf_from_descriptor(require(body, "vdaf"), "dap-09")
    if role == "collector" and body.get("helper") is None:
        helper = PLACEHOLDER_HELPER
    else:
        helper = string(body, "helper")
    if role == "collector" and body.get("time_precision") is None:
        time_precision = 1
    else:
        time_precision = integer(require(body, "time_precision"), "time_precision", 1)
    qt = query_type(body, required=role != "client") or QueryType.TIME_INTERVAL
    if aggregator or body.get("min_batch_size") is not None:
        min_batch_size = integer(require(body, "min_batch_size"), "min_batch_size", 1)
    else:
        min_batch_size = 1
    max_batch_size: int | None = None
    if aggregator and body.get("max_batch_size") is not None:
        max_batch_size = integer(body["max_batch_size"], "max_batch_size", 1)
    max_batch_query_count = 1
    if body.get("max_batch_query_count") is not None:
        max_batch_query_count = integer(body["max_batch_query_count"],
                                        "max_batch_query_count", 1)
    expiration: int | None = None
    for name in ("task_expiration", "task_end"):
        if body.get(name) is not None:
            value = integer(body[name], name)
            if expiration is not None and value != expiration:
                raise FieldError("task_end and task_expiration disagree")
            expiration = value
    for name, why in (("task_start", "DAP-09 tasks have no start time"),
                      ("task_info", "DAP-09 tasks have no task_info")):
        if body.get(name) is not None:
            notes.append(f"{name} ignored: {why}")
    dp_bytes = _dp_policy(body, vdaf)
    try:
        task = Task09.for_vdaf(
            vdaf, task_id=task_id, leader_aggregator_endpoint=leader,
            helper_aggregator_endpoint=helper, query_type=qt, time_precision=time_precision,
            min_batch_size=min_batch_size, max_batch_size=max_batch_size,
            max_batch_query_count=max_batch_query_count, task_expiration=expiration,
            profile=DAP_09, dp_policy=dp_bytes)
    except (Task09Error, ValueError) as exc:
        raise FieldError(f"invalid task: {exc}") from None
    return TaskFields(task, vdaf, None, tuple(notes))


# ---------------------------------------------------------------------------------------
# Protocol version of a request
# ---------------------------------------------------------------------------------------

VERSION_NAMES = ("dap-09", "dap-18")


def request_version(body: Mapping[str, Any]) -> str:
    """The DAP version a request is for.

    1. ``dap_version`` (``"dap-09"`` or ``"dap-18"``; our addition, the draft's API is
       unversioned), when present, decides.
    2. Otherwise ``batch_mode`` -- the field current Janus sends for DAP-18 tasks, and
       which no draft-07 request has -- means dap-18;
    3. anything else is dap-09: draft-07 was written for DAP-09, and its requests carry
       ``query_type`` (add_task) or no mode at all (upload) -- a DAP-18 request must carry
       ``batch_mode``, which its TaskConfiguration binds.

    So a stock draft-07 test runner drives dap-09 tasks, a Janus-style one dap-18 tasks,
    and ``dap_version`` settles anything else (e.g. DAP-18 with only ``query_type``).
    collection_start and collection_poll follow the version their task was added with."""
    name = body.get("dap_version")
    if name is not None:
        if not isinstance(name, str) or name not in VERSION_NAMES:
            raise FieldError(f"unknown dap_version {name!r}; known: {list(VERSION_NAMES)}")
        return name
    return "dap-18" if body.get("batch_mode") is not None else "dap-09"


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
