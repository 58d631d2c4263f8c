"""DP policies in DAP tasks.

draft-wang-ppm-differential-privacy leaves "integration of a DpPolicy into DAP" as a
TODO (its Section 5.2). This project binds a policy to a task with a private-use task
extension, `DP_POLICY` = 0xFF00, whose data is the canonical JSON (sorted keys, no
spaces, UTF-8) of a policy specification such as

    {"policy": "HistogramWithAggregatorRandomization", "epsilon": 0.906, "delta": 1e-9}
    {"policy": "HistogramWithAggregatorLaplace", "epsilon": 1.0}
    {"policy": "SumVecWithAggregatorRandomization", "epsilon": 1.0, "delta": 1e-9}
    {"policy": "SumVecWithAggregatorLaplace", "epsilon": 1.0}
    {"policy": "MultiHotHistogramWithClientRandomization", "eps0": 6.5, "fp": 1e-9}

The VDAF parameters (length, max_measurement, max_weight) come from the task's VDAF.
Because the extension is part of the TaskConfiguration, it is in the HPKE AAD of every
input and aggregate share: Client, Leader, Helper and Collector are bound to the same
policy, and an Aggregator with a different view cannot decrypt. An Aggregator refuses a
task whose policy it does not know or that does not fit the VDAF (`policy_from_spec`
raises ValueError).
"""

from __future__ import annotations

import json
from typing import Any

from dap.profiles.dap18.messages import TaskExtensionType

DP_POLICY_EXTENSION = int(TaskExtensionType.DP_POLICY)

POLICIES = (
    "HistogramWithAggregatorRandomization",
    "HistogramWithAggregatorLaplace",
    "SumVecWithAggregatorRandomization",
    "SumVecWithAggregatorLaplace",
    "MultiHotHistogramWithClientRandomization",
)


def encode_spec(spec: dict[str, Any]) -> bytes:
    """Canonical JSON of a policy specification (the extension data)."""
    if spec.get("policy") not in POLICIES:
        raise ValueError(f"unknown DP policy {spec.get('policy')!r}; known: {POLICIES}")
    return json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()


def decode_spec(data: bytes) -> dict[str, Any]:
    try:
        spec = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"DP policy extension is not JSON: {exc}") from None
    if not isinstance(spec, dict) or encode_spec(spec) != bytes(data):
        raise ValueError("DP policy extension is not a canonical JSON object")
    return spec


def policy_from_spec(spec: dict[str, Any], vdaf: Any) -> Any:
    """Build the policy object for the task's VDAF. Raises ValueError if the policy is
    unknown, its parameters are missing, or it does not fit the VDAF."""
    from dp_policy import policies
    from vdaf import registry

    name = spec.get("policy")
    # The registry name, so that a VDAF-08 task (dap-09) takes the same policies. For the
    # policies, the test-only VDAF-08 MultiHotHistogram (bit vectors of at most max_count
    # ones) is VDAF-18's MultihotCountVec (at most max_weight ones).
    vdaf_name = registry.name_of(vdaf)
    vdaf_name = {"Prio3MultiHotHistogram": "Prio3MultihotCountVec"}.get(vdaf_name, vdaf_name)
    params = registry.parameters_of(vdaf)
    length = params.get("length", 0)
    shares = vdaf.SHARES
    # VDAF-08 gives SumVec a bit width and MultiHotHistogram a max_count.
    max_measurement = params.get("max_measurement", 0)
    if "bits" in params:
        max_measurement = (1 << params["bits"]) - 1
    max_weight = params.get("max_weight", params.get("max_count"))
    try:
        if name == "HistogramWithAggregatorRandomization":
            _need(vdaf_name, "Prio3Histogram", name)
            return policies.HistogramWithAggregatorRandomization(
                float(spec["epsilon"]), float(spec["delta"]), length, shares=shares)
        if name == "HistogramWithAggregatorLaplace":
            _need(vdaf_name, "Prio3Histogram", name)
            return policies.HistogramWithAggregatorLaplace(float(spec["epsilon"]), length,
                                                           shares=shares)
        if name == "SumVecWithAggregatorRandomization":
            _need(vdaf_name, "Prio3SumVec", name)
            return policies.SumVecWithAggregatorRandomization(
                float(spec["epsilon"]), float(spec["delta"]), length,
                max_measurement, shares=shares)
        if name == "SumVecWithAggregatorLaplace":
            _need(vdaf_name, "Prio3SumVec", name)
            return policies.SumVecWithAggregatorLaplace(float(spec["epsilon"]), length,
                                                        max_measurement, shares=shares)
        if name == "MultiHotHistogramWithClientRandomization":
            _need(vdaf_name, "Prio3MultihotCountVec", name)
            policy = policies.MultiHotHistogramWithClientRandomization(
                spec["eps0"], length, float(spec["fp"]))
            if policy.max_weight != max_weight:
                raise ValueError(f"{name}(eps0={spec['eps0']}, length={length}, "
                                 f"fp={spec['fp']}) needs max_weight {policy.max_weight}, the "
                                 f"task's VDAF has {max_weight}")
            return policy
    except KeyError as exc:
        raise ValueError(f"DP policy {name} needs parameter {exc}") from None
    raise ValueError(f"unknown DP policy {name!r}; known: {POLICIES}")


def _need(vdaf_name: str, expected: str, policy: str) -> None:
    if vdaf_name != expected:
        raise ValueError(f"DP policy {policy} applies to {expected}, not {vdaf_name}")
