"""Seed 003's comparison (Table 1 / Table 3 style) on a synthetic city: the adaptive
algorithm over real DAP tasks with both noise options, beside the baselines of Section
5.1 (flat one-hot at full resolution, hierarchical one-hot with the oracle's best level,
and the non-private best level), and prints a table.

    .venv/bin/python benchmarks/heatmap.py [--users 50000] [--depth 7] [--per-round 2000]
        [--epsilon 1] [--runs 5] [--dap-runs 1]

The adaptive algorithm runs --dap-runs times over a Leader and a Helper on 127.0.0.1
(one DAP task per round, provisioned through the admin APIs) and --runs times with the
noise drawn locally from the same law (`run_heatmap(..., None)`). The baselines draw the noise the
DAP run would add with the same exact samplers (their vectors are 4^L and 4 + ... + 4^L
long: too long to be worth shipping through pure-Python Prio3 for a table), which gives
the same distribution of results. Each figure is the mean over --runs runs (fresh noise
and a fresh sample of users each run); Comm is the vector length a user sends, summed
over the rounds (the paper's communication measure).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

# The project root first: `benchmarks/vdaf.py` must not shadow the `vdaf` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ppm_reference.analytics.heatmap.data import synthetic_city  # noqa: E402
from ppm_reference.analytics.heatmap.metrics import Metrics  # noqa: E402
from ppm_reference.analytics.heatmap.run import (  # noqa: E402
    HeatmapSettings,
    flat_baseline,
    hierarchical_baseline,
    local_aggregators,
    run_heatmap,
)
from ppm_reference.analytics.heatmap.tree import flat_communication  # noqa: E402

Row = tuple[str, dict[str, float], float, str]


def mean_metrics(ms: list[Metrics]) -> dict[str, float]:
    return {k: statistics.fmean(getattr(m, k) for m in ms)
            for k in ("mse", "l1", "mape", "smape", "maape")}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=50000)
    ap.add_argument("--depth", type=int, default=7)
    ap.add_argument("--per-round", type=int, default=2000)
    ap.add_argument("--epsilon", default="1")
    ap.add_argument("--c", type=float, default=0.3)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dap-runs", type=int, default=1,
                    help="adaptive runs over DAP per noise option (0: none)")
    args = ap.parse_args()
    pop = synthetic_city(args.users, args.depth, seed=11)
    eps = Fraction(args.epsilon)
    rows: list[Row] = []

    async def adaptive(noise: str, runs: int, dap: bool) -> None:
        ms: list[Metrics] = []
        comm: list[int] = []
        secs: list[float] = []
        rounds: list[int] = []
        for run in range(runs):
            settings = HeatmapSettings(epsilon=args.epsilon, users_per_round=args.per_round,
                                       noise=noise, c=args.c, seed=100 + run)
            t0 = time.monotonic()
            if dap:
                async with local_aggregators() as aggs:
                    res = await run_heatmap(pop, settings, aggs)
            else:
                res = await run_heatmap(pop, settings, None)
            secs.append(time.monotonic() - t0)
            ms.append(res.metrics)
            comm.append(res.communication)
            rounds.append(len(res.rounds))
        how = f"DAP, {runs} run(s)" if dap else f"simulated, {runs} runs"
        rows.append((f"adaptive, {noise} ({how})", mean_metrics(ms), statistics.fmean(comm),
                     f"{statistics.fmean(rounds):.1f} rounds, {statistics.fmean(secs):.1f} s"))

    for noise in ("aggregator", "client-polya"):
        if args.dap_runs:
            await adaptive(noise, args.dap_runs, True)
        await adaptive(noise, args.runs, False)

    rng = random.Random(5)
    for noise in ("aggregator", "client-polya"):
        flat: list[Metrics] = []
        hier: list[Metrics] = []
        levels: list[int] = []
        for _ in range(args.runs):
            users = rng.sample(range(len(pop.users)), args.per_round)
            flat.append(flat_baseline(pop, users, eps, noise)[0])
            m, level, hier_comm = hierarchical_baseline(pop, users, eps, noise)
            hier.append(m)
            levels.append(level)
        rows.append((f"flat one-hot, {noise}", mean_metrics(flat),
                     flat_communication(args.depth), "full resolution"))
        rows.append((f"hierarchical one-hot, {noise}", mean_metrics(hier), hier_comm,
                     f"oracle best level {statistics.mode(levels)}"))
    plain: list[Metrics] = []
    plain_levels: list[int] = []
    for _ in range(args.runs):
        users = rng.sample(range(len(pop.users)), args.per_round)
        m, level, _ = hierarchical_baseline(pop, users, eps, "aggregator", private=False)
        plain.append(m)
        plain_levels.append(level)
    rows.append(("non-private (best level)", mean_metrics(plain), 2,
                 f"level {statistics.mode(plain_levels)}"))

    print(f"synthetic city: {args.users} users on a {1 << args.depth} x {1 << args.depth} "
          f"map; {args.per_round} users per query; epsilon {args.epsilon}; c {args.c}; "
          f"mean of {args.runs} runs")
    print(f"{'algorithm':<44} {'MSE':>10} {'L1':>7} {'MAPE':>7} {'sMAPE':>6} {'MAAPE':>6} "
          f"{'Comm':>9}  notes")
    for name, m, c, note in rows:
        print(f"{name:<44} {m['mse']:>10.3e} {m['l1']:>7.3f} {m['mape']:>7.3f} "
              f"{m['smape']:>6.3f} {m['maape']:>6.3f} {c:>9,.0f}  {note}")


def run() -> Any:
    return asyncio.run(main())


if __name__ == "__main__":
    run()
