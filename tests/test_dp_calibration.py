"""Calibration: the analytic Gaussian (BW18), the exact discrete Gaussian delta (CKS20),
and the Renyi/zCDP conversions. Deterministic (no sampling)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from ppm_reference.dp_policy import calibration as cal

SQRT2 = math.sqrt(2.0)

# The draft's Table 2: epsilon -> (printed sigma (OAOC), printed std with c = 2,
#                                  exact root of the BW18 condition, 4 decimals)
TABLE2 = {
    0.317: (23.3903, 33.0788, 23.3907),
    0.906: (8.5402, 12.0777, 8.5401),
    1.528: (5.1904, 7.3403, 5.1903),
}


@pytest.mark.parametrize("eps", sorted(TABLE2))
def test_table2_exact_root(eps: float) -> None:
    printed, _, exact4 = TABLE2[eps]
    sigma = cal.analytic_gaussian_sigma(eps, 1e-9, SQRT2)
    assert round(sigma, 4) == exact4
    # Solved to (much better than) 1e-6 relative: delta at sigma is 1e-9 within 1e-6,
    # and one part in 1e6 less noise would break (epsilon, 1e-9).
    d = cal.analytic_gaussian_delta(sigma, eps, SQRT2)
    assert d <= 1e-9 * (1 + 1e-9)
    assert d >= 1e-9 * (1 - 1e-6)
    assert cal.analytic_gaussian_delta(sigma * (1 - 1e-6), eps, SQRT2) > 1e-9
    # The printed value is not the root: it differs in the 4th decimal.
    assert abs(sigma - printed) > 5e-5


@pytest.mark.parametrize("eps", sorted(TABLE2))
def test_table2_printed_values_come_from_the_absolute_tolerance(eps: float) -> None:
    printed, printed_c2, _ = TABLE2[eps]
    coarse = cal.analytic_gaussian_sigma_abs_tol(eps, 1e-9, SQRT2, tol=1e-12)
    assert cal.round_up(coarse) == printed
    assert cal.round_up(coarse * SQRT2) == printed_c2
    # ... and with a tolerance relative to delta the same procedure finds the root.
    fine = cal.analytic_gaussian_sigma_abs_tol(eps, 1e-9, SQRT2, tol=1e-9 * 1e-9)
    assert fine == pytest.approx(cal.analytic_gaussian_sigma(eps, 1e-9, SQRT2), rel=1e-8)


def test_analytic_gaussian_both_cases_and_inverse() -> None:
    # delta above and below delta_0 = Phi(0) - e^eps Phi(-sqrt(2 eps)) (both branches).
    for eps, delta, sens in [(1.0, 0.3, 1.0), (0.1, 0.2, 2.0), (2.0, 1e-5, 1.0),
                             (8.0, 1e-12, 3.0)]:
        sigma = cal.analytic_gaussian_sigma(eps, delta, sens)
        assert cal.analytic_gaussian_delta(sigma, eps, sens) == pytest.approx(delta, rel=1e-8)
        assert cal.analytic_gaussian_epsilon(sigma, delta, sens) == pytest.approx(eps,
                                                                                 rel=1e-8)
    # Scale invariance: sigma is proportional to the sensitivity.
    assert cal.analytic_gaussian_sigma(0.5, 1e-6, 3.0) == pytest.approx(
        3 * cal.analytic_gaussian_sigma(0.5, 1e-6, 1.0), rel=1e-10)
    # Better than the classical sqrt(2 ln(1.25/delta)) / eps calibration.
    assert cal.analytic_gaussian_sigma(1.0, 1e-8, 1.0) < math.sqrt(2 * math.log(1.25e8))
    # Paper 000 Example 3: "sigma = 5.1" for (1, 1e-8) with sensitivity 1 (rounded).
    assert cal.analytic_gaussian_sigma(1.0, 1e-8, 1.0) == pytest.approx(5.1, abs=5e-4)
    with pytest.raises(ValueError):
        cal.analytic_gaussian_sigma(0.0, 1e-9, 1.0)


def _dg_pmf(sigma: float) -> dict[int, float]:
    m = int(40 * sigma) + 3
    w = {x: math.exp(-x * x / (2 * sigma * sigma)) for x in range(-m, m + 1)}
    z = math.fsum(w.values())
    return {x: v / z for x, v in w.items()}


@pytest.mark.parametrize("sigma,eps,delta_vec", [
    (0.8, 0.5, (1,)), (2.0, 1.0, (1,)), (3.0, 0.3, (2,)), (1.5, 1.0, (1, -1)),
    (2.5, 0.7, (1, -1)), (2.0, 2.0, (2, 1)), (1.2, 1.0, (1, 1, 1))])
def test_discrete_gaussian_delta_brute_force(sigma: float, eps: float,
                                             delta_vec: tuple[int, ...]) -> None:
    """Against sum_z (P(z) - e^eps P(z - y))_+ over the (truncated) product support."""
    pmf = _dg_pmf(sigma)
    ee = math.exp(eps)
    keys = list(pmf)
    terms = []
    if len(delta_vec) == 1:
        (y,) = delta_vec
        for z in range(min(keys) - abs(y), max(keys) + abs(y) + 1):
            terms.append(max(0.0, pmf.get(z, 0.0) - ee * pmf.get(z - y, 0.0)))
    elif len(delta_vec) == 2:
        a, b = delta_vec
        for z1 in keys:
            for z2 in keys:
                p = pmf[z1] * pmf[z2]
                q = pmf.get(z1 - a, 0.0) * pmf.get(z2 - b, 0.0)
                terms.append(max(0.0, p - ee * q))
    else:
        for z1 in keys:
            for z2 in keys:
                for z3 in keys:
                    p = pmf[z1] * pmf[z2] * pmf[z3]
                    q = pmf.get(z1 - 1, 0.0) * pmf.get(z2 - 1, 0.0) * pmf.get(z3 - 1, 0.0)
                    terms.append(max(0.0, p - ee * q))
    expected = math.fsum(terms)
    got = cal.discrete_gaussian_delta(sigma, eps, delta_vec)
    assert got.method == "exact"
    assert got.delta == pytest.approx(expected, rel=1e-9, abs=1e-15)
    if len(delta_vec) <= 2:
        generic = cal.additive_noise_delta(cal.discrete_gaussian_pmf(sigma), eps, delta_vec)
        assert generic == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_discrete_gaussian_theorem7_closed_form() -> None:
    """CKS20 Theorem 7 in one dimension: P[X > eps s^2/D - D/2] - e^eps P[X > ...+D/2]."""
    sigma, eps, d = 4.0, 0.6, 3
    pmf = _dg_pmf(sigma)

    def greater(c: float) -> float:
        return math.fsum(p for x, p in pmf.items() if x > c)

    expected = (greater(eps * sigma**2 / d - d / 2)
                - math.exp(eps) * greater(eps * sigma**2 / d + d / 2))
    assert cal.discrete_gaussian_delta(sigma, eps, [d]).delta == pytest.approx(expected,
                                                                               rel=1e-12)


def test_discrete_gaussian_delta_decreasing_and_calibration_minimal() -> None:
    vec = (1, -1)
    sigmas = [0.5 + 0.25 * i for i in range(40)]
    deltas = [cal.discrete_gaussian_delta(s, 1.0, vec).delta for s in sigmas]
    assert all(a >= b for a, b in zip(deltas, deltas[1:], strict=False))
    for eps in (0.317, 1.528):
        s = cal.discrete_gaussian_sigma(eps, 1e-9, vec)
        assert cal.discrete_gaussian_delta(s, eps, vec).delta <= 1e-9
        assert cal.discrete_gaussian_delta(s * (1 - 1e-7), eps, vec).delta > 1e-9
    # At small sigma the discrete and continuous Gaussians differ (the draft's KT note).
    s_disc = cal.discrete_gaussian_sigma(3.0, 1e-3, (1,))
    s_cont = cal.analytic_gaussian_sigma(3.0, 1e-3, 1.0)
    assert abs(s_disc - s_cont) / s_cont > 0.01


def test_discrete_gaussian_two_aggregators() -> None:
    sigma = 5.2
    one = cal.additive_noise_delta(cal.sum_of_discrete_gaussians_pmf(sigma, 1), 1.528,
                                   (1, -1))
    assert one == pytest.approx(cal.discrete_gaussian_delta(sigma, 1.528, (1, -1)).delta,
                                rel=1e-9)
    two = cal.additive_noise_delta(cal.sum_of_discrete_gaussians_pmf(sigma, 2), 1.528,
                                   (1, -1))
    assert two < one / 1000
    # Close to a continuous Gaussian with sigma * sqrt(2).
    cont = cal.analytic_gaussian_delta(sigma * SQRT2, 1.528, SQRT2)
    assert two == pytest.approx(cont, rel=0.05)


def test_long_vector_falls_back_to_zcdp_bound() -> None:
    res = cal.discrete_gaussian_delta(40.0, 1.0, [1] * 500)
    assert res.method == "zcdp-bound"
    rho = 500 / (2 * 40.0**2)
    assert res.delta == pytest.approx(cal.zcdp_delta(rho, 1.0), rel=1e-12)
    # The bound is above the continuous Gaussian's exact delta.
    assert res.delta >= cal.analytic_gaussian_delta(40.0, 1.0, math.sqrt(500))


def test_conversions() -> None:
    rho, delta = 0.05, 1e-9
    tight = cal.zcdp_to_dp(rho, delta)
    simple = cal.zcdp_to_dp(rho, delta, "bs16")
    assert tight < simple
    assert simple == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1e9)))
    # zcdp_delta is the inverse of zcdp_to_dp.
    assert cal.zcdp_delta(rho, tight) == pytest.approx(delta, rel=1e-6)
    # Every conversion is a valid (hence not smaller) bound for the Gaussian mechanism,
    # whose exact epsilon is given by BW18.
    sigma = 1.0 / math.sqrt(2 * rho)
    exact = cal.analytic_gaussian_epsilon(sigma, delta, 1.0)
    assert exact < tight
    # Renyi conversions: CKS20 Proposition 12 improves on Mironov's.
    curve = cal_gauss_curve(sigma)
    e_cks, a_cks = cal.rdp_to_dp(curve, delta)
    e_mir, _ = cal.rdp_to_dp(curve, delta, method="mironov")
    assert exact < e_cks < e_mir
    assert cal.rdp_to_delta_at(curve(a_cks), a_cks, e_cks) == pytest.approx(delta, rel=1e-6)
    assert cal.pure_dp_to_zcdp(2.0) == 2.0
    assert cal.gaussian_zcdp(2.0, 1.0) == 0.125
    assert cal.discrete_laplace_epsilon(4.0, 2) == 0.5
    with pytest.raises(ValueError):
        cal.rdp_to_epsilon_at(1.0, 1.0, 1e-9)


def cal_gauss_curve(sigma: float):  # type: ignore[no-untyped-def]
    return lambda a: a / (2 * sigma * sigma)


def test_rational_at_least() -> None:
    for x in (23.39072940682145, 0.000123456789, 5.0, 1e6 + 0.5):
        q = cal.rational_at_least(x)
        assert isinstance(q, Fraction)
        assert q >= Fraction(x)
        assert float(q) <= x * (1 + 1e-5)
    assert cal.rational_at_least(23.39072940682145) == Fraction(233908, 10000)


def test_kronecker_convolution_matches_direct() -> None:
    import random

    rnd = random.Random(5)
    for la, lb in ((60, 60), (200, 75), (513, 300)):
        a = [rnd.random() for _ in range(la)]
        b = [rnd.random() ** 8 for _ in range(lb)]
        za, zb = sum(a), sum(b)
        pa = cal.IntegerPmf(-3, tuple(x / za for x in a))
        pb = cal.IntegerPmf(7, tuple(x / zb for x in b))
        fast = cal.convolve(pa, pb)
        slow = cal._convolve_direct(pa.probs, pb.probs, 0.0)
        assert fast.offset == 4
        assert len(fast.probs) == len(slow)
        for f, s in zip(fast.probs, slow, strict=True):
            assert abs(f - s) <= 1e-13 * s + 1e-30


def test_discrete_gaussian_delta_three_coordinates_large_sigma() -> None:
    """y = (1, 1, 1) at sigma 6 (the convolution takes the big-integer path) against
    CKS20's identity evaluated on the law of X1 + X2 + X3 computed naively here."""
    sigma, eps = 6.0, 0.5
    pmf = _dg_pmf(sigma)
    keys = sorted(pmf)
    two: dict[int, float] = {}
    for x in keys:
        for y in keys:
            two[x + y] = two.get(x + y, 0.0) + pmf[x] * pmf[y]
    three: dict[int, float] = {}
    for s, p in two.items():
        if p < 1e-40:
            continue
        for x in keys:
            three[s + x] = three.get(s + x, 0.0) + p * pmf[x]

    def greater(c: float) -> float:
        return math.fsum(p for v, p in three.items() if v > c)

    norm2 = 3.0
    expected = (greater(eps * sigma**2 - norm2 / 2)
                - math.exp(eps) * greater(eps * sigma**2 + norm2 / 2))
    got = cal.discrete_gaussian_delta(sigma, eps, (1, 1, 1))
    assert got.method == "exact"
    assert got.delta == pytest.approx(expected, rel=1e-9)
