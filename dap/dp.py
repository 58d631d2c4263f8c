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
    {"policy": "SumVecWithClientPolyaShares", "epsilon": 1.0, "clients": 1000,
     "sensitivity": 1, "dropout": 0.05}

The last is the distributed discrete Laplace of seed 003 (`dp_policy.distributed`): each
Client adds a Pólya share and reduces modulo max_measurement + 1; `clients` is the batch
size S the shares are drawn for, `dropout` the fraction of them that may be missing.

The VDAF parameters (length, max_measurement, max_weight) come from the task's VDAF.
Because the extension is part of the TaskConfiguration, it is in the HPKE AAD of every
input and aggregate share: Client, Leader, Helper and Collector are bound to the same
policy, and an Aggregator with a different view cannot decrypt. An Aggregator refuses a
task whose policy it does not know or that does not fit the VDAF (`policy_from_spec`
raises ValueError).
"""

from __future__ import annotations

import json
import math
from typing import Any

POLICIES = (
    "HistogramWithAggregatorRandomization",
    "HistogramWithAggregatorLaplace",
    "SumVecWithAggregatorRandomization",
    "SumVecWithAggregatorLaplace",
    "MultiHotHistogramWithClientRandomization",
    "SumVecWithClientPolyaShares",
)
MULTIHOT_CLIENT_RANDOMIZATION = "MultiHotHistogramWithClientRandomization"

#: Defaults of the parameters a user may leave out.
DEFAULT_DELTA = 1e-9
DEFAULT_FP = 1e-9


class DpSpecError(ValueError):
    """A policy specification cannot be made from the parameters given. The message names
    the parameter as the specification does (`epsilon`, `delta`, `eps0`, `fp`, and the
    VDAF's `length`), so that a front end can substitute its own spelling."""


def make_spec(name: str | None, *, epsilon: float | None = None,
              delta: float | None = None, eps0: float | None = None,
              fp: float | None = None) -> dict[str, Any] | None:
    """The policy specification to bind into a task, with only the parameters the policy
    takes (absent delta and fp: DEFAULT_DELTA, DEFAULT_FP). None for no policy (`name`
    None or "none"). Raises DpSpecError for a missing or out-of-range parameter."""
    if name is None or name == "none":
        return None

    def need(value: float | None, parameter: str, positive: bool = True) -> float:
        if value is None:
            raise DpSpecError(f"DP policy {name} needs {parameter}")
        if not math.isfinite(value) or value <= 0 or (not positive and value >= 1):
            raise DpSpecError(f"{parameter} must be "
                              f"{'positive' if positive else 'in (0, 1)'}, got {value}")
        return float(value)

    spec: dict[str, Any] = {"policy": name}
    if name == MULTIHOT_CLIENT_RANDOMIZATION:
        spec["eps0"] = need(eps0, "eps0")
        spec["fp"] = need(DEFAULT_FP if fp is None else fp, "fp", positive=False)
    else:
        spec["epsilon"] = need(epsilon, "epsilon")
        if name.endswith("Randomization"):
            spec["delta"] = need(DEFAULT_DELTA if delta is None else delta, "delta",
                                 positive=False)
    return spec


def multihot_max_weight(eps0: float, length: int, fp: float) -> int:
    """The max weight `MultiHotHistogramWithClientRandomization` needs the VDAF to
    accept (draft-wang-ppm-differential-privacy Section 6.1.1)."""
    from dp_policy.policies import MultiHotHistogramWithClientRandomization

    return int(MultiHotHistogramWithClientRandomization(eps0, length, fp).max_weight)


def required_max_weight(spec: dict[str, Any] | None, vdaf_name: str,
                        length: int | None) -> int | None:
    """The max_weight the VDAF `vdaf_name` of `length` must have for the policy, or None
    when the policy does not fix it. Raises DpSpecError when the policy needs a
    Prio3MultihotCountVec and gets another VDAF, or no length."""
    if spec is None or spec.get("policy") != MULTIHOT_CLIENT_RANDOMIZATION:
        return None
    if vdaf_name != "Prio3MultihotCountVec":
        raise DpSpecError(f"DP policy {spec['policy']} applies to Prio3MultihotCountVec, "
                          f"not {vdaf_name}")
    if length is None:
        raise DpSpecError("Prio3MultihotCountVec needs length")
    return multihot_max_weight(spec["eps0"], length, spec["fp"])


def describe_spec(spec: dict[str, Any] | None) -> str:
    """A policy specification in one line: `Name(epsilon=1, delta=1e-09)`, or `none`."""
    if spec is None:
        return "none"
    order = ("epsilon", "delta", "eps0", "fp")
    keys = [k for k in order if k in spec] + sorted(k for k in spec
                                                     if k not in order and k != "policy")
    params = ", ".join(f"{k}={spec[k]:g}" if isinstance(spec[k], float) else f"{k}={spec[k]}"
                       for k in keys)
    return f"{spec['policy']}({params})"


def task_policy(task: Any) -> Any:
    """The policy object of a task's DP policy extension, or None."""
    if task.dp_policy is None:
        return None
    return policy_from_spec(decode_spec(task.dp_policy), task.vdaf())


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
        if name == "SumVecWithClientPolyaShares":
            from dp_policy.distributed import SumVecWithClientPolyaShares

            _need(vdaf_name, "Prio3SumVec", name)
            values = (spec["epsilon"], spec["clients"], spec.get("sensitivity", 1),
                      spec.get("dropout", 0))
            if not all(isinstance(v, int | float) and not isinstance(v, bool)
                       for v in values):
                raise ValueError(f"DP policy {name}: epsilon, clients, sensitivity and "
                                 "dropout must be numbers")
            epsilon, clients, sensitivity, dropout = values
            if clients != int(clients) or sensitivity != int(sensitivity):
                raise ValueError(f"DP policy {name}: clients and sensitivity must be "
                                 "integers")
            return SumVecWithClientPolyaShares(
                str(epsilon), int(clients), length, max_measurement,
                sensitivity=int(sensitivity), dropout=str(dropout), shares=shares,
                build_vdaf=False)
    except KeyError as exc:
        raise ValueError(f"DP policy {name} needs parameter {exc}") from None
    raise ValueError(f"unknown DP policy {name!r}; known: {POLICIES}")


def _need(vdaf_name: str, expected: str, policy: str) -> None:
    if vdaf_name != expected:
        raise ValueError(f"DP policy {policy} applies to {expected}, not {vdaf_name}")
