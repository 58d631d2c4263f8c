"""DAP-09 task parameters (draft-ietf-ppm-dap-09 Section 4.2).

DAP-09 has no ``TaskConfiguration`` struct: the task is agreed out of band and nothing
but the task ID is bound into the HPKE associated data (``InputShareAad`` binds
``task_id``, ``report_metadata`` and ``public_share``; ``AggregateShareAad`` binds
``task_id``, ``agg_param`` and the ``BatchSelector``). :class:`Task09` holds the
parameters of Section 4.2 that the Client, the Collector and the Aggregators use, names
its VDAF through the profile's VDAF-08 class table, and builds the two AADs.

Times are in seconds (DAP-09 ``Time``). Aggregator-only secrets (VDAF verification key,
collector HPKE config, auth tokens) are not part of this object, as in
:mod:`dap.profiles.dap18.task`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.profiles.base import VDAFS, Profile, ProfileError
from ppm_reference.dap.profiles.dap09.messages import (
    AggregateShareAad,
    BatchSelector,
    InputShareAad,
    QueryType,
    ReportMetadata,
    TaskID,
    Time,
)
from ppm_reference.vdaf import registry


class Task09Error(ValueError):
    """DAP-09 task parameters that the draft or this implementation cannot use."""


def vdaf_parameters_of(vdaf: Any) -> dict[str, int]:
    """The constructor parameters of a VDAF object (``{"length": 4, ...}``)."""
    return {name: getattr(vdaf, name) for name in registry.constructor_parameters(type(vdaf))}


@dataclass(frozen=True)
class Task09:
    """The agreed parameters of one DAP-09 task (Section 4.2).

    ``vdaf_name`` is the VDAF-08 registry name (``Prio3Histogram``) and
    ``vdaf_parameters`` its constructor arguments other than the number of shares, as a
    tuple of ``(name, value)`` pairs (use :meth:`for_vdaf`). ``max_batch_size`` applies
    to fixed_size tasks only and is optional (DAP-09 made it so).
    """

    task_id: TaskID
    leader_aggregator_endpoint: str
    helper_aggregator_endpoint: str
    query_type: QueryType
    time_precision: int
    min_batch_size: int
    vdaf_name: str
    vdaf_parameters: tuple[tuple[str, int], ...] = ()
    max_batch_size: int | None = None
    max_batch_query_count: int = 1
    task_expiration: int | None = None  # a Time, in seconds
    profile: Profile = field(kw_only=True, compare=False, repr=False)
    # The task's DP policy (an encoded `dap.dp` spec), agreed out of band like every
    # other DAP-09 parameter: DAP-09 binds no task configuration into its HPKE AADs, so
    # unlike DAP-18 (task extension 0xFF00 in the TaskConfiguration) nothing
    # cryptographic ties the policy to the reports; see `dap.dp`.
    dp_policy: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "task_id", TaskID(self.task_id))
        try:
            object.__setattr__(self, "query_type", QueryType(self.query_type))
        except ValueError:
            raise Task09Error(f"unknown query type {self.query_type!r}") from None
        object.__setattr__(self, "vdaf_parameters", tuple(
            sorted((str(k), v) for k, v in dict(self.vdaf_parameters).items())))
        if self.time_precision <= 0:
            raise Task09Error("time_precision must be positive")
        if self.min_batch_size <= 0:
            raise Task09Error("min_batch_size must be positive")
        if self.max_batch_size is not None:
            if self.query_type != QueryType.FIXED_SIZE:
                raise Task09Error("max_batch_size is a fixed_size parameter (Section 4.1.2)")
            if self.max_batch_size < self.min_batch_size:
                raise Task09Error("max_batch_size must be at least min_batch_size")
        if self.max_batch_query_count <= 0:
            raise Task09Error("max_batch_query_count must be positive")
        for url in (self.leader_aggregator_endpoint, self.helper_aggregator_endpoint):
            if not url or not url.isascii():
                raise Task09Error(f"endpoint must be a non-empty ASCII URL: {url!r}")
        self.vdaf()  # validate eagerly

    @classmethod
    def provision(cls, vdaf: Any, *, profile: Profile, task_id: bytes, task_info: bytes,
                  leader_url: str, helper_url: str, time_precision: int,
                  min_batch_size: int, batch_mode: BatchMode, task_interval: Any,
                  max_batch_size: int | None, dp_policy: bytes | None
                  ) -> tuple[Task09, dict[str, Any]]:
        """A new task from ``ppm task create``'s parameters: the batch mode picks the query
        type (leader-selected: fixed_size, whose task parameter max_batch_size is), the
        task interval's end gives ``task_expiration`` (DAP-09 tasks have no start) and
        ``task_info`` is unused (DAP-09 has none)."""
        fixed = batch_mode == BatchMode.LEADER_SELECTED
        # A VDAF with an aggregation parameter (Poplar1) is collected once per parameter:
        # at most once per level of its tree (VDAF-08's is_valid: distinct levels).
        queries = int(vdaf.bits) if registry.takes_agg_param(getattr(vdaf, "NAME", "")) else 1
        task = cls.for_vdaf(
            vdaf, task_id=task_id, leader_aggregator_endpoint=leader_url,
            helper_aggregator_endpoint=helper_url, time_precision=time_precision,
            min_batch_size=min_batch_size, profile=profile, dp_policy=dp_policy,
            query_type=QueryType.FIXED_SIZE if fixed else QueryType.TIME_INTERVAL,
            max_batch_size=max_batch_size if fixed else None, max_batch_query_count=queries,
            task_expiration=task_interval.end * time_precision if task_interval else None)
        return task, {}

    @classmethod
    def for_vdaf(cls, vdaf: Any, **kwargs: Any) -> Task09:
        """A task running the VDAF object ``vdaf`` (a VDAF-08 class of the profile)."""
        profile: Profile = kwargs["profile"]
        try:
            expected = profile.vdaf_class(vdaf.NAME)
        except (AttributeError, ProfileError) as exc:
            raise Task09Error(f"{vdaf!r} is not a VDAF of {profile.name}: {exc}") from None
        if type(vdaf) is not expected:
            raise Task09Error(f"{type(vdaf).__name__} is not {profile.name}'s "
                              f"{expected.__name__}")
        return cls(vdaf_name=vdaf.NAME, vdaf_parameters=tuple(vdaf_parameters_of(vdaf).items()),
                   **kwargs)

    def vdaf(self) -> Any:
        """The task's VDAF object (two shares), shared with the tasks of the same VDAF
        and parameters (`VDAFS`). Raises :class:`Task09Error` for a VDAF the profile does
        not name or DAP cannot run (NONCE_SIZE 16 and two shares, Section 4)."""
        key = (self.profile.name, self.profile.shares, self.vdaf_name,
               tuple(self.vdaf_parameters))
        try:
            hash(key)
        except TypeError:
            return self._build_vdaf()
        return VDAFS.get(key, self._build_vdaf, self.profile)

    def _build_vdaf(self) -> Any:
        try:
            cls = self.profile.vdaf_class(self.vdaf_name)
        except (ProfileError, ImportError, AttributeError) as exc:
            raise Task09Error(f"no VDAF {self.vdaf_name!r} in {self.profile.name}: {exc}") from None
        kwargs: Mapping[str, int] = dict(self.vdaf_parameters)
        try:
            # Poplar1 always has two shares: its constructor takes no `shares`.
            takes_shares = registry.takes_shares(cls)
            vdaf = cls(self.profile.shares, **kwargs) if takes_shares else cls(**kwargs)
        except (ValueError, TypeError) as exc:
            raise Task09Error(f"invalid {self.vdaf_name} parameters {kwargs}: {exc}") from None
        code = self.profile.vdaf_types.get(self.vdaf_name)
        if code is not None and getattr(vdaf, "ID", code) != code:
            raise Task09Error(f"{self.vdaf_name}.ID is 0x{vdaf.ID:08x}, the profile says "
                              f"0x{code:08x}")
        if getattr(vdaf, "NONCE_SIZE", 16) != 16:
            raise Task09Error(f"DAP needs NONCE_SIZE 16, {self.vdaf_name} has {vdaf.NONCE_SIZE}")
        return vdaf

    @property
    def batch_mode(self) -> BatchMode:
        """The DAP-18 batch mode that behaves like this query type (time_interval, or
        leader_selected for fixed_size): the protocol core speaks in batch modes."""
        return BatchMode.TIME_INTERVAL if self.query_type == QueryType.TIME_INTERVAL \
            else BatchMode.LEADER_SELECTED

    def config_bytes(self) -> bytes:
        """The parameters as canonical JSON: how Aggregators store a DAP-09 task and how
        `ppm task create` hands it to Clients and Collectors (DAP-09 has no wire
        encoding of a task)."""
        data: dict[str, Any] = {
            "leader_aggregator_endpoint": self.leader_aggregator_endpoint,
            "helper_aggregator_endpoint": self.helper_aggregator_endpoint,
            "query_type": int(self.query_type), "time_precision": self.time_precision,
            "min_batch_size": self.min_batch_size, "max_batch_size": self.max_batch_size,
            "max_batch_query_count": self.max_batch_query_count,
            "task_expiration": self.task_expiration, "vdaf": self.vdaf_name,
            "vdaf_parameters": dict(self.vdaf_parameters),
            "dp_policy": self.dp_policy.hex() if self.dp_policy is not None else None,
        }
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_config_bytes(cls, task_id: bytes, data: bytes,
                          profile: Profile) -> Task09:
        """The inverse of :meth:`config_bytes`. Raises :class:`Task09Error`."""
        try:
            obj = json.loads(data)
            dp = obj.get("dp_policy")
            return cls(
                task_id=TaskID(task_id),
                leader_aggregator_endpoint=obj["leader_aggregator_endpoint"],
                helper_aggregator_endpoint=obj["helper_aggregator_endpoint"],
                query_type=QueryType(int(obj["query_type"])),
                time_precision=int(obj["time_precision"]),
                min_batch_size=int(obj["min_batch_size"]),
                max_batch_size=obj.get("max_batch_size"),
                max_batch_query_count=int(obj.get("max_batch_query_count", 1)),
                task_expiration=obj.get("task_expiration"),
                vdaf_name=obj["vdaf"],
                vdaf_parameters=tuple(dict(obj.get("vdaf_parameters", {})).items()),
                dp_policy=bytes.fromhex(dp) if dp is not None else None,
                profile=profile)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise Task09Error(f"invalid DAP-09 task parameters: {exc}") from None

    def vdaf_ctx(self) -> bytes:
        """The VDAF application context: empty, VDAF-08 has none."""
        return self.profile.vdaf_ctx(self.task_id)

    def round_time(self, posix_seconds: int) -> Time:
        """A report time rounded down to ``time_precision`` (Section 4.4.2)."""
        return Time.rounded(posix_seconds, self.time_precision)

    def input_share_aad(
        self, report_metadata: ReportMetadata, public_share: bytes
    ) -> InputShareAad:
        """``InputShareAad`` of a report of this task (Section 4.4.2)."""
        return InputShareAad(self.task_id, report_metadata, public_share)

    def aggregate_share_aad(
        self, agg_param: bytes, batch_selector: BatchSelector
    ) -> AggregateShareAad:
        """``AggregateShareAad`` of an aggregate share of this task (Section 4.6.4)."""
        if batch_selector.query_type != self.query_type:
            raise Task09Error(
                f"batch selector of type {batch_selector.query_type.name} in a "
                f"{self.query_type.name} task"
            )
        return AggregateShareAad(self.task_id, agg_param, batch_selector)


__all__ = ["Task09", "Task09Error", "vdaf_parameters_of"]
