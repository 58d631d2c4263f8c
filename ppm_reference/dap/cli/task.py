"""`ppm task create`: provision a task into a Leader and a Helper.

    ppm task create --vdaf Prio3Histogram --length 4 \\
        (--leader-config leader.json | --leader-admin URL) \\
        (--helper-config helper.json | --helper-admin URL) [--admin-token T] \\
        [--dp-policy NAME --epsilon E ...] --out-dir DIR

Each Aggregator gets the task through its admin API (`POST /internal/tasks`, see
`dap.server.admin`) or straight into its SQLite datastore; `dap.provision` does both,
the Helper first. The Client's task and the Collector's credentials are printed or
written to client-task.json and collector-task.json (mode 0600).

In-band provisioning (draft-ietf-ppm-dap-taskprov, dap-19 tasks) touches no Aggregator:

    ppm task taskprov-init --leader-url L --helper-url H --out-dir DIR
        # once per pair of Aggregators (the secrets are never printed):
        # DIR/leader-taskprov-peer.json and
        # DIR/helper-taskprov-peer.json (each an entry of that server configuration's
        # "taskprov_peers"; add --leader-config/--helper-config FILE to append it there)
        # and DIR/collector-credentials.json (secret, 0600)
    ppm task create --taskprov --collector-credentials DIR/collector-credentials.json \
        --vdaf Prio3Histogram --length 4 --out-dir TASKDIR
        # TASKDIR/client-task.json and collector-task.json; the task ID is derived from
        # the configuration, and the Client and Collector advertise it (DAP-Taskprov)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ppm_reference.dap.cli.args import (
    VDAF_NAMES,
    add_json,
    batch_mode_arg,
    batch_mode_of,
    build_vdaf,
    policy_name_arg,
    positive_int,
    vdaf_name_arg,
)
from ppm_reference.dap.cli.errors import CliError, run_command, usage_error, usage_errors
from ppm_reference.dap.cli.output import emit_json, write_json_file
from ppm_reference.dap.cli.serve import load_config
from ppm_reference.dap.dp import DEFAULT_DELTA, DEFAULT_FP
from ppm_reference.dap.profiles import DEFAULT_PROFILE, SHIPPED
from ppm_reference.vdaf import registry


def target(role: str, admin: str | None, config_path: str | None, token: str | None) -> Any:
    """The `dap.provision` Target of one Aggregator, from its pair of options."""
    from ppm_reference.dap.admin_client import AdminClient
    from ppm_reference.dap.provision import AdminTarget, DatastoreTarget

    if (admin is None) == (config_path is None):
        raise usage_error(f"give exactly one of --{role}-admin URL and --{role}-config FILE")
    if config_path is not None:
        return DatastoreTarget(role, load_config(config_path, role))
    assert admin is not None
    try:
        client = AdminClient(admin, token or "")
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    if not token:
        raise usage_error(f"--admin-token (or PPM_ADMIN_TOKEN) is needed with --{role}-admin")
    check_admin_role(client, role, f"--{role}-admin")
    return AdminTarget(role, client)


def check_admin_role(client: Any, role: str, option: str) -> None:
    """Refuse an admin URL whose Aggregator reports another role (`GET /internal/health`
    answers {"role": ...}): swapped --leader-admin / --helper-admin URLs."""
    health = client.request("GET", "internal/health")
    other = health.get("role") if isinstance(health, dict) else None
    if other is not None and other != role:
        swap = ("; --leader-admin and --helper-admin swapped?"
                if option.endswith(("leader-admin", "helper-admin")) else "")
        raise usage_error(f"{option} {client.base} is a {other}, not a {role} (its "
                          f"/internal/health says so){swap}")


def task_interval_of(start: int | None, end: int | None, time_precision: int) -> Any:
    from ppm_reference.dap.common import Duration, Interval, Time

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


def _warn(message: str) -> None:
    print(f"ppm: warning: {message}", file=sys.stderr)


def _refuse_overwrite(args: argparse.Namespace) -> None:
    """An existing collector-task.json holds the only copy of an earlier task's private
    key: never overwrite it silently (checked before anything is provisioned)."""
    if args.out_dir is None or args.force:
        return
    for name in ("collector-task.json", "client-task.json"):
        path = Path(args.out_dir) / name
        if path.exists():
            raise usage_error(f"{path} exists (an earlier task's files: its collector key "
                              "would be lost); choose another --out-dir, or --force to "
                              "overwrite it")


def _cmd_task_create(args: argparse.Namespace) -> int:
    from ppm_reference.dap import dp
    from ppm_reference.dap.profiles import get_profile
    from ppm_reference.dap.provision import TaskRefused, b64, new_task, provision

    _refuse_overwrite(args)
    if args.taskprov:
        return _cmd_task_create_taskprov(args)
    if args.collector_credentials is not None:
        raise usage_error("--collector-credentials goes with --taskprov")
    if args.task_info is None:
        args.task_info = "ppm-reference task"
    token = args.admin_token or os.environ.get("PPM_ADMIN_TOKEN")
    helper = target("helper", args.helper_admin, args.helper_config, token)
    leader = target("leader", args.leader_admin, args.leader_config, token)
    with usage_errors():
        spec = dp.make_spec(args.dp_policy, epsilon=args.epsilon, delta=args.delta,
                            eps0=args.eps0, fp=args.fp)
        needed = dp.required_max_weight(spec, args.vdaf, args.length)
    max_weight = args.max_weight
    if needed is not None:
        assert spec is not None
        if max_weight is not None and max_weight != needed:
            raise usage_error(f"{spec['policy']} with eps0={spec['eps0']:g}, fp={spec['fp']:g} "
                              f"and length {args.length} needs --max-weight {needed} (leave "
                              "it out to have it computed)")
        max_weight = needed
    vdaf = build_vdaf(args.vdaf, length=args.length, max_measurement=args.max_measurement,
                      max_weight=max_weight, chunk_length=args.chunk_length,
                      profile=args.profile, bits=args.bits, max_value=args.max_value)
    if spec is not None:
        with usage_errors():
            dp.policy_from_spec(spec, vdaf)
    mode = batch_mode_of(args.batch_mode)
    if args.batch_mode == "leader-selected" and registry.takes_agg_param(args.vdaf):
        raise usage_error(f"{args.vdaf} tasks are time-interval: a batch is collected once "
                          "per aggregation parameter, and a leader-selected query cannot "
                          "name a batch again")
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
        pt = new_task(vdaf, leader_url, helper_url, batch_mode=mode,
                      min_batch_size=args.min_batch_size, time_precision=args.time_precision,
                      task_interval=interval, dp_policy=spec,
                      max_batch_size=args.max_batch_size, task_info=args.task_info.encode(),
                      profile=get_profile(args.profile))
    except ValueError as exc:
        raise usage_error(f"invalid task: {exc}") from None
    if args.expected_report_rate is not None:
        if not args.expected_report_rate > 0:
            raise usage_error("--expected-report-rate must be positive")
        # The rate guard (paper 000 Section 4.8): an option of each Aggregator.
        pt = dataclasses.replace(pt, options={**pt.options,
                                              "expected_report_rate": args.expected_report_rate})

    try:
        provision(pt, helper, leader, warn=_warn)
    except TaskRefused as exc:
        raise usage_error(str(exc)) from None

    files = _write_task_files(args, pt)
    task_id = b64(bytes(pt.task.task_id))
    if args.json:
        emit_json(_task_json(args, pt, vdaf, spec, leader_url, helper_url, files))
        return 0
    print(f"task {task_id}")
    print(f"  VDAF        {registry.describe(vdaf)}")
    print(f"  DP policy   {dp.describe_spec(spec)}")
    print(f"  batch mode  {args.batch_mode}, min_batch_size {args.min_batch_size}, "
          f"time_precision {args.time_precision} s")
    print(f"  leader      {leader_url}  (provisioned via {leader.where})")
    print(f"  helper      {helper_url}  (provisioned via {helper.where})")
    _print_task_files(pt, files)
    return 0


def _vdaf_and_policy(args: argparse.Namespace) -> tuple[Any, Any]:
    from ppm_reference.dap import dp

    with usage_errors():
        spec = dp.make_spec(args.dp_policy, epsilon=args.epsilon, delta=args.delta,
                            eps0=args.eps0, fp=args.fp)
        needed = dp.required_max_weight(spec, args.vdaf, args.length)
    max_weight = args.max_weight if needed is None else needed
    vdaf = build_vdaf(args.vdaf, length=args.length, max_measurement=args.max_measurement,
                      max_weight=max_weight, chunk_length=args.chunk_length,
                      profile=args.profile, bits=args.bits, max_value=args.max_value)
    if spec is not None:
        with usage_errors():
            dp.policy_from_spec(spec, vdaf)
    return vdaf, spec


def _read_json(path: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise usage_error(f"{what} not found: {path}") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise usage_error(f"{what} {path} is not a JSON file: {exc}") from None
    if not isinstance(data, dict):
        raise usage_error(f"{what} {path} is not a JSON object")
    return data


def _cmd_task_create_taskprov(args: argparse.Namespace) -> int:
    """`ppm task create --taskprov`: the Client's and Collector's task files of a task the
    Aggregators will provision in-band (draft-ietf-ppm-dap-taskprov); no Aggregator is
    contacted."""
    from ppm_reference.dap import dp
    from ppm_reference.dap.profiles import get_profile
    from ppm_reference.dap.provision import b64, collector_keypair_from_view, new_taskprov_task

    _refuse_overwrite(args)
    for option in ("leader_admin", "leader_config", "helper_admin", "helper_config",
                   "max_batch_size"):
        if getattr(args, option) is not None:
            raise usage_error(f"--{option.replace('_', '-')} does not go with --taskprov: "
                              "the Aggregators provision the task in-band")
    if args.collector_credentials is None:
        raise usage_error("--taskprov needs --collector-credentials FILE (from ppm task "
                          "taskprov-init)")
    profile = get_profile(args.profile)
    if profile.taskprov is None:
        raise usage_error(f"--taskprov needs a dap-19 task, not {profile.name} "
                          "(draft-ietf-ppm-dap-taskprov is written for dap-19)")
    creds = _read_json(args.collector_credentials, "collector credentials")
    try:
        keypair = collector_keypair_from_view(creds)
        token = creds["collector_auth_token"]
        leader_url = args.leader_url or creds["leader_url"]
        helper_url = args.helper_url or creds["helper_url"]
    except (KeyError, ValueError, TypeError) as exc:
        raise usage_error(f"collector credentials {args.collector_credentials} are "
                          f"invalid: {type(exc).__name__} {exc}") from None
    for option, url in (("--leader-url", leader_url), ("--helper-url", helper_url)):
        if urlsplit(url).scheme not in ("http", "https"):
            raise usage_error(f"{option} must be an http(s) URL, got {url!r}")
    vdaf, spec = _vdaf_and_policy(args)
    interval = task_interval_of(args.task_start, args.task_end, args.time_precision)
    try:
        pt = new_taskprov_task(
            vdaf, leader_url, helper_url, collector_keypair=keypair,
            collector_auth_token=token, batch_mode=batch_mode_of(args.batch_mode),
            min_batch_size=args.min_batch_size, time_precision=args.time_precision,
            task_interval=interval, dp_policy=spec,
            task_info=None if args.task_info is None else args.task_info.encode(),
            profile=profile)
    except ValueError as exc:
        raise usage_error(f"invalid task: {exc}") from None
    files = _write_task_files(args, pt)
    task_id = b64(bytes(pt.task.task_id))
    if args.json:
        emit_json(_task_json(args, pt, vdaf, spec, leader_url, helper_url, files,
                             taskprov=True))
        return 0
    print(f"task {task_id}  (taskprov: derived from its configuration; no Aggregator was "
          "contacted)")
    print(f"  VDAF        {registry.describe(vdaf)}")
    print(f"  DP policy   {dp.describe_spec(spec)}")
    print(f"  batch mode  {args.batch_mode}, min_batch_size {args.min_batch_size}, "
          f"time_precision {args.time_precision} s")
    print(f"  leader      {leader_url}")
    print(f"  helper      {helper_url}")
    print("The Client and the Collector advertise the task (DAP-Taskprov); the Leader opts "
          "in on the first upload, the Helper on the Leader's first request.")
    _print_task_files(pt, files)
    return 0


def _append_peer(config_path: str, role: str, entry: dict[str, Any]) -> None:
    """Add a taskprov peer entry to a server configuration file (checked as the server
    would)."""
    from ppm_reference.dap.server.config import AggregatorConfig

    data = _read_json(config_path, f"{role} configuration")
    if data.get("role") != role:
        raise usage_error(f"{config_path} is not a {role}'s configuration (role "
                          f"{data.get('role')!r})")
    peers = data.get("taskprov_peers") or []
    peers = [p for p in peers if not (isinstance(p, dict)
                                      and p.get("peer_endpoint") == entry["peer_endpoint"])]
    data["taskprov_peers"] = [*peers, entry]
    try:
        AggregatorConfig.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise usage_error(f"{config_path}: {exc}") from None
    path = Path(config_path)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.chmod(path, 0o600)  # it now holds verify_key_init and bearer tokens


def _cmd_taskprov_init(args: argparse.Namespace) -> int:
    """`ppm task taskprov-init`: the assets a Leader, a Helper and a Collector share out of
    band for taskprov (draft-ietf-ppm-dap-taskprov Section 3)."""
    from ppm_reference.dap.profiles import get_profile
    from ppm_reference.dap.provision import TaskprovPeering

    for option, url in (("--leader-url", args.leader_url), ("--helper-url", args.helper_url)):
        if urlsplit(url).scheme not in ("http", "https"):
            raise usage_error(f"{option} must be an http(s) URL, got {url!r}")
    try:
        peering = TaskprovPeering.generate(args.leader_url, args.helper_url,
                                           get_profile(args.profile))
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    policy: dict[str, Any] = {}
    if args.min_batch_size is not None:
        policy["min_batch_size"] = args.min_batch_size
    if args.max_task_lifetime is not None:
        policy["max_task_lifetime"] = args.max_task_lifetime
    entries = {role: peering.peer_entry(role, **policy) for role in ("leader", "helper")}
    written: dict[str, str] = {}
    for role, config_path in (("leader", args.leader_config), ("helper", args.helper_config)):
        if config_path is not None:
            _append_peer(config_path, role, entries[role])
            written[f"{role}_config"] = config_path
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for role in ("leader", "helper"):
        peer_path = out / f"{role}-taskprov-peer.json"
        write_json_file(peer_path, entries[role], private=True)
        written[f"{role}_peer"] = str(peer_path)
    creds_path = out / "collector-credentials.json"
    write_json_file(creds_path, peering.collector_credentials(), private=True)
    written["collector_credentials"] = str(creds_path)
    if args.json:
        emit_json({"ok": True, "files": written})
        return 0
    for what, shown in written.items():
        print(f"{what.replace('_', ' '):22s} {shown}")
    print("Put each *-taskprov-peer.json in that server configuration's \"taskprov_peers\" "
          "list (done for the --leader-config / --helper-config given) and restart it; "
          "give collector-credentials.json to `ppm task create --taskprov`.")
    return 0


def register(subparsers: Any) -> None:
    """Add `task create` to the `ppm` parser."""
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
    g.add_argument("--length", type=int, help="SumVec, Histogram, MultihotCountVec, "
                   "L1BoundSum")
    g.add_argument("--max-measurement", type=int, help="Sum, SumVec")
    g.add_argument("--bits", type=positive_int, help="Poplar1 (the length of its strings); "
                   "Sum, SumVec of a dap-09 task (VDAF-08 takes a bit width)")
    g.add_argument("--max-weight", type=int,
                   help="MultihotCountVec (computed for MultiHotHistogramWithClient"
                   "Randomization)")
    g.add_argument("--max-value", type=int, help="L1BoundSum: the bound on a measurement's "
                   "L1 norm (dap-18, dap-19)")
    g.add_argument("--chunk-length", type=int, help="default: libprio-rs's "
                   "optimal_chunk_length of the encoded measurement length (as Divvi Up "
                   "and Firefox)")
    g = p.add_argument_group("task")
    g.add_argument("--profile", choices=SHIPPED, default=DEFAULT_PROFILE.name,
                   help="protocol profile: dap-19 (the newest draft, default), dap-18, or "
                   "dap-09 (VDAF-08, for Janus 0.7, Daphne, divviup-ts); leader-selected is "
                   "DAP-09's fixed_size")
    g.add_argument("--batch-mode", type=batch_mode_arg, default="time-interval",
                   help="time-interval (default) or leader-selected")
    g.add_argument("--min-batch-size", type=positive_int, default=10,
                   help="default 10; an Aggregator refuses less than its "
                   "min_batch_size_floor (default 2)")
    g.add_argument("--max-batch-size", type=positive_int,
                   help="leader-selected: how many reports the Leader puts in a batch "
                   "(default: min-batch-size)")
    g.add_argument("--time-precision", type=positive_int, default=3600, metavar="SECONDS")
    g.add_argument("--expected-report-rate", type=float, metavar="PER_SECOND",
                   help="rate guard: both Aggregators hold a batch whose reports arrived "
                   "faster than twice this (paper 000 Section 4.8)")
    g.add_argument("--task-start", type=int, metavar="SECONDS",
                   help="task_interval start (POSIX seconds, aligned)")
    g.add_argument("--task-end", type=int, metavar="SECONDS", help="task_interval end")
    g.add_argument("--task-info", help="default 'ppm-reference task' (with --taskprov: "
                   "followed by 16 random bytes, hex, against task enumeration)")
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
    g = p.add_argument_group("in-band provisioning (draft-ietf-ppm-dap-taskprov, dap-19)")
    g.add_argument("--taskprov", action="store_true",
                   help="write the Client's and Collector's task files only: the "
                   "Aggregators provision the task when it is advertised")
    g.add_argument("--collector-credentials", metavar="FILE",
                   help="collector-credentials.json of ppm task taskprov-init")
    p.add_argument("--out-dir", metavar="DIR",
                   help="write client-task.json and collector-task.json (mode 0600) here; "
                   "existing task files are not overwritten without --force")
    p.add_argument("--force", action="store_true",
                   help="overwrite the task files in --out-dir (the earlier task's "
                   "collector key is lost)")
    add_json(p)
    p.set_defaults(func=run_command(_cmd_task_create))

    for name, help_text in (("list", "list an Aggregator's tasks (admin API)"),
                            ("show", "a task's counters: reports received, pending, "
                             "aggregated, failed by reason; jobs; batches ready"),
                            ("delete", "delete a task from an Aggregator (its reports too)")):
        p = task_sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--admin", required=True, metavar="URL",
                       help="the Aggregator's base URL (admin API under /internal/)")
        p.add_argument("--admin-token", help="default: $PPM_ADMIN_TOKEN")
        if name != "list":
            p.add_argument("task_id", metavar="TASK_ID", help="base64url task ID, or a "
                           "task file (client-task.json, collector-task.json)")
        add_json(p)
        p.set_defaults(func=run_command(_TASK_ADMIN[name]))

    p = task_sub.add_parser(
        "taskprov-init", help="make the assets a Leader, Helper and Collector share for "
        "taskprov",
        description="Generate the out-of-band assets of in-band task provisioning "
        "(draft-ietf-ppm-dap-taskprov): verify_key_init, the Leader's and the Collector's "
        "bearer tokens and the Collector's HPKE key pair. Writes each Aggregator's "
        "taskprov_peers entry and the Collector's credentials.")
    p.add_argument("--leader-url", required=True, help="the Leader's endpoint, as tasks "
                   "will name it")
    p.add_argument("--helper-url", required=True, help="the Helper's endpoint")
    p.add_argument("--profile", choices=[n for n in SHIPPED if n == "dap-19"],
                   default="dap-19", help="the DAP draft of the tasks (dap-19)")
    p.add_argument("--min-batch-size", type=positive_int, help="both Aggregators opt out "
                   "of tasks with a smaller min_batch_size")
    p.add_argument("--max-task-lifetime", type=positive_int, metavar="SECONDS",
                   help="both Aggregators opt out of tasks whose task_interval is longer "
                   "(or absent)")
    p.add_argument("--leader-config", metavar="FILE",
                   help="append the Leader's entry to this server configuration")
    p.add_argument("--helper-config", metavar="FILE",
                   help="append the Helper's entry to this server configuration")
    p.add_argument("--out-dir", metavar="DIR", required=True,
                   help="write leader-taskprov-peer.json, "
                   "helper-taskprov-peer.json and collector-credentials.json (0600) here")
    add_json(p)
    p.set_defaults(func=run_command(_cmd_taskprov_init))


__all__ = ["CliError", "register", "target", "task_interval_of"]


def _admin_client(args: argparse.Namespace) -> Any:
    from ppm_reference.dap.admin_client import AdminClient

    token = args.admin_token or os.environ.get("PPM_ADMIN_TOKEN")
    if not token:
        raise usage_error("--admin-token (or PPM_ADMIN_TOKEN) is needed")
    try:
        return AdminClient(args.admin, token)
    except ValueError as exc:
        raise usage_error(f"--admin: {exc}") from None


def _task_id_arg(text: str) -> str:
    """A base64url task ID, or the task_id of a task file."""
    import base64
    import binascii

    if Path(text).is_file():
        return str(_read_json(text, "task file").get("task_id", ""))
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, binascii.Error):
        raw = b""
    if len(raw) != 32:
        raise usage_error(f"not a task ID (32 bytes, base64url) nor a task file: {text!r}")
    return text


def _cmd_task_list(args: argparse.Namespace) -> int:
    tasks = _admin_client(args).request("GET", "internal/tasks") or []
    if args.json:
        emit_json({"ok": True, "tasks": tasks})
        return 0
    for t in tasks:
        print(f"{t['task_id']}  {t['role']:6s}  {t['profile']}")
    print(f"{len(tasks)} task(s)")
    return 0


def _cmd_task_show(args: argparse.Namespace) -> int:
    task_id = _task_id_arg(args.task_id)
    status = _admin_client(args).request("GET", f"internal/tasks/{task_id}")
    if args.json:
        emit_json({"ok": True, **status})
        return 0
    print(f"task {status['task_id']}  ({status['role']}, {status['profile']}"
          + (f", {status['batch_mode']}, min_batch_size {status['min_batch_size']}"
             if "min_batch_size" in status else "") + ")")
    c = status.get("counters")
    if c is None:
        print("  no counters: this Aggregator's datastore does not keep them")
        return 0
    r, b = c["reports"], c["batches"]
    failed = ", ".join(f"{n} {k}" for k, n in sorted(r["failed_by_reason"].items()))
    print(f"  reports     {r['received']} received, {r['pending']} pending, "
          f"{r['aggregated']} aggregated, {r['failed']} failed" + (f" ({failed})"
                                                                  if failed else ""))
    refused = r.get("rejected_at_upload") or {}
    if refused:
        print("  refused     " + ", ".join(f"{n} {k}" for k, n in refused.items())
              + " (at upload, since the Leader started)")
    print(f"  batches     {b['aggregated_uncollected']} aggregated reports not collected"
          + (f", {b['ready']} bucket(s) ready (>= {b['min_batch_size']})"
             if "ready" in b else "") + f", {b['collected_reports']} collected")
    for what, key in (("agg. jobs", "aggregation_jobs"), ("coll. jobs", "collection_jobs")):
        if c[key]:
            print(f"  {what:11s} " + ", ".join(f"{n} {s}" for s, n in sorted(c[key].items())))
    if c.get("aggregation_retrying"):
        print(f"  retrying    {c['aggregation_retrying']}")
    return 0


def _cmd_task_delete(args: argparse.Namespace) -> int:
    task_id = _task_id_arg(args.task_id)
    _admin_client(args).delete_task(task_id)
    if args.json:
        emit_json({"ok": True, "task_id": task_id, "deleted": True})
    else:
        print(f"deleted task {task_id} from {args.admin}")
    return 0


_TASK_ADMIN = {"list": _cmd_task_list, "show": _cmd_task_show, "delete": _cmd_task_delete}


def _write_task_files(args: argparse.Namespace, pt: Any) -> dict[str, str]:
    """With `--out-dir`: the Client's task file and the Collector's (0600); their paths."""
    if args.out_dir is None:
        return {}
    out = Path(args.out_dir)
    client_path, collector_path = out / "client-task.json", out / "collector-task.json"
    out.mkdir(parents=True, exist_ok=True)
    write_json_file(client_path, pt.client_view(), private=False)
    write_json_file(collector_path, pt.collector_view(), private=True)
    return {"client_task": str(client_path), "collector_task": str(collector_path)}


def _task_json(args: argparse.Namespace, pt: Any, vdaf: Any, spec: Any, leader_url: str,
               helper_url: str, files: dict[str, str], **extra: Any) -> dict[str, Any]:
    """The `--json` answer of a created task (the task files inline without --out-dir)."""
    from ppm_reference.dap.provision import b64

    obj: dict[str, Any] = {
        "ok": True, "task_id": b64(bytes(pt.task.task_id)), **extra,
        "vdaf": registry.describe(vdaf), "dp_policy": spec, "batch_mode": args.batch_mode,
        "leader_url": leader_url, "helper_url": helper_url, "files": files}
    if not files:
        obj["client_task"] = pt.client_view()
        obj["collector_task"] = pt.collector_view()
    return obj


def _print_task_files(pt: Any, files: dict[str, str]) -> None:
    if files:
        print(f"client task (give to Clients):      {files['client_task']}")
        print(f"collector credentials (secret, 0600): {files['collector_task']}")
    else:
        print("client task (give to Clients):")
        print(json.dumps(pt.client_view(), indent=2, sort_keys=True))
        print("collector credentials (secret; save as collector-task.json):")
        print(json.dumps(pt.collector_view(), indent=2, sort_keys=True))
