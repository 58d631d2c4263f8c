"""Reading request fields: the draft-neutral helpers behind every profile's interop field
readers (``dap/profiles/<draft>/interop.py``) and the interop test API (``interop/``).

The interop test API (draft-dcook-ppm-dap-interop-test-design-07 Section 4) sends binary
values as unpadded base64url and integers as JSON numbers or decimal strings; these
helpers read them strictly. Every failure is a :class:`FieldError` whose message names
the field; the test API answers it as ``{"status": "error", "error": ...}``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from ppm_reference.dap.common import BatchMode, Duration, Interval, Time

_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class FieldError(ValueError):
    """A request field that is missing or malformed."""


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
    """The value of a field that must be present and not null."""
    if name not in body or body[name] is None:
        raise FieldError(f"missing field {name}")
    return body[name]


def string(body: Mapping[str, Any], name: str) -> str:
    """A non-empty string field."""
    value = require(body, name)
    if not isinstance(value, str) or not value:
        raise FieldError(f"field {name} must be a non-empty string")
    return value


def task_id_field(body: Mapping[str, Any]) -> bytes:
    """The 32-byte ``task_id`` (base64url)."""
    task_id = b64decode(require(body, "task_id"), "task_id")
    if len(task_id) != 32:
        raise FieldError(f"task_id must be 32 bytes, got {len(task_id)}")
    return task_id


# The core's batch modes by name. DAP-09's query types have the values of the DAP-18
# batch modes that replaced them, so both drafts' names are read here.
BATCH_MODE_NAMES: Mapping[str, BatchMode] = {
    "time_interval": BatchMode.TIME_INTERVAL,
    "leader_selected": BatchMode.LEADER_SELECTED,
    "fixed_size": BatchMode.LEADER_SELECTED,
}


def batch_mode_value(value: Any, name: str) -> BatchMode:
    """A batch mode or query type given by number (1, 2) or by name."""
    if isinstance(value, str) and value in BATCH_MODE_NAMES:
        return BATCH_MODE_NAMES[value]
    code = integer(value, name, 1)
    try:
        return BatchMode(code)
    except ValueError:
        raise FieldError(f"field {name}: unknown batch mode or query type {code}") from None


def dp_policy_field(body: Mapping[str, Any], vdaf: Any) -> bytes | None:
    """The optional ``dp_policy`` object, encoded, after checking it applies to the VDAF."""
    dp = body.get("dp_policy")
    if dp is None:
        return None
    if not isinstance(dp, dict):
        raise FieldError("field dp_policy must be an object")
    from ppm_reference.dap.dp import encode_spec, policy_from_spec

    try:
        encoded = encode_spec(dp)
        policy_from_spec(dp, vdaf)
    except ValueError as exc:
        raise FieldError(f"dp_policy: {exc}") from None
    return encoded


__all__ = [
    "BATCH_MODE_NAMES",
    "FieldError",
    "b64decode",
    "b64encode",
    "batch_mode_value",
    "dp_policy_field",
    "integer",
    "require",
    "string",
    "task_id_field",
]


def batch_interval_units(body: Mapping[str, Any], time_precision: int) -> Interval:
    """The batch interval of a time-interval ``query`` object (``batch_interval_start``,
    ``batch_interval_duration``, in seconds as the interop API sends them), in
    time_precision units; it must be aligned to ``time_precision``."""
    tp = time_precision
    start = integer(require(body, "batch_interval_start"), "query.batch_interval_start")
    duration = integer(require(body, "batch_interval_duration"),
                       "query.batch_interval_duration", 1)
    if start % tp or duration % tp:
        raise FieldError(f"query batch interval must be aligned to time_precision {tp}")
    return Interval(Time(start // tp), Duration(duration // tp))
