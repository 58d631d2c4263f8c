"""Recipes: the schema of a query ([MJTB+22] = paper 004, Section 4.1 and Appendix B).

A recipe is deployed to the devices; it names the query to run on the device's data, the
scheme that encodes the query output as one index of a one-hot vector, and the privacy
parameters of the query. Its JSON follows Figure 4 of the paper:

    {"recipeIdentifier": "50001", "version": "1", "intervalTimeType": "sinceBeginning",
     "AnalysisIdentifier": "com.apple.insights.keyboard-ngrams",
     "query": "select age, ngrams from KeyboardNGrams", "cohorts": ["locale"],
     "dataRecorderType": "dataContentType",
     "dataTypeContent": {
        "age": {"dataType": "BucketedType", "boundaries": [20, 30, 40, 50, 60, 70, 80]},
        "ngrams": {"dataType": "PrefixTree",
                   "tree": {"root": ["null", "hello", "i"], "hello": ["null", "world"],
                            "i": ["went", "got"]},
                   "tokens": ["a", "and", "got", "hello", "home", "i", "school", "went",
                              "world"]},
        "combinations": {"dataType": "CombinationType", "structure": ["age", "ngrams"]}},
     "privacy": {"randomizer": "symmetric-ohe", "localEpsilon": 2.5,
                 "aggregateEpsilon": 1.0, "aggregateDelta": 1e-6, "minCohort": 1000}}

(Figure 4 as printed is not valid JSON -- a comma is missing after "cohorts" and a stray
"}," closes it; `examples/figure4.json` is the corrected text.) The `privacy` object is
ours: Section 4.1 says the recipe holds "the requested local and cohort aggregate privacy
budgets for this query", without naming keys. It is optional for reading a recipe (so
that Figure 4 as printed has a size) and required by a device asked to answer it.

Data types (Appendix B):

* `BucketedType`: `boundaries` b_0 < ... < b_{k-1} give k buckets plus OOV. The paper
  lists the buckets of Figure 4 as {OOV, [20, 30], ..., [70, 80]} (six intervals) but
  counts them as 1 + 7; we read the boundaries as k bucket *starts*: [b_0, b_1), ...,
  [b_{k-2}, b_{k-1}), [b_{k-1}, +inf), and OOV for anything below b_0 or not a number.
  That gives the paper's count (1 + 7 for Figure 4).
* `PrefixTree`: the prefix tree of the n-grams found so far and the known `tokens`. Its
  leaves are the prefixes a device may extend; every (leaf, next) pair is a bucket, where
  next is a known token, OOV (a token not in the list) or the end-token (the phrase ends
  after the leaf), plus one OOV bucket for n-grams whose prefix is not a leaf:
  1 + leaves x (1 + 1 + tokens) buckets. The tree maps a node to its children; Figure 4
  names nodes by their token, which is ambiguous once a token occurs at two depths, so a
  key here is the node's *path* from the root, tokens joined by single spaces ("root" for
  the root); Figure 4's keys are all one token deep, where both readings agree. A "null"
  child marks that the node's own prefix was a complete n-gram (Figure 4: "hello" under
  the root with a "null" child); it makes no bucket. A tree whose root has no children has
  one leaf, the empty prefix: its buckets are the 1-grams (the first round of a discovery).
* `CombinationType`: the Cartesian product of the named types, in `structure` order (the
  first is the most significant digit of the index).

The encoding root is the one entry of `dataTypeContent` that no `CombinationType` names
(Figure 4: "combinations"); the leaf types are the data fields the query reads, and they
must be exactly the fields the query selects.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

#: The end-token: the phrase ends after the prefix.
END = "<end>"
#: Largest one-hot vector a recipe may ask for (a device refuses bigger ones).
MAX_BINS = 1 << 20
RANDOMIZERS = ("symmetric-ohe", "asymmetric-ohe", "none")
ANALYSIS_KEYS = ("AnalysisIdentifier", "analysisIdentifier")

#: The JSON Schema of a recipe (draft 2020-12), for documentation and other tools;
#: `parse_recipe` checks the same rules with messages that name the offending key.
RECIPE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Recipe of a federated-statistics query (paper 004, Appendix B)",
    "type": "object",
    "required": ["recipeIdentifier", "version", "query", "dataTypeContent"],
    "oneOf": [{"required": ["AnalysisIdentifier"]}, {"required": ["analysisIdentifier"]}],
    "additionalProperties": False,
    "properties": {
        "recipeIdentifier": {"type": "string", "minLength": 1},
        "version": {"type": "string", "minLength": 1},
        "intervalTimeType": {"type": "string"},
        "AnalysisIdentifier": {"type": "string", "minLength": 1},
        "analysisIdentifier": {"type": "string", "minLength": 1},
        "query": {"type": "string", "minLength": 1},
        "cohorts": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "dataRecorderType": {"const": "dataContentType"},
        "dataTypeContent": {
            "type": "object", "minProperties": 1,
            "additionalProperties": {"oneOf": [
                {"type": "object", "additionalProperties": False,
                 "required": ["dataType", "boundaries"],
                 "properties": {"dataType": {"const": "BucketedType"},
                                "boundaries": {"type": "array", "minItems": 1,
                                               "items": {"type": "number"}}}},
                {"type": "object", "additionalProperties": False,
                 "required": ["dataType", "tree", "tokens"],
                 "properties": {"dataType": {"const": "PrefixTree"},
                                "tree": {"type": "object", "required": ["root"],
                                         "additionalProperties": {
                                             "type": "array",
                                             "items": {"type": "string"}}},
                                "tokens": {"type": "array", "uniqueItems": True,
                                           "items": {"type": "string", "minLength": 1}}}},
                {"type": "object", "additionalProperties": False,
                 "required": ["dataType", "structure"],
                 "properties": {"dataType": {"const": "CombinationType"},
                                "structure": {"type": "array", "minItems": 1,
                                              "items": {"type": "string"}}}},
            ]},
        },
        "privacy": {
            "type": "object", "additionalProperties": False,
            "required": ["randomizer", "aggregateEpsilon", "aggregateDelta", "minCohort"],
            "properties": {
                "randomizer": {"enum": list(RANDOMIZERS)},
                "localEpsilon": {"type": ["number", "null"], "exclusiveMinimum": 0},
                "aggregateEpsilon": {"type": "number", "exclusiveMinimum": 0},
                "aggregateDelta": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
                "minCohort": {"type": "integer", "minimum": 1},
            },
        },
    },
}


class RecipeError(ValueError):
    """A recipe that cannot be used, with a one-line reason naming the key."""


def exact(value: Any, where: str) -> Fraction:
    """A budget number as an exact rational, read from its decimal text (0.1 is 1/10), so
    that budgets add up exactly: three queries of 0.1 fit an allowance of 0.3."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Fraction):
        raise RecipeError(f"{where} must be a number")
    try:
        out = value if isinstance(value, Fraction) else Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        raise RecipeError(f"{where} must be a number, got {value!r}") from None
    return out


# ---------------------------------------------------------------------------------------
# Data types
# ---------------------------------------------------------------------------------------


class FieldType:
    """A data type of `dataTypeContent`: a number of bins and an encoding into them."""

    name: str

    @property
    def bins(self) -> int:
        raise NotImplementedError

    def label(self, index: int) -> str:
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True)
class BucketedType(FieldType):
    """Buckets [b_i, b_{i+1}) and [b_{k-1}, inf), index 0 for OOV (see the module note on
    the paper's count)."""

    name: str
    boundaries: tuple[float, ...]

    @property
    def bins(self) -> int:
        return 1 + len(self.boundaries)

    def encode(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return 0
        if math.isnan(value) or value < self.boundaries[0]:
            return 0
        lo, hi = 0, len(self.boundaries) - 1
        while lo < hi:  # the last boundary <= value
            mid = (lo + hi + 1) // 2
            if self.boundaries[mid] <= value:
                lo = mid
            else:
                hi = mid - 1
        return 1 + lo

    def label(self, index: int) -> str:
        if index == 0:
            return "OOV"
        b = self.boundaries
        lo = b[index - 1]
        return f"[{lo:g}, {b[index]:g})" if index < len(b) else f"[{lo:g}, inf)"

    def to_json(self) -> dict[str, Any]:
        return {"dataType": "BucketedType", "boundaries": list(self.boundaries)}


@dataclass(frozen=True)
class PrefixTree(FieldType):
    """Buckets: 0 for OOV, then for leaf i: end-token, OOV token, each known token."""

    name: str
    leaves: tuple[tuple[str, ...], ...]
    tokens: tuple[str, ...]
    tree: Mapping[str, tuple[str, ...]] = field(compare=False, repr=False)
    _leaf_index: dict[tuple[str, ...], int] = field(compare=False, repr=False,
                                                   default_factory=dict)
    _token_index: dict[str, int] = field(compare=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._leaf_index.update({leaf: i for i, leaf in enumerate(self.leaves)})
        self._token_index.update({t: i for i, t in enumerate(self.tokens)})

    @classmethod
    def from_leaves(cls, name: str, leaves: Sequence[Sequence[str]],
                    tokens: Sequence[str]) -> PrefixTree:
        """The tree whose leaves are `leaves` (prefixes of equal or mixed length)."""
        tree: dict[str, list[str]] = {"root": []}
        for leaf in leaves:
            parent = "root"
            for depth, tok in enumerate(leaf):
                children = tree.setdefault(parent, [])
                if tok not in children:
                    children.append(tok)
                parent = " ".join(leaf[: depth + 1])
        return parse_prefix_tree(name, {"dataType": "PrefixTree", "tree": tree,
                                        "tokens": list(tokens)})

    @property
    def width(self) -> int:
        """Buckets per leaf: end-token, OOV token and the known tokens."""
        return 2 + len(self.tokens)

    @property
    def bins(self) -> int:
        return 1 + len(self.leaves) * self.width

    def index_of(self, leaf: int, nxt: str) -> int:
        """The bucket of (leaf number, next token), next being END, a known token or
        anything else (the OOV token)."""
        if nxt == END:
            j = 0
        else:
            t = self._token_index.get(nxt)
            j = 1 if t is None else 2 + t
        return 1 + leaf * self.width + j

    def encode(self, value: Sequence[str]) -> int:
        """`value` is a prefix followed by its next token (or END); 0 (OOV) unless the
        prefix is a leaf."""
        value = tuple(value)
        if not value:
            return 0
        leaf = self._leaf_index.get(value[:-1])
        return 0 if leaf is None else self.index_of(leaf, value[-1])

    def decode(self, index: int) -> tuple[tuple[str, ...], str | None] | None:
        """(leaf, next) of a bucket: next is END, a token, or None for the OOV token;
        None for the OOV bucket."""
        if index == 0:
            return None
        leaf, j = divmod(index - 1, self.width)
        return self.leaves[leaf], (END if j == 0 else None if j == 1 else self.tokens[j - 2])

    def label(self, index: int) -> str:
        d = self.decode(index)
        if d is None:
            return "OOV"
        leaf, nxt = d
        words = list(leaf) + ["end-token" if nxt == END else "OOV" if nxt is None else nxt]
        return " ".join(words)

    def candidates(self, phrases: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
        """Every (leaf, next) occurrence in the phrases: the n-grams this recipe can
        report for a device holding them. A leaf at the end of a phrase is followed by
        END; the empty leaf (the first round) stands before every token."""
        lengths = sorted({len(leaf) for leaf in self.leaves})
        out: list[tuple[str, ...]] = []
        for phrase in phrases:
            p = tuple(phrase)
            for n in lengths:
                last = len(p) - 1 if n == 0 else len(p) - n
                for i in range(last + 1):
                    prefix = p[i : i + n]
                    if prefix in self._leaf_index:
                        out.append(prefix + ((p[i + n],) if i + n < len(p) else (END,)))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"dataType": "PrefixTree", "tree": {k: list(v) for k, v in self.tree.items()},
                "tokens": list(self.tokens)}


@dataclass(frozen=True)
class CombinationType(FieldType):
    """The Cartesian product of its parts, first part most significant."""

    name: str
    parts: tuple[FieldType, ...]

    @property
    def bins(self) -> int:
        return math.prod(p.bins for p in self.parts)

    def combine(self, indices: Sequence[int]) -> int:
        out = 0
        for part, i in zip(self.parts, indices, strict=True):
            out = out * part.bins + i
        return out

    def split(self, index: int) -> list[int]:
        out = []
        for part in reversed(self.parts):
            index, i = divmod(index, part.bins)
            out.append(i)
        return out[::-1]

    def label(self, index: int) -> str:
        return " x ".join(p.label(i) for p, i in zip(self.parts, self.split(index),
                                                       strict=True))

    def to_json(self) -> dict[str, Any]:
        return {"dataType": "CombinationType", "structure": [p.name for p in self.parts]}


# ---------------------------------------------------------------------------------------
# The recipe
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Privacy:
    """The privacy parameters a recipe requests (paper Section 4.1 and 4.3): the local
    randomizer and its parameter eps0 (None: no local randomization, the Aggregators add
    the noise), the cohort-aggregate (epsilon, delta) and the minimum cohort m."""

    randomizer: str
    local_epsilon: Fraction | None
    aggregate_epsilon: Fraction
    aggregate_delta: float
    min_cohort: int

    def to_json(self) -> dict[str, Any]:
        return {"randomizer": self.randomizer,
                "localEpsilon": None if self.local_epsilon is None
                else _number(self.local_epsilon),
                "aggregateEpsilon": _number(self.aggregate_epsilon),
                "aggregateDelta": self.aggregate_delta, "minCohort": self.min_cohort}


def _number(x: Fraction) -> float | int:
    return int(x) if x.denominator == 1 else float(x)


@dataclass(frozen=True)
class Recipe:
    recipe_id: str
    version: str
    analysis: str
    query: str
    root: FieldType
    fields: Mapping[str, FieldType]          # the leaf types: the data fields encoded
    cohorts: tuple[str, ...] = ()
    interval_time_type: str | None = None
    privacy: Privacy | None = None
    types: Mapping[str, FieldType] = field(default_factory=dict, repr=False)

    @property
    def bins(self) -> int:
        """The length of the one-hot vector."""
        return self.root.bins

    def label(self, index: int) -> str:
        return self.root.label(index)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "recipeIdentifier": self.recipe_id, "version": self.version,
            "AnalysisIdentifier": self.analysis, "query": self.query,
            "cohorts": list(self.cohorts), "dataRecorderType": "dataContentType",
            "dataTypeContent": {name: t.to_json() for name, t in self.types.items()}}
        if self.interval_time_type is not None:
            out["intervalTimeType"] = self.interval_time_type
        if self.privacy is not None:
            out["privacy"] = self.privacy.to_json()
        return out


def _string(obj: Mapping[str, Any], key: str, where: str = "", required: bool = True
            ) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise RecipeError(f"recipe has no {where}{key}")
        return None
    if not isinstance(value, str) or not value:
        raise RecipeError(f"{where}{key} must be a non-empty string")
    return value


def _token(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or value != value.strip() \
            or any(c.isspace() for c in value):
        raise RecipeError(f"{where}: a token is a non-empty string without spaces, "
                          f"got {value!r}")
    if value in (END, "root", "null"):
        raise RecipeError(f"{where}: {value!r} is reserved")
    return value


def parse_bucketed(name: str, spec: Mapping[str, Any]) -> BucketedType:
    where = f"dataTypeContent.{name}"
    _only(spec, {"dataType", "boundaries"}, where)
    bounds = spec.get("boundaries")
    if not isinstance(bounds, list) or not bounds:
        raise RecipeError(f"{where}.boundaries must be a non-empty list of numbers")
    out: list[float] = []
    for b in bounds:
        if isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b):
            raise RecipeError(f"{where}.boundaries must be finite numbers, got {b!r}")
        if out and b <= out[-1]:
            raise RecipeError(f"{where}.boundaries must increase strictly "
                              f"({b!r} after {out[-1]!r})")
        out.append(b)
    return BucketedType(name, tuple(out))


def parse_prefix_tree(name: str, spec: Mapping[str, Any]) -> PrefixTree:
    where = f"dataTypeContent.{name}"
    _only(spec, {"dataType", "tree", "tokens"}, where)
    tokens = spec.get("tokens")
    if not isinstance(tokens, list):
        raise RecipeError(f"{where}.tokens must be a list of tokens")
    toks = tuple(_token(t, f"{where}.tokens") for t in tokens)
    if len(set(toks)) != len(toks):
        raise RecipeError(f"{where}.tokens lists a token twice")
    tree = spec.get("tree")
    if not isinstance(tree, dict) or "root" not in tree:
        raise RecipeError(f"{where}.tree must be an object with a 'root' entry")
    nodes: dict[str, tuple[str, ...]] = {}
    for key, children in tree.items():
        if not isinstance(children, list):
            raise RecipeError(f"{where}.tree.{key} must be a list of child tokens")
        kids = tuple(c if c == "null" else _token(c, f"{where}.tree.{key}")
                     for c in children)
        if len(set(kids)) != len(kids):
            raise RecipeError(f"{where}.tree.{key} lists a child twice")
        if key != "root":
            for part in key.split(" "):
                _token(part, f"{where}.tree key {key!r}")
        nodes[key] = kids
    leaves: list[tuple[str, ...]] = []
    seen: set[str] = set()
    stack: list[tuple[str, ...]] = [()]
    while stack:  # depth first, children in their listed order (no recursion limit)
        path = stack.pop()
        key = " ".join(path) if path else "root"
        seen.add(key)
        children_of = [c for c in nodes.get(key, ()) if c != "null"]
        if not children_of:
            leaves.append(path)
        stack.extend(path + (c,) for c in reversed(children_of))
    orphans = sorted(set(nodes) - seen)
    if orphans:
        raise RecipeError(f"{where}.tree: node {orphans[0]!r} is not reachable from the "
                          "root (keys are paths from the root, tokens joined by spaces)")
    return PrefixTree(name, tuple(leaves), toks, nodes)


def _only(spec: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(spec) - allowed)
    if extra:
        raise RecipeError(f"{where}: unknown key {extra[0]!r}")


def parse_privacy(spec: Any) -> Privacy:
    if not isinstance(spec, dict):
        raise RecipeError("privacy must be an object")
    _only(spec, {"randomizer", "localEpsilon", "aggregateEpsilon", "aggregateDelta",
                 "minCohort"}, "privacy")
    randomizer = spec.get("randomizer")
    if randomizer not in RANDOMIZERS:
        raise RecipeError(f"privacy.randomizer must be one of {', '.join(RANDOMIZERS)}, "
                          f"got {randomizer!r}")
    local = spec.get("localEpsilon")
    local_eps = None if local is None else exact(local, "privacy.localEpsilon")
    if randomizer == "none":
        if local_eps is not None:
            raise RecipeError("privacy.localEpsilon must be null without a randomizer")
    elif local_eps is None or local_eps <= 0:
        raise RecipeError(f"privacy.localEpsilon must be positive for {randomizer}")
    for key in ("aggregateEpsilon", "aggregateDelta", "minCohort"):
        if key not in spec:
            raise RecipeError(f"privacy has no {key}")
    agg = exact(spec["aggregateEpsilon"], "privacy.aggregateEpsilon")
    if agg <= 0:
        raise RecipeError("privacy.aggregateEpsilon must be positive")
    delta = spec["aggregateDelta"]
    if isinstance(delta, bool) or not isinstance(delta, int | float) \
            or not 0 <= delta < 1:
        raise RecipeError(f"privacy.aggregateDelta must be in [0, 1), got {delta!r}")
    m = spec["minCohort"]
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise RecipeError(f"privacy.minCohort must be a positive integer, got {m!r}")
    return Privacy(randomizer, local_eps, agg, float(delta), m)


def parse_recipe(obj: Any) -> Recipe:
    """A `Recipe` from its JSON object; RecipeError names what is wrong."""
    from ppm_reference.analytics.federated.query import QueryError, parse_query

    if not isinstance(obj, dict):
        raise RecipeError("a recipe is a JSON object")
    known = set(RECIPE_SCHEMA["properties"])
    _only(obj, known, "top level")
    recipe_id = _string(obj, "recipeIdentifier")
    version = _string(obj, "version")
    analysis_keys = [k for k in ANALYSIS_KEYS if k in obj]
    if len(analysis_keys) != 1:
        raise RecipeError("recipe needs exactly one AnalysisIdentifier")
    analysis = _string(obj, analysis_keys[0])
    query = _string(obj, "query")
    interval = _string(obj, "intervalTimeType", required=False)
    recorder = obj.get("dataRecorderType", "dataContentType")
    if recorder != "dataContentType":
        raise RecipeError(f"dataRecorderType must be 'dataContentType', got {recorder!r}")
    cohorts = obj.get("cohorts", [])
    if not isinstance(cohorts, list) or not all(isinstance(c, str) and c for c in cohorts):
        raise RecipeError("cohorts must be a list of field names")
    assert recipe_id is not None and version is not None and analysis is not None
    assert query is not None
    try:
        parsed_query = parse_query(query)
    except QueryError as exc:
        raise RecipeError(f"query: {exc}") from None

    content = obj.get("dataTypeContent")
    if not isinstance(content, dict) or not content:
        raise RecipeError("dataTypeContent must be a non-empty object")
    leaves: dict[str, FieldType] = {}
    combos: dict[str, list[str]] = {}
    for name, spec in content.items():
        where = f"dataTypeContent.{name}"
        if not isinstance(spec, dict):
            raise RecipeError(f"{where} must be an object")
        kind = spec.get("dataType")
        if kind == "BucketedType":
            leaves[name] = parse_bucketed(name, spec)
        elif kind == "PrefixTree":
            leaves[name] = parse_prefix_tree(name, spec)
        elif kind == "CombinationType":
            _only(spec, {"dataType", "structure"}, where)
            structure = spec.get("structure")
            if not isinstance(structure, list) or not structure \
                    or not all(isinstance(s, str) for s in structure):
                raise RecipeError(f"{where}.structure must be a non-empty list of names")
            if len(set(structure)) != len(structure):
                raise RecipeError(f"{where}.structure names a type twice")
            combos[name] = structure
        else:
            raise RecipeError(f"{where}.dataType must be BucketedType, PrefixTree or "
                              f"CombinationType, got {kind!r}")
    types: dict[str, FieldType] = dict(leaves)

    def build(name: str, stack: tuple[str, ...]) -> FieldType:
        if name in types:
            return types[name]
        if name not in combos:
            raise RecipeError(f"a CombinationType names {name!r}, which "
                              "dataTypeContent does not define")
        if name in stack:
            raise RecipeError(f"dataTypeContent.{name}: combinations form a cycle")
        parts = tuple(build(n, stack + (name,)) for n in combos[name])
        types[name] = CombinationType(name, parts)
        return types[name]

    for name in combos:
        build(name, ())
    used = {n for structure in combos.values() for n in structure}
    roots = [name for name in content if name not in used]
    if len(roots) != 1:
        raise RecipeError("dataTypeContent needs exactly one type that no CombinationType "
                          f"names (the encoding), found {len(roots)}: {roots}")
    root = types[roots[0]]
    reachable: dict[str, FieldType] = {}

    def collect(t: FieldType) -> None:
        if isinstance(t, CombinationType):
            for p in t.parts:
                collect(p)
        else:
            if t.name in reachable:
                raise RecipeError(f"dataTypeContent: {t.name!r} is encoded twice")
            reachable[t.name] = t

    collect(root)
    unused = sorted(set(leaves) - set(reachable))
    if unused:
        raise RecipeError(f"dataTypeContent.{unused[0]} is not part of the encoding")
    selected = set(parsed_query.fields)
    for name in reachable:
        if name not in selected:
            raise RecipeError(f"dataTypeContent encodes {name!r}, which the query does not "
                              "select")
    for name in parsed_query.fields:
        if name not in reachable:
            raise RecipeError(f"the query selects {name!r}, which dataTypeContent does "
                              "not encode")
    if root.bins > MAX_BINS:
        raise RecipeError(f"the recipe encodes {root.bins} bins, more than {MAX_BINS}")
    privacy = parse_privacy(obj["privacy"]) if "privacy" in obj else None
    return Recipe(recipe_id, version, analysis, query, root, reachable, tuple(cohorts),
                  interval, privacy, {name: types[name] for name in content})


def load_recipe(path: str | Path) -> Recipe:
    """A recipe from a JSON file; RecipeError (with the file name) for any problem."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError(f"recipe file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError(f"cannot read recipe {path}: {exc}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecipeError(f"recipe {path} is not JSON: {exc}") from None
    try:
        return parse_recipe(obj)
    except RecipeError as exc:
        raise RecipeError(f"recipe {path}: {exc}") from None
