"""Issue 12: the Client draws its DP noise once per measurement. A Leader that refuses a
report for its HPKE configuration (`outdated_config`; `hpke_unknown_config_id` in DAP-19;
the `outdatedConfig` problem in DAP-09) gets the report again, re-encrypted, with the
same noisy measurement: two independent RAPPOR(eps0) copies would leave the Client about
2 eps0-DP against colluding Aggregators.

The Leader here answers so because its HPKE key is replaced after the Client cached the
configuration: to the Client that is indistinguishable from a Leader faking the answer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.dap.client import Client
from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.core.rand import OS_RNG
from ppm_reference.dap.core.store import HpkeKeyState
from ppm_reference.dap.core.tasks import add_hpke_key
from ppm_reference.dp_policy import policies
from tests.dap_harness import PROTOS, AggregatorPair, Proto


class RecordingFlow:
    """The profile's ClientFlow, recording the measurement of every report generated
    (what is shared and encrypted: the noisy measurement)."""

    def __init__(self, flow: Any) -> None:
        self._flow = flow
        self.measurements: list[list[int]] = []

    def generate_report(self, task: Any, measurement: Any, **kwargs: Any) -> Any:
        self.measurements.append([int(b) for b in measurement])
        return self._flow.generate_report(task, measurement, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._flow, name)


def replace_leader_key(pair: AggregatorPair) -> None:
    st = pair.leader_state
    with st.datastore.transaction() as tx:
        old = [k.config_id for k in tx.list_hpke_keys()]
        add_hpke_key(tx, HpkeKeyState.ACTIVE, rng=OS_RNG)
        for config_id in old:
            tx.delete_hpke_key(config_id)
    st.invalidate_keyring()


@pytest.mark.parametrize("proto", PROTOS, ids=[p.name for p in PROTOS])
def test_retry_after_outdated_config_reuses_the_noisy_measurement(tmp_path: Path,
                                                                  proto: Proto) -> None:
    # eps0 = 1 flips each of the 48 bits with probability p = 0.269: two independent
    # noisings of one measurement agree with probability (p^2 + (1-p)^2)^48 < 1e-10, so
    # a Client that re-noised on retry fails this test (false-pass probability < 2e-10).
    eps0, length, fp = 1.0, 48, 1e-9
    policy = policies.MultiHotHistogramWithClientRandomization(eps0, length, fp)
    vdaf = proto.multihot(length, policy.max_weight, 7)
    spec = {"policy": "MultiHotHistogramWithClientRandomization", "eps0": eps0, "fp": fp}

    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(vdaf, batch_mode=BatchMode.TIME_INTERVAL, min_batch_size=2,
                                dp_policy=spec, profile=proto.profile)
            async with Client(pt.task, clock=pair.clock) as client:
                await client.hpke_configs()          # cached: the key about to go away
                replace_leader_key(pair)
                flow = RecordingFlow(client.flow)
                client.flow = flow
                result = await client.upload([3, 17])
            assert result.rejected == {} and result.accepted == 2
            # Two reports refused, then the same two noisy measurements re-encrypted.
            assert len(flow.measurements) == 4
            first, retry = flow.measurements[:2], flow.measurements[2:]
            assert retry == first
            # The aggregate is of those noisy measurements, and only of them.
            async with pair.collector(pt) as collector:
                collection = await collector.collect(pair.current_interval_query(pt),
                                                     timeout=30, max_poll_interval=0.05)
            assert collection.report_count == 2
            assert list(collection.aggregate_result) == \
                [a + b for a, b in zip(*retry, strict=True)]
    asyncio.run(run())

