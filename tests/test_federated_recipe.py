"""Recipes of paper 004 (McMillan et al.), Appendix B: Figure 4's vector length (golden),
the encodings of BucketedType / PrefixTree / CombinationType, the JSON codec (property
tests) and the clear errors of bad recipes, also through `ppm analytics recipe`."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.analytics.federated.recipe import (
    END,
    RECIPE_SCHEMA,
    BucketedType,
    CombinationType,
    PrefixTree,
    RecipeError,
    load_recipe,
    parse_recipe,
)
from ppm_reference.cli import main

FIGURE4 = Path(__file__).resolve().parent.parent / "ppm_reference" / "analytics" / "federated" / "examples" \
    / "figure4.json"


def figure4() -> dict[str, Any]:
    return dict(json.loads(FIGURE4.read_text()))


def test_figure4_vector_length_is_the_papers() -> None:
    """Appendix B: (1 + 7) x (1 + 3 x (1 + 1 + 9)) = 8 x 34 = 272 bins."""
    r = load_recipe(FIGURE4)
    assert r.bins == (1 + 7) * (1 + 3 * (1 + 1 + 9)) == 272
    assert isinstance(r.root, CombinationType)
    age, ngrams = r.root.parts
    assert isinstance(age, BucketedType) and age.bins == 8
    assert isinstance(ngrams, PrefixTree) and ngrams.bins == 34
    # The three leaves of the paper's tree; "null" children make no bucket.
    assert ngrams.leaves == (("hello", "world"), ("i", "went"), ("i", "got"))
    assert list(r.fields) == ["age", "ngrams"]
    assert r.analysis == "com.apple.insights.keyboard-ngrams"


def test_figure4_bucket_order_follows_the_paper() -> None:
    """{OOV, hello world end-token, hello world OOV, hello world a, ..., i got world}."""
    t = load_recipe(FIGURE4).fields["ngrams"]
    assert isinstance(t, PrefixTree)
    labels = [t.label(i) for i in range(t.bins)]
    assert labels[:4] == ["OOV", "hello world end-token", "hello world OOV", "hello world a"]
    assert labels[-1] == "i got world"
    assert t.encode(("hello", "world", "a")) == 3
    assert t.encode(("hello", "world", END)) == 1
    assert t.encode(("hello", "world", "zebra")) == 2        # unknown token
    assert t.encode(("i", "saw", "a")) == 0                  # prefix not a leaf
    assert t.encode(("i", "got", "world")) == 33


def test_combination_is_mixed_radix_first_part_most_significant() -> None:
    r = load_recipe(FIGURE4)
    root = r.root
    assert isinstance(root, CombinationType)
    age, ngrams = root.parts
    assert isinstance(age, BucketedType) and isinstance(ngrams, PrefixTree)
    i = root.combine([age.encode(35), ngrams.encode(("i", "went", "home"))])
    assert i == 2 * 34 + ngrams.encode(("i", "went", "home"))
    assert root.split(i) == [2, ngrams.encode(("i", "went", "home"))]
    assert r.label(i) == "[30, 40) x i went home"


@pytest.mark.parametrize("value,index", [
    (19.99, 0), (20, 1), (29.5, 1), (30, 2), (79, 6), (80, 7), (120, 7),
    (None, 0), ("35", 0), (True, 0), (float("nan"), 0)])
def test_bucketed_type(value: Any, index: int) -> None:
    t = BucketedType("age", (20, 30, 40, 50, 60, 70, 80))
    assert t.encode(value) == index


def test_first_round_tree_has_the_empty_prefix_as_its_leaf() -> None:
    t = PrefixTree.from_leaves("ngrams", [()], ["a", "b"])
    assert t.leaves == ((),) and t.bins == 1 + 1 * 4
    assert t.candidates([["a", "c", "b"]]) == [("a",), ("c",), ("b",)]
    assert [t.encode(c) for c in t.candidates([["a", "c", "b"]])] == [3, 2, 4]


def test_candidates_mark_the_end_of_a_phrase() -> None:
    t = PrefixTree.from_leaves("ngrams", [("a", "b"), ("b", "c")], ["a", "b", "c", "d"])
    assert t.candidates([["x", "a", "b", "c"], ["b", "c"]]) == [
        ("a", "b", "c"), ("b", "c", END), ("b", "c", END)]


# -- the JSON codec: parse(to_json(r)) is r ------------------------------------------------

TOKENS = st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=1, max_size=6,
                  unique=True)


@st.composite
def recipes(draw: st.DrawFn) -> dict[str, Any]:
    tokens = draw(TOKENS)
    leaves = draw(st.lists(st.lists(st.sampled_from(tokens), min_size=1, max_size=3)
                           .map(tuple), max_size=4, unique=True))
    # prefix-free leaves (a leaf that is a prefix of another is an inner node)
    leaves = [x for x in leaves if not any(len(y) > len(x) and y[: len(x)] == x
                                           for y in leaves)]
    tree = PrefixTree.from_leaves("ngrams", leaves or [()], tokens)
    bounds = draw(st.lists(st.integers(-50, 50), min_size=1, max_size=5, unique=True))
    content: dict[str, Any] = {"ngrams": tree.to_json()}
    query = "SELECT ngrams FROM S"
    if draw(st.booleans()):
        content["age"] = {"dataType": "BucketedType", "boundaries": sorted(bounds)}
        content["both"] = {"dataType": "CombinationType", "structure": ["age", "ngrams"]}
        query = "SELECT age, ngrams FROM S"
    obj: dict[str, Any] = {"recipeIdentifier": "r", "version": "1",
                           "AnalysisIdentifier": "a", "query": query,
                           "dataTypeContent": content}
    if draw(st.booleans()):
        obj["privacy"] = {"randomizer": "symmetric-ohe", "localEpsilon": 2.5,
                          "aggregateEpsilon": draw(st.sampled_from([0.1, 0.5, 1])),
                          "aggregateDelta": 1e-6, "minCohort": draw(st.integers(1, 10**6))}
    return obj


@settings(max_examples=150, deadline=None)
@given(recipes())
def test_recipe_json_round_trip(obj: dict[str, Any]) -> None:
    r = parse_recipe(obj)
    again = parse_recipe(json.loads(json.dumps(r.to_json())))
    assert again.root == r.root and again.privacy == r.privacy and again.bins == r.bins
    assert again.query == r.query and again.analysis == r.analysis
    # every leaf-extension encodes into range, distinct (leaf, next) pairs distinctly
    t = r.fields["ngrams"]
    assert isinstance(t, PrefixTree)
    seen = set()
    for leaf in t.leaves:
        for nxt in (*t.tokens, END, "zz-unknown"):
            i = t.encode(leaf + (nxt,))
            assert 1 <= i < t.bins
            seen.add(i)
    assert len(seen) == len(t.leaves) * t.width == t.bins - 1


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3)
                    | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=10))
def test_arbitrary_json_is_refused_with_a_recipe_error(obj: Any) -> None:
    with pytest.raises(RecipeError):
        parse_recipe(obj)


def test_deep_tree_is_no_problem() -> None:
    """Keys are paths, so a tree is acyclic; a deep one is walked without recursion."""
    path = [f"t{i}" for i in range(1100)]   # deeper than the recursion limit
    tree = PrefixTree.from_leaves("ngrams", [path], ["t0"])
    assert tree.leaves == (tuple(path),) and tree.bins == 1 + 3


def test_schema_lists_the_keys_the_parser_knows() -> None:
    assert set(RECIPE_SCHEMA["required"]) <= set(RECIPE_SCHEMA["properties"])
    assert set(figure4()) <= set(RECIPE_SCHEMA["properties"])


# -- bad recipes: one clear error each -----------------------------------------------------

def _bad(change: Any) -> dict[str, Any]:
    obj = copy.deepcopy(figure4())
    change(obj)
    return obj


BAD = {
    "no query": (lambda o: o.pop("query"), "recipe has no query"),
    "unreadable query": (lambda o: o.update(query="DROP TABLE x"), "not a query"),
    "field not selected": (lambda o: o.update(query="select ngrams from KeyboardNGrams"),
                           "encodes 'age', which the query does not select"),
    "field not encoded": (lambda o: o.update(query="select age, ngrams, x from K"),
                          "selects 'x'"),
    "unknown type": (lambda o: o["dataTypeContent"]["age"].update(dataType="Float"),
                     "dataType must be"),
    "boundaries not increasing": (
        lambda o: o["dataTypeContent"]["age"].update(boundaries=[20, 20]),
        "increase strictly"),
    "orphan tree node": (
        lambda o: o["dataTypeContent"]["ngrams"]["tree"].update({"zebra": ["a"]}),
        "not reachable from the root"),
    "token with a space": (
        lambda o: o["dataTypeContent"]["ngrams"]["tokens"].append("two words"),
        "without spaces"),
    "combination of an unknown type": (
        lambda o: o["dataTypeContent"]["combinations"].update(structure=["age", "zz"]),
        "does not define"),
    "two roots": (lambda o: o["dataTypeContent"].pop("combinations"),
                  "exactly one type that no CombinationType names"),
    "bad privacy": (lambda o: o.update(privacy={"randomizer": "symmetric-ohe",
                                                "localEpsilon": -1, "aggregateEpsilon": 1,
                                                "aggregateDelta": 1e-6, "minCohort": 10}),
                    "localEpsilon must be positive"),
    "unknown key": (lambda o: o.update(extra=1), "unknown key 'extra'"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_recipe_is_refused_clearly(name: str) -> None:
    change, message = BAD[name]
    with pytest.raises(RecipeError, match=message.replace("(", r"\(")):
        parse_recipe(_bad(change))


def test_cli_recipe_size(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analytics", "recipe", "size", str(FIGURE4), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": True, "bins": 272,
                                                   "recipe": "50001"}
    assert main(["analytics", "recipe", "size", str(FIGURE4)]) == 0
    assert capsys.readouterr().out.strip() == "272"


def test_cli_bad_recipe_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_bad(lambda o: o["dataTypeContent"]["age"]
                                   .update(boundaries=[]))))
    assert main(["analytics", "recipe", "size", str(bad), "--json"]) == 2
    out = capsys.readouterr()
    assert json.loads(out.out)["ok"] is False
    assert out.err.count("\n") == 1 and "boundaries must be a non-empty list" in out.err
    assert main(["analytics", "recipe", "check", str(tmp_path / "missing.json")]) == 2
    assert "recipe file not found" in capsys.readouterr().err
    (tmp_path / "notjson.json").write_text("{")
    assert main(["analytics", "recipe", "size", str(tmp_path / "notjson.json")]) == 2
    assert "is not JSON" in capsys.readouterr().err


def test_cli_recipe_check_and_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analytics", "recipe", "check", str(FIGURE4), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["bins"] == 272 and info["encoding"]["parts"][1]["leaves"] == [
        "hello world", "i went", "i got"]
    assert main(["analytics", "recipe", "schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"].startswith("Recipe")
