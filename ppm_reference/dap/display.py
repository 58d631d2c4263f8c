"""Plain forms of DAP values for reports to people and JSON: UTC timestamps, durations,
batch intervals in seconds, and JSON-safe numbers. Shared by the command line and the
demo job; nothing here prints."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any


def json_number(value: float) -> float | None:
    """JSON has no infinity: inf (no protection) becomes null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def iso(seconds: int) -> str:
    """POSIX seconds as a UTC timestamp, `2024-01-01T00:00:00Z`."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_duration(seconds: int) -> str:
    """`2 h`, `1 d`, `5 min`, or `7 s`: the largest unit that divides the duration."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def interval_json(interval: Any, time_precision: int) -> dict[str, Any]:
    """A batch interval counted in units of `time_precision` seconds, in seconds."""
    start = int(interval.start) * time_precision
    duration = int(interval.duration) * time_precision
    return {"start": start, "duration": duration, "start_utc": iso(start)}
