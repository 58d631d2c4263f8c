"""`ppm analytics recipe ...` and `ppm analytics ngrams` (paper 004).

    ppm analytics recipe size FILE [--json]     the one-hot vector length ("bins")
    ppm analytics recipe check FILE [--json]    validate; what the recipe asks
    ppm analytics recipe schema                 the JSON Schema of a recipe
    ppm analytics ngrams [options] [--json]     multi-round n-gram discovery over DAP
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from ppm_reference.dap.cli.errors import CliError, run_command, usage_error
from ppm_reference.dap.cli.output import emit_json


def _load(path: str) -> Any:
    from ppm_reference.analytics.federated.recipe import RecipeError, load_recipe

    try:
        return load_recipe(path)
    except RecipeError as exc:
        raise usage_error(str(exc)) from None


def _recipe_json(recipe: Any) -> dict[str, Any]:
    from ppm_reference.analytics.federated.recipe import CombinationType

    def describe(t: Any) -> dict[str, Any]:
        out = {"name": t.name, "dataType": type(t).__name__, "bins": t.bins}
        if isinstance(t, CombinationType):
            out["parts"] = [describe(p) for p in t.parts]
        elif hasattr(t, "leaves"):
            out["leaves"] = [" ".join(leaf) for leaf in t.leaves]
            out["tokens"] = len(t.tokens)
        return out

    return {"ok": True, "recipe": recipe.recipe_id, "version": recipe.version,
            "analysis": recipe.analysis, "query": recipe.query,
            "fields": list(recipe.fields), "bins": recipe.bins,
            "encoding": describe(recipe.root),
            "privacy": None if recipe.privacy is None else recipe.privacy.to_json()}


def _cmd_size(args: argparse.Namespace) -> int:
    recipe = _load(args.file)
    if args.json:
        emit_json({"ok": True, "bins": recipe.bins, "recipe": recipe.recipe_id})
    else:
        print(recipe.bins)
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    recipe = _load(args.file)
    info = _recipe_json(recipe)
    if args.json:
        emit_json(info)
        return 0
    print(f"recipe {recipe.recipe_id} v{recipe.version}: analysis {recipe.analysis}")
    print(f"query  {recipe.query}  (fields: {', '.join(recipe.fields)})")

    def show(t: dict[str, Any], indent: str) -> None:
        extra = ""
        if "leaves" in t:
            extra = f": {len(t['leaves'])} leaves x ({t['tokens']} tokens + OOV + end)"
        print(f"{indent}{t['name']} {t['dataType']} {t['bins']} bins{extra}")
        for p in t.get("parts", []):
            show(p, indent + "  ")

    show(info["encoding"], "  ")
    print(f"bins   {recipe.bins}")
    p = info["privacy"]
    if p is None:
        print("privacy: none stated (a device refuses to answer it)")
    else:
        print(f"privacy: {p['randomizer']}, local epsilon {p['localEpsilon']}, aggregate "
              f"epsilon {p['aggregateEpsilon']} at delta {p['aggregateDelta']:g}, minimum "
              f"cohort {p['minCohort']}")
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    from ppm_reference.analytics.federated.recipe import RECIPE_SCHEMA

    print(json.dumps(RECIPE_SCHEMA, indent=2, sort_keys=True))
    return 0


# ---------------------------------------------------------------------------------------
# ppm analytics ngrams
# ---------------------------------------------------------------------------------------


def _lengths(text: str) -> tuple[int, int]:
    try:
        lo, _, hi = text.partition(",")
        out = (int(lo), int(hi or lo))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN,MAX (e.g. 2,4), got {text!r}"
                                         ) from None
    return out


def render(result: dict[str, Any]) -> str:
    lines = [f"{'round':>5}  {'task':<12}  {'vdaf':<22} {'bins':>5} {'devices':>8} "
             f"{'reports':>8} {'eps/rep':>8} {'thresh':>7}  found"]
    for r in result["rounds"]:
        found = " | ".join(f["ngram"] for f in r["found"][:6])
        if len(r["found"]) > 6:
            found += f" (+{len(r['found']) - 6})"
        lines.append(f"{r['round']:>5}  {r['task_id'][:12]:<12}  {r['vdaf']:<22} "
                     f"{r['bins']:>5} {r['cohort']:>8} {r['report_count']:>8} "
                     f"{r['epsilon_per_report']:>8.4g} {r['threshold']:>7.1f}  "
                     f"{len(r['found'])}: {found}")
    lines.append("")
    lines.append("planted n-grams (share of devices holding it):")
    for p in result["planted"]:
        lines.append(f"  {'found ' if p['found'] else 'MISSED'} {p['ngram']:<30} "
                     f"{100 * p['device_share']:5.1f}%")
    lines.append("discovered n-grams:")
    for d in result["discovered"]:
        kind = "planted" if d["planted"] else "part of a planted one" if d["relevant"] \
            else "NOT planted"
        lines.append(f"  {d['ngram']:<30} {100 * d['device_share']:5.1f}%  {kind}")
    lines.append(f"precision {result['precision']:.3f}   recall {result['recall']:.3f}   "
                 f"rounds {len(result['rounds'])}")
    pv = result["privacy"]
    local = pv.get("max_local_epsilon_per_report")
    lines.append(f"privacy spent per device (from the devices' accountants): epsilon max "
                 f"{pv['max_epsilon']:.4g}, mean {pv['mean_epsilon']:.4g} over at most "
                 f"{pv['max_reports']} report(s) at delta {result['settings']['delta']:g}; "
                 + (f"local epsilon {local:g} per report (replacement model)"
                    if local is not None else "no local DP (the Aggregators add the noise)"))
    lines.append(f"time {result['seconds']:.1f} s")
    return "\n".join(lines)


def _cmd_ngrams(args: argparse.Namespace) -> int:
    from ppm_reference.analytics.federated import ngrams

    local_budget = args.local_budget
    if args.no_local_budget:
        local_budget = None
    elif local_budget is None and args.mode == "rappor":
        local_budget = 5.0
    settings = ngrams.Settings(
        mode=args.mode, eps0=args.eps0, epsilon=args.epsilon, delta=args.delta,
        budget=args.budget, local_budget=local_budget, max_n=args.max_n,
        max_prefixes=args.max_prefixes, max_tokens=args.max_tokens, alpha=args.alpha,
        min_share=args.min_share, profile=args.profile)
    fleet = ngrams.FleetSpec(
        devices=args.devices, vocabulary=args.vocabulary, zipf=args.zipf,
        phrases_per_device=args.phrases_per_device, planted=args.planted,
        planted_lengths=args.planted_lengths, planted_share=args.planted_share,
        known_tokens=args.known_tokens, seed=args.seed)
    try:
        settings.check()
        from ppm_reference.dap.profiles import get_profile

        try:
            get_profile(args.profile)
        except ValueError as exc:
            raise ngrams.DiscoveryError(str(exc)) from None
        if args.devices < 1:
            raise ngrams.DiscoveryError("--devices must be at least 1")
    except ngrams.DiscoveryError as exc:
        raise usage_error(str(exc)) from None

    def status(message: str) -> None:
        if not args.json:
            print(message, file=sys.stderr, flush=True)

    try:
        result = asyncio.run(ngrams.run(
            fleet, settings, leader=args.leader, helper=args.helper,
            admin_token=args.admin_token, local=args.local, ledger=args.ledger,
            status=status))
    except ngrams.DiscoveryError as exc:
        raise CliError(str(exc)) from None
    out = result.to_json()
    if args.json:
        emit_json(out)
    else:
        print(render(out))
    return 0


def register(subparsers: Any) -> None:
    """Add `recipe` and `ngrams` under `ppm analytics`."""
    from ppm_reference.analytics.federated import ngrams

    p = subparsers.add_parser("recipe", help="recipes of federated queries (paper 004)",
                              description="Recipes: the schema of a query (paper 004, "
                              "Appendix B).")
    sub = p.add_subparsers(dest="recipe_command", metavar="COMMAND")
    for name, func, text in (("size", _cmd_size, "print the one-hot vector length"),
                             ("check", _cmd_check, "validate a recipe and describe it")):
        q = sub.add_parser(name, help=text, description=text)
        q.add_argument("file", metavar="FILE", help="recipe JSON file")
        q.add_argument("--json", action="store_true", help="print one JSON object")
        q.set_defaults(func=run_command(func))
    q = sub.add_parser("schema", help="print the JSON Schema of a recipe")
    q.add_argument("--json", action="store_true", help="(the output is JSON anyway)")
    q.set_defaults(func=run_command(_cmd_schema))

    def _no_command(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=_no_command)

    d = ngrams.Settings()
    f = ngrams.FleetSpec()
    n = subparsers.add_parser(
        "ngrams", help="interactive n-gram discovery over DAP (paper 004)",
        description="\n\n".join((ngrams.__doc__ or "").split("\n\n")[:4]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    n.add_argument("--devices", type=int, default=f.devices,
                   help=f"simulated devices (default {f.devices})")
    n.add_argument("--mode", choices=ngrams.MODES, default=d.mode,
                   help="rappor: Prio3MultihotCountVec with client RAPPOR (default); "
                   "histogram: Prio3Histogram with Aggregator noise")
    n.add_argument("--eps0", type=float, default=d.eps0,
                   help=f"rappor: symmetric one-hot parameter (default {d.eps0})")
    n.add_argument("--epsilon", type=float, default=d.epsilon,
                   help=f"histogram: the Aggregators' epsilon (default {d.epsilon})")
    n.add_argument("--delta", type=float, default=d.delta, help=f"default {d.delta:g}")
    n.add_argument("--budget", type=float, default=d.budget,
                   help="each device's allowed epsilon for the analysis (one report; "
                   f"default {d.budget})")
    n.add_argument("--local-budget", type=float, default=None,
                   help="each device's allowed local epsilon, replacement model (default "
                   "5, Table 1's n-gram field, in rappor mode; none in histogram mode)")
    n.add_argument("--no-local-budget", action="store_true",
                   help="devices require no local DP")
    n.add_argument("--max-n", type=int, default=None,
                   help="longest n-gram (rounds); default the longest planted one")
    n.add_argument("--max-prefixes", type=int, default=d.max_prefixes,
                   help=f"prefixes carried to the next round (default {d.max_prefixes})")
    n.add_argument("--max-tokens", type=int, default=d.max_tokens,
                   help=f"words of round 1 used as tokens (default {d.max_tokens})")
    n.add_argument("--alpha", type=float, default=d.alpha,
                   help=f"expected false discoveries per round (default {d.alpha})")
    n.add_argument("--min-share", type=float, default=d.min_share,
                   help="ignore buckets below this share of a round's reports (default "
                   f"{d.min_share})")
    n.add_argument("--vocabulary", type=int, default=f.vocabulary,
                   help=f"default {f.vocabulary}")
    n.add_argument("--zipf", type=float, default=f.zipf,
                   help=f"Zipf exponent (default {f.zipf})")
    n.add_argument("--phrases-per-device", type=int, default=f.phrases_per_device,
                   help=f"default {f.phrases_per_device}")
    n.add_argument("--planted", type=int, default=f.planted,
                   help=f"planted n-grams (default {f.planted})")
    n.add_argument("--planted-lengths", type=_lengths, default=f.planted_lengths,
                   metavar="MIN,MAX", help="their lengths (default 2,4)")
    n.add_argument("--planted-share", type=float, default=f.planted_share,
                   help=f"share of phrases that are planted (default {f.planted_share})")
    n.add_argument("--known-tokens", type=int, default=f.known_tokens,
                   help=f"round 1's tokens (default {f.known_tokens})")
    n.add_argument("--seed", type=int, default=f.seed,
                   help="seed of the simulated fleet (not of the protocol or the noise)")
    n.add_argument("--profile", default=d.profile, help=f"DAP profile (default {d.profile})")
    n.add_argument("--leader", help="external Leader (base URL; its admin API under it)")
    n.add_argument("--helper", help="external Helper")
    n.add_argument("--admin-token", help="the Aggregators' admin token")
    n.add_argument("--local", action="store_true",
                   help="no Aggregators: sum the reports in memory (the algorithm alone)")
    n.add_argument("--ledger", help="keep the devices' budget ledgers in this SQLite file")
    n.add_argument("--json", action="store_true", help="print one JSON object")
    n.set_defaults(func=run_command(_cmd_ngrams))
