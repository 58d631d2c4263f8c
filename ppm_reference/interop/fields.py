"""Parsing the JSON bodies of the interop test API (draft-dcook-ppm-dap-interop-test-design-07
Section 4) and formatting results back; no I/O.

What a request's fields mean depends on its DAP draft: each profile that the test API
serves reads them with its ``profile.interop`` (a
:class:`~dap.profiles.interop_base.InteropFields`: task, VDAF and query readers). This
module holds what does not depend on the draft: the scalar readers (from
:mod:`dap.fields`), measurements and results, HPKE configurations and tokens, and
:func:`request_version`, which chooses the draft of a request.

Errors are :class:`FieldError` with a message naming the field; the server turns them into
``{"status": "error", "error": ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ppm_reference.dap.common import HpkeConfig
from ppm_reference.dap.fields import (
    FieldError,
    b64decode,
    b64encode,
    integer,
    require,
    string,
    task_id_field,
)
from ppm_reference.dap.profiles import DEFAULT_PROFILE, PROFILES, SHIPPED, Profile, get_profile
from ppm_reference.dap.profiles.interop_base import InteropFields, TaskFields

# ---------------------------------------------------------------------------------------
# Protocol version of a request
# ---------------------------------------------------------------------------------------


def interop_profiles() -> tuple[Profile, ...]:
    """The shipped profiles that the test API serves (those with ``interop``), newest
    first."""
    return tuple(PROFILES[name] for name in SHIPPED
                 if name in PROFILES and PROFILES[name].interop is not None)


#: The ``dap_version`` names the test API serves, newest first.
VERSION_NAMES: tuple[str, ...] = tuple(p.name for p in interop_profiles())

# The version of a request with no ``dap_version``: the field current Janus sends for
# DAP-18 tasks (and no draft-07 request has) means dap-18; anything else is a request of
# draft-07, which was written for DAP-09.
_WITH_BATCH_MODE = "dap-18"
_WITHOUT_BATCH_MODE = "dap-09"


def request_version(body: Mapping[str, Any]) -> str:
    """The DAP version a request is for.

    1. ``dap_version`` (``"dap-09"`` or ``"dap-18"``, or another name of
       :data:`VERSION_NAMES`; our addition, the draft's API is unversioned), when present,
       decides.
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
            raise FieldError(f"unknown dap_version {name!r}; known: {sorted(VERSION_NAMES)}")
        return name
    return _WITH_BATCH_MODE if body.get("batch_mode") is not None else _WITHOUT_BATCH_MODE


#: The two dialects of the test API: ``"draft07"`` (draft-dcook-ppm-dap-interop-test-design-07,
#: with our ``dap_version`` for DAP-18 and later tasks) and ``"janus"`` (what Janus's interop
#: driver and binaries send: no ``dap_version``, ``batch_mode``, DAP-Auth-Token).
DIALECTS: tuple[str, ...] = ("draft07", "janus")


def request_dialect(body: Mapping[str, Any]) -> str:
    """The dialect of a request, for what the dialects do differently besides the
    fields, which every role reads in both (today only the header of the DAP tokens of a
    DAP-18-or-later task).

    A request with ``dap_version`` comes from a runner that knows our extension of the
    draft (``ppm interop run --dialect draft07``): ``"draft07"``, whose DAP-18 tokens
    travel as DAP-18 Section 3.5's ``Authorization: Bearer``. Without it, ``"janus"``:
    Janus's driver sends none, and Janus's interop aggregator authenticates DAP-18 peers
    with ``DAP-Auth-Token`` only, the header draft-07 names too. (DAP-09 tasks use
    DAP-Auth-Token in both.)"""
    return "draft07" if body.get("dap_version") is not None else "janus"


def interop_of(version: str) -> InteropFields:
    """The field readers of a ``dap_version``."""
    fields: InteropFields = get_profile(version).interop
    return fields


# ---------------------------------------------------------------------------------------
# VDAFs, measurements and results
# ---------------------------------------------------------------------------------------


def vdaf_from_descriptor(desc: Any, dap_version: str = DEFAULT_PROFILE.name) -> Any:
    """The VDAF object a ``vdaf`` field describes, in the VDAF draft of ``dap_version``
    (VDAF-08 classes for ``"dap-09"``)."""
    return interop_of(dap_version).vdaf_from_descriptor(get_profile(dap_version), desc)


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
# Aggregator parameters
# ---------------------------------------------------------------------------------------


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


__all__ = [
    "DIALECTS",
    "VERSION_NAMES",
    "FieldError",
    "TaskFields",
    "auth_token",
    "b64decode",
    "b64encode",
    "hpke_config",
    "integer",
    "interop_of",
    "interop_profiles",
    "measurement_from_json",
    "request_dialect",
    "request_version",
    "require",
    "result_to_json",
    "string",
    "task_id_field",
    "vdaf_from_descriptor",
]
