"""The per-round privacy budget of seed 003 (Section 5.4, Equations 5 to 9, Algorithm 2).

    (5)  sigma_rem = tau(eps_rem, Delta) = sqrt(2 beta / (1 - beta)^2),  beta = e^(-eps_rem/Delta)
    (6)  split a cell when n_i > k sigma_rem
    (7)  sigma~ = tau_target(c, U, T, S_max) = c (U / T) sqrt(ceil(S_max / U))      (printed)
    (8)  eps~ = phi(sigma) = -Delta ln((sigma^2 + 1 - sqrt(2 sigma^2 + 1)) / sigma^2)
    (9)  eps = eps~ if b eps~ <= eps_rem, else eps_rem (the last round)

Equation 5 is the standard deviation of discrete Laplace noise with parameter beta, and
Equation 8 its inverse (the root in (0, 1) of sigma^2 beta^2 - (2 sigma^2 + 2) beta +
sigma^2 = 0).

Equation 7, as printed, multiplies by sqrt(ceil(S_max / U)): that term is 1 whenever the
U users of a round need one shard or more (U >= S_max) -- exactly the case the sentence
after it says the term is for ("noise variance accumulation when the number of users
exceeds the limit on one secure aggregation shard") -- and grows when U < S_max, where
there is no accumulation. We read the fraction as inverted, with the shard count rounded
up: the round sums ceil(U / S_max) shards, each with its own noise, so each shard's
target is sigma~ = c (U / T) / sqrt(ceil(U / S_max)) and the summed noise has standard
deviation c U / T. `eq7="shards"` (default) is that reading; `eq7="printed"` the formula
as printed. With one shard per round (U <= S_max, our default: a round is one DAP task)
the two agree unless S_max > U, where only the printed one changes anything.

Budgets are kept as exact rationals so that the epsilons spent over the rounds add up to
the total exactly: each round's eps~ is rounded *down* to `digits` significant decimal
digits, and the last round takes the exact remainder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal
from fractions import Fraction

EQ7_READINGS = ("shards", "printed")


def tau(epsilon: float, sensitivity: float) -> float:
    """Equation 5: the standard deviation of discrete Laplace noise for epsilon and L1
    sensitivity Delta."""
    if epsilon <= 0:
        return math.inf
    beta = math.exp(-epsilon / sensitivity)
    return math.sqrt(2.0 * beta) / (1.0 - beta)


def phi(sigma: float, sensitivity: float) -> float:
    """Equation 8: the epsilon whose discrete Laplace noise (Equation 5) has standard
    deviation sigma."""
    if sigma <= 0:
        return math.inf
    s2 = sigma * sigma
    # (s2 + 1 - sqrt(2 s2 + 1)) / s2 loses precision for large s2: rewrite the root as
    # 1 / ((s2 + 1 + sqrt(2 s2 + 1)) / s2) (the product of the roots is 1).
    beta = s2 / (s2 + 1.0 + math.sqrt(2.0 * s2 + 1.0))
    return -sensitivity * math.log(beta)


def tau_target(c: float, users: int, leaves: int, shard_size: int,
               eq7: str = "shards") -> float:
    """Equation 7: the target noise standard deviation of one shard."""
    if eq7 == "printed":
        return c * users / leaves * math.sqrt(math.ceil(shard_size / users))
    if eq7 == "shards":
        return c * users / leaves / math.sqrt(math.ceil(users / shard_size))
    raise ValueError(f"eq7 must be one of {EQ7_READINGS}")


def round_down(x: float, digits: int) -> Fraction:
    """x rounded down to `digits` significant decimal digits, as an exact rational."""
    if x <= 0:
        return Fraction(0)
    d = Decimal(repr(x))
    q = Decimal(1).scaleb(d.adjusted() - digits + 1)
    return Fraction(d.quantize(q, rounding=ROUND_DOWN))


@dataclass(frozen=True)
class RoundBudget:
    """One sub-query's budget (Algorithm 2, lines 8 to 14)."""

    sigma_target: float       # sigma~_q of Equation 7, per shard
    epsilon_target: float     # eps~_q of Equation 8
    epsilon: Fraction         # eps_q of Equation 9, exact
    remaining: Fraction       # eps_rem after this round
    last: bool                # Equation 9 took the remainder


class BudgetSchedule:
    """Algorithm 2's budget over the rounds: `next_round(users, leaves)` gives the round's
    budget and deducts it. `sensitivity` is Delta of Equations 5 and 8; `scale` the
    factor the counts are multiplied by (gamma of Section 5.7; 1 for one location per
    user), so that sigma~, in users, is sigma~ * scale in the vector's units."""

    def __init__(self, total: Fraction | float | str, c: float = 1.0, b: float = 2.0,
                 shard_size: int | None = None, eq7: str = "shards", digits: int = 6,
                 max_rounds: int | None = None) -> None:
        self.total = Fraction(total) if not isinstance(total, float) else Fraction(
            repr(total))
        if self.total <= 0:
            raise ValueError("the total epsilon must be positive")
        if c <= 0 or b <= 0:
            raise ValueError("c and b must be positive")
        if eq7 not in EQ7_READINGS:
            raise ValueError(f"eq7 must be one of {EQ7_READINGS}")
        self.c, self.b, self.shard_size, self.eq7 = c, b, shard_size, eq7
        self.digits = digits
        self.max_rounds = max_rounds
        self.remaining = self.total
        self.rounds: list[RoundBudget] = []

    @property
    def spent(self) -> Fraction:
        return sum((r.epsilon for r in self.rounds), Fraction(0))

    def sigma_remaining(self, sensitivity: float) -> float:
        """Equation 5 at the remaining budget: a lower bound on any later round's noise."""
        return tau(float(self.remaining), sensitivity)

    def next_round(self, users: int, leaves: int, sensitivity: float = 1.0,
                   scale: float = 1.0) -> RoundBudget:
        if self.remaining <= 0:
            raise ValueError("the budget is spent")
        shard = self.shard_size or users
        sigma = tau_target(self.c, users, leaves, shard, self.eq7)
        eps_t = phi(sigma * scale, sensitivity)
        last = (self.b * eps_t > self.remaining
                or (self.max_rounds is not None and len(self.rounds) + 1 >= self.max_rounds))
        eps = self.remaining if last else min(self.remaining,
                                              round_down(eps_t, self.digits))
        if eps <= 0:      # eps~ below the rounding grain: spend it all now
            eps, last = self.remaining, True
        self.remaining -= eps
        r = RoundBudget(sigma, eps_t, eps, self.remaining, last or self.remaining == 0)
        self.rounds.append(r)
        return r
