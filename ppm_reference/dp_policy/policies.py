"""DP policies for VDAFs (draft-wang-ppm-differential-privacy, Sections 5 and 6).

`DpPolicy` is the draft's interface (Section 5): optional Client noise on the
measurement, optional Aggregator noise on each aggregate share, optional debiasing of the
aggregate result. `run_vdaf_with_dp_policy` is the draft's Section 5.1 over our Prio3
(draft-irtf-cfrg-vdaf-20 names: verify_init, verifier_shares_to_message, verify_next).

Concrete policies, each with its trust model (draft Section 3.3) and a `guarantees`
method reporting what it achieves for a batch size and a number of honest Aggregators:

* `MultiHotHistogramWithClientRandomization` (Section 6.1.1): symmetric RAPPOR at each
  Client, `Prio3MultihotCountVec` with the max weight of the Section 6.1.1 bound. OAMC.
* `HistogramWithAggregatorRandomization` (Section 6.1.2): discrete Gaussian at each
  Aggregator over `Prio3Histogram`, L2 sensitivity sqrt(2). OAOC.
* `SumVecWithAggregatorRandomization`: discrete Gaussian over `Prio3SumVec`. OAOC.
* `HistogramWithAggregatorLaplace`, `SumVecWithAggregatorLaplace`: pure DP with discrete
  Laplace noise calibrated to the L1 sensitivity. OAOC.
* `L1BoundSumWithAggregatorLaplace`: the same over `Prio3L1BoundSum`
  (draft-ietf-ppm-l1-bound-sum-02), whose L1 bound is the sensitivity. OAOC.

Aggregate shares are vectors of field elements in [0, p). Noise z is added modulo p, so
negative noise wraps to p - |z|; the Collector maps an unsharded value v back to a signed
integer (v - p if v > p/2) before removing any bias. This is correct as long as
|true value + total noise| < p/2, which holds with overwhelming probability for the
128-bit and 64-bit fields of Prio3.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Generic, TypeVar

from ppm_reference.dp_policy import accounting, calibration
from ppm_reference.dp_policy.mechanisms import (
    AdditiveIntegerNoise,
    DiscreteGaussian,
    DiscreteLaplace,
    NoisePool,
    Rng,
    SymmetricRappor,
)

Measurement = TypeVar("Measurement")
AggShare = TypeVar("AggShare")
AggResult = TypeVar("AggResult")
DebiasedAggResult = TypeVar("DebiasedAggResult")

OAMC = "OAMC"  # One-Aggregator-Most-Clients (draft Section 3.3.1)
OAOC = "OAOC"  # One-Aggregator-One-Client (Section 3.3.2)
OC = "OC"  # One-Client (Section 3.3.3)


#: The neighbouring relations of a guarantee: two batches (or, for a local guarantee,
#: two inputs of one Client) differing in one Client's measurement ("replacement"), or a
#: Client's report against one drawn from a reference distribution ("deletion", the
#: model of symmetric RAPPOR's eps0, [MJTB+22] Definition C.1).
REPLACEMENT = "replacement"
DELETION = "deletion"


@dataclass(frozen=True)
class PrivacyGuarantee:
    """What a policy achieves in one trust model. epsilon = inf means no protection.
    Every guarantee a policy reports is in the replacement model (`neighbouring`), so
    that the figures of different trust models and policies compare."""

    trust_model: str
    epsilon: float
    delta: float
    method: str
    note: str = ""
    neighbouring: str = REPLACEMENT

    def describe(self) -> str:
        """`(eps, delta)-DP (replacement)`, `eps-DP (replacement)`, or no protection."""
        if not math.isfinite(self.epsilon):
            return "no protection"
        if self.delta == 0:
            return f"{self.epsilon:.4g}-DP ({self.neighbouring})"
        return f"({self.epsilon:.4g}, {self.delta:.2g})-DP ({self.neighbouring})"


class DpPolicy(Generic[Measurement, AggShare, AggResult, DebiasedAggResult]):
    """A DP policy (draft Section 5): Client randomization, Aggregator randomization and
    debiasing, each optional. The defaults do nothing."""

    # The trust model the policy is designed for (draft Section 3.3).
    TRUST_MODEL: ClassVar[str] = ""

    def add_noise_to_measurement(self, meas: Measurement) -> Measurement:
        """Add noise to a measurement, if the Client randomization requires it."""
        return meas

    def add_noise_to_agg_share(self, agg_share: AggShare) -> AggShare:
        """Add noise to an aggregate share, if the Aggregator randomization requires it."""
        return agg_share

    def debias_agg_result(self, agg_result: AggResult,
                          meas_count: int) -> DebiasedAggResult:
        """Debias the aggregate result given the number of measurements."""
        return agg_result  # type: ignore[return-value]

    def guarantees(self, batch_size: int, honest_aggregators: int = 1,
                   **kwargs: Any) -> dict[str, PrivacyGuarantee]:
        """The guarantee in each trust model, for `batch_size` measurements of which (for
        Client randomization) `honest_clients` are honest, and `honest_aggregators`."""
        raise NotImplementedError()

    def precompute_noise(self, dimension: int) -> None:
        """Draw Aggregator noise for `dimension` coordinates ahead of time (off the
        request path). Nothing to do for policies without Aggregator noise."""

    # The Aggregator randomization in two halves, so that a caller can draw the noise
    # ahead of time (off the request path) and apply it later: `add_noise_to_agg_share`
    # is `apply_agg_share_noise(agg_share, sample_agg_share_noise(len(agg_share)))`.
    has_agg_share_noise: ClassVar[bool] = False

    def sample_agg_share_noise(self, dimension: int, rng: Rng | None = None) -> list[int]:
        """One noise vector for an aggregate share of `dimension` coordinates, drawn
        from `rng` (default: the policy's own). The running time depends on the values
        drawn: call it off the request path. Empty for a policy without Aggregator
        noise."""
        return []

    def apply_agg_share_noise(self, agg_share: AggShare, noise: Sequence[int]) -> AggShare:
        """The aggregate share with a vector from `sample_agg_share_noise` added; takes
        time that depends only on the length."""
        return agg_share


# ---------------------------------------------------------------------------------------
# Field helpers
# ---------------------------------------------------------------------------------------


def add_noise_mod(agg_share: Sequence[int], noise: Sequence[int], modulus: int) -> list[int]:
    """(x + z) mod p coordinate-wise: negative noise z wraps to p - |z|."""
    return [(x + z) % modulus for (x, z) in zip(agg_share, noise, strict=True)]


def to_signed(values: Sequence[int], modulus: int) -> list[int]:
    """Field elements in [0, p) to signed integers: values above p/2 are negative."""
    half = modulus // 2
    return [v - modulus if v > half else v for v in values]


# ---------------------------------------------------------------------------------------
# Client randomization: symmetric RAPPOR over Prio3MultihotCountVec (draft Section 6.1.1)
# ---------------------------------------------------------------------------------------


class MultiHotHistogramWithClientRandomization(
        DpPolicy[Any, list[int], list[int], list[float]]):
    """Each Client applies symmetric RAPPOR(eps0) to its one-hot vector; the Aggregators
    verify with `Prio3MultihotCountVec(length, max_weight)` where max_weight is the
    smallest m for which an honest noised report exceeds m ones with probability at most
    `fp` (draft Section 6.1.1); the Collector debiases to floats.

    Trust model OAMC: (epsilon, delta) of the aggregate by amplification by aggregation
    over the honest Clients ([MJTB+22] Theorem C.3, two batches of n differing in one
    Client: the replacement model), degrading gracefully as fewer Clients are honest.
    Hedge: every Client keeps eps0-local DP in the deletion model, 2 eps0 in the
    replacement model ([MJTB+22] Theorem C.1 and the remark after it), even if all other
    parties are corrupt (OC, and OAOC: the Aggregators see only shares, so one honest
    Client has only its own randomization). `guarantees` reports every figure in the
    replacement model (OC and OAOC: 2 eps0), with eps0 (deletion) in the note.

    A measurement is a bucket index (int) or a one-hot bit vector. An honest report whose
    noised weight exceeds max_weight (probability <= fp) is rejected by the VDAF; the
    draft does not say what the Client should do then -- `run_vdaf_with_dp_policy` drops
    it (it is counted in `stats["rejected"]`), which biases the debiased estimate by at
    most fp per report. The amplification bound is for the mechanism that drops nothing:
    `guarantees` adds the drop event to the OAMC delta
    (`accounting.rappor_drop_delta`: (1 + e^epsilon) n fp for n honest Clients), so
    choose fp from n and delta (`accounting.rappor_fp_for`).
    """

    TRUST_MODEL = OAMC

    def __init__(self, eps0: float | str | Fraction, length: int, fp: float,
                 shares: int = 2, chunk_length: int | None = None,
                 rng: Rng | None = None) -> None:
        from ppm_reference.vdaf import registry

        self.rappor = SymmetricRappor(eps0, rng)
        self.eps0 = self.rappor.eps0
        self.length = length
        self.fp = fp
        self.max_weight = accounting.rappor_max_weight(length, self.eps0, fp)
        self.vdaf = registry.build(
            "Prio3MultihotCountVec",
            {"length": length, "max_weight": self.max_weight, "chunk_length": chunk_length},
            shares=shares)
        self.modulus = self.vdaf.field.MODULUS

    def _one_hot(self, meas: Any) -> list[int]:
        if isinstance(meas, int) and not isinstance(meas, bool):
            if not 0 <= meas < self.length:
                raise ValueError("bucket index out of range")
            vec = [0] * self.length
            vec[meas] = 1
            return vec
        vec = [int(b) for b in meas]
        if len(vec) != self.length or sum(vec) != 1 or any(b not in (0, 1) for b in vec):
            raise ValueError("the measurement must be a one-hot vector of the policy length")
        return vec

    def add_noise_to_measurement(self, meas: Any) -> list[bool]:
        return [bool(b) for b in self.rappor.add_noise(self._one_hot(meas))]

    def debias_agg_result(self, agg_result: list[int], meas_count: int) -> list[float]:
        """Field values to signed integers (a no-op here: counts are below p/2), then
        [MJTB+22] Algorithm 4."""
        return self.rappor.debias(to_signed(agg_result, self.modulus), meas_count)

    def guarantees(self, batch_size: int, honest_aggregators: int = 1,
                   **kwargs: Any) -> dict[str, PrivacyGuarantee]:
        """OC and OAOC: the local guarantee, 2 eps0 (replacement; eps0 in the deletion
        model). OAMC: amplification by aggregation at `delta` over `honest_clients`
        (default: the batch size), plus the chance that an honest report over max_weight
        was dropped: the reported delta is delta + (1 + e^epsilon) n fp."""
        delta = float(kwargs.get("delta", 1e-9))
        honest_clients = int(kwargs.get("honest_clients", batch_size))
        local = PrivacyGuarantee(OC, 2 * self.eps0, 0.0, "local RAPPOR (MJTB+22 Thm C.1)",
                                 f"eps0 = {self.eps0:g} in the deletion model")
        out = {OC: local}
        if honest_clients >= 1:
            res = accounting.rappor_amplification(self.eps0, honest_clients, delta)
            drop = accounting.rappor_drop_delta(honest_clients, self.fp, res.epsilon)
            g = PrivacyGuarantee(OAMC, res.epsilon, delta + drop, res.method,
                                 f"{honest_clients} honest Clients; per-coordinate noise "
                                 f"std {res.std:.4f}; delta {delta:g} + {drop:.2g} for "
                                 f"honest reports over max_weight {self.max_weight} "
                                 f"(fp {self.fp:g}) being dropped")
            out[OAMC] = g
            # Aggregators see only shares: the aggregate guarantee does not depend on
            # them, so OAOC is only the local guarantee of the one honest Client.
        out[OAOC] = PrivacyGuarantee(OAOC, local.epsilon, 0.0, "local RAPPOR",
                                     "only the honest Client's own randomization; "
                                     f"eps0 = {self.eps0:g} in the deletion model")
        return out


# ---------------------------------------------------------------------------------------
# Aggregator randomization
# ---------------------------------------------------------------------------------------


class _AggregatorNoisePolicy(DpPolicy[Any, list[int], list[int], list[int]]):
    """Common part: each Aggregator adds independent integer noise to every coordinate
    of its aggregate share, modulo p; the Collector maps the result to signed integers.

    Noise comes from a `NoisePool`: call `precompute_noise` (or start the pool's
    background thread) off the request path; `add_noise_to_agg_share` then only takes
    pre-drawn values, so its running time does not depend on the noise (Jin et al.
    2022). If the pool is short it samples synchronously (and counts it)."""

    TRUST_MODEL = OAOC
    modulus: int
    mechanism: AdditiveIntegerNoise

    def _init_pool(self) -> None:
        self.pool = NoisePool(self.mechanism)

    def _histogram_vdaf(self, length: int | None, shares: int,
                        chunk_length: int | None) -> None:
        """The draft's policy is independent of the histogram length (its constructor
        takes only epsilon and delta): with a length, build the matching
        `Prio3Histogram` as `self.vdaf`; without, only its field (Field128)."""
        from ppm_reference.vdaf import registry
        from ppm_reference.vdaf.field import Field128

        self.vdaf: Any = None
        if length is not None:
            self.vdaf = registry.build(
                "Prio3Histogram", {"length": length, "chunk_length": chunk_length},
                shares=shares)
        self.modulus = Field128.MODULUS

    def precompute_noise(self, dimension: int) -> None:
        self.pool.refill(dimension)

    has_agg_share_noise = True

    def sample_agg_share_noise(self, dimension: int, rng: Rng | None = None) -> list[int]:
        mechanism = self.mechanism if rng is None else self.mechanism.with_rng(rng)
        return mechanism.sample_noise(dimension)

    def apply_agg_share_noise(self, agg_share: list[int], noise: Sequence[int]) -> list[int]:
        return add_noise_mod(agg_share, noise, self.modulus)

    def add_noise_to_agg_share(self, agg_share: list[int]) -> list[int]:
        return add_noise_mod(agg_share, self.pool.take(len(agg_share)), self.modulus)

    def debias_agg_result(self, agg_result: list[int], meas_count: int) -> list[int]:
        return to_signed(agg_result, self.modulus)


class HistogramWithAggregatorRandomization(_AggregatorNoisePolicy):
    """(epsilon, delta)-DP for `Prio3Histogram` (draft Section 6.1.2): each Aggregator
    adds discrete Gaussian noise N_Z(0, sigma^2) to each coordinate of its aggregate
    share. Replacing one one-hot measurement changes the aggregate by y = (1, -1) (up to
    order), so the L2 sensitivity is sqrt(2).

    sigma: the draft calibrates the *continuous* Gaussian ([BW18] / [AGM]); here sigma is
    the smallest discrete-Gaussian sigma whose exact delta (CKS20 Theorem 7, for the
    worst-case vector (1, -1)) is at most `delta`, rounded up to 6 significant digits
    so that sigma^2 is a small rational for the sampler; `sigma_continuous` keeps the
    draft's value for comparison.

    Trust model OAOC: the guarantee holds if at least one Aggregator is honest (its
    noise alone suffices); with c honest Aggregators the total noise is the sum of c
    discrete Gaussians (standard deviation about sigma sqrt(c)) and the guarantee is
    computed exactly for that sum. No protection in OC (a corrupt Aggregator pair sees
    the exact measurement shares' sum).
    """

    def __init__(self, epsilon: float, delta: float, length: int | None = None,
                 shares: int = 2, chunk_length: int | None = None,
                 rng: Rng | None = None) -> None:
        self.epsilon, self.delta, self.length = epsilon, delta, length
        self.sensitivity_vector = (1, -1)
        self.sigma_continuous = calibration.analytic_gaussian_sigma(epsilon, delta,
                                                                    math.sqrt(2.0))
        sigma = calibration.discrete_gaussian_sigma(epsilon, delta, self.sensitivity_vector,
                                                   rel_tol=1e-8)
        self.sigma_exact = calibration.rational_at_least(sigma)
        self.sigma = float(self.sigma_exact)
        self.mechanism = DiscreteGaussian(self.sigma_exact, rng)
        self._histogram_vdaf(length, shares, chunk_length)
        self._init_pool()

    def achieved_delta(self, honest_aggregators: int = 1) -> float:
        if honest_aggregators <= 1:
            return calibration.discrete_gaussian_delta(
                self.sigma, self.epsilon, self.sensitivity_vector).delta
        noise = calibration.sum_of_discrete_gaussians_pmf(self.sigma, honest_aggregators)
        return calibration.additive_noise_delta(noise, self.epsilon, self.sensitivity_vector)

    def guarantees(self, batch_size: int, honest_aggregators: int = 1,
                   **kwargs: Any) -> dict[str, PrivacyGuarantee]:
        c = max(1, honest_aggregators)
        d = self.achieved_delta(c)
        g = PrivacyGuarantee(OAOC, self.epsilon, d, "discrete Gaussian, exact (CKS20 Thm 7)",
                             f"{c} honest Aggregator(s), sigma {self.sigma:g} each; "
                             f"independent of the batch size ({batch_size})")
        return {OAOC: g, OAMC: PrivacyGuarantee(OAMC, g.epsilon, g.delta, g.method, g.note),
                OC: PrivacyGuarantee(OC, math.inf, 1.0, "none",
                                     "no Client randomization")}


class SumVecWithAggregatorRandomization(_AggregatorNoisePolicy):
    """(epsilon, delta)-DP for `Prio3SumVec(length, max_measurement)` with discrete
    Gaussian noise at each Aggregator.

    Sensitivity (replacement of one measurement): every coordinate can move from 0 to
    max_measurement, so the worst-case change is y = max_measurement * (1, ..., 1):
    L2 sensitivity max_measurement * sqrt(length), L1 sensitivity max_measurement *
    length. sigma is the smallest discrete-Gaussian sigma with exact delta <= `delta` for
    that y (CKS20, via the law of sum_i y_i X_i); for long vectors where the exact
    computation is too costly, the zCDP bound (CKS20 Theorem 14 with Proposition 12) is
    used instead, which is conservative. Trust model OAOC; with more than one honest
    Aggregator the one-Aggregator guarantee is reported (post-processing; conservative).
    """

    def __init__(self, epsilon: float, delta: float, length: int, max_measurement: int,
                 shares: int = 2, chunk_length: int | None = None,
                 rng: Rng | None = None) -> None:
        from ppm_reference.vdaf import registry

        self.epsilon, self.delta = epsilon, delta
        self.length, self.max_measurement = length, max_measurement
        self.sensitivity_vector = tuple([max_measurement] * length)
        self.l2_sensitivity = max_measurement * math.sqrt(length)
        self.l1_sensitivity = max_measurement * length
        self.sigma_continuous = calibration.analytic_gaussian_sigma(
            epsilon, delta, self.l2_sensitivity)
        sigma = calibration.discrete_gaussian_sigma(epsilon, delta, self.sensitivity_vector,
                                                   rel_tol=1e-8)
        self.sigma_exact = calibration.rational_at_least(sigma)
        self.sigma = float(self.sigma_exact)
        self.mechanism = DiscreteGaussian(self.sigma_exact, rng)
        self.vdaf = registry.build(
            "Prio3SumVec", {"length": length, "max_measurement": max_measurement,
                            "chunk_length": chunk_length}, shares=shares)
        self.modulus = self.vdaf.field.MODULUS
        self._init_pool()

    def guarantees(self, batch_size: int, honest_aggregators: int = 1,
                   **kwargs: Any) -> dict[str, PrivacyGuarantee]:
        res = calibration.discrete_gaussian_delta(self.sigma, self.epsilon,
                                                  self.sensitivity_vector)
        g = PrivacyGuarantee(OAOC, self.epsilon, res.delta, f"discrete Gaussian, {res.method}",
                             f"sigma {self.sigma:g}; reported for one honest Aggregator "
                             f"(of {honest_aggregators}); independent of the batch size")
        return {OAOC: g, OAMC: PrivacyGuarantee(OAMC, g.epsilon, g.delta, g.method, g.note),
                OC: PrivacyGuarantee(OC, math.inf, 1.0, "none", "no Client randomization")}


class _LaplacePolicy(_AggregatorNoisePolicy):
    """Pure epsilon-DP: discrete Laplace with scale L1 / epsilon at each Aggregator.
    One honest Aggregator suffices; more honest Aggregators add more noise but the pure
    epsilon reported stays the same (post-processing)."""

    l1_sensitivity: int
    epsilon: float

    def _make_mechanism(self, rng: Rng | None) -> None:
        # scale = L1 / epsilon, rounded *up* to a small rational (more noise, smaller eps)
        self.scale_exact = calibration.rational_at_least(self.l1_sensitivity / self.epsilon)
        self.scale = float(self.scale_exact)
        self.mechanism = DiscreteLaplace(self.scale_exact, rng)
        self.achieved_epsilon = self.l1_sensitivity / self.scale
        self._init_pool()

    def guarantees(self, batch_size: int, honest_aggregators: int = 1,
                   **kwargs: Any) -> dict[str, PrivacyGuarantee]:
        g = PrivacyGuarantee(OAOC, self.achieved_epsilon, 0.0, "discrete Laplace (pure DP)",
                             f"scale {self.scale:g}, L1 sensitivity {self.l1_sensitivity}")
        return {OAOC: g, OAMC: PrivacyGuarantee(OAMC, g.epsilon, 0.0, g.method, g.note),
                OC: PrivacyGuarantee(OC, math.inf, 1.0, "none", "no Client randomization")}


class HistogramWithAggregatorLaplace(_LaplacePolicy):
    """Pure epsilon-DP for `Prio3Histogram`: L1 sensitivity 2 (one count down, one up),
    discrete Laplace scale 2/epsilon at each Aggregator. Trust model OAOC."""

    def __init__(self, epsilon: float, length: int | None = None, shares: int = 2,
                 chunk_length: int | None = None, rng: Rng | None = None) -> None:
        self.epsilon, self.length = epsilon, length
        self.l1_sensitivity = 2
        self._histogram_vdaf(length, shares, chunk_length)
        self._make_mechanism(rng)


class SumVecWithAggregatorLaplace(_LaplacePolicy):
    """Pure epsilon-DP for `Prio3SumVec(length, max_measurement)`: L1 sensitivity
    length * max_measurement, discrete Laplace scale L1/epsilon. Trust model OAOC."""

    def __init__(self, epsilon: float, length: int, max_measurement: int, shares: int = 2,
                 chunk_length: int | None = None, rng: Rng | None = None) -> None:
        from ppm_reference.vdaf import registry

        self.epsilon, self.length, self.max_measurement = epsilon, length, max_measurement
        self.l1_sensitivity = length * max_measurement
        self.vdaf = registry.build(
            "Prio3SumVec", {"length": length, "max_measurement": max_measurement,
                            "chunk_length": chunk_length}, shares=shares)
        self.modulus = self.vdaf.field.MODULUS
        self._make_mechanism(rng)


class L1BoundSumWithAggregatorLaplace(_LaplacePolicy):
    """Pure epsilon-DP for `Prio3L1BoundSum(length, max_value)`
    (draft-ietf-ppm-l1-bound-sum-02): discrete Laplace noise of scale 2 * max_value /
    epsilon on every coordinate of each Aggregator's aggregate share. Trust model OAOC.

    Sensitivity. The VDAF proves that a measurement is non-negative with L1 norm at most
    `max_value` (its Section 3.3), so replacing one measurement x by y moves the
    aggregate by ||x - y||_1 <= ||x||_1 + ||y||_1 <= 2 * max_value, whatever the length
    (`vdaf.circuits.L1BoundSum.sensitivity`; the project's neighbouring relation is
    replacement, as for Histogram's 2). That is the point of the VDAF: Prio3SumVec with
    the same per-coordinate bound has L1 sensitivity length * max_value.

    Why Laplace. The guarantee we have is an L1 bound, and the Laplace mechanism is the
    one calibrated to L1: it gives pure epsilon-DP with per-coordinate standard
    deviation sqrt(2) * 2 * max_value / epsilon, independent of the length. The Gaussian
    mechanism would use the L2 sensitivity sqrt(2) * max_value (also length-independent)
    but needs a delta, and at delta = 1e-9 its sigma is about sqrt(2 ln(1.25/delta)) *
    sqrt(2) * max_value / epsilon ~ 9.2 * max_value / epsilon, more than three times
    the Laplace standard deviation (~2.8 * max_value / epsilon). The W3C Attribution API,
    for which this VDAF was defined, likewise budgets a report's L1 norm and adds Laplace
    noise."""

    def __init__(self, epsilon: float, length: int, max_value: int, shares: int = 2,
                 chunk_length: int | None = None, rng: Rng | None = None) -> None:
        from ppm_reference.vdaf import registry

        self.epsilon, self.length, self.max_value = epsilon, length, max_value
        self.l1_sensitivity = 2 * max_value
        self.vdaf = registry.build(
            "Prio3L1BoundSum", {"length": length, "max_value": max_value,
                                "chunk_length": chunk_length}, shares=shares)
        self.modulus = self.vdaf.field.MODULUS
        self._make_mechanism(rng)


# ---------------------------------------------------------------------------------------
# Draft Section 5.1
# ---------------------------------------------------------------------------------------


def gen_rand(length: int) -> bytes:
    return os.urandom(length)


def run_vdaf_with_dp_policy(dp_policy: DpPolicy[Any, Any, Any, Any], vdaf: Any,
                            agg_param: Any, measurements: Sequence[Any],
                            ctx: bytes = b"draft-wang-ppm-differential-privacy",
                            stats: dict[str, int] | None = None) -> Any:
    """Run the DP policy with a VDAF on a list of measurements (draft Section 5.1),
    written against draft-irtf-cfrg-vdaf-20 (the draft's prep_* calls are named
    verify_* there, and every call takes the application context `ctx`).

    Each Client noises its measurement and shards it; the Aggregators verify and
    aggregate; each Aggregator noises its aggregate share (noise drawn beforehand with
    `precompute_noise`, i.e. off the request path); the Collector unshards and debiases.
    A report the VDAF rejects (e.g. a RAPPOR report over the max weight) is dropped and
    counted in stats["rejected"].
    """
    from ppm_reference.vdaf.vdaf import VdafError

    if stats is None:
        stats = {}
    stats.setdefault("rejected", 0)
    stats.setdefault("aggregated", 0)
    verify_key = gen_rand(vdaf.VERIFY_KEY_SIZE)
    agg_shares = [vdaf.agg_init(agg_param) for _ in range(vdaf.SHARES)]
    # Aggregator noise is drawn ahead of time, before any aggregate share is requested.
    dp_policy.precompute_noise(vdaf.SHARES * len(agg_shares[0]))

    for measurement in measurements:
        nonce = gen_rand(vdaf.NONCE_SIZE)
        # Each Client adds Client randomization noise to its measurement.
        noisy_measurement = dp_policy.add_noise_to_measurement(measurement)
        rand = gen_rand(vdaf.RAND_SIZE)
        try:
            (public_share, input_shares) = vdaf.shard(ctx, noisy_measurement, nonce, rand)
            verify_states = []
            outbound = []
            for j in range(vdaf.SHARES):
                (state, share) = vdaf.verify_init(verify_key, ctx, j, agg_param, nonce,
                                                  public_share, input_shares[j])
                verify_states.append(state)
                outbound.append(share)
            verifier_message = vdaf.verifier_shares_to_message(ctx, agg_param, outbound)
            out_shares = [vdaf.verify_next(ctx, verify_states[j], verifier_message)
                          for j in range(vdaf.SHARES)]
        except VdafError:
            stats["rejected"] += 1
            continue
        for j in range(vdaf.SHARES):
            agg_shares[j] = vdaf.agg_update(agg_param, agg_shares[j], out_shares[j])
        stats["aggregated"] += 1

    num_measurements = stats["aggregated"]
    # Each Aggregator independently adds noise to its aggregate share.
    noised = [dp_policy.add_noise_to_agg_share(agg_shares[j]) for j in range(vdaf.SHARES)]
    # The Collector unshards and debiases.
    agg_result = vdaf.unshard(agg_param, noised, num_measurements)
    return dp_policy.debias_agg_result(agg_result, num_measurements)
