"""Protocol profiles: everything that differs between DAP drafts, in one object.

Code asks the profile for anything that changes between drafts instead of branching on
version strings: constants (version tag, HPKE info strings, VDAF application context,
media types, resource URLs and HTTP methods, codepoints, problem types, the request
authentication header) and behaviour, as objects the profile's package supplies:

* ``task_cls``: the class of the task parameters (satisfies :class:`dap.task.DapTask`);
* ``wire``: the protocol core's view of the messages (:class:`dap.core.wire.Wire`);
* ``flow``: what Clients and Collectors send and receive (:class:`ClientFlow`);
* ``interop``: how the interop test API's fields become a task of this profile;
* ``vectors``: the test-vector cases of this draft.

Each draft has its package under ``dap/profiles/`` that builds its :class:`Profile`; a
draft built on another (DAP-19 on DAP-18) is ``dataclasses.replace`` of it with its
differences. ``dap.profiles`` is the registry; nothing outside ``dap/profiles/`` imports a
profile's package.
"""

from __future__ import annotations

import threading
import tomllib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ppm_reference.dap.codec import Struct
from ppm_reference.dap.common import Role, _Id
from ppm_reference.vdaf import registry


class ProfileError(ValueError):
    """A value (media type, URL variable, resource name) the profile does not know."""


def _frozen(mapping: Mapping[Any, Any]) -> Mapping[Any, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Profile:
    """Version-specific constants of one DAP draft."""

    name: str
    draft: str
    vdaf_draft: str
    # Domain separation tag: prefix of the VDAF application context and HPKE info strings.
    version_tag: bytes
    # Whether the VDAF takes an application context (``version_tag || task_id``). VDAF-08
    # (DAP-09) has none: its ``ctx`` is always empty.
    binds_vdaf_ctx: bool
    # Media type of a message, with ``{message}`` standing for its token:
    # ``application/ppm-dap;message={message}`` (DAP-18), ``application/dap-{message}``
    # (DAP-09). A parameter in the template must be present in a received Content-Type.
    media_type_template: str
    # Message class name -> its token in ``media_type_template``.
    message_types: Mapping[str, str]
    # Resource name -> URL template with {leader}/{helper}/{aggregator} and id variables.
    resources: Mapping[str, str]
    # Operation -> (HTTP method, resource name): who PUTs, POSTs or GETs what.
    requests: Mapping[str, tuple[str, str]]
    problem_type_prefix: str
    problem_types: frozenset[str]
    # (kem_id, kdf_id, aead_id) every compliant implementation supports.
    mandatory_hpke_suite: tuple[int, int, int]
    # HTTP request authentication: header name and the prefix of its value before the
    # token (``Authorization: Bearer <token>`` in DAP-18, ``DAP-Auth-Token: <token>`` as
    # DAP-09 and the interop test design use).
    auth_header: str
    auth_value_prefix: str
    # The class of the task parameters (``Task`` with its TaskConfiguration for DAP-18,
    # ``Task09`` for DAP-09); every one satisfies ``dap.task.DapTask``.
    task_cls: type[Any]
    # The protocol core's view of this draft's messages (a ``dap.core.wire.Wire``).
    wire: Any
    # What Clients and Collectors send and receive (a :class:`ClientFlow`).
    flow: Any
    # The draft's message module (``dap.profiles.<draft>.messages``).
    messages: Any = None
    # The interop test API's reading of a request's fields and its runner's cases (a
    # ``dap.profiles.interop_base.InteropFields``, from ``dap.profiles.*.interop``), and
    # the draft's test vectors (a ``dap.profiles.vector_cases.DraftVectors``, the
    # ``VECTORS`` of ``dap.profiles.*.vectors``); None where absent.
    interop: Any = None
    vectors: Any = None
    # Where ``ppm dap vectors generate`` writes this profile's vectors, under
    # ``test_vectors/``.
    vector_dir: str = ""
    # Error tokens the protocol core raises that this profile spells differently (DAP-09
    # has no invalidAggregationParameter, and one unauthorizedRequest for both
    # authentication failures), as token -> this profile's token.
    problem_aliases: Mapping[str, str] = field(default_factory=dict)
    # HTTP statuses of the successful answers that differ between drafts, by answer
    # ("upload", "collection_not_ready", "aggregation_job_init", "aggregate_share"), and
    # the message names of the upload and collection bodies ("upload", "collection").
    statuses: Mapping[str, int] = field(default_factory=dict)
    message_names: Mapping[str, str] = field(default_factory=dict)
    # In-band task provisioning (draft-ietf-ppm-dap-taskprov) for this draft's tasks, or
    # None: the ``Taskprov`` of ``dap.profiles.dap19.taskprov`` for dap-19.
    taskprov: Any = None
    # Number of Aggregators (VDAF shares).
    shares: int = 2
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def load(cls, path: Path, **objects: Any) -> Profile:
        """A profile from its draft's data file (``profile.toml``: the constants) and its
        package's objects (``messages``, ``task_cls``, ``wire``, ``flow``, ...)."""
        with open(path, "rb") as f:
            data = tomllib.load(f)
        data["version_tag"] = data["version_tag"].encode("ascii")
        data["mandatory_hpke_suite"] = tuple(data["mandatory_hpke_suite"])
        data["problem_types"] = frozenset(data["problem_types"])
        data["requests"] = {op: (m, r) for op, (m, r) in data["requests"].items()}
        for key in ("message_types", "resources", "requests", "problem_aliases", "statuses",
                    "message_names"):
            data[key] = _frozen(data.get(key, {}))
        return cls(**data, **objects)

    # -- domain separation ----------------------------------------------------------------
    def vdaf_ctx(self, task_id: bytes) -> bytes:
        """VDAF application context: ``"dap-18" || task_id`` (DAP-18 Sections 4.4.2.1,
        4.5.3); empty for a VDAF draft without application context (VDAF-08)."""
        if not self.binds_vdaf_ctx:
            return b""
        return self.version_tag + bytes(task_id)

    def input_share_info(self, server_role: Role) -> bytes:
        """HPKE info of an input share: ``"dap-18 input share" || 0x01 || server_role``
        (Section 4.4.2.1)."""
        _check_server_role(server_role)
        return self.version_tag + b" input share" + bytes([Role.CLIENT, server_role])

    def aggregate_share_info(self, server_role: Role) -> bytes:
        """HPKE info of an aggregate share:
        ``"dap-18 aggregate share" || server_role || 0x00`` (Section 4.6.7)."""
        _check_server_role(server_role)
        return self.version_tag + b" aggregate share" + bytes([server_role, Role.COLLECTOR])

    # -- media types --------------------------------------------------------------------
    def media_type_for(self, message: type[Struct] | Struct | str) -> str:
        """The media type of a message class, instance or class name
        (``application/ppm-dap;message=upload-req``, ``application/dap-report``)."""
        if isinstance(message, str):
            name = message
        elif isinstance(message, type):
            name = message.__name__
        else:
            name = type(message).__name__
        try:
            token = self.message_types[name]
        except KeyError:
            raise ProfileError(f"{name} has no media type in {self.name}") from None
        return self.media_type_template.format(message=token)

    def message_for_media_type(self, content_type: str) -> str:
        """The message class name of a ``Content-Type`` value.

        Type and subtype compare case-insensitively (RFC 9110 Section 8.3.1); parameters
        of the profile's template (DAP-18's ``message``) must match, other parameters
        such as DAP-18's optional ``version`` are ignored."""
        base, params = _parse_media_type(content_type)
        for name, token in self.message_types.items():
            want_base, want_params = _parse_media_type(
                self.media_type_template.format(message=token)
            )
            if base != want_base:
                continue
            if all(params.get(k) == v for k, v in want_params.items()):
                return name
        raise ProfileError(f"unknown media type {content_type!r} in {self.name}")

    # -- URLs ---------------------------------------------------------------------------
    def resource_url(self, resource: str, base_url: str, **ids: bytes) -> str:
        """Expand a resource URL template (Section 3).

        ``base_url`` replaces ``{leader}``, ``{helper}`` or ``{aggregator}``; ids are
        passed as ``task_id=...``, ``aggregation_job_id=...``, ``collection_job_id=...``
        or ``aggregate_share_id=...`` and are written in unpadded URL-safe base64. One
        trailing ``/`` of the base URL is dropped so that paths do not get ``//``.
        """
        try:
            template = self.resources[resource]
        except KeyError:
            raise ProfileError(f"unknown resource {resource!r} in {self.name}") from None
        base = base_url[:-1] if base_url.endswith("/") else base_url
        out = template
        for var in ("{leader}", "{helper}", "{aggregator}"):
            out = out.replace(var, base)
        for key, value in ids.items():
            var = "{" + key.replace("_", "-") + "}"
            if var not in out:
                raise ProfileError(f"{resource} URL has no {var}")
            out = out.replace(var, _Id.to_base64url(value))  # type: ignore[arg-type]
        if "{" in out:
            raise ProfileError(f"missing URL variables in {out!r}")
        return out

    def request(self, operation: str) -> tuple[str, str]:
        """``(HTTP method, resource name)`` of an operation such as ``"upload"``."""
        try:
            return self.requests[operation]
        except KeyError:
            raise ProfileError(f"unknown operation {operation!r} in {self.name}") from None

    # -- authentication -----------------------------------------------------------------
    def auth_header_for(self, token: str) -> tuple[str, str]:
        """``(header name, value)`` that carries an authentication token."""
        return self.auth_header, self.auth_value_prefix + token

    def token_from_header(self, value: str | None) -> str | None:
        """The token in a received authentication header value, or None if malformed."""
        if value is None or not value.startswith(self.auth_value_prefix):
            return None
        token = value[len(self.auth_value_prefix) :]
        return token or None

    # -- VDAFs --------------------------------------------------------------------------
    @property
    def vdaf_version(self) -> str:
        """The VDAF wire version this draft runs (``vdaf.registry``: "18" or "08")."""
        return registry.version_for_draft(self.vdaf_draft)

    @property
    def vdaf_types(self) -> Mapping[str, int]:
        """VDAF name -> ``VdafType`` codepoint (the VDAF draft's identifiers, from
        ``vdaf.registry``; DAP-09 carries none on the wire, its VDAFs bind them)."""
        return registry.codepoints(self.vdaf_version)

    def vdaf_class(self, name: str) -> type[Any]:
        """The class implementing VDAF ``name`` for this profile's VDAF draft."""
        try:
            return registry.vdaf_class(name, self.vdaf_version)
        except registry.RegistryError as exc:
            raise ProfileError(f"no VDAF {name!r} in {self.name}: {exc}") from None

    def build_vdaf(self, name: str, params: Mapping[str, Any]) -> Any:
        """The VDAF ``name`` with these parameters, in this profile's VDAF draft."""
        return registry.build(name, params, self.vdaf_version, self.shares)

    def task_from_config_bytes(self, task_id: bytes, data: bytes) -> Any:
        """A task of this profile from its stored parameters."""
        return self.task_cls.from_config_bytes(task_id, data, self)

    # -- problem documents --------------------------------------------------------------
    def problem_token(self, token: str) -> str:
        """The profile's spelling of an error token raised by the protocol core."""
        return self.problem_aliases.get(token, token)

    def problem_type_uri(self, token: str) -> str:
        if token not in self.problem_types:
            raise ProfileError(f"{token!r} is not a {self.name} problem type")
        return self.problem_type_prefix + token


class VdafCache:
    """VDAF objects by their parameters, shared by the tasks that name the same VDAF.

    A VDAF object is immutable once built (its methods keep their state in what they
    return, and its FLP's gadget shims are copies made per call), so every task of one
    VDAF configuration can use one object, from any thread. Building one costs a
    quarter of loading a task (about 0.03 ms for Prio3Count here, more for larger
    circuits), which an Aggregator with thousands of tasks pays at start and for each
    task it first sees. At most `size` configurations are kept (the least recently used
    leaves first): with taskprov, peers choose them."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any, build: Callable[[], Any], owner: Any = None) -> Any:
        """The VDAF of `key` (hashable: the profile's name and the VDAF's type and
        parameters), built by `build()` the first time; what `build` raises is not
        kept. `owner` (the task's profile object): a VDAF kept for another object of
        the same name (a profile cloned by ``dataclasses.replace`` without renaming,
        whose VDAF classes may differ) is not returned, but built again for this one."""
        with self._lock:
            kept = self._items.get(key)
            if kept is not None and kept[0] is owner:
                self._items.move_to_end(key)
                return kept[1]
        vdaf = build()
        with self._lock:
            self._items[key] = (owner, vdaf)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return vdaf

    def __len__(self) -> int:
        return len(self._items)


VDAFS = VdafCache()


def _parse_media_type(content_type: str) -> tuple[str, dict[str, str]]:
    parts = [p.strip() for p in content_type.split(";")]
    params: dict[str, str] = {}
    for p in parts[1:]:
        key, sep, value = p.partition("=")
        if not sep:
            raise ProfileError(f"malformed media type parameter {p!r}")
        params[key.strip().lower()] = value.strip().strip('"')
    return parts[0].lower(), params


def _check_server_role(role: Role) -> None:
    if role not in (Role.LEADER, Role.HELPER):
        raise ProfileError(f"server role must be leader or helper, got {role!r}")


class ClientFlow:
    """What Clients and Collectors send and receive in one draft (DAP-18 Sections 4.4 and
    4.6; DAP-09 Sections 4.4 and 4.6). ``dap.client`` and ``dap.collector`` are written
    once over this interface; each profile's package implements it."""

    # DAP-09 uploads one report per PUT (Section 4.4.2); DAP-18 POSTs an UploadRequest.
    one_report_per_request: bool = False
    # DAP-09's Collector names its collection job (PUT to a URL with a fresh ID); DAP-18's
    # Leader names it (POST, then the Location header).
    collector_chooses_job_id: bool = False
    # DAP-09 refuses an uploaded report with a problem document: its type -> the error.
    upload_problems: Mapping[str, Any] = MappingProxyType({})
    # The draft's client module: ``generate_report`` and ``collect_result``, as pure
    # functions (``dap.profiles.<draft>.client``).
    client: Any = None

    def report_time(self, task: Any, now_seconds: float) -> int:
        """The ``Time`` a report made now carries (DAP-18: in time_precision units)."""
        raise NotImplementedError

    def generate_report(self, task: Any, measurement: Any, *, time: int,
                        leader_hpke_config: Any, helper_hpke_config: Any,
                        vdaf: Any = None, report_id: bytes | None = None,
                        rand: bytes | None = None,
                        extensions: Sequence[tuple[int, bytes]] = ()) -> Any:
        """A report of ``measurement``; ``report_id`` and the VDAF sharding randomness
        ``rand`` are drawn from the OS CSPRNG unless passed in (seeded tests).
        ``extensions`` are (type, data) report extensions for both Aggregators, placed
        where the draft binds them into both HPKE associated data or plaintexts
        (:meth:`report_extension_args`)."""
        return self.client.generate_report(task, measurement, time=time,
                                           leader_hpke_config=leader_hpke_config,
                                           helper_hpke_config=helper_hpke_config, vdaf=vdaf,
                                           report_id=report_id, rand=rand,
                                           **self.report_extension_args(extensions))

    def report_extension_args(self, extensions: Sequence[tuple[int, bytes]]
                              ) -> dict[str, Any]:
        """The draft client's keyword arguments carrying report extensions meant for both
        Aggregators (DAP-18/19: public extensions; DAP-09: both plaintexts)."""
        if extensions:
            raise ProfileError("this profile carries no report extensions")
        return {}

    def report_id(self, report: Any) -> bytes:
        return bytes(report.report_metadata.report_id)

    def encode_upload(self, reports: Sequence[Any]) -> tuple[str, bytes]:
        """(message name, body) of an upload request carrying ``reports``."""
        raise NotImplementedError

    def decode_upload_errors(self, body: bytes) -> dict[bytes, Any]:
        """The refused reports of an upload answer, as the core's ``ReportError``."""
        return {}

    def collection_request(self, query: Any, agg_param: bytes) -> Any:
        raise NotImplementedError

    def decode_collection(self, body: bytes) -> Any:
        raise NotImplementedError

    def collect_result(self, task: Any, keypair: Any, req: Any, resp: Any,
                       vdaf: Any = None) -> Any:
        """The unsharded result (``report_count``, ``interval``, ``aggregate_result``,
        ``batch_id``) of a collection."""
        return self.client.collect_result(task, keypair, req, resp, vdaf=vdaf)

    def interval_unit(self, task: Any) -> int:
        """Seconds per unit of the ``interval`` of a collection result."""
        raise NotImplementedError

    # -- queries --------------------------------------------------------------------------
    def query_interval(self, task: Any, units: Any) -> Any:
        """A time-interval query for an interval in time_precision units."""
        raise NotImplementedError

    def query_current_batch(self, task: Any) -> Any:
        raise NotImplementedError

    def query_batch_id(self, task: Any, batch_id: bytes) -> Any:
        raise ProfileError("this profile has no query by batch ID")
