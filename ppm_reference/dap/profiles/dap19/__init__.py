"""draft-ietf-ppm-dap-19: DAP-18 with the changes of ``specs/draft-ietf-ppm-dap-19-changes.md``.

Stated as its differences only: the version tag ``dap-19`` (HPKE info strings and the VDAF
application context, #790), the renumbered ``ReportError`` and the empty ``task_info``
(its ``messages``), and the per-report handling of unknown verification keys and
unsupported extensions (its ``wire``). Everything else is DAP-18's. Beside the draft,
``taskprov``: in-band task provisioning (draft-ietf-ppm-dap-taskprov), written for
DAP-19.
"""

from __future__ import annotations

import dataclasses

from ppm_reference.dap.profiles.dap18 import DAP_18
from ppm_reference.dap.profiles.dap18.flow import Flow18
from ppm_reference.dap.profiles.dap19 import messages as m19
from ppm_reference.dap.profiles.dap19.taskprov import INVALID_TASK, TASKPROV
from ppm_reference.dap.profiles.dap19.wire import Wire19

_WIRE = Wire19()

DAP_19 = dataclasses.replace(
    DAP_18,
    name="dap-19",
    draft="draft-ietf-ppm-dap-19",
    version_tag=b"dap-19",
    messages=m19,
    wire=_WIRE,
    flow=Flow18(_WIRE),
    vector_dir="dap-19",
    # draft-ietf-ppm-dap-taskprov (editors' copy 2026-07-07) is written for DAP-19: its
    # header, derivations and opt-out rules, and its error type invalidTask (Section 2).
    taskprov=TASKPROV,
    problem_types=DAP_18.problem_types | {INVALID_TASK},
)
