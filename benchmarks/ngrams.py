"""Interactive n-gram discovery (paper 004) at full size over a real Leader and Helper.

For each mode (rappor: Prio3MultihotCountVec with client RAPPOR; histogram:
Prio3Histogram with Aggregator noise), a simulated fleet (default 100,000 devices, Zipf
vocabulary, planted n-grams) answers one round per n-gram length; each round is a DAP
task provisioned through the Aggregators' admin APIs, the devices' reports go through the
DAP Client and the Collector's result decides the next round. The Leader and the Helper
run in this process on 127.0.0.1 (as `ppm analytics ngrams` does), so the times include
report generation, upload, aggregation on both Aggregators and collection on one
machine.

    .venv/bin/python benchmarks/ngrams.py                      # both modes, 100,000 devices
    .venv/bin/python benchmarks/ngrams.py --devices 20000 --modes rappor
    .venv/bin/python benchmarks/ngrams.py --local              # no Aggregators (algorithm)

Prints one table (and with --json one JSON object per run). Not a test: nothing here
asserts a timing or a result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppm_reference.analytics.federated import ngrams  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=100_000)
    ap.add_argument("--modes", default="rappor,histogram")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--local", action="store_true", help="in-memory sum, no Aggregators")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for mode in args.modes.split(","):
        fleet = ngrams.FleetSpec(devices=args.devices, seed=args.seed)
        settings = ngrams.Settings(mode=mode,
                                   local_budget=5.0 if mode == "rappor" else None)
        result = asyncio.run(ngrams.run(
            fleet, settings, local=args.local,
            status=lambda m: print(f"  {m}", file=sys.stderr, flush=True)))
        out = result.to_json()
        if args.json:
            print(json.dumps(out, sort_keys=True))
        rows.append((mode, out))
    print(f"{'mode':<10} {'devices':>8} {'rounds':>6} {'reports':>8} {'bins/round':<18} "
          f"{'precision':>9} {'recall':>6} {'eps/device':>10} {'local eps':>9} "
          f"{'s/round':<24} {'total s':>8}")
    for mode, out in rows:
        rounds = out["rounds"]
        bins = "/".join(str(r["bins"]) for r in rounds)
        secs = "/".join(f"{r['seconds']:.0f}" for r in rounds)
        reports = sum(r["report_count"] for r in rounds)
        pv = out["privacy"]
        local = pv["max_local_epsilon_per_report"]
        print(f"{mode:<10} {out['devices']:>8} {len(rounds):>6} {reports:>8} {bins:<18} "
              f"{out['precision']:>9.3f} {out['recall']:>6.3f} {pv['max_epsilon']:>10.4f} "
              f"{'none' if local is None else f'{local:g}':>9} {secs:<24} "
              f"{out['seconds']:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
