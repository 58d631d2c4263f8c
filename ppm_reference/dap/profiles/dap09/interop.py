"""The interop test API's reading of DAP-09 requests (:class:`Interop09`), with the fields
of draft-dcook-ppm-dap-interop-test-design-07, which was written for DAP-09 (see
``interop/__init__.py``).

DAP-09 binds only the task ID into its HPKE associated data, so each role needs -- and the
draft sends it -- only the parameters that role uses: :func:`task09_from_fields` is the
only place an interop request becomes a DAP-09 :class:`~dap.profiles.dap09.task.Task09`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ppm_reference.dap import fields as f
from ppm_reference.dap.profiles.dap09 import messages as m09
from ppm_reference.dap.profiles.dap09.client import Client09Error
from ppm_reference.dap.profiles.dap09.messages import FixedSizeQuery, QueryType
from ppm_reference.dap.profiles.dap09.task import Task09, Task09Error
from ppm_reference.dap.profiles.interop_base import InteropFields, Json, TaskBodies, TaskFields

if TYPE_CHECKING:
    from ppm_reference.dap.profiles.base import Profile

# Stands for the Helper's URL in a Collector's DAP-09 task when the request has none (the
# draft sends the Collector no ``helper``; a DAP-09 Collector only talks to the Leader).
# ``.invalid`` never resolves (RFC 6761).
PLACEHOLDER_HELPER = "http://helper.invalid/"


def bits(desc: Mapping[str, Any]) -> int:
    """VDAF-08 Prio3Sum / Prio3SumVec take ``bits`` (draft-07's field). ``max_measurement``
    (the DAP-18 spelling) is accepted when it is ``2^bits - 1``, the only values VDAF-08
    can express."""
    value_bits: int | None = None
    if desc.get("bits") is not None:
        value_bits = f.integer(desc["bits"], "vdaf.bits", 1)
    if desc.get("max_measurement") is not None:
        value = f.integer(desc["max_measurement"], "vdaf.max_measurement", 1)
        if value & (value + 1):
            raise f.FieldError(f"vdaf.max_measurement {value} is not 2^bits - 1: VDAF-08 "
                             "(dap-09) Prio3Sum and Prio3SumVec take bits")
        if value_bits is not None and value != 2**value_bits - 1:
            raise f.FieldError("vdaf.bits and vdaf.max_measurement disagree")
        value_bits = value.bit_length()
    if value_bits is None:
        raise f.FieldError("missing field vdaf.bits")
    return value_bits


def _query_type_value(value: Any, name: str) -> QueryType:
    return QueryType(int(f.batch_mode_value(value, name)))


def query_type(body: Mapping[str, Any], required: bool = True) -> QueryType | None:
    """DAP-09's ``query_type`` (1 time_interval, 2 fixed_size); DAP-18's ``batch_mode``
    spelling (2 leader-selected = fixed_size) is accepted, and both must agree."""
    types = [_query_type_value(body[k], k) for k in ("query_type", "batch_mode")
             if body.get(k) is not None]
    if not types:
        if required:
            raise f.FieldError("missing field query_type")
        return None
    if len(set(types)) > 1:
        raise f.FieldError("query_type and batch_mode disagree")
    return types[0]


def query09_from_json(body: Any, task: Task09) -> m09.Query:
    """The ``query`` object of a DAP-09 collection_start: a time interval in seconds
    (aligned to the task's time_precision when the Collector was given one; the Leader
    checks it in any case), or a fixed-size query, ``subtype`` 1 current batch (the
    default) or 0 by batch ID (``batch_id``, base64url, 32 bytes)."""
    if not isinstance(body, dict):
        raise f.FieldError("field query must be an object")
    if body.get("type") is None and body.get("query_type") is None:
        raise f.FieldError("missing field query.type")
    qt = _query_type_value(body.get("type", body.get("query_type")), "query.type")
    if qt != task.query_type:
        raise f.FieldError(f"query.type {int(qt)} does not match the task's query_type "
                         f"{int(task.query_type)}")
    if qt == QueryType.TIME_INTERVAL:
        query: m09.Query = task.profile.flow.query_interval(
            task, f.batch_interval_units(body, task.time_precision))
        return query
    subtype = f.integer(body.get("subtype", 1), "query.subtype")
    if subtype == 1:
        return m09.Query.fixed_size(FixedSizeQuery.current_batch())
    if subtype == 0:
        batch_id = f.b64decode(f.require(body, "batch_id"), "query.batch_id")
        if len(batch_id) != 32:
            raise f.FieldError(f"query.batch_id must be 32 bytes, got {len(batch_id)}")
        return m09.Query.fixed_size(FixedSizeQuery.by_batch_id(batch_id))
    raise f.FieldError(f"field query.subtype: unknown fixed-size query type {subtype} "
                     "(0 by_batch_id, 1 current_batch)")


def task09_from_fields(body: Mapping[str, Any], role: str,
                       profile: Profile) -> TaskFields:
    """The DAP-09 task (of ``profile``) of a request to ``role``
    (``"client"`` upload, ``"collector"``, ``"leader"`` or ``"helper"`` add_task), from
    the draft-07 fields.

    DAP-09 binds nothing but the task ID into its HPKE associated data, so a role only
    needs the parameters it uses, and the draft sends each role just those:

    * every role: ``task_id``, ``leader``, ``vdaf`` (VDAF-08 parameters: ``bits``, see
      :func:`bits`);
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
    return INTEROP_09.task_fields(profile, body, role)


class Interop09(InteropFields):
    """DAP-09 (VDAF-08) with draft-07's fields: each role gets the task parameters it uses,
    queries by batch ID, and fixed_size collections report their ``batch_id``."""

    query_reader = staticmethod(query09_from_json)
    parameter_readers = MappingProxyType({"bits": bits})

    # DAP-09 calls its batch modes query types: batch mode 2 is fixed_size.
    batch_mode_names = MappingProxyType({1: "time_interval", 2: "fixed_size"})
    refused_vdafs = MappingProxyType({
        "Prio3MultihotCountVec":
            "Prio3MultihotCountVec is not a VDAF of draft-irtf-cfrg-vdaf-08, which dap-09 "
            "tasks run (it first appears in VDAF-10); use it with dap_version dap-18",
        "Prio3L1BoundSum":
            "Prio3L1BoundSum (draft-ietf-ppm-l1-bound-sum-02) is a Prio3 variant of VDAF-18, "
            "not of draft-irtf-cfrg-vdaf-08, which dap-09 tasks run; use it with dap_version "
            "dap-18 or dap-19",
    })
    report_errors = (Client09Error,)
    # The runner sends draft-07's request bodies exactly: no dap_version, so the servers
    # must recognise them as dap-09 as they would a stock draft-07 runner's.
    runner_sends_dap_version = False
    reports_batch_id = True
    # VDAF-08 has no MultihotCountVec, and its Sum takes a bit width.
    runner_vdafs = InteropFields.runner_cases(Prio3Sum={"type": "Prio3Sum", "bits": "8"})

    def task_fields(self, profile: Profile, body: Mapping[str, Any], role: str) -> TaskFields:
        """Each role reads the fields it uses (see :func:`task09_from_fields`)."""
        notes: list[str] = []
        aggregator = role in ("leader", "helper")
        task_id = f.task_id_field(body)
        leader = f.string(body, "leader")
        vdaf = self.vdaf_from_descriptor(profile, f.require(body, "vdaf"))
        if role == "collector" and body.get("helper") is None:
            helper = PLACEHOLDER_HELPER
        else:
            helper = f.string(body, "helper")
        if role == "collector" and body.get("time_precision") is None:
            time_precision = 1
        else:
            time_precision = f.integer(f.require(body, "time_precision"), "time_precision", 1)
        qt = query_type(body, required=role != "client") or QueryType.TIME_INTERVAL
        if aggregator or body.get("min_batch_size") is not None:
            min_batch_size = f.integer(f.require(body, "min_batch_size"), "min_batch_size", 1)
        else:
            min_batch_size = 1
        max_batch_size: int | None = None
        if aggregator and body.get("max_batch_size") is not None:
            max_batch_size = f.integer(body["max_batch_size"], "max_batch_size", 1)
        max_batch_query_count = 1
        if body.get("max_batch_query_count") is not None:
            max_batch_query_count = f.integer(body["max_batch_query_count"],
                                            "max_batch_query_count", 1)
        expiration: int | None = None
        for name in ("task_expiration", "task_end"):
            if body.get(name) is not None:
                value = f.integer(body[name], name)
                if expiration is not None and value != expiration:
                    raise f.FieldError("task_end and task_expiration disagree")
                expiration = value
        for name, why in (("task_start", "DAP-09 tasks have no start time"),
                          ("task_info", "DAP-09 tasks have no task_info")):
            if body.get(name) is not None:
                notes.append(f"{name} ignored: {why}")
        dp_bytes = f.dp_policy_field(body, vdaf)
        try:
            task = Task09.for_vdaf(
                vdaf, task_id=task_id, leader_aggregator_endpoint=leader,
                helper_aggregator_endpoint=helper, query_type=qt,
                time_precision=time_precision, min_batch_size=min_batch_size,
                max_batch_size=max_batch_size, max_batch_query_count=max_batch_query_count,
                task_expiration=expiration, profile=profile, dp_policy=dp_bytes)
        except (Task09Error, ValueError) as exc:
            raise f.FieldError(f"invalid task: {exc}") from None
        return TaskFields(task, vdaf, None, tuple(notes))

    def task_bodies(self, profile: Profile, *, task_id: str, leader: str, helper: str,
                    vdaf: Json, batch_mode: int, min_batch_size: int, time_precision: int,
                    task_end: int, collector_token: str) -> TaskBodies:
        """draft-07's request tables, field for field: each role gets what it uses."""
        task: Json = {"task_id": task_id, "leader": leader, "vdaf": vdaf}
        return TaskBodies(
            collector={**task, "collector_authentication_token": collector_token,
                       "query_type": batch_mode},
            aggregator={**task, "helper": helper, "query_type": batch_mode,
                        "min_batch_size": min_batch_size, "time_precision": time_precision,
                        "max_batch_query_count": 1, "task_expiration": task_end},
            upload={**task, "helper": helper, "time_precision": time_precision})


INTEROP_09 = Interop09()

__all__ = ["INTEROP_09", "Interop09", "PLACEHOLDER_HELPER", "bits", "query09_from_json",
           "query_type", "task09_from_fields"]
