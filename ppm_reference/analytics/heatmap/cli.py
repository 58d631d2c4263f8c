"""`ppm analytics heatmap`: seed 003's adaptive location heatmap over a real Leader and
Helper, one DAP task per round (`analytics.heatmap.run`).

    ppm analytics heatmap [--users N --depth L | --data FILE] [--epsilon E]
        [--users-per-round U] [--noise aggregator|client-polya] [--out MAP.png] [--json]

Without `--leader`/`--helper`/`--admin-token` it starts its own Leader and Helper on
127.0.0.1 (in this process, over HTTP) and provisions each round's task through their
admin APIs; with them, it uses running Aggregators. `--simulate` skips DAP and draws the
same noise locally (for parameter studies).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from fractions import Fraction
from typing import Any

from ppm_reference.dap.cli.errors import CliError, run_command, usage_error
from ppm_reference.dap.cli.output import emit_json


def _settings(args: argparse.Namespace) -> Any:
    from ppm_reference.analytics.heatmap.run import HeatmapSettings

    return HeatmapSettings(
        epsilon=args.epsilon, users_per_round=args.users_per_round, noise=args.noise,
        c=args.c, b=args.b, threshold=args.threshold,
        k=args.k,
        fixed_threshold=args.fixed_threshold, shard_size=args.shard_size,
        dropout=args.dropout, sensitivity=1, gamma=args.gamma, clip_bits=args.clip_bits,
        eq7=args.eq7, max_rounds=args.max_rounds, seed=args.seed)


def _population(args: argparse.Namespace) -> Any:
    from ppm_reference.analytics.heatmap.data import DataError, load_points, synthetic_city

    if not 1 <= args.depth <= 10:
        raise usage_error("--depth must be in [1, 10]")
    if args.data:
        try:
            return load_points(args.data, args.depth)
        except DataError as exc:
            raise usage_error(str(exc)) from None
    if args.users < 1:
        raise usage_error("--users must be at least 1")
    if args.locations_per_user < 1:
        raise usage_error("--locations-per-user must be at least 1")
    return synthetic_city(args.users, args.depth, seed=args.seed,
                          locations_per_user=args.locations_per_user)


OPTION_WORDS = {
    "users per round": "--users-per-round", "epsilon": "--epsilon", "noise": "--noise",
    "threshold": "--threshold", "eq7": "--eq7", "shard size": "--shard-size",
    "c, b and k": "--c, --b and --k", "max rounds": "--max-rounds",
    "gamma and sensitivity": "--gamma", "clip bits": "--clip-bits",
    "users with several locations": "users with several locations",
}


def _reword(message: str) -> str:
    for word, option in OPTION_WORDS.items():
        if message.startswith(word):
            return option + message[len(word):]
    return message


def render(result: Any) -> str:
    rows = [f"{'round':>5} {'leaves':>6} {'users':>6} {'shards':>6} {'epsilon':>10} "
            f"{'threshold':>9} {'noise std':>9} {'split':>5} {'collapse':>8}"]
    for r in result.rounds:
        rows.append(f"{r.round:>5} {r.leaves:>6} {r.users:>6} {r.shards:>6} "
                    f"{float(r.epsilon):>10.6g} {r.threshold:>9.4g} {r.noise_std:>9.4g} "
                    f"{r.splits:>5} {r.collapses:>8}")
    m = result.metrics
    spent, total = result.epsilon_spent, result.epsilon_total
    rows += [
        "",
        f"epsilon spent {float(spent):g} of {float(total):g}"
        + (" (exactly)" if spent == total else f" ({spent} of {total})"),
        f"{len(result.counts)} leaves; {result.communication} coordinates per user summed "
        f"over {len(result.rounds)} rounds; {result.seconds:.1f} s",
        f"MSE {m.mse:.4g}   L1 {m.l1:.4g}   MAPE {m.mape:.4g}   sMAPE {m.smape:.4g}   "
        f"MAAPE {m.maape:.4g}",
    ]
    return "\n".join(rows)


def _cmd_heatmap(args: argparse.Namespace) -> int:
    from ppm_reference.analytics.heatmap.run import (
        Aggregators,
        HeatmapError,
        local_aggregators,
        run_heatmap,
    )

    population = _population(args)
    settings = _settings(args)
    try:
        settings.check(population)
        Fraction(settings.dropout)
    except (ValueError, ZeroDivisionError) as exc:
        raise usage_error(_reword(str(exc))) from None
    remote = (args.leader, args.helper, args.admin_token)
    if any(remote) and not all(remote):
        raise usage_error("give all of --leader, --helper and --admin-token, or none")
    if args.simulate and any(remote):
        raise usage_error("--simulate runs without Aggregators: drop --leader/--helper")
    if args.out:
        from ppm_reference.analytics.heatmap.plot import _pyplot

        try:
            _pyplot()
        except RuntimeError as exc:
            raise CliError(str(exc), 2) from None

    def status(message: str) -> None:
        if not args.json and not args.quiet:
            print(message, file=sys.stderr)

    async def go() -> Any:
        if args.simulate:
            return await run_heatmap(population, settings, None, status)
        if all(remote):
            aggs = Aggregators(args.leader, args.helper, args.admin_token)
            return await run_heatmap(population, settings, aggs, status)
        async with local_aggregators() as aggs:
            status(f"leader {aggs.leader_url}   helper {aggs.helper_url}")
            return await run_heatmap(population, settings, aggs, status)

    try:
        result = asyncio.run(go())
    except HeatmapError as exc:
        raise CliError(str(exc), 1) from None
    obj = result.as_dict()
    obj["population"] = {"users": len(population.users), "depth": population.depth,
                         "source": args.data or "synthetic",
                         "multi_location": population.multi}
    obj["dap"] = not args.simulate
    if args.out:
        from ppm_reference.analytics.heatmap.plot import draw

        m = result.metrics
        title = (f"{len(population.users)} users, {settings.noise} noise, epsilon "
                 f"{float(result.epsilon_total):g}: {len(result.counts)} leaves, "
                 f"MSE {m.mse:.3g}")
        draw(args.out, result.true_map, result.private_map, result.tree, title)
        obj["picture"] = str(args.out)
    if args.json:
        emit_json(obj)
    else:
        print(render(result))
        if args.out:
            print(f"wrote {args.out}")
    return 0


def register(subparsers: Any) -> None:
    """Add `heatmap` under `ppm analytics`."""
    p = subparsers.add_parser(
        "heatmap", help="adaptive location heatmap over DAP (Bagdasaryan et al.)",
        description="Seed 003's adaptive hierarchical histograms: each round one DAP task "
        "over the prefix tree's current leaves, refined where counts are high.")
    g = p.add_argument_group("population")
    g.add_argument("--users", type=int, default=20000, help="synthetic city size")
    g.add_argument("--depth", type=int, default=6, help="map of 2^L x 2^L cells (6)")
    g.add_argument("--locations-per-user", type=int, default=1,
                   help="several locations per user (Section 5.7)")
    g.add_argument("--data", help="file of coordinates: x,y or x,y,user per line")
    g.add_argument("--seed", type=int, default=1, help="simulation seed")
    g = p.add_argument_group("algorithm")
    g.add_argument("--epsilon", default="1", help="total budget (1)")
    g.add_argument("--users-per-round", type=int, default=2000, help="U (2000)")
    g.add_argument("--noise", choices=("aggregator", "client-polya"), default="aggregator",
                   help="Aggregators' discrete Laplace on Prio3Histogram, or the paper's "
                   "Clients' Polya shares on a range-checked Prio3SumVec")
    g.add_argument("--c", type=float, default=0.3, help="Equation 7's calibration (0.3)")
    g.add_argument("--b", type=float, default=2.0, help="Equation 9's expansion (2)")
    g.add_argument("--threshold", choices=("target", "remaining", "fixed"),
                   default="target", help="split threshold: k sigma~ (Algorithm 2), "
                   "k sigma_rem (Equation 6) or fixed")
    g.add_argument("--k", type=float, default=2.0,
                   help="threshold multiplier (2, Equation 6's k)")
    g.add_argument("--fixed-threshold", type=float, default=10.0)
    g.add_argument("--shard-size", type=int, help="S_max: users per DAP task (U)")
    g.add_argument("--dropout", default="0", help="client-polya: dropout provisioned")
    g.add_argument("--gamma", type=int, default=100, help="Section 5.7 scaling (100)")
    g.add_argument("--clip-bits", type=int, help="client-polya: m = 2^bits (auto)")
    g.add_argument("--eq7", choices=("shards", "printed"), default="shards",
                   help="reading of Equation 7's shard term (see budget.py)")
    g.add_argument("--max-rounds", type=int, default=12)
    g = p.add_argument_group("aggregators")
    g.add_argument("--leader", help="a running Leader's URL (its admin API serves tasks)")
    g.add_argument("--helper", help="a running Helper's URL")
    g.add_argument("--admin-token", help="the Aggregators' admin token")
    g.add_argument("--simulate", action="store_true",
                   help="no DAP: the same noise drawn locally")
    p.add_argument("--out", help="write the true and private heatmaps to this PNG")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_command(_cmd_heatmap))
