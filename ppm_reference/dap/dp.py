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
    {"policy": "L1BoundSumWithAggregatorLaplace", "epsilon": 1.0}
    {"policy": "SumVecWithClientPolyaShares", "epsilon": 1.0, "clients": 1000,
     "sensitivity": 1, "dropout": 0.05}

The last is the distributed discrete Laplace of seed 003 (`dp_policy.distributed`): each
Client adds a Pólya share and reduces modulo max_measurement + 1; `clients` is the batch
size S the shares are drawn for, `dropout` the fraction of them that may be missing.

The VDAF parameters (length, max_measurement, max_weight, max_value) come from the task's
VDAF.
Because the extension is part of the TaskConfiguration, it is in the HPKE AAD of every
input and aggregate share: Client, Leader, Helper and Collector are bound to the same
policy, and an Aggregator with a different view cannot decrypt. An Aggregator refuses a
task whose policy it does not know or that does not fit the VDAF (`policy_from_spec`
raises ValueError).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

POLICIES = (
    "HistogramWithAggregatorRandomization",
    "HistogramWithAggregatorLaplace",
    "SumVecWithAggregatorRandomization",
    "SumVecWithAggregatorLaplace",
    "MultiHotHistogramWithClientRandomization",
    "L1BoundSumWithAggregatorLaplace",
    "SumVecWithClientPolyaShares",
)
MULTIHOT_CLIENT_RANDOMIZATION = "MultiHotHistogramWithClientRandomization"

log = logging.getLogger(__name__)

#: Defaults of the parameters a user may leave out.
DEFAULT_DELTA = 1e-9
#: An honest RAPPOR report over max_weight (probability <= fp each) is dropped, which
#: adds (1 + e^epsilon) n fp to the delta of the aggregate over n honest Clients
#: (`dp_policy.accounting.rappor_drop_delta`). The default keeps n fp within 1% of
#: DEFAULT_DELTA up to n = 10^7 Clients (`rappor_fp_for(DEFAULT_DELTA, 10**7)`); the
#: draft's examples use fp = 1e-9, which for 10^5 Clients would dominate a delta of 1e-9.
DEFAULT_FP = 1e-18


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
    from ppm_reference.dp_policy.policies import MultiHotHistogramWithClientRandomization

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
    from ppm_reference.dp_policy import policies
    from ppm_reference.vdaf import registry

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
        if name == "L1BoundSumWithAggregatorLaplace":
            _need(vdaf_name, "Prio3L1BoundSum", name)
            return policies.L1BoundSumWithAggregatorLaplace(
                float(spec["epsilon"]), length, params["max_value"], shares=shares,
                chunk_length=params["chunk_length"])
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
            from ppm_reference.dp_policy.distributed import SumVecWithClientPolyaShares

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


# -- Aggregator noise, drawn off the request path (issue 12) -------------------------------
#
# The CKS20 samplers take a time that depends on the values they return (Jin et al., S&P
# 2022), so an Aggregator that draws its noise while answering a request tells whoever
# times the answer something about the noise: a DAP-09 Helper answers the Leader's
# AggregateShareReq synchronously. Each Aggregator therefore keeps, per DP task, a
# `NoiseReserve` of whole noise vectors drawn in the background (`keep_noise_reserves`,
# started by the server next to its worker), and the code that computes an aggregate
# share only takes one (`noise_agg_share`), in time that depends only on the vector's
# length. A batch gets exactly one vector: the Aggregator draws it when it computes the
# batch's aggregate share, and what it sends (the Helper's AggregateShare, the Leader's
# CollectionJobResp) is stored with the job, so that the same noise is never drawn again
# for a request it already answered.

#: Noise vectors kept ready per task: one for the next batch and one spare.
RESERVE_DEPTH = 2
#: Longer aggregate shares are not pre-drawn (their noise is drawn when needed, counted in
#: `NoiseReserve.synchronous_draws` and logged): a reserve must not take the memory of a
#: task whose VDAF has a huge output (a Histogram of length 2^30).
MAX_RESERVED_DIMENSION = 1 << 20
#: Coordinates drawn between two looks at the stop event of `NoiseReserve.fill`.
DRAW_CHUNK = 4096


class NoiseReserve:
    """Pre-drawn Aggregator noise of one task's policy: up to `depth` vectors of
    `dimension` coordinates, drawn from `rng` by `fill` (off the request path) and handed
    out by `take`. Thread-safe: `fill` may run in a worker thread.

    If the reserve is empty when a vector is needed, `take` draws one synchronously (and
    counts it in `synchronous_draws`, with a warning in the log) rather than fail: the
    answer is then correct but its timing depends on the noise."""

    def __init__(self, policy: Any, dimension: int, rng: Any,
                 depth: int = RESERVE_DEPTH) -> None:
        self.policy = policy
        self.dimension = dimension
        self.rng = rng
        self.depth = depth if dimension <= MAX_RESERVED_DIMENSION else 0
        self._vectors: list[list[int]] = []
        self._lock = threading.Lock()       # the list of vectors
        self._draw_lock = threading.Lock()  # the rng: one stream, drawn in order
        self.synchronous_draws = 0

    def __len__(self) -> int:
        return len(self._vectors)

    def missing(self) -> int:
        return max(0, self.depth - len(self._vectors))

    def _draw(self, stop: threading.Event | None = None) -> list[int] | None:
        """One vector, drawn `DRAW_CHUNK` coordinates at a time (the same values as in
        one go: the coordinates are independent and drawn in order); None if `stop` is
        set in between (a server shutting down does not wait for a long vector)."""
        noise: list[int] = []
        with self._draw_lock:
            while len(noise) < self.dimension:
                if stop is not None and stop.is_set():
                    return None
                k = min(DRAW_CHUNK, self.dimension - len(noise))
                noise += self.policy.sample_agg_share_noise(k, self.rng)
        return noise

    def fill(self, stop: threading.Event | None = None) -> int:
        """Draw vectors until the reserve holds `depth` (or `stop` is set); returns how
        many were drawn."""
        drawn = 0
        while self.missing():
            noise = self._draw(stop)
            if noise is None:
                break
            with self._lock:
                self._vectors.append(noise)
            drawn += 1
        return drawn

    def take(self) -> list[int]:
        """The oldest pre-drawn vector (or, if none is left, one drawn now)."""
        with self._lock:
            if self._vectors:
                return self._vectors.pop(0)
        self.synchronous_draws += 1
        log.warning("DP noise reserve empty: drawing %d noise values on the request path",
                    self.dimension)
        noise = self._draw()
        assert noise is not None  # no stop event: always a whole vector
        return noise


_RESERVES: weakref.WeakKeyDictionary[Any, NoiseReserve] = weakref.WeakKeyDictionary()
_RESERVES_LOCK = threading.Lock()


def _agg_share_length(vdaf: Any) -> int:
    flp = getattr(vdaf, "flp", None)
    if flp is not None:
        return int(flp.OUTPUT_LEN)
    return len(vdaf.agg_init(None))


def noise_rng(rng: Any, task_id: bytes, role: str) -> Any:
    """The stream a task's noise is drawn from: the Aggregator's `rng` (the OS CSPRNG
    unless a test injects a seeded one). A seeded rng (`dap.core.rand.SeededRng`) gives
    each task and role a child stream of its own, so that the noise of a seeded run is
    reproducible however the background draws interleave with the other draws."""
    child = getattr(rng, "child", None)
    if child is None:
        return rng
    return child(b"dp-noise/" + role.encode() + b"/" + bytes(task_id))


def noise_reserve(task: Any, rng: Any) -> NoiseReserve | None:
    """The noise reserve of an Aggregator's task (a `dap.core.tasks.AggregatorTask`),
    created on first use with `rng`; None when the task's policy adds no Aggregator
    noise. The reserve lives as long as the task's policy object (the Aggregator's task
    cache): a task reloaded after a change starts with an empty one."""
    policy = task.dp_policy
    if policy is None or not getattr(policy, "has_agg_share_noise", False):
        return None
    with _RESERVES_LOCK:
        reserve = _RESERVES.get(policy)
        if reserve is None:
            reserve = NoiseReserve(policy, _agg_share_length(task.vdaf),
                                   noise_rng(rng, task.task_id, task.role.name.lower()))
            _RESERVES[policy] = reserve
    return reserve


def noise_agg_share(task: Any, agg_share: list[int], rng: Any) -> list[int]:
    """The aggregate share with the task's Aggregator noise added (its policy's
    `add_noise_to_agg_share`, draft-wang-ppm-differential-privacy Section 5), from the
    task's reserve: no sampler runs here unless the reserve is empty. Unchanged for a
    task without Aggregator noise. Called once per batch, where the aggregate share is
    computed (`dap.core.helper.finish_aggregate_share`, `dap.core.leader.
    finish_collection`)."""
    reserve = noise_reserve(task, rng)
    if reserve is None:
        return agg_share
    if len(agg_share) != reserve.dimension:
        raise ValueError(f"aggregate share of {len(agg_share)} values, the task's noise has "
                         f"{reserve.dimension}")
    noised: list[int] = reserve.policy.apply_agg_share_noise(agg_share, reserve.take())
    return noised


async def keep_noise_reserves(tasks: Callable[[], Iterable[Any]], rng: Any,
                              interval: float = 0.25) -> None:
    """Keep the noise reserve of every task `tasks()` returns (an Aggregator's DP tasks)
    full, forever: the server runs it next to its worker. The listing and the draws run
    in a worker thread, so that the event loop keeps answering requests meanwhile; a task whose
    reserve fails is logged and skipped (the others go on). Cancelled, it stops the
    thread's draw within `DRAW_CHUNK` coordinates."""
    stop = threading.Event()
    try:
        while True:
            try:
                # In a worker thread: listing reads the datastore and, the first time,
                # loads every task (about 0.4 ms each), which must not hold up the event
                # loop's requests.
                current = await asyncio.to_thread(lambda: list(tasks()))
            except Exception:  # noqa: BLE001 - keep the loop alive
                log.exception("DP noise reserves: cannot list the tasks")
                current = []
            for task in current:
                try:
                    reserve = noise_reserve(task, rng)
                    if reserve is not None and reserve.missing():
                        await asyncio.to_thread(reserve.fill, stop)
                except Exception:  # noqa: BLE001 - per task: one failing task stops none
                    log.exception("DP noise reserve of task %s failed",
                                  bytes(task.task_id).hex())
            await asyncio.sleep(interval)
    finally:
        stop.set()
