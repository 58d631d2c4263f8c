"""Task parameters and the canonical ``TaskConfiguration`` (DAP-18 Section 4.2).

* :class:`Task` holds the parameters every participant agrees on out of band.
  :func:`build_task_configuration` (also ``Task.configuration()``) is the one place that
  makes a ``TaskConfiguration``, whose encoding is bound into the HPKE associated data of
  every input share and aggregate share (Section 8.6.5), so all participants must build
  exactly the same bytes.
* VDAF type codes come from the profile (VDAF Identifiers registry,
  draft-irtf-cfrg-vdaf-20 Section 10) and ``vdaf_configuration`` is encoded as in
  Appendix B: :func:`vdaf_configuration` maps a VDAF object to ``(vdaf_type,
  vdaf_configuration)`` and :func:`vdaf_from_configuration` maps them back.
* :func:`derive_vdaf_verify_key` is the verification key derivation suggested in
  Section 8.6.2.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ppm_reference.dap.codec import (
    U16,
    U32,
    U64,
    CodecError,
    DecodeError,
    Struct,
    field_specs,
    wire,
)
from ppm_reference.dap.profiles.base import VDAFS, Profile
from ppm_reference.dap.profiles.dap18.messages import (
    BatchMode,
    Empty,
    Interval,
    TaskConfiguration,
    TaskExtension,
    TaskExtensionType,
    TaskID,
)
from ppm_reference.dap.task import TaskError, derive_vdaf_verify_key
from ppm_reference.vdaf import registry

# ---------------------------------------------------------------------------------------
# VDAF configuration encodings (Appendix B)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prio3CountConfig(Empty):
    """Appendix B.1: Prio3Count has no parameters; its configuration is ``Empty``."""


@dataclass(frozen=True)
class Prio3SumConfig(Struct):
    """``Prio3SumConfig`` (Appendix B.2)."""

    max_measurement: int = wire(U64)


@dataclass(frozen=True)
class Prio3SumVecConfig(Struct):
    """``Prio3SumVecConfig`` (Appendix B.3)."""

    length: int = wire(U32)
    max_measurement: int = wire(U64)
    chunk_length: int = wire(U32)


@dataclass(frozen=True)
class Prio3HistogramConfig(Struct):
    """``Prio3HistogramConfig`` (Appendix B.4)."""

    length: int = wire(U32)
    chunk_length: int = wire(U32)


@dataclass(frozen=True)
class Prio3MultihotCountVecConfig(Struct):
    """``Prio3MultihotCountVecConfig`` (Appendix B.5). Note the field order: ``length``,
    ``chunk_length``, ``max_weight`` (not the constructor's order)."""

    length: int = wire(U32)
    chunk_length: int = wire(U32)
    max_weight: int = wire(U64)


@dataclass(frozen=True)
class Prio3L1BoundSumConfig(Struct):
    """``Prio3L1BoundSumConfig`` (draft-ietf-ppm-l1-bound-sum-02, Section 4): not in the
    DAP draft's Appendix B but defined for DAP by the VDAF's own draft, so every profile on
    the VDAF-18 wire (dap-18, dap-19) carries it with VDAF type 0x00000007."""

    length: int = wire(U32)
    max_value: int = wire(U64)
    chunk_length: int = wire(U32)


@dataclass(frozen=True)
class Poplar1Config(Struct):
    """``Poplar1Config`` (Appendix B.6)."""

    bits: int = wire(U16)


# VDAF name -> configuration struct; its field names are the VDAF object's attributes.
VDAF_CONFIGS: dict[str, type[Struct]] = {
    "Prio3Count": Prio3CountConfig,
    "Prio3Sum": Prio3SumConfig,
    "Prio3SumVec": Prio3SumVecConfig,
    "Prio3Histogram": Prio3HistogramConfig,
    "Prio3MultihotCountVec": Prio3MultihotCountVecConfig,
    "Prio3L1BoundSum": Prio3L1BoundSumConfig,
    "Poplar1": Poplar1Config,
}

# VDAFs we can instantiate: name -> (module, constructor keyword arguments in order).
_CONSTRUCTORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Prio3Count": ("ppm_reference.vdaf.prio3", ()),
    "Prio3Sum": ("ppm_reference.vdaf.prio3", ("max_measurement",)),
    "Prio3SumVec": ("ppm_reference.vdaf.prio3", ("length", "max_measurement", "chunk_length")),
    "Prio3Histogram": ("ppm_reference.vdaf.prio3", ("length", "chunk_length")),
    "Prio3MultihotCountVec": ("ppm_reference.vdaf.prio3", ("length", "max_weight", "chunk_length")),
    "Prio3L1BoundSum": ("ppm_reference.vdaf.prio3", ("length", "max_value", "chunk_length")),
    "Poplar1": ("ppm_reference.vdaf.poplar1", ("bits",)),  # always two shares: no `shares` argument
}


def vdaf_name(vdaf: Any) -> str:
    """The registry name of a VDAF object: its class name (``Prio3Histogram``)."""
    return type(vdaf).__name__


def vdaf_configuration(vdaf: Any, profile: Profile) -> tuple[int, bytes]:
    """``(vdaf_type, vdaf_configuration)`` of a VDAF object (Section 4.2, Appendix B).

    Raises :class:`TaskError` for VDAFs DAP cannot run: unknown ones, ones without a
    configuration encoding, and ones with other than two shares (DAP has exactly two
    Aggregators)."""
    name = vdaf_name(vdaf)
    if name not in profile.vdaf_types or name not in VDAF_CONFIGS:
        raise TaskError(f"{name} has no VDAF type code and configuration in {profile.name}")
    vdaf_type = profile.vdaf_types[name]
    vdaf_id = getattr(vdaf, "ID", vdaf_type)
    if vdaf_id != vdaf_type:
        raise TaskError(f"{name}.ID is 0x{vdaf_id:08x}, the registry says 0x{vdaf_type:08x}")
    if getattr(vdaf, "SHARES", profile.shares) != profile.shares:
        raise TaskError(f"DAP needs {profile.shares} shares, {name} has {vdaf.SHARES}")
    if getattr(vdaf, "NONCE_SIZE", 16) != 16:
        raise TaskError(f"DAP needs NONCE_SIZE 16 (Section 4.1.2), {name} has {vdaf.NONCE_SIZE}")
    config_cls = VDAF_CONFIGS[name]
    try:
        config = config_cls(**{f: getattr(vdaf, f) for f in _config_fields(config_cls)})
    except (AttributeError, CodecError) as exc:
        raise TaskError(f"cannot encode the configuration of {name}: {exc}") from None
    return vdaf_type, config.encode()


def _config_fields(cls: type[Struct]) -> list[str]:
    return [spec.name for spec in field_specs(cls)]


def decode_vdaf_configuration(
    vdaf_type: int, config_bytes: bytes, profile: Profile
) -> tuple[str, Struct]:
    """The VDAF name and decoded configuration struct. Raises :class:`TaskError` for an
    unknown type and :class:`dap.codec.DecodeError` for a malformed configuration."""
    for name, code in profile.vdaf_types.items():
        if code == vdaf_type and name in VDAF_CONFIGS:
            return name, VDAF_CONFIGS[name].decode(config_bytes)
    raise TaskError(f"unknown VDAF type 0x{vdaf_type:08x} in {profile.name}")


def vdaf_from_configuration(
    vdaf_type: int, config_bytes: bytes, profile: Profile
) -> Any:
    """Instantiate the VDAF a task names (with two shares)."""
    name, config = decode_vdaf_configuration(vdaf_type, config_bytes, profile)
    if name not in _CONSTRUCTORS:
        raise TaskError(f"{name} is not implemented")
    module_name, args = _CONSTRUCTORS[name]
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise TaskError(f"{name} is not available: {exc}") from None
    kwargs = {a: getattr(config, a) for a in args}
    try:
        takes_shares = registry.takes_shares(cls)
        vdaf = cls(profile.shares, **kwargs) if takes_shares else cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise TaskError(f"invalid {name} parameters {kwargs}: {exc}") from None
    # The round trip must be exact, or participants would disagree on the bytes.
    if vdaf_configuration(vdaf, profile) != (vdaf_type, config_bytes):
        raise TaskError(f"{name} configuration does not round-trip")
    return vdaf


# ---------------------------------------------------------------------------------------
# Task parameters and the canonical TaskConfiguration (Section 4.2)
# ---------------------------------------------------------------------------------------


def _url(value: str | bytes) -> bytes:
    if isinstance(value, str):
        if not value.isascii():
            raise TaskError(f"URL must be ASCII (Section 4.1): {value!r}")
        return value.encode("ascii")
    return bytes(value)


def build_task_configuration(
    *,
    task_info: bytes,
    leader_aggregator_endpoint: str | bytes,
    helper_aggregator_endpoint: str | bytes,
    time_precision: int,
    min_batch_size: int,
    batch_mode: BatchMode,
    vdaf_type: int,
    vdaf_configuration: bytes,
    task_interval: Interval | None = None,
    dp_policy: bytes | None = None,
    cls: type[TaskConfiguration] = TaskConfiguration,
) -> TaskConfiguration:
    """The canonical ``TaskConfiguration`` (Section 4.2): the only place it is built.
    ``cls`` is the draft's struct (DAP-19's allows an empty ``task_info``).

    ``batch_config`` is empty, as both DAP-18 batch modes require; the extensions are
    the ``task_interval`` extension (Section 4.2.3) when given, in increasing type order.
    URLs are used byte for byte as given (Section 4.1: participants MUST NOT re-encode
    a ``Url``).
    """
    if time_precision <= 0:
        raise TaskError("time_precision must be positive")
    if min_batch_size <= 0:
        raise TaskError("min_batch_size must be positive")
    extensions: list[TaskExtension] = []
    if task_interval is not None:
        extensions.append(TaskExtension.task_interval(task_interval))
    if dp_policy is not None:
        extensions.append(TaskExtension(TaskExtensionType.DP_POLICY, dp_policy))
    extensions.sort(key=lambda e: e.extension_type)
    try:
        return cls(
            task_info=task_info,
            leader_aggregator_endpoint=_url(leader_aggregator_endpoint),
            helper_aggregator_endpoint=_url(helper_aggregator_endpoint),
            time_precision=time_precision,
            min_batch_size=min_batch_size,
            batch_mode=batch_mode,
            batch_config=b"",
            vdaf_type=vdaf_type,
            vdaf_configuration=vdaf_configuration,
            extensions=extensions,
        )
    except CodecError as exc:
        raise TaskError(str(exc)) from None


@dataclass(frozen=True)
class Task:
    """The agreed parameters of one DAP task (Section 4.2).

    Aggregator-only parameters (collector HPKE config, VDAF verification keys) are not
    part of the ``TaskConfiguration`` and live with the Aggregators' task records.
    """

    task_id: TaskID
    task_info: bytes
    leader_aggregator_endpoint: str
    helper_aggregator_endpoint: str
    time_precision: int
    min_batch_size: int
    batch_mode: BatchMode
    vdaf_type: int
    vdaf_configuration: bytes
    task_interval: Interval | None = None
    profile: Profile = field(kw_only=True, compare=False, repr=False)
    # Canonical JSON of the task's DP policy, bound into the configuration as the
    # private-use DP_POLICY task extension (see dap/dp.py), or None.
    dp_policy: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "task_id", TaskID(self.task_id))
        object.__setattr__(self, "batch_mode", BatchMode(self.batch_mode))
        self.configuration()  # validate eagerly

    @classmethod
    def provision(cls, vdaf: Any, *, profile: Profile, task_id: bytes, task_info: bytes,
                  leader_url: str, helper_url: str, time_precision: int,
                  min_batch_size: int, batch_mode: BatchMode, task_interval: Interval | None,
                  max_batch_size: int | None, dp_policy: bytes | None
                  ) -> tuple[Task, dict[str, Any]]:
        """A new task from ``ppm task create``'s parameters, and the Aggregators' task
        options: DAP-18 has no max_batch_size parameter, it is the Leader's option."""
        task = cls.for_vdaf(
            vdaf, task_id=task_id, task_info=task_info, leader_aggregator_endpoint=leader_url,
            helper_aggregator_endpoint=helper_url, time_precision=time_precision,
            min_batch_size=min_batch_size, batch_mode=batch_mode, task_interval=task_interval,
            profile=profile, dp_policy=dp_policy)
        options = {"max_batch_size": max_batch_size} if max_batch_size is not None else {}
        return task, options

    @classmethod
    def for_vdaf(
        cls,
        vdaf: Any,
        *,
        task_id: bytes,
        task_info: bytes,
        leader_aggregator_endpoint: str,
        helper_aggregator_endpoint: str,
        time_precision: int,
        min_batch_size: int,
        batch_mode: BatchMode,
        task_interval: Interval | None = None,
        profile: Profile,
        dp_policy: bytes | None = None,
    ) -> Task:
        vdaf_type, config = vdaf_configuration(vdaf, profile)
        return cls(
            task_id=TaskID(task_id),
            task_info=task_info,
            leader_aggregator_endpoint=leader_aggregator_endpoint,
            helper_aggregator_endpoint=helper_aggregator_endpoint,
            time_precision=time_precision,
            min_batch_size=min_batch_size,
            batch_mode=batch_mode,
            vdaf_type=vdaf_type,
            vdaf_configuration=config,
            task_interval=task_interval,
            profile=profile,
            dp_policy=dp_policy,
        )

    @classmethod
    def from_configuration(
        cls, task_id: bytes, config: TaskConfiguration, profile: Profile
    ) -> Task:
        """Interpret a received ``TaskConfiguration``.

        Raises :class:`TaskError` if it has an extension we do not recognize
        (participants MUST NOT take part in such tasks, Section 4.2.2) or if it is not
        the canonical form :func:`build_task_configuration` would produce."""
        known = {int(t) for t in TaskExtensionType}
        unknown = [e.extension_type for e in config.extensions if e.extension_type not in known]
        if unknown:
            raise TaskError(f"unrecognized task extensions {unknown}")
        for url in (config.leader_aggregator_endpoint, config.helper_aggregator_endpoint):
            if not url.isascii():
                raise TaskError("endpoint URL is not ASCII")
        task = cls(
            task_id=TaskID(task_id),
            task_info=config.task_info,
            leader_aggregator_endpoint=config.leader_aggregator_endpoint.decode("ascii"),
            helper_aggregator_endpoint=config.helper_aggregator_endpoint.decode("ascii"),
            time_precision=config.time_precision,
            min_batch_size=config.min_batch_size,
            batch_mode=config.batch_mode,
            vdaf_type=config.vdaf_type,
            vdaf_configuration=config.vdaf_configuration,
            task_interval=config.task_interval(),
            profile=profile,
            dp_policy=next((e.extension_data for e in config.extensions
                            if e.extension_type == TaskExtensionType.DP_POLICY), None),
        )
        if task.configuration() != config:
            raise TaskError("task configuration is not in canonical form")
        return task

    def configuration(self) -> TaskConfiguration:
        """The canonical ``TaskConfiguration`` of this task."""
        return self._configuration

    @cached_property
    def _configuration(self) -> TaskConfiguration:
        return build_task_configuration(
            cls=self.profile.messages.TaskConfiguration,
            task_info=self.task_info,
            leader_aggregator_endpoint=self.leader_aggregator_endpoint,
            helper_aggregator_endpoint=self.helper_aggregator_endpoint,
            time_precision=self.time_precision,
            min_batch_size=self.min_batch_size,
            batch_mode=self.batch_mode,
            vdaf_type=self.vdaf_type,
            vdaf_configuration=self.vdaf_configuration,
            task_interval=self.task_interval,
            dp_policy=self.dp_policy,
        )

    @cached_property
    def input_share_aad_prefix(self) -> bytes:
        """The first two fields of every report's ``InputShareAad`` (Section 4.4.2.1),
        ``task_id || TaskConfiguration``, encoded once (`dap.profiles.dap18.fast`)."""
        return bytes(self.task_id) + self.config_bytes()

    def config_bytes(self) -> bytes:
        """How Aggregators store the task and Clients receive it: the encoded
        ``TaskConfiguration`` (the DAP-09 counterpart is ``Task09.config_bytes``)."""
        return self._config_bytes

    @cached_property
    def _config_bytes(self) -> bytes:
        # Encoded once per task object: the Leader's every request to the Helper checks
        # whether to advertise the task (taskprov), which hashes these bytes.
        return bytes(self.configuration().encode())

    @classmethod
    def from_config_bytes(cls, task_id: bytes, data: bytes,
                          profile: Profile) -> Task:
        """The inverse of :meth:`config_bytes`."""
        try:
            config = profile.messages.TaskConfiguration.decode(data)
        except DecodeError as exc:
            raise TaskError(f"invalid TaskConfiguration: {exc}") from None
        return cls.from_configuration(task_id, config, profile)

    def vdaf(self) -> Any:
        """The task's VDAF object (needs the VDAF implementation, ``vdaf.prio3``), shared
        with the tasks of the same VDAF configuration (`VDAFS`)."""
        return VDAFS.get((self.profile.name, self.profile.shares, self.vdaf_type,
                          bytes(self.vdaf_configuration)),
                         lambda: vdaf_from_configuration(self.vdaf_type,
                                                         self.vdaf_configuration,
                                                         self.profile),
                         self.profile)

    @property
    def max_batch_size(self) -> int | None:
        """DAP-18 tasks have no batch size bound the Aggregators enforce."""
        return None

    def vdaf_ctx(self) -> bytes:
        """The VDAF application context ``"dap-18" || task_id`` (Section 4.4.2.1)."""
        return self.profile.vdaf_ctx(self.task_id)


__all__ = [
    "TaskError",
    "Task",
    "build_task_configuration",
    "vdaf_configuration",
    "vdaf_from_configuration",
    "decode_vdaf_configuration",
    "derive_vdaf_verify_key",
    "VDAF_CONFIGS",
    "Prio3CountConfig",
    "Prio3SumConfig",
    "Prio3SumVecConfig",
    "Prio3HistogramConfig",
    "Prio3MultihotCountVecConfig",
    "Prio3L1BoundSumConfig",
    "Poplar1Config",
]
