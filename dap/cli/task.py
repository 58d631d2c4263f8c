"""`ppm task create`: provision a task into a Leader and a Helper.

    ppm task create --vdaf Prio3Histogram --length 4 \\
        (--leader-config leader.json | --leader-admin URL) \\
        (--helper-config helper.json | --helper-admin URL) [--admin-token T] \\
        [--dp-policy NAME --epsilon E ...] --out-dir DIR

Each Aggregator gets the task through its admin API (`POST /internal/tasks`, see
`dap.server.admin`) or straight into its SQLite datastore; `dap.provision` does both,
the Helper first. The Client's task and the Collector's credentials are printed or
written to client-task.json and collector-task.json (mode 0600).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dap.cli.args import (
    VDAF_NAMES,
    add_json,
    batch_mode_arg,
    batch_mode_of,
    build_vdaf,
    policy_name_arg,
    positive_int,
    vdaf_name_arg,
)
from dap.cli.errors import CliError, run_command, usage_error, usage_errors
from dap.cli.output import emit_json, write_json_file
from dap.cli.serve import load_config
from dap.dp import DEFAULT_DELTA, DEFAULT_FP
from dap.profiles import DEFAULT_PROFILE, SHIPPED
from vdaf import registry


def target(role: str, admin: str | None, config_path: str | None, token: str | None) -> Any:
    """The `dap.provision` Target of one Aggregator, from its pair of options."""
    from dap.admin_client import AdminClient
    from dap.provision import AdminTarget, DatastoreTarget

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
    return AdminTarget(role, client)


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


def _warn(message: str) -> None:
    print(f"ppm: warning: {message}", file=sys.stderr)


def _cmd_task_create(args: argparse.Namespace) -> int:
    from dap import dp
    from dap.profiles import get_profile
    from dap.provision import TaskRefused, b64, new_task, provision

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
                      profile=args.profile, bits=args.bits)
    if spec is not None:
        with usage_errors():
            dp.policy_from_spec(spec, vdaf)
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
        pt = new_task(vdaf, leader_url, helper_url, batch_mode=mode,
                      min_batch_size=args.min_batch_size, time_precision=args.time_precision,
                      task_interval=interval, dp_policy=spec,
                      max_batch_size=args.max_batch_size, task_info=args.task_info.encode(),
                      profile=get_profile(args.profile))
    except ValueError as exc:
        raise usage_error(f"invalid task: {exc}") from None

    try:
        provision(pt, helper, leader, warn=_warn)
    except TaskRefused as exc:
        raise usage_error(str(exc)) from None

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
    print(f"  DP policy   {dp.describe_spec(spec)}")
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
    add_json(p)
    p.set_defaults(func=run_command(_cmd_task_create))


__all__ = ["CliError", "register", "target", "task_interval_of"]
