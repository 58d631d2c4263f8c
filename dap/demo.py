"""`ppm demo`: the whole DAP stack with differential privacy, in one command.

The demo starts a Leader and a Helper on 127.0.0.1 (free ports, in this process, each with a
temporary SQLite datastore), provisions a task whose configuration carries a DP policy
(the 0xFF00 task extension, see `dap.dp`), uploads reports from simulated Clients over
HTTP, collects the aggregate as the Collector and shows the true and the private
(debiased) values side by side, the error, and the privacy guarantee achieved.

The simulated Clients draw their measurements from a fixed, visibly non-uniform
distribution with a seeded `random.Random`: that is the *simulation* only. Everything
the protocol and the DP policy draw (report IDs, shares, HPKE, noise) comes from the
library's CSPRNG, so the private result differs from run to run.

Defaults per VDAF (`--vdaf`, with `--length` L, default 10):

    Histogram         Prio3Histogram(L)               HistogramWithAggregatorRandomization
    SumVec            Prio3SumVec(L, 3)               SumVecWithAggregatorRandomization
    MultihotCountVec  Prio3MultihotCountVec(L, w)     MultiHotHistogramWithClientRandomization
                      (w from the policy; 3 without a policy)
    Count             Prio3Count                      none (no policy of the draft fits)
    Sum               Prio3Sum(100)                   none
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from dap.cli_ops import (
    DEFAULT_DELTA,
    DEFAULT_FP,
    CliError,
    batch_mode_arg,
    build_vdaf,
    check_policy,
    describe_policy,
    emit_json,
    format_duration,
    interval_json,
    json_number,
    multihot_max_weight,
    policy_name_arg,
    policy_spec,
    positive_int,
    run_command,
    usage_error,
    vdaf_name_arg,
)
from vdaf import registry

DEFAULT_POLICY = {
    "Prio3Histogram": "HistogramWithAggregatorRandomization",
    "Prio3SumVec": "SumVecWithAggregatorRandomization",
    "Prio3MultihotCountVec": "MultiHotHistogramWithClientRandomization",
    "Prio3Count": "none",
    "Prio3Sum": "none",
}
SUM_MAX = 100
SUMVEC_MAX = 3
MULTIHOT_MAX_WEIGHT = 3
TIME_PRECISION = 3600
UPLOAD_CHUNK = 100

TRUST_MODELS = {
    "OAMC": "one Aggregator and most Clients honest",
    "OAOC": "at least one Aggregator honest; protects each honest Client",
    "OC": "every other party corrupt (local DP)",
}


@dataclass
class DemoSettings:
    vdaf: str = "Prio3Histogram"
    policy: str | None = None      # None: the VDAF's default; "none": no DP
    reports: int = 2000
    epsilon: float = 1.0
    delta: float = DEFAULT_DELTA
    eps0: float = 3.0
    fp: float = DEFAULT_FP
    length: int = 10
    batch_mode: str = "time-interval"
    seed: int = 2024
    timeout: float = 60.0


# ---------------------------------------------------------------------------------------
# Progress and status on stderr
# ---------------------------------------------------------------------------------------


class Progress:
    """A plain-text progress bar on a terminal (`\\r` redraws); silent otherwise."""

    def __init__(self, enabled: bool, stream: TextIO = sys.stderr, width: int = 30) -> None:
        self.enabled = enabled
        self.stream = stream
        self.width = width
        self._shown = False

    def update(self, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        frac = done / total if total else 1.0
        filled = int(self.width * frac)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{label} [{bar}] {done}/{total} {int(100 * frac):3d}%")
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False


class Status:
    def __init__(self, enabled: bool, stream: TextIO = sys.stderr) -> None:
        self.enabled = enabled
        self.stream = stream

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(message, file=self.stream, flush=True)


# ---------------------------------------------------------------------------------------
# Simulated Clients
# ---------------------------------------------------------------------------------------


def bucket_weights(length: int) -> list[float]:
    """A fixed, visibly non-uniform distribution over buckets: Zipf-like, 1/(i+1)."""
    return [1.0 / (i + 1) for i in range(length)]


def simulate(vdaf: Any, policy: Any, n: int, rng: random.Random) -> tuple[list[Any], Any]:
    """n measurements for the VDAF (or, for client randomization, the bucket indices the
    policy randomizes) and their true aggregate."""
    name = registry.name_of(vdaf)
    params = registry.parameters_of(vdaf)
    if name == "Prio3Count":
        ms: list[Any] = [int(rng.random() < 0.3) for _ in range(n)]
        return ms, sum(ms)
    if name == "Prio3Sum":
        top = params["max_measurement"]
        ms = [min(top, int(rng.triangular(0, top, top * 0.2))) for _ in range(n)]
        return ms, sum(ms)
    length = params["length"]
    if name == "Prio3SumVec":
        top = params["max_measurement"]
        probs = [0.8 / (i + 1) for i in range(length)]
        vecs = [[sum(rng.random() < p for _ in range(top)) for p in probs] for _ in range(n)]
        return vecs, [sum(v[i] for v in vecs) for i in range(length)]
    weights = bucket_weights(length)
    if name == "Prio3Histogram" or (name == "Prio3MultihotCountVec" and policy is not None):
        idx = rng.choices(range(length), weights=weights, k=n)
        counts = [0] * length
        for i in idx:
            counts[i] += 1
        return idx, counts
    if name == "Prio3MultihotCountVec":
        sets = []
        for _ in range(n):
            k = rng.randint(1, min(params["max_weight"], length))
            chosen: set[int] = set()
            while len(chosen) < k:
                chosen.add(rng.choices(range(length), weights=weights)[0])
            sets.append([i in chosen for i in range(length)])
        return sets, [sum(s[i] for s in sets) for i in range(length)]
    raise CliError(f"the demo does not simulate {name}")


# ---------------------------------------------------------------------------------------
# Privacy and error
# ---------------------------------------------------------------------------------------


def guarantee_json(g: Any) -> dict[str, Any]:
    return {"trust_model": g.trust_model, "epsilon": json_number(float(g.epsilon)),
            "delta": float(g.delta), "method": g.method, "note": g.note,
            "protected": math.isfinite(float(g.epsilon))}


def guarantees(policy: Any, batch_size: int, delta: float) -> tuple[dict[str, Any],
                                                                     dict[str, Any]]:
    """(primary guarantee, all guarantees) as JSON; the primary one is for the trust
    model the policy is designed for."""
    if policy is None:
        none = {"trust_model": None, "epsilon": None, "delta": 1.0, "method": "none",
                "note": "no DP policy: the Collector learns the exact aggregate",
                "protected": False}
        return none, {}
    try:
        all_g = policy.guarantees(batch_size=batch_size, honest_aggregators=1, delta=delta)
    except TypeError:
        all_g = policy.guarantees(batch_size=batch_size)
    out = {name: guarantee_json(g) for name, g in all_g.items()}
    model = getattr(policy, "TRUST_MODEL", "") or next(iter(out))
    return out.get(model, next(iter(out.values()))), out


def noise_std(policy: Any, batch_size: int, delta: float) -> float | None:
    """The expected standard deviation of the private value's error per coordinate, when
    the policy makes it easy to say (both Aggregators honest)."""
    if policy is None:
        return 0.0
    try:
        mech = getattr(policy, "mechanism", None)
        if mech is not None:
            shares = 2
            if hasattr(mech, "variance"):
                return math.sqrt(shares * float(mech.variance()))
            if hasattr(mech, "sigma"):
                return math.sqrt(shares) * float(mech.sigma)
        if hasattr(policy, "rappor"):
            from dp_policy import accounting

            std = accounting.rappor_amplification(policy.eps0, batch_size, delta).std
            return float(std) if std is not None else None
    except Exception:  # noqa: BLE001 - informative only
        return None
    return None


def errors(true: Any, private: Any) -> dict[str, Any]:
    t = true if isinstance(true, list) else [true]
    p = private if isinstance(private, list) else [private]
    per = [pv - tv for tv, pv in zip(t, p, strict=True)]
    return {"per_bucket": per, "max_abs": max(abs(e) for e in per),
            "rmse": math.sqrt(sum(e * e for e in per) / len(per))}


# ---------------------------------------------------------------------------------------
# The demo
# ---------------------------------------------------------------------------------------


def _listen() -> tuple[socket.socket, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock, int(sock.getsockname()[1])


def resolve(settings: DemoSettings) -> tuple[Any, dict[str, Any] | None, Any]:
    """The VDAF, the policy spec and the policy object for the settings."""
    name = settings.vdaf
    policy_name = settings.policy or DEFAULT_POLICY.get(name, "none")
    spec = policy_spec(policy_name, epsilon=settings.epsilon, delta=settings.delta,
                       eps0=settings.eps0, fp=settings.fp)
    if settings.length < 1:
        raise usage_error("--length must be at least 1")
    if settings.reports < 1:
        raise usage_error("--reports must be at least 1")
    kwargs: dict[str, Any] = {"length": settings.length}
    if name == "Prio3Sum":
        kwargs = {"max_measurement": SUM_MAX}
    elif name == "Prio3SumVec":
        kwargs["max_measurement"] = SUMVEC_MAX
    elif name == "Prio3MultihotCountVec":
        if spec is not None and spec["policy"] == "MultiHotHistogramWithClientRandomization":
            kwargs["max_weight"] = multihot_max_weight(spec["eps0"], settings.length,
                                                       spec["fp"])
        else:
            kwargs["max_weight"] = min(MULTIHOT_MAX_WEIGHT, settings.length)
    elif name == "Prio3Count":
        kwargs = {}
    vdaf = build_vdaf(name, **kwargs)
    return vdaf, spec, check_policy(spec, vdaf)


async def run_demo(settings: DemoSettings, status: Status, progress: Progress
                   ) -> dict[str, Any]:
    from aiohttp import web

    from dap.client import Client
    from dap.collector import Collector
    from dap.common import BatchMode, Duration, Interval, Time
    from dap.provision import b64, new_task
    from dap.server.app import build_app
    from dap.server.common import STATE_KEY
    from dap.server.config import AggregatorConfig

    t_start = time.monotonic()
    vdaf, spec, policy = resolve(settings)
    n = settings.reports
    mode = (BatchMode.TIME_INTERVAL if settings.batch_mode == "time-interval"
            else BatchMode.LEADER_SELECTED)
    measurements, true = simulate(vdaf, policy, n, random.Random(settings.seed))

    with tempfile.TemporaryDirectory(prefix="ppm-demo-") as tmp:
        runners: list[web.AppRunner] = []
        try:
            urls: dict[str, str] = {}
            states: dict[str, Any] = {}
            for role in ("helper", "leader"):
                sock, port = _listen()
                config = AggregatorConfig(
                    role=role, datastore=str(Path(tmp) / f"{role}.sqlite"),
                    listen_host="127.0.0.1", listen_port=port, sqlite_synchronous="NORMAL",
                    worker_interval=0.02, straggler_age=0.2, retry_after=1)
                app = build_app(config)
                runner = web.AppRunner(app, access_log=None)
                await runner.setup()
                runners.append(runner)
                await web.SockSite(runner, sock).start()
                urls[role] = f"http://127.0.0.1:{port}/"
                states[role] = app[STATE_KEY]
            status(f"leader  {urls['leader']}   helper  {urls['helper']}   "
                   f"(SQLite under {tmp})")

            pt = new_task(vdaf, urls["leader"], urls["helper"], batch_mode=mode,
                          min_batch_size=n, time_precision=TIME_PRECISION, dp_policy=spec,
                          max_batch_size=n if mode == BatchMode.LEADER_SELECTED else None,
                          task_info=b"ppm demo")
            for role, record in (("helper", pt.helper_record), ("leader", pt.leader_record)):
                with states[role].datastore.transaction() as tx:
                    tx.put_task(record)
                states[role].tasks.invalidate(record.task_id)
            status(f"task    {b64(bytes(pt.task.task_id))}: {registry.describe(vdaf)}, "
                   f"DP policy {describe_policy(spec)}")
            t_ready = time.monotonic()

            # Upload, in requests of UPLOAD_CHUNK reports.
            first = int(time.time())
            rejected = 0
            async with Client(pt.task) as client:
                progress.update("uploading ", 0, n)
                for i in range(0, n, UPLOAD_CHUNK):
                    chunk = measurements[i : i + UPLOAD_CHUNK]
                    result = await client.upload(chunk, batch_size=UPLOAD_CHUNK)
                    rejected += len(result.rejected)
                    progress.update("uploading ", min(n, i + UPLOAD_CHUNK), n)
            progress.done()
            last = int(time.time())
            t_uploaded = time.monotonic()
            if rejected:
                raise CliError(f"the Leader rejected {rejected} of {n} reports")
            status(f"uploaded {n} reports in {t_uploaded - t_ready:.1f} s; collecting ...")

            if mode == BatchMode.TIME_INTERVAL:
                lo, hi = first // TIME_PRECISION, last // TIME_PRECISION
                query = pt.task.profile.flow.query_interval(
                    pt.task, Interval(Time(lo), Duration(hi - lo + 1)))
            else:
                query = pt.task.profile.flow.query_current_batch(pt.task)
            async with Collector(pt.task, pt.collector_keypair,
                                 pt.collector_auth_token) as collector:
                collection = await collector.collect(query, timeout=settings.timeout,
                                                     max_poll_interval=0.2)
            t_collected = time.monotonic()
        finally:
            for runner in reversed(runners):
                await runner.cleanup()

    private = collection.debiased_result
    primary, all_g = guarantees(collector.policy, collection.report_count, settings.delta)
    std = noise_std(collector.policy, collection.report_count, settings.delta)
    err = errors(true, private)
    if std is not None:
        err["expected_std"] = std
    return {
        "ok": True,
        "vdaf": registry.name_of(vdaf), "vdaf_description": registry.describe(vdaf),
        "dp_policy": spec, "batch_mode": settings.batch_mode,
        "reports": n, "report_count": collection.report_count,
        "interval": interval_json(collection.interval, TIME_PRECISION),
        "true": true, "private": private if not isinstance(private, float) else
        json_number(private),
        "error": err, "guarantee": primary, "guarantees": all_g,
        "leader_url": urls["leader"], "helper_url": urls["helper"],
        "seed": settings.seed,
        "timings": {"setup": round(t_ready - t_start, 3),
                    "upload": round(t_uploaded - t_ready, 3),
                    "collect": round(t_collected - t_uploaded, 3),
                    "total": round(time.monotonic() - t_start, 3)},
    }


# ---------------------------------------------------------------------------------------
# Text output
# ---------------------------------------------------------------------------------------


def _num(value: Any, sign: bool = False) -> str:
    if isinstance(value, float):
        return f"{value:+.1f}" if sign else f"{value:.1f}"
    return f"{value:+d}" if sign else str(value)


def describe_guarantee(g: dict[str, Any]) -> str:
    if not g.get("protected"):
        return "no protection"
    eps, delta = g["epsilon"], g["delta"]
    if delta == 0:
        return f"{eps:.4g}-DP (pure)"
    return f"({eps:.4g}, {delta:.2g})-DP"


def render(result: dict[str, Any]) -> str:
    lines = [f"DAP demo: {result['report_count']} reports, {result['vdaf_description']}, "
             f"{result['batch_mode']} batch",
             f"DP policy: {describe_policy(result['dp_policy'])}"]
    iv = result["interval"]
    lines.append(f"batch interval: {iv['start_utc']} + {format_duration(iv['duration'])}")
    lines.append("")
    true, private = result["true"], result["private"]
    per = result["error"]["per_bucket"]
    if isinstance(true, list):
        scale = max([abs(v) for v in true] + [1])
        bar_width = 24
        label = "coord" if result["vdaf"] == "Prio3SumVec" else "bucket"
        lines.append(f"{label:>6} {'true':>8} {'private':>9} {'error':>7}")
        for i, (t, p, e) in enumerate(zip(true, private, per, strict=True)):
            bar = "#" * max(0, round(bar_width * float(p) / scale))
            lines.append(f"{i:>6} {t:>8} {_num(p):>9} {_num(e, True):>7}  {bar}")
        lines.append(f"{'total':>6} {sum(true):>8} {_num(sum(private)):>9}")
    else:
        lines.append(f"{'':>6} {'true':>8} {'private':>9} {'error':>7}")
        lines.append(f"{'value':>6} {true:>8} {_num(private):>9} {_num(per[0], True):>7}")
    err = result["error"]
    line = f"error: max |private - true| = {_num(err['max_abs'])}, RMSE {err['rmse']:.2f}"
    if err.get("expected_std"):
        line += f" (expected noise std {err['expected_std']:.2f} per value)"
    lines += ["", line]
    g = result["guarantee"]
    if g.get("trust_model") is None:
        lines.append("privacy: none -- " + g["note"])
    else:
        model = g["trust_model"]
        lines.append(f"privacy: {describe_guarantee(g)} in trust model {model} "
                     f"({TRUST_MODELS.get(model, '')})")
        lines.append(f"         {g['method']}; {g['note']}")
        others = [f"{m} {describe_guarantee(o)}" for m, o in result["guarantees"].items()
                  if m != model]
        if others:
            lines.append("         other trust models: " + "; ".join(others))
    t = result["timings"]
    lines.append(f"time: {t['total']:.1f} s (setup {t['setup']:.1f} s, upload "
                 f"{t['upload']:.1f} s, collect {t['collect']:.1f} s)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# ppm demo
# ---------------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    settings = DemoSettings(
        vdaf=args.vdaf, policy=args.policy, reports=args.reports, epsilon=args.epsilon,
        delta=args.delta, eps0=args.eps0, fp=args.fp, length=args.length,
        batch_mode=args.batch_mode, seed=args.seed, timeout=args.timeout)
    interactive = not args.json
    status = Status(interactive)
    progress = Progress(interactive and sys.stderr.isatty())
    try:
        result = asyncio.run(run_demo(settings, status, progress))
    finally:
        progress.done()
    if args.json:
        emit_json(result)
    else:
        print(render(result))
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo", help="run a Leader, a Helper, Clients and a Collector with DP, in one go",
        description="\n\n".join((__doc__ or "").split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vdaf", type=vdaf_name_arg, default="Prio3Histogram",
                   help="Count, Sum, SumVec, Histogram (default) or MultihotCountVec")
    p.add_argument("--policy", type=policy_name_arg, default=None,
                   help="DP policy: none, or one that fits the VDAF (default: see the "
                   "table above)")
    p.add_argument("--reports", type=positive_int, default=2000, help="default 2000")
    p.add_argument("--epsilon", type=float, default=1.0, help="default 1.0")
    p.add_argument("--delta", type=float, default=DEFAULT_DELTA, help="default 1e-9")
    p.add_argument("--eps0", type=float, default=3.0,
                   help="local epsilon of client randomization, default 3.0")
    p.add_argument("--fp", type=float, default=DEFAULT_FP, help=argparse.SUPPRESS)
    p.add_argument("--length", type=positive_int, default=10, help="vector length, default 10")
    p.add_argument("--batch-mode", type=batch_mode_arg, default="time-interval",
                   help="time-interval (default) or leader-selected")
    p.add_argument("--seed", type=int, default=2024,
                   help="seed of the simulated measurements (not of the protocol or noise)")
    p.add_argument("--timeout", type=float, default=60.0, help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_command(_cmd_demo))
