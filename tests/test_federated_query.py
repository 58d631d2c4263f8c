"""The query-class verifier of paper 004, Section 4.2: an explicit list or a field
allowlist; queries outside the class, or unreadable ones, are refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppm_reference.analytics.federated.query import (
    QueryClass,
    QueryError,
    QueryRefused,
    parse_query,
)

IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)


@given(st.lists(IDENT, min_size=1, max_size=5, unique=True), IDENT,
       st.sampled_from(["select", "SELECT", "Select"]), st.sampled_from(["", " ", ";"]))
def test_parse_canonical_round_trip(fields: list[str], stream: str, kw: str,
                                    tail: str) -> None:
    q = parse_query(f"  {kw} {' , '.join(fields)}  from {stream}{tail}")
    assert q.fields == tuple(fields) and q.stream == stream
    assert parse_query(q.canonical) == q


@pytest.mark.parametrize("text", [
    "", "select from S", "select a b from S", "select a, a from S", "select * from S",
    "select a from S where b = 1", "delete from S", "select a from S; drop table S"])
def test_unreadable_queries(text: str) -> None:
    with pytest.raises(QueryError):
        parse_query(text)


def test_explicit_list() -> None:
    qc = QueryClass.explicit("an", ["select age, ngrams from KeyboardNGrams"])
    assert qc.verify("an", "SELECT age,ngrams FROM KeyboardNGrams").fields == (
        "age", "ngrams")
    with pytest.raises(QueryRefused, match="not in the approved list"):
        qc.verify("an", "SELECT ngrams, age FROM KeyboardNGrams")   # another query
    with pytest.raises(QueryRefused, match="not approved on this device"):
        qc.verify("other", "SELECT age, ngrams FROM KeyboardNGrams")
    with pytest.raises(QueryRefused, match="not a query"):
        qc.verify("an", "SELECT * FROM KeyboardNGrams")


def test_field_allowlist_and_cohorts() -> None:
    qc = QueryClass.from_json({"analysis": "an", "fields": {"K": ["a", "b"]},
                               "cohorts": ["locale"]})
    assert qc.verify("an", "select b from K", ["locale"]).fields == ("b",)
    with pytest.raises(QueryRefused, match="field 'c' of K"):
        qc.verify("an", "select a, c from K")
    with pytest.raises(QueryRefused, match="stream 'M'"):
        qc.verify("an", "select a from M")
    with pytest.raises(QueryRefused, match="cohort field 'country'"):
        qc.verify("an", "select a from K", ["country"])
    with pytest.raises(ValueError):
        QueryClass("an")
