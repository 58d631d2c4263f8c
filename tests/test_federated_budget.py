"""The on-device budget accountant of paper 004, Section 4.3, with the allocations of its
Table 1 (analysis: epsilon 0.5, one report; n-gram: local 5, aggregate 1, one report;
bucketed age: local 2, aggregate 0.3, one report; model perplexity: local 8, aggregate 1,
one report). Each scenario says which check refuses and that nothing was spent."""

from __future__ import annotations

import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest

from ppm_reference.analytics.federated.budget import (
    BudgetAccountant,
    BudgetExceeded,
    Charge,
    DevicePolicy,
    FieldAllowance,
    local_guarantee,
    table1_policy,
)

ANALYSIS = "com.apple.insights.keyboard"
F = Fraction


def charge(fields: tuple[str, ...], epsilon: str, local: str | None,
           achieved: float | None | str = "same", m: int = 1000) -> Charge:
    """A charge whose Check 3 epsilon is the requested one unless `achieved` says."""
    eps = F(epsilon)
    return Charge(ANALYSIS, "r1", "SELECT ... FROM KeyboardNGrams", fields, eps, 1e-6,
                  None if local is None else F(local),
                  float(eps) if achieved == "same" else achieved,  # type: ignore[arg-type]
                  m)


@pytest.fixture
def acct(tmp_path: Path) -> BudgetAccountant:
    a = BudgetAccountant(tmp_path / "device.sqlite")
    a.install(table1_policy(ANALYSIS))
    return a


def spent(a: BudgetAccountant) -> tuple[Fraction, int, dict[str, tuple[Fraction, int]]]:
    u = a.usage(ANALYSIS)
    assert u is not None
    return (u.epsilon_used, u.reports_used,
            {n: (f["epsilon_used"], f["reports_used"]) for n, f in u.fields.items()})


NOTHING = (F(0), 0, {"age": (F(0), 0), "ngrams": (F(0), 0), "perplexity": (F(0), 0)})


def test_table1_as_installed(acct: BudgetAccountant) -> None:
    u = acct.usage(ANALYSIS)
    assert u is not None
    assert (u.epsilon_allowed, u.reports_allowed) == (F("0.5"), 1)
    assert {n: (f["local_allowed"], f["epsilon_allowed"], f["reports_allowed"])
            for n, f in u.fields.items()} == {
        "ngrams": (F(5), F(1), 1), "age": (F(2), F("0.3"), 1),
        "perplexity": (F(8), F(1), 1)}
    assert spent(acct) == NOTHING


def test_ngram_query_within_table1_then_the_analysis_is_exhausted(
        acct: BudgetAccountant) -> None:
    acct.charge(charge(("ngrams",), "0.5", "5"))
    assert spent(acct) == (F("0.5"), 1, {**NOTHING[2], "ngrams": (F("0.5"), 1)})
    # A second query: Check 1 (the analysis allows one report, and its epsilon is used).
    with pytest.raises(BudgetExceeded) as e:
        acct.charge(charge(("perplexity",), "0.1", "8"))
    assert e.value.check == 1
    assert spent(acct) == (F("0.5"), 1, {**NOTHING[2], "ngrams": (F("0.5"), 1)})
    assert len(acct.ledger()) == 1


def test_analysis_epsilon_check1(acct: BudgetAccountant) -> None:
    with pytest.raises(BudgetExceeded, match="epsilon 0.6 \\+ used 0 > allowed 0.5") as e:
        acct.charge(charge(("ngrams",), "0.6", "5"))
    assert e.value.check == 1
    assert spent(acct) == NOTHING


def test_age_with_ngrams_fails_on_the_age_field_check2(acct: BudgetAccountant) -> None:
    """(age, ngrams) at local epsilon 3: n-gram allows 5 but age only 2 -- "any query
    must satisfy the most stringent privacy conditions of any data field"."""
    with pytest.raises(BudgetExceeded, match="field 'age': local epsilon 3 > allowed 2") as e:
        acct.charge(charge(("age", "ngrams"), "0.3", "3"))
    assert e.value.check == 2
    assert spent(acct) == NOTHING


def test_age_aggregate_epsilon_check2(acct: BudgetAccountant) -> None:
    """epsilon 0.4 fits the analysis (0.5) but not the age field (0.3)."""
    with pytest.raises(BudgetExceeded, match="field 'age': epsilon 0.4") as e:
        acct.charge(charge(("age",), "0.4", "2"))
    assert e.value.check == 2
    assert spent(acct) == NOTHING
    acct.charge(charge(("age",), "0.3", "2"))       # exactly the age allowance
    assert spent(acct)[2]["age"] == (F("0.3"), 1)


def test_perplexity_local_epsilon_8_passes(acct: BudgetAccountant) -> None:
    acct.charge(charge(("perplexity",), "0.5", "8"))
    assert spent(acct)[2]["perplexity"] == (F("0.5"), 1)


def test_check3_cohort_aggregate_epsilon(acct: BudgetAccountant) -> None:
    with pytest.raises(BudgetExceeded, match="cohort-aggregate epsilon of 50 reports is "
                       "0.93") as e:
        acct.charge(charge(("ngrams",), "0.5", "5", achieved=0.93, m=50))
    assert e.value.check == 3
    with pytest.raises(BudgetExceeded) as e:
        acct.charge(charge(("ngrams",), "0.5", "5", achieved=None))
    assert e.value.check == 3
    assert spent(acct) == NOTHING


def test_no_local_randomizer_against_a_local_limit(acct: BudgetAccountant) -> None:
    with pytest.raises(BudgetExceeded, match="has no local randomizer") as e:
        acct.charge(charge(("ngrams",), "0.5", None))
    assert e.value.check == 2


def test_unknown_analysis_and_field(acct: BudgetAccountant) -> None:
    with pytest.raises(BudgetExceeded, match="no budget on this device"):
        acct.charge(Charge("other", "r", "q", ("ngrams",), F("0.1"), 1e-6, F(1), 0.1, 10))
    with pytest.raises(BudgetExceeded, match="field 'location' has no budget") as e:
        acct.charge(charge(("ngrams", "location"), "0.1", "1"))
    assert e.value.check == 2
    assert spent(acct) == NOTHING


def test_budgets_add_exactly(tmp_path: Path) -> None:
    """Three queries of 0.1 fit an allowance of 0.3 (floats would say 0.30000000000000004)."""
    policy = DevicePolicy("a", F("0.3"), 5, {"x": FieldAllowance(None, F("0.3"), 5)})
    with BudgetAccountant(tmp_path / "d.sqlite") as a:
        a.install(policy)
        c = Charge("a", "r", "q", ("x",), F("0.1"), 1e-6, None, 0.1, 10)
        for _ in range(3):
            a.charge(c)
        with pytest.raises(BudgetExceeded):
            a.charge(c)
        u = a.usage("a")
        assert u is not None and (u.epsilon_used, u.reports_used) == (F("0.3"), 3)


def test_ledger_persists_and_reinstall_keeps_what_was_used(tmp_path: Path) -> None:
    path = tmp_path / "device.sqlite"
    with BudgetAccountant(path) as a:
        a.install(table1_policy(ANALYSIS))
        a.charge(charge(("ngrams",), "0.25", "5"))
    with BudgetAccountant(path) as b:
        b.install(table1_policy(ANALYSIS))           # an OS update ships the same policy
        assert spent(b)[0:2] == (F("0.25"), 1)
        with pytest.raises(BudgetExceeded):
            b.charge(charge(("ngrams",), "0.25", "5"))
        assert [e["epsilon"] for e in b.ledger()] == [F("0.25")]


def test_a_failure_inside_the_update_rolls_everything_back(tmp_path: Path) -> None:
    """Atomicity: make the field update fail after the analysis row was updated."""
    a = BudgetAccountant(tmp_path / "d.sqlite")
    a.install(table1_policy(ANALYSIS))
    a.db.execute("CREATE TRIGGER boom BEFORE INSERT ON ledger BEGIN "
                 "SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(sqlite3.DatabaseError, match="disk full"):
        a.charge(charge(("ngrams",), "0.5", "5"))
    assert spent(a) == NOTHING


def test_charge_many_each_device_on_its_own_ledger(tmp_path: Path) -> None:
    a = BudgetAccountant(tmp_path / "fleet.sqlite", durable=False)
    policy = table1_policy(ANALYSIS)
    a.install(policy, ["d1", "d2", "d3"])
    a.charge(charge(("ngrams",), "0.5", "5"), "d2")       # d2 has used its report
    refused = a.charge_many(charge(("ngrams",), "0.5", "5"), ["d1", "d2", "d3", "d4"])
    assert sorted(refused) == ["d2", "d4"]
    assert refused["d2"].check == 1 and "no budget" in refused["d4"].reason
    s = a.fleet_spent(ANALYSIS)
    assert (s["devices"], s["devices_reporting"], s["reports"]) == (3, 3, 3)
    assert s["max_epsilon"] == 0.5 and s["max_local_epsilon_per_report"] == 5.0


def test_local_guarantee_models() -> None:
    """Appendix C.1: symmetric OHE is eps0-DP (deletion), 2 eps0-DP (replacement)."""
    assert local_guarantee("symmetric-ohe", F("2.5"), "replacement") == 5
    assert local_guarantee("symmetric-ohe", F("2.5"), "deletion") == F("2.5")
    assert local_guarantee("asymmetric-ohe", F(3), "replacement") == 3
    assert local_guarantee("none", None, "replacement") is None
