"""Does the Client's sharding time depend on the measurement? (issue 12)

    .venv/bin/python benchmarks/client_timing.py [--reps N] [--only SUBSTRING] [--json]

A network observer who times a Client's upload learns what its sharding time tells. For
each VDAF this shards contrasting measurements (sparse against dense, one bucket
against another, light against heavy) in interleaved order, the same fresh-randomness
reports for each, and prints the median and minimum per measurement for two provers:

* before: the wire polynomials of the proof are extended by the value-driven heuristic
  (`vdaf.flp.extend_polys` without a plan: a sparse wire takes a cheaper path), the
  prover of the project before issue 12;
* after: the prover's plan (`Valid.prover_wire_plans`), fixed by the circuit and its
  parameters: every measurement takes the same path with the same number of
  operations.

What remains in "after" is CPython's big-integer arithmetic, whose cost depends on the
size of the operands (a product with 0 or 1 is cheaper than one of two 128-bit
elements): a few per cent, not the factor two of the heuristic.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ppm_reference.vdaf import flp, registry  # noqa: E402


@dataclass(frozen=True)
class Case:
    label: str
    name: str
    params: dict[str, Any]
    measurements: dict[str, Any]


CASES = (
    Case("Prio3SumVec(1000, max 1)", "Prio3SumVec",
         {"length": 1000, "max_measurement": 1, "chunk_length": 31},
         {"sparse (all 0)": [0] * 1000, "dense (all 1)": [1] * 1000}),
    Case("Prio3SumVec(100, max 255)", "Prio3SumVec",
         {"length": 100, "max_measurement": 255, "chunk_length": 28},
         {"all 0": [0] * 100, "all 255": [255] * 100}),
    Case("Prio3Sum(max 2^32-1)", "Prio3Sum", {"max_measurement": 2**32 - 1},
         {"0": 0, "2^32-1": 2**32 - 1}),
    Case("Prio3Histogram(1000)", "Prio3Histogram", {"length": 1000, "chunk_length": 31},
         {"bucket 0": 0, "bucket 999": 999}),
    Case("Prio3MultihotCountVec(1000, w 28)", "Prio3MultihotCountVec",
         {"length": 1000, "max_weight": 28, "chunk_length": 31},
         {"weight 0": [False] * 1000, "weight 28": [k < 28 for k in range(1000)]}),
)


@contextmanager
def heuristic_prover() -> Iterator[None]:
    """The prover before issue 12: `extend_polys` ignores the plan."""
    original = flp.extend_polys

    def value_driven(field: Any, polys: Any, n: int, num_calls: int | None = None,
                     plan: Any = None) -> list[list[int]]:
        return original(field, polys, n, num_calls)

    flp.extend_polys = value_driven
    try:
        yield
    finally:
        flp.extend_polys = original


def shard_ms(vdaf: Any, measurement: Any, nonce: bytes, rand: bytes) -> float:
    t0 = time.perf_counter()
    vdaf.shard(b"benchmark", measurement, nonce, rand)
    return (time.perf_counter() - t0) * 1e3


def run_case(case: Case, reps: int, prover: Callable[[], Any]) -> dict[str, Any]:
    vdaf = registry.build(case.name, case.params, shares=2)
    times: dict[str, list[float]] = {label: [] for label in case.measurements}
    with prover():
        for m in case.measurements.values():
            shard_ms(vdaf, m, os.urandom(vdaf.NONCE_SIZE), os.urandom(vdaf.RAND_SIZE))
        for _ in range(reps):
            nonce, rand = os.urandom(vdaf.NONCE_SIZE), os.urandom(vdaf.RAND_SIZE)
            for label, m in case.measurements.items():  # interleaved: same load for each
                times[label].append(shard_ms(vdaf, m, nonce, rand))
    out = {label: {"median_ms": statistics.median(t), "min_ms": min(t)}
           for label, t in times.items()}
    medians = [v["median_ms"] for v in out.values()]
    minima = [v["min_ms"] for v in out.values()]
    # On a loaded machine the minimum is the steadier figure; both are printed.
    return {"per_measurement": out, "ratio": max(medians) / min(medians),
            "ratio_of_minima": max(minima) / min(minima)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=15, help="reports per measurement")
    parser.add_argument("--only", help="run only the cases whose label contains this")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    rows = []
    for case in CASES:
        if args.only and args.only not in case.label:
            continue
        rows.append({"vdaf": case.label,
                     "before": run_case(case, args.reps, heuristic_prover),
                     "after": run_case(case, args.reps, nullcontext),
                     "reps": args.reps})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"Client shard time per measurement, median (min) over {args.reps} reports, ms")
    print(f"{'VDAF':34} {'measurement':16} {'before':>15} {'after':>15}")
    for row in rows:
        for label in row["before"]["per_measurement"]:
            b = row["before"]["per_measurement"][label]
            a = row["after"]["per_measurement"][label]
            print(f"{row['vdaf']:34} {label:16} "
                  f"{b['median_ms']:7.2f} ({b['min_ms']:5.2f}) "
                  f"{a['median_ms']:7.2f} ({a['min_ms']:5.2f})")
        before, after = row["before"], row["after"]
        print(f"{'':34} {'slowest/fastest':16} {before['ratio']:7.2f} "
              f"({before['ratio_of_minima']:5.2f}) {after['ratio']:7.2f} "
              f"({after['ratio_of_minima']:5.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
