"""The quaternary prefix tree of seed 003 (Bagdasaryan et al.), Sections 5.2, 5.3 and 5.6.

The map is a 2^L x 2^L grid of cells (x, y), 0 <= x, y < 2^L. A node is a rectangular
region named by a bit string of even length: the root is the empty string, and each
level appends a two-bit quadrant suffix. Section 5.6's worked example fixes the bits:
the suffix at level i is (bit i of x, bit i of y), most significant bits first, so that
(x = 12, y = 5) = (1100, 0101) on a 16 x 16 map lies in {} -> {10} -> {10/11} ->
{10/11/00} -> {10/11/00/01}. (The text beside it names the suffixes 00, 01, 10, 11 the
NW, NE, SE and SW quadrants, which the example contradicts -- with x growing east and y
growing south, 01 is SW and 11 is SE. We follow the example: the suffix is xbit ybit.)

Unlike a quadtree, a node may have 0 to 4 children and orphans are allowed (a node whose
parent was collapsed): the tree is just a set of node ids that always holds the root.
A location reports to the longest node id in the tree that prefixes its own full id
(Section 5.2, "longest matching prefix"); every node with fewer than four children in
the tree is a *leaf* and owns one vector coordinate ("All nodes with fewer than four
children can accumulate counts", Section 5.6). A node with four children owns no area.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

QUADRANTS = ("00", "01", "10", "11")


def node_id(x: int, y: int, depth: int, level: int | None = None) -> str:
    """The id of the node at `level` (default: the deepest, `depth`) holding cell (x, y)
    of the 2^depth x 2^depth map, by interleaving the coordinates' bits (Section 5.6)."""
    size = 1 << depth
    if not (0 <= x < size and 0 <= y < size):
        raise ValueError(f"cell ({x}, {y}) is outside the {size} x {size} map")
    level = depth if level is None else level
    if not 0 <= level <= depth:
        raise ValueError(f"level must be in [0, {depth}]")
    out = []
    for i in range(depth - 1, depth - 1 - level, -1):
        out.append(str((x >> i) & 1))
        out.append(str((y >> i) & 1))
    return "".join(out)


def ancestry(x: int, y: int, depth: int) -> list[str]:
    """Every node id containing (x, y), from the root to the deepest (Section 5.6)."""
    full = node_id(x, y, depth)
    return [full[: 2 * i] for i in range(depth + 1)]


def block(node: str, depth: int) -> tuple[int, int, int]:
    """(x0, y0, side) of the square a node covers on the 2^depth map."""
    level = len(node) // 2
    x = y = 0
    for i in range(level):
        x = (x << 1) | int(node[2 * i])
        y = (y << 1) | int(node[2 * i + 1])
    side = 1 << (depth - level)
    return x * side, y * side, side


def children(node: str) -> list[str]:
    return [node + q for q in QUADRANTS]


def parent(node: str) -> str:
    return node[:-2]


@dataclass
class PrefixTree:
    """A set of node ids over a 2^depth x 2^depth map; the root ("") is always in it.

    `leaves()` are the nodes with fewer than four children present, in a fixed order
    (by depth, then id): leaf i is coordinate i of the round's vector."""

    depth: int
    nodes: set[str] = field(default_factory=lambda: {""})

    def __post_init__(self) -> None:
        if self.depth < 1:
            raise ValueError("the map needs depth >= 1 (at least 2 x 2 cells)")
        self.nodes.add("")
        for n in self.nodes:
            if len(n) % 2 or len(n) > 2 * self.depth or set(n) - {"0", "1"}:
                raise ValueError(f"bad node id {n!r}")

    @classmethod
    def full(cls, depth: int, level: int) -> PrefixTree:
        """Every node down to `level` (the flat grid at that level has 4^level leaves)."""
        nodes = {""}
        frontier = [""]
        for _ in range(level):
            frontier = [c for n in frontier for c in children(n)]
            nodes.update(frontier)
        return cls(depth, nodes)

    def copy(self) -> PrefixTree:
        return PrefixTree(self.depth, set(self.nodes))

    def child_count(self, node: str) -> int:
        return sum(1 for c in children(node) if c in self.nodes)

    def leaves(self) -> list[str]:
        return sorted((n for n in self.nodes if self.child_count(n) < 4),
                      key=lambda n: (len(n), n))

    def leaf_index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.leaves())}

    def longest_prefix(self, full_id: str) -> str:
        """The deepest node of the tree that prefixes `full_id` (Section 5.2)."""
        for level in range(min(len(full_id), 2 * self.depth), -1, -2):
            if full_id[:level] in self.nodes:
                return full_id[:level]
        return ""

    def report_index(self, x: int, y: int, index: dict[str, int] | None = None) -> int:
        """The vector coordinate a user at (x, y) reports to (a one-hot position)."""
        index = self.leaf_index() if index is None else index
        return index[self.longest_prefix(node_id(x, y, self.depth))]

    def split(self, node: str) -> None:
        """Add the node's four children (nothing at the maximal depth)."""
        if len(node) // 2 < self.depth:
            self.nodes.update(children(node))

    def collapse(self, node: str) -> None:
        """Delete the node (its area goes to its deepest present ancestor; its children,
        if any, stay as orphans). The root is never deleted."""
        if node:
            self.nodes.discard(node)

    def update(self, counts: Sequence[float], threshold: float,
               collapse_fraction: float = 0.25) -> tuple[int, int]:
        """Algorithm 2's UpdateTree: for each leaf with count > t split it, with count
        <= t/4 collapse it. `counts` is indexed like `leaves()`. Returns (splits,
        collapses) that changed the tree."""
        leaves = self.leaves()
        if len(counts) != len(leaves):
            raise ValueError(f"{len(counts)} counts for {len(leaves)} leaves")
        splits = collapses = 0
        for node, count in zip(leaves, counts, strict=True):
            if count > threshold:
                if len(node) // 2 < self.depth and self.child_count(node) < 4:
                    self.split(node)
                    splits += 1
            elif count <= collapse_fraction * threshold and node:
                self.collapse(node)
                collapses += 1
        return splits, collapses

    def region_map(self) -> list[list[int]]:
        """grid[y][x] = the leaf index cell (x, y) reports to, by painting each node's
        block from the root down (deeper nodes overwrite their ancestors)."""
        size = 1 << self.depth
        index = self.leaf_index()
        grid = [[-1] * size for _ in range(size)]
        for node in sorted(self.nodes, key=len):
            if node not in index:
                continue   # four children: owns no area (they overwrite all of it)
            x0, y0, side = block(node, self.depth)
            value = index[node]
            row = [value] * side
            for y in range(y0, y0 + side):
                grid[y][x0:x0 + side] = row
        return grid

    def region_sizes(self) -> list[int]:
        """The number of cells each leaf covers (its block minus its descendants')."""
        sizes = [0] * len(self.leaves())
        for row in self.region_map():
            for v in row:
                sizes[v] += 1
        return sizes


def histogram(tree: PrefixTree, cells: Iterable[tuple[int, int]]) -> list[int]:
    """The true counts of the tree's leaves for users at `cells` (one location each)."""
    index = tree.leaf_index()
    counts = [0] * len(index)
    for x, y in cells:
        counts[tree.report_index(x, y, index)] += 1
    return counts


# -- communication (Section 6.2, Tables 1 and 2: "sums vector sizes for every level") ------


def flat_communication(depth: int) -> int:
    """The flat one-hot baseline at full resolution: 4^depth coordinates."""
    return 1 << (2 * depth)


def hierarchical_communication(depth: int) -> int:
    """The hierarchical one-hot baseline: one vector per level 1..depth, 4 + 16 + ... +
    4^depth coordinates (Table 1's 1,398,100 for depth 10, Table 2's 5,460 for 6)."""
    return sum(1 << (2 * level) for level in range(1, depth + 1))


def count_min_communication(width: int, rows: int) -> int:
    """A count-min sketch of `rows` x `width` counters (Table 1: 2000 x 20 = 40,000)."""
    return width * rows


def adaptive_communication(vector_lengths: Sequence[int]) -> int:
    """The adaptive algorithm: the sum of each sub-query's vector length."""
    return sum(vector_lengths)
