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

Samplable anonymous aggregation (paper 000) and random check-ins (paper 002), each
optional: `--sample-rate q` makes `--reports` the population, each simulated Client
taking part with probability q (its own coin: sampled-out Clients send nothing);
`--dummy-rate r` has each sampled-out Client send a zero-effect dummy report with
probability r (not for Histogram: it has no zero measurement); `--min-batch-bound B`
binds "release me only in a batch of at least B" into every report (both Aggregators
enforce it; it is also the task's min_batch_size); `--checkin-window m`
(`--checkin-prob p`) has each Client check in at a uniform slot of the last m
time_precision slots; `--relay` uploads through an Oblivious HTTP relay to the Leader's
gateway. The guarantee printed composes the aggregation and noise guarantee at the
released batch with the Clients' sampling (paper 000 Theorem 4) and, for a
Client-randomized policy, the check-ins bound (paper 002 Theorem 3.2).
"""

from __future__ import annotations

import asyncio
import math
import random
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ppm_reference.dap import dp
from ppm_reference.dap.display import interval_json, json_number
from ppm_reference.dap.dp import DEFAULT_DELTA, DEFAULT_FP
from ppm_reference.dap.profiles import DEFAULT_PROFILE, get_profile
from ppm_reference.vdaf import registry

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
PROFILE = DEFAULT_PROFILE.name
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
    # Samplable anonymous aggregation (paper 000) and random check-ins (paper 002).
    sample_rate: float | None = None      # Poisson sampling; `reports` is the population
    dummy_rate: float = 0.0               # P(dummy report | sampled out)
    min_batch_bound: int | None = None    # bound into every report (and min_batch_size)
    checkin_window: int | None = None     # m slots (time_precision units) ending now
    checkin_prob: float = 1.0             # p of the (R, p)-check-in
    relay: bool = False                   # upload through an Oblivious HTTP relay

    @property
    def sampling(self) -> bool:
        return (self.sample_rate is not None or self.dummy_rate > 0
                or self.min_batch_bound is not None or self.checkin_window is not None
                or self.relay)


class DemoError(Exception):
    """The demo could not run to the end (a failure while running, not bad settings)."""


class ProgressSink(Protocol):
    """Where the demo reports progress (the command line draws a bar on a terminal)."""

    def update(self, label: str, done: int, total: int) -> None: ...

    def done(self) -> None: ...


class NoProgress:
    def update(self, label: str, done: int, total: int) -> None:
        pass

    def done(self) -> None:
        pass


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
    raise DemoError(f"the demo does not simulate {name}")


# ---------------------------------------------------------------------------------------
# Privacy and error
# ---------------------------------------------------------------------------------------


def guarantee_json(g: Any) -> dict[str, Any]:
    return {"trust_model": g.trust_model, "epsilon": json_number(float(g.epsilon)),
            "delta": float(g.delta), "method": g.method, "note": g.note,
            "neighbouring": getattr(g, "neighbouring", "replacement"),
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
            from ppm_reference.dp_policy import accounting

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
    """The VDAF, the policy spec and the policy object for the settings. Raises
    ValueError for settings that do not fit: `dap.dp.DpSpecError` (policy parameters),
    `vdaf.registry.RegistryError` (VDAF parameters), or a policy that does not fit the
    VDAF."""
    name = settings.vdaf
    policy_name = settings.policy or DEFAULT_POLICY.get(name, "none")
    spec = dp.make_spec(policy_name, epsilon=settings.epsilon, delta=settings.delta,
                        eps0=settings.eps0, fp=settings.fp)
    if settings.length < 1:
        raise ValueError("length must be at least 1")
    if settings.reports < 1:
        raise ValueError("reports must be at least 1")
    for name_, value in (("sample-rate", settings.sample_rate),
                         ("dummy-rate", settings.dummy_rate),
                         ("checkin-prob", settings.checkin_prob)):
        if value is not None and not 0.0 <= value <= 1.0:
            raise ValueError(f"{name_} must be in [0, 1]")
    if settings.min_batch_bound is not None and settings.min_batch_bound < 1:
        raise ValueError("min-batch-bound must be at least 1")
    if settings.checkin_window is not None and settings.checkin_window < 1:
        raise ValueError("checkin-window must be at least 1")
    if settings.dummy_rate > 0 and name == "Prio3Histogram":
        raise ValueError("Prio3Histogram has no zero-effect dummy report (exactly one "
                         "bucket is set): use --vdaf MultihotCountVec, Count, Sum or SumVec")
    if settings.checkin_window is not None and settings.batch_mode != "time-interval":
        raise ValueError("check-ins pick time slots: use the time-interval batch mode")
    kwargs: dict[str, Any] = {"length": settings.length}
    if name == "Prio3Sum":
        kwargs = {"max_measurement": SUM_MAX}
    elif name == "Prio3SumVec":
        kwargs["max_measurement"] = SUMVEC_MAX
    elif name == "Prio3MultihotCountVec":
        needed = dp.required_max_weight(spec, name, settings.length)
        kwargs["max_weight"] = (needed if needed is not None
                                else min(MULTIHOT_MAX_WEIGHT, settings.length))
    elif name == "Prio3Count":
        kwargs = {}
    vdaf = get_profile(PROFILE).build_vdaf(name, kwargs)
    policy = dp.policy_from_spec(spec, vdaf) if spec is not None else None
    return vdaf, spec, policy


# ---------------------------------------------------------------------------------------
# Participation: sampling, check-ins, dummies (paper 000, paper 002)
# ---------------------------------------------------------------------------------------


@dataclass
class Participation:
    """What the simulated Clients decided (each with the CSPRNG: these are protocol
    decisions, not the simulation's)."""

    reports: list[tuple[tuple[Any, bool], float]]   # ((measurement, randomized), time)
    dummies: list[tuple[tuple[Any, bool], float]]
    true: Any
    population: int
    sampled_out: int
    abstained: int
    window: tuple[int, int] | None                  # check-in slots (units), inclusive
    extensions: tuple[tuple[int, bytes], ...]

    def summary(self) -> dict[str, Any]:
        return {"population": self.population, "contributing": len(self.reports),
                "dummies": len(self.dummies), "sampled_out": self.sampled_out,
                "checkin_abstained": self.abstained,
                "checkin_window": list(self.window) if self.window else None}


def participation(settings: DemoSettings, vdaf: Any, policy: Any, measurements: list[Any],
                  now: int) -> Participation:
    """Each of the population's Clients decides by itself (`dap.sampling`): Poisson
    sampling, then (if sampled) a random check-in slot, else (maybe) a dummy."""
    from ppm_reference.dap import sampling

    name = registry.name_of(vdaf)
    params = registry.parameters_of(vdaf)
    plan = sampling.ParticipationPlan(q=settings.sample_rate if settings.sample_rate
                                      is not None else 1.0,
                                      dummy_rate=settings.dummy_rate,
                                      min_batch_size=settings.min_batch_bound)
    window = None
    if settings.checkin_window is not None:
        top = now // TIME_PRECISION
        window = sampling.fixed_window(settings.checkin_window,
                                       start=top - settings.checkin_window + 1)

    def when() -> float | None:
        if window is None:
            return float(now)
        slot = sampling.random_checkin(window, settings.checkin_prob)
        return None if slot is None else float(slot * TIME_PRECISION + 1)

    reports, dummies, kept = [], [], []
    sampled_out = abstained = 0
    for m in measurements:
        decision = plan.decide()
        if decision == sampling.Decision.CONTRIBUTE:
            t = when()
            if t is None:
                abstained += 1
                continue
            reports.append(((m, False), t))
            kept.append(m)
            continue
        sampled_out += 1
        if decision == sampling.Decision.DUMMY:
            t = when()
            if t is not None:
                dummies.append(((sampling.dummy_measurement(name, params, policy), True), t))
    true = _true_aggregate(vdaf, policy, kept)
    return Participation(reports, dummies, true, len(measurements), sampled_out, abstained,
                         (window[0], window[-1]) if window is not None else None,
                         plan.extensions())


def _true_aggregate(vdaf: Any, policy: Any, ms: list[Any]) -> Any:
    name = registry.name_of(vdaf)
    if name in ("Prio3Count", "Prio3Sum"):
        return sum(int(m) for m in ms)
    length = registry.parameters_of(vdaf)["length"]
    if name == "Prio3Histogram" or (name == "Prio3MultihotCountVec" and policy is not None):
        return [sum(1 for m in ms if m == i) for i in range(length)]
    return [sum(int(m[i]) for m in ms) for i in range(length)]


def _by_time(items: list[tuple[tuple[Any, bool], float]]
             ) -> list[tuple[float, list[tuple[Any, bool]]]]:
    """Reports grouped by report time, each group in a random order (dummies are
    interleaved with real reports, as they would be in a deployment)."""
    import secrets

    groups: dict[float, list[tuple[Any, bool]]] = {}
    for item, t in items:
        groups.setdefault(t, []).append(item)
    out = []
    for t in sorted(groups):
        group = groups[t]
        for i in range(len(group) - 1, 0, -1):  # Fisher-Yates with the CSPRNG
            j = secrets.randbelow(i + 1)
            group[i], group[j] = group[j], group[i]
        out.append((t, group))
    return out


def composed_guarantee(settings: DemoSettings, primary: dict[str, Any],
                       all_g: dict[str, Any]) -> dict[str, Any]:
    """The guarantee beside the result: the aggregation-and-noise guarantee at the
    released batch, amplified by the Clients' Poisson sampling (paper 000 Section 3,
    Theorem 4); for a Client-randomized policy also the random check-ins bound (paper
    002 Theorem 3.2, its eps0 being the policy's local guarantee in the replacement
    model, 2 eps0 for RAPPOR's deletion-model eps0)."""
    from ppm_reference.dp_policy import amplification

    out: dict[str, Any] = {"aggregate": primary}
    q = settings.sample_rate if settings.sample_rate is not None else 1.0
    if primary.get("protected"):
        eps, delta = amplification.poisson_sampling(float(primary["epsilon"]),
                                                    float(primary["delta"]), q)
        out["sampled"] = {"epsilon": eps, "delta": delta, "q": q,
                          "method": "paper 000 Theorem 4 (Poisson sampling)"}
    local = all_g.get("OC")
    if settings.checkin_window is not None and local and local.get("protected"):
        eps0 = 2.0 * float(local["epsilon"])  # replacement model
        res = amplification.checkins_fixed_epsilon(
            eps0, settings.checkin_window, q * settings.checkin_prob, settings.delta)
        out["checkins"] = {"epsilon": res.epsilon, "delta": res.delta,
                           "method": res.theorem, "m": settings.checkin_window,
                           "p0": q * settings.checkin_prob, "eps0": eps0,
                           # The theorem is for small eps0 and many slots; past eps0
                           # it says nothing the local guarantee does not.
                           "vacuous": res.epsilon >= eps0}
    return out


async def run_demo(settings: DemoSettings,
                   status: Callable[[str], None] = lambda _message: None,
                   progress: ProgressSink | None = None,
                   resolved: tuple[Any, dict[str, Any] | None, Any] | None = None
                   ) -> dict[str, Any]:
    """Run the demo; its result as a JSON-ready object. `status` gets one line per step,
    `progress` the upload's progress; `resolved` is `resolve(settings)` if the caller
    has made it already."""
    from aiohttp import web

    from ppm_reference.dap.client import Client
    from ppm_reference.dap.collector import Collector
    from ppm_reference.dap.common import BatchMode, Duration, Interval, Role, Time
    from ppm_reference.dap.provision import b64, new_task
    from ppm_reference.dap.server.app import build_app
    from ppm_reference.dap.server.common import STATE_KEY
    from ppm_reference.dap.server.config import AggregatorConfig
    from ppm_reference.dap.server.serving import GuardedRunner

    t_start = time.monotonic()
    progress = progress or NoProgress()
    vdaf, spec, policy = resolved or resolve(settings)
    n = settings.reports
    mode = (BatchMode.TIME_INTERVAL if settings.batch_mode == "time-interval"
            else BatchMode.LEADER_SELECTED)
    measurements, true = simulate(vdaf, policy, n, random.Random(settings.seed))
    plan = participation(settings, vdaf, policy, measurements, int(time.time()))
    if settings.sampling:
        measurements = [m for m, _ in plan.reports]
        true = plan.true
    uploads = plan.reports + plan.dummies
    if not uploads:
        raise DemoError("no Client took part: raise --reports or --sample-rate")
    # With sampling the batch size is random: the task's min_batch_size is the Clients'
    # bound, or half the batch (a simulation knows it; a deployment would use the
    # recipe's B, paper 000 Section 4.1).
    min_batch = ((settings.min_batch_bound or max(1, len(uploads) // 2))
                 if settings.sampling else n)

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
                    worker_interval=0.02, straggler_age=0.2, retry_after=1,
                    ohttp_gateway=settings.relay and role == "leader")
                app = build_app(config)
                runner = GuardedRunner(app, config.limits)
                await runner.setup()
                runners.append(runner)
                await web.SockSite(runner, sock).start()
                urls[role] = f"http://127.0.0.1:{port}/"
                states[role] = app[STATE_KEY]
            status(f"leader  {urls['leader']}   helper  {urls['helper']}   "
                   f"(SQLite under {tmp})")
            route = None
            if settings.relay:
                from ppm_reference.dap.client import RelayRoute
                from ppm_reference.dap.server.relay import RelayConfig, build_relay_app

                sock, port = _listen()
                relay_runner = web.AppRunner(build_relay_app(RelayConfig(
                    urls["leader"].rstrip("/") + "/.well-known/ohttp-gateway")),
                    access_log=None)
                await relay_runner.setup()
                runners.append(relay_runner)
                await web.SockSite(relay_runner, sock).start()
                route = RelayRoute(f"http://127.0.0.1:{port}/")
                status(f"relay   {route.relay_url} -> the Leader's Oblivious HTTP gateway")

            total = len(uploads)
            pt = new_task(vdaf, urls["leader"], urls["helper"], batch_mode=mode,
                          min_batch_size=min_batch, time_precision=TIME_PRECISION,
                          dp_policy=spec,
                          max_batch_size=total if mode == BatchMode.LEADER_SELECTED else None,
                          task_info=b"ppm demo")
            for role, record in (("helper", pt.helper_record), ("leader", pt.leader_record)):
                with states[role].datastore.transaction() as tx:
                    tx.put_task(record)
                states[role].tasks.invalidate(record.task_id)
            status(f"task    {b64(bytes(pt.task.task_id))}: {registry.describe(vdaf)}, "
                   f"DP policy {dp.describe_spec(spec)}")
            # Each Aggregator's noise for the new task, drawn now: their background fill
            # (dap.dp.keep_noise_reserves) lists new tasks only every so often, and on a
            # busy machine the collection could come first and draw its noise on the
            # request path (correct, but with a warning, and not what the demo shows).
            for role, aggregator in (("helper", Role.HELPER), ("leader", Role.LEADER)):
                reserve = dp.noise_reserve(
                    states[role].task(bytes(pt.task.task_id), aggregator), states[role].rng)
                if reserve is not None:
                    await asyncio.to_thread(reserve.fill)
            t_ready = time.monotonic()

            # Upload, in requests of UPLOAD_CHUNK reports (real and dummy reports mixed
            # in one random order, each at its own time).
            first = int(time.time())
            rejected = 0
            async with Client(pt.task, extensions=plan.extensions, relay=route) as client:
                progress.update("uploading ", 0, total)
                done = 0
                for t_report, items in _by_time(uploads):
                    for i in range(0, len(items), UPLOAD_CHUNK):
                        chunk = items[i : i + UPLOAD_CHUNK]
                        reports = []
                        for measurement, randomized in chunk:
                            reports += await client.prepare([measurement], t_report,
                                                            randomized=randomized)
                        result = await client.upload_reports(reports)
                        rejected += len(result.rejected)
                        done += len(chunk)
                        progress.update("uploading ", done, total)
            progress.done()
            last = int(time.time())
            t_uploaded = time.monotonic()
            if rejected:
                raise DemoError(f"the Leader rejected {rejected} of {total} reports")
            status(f"uploaded {total} reports in {t_uploaded - t_ready:.1f} s; "
                   "collecting ...")

            if mode == BatchMode.TIME_INTERVAL:
                lo, hi = first // TIME_PRECISION, last // TIME_PRECISION
                if plan.window is not None:
                    lo = min(lo, plan.window[0])
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
            for done_runner in reversed(runners):
                await done_runner.cleanup()

    private = collection.debiased_result
    primary, all_g = guarantees(collector.policy, collection.report_count, settings.delta)
    std = noise_std(collector.policy, collection.report_count, settings.delta)
    err = errors(true, private)
    if std is not None:
        err["expected_std"] = std
    extra: dict[str, Any] = {}
    if settings.sampling:
        extra = {"participation": plan.summary(),
                 "composed_guarantee": composed_guarantee(settings, primary, all_g)}
    return {**extra,
        "ok": True,
        "vdaf": registry.name_of(vdaf), "vdaf_description": registry.describe(vdaf),
        "dp_policy": spec, "batch_mode": settings.batch_mode,
        "reports": n if not settings.sampling else len(uploads),
        "report_count": collection.report_count,
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
