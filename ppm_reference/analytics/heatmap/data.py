"""Populations for the heatmap runs, and what a user's device encodes.

A population is a list of users, each a list of locations (cells of the 2^depth map; a
cell listed twice was visited twice). `synthetic_city` draws one from a seeded
`random.Random` -- that is the *simulation* only; everything the protocol and the noise
draw comes from the library's CSPRNG. `load_points` reads a file of coordinates.

Users' encodings:

* one location: the one-hot position of its longest matching prefix (Section 5.2);
* several locations (Section 5.7): the user's visits per leaf, normalized to L1 norm 1,
  scaled by gamma and stochastically rounded (a value v becomes ceil(v) with probability
  v - floor(v), else floor(v)); the result has L1 norm at most gamma + d for a vector of
  length d, the sensitivity the noise is calibrated to, and the server divides the sum
  by gamma.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from ppm_reference.analytics.heatmap.tree import PrefixTree, node_id
from ppm_reference.dp_policy.mechanisms import Rng, sample_bernoulli

Cell = tuple[int, int]


@dataclass
class Population:
    depth: int
    users: list[list[Cell]]

    @property
    def size(self) -> int:
        return 1 << self.depth

    @property
    def multi(self) -> bool:
        return any(len(u) != 1 for u in self.users)

    def locations(self) -> list[Cell]:
        return [c for u in self.users for c in u]

    def location_weights(self) -> tuple[list[Cell], list[float]]:
        """Every location with weight 1/(the user's number of locations): each user
        counts once in the true map (the L1 normalization of Section 5.7)."""
        cells: list[Cell] = []
        weights: list[float] = []
        for u in self.users:
            for c in u:
                cells.append(c)
                weights.append(1.0 / len(u))
        return cells, weights


@dataclass(frozen=True)
class Centre:
    x: float          # in [0, 1): fraction of the map
    y: float
    spread: float     # standard deviation, fraction of the map
    weight: float


DEFAULT_CENTRES = (
    Centre(0.30, 0.35, 0.025, 0.35),
    Centre(0.70, 0.25, 0.04, 0.25),
    Centre(0.55, 0.72, 0.06, 0.22),
    Centre(0.18, 0.80, 0.015, 0.10),
)
BACKGROUND = 0.08     # fraction of users spread uniformly over the map


def synthetic_city(users: int, depth: int, seed: int = 2024,
                   locations_per_user: int = 1,
                   centres: Sequence[Centre] = DEFAULT_CENTRES,
                   background: float = BACKGROUND) -> Population:
    """A city with a few dense centres (2-D Gaussians) and a uniform background. With
    `locations_per_user` > 1, each user has a home as above and visits centres: its
    other locations are drawn around a centre chosen by weight (Section 5.7's traces)."""
    if users < 1 or locations_per_user < 1:
        raise ValueError("users and locations per user must be at least 1")
    rng = random.Random(seed)
    size = 1 << depth
    total_w = sum(c.weight for c in centres)

    def around(c: Centre) -> Cell:
        while True:
            x = int(rng.gauss(c.x, c.spread) * size)
            y = int(rng.gauss(c.y, c.spread) * size)
            if 0 <= x < size and 0 <= y < size:
                return x, y

    def pick() -> Centre:
        r = rng.random() * total_w
        for c in centres:
            r -= c.weight
            if r < 0:
                return c
        return centres[-1]

    def home() -> Cell:
        if rng.random() < background:
            return rng.randrange(size), rng.randrange(size)
        return around(pick())

    out: list[list[Cell]] = []
    for _ in range(users):
        locs = [home()]
        for _ in range(locations_per_user - 1):
            locs.append(around(pick()))
        out.append(locs)
    return Population(depth, out)


class DataError(ValueError):
    """A coordinates file that cannot be read."""


def load_points(path: str | Path, depth: int) -> Population:
    """Users from a text file: one location per line, `x,y` or `x,y,user` (commas or
    white space; `#` starts a comment). Lines with the same `user` belong to one user
    (Section 5.7); without it each line is a user. Integer coordinates inside the
    2^depth map are taken as cells; anything else is scaled from the points' bounding
    box onto the map."""
    rows: list[tuple[float, float, str | None]] = []
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace(",", " ").split()
        if len(parts) not in (2, 3):
            raise DataError(f"{path}:{lineno}: expected 'x,y' or 'x,y,user'")
        try:
            x, y = float(parts[0]), float(parts[1])
        except ValueError:
            raise DataError(f"{path}:{lineno}: coordinates must be numbers") from None
        if not (math.isfinite(x) and math.isfinite(y)):
            raise DataError(f"{path}:{lineno}: coordinates must be finite")
        rows.append((x, y, parts[2] if len(parts) == 3 else None))
    if not rows:
        raise DataError(f"{path}: no coordinates")
    size = 1 << depth
    as_cells = all(x.is_integer() and y.is_integer() and 0 <= x < size and 0 <= y < size
                   for x, y, _ in rows)
    if as_cells:
        cells = [(int(x), int(y)) for x, y, _ in rows]
    else:
        xs = [r[0] for r in rows]
        ys = [r[1] for r in rows]
        x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
        wx, wy = (x1 - x0) or 1.0, (y1 - y0) or 1.0
        cells = [(min(size - 1, int((x - x0) / wx * size)),
                  min(size - 1, int((y - y0) / wy * size))) for x, y, _ in rows]
    users: dict[str, list[Cell]] = {}
    for i, (cell, row) in enumerate(zip(cells, rows, strict=True)):
        users.setdefault(row[2] if row[2] is not None else f"#{i}", []).append(cell)
    return Population(depth, list(users.values()))


# -- what a device sends ----------------------------------------------------------------------


def one_hot_index(tree: PrefixTree, index: dict[str, int], cell: Cell) -> int:
    return index[tree.longest_prefix(node_id(cell[0], cell[1], tree.depth))]


def multi_location_vector(tree: PrefixTree, index: dict[str, int], cells: Sequence[Cell],
                          gamma: int, rng: Rng | None = None) -> list[int]:
    """Section 5.7's steps (1) to (5): visits per leaf, L1-normalized, scaled by gamma,
    stochastically rounded (exactly: rational values, one uniform integer per
    coordinate with a fractional part)."""
    visits = Counter(one_hot_index(tree, index, c) for c in cells)
    total = sum(visits.values())
    out = [0] * len(index)
    for i, v in visits.items():
        value = Fraction(gamma * v, total)
        whole = value.numerator // value.denominator
        frac = value - whole
        up = frac > 0 and sample_bernoulli(frac.numerator, frac.denominator, rng)
        out[i] = whole + int(up)
    return out


def multi_location_sensitivity(gamma: int, length: int) -> int:
    """gamma + d: the L1 bound of a stochastically rounded vector of length d."""
    return gamma + length
