"""One device answering a recipe (paper 004, Section 4): query class, task check, budget,
then the data. A refused recipe reads nothing, spends nothing and yields no report."""

from __future__ import annotations

import json
import random
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.analytics.federated.budget import (
    BudgetAccountant,
    BudgetExceeded,
    DevicePolicy,
    FieldAllowance,
)
from ppm_reference.analytics.federated.device import (
    DataStore,
    Device,
    RecipeMismatch,
    choose_index,
    cohort_epsilon,
    rappor_epsilon,
)
from ppm_reference.analytics.federated.query import QueryClass, QueryRefused
from ppm_reference.analytics.federated.recipe import CombinationType, RecipeError, parse_recipe
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.provision import new_task
from ppm_reference.dp_policy.accounting import rappor_amplification

FIGURE4 = Path(__file__).resolve().parent.parent / "ppm_reference" / "analytics" / "federated" / "examples" \
    / "figure4.json"
ANALYSIS = "com.apple.insights.keyboard-ngrams"
PRIVACY = {"randomizer": "symmetric-ohe", "localEpsilon": 1, "aggregateEpsilon": 0.3,
           "aggregateDelta": 1e-6, "minCohort": 2000}


class SeededRng:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def randbelow(self, n: int) -> int:
        return self.r.randrange(n)

    def getrandbits(self, k: int) -> int:
        return self.r.getrandbits(k)


def recipe_obj(**privacy: Any) -> dict[str, Any]:
    obj = json.loads(FIGURE4.read_text())
    obj["privacy"] = {**PRIVACY, **privacy}
    return dict(obj)


def task_for(bins: int = 272, eps0: float = 1.0, min_batch: int = 2000,
             policy: str = "rappor") -> Any:
    from ppm_reference.dap import dp

    profile = get_profile("dap-19")
    if policy == "rappor":
        spec = dp.make_spec(dp.MULTIHOT_CLIENT_RANDOMIZATION, eps0=eps0)
        w = dp.required_max_weight(spec, "Prio3MultihotCountVec", bins)
        vdaf = profile.build_vdaf("Prio3MultihotCountVec",
                                  {"length": bins, "max_weight": w, "chunk_length": 16})
    else:
        spec = dp.make_spec("HistogramWithAggregatorRandomization", epsilon=0.3, delta=1e-6)
        vdaf = profile.build_vdaf("Prio3Histogram", {"length": bins, "chunk_length": 16})
    return new_task(vdaf, "http://127.0.0.1:1/", "http://127.0.0.1:2/",
                    min_batch_size=min_batch, dp_policy=spec, profile=profile).task


def policy(local_age: str | None = "2") -> DevicePolicy:
    """Table 1's age and n-gram fields, under the Figure 4 analysis."""
    return DevicePolicy(ANALYSIS, Fraction("0.5"), 1, {
        "ngrams": FieldAllowance(Fraction(5), Fraction(1), 1),
        "age": FieldAllowance(None if local_age is None else Fraction(local_age),
                              Fraction("0.3"), 1)})


def make_device(tmp_path: Path, qclass: QueryClass | None = None,
                data: dict[str, Any] | None = None) -> Device:
    acct = BudgetAccountant(tmp_path / "device.sqlite")
    acct.install(policy())
    store = DataStore({"KeyboardNGrams": data if data is not None else
                       {"age": 35, "ngrams": [["i", "went", "home"]]}})
    qc = qclass or QueryClass.allowlist(ANALYSIS, {"KeyboardNGrams": ["age", "ngrams"]},
                                        cohorts=["locale"])
    return Device(store, {ANALYSIS: qc}, acct, SeededRng(1))


def used(device: Device) -> tuple[Fraction, int]:
    u = device.accountant.usage(ANALYSIS)
    assert u is not None
    return u.epsilon_used, u.reports_used


def test_answer_encodes_the_matching_ngram_and_spends(tmp_path: Path) -> None:
    dev = make_device(tmp_path)
    recipe = parse_recipe(recipe_obj())
    answer = dev.answer(recipe, task_for())
    root = recipe.root
    assert isinstance(root, CombinationType)
    age, ngrams = root.parts
    assert answer.matched and answer.measurement == answer.index == root.combine(
        [2, ngrams.encode(("i", "went", "home"))])     # type: ignore[attr-defined]
    assert recipe.label(answer.index) == "[30, 40) x i went home"
    assert dev.store.reads == 1
    assert used(dev) == (Fraction("0.3"), 1)
    ledger = dev.accountant.ledger()
    assert len(ledger) == 1 and ledger[0]["fields"] == ["age", "ngrams"]
    assert ledger[0]["local_epsilon"] == 2          # 2 eps0, replacement model
    assert ledger[0]["achieved_epsilon"] == pytest.approx(
        rappor_amplification(1.0, 2000, 1e-6).epsilon)


def test_exhausted_budget_refuses_before_reading(tmp_path: Path) -> None:
    dev = make_device(tmp_path)
    recipe = parse_recipe(recipe_obj())
    dev.answer(recipe, task_for())
    with pytest.raises(BudgetExceeded) as e:
        dev.answer(recipe, task_for())
    assert e.value.check == 1
    assert dev.store.reads == 1 and used(dev) == (Fraction("0.3"), 1)


REFUSALS: dict[str, tuple[Any, Any, type[Exception], str]] = {
    # name: (query class or None for the default, recipe change, error, message)
    "field outside the allowlist": (
        QueryClass.allowlist(ANALYSIS, {"KeyboardNGrams": ["ngrams"]}, ["locale"]),
        None, QueryRefused, "field 'age' of KeyboardNGrams is not approved"),
    "query not in the explicit list": (
        QueryClass.explicit(ANALYSIS, ["SELECT ngrams FROM KeyboardNGrams"], ["locale"]),
        None, QueryRefused, "is not in the approved list"),
    "stream not approved": (
        QueryClass.allowlist(ANALYSIS, {"Messages": ["age", "ngrams"]}, ["locale"]),
        None, QueryRefused, "stream 'KeyboardNGrams' is not approved"),
    "cohort field not approved": (
        QueryClass.allowlist(ANALYSIS, {"KeyboardNGrams": ["age", "ngrams"]}),
        None, QueryRefused, "cohort field 'locale'"),
    "another analysis": (
        None, lambda o: o.update(AnalysisIdentifier="com.example.other"), QueryRefused,
        "'com.example.other' has no approved query class"),
    "no privacy": (None, lambda o: o.pop("privacy"), RecipeError, "names no privacy"),
    "local epsilon above the age field's": (
        None, lambda o: o["privacy"].update(localEpsilon=1.5), RecipeMismatch,
        "the task randomizes with eps0 1.0"),
    "cohort too small for the epsilon (check 3)": (
        None, lambda o: o["privacy"].update(aggregateEpsilon=0.1), BudgetExceeded,
        "check 3 failed: the cohort-aggregate epsilon of 2000 reports is 0.1356"),
    "epsilon above the age field's (check 2)": (
        None, lambda o: o["privacy"].update(aggregateEpsilon=0.4), BudgetExceeded,
        "check 2 failed: field 'age': epsilon 0.4"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_refused_recipes_read_nothing_and_spend_nothing(tmp_path: Path, name: str) -> None:
    qclass, change, error, message = REFUSALS[name]
    dev = make_device(tmp_path, qclass)
    obj = recipe_obj()
    if change is not None:
        change(obj)
    with pytest.raises(error, match=message):
        dev.answer(parse_recipe(obj), task_for())
    assert dev.store.reads == 0
    assert used(dev) == (0, 0) and dev.accountant.ledger() == []


@pytest.mark.parametrize("task,message", [
    (lambda: task_for(bins=100), "has length 100, the recipe encodes 272"),
    (lambda: task_for(min_batch=1999), "minimum batch size 1999 is below"),
    (lambda: task_for(eps0=2.0), "randomizes with eps0 2.0"),
    (lambda: task_for(policy="histogram"), "need a MultiHotHistogramWithClientRandomization"),
])
def test_task_that_does_not_fit_the_recipe(tmp_path: Path, task: Any, message: str) -> None:
    dev = make_device(tmp_path)
    with pytest.raises(RecipeMismatch, match=message):
        dev.answer(parse_recipe(recipe_obj()), task())
    assert dev.store.reads == 0 and used(dev) == (0, 0)


def test_aggregator_noise_recipe_against_a_local_dp_requirement(tmp_path: Path) -> None:
    """Without a local randomizer, Check 2 refuses a field that requires local DP."""
    dev = make_device(tmp_path)
    obj = recipe_obj(randomizer="none", localEpsilon=None)
    recipe = parse_recipe(obj)
    assert cohort_epsilon(recipe, task_for(policy="histogram")) == 0.3
    with pytest.raises(BudgetExceeded, match="has no local randomizer"):
        dev.answer(recipe, task_for(policy="histogram"))
    assert dev.store.reads == 0


def test_always_send_one_of_its_own_items(tmp_path: Path) -> None:
    """No n-gram of the device extends a leaf: it still answers, with one of its own
    n-grams, which the recipe encodes as OOV (with its age bucket)."""
    dev = make_device(tmp_path, data={"age": 35, "ngrams": [["you", "are", "here"]]})
    recipe = parse_recipe(recipe_obj())
    answer = dev.answer(recipe, task_for())
    assert not answer.matched
    assert recipe.label(answer.index) == "[30, 40) x OOV"
    assert used(dev) == (Fraction("0.3"), 1)     # the report costs the same budget


def test_always_send_without_any_item_is_a_uniformly_random_bucket() -> None:
    """No n-gram at all: a uniformly random bucket. 27,200 draws over 272 buckets: each
    count is Binomial(27200, 1/272), mean 100, std 9.98; the bound 100 +- 60 is 6 std
    (false failure < 272 * 2e-9)."""
    recipe = parse_recipe(recipe_obj())
    rng = SeededRng(5)
    data = {"age": 35, "ngrams": []}
    draws = [choose_index(recipe, data, rng) for _ in range(27_200)]
    assert not any(matched for _, matched in draws)
    counts = Counter(i for i, _ in draws)
    assert set(counts) <= set(range(272))
    assert all(40 <= counts[b] <= 160 for b in range(272)), counts.most_common(3)


def test_the_choice_is_uniform_among_matching_items() -> None:
    recipe = parse_recipe(recipe_obj())
    data = {"age": 25, "ngrams": [["i", "went", "home"], ["i", "got", "world"],
                                  ["hello", "world"]]}
    rng = SeededRng(6)
    counts = Counter(recipe.label(choose_index(recipe, data, rng)[0]) for _ in range(3000))
    assert set(counts) == {"[20, 30) x i went home", "[20, 30) x i got world",
                           "[20, 30) x hello world end-token"}
    assert all(abs(c - 1000) <= 5 * (3000 * (1 / 3) * (2 / 3)) ** 0.5
               for c in counts.values())


def test_asymmetric_recipe_sends_the_randomized_vector(tmp_path: Path) -> None:
    """Asymmetric one-hot encoding (Appendix A, eps0 = 2: 2-DP in the replacement model,
    within the age field's 2); Check 3 by the numerical shuffling bound valid for any
    eps0-DP randomizer (FMT20, the default of `dp_policy.accounting`): 0.297 for 3000
    reports at delta 1e-6, within the requested 0.3 (2000 reports give 0.371, refused; the
    FMT22 bound, which its erratum restricts, would give 0.272)."""
    from ppm_reference.dap import dp

    recipe = parse_recipe(recipe_obj(randomizer="asymmetric-ohe", localEpsilon=2,
                                     minCohort=3000))
    profile = get_profile("dap-19")
    weight = dp.multihot_max_weight(2.0, 272, 1e-9) + 1
    vdaf = profile.build_vdaf("Prio3MultihotCountVec",
                              {"length": 272, "max_weight": weight, "chunk_length": 16})
    task = new_task(vdaf, "http://127.0.0.1:1/", "http://127.0.0.1:2/",
                    min_batch_size=3000, profile=profile).task
    dev = make_device(tmp_path)
    answer = dev.answer(recipe, task)
    assert isinstance(answer.measurement, list) and len(answer.measurement) == 272
    assert all(isinstance(b, bool) for b in answer.measurement)
    assert cohort_epsilon(recipe, task) == pytest.approx(0.297, abs=1e-3)
    assert used(dev) == (Fraction("0.3"), 1)
    assert dev.accountant.ledger()[0]["local_epsilon"] == 2
    # The same recipe over a RAPPOR task is refused: the device must randomize itself.
    (tmp_path / "other").mkdir()
    with pytest.raises(RecipeMismatch, match="without DP policy"):
        make_device(tmp_path / "other").answer(recipe, task_for(min_batch=3000))


def test_check3_uses_theorem_c3() -> None:
    """The device's cohort epsilon is dp_policy's Theorem C.3 computation; at the draft's
    Table 1 point (eps0 5, n 100,000, delta 1e-9) it is the printed 0.317 (those
    figures are checked in tests/test_dp_accounting.py)."""
    obj = recipe_obj()
    obj["privacy"] = {**PRIVACY, "localEpsilon": 5, "minCohort": 100_000,
                      "aggregateDelta": 1e-9}
    assert cohort_epsilon(parse_recipe(obj)) == pytest.approx(0.317, abs=1e-3)
    assert rappor_epsilon(5.0, 100_000, 1e-9) == pytest.approx(
        rappor_amplification(5.0, 100_000, 1e-9).epsilon)
