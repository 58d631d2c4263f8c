"""The interop test API's view of one draft (draft-dcook-ppm-dap-interop-test-design-07):
how its request fields become a task, a VDAF and a query of that draft, and what the test
runner sends to exercise it.

Each draft that the test API serves sets ``Profile.interop`` to an :class:`InteropFields`
(``dap/profiles/<draft>/interop.py``); ``interop/`` reaches a draft only through
``get_profile(name).interop`` and never names the draft's modules. Methods take the
:class:`~dap.profiles.base.Profile` they serve as an argument, so that a draft built on
another by ``dataclasses.replace`` (DAP-19 on DAP-18) reuses the same object and gets
tasks, VDAFs and queries of its own profile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ppm_reference.dap.fields import FieldError, integer
from ppm_reference.dap.task import DapTask
from ppm_reference.vdaf import registry

if TYPE_CHECKING:
    from ppm_reference.dap.profiles.base import Profile

Json = dict[str, Any]


@dataclass(frozen=True)
class TaskFields:
    """What a role learns about a task from an add_task (or upload) request."""

    task: DapTask
    vdaf: Any
    max_batch_size: int | None      # a Leader option the task does not hold (DAP-18)
    notes: tuple[str, ...]          # fields accepted but ignored, and why


@dataclass(frozen=True)
class TaskBodies:
    """The task fields the test runner sends: collector add_task, aggregator add_task (the
    runner adds role, tokens, verification key and HPKE configuration) and upload."""

    collector: Json
    aggregator: Json
    upload: Json


class InteropFields:
    """One draft's reading of the interop test API, and its test runner's cases.

    Subclasses supply :meth:`task_fields`, :meth:`query`, :meth:`task_bodies`,
    :meth:`read_vdaf_parameter` for the parameters their VDAF draft spells its own way,
    and the data attributes below."""

    #: Batch mode number (1, 2) -> this draft's name of it (DAP-09: query types).
    batch_mode_names: Mapping[int, str] = MappingProxyType(
        {1: "time_interval", 2: "leader_selected"})
    #: VDAF type -> why this draft refuses it (instead of "unsupported VDAF type").
    refused_vdafs: Mapping[str, str] = MappingProxyType({})
    #: Exceptions the Client raises when it cannot build a report from its inputs.
    report_errors: tuple[type[Exception], ...] = ()
    #: Whether the runner's requests carry ``dap_version`` (draft-07 bodies have none).
    runner_sends_dap_version: bool = True
    #: Whether a collection of batch mode 2 answers its ``batch_id`` (checked by the
    #: runner).
    reports_batch_id: bool = False
    #: VDAF type -> the ``vdaf`` object the runner sends for it (absent: the draft has no
    #: such VDAF). Each describes the VDAF of the runner's case of that type
    #: (``interop.runner``): Prio3Sum max 255, Prio3SumVec length 3 max 15 chunk 2,
    #: Prio3Histogram length 4 chunk 2, Prio3MultihotCountVec length 4 weight 2 chunk 2,
    #: Prio3L1BoundSum length 3 max_value 10 chunk 4.
    runner_vdafs: Mapping[str, Json] = MappingProxyType({})

    @staticmethod
    def runner_cases(**changes: Json | None) -> Mapping[str, Json]:
        """The runner's VDAF descriptors: Count, SumVec (4 bits, which both VDAF drafts
        express) and Histogram, with ``changes`` (a descriptor per type, None to leave
        the type out)."""
        cases: dict[str, Json] = {
            "Prio3Count": {"type": "Prio3Count"},
            "Prio3SumVec": {"type": "Prio3SumVec", "length": "3", "bits": "4",
                            "chunk_length": "2"},
            "Prio3Histogram": {"type": "Prio3Histogram", "length": "4", "chunk_length": "2"},
        }
        for name, desc in changes.items():
            if desc is None:
                cases.pop(name, None)
            else:
                cases[name] = desc
        order = ("Prio3Count", "Prio3Sum", "Prio3SumVec", "Prio3Histogram",
                 "Prio3MultihotCountVec", "Prio3L1BoundSum")
        return MappingProxyType({n: cases[n] for n in sorted(cases, key=order.index)})

    # -- requests -------------------------------------------------------------------------
    def task_fields(self, profile: Profile, body: Mapping[str, Any], role: str) -> TaskFields:
        """The task of an add_task (``role`` ``"leader"``, ``"helper"``, ``"collector"``)
        or upload (``"client"``) request."""
        raise NotImplementedError

    # The reader of a collection_start ``query`` object: (body, task) -> the draft's query.
    query_reader: Callable[[Any, Any], Any]

    def query(self, profile: Profile, body: Any, task: Any) -> Any:
        """The draft's query of a collection_start ``query`` object, for ``task``."""
        return self.query_reader(body, task)

    def vdaf_from_descriptor(self, profile: Profile, desc: Any) -> Any:
        """The VDAF object a ``vdaf`` field describes, built by ``vdaf.registry`` in the
        profile's VDAF version. Supported: the registry's VDAFs of that version without the
        test-only ones; parameters are read in constructor order."""
        if not isinstance(desc, dict):
            raise FieldError("field vdaf must be an object")
        kind = desc.get("type")
        if not isinstance(kind, str):
            raise FieldError("missing field vdaf.type")
        # Poplar1 is left out: this interop API's collection does not carry an
        # aggregation parameter yet.
        supported = registry.names(profile.vdaf_version, test_only=False, agg_param=False)
        if kind not in supported:
            refused = self.refused_vdafs.get(kind)
            if refused is not None:
                raise FieldError(refused)
            raise FieldError(f"unsupported VDAF type {kind!r} for {profile.name}; "
                             f"supported: {sorted(supported)}")
        params = {name: self.read_vdaf_parameter(desc, name)
                  for name in registry.parameter_names(kind, profile.vdaf_version)}
        try:
            return profile.build_vdaf(kind, params)
        except registry.RegistryError as exc:
            # The registry wraps the constructor's refusal; report the refusal itself.
            cause = exc.__context__
            detail = cause if isinstance(cause, ValueError | TypeError) else exc
            raise FieldError(f"invalid {kind} parameters: {detail}") from None

    # VDAF parameters this draft's requests spell their own way: registry parameter name
    # -> reader of the ``vdaf`` object (DAP-18's max_measurement, DAP-09's bits).
    parameter_readers: Mapping[str, Callable[[Mapping[str, Any]], int]] = MappingProxyType({})

    def read_vdaf_parameter(self, desc: Mapping[str, Any], name: str) -> int:
        """The VDAF parameter ``name`` (a registry parameter name) of a ``vdaf`` object:
        the draft's reader, else a required integer of at least 1 under the same name."""
        reader = self.parameter_readers.get(name)
        if reader is not None:
            return reader(desc)
        if name not in desc or desc[name] is None:
            raise FieldError(f"missing field vdaf.{name}")
        return integer(desc[name], f"vdaf.{name}", 1)

    # -- the test runner ------------------------------------------------------------------
    def task_bodies(self, profile: Profile, *, task_id: str, leader: str, helper: str,
                    vdaf: Json, batch_mode: int, min_batch_size: int, time_precision: int,
                    task_end: int, collector_token: str) -> TaskBodies:
        """The task fields the runner sends to each role for one case (times in
        seconds)."""
        raise NotImplementedError


__all__ = ["InteropFields", "TaskBodies", "TaskFields"]
