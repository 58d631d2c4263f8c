"""The on-device privacy-budget accountant ([MJTB+22] = paper 004, Section 4.3, Table 1).

Every analysis has a cohort-aggregate budget (epsilon_Allowed, k_Allowed: Table 1a) and
every data field an allowed local epsilon, cohort-aggregate epsilon and number of reports
(Table 1b), here per analysis and field ("an allowed number of times that data type may be
accessed per analysis"). Before a query runs, the device makes the paper's checks:

* Check 1: epsilon + epsilon_Used <= epsilon_Allowed and k_Used + 1 <= k_Allowed for the
  analysis;
* Check 2: for every data field the query reads, eps0 <= eps^local_Allowed,field,
  epsilon + epsilon_Used,field <= epsilon_Allowed,field and k_Used,field + 1 <=
  k_Allowed,field;
* Check 3: the cohort-aggregate guarantee epsilon is achieved by the aggregation of at
  least m eps0-DP local reports (the device computes it: `analytics.federated.device`).

If every check passes, the used budgets grow by (epsilon, 1) in one transaction; if one
fails nothing changes and `BudgetExceeded` says which check failed. The paper composes
with the basic theorem, and so do we.

Budgets are exact rationals read from their decimal text (0.1 is 1/10), stored as
"numerator/denominator" text, so that three queries of 0.1 fit an allowance of 0.3.

The store is SQLite (one file per device). A fleet simulation keeps many devices' ledgers
in one file, keyed by a device name; each device's rows are only ever touched by its own
checks, and `charge_many` runs the checks of many devices in one transaction (each device
all-or-nothing), which is how a simulated fleet of 100,000 devices keeps real ledgers.

The local epsilon of a check is in the model the device's policy states (`local_model`):
the replacement model of the paper's Definition 3.1 by default, in which symmetric
one-hot encoding with parameter eps0 is 2 eps0-DP (Appendix C.1); the deletion model
(Definition C.1) on request, in which it is eps0-DP. Asymmetric one-hot encoding is
eps0-DP in both.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ppm_reference.analytics.federated.recipe import exact

DEFAULT_DEVICE = "device"
LOCAL_MODELS = ("replacement", "deletion")


def frac_text(x: Fraction) -> str:
    return f"{x.numerator}/{x.denominator}"


def text_frac(s: str) -> Fraction:
    return Fraction(s)


def show(x: Fraction) -> str:
    """A budget for people: 0.3, 1, or 0.333333 for thirds."""
    return f"{float(x):g}"


@dataclass(frozen=True)
class FieldAllowance:
    """Table 1b: the allowed local epsilon (None: no local-DP requirement), the allowed
    cohort-aggregate epsilon and the allowed number of reports of one data field."""

    local_epsilon: Fraction | None
    epsilon: Fraction
    reports: int


@dataclass(frozen=True)
class DevicePolicy:
    """The immutable part of an analysis's budget that ships with the device (Table 1)."""

    analysis: str
    epsilon: Fraction
    reports: int
    fields: Mapping[str, FieldAllowance]
    local_model: str = "replacement"

    def __post_init__(self) -> None:
        if self.local_model not in LOCAL_MODELS:
            raise ValueError(f"local_model must be one of {LOCAL_MODELS}")

    @classmethod
    def from_json(cls, obj: Any) -> DevicePolicy:
        """{"analysis": ..., "epsilon": 0.5, "reports": 1, "localModel": "replacement",
        "fields": {"ngrams": {"localEpsilon": 5, "epsilon": 1, "reports": 1}}}"""
        if not isinstance(obj, dict) or not isinstance(obj.get("analysis"), str):
            raise ValueError("a device policy is an object with an 'analysis' string")
        fields: dict[str, FieldAllowance] = {}
        for name, f in dict(obj.get("fields", {})).items():
            local = f.get("localEpsilon")
            fields[name] = FieldAllowance(
                None if local is None else exact(local, f"fields.{name}.localEpsilon"),
                exact(f["epsilon"], f"fields.{name}.epsilon"), int(f["reports"]))
        return cls(obj["analysis"], exact(obj["epsilon"], "epsilon"), int(obj["reports"]),
                   fields, obj.get("localModel", "replacement"))

    def to_json(self) -> dict[str, Any]:
        return {"analysis": self.analysis, "epsilon": float(self.epsilon),
                "reports": self.reports, "localModel": self.local_model,
                "fields": {n: {"localEpsilon": None if f.local_epsilon is None
                               else float(f.local_epsilon),
                               "epsilon": float(f.epsilon), "reports": f.reports}
                           for n, f in self.fields.items()}}


def table1_policy(analysis: str = "com.apple.insights.keyboard") -> DevicePolicy:
    """The example allocations of the paper's Table 1 (keyboard analysis)."""
    return DevicePolicy(analysis, Fraction("0.5"), 1, {
        "ngrams": FieldAllowance(Fraction(5), Fraction(1), 1),
        "age": FieldAllowance(Fraction(2), Fraction("0.3"), 1),
        "perplexity": FieldAllowance(Fraction(8), Fraction(1), 1),
    })


def local_guarantee(randomizer: str, eps0: Fraction | None, model: str) -> Fraction | None:
    """The local epsilon of a randomizer with parameter eps0 in `model` (None: no local
    randomization). Symmetric OHE: eps0 deletion, 2 eps0 replacement (Appendix C.1,
    Theorem C.1 and the note after it); asymmetric OHE: eps0 replacement (Theorem A.1),
    hence eps0 deletion too."""
    if randomizer == "none" or eps0 is None:
        return None
    if randomizer == "symmetric-ohe":
        return 2 * eps0 if model == "replacement" else eps0
    if randomizer == "asymmetric-ohe":
        return eps0
    raise ValueError(f"unknown randomizer {randomizer!r}")


@dataclass(frozen=True)
class Charge:
    """What one query asks of the budget. `local_epsilon` is in the policy's local model
    (None: no local randomizer); `achieved_epsilon` is the cohort-aggregate epsilon the
    device computed for `min_cohort` reports (Check 3; None if it could not)."""

    analysis: str
    recipe_id: str
    query: str
    fields: tuple[str, ...]
    epsilon: Fraction
    delta: float
    local_epsilon: Fraction | None
    achieved_epsilon: float | None
    min_cohort: int
    note: str = ""


class BudgetExceeded(Exception):
    """A check of Section 4.3 failed: the query does not run and nothing is spent."""

    def __init__(self, check: int, reason: str) -> None:
        super().__init__(f"privacy budget check {check} failed: {reason}")
        self.check = check
        self.reason = reason


@dataclass
class Usage:
    """One device's budget for one analysis: allowances and what is used."""

    analysis: str
    epsilon_allowed: Fraction
    epsilon_used: Fraction
    reports_allowed: int
    reports_used: int
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS analysis_budget (
    device TEXT NOT NULL, analysis TEXT NOT NULL,
    eps_allowed TEXT NOT NULL, eps_used TEXT NOT NULL,
    k_allowed INTEGER NOT NULL, k_used INTEGER NOT NULL,
    local_model TEXT NOT NULL,
    PRIMARY KEY (device, analysis));
CREATE TABLE IF NOT EXISTS field_budget (
    device TEXT NOT NULL, analysis TEXT NOT NULL, field TEXT NOT NULL,
    local_allowed TEXT, eps_allowed TEXT NOT NULL, eps_used TEXT NOT NULL,
    k_allowed INTEGER NOT NULL, k_used INTEGER NOT NULL,
    PRIMARY KEY (device, analysis, field));
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY, device TEXT NOT NULL, analysis TEXT NOT NULL,
    recipe TEXT NOT NULL, query TEXT NOT NULL, fields TEXT NOT NULL,
    epsilon TEXT NOT NULL, delta REAL NOT NULL, local_epsilon TEXT,
    achieved_epsilon REAL, min_cohort INTEGER NOT NULL, note TEXT NOT NULL,
    at REAL NOT NULL);
"""


class BudgetAccountant:
    """The accountant of Section 4.3 over a SQLite file (see the module docstring)."""

    def __init__(self, path: str | Path, device: str = DEFAULT_DEVICE,
                 durable: bool = True) -> None:
        self.path = str(path)
        self.device = device
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'OFF'}")
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> BudgetAccountant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the policy ------------------------------------------------------------------

    def install(self, policy: DevicePolicy, devices: Iterable[str] | None = None) -> None:
        """Give the devices the policy's allowances (the part that ships with the OS).
        A device that has the analysis already keeps its rows and what it has used."""
        devs = [self.device] if devices is None else list(devices)
        rows_a = [(d, policy.analysis, frac_text(policy.epsilon), frac_text(Fraction(0)),
                   policy.reports, 0, policy.local_model) for d in devs]
        rows_f = [(d, policy.analysis, name,
                   None if f.local_epsilon is None else frac_text(f.local_epsilon),
                   frac_text(f.epsilon), frac_text(Fraction(0)), f.reports, 0)
                  for d in devs for name, f in policy.fields.items()]
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.executemany("INSERT OR IGNORE INTO analysis_budget VALUES "
                                "(?, ?, ?, ?, ?, ?, ?)", rows_a)
            self.db.executemany("INSERT OR IGNORE INTO field_budget VALUES "
                                "(?, ?, ?, ?, ?, ?, ?, ?)", rows_f)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def local_model(self, analysis: str, device: str | None = None) -> str | None:
        row = self.db.execute("SELECT local_model FROM analysis_budget WHERE device = ? AND "
                              "analysis = ?", (device or self.device, analysis)).fetchone()
        return None if row is None else str(row[0])

    # -- the checks ------------------------------------------------------------------

    def _check_and_spend(self, charge: Charge, device: str, now: float) -> None:
        """Checks 1 to 3 for one device inside the caller's transaction; spends only if
        all pass (raises BudgetExceeded before any write otherwise)."""
        db = self.db
        row = db.execute("SELECT eps_allowed, eps_used, k_allowed, k_used FROM "
                         "analysis_budget WHERE device = ? AND analysis = ?",
                         (device, charge.analysis)).fetchone()
        if row is None:
            raise BudgetExceeded(1, f"analysis {charge.analysis!r} has no budget on this "
                                 "device")
        eps_allowed, eps_used = text_frac(row[0]), text_frac(row[1])
        k_allowed, k_used = int(row[2]), int(row[3])
        eps = charge.epsilon
        # Check 1 (Table 1a)
        if eps + eps_used > eps_allowed:
            raise BudgetExceeded(1, f"analysis {charge.analysis!r}: epsilon {show(eps)} + "
                                 f"used {show(eps_used)} > allowed {show(eps_allowed)}")
        if k_used + 1 > k_allowed:
            raise BudgetExceeded(1, f"analysis {charge.analysis!r}: {k_used} of {k_allowed} "
                                 "allowed reports used")
        # Check 2 (Table 1b), for every field the query reads
        updates = []
        for name in charge.fields:
            frow = db.execute("SELECT local_allowed, eps_allowed, eps_used, k_allowed, "
                              "k_used FROM field_budget WHERE device = ? AND analysis = ? "
                              "AND field = ?", (device, charge.analysis, name)).fetchone()
            if frow is None:
                raise BudgetExceeded(2, f"field {name!r} has no budget in analysis "
                                     f"{charge.analysis!r}")
            local_allowed = None if frow[0] is None else text_frac(frow[0])
            f_allowed, f_used = text_frac(frow[1]), text_frac(frow[2])
            fk_allowed, fk_used = int(frow[3]), int(frow[4])
            if local_allowed is not None:
                if charge.local_epsilon is None:
                    raise BudgetExceeded(2, f"field {name!r} needs local DP with epsilon <= "
                                         f"{show(local_allowed)}; the query has no local "
                                         "randomizer")
                if charge.local_epsilon > local_allowed:
                    raise BudgetExceeded(2, f"field {name!r}: local epsilon "
                                         f"{show(charge.local_epsilon)} > allowed "
                                         f"{show(local_allowed)}")
            if eps + f_used > f_allowed:
                raise BudgetExceeded(2, f"field {name!r}: epsilon {show(eps)} + used "
                                     f"{show(f_used)} > allowed {show(f_allowed)}")
            if fk_used + 1 > fk_allowed:
                raise BudgetExceeded(2, f"field {name!r}: {fk_used} of {fk_allowed} allowed "
                                     "reports used")
            updates.append((frac_text(f_used + eps), fk_used + 1, device, charge.analysis,
                            name))
        # Check 3: epsilon is achieved by at least m eps0-DP reports
        if charge.achieved_epsilon is None or charge.achieved_epsilon > float(eps):
            got = ("cannot be computed" if charge.achieved_epsilon is None
                   else f"is {charge.achieved_epsilon:.6g}")
            raise BudgetExceeded(3, f"the cohort-aggregate epsilon of {charge.min_cohort} "
                                 f"reports {got}, more than the requested {show(eps)}")
        # All checks passed: spend.
        db.execute("UPDATE analysis_budget SET eps_used = ?, k_used = ? WHERE device = ? "
                   "AND analysis = ?", (frac_text(eps_used + eps), k_used + 1, device,
                                        charge.analysis))
        db.executemany("UPDATE field_budget SET eps_used = ?, k_used = ? WHERE device = ? "
                       "AND analysis = ? AND field = ?", updates)
        db.execute("INSERT INTO ledger (device, analysis, recipe, query, fields, epsilon, "
                   "delta, local_epsilon, achieved_epsilon, min_cohort, note, at) VALUES "
                   "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (device, charge.analysis, charge.recipe_id, charge.query,
                    json.dumps(list(charge.fields)), frac_text(eps), charge.delta,
                    None if charge.local_epsilon is None else frac_text(charge.local_epsilon),
                    charge.achieved_epsilon, charge.min_cohort, charge.note, now))

    def charge(self, charge: Charge, device: str | None = None) -> None:
        """Checks 1 to 3, then spend, atomically; BudgetExceeded (nothing spent)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self._check_and_spend(charge, device or self.device, time.time())
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def charge_many(self, charge: Charge, devices: Sequence[str]
                    ) -> dict[str, BudgetExceeded]:
        """`charge` for each device, in one transaction; each device passes or fails on
        its own ledger. Returns the devices refused, with the reason."""
        refused: dict[str, BudgetExceeded] = {}
        now = time.time()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for d in devices:
                try:
                    self._check_and_spend(charge, d, now)
                except BudgetExceeded as exc:
                    refused[d] = exc
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        return refused

    # -- reading ---------------------------------------------------------------------

    def usage(self, analysis: str, device: str | None = None) -> Usage | None:
        d = device or self.device
        row = self.db.execute("SELECT eps_allowed, eps_used, k_allowed, k_used FROM "
                              "analysis_budget WHERE device = ? AND analysis = ?",
                              (d, analysis)).fetchone()
        if row is None:
            return None
        out = Usage(analysis, text_frac(row[0]), text_frac(row[1]), int(row[2]), int(row[3]))
        for f in self.db.execute("SELECT field, local_allowed, eps_allowed, eps_used, "
                                 "k_allowed, k_used FROM field_budget WHERE device = ? AND "
                                 "analysis = ? ORDER BY field", (d, analysis)):
            out.fields[f[0]] = {
                "local_allowed": None if f[1] is None else text_frac(f[1]),
                "epsilon_allowed": text_frac(f[2]), "epsilon_used": text_frac(f[3]),
                "reports_allowed": int(f[4]), "reports_used": int(f[5])}
        return out

    def ledger(self, device: str | None = None) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT analysis, recipe, query, fields, epsilon, delta, "
                               "local_epsilon, achieved_epsilon, min_cohort, note, at FROM "
                               "ledger WHERE device = ? ORDER BY id",
                               (device or self.device,)).fetchall()
        return [{"analysis": r[0], "recipe": r[1], "query": r[2], "fields": json.loads(r[3]),
                 "epsilon": text_frac(r[4]), "delta": r[5],
                 "local_epsilon": None if r[6] is None else text_frac(r[6]),
                 "achieved_epsilon": r[7], "min_cohort": r[8], "note": r[9], "at": r[10]}
                for r in rows]

    def fleet_spent(self, analysis: str) -> dict[str, Any]:
        """What the devices of a fleet spent on an analysis: the maximum and mean
        cohort-aggregate epsilon and reports per device (over the devices holding the
        analysis), the largest local epsilon of one report, the number of reports."""
        eps: list[Fraction] = []
        reports: list[int] = []
        for r in self.db.execute("SELECT eps_used, k_used FROM analysis_budget WHERE "
                                 "analysis = ?", (analysis,)):
            eps.append(text_frac(r[0]))
            reports.append(int(r[1]))
        locals_ = [text_frac(r[0]) for r in self.db.execute(
            "SELECT DISTINCT local_epsilon FROM ledger WHERE analysis = ? AND local_epsilon "
            "IS NOT NULL", (analysis,))]
        n = len(eps)
        total = sum(eps, Fraction(0))
        return {"devices": n, "devices_reporting": sum(1 for k in reports if k),
                "reports": sum(reports),
                "max_epsilon": float(max(eps)) if eps else 0.0,
                "mean_epsilon": float(total / n) if n else 0.0,
                "max_reports": max(reports) if reports else 0,
                "max_local_epsilon_per_report": float(max(locals_)) if locals_ else None}
