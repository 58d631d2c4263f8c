"""The local randomizers of [MJTB+22] (paper 004): private one-hot encoding.

* `AsymmetricOneHot` (Appendix A): the device's own coordinate is sent as a fair coin,
  every other coordinate as Bernoulli(1 / (e^eps + 1)). eps-DP in the replacement model
  (Theorem A.1).
* `SymmetricOneHot` (Appendix C.1): binary randomized response on every coordinate, each
  flipped with probability 1 / (e^eps + 1); eps-DP in the deletion model (Theorem C.1),
  2 eps in the replacement model. The sampling is `dp_policy.mechanisms.SymmetricRappor`
  (exact, no floating point); this class only adds the one-hot input and the server side.

Both sample with the OS CSPRNG unless a test passes its own `rng`.

**Appendix A.2's debiasing.** Algorithm 2 prints

    f~(d) = 2 (1 + e^eps) / (e^eps - 1) * sum_i v~_d^(i) - n / (e^eps - 1),

but its own proof gives E[v~_d^(i)] = 1/(e^eps + 1) + (e^eps - 1) / (2 (e^eps + 1)) v_d^(i),
so E[sum_i v~_d^(i)] = n / (e^eps + 1) + (e^eps - 1) / (2 (e^eps + 1)) f(d) and the unbiased
estimate is

    f~(d) = 2 (1 + e^eps) / (e^eps - 1) * (sum_i v~_d^(i) - n / (e^eps + 1))
          = 2 (1 + e^eps) / (e^eps - 1) * sum_i v~_d^(i) - 2 n / (e^eps - 1):

the printed offset n / (e^eps - 1) is half the right one (it is the offset of the
symmetric Algorithm 4, whose scale has no factor 2), and with it E[f~(d)] = f(d) +
n / (e^eps - 1). `debias` implements the corrected formula, `debias_as_printed` the
printed one (for the test that tells them apart by simulation). The variance of
Theorem A.2, n 4 e^eps / (e^eps - 1)^2 + f(d), is right: the offset does not change it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from ppm_reference.dp_policy.mechanisms import (
    RationalLike,
    Rng,
    SymmetricRappor,
    default_rng,
    to_fraction,
)


class OneHotRandomizer:
    """A local randomizer of a one-hot vector and its server-side debiasing."""

    name: str
    eps: float

    def randomize(self, index: int, length: int) -> list[int]:
        raise NotImplementedError

    def debias(self, counts: Sequence[float], n: int) -> list[float]:
        raise NotImplementedError

    def variance(self, n: int, f: float = 0.0) -> float:
        """The variance of one debiased coordinate with true count f out of n reports."""
        raise NotImplementedError

    def local_epsilon(self, model: str) -> Fraction:
        raise NotImplementedError


def _check(index: int, length: int) -> None:
    if length < 1 or not 0 <= index < length:
        raise ValueError(f"index {index} is not in [0, {length})")


class AsymmetricOneHot(OneHotRandomizer):
    """[MJTB+22] Appendix A: Algorithm 1 (client) and the corrected Algorithm 2."""

    name = "asymmetric-ohe"

    def __init__(self, eps: RationalLike, rng: Rng | None = None) -> None:
        self.eps_exact = to_fraction(eps)
        self.eps = float(self.eps_exact)
        self.rng = rng if rng is not None else default_rng()
        # Bernoulli(1 / (e^eps + 1)) on each zero coordinate is randomized response on 0.
        self._zeros = SymmetricRappor(self.eps_exact, self.rng)

    def randomize(self, index: int, length: int) -> list[int]:
        """Algorithm 1: v~_d ~ Bernoulli(1/2) at the device's index d, Bernoulli(1 /
        (e^eps + 1)) elsewhere (exact sampling)."""
        _check(index, length)
        out = self._zeros.sample_noise(length)
        out[index] = self.rng.randbelow(2)
        return out

    def debias(self, counts: Sequence[float], n: int) -> list[float]:
        """The corrected Algorithm 2 (see the module docstring)."""
        e = math.exp(self.eps)
        scale = 2.0 * (1.0 + e) / (e - 1.0)
        offset = 2.0 * n / (e - 1.0)
        return [scale * c - offset for c in counts]

    def debias_as_printed(self, counts: Sequence[float], n: int) -> list[float]:
        """Algorithm 2 exactly as printed (biased by n / (e^eps - 1))."""
        e = math.exp(self.eps)
        return [2.0 * (1.0 + e) / (e - 1.0) * c - n / (e - 1.0) for c in counts]

    def variance(self, n: int, f: float = 0.0) -> float:
        """Theorem A.2: n 4 e^eps / (e^eps - 1)^2 + f(d)."""
        e = math.exp(self.eps)
        return n * 4.0 * e / (e - 1.0) ** 2 + f

    def local_epsilon(self, model: str) -> Fraction:
        return self.eps_exact


class SymmetricOneHot(OneHotRandomizer):
    """[MJTB+22] Appendix C.1: Algorithms 3 and 4 (`SymmetricRappor` underneath)."""

    name = "symmetric-ohe"

    def __init__(self, eps: RationalLike, rng: Rng | None = None) -> None:
        self.rappor = SymmetricRappor(eps, rng)
        self.eps_exact = self.rappor.eps0_exact
        self.eps = self.rappor.eps0

    def randomize(self, index: int, length: int) -> list[int]:
        _check(index, length)
        vec = [0] * length
        vec[index] = 1
        return self.rappor.add_noise(vec)

    def debias(self, counts: Sequence[float], n: int) -> list[float]:
        """Algorithm 4: (1 + e^eps)/(e^eps - 1) sum - n/(e^eps - 1)."""
        e = math.exp(self.eps)
        return [c * (1.0 + e) / (e - 1.0) - n / (e - 1.0) for c in counts]

    def variance(self, n: int, f: float = 0.0) -> float:
        """Theorem C.2: n e^eps / (e^eps - 1)^2, whatever f(d)."""
        e = math.exp(self.eps)
        return n * e / (e - 1.0) ** 2

    def local_epsilon(self, model: str) -> Fraction:
        return 2 * self.eps_exact if model == "replacement" else self.eps_exact


def make_randomizer(name: str, eps: RationalLike, rng: Rng | None = None
                    ) -> OneHotRandomizer:
    if name == "asymmetric-ohe":
        return AsymmetricOneHot(eps, rng)
    if name == "symmetric-ohe":
        return SymmetricOneHot(eps, rng)
    raise ValueError(f"unknown randomizer {name!r}")
