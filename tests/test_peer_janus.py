"""Janus 0.7 (DAP-09, VDAF-08) against our Leader and Helper, every party a real process
on 127.0.0.1.

Janus publishes its client and collector on crates.io (``janus_client`` and
``janus_collector`` 0.7.145, with ``janus_core`` / ``janus_messages``); its aggregator
(``janus_aggregator``) and its interop binaries (``janus_interop_binaries``) are not
published, so Janus can be run here as a Client and as a Collector only. The drivers are
``interop/peers/janus07`` (built by :mod:`interop.peers`, skipped only without cargo).

For Prio3Count, Sum, SumVec and Histogram, in both DAP-09 query types:

- ``janus_uploads``: Janus's client uploads to our Leader (it fetches both HPKE
  configurations, PUTs each report and takes any 2xx as success); our Collector gets the
  exact aggregate;
- ``janus_collects``: our Client uploads; Janus's collector collects from our Leader
  (PUT of the CollectionReq, which it wants answered exactly 201; POST polls; exactly
  ``Content-Type: application/dap-collection``; decryption of both aggregate shares under
  its own AAD) and prints the exact aggregate. On fixed_size it asks for the current
  batch, then for the same batch by its ID.

SumVec and Histogram name ``chunk_length`` explicitly on both sides (it is part of the
VDAF's definition, and the defaults of the two implementations need not agree).

One Leader/Helper pair serves the module; each case has its own task.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.dap.client import Client
from ppm_reference.dap.collector import Collector
from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.provision import (
    DatastoreTarget,
    ProvisionedTask,
    b64,
    new_task,
    provision,
    unb64,
)
from ppm_reference.dap.server.config import AggregatorConfig
from tests.dap_harness import Proto, server_processes
from tests.peers import peer_binary

DAP_09 = get_profile("dap-09")
PROTO = Proto("dap-09")
PRECISION = 3600
N = 6  # reports per case (and min_batch_size)

# name -> (VDAF-08 parameters, as both implementations take them; measurements)
CASES: dict[str, tuple[dict[str, Any], list[Any]]] = {
    "count": ({"type": "Prio3Count"}, [1, 0, 1, 1, 0, 1]),
    "sum": ({"type": "Prio3Sum", "bits": 8}, [3, 200, 17, 0, 255, 9]),
    "sumvec": ({"type": "Prio3SumVec", "bits": 3, "length": 4, "chunk_length": 3},
               [[1, 2, 3, 4], [7, 0, 0, 1], [0, 0, 5, 6], [2, 2, 2, 2], [7, 7, 7, 7],
                [0, 1, 0, 1]]),
    "histogram": ({"type": "Prio3Histogram", "length": 5, "chunk_length": 2},
                  [0, 4, 2, 2, 1, 4]),
}
QUERY_TYPES = {"time_interval": BatchMode.TIME_INTERVAL,
               "fixed_size": BatchMode.LEADER_SELECTED}


def exact(spec: dict[str, Any], measurements: list[Any]) -> Any:
    """The aggregate computed in the clear."""
    kind = spec["type"]
    if kind in ("Prio3Count", "Prio3Sum"):
        return sum(measurements)
    if kind == "Prio3Histogram":
        return [measurements.count(b) for b in range(spec["length"])]
    return [sum(m[j] for m in measurements) for j in range(spec["length"])]


def our_vdaf(spec: dict[str, Any]) -> Any:
    return DAP_09.build_vdaf(spec["type"], {k: v for k, v in spec.items() if k != "type"})


def our_measurements(spec: dict[str, Any], measurements: list[Any]) -> list[Any]:
    return [bool(m) for m in measurements] if spec["type"] == "Prio3Count" else measurements


@pytest.fixture(scope="module")
def janus() -> dict[str, Path]:
    return {"client": peer_binary("janus07", "janus07-client"),
            "collector": peer_binary("janus07", "janus07-collector")}


@pytest.fixture(scope="module")
def aggregators(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Our Leader and Helper (``ppm leader``, ``ppm helper``), shared by every case."""
    tmp = tmp_path_factory.mktemp("janus07")
    # retry_after 0: the collectors poll again at once (Janus's waits for the longer of
    # Retry-After and its own backoff).
    with server_processes(tmp, retry_after=0) as handle:
        handle["start"]()
        yield {name: AggregatorConfig.load(path)
               for name, path in handle["configs"].items()}


def new_case(aggregators: dict[str, Any], spec: dict[str, Any], query_type: str
             ) -> ProvisionedTask:
    targets = {role: DatastoreTarget(role, aggregators[role]) for role in ("leader", "helper")}
    fixed = QUERY_TYPES[query_type] == BatchMode.LEADER_SELECTED
    # fixed_size: max_batch_size = min_batch_size = N, so the one batch holds every report.
    pt = new_task(our_vdaf(spec), targets["leader"].url, targets["helper"].url,
                  profile=DAP_09, batch_mode=QUERY_TYPES[query_type], min_batch_size=N,
                  max_batch_size=N if fixed else None, time_precision=PRECISION)
    provision(pt, targets["helper"], targets["leader"])
    return pt


def run_peer(exe: Path, job: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run([str(exe), json.dumps(job)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"{exe.name} failed: {proc.stderr.strip()}"
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def interval_around_now() -> tuple[int, int]:
    """A time_interval batch (seconds) holding every report of the case: from one
    time_precision before the current one, three long."""
    now = int(time.time()) // PRECISION
    return (now - 1) * PRECISION, 3 * PRECISION


def wait_all_in_jobs(config: AggregatorConfig, pt: ProvisionedTask, n: int) -> None:
    """fixed_size: wait until the Leader has put all n reports into aggregation jobs (a
    collection job may otherwise take a batch before the last upload reaches it)."""
    deadline = time.monotonic() + 30
    task_id = bytes(pt.task.task_id)
    while time.monotonic() < deadline:
        with sqlite3.connect(f"file:{config.datastore}?mode=ro", uri=True) as db:
            states = dict(db.execute("SELECT state, COUNT(*) FROM client_reports "
                                     "WHERE task_id=? GROUP BY state", (task_id,)).fetchall())
        if sum(states.values()) == n and not states.get("new"):
            return
        time.sleep(0.05)
    raise AssertionError(f"the Leader did not put the {n} reports into jobs: {states}")


@pytest.mark.parametrize("query_type", list(QUERY_TYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_janus_uploads(janus: dict[str, Path], aggregators: dict[str, Any], case: str,
                       query_type: str) -> None:
    """Janus's client uploads to our Leader; our Collector gets the exact aggregate."""
    spec, measurements = CASES[case]
    pt = new_case(aggregators, spec, query_type)
    out = run_peer(janus["client"], {
        "task_id": b64(pt.task.task_id), "leader": pt.task.leader_aggregator_endpoint,
        "helper": pt.task.helper_aggregator_endpoint, "time_precision": PRECISION,
        "vdaf": spec, "measurements": measurements})
    assert out == {"uploaded": N}
    if query_type == "fixed_size":
        wait_all_in_jobs(aggregators["leader"], pt, N)
        query = PROTO.current_batch_query(pt)
    else:
        start, duration = interval_around_now()
        query = PROTO.interval_query(pt, start // PRECISION, duration // PRECISION)

    async def collect() -> Any:
        async with Collector(pt.task, pt.collector_keypair, pt.collector_auth_token) as c:
            return await c.collect(query, timeout=60, max_poll_interval=0.05)

    collection = asyncio.run(collect())
    assert collection.report_count == N
    assert collection.aggregate_result == exact(spec, measurements)


@pytest.mark.parametrize("query_type", list(QUERY_TYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_janus_collects(janus: dict[str, Path], aggregators: dict[str, Any], case: str,
                        query_type: str) -> None:
    """Our Client uploads; Janus's collector collects from our Leader, exactly."""
    spec, measurements = CASES[case]
    pt = new_case(aggregators, spec, query_type)

    async def upload() -> Any:
        async with Client(pt.task) as client:
            return await client.upload(our_measurements(spec, measurements))

    result = asyncio.run(upload())
    assert (result.accepted, result.rejected) == (N, {})
    job: dict[str, Any] = {
        "task_id": b64(pt.task.task_id), "leader": pt.task.leader_aggregator_endpoint,
        "auth_token": pt.collector_auth_token,
        "hpke_config": b64(pt.collector_keypair.config.encode()),
        "hpke_private_key": b64(pt.collector_keypair.private_key), "vdaf": spec,
        "poll_interval_ms": 50}
    want = exact(spec, measurements)
    if query_type == "time_interval":
        # Janus's collector sends its token as DAP-Auth-Token (the header DAP-09 Section
        # 3.1 cites) or Authorization: Bearer (its credentials' default, on fixed_size):
        # our Leader takes either.
        start, duration = interval_around_now()
        out = run_peer(janus["collector"], {
            **job, "auth_header": "DAP-Auth-Token",
            "query": {"type": "time_interval", "start": start, "duration": duration}})
        assert (out["report_count"], out["aggregate_result"]) == (N, want)
        assert out["batch_id"] is None
        # The Collection's interval: the reports' time_precision bucket, inside the query.
        first, length = out["interval"]
        assert first % PRECISION == 0 and length == PRECISION
        assert start <= first < start + duration
        return
    wait_all_in_jobs(aggregators["leader"], pt, N)
    out = run_peer(janus["collector"], {**job, "query": {"type": "fixed_size"}})
    assert (out["report_count"], out["aggregate_result"]) == (N, want)
    assert len(unb64(out["batch_id"])) == 32
    # The same batch, asked for by its ID in a new collection job: allowed although
    # max_batch_query_count is 1, since DAP-09 (Section 4.6.5, "Batch Validation")
    # counts the distinct aggregation parameters a batch was queried with.
    again = run_peer(janus["collector"], {
        **job, "query": {"type": "fixed_size", "batch_id": out["batch_id"]}})
    assert (again["report_count"], again["aggregate_result"], again["batch_id"]) == \
        (N, want, out["batch_id"])

