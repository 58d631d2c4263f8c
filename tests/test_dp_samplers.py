"""Goodness of fit of the exact samplers (CKS20) and of symmetric RAPPOR.

Statistical tests use fixed seeds, so each outcome is deterministic; the thresholds are
chosen so that a *correct* sampler fails a given check with probability about 1e-6 (the
"false-failure rate"): chi-square at its 1 - 1e-6 quantile (Wilson-Hilferty), means and
variances at 4.9 standard errors (two-sided 1e-6). With about 60 such checks in this
file, a correct implementation fails any of them for a random seed with probability
below 1e-4.
"""

from __future__ import annotations

import ast
import inspect
import math
import random
import textwrap
from collections import Counter
from fractions import Fraction

import pytest

from ppm_reference.dp_policy import mechanisms as mech
from ppm_reference.dp_policy.mechanisms import (
    BinaryExpansion,
    DiscreteGaussian,
    DiscreteLaplace,
    SymmetricRappor,
    SystemRng,
    exp_bounds,
    rappor_flip_probability_expansion,
    sample_bernoulli_exp,
    sample_binomial_exact,
    sample_discrete_gaussian,
    sample_discrete_laplace,
    sample_subset,
)

Z_1E6 = 4.8916  # two-sided normal quantile for 1e-6
Z_ONE_SIDED_1E6 = 4.7534


class SeededRng:
    """Test-only RNG: a seeded `random.Random` behind the sampler's two-method interface.
    Never used outside tests."""

    def __init__(self, seed: int) -> None:
        self._r = random.Random(seed)

    def randbelow(self, n: int) -> int:
        return self._r.randrange(n)

    def getrandbits(self, k: int) -> int:
        return self._r.getrandbits(k) if k > 0 else 0


def chi2_critical(dof: int, z: float = Z_ONE_SIDED_1E6) -> float:
    """Wilson-Hilferty approximation of the chi-square quantile."""
    c = 2.0 / (9.0 * dof)
    return dof * (1.0 - c + z * math.sqrt(c)) ** 3


def chi_square(samples: list[int], pmf: dict[int, float], bins: int = 40) -> tuple[float, int]:
    """Chi-square statistic of integer samples against a pmf (given on a finite support
    holding all but a negligible mass), on bins of roughly equal probability."""
    keys = sorted(pmf)
    total = math.fsum(pmf.values())
    # Cut the support into contiguous bins of mass about 1/bins each.
    edges = []  # upper bounds (inclusive)
    acc = 0.0
    target = total / bins
    for k in keys:
        acc += pmf[k]
        if acc >= target:
            edges.append(k)
            acc = 0.0
    if not edges or edges[-1] != keys[-1]:
        edges.append(keys[-1])
    edges[-1] = math.inf  # type: ignore[call-overload]
    expected = [0.0] * len(edges)
    b = 0
    for k in keys:
        while k > edges[b]:
            b += 1
        expected[b] += pmf[k] / total
    observed = [0] * len(edges)
    counts = Counter(samples)
    for value, cnt in counts.items():
        b = 0
        while value > edges[b]:
            b += 1
        observed[b] += cnt
    # Values below the first key fall in bin 0, by construction of the while loop.
    n = len(samples)
    stat = math.fsum((o - n * e) ** 2 / (n * e) for o, e in zip(observed, expected, strict=True))
    return stat, len(edges) - 1


def check_moments(samples: list[int], pmf: dict[int, float]) -> None:
    n = len(samples)
    mean = math.fsum(k * p for k, p in pmf.items())
    var = math.fsum((k - mean) ** 2 * p for k, p in pmf.items())
    mu4 = math.fsum((k - mean) ** 4 * p for k, p in pmf.items())
    m = math.fsum(samples) / n
    assert abs(m - mean) <= Z_1E6 * math.sqrt(var / n), (m, mean)
    v = math.fsum((x - mean) ** 2 for x in samples) / n
    assert abs(v - var) <= Z_1E6 * math.sqrt((mu4 - var * var) / n), (v, var)


def gaussian_pmf(sigma: float) -> dict[int, float]:
    m = int(40 * sigma) + 2
    w = {x: math.exp(-x * x / (2 * sigma * sigma)) for x in range(-m, m + 1)}
    z = math.fsum(w.values())
    return {x: p / z for x, p in w.items() if p / z > 1e-300}


def laplace_pmf(scale: float) -> dict[int, float]:
    q = math.exp(-1.0 / scale)
    m = int(45 * scale) + 40  # the mass beyond is below e^-45
    c = (1 - q) / (1 + q)
    return {x: c * q ** abs(x) for x in range(-m, m + 1) if c * q ** abs(x) > 1e-300}


SCALES = ["0.5", "5", "23.39", "1000"]
# With 60000 samples the variance check detects a relative variance error above ~2.8%
# and the 40-bin chi-square a deviation of noncentrality ~100/60000 per sample.
N_SAMPLES = {"0.5": 100000, "5": 60000, "23.39": 60000, "1000": 60000}


@pytest.mark.parametrize("scale", SCALES)
def test_discrete_gaussian_fits_pmf(scale: str) -> None:
    rng = SeededRng(1000 + SCALES.index(scale))
    mech_ = DiscreteGaussian(scale, rng)
    samples = mech_.sample_noise(N_SAMPLES[scale])
    pmf = gaussian_pmf(float(scale))
    stat, dof = chi_square(samples, pmf)
    assert stat <= chi2_critical(dof), (stat, dof)
    check_moments(samples, pmf)


@pytest.mark.parametrize("scale", SCALES)
def test_discrete_laplace_fits_pmf(scale: str) -> None:
    rng = SeededRng(2000 + SCALES.index(scale))
    mech_ = DiscreteLaplace(scale, rng)
    samples = mech_.sample_noise(N_SAMPLES[scale])
    pmf = laplace_pmf(float(scale))
    stat, dof = chi_square(samples, pmf)
    assert stat <= chi2_critical(dof), (stat, dof)
    check_moments(samples, pmf)
    assert math.isclose(mech_.variance(), math.fsum(k * k * p for k, p in pmf.items()),
                        rel_tol=1e-9)


def test_discrete_gaussian_irrational_sigma_via_sigma2() -> None:
    # sigma = sqrt(2): only sigma^2 = 2 needs to be rational.
    rng = SeededRng(7)
    samples = [sample_discrete_gaussian(0, rng, sigma2=2) for _ in range(20000)]
    pmf = gaussian_pmf(math.sqrt(2.0))
    stat, dof = chi_square(samples, pmf, bins=9)
    assert stat <= chi2_critical(dof)
    check_moments(samples, pmf)


@pytest.mark.parametrize("gamma", ["0", "1/3", "1", "5/2", "7"])
def test_bernoulli_exp(gamma: str) -> None:
    rng = SeededRng(3000 + len(gamma))
    n = 40000
    p = math.exp(-float(Fraction(gamma)))
    hits = sum(sample_bernoulli_exp(gamma, rng) for _ in range(n))
    assert abs(hits - n * p) <= Z_1E6 * math.sqrt(n * p * (1 - p)) + 1e-9


def test_parameter_validation() -> None:
    with pytest.raises(ValueError):
        sample_bernoulli_exp(-1)
    with pytest.raises(ValueError):
        sample_discrete_laplace(0)
    with pytest.raises(ValueError):
        DiscreteGaussian("-1")
    with pytest.raises(ValueError):
        DiscreteGaussian()
    with pytest.raises(ValueError):
        SymmetricRappor(0)
    with pytest.raises(TypeError):
        mech.to_fraction(True)
    with pytest.raises(ValueError):
        mech.to_fraction(float("nan"))
    assert mech.to_fraction("23.39") == Fraction(2339, 100)
    assert mech.to_fraction(0.5) == Fraction(1, 2)


# -- exactness: no floating point in the sampling path ---------------------------------

SAMPLING_FUNCTIONS = [
    mech.sample_bernoulli,
    mech._bernoulli_exp_minus_one,
    mech._bernoulli_exp,
    mech._geometric_exp,
    mech._discrete_laplace,
    mech._discrete_gaussian,
    mech._sigma2_params,
    mech.sample_binomial_exact,
    mech.sample_subset,
    mech.exp_bounds,
    BinaryExpansion._extend,
    BinaryExpansion.bit,
    SymmetricRappor.flip_positions,
    SymmetricRappor.add_noise,
    SymmetricRappor.sample_noise,
    SymmetricRappor.coin_flip,
    DiscreteGaussian.sample,
    DiscreteLaplace.sample,
    SystemRng.randbelow,
    SystemRng.getrandbits,
]


@pytest.mark.parametrize("func", SAMPLING_FUNCTIONS, ids=lambda f: f.__qualname__)
def test_no_floating_point_in_sampling_path(func: object) -> None:
    """The source of every function on a sampling path has no float literal, no true
    division and no call to float() or the math module."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))  # type: ignore[arg-type]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            assert not isinstance(node.value, float), ast.dump(node)
        if isinstance(node, ast.BinOp):
            assert not isinstance(node.op, ast.Div) or _is_fraction_context(func), \
                ast.dump(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id != "float"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            assert node.value.id not in ("math", "random"), ast.dump(node)


def _is_fraction_context(func: object) -> bool:
    # exp_bounds divides Fractions (exact rational arithmetic), nothing else may divide.
    return func is mech.exp_bounds


# -- exact binary expansion and binomial ------------------------------------------------


def test_exp_bounds_are_certified() -> None:
    for x in [Fraction(0), Fraction(1, 3), Fraction(5), Fraction(13, 2), Fraction(-7),
              Fraction(1, 10**6)]:
        for prec in (30, 64, 200):
            lo, hi = exp_bounds(x, prec)
            assert lo <= hi <= lo + 4
            # Compare with a high-precision rational evaluation of the series.
            approx = sum(Fraction(x) ** k / math.factorial(k) for k in range(200))
            exact_scaled = approx * (1 << prec)
            assert lo - 1 <= exact_scaled <= hi + 1


def test_rappor_flip_probability_bits() -> None:
    for eps0 in (Fraction(1, 2), Fraction(5), Fraction(13, 2)):
        bits = rappor_flip_probability_expansion(eps0)
        # p to ~2^-400 from 400 terms of the exponential series (exact rationals).
        e = sum((eps0 ** k / math.factorial(k) for k in range(400)), Fraction(0))
        scaled = Fraction(1 << 300) / (1 + e)
        prefix = scaled.numerator // scaled.denominator
        value = 0
        for j in range(1, 301):
            value = (value << 1) | bits.bit(j)
        assert value == prefix
        # Bits far beyond the initial precision are available (precision doubling).
        assert bits.bit(500) in (0, 1)


def test_binomial_exact_dyadic_and_irrational() -> None:
    rng = SeededRng(11)
    # p = 5/16 exactly (dyadic): the expansion is exact.
    dyadic = BinaryExpansion(lambda prec: ((5 << prec) >> 4, (5 << prec) >> 4))
    n, trials = 40, 20000
    samples = [sample_binomial_exact(n, dyadic, rng) for _ in range(trials)]
    pmf = {k: math.comb(n, k) * (5 / 16) ** k * (11 / 16) ** (n - k) for k in range(n + 1)}
    stat, dof = chi_square(samples, pmf, bins=12)
    assert stat <= chi2_critical(dof)
    check_moments(samples, pmf)
    p = 1 / (1 + math.exp(1.0))
    irr = rappor_flip_probability_expansion(Fraction(1))
    samples = [sample_binomial_exact(n, irr, rng) for _ in range(trials)]
    pmf = {k: math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(n + 1)}
    stat, dof = chi_square(samples, pmf, bins=12)
    assert stat <= chi2_critical(dof)
    check_moments(samples, pmf)


def test_sample_subset_uniform() -> None:
    rng = SeededRng(12)
    counts = Counter(tuple(sample_subset(5, 2, rng)) for _ in range(20000))
    assert len(counts) == 10  # all 10 subsets occur
    stat = math.fsum((c - 2000) ** 2 / 2000 for c in counts.values())
    assert stat <= chi2_critical(9)
    with pytest.raises(ValueError):
        sample_subset(3, 4, rng)


# -- symmetric RAPPOR -------------------------------------------------------------------


def test_rappor_fast_path_matches_definition() -> None:
    """Each coordinate flips with probability 1/(e^eps0 + 1), independently: the number
    of flips is Binomial(d, p), every position is flipped with probability p, and the
    per-coordinate reference implementation agrees."""
    eps0 = 1.0
    p = 1.0 / (math.exp(eps0) + 1.0)
    d, trials = 30, 20000
    rap = SymmetricRappor(eps0, SeededRng(21))
    data = [1] + [0] * (d - 1)
    weights = []
    per_pos = [0] * d
    pairs = 0
    for _ in range(trials):
        out = rap.add_noise(data)
        flips = [i for i in range(d) if out[i] != data[i]]
        weights.append(len(flips))
        for i in flips:
            per_pos[i] += 1
        pairs += (0 in flips) and (1 in flips)
    pmf = {k: math.comb(d, k) * p ** k * (1 - p) ** (d - k) for k in range(d + 1)}
    stat, dof = chi_square(weights, pmf, bins=10)
    assert stat <= chi2_critical(dof)
    for c in per_pos:
        assert abs(c - trials * p) <= Z_1E6 * math.sqrt(trials * p * (1 - p))
    # Pairwise independence of two positions.
    assert abs(pairs - trials * p * p) <= Z_1E6 * math.sqrt(trials * p * p * (1 - p * p))
    # Reference implementation (one exact coin per coordinate).
    slow = SymmetricRappor(eps0, SeededRng(22))
    n_flips = sum(sum(slow.add_noise_per_coordinate([0] * d)) for _ in range(2000))
    n_coins = 2000 * d
    assert abs(n_flips - n_coins * p) <= Z_1E6 * math.sqrt(n_coins * p * (1 - p))


def test_rappor_sample_noise_and_validation() -> None:
    rap = SymmetricRappor("6.5", SeededRng(23))
    p = 1.0 / (math.exp(6.5) + 1.0)
    total = sum(sum(rap.sample_noise(1000)) for _ in range(300))
    assert abs(total - 300000 * p) <= Z_1E6 * math.sqrt(300000 * p)
    with pytest.raises(ValueError):
        rap.add_noise([0, 2, 1])
    assert rap.add_noise([]) == []


def test_rappor_debias_formula() -> None:
    rap = SymmetricRappor(2.0)
    e = math.exp(2.0)
    assert rap.debias([10, 0], 50) == pytest.approx(
        [10 * (e + 1) / (e - 1) - 50 / (e - 1), -50 / (e - 1)])
    assert rap.debiased_std(100000) == pytest.approx(math.sqrt(100000 * e) / (e - 1))


# -- RNG and the noise pool -------------------------------------------------------------


def test_system_rng_ranges() -> None:
    rng = SystemRng()
    for n in (1, 2, 3, 7, 2**64, 2**64 + 1, 10**30):
        for _ in range(50):
            assert 0 <= rng.randbelow(n) < n
    for k in (0, 1, 63, 64, 65, 200):
        for _ in range(20):
            assert 0 <= rng.getrandbits(k) < 2**k
    with pytest.raises(ValueError):
        rng.randbelow(0)
    # A fair coin from the OS CSPRNG (false failure 1e-6).
    heads = sum(rng.randbelow(2) for _ in range(20000))
    assert abs(heads - 10000) <= Z_1E6 * math.sqrt(5000)
    # Buffer cleared as after fork: still works.
    rng._discard()
    assert 0 <= rng.randbelow(10) < 10


def test_noise_pool_takes_precomputed_values() -> None:
    pool = mech.NoisePool(DiscreteGaussian(3, SeededRng(31)))
    pool.refill(100)
    assert len(pool) == 100
    first = list(pool._values)[:10]
    assert pool.take(10) == first
    assert pool.synchronous_draws == 0
    pool.take(95)  # 90 left in the pool: 5 drawn synchronously
    assert pool.synchronous_draws == 5
    pool.start_background(target=64, chunk=16)
    try:
        for _ in range(200):
            if len(pool) >= 64:
                break
            import time

            time.sleep(0.01)
        assert len(pool) >= 64
    finally:
        pool.stop_background()
