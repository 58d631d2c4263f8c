"""Storage amplification: how many datastore rows and bytes a report costs each
Aggregator, before and after the retention pass (`dap.core.retention`).

A Leader and a Helper run in this process (over HTTP on 127.0.0.1, `tests.dap_harness`).
The script uploads `--reports` valid reports and `--invalid` reports with a corrupted
Leader share (stored by the Leader, failed at aggregation) in requests of `--batch`
reports, waits until everything is aggregated, collects the batch, and prints, per
table and Aggregator, the rows and the bytes of its BLOB/TEXT columns, then runs the
retention pass with the clock moved `--age` seconds on (8 and 31 days: past the default
`job_retention`, then past `report_expiry_age`) and prints the table again.

    .venv/bin/python benchmarks/storage_amplification.py
    .venv/bin/python benchmarks/storage_amplification.py --vdaf histogram --reports 500

This is a measurement, not a test: nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppm_reference.dap.profiles import get_profile  # noqa: E402
from tests.dap_harness import AggregatorPair  # noqa: E402

TABLES = ["client_reports", "aggregation_jobs", "report_aggregations", "aggregated_reports",
          "batch_buckets", "collected_intervals", "collection_jobs", "aggregate_share_jobs",
          "batch_results"]


def table_sizes(path: str) -> dict[str, tuple[int, int]]:
    """Rows and bytes of the variable-length columns, per table."""
    conn = sqlite3.connect(path)
    out = {}
    try:
        for table in TABLES:
            try:
                cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            except sqlite3.OperationalError:
                continue
            if not cols:
                continue
            rows = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            size = " + ".join(f"COALESCE(LENGTH({c}), 0)" for c in cols)
            total = conn.execute(f"SELECT COALESCE(SUM({size}), 0) FROM {table}").fetchone()[0]
            out[table] = (int(rows), int(total))
    finally:
        conn.close()
    return out


def print_table(title: str, leader: dict[str, tuple[int, int]],
                helper: dict[str, tuple[int, int]], reports: int) -> None:
    print(f"\n{title}")
    print(f"{'table':<22}{'leader rows':>12}{'leader KiB':>12}{'helper rows':>12}"
          f"{'helper KiB':>12}")
    tot = [0, 0, 0, 0]
    for table in TABLES:
        lr, lb = leader.get(table, (0, 0))
        hr, hb = helper.get(table, (0, 0))
        if not (lr or hr) and table not in leader and table not in helper:
            continue
        tot = [tot[0] + lr, tot[1] + lb, tot[2] + hr, tot[3] + hb]
        print(f"{table:<22}{lr:>12}{lb / 1024:>12.1f}{hr:>12}{hb / 1024:>12.1f}")
    print(f"{'total':<22}{tot[0]:>12}{tot[1] / 1024:>12.1f}{tot[2]:>12}{tot[3] / 1024:>12.1f}")
    print(f"per report: leader {tot[0] / reports:.2f} rows {tot[1] / reports:.0f} B, "
          f"helper {tot[2] / reports:.2f} rows {tot[3] / reports:.0f} B")


async def run(args: argparse.Namespace, tmp: Path) -> None:
    offset = [0.0]

    def clock() -> float:
        return time.time() + offset[0]

    profile = get_profile(args.profile)
    async with AggregatorPair(tmp, clock=clock) as pair:
        if args.vdaf == "count":
            vdaf = profile.build_vdaf("Prio3Count", {})
            measurements: list[Any] = [i % 2 for i in range(args.reports)]
        else:
            vdaf = profile.build_vdaf("Prio3Histogram", {"length": 100, "chunk_length": 10})
            measurements = [i % 100 for i in range(args.reports)]
        pt = pair.provision(vdaf, min_batch_size=10, time_precision=3600, profile=profile)
        sent = 0
        async with pair.client(pt) as client:
            for i in range(0, len(measurements), args.batch):
                reports = await client.prepare(measurements[i:i + args.batch])
                sent += len(profile.flow.encode_upload(reports)[1])
                await client.upload_reports(reports)
            for i in range(0, args.invalid, args.batch):
                n = min(args.batch, args.invalid - i)
                bad = [_corrupt(r) for r in await client.prepare(measurements[:n])]
                sent += len(profile.flow.encode_upload(bad)[1])
                await client.upload_reports(bad)
        ls, hs = pair.leader_state, pair.helper_state
        for _ in range(6000):
            with ls.datastore.transaction() as tx:
                busy = tx.count_reports(pt.task.task_id, ("new", "in_job"))  # type: ignore
            if not busy:
                break
            await asyncio.sleep(0.05)
        async with pair.collector(pt) as collector:
            result = await collector.collect(pair.current_interval_query(pt), timeout=120,
                                             max_poll_interval=0.1)
        total = args.reports + args.invalid
        print(f"{args.vdaf}, {args.reports} valid + {args.invalid} invalid reports "
              f"({sent / 1024:.1f} KiB of upload bodies), collected {result.report_count}")
        print_table("after collection", table_sizes(pair.leader_config.datastore),
                    table_sizes(pair.helper_config.datastore), total)
        try:
            from ppm_reference.dap.core import retention
        except ImportError:
            return
        for age in args.age:
            offset[0] = age
            for st in (ls, hs):
                policy = retention.RetentionPolicy.from_config(st.config)
                with st.datastore.transaction() as tx:
                    retention.run_retention(tx, policy, st.clock(), get_profile)
            print_table(f"after a retention pass {age / 86400:.0f} days later "
                        f"(job_retention {policy.job_retention / 86400:.0f} d, "
                        f"report_expiry_age {policy.report_expiry_age / 86400:.0f} d)",
                        table_sizes(pair.leader_config.datastore),
                        table_sizes(pair.helper_config.datastore), total)


def _corrupt(report: Any) -> Any:
    ct = report.leader_encrypted_input_share
    payload = bytearray(ct.payload)
    payload[0] ^= 1
    return dataclasses.replace(report, leader_encrypted_input_share=dataclasses.replace(
        ct, payload=bytes(payload)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vdaf", choices=["count", "histogram"], default="count")
    p.add_argument("--reports", type=int, default=1000)
    p.add_argument("--invalid", type=int, default=200)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--profile", default="dap-18")
    p.add_argument("--age", type=float, nargs="+", default=[8 * 86400.0, 31 * 86400.0],
                   help="seconds the clock moves on before each retention pass")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
