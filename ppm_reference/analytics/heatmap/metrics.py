"""Accuracy of a heatmap: seed 003, Section 6.1 ("Accuracy metrics") and Appendix A.1.

Both maps are *normalized densities* over the n x n grid: f(x, y) is the fraction of
users at (x, y); f*(x, y) comes from the private counts of the tree's leaves. A leaf
covers its block minus the blocks of its descendants in the tree, and its value is spread
uniformly over the cells it covers ("a node representing a P x P region with value v
and psi coordinates covered by its children would yield a value of v / (P^2 - psi)").
Private counts may be negative: they are clipped at 0 before normalizing (the paper does
not say; clipping is post-processing and never increases any of these errors much).

Metrics, over all n^2 cells:

* MSE = mean (f* - f)^2 (Section 6.1);
* L1 = sum |f* - f| (Section 6.1 calls it "L1 distance"; the paper's printed magnitudes
  suggest a different normalization, which it does not state -- ours is the plain
  distance between the two distributions, in [0, 2]);
* MAPE = mean |f* - f| / f, "using the minimum location value as the denominator when
  the true value is zero" (the smallest positive f);
* sMAPE = mean 2 |f* - f| / (|f*| + |f|), 0 where both are 0;
* MAAPE = mean arctan(|f* - f| / |f|), pi/2 where f = 0 < |f*|, 0 where both are 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from ppm_reference.analytics.heatmap.tree import PrefixTree

Grid = list[list[float]]


def true_density(cells: Iterable[tuple[int, int]], depth: int,
                 weights: Iterable[float] | None = None) -> Grid:
    """f: the normalized count of users per cell (weights: a weight per location)."""
    size = 1 << depth
    grid = [[0.0] * size for _ in range(size)]
    total = 0.0
    ws = iter(weights) if weights is not None else None
    for x, y in cells:
        w = next(ws) if ws is not None else 1.0
        grid[y][x] += w
        total += w
    if total > 0:
        for row in grid:
            for i in range(size):
                row[i] /= total
    return grid


def spread(tree: PrefixTree, counts: Sequence[float], clip: bool = True) -> Grid:
    """f*: each leaf's (clipped) count spread over the cells it covers, normalized."""
    values = [max(0.0, float(c)) if clip else float(c) for c in counts]
    total = math.fsum(values)
    regions = tree.region_map()
    sizes = [0] * len(values)
    for row in regions:
        for v in row:
            sizes[v] += 1
    per_cell = [(v / total / s) if (s and total) else 0.0 for v, s in zip(values, sizes,
                                                                           strict=True)]
    return [[per_cell[v] for v in row] for row in regions]


@dataclass(frozen=True)
class Metrics:
    mse: float
    l1: float
    mape: float
    smape: float
    maape: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def metrics(private: Grid, true: Grid) -> Metrics:
    p = [v for row in private for v in row]
    t = [v for row in true for v in row]
    if len(p) != len(t):
        raise ValueError("the two maps differ in size")
    n = len(t)
    positive = [v for v in t if v > 0]
    floor = min(positive) if positive else 1.0
    sq: list[float] = []
    ab: list[float] = []
    mp: list[float] = []
    sm: list[float] = []
    ma: list[float] = []
    for fs, f in zip(p, t, strict=True):
        d = abs(fs - f)
        sq.append(d * d)
        ab.append(d)
        mp.append(d / (f if f > 0 else floor))
        denom = abs(fs) + abs(f)
        sm.append(2.0 * d / denom if denom > 0 else 0.0)
        ma.append(math.atan(d / abs(f)) if f != 0 else (math.pi / 2 if d > 0 else 0.0))
    return Metrics(mse=math.fsum(sq) / n, l1=math.fsum(ab), mape=math.fsum(mp) / n,
                   smape=math.fsum(sm) / n, maape=math.fsum(ma) / n)
