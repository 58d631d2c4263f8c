"""The distributed discrete Laplace mechanism: every Client adds the difference of two
Pólya shares, and the sum over a shard is discrete Laplace noise (Bagdasaryan et al.,
"Towards Sparse Federated Analytics: Location Heatmaps under Distributed Differential
Privacy with Secure Aggregation", seed 003, Section 4).

Definition 4.1: X ~ Pólya(alpha, beta) has P(X = k) = C(alpha + k - 1, k) beta^k
(1 - beta)^alpha, k >= 0 (the negative binomial with a real "number of failures" alpha).
Theorem 4.2: with X_i, Y_i independent Pólya(1/S, e^(-eps/Delta)), the sum over S
Clients of X_i - Y_i is discrete Laplace, P(Z = k) = (1 - b)/(1 + b) b^|k| with
b = e^(-eps/Delta) (Equation 4), so a sum of S vectors of L1 norm at most Delta, each
with its own share added, is eps-DP. Modulo clipping (Algorithm 1's ModuloClip) commutes
with the sum and is post-processing.

Dropouts (Section 4, "Handling dropouts and adversarial clients"): if up to a fraction
delta_drop of the S Clients may drop out (or leave out their noise), each Client draws
its shares with alpha = 1 / S_dp, where S_dp = S - floor(delta_drop S) is the "DP shard
size": any S_dp surviving shares sum to exactly discrete Laplace, more survivors add
more (independent) noise, which is post-processing of an eps-DP output. Algorithm 1 in
the paper writes the constant as delta_drop = 0.95 and alpha = 1/((1 - delta_drop) S),
which would be a 95% dropout rate; the text's example is delta_drop = 0.05 with alpha =
1/(0.95 S). We follow the text: `dropout` is the fraction that may drop out.

Sampling is exact and uses no floating point. The paper draws Pólya(alpha, beta) as a
Gamma-Poisson mixture, which needs continuous randomness. We use instead the
decomposition of the negative multinomial: if X ~ Pólya(alpha, beta) and X' ~
Pólya(1 - alpha, beta) are independent, X + X' ~ Pólya(1, beta) = Geometric, and given
X + X' = g, X is beta-binomial(g; alpha, 1 - alpha), which is the number of "A" draws in
g steps of a Pólya urn that starts with weights alpha (A) and 1 - alpha (B) and adds 1
to the colour drawn. So:

1. G ~ Geometric: P(G = g) = (1 - beta) beta^g, beta = exp(-eps/Delta) with eps/Delta
   rational: the core of CKS20 Algorithm 2 (`mechanisms._geometric_exp`), exact;
2. X = the A draws of a Pólya urn over G steps: at step j with a A's so far, draw A with
   probability (alpha + a) / (1 + j), a rational number: one uniform integer per step.

Step 2 step by step costs E[G] = beta / (1 - beta) draws, about Delta/eps, which is
large exactly when the noise is (early rounds of the heatmap, multi-location
sensitivities). `_polya` jumps instead to the urn's first A through the record times of
an i.i.d. sequence (see its docstring), O(log G) integer draws when alpha is small;
`_polya_urn` is the plain urn, kept as the reference the tests compare it with.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

from ppm_reference.dp_policy.mechanisms import (
    DpMechanism,
    RationalLike,
    Rng,
    _geometric_exp,
    _rng,
    to_fraction,
)
from ppm_reference.dp_policy.policies import OAMC, OAOC, OC, DpPolicy, PrivacyGuarantee


def _polya_urn(alpha_num: int, alpha_den: int, rate_num: int, rate_den: int,
               randbelow: Callable[[int], int]) -> int:
    """Pólya(alpha_num/alpha_den, exp(-rate_num/rate_den)), alpha in (0, 1], by running
    the urn step by step: the reference for `_polya` (same law, O(1 + G) draws)."""
    g = _geometric_exp(rate_den, randbelow) // rate_num
    a = 0
    num = alpha_num
    den = alpha_den
    for _ in range(g):
        if randbelow(den) < num:
            a += 1
            num += alpha_den
        den += alpha_den
    return a


_FIRST_BITS = 64


def _next_record(r: int, limit: int, getrandbits: Callable[[int], int]) -> int:
    """The next record time after a record at time r of an i.i.d. continuous sequence,
    or `limit` + 1 if it is beyond `limit`: N with P(N > m) = r/m (m >= r), that is
    N = floor(r / U) + 1 for U uniform in (0, 1). U is revealed bit by bit, K / 2^k <=
    U < (K + 1) / 2^k, until floor(r / U) is known or known to be >= limit:
    r 2^k / (K + 1) < r / U <= r 2^k / K. Integers only."""
    k = _FIRST_BITS
    big_k = getrandbits(k)
    while True:
        low = (r << k) // (big_k + 1)           # floor(r / U) >= low
        if low >= limit:
            return limit + 1
        if big_k and (r << k) // big_k == low:  # floor(r / U) <= floor(r 2^k / K)
            return low + 1
        big_k = (big_k << 1) | getrandbits(1)
        k += 1


def _polya(alpha_num: int, alpha_den: int, rate_num: int, rate_den: int,
           randbelow: Callable[[int], int], getrandbits: Callable[[int], int]) -> int:
    """Pólya(alpha_num/alpha_den, exp(-rate_num/rate_den)), alpha in (0, 1].

    1. G ~ Geometric with P(g) proportional to exp(-g rate): X0 with P proportional to
       exp(-x / rate_den) (CKS20), then floor(X0 / rate_num).
    2. The urn over G steps. Until its first A, step i (1-indexed) draws A with
       probability alpha / i, independently of the past; that is the event "i is a
       record of an i.i.d. continuous sequence (probability 1/i, independent over i)
       and an independent Bernoulli(alpha) coin succeeds". So the first A is the first
       record time whose coin succeeds, found by jumping from record to record
       (`_next_record`): about ln G + 1 steps instead of G. After the first A (an event
       of probability about alpha ln G) the urn runs step by step: with a A's drawn,
       step i draws A with probability (alpha + a) / i.
    """
    g = _geometric_exp(rate_den, randbelow) // rate_num
    if g == 0:
        return 0
    r = 1                                  # time 1 is always a record
    while randbelow(alpha_den) >= alpha_num:
        r = _next_record(r, g, getrandbits)
        if r > g:
            return 0
    # The first A is at step r; continue the urn from step r + 1 with a = 1.
    a = 1
    num = alpha_num + alpha_den            # (alpha + a) * alpha_den
    den = alpha_den * r                    # alpha_den * (i - 1) before step i
    for _ in range(g - r):
        den += alpha_den
        if randbelow(den) < num:
            a += 1
            num += alpha_den
    return a


def sample_polya(alpha: RationalLike, rate: RationalLike, rng: Rng | None = None) -> int:
    """One exact sample of Pólya(alpha, exp(-rate)) (Definition 4.1) for rationals
    alpha in (0, 1] and rate > 0: P(X = k) = C(alpha + k - 1, k) e^(-k rate)
    (1 - e^(-rate))^alpha. Integer arithmetic only (see the module docstring)."""
    a = to_fraction(alpha)
    r = to_fraction(rate)
    if not 0 < a <= 1:
        raise ValueError("alpha must be in (0, 1]")
    if r <= 0:
        raise ValueError("rate must be positive")
    rr = _rng(rng)
    return _polya(a.numerator, a.denominator, r.numerator, r.denominator,
                  rr.randbelow, rr.getrandbits)


def dp_shard_size(clients: int, dropout: RationalLike = 0) -> int:
    """S_dp = S - floor(dropout * S): the fewest Clients left when at most a fraction
    `dropout` of the S Clients drop out (Section 4, "Handling dropouts")."""
    if clients < 1:
        raise ValueError("clients must be at least 1")
    d = to_fraction(dropout)
    if not 0 <= d < 1:
        raise ValueError("dropout must be in [0, 1)")
    return clients - math.floor(d * clients)


def discrete_laplace_pmf(k: int, beta: float) -> float:
    """Equation 4: P(Z = k) = (1 - beta)/(1 + beta) beta^|k|."""
    return (1.0 - beta) / (1.0 + beta) * beta ** abs(k)


def polya_difference_variance(total_alpha: float, beta: float) -> float:
    """Var of Pólya(A, beta) - Pólya(A, beta): 2 A beta / (1 - beta)^2."""
    return 2.0 * total_alpha * beta / (1.0 - beta) ** 2


@dataclass(frozen=True)
class SummedNoise:
    """The noise in a shard's sum when `survivors` Clients add their shares."""

    survivors: int
    total_alpha: float        # survivors / S_dp: 1 is exactly discrete Laplace
    variance: float
    std: float
    epsilon: float            # the guarantee (inf below S_dp survivors)


class DistributedDiscreteLaplace(DpMechanism):
    """Theorem 4.2's mechanism, seen from one Client: `sample_noise(d)` is the Client's
    share, d coordinates of X - Y with X, Y ~ Pólya(1/S_dp, exp(-eps/Delta)).

    `epsilon` is taken as an exact rational (a float at its exact binary value; pass a
    string or a Fraction for a small one); `sensitivity` (Delta) is the L1 norm bound of
    one Client's vector (1 for a one-hot vector under add/remove neighbours, gamma + d
    for Section 5.7's multi-location vectors). The guarantee: eps-DP for the sum over a
    shard whenever at least S_dp Clients add their shares, and one party of the secure
    aggregation is honest (in DAP: one Aggregator). Below S_dp honest shares the noise
    is too small and the guarantee is lost; the paper's answer is to over-provision
    (`dropout`).
    """

    DataType: ClassVar[Any] = list[int]
    DebiasedDataType: ClassVar[Any] = list[int]

    def __init__(self, epsilon: RationalLike, clients: int, sensitivity: int = 1,
                 dropout: RationalLike = 0, rng: Rng | None = None) -> None:
        self.epsilon_exact = to_fraction(epsilon)
        if self.epsilon_exact <= 0:
            raise ValueError("epsilon must be positive")
        if isinstance(sensitivity, bool) or not isinstance(sensitivity, int) \
                or sensitivity < 1:
            raise ValueError("sensitivity must be a positive integer")
        self.epsilon = float(self.epsilon_exact)
        self.sensitivity = sensitivity
        self.clients = clients
        self.dropout = to_fraction(dropout)
        self.dp_clients = dp_shard_size(clients, self.dropout)
        self.alpha = Fraction(1, self.dp_clients)
        self.rate = self.epsilon_exact / sensitivity          # beta = exp(-rate)
        self.rng: Rng = _rng(rng)

    @property
    def beta(self) -> float:
        """exp(-eps/Delta), as a float (for reporting only)."""
        return math.exp(-float(self.rate))

    def sample_polya(self) -> int:
        return _polya(self.alpha.numerator, self.alpha.denominator, self.rate.numerator,
                      self.rate.denominator, self.rng.randbelow, self.rng.getrandbits)

    def sample(self) -> int:
        """One coordinate of a Client's share: X - Y."""
        a, b = self.alpha.numerator, self.alpha.denominator
        s, t = self.rate.numerator, self.rate.denominator
        randbelow, bits = self.rng.randbelow, self.rng.getrandbits
        return _polya(a, b, s, t, randbelow, bits) - _polya(a, b, s, t, randbelow, bits)

    def sample_noise(self, dimension: int) -> list[int]:
        sample = self.sample
        return [sample() for _ in range(dimension)]

    def add_noise(self, data: Sequence[int]) -> list[int]:
        return [int(x) + z for x, z in zip(data, self.sample_noise(len(data)), strict=True)]

    def summed(self, survivors: int | None = None) -> SummedNoise:
        """The noise in the shard's sum with `survivors` shares (default: all S)."""
        n = self.clients if survivors is None else survivors
        total_alpha = n / self.dp_clients
        var = polya_difference_variance(total_alpha, self.beta)
        eps = self.epsilon if n >= self.dp_clients else math.inf
        return SummedNoise(n, total_alpha, var, math.sqrt(var), eps)

    def laplace_pmf(self, k: int) -> float:
        """The law of the sum of S_dp shares (Equation 4)."""
        return discrete_laplace_pmf(k, self.beta)


class SumVecWithClientPolyaShares(DpPolicy[Any, list[int], list[int], list[int]]):
    """The paper's client-side noise over DAP: each Client adds its Pólya share to its
    vector and reduces modulo m (Algorithm 1's ModuloClip); the Aggregators verify the
    reduced vector with a range-checked `Prio3SumVec(length, m - 1)`; the Collector
    reduces the unsharded sum modulo m and reads it as a signed value in [-m/2, m/2).
    Correct while |true count + noise| < m/2 in every coordinate.

    Trust model: OAMC -- eps-DP for the batch if one Aggregator is honest and at least
    S_dp Clients of the batch are honest (add their shares); the Aggregators add nothing.

    Robustness lost against the one-hot `Prio3Histogram`: the range check proves only
    that each coordinate is in [0, m), and every residue modulo m is in that range, so
    after the Collector's reduction a single malicious Client can set every coordinate
    of the result to any value of the decoding range [-m/2, m/2) (it submits (target -
    rest) mod m). Prio3Histogram bounds a malicious Client to +1 in one bucket. With
    noisy vectors nothing more can be checked: an honest share may be any integer. The
    range check still keeps reports well-formed (length, encoding); a Client that
    leaves out its noise counts as a dropout, which the over-provisioning covers up to
    `dropout`. The paper leaves poisoning out of scope (Section 4).
    """

    TRUST_MODEL = OAMC

    def __init__(self, epsilon: RationalLike, clients: int, length: int,
                 max_measurement: int, sensitivity: int = 1, dropout: RationalLike = 0,
                 shares: int = 2, chunk_length: int | None = None,
                 rng: Rng | None = None, build_vdaf: bool = True) -> None:
        self.mechanism = DistributedDiscreteLaplace(epsilon, clients, sensitivity,
                                                    dropout, rng)
        self.epsilon = self.mechanism.epsilon
        self.length = length
        self.max_measurement = max_measurement
        self.modulus_clip = max_measurement + 1          # the paper's m
        self.vdaf: Any = None
        if build_vdaf:
            from ppm_reference.vdaf import registry

            self.vdaf = registry.build(
                "Prio3SumVec", {"length": length, "max_measurement": max_measurement,
                                "chunk_length": chunk_length}, shares=shares)

    def add_noise_to_measurement(self, meas: Sequence[int]) -> list[int]:
        vec = [int(x) for x in meas]
        if len(vec) != self.length:
            raise ValueError(f"the measurement must have length {self.length}")
        m = self.modulus_clip
        return [x % m for x in self.mechanism.add_noise(vec)]

    def debias_agg_result(self, agg_result: list[int], meas_count: int) -> list[int]:
        """(sum mod m) read as a signed value in [-m/2, m/2)."""
        m = self.modulus_clip
        half = m // 2
        out = []
        for v in agg_result:
            r = int(v) % m
            out.append(r - m if r >= half + (m & 1) else r)
        return out

    def guarantees(self, batch_size: int, honest_aggregators: int = 1,
                   **kwargs: Any) -> dict[str, PrivacyGuarantee]:
        honest = int(kwargs.get("honest_clients", batch_size))
        s = self.mechanism.summed(honest)
        note = (f"{honest} honest Clients of S_dp = {self.mechanism.dp_clients} needed; "
                f"noise std {s.std:.4g}")
        g = PrivacyGuarantee(OAMC, s.epsilon, 0.0,
                             "distributed discrete Laplace (Polya shares, seed 003 Thm 4.2)",
                             note)
        return {OAMC: g,
                OAOC: PrivacyGuarantee(OAOC, math.inf, 1.0, "none",
                                       "one Client's share alone is far too small"),
                OC: PrivacyGuarantee(OC, math.inf, 1.0, "none", "no local DP")}
