"""Logging of the servers: level and format (`log_level`, `log_format` in the
configuration; `ppm leader --log-level/--log-format` override them).

`text` is one human line per record; `json` is one JSON object per line (`time`,
`level`, `logger`, `message`, and the record's `extra` fields, e.g. the access log's
`method`, `route`, `status`, `duration_ms`), for log collectors. The access log
(`access_log: true`, logger `ppm.access`) has one line per request, without the peer's
address unless `log_request_peers` (paper 000 Section 4.8: minimize logging).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
# The attributes every LogRecord has; anything else was passed with `extra=`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message",
                                                                           "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name,
            "message": record.getMessage()}
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                obj[key] = value
        if record.exc_info:
            obj["exception"] = self.formatException(record.exc_info)
        return json.dumps(obj, default=str)


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Set the root logger's level and format (replacing its handlers)."""
    if level.upper() not in LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LEVELS)}")
    if fmt not in FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # aiohttp's own access log duplicates ours (and names peers): keep it quiet.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
