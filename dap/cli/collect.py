"""`ppm collect --task collector-task.json (--interval START,DURATION | --current-batch)`:
collect an aggregate as the DAP Collector."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from dap.cli.args import add_json
from dap.cli.errors import run_command, usage_error
from dap.cli.output import emit_json, format_duration, format_result, interval_json, result_json
from dap.cli.taskfile import load_view


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


def _cmd_collect(args: argparse.Namespace) -> int:
    from dap.collector import Collector
    from dap.common import BatchMode
    from dap.dp import decode_spec, describe_spec
    from dap.provision import b64, collector_keypair_from_view

    view, task = load_view(args.task, collector=True)
    flow = task.profile.flow
    from vdaf import registry

    name = getattr(task.vdaf(), "NAME", "")
    if registry.takes_agg_param(name):
        raise usage_error(f"a {name} task is collected with an aggregation parameter: use "
                          "ppm analytics heavy-hitters")
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
    spec = decode_spec(task.dp_policy) if task.dp_policy is not None else None
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
        f"{describe_spec(spec)})\n         "
    print(f"{label} {format_result(collection.debiased_result)}")
    return 0


def register(subparsers: Any) -> None:
    """Add `collect` to the `ppm` parser."""
    p = subparsers.add_parser("collect", help="collect an aggregate as the DAP Collector")
    p.add_argument("--task", required=True, metavar="FILE", help="collector-task.json")
    q = p.add_mutually_exclusive_group(required=True)
    q.add_argument("--interval", metavar="START,DURATION",
                   help="time-interval batch, in seconds, aligned to time_precision")
    q.add_argument("--current-batch", action="store_true",
                   help="leader-selected: the next batch the Leader has ready")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS")
    add_json(p)
    p.set_defaults(func=run_command(_cmd_collect))
