"""Interactive n-gram discovery (paper 004, Section 1 and Appendix B) over a real Leader
and Helper: each round is a DAP task provisioned through the admin APIs, the simulated
devices answer through the on-device pipeline and upload through the DAP Client, and the
Collector's result decides the next round.

The discovery test runs 3,000 devices (3 rounds of 1,000: under a minute on a loaded
2-core machine), 3 planted n-grams of 2 or 3 words in 75% of the phrases, symmetric
RAPPOR eps0 = 2.5 (5-DP per report in the replacement model, Table 1's n-gram
allowance), each device spending a cohort-aggregate epsilon of 0.7714 (Theorem C.3 at a
minimum cohort of 900, delta 1e-6) of its budget of 1, alpha = 0.01.

Thresholds: recall >= 2/3 and precision >= 0.75. The fleet is seeded; the DP noise comes
from the CSPRNG, so the outcome is random: the weakest planted bucket expects about 80
reports against a threshold of about 36 with a standard deviation of about 13 (RAPPOR
noise and the device's choice), so one miss has probability below 1e-4 and two below
1e-7; a false discovery is at most alpha = 0.01 per round in expectation, and precision
< 0.75 needs three of them (probability below 1e-5). In 200 runs of the same fleet
without Aggregators (`LocalBackend`, the same noise) recall was always 1 and precision
at least 0.83.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pytest

from ppm_reference.analytics.federated import ngrams
from ppm_reference.analytics.federated.budget import BudgetAccountant
from ppm_reference.analytics.federated.recipe import PrefixTree
from ppm_reference.cli import main

FLEET = ngrams.FleetSpec(devices=3000, planted=3, planted_lengths=(2, 3), planted_share=0.75,
                         seed=0)


def settings(**kw: Any) -> ngrams.Settings:
    base: dict[str, Any] = {"mode": "rappor", "eps0": 2.5, "alpha": 0.01, "budget": 1.0,
                            "local_budget": 5.0}
    return ngrams.Settings(**{**base, **kw})


class SpyBackend(ngrams.LocalBackend):
    def __init__(self) -> None:
        self.provisioned: list[Any] = []
        self.uploads = 0

    async def provision(self, pt: Any) -> None:
        self.provisioned.append(pt)

    async def aggregate(self, pt: Any, measurements: list[Any], settings: ngrams.Settings
                        ) -> tuple[int, list[float]]:
        self.uploads += len(measurements)
        return await super().aggregate(pt, measurements, settings)


def test_discovery_over_a_real_leader_and_helper(tmp_path: Path) -> None:
    from ppm_reference.dap.admin_client import AdminClient

    fleet = ngrams.make_fleet(FLEET)
    ledger = tmp_path / "ledgers.sqlite"

    async def go() -> tuple[ngrams.Discovery, Any]:
        backend = await ngrams.LocalAggregators(str(tmp_path)).start()
        try:
            result = await ngrams.discover(fleet, settings(), backend, ledger)
            tasks = await asyncio.to_thread(
                AdminClient(backend.leader_url, backend.token).request, "GET",
                "internal/tasks")
            return result, tasks
        finally:
            await backend.close()

    d, tasks = asyncio.run(go())
    out = d.to_json()
    assert d.recall >= 2 / 3, out["planted"]
    assert d.precision >= 0.75, out["discovered"]
    # three rounds, one DAP task each, provisioned through the Leader's admin API
    assert [r.k for r in d.rounds] == [1, 2, 3]
    listed = json.dumps(tasks)
    assert all(r.task_id in listed for r in d.rounds)
    for r in d.rounds:
        assert r.vdaf == "Prio3MultihotCountVec" and r.cohort == 1000
        assert r.report_count == r.answered == 1000 and r.refused == {}
        assert r.epsilon_per_report == pytest.approx(0.7714)
    first = d.rounds[0].recipe.root
    assert isinstance(first, PrefixTree) and first.leaves == ((),) and first.bins == 67
    second = d.rounds[1].recipe.root
    assert isinstance(second, PrefixTree)
    assert set(second.leaves) == {(w,) for w in d.words}    # round 1's words as prefixes
    # the privacy spent, from the devices' accountants
    assert out["privacy"]["devices"] == out["privacy"]["devices_reporting"] == 3000
    assert out["privacy"]["max_reports"] == 1
    assert out["privacy"]["max_epsilon"] == pytest.approx(0.7714)
    assert out["privacy"]["max_local_epsilon_per_report"] == 5.0
    with BudgetAccountant(ledger, "device-17") as acct:
        usage = acct.usage(ngrams.ANALYSIS)
        assert usage is not None and usage.reports_used == 1
        assert len(acct.ledger()) == 1

    # The same devices asked again: every one refuses (Check 1, its one report is used),
    # so the orchestrator stops with a clear error and no report is sent.
    spy = SpyBackend()
    with pytest.raises(ngrams.DiscoveryError, match="only 0 of 1000 devices answered.*"
                       "check 1 failed"):
        asyncio.run(ngrams.discover(fleet, settings(), spy, ledger))
    assert spy.uploads == 0 and len(spy.provisioned) == 1
    with BudgetAccountant(ledger) as acct:
        assert acct.fleet_spent(ngrams.ANALYSIS)["reports"] == 3000


def test_histogram_mode_without_aggregators() -> None:
    """Prio3Histogram with the Aggregators' Gaussian noise (in memory): same thresholds,
    same argument (its noise, sigma about 6 per bucket, is smaller than RAPPOR's)."""
    spy = SpyBackend()
    d = asyncio.run(ngrams.discover(ngrams.make_fleet(FLEET),
                                    settings(mode="histogram", local_budget=None), spy))
    assert d.recall >= 2 / 3 and d.precision >= 0.75
    assert all(r.vdaf == "Prio3Histogram" for r in d.rounds)
    assert d.privacy["max_epsilon"] == 1.0 and d.privacy["max_local_epsilon_per_report"] \
        is None
    assert spy.uploads == 3000


def test_local_dp_requirement_refuses_aggregator_noise_and_sends_nothing() -> None:
    spy = SpyBackend()
    with pytest.raises(ngrams.DiscoveryError, match="check 2 failed: field 'ngrams' needs "
                       "local DP"):
        asyncio.run(ngrams.discover(ngrams.make_fleet(FLEET), settings(mode="histogram"),
                                    spy))
    assert spy.uploads == 0


def test_budget_smaller_than_a_report_is_a_clear_error() -> None:
    spy = SpyBackend()
    with pytest.raises(ngrams.DiscoveryError, match="costs epsilon 0.7714, more than the "
                       "devices' budget 0.5"):
        asyncio.run(ngrams.discover(ngrams.make_fleet(FLEET), settings(budget=0.5), spy))
    assert spy.uploads == 0 and spy.provisioned == []


def test_decide() -> None:
    tree = PrefixTree.from_leaves("ngrams", [("a",), ("b",)], ["a", "b"])
    recipe = ngrams.round_recipe(2, tree.leaves, tree.tokens,
                                 ngrams.round_privacy(settings(), 1000))
    counts = [0.0] * recipe.bins
    counts[tree.encode(("a", "b"))] = 50.0
    counts[tree.encode(("a", "a"))] = 20.0                # below z sigma
    counts[tree.encode(("b", ngrams.END))] = 40.0
    counts[tree.encode(("b", "zzz"))] = 90.0              # unknown next word: not a gram
    found, ended, threshold = ngrams.decide(recipe, counts, sigma=10.0, alpha=0.05)
    assert recipe.bins == 9     # z = Phi^-1(1 - 0.05/9) = 2.539
    assert threshold == pytest.approx(10.0 * NormalDist().inv_cdf(1 - 0.05 / 9))
    assert threshold == pytest.approx(25.39, abs=0.01)
    assert found == [(("a", "b"), 50.0)] and ended == [(("b",), 40.0)]
    found, _, threshold = ngrams.decide(recipe, counts, sigma=1.0, alpha=0.05,
                                        min_count=30.0)
    assert threshold == 30.0 and found == [(("a", "b"), 50.0)]


def test_fleet_is_reproducible_and_planted_as_stated() -> None:
    a, b = ngrams.make_fleet(FLEET), ngrams.make_fleet(FLEET)
    assert a.planted == b.planted and a.phrases == b.phrases
    shares = a.share(a.planted)
    # 75% of phrases are planted, evenly: 25% each (+- 5 std of a binomial share)
    assert all(abs(s - 0.25) <= 5 * (0.25 * 0.75 / 3000) ** 0.5 for s in shares.values())
    assert all(2 <= len(g) <= 3 for g in a.planted)
    assert not any(g != h and h[: len(g)] == g for g in a.planted for h in a.planted)


def test_cli_ngrams(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["analytics", "ngrams", "--local", "--devices", "3000", "--planted", "3",
            "--planted-lengths", "2,3", "--planted-share", "0.75", "--seed", "0",
            "--alpha", "0.01"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["recall"] >= 2 / 3 and out["precision"] >= 0.75
    assert len(out["rounds"]) == 3 and out["privacy"]["max_reports"] == 1
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "precision" in text and "privacy spent per device" in text


@pytest.mark.parametrize("args,message", [
    (["--eps0", "-1"], "eps0 must be positive"),
    (["--profile", "dap-99"], "dap-99"),
    (["--devices", "0"], "--devices must be at least 1"),
    (["--budget", "0.5", "--devices", "3000"], "more than the devices' budget 0.5"),
])
def test_cli_ngrams_errors(capsys: pytest.CaptureFixture[str], args: list[str],
                           message: str) -> None:
    code = main(["analytics", "ngrams", "--local", *args])
    err = capsys.readouterr().err
    assert code in (1, 2) and err.startswith("ppm: error:") and message in err
    assert err.count("\n") == 1
