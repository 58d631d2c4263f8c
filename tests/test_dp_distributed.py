"""The distributed discrete Laplace mechanism of seed 003 (Section 4): the exact Pólya
sampler, the sum of the Clients' shares against the discrete Laplace pmf (Equation 4),
the dropout over-provisioning, the DAP policy and `ppm dp distributed-laplace`.

Statistical checks use fixed seeds; each threshold is set so that a *correct* sampler
fails it with probability about 1e-6 (chi-square at its 1 - 1e-6 quantile by
Wilson-Hilferty, moments at 4.9 standard errors). With about 20 such checks here, a correct
implementation fails for a random seed with probability below 1e-4.
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

from ppm_reference.dap.dp import encode_spec, policy_from_spec
from ppm_reference.dp_policy import distributed
from ppm_reference.dp_policy.cli import distributed_laplace
from ppm_reference.dp_policy.distributed import (
    DistributedDiscreteLaplace,
    SumVecWithClientPolyaShares,
    dp_shard_size,
    sample_polya,
)
from ppm_reference.vdaf import registry
from tests.test_dp_samplers import Z_1E6, SeededRng, chi2_critical, chi_square

ROOT = Path(__file__).resolve().parent.parent


def polya_pmf(alpha: float, beta: float, cut: float = 1e-13) -> dict[int, float]:
    """Definition 4.1: C(alpha + k - 1, k) beta^k (1 - beta)^alpha, by the ratio
    P(k + 1)/P(k) = (alpha + k)/(k + 1) beta."""
    out = {0: (1.0 - beta) ** alpha}
    k = 0
    while True:
        nxt = out[k] * (alpha + k) / (k + 1) * beta
        k += 1
        if nxt < cut and k > 5:
            return out
        out[k] = nxt


def laplace_pmf(beta: float, cut: float = 1e-13) -> dict[int, float]:
    out = {}
    k = 0
    while True:
        p = distributed.discrete_laplace_pmf(k, beta)
        if p < cut:
            return out
        out[k] = p
        out[-k] = p
        k += 1


def check_mean_variance(samples: list[int], variance: float) -> None:
    n = len(samples)
    mean = math.fsum(samples) / n
    assert abs(mean) <= Z_1E6 * math.sqrt(variance / n), mean
    var = math.fsum(x * x for x in samples) / n
    # Var of the sample second moment: E[Z^4] - Var^2; for these laws E[Z^4] < 30 Var^2
    # when Var >= 1 (discrete Laplace: E Z^4 / Var^2 <= 6 + 1/Var); bound generously.
    assert abs(var - variance) <= Z_1E6 * math.sqrt(30 * variance**2 / n), (var, variance)


# -- the Pólya sampler itself ---------------------------------------------------------------


@pytest.mark.parametrize(("alpha", "rate", "seed"),
                         [("1/3", "1/2", 1), ("1", "1/5", 2), ("1/10", "1/10", 3)])
def test_polya_fits_definition_4_1(alpha: str, rate: str, seed: int) -> None:
    rng = SeededRng(seed)
    samples = [sample_polya(alpha, rate, rng) for _ in range(30000)]
    a, beta = float(Fraction(alpha)), math.exp(-float(Fraction(rate)))
    pmf = polya_pmf(a, beta)
    stat, dof = chi_square(samples, pmf, bins=12)
    assert stat <= chi2_critical(dof), (stat, dof)
    mean = math.fsum(samples) / len(samples)
    expected_mean = a * beta / (1 - beta)
    expected_var = a * beta / (1 - beta) ** 2
    assert abs(mean - expected_mean) <= Z_1E6 * math.sqrt(expected_var / len(samples))


@pytest.mark.parametrize(("alpha", "rate", "seed"), [("1/50", "1/40", 4), ("1/3", "1/8", 5)])
def test_fast_polya_matches_the_plain_urn(alpha: str, rate: str, seed: int) -> None:
    """`_polya` (jumping to the urn's first A through record times) and `_polya_urn`
    (the urn step by step) against Definition 4.1 with small alpha and large E[G] = 40
    and 8, the regime where the jump matters; and the two samples' means agree."""
    a, r = Fraction(alpha), Fraction(rate)
    rng = SeededRng(seed)
    fast = [distributed._polya(a.numerator, a.denominator, r.numerator, r.denominator,
                               rng.randbelow, rng.getrandbits) for _ in range(40000)]
    plain = [distributed._polya_urn(a.numerator, a.denominator, r.numerator,
                                    r.denominator, rng.randbelow) for _ in range(40000)]
    beta = math.exp(-float(r))
    pmf = polya_pmf(float(a), beta)
    var = float(a) * beta / (1 - beta) ** 2
    for samples in (fast, plain):
        stat, dof = chi_square(samples, pmf, bins=8)
        assert stat <= chi2_critical(dof), (stat, dof)
    diff = math.fsum(fast) / len(fast) - math.fsum(plain) / len(plain)
    assert abs(diff) <= Z_1E6 * math.sqrt(2 * var / len(fast))


def test_next_record_law() -> None:
    """P(N > m) = r / m for the next record after r (the jump `_polya` relies on)."""
    rng = SeededRng(6)
    n = 40000
    draws = [distributed._next_record(3, 10**9, rng.getrandbits) for _ in range(n)]
    assert min(draws) >= 4
    for m in (4, 6, 12, 30):
        p = 3 / m
        freq = sum(1 for d in draws if d > m) / n
        assert abs(freq - p) <= Z_1E6 * math.sqrt(p * (1 - p) / n), (m, freq)
    capped = [distributed._next_record(3, 10, rng.getrandbits) for _ in range(2000)]
    assert max(capped) == 11 and min(capped) >= 4


def test_polya_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        sample_polya("3/2", "1")
    with pytest.raises(ValueError):
        sample_polya("0", "1")
    with pytest.raises(ValueError):
        sample_polya("1/2", "0")


def test_sampling_path_has_no_floating_point() -> None:
    """The functions that draw (`_polya`, `DistributedDiscreteLaplace.sample`) contain no
    float literal, no float() call and no true division: integer arithmetic only."""
    for func in (distributed._polya, distributed._polya_urn, distributed._next_record,
                 DistributedDiscreteLaplace.sample,
                 DistributedDiscreteLaplace.sample_noise):
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
        for node in ast.walk(tree):
            assert not (isinstance(node, ast.Constant) and isinstance(node.value, float))
            assert not (isinstance(node, ast.Call) and getattr(node.func, "id", "") in
                        ("float", "exp", "log", "sqrt"))
            assert not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div))


# -- Theorem 4.2: the sum of the shares is discrete Laplace ----------------------------------


@pytest.mark.parametrize(("epsilon", "sensitivity", "clients", "seed"),
                         [("1", 1, 8, 11), ("1/2", 2, 5, 12)])
def test_sum_of_shares_is_discrete_laplace(epsilon: str, sensitivity: int, clients: int,
                                           seed: int) -> None:
    mech = DistributedDiscreteLaplace(epsilon, clients, sensitivity, rng=SeededRng(seed))
    sums = [sum(mech.sample_noise(clients)) for _ in range(12000)]
    beta = math.exp(-float(Fraction(epsilon)) / sensitivity)
    assert math.isclose(mech.beta, beta)
    stat, dof = chi_square(sums, laplace_pmf(beta), bins=20)
    assert stat <= chi2_critical(dof), (stat, dof)
    check_mean_variance(sums, mech.summed().variance)
    # The formula is the discrete Laplace variance 2 beta / (1 - beta)^2.
    assert math.isclose(mech.summed().variance, 2 * beta / (1 - beta) ** 2)


def test_dropout_over_provisioning() -> None:
    """With dropout 0.2 of S = 10 Clients, alpha = 1/8: the sum of any 8 shares is
    exactly discrete Laplace (chi-square), the sum of all 10 has 10/8 of its variance,
    and the guarantee is lost below 8 shares."""
    mech = DistributedDiscreteLaplace("1", 10, dropout="0.2", rng=SeededRng(21))
    assert mech.dp_clients == 8 and mech.alpha == Fraction(1, 8)
    eight = [sum(mech.sample_noise(8)) for _ in range(12000)]
    stat, dof = chi_square(eight, laplace_pmf(mech.beta), bins=20)
    assert stat <= chi2_critical(dof), (stat, dof)
    ten = [sum(mech.sample_noise(10)) for _ in range(12000)]
    full = mech.summed()
    assert math.isclose(full.variance, 10 / 8 * mech.summed(8).variance)
    check_mean_variance(ten, full.variance)
    assert mech.summed(8).epsilon == 1.0 and mech.summed(7).epsilon == math.inf


def test_dp_shard_size() -> None:
    assert dp_shard_size(10000, "0.1") == 9000       # the paper's Figure 5 setting
    assert dp_shard_size(10, "0.05") == 10            # floor(0.5) = 0 may drop out
    assert dp_shard_size(7, 0) == 7
    with pytest.raises(ValueError):
        dp_shard_size(10, "1")


# -- the DAP policy -------------------------------------------------------------------------


def test_policy_modulo_clip_roundtrip() -> None:
    """Clients reduce modulo m; the Collector's reduction of the plain sum recovers
    true counts + summed noise (Theorem 4.2's post-processing argument)."""
    policy = SumVecWithClientPolyaShares("1", 50, length=6, max_measurement=255,
                                         rng=SeededRng(31), build_vdaf=False)
    assert policy.modulus_clip == 256
    measurements = [[int(i % 6 == j) for j in range(6)] for i in range(50)]
    noisy = [policy.add_noise_to_measurement(m) for m in measurements]
    assert all(0 <= x < 256 for v in noisy for x in v)
    plain = [sum(v[j] for v in noisy) for j in range(6)]     # what Prio3SumVec sums
    result = policy.debias_agg_result(plain, 50)
    truth = [sum(m[j] for m in measurements) for j in range(6)]
    noise = [r - t for r, t in zip(result, truth, strict=True)]
    assert noise != [0] * 6     # all six zero has probability tanh(1/2)^6 ~ 0.01
    assert all(abs(z) < 30 for z in noise)
    # Signed reading: [-m/2, m/2).
    assert policy.debias_agg_result([128, 127, 255, 256], 1) == [-128, 127, -1, 0]


def test_policy_bound_to_a_dap_task() -> None:
    spec = {"policy": "SumVecWithClientPolyaShares", "epsilon": 0.5, "clients": 100,
            "sensitivity": 1, "dropout": 0.1}
    assert encode_spec(spec).startswith(b'{"clients":100')
    vdaf = registry.build("Prio3SumVec", {"length": 4, "max_measurement": 1023,
                                          "chunk_length": 2})
    policy = policy_from_spec(spec, vdaf)
    assert isinstance(policy, SumVecWithClientPolyaShares)
    assert policy.modulus_clip == 1024 and policy.mechanism.dp_clients == 90
    assert policy.mechanism.epsilon_exact == Fraction(1, 2)
    g = policy.guarantees(batch_size=100)
    assert g["OAMC"].epsilon == 0.5 and g["OAOC"].epsilon == math.inf
    assert policy.guarantees(batch_size=100, honest_clients=80)["OAMC"].epsilon == math.inf
    hist = registry.build("Prio3Histogram", {"length": 4, "chunk_length": 2})
    with pytest.raises(ValueError, match="applies to Prio3SumVec"):
        policy_from_spec(spec, hist)
    for bad in ({**spec, "clients": "x"}, {**spec, "epsilon": -1}, {**spec, "clients": 0},
                {**spec, "dropout": 1}, {k: v for k, v in spec.items() if k != "clients"}):
        with pytest.raises(ValueError):
            policy_from_spec(bad, vdaf)


# -- ppm dp distributed-laplace --------------------------------------------------------------


def test_cli_values() -> None:
    obj = distributed_laplace("1", 1000)
    beta = math.exp(-1)
    assert math.isclose(obj["variance"], 2 * beta / (1 - beta) ** 2)
    assert math.isclose(obj["std"], math.sqrt(obj["variance"]))
    over = distributed_laplace("1", 1000, dropout="0.1")
    assert over["dp_clients"] == 900
    assert math.isclose(over["variance"], obj["variance"] * 1000 / 900)


def test_cli_subprocess_json_and_errors() -> None:
    out = subprocess.run([sys.executable, "-m", "ppm_reference", "dp", "distributed-laplace",
                          "--epsilon", "0.5", "--clients", "200", "--sensitivity", "2",
                          "--json"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    obj = json.loads(out.stdout)
    beta = math.exp(-0.25)
    assert math.isclose(obj["variance"], 2 * beta / (1 - beta) ** 2)
    assert {"std", "variance"} <= set(obj)
    bad = subprocess.run([sys.executable, "-m", "ppm_reference", "dp", "distributed-laplace",
                          "--epsilon", "x", "--clients", "10"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "ppm: error: --epsilon must be a number, got 'x'"
