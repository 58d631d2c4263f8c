"""Heavy hitters with Poplar1 over DAP: the Collector's walk down the prefix tree
(draft-irtf-cfrg-vdaf-20 Section 8, after BBCGGI21 Section 5).

The Clients upload their BITS-bit strings to a Poplar1 task (`ppm upload`). The
Collector then collects one batch (a time interval) once per level of the tree, each time
with the aggregation parameter `(level, candidate prefixes)`:

1. level 0: the candidates are `0` and `1`;
2. the counts come back; every candidate with a count of at least the threshold `T`
   survives, and its two children `p || 0`, `p || 1` are the next level's candidates;
3. repeat until the last level (or until no candidate survives).

The survivors of the last level are the `T`-heavy hitters: the strings held by at least
`T` Clients. The Aggregators check each parameter against the batch's previous ones
(`Poplar1.is_valid`: levels increase, every candidate extends a previous candidate), so
the walk must go one level after the other with the survivors' children, as here.

What leaks (VDAF draft, "The Aggregation Parameter"): the Collector and the Aggregators
learn the whole prefix tree (every prefix with a count of at least T, and the counts of
their children), not only the heavy hitters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Prefix = tuple[bool, ...]


class HeavyHittersError(ValueError):
    """Bad parameters for the walk (not a Poplar1 task, a threshold below 1, ...)."""


@dataclass
class Level:
    """One collection: the level, its candidate prefixes and their counts."""

    level: int
    candidates: list[Prefix]
    counts: list[int]
    report_count: int

    def survivors(self, threshold: int) -> list[tuple[Prefix, int]]:
        return [(p, c) for p, c in zip(self.candidates, self.counts, strict=True)
                if c >= threshold]


@dataclass
class HeavyHitters:
    """The result of a walk: the heavy hitters (strings and counts, by decreasing count)
    and every level collected on the way."""

    bits: int
    threshold: int
    heavy: list[tuple[Prefix, int]] = field(default_factory=list)
    levels: list[Level] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether the walk reached the leaves (False: it stopped with no survivor)."""
        return bool(self.levels) and self.levels[-1].level == self.bits - 1


def children(prefixes: Sequence[Prefix]) -> list[Prefix]:
    """The next level's candidates: both children of each prefix, sorted (Poplar1 wants
    its candidates unique and in lexicographic order)."""
    return sorted({(*p, bit) for p in prefixes for bit in (False, True)})


def bit_string(prefix: Sequence[bool]) -> str:
    return "".join("1" if b else "0" for b in prefix)


def parse_bit_string(text: str) -> Prefix:
    if not text or any(c not in "01" for c in text):
        raise HeavyHittersError(f"not a string of 0 and 1: {text!r}")
    return tuple(c == "1" for c in text)


#: Collects the batch with one encoded aggregation parameter; returns (counts, reports).
CollectFn = Callable[[bytes], Awaitable[tuple[list[int], int]]]


async def walk(vdaf: Any, collect: CollectFn, threshold: int,
               on_level: Callable[[Level], None] | None = None,
               max_candidates: int | None = None) -> HeavyHitters:
    """Walk the prefix tree of a Poplar1 batch level by level (see the module docstring).

    `collect(agg_param)` runs one collection of the batch. `max_candidates` bounds a
    level's candidates (a threshold too low for the batch could otherwise ask for 2^L
    prefixes): exceeding it raises HeavyHittersError before collecting the level."""
    if getattr(vdaf, "NAME", None) != "Poplar1":
        raise HeavyHittersError(f"heavy hitters need a Poplar1 task, not "
                                f"{getattr(vdaf, 'NAME', type(vdaf).__name__)}")
    if threshold < 1:
        raise HeavyHittersError("the threshold is a count of at least 1")
    bits = int(vdaf.bits)
    result = HeavyHitters(bits, threshold)
    survivors: list[Prefix] = [()]
    for level in range(bits):
        candidates = children(survivors)
        if max_candidates is not None and len(candidates) > max_candidates:
            raise HeavyHittersError(
                f"level {level} has {len(candidates)} candidate prefixes, more than "
                f"{max_candidates}: raise the threshold")
        counts, report_count = await collect(vdaf.encode_agg_param((level, tuple(candidates))))
        if len(counts) != len(candidates):
            raise HeavyHittersError(f"level {level}: {len(counts)} counts for "
                                    f"{len(candidates)} candidates")
        step = Level(level, candidates, [int(c) for c in counts], report_count)
        result.levels.append(step)
        if on_level is not None:
            on_level(step)
        kept = step.survivors(threshold)
        if not kept:
            break
        survivors = [p for p, _ in kept]
        if level == bits - 1:
            result.heavy = sorted(kept, key=lambda pc: (-pc[1], pc[0]))
    return result


async def collect_heavy_hitters(collector: Any, query: Any, threshold: int, *,
                                timeout: float = 120.0, poll_interval: float = 1.0,
                                on_level: Callable[[Level], None] | None = None,
                                max_candidates: int | None = None) -> HeavyHitters:
    """`walk` with a `dap.collector.Collector`: one collection job of `query` per level
    (each polled at most every `poll_interval` seconds). The Collector's task must be a
    Poplar1 task (time-interval batch mode)."""

    async def collect(agg_param: bytes) -> tuple[list[int], int]:
        coll = await collector.collect(query, agg_param, timeout=timeout,
                                       max_poll_interval=poll_interval)
        return list(coll.aggregate_result), int(coll.report_count)

    return await walk(collector.vdaf, collect, threshold, on_level=on_level,
                      max_candidates=max_candidates)


def describe(prefix: Prefix) -> dict[str, Any]:
    """A heavy hitter as bits, and as hex and text when it is whole bytes."""
    out: dict[str, Any] = {"bits": bit_string(prefix)}
    if prefix and len(prefix) % 8 == 0:
        data = bytes(int(bit_string(prefix[i : i + 8]), 2) for i in range(0, len(prefix), 8))
        out["hex"] = data.hex()
        text = data.decode("utf-8", errors="replace")
        if text.isprintable():
            out["text"] = text
    return out


__all__ = ["HeavyHitters", "HeavyHittersError", "Level", "bit_string", "children",
           "collect_heavy_hitters", "describe", "parse_bit_string", "walk"]
