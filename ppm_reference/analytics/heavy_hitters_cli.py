"""`ppm analytics heavy-hitters`: the strings held by at least T Clients of a Poplar1
task, found by collecting one time-interval batch once per level of the prefix tree
(`analytics.heavy_hitters`).

    ppm analytics heavy-hitters --task collector-task.json --interval START,DURATION \\
        --threshold T [--max-candidates N] [--timeout SECONDS] [--json]

Each level is one collection job (one line of progress per level); the result is the
table of heavy hitters with their counts (bits, and hex and text for whole bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from ppm_reference.analytics.heavy_hitters import (
    HeavyHitters,
    HeavyHittersError,
    Level,
    bit_string,
    collect_heavy_hitters,
    describe,
)
from ppm_reference.dap.cli.args import add_json, positive_int
from ppm_reference.dap.cli.collect import parse_interval
from ppm_reference.dap.cli.errors import run_command, usage_error
from ppm_reference.dap.cli.output import emit_json
from ppm_reference.dap.cli.taskfile import load_view


def _cmd(args: argparse.Namespace) -> int:
    from ppm_reference.dap.collector import Collector
    from ppm_reference.dap.common import BatchMode
    from ppm_reference.dap.provision import b64, collector_keypair_from_view

    view, task = load_view(args.task, collector=True)
    vdaf = task.vdaf()
    if getattr(vdaf, "NAME", None) != "Poplar1":
        raise usage_error(f"{args.task} is a {getattr(vdaf, 'NAME', 'non-Poplar1')} task: "
                          "heavy hitters need a Poplar1 task (ppm task create --vdaf Poplar1 "
                          "--bits N)")
    if task.batch_mode != BatchMode.TIME_INTERVAL:
        raise usage_error("heavy hitters collect one batch per level: the task must be "
                          "time-interval")
    query = task.profile.flow.query_interval(task, parse_interval(args.interval,
                                                                  task.time_precision))
    try:
        keypair = collector_keypair_from_view(view)
    except Exception as exc:  # noqa: BLE001
        raise usage_error(f"bad collector credentials in {args.task}: {exc}") from None

    def progress(level: Level) -> None:
        kept = len(level.survivors(args.threshold))
        stream = sys.stderr if args.json else sys.stdout
        print(f"level {level.level:>3}: {len(level.candidates):>5} candidates, "
              f"{kept:>5} at or above {args.threshold} ({level.report_count} reports)",
              file=stream)

    async def go() -> HeavyHitters:
        async with Collector(task, keypair, view["collector_auth_token"]) as collector:
            return await collect_heavy_hitters(collector, query, args.threshold,
                                               timeout=args.timeout,
                                               poll_interval=args.poll_interval,
                                               on_level=progress,
                                               max_candidates=args.max_candidates)

    try:
        result = asyncio.run(go())
    except HeavyHittersError as exc:
        raise usage_error(str(exc)) from None
    if args.json:
        emit_json(_json(result, b64(bytes(task.task_id))))
        return 0
    if not result.heavy:
        last = result.levels[-1].level if result.levels else 0
        print(f"no string has {args.threshold} or more reports (no prefix survived level "
              f"{last})")
        return 0
    print(f"{len(result.heavy)} heavy hitter(s), threshold {args.threshold}:")
    for prefix, count in result.heavy:
        shown = describe(prefix)
        extra = "".join(f"  {k}={shown[k]!r}" if k == "text" else f"  {k}={shown[k]}"
                        for k in ("hex", "text") if k in shown)
        print(f"  {count:>8}  {bit_string(prefix)}{extra}")
    return 0


def _json(result: HeavyHitters, task_id: str) -> dict[str, Any]:
    return {
        "ok": True, "task_id": task_id, "bits": result.bits, "threshold": result.threshold,
        "complete": result.complete,
        "heavy_hitters": [{**describe(p), "count": c} for p, c in result.heavy],
        "levels": [{"level": lv.level, "report_count": lv.report_count,
                    "candidates": [bit_string(p) for p in lv.candidates],
                    "counts": lv.counts} for lv in result.levels],
    }


def register(subparsers: Any) -> None:
    """Add `heavy-hitters` to `ppm analytics`."""
    p = subparsers.add_parser(
        "heavy-hitters", help="Poplar1 heavy hitters: walk the prefix tree of a batch",
        description="Collect a Poplar1 task's time-interval batch once per level of the "
        "prefix tree and print the strings held by at least THRESHOLD reports. The "
        "Aggregators and the Collector learn every prefix at or above the threshold.")
    p.add_argument("--task", required=True, metavar="FILE", help="collector-task.json")
    p.add_argument("--interval", required=True, metavar="START,DURATION",
                   help="the batch, in seconds, aligned to time_precision")
    p.add_argument("--threshold", required=True, type=positive_int, metavar="T",
                   help="the count a string (and each of its prefixes) needs")
    p.add_argument("--max-candidates", type=positive_int, default=4096, metavar="N",
                   help="refuse a level with more candidate prefixes (default 4096)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="per level")
    p.add_argument("--poll-interval", type=float, default=1.0, metavar="SECONDS",
                   help="the longest wait between polls of a collection job (default 1)")
    add_json(p)
    p.set_defaults(func=run_command(_cmd))
