"""The local randomizers of paper 004: asymmetric one-hot encoding (Appendix A) with the
Appendix A.2 debiasing corrected, its variance (Theorem A.2), and symmetric one-hot
encoding (Appendix C.1, Theorem C.2), checked by simulation with fixed seeds.

Why Algorithm 2's printed constant is off by a factor of 2 is derived in
`analytics/federated/randomizers.py`: E[sum_i v~_d] = n/(e^eps + 1) + (e^eps - 1)/(2(e^eps +
1)) f(d), so the unbiased offset is 2n/(e^eps - 1), not n/(e^eps - 1); the printed formula
is biased by n/(e^eps - 1).

Every statistical assertion allows a deviation of at least 5 standard deviations of the
estimate (normal approximation of a sum of >= 200 independent bounded terms): the chance
that a correct implementation fails one of them is below 1e-5 over the whole file, and
since the seeds are fixed a run is reproducible.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

from ppm_reference.analytics.federated.randomizers import (
    AsymmetricOneHot,
    SymmetricOneHot,
    make_randomizer,
)


class SeededRng:
    """A seeded generator for tests only (the randomizers default to the OS CSPRNG)."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def randbelow(self, n: int) -> int:
        return self.r.randrange(n)

    def getrandbits(self, k: int) -> int:
        return self.r.getrandbits(k)


def run(randomizer: AsymmetricOneHot | SymmetricOneHot, truth: list[int]) -> list[int]:
    """Randomize truth[d] one-hot reports of every d; the sums per coordinate."""
    length = len(truth)
    sums = [0] * length
    for d, count in enumerate(truth):
        for _ in range(count):
            for i, bit in enumerate(randomizer.randomize(d, length)):
                sums[i] += bit
    return sums


def test_appendix_a2_debiasing_corrected_and_printed_by_simulation() -> None:
    eps = 1.0
    truth = [10_000, 6_000, 3_000, 1_000]
    n = sum(truth)
    a = AsymmetricOneHot(eps, SeededRng(18))
    sums = run(a, truth)
    corrected = a.debias(sums, n)
    printed = a.debias_as_printed(sums, n)
    bias = n / (math.exp(eps) - 1.0)        # what the printed offset leaves: 11,640
    for d, f in enumerate(truth):
        std = math.sqrt(a.variance(n, f))   # about 272
        assert abs(corrected[d] - f) <= 5 * std, (d, corrected[d], f)
        # The printed formula is off by n / (e^eps - 1) (more than 40 standard deviations)
        assert abs(printed[d] - f - bias) <= 5 * std
        assert printed[d] - f >= 20 * std


def test_theorem_a2_variance_by_simulation() -> None:
    """Var[f~(d)] = n 4 e^eps / (e^eps - 1)^2 + f(d) (Theorem A.2), over 300 trials.
    The sample variance of 300 near-Gaussian values has a relative standard deviation
    of sqrt(2/299) = 8.2%: the 45% tolerance is 5.5 of them."""
    eps, truth, trials = 1.0, [150, 50], 300
    n = sum(truth)
    a = AsymmetricOneHot(eps, SeededRng(2))
    estimates = [a.debias(run(a, truth), n) for _ in range(trials)]
    for d, f in enumerate(truth):
        values = [e[d] for e in estimates]
        expected = a.variance(n, f)
        assert expected == pytest.approx(n * 4 * math.e / (math.e - 1) ** 2 + f)
        assert statistics.variance(values) == pytest.approx(expected, rel=0.45)
        # and unbiased: the mean of 300 estimates is within 5 standard errors
        assert abs(statistics.fmean(values) - f) <= 5 * math.sqrt(expected / trials)


def test_theorem_c2_symmetric_mean_and_variance_by_simulation() -> None:
    """Algorithm 4 is unbiased with variance n e^eps / (e^eps - 1)^2 (Theorem C.2)."""
    eps, truth, trials = 1.0, [150, 50], 300
    n = sum(truth)
    s = SymmetricOneHot(eps, SeededRng(3))
    estimates = [s.debias(run(s, truth), n) for _ in range(trials)]
    expected = s.variance(n)
    assert expected == pytest.approx(n * math.e / (math.e - 1) ** 2)
    for d, f in enumerate(truth):
        values = [e[d] for e in estimates]
        assert statistics.variance(values) == pytest.approx(expected, rel=0.45)
        assert abs(statistics.fmean(values) - f) <= 5 * math.sqrt(expected / trials)


def test_asymmetric_client_distribution() -> None:
    """Algorithm 1: the device's coordinate is a fair coin, the others Bernoulli(1 /
    (e^eps + 1)); 20,000 reports, 5-sigma bounds."""
    eps, n = 1.5, 20_000
    a = AsymmetricOneHot(eps, SeededRng(4))
    ones = [0, 0, 0]
    for _ in range(n):
        for i, b in enumerate(a.randomize(1, 3)):
            ones[i] += b
    q = 1 / (math.exp(eps) + 1)
    assert abs(ones[1] - n / 2) <= 5 * math.sqrt(n / 4)
    for i in (0, 2):
        assert abs(ones[i] - n * q) <= 5 * math.sqrt(n * q * (1 - q))


def test_local_epsilon_and_errors() -> None:
    assert make_randomizer("symmetric-ohe", 2).local_epsilon("replacement") == 4
    assert make_randomizer("symmetric-ohe", 2).local_epsilon("deletion") == 2
    assert make_randomizer("asymmetric-ohe", 2).local_epsilon("replacement") == 2
    with pytest.raises(ValueError):
        make_randomizer("laplace", 1)
    with pytest.raises(ValueError):
        AsymmetricOneHot(1).randomize(3, 3)
