"""Prio3L1BoundSum in DAP tasks (draft-ietf-ppm-l1-bound-sum-02 Section 4): its
`Prio3L1BoundSumConfig` codec, the profiles that run it (dap-18 and dap-19, the VDAF-18
wire; dap-09 runs VDAF-08 and refuses it), exact aggregates end to end over real HTTP, a
cheating Client's over-bound report rejected by the Aggregators, and the
L1BoundSumWithAggregatorLaplace DP policy."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.dap.codec import DecodeError
from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.dp import policy_from_spec
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.provision import new_task
from ppm_reference.dap.task import TaskError
from ppm_reference.dp_policy import policies
from ppm_reference.vdaf import circuits, registry
from ppm_reference.vdaf.prio3 import Prio3L1BoundSum
from tests.dap_harness import AggregatorPair, Proto
from tests.test_dap_e2e import (
    ASYNC,
    SYNC,
    aggregator_noise_tolerance,
    collect,
    discrete_laplace_pmf,
    query_for,
    sql,
    upload,
)

RUNS_IT = ("dap-19", "dap-18")


def _config_cls() -> Any:
    from ppm_reference.dap.profiles.dap18.task import Prio3L1BoundSumConfig

    return Prio3L1BoundSumConfig


# -- the configuration codec -------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1))
def test_property_config_roundtrip_and_layout(length: int, max_value: int,
                                             chunk: int) -> None:
    """uint32 length, uint64 max_value, uint32 chunk_length, network byte order
    (Section 4, Figure "VDAF Configuration Encoding")."""
    cls = _config_cls()
    data = cls(length, max_value, chunk).encode()
    assert data == length.to_bytes(4, "big") + max_value.to_bytes(8, "big") + \
        chunk.to_bytes(4, "big")
    assert cls.decode(data) == cls(length, max_value, chunk)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=40))
def test_property_config_decoder_is_strict(data: bytes) -> None:
    cls = _config_cls()
    if len(data) == 16:
        assert cls.decode(data).encode() == data
    else:
        with pytest.raises(DecodeError):
            cls.decode(data)


@pytest.mark.parametrize("name", RUNS_IT)
def test_task_carries_vdaf_type_7_and_round_trips(name: str) -> None:
    profile = get_profile(name)
    vdaf = profile.build_vdaf("Prio3L1BoundSum", {"length": 10, "max_value": 240,
                                                  "chunk_length": 9})
    pt = new_task(vdaf, "https://leader.example/", "https://helper.example/",
                  profile=profile)
    config = pt.task.configuration()
    assert config.vdaf_type == 0x00000007
    assert config.vdaf_configuration == bytes.fromhex("0000000a" "00000000000000f0" "00000009")
    back = profile.task_cls.from_config_bytes(bytes(pt.task.task_id), pt.task.config_bytes(),
                                              profile)
    assert registry.describe(back.vdaf()) == \
        "Prio3L1BoundSum(length=10, max_value=240, chunk_length=9)"


def test_invalid_configurations_are_refused() -> None:
    from ppm_reference.dap.profiles.dap18.task import vdaf_from_configuration

    profile = get_profile("dap-19")
    cls = _config_cls()
    for config, message in ((cls(0, 5, 1), "invalid Prio3L1BoundSum"),
                            (cls(3, 0, 1), "invalid Prio3L1BoundSum"),
                            (cls(3, 5, 0), "invalid Prio3L1BoundSum")):
        with pytest.raises(TaskError, match=message):
            vdaf_from_configuration(7, config.encode(), profile)


def test_dap09_refuses_it() -> None:
    """dap-09 runs VDAF-08, which has no Prio3L1BoundSum (and no VDAF type field)."""
    with pytest.raises(registry.RegistryError,
                       match="not a VDAF of draft-irtf-cfrg-vdaf-08 .VDAF-08.; "
                       "draft-ietf-ppm-l1-bound-sum-02 defines it on the VDAF-18 wire"):
        get_profile("dap-09").build_vdaf("Prio3L1BoundSum", {"length": 3, "max_value": 4})


# -- end to end ---------------------------------------------------------------------------

# Measurements on the boundary of the L1 ball (norm exactly max_value), inside, and zero.
MEASUREMENTS = [[10, 0, 0, 0], [0, 0, 0, 10], [1, 2, 3, 4], [0, 0, 0, 0], [5, 5, 0, 0],
                [2, 2, 2, 2], [0, 9, 0, 1]]


@pytest.mark.parametrize(("name", "mode", "helper"), [
    ("dap-19", BatchMode.TIME_INTERVAL, ASYNC),
    ("dap-19", BatchMode.LEADER_SELECTED, SYNC),
    ("dap-18", BatchMode.TIME_INTERVAL, SYNC),
])
def test_exact_aggregate(tmp_path: Path, name: str, mode: BatchMode,
                         helper: dict[str, Any]) -> None:
    proto = Proto(name)
    vdaf = proto.profile.build_vdaf("Prio3L1BoundSum", {"length": 4, "max_value": 10,
                                                        "chunk_length": 3})
    exact = [sum(m[j] for m in MEASUREMENTS) for j in range(4)]
    assert exact == [18, 18, 5, 17]

    async def run() -> None:
        async with AggregatorPair(tmp_path, helper_overrides=helper) as pair:
            pt = pair.provision(vdaf, batch_mode=mode, min_batch_size=5,
                                max_batch_size=len(MEASUREMENTS), profile=proto.profile)
            await upload(pair, pt, MEASUREMENTS)
            collection = await collect(pair, pt, query_for(pair, pt))
            assert collection.report_count == len(MEASUREMENTS)
            assert collection.aggregate_result == exact
            for state in (pair.leader_state, pair.helper_state):
                assert sql(state, "SELECT COUNT(*) FROM aggregated_reports") == \
                    [(len(MEASUREMENTS),)]
    asyncio.run(run())


def test_over_bound_report_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    """A cheating Client proves an encoding whose claimed norm (10) is not the sum of
    its components (12): the Aggregators' verification rejects it and the collection
    holds only the honest reports."""
    proto = Proto("dap-19")
    vdaf = proto.profile.build_vdaf("Prio3L1BoundSum", {"length": 4, "max_value": 10,
                                                        "chunk_length": 3})
    honest = MEASUREMENTS[:5]
    honest_encode = circuits.L1BoundSum.encode

    def cheat(self: circuits.L1BoundSum, measurement: list[int]) -> list[int]:
        if sum(measurement) <= self.max_value:
            return honest_encode(self, measurement)
        enc = circuits.encode_range_checked_int
        out = [b for v in measurement for b in enc(self.field, v, self.max_value)]
        return out + enc(self.field, self.max_value, self.max_value)

    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(vdaf, min_batch_size=len(honest), profile=proto.profile)
            monkeypatch.setattr(circuits.L1BoundSum, "encode", cheat)
            async with pair.client(pt) as client:
                result = await client.upload([*honest, [6, 6, 0, 0]])
            monkeypatch.setattr(circuits.L1BoundSum, "encode", honest_encode)
            # DAP-19 uploads are accepted as a whole; verification happens later.
            assert result.accepted == len(honest) + 1
            collection = await collect(pair, pt, query_for(pair, pt))
            assert collection.report_count == len(honest)
            assert collection.aggregate_result == \
                [sum(m[j] for m in honest) for j in range(4)]
    asyncio.run(run())


# -- DP -------------------------------------------------------------------------------------


def test_policy_sensitivity_is_independent_of_length() -> None:
    for length in (1, 8, 1000):
        p = policies.L1BoundSumWithAggregatorLaplace(1.0, length, 7)
        assert p.l1_sensitivity == 14
        assert p.scale >= 14.0 and p.achieved_epsilon <= 1.0
        assert p.l1_sensitivity == circuits.L1BoundSum(p.vdaf.field, length, 7, 1) \
            .sensitivity()[0]
    # SumVec with the same per-coordinate bound grows with the length.
    assert policies.SumVecWithAggregatorLaplace(1.0, 1000, 7).l1_sensitivity == 7000


def test_policy_fits_only_its_vdaf() -> None:
    spec = {"policy": "L1BoundSumWithAggregatorLaplace", "epsilon": 1.0}
    l1 = registry.build("Prio3L1BoundSum", {"length": 3, "max_value": 4})
    assert isinstance(policy_from_spec(spec, l1), policies.L1BoundSumWithAggregatorLaplace)
    with pytest.raises(ValueError, match="applies to Prio3L1BoundSum, not Prio3SumVec"):
        policy_from_spec(spec, registry.build("Prio3SumVec", {"length": 3,
                                                              "max_measurement": 4}))
    with pytest.raises(ValueError, match="needs parameter 'epsilon'"):
        policy_from_spec({"policy": "L1BoundSumWithAggregatorLaplace"}, l1)


def test_dp_laplace_end_to_end(tmp_path: Path) -> None:
    """The debiased result is within the tolerance of test_dap_e2e (the smallest t >= 6
    std with P(|error| > t) <= 1e-10 per coordinate, for the sum of the two Aggregators'
    discrete Laplace noises): false failure probability at most 3e-10 (3 coordinates)."""
    proto = Proto("dap-19")
    vdaf: Prio3L1BoundSum = proto.profile.build_vdaf(
        "Prio3L1BoundSum", {"length": 3, "max_value": 2, "chunk_length": 2})
    measurements = [[2, 0, 0]] * 40 + [[1, 1, 0]] * 10 + [[0, 0, 1]] * 5
    exact = [sum(m[j] for m in measurements) for j in range(3)]
    spec = {"policy": "L1BoundSumWithAggregatorLaplace", "epsilon": 4.0}

    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(vdaf, min_batch_size=len(measurements), dp_policy=spec,
                                profile=proto.profile)
            policy = pair.collector(pt).policy
            assert isinstance(policy, policies.L1BoundSumWithAggregatorLaplace)
            assert policy.scale == 1.0  # 2 * max_value / epsilon
            tol = aggregator_noise_tolerance(discrete_laplace_pmf(policy.scale))
            assert tol < max(exact) / 2  # losing the largest coordinate would fail
            await upload(pair, pt, measurements)
            collection = await collect(pair, pt, query_for(pair, pt))
            assert collection.report_count == len(measurements)
            for got, want in zip(collection.debiased_result, exact, strict=True):
                assert abs(got - want) <= tol, (collection.debiased_result, exact, tol)
    asyncio.run(run())
