"""Protocol profiles: the version-specific data of a DAP draft, in one small object.

Code asks the profile for anything that changes between drafts (version tag, HPKE info
strings, VDAF application context, media types, resource URLs and HTTP methods,
codepoints, problem types, the request authentication header) instead of branching on
version strings. ``DAP_18`` describes draft-ietf-ppm-dap-18 and ``DAP_09``
draft-ietf-ppm-dap-09 (with VDAF-08), the version Janus 0.7, Daphne and divviup-ts speak.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dap.codec import Struct
from dap.messages import (
    AggregateShare,
    AggregateShareReq,
    AggregationJobContinueReq,
    AggregationJobInitReq,
    AggregationJobResp,
    CollectionJobReq,
    CollectionJobResp,
    HpkeConfigList,
    Role,
    UploadErrors,
    UploadRequest,
    _Id,
)


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
    # VDAF name -> ``VdafType`` codepoint in ``TaskConfiguration``.
    vdaf_types: Mapping[str, int]
    # VDAF name -> "module:Class" of its implementation for this profile's VDAF draft.
    vdaf_classes: Mapping[str, str]
    # (kem_id, kdf_id, aead_id) every compliant implementation supports.
    mandatory_hpke_suite: tuple[int, int, int]
    # HTTP request authentication: header name and the prefix of its value before the
    # token (``Authorization: Bearer <token>`` in DAP-18, ``DAP-Auth-Token: <token>`` as
    # DAP-09 and the interop test design use).
    auth_header: str
    auth_value_prefix: str
    # "module:Class" of the task parameters (``Task`` with its TaskConfiguration for
    # DAP-18, ``Task09`` for DAP-09); both have ``config_bytes`` / ``from_config_bytes``.
    task_class: str = "dap.task:Task"
    # Error tokens the protocol core raises that this profile spells differently (DAP-09
    # has no invalidAggregationParameter, and one unauthorizedRequest for both
    # authentication failures), as token -> this profile's token.
    problem_aliases: Mapping[str, str] = field(default_factory=dict)
    # Number of Aggregators (VDAF shares).
    shares: int = 2
    notes: tuple[str, ...] = field(default=())

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
    def vdaf_class(self, name: str) -> type[Any]:
        """The class implementing VDAF ``name`` for this profile's VDAF draft."""
        try:
            module, cls = self.vdaf_classes[name].split(":")
        except KeyError:
            raise ProfileError(f"no VDAF {name!r} in {self.name}") from None
        return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]

    def task_type(self) -> type[Any]:
        """The class holding this profile's task parameters."""
        module, cls = self.task_class.split(":")
        return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]

    def task_from_config_bytes(self, task_id: bytes, data: bytes) -> Any:
        """A task of this profile from its stored parameters."""
        return self.task_type().from_config_bytes(task_id, data, self)

    # -- problem documents --------------------------------------------------------------
    def problem_token(self, token: str) -> str:
        """The profile's spelling of an error token raised by the protocol core."""
        return self.problem_aliases.get(token, token)

    def problem_type_uri(self, token: str) -> str:
        if token not in self.problem_types:
            raise ProfileError(f"{token!r} is not a {self.name} problem type")
        return self.problem_type_prefix + token


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


DAP_18 = Profile(
    name="dap-18",
    draft="draft-ietf-ppm-dap-18",
    vdaf_draft="draft-irtf-cfrg-vdaf-20",
    version_tag=b"dap-18",
    binds_vdaf_ctx=True,
    media_type_template="application/ppm-dap;message={message}",
    # Section 9.1 (IANA: Protocol Message Media Type).
    message_types=_frozen(
        {
            HpkeConfigList.__name__: "hpke-config-list",
            UploadRequest.__name__: "upload-req",
            UploadErrors.__name__: "upload-errors",
            AggregationJobInitReq.__name__: "aggregation-job-init-req",
            AggregationJobResp.__name__: "aggregation-job-resp",
            AggregationJobContinueReq.__name__: "aggregation-job-continue-req",
            AggregateShareReq.__name__: "aggregate-share-req",
            AggregateShare.__name__: "aggregate-share",
            CollectionJobReq.__name__: "collection-job-req",
            CollectionJobResp.__name__: "collection-job-resp",
        }
    ),
    # Section 3 and Appendix A (HTTP Resources Reference).
    resources=_frozen(
        {
            "hpke_config": "{aggregator}/hpke_config",
            "reports": "{leader}/tasks/{task-id}/reports",
            "aggregation_jobs": "{helper}/tasks/{task-id}/aggregation_jobs",
            "aggregation_job": (
                "{helper}/tasks/{task-id}/aggregation_jobs/{aggregation-job-id}"
            ),
            "collection_jobs": "{leader}/tasks/{task-id}/collection_jobs",
            "collection_job": "{leader}/tasks/{task-id}/collection_jobs/{collection-job-id}",
            "aggregate_shares": "{helper}/tasks/{task-id}/aggregate_shares",
            "aggregate_share": (
                "{helper}/tasks/{task-id}/aggregate_shares/{aggregate-share-id}"
            ),
        }
    ),
    # Sections 4.4.1, 4.4.2, 4.5.2, 4.5.4, 4.6.1, 4.6.4: resources are created with POST
    # (server-chosen ids) and polled with GET.
    requests=_frozen(
        {
            "hpke_config": ("GET", "hpke_config"),
            "upload": ("POST", "reports"),
            "aggregation_job_init": ("POST", "aggregation_jobs"),
            "aggregation_job_continue": ("POST", "aggregation_job"),
            "aggregation_job_poll": ("GET", "aggregation_job"),
            "aggregation_job_delete": ("DELETE", "aggregation_job"),
            "collection_job_create": ("POST", "collection_jobs"),
            "collection_job_poll": ("GET", "collection_job"),
            "collection_job_delete": ("DELETE", "collection_job"),
            "aggregate_share_create": ("POST", "aggregate_shares"),
            "aggregate_share_poll": ("GET", "aggregate_share"),
        }
    ),
    # Sections 3.6 (Errors) and 9.3 (URN sub-namespace).
    problem_type_prefix="urn:ietf:params:ppm:dap:error:",
    problem_types=frozenset(
        {
            "invalidMessage",
            "unrecognizedTask",
            "unrecognizedAggregationJob",
            "batchInvalid",
            "invalidBatchSize",
            "invalidAggregationParameter",
            "batchMismatch",
            "stepMismatch",
            "batchOverlap",
            "unsupportedExtension",
            "invalidExtension",
        }
    ),
    # draft-irtf-cfrg-vdaf-20, Section 10 (VDAF Identifiers registry).
    vdaf_types=_frozen(
        {
            "Prio3Count": 0x00000001,
            "Prio3Sum": 0x00000002,
            "Prio3SumVec": 0x00000003,
            "Prio3Histogram": 0x00000004,
            "Prio3MultihotCountVec": 0x00000005,
            "Poplar1": 0x00000006,
        }
    ),
    vdaf_classes=_frozen(
        {
            "Prio3Count": "vdaf.prio3:Prio3Count",
            "Prio3Sum": "vdaf.prio3:Prio3Sum",
            "Prio3SumVec": "vdaf.prio3:Prio3SumVec",
            "Prio3Histogram": "vdaf.prio3:Prio3Histogram",
            "Prio3MultihotCountVec": "vdaf.prio3:Prio3MultihotCountVec",
        }
    ),
    # Section 7 (Compliance Requirements): DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
    # AES-128-GCM.
    mandatory_hpke_suite=(0x0020, 0x0001, 0x0001),
    # Section 3.5 (HTTPS Request Authentication) examples: OAuth 2.0 bearer tokens.
    auth_header="Authorization",
    auth_value_prefix="Bearer ",
)

DAP_09 = Profile(
    name="dap-09",
    draft="draft-ietf-ppm-dap-09",
    vdaf_draft="draft-irtf-cfrg-vdaf-08",
    # Sections 4.4.2 and 4.6.4: info strings "dap-09 input share" and "dap-09 aggregate
    # share" (same role bytes as DAP-18).
    version_tag=b"dap-09",
    binds_vdaf_ctx=False,
    # Section 8.1: one media type per message (CollectionReq is "dap-collect-req").
    media_type_template="application/dap-{message}",
    message_types=_frozen(
        {
            "HpkeConfigList": "hpke-config-list",
            "Report": "report",
            "AggregationJobInitReq": "aggregation-job-init-req",
            "AggregationJobResp": "aggregation-job-resp",
            "AggregationJobContinueReq": "aggregation-job-continue-req",
            "AggregateShareReq": "aggregate-share-req",
            "AggregateShare": "aggregate-share",
            "CollectionReq": "collect-req",
            "Collection": "collection",
        }
    ),
    # Sections 4.3 (Resource URIs), 4.4.1, 4.4.2, 4.5.1.1, 4.5.2.1, 4.6.1, 4.6.2. Aggregation and
    # collection job ids are chosen by the Leader and the Collector (16 bytes each).
    resources=_frozen(
        {
            "hpke_config": "{aggregator}/hpke_config",
            "hpke_config_for_task": "{aggregator}/hpke_config?task_id={task-id}",
            "reports": "{leader}/tasks/{task-id}/reports",
            "aggregation_job": (
                "{helper}/tasks/{task-id}/aggregation_jobs/{aggregation-job-id}"
            ),
            "collection_job": "{leader}/tasks/{task-id}/collection_jobs/{collection-job-id}",
            "aggregate_shares": "{helper}/tasks/{task-id}/aggregate_shares",
        }
    ),
    requests=_frozen(
        {
            "hpke_config": ("GET", "hpke_config_for_task"),
            "upload": ("PUT", "reports"),
            "aggregation_job_init": ("PUT", "aggregation_job"),
            "aggregation_job_continue": ("POST", "aggregation_job"),
            "aggregation_job_delete": ("DELETE", "aggregation_job"),
            "collection_job_create": ("PUT", "collection_job"),
            "collection_job_poll": ("POST", "collection_job"),
            "collection_job_delete": ("DELETE", "collection_job"),
            "aggregate_share_create": ("POST", "aggregate_shares"),
        }
    ),
    # Sections 3.2 (Errors) and 8.3 (URN sub-namespace).
    problem_type_prefix="urn:ietf:params:ppm:dap:error:",
    problem_types=frozenset(
        {
            "invalidMessage",
            "unrecognizedTask",
            "unrecognizedAggregationJob",
            "outdatedConfig",
            "reportRejected",
            "reportTooEarly",
            "batchInvalid",
            "invalidBatchSize",
            "batchQueriedTooManyTimes",
            "batchMismatch",
            "unauthorizedRequest",
            "missingTaskID",
            "stepMismatch",
            "batchOverlap",
        }
    ),
    # draft-irtf-cfrg-vdaf-08, Section 10 (codepoints). DAP-09 has no VdafType field on
    # the wire (the task is configured out of band); these are the VDAF IDs Prio3 binds
    # into its domain separation tags.
    vdaf_types=_frozen(
        {
            "Prio3Count": 0x00000000,
            "Prio3Sum": 0x00000001,
            "Prio3SumVec": 0x00000002,
            "Prio3Histogram": 0x00000003,
            "Poplar1": 0x00001000,
        }
    ),
    vdaf_classes=_frozen(
        {
            "Prio3Count": "vdaf.prio3:Prio3CountV08",
            "Prio3Sum": "vdaf.prio3:Prio3SumV08",
            "Prio3SumVec": "vdaf.prio3:Prio3SumVecV08",
            "Prio3Histogram": "vdaf.prio3:Prio3HistogramV08",
            # Test-only variant of the published VDAF-08 vectors (private-use ID).
            "Prio3MultiHotHistogram": "vdaf.prio3:Prio3MultiHotHistogramV08",
        }
    ),
    # Section 6 (Compliance Requirements): the same suite as DAP-18.
    mandatory_hpke_suite=(0x0020, 0x0001, 0x0001),
    # Section 3.1 lists the DAP-Auth-Token header of draft-dcook-ppm-dap-interop-test-design
    # as one allowed scheme; Janus 0.7 and Daphne use it between Aggregators.
    auth_header="DAP-Auth-Token",
    auth_value_prefix="",
    task_class="dap.task09:Task09",
    problem_aliases=_frozen({
        "unauthorized": "unauthorizedRequest",
        "forbidden": "unauthorizedRequest",
        "invalidAggregationParameter": "invalidMessage",
        "unsupportedExtension": "invalidMessage",
        "invalidExtension": "invalidMessage",
    }),
)

PROFILES: Mapping[str, Profile] = _frozen({p.name: p for p in (DAP_18, DAP_09)})
DEFAULT_PROFILE = DAP_18


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ProfileError(f"unknown DAP profile {name!r}; known: {sorted(PROFILES)}") from None
