"""The protocol core's CPU per aggregation job beside the floor, without HTTP and without
the servers' threads and scheduling (issue 14): how much of `dap_e2e.py`'s CPU per report
the core itself costs, by job size.

One task per job, each task seen for the first time by both Aggregators (as in
`dap_e2e.py`'s rows with many tasks, where a task holds one job), unless ``--warm``
(every task loaded beforehand). For each job, in this process and one thread, on fresh
SQLite datastores (``synchronous=FULL``, as the servers), the thread's CPU of:

* ``upload``: the Leader stores the job's reports, one UploadRequest
  (`dap.server.upload.store_upload`: decoding, checks, one transaction);
* ``create``: the Leader makes the job (`core.leader.reports_ready` and
  `create_aggregation_jobs`: its HPKE open and VDAF initialization, one transaction);
* ``helper``: the Helper answers the init request (`dap.server.helper._init_job`: HPKE
  open, VDAF initialization, the replay check and the commit of the output shares);
* ``process``: the Leader processes the answer (`core.leader.
  process_aggregation_job_response`: its VDAF continuation and the commit);

and right after it the floor of the same reports (`dap_e2e.py`'s: HPKE open of both input
shares and the VDAF preparation of both Aggregators, alone). The ratio is the sum of the
phases over the sum of the floors: measured side by side, it stays steady on a machine
whose speed drifts by 1.5x within minutes (where `dap_e2e.py`'s floor, measured before and
after a row, does not).

What `dap_e2e.py` measures beyond this is the servers' own: the HTTP exchanges (an upload
request, the Leader's request to the Helper and its answer), the background worker's
passes, the hand-offs between the event loop and the worker threads, and the datastore
reads of the scheduling.

    .venv/bin/python benchmarks/dap_core.py                       # Count, 10/100/500
    .venv/bin/python benchmarks/dap_core.py --vdaf count,histogram --reports 6000

This is a benchmark, not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dap_e2e as e2e  # noqa: E402  (its workload, datastores and floor)

from ppm_reference.dap.common import Role  # noqa: E402
from ppm_reference.dap.core import leader as lcore  # noqa: E402
from ppm_reference.dap.core.rand import OS_RNG  # noqa: E402
from ppm_reference.dap.server import helper as hserver  # noqa: E402
from ppm_reference.dap.server.common import AppState  # noqa: E402
from ppm_reference.dap.server.config import AggregatorConfig  # noqa: E402
from ppm_reference.dap.server.upload import store_upload  # noqa: E402
from ppm_reference.dap.storage import AggregationJobState  # noqa: E402

PHASES = ("upload", "create", "helper", "process")


def floor_of(w: e2e.Workload, items: list[tuple[int, Any]]) -> float:
    """`dap_e2e.py`'s floor pass on `items` (thread CPU seconds for all of them)."""
    t0 = time.thread_time()
    e2e._floor_pass(w, items)
    return time.thread_time() - t0


def run_row(name: str, per_job: int, reports: int, warm: bool) -> dict[str, Any]:
    jobs = max(1, reports // per_job)
    w = e2e.make_workload(name, jobs * per_job, jobs)
    workdir = Path(tempfile.mkdtemp(prefix="dap-core-"))
    try:
        states = {}
        for role in ("leader", "helper"):
            store = e2e.Store("sqlite", workdir, role, "")
            e2e.provision(w, role, store)
            cfg = AggregatorConfig(role=role, datastore=store.location, worker_threads=0)
            states[role] = AppState(cfg, store.open())
        lst, hst = states["leader"], states["helper"]
        lkeys, hkeys = lst.keyring(), hst.keyring()
        by_task: dict[int, list[tuple[int, Any]]] = {}
        for ti, report in w.reports:
            by_task.setdefault(ti, []).append((ti, report))
        if warm:
            for pt in w.tasks:
                lst.task(bytes(pt.task.task_id), Role.LEADER)
                hst.task(bytes(pt.task.task_id), Role.HELPER)
        sizes = lcore.JobSizes(1, per_job, 0.0, jobs_per_pass=1)
        spent = dict.fromkeys(PHASES, 0.0)
        floor = 0.0
        tt = time.thread_time
        for ti, body in e2e.upload_bodies(w, per_job):
            tid = bytes(w.tasks[ti].task.task_id)
            t0 = tt()
            task = lst.task(tid, Role.LEADER)
            store_upload(lst, task, lkeys, body)
            t1 = tt()
            now = time.time() + 1
            with lst.datastore.transaction() as tx:
                new = lcore.reports_ready(tx, task, now, sizes)
                made = lcore.create_aggregation_jobs(tx, task, lkeys, now, sizes, 600,
                                                     rng=OS_RNG, new_reports=new,
                                                     lease=(b"\x01" * 16, now + 600))
            t2 = tt()
            (job,) = made
            answer = hserver._init_job(hst, hst.task(tid, Role.HELPER), job.request, False,
                                       hkeys, None)
            t3 = tt()
            with lst.datastore.transaction() as tx:
                fresh = tx.get_leased_aggregation_job(job.task_id, job.job_id,
                                                      job.lease_token, with_request=False)
                assert fresh is not None and answer.response is not None
                fresh.request = job.request
                fresh.response = None
                fresh.lease_expiry = 0.0
                state = lcore.process_aggregation_job_response(tx, task, fresh,
                                                               answer.response)
            t4 = tt()
            if state != AggregationJobState.FINISHED:
                raise RuntimeError(f"job ended {state}")
            for phase, a, b in zip(PHASES, (t0, t1, t2, t3), (t1, t2, t3, t4), strict=True):
                spent[phase] += b - a
            floor += floor_of(w, by_task[ti])
        with lst.datastore.read() as tx:
            aggregated = tx.count_reports(w.tasks[0].task.task_id,
                                          ("aggregated",))  # type: ignore[arg-type]
        if aggregated != per_job:
            raise RuntimeError(f"{aggregated} of {per_job} reports aggregated")
        for st in states.values():
            st.close()
            st.datastore.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    total = sum(spent.values())
    return {"vdaf": w.label, "per_job": per_job, "jobs": jobs,
            **{p: spent[p] / jobs * 1000 for p in PHASES},
            "total": total / jobs * 1000, "floor": floor / jobs * 1000,
            "ratio": total / floor, "over": (total - floor) / (jobs * per_job) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vdaf", default="count", help="comma-separated: count,histogram")
    parser.add_argument("--reports-per-job", default="10,100,500",
                        help="comma-separated job sizes (one task per job)")
    parser.add_argument("--reports", type=int, default=3000, help="reports per row")
    parser.add_argument("--warm", action="store_true",
                        help="load every task before the row (task loading not measured)")
    args = parser.parse_args()
    rows = [run_row(name, int(k), args.reports, args.warm)
            for name in args.vdaf.split(",") for k in args.reports_per_job.split(",")]
    print(f"\nCPU per job (ms, this thread), one task per job, tasks "
          f"{'loaded before' if args.warm else 'seen for the first time'}; SQLite FULL")
    head = (f"{'VDAF':20s} {'r/job':>5s} {'jobs':>5s} " + " ".join(f"{p:>8s}" for p in PHASES)
            + f" {'total':>8s} {'floor':>8s} {'ratio':>6s} {'over/report':>12s}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['vdaf']:20s} {r['per_job']:5d} {r['jobs']:5d} "
              + " ".join(f"{r[p]:8.3f}" for p in PHASES)
              + f" {r['total']:8.3f} {r['floor']:8.3f} {r['ratio']:6.2f} {r['over']:12.3f}")
    print("ratio = (upload + create + helper + process) / floor, summed over the row's jobs; "
          "over/report: the ms per report beyond the floor. No HTTP, no server threads: "
          "benchmarks/dap_e2e.py measures the servers.")


if __name__ == "__main__":
    main()
