"""Accounting for samplable anonymous aggregation (paper 000, Talwar et al.) and random
check-ins (paper 002, Balle et al.), and the minimum cohort of paper 004.

What each function computes, and from which statement:

* `poisson_sampling`: amplification by Poisson sampling of an (eps, delta)-DP mechanism
  at rate q, paper 000 Theorem 4 ([KLNRS08]): eps' = log(1 + q (e^eps - 1)),
  delta' = q delta.
* `sampled_gaussian_rdp` / `sampled_gaussian_epsilon`: the Poisson-subsampled Gaussian
  mechanism (paper 000 Example 1 and Example 5) by Renyi DP: at integer orders alpha the
  RDP is exactly log(A_alpha) / (alpha - 1) with
  A_alpha = sum_k C(alpha, k) (1 - q)^(alpha - k) q^k exp((k^2 - k) / (2 sigma^2))
  ([MTZ19] Section 3.3, the "moments accountant" of [DLDP] in closed form), composed over
  T rounds by adding curves ([Mir17] Proposition 1) and converted with
  `calibration.rdp_to_dp`.
* `gaussian_composed_epsilon`: the unsampled Gaussian composed over T rounds exactly:
  T Gaussian mechanisms of noise multiplier sigma are one Gaussian mechanism of noise
  multiplier sigma / sqrt(T) (Gaussian DP, mu = sqrt(T) / sigma), whose exact (eps, delta)
  curve is the analytic Gaussian's ([BW18], `calibration.analytic_gaussian_epsilon`).
* `checkins_fixed_epsilon`, `checkins_sliding_epsilon`: paper 002 Theorems 3.2 and 4.3,
  `shuffling_epsilon_bkmtt`: its Theorem 5.1 (and `shuffling_epsilon_efmrtt19`, the bound
  of [EFMRTT19] Theorem 7 it is compared with in its Figure 2);
  `expected_dummies_fixed`, `expected_dummies_sliding`: its Propositions 3.4 and 4.4.
* `min_cohort`: the smallest cohort m for which the aggregate of m eps0-DP reports is
  (eps, delta)-DP (paper 004 Section 3.1, "Check 3"), by the numerical shuffling bound
  that paper 004 recommends ([31] = FMT, `accounting.shuffle_min_batch_size`), by its
  Theorem 3.1 closed form (`accounting.shuffle_closed_form`), or for symmetric RAPPOR by
  amplification by aggregation (`accounting.rappor_min_batch_size`).

HOW THE FORMULAS OF PAPER 002 WERE READ. The text of seed 002 lost its mathematical
layout (fraction bars, square roots and minus signs are gone). The readings, each
checked against the paper's own simplified statements:

* Theorem 3.2 prints "eps = p0(e^eps0 1) q 2e^eps0 log(1/delta) m + p2 0 e^eps0
  (e^eps0 1)2 2m": read as
  eps = p0 (e^eps0 - 1) sqrt(2 e^eps0 log(1/delta) / m) + p0^2 e^eps0 (e^eps0 - 1)^2 / (2m).
  ("q" is a square-root sign, "p2 0" is p0^2.) Consistent with the printed corollary
  "for eps0 < 1 and delta < 1/100, eps <= 7 p0 eps0 sqrt(log(1/delta) / m)", which the
  tests check over a grid.
* Its (eps0, delta0) part: for delta0 below the printed threshold
  (1 - e^-eps0) delta1 / (4 e^eps0 (2 + ln(2/delta1) / ln(1/(1 - e^-5 eps0)))), eps0 is
  replaced by 8 eps0 and delta' = delta + m (e^eps' + 1) delta1. The printed
  "delta' = delta + m(e^eps + 1) delta0" is ambiguous between delta0 and delta1; we read
  delta1 (the free parameter of the threshold, as in the same statement of Theorems 4.1
  and 5.1, which print delta1).
* Theorem 4.3 prints "eps = e^eps0(e^eps0 1)2 2e^eps0 log(1/delta) m": read as Theorem 3.2
  with p0 = 1, i.e. (e^eps0 - 1) sqrt(2 e^eps0 log(1/delta) / m) + e^eps0 (e^eps0 - 1)^2
  / (2m); its corollary "eps <= 7 eps0 sqrt(log(1/delta)/m)" is the p0 = 1 case of 3.2's.
* Theorem 5.1: eps = e^(3 eps0) (e^eps0 - 1)^2 / (2n) + e^(3 eps0 / 2) (e^eps0 - 1)
  sqrt(2 log(1/delta) / n). The [EFMRTT19] Theorem 7 bound it is compared with is read
  as eps = s (e^(s/n) - 1) + s sqrt(2 log(1/delta) / n), s = 2 e^(2 eps0) (e^eps0 - 1)
  (heterogeneous advanced composition of n steps of eps_i = s / n).
* Proposition 3.4: "at most m 1 p0 m n" read as m (1 - p0/m)^n (each of the m slots is
  empty when none of the n clients checks into it; this is also the exact expectation),
  and m e^-c for p0 = c m / n. Proposition 4.4: at most (n - m + 1) / e; the exact
  expectation is (n - m + 1)(1 - 1/m)^m (slot i is empty when none of the m clients whose
  window covers it picks it), returned beside the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppm_reference.dp_policy import accounting, calibration

# ---------------------------------------------------------------------------------------
# Poisson sampling (paper 000 Theorem 4)
# ---------------------------------------------------------------------------------------


def poisson_sampling(epsilon: float, delta: float, q: float) -> tuple[float, float]:
    """(eps', delta') of an (epsilon, delta)-DP mechanism run on a Poisson sample of rate q
    (paper 000 Theorem 4): eps' = log(1 + q (e^eps - 1)), delta' = q delta."""
    if not 0.0 <= q <= 1.0:
        raise ValueError("the sampling rate q must be in [0, 1]")
    if epsilon < 0 or not 0.0 <= delta <= 1.0:
        raise ValueError("need epsilon >= 0 and 0 <= delta <= 1")
    return math.log1p(q * math.expm1(epsilon)), q * delta


# ---------------------------------------------------------------------------------------
# The Poisson-subsampled Gaussian by RDP, the unsampled Gaussian by GDP (paper 000
# Examples 1 and 5)
# ---------------------------------------------------------------------------------------

SAMPLED_GAUSSIAN_ORDERS: tuple[float, ...] = tuple(float(a) for a in range(2, 257))


def sampled_gaussian_rdp(q: float, sigma: float, alpha: int) -> float:
    """RDP at integer order alpha >= 2 of the Poisson-subsampled Gaussian mechanism with
    sampling rate q and noise multiplier sigma (noise standard deviation over L2
    sensitivity), add/remove neighbours ([MTZ19] Section 3.3, exact binomial expansion,
    computed in log space)."""
    if alpha < 2 or int(alpha) != alpha:
        raise ValueError("the order must be an integer >= 2")
    if sigma <= 0 or not 0.0 <= q <= 1.0:
        raise ValueError("need sigma > 0 and 0 <= q <= 1")
    a = int(alpha)
    if q == 0.0:
        return 0.0
    if q == 1.0:
        return a / (2.0 * sigma * sigma)
    lq, l1q = math.log(q), math.log1p(-q)
    terms = [math.lgamma(a + 1) - math.lgamma(k + 1) - math.lgamma(a - k + 1)
             + (a - k) * l1q + k * lq + (k * k - k) / (2.0 * sigma * sigma)
             for k in range(a + 1)]
    top = max(terms)
    log_a = top + math.log(math.fsum(math.exp(t - top) for t in terms))
    return max(0.0, log_a / (a - 1))


@dataclass(frozen=True)
class SampledGaussianResult:
    epsilon: float
    delta: float
    order: float
    rounds: int
    q: float
    sigma: float
    method: str


def sampled_gaussian_epsilon(q: float, sigma: float, rounds: int, delta: float,
                             conversion: str = "cks20") -> SampledGaussianResult:
    """(eps, delta) of `rounds` adaptive rounds of the Poisson-subsampled Gaussian (paper
    000 Example 5): the RDP curves add ([Mir17] Proposition 1) and the sum is converted
    at the best integer order 2..256 (CKS20 Proposition 12 by default)."""
    if rounds < 1 or not 0 < delta < 1:
        raise ValueError("need rounds >= 1 and 0 < delta < 1")
    # Composition of `rounds` identical curves ([Mir17] Proposition 1, as in
    # `accounting.renyi_composition`) is `rounds` times the curve.
    def total(alpha: float) -> float:
        return rounds * sampled_gaussian_rdp(q, sigma, int(alpha))

    eps, order = calibration.rdp_to_dp(total, delta, SAMPLED_GAUSSIAN_ORDERS, conversion)
    return SampledGaussianResult(eps, delta, order, rounds, q, sigma,
                                 f"sampled-gaussian RDP (MTZ19), {conversion} conversion")


def gaussian_composed_epsilon(sigma: float, rounds: int, delta: float) -> float:
    """(eps at delta) of `rounds` unsampled Gaussian mechanisms of noise multiplier sigma,
    composed exactly: mu-GDP with mu = sqrt(rounds) / sigma, i.e. one Gaussian mechanism of
    noise multiplier sigma / sqrt(rounds) ([BW18] exact curve)."""
    if rounds < 1 or sigma <= 0:
        raise ValueError("need rounds >= 1 and sigma > 0")
    return calibration.analytic_gaussian_epsilon(sigma / math.sqrt(rounds), delta, 1.0)


def gaussian_mu(sigma: float, rounds: int) -> float:
    """The Gaussian-DP parameter mu = sqrt(rounds) / sigma of the composition."""
    return math.sqrt(rounds) / sigma


# ---------------------------------------------------------------------------------------
# Random check-ins (paper 002)
# ---------------------------------------------------------------------------------------


def _check_delta(delta: float) -> None:
    if not 0.0 < delta < 1.0:
        raise ValueError("delta must be in (0, 1)")


def delta0_threshold(eps0: float, delta1: float) -> float:
    """The largest delta0 for which paper 002's (eps0, delta0) statements hold with
    failure delta1: (1 - e^-eps0) delta1 / (4 e^eps0 (2 + ln(2/delta1) /
    ln(1 / (1 - e^(-5 eps0)))))."""
    return ((-math.expm1(-eps0)) * delta1
            / (4.0 * math.exp(eps0)
               * (2.0 + math.log(2.0 / delta1) / -math.log1p(-math.exp(-5.0 * eps0)))))


def _checkin_formula(eps0: float, m: int, p0: float, delta: float) -> float:
    e = math.exp(eps0)
    return (p0 * (e - 1.0) * math.sqrt(2.0 * e * math.log(1.0 / delta) / m)
            + p0 * p0 * e * (e - 1.0) ** 2 / (2.0 * m))


@dataclass(frozen=True)
class CheckinResult:
    epsilon: float
    delta: float
    theorem: str


def checkins_fixed_epsilon(eps0: float, m: int, p0: float, delta: float,
                           delta0: float = 0.0, delta1: float | None = None
                           ) -> CheckinResult:
    """Paper 002 Theorem 3.2 (random check-ins into a fixed window of m slots with
    probability p0, eps0-DP local randomizer). With delta0 > 0 ((eps0, delta0)-DP
    randomizer) give delta1: eps0 becomes 8 eps0 and delta' = delta + m (e^eps' + 1)
    delta1, provided delta0 <= `delta0_threshold(eps0, delta1)` (see the module notes)."""
    _check_delta(delta)
    if m < 1 or not 0.0 <= p0 <= 1.0 or eps0 < 0:
        raise ValueError("need m >= 1, 0 <= p0 <= 1, eps0 >= 0")
    if delta0 == 0.0:
        return CheckinResult(_checkin_formula(eps0, m, p0, delta), delta, "002 Theorem 3.2")
    if delta1 is None or not 0.0 < delta1 < 1.0:
        raise ValueError("an (eps0, delta0) randomizer needs delta1 in (0, 1)")
    if delta0 > delta0_threshold(eps0, delta1):
        raise ValueError(f"delta0 = {delta0:g} exceeds the threshold "
                         f"{delta0_threshold(eps0, delta1):.3g} of Theorem 3.2")
    eps = _checkin_formula(8.0 * eps0, m, p0, delta)
    return CheckinResult(eps, delta + m * (math.exp(eps) + 1.0) * delta1,
                         "002 Theorem 3.2 (eps0, delta0)")


def checkins_sliding_epsilon(eps0: float, m: int, delta: float, delta0: float = 0.0,
                             delta1: float | None = None) -> CheckinResult:
    """Paper 002 Theorem 4.3 (sliding windows of m slots, p_j = 1): Theorem 3.2's bound
    with p0 = 1 (see the module notes on how the lost layout was read)."""
    res = checkins_fixed_epsilon(eps0, m, 1.0, delta, delta0, delta1)
    return CheckinResult(res.epsilon, res.delta, res.theorem.replace("3.2", "4.3"))


def shuffling_epsilon_bkmtt(eps0: float, n: int, delta: float) -> float:
    """Paper 002 Theorem 5.1 (amplification by shuffling n eps0-DP reports)."""
    _check_delta(delta)
    e = math.exp(eps0)
    return (math.exp(3.0 * eps0) * (e - 1.0) ** 2 / (2.0 * n)
            + math.exp(1.5 * eps0) * (e - 1.0) * math.sqrt(2.0 * math.log(1.0 / delta) / n))


def shuffling_epsilon_efmrtt19(eps0: float, n: int, delta: float) -> float:
    """[EFMRTT19] Theorem 7, as paper 002 Section 5 prints it (see the module notes)."""
    _check_delta(delta)
    s = 2.0 * math.exp(2.0 * eps0) * math.expm1(eps0)
    return s * math.expm1(s / n) + s * math.sqrt(2.0 * math.log(1.0 / delta) / n)


@dataclass(frozen=True)
class DummyEstimate:
    expected: float     # exact expectation under the protocol's model
    bound: float        # the bound the proposition prints
    proposition: str


def expected_dummies_fixed(m: int, n: int, p0: float) -> DummyEstimate:
    """Paper 002 Proposition 3.4: the expected number of dummy updates of A_fix, i.e. of
    the m slots that no client checked into: m (1 - p0/m)^n (exact, and the bound)."""
    if m < 1 or n < 0 or not 0.0 <= p0 <= 1.0:
        raise ValueError("need m >= 1, n >= 0, 0 <= p0 <= 1")
    value = m * math.exp(n * math.log1p(-p0 / m)) if p0 < m else 0.0
    return DummyEstimate(value, value, "002 Proposition 3.4")


def expected_dummies_sliding(m: int, n: int) -> DummyEstimate:
    """Paper 002 Proposition 4.4: the n - m + 1 update slots of A_sldw, each empty with
    probability (1 - 1/m)^m <= 1/e; the bound printed is (n - m + 1) / e."""
    if not 1 <= m <= n:
        raise ValueError("need 1 <= m <= n")
    slots = n - m + 1
    exact = slots * ((1.0 - 1.0 / m) ** m if m > 1 else 0.0)
    return DummyEstimate(exact, slots / math.e, "002 Proposition 4.4")


# ---------------------------------------------------------------------------------------
# Minimum cohort (paper 004 Section 3.1, Check 3)
# ---------------------------------------------------------------------------------------

MIN_COHORT_METHODS = ("numerical", "closed-form", "rappor")


def min_cohort(eps0: float, epsilon: float, delta: float, method: str = "numerical",
               deletion: bool = False, n_max: int = 10**9,
               variant: str = accounting.DEFAULT_SHUFFLE_VARIANT) -> int | None:
    """The smallest cohort m such that aggregating m eps0-DP local reports is
    (epsilon, delta)-DP (paper 004 Section 3.1, Check 3), or None if not reached by n_max.

    method "numerical": the numerical amplification-by-shuffling bound (paper 004 cites
      [31] and recommends it; `accounting.shuffle_min_batch_size`);
    "closed-form": paper 004 Theorem 3.1 (equation (1)), valid for
      eps0 <= ln(n / (8 ln(2/delta)) - 1);
    "rappor": amplification by aggregation of symmetric RAPPOR reports (004 Appendix C).
    deletion: the reports are eps0-DP in the deletion model: use 2 eps0 (004 Section 3.1,
      after Theorem 3.1); not for "rappor", whose analysis is already the deletion one.
    variant: the shuffle bound of "numerical" and "closed-form" (`accounting.
      SHUFFLE_VARIANTS`). The default, fmt20, holds for any eps0-DP randomizer; paper 004's
      Figure 1 and Theorem 3.1 use fmt22 ([31]), which by its erratum holds only for a
      restricted class of randomizers (see `accounting`).
    """
    if method not in MIN_COHORT_METHODS:
        raise ValueError(f"method must be one of {MIN_COHORT_METHODS}")
    _check_delta(delta)
    if method == "rappor":
        if deletion:
            raise ValueError("the RAPPOR analysis takes the deletion-model eps0 already")
        return accounting.rappor_min_batch_size(eps0, epsilon, delta, n_max)
    e0 = 2.0 * eps0 if deletion else eps0
    if method == "numerical":
        return accounting.shuffle_min_batch_size(e0, epsilon, delta, variant, n_max=n_max)

    def score(n: int) -> float:
        eps = accounting.shuffle_closed_form(e0, n, delta, variant)
        return -1.0 if eps is not None and eps <= epsilon else 1.0

    # The closed form is valid only from some n on, and decreases in n there.
    return accounting._min_n(score, n_max)


# ---------------------------------------------------------------------------------------
# The guarantee of a samplable anonymous aggregation (paper 000 Section 3)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ComposedGuarantee:
    """What `ppm demo` prints beside a result: the aggregation's guarantee at the cohort
    it was released for, amplified by the Clients' Poisson sampling."""

    aggregate_epsilon: float
    aggregate_delta: float
    q: float
    epsilon: float
    delta: float
    how: str


def samplable_aggregation_guarantee(aggregate_epsilon: float, aggregate_delta: float,
                                    q: float, how: str) -> ComposedGuarantee:
    """Compose the aggregation (and noise) guarantee with sampling at rate q (paper 000
    Section 3, SA_2 model, Theorem 4): with respect to the population the Clients sampled
    themselves from."""
    eps, delta = poisson_sampling(aggregate_epsilon, aggregate_delta, q)
    return ComposedGuarantee(aggregate_epsilon, aggregate_delta, q, eps, delta, how)
