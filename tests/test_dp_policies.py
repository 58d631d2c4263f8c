"""DP policies composed with Prio3 (draft Sections 5 and 6).

End-to-end runs use a seeded RNG for the noise (test-only) and check the result against
the truth within 6 standard deviations of the noise per coordinate: for Gaussian-like
noise a correct implementation fails such a check with probability about 2e-9 per
coordinate, so well below 1e-6 for the whole file. Monte Carlo checks of unbiasedness
use 4.9 standard errors (false failure 1e-6 each).
"""

from __future__ import annotations

import math
import random

import pytest

pytest.importorskip("ppm_reference.vdaf.prio3")

from ppm_reference.dp_policy import policies as pol  # noqa: E402
from ppm_reference.dp_policy.mechanisms import DiscreteGaussian, SymmetricRappor  # noqa: E402

Z_1E6 = 4.8916


class SeededRng:
    """Test-only RNG (a seeded random.Random); never used outside tests."""

    def __init__(self, seed: int) -> None:
        self._r = random.Random(seed)

    def randbelow(self, n: int) -> int:
        return self._r.randrange(n)

    def getrandbits(self, k: int) -> int:
        return self._r.getrandbits(k) if k > 0 else 0


def test_field_wrap_and_signed_debias() -> None:
    p = 2**61 - 1
    assert pol.add_noise_mod([0, 5, p - 1], [-3, 2, 4], p) == [p - 3, 7, 3]
    assert pol.to_signed([p - 3, 7, p // 2, p // 2 + 1], p) == [-3, 7, p // 2, p // 2 + 1 - p]


def test_aggregator_noise_is_unbiased_after_wrapping() -> None:
    """Monte Carlo: shares of a small count, each noised mod p, unsharded and mapped to
    signed integers, average to the count (4.9 standard errors)."""
    policy = pol.HistogramWithAggregatorRandomization(1.0, 1e-6, 3,
                                                      rng=SeededRng(1))
    p = policy.modulus
    truth = [0, 1, 2]
    trials = 3000
    sums = [0, 0, 0]
    rnd = random.Random(2)
    for _ in range(trials):
        share0 = [rnd.randrange(p) for _ in truth]
        share1 = [(t - s) % p for t, s in zip(truth, share0, strict=True)]
        noised = [policy.add_noise_to_agg_share(share0), policy.add_noise_to_agg_share(share1)]
        merged = [(a + b) % p for a, b in zip(*noised, strict=True)]
        out = policy.debias_agg_result(merged, 1)
        sums = [s + o for s, o in zip(sums, out, strict=True)]
    se = policy.sigma * math.sqrt(2) / math.sqrt(trials)
    for s, t in zip(sums, truth, strict=True):
        assert abs(s / trials - t) <= Z_1E6 * se


def test_rappor_debias_is_unbiased() -> None:
    """Monte Carlo over client randomization only (no VDAF): n one-hot reports."""
    rap = SymmetricRappor(2.0, SeededRng(3))
    n, length, trials = 40, 4, 1500
    buckets = [i % 3 for i in range(n)]  # counts 14, 13, 13, 0
    truth = [buckets.count(j) for j in range(length)]
    acc = [0.0] * length
    for _ in range(trials):
        agg = [0] * length
        for b in buckets:
            vec = [0] * length
            vec[b] = 1
            for j, bit in enumerate(rap.add_noise(vec)):
                agg[j] += bit
        for j, v in enumerate(rap.debias(agg, n)):
            acc[j] += v
    se = rap.debiased_std(n) / math.sqrt(trials)
    for j in range(length):
        assert abs(acc[j] / trials - truth[j]) <= Z_1E6 * se


def test_histogram_with_aggregator_randomization_end_to_end() -> None:
    policy = pol.HistogramWithAggregatorRandomization(1.528, 1e-9, 8, rng=SeededRng(4))
    # Calibrated for the discrete Gaussian: close to (and slightly below) the draft's
    # continuous sigma 5.1903 at this epsilon.
    assert 5.17 < policy.sigma < policy.sigma_continuous
    g = policy.guarantees(batch_size=64)
    assert g[pol.OAOC].delta <= 1e-9 and g[pol.OAOC].epsilon == 1.528
    assert policy.guarantees(64, honest_aggregators=2)[pol.OAOC].delta < 1e-12
    assert math.isinf(g[pol.OC].epsilon)
    assert policy.TRUST_MODEL == pol.OAOC
    measurements = [i % 8 for i in range(64)] + [3] * 16
    stats: dict[str, int] = {}
    result = pol.run_vdaf_with_dp_policy(policy, policy.vdaf, None, measurements,
                                         stats=stats)
    truth = [measurements.count(j) for j in range(8)]
    assert stats == {"rejected": 0, "aggregated": 80}
    assert policy.pool.synchronous_draws == 0  # noise was drawn off the request path
    assert all(isinstance(v, int) for v in result)
    for r, t in zip(result, truth, strict=True):
        assert abs(r - t) <= 6 * policy.sigma * math.sqrt(2)
    assert result != truth  # noise was added


def test_histogram_negative_results_are_signed() -> None:
    """Empty buckets plus negative noise come out negative, not near p: with 15 empty
    buckets, no negative value at all has probability about 2^-15."""
    policy = pol.HistogramWithAggregatorRandomization(0.5, 1e-6, 16, rng=SeededRng(5))
    result = pol.run_vdaf_with_dp_policy(policy, policy.vdaf, None, [0, 0, 0])
    assert min(result[1:]) < 0
    assert all(abs(v) < 6 * policy.sigma * math.sqrt(2) + 3 for v in result)


def test_multihot_with_client_randomization_end_to_end() -> None:
    policy = pol.MultiHotHistogramWithClientRandomization(3.0, 6, 1e-6, rng=SeededRng(6))
    assert policy.max_weight == 5  # 1 + Bin(5, 1/(e^3+1)) exceeds 5 w.p. 0 <= 1e-6
    assert policy.vdaf.max_weight == policy.max_weight
    measurements = [i % 4 for i in range(120)]
    stats: dict[str, int] = {}
    result = pol.run_vdaf_with_dp_policy(policy, policy.vdaf, None, measurements,
                                         stats=stats)
    assert stats["aggregated"] == 120
    assert all(isinstance(v, float) for v in result)
    truth = [measurements.count(j) for j in range(6)]
    std = policy.rappor.debiased_std(120)
    for r, t in zip(result, truth, strict=True):
        assert abs(r - t) <= 6 * std
    g = policy.guarantees(batch_size=120)
    assert g[pol.OC].epsilon == 6.0  # replacement model (eps0 = 3 in the deletion model)
    assert g[pol.OAMC].epsilon <= 6.0
    big = policy.guarantees(batch_size=10**5, delta=1e-9)[pol.OAMC]
    assert big.epsilon < 1.0
    fewer = policy.guarantees(batch_size=10**5, delta=1e-9, honest_clients=10**4)[pol.OAMC]
    assert fewer.epsilon > big.epsilon  # degrades gracefully with fewer honest Clients


def test_multihot_rejects_heavy_reports() -> None:
    """With a loose false-positive rate, some honest noised reports exceed the max
    weight; the VDAF rejects them and they are dropped and counted."""
    policy = pol.MultiHotHistogramWithClientRandomization(0.5, 12, 0.3, rng=SeededRng(7))
    stats: dict[str, int] = {}
    pol.run_vdaf_with_dp_policy(policy, policy.vdaf, None, list(range(12)) * 3, stats=stats)
    assert stats["rejected"] > 0
    assert stats["rejected"] + stats["aggregated"] == 36
    with pytest.raises(ValueError):
        policy.add_noise_to_measurement([1, 1] + [0] * 10)  # not one-hot
    with pytest.raises(ValueError):
        policy.add_noise_to_measurement(12)


def test_sumvec_with_aggregator_randomization_end_to_end() -> None:
    policy = pol.SumVecWithAggregatorRandomization(1.0, 1e-9, 3, 4, rng=SeededRng(8))
    assert policy.l2_sensitivity == pytest.approx(4 * math.sqrt(3))
    assert policy.l1_sensitivity == 12
    g = policy.guarantees(batch_size=30)[pol.OAOC]
    assert g.delta <= 1e-9 and "exact" in g.method
    measurements = [[1, 2, 3], [4, 0, 1], [0, 0, 0]] * 10
    result = pol.run_vdaf_with_dp_policy(policy, policy.vdaf, None, measurements)
    truth = [50, 20, 40]
    for r, t in zip(result, truth, strict=True):
        assert abs(r - t) <= 6 * policy.sigma * math.sqrt(2)


@pytest.mark.parametrize("kind", ["histogram", "sumvec"])
def test_laplace_policies_end_to_end(kind: str) -> None:
    measurements: list[object]
    if kind == "histogram":
        policy: pol._LaplacePolicy = pol.HistogramWithAggregatorLaplace(0.5, 5,
                                                                       rng=SeededRng(9))
        assert policy.l1_sensitivity == 2 and policy.scale == 4.0
        measurements = [i % 5 for i in range(40)]
        truth = [8] * 5
    else:
        policy = pol.SumVecWithAggregatorLaplace(2.0, 2, 3, rng=SeededRng(10))
        assert policy.l1_sensitivity == 6 and policy.scale == 3.0
        measurements = [[3, 1]] * 20
        truth = [60, 20]
    g = policy.guarantees(batch_size=len(measurements))[pol.OAOC]
    assert g.delta == 0.0 and g.epsilon == pytest.approx(policy.epsilon)
    result = pol.run_vdaf_with_dp_policy(policy, policy.vdaf, None, measurements)
    # Two Aggregators' Laplace noises: P(|X1 + X2| > 40 b) <= 2 P(|X| > 20 b) = 2 e^-20.
    for r, t in zip(result, truth, strict=True):
        assert abs(r - t) <= 40 * policy.scale


def test_default_policy_is_identity() -> None:
    base: pol.DpPolicy[int, list[int], list[int], list[int]] = pol.DpPolicy()
    assert base.add_noise_to_measurement(3) == 3
    assert base.add_noise_to_agg_share([1, 2]) == [1, 2]
    assert base.debias_agg_result([5], 1) == [5]
    with pytest.raises(NotImplementedError):
        base.guarantees(10)


def test_noise_drawn_off_path_is_what_gets_added() -> None:
    policy = pol.HistogramWithAggregatorRandomization(1.0, 1e-6, 4, rng=SeededRng(11))
    policy.precompute_noise(8)
    expected = list(policy.pool._values)[:4]
    share = policy.add_noise_to_agg_share([0, 0, 0, 0])
    assert pol.to_signed(share, policy.modulus) == expected
    assert isinstance(policy.mechanism, DiscreteGaussian)


def test_histogram_policy_without_length_as_in_the_draft() -> None:
    """The draft constructs the policy from (epsilon, delta) only."""
    from ppm_reference.vdaf.prio3 import Prio3Histogram

    policy = pol.HistogramWithAggregatorRandomization(0.906, 1e-9, rng=SeededRng(12))
    assert policy.vdaf is None
    vdaf = Prio3Histogram(2, 5, 2)
    assert policy.modulus == vdaf.field.MODULUS
    result = pol.run_vdaf_with_dp_policy(policy, vdaf, None, [1, 1, 4])
    for r, t in zip(result, [0, 2, 0, 0, 1], strict=True):
        assert abs(r - t) <= 6 * policy.sigma * math.sqrt(2)
    lap = pol.HistogramWithAggregatorLaplace(1.0)
    assert lap.vdaf is None and lap.scale == 2.0
