"""draft-ietf-ppm-dap-18: its messages, task, wire, client flow, vectors and interop fields.

``DAP_18`` is the profile object: the draft's constants are data (``profile.toml``), its
behaviour the objects of this package's modules, which are its internals and are imported
only from ``dap/profiles/`` (an import-linter contract).
"""

from __future__ import annotations

from pathlib import Path

from ppm_reference.dap.profiles.base import Profile
from ppm_reference.dap.profiles.dap18 import messages as m18
from ppm_reference.dap.profiles.dap18 import vectors
from ppm_reference.dap.profiles.dap18.flow import Flow18
from ppm_reference.dap.profiles.dap18.interop import INTEROP_18
from ppm_reference.dap.profiles.dap18.task import Task
from ppm_reference.dap.profiles.dap18.wire import Wire18

_WIRE = Wire18()

DAP_18 = Profile.load(
    Path(__file__).with_name("profile.toml"), messages=m18, task_cls=Task, wire=_WIRE,
    flow=Flow18(_WIRE), interop=INTEROP_18, vectors=vectors.VECTORS)
