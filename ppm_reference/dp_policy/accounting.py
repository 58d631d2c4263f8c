"""Privacy accounting: amplification by aggregation and by shuffling, composition.

* `rappor_amplification`: privacy amplification by aggregation for symmetric RAPPOR,
  [MJTB+22] (paper 004) Appendix C.1.3, Theorem C.3: the Renyi divergence between the
  aggregates of two neighbouring batches of n one-hot vectors is at most
  2 rho_2RR(n, alpha, eps0), where rho_2RR bounds the Renyi divergence of a sum of n
  binary randomized responses differing in one input. We compute rho_2RR numerically
  (exactly, in log space) and convert to (epsilon, delta) with CKS20 Proposition 12.
* `shuffle_epsilon`: the numerical amplification-by-shuffling bound ("hiding among the
  clones"), with the closed form beside it where its validity condition holds
  (`shuffle_closed_form`). Two variants (`SHUFFLE_VARIANTS`):
  - "fmt20" (the default): Feldman, McMillan and Talwar, "Hiding Among the Clones"
    (FOCS 2021, arXiv 2012.12803; [FMT20]), which holds for ANY eps0-DP local
    randomizer;
  - "fmt22": the stronger analysis of Feldman, McMillan and Talwar, "Stronger Privacy
    Amplification by Shuffling for Renyi and Approximate Differential Privacy" (SODA
    2023, arXiv 2208.04591; [FMT22]), used by paper 000 (Talwar et al.) Example 4. Its
    erratum (arXiv 2208.04591, "Errata") says the proof of its Lemma 3.5 is wrong when
    p < 1/(e^eps0 + 1), which affects its Theorems 3.1 and 3.2 (and Corollary 4.3,
    Theorem 5.2): "previously stated for any sequence of adaptive local randomizers,
    [they] hold for a restricted class of local randomizers that contains several
    important local randomizers" (and so do its numerical Figures 1-3). It is therefore
    NOT a bound for an arbitrary eps0-DP randomizer. We have not established that the
    randomizers of this project (symmetric RAPPOR on a one-hot vector, whose
    replacement-model local epsilon is 2 eps0) belong to that class, so FMT20 is the
    default; use "fmt22" only for a randomizer the erratum's class is known to contain.
  Both take eps0 as the local randomizer's epsilon between ANY two inputs (the
  replacement model): for symmetric RAPPOR(eps0), pass 2 eps0.
* the inverses `rappor_min_batch_size` and `shuffle_min_batch_size`;
* `rappor_max_weight`: the false-positive bound of the draft's Section 6.1.1, and what
  dropping an honest report over it costs (`rappor_drop_delta`, `rappor_fp_for`);
* composition over several collections: basic, advanced ([DRV10], paper 000 Theorem 3)
  and Renyi ([Mir17] Proposition 1), and a small `PrivacyAccountant`.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ppm_reference.dp_policy.calibration import rdp_to_dp, rdp_to_epsilon_at

# ---------------------------------------------------------------------------------------
# Binomial helpers (log space)
# ---------------------------------------------------------------------------------------


def binomial_log_pmf(m: int, k: int, log_q: float, log_1mq: float) -> float:
    if k < 0 or k > m:
        return -math.inf
    return (math.lgamma(m + 1) - math.lgamma(k + 1) - math.lgamma(m - k + 1)
            + k * log_q + (m - k) * log_1mq)


def _binomial_support(m: int, q: float, cut: float) -> tuple[int, list[float]]:
    """(offset, log pmf) of Binomial(m, q) on the range where the log pmf is within `cut`
    nats of its maximum (the mass outside is below (m + 1) e^-cut)."""
    lq, l1q = math.log(q), math.log1p(-q)
    mode = min(m, int((m + 1) * q))
    top = binomial_log_pmf(m, mode, lq, l1q)
    lo = mode
    while lo > 0 and binomial_log_pmf(m, lo - 1, lq, l1q) > top - cut:
        lo -= 1
    hi = mode
    while hi < m and binomial_log_pmf(m, hi + 1, lq, l1q) > top - cut:
        hi += 1
    return lo, [binomial_log_pmf(m, k, lq, l1q) for k in range(lo, hi + 1)]


def _logaddexp(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    if a < b:
        a, b = b, a
    return a + math.log1p(math.exp(b - a))


# ---------------------------------------------------------------------------------------
# Amplification by aggregation for symmetric RAPPOR ([MJTB+22] Theorem C.3)
# ---------------------------------------------------------------------------------------


class AggregatedRandomizedResponse:
    """The sum S of n binary randomized responses (flip probability q = 1/(e^eps0 + 1))
    of which n - 1 inputs are fixed and the first is 0 (law P) or 1 (law Q).

    With k of the other inputs equal to 1, S = B + Bin(k, 1 - q) + Bin(n - 1 - k, q),
    B ~ Bern(q) under P and Bern(1 - q) under Q. rho_2RR(n, alpha, eps0) of [MJTB+22] is
    the worst case over k and over the two directions D(P||Q), D(Q||P).

    Worst case over k. Flipping every bit maps k to n - 1 - k and swaps P and Q, so the
    configurations k = 0 and k = n - 1 give the same pair of divergences. The variance of
    S does not depend on k; numerically the divergence is largest at these extreme
    configurations (the tests check every k for small n), and the draft's Table 1
    epsilons are reproduced with them. This is what `rdp` computes; `rdp_for_config`
    evaluates any k (by convolution, slower) for verification.
    """

    def __init__(self, n: int, eps0: float, max_order: float = 256.0) -> None:
        if n < 1:
            raise ValueError("n must be at least 1")
        self.n, self.eps0 = n, eps0
        self.q = 1.0 / (math.exp(eps0) + 1.0)
        self._max_order = max_order
        self._build(max_order)

    def _build(self, max_order: float) -> None:
        # Terms dropped from E_Q[(P/Q)^alpha] are bounded by (dropped Q mass) e^(alpha
        # eps0) since P/Q lies in [e^-eps0, e^eps0]; keep everything within this cut.
        self._max_order = max_order
        cut = max_order * self.eps0 + 60.0 + math.log(self.n + 1.0)
        if self.n == 1:
            offset, log_y = 0, [0.0]
        else:
            offset, log_y = _binomial_support(self.n - 1, self.q, cut)
        self._lp, self._lq = self._mix(log_y)
        self._offset = offset

    def _mix(self, log_y: list[float]) -> tuple[list[float], list[float]]:
        lq, l1q = math.log(self.q), math.log1p(-self.q)
        ext = [-math.inf, *log_y, -math.inf]
        lp_, lq_ = [], []
        for s in range(1, len(ext)):
            y_s, y_prev = ext[s], ext[s - 1]
            lp_.append(_logaddexp(l1q + y_s, lq + y_prev))  # target input 0
            lq_.append(_logaddexp(lq + y_s, l1q + y_prev))  # target input 1
        return lp_, lq_

    @staticmethod
    def _renyi(lp: list[float], lq: list[float], alpha: float) -> float:
        """D_alpha(P||Q) = log(sum_s P(s)^alpha Q(s)^(1 - alpha)) / (alpha - 1), in log
        space; terms below e^-60 of the largest are skipped (relative error < 1e-20)."""
        a1 = 1.0 - alpha
        vals = [alpha * a + a1 * b for a, b in zip(lp, lq, strict=True)]
        top = max(vals)
        if top == -math.inf:
            return 0.0
        thr = top - 60.0
        exp = math.exp
        total = top + math.log(sum([exp(v - top) for v in vals if v > thr]))
        return max(0.0, total / (alpha - 1.0))

    def rdp(self, alpha: float) -> float:
        """rho_2RR(n, alpha, eps0): max of D_alpha(P||Q) and D_alpha(Q||P) at k = 0."""
        if alpha > self._max_order:
            self._build(max(alpha, 2.0 * self._max_order))
        return max(self._renyi(self._lp, self._lq, alpha),
                   self._renyi(self._lq, self._lp, alpha))

    def rdp_for_config(self, k: int, alpha: float) -> float:
        """max(D_alpha(P||Q), D_alpha(Q||P)) with k of the other n - 1 inputs equal to 1
        (direct convolution in probability space; for small n)."""
        m = self.n - 1
        q = self.q

        def pmf(trials: int, prob: float) -> list[float]:
            if trials == 0:
                return [1.0]
            lp, l1p = math.log(prob), math.log1p(-prob)
            return [math.exp(binomial_log_pmf(trials, j, lp, l1p)) for j in range(trials + 1)]

        a, b = pmf(k, 1.0 - q), pmf(m - k, q)
        y = [0.0] * (len(a) + len(b) - 1)
        for i, x in enumerate(a):
            for j, z in enumerate(b):
                y[i + j] += x * z
        log_y = [math.log(v) if v > 0 else -math.inf for v in y]
        lp, lq = self._mix(log_y)
        keep = [i for i in range(len(lp)) if lp[i] > -math.inf and lq[i] > -math.inf]
        lp = [lp[i] for i in keep]
        lq = [lq[i] for i in keep]
        return max(self._renyi(lp, lq, alpha), self._renyi(lq, lp, alpha))


INTEGER_ORDERS: tuple[float, ...] = tuple(float(a) for a in range(2, 257))
#: The largest integer Renyi order `rappor_amplification` considers.
MAX_INTEGER_ORDER = 4096


def best_integer_order(curve: Callable[[float], float], delta: float,
                       conversion: str = "cks20",
                       top: int = MAX_INTEGER_ORDER) -> tuple[float, float]:
    """(epsilon, order): the smallest (epsilon, delta) conversion of the RDP `curve` over
    the integer orders 2..`top`.

    Scanning every integer order costs one RDP evaluation each, and an evaluation at
    large n is expensive (the binomial support grows like sqrt(n)): 4,000 orders took
    minutes (issue 16, `ppm dp batch-size`). The converted epsilon is unimodal in the
    order (the RDP curve is non-decreasing and convex, the conversion term
    log(1/delta)/(alpha - 1) convex and decreasing), so a geometric grid brackets the
    optimum and an integer ternary search inside the bracket finds it, with a final scan
    of the few orders around it: about 60 evaluations instead of 4,000, the same order
    as the exhaustive scan (tests/test_dp_accounting.py compares them)."""
    memo: dict[int, float] = {}

    def f(a: int) -> float:
        value = memo.get(a)
        if value is None:
            tau = curve(float(a))
            value = math.inf if math.isinf(tau) else rdp_to_epsilon_at(tau, float(a), delta,
                                                                      conversion)
            memo[a] = value
        return value

    grid = sorted({min(top, max(2, round(2 * 1.25 ** k))) for k in range(64)})
    grid = [a for a in grid if a <= top]
    i = min(range(len(grid)), key=lambda j: (f(grid[j]), grid[j]))
    lo, hi = grid[max(0, i - 1)], grid[min(len(grid) - 1, i + 1)]
    while hi - lo > 4:
        m1 = lo + (hi - lo) // 3
        m2 = hi - (hi - lo) // 3
        if f(m1) <= f(m2):
            hi = m2
        else:
            lo = m1
    best = min(range(max(2, lo - 2), min(top, hi + 2) + 1), key=lambda a: (f(a), a))
    return f(best), float(best)


@dataclass(frozen=True)
class AmplificationResult:
    """(epsilon, delta) of an aggregate, with how it was obtained."""

    epsilon: float
    delta: float
    n: int
    eps0: float
    order: float | None = None  # the Renyi order that gave epsilon
    rdp: float | None = None  # the RDP bound at that order
    std: float | None = None  # noise standard deviation per coordinate, if applicable
    method: str = ""


def rappor_rdp(n: int, eps0: float, alpha: float) -> float:
    """The RDP of the aggregate of n symmetric-RAPPOR one-hot reports at order alpha:
    2 rho_2RR(n, alpha, eps0) ([MJTB+22] Theorem C.3; one coordinate gains the target's
    1, another loses it)."""
    return 2.0 * AggregatedRandomizedResponse(n, eps0, max(256.0, alpha)).rdp(alpha)


def rappor_amplification(eps0: float, n: int, delta: float, orders: str = "integer",
                         conversion: str = "cks20") -> AmplificationResult:
    """(epsilon, delta)-DP of the sum of n honest Clients' symmetric-RAPPOR one-hot
    reports ([MJTB+22] Appendix C.1.3, Theorem C.3), converted from Renyi DP.

    orders: "integer" minimises over the integer Renyi orders 2..256 (extended while the
      optimum sits at the top): this reproduces the draft's Table 1 epsilons (0.317,
      0.906, 1.528). "continuous" then refines over real orders, which gives a slightly
      smaller (equally valid) epsilon, e.g. 1.5197 instead of 1.5280 at eps0 = 7.
    conversion: "cks20" (CKS20 Proposition 12, the draft's Appendix) or "mironov".

    n counts the honest Clients, including the one protected; reports of dishonest
    Clients are independent of it, so adding them is post-processing (OAMC model).
    The standard deviation reported is that of one debiased coordinate,
    sqrt(n e^eps0) / (e^eps0 - 1) ([MJTB+22] Theorem C.2).
    """
    if not 0 < delta < 1:
        raise ValueError("delta must be in (0, 1)")
    if not eps0 > 0 or not math.isfinite(eps0):
        raise ValueError("eps0 must be a positive number")
    if n < 1:
        raise ValueError("n must be at least 1")
    rr = AggregatedRandomizedResponse(n, eps0)

    def curve(a: float) -> float:
        return 2.0 * rr.rdp(a)

    eps, order = best_integer_order(curve, delta, conversion)
    if orders == "continuous":
        lo, hi = max(1.0 + 1e-6, order - 1.0), order + 1.0
        g = (math.sqrt(5.0) - 1.0) / 2.0

        def f(a: float) -> float:
            return rdp_to_epsilon_at(curve(a), a, delta, conversion)

        for _ in range(60):
            c, d = hi - g * (hi - lo), lo + g * (hi - lo)
            if f(c) < f(d):
                hi = d
            else:
                lo = c
        a = 0.5 * (lo + hi)
        if f(a) < eps:
            eps, order = f(a), a
    elif orders != "integer":
        raise ValueError("orders must be 'integer' or 'continuous'")
    exp_eps = math.exp(eps0)
    std = math.sqrt(n * exp_eps) / (exp_eps - 1.0)
    if eps >= 2.0 * eps0:
        # Too few Clients to amplify: the aggregate is post-processing of reports that are
        # each 2 eps0-DP in the replacement model.
        return AmplificationResult(2.0 * eps0, delta, n, eps0, None, None, std,
                                   "local bound (2 eps0, replacement model)")
    return AmplificationResult(eps, delta, n, eps0, order, curve(order), std,
                               f"rappor-aggregation/{orders}-orders/{conversion}")


def rappor_min_batch_size(eps0: float, target_epsilon: float, delta: float,
                          n_max: int = 10**9,
                          progress: Callable[[int, int], None] | None = None) -> int | None:
    """The smallest number of honest Clients n for which `rappor_amplification` gives
    epsilon <= target_epsilon (None if not reached by n_max). Epsilon decreases with n.
    `progress(lo, hi)` is called as the bracket [lo, hi] narrows."""
    if not target_epsilon > 0:
        raise ValueError("epsilon must be positive")

    def score(n: int) -> float:
        eps = rappor_amplification(eps0, n, delta).epsilon
        return math.log(max(eps, 1e-300)) - math.log(target_epsilon)

    return _min_n(score, n_max, progress)


def _min_n(score: Callable[[int], float], n_max: int,
           progress: Callable[[int, int], None] | None = None) -> int | None:
    """The smallest n in [1, n_max] with score(n) <= 0, for a score non-increasing in n
    (None if score(n_max) > 0).

    Each evaluation can take seconds at large n, so after doubling to a bracket the
    search interpolates in (log n, score), where the bounds are close to linear (epsilon
    ~ 1/sqrt(n)), falling back to bisection whenever an interpolated step does not
    halve the bracket: a handful of evaluations instead of 2 log2(n)."""
    hi, s_hi = 2, score(2)
    lo, s_lo = 1, math.inf
    while s_hi > 0:
        if hi >= n_max:
            return None
        lo, s_lo = hi, s_hi
        hi = min(n_max, hi * 2)
        s_hi = score(hi)
        if progress is not None:
            progress(lo, hi)
    if lo == 1:
        return 1 if score(1) <= 0 else 2
    bisect_next = False
    while hi - lo > 1:
        if progress is not None:
            progress(lo, hi)
        width = hi - lo
        if bisect_next or not math.isfinite(s_lo) or s_lo == s_hi:
            mid = (lo + hi) // 2
        else:
            t = s_lo / (s_lo - s_hi)  # in (0, 1]
            mid = round(math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo))))
            mid = min(hi - 1, max(lo + 1, mid))
        s_mid = score(mid)
        if s_mid <= 0:
            hi, s_hi = mid, s_mid
        else:
            lo, s_lo = mid, s_mid
        # An interpolated step that left more than half the bracket: bisect next.
        bisect_next = not bisect_next and hi - lo > width // 2
    return hi


# ---------------------------------------------------------------------------------------
# Amplification by shuffling ("hiding among the clones")
# ---------------------------------------------------------------------------------------


#: The shuffle bounds, and which local randomizers each holds for (see the module text).
SHUFFLE_VARIANTS = {
    "fmt20": "FMT20 (Hiding Among the Clones, Thm 3.2): holds for any eps0-DP local "
             "randomizer",
    "fmt22": "FMT22 (Stronger Amplification by Shuffling, Thm 3.2): by the paper's erratum "
             "only for a restricted class of local randomizers, not for any eps0-DP one",
}
#: The default: the bound valid for every eps0-DP local randomizer, ours included.
DEFAULT_SHUFFLE_VARIANT = "fmt20"


class _CloneModel:
    """The pair of distributions that dominates the shuffled output ([FMT20] Theorem
    3.2; [FMT22] Section 3): for C ~ Bin(n - 1, p_clone), A ~ Bin(C, 1/2) and
    Delta ~ Bern(e^eps0 / (e^eps0 + 1)),

        P = (A + Delta, C - A + 1 - Delta),   Q = (A + 1 - Delta, C - A + Delta).

    p_clone = e^-eps0 in [FMT20], for any eps0-DP local randomizer; the stronger
    analysis of [FMT22] has every other Client's report contain a "clone" of the
    target's with probability 2/(e^eps0 + 1), which is the bound paper 000 (Talwar et
    al.) uses in its Example 4 (eps0 = 4, B = 10000, delta = 1e-10 gives epsilon 0.61)
    -- but, by the [FMT22] erratum, only for a restricted class of local randomizers
    (the error is in its Lemma 3.5, the decomposition that gives 2/(e^eps0 + 1)).

    Given C = c only the first coordinate x matters; P(x|c)/Q(x|c) increases in x, so
    sum_x (P - e^eps Q)_+ is a tail sum starting at x* = ceil(beta (c + 1)), where
    beta = r*/(1 + r*) and r* = (e^eps a - (1 - a)) / (a - e^eps (1 - a)), a = e^eps0 /
    (e^eps0 + 1). By the symmetry x -> c + 1 - x the other direction gives the same value.
    """

    def __init__(self, n: int, eps0: float, variant: str = DEFAULT_SHUFFLE_VARIANT,
                 mass_cut: float = 1e-18) -> None:
        if variant == "fmt22":
            p = 2.0 / (math.exp(eps0) + 1.0)
        elif variant == "fmt20":
            p = math.exp(-eps0)
        else:
            raise ValueError("variant must be 'fmt22' or 'fmt20'")
        self.n, self.eps0, self.p_clone = n, eps0, p
        self.a = math.exp(eps0) / (math.exp(eps0) + 1.0)
        m = n - 1
        self.weights: list[float] = []
        self.cs: list[int] = []
        if m == 0:
            self.cs, self.weights = [0], [1.0]
        else:
            lp, l1p = math.log(p), math.log1p(-p)
            mode = min(m, int((m + 1) * p))
            c = mode
            while c >= 0:
                w = math.exp(binomial_log_pmf(m, c, lp, l1p))
                if w < mass_cut and c < mode:
                    break
                self.cs.append(c)
                self.weights.append(w)
                c -= 1
            c = mode + 1
            while c <= m:
                w = math.exp(binomial_log_pmf(m, c, lp, l1p))
                if w < mass_cut:
                    break
                self.cs.append(c)
                self.weights.append(w)
                c += 1
        # lgamma-based weights carry a relative error of about 1e-16 * lgamma(n), so do
        # not estimate the mass left out as 1 - sum: bound each tail geometrically (the
        # pmf ratio is below `r` beyond the cut) and charge it in full (conditional
        # delta <= 1); then normalise the kept weights to the remaining mass.
        left = 0.0
        if m > 0:
            lo_c, hi_c = min(self.cs), max(self.cs)
            if lo_c > 0:
                w = math.exp(binomial_log_pmf(m, lo_c - 1, math.log(p), math.log1p(-p)))
                r = lo_c * (1.0 - p) / ((m - lo_c + 1) * p)  # pmf(c-1)/pmf(c) at lo_c
                left += w / (1.0 - r) if r < 1.0 else 1.0
            if hi_c < m:
                w = math.exp(binomial_log_pmf(m, hi_c + 1, math.log(p), math.log1p(-p)))
                r = (m - hi_c - 1) * p / ((hi_c + 2) * (1.0 - p))  # pmf(c+1)/pmf(c)
                left += w / (1.0 - r) if r < 1.0 else 1.0
        self.left_out = min(1.0, left)
        total = math.fsum(self.weights)
        self.weights = [w * (1.0 - self.left_out) / total for w in self.weights]
        self._tails: dict[int, tuple[int, array[float]]] = {}

    def _tail_table(self, c: int) -> tuple[int, array[float]]:
        """(k0, S) with S[i] = P(Bin(c, 1/2) >= k0 + i) for k0 = floor((c - 1)/2)."""
        tab = self._tails.get(c)
        if tab is not None:
            return tab
        k0 = max(0, (c - 1) // 2)
        lh = -c * math.log(2.0)
        pm: list[float] = []
        k = k0
        term = math.exp(math.lgamma(c + 1) - math.lgamma(k + 1) - math.lgamma(c - k + 1) + lh)
        first = term
        while k <= c:
            pm.append(term)
            if term < 1e-40 * first:
                break
            term = term * (c - k) / (k + 1)
            k += 1
        s = array("d", [0.0] * (len(pm) + 1))
        acc = 0.0
        for i in range(len(pm) - 1, -1, -1):
            acc += pm[i]
            s[i] = acc
        tab = (k0, s)
        self._tails[c] = tab
        return tab

    def _sf(self, c: int, k: int) -> float:
        if k <= 0:
            return 1.0
        if k > c:
            return 0.0
        k0, s = self._tail_table(c)
        i = k - k0
        if i < 0:  # not reached: thresholds are at least (c - 1)/2
            return 1.0
        if i >= len(s):
            return 0.0
        return float(s[i])

    def delta(self, epsilon: float) -> float:
        """The hockey-stick divergence of P and Q at e^epsilon (an upper bound on the
        delta of the shuffled mechanism at epsilon)."""
        a = self.a
        ee = math.exp(epsilon)
        den = a - ee * (1.0 - a)
        if den <= 0:
            return 0.0  # epsilon >= eps0: P/Q never exceeds e^eps
        r = (ee * a - (1.0 - a)) / den
        beta = r / (1.0 + r)
        terms = []
        for c, w in zip(self.cs, self.weights, strict=True):
            x = math.ceil(beta * (c + 1) - 1e-12)
            s1, s0 = self._sf(c, x - 1), self._sf(c, x)
            p_tail = a * s1 + (1.0 - a) * s0
            q_tail = (1.0 - a) * s1 + a * s0
            terms.append(w * max(0.0, p_tail - ee * q_tail))
        return math.fsum(terms) + self.left_out


def shuffle_delta(eps0: float, n: int, epsilon: float,
                  variant: str = DEFAULT_SHUFFLE_VARIANT) -> float:
    """delta at epsilon of shuffling n eps0-DP local reports (numerical clone bound)."""
    return _CloneModel(n, eps0, variant).delta(epsilon)


def shuffle_epsilon(eps0: float, n: int, delta: float,
                    variant: str = DEFAULT_SHUFFLE_VARIANT, tol: float = 1e-7) -> float:
    """The smallest epsilon (to `tol`) such that shuffling n reports of an eps0-DP local
    randomizer is (epsilon, delta)-DP, by the numerical clone bound: [FMT20] (default,
    any eps0-DP randomizer) or [FMT22] with variant="fmt22" (only the randomizers of the
    restricted class of its erratum). Never more than eps0."""
    model = _CloneModel(n, eps0, variant)
    if model.delta(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, eps0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if model.delta(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def shuffle_closed_form(eps0: float, n: int, delta: float,
                        variant: str = DEFAULT_SHUFFLE_VARIANT) -> float | None:
    """The closed-form bound of the variant, None outside its validity condition.

    fmt20 ([FMT20] Theorem 3.1, any eps0-DP randomizer):

        eps = ln(1 + (e^eps0 - 1)/(e^eps0 + 1) (8 sqrt(e^eps0 ln(4/delta)) / sqrt(n)
                     + 8 e^eps0 / n)),   for eps0 <= ln(n / (16 ln(2/delta)));

    fmt22 ([FMT22] Theorem 3.1 as printed in paper 000, Example 4, footnote, where it is
    attributed to [FeldmanMT2020]; restricted by the [FMT22] erratum like the numerical
    bound):

        eps = ln(1 + (e^eps0 - 1) (4 sqrt(2 ln(4/delta)) / sqrt((e^eps0 + 1) n) + 4/n)),
              for eps0 <= ln(n / (8 ln(2/delta)) - 1).
    """
    e = math.exp(eps0)
    if variant == "fmt20":
        arg = n / (16.0 * math.log(2.0 / delta))
        if arg <= 0 or eps0 > math.log(arg):
            return None
        return math.log1p((e - 1.0) / (e + 1.0) * (8.0 * math.sqrt(e * math.log(4.0 / delta))
                                                   / math.sqrt(n) + 8.0 * e / n))
    if variant != "fmt22":
        raise ValueError("variant must be 'fmt22' or 'fmt20'")
    arg = n / (8.0 * math.log(2.0 / delta)) - 1.0
    if arg <= 0 or eps0 > math.log(arg):
        return None
    return math.log1p((e - 1.0) * (4.0 * math.sqrt(2.0 * math.log(4.0 / delta))
                                   / math.sqrt((e + 1.0) * n) + 4.0 / n))


def shuffle_amplification(eps0: float, n: int, delta: float,
                          variant: str = DEFAULT_SHUFFLE_VARIANT) -> AmplificationResult:
    eps = shuffle_epsilon(eps0, n, delta, variant)
    return AmplificationResult(eps, delta, n, eps0, method=f"shuffle/{variant}")


def shuffle_min_batch_size(eps0: float, target_epsilon: float, delta: float,
                           variant: str = DEFAULT_SHUFFLE_VARIANT,
                           n_max: int = 10**9,
                           progress: Callable[[int, int], None] | None = None
                           ) -> int | None:
    """The smallest n for which the numerical shuffle bound gives epsilon <=
    target_epsilon at delta (None if not reached by n_max)."""

    if not 0 < delta < 1:
        raise ValueError("delta must be in (0, 1)")

    def score(n: int) -> float:
        d = _CloneModel(n, eps0, variant).delta(target_epsilon)
        return math.log(max(d, 1e-300)) - math.log(delta)

    return _min_n(score, n_max, progress)


# ---------------------------------------------------------------------------------------
# RAPPOR false positives (draft Section 6.1.1)
# ---------------------------------------------------------------------------------------


def rappor_drop_delta(n: int, fp: float, epsilon: float) -> float:
    """What dropping honest reports over max_weight adds to the delta of the aggregate.

    The amplification bound (`rappor_amplification`) is for the mechanism M that
    aggregates all n honest reports; the deployed M' drops each report whose noisy
    weight exceeds max_weight, which happens with probability at most fp per report
    (`rappor_max_weight`), so M and M' (coupled on the same Client randomness) differ
    only on an event E with P(E) <= n fp. If M is (epsilon, delta)-DP, then for every set
    S: P(M'(D) in S) <= P(M(D) in S) + P(E) <= e^epsilon P(M(D') in S) + delta + P(E)
    <= e^epsilon P(M'(D') in S) + delta + (1 + e^epsilon) P(E): M' is (epsilon,
    delta + (1 + e^epsilon) n fp)-DP. (The local guarantee is unaffected: dropping is a
    function of the noisy report.)"""
    if n < 0 or not 0 <= fp <= 1:
        raise ValueError("need n >= 0 and 0 <= fp <= 1")
    return min(1.0, (1.0 + math.exp(epsilon)) * n * fp)


def rappor_fp_for(delta: float, n: int, share: float = 0.01) -> float:
    """The false-positive bound fp = share * delta / n: with it, n honest Clients have
    an honest report dropped with probability at most share * delta, and
    `rappor_drop_delta` adds (1 + e^epsilon) share delta to the guarantee (for epsilon
    <= 1, under 4 share delta)."""
    if not 0 < delta < 1 or n < 1 or not 0 < share <= 1:
        raise ValueError("need 0 < delta < 1, n >= 1 and 0 < share <= 1")
    return share * delta / n


def rappor_max_weight(length: int, eps0: float, fp: float) -> int:
    """The smallest m such that a symmetric-RAPPOR-noised one-hot vector of length d has
    more than m ones with probability at most fp (draft Section 6.1.1).

    Following the draft, the weight is modelled as 1 + C with C ~ Bin(d - 1, p0),
    p0 = 1 / (e^eps0 + 1) (the set bit is counted as always kept, which over-estimates
    the weight), and m is the smallest integer with Pr(C <= m - 1) >= 1 - fp, i.e.
    Pr(C >= m) <= fp. Computed in double precision in log space.
    """
    if length < 1 or not 0 < fp < 1:
        raise ValueError("need length >= 1 and 0 < fp < 1")
    m_trials = length - 1
    if m_trials == 0:
        return 1
    p0 = 1.0 / (math.exp(eps0) + 1.0)
    lq, l1q = math.log(p0), math.log1p(-p0)
    logs = [binomial_log_pmf(m_trials, k, lq, l1q) for k in range(m_trials + 1)]
    top = max(logs)
    probs = [math.exp(v - top) for v in logs]
    scale = math.exp(top)
    # tail[k] = Pr(C >= k), summed from the top
    tail = 0.0
    best = m_trials + 1
    for k in range(m_trials, -1, -1):
        tail += probs[k]
        if tail * scale <= fp:
            best = k
        else:
            break
    # Pr(C >= best) <= fp and Pr(C >= best - 1) > fp: m = best (weight 1 + C > m iff
    # C >= m).
    return max(1, min(best, length))


# ---------------------------------------------------------------------------------------
# Composition over several collections
# ---------------------------------------------------------------------------------------


def basic_composition(guarantees: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """k mechanisms, (eps_i, delta_i)-DP each: (sum eps_i, sum delta_i)-DP ([DR14]
    Theorem 3.16)."""
    return (math.fsum(e for e, _ in guarantees), math.fsum(d for _, d in guarantees))


def advanced_composition(epsilon: float, delta: float, k: int,
                         delta_prime: float) -> tuple[float, float]:
    """k adaptive (epsilon, delta)-DP mechanisms are (eps', k delta + delta')-DP with
    eps' = epsilon sqrt(2 k ln(1/delta')) + k epsilon (e^epsilon - 1) ([DRV10]; paper 000
    Theorem 3)."""
    eps_p = (epsilon * math.sqrt(2.0 * k * math.log(1.0 / delta_prime))
             + k * epsilon * (math.exp(epsilon) - 1.0))
    return (eps_p, k * delta + delta_prime)


def renyi_composition(curves: Sequence[Callable[[float], float]]) -> Callable[[float], float]:
    """The RDP curve of the adaptive composition: the sum of the curves ([Mir17]
    Proposition 1; paper 000 Theorem 2)."""
    curves = list(curves)

    def total(alpha: float) -> float:
        return math.fsum(c(alpha) for c in curves)

    return total


def pure_dp_rdp(epsilon: float) -> Callable[[float], float]:
    """An epsilon-DP mechanism is (alpha, min(epsilon, alpha epsilon^2 / 2))-RDP ([BS16]
    Proposition 1.4 and the trivial bound)."""
    return lambda alpha: min(epsilon, 0.5 * alpha * epsilon * epsilon)


def zcdp_rdp(rho: float) -> Callable[[float], float]:
    """rho-zCDP is (alpha, alpha rho)-RDP for every alpha > 1."""
    return lambda alpha: alpha * rho


@dataclass
class PrivacyEvent:
    """One collection: an (epsilon, delta) guarantee and, when known, its RDP curve."""

    label: str
    epsilon: float
    delta: float
    rdp: Callable[[float], float] | None = None


@dataclass
class PrivacyAccountant:
    """Composes the guarantees of several collections over the same Clients (the draft's
    Appendix "Privacy budget and accounting": Clients enforce the budget, since only
    they know which collections they took part in)."""

    events: list[PrivacyEvent] = field(default_factory=list)

    def add(self, event: PrivacyEvent) -> None:
        self.events.append(event)

    def add_rappor(self, eps0: float, n: int, delta: float) -> PrivacyEvent:
        rr = AggregatedRandomizedResponse(n, eps0)
        res = rappor_amplification(eps0, n, delta)
        ev = PrivacyEvent(f"rappor(eps0={eps0}, n={n})", res.epsilon, delta,
                          lambda a: 2.0 * rr.rdp(a))
        self.add(ev)
        return ev

    def add_gaussian(self, sigma: float, l2_sensitivity: float, epsilon: float,
                     delta: float) -> PrivacyEvent:
        rho = l2_sensitivity ** 2 / (2.0 * sigma * sigma)
        ev = PrivacyEvent(f"gaussian(sigma={sigma})", epsilon, delta, zcdp_rdp(rho))
        self.add(ev)
        return ev

    def add_pure(self, epsilon: float, label: str = "pure") -> PrivacyEvent:
        ev = PrivacyEvent(label, epsilon, 0.0, pure_dp_rdp(epsilon))
        self.add(ev)
        return ev

    def compose(self, delta: float) -> dict[str, tuple[float, float]]:
        """The composed (epsilon, delta) by each applicable method. "basic" is always
        there; "advanced" when all events share one (epsilon, delta) (its delta is
        k delta_i + delta' with delta' taken as half of `delta` minus k delta_i if that
        is positive); "renyi" when every event has an RDP curve."""
        out: dict[str, tuple[float, float]] = {
            "basic": basic_composition([(e.epsilon, e.delta) for e in self.events])}
        k = len(self.events)
        if k and all((e.epsilon, e.delta) == (self.events[0].epsilon, self.events[0].delta)
                     for e in self.events):
            e0, d0 = self.events[0].epsilon, self.events[0].delta
            dp = delta - k * d0
            if dp > 0:
                out["advanced"] = advanced_composition(e0, d0, k, dp)
        if k and all(e.rdp is not None for e in self.events):
            curve = renyi_composition([e.rdp for e in self.events if e.rdp is not None])
            eps, _ = rdp_to_dp(curve, delta)
            out["renyi"] = (eps, delta)
        return out

    def best(self, delta: float) -> tuple[str, float, float]:
        """The method with the smallest epsilon among those meeting `delta`."""
        options = [(name, e, d) for name, (e, d) in self.compose(delta).items() if d <= delta]
        if not options:
            name, (e, d) = "basic", self.compose(delta)["basic"]
            return (name, e, d)
        return min(options, key=lambda t: t[1])
