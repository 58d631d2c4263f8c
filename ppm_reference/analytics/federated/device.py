"""One device answering a recipe ([MJTB+22] = paper 004, Section 4 and Figure 3).

`Device.answer(recipe, task)` runs the on-device pipeline in the paper's order, and
stops at the first refusal with nothing read, nothing spent and nothing sent:

1. the recipe names its privacy parameters (`RecipeError` otherwise);
2. the query-class verifier (Section 4.2) accepts the query (`QueryRefused`);
3. the DAP task the recipe comes with fits it (`RecipeMismatch`): the VDAF's length is
   the recipe's number of bins, the task's minimum batch size is at least the recipe's
   minimum cohort (the Aggregators enforce it: this is how "the minimum cohort is
   communicated from the device to the aggregation protocol", Section 3.1.2, since the
   task configuration is bound into every report's HPKE associated data), and the task's
   DP policy is the recipe's randomization;
4. the budget accountant's Checks 1 to 3 pass and the budget is spent, atomically
   (Section 4.3; `BudgetExceeded`). Check 3's cohort-aggregate epsilon is computed here:
   amplification by aggregation of symmetric one-hot reports ([MJTB+22] Theorem C.3,
   `dp_policy.accounting.rappor_amplification`), the numerical shuffling bound for
   asymmetric ones ([FMT22], which the paper proposes in Section 3.1.2,
   `dp_policy.accounting.shuffle_epsilon`), or the Aggregators' noise of the task's
   policy (no local randomizer: independent of the cohort);
5. only now the store serves the query's fields; the device chooses one item (the
   always-send rule of Section 4.1: with no matching item, a random one) and encodes it.

The result is what the device hands to its DAP Client: the bucket index, which the
Client randomizes with the task's DP policy (symmetric one-hot encoding is
`MultiHotHistogramWithClientRandomization`), or, for asymmetric one-hot encoding (which
no DP policy of the draft provides), the randomized vector itself. Spending before
reading is deliberate: an error after the checks costs the analyst a report, never the
device extra privacy (the paper's design goal, Section 1).

The always-send rule: footnote 3 says a device with no matching n-gram "should send a
random 3-gram as sending nothing can itself be disclosive". We read it as one of the
device's *own* items chosen at random, which the recipe then encodes like any other: an
n-gram whose prefix is not a leaf lands in the OOV bucket. Every device thus sends
exactly one report whatever its data, and the analyst's histogram keeps the matching
items apart from the rest (the OOV count is the number of devices without a match). A
device with no item at all sends a uniformly random bucket. (Another reading -- a random
bucket of the whole domain for every non-matching device -- spreads those reports over
every bucket, a floor the analyst must estimate and subtract; we tried it and it costs
the discovery a factor sqrt(2) in noise.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ppm_reference.analytics.federated.budget import BudgetAccountant, Charge, local_guarantee
from ppm_reference.analytics.federated.query import Query, QueryClass, QueryRefused
from ppm_reference.analytics.federated.randomizers import AsymmetricOneHot
from ppm_reference.analytics.federated.recipe import (
    BucketedType,
    CombinationType,
    FieldType,
    PrefixTree,
    Recipe,
    RecipeError,
)
from ppm_reference.dp_policy.mechanisms import Rng, default_rng


class RecipeMismatch(Exception):
    """The DAP task a recipe came with does not fit the recipe."""


class DataStore:
    """The device's secure store of events (Section 4, Figure 3): streams of named fields.
    `read` serves only the fields of a query the verifier accepted and counts the reads,
    so that a test can see that a refused recipe read nothing.

    A field holds a number (e.g. "age") or a list of phrases, each a list of tokens (a
    text field such as "ngrams": the n-grams of a phrase are its windows)."""

    def __init__(self, streams: Mapping[str, Mapping[str, Any]]) -> None:
        self._streams = streams
        self.reads = 0

    def read(self, query: Query) -> dict[str, Any]:
        self.reads += 1
        stream = self._streams.get(query.stream, {})
        return {f: stream.get(f) for f in query.fields}


# ---------------------------------------------------------------------------------------
# Checks that do not depend on the device's data
# ---------------------------------------------------------------------------------------


def _spec(task: Any) -> dict[str, Any] | None:
    from ppm_reference.dap.dp import decode_spec

    return None if task.dp_policy is None else decode_spec(task.dp_policy)


def check_task(recipe: Recipe, task: Any) -> None:
    """RecipeMismatch unless the DAP task fits the recipe (step 3 of the module note)."""
    from ppm_reference.vdaf import registry

    privacy = recipe.privacy
    if privacy is None:
        raise RecipeError(f"recipe {recipe.recipe_id} names no privacy parameters")
    vdaf = task.vdaf()
    name = registry.name_of(vdaf)
    length = registry.parameters_of(vdaf).get("length")
    if length != recipe.bins:
        raise RecipeMismatch(f"the task's {name} has length {length}, the recipe encodes "
                             f"{recipe.bins} bins")
    if task.min_batch_size < privacy.min_cohort:
        raise RecipeMismatch(f"the task's minimum batch size {task.min_batch_size} is below "
                             f"the recipe's minimum cohort {privacy.min_cohort}")
    spec = _spec(task)
    policy = None if spec is None else spec.get("policy")
    if privacy.randomizer == "symmetric-ohe":
        if policy != "MultiHotHistogramWithClientRandomization":
            raise RecipeMismatch(f"symmetric one-hot reports need a "
                                 f"MultiHotHistogramWithClientRandomization task, not "
                                 f"{policy or 'a task without DP policy'}")
        assert spec is not None
        if Fraction(str(spec["eps0"])) != privacy.local_epsilon:
            raise RecipeMismatch(f"the task randomizes with eps0 {spec['eps0']}, the recipe "
                                 f"asks for {float(privacy.local_epsilon or 0):g}")
    elif privacy.randomizer == "asymmetric-ohe":
        if name != "Prio3MultihotCountVec" or spec is not None:
            raise RecipeMismatch("asymmetric one-hot reports need a Prio3MultihotCountVec "
                                 "task without DP policy (the device randomizes)")
    else:
        if policy not in ("HistogramWithAggregatorRandomization",
                          "HistogramWithAggregatorLaplace"):
            raise RecipeMismatch(f"a recipe without local randomizer needs a histogram task "
                                 f"whose Aggregators add noise, not "
                                 f"{policy or 'a task without DP policy'}")


@lru_cache(maxsize=256)
def rappor_epsilon(eps0: float, m: int, delta: float) -> float:
    from ppm_reference.dp_policy.accounting import rappor_amplification

    return float(rappor_amplification(eps0, m, delta).epsilon)


@lru_cache(maxsize=256)
def shuffle_epsilon_cached(eps0: float, m: int, delta: float) -> float:
    from ppm_reference.dp_policy.accounting import shuffle_epsilon

    return float(shuffle_epsilon(eps0, m, delta))


def cohort_epsilon(recipe: Recipe, task: Any | None = None) -> float | None:
    """Check 3: the cohort-aggregate epsilon (at the recipe's delta) of `minCohort`
    reports of the recipe's randomizer, or, without one, of the task's Aggregator noise.
    None when it cannot be computed (no task policy to read; delta 0 with amplification)."""
    privacy = recipe.privacy
    assert privacy is not None
    delta = privacy.aggregate_delta
    eps0 = privacy.local_epsilon
    if privacy.randomizer in ("symmetric-ohe", "asymmetric-ohe"):
        if delta <= 0 or eps0 is None:
            return None
        if privacy.randomizer == "symmetric-ohe":
            return rappor_epsilon(float(eps0), privacy.min_cohort, delta)
        return shuffle_epsilon_cached(float(eps0), privacy.min_cohort, delta)
    spec = None if task is None else _spec(task)
    if spec is None:
        return None
    if spec.get("policy") == "HistogramWithAggregatorLaplace":
        return float(spec["epsilon"])
    if float(spec.get("delta", 1.0)) > delta:
        return None
    return float(spec["epsilon"])


def verify(recipe: Recipe, task: Any, query_class: QueryClass | None, model: str,
           ) -> tuple[Query, Charge]:
    """Steps 1 to 3 and the charge of step 4, which depend on the recipe, the task and
    the device's fixed policy only (so a simulated fleet sharing one policy runs them once
    per round, then charges each device's own ledger)."""
    privacy = recipe.privacy
    if privacy is None:
        raise RecipeError(f"recipe {recipe.recipe_id} names no privacy parameters")
    if query_class is None:
        raise QueryRefused(f"analysis {recipe.analysis!r} has no approved query class on "
                           "this device")
    query = query_class.verify(recipe.analysis, recipe.query, recipe.cohorts)
    check_task(recipe, task)
    charge = Charge(recipe.analysis, recipe.recipe_id, recipe.query, tuple(recipe.fields),
                    privacy.aggregate_epsilon, privacy.aggregate_delta,
                    local_guarantee(privacy.randomizer, privacy.local_epsilon, model),
                    cohort_epsilon(recipe, task), privacy.min_cohort)
    return query, charge


# ---------------------------------------------------------------------------------------
# Choosing and encoding the item to report
# ---------------------------------------------------------------------------------------


def _options(t: FieldType, value: Any) -> tuple[list[int], list[int]]:
    """(matching bucket indices, indices of the device's other items) of a leaf type."""
    if isinstance(t, BucketedType):
        return [t.encode(value)], []
    if isinstance(t, PrefixTree):
        phrases = [tuple(p) for p in value] if isinstance(value, list | tuple) else []
        found = [t.encode(c) for c in t.candidates(phrases)]
        if found:
            return found, []
        # The device's own n-grams, one per leaf length, none of which matches: each
        # encodes to OOV.
        lengths = sorted({len(leaf) + 1 for leaf in t.leaves})
        own = [t.encode(p[i : i + n]) for p in phrases for n in lengths
               for i in range(len(p) - n + 1)]
        return [], own
    raise TypeError(f"not a leaf type: {t!r}")


def choose_index(recipe: Recipe, data: Mapping[str, Any], rng: Rng) -> tuple[int, bool]:
    """(bucket index, matched): one item of the device's data, chosen uniformly among the
    matching ones of each field; with no matching item, one of the device's other items
    at random (the always-send rule), and with no item at all a uniformly random bucket."""
    picks: dict[str, int] = {}
    matched = True
    for name, t in recipe.fields.items():
        found, own = _options(t, data.get(name))
        if not found:
            matched = False
            if not own:
                return rng.randbelow(recipe.bins), False
            found = own
        picks[name] = found[rng.randbelow(len(found))]

    def index(t: FieldType) -> int:
        if isinstance(t, CombinationType):
            return t.combine([index(p) for p in t.parts])
        return picks[t.name]

    return index(recipe.root), matched


@dataclass
class Answer:
    """What the device hands to its DAP Client, and how it was chosen."""

    measurement: Any        # a bucket index, or the randomized vector (asymmetric)
    index: int
    matched: bool


class Device:
    """A device: its store, its approved query classes (by analysis), the local model of
    its budget policy, and its budget accountant (SQLite)."""

    def __init__(self, store: DataStore, query_classes: Mapping[str, QueryClass],
                 accountant: BudgetAccountant, rng: Rng | None = None,
                 name: str | None = None) -> None:
        self.store = store
        self.query_classes = query_classes
        self.accountant = accountant
        self.rng = rng if rng is not None else default_rng()
        self.name = name or accountant.device

    def answer(self, recipe: Recipe, task: Any) -> Answer:
        """The pipeline of the module docstring; raises RecipeError, QueryRefused,
        RecipeMismatch or BudgetExceeded with nothing read or spent."""
        model = self.accountant.local_model(recipe.analysis, self.name) or "replacement"
        query, charge = verify(recipe, task, self.query_classes.get(recipe.analysis), model)
        self.accountant.charge(charge, self.name)
        return encode_answer(recipe, self.store.read(query), self.rng)


def encode_answer(recipe: Recipe, data: Mapping[str, Any], rng: Rng) -> Answer:
    index, matched = choose_index(recipe, data, rng)
    privacy = recipe.privacy
    assert privacy is not None
    if privacy.randomizer == "asymmetric-ohe":
        assert privacy.local_epsilon is not None
        vec = AsymmetricOneHot(privacy.local_epsilon, rng).randomize(index, recipe.bins)
        return Answer([bool(b) for b in vec], index, matched)
    return Answer(index, index, matched)


def phrases_store(stream: str, field_name: str, phrases: Sequence[Sequence[str]]
                  ) -> DataStore:
    """A store holding one text field (the n-gram simulations)."""
    return DataStore({stream: {field_name: [list(p) for p in phrases]}})
