"""`ppm collect --task collector-task.json (--interval START,DURATION | --current-batch)`:
collect an aggregate as the DAP Collector."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

from ppm_reference.dap.cli.args import add_json, positive_float
from ppm_reference.dap.cli.errors import CliError, describe_error, run_command, usage_error
from ppm_reference.dap.cli.output import (
    emit_json,
    format_duration,
    format_result,
    interval_json,
    result_json,
    write_json_file,
)
from ppm_reference.dap.cli.taskfile import load_view


def parse_interval(text: str, time_precision: int) -> Any:
    """`START,DURATION` in seconds -> an Interval in time_precision units."""
    from ppm_reference.dap.common import Duration, Interval, Time

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
    from ppm_reference.dap.cli.demo import describe_guarantee
    from ppm_reference.dap.collector import Collector
    from ppm_reference.dap.common import BatchMode
    from ppm_reference.dap.dp import decode_spec, describe_spec
    from ppm_reference.dap.provision import b64, collector_keypair_from_view

    view, task = load_view(args.task, collector=True)
    flow = task.profile.flow
    from ppm_reference.vdaf import registry

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

    waiting = _Waiting(args.timeout, task.min_batch_size)

    async def go() -> Any:
        from ppm_reference.dap.collector import Collection

        async with Collector(task, keypair, view["collector_auth_token"]) as collector:
            if args.job is not None:
                req = flow.collection_request(query, b"")
                job_url = args.job
            else:
                job_url, req = await collector.start(query)
            waiting.job_url = job_url
            loop = asyncio.get_running_loop()
            deadline = loop.time() + args.timeout
            while True:
                try:
                    resp, retry_after = await collector.poll(job_url)
                except Exception as exc:
                    raise CliError(f"{describe_error(exc)[0]} (collection job {job_url})") \
                        from None
                if resp is not None:
                    break
                waiting.status = collector.last_status
                left = deadline - loop.time()
                if left <= 0:
                    raise CliError(waiting.timeout_message(args))
                waiting.show(args.timeout - left)
                await asyncio.sleep(min(retry_after, 1.0, max(left, 0.05)))
            result = flow.collect_result(task, keypair, req, resp, vdaf=collector.vdaf)
            debiased = result.aggregate_result
            if collector.policy is not None:
                debiased = collector.policy.debias_agg_result(result.aggregate_result,
                                                             result.report_count)
            if args.job is None or not args.keep_job:
                await collector._delete_quietly(job_url)
            return Collection(result.report_count, result.interval, result.aggregate_result,
                              debiased, job_url, result.batch_id)

    try:
        collection = asyncio.run(go())
    finally:
        waiting.done()
    spec = decode_spec(task.dp_policy) if task.dp_policy is not None else None
    interval = interval_json(collection.interval, flow.interval_unit(task))
    obj = {"ok": True, "task_id": b64(bytes(task.task_id)),
           "report_count": collection.report_count, "interval": interval,
           "result": result_json(collection.debiased_result),
           "aggregate_result": result_json(collection.aggregate_result),
           "dp_policy": spec, "job_url": collection.job_url}
    obj.update(privacy_of(task, spec, collection.report_count))
    if args.out is not None:
        write_json_file(Path(args.out), obj, private=False)
    if args.plot is not None:
        plot_result(args.plot, obj)
    if args.json:
        emit_json(obj)
        return 0
    print(f"reports:  {collection.report_count}")
    print(f"interval: {interval['start_utc']} + {format_duration(interval['duration'])} "
          f"({interval['start']},{interval['duration']})")
    label = "result:  " if spec is None else "result:   (debiased, DP policy " \
        f"{describe_spec(spec)})\n         "
    print(f"{label} {format_result(collection.debiased_result)}")
    if spec is not None:
        std = obj["noise_std"]
        g = obj["guarantee"]
        if std is not None:
            print(f"noise:    expected standard deviation {std:.2f} per value")
        if g.get("trust_model") is not None:
            print(f"privacy:  {describe_guarantee(g)} in trust model {g['trust_model']} "
                  f"({g['method']})")
    for what, path in (("result", args.out), ("plot", args.plot)):
        if path is not None:
            print(f"{what} written to {path}")
    return 0


def privacy_of(task: Any, spec: Any, report_count: int) -> dict[str, Any]:
    """The guarantee achieved at this report count, and the expected noise standard
    deviation per value (None where the policy does not say), for a DP task."""
    if spec is None:
        return {"guarantee": None, "noise_std": 0.0}
    from ppm_reference.dap.demo import guarantees, noise_std
    from ppm_reference.dap.dp import DEFAULT_DELTA, task_policy

    policy = task_policy(task)
    delta = float(spec.get("delta") or DEFAULT_DELTA)
    try:
        primary, _ = guarantees(policy, max(1, report_count), delta)
        std = noise_std(policy, max(1, report_count), delta)
    except (ValueError, ArithmeticError):
        return {"guarantee": None, "noise_std": None}
    return {"guarantee": primary, "noise_std": std}


def plot_result(path: str, obj: dict[str, Any]) -> None:
    """A bar chart of the result (error bars of one noise standard deviation)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise usage_error("--plot needs matplotlib: pip install 'ppm-reference[plot]'") \
            from None
    values = obj["result"] if isinstance(obj["result"], list) else [obj["result"]]
    values = [0.0 if v is None else float(v) for v in values]
    std = obj.get("noise_std") or 0.0
    fig, ax = plt.subplots(figsize=(max(4.0, 0.4 * len(values) + 2), 3.5))
    ax.bar(range(len(values)), values, yerr=[std] * len(values) if std else None,
           color="#4c72b0", capsize=3, label="collected" + (" (± 1 noise std)" if std else ""))
    ax.set_xlabel("bucket" if len(values) > 1 else "")
    ax.set_ylabel("count")
    ax.set_title(f"{obj['report_count']} reports, {obj['interval']['start_utc']}")
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise usage_error(f"cannot write the plot {path}: {exc}") from None
    finally:
        plt.close(fig)


class _Waiting:
    """What `ppm collect` waits for: a status line on a terminal (stderr), and the
    message of a timeout."""

    def __init__(self, timeout: float, min_batch_size: int) -> None:
        self.timeout = timeout
        self.min_batch_size = min_batch_size
        self.job_url = ""
        self.status: str | None = None  # the Leader's PPM-Collection-Status, if any
        self.shown = False

    def show(self, elapsed: float) -> None:
        if sys.stderr.isatty():
            what = self.status or (f"at least {self.min_batch_size} reports aggregated by "
                                   "both Aggregators")
            width = shutil.get_terminal_size((100, 24)).columns - 1
            line = f"waiting {elapsed:.0f}/{self.timeout:.0f} s: {what}"[:width]
            sys.stderr.write(f"\r{line}\033[K")
            sys.stderr.flush()
            self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

    def timeout_message(self, args: argparse.Namespace) -> str:
        where = f"--interval {args.interval}" if args.interval else "--current-batch"
        if self.status:
            return (f"the batch was not ready after {self.timeout:.0f} s; the Leader says: "
                    f"{self.status}; upload more or wait, then poll the same job: ppm "
                    f"collect --task {args.task} {where} --job {self.job_url}")
        return (f"the batch was not ready after {self.timeout:.0f} s: the Leader releases "
                f"it once min_batch_size ({self.min_batch_size}) reports are aggregated by "
                "both Aggregators (fewer reports so far, or the Helper unreachable: see "
                "the Leader's log); upload more or wait, then poll the same job: ppm "
                f"collect --task {args.task} {where} --job {self.job_url}")


def register(subparsers: Any) -> None:
    """Add `collect` to the `ppm` parser."""
    p = subparsers.add_parser("collect", help="collect an aggregate as the DAP Collector")
    p.add_argument("--task", required=True, metavar="FILE", help="collector-task.json")
    q = p.add_mutually_exclusive_group(required=True)
    q.add_argument("--interval", metavar="START,DURATION",
                   help="time-interval batch, in seconds, aligned to time_precision")
    q.add_argument("--current-batch", action="store_true",
                   help="leader-selected: the next batch the Leader has ready")
    p.add_argument("--timeout", type=positive_float, default=120.0, metavar="SECONDS",
                   help="how long to wait for the batch (default: 120)")
    p.add_argument("--job", metavar="URL",
                   help="poll this collection job (the URL a timed-out collect printed) "
                   "instead of creating one; give the same --interval / --current-batch")
    p.add_argument("--keep-job", action="store_true",
                   help="with --job: do not delete the job once its result is in hand")
    p.add_argument("--out", metavar="FILE", help="also write the result, the guarantee and "
                   "the expected noise to FILE (JSON)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="draw the result (needs matplotlib: the 'plot' extra)")
    add_json(p)
    p.set_defaults(func=run_command(_cmd_collect))
