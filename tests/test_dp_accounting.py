"""Accounting: RAPPOR amplification by aggregation (paper 004, Theorem C.3), shuffling
(FMT22 as in paper 000 Example 4), batch-size inverses, the draft's max-weight bound and
composition. Deterministic (no sampling)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from ppm_reference.dp_policy import accounting as acc
from ppm_reference.dp_policy import calibration as cal

# The draft's Table 1: eps0 -> (printed epsilon, printed std); n = 100000, delta = 1e-9.
TABLE1 = {5.0: (0.317, 26.1337), 6.5: (0.906, 12.2800), 7.0: (1.528, 9.5580)}


@pytest.mark.parametrize("eps0", sorted(TABLE1))
def test_table1(eps0: float) -> None:
    eps, std = TABLE1[eps0]
    res = acc.rappor_amplification(eps0, 100000, 1e-9)
    assert abs(res.epsilon - eps) <= 0.002, res
    assert res.std is not None
    assert cal.round_up(res.std) == std  # the table rounds up
    assert res.order is not None and res.order == int(res.order)
    # Real orders only improve the (still valid) bound.
    cont = acc.rappor_amplification(eps0, 100000, 1e-9, orders="continuous")
    assert cont.epsilon <= res.epsilon + 1e-12
    # Mironov's conversion is looser.
    mir = acc.rappor_amplification(eps0, 100000, 1e-9, conversion="mironov")
    assert mir.epsilon > res.epsilon


def test_rappor_continuous_orders_at_eps0_7() -> None:
    cont = acc.rappor_amplification(7.0, 100000, 1e-9, orders="continuous")
    assert cont.epsilon == pytest.approx(1.5190, abs=5e-4)


@pytest.mark.parametrize("n,eps0", [(25, 1.0), (60, 2.5), (120, 0.7)])
def test_rappor_worst_case_is_an_extreme_configuration(n: int, eps0: float) -> None:
    """Over every number k of other Clients holding a 1 in the coordinate, the Renyi
    divergence is largest at k = 0 (equivalently k = n - 1)."""
    rr = acc.AggregatedRandomizedResponse(n, eps0)
    for alpha in (2.0, 8.0, 32.0):
        values = [rr.rdp_for_config(k, alpha) for k in range(n)]
        assert max(values) == pytest.approx(values[0], rel=1e-9)
        assert values[0] == pytest.approx(values[-1], rel=1e-9)
        assert rr.rdp(alpha) == pytest.approx(values[0], rel=1e-9)


def test_rappor_rdp_against_direct_definition() -> None:
    """D_alpha for n = 3 from the definition (explicit sums over S in 0..3)."""
    eps0, n, alpha = 1.3, 3, 4.0
    q = 1 / (math.exp(eps0) + 1)
    # others: two inputs equal to 0 -> Y ~ Bin(2, q)
    y = [(1 - q) ** 2, 2 * q * (1 - q), q * q]
    p_ = [(1 - q) * (y[s] if s < 3 else 0) + q * (y[s - 1] if s >= 1 else 0) for s in range(4)]
    q_ = [q * (y[s] if s < 3 else 0) + (1 - q) * (y[s - 1] if s >= 1 else 0) for s in range(4)]

    def renyi(a: list[float], b: list[float]) -> float:
        return math.log(sum(bi * (ai / bi) ** alpha for ai, bi in zip(a, b, strict=True))) / (
            alpha - 1)

    expected = max(renyi(p_, q_), renyi(q_, p_))
    assert acc.AggregatedRandomizedResponse(n, eps0).rdp(alpha) == pytest.approx(expected,
                                                                                rel=1e-12)
    assert acc.rappor_rdp(n, eps0, alpha) == pytest.approx(2 * expected, rel=1e-12)


def test_rappor_amplification_monotone_and_capped() -> None:
    e = [acc.rappor_amplification(5.0, n, 1e-9).epsilon for n in (3000, 30000, 100000)]
    assert e[0] > e[1] > e[2]
    tiny = acc.rappor_amplification(3.0, 10, 1e-9)
    assert tiny.epsilon == 6.0  # never worse than the local 2 eps0 (replacement)


def test_rappor_min_batch_size() -> None:
    n = acc.rappor_min_batch_size(4.0, 1.0, 1e-6)
    assert n is not None
    assert acc.rappor_amplification(4.0, n, 1e-6).epsilon <= 1.0
    assert acc.rappor_amplification(4.0, n - 1, 1e-6).epsilon > 1.0


def test_shuffle_example4_of_paper_000() -> None:
    """eps0 = 4, B = 10000, delta = 1e-10: (0.61, 1e-10)-DP with the FMT22 bound (which
    its erratum restricts to a class of local randomizers: not the default)."""
    eps = acc.shuffle_epsilon(4.0, 10000, 1e-10, variant="fmt22")
    assert eps == pytest.approx(0.61, abs=0.006)
    # The 2020 analysis (clone probability e^-eps0, any eps0-DP randomizer) is weaker.
    assert acc.shuffle_epsilon(4.0, 10000, 1e-10, variant="fmt20") > eps + 0.2
    # The closed form is outside its validity condition here ...
    assert acc.shuffle_closed_form(4.0, 10000, 1e-10, variant="fmt22") is None
    # ... and above the numerical bound where it holds.
    closed = acc.shuffle_closed_form(4.0, 100000, 1e-10, variant="fmt22")
    assert closed is not None
    assert closed > acc.shuffle_epsilon(4.0, 100000, 1e-10, variant="fmt22")


def test_shuffle_default_is_the_bound_for_any_randomizer() -> None:
    """FMT22's erratum restricts its Theorems 3.1 and 3.2 to a class of local
    randomizers; FMT20 holds for every eps0-DP one, so it is the default."""
    assert acc.DEFAULT_SHUFFLE_VARIANT == "fmt20"
    assert acc.shuffle_epsilon(4.0, 10000, 1e-10) == \
        acc.shuffle_epsilon(4.0, 10000, 1e-10, variant="fmt20")
    assert acc.shuffle_amplification(4.0, 10000, 1e-10).method == "shuffle/fmt20"
    assert "any eps0-DP" in acc.SHUFFLE_VARIANTS["fmt20"]
    assert "erratum" in acc.SHUFFLE_VARIANTS["fmt22"]
    n = acc.shuffle_min_batch_size(4.0, 0.61, 1e-10)
    assert n is not None and n > 10000  # FMT20 needs more Clients for 0.61


# The numerical bound costs O(n) per epsilon tried: a few cases with n = 10^5 only.
@pytest.mark.parametrize(("n", "eps0"), [(10**5, 1.0), (10**5, 4.0)])
def test_fmt20_closed_form_bounds_the_numerical_one(n: int, eps0: float) -> None:
    """FMT20 Theorem 3.1 is an upper bound on the (tighter) numerical FMT20 bound, and
    weaker than FMT22's closed form, wherever both are valid."""
    closed = acc.shuffle_closed_form(eps0, n, 1e-10)
    assert closed is not None
    assert closed >= acc.shuffle_epsilon(eps0, n, 1e-10)
    closed22 = acc.shuffle_closed_form(eps0, n, 1e-10, variant="fmt22")
    assert closed22 is not None and closed > closed22
    # Outside its condition eps0 <= ln(n / (16 ln(2/delta))): none.
    assert acc.shuffle_closed_form(math.log(n / (16 * math.log(2e10))) + 0.01, n,
                                   1e-10) is None


def test_shuffle_delta_consistency() -> None:
    eps = acc.shuffle_epsilon(3.0, 5000, 1e-8)
    assert acc.shuffle_delta(3.0, 5000, eps) <= 1e-8
    assert acc.shuffle_delta(3.0, 5000, eps - 1e-4) > 1e-8
    # Never worse than the local guarantee; a single Client gets eps0.
    assert acc.shuffle_epsilon(2.0, 1, 1e-9) == pytest.approx(2.0, abs=1e-6)


def test_shuffle_min_batch_size() -> None:
    n = acc.shuffle_min_batch_size(4.0, 0.61, 1e-10, variant="fmt22")
    assert n is not None
    assert acc.shuffle_delta(4.0, n, 0.61, variant="fmt22") <= 1e-10
    assert acc.shuffle_delta(4.0, n - 1, 0.61, variant="fmt22") > 1e-10
    assert 9000 < n <= 10000


def _tail_exact(trials: int, p: Fraction, m: int) -> Fraction:
    return sum((math.comb(trials, k) * p**k * (1 - p) ** (trials - k)
                for k in range(m, trials + 1)), Fraction(0))


@pytest.mark.parametrize("length,eps0,fp", [(20, 1.0, 0.01), (50, 3.0, 1e-6),
                                            (200, 5.0, 1e-9), (300, 4.0, 1e-12)])
def test_max_weight(length: int, eps0: float, fp: float) -> None:
    m = acc.rappor_max_weight(length, eps0, fp)
    p = Fraction(1 / (math.exp(eps0) + 1))
    # Pr(1 + C > m) = Pr(C >= m) <= fp, and m is the smallest such.
    assert _tail_exact(length - 1, p, m) <= fp
    assert m == 1 or _tail_exact(length - 1, p, m - 1) > fp


def test_max_weight_edge_cases() -> None:
    assert acc.rappor_max_weight(1, 5.0, 0.1) == 1
    assert acc.rappor_max_weight(10, 0.01, 1e-300) == 10
    with pytest.raises(ValueError):
        acc.rappor_max_weight(0, 1.0, 0.1)


def test_composition() -> None:
    assert acc.basic_composition([(0.5, 1e-9), (0.25, 2e-9)]) == pytest.approx((0.75, 3e-9))
    e, d = acc.advanced_composition(0.1, 1e-10, 100, 1e-6)
    assert e == pytest.approx(0.1 * math.sqrt(200 * math.log(1e6)) + 100 * 0.1 * (
        math.exp(0.1) - 1))
    assert d == pytest.approx(100 * 1e-10 + 1e-6)
    # Renyi composition of k Gaussian mechanisms = one with sigma / sqrt(k).
    sigma, k = 10.0, 16
    curve = acc.renyi_composition([acc.zcdp_rdp(1 / (2 * sigma**2))] * k)
    single = acc.zcdp_rdp(1 / (2 * (sigma / math.sqrt(k)) ** 2))
    for a in (2.0, 10.0, 50.0):
        assert curve(a) == pytest.approx(single(a))
    # Pure DP to RDP.
    assert acc.pure_dp_rdp(0.1)(4.0) == pytest.approx(0.02)
    assert acc.pure_dp_rdp(3.0)(4.0) == 3.0


def test_accountant() -> None:
    accountant = acc.PrivacyAccountant()
    for _ in range(10):
        accountant.add_gaussian(sigma=20.0, l2_sensitivity=math.sqrt(2), epsilon=0.4,
                                delta=1e-10)
    out = accountant.compose(1e-8)
    assert out["basic"] == pytest.approx((4.0, 1e-9))
    assert "advanced" in out and "renyi" in out
    name, eps, delta = accountant.best(1e-8)
    assert name == "renyi" and eps < out["basic"][0] and eps < out["advanced"][0]
    assert delta <= 1e-8
    # Advanced composition pays off for many small-epsilon collections.
    many = acc.PrivacyAccountant()
    for _ in range(1000):
        many.add(acc.PrivacyEvent("small", 0.01, 1e-12))
    comp = many.compose(1e-6)
    assert comp["advanced"][0] < comp["basic"][0]
    assert many.best(1e-6)[0] == "advanced"
    accountant.add_rappor(5.0, 100000, 1e-9)
    assert "advanced" not in accountant.compose(1e-8)
    assert accountant.compose(1e-8)["renyi"][0] > eps
