"""Noise calibration and conversions between privacy notions.

* The analytic Gaussian mechanism of Balle and Wang, "Improving the Gaussian Mechanism
  for Differential Privacy" (the draft's [BW18]): Theorem 8 gives the exact delta of the
  continuous Gaussian mechanism; Algorithm 1 inverts it. The draft's Table 2 was made
  with the reference code [AGM], which stops its bisection when |delta(s) - delta| <=
  1e-12 -- an absolute tolerance, which at delta = 1e-9 is a 0.1% relative error. We
  solve to a relative tolerance instead (`analytic_gaussian_sigma`) and keep the
  absolute-tolerance stopping rule only to explain the printed table
  (`analytic_gaussian_sigma_abs_tol`).
* The exact delta of the discrete Gaussian (CKS20 Theorem 7 and its multivariate form,
  the privacy-loss identity that theorem rests on) for a given sensitivity *vector*, and
  the smallest discrete-Gaussian sigma that meets (epsilon, delta) exactly.
* Renyi DP [Mir17] and zCDP [BS16] to (epsilon, delta): Mironov's Proposition 3 and the
  tighter CKS20 Proposition 12 (which the draft's Appendix cites; also Theorem 1 of
  paper 000, Talwar et al.).

Floating point is fine here: these functions choose parameters, they do not sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

SQRT2 = math.sqrt(2.0)


# ---------------------------------------------------------------------------------------
# Small numerical helpers
# ---------------------------------------------------------------------------------------


def norm_cdf(x: float) -> float:
    """Phi(x), accurate in the lower tail (through erfc)."""
    return 0.5 * math.erfc(-x / SQRT2)


def logsumexp(values: Iterable[float]) -> float:
    vals = list(values)
    if not vals:
        return -math.inf
    m = max(vals)
    if m == -math.inf:
        return m
    return m + math.log(math.fsum(math.exp(v - m) for v in vals))


def _bisect_increasing(f: Callable[[float], bool], lo: float, hi: float,
                       rel_tol: float, max_iter: int = 400) -> tuple[float, float]:
    """For a predicate false at lo and true at hi (monotone), shrink [lo, hi] until
    hi - lo <= rel_tol * hi. Returns (lo, hi)."""
    for _ in range(max_iter):
        if hi - lo <= rel_tol * abs(hi):
            break
        mid = 0.5 * (lo + hi)
        if f(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


# ---------------------------------------------------------------------------------------
# Analytic Gaussian mechanism [BW18]
# ---------------------------------------------------------------------------------------


def analytic_gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """The smallest delta for which the Gaussian mechanism N(0, sigma^2) on a query of L2
    sensitivity `sensitivity` is (epsilon, delta)-DP ([BW18] Theorem 8):

        delta = Phi(D/(2 sigma) - eps sigma / D) - e^eps Phi(-D/(2 sigma) - eps sigma / D).
    """
    if sigma <= 0 or sensitivity <= 0 or epsilon < 0:
        raise ValueError("need sigma > 0, sensitivity > 0, epsilon >= 0")
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return max(0.0, norm_cdf(a - b) - math.exp(epsilon) * norm_cdf(-a - b))


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float,
                              rel_tol: float = 1e-12) -> float:
    """The smallest epsilon with analytic_gaussian_delta(sigma, epsilon, D) <= delta."""
    if analytic_gaussian_delta(sigma, 0.0, sensitivity) <= delta:
        return 0.0
    hi = 1.0
    while analytic_gaussian_delta(sigma, hi, sensitivity) > delta:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    _, hi = _bisect_increasing(
        lambda e: analytic_gaussian_delta(sigma, e, sensitivity) <= delta, 0.0, hi, rel_tol)
    return hi


def _bw18_b_minus(epsilon: float, v: float) -> float:
    # B^-_eps(v) = Phi(sqrt(eps v)) - e^eps Phi(-sqrt(eps (v + 2)))
    return norm_cdf(math.sqrt(epsilon * v)) - math.exp(epsilon) * norm_cdf(
        -math.sqrt(epsilon * (v + 2.0)))


def _bw18_b_plus(epsilon: float, u: float) -> float:
    # B^+_eps(u) = Phi(-sqrt(eps u)) - e^eps Phi(-sqrt(eps (u + 2)))
    return norm_cdf(-math.sqrt(epsilon * u)) - math.exp(epsilon) * norm_cdf(
        -math.sqrt(epsilon * (u + 2.0)))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float,
                            rel_tol: float = 1e-12) -> float:
    """[BW18] Algorithm 1 ("Analytic Gaussian Mechanism"), solved to a relative tolerance.

    delta_0 = Phi(0) - e^eps Phi(-sqrt(2 eps)). If delta >= delta_0, find
    v* = sup {v >= 0 : B^-(v) <= delta} and alpha = sqrt(1 + v*/2) - sqrt(v*/2);
    otherwise u* = inf {u >= 0 : B^+(u) <= delta} and alpha = sqrt(1 + u*/2) + sqrt(u*/2).
    Then sigma = alpha * D / sqrt(2 eps). The bisection stops when the bracket of v (or
    u) is within `rel_tol` (relative), and returns the side of the bracket that is
    private, so the result always satisfies analytic_gaussian_delta(...) <= delta (up to
    floating-point rounding of Phi).
    """
    if not (epsilon > 0 and 0 < delta < 1 and sensitivity > 0):
        raise ValueError("need epsilon > 0, 0 < delta < 1, sensitivity > 0")
    delta0 = _bw18_b_minus(epsilon, 0.0)
    if delta >= delta0:
        # B^- increases from delta0 to 1: find the largest v with B^-(v) <= delta.
        hi = 1.0
        while _bw18_b_minus(epsilon, hi) <= delta:
            hi *= 2.0
        lo, hi = _bisect_increasing(lambda v: _bw18_b_minus(epsilon, v) > delta,
                                    0.0, hi, rel_tol)
        v = lo
        alpha = math.sqrt(1.0 + v / 2.0) - math.sqrt(v / 2.0)
    else:
        # B^+ decreases from delta0 to 0: find the smallest u with B^+(u) <= delta.
        hi = 1.0
        while _bw18_b_plus(epsilon, hi) > delta:
            hi *= 2.0
        lo, hi = _bisect_increasing(lambda u: _bw18_b_plus(epsilon, u) <= delta,
                                    0.0, hi, rel_tol)
        u = hi
        alpha = math.sqrt(1.0 + u / 2.0) + math.sqrt(u / 2.0)
    return alpha * sensitivity / math.sqrt(2.0 * epsilon)


def analytic_gaussian_sigma_abs_tol(epsilon: float, delta: float, sensitivity: float,
                                    tol: float = 1e-12) -> float:
    """[BW18] Algorithm 1 with the stopping rule of the reference code [AGM]: double the
    bracket from [0, 1], then bisect and stop at the first midpoint s with
    |B(s) - delta| <= tol (absolute). This is how the draft's Table 2 was computed; it is
    kept to explain the printed values (23.3903 instead of the exact 23.3907 at
    epsilon 0.317, delta 1e-9), not for use.
    """
    delta0 = _bw18_b_minus(epsilon, 0.0)
    if delta == delta0:
        alpha = 1.0
    else:
        if delta > delta0:
            def b_of(s: float) -> float:
                return _bw18_b_minus(epsilon, s)

            def grow(s: float) -> bool:
                return b_of(s) < delta

            def go_left(s: float) -> bool:
                return b_of(s) > delta

            def to_alpha(s: float) -> float:
                return math.sqrt(1.0 + s / 2.0) - math.sqrt(s / 2.0)
        else:
            def b_of(s: float) -> float:
                return _bw18_b_plus(epsilon, s)

            def grow(s: float) -> bool:
                return b_of(s) > delta

            def go_left(s: float) -> bool:
                return b_of(s) < delta

            def to_alpha(s: float) -> float:
                return math.sqrt(1.0 + s / 2.0) + math.sqrt(s / 2.0)
        lo, hi = 0.0, 1.0
        while grow(hi):
            lo, hi = hi, 2.0 * hi
        mid = lo + (hi - lo) / 2.0
        while abs(b_of(mid) - delta) > tol:
            if go_left(mid):
                hi = mid
            else:
                lo = mid
            mid = lo + (hi - lo) / 2.0
        alpha = to_alpha(mid)
    return alpha * sensitivity / math.sqrt(2.0 * epsilon)


def round_up(x: float, decimals: int = 4) -> float:
    """x rounded up at `decimals` decimal places (how the draft's tables print)."""
    scale = 10.0 ** decimals
    return float(math.ceil(x * scale - 1e-9)) / scale


# ---------------------------------------------------------------------------------------
# Discrete Gaussian (CKS20)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IntegerPmf:
    """A probability mass function on the integers offset, offset+1, ..., as floats
    (normalised; values below ~1e-300 of the mode are dropped)."""

    offset: int
    probs: tuple[float, ...]

    def survival(self) -> list[float]:
        """sf[i] = P(X >= offset + i), summed from the top (accurate in the upper tail)."""
        out = [0.0] * (len(self.probs) + 1)
        acc = 0.0
        for i in range(len(self.probs) - 1, -1, -1):
            acc += self.probs[i]
            out[i] = acc
        return out

    def prob_greater(self, c: float) -> float:
        """P(X > c)."""
        k = math.floor(c) + 1  # smallest integer > c
        i = k - self.offset
        if i <= 0:
            return 1.0
        if i >= len(self.probs):
            return 0.0
        return math.fsum(self.probs[i:])

    def scaled(self, factor: int) -> IntegerPmf:
        """The pmf of factor * X, for an integer factor >= 1 (on a dense grid)."""
        if factor == 1:
            return self
        probs = [0.0] * ((len(self.probs) - 1) * factor + 1)
        for i, p in enumerate(self.probs):
            probs[i * factor] = p
        return IntegerPmf(self.offset * factor, tuple(probs))


def discrete_gaussian_pmf(sigma: float, cut: float = 745.0) -> IntegerPmf:
    """N_Z(0, sigma^2) on |x| <= sigma * sqrt(2 cut), normalised (the mass dropped is
    below e^-cut per point)."""
    if sigma <= 0:
        raise ValueError("sigma must be positive")
    s2 = sigma * sigma
    m = int(math.floor(sigma * math.sqrt(2.0 * cut))) + 1
    weights = [math.exp(-(x * x) / (2.0 * s2)) for x in range(-m, m + 1)]
    z = math.fsum(weights)
    return IntegerPmf(-m, tuple(w / z for w in weights))


_FIXED_BITS = 110  # fixed-point resolution 2^-110 (about 8e-34) for big convolutions


def _convolve_direct(a: Sequence[float], b: Sequence[float], prune: float) -> list[float]:
    out = [0.0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x < prune:
            continue
        for j, y in enumerate(b):
            out[i + j] += x * y
    return out


def _convolve_kronecker(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Convolution by one big-integer multiplication (Kronecker substitution): entries
    are floored to multiples of 2^-110 and packed into fixed-width slots of one integer;
    CPython multiplies large integers with Karatsuba, far faster than the double loop.
    Each output entry is below the exact value by at most len(a) * 2^-110 (plus float
    rounding); the dropped mass is accounted for by the callers' tolerances."""
    scale = float(1 << _FIXED_BITS)
    n = min(len(a), len(b))
    width = (2 * _FIXED_BITS + n.bit_length() + 8) // 8  # bytes per slot, no overflow

    def pack(values: Sequence[float]) -> int:
        return int.from_bytes(b"".join(int(v * scale).to_bytes(width, "little")
                                       for v in values), "little")

    product = pack(a) * pack(b)
    count = len(a) + len(b) - 1
    raw = product.to_bytes(width * count, "little")
    inv = 1.0 / (scale * scale)
    return [int.from_bytes(raw[i * width:(i + 1) * width], "little") * inv
            for i in range(count)]


def convolve(a: IntegerPmf, b: IntegerPmf, prune: float = 1e-300) -> IntegerPmf:
    """The pmf of X + Y for independent X ~ a, Y ~ b (direct double loop for short
    inputs, Kronecker substitution for long ones)."""
    if min(len(a.probs), len(b.probs)) < 48:
        out = _convolve_direct(a.probs, b.probs, prune)
    else:
        out = _convolve_kronecker(a.probs, b.probs)
    lo = 0
    hi = len(out)
    while lo < hi - 1 and out[lo] < prune:
        lo += 1
    while hi > lo + 1 and out[hi - 1] < prune:
        hi -= 1
    return IntegerPmf(a.offset + b.offset + lo, tuple(out[lo:hi]))


def _sum_iid(noise: IntegerPmf, m: int) -> IntegerPmf:
    """The pmf of the sum of m iid copies (binary powering of the convolution)."""
    result: IntegerPmf | None = None
    power = noise
    while m:
        if m & 1:
            result = power if result is None else convolve(result, power)
        m >>= 1
        if m:
            power = convolve(power, power)
    assert result is not None
    return result


class _LinearCombination:
    """The law of sum_i c_i X_i for X_i iid ~ N_Z(0, sigma^2): all terms but the last are
    combined by convolution (of pmfs truncated at e^-HEAD_CUT relative to the mode, so
    that the mass dropped is below 1e-24), the last one enters through its survival
    function, so that a tail probability costs one pass over the head pmf."""

    HEAD_CUT = 60.0

    def __init__(self, sigma: float, coefficients: Sequence[int]) -> None:
        coeffs = sorted(abs(c) for c in coefficients if c != 0)
        if not coeffs:
            raise ValueError("no non-zero coefficient")
        self.noise = discrete_gaussian_pmf(sigma)
        self.last = coeffs[-1]
        groups: dict[int, int] = {}
        for c in coeffs[:-1]:
            groups[c] = groups.get(c, 0) + 1
        self.head: IntegerPmf | None = None
        if groups:
            base = discrete_gaussian_pmf(sigma, cut=self.HEAD_CUT)
            for c, m in sorted(groups.items()):
                part = _sum_iid(base, m).scaled(c)
                self.head = part if self.head is None else convolve(self.head, part)
        self._sf = self.noise.survival()

    @staticmethod
    def work(sigma: float, coefficients: Sequence[int]) -> int:
        """The number of entries of the head pmf (what the cost grows with)."""
        coeffs = [abs(c) for c in coefficients if c != 0]
        coeffs.sort()
        n = 2.0 * sigma * math.sqrt(2.0 * _LinearCombination.HEAD_CUT) + 1.0
        return int(sum(n * c for c in coeffs[:-1]))

    def _last_greater(self, c: float) -> float:
        # P(last * X > c) = P(X > c / last)
        k = math.floor(c / self.last) + 1
        i = k - self.noise.offset
        if i <= 0:
            return 1.0
        if i >= len(self._sf) - 1:
            return 0.0
        return self._sf[i]

    def prob_greater(self, c: float) -> float:
        if self.head is None:
            return self._last_greater(c)
        off = self.head.offset
        return math.fsum(p * self._last_greater(c - (off + i))
                         for i, p in enumerate(self.head.probs) if p > 0.0)


@dataclass(frozen=True)
class DeltaResult:
    delta: float
    method: str  # "exact" (CKS20 Theorem 7 / privacy-loss identity) or "zcdp-bound"


def discrete_gaussian_delta(sigma: float, epsilon: float,
                            sensitivity_vector: Sequence[int],
                            max_work: int = 100_000) -> DeltaResult:
    """The exact delta of the discrete Gaussian mechanism M(x) = q(x) + N_Z(0, sigma^2)^d
    for a worst-case change y = q(x) - q(x') of the query (an integer vector).

    The privacy loss at output q(x) + X is L = (2<X, y> + |y|^2) / (2 sigma^2), so
    (CKS20 Section 2.3, the identity behind their Theorem 7)

        delta = P[L > eps] - e^eps P'[L > eps]
              = P[<X,y> > eps sigma^2 - |y|^2/2] - e^eps P[<X,y> > eps sigma^2 + |y|^2/2].

    For a single non-zero coordinate Delta this is CKS20 Theorem 7 verbatim
    (P[X > eps sigma^2/Delta - Delta/2] - e^eps P[X > eps sigma^2/Delta + Delta/2]); for
    the histogram's y = (1, -1) it needs the law of X1 - X2, and in general that of
    sum_i y_i X_i, computed by convolution. When that law would have more than `max_work`
    points (long SumVec vectors, large max_measurement), this returns the zCDP bound (the
    multivariate discrete Gaussian is |y|^2/(2 sigma^2)-zCDP (CKS20), converted
    with CKS20 Proposition 12), flagged method = "zcdp-bound".

    sigma is the scale parameter of N_Z(0, sigma^2) (its exact rational value is what the
    sampler uses; pass float(that value)).
    """
    y = [int(v) for v in sensitivity_vector if int(v) != 0]
    if not y:
        return DeltaResult(0.0, "exact")
    norm2 = float(sum(v * v for v in y))
    if _LinearCombination.work(sigma, y) > max_work:
        rho = norm2 / (2.0 * sigma * sigma)
        return DeltaResult(zcdp_delta(rho, epsilon), "zcdp-bound")
    law = _LinearCombination(sigma, y)
    s2 = sigma * sigma
    t1 = epsilon * s2 - norm2 / 2.0
    t2 = epsilon * s2 + norm2 / 2.0
    delta = law.prob_greater(t1) - math.exp(epsilon) * law.prob_greater(t2)
    return DeltaResult(max(0.0, delta), "exact")


def discrete_gaussian_sigma(epsilon: float, delta: float, sensitivity_vector: Sequence[int],
                            rel_tol: float = 1e-9) -> float:
    """The smallest sigma for which the discrete Gaussian meets (epsilon, delta) for the
    sensitivity vector, to `rel_tol` (delta is decreasing in sigma, which the tests check
    on a grid; the root of log(delta(sigma)/delta) is bracketed and found by regula falsi,
    Illinois variant). The result satisfies discrete_gaussian_delta(sigma) <= delta.

    It starts from the continuous calibration of [BW18] with the same L2 norm: the
    draft's KT note (Section 6.2) warns the two differ for small sigma.
    """
    l2 = math.sqrt(sum(int(v) * int(v) for v in sensitivity_vector))
    guess = analytic_gaussian_sigma(epsilon, delta, l2)

    def log_ratio(s: float) -> float:
        d = discrete_gaussian_delta(s, epsilon, sensitivity_vector).delta
        return (math.log(d) if d > 0 else -745.0) - math.log(delta)

    # Bracket: g(lo) > 0 (not private enough), g(hi) <= 0.
    lo, hi = guess * 0.99, guess * 1.01
    g_lo, g_hi = log_ratio(lo), log_ratio(hi)
    while g_lo <= 0 and lo > 1e-3:
        hi, g_hi = lo, g_lo
        lo *= 0.8
        g_lo = log_ratio(lo)
    while g_hi > 0:
        lo, g_lo = hi, g_hi
        hi *= 1.25
        g_hi = log_ratio(hi)
    # Illinois (regula falsi) on log(delta(sigma)/delta): superlinear, keeps the bracket.
    side = 0
    for _ in range(200):
        if hi - lo <= rel_tol * hi:
            break
        mid = hi - g_hi * (hi - lo) / (g_hi - g_lo) if g_hi != g_lo else 0.5 * (lo + hi)
        if not lo < mid < hi:
            mid = 0.5 * (lo + hi)
        # Keep the step away from the ends so that both sides of the bracket shrink.
        eps = 0.25 * rel_tol * hi
        mid = min(max(mid, lo + eps), hi - eps)
        g_mid = log_ratio(mid)
        if g_mid <= 0:
            hi, g_hi = mid, g_mid
            if side == 1:
                g_lo *= 0.5
            side = 1
        else:
            lo, g_lo = mid, g_mid
            if side == -1:
                g_hi *= 0.5
            side = -1
    return hi


def rational_at_least(x: float, digits: int = 6) -> Fraction:
    """The smallest decimal with `digits` significant digits that is >= x, as a Fraction.
    Noise parameters are rounded *up* to such a value so that the sampler works with a
    small exact rational and the privacy guarantee only improves."""
    if x <= 0:
        raise ValueError("x must be positive")
    exponent = math.floor(math.log10(x)) - digits + 1
    scale = Fraction(10) ** exponent
    q = Fraction(x) / scale
    n = q.numerator // q.denominator + (0 if q.denominator == 1 else 1)
    return n * scale


# ---------------------------------------------------------------------------------------
# Renyi DP and zCDP to (epsilon, delta)
# ---------------------------------------------------------------------------------------

DEFAULT_ORDERS: tuple[float, ...] = (
    1.25, 1.5, 1.75, *[float(a) for a in range(2, 257)])


def rdp_to_epsilon_at(tau: float, alpha: float, delta: float, method: str = "cks20") -> float:
    """epsilon of an (alpha, tau)-RDP mechanism at delta.

    method "cks20": CKS20 Proposition 12 (Theorem 1 of paper 000; cited by the draft's
      Appendix "Renyi DP"): eps = tau + (log(1/delta) + (alpha-1) log(1 - 1/alpha)
      - log(alpha)) / (alpha - 1).
    method "mironov": [Mir17] Proposition 3: eps = tau + log(1/delta) / (alpha - 1).
    """
    if alpha <= 1:
        raise ValueError("Renyi order must exceed 1")
    if method == "mironov":
        return tau + math.log(1.0 / delta) / (alpha - 1.0)
    if method == "cks20":
        return tau + (math.log(1.0 / delta) + (alpha - 1.0) * math.log1p(-1.0 / alpha)
                      - math.log(alpha)) / (alpha - 1.0)
    raise ValueError(f"unknown conversion {method!r}")


def rdp_to_dp(rdp: Callable[[float], float], delta: float,
              orders: Sequence[float] = DEFAULT_ORDERS,
              method: str = "cks20") -> tuple[float, float]:
    """(epsilon, best order): the smallest epsilon over the given Renyi orders for a
    mechanism whose RDP curve is `rdp(alpha)` (which may return math.inf)."""
    best = (math.inf, math.nan)
    for a in orders:
        tau = rdp(a)
        if math.isinf(tau):
            continue
        e = rdp_to_epsilon_at(tau, a, delta, method)
        if e < best[0]:
            best = (e, a)
    return best


def rdp_to_delta_at(tau: float, alpha: float, epsilon: float) -> float:
    """delta of an (alpha, tau)-RDP mechanism at epsilon (CKS20 Proposition 12 solved for
    delta): delta = exp(-(alpha-1)(eps - tau)) (1 - 1/alpha)^(alpha-1) / alpha."""
    if epsilon <= tau:
        return 1.0
    log_d = (-(alpha - 1.0) * (epsilon - tau) + (alpha - 1.0) * math.log1p(-1.0 / alpha)
             - math.log(alpha))
    return min(1.0, math.exp(log_d))


def zcdp_to_dp(rho: float, delta: float, method: str = "cks20") -> float:
    """epsilon of a rho-zCDP mechanism ([BS16] Definition 1.1) at delta.

    method "bs16": [BS16] Proposition 1.3, eps = rho + 2 sqrt(rho log(1/delta)).
    method "cks20": rho-zCDP is (alpha, alpha rho)-RDP for every alpha > 1; minimise the
      CKS20 Proposition 12 conversion over real alpha (golden-section search; the
      objective is convex in alpha on the relevant range). Never worse than "bs16".
    """
    if rho < 0 or not 0 < delta < 1:
        raise ValueError("need rho >= 0 and 0 < delta < 1")
    if rho == 0:
        return 0.0
    simple = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    if method == "bs16":
        return simple
    if method != "cks20":
        raise ValueError(f"unknown conversion {method!r}")

    def f(a: float) -> float:
        return rdp_to_epsilon_at(a * rho, a, delta, "cks20")

    lo, hi = 1.0 + 1e-9, 2.0
    while f(hi) > f(hi * 2.0) and hi < 1e12:
        hi *= 2.0
    hi *= 2.0
    g = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    for _ in range(200):
        if f(c) < f(d):
            hi = d
        else:
            lo = c
        c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    return min(simple, f(0.5 * (lo + hi)))


def zcdp_delta(rho: float, epsilon: float) -> float:
    """delta of a rho-zCDP mechanism at epsilon: inf over alpha of CKS20 Proposition 12
    solved for delta (golden-section search over alpha)."""
    if rho == 0:
        return 0.0

    def f(a: float) -> float:
        return rdp_to_delta_at(a * rho, a, epsilon)

    lo, hi = 1.0 + 1e-9, max(2.0, 2.0 * (epsilon / rho + 1.0))
    g = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    for _ in range(200):
        if f(c) < f(d):
            hi = d
        else:
            lo = c
        c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    return f(0.5 * (lo + hi))


def pure_dp_to_zcdp(epsilon: float) -> float:
    """An epsilon-DP mechanism is (epsilon^2 / 2)-zCDP ([BS16] Proposition 1.4)."""
    return 0.5 * epsilon * epsilon


def gaussian_zcdp(sigma: float, l2_sensitivity: float) -> float:
    """The continuous Gaussian mechanism, and the discrete one (CKS20), is
    Delta^2 / (2 sigma^2)-zCDP."""
    return l2_sensitivity ** 2 / (2.0 * sigma * sigma)


def discrete_laplace_epsilon(scale: float, l1_sensitivity: float) -> float:
    """Lap_Z(scale) on a query of integer L1 sensitivity Delta_1 is (Delta_1/scale)-DP."""
    return l1_sensitivity / scale


# ---------------------------------------------------------------------------------------
# Exact delta for a general symmetric, log-concave integer noise (sums of noises)
# ---------------------------------------------------------------------------------------


def sum_of_discrete_gaussians_pmf(sigma: float, copies: int) -> IntegerPmf:
    """The pmf of the sum of `copies` independent N_Z(0, sigma^2): the per-coordinate
    noise when `copies` honest Aggregators each add their own (truncated at e^-60
    relative to the mode of each factor)."""
    base = discrete_gaussian_pmf(sigma, cut=60.0 if copies > 1 else 745.0)
    return _sum_iid(base, copies)


def additive_noise_delta(noise: IntegerPmf, epsilon: float,
                         shift: Sequence[int]) -> float:
    """The exact delta at epsilon of M(x) = q(x) + Z, Z with iid coordinates of the
    symmetric log-concave pmf `noise`, for a change y = `shift` of the query with one
    or two non-zero coordinates (Count/Sum: (D,); Histogram: (1, -1)).

    delta = sum_z (P(z) - e^eps P(z - y))_+; for two coordinates the inner sum over the
    second coordinate is a tail (the likelihood ratio of a log-concave pmf is monotone),
    found by bisection, so the cost is O(N log N).
    """
    y = [int(v) for v in shift if int(v) != 0]
    probs, off = noise.probs, noise.offset
    n = len(probs)

    def f(x: int) -> float:
        i = x - off
        return probs[i] if 0 <= i < n else 0.0

    ee = math.exp(epsilon)
    if len(y) == 1:
        d = y[0]
        lo, hi = off - abs(d), off + n + abs(d)
        return max(0.0, math.fsum(max(0.0, f(x) - ee * f(x - d)) for x in range(lo, hi)))
    if len(y) != 2:
        raise ValueError("shift must have one or two non-zero coordinates")
    a, b = y
    sf = noise.survival()

    def sf_at(x: int) -> float:  # P(Z >= x)
        i = x - off
        if i <= 0:
            return 1.0
        if i >= n:
            return 0.0
        return sf[i]

    # Second coordinate: r2(z2) = log f(z2) - log f(z2 - b) is monotone in z2 for a
    # symmetric log-concave f: decreasing if b > 0, increasing if b < 0.
    def r2(z2: int) -> float:
        p, q = f(z2), f(z2 - b)
        if p == 0.0 and q == 0.0:
            return -math.inf if (b > 0) == (z2 > 0) else math.inf
        if p == 0.0:
            return -math.inf
        if q == 0.0:
            return math.inf
        return math.log(p) - math.log(q)

    lo2, hi2 = off - abs(b) - 1, off + n + abs(b) + 1
    total = []
    for z1 in range(off - abs(a), off + n + abs(a)):
        p1, q1 = f(z1), f(z1 - a)
        if p1 == 0.0:
            continue
        if q1 == 0.0:
            total.append(p1)  # the whole row counts
            continue
        t = epsilon - (math.log(p1) - math.log(q1))
        if b < 0:
            # {z2 : r2(z2) > t} = {z2 >= k}: the smallest such k
            lo, hi = lo2, hi2
            while lo < hi:
                mid = (lo + hi) // 2
                if r2(mid) > t:
                    hi = mid
                else:
                    lo = mid + 1
            k = lo
            total.append(p1 * sf_at(k) - ee * q1 * sf_at(k - b))
        else:
            # {z2 : r2(z2) > t} = {z2 <= k}: the largest such k; P(Z <= k) = P(Z >= -k)
            lo, hi = lo2, hi2
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if r2(mid) > t:
                    lo = mid
                else:
                    hi = mid - 1
            k = lo
            total.append(p1 * sf_at(-k) - ee * q1 * sf_at(b - k))
    return max(0.0, math.fsum(total))
