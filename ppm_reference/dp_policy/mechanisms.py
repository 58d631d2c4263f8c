"""DP mechanisms of draft-wang-ppm-differential-privacy, Section 4 ("DP Mechanisms").

Contents, bottom-up:

* `Rng`, `SystemRng`: the randomness interface. The default is the operating-system
  CSPRNG (`os.urandom`); tests may inject a seeded generator with the same two methods.
* Exact samplers of Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential
  Privacy" (the draft's [CKS20]), in integer and rational arithmetic only -- there is no
  floating point anywhere in a sampling path:
  `sample_bernoulli_exp` (CKS20 Algorithm 1, with their reduction for gamma > 1),
  `sample_discrete_laplace` (Algorithm 2) and `sample_discrete_gaussian` (Algorithm 3).
* `sample_binomial_exact`: an exact Binomial(n, p) sampler for any p whose binary
  expansion can be computed (here p = 1 / (1 + exp(eps0))); it draws bits in bulk, so
  its cost is O(log n) big-integer operations instead of n coin flips.
* `DpMechanism` (the draft's interface), `DiscreteLaplace`, `DiscreteGaussian`,
  `SymmetricRappor` (draft Section 4.3), and `NoisePool`.

Timing side channels. The running time of these rejection samplers depends on the value
they return (Jin, McMurtry, Rubinstein and Ohrimenko, "Are We There Yet? Timing and
Floating-Point Attacks on Differential Privacy Systems", IEEE S&P 2022): an attacker who
can time an Aggregator's response learns something about the noise it added. Aggregate
share noise must therefore be drawn *off the request path*: an Aggregator fills a
`NoisePool` in the background (or when a collection job is created, long before the
aggregate share is requested) and the request handler only takes values from it.
"""

from __future__ import annotations

import copy
import math
import os
import struct
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from fractions import Fraction
from math import isqrt
from typing import Any, ClassVar, Protocol, runtime_checkable

# ---------------------------------------------------------------------------------------
# Randomness
# ---------------------------------------------------------------------------------------


@runtime_checkable
class Rng(Protocol):
    """The randomness a sampler consumes: uniform integers, nothing else.

    `SystemRng` (the OS CSPRNG) is the default everywhere. A test may pass any object
    with these two methods, e.g. a wrapper of a seeded `random.Random`; such a generator
    must never be used outside tests.
    """

    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n), n >= 1."""
        ...

    def getrandbits(self, k: int) -> int:
        """A uniform integer in [0, 2**k), k >= 0."""
        ...


_WORDS_PER_REFILL = 1024  # 8 KiB of os.urandom per refill


class SystemRng:
    """Uniform integers from the operating-system CSPRNG (`os.urandom`).

    Bytes are read from the kernel 8 KiB at a time and handed out as 64-bit words, which
    makes one draw cost a list pop instead of a system call. The buffer is discarded in
    a forked child (`os.register_at_fork`), so that parent and child never share values.
    """

    def __init__(self) -> None:
        self._words: list[int] = []
        self._lock = threading.Lock()
        _LIVE_SYSTEM_RNGS.add(self)

    def _refill(self) -> None:
        with self._lock:
            if not self._words:
                self._words = list(struct.unpack(f"<{_WORDS_PER_REFILL}Q",
                                                 os.urandom(8 * _WORDS_PER_REFILL)))

    def _discard(self) -> None:
        self._words = []

    def _word(self) -> int:
        while True:
            try:
                return self._words.pop()
            except IndexError:
                self._refill()

    def getrandbits(self, k: int) -> int:
        if k <= 64:
            if k <= 0:
                if k < 0:
                    raise ValueError("number of bits must be non-negative")
                return 0
            return self._word() >> (64 - k)
        nbytes = (k + 7) // 8
        return int.from_bytes(os.urandom(nbytes), "little") >> (8 * nbytes - k)

    def randbelow(self, n: int) -> int:
        if n <= 1:
            if n == 1:
                return 0
            raise ValueError("randbelow(n) needs n >= 1")
        k = n.bit_length()
        if k <= 64:
            shift = 64 - k
            word = self._word
            while True:
                r = word() >> shift
                if r < n:
                    return r
        while True:
            r = self.getrandbits(k)
            if r < n:
                return r


_LIVE_SYSTEM_RNGS: weakref.WeakSet[SystemRng] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for rng in list(_LIVE_SYSTEM_RNGS):
        rng._discard()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

_DEFAULT_RNG: SystemRng | None = None


def default_rng() -> SystemRng:
    """The process-wide OS CSPRNG instance."""
    global _DEFAULT_RNG
    if _DEFAULT_RNG is None:
        _DEFAULT_RNG = SystemRng()
    return _DEFAULT_RNG


def _rng(rng: Rng | None) -> Rng:
    return default_rng() if rng is None else rng


# ---------------------------------------------------------------------------------------
# Rational parameters
# ---------------------------------------------------------------------------------------

RationalLike = int | float | str | Fraction


def to_fraction(x: RationalLike) -> Fraction:
    """The exact rational value of `x`.

    A float is taken at its exact binary value (Fraction(0.1) is 3602879701896397/2**55),
    a string at its decimal value (Fraction("0.1") is 1/10). Pass a string or a Fraction
    to get small numerators and denominators, which makes the samplers faster.
    """
    if isinstance(x, bool):
        raise TypeError("a boolean is not a rational parameter")
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    if isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            raise ValueError("parameter must be finite")
        return Fraction(x)
    if isinstance(x, str):
        return Fraction(x)
    raise TypeError(f"cannot use {type(x).__name__} as a rational parameter")


# ---------------------------------------------------------------------------------------
# CKS20 samplers
# ---------------------------------------------------------------------------------------


def sample_bernoulli(num: int, den: int, rng: Rng | None = None) -> bool:
    """Bernoulli(num/den) for integers 0 <= num <= den, den >= 1: one uniform draw."""
    if not 0 <= num <= den or den < 1:
        raise ValueError("need 0 <= num <= den and den >= 1")
    return _rng(rng).randbelow(den) < num


def _bernoulli_exp_minus_one(randbelow: Callable[[int], int]) -> bool:
    """Bernoulli(exp(-1)): CKS20 Algorithm 1 with gamma = 1 (Bernoulli(1/k) for k >= 2)."""
    k = 2  # the first trial, Bernoulli(gamma / 1) = Bernoulli(1), always succeeds
    while randbelow(k) == 0:
        k += 1
    return bool(k & 1)


def _bernoulli_exp(num: int, den: int, randbelow: Callable[[int], int]) -> bool:
    """Bernoulli(exp(-num/den)), num >= 0, den >= 1; see `sample_bernoulli_exp`."""
    while num > den:
        if not _bernoulli_exp_minus_one(randbelow):
            return False
        num -= den
    if num == 0:
        return True
    # CKS20 Algorithm 1 for gamma = num/den in (0, 1]: K <- 1; while Bernoulli(gamma/K):
    # K <- K + 1; return [K odd]. Bernoulli(gamma/K) is one uniform draw below den*K.
    k = 1
    dk = den
    while randbelow(dk) < num:
        k += 1
        dk += den
    return bool(k & 1)


def sample_bernoulli_exp(gamma: RationalLike, rng: Rng | None = None) -> bool:
    """Bernoulli(exp(-gamma)) for a rational gamma >= 0, exactly (CKS20 Algorithm 1).

    For gamma in [0, 1], Algorithm 1: the probability that the first failing trial of
    Bernoulli(gamma/1), Bernoulli(gamma/2), ... has an odd index is sum_k (-gamma)^k/k!.
    For gamma > 1, the reduction CKS20 give with it: exp(-gamma) = exp(-1)^floor(gamma) *
    exp(-(gamma - floor(gamma))), a conjunction of independent trials. Integer arithmetic
    only; expected number of uniform draws O(1 + gamma).
    """
    g = to_fraction(gamma)
    if g < 0:
        raise ValueError("gamma must be non-negative")
    return _bernoulli_exp(g.numerator, g.denominator, _rng(rng).randbelow)


def _geometric_exp(t: int, randbelow: Callable[[int], int]) -> int:
    """X with P(X = x) proportional to exp(-x/t), x >= 0 (the core of CKS20 Algorithm 2).

    X = U + t*V with U uniform in [0, t) accepted with probability exp(-U/t) and V the
    number of successes of Bernoulli(exp(-1)) before the first failure.
    """
    while True:
        u = randbelow(t)
        if u and not _bernoulli_exp(u, t, randbelow):
            continue
        v = 0
        while _bernoulli_exp_minus_one(randbelow):
            v += 1
        return u + t * v


def _discrete_laplace(t: int, s: int, randbelow: Callable[[int], int]) -> int:
    """CKS20 Algorithm 2: a sample of Lap_Z(t/s), P(y) proportional to exp(-|y| s/t)."""
    while True:
        x = _geometric_exp(t, randbelow)
        y = x // s
        if randbelow(2):
            if y == 0:
                continue  # reject "-0" so that 0 is not counted twice
            return -y
        return y


def sample_discrete_laplace(scale: RationalLike, rng: Rng | None = None) -> int:
    """One sample of the discrete Laplace distribution with rational `scale` > 0:
    P(Y = y) = (e^(1/scale) - 1) / (e^(1/scale) + 1) * exp(-|y| / scale), y in Z.

    CKS20 Algorithm 2 with scale = t/s. Integer arithmetic only.
    """
    sc = to_fraction(scale)
    if sc <= 0:
        raise ValueError("scale must be positive")
    return _discrete_laplace(sc.numerator, sc.denominator, _rng(rng).randbelow)


def _discrete_gaussian(a: int, b: int, t: int, randbelow: Callable[[int], int]) -> int:
    """CKS20 Algorithm 3 for sigma^2 = a/b and t = floor(sigma) + 1."""
    # Acceptance probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))
    #   = exp(-(b t |Y| - a)^2 / (2 a b t^2)).
    bt = b * t
    den = 2 * a * b * t * t
    while True:
        y = _discrete_laplace(t, 1, randbelow)
        d = bt * (y if y >= 0 else -y) - a
        if _bernoulli_exp(d * d, den, randbelow):
            return y


def _sigma2_params(sigma2: Fraction) -> tuple[int, int, int]:
    if sigma2 <= 0:
        raise ValueError("sigma must be positive")
    a, b = sigma2.numerator, sigma2.denominator
    # floor(sigma) = isqrt(floor(sigma^2)), exactly.
    t = isqrt(a // b) + 1
    return a, b, t


def sample_discrete_gaussian(sigma: RationalLike, rng: Rng | None = None, *,
                             sigma2: RationalLike | None = None) -> int:
    """One sample of the discrete Gaussian N_Z(0, sigma^2):
    P(Y = y) proportional to exp(-y^2 / (2 sigma^2)), y in Z.

    CKS20 Algorithm 3: t = floor(sigma) + 1, propose Y from Lap_Z(t) (Algorithm 2) and
    accept with probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)). The algorithm only
    needs sigma^2, which must be rational: pass `sigma` (then sigma^2 = sigma*sigma) or
    `sigma2` directly (for an irrational sigma such as sqrt(2)). Integer arithmetic only.
    """
    s2 = to_fraction(sigma2) if sigma2 is not None else to_fraction(sigma) ** 2
    a, b, t = _sigma2_params(s2)
    return _discrete_gaussian(a, b, t, _rng(rng).randbelow)


# ---------------------------------------------------------------------------------------
# Exact binary expansions and the exact binomial sampler
# ---------------------------------------------------------------------------------------


def exp_bounds(x: Fraction, prec: int) -> tuple[int, int]:
    """Integers (lo, hi) with lo <= exp(x) * 2**prec <= hi and hi - lo <= 2, for
    rational x (certified: a truncated Taylor series plus a bound on its remainder)."""
    if x < 0:
        lo, hi = exp_bounds(-x, prec)
        one = 1 << (2 * prec)
        return one // hi, -(-one // lo)  # 2^prec / e^|x|, rounded outwards
    # For x >= 0 every Taylor term is positive, so a partial sum S_N is a lower bound and
    # the remainder is at most x^(N+1)/(N+1)! * e^x <= x^(N+1)/(N+1)! * 3^ceil(x).
    # Exact rational arithmetic; this runs once per parameter, never per sample.
    bound_e = 3 ** (-(-x.numerator // x.denominator))  # >= e^x
    term = Fraction(1)
    total = Fraction(1)
    k = 0
    while True:
        k += 1
        term = term * x / k
        total += term
        remainder = term * x / (k + 1) * bound_e
        if k > 2 * x and remainder * (1 << prec) < 1:
            break
    scaled = total * (1 << prec)
    lo = scaled.numerator // scaled.denominator
    hi = -(-(scaled + remainder * (1 << prec)).numerator
           // (scaled + remainder * (1 << prec)).denominator)
    return lo, hi + 1


class BinaryExpansion:
    """The binary expansion 0.b1 b2 b3 ... of a real p in (0, 1), computed on demand from
    certified interval bounds (`bounds(prec)` returns integers lo <= p * 2**prec <= hi).

    `bit(j)` (j >= 1) is exact: the precision is doubled until the interval determines
    the bit, which terminates for irrational p (and for dyadic p the bounds are exact).
    """

    def __init__(self, bounds: Callable[[int], tuple[int, int]], initial_prec: int = 160):
        self._bounds = bounds
        self._prec = 0
        self._known = 0  # number of bits known
        self._value = 0  # the first `_known` bits, as an integer
        self._extend(initial_prec)

    def _extend(self, want: int) -> None:
        prec = max(want + 32, 2 * self._prec)
        while True:
            lo, hi = self._bounds(prec)
            # p*2^prec in [lo, hi]: the first j bits are floor(p * 2^j); find the longest
            # prefix on which lo and hi agree.
            j = prec
            while j > 0 and (lo >> (prec - j)) != (hi >> (prec - j)):
                j -= 1
            if j >= want:
                self._known = j
                self._value = lo >> (prec - j)
                self._prec = prec
                return
            prec *= 2

    def bit(self, j: int) -> int:
        if j > self._known:
            self._extend(2 * j)
        return (self._value >> (self._known - j)) & 1


def rappor_flip_probability_expansion(eps0: Fraction) -> BinaryExpansion:
    """The binary expansion of p = 1 / (1 + exp(eps0)), the flip probability of binary
    randomized response (draft Section 4.3)."""

    def bounds(prec: int) -> tuple[int, int]:
        e_lo, e_hi = exp_bounds(eps0, prec + 8)
        one = 1 << (prec + 8)
        # p * 2^prec = 2^prec * one / (one + e*one)
        lo = (one << prec) // (one + e_hi)
        hi = -(-(one << prec) // (one + e_lo))
        return lo, hi

    return BinaryExpansion(bounds)


def sample_binomial_exact(n: int, p: BinaryExpansion, rng: Rng | None = None) -> int:
    """An exact sample of Binomial(n, p).

    Think of n independent uniform reals U_1..U_n in [0, 1), revealed one binary digit
    at a time, and count those with U_i < p. At digit j, the still undecided U_i (those
    whose first j-1 digits equal p's) split in two by a fair coin: if p's j-th digit is
    1, those with digit 0 are decided "< p"; if it is 0, those with digit 1 are decided
    ">= p". The undecided count halves at each step, so the loop runs about log2(n)
    times, each step drawing Binomial(m, 1/2) as the popcount of m random bits.
    Exact for any p given by an exact binary expansion.
    """
    r = _rng(rng)
    if n < 0:
        raise ValueError("n must be non-negative")
    undecided = n
    below = 0
    j = 0
    getrandbits = r.getrandbits
    while undecided:
        j += 1
        zeros = undecided - getrandbits(undecided).bit_count()
        if p.bit(j):
            below += zeros
            undecided -= zeros
        else:
            undecided = zeros
    return below


def sample_subset(n: int, k: int, rng: Rng | None = None) -> list[int]:
    """A uniformly random k-subset of range(n) (Floyd's algorithm), sorted."""
    if not 0 <= k <= n:
        raise ValueError("need 0 <= k <= n")
    randbelow = _rng(rng).randbelow
    chosen: set[int] = set()
    for j in range(n - k, n):
        t = randbelow(j + 1)
        chosen.add(j if t in chosen else t)
    return sorted(chosen)


# ---------------------------------------------------------------------------------------
# The draft's DpMechanism interface and the concrete mechanisms
# ---------------------------------------------------------------------------------------


class DpMechanism:
    """A DP mechanism (draft Section 4, "DP Mechanisms").

    `DataType` is the type of both the noised and the un-noised data;
    `DebiasedDataType` the type after removing the bias added by the noise (the same as
    `DataType` for most mechanisms).
    """

    DataType: ClassVar[Any] = None
    DebiasedDataType: ClassVar[Any] = None

    def add_noise(self, data: Any) -> Any:
        """Add noise to a piece of input data."""
        raise NotImplementedError()

    def sample_noise(self, dimension: int) -> Any:
        """Sample noise; `dimension` is the length of the output if `DataType` is a list."""
        raise NotImplementedError()

    def debias(self, data: Any, meas_count: int) -> Any:
        """Remove the bias the noise added, given the number of measurements `meas_count`.
        The default is the identity (unbiased noise)."""
        return data


class AdditiveIntegerNoise(DpMechanism):
    """Common part of the discrete Laplace and Gaussian mechanisms: integer vectors,
    unbiased noise added coordinate-wise."""

    DataType = list[int]
    DebiasedDataType = list[int]

    def __init__(self, rng: Rng | None = None) -> None:
        self.rng: Rng = _rng(rng)

    def sample(self) -> int:
        raise NotImplementedError()

    def with_rng(self, rng: Rng) -> AdditiveIntegerNoise:
        """The same mechanism drawing from `rng` (e.g. an Aggregator's injectable rng)."""
        twin = copy.copy(self)
        twin.rng = rng
        return twin

    def sample_noise(self, dimension: int) -> list[int]:
        """`dimension` independent samples. The running time depends on the values drawn
        (timing side channel): call this off the request path, see `NoisePool`."""
        sample = self.sample
        return [sample() for _ in range(dimension)]

    def add_noise(self, data: Sequence[int]) -> list[int]:
        noise = self.sample_noise(len(data))
        return [x + z for (x, z) in zip(data, noise, strict=True)]


class DiscreteLaplace(AdditiveIntegerNoise):
    """Discrete Laplace noise Lap_Z(scale): P(y) proportional to exp(-|y| / scale).

    Adding it to a function of L1 sensitivity Delta_1 (integer valued) gives
    (Delta_1 / scale)-DP (pure DP: the ratio of the pmf at neighbouring outputs is at most
    exp(Delta_1 / scale); the geometric mechanism).
    The draft's Section 4.1 is a TODO pointing at CKS20 Algorithm 2, which this is.
    """

    def __init__(self, scale: RationalLike, rng: Rng | None = None) -> None:
        super().__init__(rng)
        self.scale = to_fraction(scale)
        if self.scale <= 0:
            raise ValueError("scale must be positive")
        self._t, self._s = self.scale.numerator, self.scale.denominator

    def sample(self) -> int:
        return _discrete_laplace(self._t, self._s, self.rng.randbelow)

    def variance(self) -> float:
        """Var = 2 e^(-1/scale) / (1 - e^(-1/scale))^2."""
        q = math.exp(-1.0 / float(self.scale))
        return 2.0 * q / (1.0 - q) ** 2


class DiscreteGaussian(AdditiveIntegerNoise):
    """Discrete Gaussian noise N_Z(0, sigma^2) (CKS20 Algorithm 3; draft Section 4.2,
    a TODO that points at exactly this algorithm).

    `sigma` is the scale parameter of the distribution (its variance is slightly below
    sigma^2, as CKS20 show). sigma^2 must be rational: give `sigma` as an int, a
    decimal string, a Fraction or a float (taken at its exact binary value), or give
    `sigma2` directly.
    """

    def __init__(self, sigma: RationalLike | None = None, rng: Rng | None = None, *,
                 sigma2: RationalLike | None = None) -> None:
        super().__init__(rng)
        if (sigma is None) == (sigma2 is None):
            raise ValueError("give exactly one of sigma and sigma2")
        if sigma2 is not None:
            self.sigma2 = to_fraction(sigma2)
        else:
            assert sigma is not None
            s = to_fraction(sigma)
            if s <= 0:
                raise ValueError("sigma must be positive")
            self.sigma2 = s * s
        self._a, self._b, self._t = _sigma2_params(self.sigma2)

    @property
    def sigma(self) -> float:
        return math.sqrt(self.sigma2)

    def sample(self) -> int:
        return _discrete_gaussian(self._a, self._b, self._t, self.rng.randbelow)


# The draft's name for the mechanism in its Section 6.2 listing.
DiscreteGaussianWithZeroMean = DiscreteGaussian


class SymmetricRappor(DpMechanism):
    """Symmetric RAPPOR (draft Section 4.3; [MJTB+22] Appendix C.1, Algorithms 3 and 4).

    Every coordinate of a bit vector goes through binary randomized response: it is
    flipped with probability p = 1 / (exp(eps0) + 1). Each Client is eps0-DP in the
    deletion model ([MJTB+22] Theorem C.1) and 2*eps0-DP in the replacement model.

    Sampling is exact and uses no floating point: eps0 is taken as an exact rational
    (a float at its exact binary value), the number of flips F ~ Binomial(d, p) is drawn
    by `sample_binomial_exact` from the certified binary expansion of p, then the F
    flipped positions are a uniform F-subset (Floyd's algorithm). This is the draft's
    "TODO: use binomial" fast path; it never flips a coin per coordinate, and it is
    distributed exactly as the per-coordinate definition (`add_noise_per_coordinate`,
    kept as the reference).

    Timing: the cost grows with F, the number of flipped bits (a few microseconds per
    flip). F is not secret from the aggregate, but an observer able to time the Client
    learns it for that Client; the Client-side computation is local and usually not
    observable with that precision.
    """

    DataType = list[int]
    # Debiasing produces an array of floats.
    DebiasedDataType = list[float]

    def __init__(self, eps0: RationalLike, rng: Rng | None = None) -> None:
        self.eps0_exact = to_fraction(eps0)
        if self.eps0_exact <= 0:
            raise ValueError("eps0 must be positive")
        self.eps0 = float(self.eps0_exact)
        self.rng: Rng = _rng(rng)
        self._p_bits = rappor_flip_probability_expansion(self.eps0_exact)

    @property
    def p(self) -> float:
        """The flip probability 1 / (exp(eps0) + 1), as a float (for reporting only)."""
        return 1.0 / (math.exp(self.eps0) + 1.0)

    def flip_positions(self, dimension: int) -> list[int]:
        """The sorted positions flipped in a vector of length `dimension`."""
        flips = sample_binomial_exact(dimension, self._p_bits, self.rng)
        return sample_subset(dimension, flips, self.rng)

    def add_noise(self, data: Sequence[int]) -> list[int]:
        """Binary randomized response at every coordinate ([MJTB+22] Algorithm 3)."""
        out = [int(x) for x in data]
        for bit in out:
            if bit not in (0, 1):
                raise ValueError("symmetric RAPPOR takes a bit vector")
        for i in self.flip_positions(len(out)):
            out[i] ^= 1
        return out

    def sample_noise(self, dimension: int) -> list[int]:
        """Randomized response applied to the all-zero vector of length `dimension`."""
        out = [0] * dimension
        for i in self.flip_positions(dimension):
            out[i] = 1
        return out

    def coin_flip(self) -> bool:
        """One exact Bernoulli(1 / (1 + exp(eps0))) trial: repeat { with probability 1/2
        return False; with probability exp(-eps0) return True }, which returns True with
        probability (e^-eps0 / 2) / (1/2 + e^-eps0 / 2) = 1 / (1 + e^eps0)."""
        randbelow = self.rng.randbelow
        num, den = self.eps0_exact.numerator, self.eps0_exact.denominator
        while True:
            if randbelow(2) == 0:
                return False
            if _bernoulli_exp(num, den, randbelow):
                return True

    def add_noise_per_coordinate(self, data: Sequence[int]) -> list[int]:
        """The draft's per-coordinate reference implementation (one exact coin per
        coordinate); same distribution as `add_noise`, much slower."""
        return [1 - int(x) if self.coin_flip() else int(x) for x in data]

    def debias(self, data: Sequence[int], meas_count: int) -> list[float]:
        """[MJTB+22] Algorithm 4: x (e^eps0 + 1)/(e^eps0 - 1) - n/(e^eps0 - 1), an
        unbiased estimate of the true count (Theorem C.2)."""
        exp_eps = math.exp(self.eps0)
        return [x * (exp_eps + 1) / (exp_eps - 1) - meas_count / (exp_eps - 1) for x in data]

    def debiased_std(self, meas_count: int) -> float:
        """Standard deviation of one debiased coordinate, sqrt(n e^eps0) / (e^eps0 - 1)
        ([MJTB+22] Theorem C.2; the draft's Table 1)."""
        exp_eps = math.exp(self.eps0)
        return math.sqrt(meas_count * exp_eps) / (exp_eps - 1)


# ---------------------------------------------------------------------------------------
# Off-path noise
# ---------------------------------------------------------------------------------------


class NoisePool:
    """Pre-sampled noise values, drawn off the request path.

    A sampler whose running time depends on its output leaks the output to anyone who
    can time it (Jin et al., S&P 2022). An Aggregator therefore fills the pool ahead of
    time -- `refill` when a task or collection job is created, or `start_background` --
    and the code that answers the aggregate-share request only calls `take`, whose
    running time depends on nothing but `dimension`.

    If the pool runs short, `take` samples the missing values synchronously (and counts
    them in `synchronous_draws`) rather than fail; a deployment should size the pool so
    that this never happens.
    """

    def __init__(self, mechanism: AdditiveIntegerNoise) -> None:
        self.mechanism = mechanism
        self._values: deque[int] = deque()
        self._lock = threading.Lock()
        self.synchronous_draws = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def __len__(self) -> int:
        return len(self._values)

    def refill(self, count: int) -> None:
        """Sample until the pool holds at least `count` values."""
        missing = count - len(self._values)
        if missing > 0:
            fresh = self.mechanism.sample_noise(missing)
            with self._lock:
                self._values.extend(fresh)

    def take(self, dimension: int) -> list[int]:
        with self._lock:
            n = min(dimension, len(self._values))
            out = [self._values.popleft() for _ in range(n)]
        if n < dimension:
            self.synchronous_draws += dimension - n
            out += self.mechanism.sample_noise(dimension - n)
        return out

    def start_background(self, target: int, chunk: int = 256) -> None:
        """Keep the pool topped up to `target` values from a daemon thread."""
        if self._thread is not None:
            return

        def run() -> None:
            while not self._stop.is_set():
                if len(self._values) < target:
                    self.refill(min(target, len(self._values) + chunk))
                else:
                    self._stop.wait(0.05)

        self._thread = threading.Thread(target=run, name="dp-noise-pool", daemon=True)
        self._thread.start()

    def stop_background(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._stop.clear()
