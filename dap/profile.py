"""Protocol profiles: the version-specific data of a DAP draft, in one small object.

Code asks the profile for anything that changes between drafts (version tag, HPKE info
strings, VDAF application context, media types, resource URLs, codepoints, problem
types) instead of branching on version strings. ``DAP_18`` describes
draft-ietf-ppm-dap-18; a ``dap-09`` profile can be added beside it.
"""

from __future__ import annotations

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
    media_type: str
    # Message class name -> ``message`` parameter of the media type.
    message_types: Mapping[str, str]
    # Resource name -> URL template with {leader}/{helper}/{aggregator} and id variables.
    resources: Mapping[str, str]
    problem_type_prefix: str
    problem_types: frozenset[str]
    # VDAF name -> ``VdafType`` codepoint in ``TaskConfiguration``.
    vdaf_types: Mapping[str, int]
    # (kem_id, kdf_id, aead_id) every compliant implementation supports.
    mandatory_hpke_suite: tuple[int, int, int]
    # Number of Aggregators (VDAF shares).
    shares: int = 2
    notes: tuple[str, ...] = field(default=())

    # -- domain separation ----------------------------------------------------------------
    def vdaf_ctx(self, task_id: bytes) -> bytes:
        """VDAF application context: ``"dap-18" || task_id`` (Sections 4.4.2.1, 4.5.3)."""
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
        """``application/ppm-dap;message=...`` for a message class, instance or name."""
        if isinstance(message, str):
            name = message
        elif isinstance(message, type):
            name = message.__name__
        else:
            name = type(message).__name__
        try:
            return f"{self.media_type};message={self.message_types[name]}"
        except KeyError:
            raise ProfileError(f"{name} has no media type in {self.name}") from None

    def message_for_media_type(self, content_type: str) -> str:
        """The message class name of a ``Content-Type`` value.

        Type and subtype compare case-insensitively (RFC 9110 Section 8.3.1); extra
        parameters such as the draft's optional ``version`` are ignored."""
        parts = [p.strip() for p in content_type.split(";")]
        if parts[0].lower() != self.media_type:
            raise ProfileError(f"not a {self.media_type} media type: {content_type!r}")
        params: dict[str, str] = {}
        for p in parts[1:]:
            key, sep, value = p.partition("=")
            if not sep:
                raise ProfileError(f"malformed media type parameter {p!r}")
            params[key.strip().lower()] = value.strip().strip('"')
        message = params.get("message")
        for name, token in self.message_types.items():
            if token == message:
                return name
        raise ProfileError(f"unknown message type {message!r} in {self.name}")

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

    # -- problem documents --------------------------------------------------------------
    def problem_type_uri(self, token: str) -> str:
        if token not in self.problem_types:
            raise ProfileError(f"{token!r} is not a {self.name} problem type")
        return self.problem_type_prefix + token


def _check_server_role(role: Role) -> None:
    if role not in (Role.LEADER, Role.HELPER):
        raise ProfileError(f"server role must be leader or helper, got {role!r}")


DAP_18 = Profile(
    name="dap-18",
    draft="draft-ietf-ppm-dap-18",
    vdaf_draft="draft-irtf-cfrg-vdaf-20",
    version_tag=b"dap-18",
    media_type="application/ppm-dap",
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
    # Section 7 (Compliance Requirements): DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
    # AES-128-GCM.
    mandatory_hpke_suite=(0x0020, 0x0001, 0x0001),
)

PROFILES: Mapping[str, Profile] = _frozen({DAP_18.name: DAP_18})
DEFAULT_PROFILE = DAP_18


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ProfileError(f"unknown DAP profile {name!r}; known: {sorted(PROFILES)}") from None
