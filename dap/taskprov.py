"""The ``DAP-Taskprov`` advertisement a request for a task carries (draft-ietf-ppm-dap-
taskprov, Section 3.2), for the Client, the Collector and the Leader alike.

A task is advertised when its profile has taskprov (``Profile.taskprov``: dap-19) and its
ID is the one derived from its configuration (Section 3.3), which no randomly drawn task
ID is: the task files of ``ppm task create --taskprov`` need no flag. The Aggregators'
side is ``dap.server.taskprov``.
"""

from __future__ import annotations

from typing import Any


def advertisement_headers(task: Any) -> dict[str, str]:
    """``{"DAP-Taskprov": ":<base64 TaskConfiguration>:"}`` for a taskprov task (a
    ``dap.task.DapTask``), ``{}`` for any other."""
    tp = getattr(task.profile, "taskprov", None)
    if tp is None or not tp.advertises(task):
        return {}
    return {str(tp.header): str(tp.header_value(task.config_bytes()))}


def is_taskprov_task(task: Any) -> bool:
    """Whether requests for ``task`` advertise it."""
    return bool(advertisement_headers(task))


__all__ = ["advertisement_headers", "is_taskprov_task"]
