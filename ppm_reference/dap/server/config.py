"""Aggregator configuration: a JSON file for `ppm leader --config FILE` / `ppm helper`.

Example (every key but `role` and `datastore` is optional)::

    {
      "role": "leader",                  # leader or helper
      "listen_host": "127.0.0.1", "listen_port": 8081,   # where to serve
      "datastore": "leader.sqlite",      # SQLite file (relative to this file), or
                                         # "postgresql://USER@HOST:PORT/DATABASE"
      "sqlite_synchronous": "FULL",      # SQLite PRAGMA synchronous
      "admin_token": "...",              # enables the /internal admin API
      "clock_skew": 300,                 # seconds of leeway before report_too_early
      "min_job_size": 10, "max_job_size": 500,   # reports per aggregation job
      "straggler_age": 2.0,              # seconds after which fewer than min_job_size
                                         # waiting reports form a job (and a partial
                                         # job stops waiting for its task's running
                                         # step: job fill)
      "job_fill": true,                  # Leader: while a task's job is stepped, its
                                         # next job is made when full or when the step
                                         # ends (or after straggler_age)
      "async_helper": false,             # Helper: answer aggregation jobs later
      "async_aggregate_shares": false,   # Helper: always compute shares in background
      "retry_after": 1,                  # seconds, in Retry-After headers
      "hpke_cache_max_age": 86400,       # Cache-Control max-age of hpke_config
      "collection_give_up_after": null,  # seconds; then invalidBatchSize
      "worker_interval": 0.05,           # seconds: the shortest pause of a worker with
                                         # nothing to do (it sleeps until the next due
                                         # time, a wake-up or work_poll_interval)
      "job_concurrency": 4,              # aggregation jobs stepped at once
      "http_timeout": 30.0,              # seconds, requests to the other Aggregator
      "job_lease": 60.0,                 # seconds a worker holds a job it is stepping
                                         # (> http_timeout); a crashed worker's jobs
                                         # resume once it has expired
      "taskprov_peers": [...],           # in-band task provisioning: the peers that
                                         # may provision tasks (dap/server/taskprov.py)
      "ohttp_gateway": false,            # Leader: Oblivious HTTP gateway (RFC 9458) at
                                         # /.well-known/ohttp-gateway (dap/server/gateway.py)
      "ohttp_key_file": null,            # its key (default: DATASTORE.ohttp-key)
      "log_request_peers": false,        # log each request's peer address (audits, tests)
      "min_batch_size_floor": 2,         # refuse tasks with a smaller min_batch_size
                                         # (1: tests and development only)
      "max_item_attempts": 8,            # a job or task whose background work raises
                                         # is retried with backoff, then failed
      "report_expiry_age": 2592000,      # seconds (30 days): older reports are evicted
                                         # and refused (report_dropped); null: never
      "job_retention": 604800,           # seconds (7 days) finished jobs, final-state
                                         # reports and released results are kept
      "task_retention_after_end": 604800,  # seconds after a task's end, then its data
                                         # is deleted (a Collector's grace period)
      "retention_interval": 300,         # seconds between retention passes
      "max_upload_bytes": 16777216,      # request body limits per resource (413 above)
      "max_aggregation_job_bytes": 33554432,   # aggregation job requests
      "max_collection_bytes": 1048576,   # collection jobs and aggregate shares
      "max_admin_bytes": 1048576,        # admin API requests
      "idle_timeout": 15.0,              # seconds to send a complete request header
      "body_timeout": 30.0,              # seconds to send a whole request body
      "max_connections": 1000,           # then the oldest idle connection is closed
      "tls_cert": "cert.pem", "tls_key": "key.pem",   # serve HTTPS (both or neither)
      "tls_ca_file": "ca.pem",           # also trust this CA for requests to the Helper
      "worker_threads": 4,               # blocking work off the event loop (0: on it)
      "event_loop": "auto",              # uvloop if installed (auto), "uvloop" (an
                                         # error if not) or "asyncio"
      "log_level": "INFO",               # DEBUG, INFO, WARNING or ERROR
      "log_format": "text",              # text, or json: one JSON object per line
      "access_log": false,               # one log line per request (logger ppm.access)
      "mode": "all",                     # this process: "all" (HTTP and background
                                         # work), "frontend" (HTTP only) or "driver"
                                         # (background work only, no listener)
      "frontends": 0, "drivers": 0,      # > 0: supervise that many frontend and driver
                                         # processes on this host (dap/server/processes.py)
      "reuse_port": false,               # SO_REUSEPORT: front ends share listen_port
      "health_port": null,               # a driver: GET /healthz on this port (200 while
                                         # its background worker runs)
      "work_poll_interval": 0.5          # seconds: how often a driver looks for work
                                         # stored by other processes (due times and
                                         # in-process wake-ups need no poll)
    }

Keys starting with `#` are comments. `ppm config init` writes a commented pair of files;
`ppm leader --config FILE --check` checks one and exits. Every key is type-checked from
its annotation below (`check_types`), so a key added here is checked too.

Relative paths (datastore, TLS files) are relative to the configuration file (a
datastore URL is kept as it is: dap.storage.open_datastore). See
`dap/server/serving.py` for what the limits protect against.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path
from typing import Any

from ppm_reference.dap.server.serving import HttpLimits, MiB, event_loop_name
from ppm_reference.dap.storage import is_datastore_url

# What one process of an Aggregator does (`mode`): HTTP and background work, HTTP only,
# or background work only.
MODES = ("all", "frontend", "driver")


@dataclass
class AggregatorConfig:
    role: str
    datastore: str
    listen_host: str = "127.0.0.1"
    listen_port: int = 8080
    sqlite_synchronous: str = "FULL"
    admin_token: str | None = None
    clock_skew: int = 300
    min_job_size: int = 1
    max_job_size: int = 500
    straggler_age: float = 2.0
    job_fill: bool = True
    async_helper: bool = False
    async_aggregate_shares: bool = False
    retry_after: int = 1
    hpke_cache_max_age: int = 86400
    collection_give_up_after: float | None = None
    worker_interval: float = 0.05
    job_concurrency: int = 4
    http_timeout: float = 30.0
    job_lease: float = 60.0
    # draft-ietf-ppm-dap-taskprov peers (dap.server.taskprov); None: taskprov is off.
    taskprov_peers: list[dict[str, Any]] | None = None
    ohttp_gateway: bool = False
    ohttp_key_file: str | None = None
    log_request_peers: bool = False
    min_batch_size_floor: int = 2
    max_item_attempts: int = 8
    report_expiry_age: float | None = 30 * 86400.0
    job_retention: float | None = 7 * 86400.0
    task_retention_after_end: float | None = 7 * 86400.0
    retention_interval: float = 300.0
    # 16 MiB: the Client sends up to 500 reports a request, a few KiB each for large
    # vector VDAFs. A legitimate body under the limit is processed off the event loop.
    max_upload_bytes: int = 16 * MiB
    max_aggregation_job_bytes: int = 32 * MiB
    max_collection_bytes: int = 1 * MiB
    max_admin_bytes: int = 1 * MiB
    idle_timeout: float = 15.0
    body_timeout: float = 30.0
    max_connections: int = 1000
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca_file: str | None = None
    worker_threads: int = 4
    event_loop: str = "auto"
    log_level: str = "INFO"
    log_format: str = "text"
    access_log: bool = False
    # Several processes per Aggregator (dap/server/processes.py, dap/server/scheduling.py)
    mode: str = "all"
    frontends: int = 0
    drivers: int = 0
    reuse_port: bool = False
    health_port: int | None = None
    work_poll_interval: float = 0.5

    def __post_init__(self) -> None:
        check_types(self)
        if self.role not in ("leader", "helper"):
            raise ValueError(f"role must be \"leader\" or \"helper\", not "
                             f"{json.dumps(self.role)}")
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listen_port must be 0..65535, not {self.listen_port}")
        for name in ("worker_interval", "http_timeout", "job_lease"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be a positive number of seconds")
        if self.straggler_age < 0:
            raise ValueError("straggler_age must be a number of seconds >= 0")
        if self.job_concurrency < 1:
            raise ValueError("job_concurrency must be at least 1")
        if self.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError("log_level must be DEBUG, INFO, WARNING or ERROR")
        if self.log_format not in ("text", "json"):
            raise ValueError('log_format must be "text" or "json"')
        if self.min_job_size < 1 or self.max_job_size < self.min_job_size:
            raise ValueError("need 1 <= min_job_size <= max_job_size")
        for name in ("max_upload_bytes", "max_aggregation_job_bytes", "max_collection_bytes",
                     "max_admin_bytes", "max_connections"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer")
        if not isinstance(self.worker_threads, int) or self.worker_threads < 0:
            raise ValueError("worker_threads must be a non-negative integer")
        event_loop_name(self.event_loop)  # a ValueError naming the choices, or uvloop missing
        for name in ("idle_timeout", "body_timeout"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key go together")
        if not isinstance(self.min_batch_size_floor, int) or self.min_batch_size_floor < 1:
            raise ValueError("min_batch_size_floor must be a positive integer")
        if not isinstance(self.max_item_attempts, int) or self.max_item_attempts < 1:
            raise ValueError("max_item_attempts must be a positive integer")
        for name in ("report_expiry_age", "job_retention", "task_retention_after_end"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, int | float) or value <= 0):
                raise ValueError(f"{name} must be a positive number of seconds or null")
        if isinstance(self.retention_interval, bool) or \
                not isinstance(self.retention_interval, int | float) or \
                self.retention_interval <= 0:
            raise ValueError("retention_interval must be a positive number of seconds")
        if self.taskprov_peers is not None:
            from ppm_reference.dap.taskprov import parse_peers

            parse_peers(self.taskprov_peers, self.role)  # a PeerConfigError (ValueError)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        for name in ("frontends", "drivers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer")
        if self.health_port is not None and (
                not isinstance(self.health_port, int) or isinstance(self.health_port, bool)
                or not 0 <= self.health_port <= 65535):
            raise ValueError("health_port must be a port number or null")
        if not isinstance(self.reuse_port, bool):
            raise ValueError("reuse_port must be true or false")
        if isinstance(self.work_poll_interval, bool) or \
                not isinstance(self.work_poll_interval, int | float) or \
                self.work_poll_interval <= 0:
            raise ValueError("work_poll_interval must be a positive number of seconds")
        if self.ohttp_gateway and self.role != "leader":
            raise ValueError("ohttp_gateway is a Leader option")

    @property
    def limits(self) -> HttpLimits:
        return HttpLimits(idle_timeout=float(self.idle_timeout),
                          body_timeout=float(self.body_timeout),
                          max_connections=self.max_connections)

    @property
    def max_body_bytes(self) -> int:
        """The largest body any resource accepts (aiohttp's own `client_max_size`)."""
        return max(self.max_upload_bytes, self.max_aggregation_job_bytes,
                   self.max_collection_bytes, self.max_admin_bytes)

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"

    def gateway_key_path(self) -> str:
        """Where the Oblivious HTTP gateway key is kept."""
        if self.ohttp_key_file is None and is_datastore_url(self.datastore):
            raise ConfigError("an OHTTP gateway with a datastore URL needs ohttp_key_file "
                              "(its key is kept in a file)")
        return self.ohttp_key_file or f"{self.datastore}.ohttp-key"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AggregatorConfig:
        if not isinstance(data, dict):
            raise ValueError("the configuration must be a JSON object")
        # Keys starting with "#" are comments (`ppm config init` writes them).
        data = {k: v for k, v in data.items() if not k.startswith("#")}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown configuration keys: {unknown}")
        missing = [f.name for f in fields(cls) if f.name not in data
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise ValueError(f"missing required key(s) {', '.join(missing)} (for example "
                             '"role": "leader", "datastore": "leader.sqlite")')
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> AggregatorConfig:
        data = json.loads(Path(path).read_text())
        config = cls.from_dict(data)
        # A relative datastore path is relative to the configuration file (a URL, such
        # as postgresql://..., is kept as it is).
        base = Path(path).resolve().parent
        ds = Path(config.datastore)
        if not is_datastore_url(config.datastore) and not ds.is_absolute():
            config.datastore = str(base / ds)
        for name in ("tls_cert", "tls_key", "tls_ca_file"):
            value = getattr(config, name)
            if value and not Path(value).is_absolute():
                setattr(config, name, str(base / value))
        if config.ohttp_key_file is not None and not Path(config.ohttp_key_file).is_absolute():
            config.ohttp_key_file = str(base / config.ohttp_key_file)
        return config

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# The JSON types a field's annotation accepts (bool is not a number here, an int is a
# float), so that every key -- those other modules add too -- is checked from its
# annotation alone.
_JSON_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
               list: "a list", dict: "an object", type(None): "null"}


def _accepted(annotation: Any) -> tuple[type, ...]:
    """The Python types of a field annotation (`float | None` -> (float, NoneType))."""
    if isinstance(annotation, str):
        annotation = eval(annotation, vars(typing), {"Any": Any})  # noqa: S307 - our own
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return tuple(t for a in typing.get_args(annotation) for t in _accepted(a))
    if origin is not None:
        return (origin,)
    if annotation is Any:
        return (object,)
    return (annotation,)


def _fits(value: Any, accepted: tuple[type, ...]) -> bool:
    if object in accepted:
        return True
    if isinstance(value, bool):
        return bool in accepted
    if isinstance(value, int) and float in accepted:
        return True
    return isinstance(value, accepted)


def check_types(config: Any) -> None:
    """Every field of a configuration dataclass has a value of its annotated type, or a
    ValueError naming the key, the expected type and the value given (issue 16:
    `"worker_interval": "fast"` used to start a server that never aggregated)."""
    hints = typing.get_type_hints(type(config))
    for f in fields(config):
        value = getattr(config, f.name)
        accepted = _accepted(hints.get(f.name, f.type))
        if not _fits(value, accepted):
            want = " or ".join(dict.fromkeys(_JSON_NAMES.get(t, t.__name__)
                                             for t in accepted))
            raise ValueError(f"{f.name} must be {want}, not {json.dumps(value)}")


def _descriptions() -> dict[str, str]:
    """Each key's comment in this module's example (the docstring above): written once."""
    import re

    out: dict[str, str] = {}
    last: list[str] = []
    for line in (__doc__ or "").splitlines():
        keys = re.findall(r'"(\w+)":', line.split("#", 1)[0])
        comment = line.split("#", 1)[1].strip() if "#" in line else ""
        if keys:
            last = keys
            for key in keys:
                out[key] = comment
        elif comment and last and not line.split("#", 1)[0].strip():
            for key in last:
                out[key] = f"{out[key]} {comment}".strip()
        else:
            last = []
    return out


def key_table() -> list[tuple[str, str, str, str]]:
    """(key, JSON type, default, description) of every configuration key, for the
    README."""
    hints = typing.get_type_hints(AggregatorConfig)
    notes = _descriptions()
    rows = []
    for f in fields(AggregatorConfig):
        accepted = _accepted(hints[f.name])
        kind = " or ".join(dict.fromkeys(_JSON_NAMES.get(t, t.__name__).removeprefix("a ")
                                         .removeprefix("an ") for t in accepted))
        default = "required" if f.default is MISSING else json.dumps(f.default)
        rows.append((f.name, kind, default, notes.get(f.name, "")))
    return rows


README_BEGIN = ("<!-- config-keys: generated by python -m ppm_reference.dap.server.config "
                "--readme -->")
README_END = "<!-- end of config-keys -->"


def readme_section() -> str:
    """The README's table of configuration keys, between its markers."""
    lines = [README_BEGIN, "", "| key | type | default | what |", "|---|---|---|---|"]
    lines += [f"| `{k}` | {t} | {d if d == 'required' else f'`{d}`'} | "
              f"{n.replace('|', '/')} |" for k, t, d, n in key_table()]
    return "\n".join([*lines, "", README_END])


def update_readme(path: str | Path) -> bool:
    """Rewrite the generated section of a README; True if it changed."""
    text = Path(path).read_text()
    start, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    new = text[:start] + readme_section() + text[end:]
    if new != text:
        Path(path).write_text(new)
    return new != text


class ConfigError(ValueError):
    """A configuration file that cannot be used, with a one-line reason."""


def load_config_file(path: str | Path, role: str | None = None) -> AggregatorConfig:
    """The AggregatorConfig of a JSON file; any problem is a :class:`ConfigError` naming
    the file (missing, not JSON, bad values, or another role than ``role``)."""
    import json

    try:
        config = AggregatorConfig.load(path)
    except FileNotFoundError:
        raise ConfigError(f"configuration file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"configuration file {path} is not JSON: {exc}") from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"bad configuration file {path}: {exc}") from None
    if role is not None and config.role != role:
        raise ConfigError(f"{path} configures a {config.role}, not a {role}")
    return config


def with_overrides(config: AggregatorConfig, overrides: dict[str, Any]) -> AggregatorConfig:
    """`config` with some keys replaced (command-line options over the file), checked
    like the file's; a bad value is a ConfigError."""
    if not overrides:
        return config
    try:
        return replace(config, **overrides)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from None


if __name__ == "__main__":  # python -m ppm_reference.dap.server.config --readme [README.md]
    import sys

    if sys.argv[1:2] == ["--readme"]:
        target = sys.argv[2] if len(sys.argv) > 2 else "README.md"
        print("updated" if update_readme(target) else "up to date", target)
    else:
        print(readme_section())
