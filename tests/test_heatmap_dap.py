"""Seed 003's adaptive heatmap over real DAP tasks (analytics.heatmap.run): every round is a
task provisioned through the Leader's and the Helper's admin APIs, the simulated Clients
upload over HTTP and the Collector collects.

* `ppm leader` and `ppm helper` in their own processes, `ppm analytics heatmap` in a
  third, with the paper's distributed noise (Clients' Pólya shares on Prio3SumVec): the
  run reaches the stated MSE on the stated city, spends exactly the budget, and every
  round's task is on the Aggregators; the picture is written.
* In this process (real HTTP on 127.0.0.1): the aggregator-noise option on
  Prio3Histogram and Section 5.7's multi-location users, each round's private counts
  within the noise's tail of the true counts.
* The command's errors: one line, no traceback.

The MSE bounds come from runs of the same algorithm with noise drawn from the same law
without DAP (`run_heatmap(..., None)`), stated next to each bound.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.analytics.heatmap.data import synthetic_city
from ppm_reference.analytics.heatmap.metrics import metrics
from ppm_reference.analytics.heatmap.run import HeatmapSettings, local_aggregators, run_heatmap
from ppm_reference.cli import main
from ppm_reference.dap.admin_client import AdminClient
from tests.test_dap_cli import servers  # noqa: F401 - the fixture

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# The city of the acceptance test: 20000 users on a 32 x 32 map (synthetic_city seed 1),
# 400 users per round, epsilon 1. A uniform map has MSE 1.85e-5 against it.
CITY = ["--users", "20000", "--depth", "5", "--seed", "1", "--users-per-round", "400",
        "--epsilon", "1"]
UNIFORM_MSE = 1.845e-5
# client-polya, 1000 runs with the noise drawn locally: median 6.6e-6, 99th percentile
# 1.2e-5, one run above 1.4e-5 and none above 1.6e-5 (false failure about 1e-3).
CLIENT_POLYA_MSE_BOUND = 1.6e-5


def ppm(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ppm_reference", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_heatmap_over_leader_and_helper_processes(servers: dict[str, Any],  # noqa: F811
                                                  tmp_path: Path) -> None:
    servers["start"]()
    leader = f"http://127.0.0.1:{servers['ports']['leader']}/"
    helper = f"http://127.0.0.1:{servers['ports']['helper']}/"
    picture = tmp_path / "map.png"
    proc = ppm("analytics", "heatmap", *CITY, "--noise", "client-polya",
               "--leader", leader, "--helper", helper, "--admin-token", "test-admin-token",
               "--out", str(picture), "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    result = json.loads(proc.stdout)
    assert result["ok"] is True and result["dap"] is True
    assert result["noise"] == "client-polya"
    assert result["population"] == {"users": 20000, "depth": 5, "source": "synthetic",
                                    "multi_location": False}
    # The budget: the rounds' epsilons add up to exactly 1 (Equation 9's last round
    # takes the remainder).
    assert result["epsilon_spent_exact"] == "1"
    rounds = result["rounds"]
    # The tree grows from the root. Not necessarily in round 1: round 0's epsilon is tiny
    # (about 0.012, discrete Laplace noise of scale about 85 on a count of 400), so the
    # root stays unsplit after it with probability about 0.1 (seen: 1 run in 7); the later
    # rounds' epsilons (up to about 0.5) make a root that never splits a < 1e-6 event.
    assert len(rounds) >= 3 and rounds[0]["leaves"] == 1
    assert rounds[1]["leaves"] in (1, 4)
    assert max(r["leaves"] for r in rounds) >= 4
    assert all(r["users"] == 400 and r["shards"] == 1 for r in rounds)
    assert result["communication"] == sum(r["leaves"] for r in rounds)
    # The stated accuracy: MSE at most 1.6e-5 (a uniform map has 1.85e-5).
    assert result["metrics"]["mse"] <= CLIENT_POLYA_MSE_BOUND, result["metrics"]
    # Every round was a DAP task of its own, on both Aggregators.
    task_ids = [r["task_ids"][0] for r in rounds]
    assert len(set(task_ids)) == len(rounds)
    for url in (leader, helper):
        listed = AdminClient(url, "test-admin-token").request("GET", "internal/tasks")
        assert set(task_ids) <= {t["task_id"] for t in listed}
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert picture.stat().st_size > 10_000


def check_rounds_against_truth(res: Any) -> None:
    """Each leaf's private count minus its true count is the round's summed noise:
    within 12 standard deviations. For a sum of two discrete Laplace variables
    P(|Z| > 12 sigma) < 1e-9 (and less for one), so the whole check (a few hundred
    leaves) fails by chance with probability below 1e-6."""
    for r in res.rounds:
        assert len(r.counts) == len(r.true_counts) == r.leaves
        assert math.isclose(sum(r.true_counts), r.users)
        for private, true in zip(r.counts, r.true_counts, strict=True):
            assert abs(private - true) <= 12 * r.noise_std, (r.round, private, true)


def test_aggregator_noise_on_prio3histogram(tmp_path: Path) -> None:
    pop = synthetic_city(20000, 5, seed=1)
    settings = HeatmapSettings(epsilon="1", users_per_round=400, noise="aggregator")

    async def go() -> Any:
        async with local_aggregators(str(tmp_path)) as aggs:
            return await run_heatmap(pop, settings, aggs)

    res = asyncio.run(go())
    assert res.epsilon_spent == 1
    check_rounds_against_truth(res)
    assert all(len(r.task_ids) == 1 and r.task_ids[0] for r in res.rounds)
    # Aggregator noise: two discrete Laplace shares of scale 2/eps per count (8 times
    # the variance of the Pólya option at equal epsilon). 1000 local runs: median
    # 1.23e-5, largest 1.64e-5; the bound is the uniform map's MSE.
    assert res.metrics.mse < UNIFORM_MSE


def test_multi_location_users_over_dap(tmp_path: Path) -> None:
    """Section 5.7 over Prio3SumVec: vectors of L1 norm <= gamma + T, noise for that
    sensitivity, counts divided back by gamma."""
    pop = synthetic_city(150, 3, seed=2, locations_per_user=3)
    settings = HeatmapSettings(epsilon="2", users_per_round=150, noise="client-polya",
                               gamma=10, max_rounds=3)

    async def go() -> Any:
        async with local_aggregators(str(tmp_path)) as aggs:
            return await run_heatmap(pop, settings, aggs)

    res = asyncio.run(go())
    assert res.epsilon_spent == 2 and len(res.rounds) <= 3
    check_rounds_against_truth(res)
    size = 8
    uniform = [[1 / size**2] * size for _ in range(size)]
    assert res.metrics.mse < metrics(uniform, res.true_map).mse


@pytest.mark.parametrize(("args", "message"), [
    (["--users-per-round", "0"], "ppm: error: --users-per-round must be in [1, 20000] "
                                 "(the population)"),
    (["--epsilon", "abc"], "ppm: error: --epsilon must be a number, got 'abc'"),
    (["--locations-per-user", "2"], "ppm: error: users with several locations "
                                    "(Section 5.7) need noise client-polya: the "
                                    "aggregator policy for Prio3SumVec calibrates to the "
                                    "worst case T * gamma, not gamma + T"),
    (["--data", "/nonexistent/points.csv"], "ppm: error: cannot read "
                                            "/nonexistent/points.csv: No such file or "
                                            "directory"),
    (["--leader", "http://127.0.0.1:1/"], "ppm: error: give all of --leader, --helper "
                                          "and --admin-token, or none"),
    (["--depth", "11"], "ppm: error: --depth must be in [1, 10]"),
])
def test_heatmap_command_errors(args: list[str], message: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analytics", "heatmap", *args]) == 2
    err = capsys.readouterr().err
    assert err.strip() == message


def test_unreachable_aggregators_are_one_line() -> None:
    proc = ppm("analytics", "heatmap", "--users", "50", "--users-per-round", "20",
               "--leader", "http://127.0.0.1:9/", "--helper", "http://127.0.0.1:9/",
               "--admin-token", "t", "--json")
    assert proc.returncode == 1
    line = proc.stderr.strip()
    assert line.startswith("ppm: error: round 1: ") and "\n" not in line
    assert "cannot reach the admin API" in line
    assert json.loads(proc.stdout)["ok"] is False


def test_simulate_json_and_population_file(tmp_path: Path) -> None:
    points = tmp_path / "points.txt"
    points.write_text("".join(f"{(i * 7) % 16},{(i * 3) % 16}\n" for i in range(300)))
    proc = ppm("analytics", "heatmap", "--data", str(points), "--depth", "4",
               "--users-per-round", "200", "--simulate", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["dap"] is False and result["population"]["users"] == 300
    assert result["epsilon_spent_exact"] == "1"
    assert set(result["metrics"]) == {"mse", "l1", "mape", "smape", "maape"}

