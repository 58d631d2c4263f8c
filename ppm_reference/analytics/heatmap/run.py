"""Seed 003's Algorithm 2 (adaptive hierarchical histograms) over real DAP tasks.

Every sub-query ("round") q:

1. the budget rule gives sigma~_q and eps_q (Equations 7 to 9, `budget.BudgetSchedule`);
2. U users are drawn from the population (without replacement) and cut into shards of
   at most S_max users (Algorithm 1, lines 7 to 9);
3. each shard is one DAP task, provisioned on the Helper and then the Leader through
   their admin APIs, whose VDAF and DP policy depend on the noise option:

   * ``aggregator``: `Prio3Histogram(T)` (the one-hot check is kept) with the policy
     `HistogramWithAggregatorLaplace(eps_q)`: each Aggregator adds discrete Laplace
     noise of scale 2/eps_q to its aggregate share (replacement neighbours, L1
     sensitivity 2; trust model: one honest Aggregator; the policy rounds the scale up
     to a short rational, so the epsilon achieved is at most eps_q);
   * ``client-polya``: the paper's distributed noise, `Prio3SumVec(T, m - 1)` with the
     policy `SumVecWithClientPolyaShares(eps_q, S, Delta, dropout)`: each Client adds
     Pólya shares and reduces modulo m, and the Collector reduces the sum modulo m
     (`dp_policy.distributed`; add/remove neighbours as in the paper, Delta = 1, or
     gamma + T for Section 5.7's multi-location users; trust model: one honest
     Aggregator and S_dp honest Clients). Noisy vectors cannot pass a one-hot check:
     the range check keeps reports well-formed but, because of the modular reduction,
     bounds nothing -- one malicious Client can set every coordinate of the result to
     any value in [-m/2, m/2), where Prio3Histogram limits it to +1 in one bucket;

   the simulated Clients upload over HTTP and the Collector collects the batch;
4. the shards' (debiased) results are summed into the round's histogram, and the tree is
   updated (Algorithm 2's UpdateTree: split above the threshold, collapse at a quarter
   of it).

The run ends when the budget is spent; the result is the last round's histogram over
the last round's tree (Algorithm 2 returns it), spread over the map for the metrics.

Threshold (Algorithm 2 passes sigma~_q to UpdateTree; Equation 6 compares with k times
sigma_rem, k = 2; Table 3's non-adaptive rows use a fixed T = 10): `threshold="target"`
(the default: t = k sigma~_q), `"remaining"` (Equation 6: t = k sigma_rem) or `"fixed"`
(t = `fixed_threshold`). The default k is Equation 6's 2, not Algorithm 2's literal
t = sigma~_q (k = 1): sigma~_q is also the round's noise level, so with k = 1 an *empty*
cell splits on noise alone with probability about 0.24 per round (discrete Laplace
beyond one standard deviation) and collapses with about 0.6; its four children do the
same, so noise-only subtrees survive as a critical branching process and empty regions
do not reliably collapse (tests/test_heatmap.py::test_empty_region_collapses fails with
k = 1). With k = 2 the split probability is about 0.03.
"""

from __future__ import annotations

import asyncio
import math
import random
import secrets
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ppm_reference.analytics.heatmap.budget import EQ7_READINGS, BudgetSchedule, tau
from ppm_reference.analytics.heatmap.data import (
    Population,
    multi_location_sensitivity,
    multi_location_vector,
    one_hot_index,
)
from ppm_reference.analytics.heatmap.metrics import Metrics, metrics, spread, true_density
from ppm_reference.analytics.heatmap.tree import PrefixTree, hierarchical_communication
from ppm_reference.dp_policy.mechanisms import sample_discrete_laplace

NOISES = ("aggregator", "client-polya")
THRESHOLDS = ("target", "remaining", "fixed")
AGGREGATOR_SENSITIVITY = 2   # HistogramWithAggregatorLaplace: replacement, L1 = 2
TIME_PRECISION = 3600


class HeatmapError(Exception):
    """A run that could not finish (a DAP failure while running)."""


@dataclass
class HeatmapSettings:
    epsilon: str = "1"                 # total budget, a decimal taken exactly
    users_per_round: int = 2000        # U
    noise: str = "aggregator"
    c: float = 0.3                     # Equation 7's calibration
    b: float = 2.0                     # Equation 9's expansion
    threshold: str = "target"
    k: float = 2.0                     # threshold multiplier (Equation 6's k)
    fixed_threshold: float = 10.0
    shard_size: int | None = None      # S_max (default: U, one DAP task per round)
    dropout: str = "0"                 # client-polya: fraction of a shard that may drop
    sensitivity: int = 1               # client-polya, one location: Delta
    gamma: int = 100                   # Section 5.7 scaling (multi-location users)
    clip_bits: int | None = None       # client-polya: m = 2^bits (default: from U)
    eq7: str = "shards"
    max_rounds: int = 12
    start_level: int = 0               # Section 7: start from the full tree at a level
    seed: int = 1                      # the simulation's sampling of users per round
    timeout: float = 120.0

    def check(self, population: Population) -> None:
        if self.noise not in NOISES:
            raise ValueError(f"noise must be one of {NOISES}")
        if self.threshold not in THRESHOLDS:
            raise ValueError(f"threshold must be one of {THRESHOLDS}")
        if self.eq7 not in EQ7_READINGS:
            raise ValueError(f"eq7 must be one of {EQ7_READINGS}")
        try:
            eps = Fraction(self.epsilon)
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"epsilon must be a number, got {self.epsilon!r}") from None
        if eps <= 0:
            raise ValueError("epsilon must be positive")
        if not 1 <= self.users_per_round <= len(population.users):
            raise ValueError(f"users per round must be in [1, {len(population.users)}] "
                             "(the population)")
        if self.shard_size is not None and self.shard_size < 1:
            raise ValueError("shard size must be at least 1")
        if self.c <= 0 or self.b <= 0 or self.k <= 0:
            raise ValueError("c, b and k must be positive")
        if not 0 <= self.start_level <= population.depth:
            raise ValueError(f"start level must be in [0, {population.depth}]")
        if self.max_rounds < 1:
            raise ValueError("max rounds must be at least 1")
        if population.multi and self.noise != "client-polya":
            raise ValueError("users with several locations (Section 5.7) need "
                             "noise client-polya: the aggregator policy for Prio3SumVec "
                             "calibrates to the worst case T * gamma, not gamma + T")
        if self.gamma < 1 or self.sensitivity < 1:
            raise ValueError("gamma and sensitivity must be at least 1")
        if self.clip_bits is not None and not 2 <= self.clip_bits <= 62:
            raise ValueError("clip bits must be in [2, 62]")


@dataclass
class RoundResult:
    round: int
    leaves: int
    users: int
    shards: int
    epsilon: Fraction
    epsilon_target: float
    sigma_target: float
    threshold: float
    noise_std: float            # the standard deviation of the round's summed noise
    splits: int
    collapses: int
    task_ids: list[str]
    counts: list[float]         # private counts (users), indexed like the tree's leaves
    true_counts: list[float]
    tree: PrefixTree = field(repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "leaves": self.leaves, "users": self.users,
                "shards": self.shards, "epsilon": float(self.epsilon),
                "epsilon_exact": str(self.epsilon), "epsilon_target": self.epsilon_target,
                "sigma_target": self.sigma_target, "threshold": self.threshold,
                "noise_std": self.noise_std, "splits": self.splits,
                "collapses": self.collapses, "task_ids": self.task_ids}


@dataclass
class HeatmapResult:
    settings: HeatmapSettings
    rounds: list[RoundResult]
    tree: PrefixTree               # the tree of the last round (its leaves own `counts`)
    counts: list[float]
    metrics: Metrics
    true_map: list[list[float]]
    private_map: list[list[float]]
    epsilon_total: Fraction
    seconds: float

    @property
    def epsilon_spent(self) -> Fraction:
        return sum((r.epsilon for r in self.rounds), Fraction(0))

    @property
    def communication(self) -> int:
        return sum(r.leaves for r in self.rounds)

    def as_dict(self) -> dict[str, Any]:
        s = self.settings
        return {"ok": True, "noise": s.noise, "epsilon": float(self.epsilon_total),
                "epsilon_spent": float(self.epsilon_spent),
                "epsilon_spent_exact": str(self.epsilon_spent),
                "users_per_round": s.users_per_round, "c": s.c, "b": s.b,
                "threshold_rule": s.threshold, "eq7": s.eq7,
                "rounds": [r.as_dict() for r in self.rounds],
                "leaves": len(self.counts), "communication": self.communication,
                "metrics": self.metrics.as_dict(), "seconds": round(self.seconds, 2)}


# -- the Aggregators --------------------------------------------------------------------------


@dataclass(frozen=True)
class Aggregators:
    """A Leader and a Helper whose admin APIs (under /internal/) take `admin_token`."""

    leader_url: str
    helper_url: str
    admin_token: str


@asynccontextmanager
async def local_aggregators(directory: str | None = None) -> AsyncIterator[Aggregators]:
    """A Leader and a Helper on 127.0.0.1 (free ports, in this process, SQLite under a
    temporary directory), with their admin APIs enabled."""
    from aiohttp import web

    from ppm_reference.dap.server.app import build_app
    from ppm_reference.dap.server.config import AggregatorConfig

    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="ppm-heatmap-", dir=directory) as tmp:
        runners: list[web.AppRunner] = []
        urls: dict[str, str] = {}
        try:
            for role in ("helper", "leader"):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
                config = AggregatorConfig(
                    role=role, datastore=str(Path(tmp) / f"{role}.sqlite"),
                    listen_host="127.0.0.1", listen_port=port, sqlite_synchronous="NORMAL",
                    worker_interval=0.02, straggler_age=0.2, retry_after=1,
                    admin_token=token)
                runner = web.AppRunner(build_app(config), access_log=None)
                await runner.setup()
                runners.append(runner)
                await web.SockSite(runner, sock).start()
                urls[role] = f"http://127.0.0.1:{port}/"
            yield Aggregators(urls["leader"], urls["helper"], token)
        finally:
            for runner in reversed(runners):
                await runner.cleanup()


# -- one round over DAP -----------------------------------------------------------------------


def clip_modulus(settings: HeatmapSettings, users: int, scale: int, sigma: float) -> int:
    """m for the client-polya option: a power of two with m/2 above the largest count
    (users * scale) plus 40 noise standard deviations (the noise exceeds 40 sigma with
    probability about e^(-40 sqrt 2) < 1e-24)."""
    if settings.clip_bits is not None:
        return 1 << settings.clip_bits
    need = 2 * (users * scale + 40 * sigma + 1)
    return 1 << max(2, math.ceil(math.log2(need)))


async def _dap_shard(aggs: Aggregators, vdaf: Any, spec: dict[str, Any],
                     measurements: list[Any], timeout: float) -> tuple[str, list[int]]:
    """Provision one task through the admin APIs, upload, collect; the debiased result."""
    from ppm_reference.dap.admin_client import AdminClient
    from ppm_reference.dap.client import Client
    from ppm_reference.dap.collector import Collector
    from ppm_reference.dap.common import Duration, Interval, Time
    from ppm_reference.dap.provision import AdminTarget, b64, new_task, provision

    pt = new_task(vdaf, aggs.leader_url, aggs.helper_url, min_batch_size=len(measurements),
                  time_precision=TIME_PRECISION, dp_policy=spec,
                  task_info=b"ppm analytics heatmap")
    helper = AdminTarget("helper", AdminClient(aggs.helper_url, aggs.admin_token))
    leader = AdminTarget("leader", AdminClient(aggs.leader_url, aggs.admin_token))
    # The admin client is synchronous: off the event loop, which may serve the
    # Aggregators themselves.
    await asyncio.to_thread(provision, pt, helper, leader)
    first = int(time.time())
    async with Client(pt.task) as client:
        up = await client.upload(measurements, batch_size=500)
    last = int(time.time())
    if up.rejected:
        raise HeatmapError(f"the Leader rejected {len(up.rejected)} of "
                           f"{len(measurements)} reports")
    lo, hi = first // TIME_PRECISION, last // TIME_PRECISION
    query = pt.task.profile.flow.query_interval(pt.task,
                                                Interval(Time(lo), Duration(hi - lo + 1)))
    async with Collector(pt.task, pt.collector_keypair, pt.collector_auth_token) as col:
        collection = await col.collect(query, timeout=timeout, max_poll_interval=0.1)
    if collection.report_count != len(measurements):
        raise HeatmapError(f"collected {collection.report_count} of {len(measurements)} "
                           "reports")
    return b64(bytes(pt.task.task_id)), [int(v) for v in collection.debiased_result]


def _local_shard(measurements: list[Any], length: int, settings: HeatmapSettings,
                 spec: dict[str, Any]) -> list[int]:
    """A shard without DAP: the exact sum plus noise of the law the DAP run adds."""
    eps = Fraction(repr(spec["epsilon"]))
    if spec["policy"] == "HistogramWithAggregatorLaplace":
        counts = [0] * length
        for m in measurements:
            counts[m] += 1
        return [int(v) for v in noisy_counts(counts, eps, "aggregator")]
    from ppm_reference.dp_policy.distributed import dp_shard_size, sample_polya

    sums = [sum(col) for col in zip(*measurements, strict=True)]
    out = [int(v) for v in noisy_counts(sums, eps, "client-polya", spec["sensitivity"])]
    # More shares than S_dp add Polya((S - S_dp)/S_dp) - Polya(same) (Theorem 4.2).
    s = int(spec["clients"])
    s_dp = dp_shard_size(s, Fraction(repr(spec["dropout"])))
    extra = Fraction(s - s_dp, s_dp)
    rate = eps / int(spec["sensitivity"])
    while extra > 0:
        part = min(extra, Fraction(1))
        out = [v + sample_polya(part, rate) - sample_polya(part, rate) for v in out]
        extra -= part
    return out


def _epsilon_json(eps: Fraction) -> float:
    """eps as a JSON number that reads back as exactly eps (the policies take decimals)."""
    value = float(eps)
    if Fraction(repr(value)) != eps:
        raise HeatmapError(f"epsilon {eps} is not a short decimal")
    return value


async def run_heatmap(population: Population, settings: HeatmapSettings,
                      aggs: Aggregators | None,
                      status: Callable[[str], None] = lambda _m: None) -> HeatmapResult:
    """Algorithm 2 over DAP (see the module docstring). With `aggs` None, no DAP: each
    shard's result is its exact sum plus noise drawn from the law the DAP run's noise
    has (`_local_shard`), for unit tests and quick parameter studies."""
    from ppm_reference.vdaf import registry

    settings.check(population)
    t0 = time.monotonic()
    rng = random.Random(settings.seed)
    multi = population.multi
    schedule = BudgetSchedule(Fraction(settings.epsilon), c=settings.c, b=settings.b,
                              shard_size=settings.shard_size, eq7=settings.eq7,
                              max_rounds=settings.max_rounds)
    tree = PrefixTree.full(population.depth, settings.start_level)
    rounds: list[RoundResult] = []
    U = settings.users_per_round
    smax = settings.shard_size or U
    while schedule.remaining > 0:
        leaves = tree.leaves()
        T = len(leaves)
        index = tree.leaf_index()
        scale = settings.gamma if multi else 1
        if settings.noise == "aggregator":
            delta = AGGREGATOR_SENSITIVITY
        else:
            delta = multi_location_sensitivity(settings.gamma, T) if multi \
                else settings.sensitivity
        sigma_rem = schedule.sigma_remaining(delta) / scale
        budget = schedule.next_round(U, T, sensitivity=delta, scale=scale)
        eps = budget.epsilon
        if settings.threshold == "target":
            threshold = settings.k * budget.sigma_target
        elif settings.threshold == "remaining":
            threshold = settings.k * sigma_rem
        else:
            threshold = settings.fixed_threshold
        chosen = rng.sample(range(len(population.users)), U)
        shards = [chosen[i:i + smax] for i in range(0, U, smax)]
        per_shard_sigma = tau(float(eps), delta) / scale
        noise_std = per_shard_sigma * math.sqrt(len(shards))
        if settings.noise == "aggregator":
            noise_std *= math.sqrt(2.0)      # both Aggregators add a full share
        else:                                # S shares drawn for S_dp: S / S_dp of it
            from ppm_reference.dp_policy.distributed import dp_shard_size

            s_full = min(U, smax)
            noise_std *= math.sqrt(s_full / dp_shard_size(s_full, settings.dropout))
        true_counts = [0.0] * T
        counts = [0.0] * T
        task_ids: list[str] = []
        status(f"round {len(rounds) + 1}: {T} leaves, eps {float(eps):.6g}, "
               f"{len(shards)} {'DAP task' if aggs else 'simulated shard'}(s) of "
               f"{min(U, smax)} users")
        for shard in shards:
            users = [population.users[i] for i in shard]
            vdaf: Any = None
            if settings.noise == "aggregator":
                if aggs is not None:
                    vdaf = registry.build("Prio3Histogram",
                                          {"length": T, "chunk_length": None})
                spec: dict[str, Any] = {"policy": "HistogramWithAggregatorLaplace",
                                        "epsilon": _epsilon_json(eps)}
                measurements: list[Any] = [one_hot_index(tree, index, u[0]) for u in users]
                for m in measurements:
                    true_counts[m] += 1
            else:
                m_clip = clip_modulus(settings, len(users), scale, per_shard_sigma * scale)
                if aggs is not None:
                    vdaf = registry.build("Prio3SumVec", {"length": T,
                                                          "max_measurement": m_clip - 1,
                                                          "chunk_length": None})
                spec = {"policy": "SumVecWithClientPolyaShares",
                        "epsilon": _epsilon_json(eps), "clients": len(users),
                        "sensitivity": delta, "dropout": float(Fraction(settings.dropout))}
                if multi:
                    measurements = [multi_location_vector(tree, index, u, settings.gamma)
                                    for u in users]
                    for u in users:
                        for cell in u:
                            true_counts[one_hot_index(tree, index, cell)] += 1.0 / len(u)
                else:
                    measurements = []
                    for u in users:
                        vec = [0] * T
                        i = one_hot_index(tree, index, u[0])
                        vec[i] = 1
                        true_counts[i] += 1
                        measurements.append(vec)
            if aggs is None:
                task_id = ""
                result = _local_shard(measurements, T, settings, spec)
            else:
                try:
                    task_id, result = await _dap_shard(aggs, vdaf, spec, measurements,
                                                       settings.timeout)
                except HeatmapError:
                    raise
                except Exception as exc:   # noqa: BLE001 - one clear line for the caller
                    raise HeatmapError(f"round {len(rounds) + 1}: {type(exc).__name__}: "
                                       f"{exc}") from exc
            task_ids.append(task_id)
            for i, v in enumerate(result):
                counts[i] += v / scale
        round_tree = tree.copy()
        splits, collapses = (0, 0) if budget.last else tree.update(counts, threshold)
        rounds.append(RoundResult(len(rounds) + 1, T, U, len(shards), eps,
                                  budget.epsilon_target, budget.sigma_target, threshold,
                                  noise_std, splits, collapses, task_ids, counts,
                                  true_counts, round_tree))
        if budget.last:
            break
    final = rounds[-1]
    cells, weights = population.location_weights()
    truth = true_density(cells, population.depth, weights)
    private = spread(final.tree, final.counts)
    return HeatmapResult(settings, rounds, final.tree, final.counts,
                         metrics(private, truth), truth, private, schedule.total,
                         time.monotonic() - t0)


# -- the baselines of Section 5.1, for the benchmark ------------------------------------------


def noisy_counts(true_counts: Sequence[float], epsilon: Fraction, noise: str,
                 sensitivity: int = 1) -> list[float]:
    """True counts plus the summed noise the DAP run would add, drawn with the same exact
    samplers (the DAP result is the exact sum plus this noise): two discrete Laplace
    shares of scale 2/eps (aggregator) or one of scale Delta/eps, the law of the summed
    Pólya shares (client-polya, Theorem 4.2)."""
    if noise == "aggregator":
        scale = Fraction(AGGREGATOR_SENSITIVITY) / epsilon
        return [c + sample_discrete_laplace(scale) + sample_discrete_laplace(scale)
                for c in true_counts]
    scale = Fraction(sensitivity) / epsilon
    return [c + sample_discrete_laplace(scale) for c in true_counts]


def flat_baseline(population: Population, users: Sequence[int], epsilon: Fraction,
                  noise: str, level: int | None = None) -> tuple[Metrics, int]:
    """Section 5.1's flat one-hot encoding at `level` (default: full resolution):
    (metrics, vector length)."""
    level = population.depth if level is None else level
    tree = PrefixTree.full(population.depth, level)
    index = tree.leaf_index()
    counts = [0.0] * len(index)
    for u in users:
        counts[one_hot_index(tree, index, population.users[u][0])] += 1
    noisy = noisy_counts(counts, epsilon, noise)
    cells, weights = population.location_weights()
    truth = true_density(cells, population.depth, weights)
    return metrics(spread(tree, noisy), truth), len(index)


def hierarchical_baseline(population: Population, users: Sequence[int], epsilon: Fraction,
                          noise: str, private: bool = True) -> tuple[Metrics, int, int]:
    """Section 5.1's hierarchical one-hot encoding: every level 1..L with eps / L each,
    and the level with the lowest MSE against the truth (the paper's choice in Section
    6.2 -- an oracle, which flatters the baseline). (metrics, best level, total vector
    length). With `private=False`, no noise: the paper's non-private baseline."""
    cells, weights = population.location_weights()
    truth = true_density(cells, population.depth, weights)
    depth = population.depth
    best: tuple[Metrics, int] | None = None
    for level in range(1, depth + 1):
        tree = PrefixTree.full(depth, level)
        index = tree.leaf_index()
        counts = [0.0] * len(index)
        for u in users:
            counts[one_hot_index(tree, index, population.users[u][0])] += 1
        if private:
            counts = noisy_counts(counts, epsilon / depth, noise)
        m = metrics(spread(tree, counts), truth)
        if best is None or m.mse < best[0].mse:
            best = (m, level)
    assert best is not None
    return best[0], best[1], hierarchical_communication(depth)
