"""The protocol core's view of DAP-19's messages: DAP-18's wire with DAP-19's differences
(``specs/draft-ietf-ppm-dap-19-changes.md``)."""

from __future__ import annotations

from typing import Any

from ppm_reference.dap.common import ReportError
from ppm_reference.dap.core.wire import ErrorTranslation
from ppm_reference.dap.profiles.dap18.wire import Wire18
from ppm_reference.dap.profiles.dap19 import messages as m19


class Wire19(Wire18):
    m: Any = m19
    # #786 deleted task_expired and task_not_started (report_dropped replaces them) and
    # outdated_config (hpke_unknown_config_id replaces it); #784 and #789 added the two
    # errors the core already has. Translated by name: never cast a -18 code to -19.
    errors = ErrorTranslation.by_name(m19.ReportError, substitutes={
        ReportError.TASK_EXPIRED: "REPORT_DROPPED",
        ReportError.TASK_NOT_STARTED: "REPORT_DROPPED",
        ReportError.OUTDATED_CONFIG: "HPKE_UNKNOWN_CONFIG_ID",
    })
    unknown_key_per_report = True
    extension_error = ReportError.UNSUPPORTED_EXTENSION
    extension_errors_per_report = True
