"""Seed 003's adaptive heatmaps (analytics.heatmap) without DAP: the prefix tree and its
node ids (Section 5.6), communication counts (Tables 1 and 2), the budget rule
(Equations 5 to 9), UpdateTree, the metrics (Section 6.1, Appendix A.1), multi-location
encoding (Section 5.7), and whole runs with the noise drawn locally (the law the DAP
run's noise has) for the behaviour of the algorithm: a point mass splits deep, an empty
region collapses. The runs over real DAP tasks are in test_heatmap_dap.py.

Statistical checks state their false-failure probability where they have one.
"""

from __future__ import annotations

import asyncio
import math
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppm_reference.analytics.heatmap import budget
from ppm_reference.analytics.heatmap.budget import BudgetSchedule, phi, tau, tau_target
from ppm_reference.analytics.heatmap.data import (
    DataError,
    Population,
    load_points,
    multi_location_sensitivity,
    multi_location_vector,
    synthetic_city,
)
from ppm_reference.analytics.heatmap.metrics import metrics, spread, true_density
from ppm_reference.analytics.heatmap.run import HeatmapResult, HeatmapSettings, run_heatmap
from ppm_reference.analytics.heatmap.tree import (
    PrefixTree,
    ancestry,
    block,
    count_min_communication,
    flat_communication,
    hierarchical_communication,
    histogram,
    node_id,
)
from ppm_reference.dp_policy.mechanisms import DiscreteLaplace
from tests.test_dp_samplers import Z_1E6, SeededRng

# -- Section 5.6: node ids -----------------------------------------------------------------


def test_worked_example_of_section_5_6() -> None:
    """(x = 12, y = 5) = (1100, 0101) on a 16 x 16 map: {} -> {10} -> {10/11} ->
    {10/11/00} -> {10/11/00/01}."""
    assert node_id(12, 5, 4) == "10110001"
    assert ancestry(12, 5, 4) == ["", "10", "1011", "101100", "10110001"]
    assert node_id(12, 5, 4, level=2) == "1011"
    # The suffix is (x bit, y bit): 10 is the x-high, y-low quadrant.
    assert block("10", 4) == (8, 0, 8)
    assert block("10110001", 4) == (12, 5, 1)


@given(st.integers(1, 10), st.data())
def test_node_id_and_block_are_inverse(depth: int, data: st.DataObject) -> None:
    size = 1 << depth
    x = data.draw(st.integers(0, size - 1))
    y = data.draw(st.integers(0, size - 1))
    for level in range(depth + 1):
        nid = node_id(x, y, depth, level)
        assert len(nid) == 2 * level
        x0, y0, side = block(nid, depth)
        assert side == 1 << (depth - level)
        assert x0 <= x < x0 + side and y0 <= y < y0 + side
    assert block(node_id(x, y, depth), depth) == (x, y, 1)


def test_node_id_rejects_cells_outside_the_map() -> None:
    with pytest.raises(ValueError):
        node_id(16, 0, 4)
    with pytest.raises(ValueError):
        node_id(0, 0, 4, level=5)


# -- Tables 1 and 2: communication ----------------------------------------------------------


def test_communication_counts_of_tables_1_and_2() -> None:
    assert flat_communication(10) == 1_048_576          # Table 1, flat, 1024 x 1024
    assert hierarchical_communication(10) == 1_398_100  # Table 1, hierarchical
    assert count_min_communication(2000, 20) == 40_000  # Table 1, CM sketch
    assert hierarchical_communication(6) == 5_460       # Table 2, non-private, 64 x 64
    # A tree's vector length is its number of nodes with fewer than four children.
    assert len(PrefixTree.full(5, 5).leaves()) == flat_communication(5)
    assert len(PrefixTree.full(4, 2).leaves()) == 16
    assert len(PrefixTree(4).leaves()) == 1


# -- The prefix tree: longest prefix, orphans, regions ----------------------------------------


def test_longest_prefix_with_an_orphan() -> None:
    """A grandchild without its parent (an orphan, Section 5.6): users inside it report
    to it, the rest of its grandparent's quadrant to the grandparent."""
    tree = PrefixTree(4, {"", "10", "101100"})
    assert tree.leaves() == ["", "10", "101100"]
    assert tree.longest_prefix(node_id(12, 5, 4)) == "101100"
    assert tree.longest_prefix(node_id(8, 0, 4)) == "10"
    assert tree.longest_prefix(node_id(0, 0, 4)) == ""
    assert tree.region_sizes() == [256 - 64, 64 - 4, 4]
    assert histogram(tree, [(12, 5), (13, 4), (8, 0), (0, 0), (1, 15)]) == [2, 1, 2]


def test_a_node_with_four_children_owns_no_area() -> None:
    tree = PrefixTree.full(3, 1)
    tree.split("00")
    assert "" not in tree.leaves() and "00" not in tree.leaves()
    assert sorted(tree.region_sizes()) == [4] * 4 + [16] * 3
    grid = tree.region_map()
    assert all(v >= 0 for row in grid for v in row)


def test_update_tree_splits_and_collapses() -> None:
    """Algorithm 2's UpdateTree: count > t splits, count <= t/4 collapses; the root is
    never collapsed and a cell at the maximal depth is never split."""
    tree = PrefixTree.full(2, 1)                  # leaves 00 01 10 11
    splits, collapses = tree.update([50, 10, 2.5, 0], threshold=10)
    assert (splits, collapses) == (1, 2)
    assert tree.nodes == {"", "00", "01", "0000", "0001", "0010", "0011"}
    # 00 (50 > 10) splits; 01 (10, neither > 10 nor <= 2.5) stays; 10 (2.5) and 11 (0)
    # collapse.
    deep = PrefixTree(1, {"", "00", "01", "10", "11"})
    deep.update([100, 100, 100, 100], threshold=1)
    assert deep.nodes == {"", "00", "01", "10", "11"}          # depth 1: no deeper cells
    root = PrefixTree(3)
    root.update([0], threshold=5)
    assert root.nodes == {""}
    with pytest.raises(ValueError):
        root.update([1, 2], threshold=1)


# -- Equations 5 to 9 -------------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "delta"), [(0.01, 1), (0.5, 1), (1.0, 2), (3.0, 1)])
def test_equation_8_inverts_equation_5(eps: float, delta: float) -> None:
    sigma = tau(eps, delta)
    assert math.isclose(phi(sigma, delta), eps, rel_tol=1e-9)
    # Equation 5 is the discrete Laplace standard deviation for scale Delta / eps.
    assert math.isclose(sigma ** 2, DiscreteLaplace(Fraction(delta) / Fraction(eps))
                        .variance(), rel_tol=1e-9)


def test_equation_7_readings() -> None:
    # One shard (U <= S_max): both readings give c U / T when S_max == U.
    assert tau_target(0.5, 1000, 10, 1000) == tau_target(0.5, 1000, 10, 1000, "printed") == 50
    # Ten shards: the per-shard target is divided by sqrt(10) (our reading); as printed
    # the term is 1.
    assert math.isclose(tau_target(1, 100000, 10, 10000), 10000 / math.sqrt(10))
    assert tau_target(1, 100000, 10, 10000, "printed") == 10000
    # U < S_max: the printed term grows, ours stays 1.
    assert tau_target(1, 100, 10, 1000, "printed") == 10 * math.sqrt(10)
    assert tau_target(1, 100, 10, 1000) == 10
    with pytest.raises(ValueError):
        tau_target(1, 1, 1, 1, "other")


@pytest.mark.parametrize(("total", "c", "b"), [("1", 0.3, 2.0), ("0.7", 1.0, 1.5),
                                                ("2.5", 0.05, 3.0), ("1/3", 0.3, 2.0)])
def test_budget_spent_over_the_rounds_equals_the_total(total: str, c: float,
                                                       b: float) -> None:
    """Algorithm 2 with Equation 9: the rounds' epsilons add up to the total exactly,
    every round but the last takes eps~ (rounded down) and leaves at least b eps~."""
    sched = BudgetSchedule(Fraction(total), c=c, b=b)
    leaves = 1
    while sched.remaining > 0:
        r = sched.next_round(2000, leaves)
        if not r.last:
            assert r.epsilon <= Fraction(repr(r.epsilon_target))
            assert b * r.epsilon_target <= float(r.remaining + r.epsilon) + 1e-12
        leaves *= 3
    assert sched.spent == Fraction(total)
    assert sched.rounds[-1].last and len(sched.rounds) >= 2
    with pytest.raises(ValueError):
        sched.next_round(2000, leaves)


def test_budget_last_round_and_max_rounds() -> None:
    sched = BudgetSchedule("1", c=0.3, b=2.0, max_rounds=2)
    first = sched.next_round(1000, 1)
    assert not first.last and first.epsilon == budget.round_down(first.epsilon_target, 6)
    second = sched.next_round(1000, 4)
    assert second.last and second.epsilon == Fraction(1) - first.epsilon
    assert budget.round_down(0.123456789, 3) == Fraction("0.123")


# -- metrics ----------------------------------------------------------------------------------


def test_spreading_over_coarse_leaves() -> None:
    """A leaf's value is spread over the cells it covers: v / (P^2 - psi)."""
    tree = PrefixTree(2, {"", "00"})          # "00" covers 4 cells, the root 12
    f = spread(tree, [6.0, 2.0])
    assert f[0][0] == f[1][1] == 2.0 / 8 / 4
    assert f[3][3] == f[0][2] == 6.0 / 8 / 12
    assert math.isclose(sum(map(sum, f)), 1.0)
    # Negative private counts are clipped at zero before normalizing.
    g = spread(tree, [-3.0, 2.0])
    assert g[3][3] == 0.0 and math.isclose(sum(map(sum, g)), 1.0)


def test_metrics_on_a_small_example() -> None:
    true = [[0.5, 0.0], [0.25, 0.25]]
    private = [[0.25, 0.25], [0.25, 0.25]]
    m = metrics(private, true)
    assert m.mse == (0.0625 + 0.0625) / 4
    assert m.l1 == 0.5
    # MAPE: |0.25 - 0.5| / 0.5 and, for the zero cell, the smallest true value 0.25.
    assert m.mape == (0.5 + 1.0) / 4
    assert math.isclose(m.smape, (2 * 0.25 / 0.75 + 2.0) / 4)
    assert math.isclose(m.maape, (math.atan(0.5) + math.pi / 2) / 4)
    assert metrics(true, true).as_dict() == {"mse": 0, "l1": 0, "mape": 0, "smape": 0,
                                             "maape": 0}


def test_true_density_counts_each_user_once() -> None:
    pop = Population(1, [[(0, 0)], [(1, 1), (1, 0)]])
    cells, weights = pop.location_weights()
    f = true_density(cells, 1, weights)
    assert f == [[0.5, 0.25], [0.0, 0.25]]


# -- Section 5.7: several locations per user --------------------------------------------------


def test_multi_location_vector() -> None:
    """Visits per leaf, normalized, scaled by gamma, stochastically rounded: the L1 norm
    stays within gamma + d, and each coordinate is unbiased (mean over 4000 draws within
    4.9 standard errors: false failure 1e-6 per coordinate)."""
    tree = PrefixTree.full(2, 1)
    index = tree.leaf_index()
    cells = [(0, 0), (0, 1), (3, 3)]            # two in leaf "00", one in leaf "11"
    rng = SeededRng(7)
    gamma = 10
    draws = [multi_location_vector(tree, index, cells, gamma, rng) for _ in range(4000)]
    assert multi_location_sensitivity(gamma, 4) == 14
    for v in draws:
        assert sum(v) <= gamma + len(v) and all(x >= 0 for x in v)
        assert v[1] == v[2] == 0
        assert v[0] in (6, 7) and v[3] in (3, 4)  # 20/3 = 6.67 and 10/3 = 3.33
    for i, expected in ((0, 20 / 3), (3, 10 / 3)):
        mean = sum(v[i] for v in draws) / len(draws)
        p = expected - math.floor(expected)
        assert abs(mean - expected) <= Z_1E6 * math.sqrt(p * (1 - p) / len(draws))


@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=12),
       st.integers(1, 10**6), st.integers(0, 2**32))
def test_multi_location_vector_bounds(cells: list[tuple[int, int]], gamma: int,
                                      seed: int) -> None:
    """Any visits, any gamma: every entry is floor or ceil of gamma * share, and the L1
    norm is at most gamma + d (the sensitivity of Section 5.7)."""
    tree = PrefixTree(3, {"", "00", "0011", "11"})
    index = tree.leaf_index()
    v = multi_location_vector(tree, index, cells, gamma, SeededRng(seed))
    counts = histogram(tree, cells)
    for x, c in zip(v, counts, strict=True):
        exact = Fraction(gamma * c, len(cells))
        assert math.floor(exact) <= x <= math.ceil(exact)
    assert sum(v) <= gamma + len(v)


# -- populations --------------------------------------------------------------------------------


def test_synthetic_city_and_points_file(tmp_path: Path) -> None:
    pop = synthetic_city(2000, 6, seed=3)
    assert len(pop.users) == 2000 and not pop.multi
    assert all(0 <= x < 64 and 0 <= y < 64 for x, y in pop.locations())
    # A few dense centres: the busiest cell holds far more than a uniform share.
    cells = [c for c in pop.locations()]
    busiest = max(cells.count(c) for c in set(cells))
    assert busiest > 20 * 2000 / 4096
    assert synthetic_city(2000, 6, seed=3).users == pop.users
    multi = synthetic_city(50, 4, seed=1, locations_per_user=3)
    assert multi.multi and all(len(u) == 3 for u in multi.users)

    path = tmp_path / "points.csv"
    path.write_text("# x,y,user\n0.5,10.0,a\n1.5,20.0,a\n2.5,30.0,b\n")
    loaded = load_points(path, 2)
    assert loaded.users == [[(0, 0), (2, 2)], [(3, 3)]]   # scaled from the bounding box
    cells_file = tmp_path / "cells.txt"
    cells_file.write_text("1 2\n3 0\n")
    assert load_points(cells_file, 2).users == [[(1, 2)], [(3, 0)]]
    bad = tmp_path / "bad.txt"
    bad.write_text("1,x\n")
    with pytest.raises(DataError, match="bad.txt:1: coordinates must be numbers"):
        load_points(bad, 2)
    with pytest.raises(DataError, match="cannot read"):
        load_points(tmp_path / "missing", 2)


# -- whole runs, noise drawn locally -----------------------------------------------------------


def run_local(pop: Population, **kwargs: Any) -> HeatmapResult:
    return asyncio.run(run_heatmap(pop, HeatmapSettings(**kwargs), None))


@pytest.mark.parametrize("noise", ["aggregator", "client-polya"])
def test_point_mass_splits_to_the_deepest_cell(noise: str) -> None:
    """Every user in one cell: the tree follows it down to the cell itself (its count,
    2000, dwarfs every threshold), and the private map puts almost all mass there."""
    pop = Population(5, [[(21, 9)] for _ in range(4000)])
    res = run_local(pop, epsilon="1", users_per_round=2000, noise=noise, c=0.3)
    cell = node_id(21, 9, 5)
    assert cell in res.tree.nodes
    assert res.epsilon_spent == Fraction(1)
    i = res.tree.leaf_index()[cell]
    # The noise at the last round's epsilon has std below 10 (aggregator, Delta = 2,
    # two shares); |noise| > 100 has probability below 1e-9.
    assert abs(res.counts[i] - 2000) < 100
    assert res.private_map[9][21] > 0.9


def test_empty_region_collapses() -> None:
    """Users only in the quadrant "00" (x and y below 16), the run started from the full
    tree at level 3 (Section 7: any starting tree): the 60 nodes below the three empty
    quadrants count only noise, and are collapsed (count <= t/4) round after round, while
    "00" is refined. With the threshold t = 2 sigma~ (k = 2), an empty leaf (its count
    is noise of standard deviation sigma~) is kept with probability P(Z in (t/4, t])
    < 0.45 and split with probability about 0.03 per round; with epsilon 4 the run has
    about 11 rounds (with epsilon 1 only 3, too few for a level-2 node to become a leaf
    and then collapse). In 40 runs of this setting no empty node survived; the bound of
    3 survivors over three runs is a wide margin on that."""
    rng = random.Random(3)
    pop = Population(5, [[(rng.randrange(16), rng.randrange(16))] for _ in range(6000)])
    start = PrefixTree.full(5, 3)
    empty_at_start = sum(1 for n in start.nodes if len(n) > 2 and n[:2] != "00")
    assert empty_at_start == 60
    survivors = collapsed = 0
    for seed in range(3):
        res = run_local(pop, epsilon="4", users_per_round=3000, noise="client-polya",
                        c=0.3, seed=seed, start_level=3)
        nodes = res.tree.nodes
        survivors += sum(1 for n in nodes if len(n) > 2 and n[:2] != "00")
        assert max(len(n) for n in nodes if n.startswith("00")) == 10   # refined to cells
        collapsed += sum(r.collapses for r in res.rounds)
    assert survivors <= 3, survivors
    assert collapsed >= 3 * 45


def test_tree_update_collapses_an_emptied_quadrant() -> None:
    """An empty quadrant split earlier: its four children count 0 and are collapsed."""
    tree = PrefixTree.full(3, 1)
    tree.split("11")
    leaves = tree.leaves()
    counts = [0.0 if n.startswith("11") else 100.0 for n in leaves]
    tree.update(counts, threshold=200)
    assert not any(n.startswith("11") and len(n) > 2 for n in tree.nodes)
    assert "11" in tree.leaves()


def test_several_shards_per_round() -> None:
    """U = 2000 users in shards of S_max = 500: four aggregations per round, whose noise
    adds up (Algorithm 1's shards; Equation 7's shard term divides each shard's target
    by sqrt(4))."""
    pop = synthetic_city(4000, 5, seed=4)
    res = run_local(pop, epsilon="1", users_per_round=2000, shard_size=500,
                    noise="client-polya", dropout="0.1")
    assert all(r.shards == 4 and r.users == 2000 for r in res.rounds)
    first = res.rounds[0]
    assert math.isclose(first.sigma_target, 0.3 * 2000 / 1 / 2)
    # Four shards of 500 with S_dp = 450: the summed noise is sqrt(4 * 500/450) times
    # one discrete Laplace at the round's epsilon.
    assert math.isclose(first.noise_std,
                        tau(float(first.epsilon), 1) * math.sqrt(4 * 500 / 450))
    assert res.epsilon_spent == 1


@pytest.mark.parametrize("rule", ["fixed", "remaining"])
def test_other_threshold_rules(rule: str) -> None:
    """Table 3's fixed T = 10 and Equation 6's k sigma_rem: the threshold each round
    used is the rule's."""
    pop = synthetic_city(4000, 5, seed=6)
    res = run_local(pop, epsilon="1", users_per_round=2000, threshold=rule,
                    fixed_threshold=10.0, noise="client-polya")
    remaining = Fraction(1)
    for r in res.rounds:
        expected = 10.0 if rule == "fixed" else 2 * tau(float(remaining), 1)
        assert math.isclose(r.threshold, expected)
        remaining -= r.epsilon
    assert remaining == 0


def test_settings_are_checked() -> None:
    pop = synthetic_city(100, 3, seed=1)
    cases: list[tuple[dict[str, Any], str]] = [({"noise": "x"}, "noise"), ({"epsilon": "0"}, "epsilon"),
                            ({"users_per_round": 101}, "users per round"),
                            ({"threshold": "x"}, "threshold"), ({"c": -1}, "c, b and k")]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            HeatmapSettings(**{"users_per_round": 50, **kwargs}).check(pop)
    multi = synthetic_city(20, 3, seed=1, locations_per_user=2)
    with pytest.raises(ValueError, match="client-polya"):
        HeatmapSettings(users_per_round=10).check(multi)


def test_multi_location_run() -> None:
    """Section 5.7 end to end (noise drawn locally): sensitivity gamma + T per round,
    counts divided back by gamma; the private map is far closer to the truth than a
    uniform map."""
    pop = synthetic_city(3000, 4, seed=5, locations_per_user=3)
    res = run_local(pop, epsilon="1", users_per_round=3000, noise="client-polya", c=0.3,
                    gamma=20)
    size = 16
    uniform = [[1 / size**2] * size for _ in range(size)]
    assert res.metrics.mse < 0.5 * metrics(uniform, res.true_map).mse
    assert res.epsilon_spent == 1
