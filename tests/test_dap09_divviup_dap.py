"""A real DAP-09 peer against our Aggregators: the divviup-ts client (`@divviup/dap` 0.9.1
from npm) uploads to our Leader, and our Collector recovers the exact aggregates.

For Prio3Count, Prio3Sum, Prio3Histogram and Prio3SumVec (dap-09 tasks, VDAF-08), a
Leader and a Helper run in this process over real HTTP on 127.0.0.1; the Node driver
(tests/interop_node_dap/dap_upload.mjs) fetches both HPKE configurations with
`hpke_config?task_id=` (it refuses any Content-Type but exactly
`application/dap-hpke-config-list`) and PUTs one report per measurement; the Leader and
the Helper aggregate them over DAP-09 (PUT aggregation jobs, DAP-Auth-Token); our
Collector PUTs a collection job, polls with POST and unshards.

The package is installed by `npm ci` into `$PPM_INTEROP_CACHE/dap-0.9.1` (see
tests/dap09_node.py); the tests skip with a visible reason when node or npm is missing
or the registry is unreachable.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.profiles.dap09 import DAP_09
from ppm_reference.dap.profiles.dap09 import messages as m09
from ppm_reference.vdaf.prio3 import Prio3CountV08, Prio3HistogramV08, Prio3SumV08, Prio3SumVecV08
from tests.dap09_node import run_dap_upload, task_id_b64
from tests.dap_harness import AggregatorPair

PRECISION = 60

CASES: dict[str, tuple[Any, dict[str, Any], list[Any], Any]] = {
    "Prio3Count": (Prio3CountV08(2), {"type": "Prio3Count"}, [1, 0, 1, 1, 0, 1], 4),
    "Prio3Sum": (Prio3SumV08(2, 8), {"type": "Prio3Sum", "bits": 8},
                 [0, 255, 17, 100, 3], 375),
    "Prio3Histogram": (Prio3HistogramV08(2, 5, 2),
                       {"type": "Prio3Histogram", "length": 5, "chunk_length": 2},
                       [0, 4, 4, 2, 1], [1, 1, 1, 0, 2]),
    "Prio3SumVec": (Prio3SumVecV08(2, 4, 3, 5),
                    {"type": "Prio3SumVec", "length": 4, "bits": 3, "chunk_length": 5},
                    [[0, 7, 1, 2], [7, 7, 0, 5], [3, 0, 6, 1]], [10, 14, 7, 8]),
}


def _query(batch_mode: BatchMode) -> m09.Query:
    if batch_mode == BatchMode.LEADER_SELECTED:
        return m09.Query.fixed_size(m09.FixedSizeQuery.current_batch())
    now = int(time.time()) // PRECISION * PRECISION
    return m09.Query.time_interval(m09.Interval(m09.Time(now - 5 * PRECISION),
                                                m09.Duration(10 * PRECISION)))


@pytest.mark.parametrize("batch_mode", [BatchMode.TIME_INTERVAL, BatchMode.LEADER_SELECTED],
                         ids=["time_interval", "fixed_size"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_divviup_client_uploads_to_our_leader(tmp_path: Path, name: str,
                                              batch_mode: BatchMode) -> None:
    vdaf, js, measurements, expected = CASES[name]
    result = asyncio.run(_run(tmp_path, vdaf, js, measurements, batch_mode))
    assert result.report_count == len(measurements)
    assert result.aggregate_result == expected
    if batch_mode == BatchMode.LEADER_SELECTED:
        assert result.batch_id is not None and len(result.batch_id) == 32


async def _run(tmp_path: Path, vdaf: Any, js: dict[str, Any], measurements: list[Any],
               batch_mode: BatchMode) -> Any:
    async with AggregatorPair(tmp_path) as pair:
        pt = pair.provision(vdaf, min_batch_size=len(measurements), profile=DAP_09,
                            batch_mode=batch_mode, time_precision=PRECISION)
        spec = {"leader": pair.leader_url, "helper": pair.helper_url,
                "task_id": task_id_b64(bytes(pt.task.task_id)),
                "time_precision": PRECISION, "vdaf": js, "measurements": measurements}
        out = await asyncio.to_thread(run_dap_upload, spec)
        assert out.get("uploaded") == len(measurements), out
        async with pair.collector(pt) as collector:
            return await collector.collect(_query(batch_mode), timeout=60)
