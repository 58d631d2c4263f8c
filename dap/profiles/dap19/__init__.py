"""draft-ietf-ppm-dap-19: DAP-18 with the changes of ``specs/draft-ietf-ppm-dap-19-changes.md``.

Stated as its differences only: the version tag ``dap-19`` (HPKE info strings and the VDAF
application context, #790), the renumbered ``ReportError`` and the empty ``task_info``
(its ``messages``), and the per-report handling of unknown verification keys and
unsupported extensions (its ``wire``). Everything else is DAP-18's.
"""

from __future__ import annotations

import dataclasses

from dap.profiles.dap18 import DAP_18
from dap.profiles.dap18.flow import Flow18
from dap.profiles.dap19 import messages as m19
from dap.profiles.dap19.wire import Wire19

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
)
