"""Reading the task files `ppm task create` writes (client-task.json,
collector-task.json), with a usage error that says what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ppm_reference.dap.cli.errors import usage_error


def load_view(path: str | Path, collector: bool) -> tuple[dict[str, Any], Any]:
    """A task view file and its Task."""
    from ppm_reference.dap.provision import task_from_view

    try:
        view = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise usage_error(f"task file not found: {path}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise usage_error(f"task file {path} is not JSON: {exc}") from None
    if not isinstance(view, dict):
        raise usage_error(f"task file {path} is not a JSON object")
    keys = ["task_id", "config"]
    if collector:
        keys += ["collector_hpke_config", "collector_private_key", "collector_auth_token"]
    missing = [k for k in keys if k not in view]
    if missing:
        what = "collector-task.json" if collector else "client-task.json"
        raise usage_error(f"task file {path} lacks {', '.join(missing)} (is it a {what}?)")
    try:
        task = task_from_view(view)
        task.vdaf()
    except Exception as exc:  # noqa: BLE001 - decode errors of several layers
        raise usage_error(f"task file {path} is invalid: {exc}") from None
    return view, task
