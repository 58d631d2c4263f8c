"""draft-ietf-ppm-dap-09: its messages, task, wire, client flow, vectors and interop fields.

``DAP_09`` is the profile object: the draft's constants are data (``profile.toml``), its
behaviour the objects of this package's modules, which are its internals and are imported
only from ``dap/profiles/`` (an import-linter contract).
"""

from __future__ import annotations

from pathlib import Path

from dap.profiles.base import Profile
from dap.profiles.dap09 import messages as m09
from dap.profiles.dap09 import vectors
from dap.profiles.dap09.flow import Flow09
from dap.profiles.dap09.interop import INTEROP_09
from dap.profiles.dap09.task import Task09
from dap.profiles.dap09.wire import Wire09

_WIRE = Wire09()

DAP_09 = Profile.load(
    Path(__file__).with_name("profile.toml"), messages=m09, task_cls=Task09, wire=_WIRE,
    flow=Flow09(), interop=INTEROP_09, vectors=vectors)
