"""draft-ietf-ppm-dap-09, the draft Janus 0.7, Daphne and divviup-ts speak, with VDAF-08.

``DAP_09`` is built from this folder: ``profile.toml`` holds the draft's constants
(media types, resources and methods, problem types), and the modules the objects the
engine asks (messages, the task class, the wire, the client flow, interop readers,
vectors). Only ``dap/profiles/`` imports them (an import-linter contract).
"""

from __future__ import annotations

from pathlib import Path

from ppm_reference.dap.profiles.base import Profile
from ppm_reference.dap.profiles.dap09 import messages as m09
from ppm_reference.dap.profiles.dap09 import vectors
from ppm_reference.dap.profiles.dap09.flow import Flow09
from ppm_reference.dap.profiles.dap09.interop import INTEROP_09
from ppm_reference.dap.profiles.dap09.task import Task09
from ppm_reference.dap.profiles.dap09.wire import Wire09

_WIRE = Wire09()

DAP_09 = Profile.load(
    Path(__file__).with_name("profile.toml"), messages=m09, task_cls=Task09, wire=_WIRE,
    flow=Flow09(), interop=INTEROP_09, vectors=vectors.VECTORS)
