"""On-device participation for samplable anonymous aggregation (paper 000, Talwar et
al.) and random check-ins (paper 002, Balle et al.).

Every decision here is the Client's, made with its own randomness (the OS CSPRNG by
default), so that the Leader never learns who was sampled out: a Client that does not
take part sends nothing at all (paper 000 Section 3, the SA_2 primitive; Section 4.1,
"the client device can then use its own randomness to determine whether or not to
participate").

* Poisson sampling (paper 000 Section 3, `SA_2`): each Client takes part with
  probability q, independently (`poisson_participates`).
* Random check-ins (paper 002 Definition 3.1): a Client with availability window R
  (a set of time slots) checks in with probability p at a slot drawn uniformly from R,
  and otherwise abstains (`random_checkin`). The fixed-window schedule (002 Section
  3.1, R_j = [m] for every Client) and the sliding-window one (002 Section 4.2,
  R_j = {j, ..., j + m - 1}) are `fixed_window` and `sliding_window`. A slot is one
  `time_precision` unit of the task: the report carries that slot's time, so that the
  batch of a slot is the batch bucket of that time.
* Dummy reports (paper 000 Section 4.6): a Client that did not select itself sends,
  with probability `dummy_rate` (the paper suggests about 1/(eps k)), a report of the
  VDAF's zero measurement. It is an ordinary report: valid for the VDAF (it passes
  verification), the same size, carrying the same extensions and, when the task's DP
  policy randomizes on the Client, randomized the same way, so no one -- Leader, Helper
  or Collector -- can tell it from a real one, and it is counted in the report count.
  Its value adds nothing to the aggregate (Count, Sum, SumVec, MultihotCountVec: the
  zero measurement), and for a client-randomized policy the debiasing, which counts it
  among the n reports, stays unbiased (the randomized zero contributes the flip
  probability per coordinate, which the debiasing subtracts for every report). The
  number of reports is then a noisy count of the participants (the paper's B').
  CHOICE: Prio3Histogram has no zero measurement (exactly one bucket must be set), so a
  dummy for it is refused rather than biasing a bucket.
* The minimum batch size bound (paper 000 Section 4.8; paper 004 Section 3.1): a
  report extension `dap.common.MIN_BATCH_SIZE_EXTENSION` (see there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Any

from ppm_reference.dap.common import MIN_BATCH_SIZE_EXTENSION, encode_min_batch_size
from ppm_reference.dp_policy.mechanisms import Rng, default_rng, to_fraction


def _bernoulli(p: float | Fraction, rng: Rng) -> bool:
    """Bernoulli(p) for a probability p, exactly at its rational value: one uniform draw
    below the denominator."""
    f = to_fraction(p)
    if not 0 <= f <= 1:
        raise ValueError("a probability must be in [0, 1]")
    return rng.randbelow(f.denominator) < f.numerator


def poisson_participates(q: float | Fraction, rng: Rng | None = None) -> bool:
    """Whether this Client takes part, with probability q (paper 000, SA_2 sampling)."""
    return _bernoulli(q, rng or default_rng())


def random_checkin(window: Sequence[int], p: float | Fraction = 1,
                   rng: Rng | None = None) -> int | None:
    """An (R, p)-check-in (paper 002 Definition 3.1): with probability p a slot drawn
    uniformly from `window` (R), otherwise None (the Client abstains)."""
    if not window:
        raise ValueError("the check-in window is empty")
    r = rng or default_rng()
    if not _bernoulli(p, r):
        return None
    return window[r.randbelow(len(window))]


def fixed_window(m: int, start: int = 0) -> range:
    """The fixed window of paper 002 Section 3.1: the m slots start .. start + m - 1,
    the same for every Client."""
    if m < 1:
        raise ValueError("a window has at least one slot")
    return range(start, start + m)


def sliding_window(j: int, m: int, start: int = 0) -> range:
    """Client j's sliding window of paper 002 Section 4.2: R_j = {j, ..., j + m - 1}
    (offset by `start`)."""
    if m < 1 or j < 0:
        raise ValueError("need m >= 1 and j >= 0")
    return range(start + j, start + j + m)


def min_batch_size_extension(bound: int) -> tuple[int, bytes]:
    """The (type, data) of the report extension binding the smallest batch this Client
    accepts (`dap.common.MIN_BATCH_SIZE_EXTENSION`)."""
    return (MIN_BATCH_SIZE_EXTENSION, encode_min_batch_size(bound))


# Zero measurements, by VDAF name: what a dummy report carries.
_NO_ZERO = {"Prio3Histogram": "a Prio3Histogram measurement sets exactly one bucket, so "
                              "it has no zero-effect dummy; use Prio3MultihotCountVec"}


def zero_measurement(vdaf_name: str, params: dict[str, Any]) -> Any:
    """The measurement of a dummy report: valid for the VDAF and adding nothing to the
    aggregate. ValueError for a VDAF that has none (see the module notes)."""
    if vdaf_name in _NO_ZERO:
        raise ValueError(_NO_ZERO[vdaf_name])
    if vdaf_name in ("Prio3Count", "Prio3Sum"):
        return 0
    if vdaf_name == "Prio3SumVec":
        return [0] * int(params["length"])
    if vdaf_name == "Prio3MultihotCountVec":
        return [0] * int(params["length"])
    raise ValueError(f"no zero measurement known for {vdaf_name}")


def dummy_measurement(vdaf_name: str, params: dict[str, Any], policy: Any = None) -> Any:
    """A dummy report's measurement, ready to shard: the zero measurement, randomized as
    the task's Client randomization would randomize a real one (symmetric RAPPOR of the
    zero vector for `MultiHotHistogramWithClientRandomization`), so that it is
    distributed like a report of a Client with no item; upload it without applying the
    policy again (`Client.prepare(..., randomized=True)`)."""
    zero = zero_measurement(vdaf_name, params)
    rappor = getattr(policy, "rappor", None)
    if rappor is not None:
        return [bool(b) for b in rappor.add_noise([0] * len(zero))]
    return zero


class Decision(Enum):
    """What one Client does in one collection."""

    CONTRIBUTE = "contribute"    # sampled (or checked in): sends its real report
    DUMMY = "dummy"              # not sampled: sends a zero report (dummy_rate)
    NOTHING = "nothing"          # not sampled: sends nothing


@dataclass(frozen=True)
class ParticipationPlan:
    """The recipe's participation parameters (paper 000 Section 4.1: "the recipe contains
    the sampling rate, and the batch size, which allow the client device to verify that
    the protocol satisfies DP")."""

    q: float = 1.0                        # Poisson sampling rate
    dummy_rate: float = 0.0               # P(dummy | not sampled), paper 000 Section 4.6
    min_batch_size: int | None = None     # bound into every report (extension)

    def __post_init__(self) -> None:
        for name in ("q", "dummy_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1]")
        if self.min_batch_size is not None and self.min_batch_size < 1:
            raise ValueError("min_batch_size must be at least 1")

    def decide(self, rng: Rng | None = None) -> Decision:
        r = rng or default_rng()
        if _bernoulli(self.q, r):
            return Decision.CONTRIBUTE
        if self.dummy_rate and _bernoulli(self.dummy_rate, r):
            return Decision.DUMMY
        return Decision.NOTHING

    def extensions(self) -> tuple[tuple[int, bytes], ...]:
        """The report extensions every report (real or dummy) of this plan carries."""
        if self.min_batch_size is None:
            return ()
        return (min_batch_size_extension(self.min_batch_size),)


__all__ = [
    "Decision", "ParticipationPlan", "dummy_measurement", "fixed_window",
    "min_batch_size_extension", "poisson_participates", "random_checkin",
    "sliding_window", "zero_measurement",
]
