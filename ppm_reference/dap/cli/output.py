"""Printing for `ppm` commands: the one JSON object of `--json`, results in text, and
files written for the user."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ppm_reference.dap.display import format_duration, interval_json, iso, json_number

__all__ = ["emit_json", "format_duration", "format_result", "interval_json", "iso",
           "json_number", "result_json", "write_json_file"]


def emit_json(obj: dict[str, Any]) -> None:
    """Print one JSON object (sorted keys; bytes as unpadded base64url)."""
    print(json.dumps(obj, sort_keys=True, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        from ppm_reference.dap.provision import b64

        return b64(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def result_json(value: Any) -> Any:
    """An aggregate result for JSON (infinities become null)."""
    if isinstance(value, float):
        return json_number(value)
    if isinstance(value, list):
        return [result_json(v) for v in value]
    return value


def format_result(value: Any) -> str:
    """An aggregate result in text (floats with two decimals)."""
    if isinstance(value, list):
        return "[" + ", ".join(format_result(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def write_json_file(path: Path, obj: dict[str, Any], private: bool,
                    sort_keys: bool = True) -> None:
    """Write JSON; `private` files are created with mode 0600 (and re-moded if they
    existed)."""
    data = (json.dumps(obj, indent=2, sort_keys=sort_keys) + "\n").encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(path, flags, 0o600 if private else 0o644)
    try:
        if private:
            os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)
