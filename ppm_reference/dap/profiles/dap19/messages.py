# This module redefines DAP-18 classes of the same names on purpose (see below).
# mypy: disable-error-code="no-redef,assignment,unused-ignore"
"""The messages of draft-ietf-ppm-dap-19 that differ from DAP-18's.

DAP-19 changed two things in the message definitions (``specs/draft-ietf-ppm-dap-19-changes.md``):

* ``ReportError`` was audited (#786) and extended (#784, #789): ``task_expired``,
  ``task_not_started`` and ``outdated_config`` are gone, ``unknown_verification_key_id``
  and ``unsupported_extension`` are new, and the registry is renumbered. The same byte
  means different errors in -18 and -19 (7 is ``task_expired`` in -18 and
  ``invalid_message`` in -19), so every message carrying a ``ReportError``
  (``ReportUploadStatus``, ``UploadErrors``, ``VerifyResp``, ``AggregationJobResp``) is
  redefined here over the new enumeration.
* ``task_info`` may be empty (#787): ``opaque task_info<0..2^8-1>``, so
  ``TaskConfiguration`` and the two AADs that embed it are redefined.

Every other message is DAP-18's and is re-exported from here, so this module names every
DAP-19 message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from ppm_reference.dap.codec import EnumCodec, Opaque, Rest, StructCodec, wire
from ppm_reference.dap.common import VerifyRespType
from ppm_reference.dap.profiles.dap18 import messages as m18
from ppm_reference.dap.profiles.dap18.messages import *  # noqa: F403  (every unchanged DAP-18 message)

#: ``ReportError`` of DAP-19 (#786, #784, #789), numbered from 1 in this order;
#: ``reserved(0)`` never decodes.
ReportError = IntEnum("ReportError", [
    "BATCH_COLLECTED", "REPORT_REPLAYED", "REPORT_DROPPED", "HPKE_UNKNOWN_CONFIG_ID",
    "HPKE_DECRYPT_ERROR", "VDAF_VERIFY_ERROR", "INVALID_MESSAGE", "REPORT_TOO_EARLY",
    "UNKNOWN_VERIFICATION_KEY_ID", "UNSUPPORTED_EXTENSION",
], module=__name__)


REPORT_ERROR = EnumCodec(ReportError, 1)


@dataclass(frozen=True)
class TaskConfiguration(m18.TaskConfiguration):
    """``TaskConfiguration`` with ``opaque task_info<0..2^8-1>`` (#787)."""

    task_info: bytes = wire(Opaque(1, min_len=0))


@dataclass(frozen=True)
class InputShareAad(m18.InputShareAad):
    task_configuration: m18.TaskConfiguration = wire(StructCodec(TaskConfiguration))


@dataclass(frozen=True)
class AggregateShareAad(m18.AggregateShareAad):
    task_configuration: m18.TaskConfiguration = wire(StructCodec(TaskConfiguration))


@dataclass(frozen=True)
class ReportUploadStatus(m18.ReportUploadStatus):
    error: ReportError = wire(REPORT_ERROR)  # type: ignore[assignment]


@dataclass(frozen=True)
class UploadErrors(m18.UploadErrors):
    status: Sequence[m18.ReportUploadStatus] = wire(Rest(StructCodec(ReportUploadStatus)))


@dataclass(frozen=True)
class VerifyResp(m18.VerifyResp):  # type: ignore[no-redef]
    report_error: ReportError | None = wire(  # type: ignore[assignment]
        REPORT_ERROR, when=("verify_resp_type", VerifyRespType.REJECT)
    )


@dataclass(frozen=True)
class AggregationJobResp(m18.AggregationJobResp):  # type: ignore[no-redef]
    verify_resps: Sequence[m18.VerifyResp] = wire(Rest(StructCodec(VerifyResp)))


_CHANGED = {c.__name__: c for c in (TaskConfiguration, InputShareAad, AggregateShareAad,
                                    ReportUploadStatus, UploadErrors, VerifyResp,
                                    AggregationJobResp)}
ALL_STRUCTS = tuple(_CHANGED.get(c.__name__, c) for c in m18.ALL_STRUCTS)
