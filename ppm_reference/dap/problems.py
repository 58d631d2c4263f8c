"""Problem documents (RFC 9457) with the DAP error types of DAP-18 Section 3.6.

A server that aborts answers with a problem detail object whose ``type`` is
``urn:ietf:params:ppm:dap:error:<token>``, and SHOULD add a ``taskid`` member (unpadded
URL-safe base64) when it knows the task. An upload rejected for unsupported report
extensions MAY list their codepoints in an ``unsupported_extensions`` member
(Section 4.4.2.2).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ppm_reference.dap.common import TaskID
from ppm_reference.dap.profiles import DEFAULT_PROFILE, Profile

PROBLEM_MEDIA_TYPE = "application/problem+json"


class ProblemType(StrEnum):
    """The DAP error types of DAP-18 Section 3.6 (table "DAP errors")."""

    INVALID_MESSAGE = "invalidMessage"
    UNRECOGNIZED_TASK = "unrecognizedTask"
    UNRECOGNIZED_AGGREGATION_JOB = "unrecognizedAggregationJob"
    BATCH_INVALID = "batchInvalid"
    INVALID_BATCH_SIZE = "invalidBatchSize"
    INVALID_AGGREGATION_PARAMETER = "invalidAggregationParameter"
    BATCH_MISMATCH = "batchMismatch"
    STEP_MISMATCH = "stepMismatch"
    BATCH_OVERLAP = "batchOverlap"
    UNSUPPORTED_EXTENSION = "unsupportedExtension"
    INVALID_EXTENSION = "invalidExtension"


class ProblemDocumentError(ValueError):
    """A JSON body is not a problem document."""


@dataclass(frozen=True)
class ProblemDocument:
    """An RFC 9457 problem detail object, with DAP's extension members."""

    type: str
    status: int
    title: str | None = None
    detail: str | None = None
    instance: str | None = None
    taskid: str | None = None
    unsupported_extensions: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            # Section 3.6: a problem document's status MUST be a client or server error.
            raise ProblemDocumentError(f"status {self.status} is not a 4xx or 5xx code")

    @classmethod
    def for_error(
        cls,
        problem: ProblemType | str,
        *,
        status: int = 400,
        detail: str | None = None,
        task_id: bytes | None = None,
        unsupported_extensions: tuple[int, ...] | None = None,
        profile: Profile = DEFAULT_PROFILE,
    ) -> ProblemDocument:
        token = str(problem)
        return cls(
            type=profile.problem_type_uri(token),
            status=status,
            title=token,
            detail=detail,
            taskid=TaskID(task_id).to_base64url() if task_id is not None else None,
            unsupported_extensions=unsupported_extensions,
        )

    def dap_problem(self, profile: Profile = DEFAULT_PROFILE) -> str | None:
        """The DAP error type (a :class:`ProblemType` for DAP-18, the token for another
        profile's types such as DAP-09's ``reportRejected``), or None if ``type`` is not
        one of the profile's."""
        if not self.type.startswith(profile.problem_type_prefix):
            return None
        token = self.type[len(profile.problem_type_prefix) :]
        if token not in profile.problem_types:
            return None
        try:
            return ProblemType(token)
        except ValueError:
            return token

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        for key in ("title", "detail", "instance", "taskid"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.unsupported_extensions is not None:
            out["unsupported_extensions"] = list(self.unsupported_extensions)
        return out

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, body: bytes | str) -> ProblemDocument:
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProblemDocumentError(f"not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise ProblemDocumentError("not a JSON object")
        # RFC 9457 Section 3.1: "type" defaults to "about:blank".
        ptype = obj.get("type", "about:blank")
        status = obj.get("status")
        if not isinstance(ptype, str) or isinstance(status, bool) or not isinstance(status, int):
            raise ProblemDocumentError("type must be a string and status an integer")
        fields: dict[str, Any] = {}
        for key in ("title", "detail", "instance", "taskid"):
            value = obj.get(key)
            if value is not None and not isinstance(value, str):
                raise ProblemDocumentError(f"{key} must be a string")
            fields[key] = value
        ext = obj.get("unsupported_extensions")
        if ext is not None:
            if not isinstance(ext, list) or not all(
                isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 0xFFFF for x in ext
            ):
                raise ProblemDocumentError("unsupported_extensions must be a list of uint16")
            ext = tuple(ext)
        return cls(type=ptype, status=status, unsupported_extensions=ext, **fields)
