"""Operating DAP from the command line: run the Aggregators, provision tasks, upload and
collect, and the one-command demo.

    ppm leader --config leader.json          serve the Leader (aiohttp, Ctrl-C to stop)
    ppm helper --config helper.json          serve the Helper
    ppm task create --vdaf Prio3Histogram --length 4 \\
        (--leader-config leader.json | --leader-admin URL) \\
        (--helper-config helper.json | --helper-admin URL) [--admin-token T] \\
        [--dp-policy NAME --epsilon E ...] --out-dir DIR
                                             provision a task; write client-task.json
                                             and collector-task.json (mode 0600)
    ppm upload --task client-task.json 0 3 1 ...
    ppm collect --task collector-task.json (--interval START,DURATION | --current-batch)
    ppm demo [--vdaf Histogram] [--policy ...] [--reports N]

Every command takes `--json` and then prints exactly one JSON object on stdout. Errors
are one line on stderr (`ppm: error: ...`) and a non-zero exit code: 2 for bad input,
1 for a failure while running (set PPM_DEBUG=1 for the traceback instead).

`task create` writes a task to each Aggregator either through its admin API
(`POST /internal/tasks`, see `dap.server.admin`) or straight into its SQLite datastore
(the Aggregator may be running: it reads tasks from the datastore on first use). The
Helper is provisioned first, so that the Leader never runs a task its Helper lacks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from vdaf import registry

# The VDAFs of `--vdaf` (VDAF-18's; a dap-09 task takes those of them VDAF-08 has).
VDAF_NAMES = registry.names()
BATCH_MODES = ("time-interval", "leader-selected")
DEFAULT_DELTA = 1e-9
DEFAULT_FP = 1e-9


class CliError(Exception):
    """A failure to report to the user in one line; `code` is the exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def usage_error(message: str) -> CliError:
    return CliError(message, 2)


# ---------------------------------------------------------------------------------------
# Names, VDAFs and DP policies from options
# ---------------------------------------------------------------------------------------


def vdaf_name_arg(text: str) -> str:
    """argparse type: a VDAF name, with or without the `Prio3` prefix, any case."""
    key = text.lower().removeprefix("prio3")
    for name in VDAF_NAMES:
        if name.lower().removeprefix("prio3") == key:
            return name
    raise argparse.ArgumentTypeError(
        f"unknown VDAF {text!r}; choose from {', '.join(VDAF_NAMES)}")


def policy_name_arg(text: str) -> str:
    """argparse type: a DP policy name (any case) or `none`."""
    from dap.dp import POLICIES

    if text.lower() == "none":
        return "none"
    for name in POLICIES:
        if name.lower() == text.lower():
            return name
    raise argparse.ArgumentTypeError(
        f"unknown DP policy {text!r}; choose from none, {', '.join(POLICIES)}")


def batch_mode_arg(text: str) -> str:
    key = text.lower().replace("_", "-")
    if key not in BATCH_MODES:
        raise argparse.ArgumentTypeError(
            f"unknown batch mode {text!r}; choose from {', '.join(BATCH_MODES)}")
    return key


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def batch_mode_of(name: str) -> Any:
    from dap.common import BatchMode

    return BatchMode.TIME_INTERVAL if name == "time-interval" else BatchMode.LEADER_SELECTED


# A registry parameter -> its `ppm task create` option, for the registry's messages.
VDAF_OPTIONS = {"length": "--length", "max_measurement": "--max-measurement", "bits": "--bits",
                "max_weight": "--max-weight", "chunk_length": "--chunk-length"}
_PARAMETER_WORD = re.compile(r"\b(" + "|".join(VDAF_OPTIONS) + r")\b")


def vdaf_usage_error(exc: registry.RegistryError) -> CliError:
    """A registry error as a usage error, in the option names (`needs --length`)."""
    return usage_error(_PARAMETER_WORD.sub(lambda m: VDAF_OPTIONS[m.group(1)], str(exc)))


def build_vdaf(name: str, *, length: int | None = None, max_measurement: int | None = None,
               max_weight: int | None = None, chunk_length: int | None = None,
               profile: str = "dap-18", bits: int | None = None) -> Any:
    """The two-share VDAF `name` of the VDAF version the DAP profile runs (VDAF-08 for
    dap-09: Sum and SumVec take `bits`, or a `max_measurement` of 2^bits - 1), built by
    `vdaf.registry` (absent chunk_length: its default). Raises CliError (usage) naming
    the option when a parameter is missing, invalid or not one the VDAF takes."""
    from dap.profiles import ProfileError, get_profile

    params = {"length": length, "max_measurement": max_measurement, "bits": bits,
              "max_weight": max_weight, "chunk_length": chunk_length}
    try:
        version = registry.version_for_draft(get_profile(profile).vdaf_draft)
        return registry.build(name, params, version)
    except ProfileError as exc:
        raise usage_error(str(exc)) from None
    except registry.RegistryError as exc:
        raise vdaf_usage_error(exc) from None


def policy_spec(name: str | None, *, epsilon: float | None = None,
                delta: float | None = None, eps0: float | None = None,
                fp: float | None = None) -> dict[str, Any] | None:
    """The policy specification bound into the task (see `dap.dp`), with only the
    parameters the policy takes. None for no policy."""
    if name is None or name == "none":
        return None

    def need(value: float | None, option: str, positive: bool = True) -> float:
        if value is None:
            raise usage_error(f"DP policy {name} needs {option}")
        if not math.isfinite(value) or value <= 0 or (not positive and value >= 1):
            raise usage_error(f"{option} must be {'positive' if positive else 'in (0, 1)'}, "
                              f"got {value}")
        return float(value)

    spec: dict[str, Any] = {"policy": name}
    if name == "MultiHotHistogramWithClientRandomization":
        spec["eps0"] = need(eps0, "--eps0")
        spec["fp"] = need(DEFAULT_FP if fp is None else fp, "--fp", positive=False)
    else:
        spec["epsilon"] = need(epsilon, "--epsilon")
        if name.endswith("Randomization"):
            spec["delta"] = need(DEFAULT_DELTA if delta is None else delta, "--delta",
                                 positive=False)
    return spec


def multihot_max_weight(eps0: float, length: int, fp: float) -> int:
    """The max weight `MultiHotHistogramWithClientRandomization` needs the VDAF to
    accept (draft-wang-ppm-differential-privacy Section 6.1.1)."""
    from dp_policy.policies import MultiHotHistogramWithClientRandomization

    return int(MultiHotHistogramWithClientRandomization(eps0, length, fp).max_weight)


def check_policy(spec: dict[str, Any] | None, vdaf: Any) -> Any:
    """The policy object, or a usage error if it does not fit the VDAF."""
    if spec is None:
        return None
    from dap.dp import policy_from_spec

    try:
        return policy_from_spec(spec, vdaf)
    except ValueError as exc:
        raise usage_error(str(exc)) from None


def describe_policy(spec: dict[str, Any] | None) -> str:
    if spec is None:
        return "none"
    order = ("epsilon", "delta", "eps0", "fp")
    keys = [k for k in order if k in spec] + sorted(k for k in spec
                                                     if k not in order and k != "policy")
    params = ", ".join(f"{k}={spec[k]:g}" if isinstance(spec[k], float) else f"{k}={spec[k]}"
                       for k in keys)
    return f"{spec['policy']}({params})"


# ---------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------


def parse_measurement(text: str, vdaf: Any, policy: Any = None) -> Any:
    """A measurement of the task's VDAF from the command line: an integer (Count: 0/1,
    Sum, Histogram bucket index, and the bucket index for a client-randomized
    multi-hot histogram) or a JSON list (SumVec; MultihotCountVec as 0/1 or booleans).
    Raises CliError (usage) with what was expected."""
    name = registry.name_of(vdaf)
    params = registry.parameters_of(vdaf)
    rappor = policy is not None and hasattr(policy, "rappor")
    top = params.get("max_measurement")
    if top is None and "bits" in params:
        top = (1 << params["bits"]) - 1  # VDAF-08 Sum, SumVec
    expected = {
        "Prio3Count": "0 or 1",
        "Prio3Sum": f"an integer in [0, {top}]",
        "Prio3Histogram": f"a bucket index in [0, {params.get('length')})",
        "Prio3SumVec": f"a JSON list of {params.get('length')} integers in [0, {top}]",
        "Prio3MultihotCountVec": (
            f"a bucket index in [0, {params.get('length')})" if rappor else
            f"a JSON list of {params.get('length')} bits (0/1 or true/false) with at "
            f"most {params.get('max_weight')} ones"),
    }.get(name, "a measurement")
    bad = usage_error(f"bad measurement {text!r} for {registry.describe(vdaf)}: expected "
                      f"{expected}")
    try:
        value = json.loads(text)
    except ValueError:
        raise bad from None
    if isinstance(value, bool) and name == "Prio3Count":
        value = int(value)
    if rappor:
        if not (isinstance(value, int) and not isinstance(value, bool)
                and 0 <= value < params["length"]):
            raise bad
        return value
    if name == "Prio3MultihotCountVec":
        if not isinstance(value, list) or any(v not in (0, 1) for v in value):
            raise bad
        value = [bool(v) for v in value]
    elif name == "Prio3SumVec":
        if not isinstance(value, list) or any(isinstance(v, bool) for v in value):
            raise bad
    elif not isinstance(value, int) or isinstance(value, bool):
        raise bad
    try:
        vdaf.flp.encode(value)
    except (ValueError, TypeError):
        raise bad from None
    return value


# ---------------------------------------------------------------------------------------
# Output helpers
# ---------------------------------------------------------------------------------------


def emit_json(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, sort_keys=True, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        from dap.provision import b64

        return b64(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def json_number(value: float) -> float | None:
    """JSON has no infinity: inf (no protection) becomes null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_duration(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def interval_json(interval: Any, time_precision: int) -> dict[str, Any]:
    start = int(interval.start) * time_precision
    duration = int(interval.duration) * time_precision
    return {"start": start, "duration": duration, "start_utc": iso(start)}


def run_command(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command: a CliError or an expected failure becomes one line on stderr (and,
    with --json, `{"ok": false, "error": ...}` on stdout) and a non-zero exit code."""

    def wrapper(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except KeyboardInterrupt:
            print("ppm: interrupted", file=sys.stderr)
            return 130
        except Exception as exc:  # noqa: BLE001 - every failure gets a clear message
            if os.environ.get("PPM_DEBUG"):
                raise
            message, code = describe_error(exc)
            print(f"ppm: error: {message}", file=sys.stderr)
            if getattr(args, "json", False):
                emit_json({"ok": False, "error": message})
            return code

    return wrapper


def describe_error(exc: BaseException) -> tuple[str, int]:
    """A one-line message and exit code for a failure."""
    import aiohttp

    from dap.client import UploadError
    from dap.collector import CollectionError

    if isinstance(exc, CliError):
        return str(exc), exc.code
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect to {exc.host}:{exc.port} ({exc.os_error.strerror or exc})", 1
    if isinstance(exc, aiohttp.ClientError | asyncio.TimeoutError):
        return f"HTTP request failed: {type(exc).__name__} {exc}".strip(), 1
    if isinstance(exc, UploadError | CollectionError):
        return str(exc), 1
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""), 1
    return f"{type(exc).__name__}: {exc}", 1


# ---------------------------------------------------------------------------------------
# ppm leader / ppm helper / python -m dap.server
# ---------------------------------------------------------------------------------------


def load_config(path: str | Path, role: str | None = None) -> Any:
    """An AggregatorConfig from a JSON file, as a CliError on any problem."""
    from dap.server.config import AggregatorConfig

    try:
        config = AggregatorConfig.load(path)
    except FileNotFoundError:
        raise usage_error(f"configuration file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise usage_error(f"configuration file {path} is not JSON: {exc}") from None
    except (ValueError, TypeError) as exc:
        raise usage_error(f"bad configuration file {path}: {exc}") from None
    if role is not None and config.role != role:
        raise usage_error(f"{path} configures a {config.role}, not a {role}")
    return config


def serve(path: str | Path, role: str | None = None) -> int:
    """Run the aggregator a configuration file describes until interrupted."""
    from dap.server.app import run

    config = load_config(path, role)
    try:
        run(config)
    except OSError as exc:
        raise CliError(f"cannot serve on {config.listen_host}:{config.listen_port}: "
                       f"{exc.strerror or exc}") from None
    return 0


def _cmd_serve(role: str) -> Callable[[argparse.Namespace], int]:
    def cmd(args: argparse.Namespace) -> int:
        return serve(args.config, role)

    return run_command(cmd)


# ---------------------------------------------------------------------------------------
# ppm task create
# ---------------------------------------------------------------------------------------


def aggregator_url(config: Any) -> str:
    host = config.listen_host
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{config.listen_port}/"


def admin_base(url: str) -> str:
    """The aggregator's base URL from an admin URL given with or without `/internal/`."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise usage_error(f"not an http(s) URL: {url!r}")
    path = parts.path
    if "/internal" in path:
        path = path[: path.index("/internal")]
    return f"{parts.scheme}://{parts.netloc}{path.rstrip('/')}/"


def admin_request(base: str, method: str, path: str, token: str,
                  body: dict[str, Any] | None = None, timeout: float = 30.0) -> Any:
    """One admin API call; the JSON response, or CliError with the problem detail."""
    import urllib.error
    import urllib.request

    url = urljoin(base, path)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - http(s)
            content = resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:500].decode(errors="replace")
        try:
            doc = json.loads(detail)
            detail = doc.get("detail") or doc.get("title") or detail
        except ValueError:
            pass
        raise CliError(f"{method} {url}: HTTP {exc.code}: {detail}") from None
    except urllib.error.URLError as exc:
        raise CliError(f"cannot reach the admin API at {url}: {exc.reason}") from None
    except OSError as exc:
        raise CliError(f"cannot reach the admin API at {url}: {exc}") from None
    return json.loads(content) if content else None


class Target:
    """Where one Aggregator's copy of a task goes: its admin API or its datastore."""

    def __init__(self, role: str, admin: str | None, config_path: str | None,
                 token: str | None) -> None:
        self.role = role
        if (admin is None) == (config_path is None):
            raise usage_error(f"give exactly one of --{role}-admin URL and --{role}-config "
                              "FILE")
        self.config = load_config(config_path, role) if config_path else None
        self.admin = admin_base(admin) if admin else None
        if self.admin and not token:
            raise usage_error("--admin-token (or PPM_ADMIN_TOKEN) is needed with "
                              f"--{role}-admin")
        self.token = token or ""

    @property
    def url(self) -> str:
        """The aggregator's DAP endpoint as seen by Clients and its peer (default)."""
        if self.config is not None:
            return aggregator_url(self.config)
        assert self.admin is not None
        return self.admin

    @property
    def where(self) -> str:
        if self.config is not None:
            return f"datastore {self.config.datastore}"
        return f"admin API {self.admin}"

    def put(self, pt: Any) -> None:
        from dap.core.errors import DapProblem
        from dap.server.admin import task_record_from_json

        body = pt.admin_json(self.role)
        if self.admin is not None:
            admin_request(self.admin, "POST", "internal/tasks", self.token, body)
            return
        try:  # the checks the admin API makes, the DP policy included
            record = task_record_from_json(body)
        except DapProblem as exc:
            raise usage_error(f"the {self.role} would refuse the task: {exc.detail}") from None
        from dap.storage.sqlite import SqliteDatastore

        assert self.config is not None
        try:
            ds = SqliteDatastore(self.config.datastore, self.config.sqlite_synchronous)
        except Exception as exc:  # noqa: BLE001 - sqlite3 errors have no common base here
            raise CliError(f"cannot open the {self.role} datastore "
                           f"{self.config.datastore}: {exc}") from None
        try:
            with ds.transaction() as tx:
                existing = tx.get_task(record.task_id)
                if existing is not None and existing != record:
                    raise CliError(f"the {self.role} datastore has a different task with "
                                   "this ID")
                tx.put_task(record)
        finally:
            ds.close()

    def remove(self, pt: Any) -> None:
        """Best-effort undo of `put` (when the other Aggregator failed)."""
        from dap.provision import b64

        try:
            if self.admin is not None:
                admin_request(self.admin, "DELETE",
                              f"internal/tasks/{b64(bytes(pt.task.task_id))}", self.token)
            else:
                from dap.storage.sqlite import SqliteDatastore

                assert self.config is not None
                ds = SqliteDatastore(self.config.datastore, self.config.sqlite_synchronous)
                try:
                    with ds.transaction() as tx:
                        tx.delete_task(bytes(pt.task.task_id))
                finally:
                    ds.close()
        except Exception as exc:  # noqa: BLE001 - report, but the first error matters
            print(f"ppm: warning: could not remove the task from the {self.role}: {exc}",
                  file=sys.stderr)


def write_json_file(path: Path, obj: dict[str, Any], private: bool) -> None:
    """Write JSON; `private` files are created with mode 0600 (and re-moded if they
    existed)."""
    data = (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(path, flags, 0o600 if private else 0o644)
    try:
        if private:
            os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)


def task_interval_of(start: int | None, end: int | None, time_precision: int) -> Any:
    from dap.common import Duration, Interval, Time

    if start is None and end is None:
        return None
    if start is None or end is None:
        raise usage_error("give both --task-start and --task-end")
    for name, value in (("--task-start", start), ("--task-end", end)):
        if value < 0 or value % time_precision:
            raise usage_error(f"{name} {value} is not a multiple of --time-precision "
                              f"{time_precision}")
    if end <= start:
        raise usage_error("--task-end must be after --task-start")
    return Interval(Time(start // time_precision), Duration((end - start) // time_precision))


def _cmd_task_create(args: argparse.Namespace) -> int:
    from dap.provision import b64, new_task

    token = args.admin_token or os.environ.get("PPM_ADMIN_TOKEN")
    helper = Target("helper", args.helper_admin, args.helper_config, token)
    leader = Target("leader", args.leader_admin, args.leader_config, token)
    spec = policy_spec(args.dp_policy, epsilon=args.epsilon, delta=args.delta,
                       eps0=args.eps0, fp=args.fp)
    max_weight = args.max_weight
    if spec is not None and spec["policy"] == "MultiHotHistogramWithClientRandomization":
        if args.vdaf != "Prio3MultihotCountVec":
            raise usage_error(f"DP policy {spec['policy']} applies to Prio3MultihotCountVec, "
                              f"not {args.vdaf}")
        if args.length is None:
            raise usage_error("Prio3MultihotCountVec needs --length")
        needed = multihot_max_weight(spec["eps0"], args.length, spec["fp"])
        if max_weight is not None and max_weight != needed:
            raise usage_error(f"{spec['policy']} with eps0={spec['eps0']:g}, fp={spec['fp']:g} "
                              f"and length {args.length} needs --max-weight {needed} (leave "
                              "it out to have it computed)")
        max_weight = needed
    vdaf = build_vdaf(args.vdaf, length=args.length, max_measurement=args.max_measurement,
                      max_weight=max_weight, chunk_length=args.chunk_length,
                      profile=args.profile, bits=args.bits)
    check_policy(spec, vdaf)
    mode = batch_mode_of(args.batch_mode)
    if args.max_batch_size is not None:
        if args.batch_mode != "leader-selected":
            raise usage_error("--max-batch-size applies to --batch-mode leader-selected")
        if args.max_batch_size < args.min_batch_size:
            raise usage_error("--max-batch-size must be at least --min-batch-size")
    interval = task_interval_of(args.task_start, args.task_end, args.time_precision)
    leader_url = args.leader_url or leader.url
    helper_url = args.helper_url or helper.url
    for option, url in (("--leader-url", leader_url), ("--helper-url", helper_url)):
        if urlsplit(url).scheme not in ("http", "https"):
            raise usage_error(f"{option} must be an http(s) URL, got {url!r}")
    try:
        from dap.profiles import get_profile

        pt = new_task(vdaf, leader_url, helper_url, batch_mode=mode,
                      min_batch_size=args.min_batch_size, time_precision=args.time_precision,
                      task_interval=interval, dp_policy=spec,
                      max_batch_size=args.max_batch_size, task_info=args.task_info.encode(),
                      profile=get_profile(args.profile))
    except ValueError as exc:
        raise usage_error(f"invalid task: {exc}") from None

    helper.put(pt)
    try:
        leader.put(pt)
    except BaseException:
        helper.remove(pt)
        raise

    files: dict[str, str] = {}
    if args.out_dir is not None:
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        client_path, collector_path = out / "client-task.json", out / "collector-task.json"
        write_json_file(client_path, pt.client_view(), private=False)
        write_json_file(collector_path, pt.collector_view(), private=True)
        files = {"client_task": str(client_path), "collector_task": str(collector_path)}
    task_id = b64(bytes(pt.task.task_id))
    if args.json:
        obj: dict[str, Any] = {
            "ok": True, "task_id": task_id, "vdaf": registry.describe(vdaf),
            "dp_policy": spec, "batch_mode": args.batch_mode,
            "leader_url": leader_url, "helper_url": helper_url, "files": files}
        if not files:
            obj["client_task"] = pt.client_view()
            obj["collector_task"] = pt.collector_view()
        emit_json(obj)
        return 0
    print(f"task {task_id}")
    print(f"  VDAF        {registry.describe(vdaf)}")
    print(f"  DP policy   {describe_policy(spec)}")
    print(f"  batch mode  {args.batch_mode}, min_batch_size {args.min_batch_size}, "
          f"time_precision {args.time_precision} s")
    print(f"  leader      {leader_url}  (provisioned via {leader.where})")
    print(f"  helper      {helper_url}  (provisioned via {helper.where})")
    if files:
        print(f"client task (give to Clients):      {files['client_task']}")
        print(f"collector credentials (secret, 0600): {files['collector_task']}")
    else:
        print("client task (give to Clients):")
        print(json.dumps(pt.client_view(), indent=2, sort_keys=True))
        print("collector credentials (secret; save as collector-task.json):")
        print(json.dumps(pt.collector_view(), indent=2, sort_keys=True))
    return 0


# ---------------------------------------------------------------------------------------
# ppm upload / ppm collect
# ---------------------------------------------------------------------------------------


def load_view(path: str | Path, collector: bool) -> tuple[dict[str, Any], Any]:
    """A task view file and its Task."""
    from dap.provision import task_from_view

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


def task_policy(task: Any) -> Any:
    if task.dp_policy is None:
        return None
    from dap.dp import decode_spec, policy_from_spec

    return policy_from_spec(decode_spec(task.dp_policy), task.vdaf())


def read_measurement_texts(args: argparse.Namespace) -> list[str]:
    texts = list(args.measurements)
    if args.file is not None:
        try:
            content = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        except OSError as exc:
            raise usage_error(f"cannot read {args.file}: {exc.strerror or exc}") from None
        texts += [line.strip() for line in content.splitlines()
                  if line.strip() and not line.lstrip().startswith("#")]
    if not texts:
        raise usage_error("no measurements (give them as arguments or with --file)")
    return texts


def _cmd_upload(args: argparse.Namespace) -> int:
    from dap.client import Client
    from dap.common import BatchMode
    from dap.provision import b64

    _, task = load_view(args.task, collector=False)
    vdaf = task.vdaf()
    policy = task_policy(task)
    measurements = [parse_measurement(t, vdaf, policy) for t in read_measurement_texts(args)]
    now = time.time()

    async def go() -> Any:
        async with Client(task) as client:
            return await client.upload(measurements, batch_size=args.batch_size,
                                       time_seconds=now)

    result = asyncio.run(go())
    tp = task.time_precision
    start = int(now) // tp * tp
    rejected = {b64(rid): err.name.lower() for rid, err in result.rejected.items()}
    hint = (f"--interval {start},{tp}" if task.batch_mode == BatchMode.TIME_INTERVAL
            else "--current-batch")
    if args.json:
        emit_json({"ok": not rejected, "accepted": result.accepted, "rejected": rejected,
                   "task_id": b64(bytes(task.task_id)), "report_time": start,
                   "collect_hint": hint})
    else:
        print(f"uploaded {result.accepted} of {len(measurements)} reports to "
              f"{task.leader_aggregator_endpoint}")
        for rid, err in sorted(rejected.items()):
            print(f"  rejected report {rid}: {err}")
        print(f"reports are timestamped {iso(start)} ({start}); collect with: "
              f"ppm collect --task COLLECTOR_TASK {hint}")
    if rejected:
        print(f"ppm: error: the Leader rejected {len(rejected)} reports", file=sys.stderr)
        return 1
    return 0


def parse_interval(text: str, time_precision: int) -> Any:
    """`START,DURATION` in seconds -> an Interval in time_precision units."""
    from dap.common import Duration, Interval, Time

    try:
        start_s, duration_s = (int(v) for v in text.split(","))
    except ValueError:
        raise usage_error(f"--interval must be START,DURATION in seconds, got {text!r}") \
            from None
    if start_s < 0 or duration_s <= 0:
        raise usage_error("--interval needs START >= 0 and DURATION > 0")
    if start_s % time_precision or duration_s % time_precision:
        lo = start_s // time_precision * time_precision
        hi = -(-(start_s + duration_s) // time_precision) * time_precision
        raise usage_error(f"--interval {text} is not aligned to the task's time_precision "
                          f"({time_precision} s); for example --interval {lo},{hi - lo}")
    return Interval(Time(start_s // time_precision), Duration(duration_s // time_precision))


def result_json(value: Any) -> Any:
    if isinstance(value, float):
        return json_number(value)
    if isinstance(value, list):
        return [result_json(v) for v in value]
    return value


def format_result(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(format_result(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _cmd_collect(args: argparse.Namespace) -> int:
    from dap.collector import Collector
    from dap.common import BatchMode
    from dap.provision import b64, collector_keypair_from_view

    view, task = load_view(args.task, collector=True)
    flow = task.profile.flow
    if args.current_batch:
        if task.batch_mode != BatchMode.LEADER_SELECTED:
            raise usage_error("--current-batch is for leader-selected tasks; this task is "
                              "time-interval: use --interval START,DURATION")
        query: Any = flow.query_current_batch(task)
    else:
        if task.batch_mode != BatchMode.TIME_INTERVAL:
            raise usage_error("this task is leader-selected: use --current-batch")
        query = flow.query_interval(task, parse_interval(args.interval, task.time_precision))
    try:
        keypair = collector_keypair_from_view(view)
    except Exception as exc:  # noqa: BLE001
        raise usage_error(f"bad collector credentials in {args.task}: {exc}") from None

    async def go() -> Any:
        async with Collector(task, keypair, view["collector_auth_token"]) as collector:
            return await collector.collect(query, timeout=args.timeout)

    collection = asyncio.run(go())
    spec = None
    if task.dp_policy is not None:
        from dap.dp import decode_spec

        spec = decode_spec(task.dp_policy)
    interval = interval_json(collection.interval, flow.interval_unit(task))
    if args.json:
        emit_json({"ok": True, "task_id": b64(bytes(task.task_id)),
                   "report_count": collection.report_count, "interval": interval,
                   "result": result_json(collection.debiased_result),
                   "aggregate_result": result_json(collection.aggregate_result),
                   "dp_policy": spec})
        return 0
    print(f"reports:  {collection.report_count}")
    print(f"interval: {interval['start_utc']} + {format_duration(interval['duration'])} "
          f"({interval['start']},{interval['duration']})")
    label = "result:  " if spec is None else "result:   (debiased, DP policy " \
        f"{describe_policy(spec)})\n         "
    print(f"{label} {format_result(collection.debiased_result)}")
    return 0


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")


def register(subparsers: Any) -> None:
    """Add leader, helper, task, upload, collect and demo to the `ppm` parser."""
    for role in ("leader", "helper"):
        p = subparsers.add_parser(role, help=f"run the DAP {role.capitalize()} (aiohttp)",
                                  description=f"Serve the DAP-18 {role.capitalize()} "
                                  "described by an AggregatorConfig JSON file.")
        p.add_argument("--config", required=True, metavar="FILE",
                       help="aggregator configuration (JSON, see dap/server/config.py)")
        p.set_defaults(func=_cmd_serve(role))

    task = subparsers.add_parser("task", help="provision DAP tasks")
    task_sub = task.add_subparsers(dest="task_command", metavar="COMMAND")
    task.set_defaults(func=lambda _args: (task.print_help(), 2)[1])
    p = task_sub.add_parser(
        "create", help="provision a task into a Leader and a Helper",
        description="Provision a new task into a Leader and a Helper (admin API or SQLite "
        "datastore) and print or write the Client's task and the Collector's credentials.")
    g = p.add_argument_group("VDAF")
    g.add_argument("--vdaf", required=True, type=vdaf_name_arg,
                   help=f"one of {', '.join(VDAF_NAMES)}")
    g.add_argument("--length", type=int, help="SumVec, Histogram, MultihotCountVec")
    g.add_argument("--max-measurement", type=int, help="Sum, SumVec")
    g.add_argument("--bits", type=positive_int, help="Sum, SumVec of a dap-09 task (VDAF-08 "
                   "takes a bit width)")
    g.add_argument("--max-weight", type=int,
                   help="MultihotCountVec (computed for MultiHotHistogramWithClient"
                   "Randomization)")
    g.add_argument("--chunk-length", type=int, help="default: about sqrt of the encoded "
                   "measurement length")
    g = p.add_argument_group("task")
    g.add_argument("--profile", choices=("dap-18", "dap-09"), default="dap-18",
                   help="protocol profile: dap-18 (VDAF 18) or dap-09 (VDAF-08, for Janus "
                   "0.7, Daphne, divviup-ts); leader-selected is DAP-09's fixed_size")
    g.add_argument("--batch-mode", type=batch_mode_arg, default="time-interval",
                   help="time-interval (default) or leader-selected")
    g.add_argument("--min-batch-size", type=positive_int, default=10)
    g.add_argument("--max-batch-size", type=positive_int,
                   help="leader-selected: how many reports the Leader puts in a batch "
                   "(default: min-batch-size)")
    g.add_argument("--time-precision", type=positive_int, default=3600, metavar="SECONDS")
    g.add_argument("--task-start", type=int, metavar="SECONDS",
                   help="task_interval start (POSIX seconds, aligned)")
    g.add_argument("--task-end", type=int, metavar="SECONDS", help="task_interval end")
    g.add_argument("--task-info", default="ppm-reference task")
    g.add_argument("--leader-url", help="the Leader's endpoint in the task (default: from "
                   "its config or admin URL)")
    g.add_argument("--helper-url", help="the Helper's endpoint in the task")
    g = p.add_argument_group("DP policy (task extension 0xFF00)")
    g.add_argument("--dp-policy", type=policy_name_arg, default="none", metavar="NAME",
                   help="none (default) or a policy of dap/dp.py")
    g.add_argument("--epsilon", type=float)
    g.add_argument("--delta", type=float, help=f"default {DEFAULT_DELTA:g}")
    g.add_argument("--eps0", type=float, help="local epsilon (client randomization)")
    g.add_argument("--fp", type=float, help=f"false-positive bound, default {DEFAULT_FP:g}")
    g = p.add_argument_group("aggregators (one of each pair)")
    g.add_argument("--leader-admin", metavar="URL", help="the Leader's base URL (admin API "
                   "under /internal/)")
    g.add_argument("--leader-config", metavar="FILE", help="write into the Leader's datastore")
    g.add_argument("--helper-admin", metavar="URL")
    g.add_argument("--helper-config", metavar="FILE")
    g.add_argument("--admin-token", help="bearer token of the admin APIs (default: "
                   "$PPM_ADMIN_TOKEN)")
    p.add_argument("--out-dir", metavar="DIR",
                   help="write client-task.json and collector-task.json (mode 0600) here")
    _add_json(p)
    p.set_defaults(func=run_command(_cmd_task_create))

    p = subparsers.add_parser("upload", help="upload measurements as a DAP Client")
    p.add_argument("--task", required=True, metavar="FILE", help="client-task.json")
    p.add_argument("measurements", nargs="*", metavar="MEASUREMENT",
                   help="an integer, or a JSON list for SumVec / MultihotCountVec")
    p.add_argument("--file", metavar="PATH", help="more measurements, one per line (- for "
                   "stdin)")
    p.add_argument("--batch-size", type=positive_int, default=500,
                   help="reports per upload request")
    _add_json(p)
    p.set_defaults(func=run_command(_cmd_upload))

    p = subparsers.add_parser("collect", help="collect an aggregate as the DAP Collector")
    p.add_argument("--task", required=True, metavar="FILE", help="collector-task.json")
    q = p.add_mutually_exclusive_group(required=True)
    q.add_argument("--interval", metavar="START,DURATION",
                   help="time-interval batch, in seconds, aligned to time_precision")
    q.add_argument("--current-batch", action="store_true",
                   help="leader-selected: the next batch the Leader has ready")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS")
    _add_json(p)
    p.set_defaults(func=run_command(_cmd_collect))

    from dap import demo

    demo.register(subparsers)


__all__ = ["register", "serve", "build_vdaf", "vdaf_usage_error", "policy_spec",
           "parse_measurement", "CliError"]
