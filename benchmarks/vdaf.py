"""Per-report Prio3 timings: shard, and verify (all aggregators' verify_init, then
verifier_shares_to_message, then all aggregators' verify_next).

    .venv/bin/python benchmarks/vdaf.py [--reps N] [--only SUBSTRING] [--json]

Prints the median (and minimum) over N reports with fresh OS randomness per report, after
one warm-up report.

With the libprio-rs peer built (`python -m ppm_reference.interop.peers build libprio18`), the same
operations on the same measurements are timed inside that process (prio 0.18, Rust,
`interop/peers/libprio18`), in the same run, and the table gets their medians and the
ratio ours / theirs. Without it that column is absent, and a note says so.

The baseline is the draft's pure-Python reference implementation measured on these
machines for Prio3Histogram(length 1000, chunk 31): about 130 ms shard
and 77 ms verify. Targets for the same instance: shard under 6 ms, verify under 5 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ppm_reference.interop import peers  # noqa: E402
from ppm_reference.interop.peers import libprio  # noqa: E402
from ppm_reference.vdaf.vectors import VdafLike, lookup_instance  # noqa: E402

PEER = "libprio18"

# The draft's pure-Python reference on these machines, and our targets (ms).
REFERENCE_MS = {"Prio3Histogram(1000)": (130.0, 77.0)}
TARGET_MS = {"Prio3Histogram(1000)": (6.0, 5.0)}


@dataclass(frozen=True)
class Case:
    label: str
    instance: str
    params: dict[str, Any]
    measurement: Callable[[int], Any]  # report number -> a valid measurement


CASES = (
    Case("Prio3Count", "Prio3Count", {"shares": 2}, lambda i: i % 2),
    Case(
        "Prio3Sum(max 2^32-1)", "Prio3Sum", {"shares": 2, "max_measurement": 2**32 - 1},
        lambda i: (i * 2654435761) % 2**32,
    ),
    Case(
        "Prio3Histogram(1000)", "Prio3Histogram",
        {"shares": 2, "length": 1000, "chunk_length": 31},
        lambda i: (i * 7919) % 1000,
    ),
    Case(
        "Prio3SumVec(1000, max 1)", "Prio3SumVec",
        {"shares": 2, "length": 1000, "max_measurement": 1, "chunk_length": 31},
        lambda i: [(i + k) % 2 for k in range(1000)],
    ),
    Case(
        "Prio3MultihotCountVec(1000, w 28)", "Prio3MultihotCountVec",
        {"shares": 2, "length": 1000, "max_weight": 28, "chunk_length": 31},
        lambda i: [(k * 37 + i) % 1000 < 28 for k in range(1000)],
    ),
)


def time_report(vdaf: VdafLike, measurement: Any, verify_key: bytes) -> tuple[float, float]:
    """(shard seconds, verify seconds) for one report."""
    ctx = b"benchmark"
    nonce = os.urandom(vdaf.NONCE_SIZE)
    rand = os.urandom(vdaf.RAND_SIZE)
    t0 = time.perf_counter()
    (public_share, input_shares) = vdaf.shard(ctx, measurement, nonce, rand)
    t1 = time.perf_counter()
    states, shares = [], []
    for j in range(vdaf.SHARES):
        (state, share) = vdaf.verify_init(
            verify_key, ctx, j, None, nonce, public_share, input_shares[j]
        )
        states.append(state)
        shares.append(share)
    message = vdaf.verifier_shares_to_message(ctx, None, shares)
    for state in states:
        vdaf.verify_next(ctx, state, message)
    t2 = time.perf_counter()
    return (t1 - t0, t2 - t1)


def run_case(case: Case, reps: int) -> dict[str, Any]:
    vdaf = lookup_instance(case.instance).build(case.params)
    verify_key = os.urandom(vdaf.VERIFY_KEY_SIZE)
    time_report(vdaf, case.measurement(0), verify_key)  # warm-up (tables, caches)
    shard, verify = [], []
    for i in range(reps):
        (s, v) = time_report(vdaf, case.measurement(i + 1), verify_key)
        shard.append(s * 1e3)
        verify.append(v * 1e3)
    return {
        "vdaf": case.label,
        "reps": reps,
        "shard_ms": statistics.median(shard),
        "shard_min_ms": min(shard),
        "verify_ms": statistics.median(verify),
        "verify_min_ms": min(verify),
        "reference_ms": REFERENCE_MS.get(case.label),
        "target_ms": TARGET_MS.get(case.label),
    }


def run_peer(cases: list[Case], reps: int) -> dict[str, dict[str, float]] | None:
    """libprio-rs's medians and minima (ms) of the same operations on the same
    measurements, one process for every case; None when the peer is not built."""
    exe = peers.binary(PEER)
    if not exe.exists():
        return None
    batch = []
    for case in cases:
        vdaf = lookup_instance(case.instance).build(case.params)
        batch.append({
            "op": "bench", "vdaf": libprio.vdaf_spec(vdaf), "ctx": b"benchmark".hex(),
            "verify_key": os.urandom(vdaf.VERIFY_KEY_SIZE).hex(), "warmup": 1,
            "measurements": [libprio.measurement_json(case.measurement(i))
                             for i in range(reps + 1)],
        })
    out = {}
    for case, result in zip(cases, libprio.run(exe, batch), strict=True):
        if "error" in result:
            raise libprio.PeerError(f"{PEER} on {case.label}: {result['error']}")
        shard = [ns / 1e6 for ns in result["shard_ns"]]
        verify = [ns / 1e6 for ns in result["verify_ns"]]
        out[case.label] = {
            "shard_ms": statistics.median(shard), "shard_min_ms": min(shard),
            "verify_ms": statistics.median(verify), "verify_min_ms": min(verify),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=20, help="reports per VDAF (default 20)")
    parser.add_argument("--only", help="run only the cases whose label contains this")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.only or args.only in c.label]
    rows = [run_case(c, args.reps) for c in cases]
    theirs = run_peer(cases, args.reps)
    version = libprio.crate_version(PEER)
    for row in rows:
        row["libprio_rs"] = theirs[row["vdaf"]] if theirs is not None else None
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"per report, median (min) over {args.reps} reports, 2 aggregators")
    if theirs is None:
        print(f"note: no libprio-rs column: the {PEER} peer is not built "
              f"(python -m ppm_reference.interop.peers build {PEER})")
        peer_head = ""
    else:
        print(f"libprio-rs: prio {version} (Rust, release build), median over the same "
              "measurements in the same run; ratio = ours / theirs")
        peer_head = f" {'prio shard':>10} {'prio verify':>11} {'ratio s/v':>12}"
    print(f"{'VDAF':36} {'shard ms':>16} {'verify ms':>16}{peer_head}   reference / target")
    for row in rows:
        shard = f"{row['shard_ms']:.2f} ({row['shard_min_ms']:.2f})"
        verify = f"{row['verify_ms']:.2f} ({row['verify_min_ms']:.2f})"
        peer = ""
        if row["libprio_rs"] is not None:
            ps, pv = row["libprio_rs"]["shard_ms"], row["libprio_rs"]["verify_ms"]
            ratio = f"{row['shard_ms'] / ps:.0f}x/{row['verify_ms'] / pv:.0f}x"
            peer = f" {ps:>10.3f} {pv:>11.3f} {ratio:>12}"
        note = ""
        if row["reference_ms"]:
            rs, rv = row["reference_ms"]
            ts, tv = row["target_ms"]
            met = row["shard_ms"] < ts and row["verify_ms"] < tv
            note = (
                f"ref {rs:.0f} / {rv:.0f} ms ({rs / row['shard_ms']:.0f}x / "
                f"{rv / row['verify_ms']:.0f}x faster); target < {ts:.0f} / < {tv:.0f} ms: "
                + ("met" if met else "NOT met")
            )
        print(f"{row['vdaf']:36} {shard:>16} {verify:>16}{peer}   {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
