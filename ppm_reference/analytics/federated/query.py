"""The query-class verifier ([MJTB+22] = paper 004, Section 4.2).

An analysis may only ask queries of an approved class, whose description ships with the
device. The paper gives two kinds of class, both here:

* an explicit list of allowed queries (the "singleton" class of a non-adaptive analysis
  is a list of one);
* an allowlist of data fields: any query that reads only those fields of the allowed
  streams is in the class. The paper suggests enforcing it in the device's DBMS; here
  the device's store (`analytics.federated.device.DataStore`) only serves the fields a
  verified query names, and the verifier runs before the store is touched.

Queries are a deliberately small language, `SELECT field[, field...] FROM stream`
(keywords in any case): a query the verifier cannot read is refused, never guessed at.
A class also lists the non-sensitive cohort fields a recipe may name (Appendix B,
"cohorts").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_QUERY = re.compile(rf"^\s*select\s+({_IDENT}(?:\s*,\s*{_IDENT})*)\s+from\s+({_IDENT})\s*;?\s*$",
                    re.IGNORECASE)


class QueryError(ValueError):
    """A query the verifier cannot read."""


class QueryRefused(Exception):
    """A recipe whose query is outside the device's approved query class."""


@dataclass(frozen=True)
class Query:
    fields: tuple[str, ...]
    stream: str

    @property
    def canonical(self) -> str:
        return f"SELECT {', '.join(self.fields)} FROM {self.stream}"


def parse_query(text: str) -> Query:
    """`SELECT a, b FROM Stream` -> Query(("a", "b"), "Stream"); QueryError otherwise."""
    m = _QUERY.match(text)
    if m is None:
        raise QueryError(f"not a query of the form 'SELECT field, ... FROM stream': {text!r}")
    fields = tuple(f.strip() for f in m.group(1).split(","))
    if len(set(fields)) != len(fields):
        raise QueryError(f"the query selects a field twice: {text!r}")
    return Query(fields, m.group(2))


@dataclass(frozen=True)
class QueryClass:
    """The approved query class of one analysis: `queries` (an explicit list) or
    `fields` (stream -> allowed fields); `cohorts` are the approved non-sensitive
    fields. With both `queries` and `fields`, a query must satisfy both."""

    analysis: str
    queries: frozenset[str] | None = None
    fields: Mapping[str, frozenset[str]] | None = None
    cohorts: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.queries is None and self.fields is None:
            raise ValueError("a query class needs a list of queries or a field allowlist")

    @classmethod
    def explicit(cls, analysis: str, queries: Iterable[str],
                 cohorts: Iterable[str] = ()) -> QueryClass:
        return cls(analysis, frozenset(parse_query(q).canonical for q in queries), None,
                   frozenset(cohorts))

    @classmethod
    def allowlist(cls, analysis: str, fields: Mapping[str, Iterable[str]],
                  cohorts: Iterable[str] = ()) -> QueryClass:
        return cls(analysis, None, {s: frozenset(f) for s, f in fields.items()},
                   frozenset(cohorts))

    @classmethod
    def from_json(cls, obj: Any) -> QueryClass:
        """{"analysis": ..., "queries": [...]} or {"analysis": ..., "fields":
        {"Stream": ["a", "b"]}}, with an optional "cohorts" list."""
        if not isinstance(obj, dict) or not isinstance(obj.get("analysis"), str):
            raise ValueError("a query class is an object with an 'analysis' string")
        queries = obj.get("queries")
        fields = obj.get("fields")
        cohorts = obj.get("cohorts", [])
        return cls(obj["analysis"],
                   None if queries is None else
                   frozenset(parse_query(q).canonical for q in queries),
                   None if fields is None else
                   {s: frozenset(f) for s, f in dict(fields).items()},
                   frozenset(cohorts))

    def verify(self, analysis: str, query_text: str, cohorts: Iterable[str] = ()) -> Query:
        """The parsed query if it belongs to the class; QueryRefused otherwise."""
        if analysis != self.analysis:
            raise QueryRefused(f"analysis {analysis!r} is not approved on this device "
                               f"(its query class is for {self.analysis!r})")
        try:
            query = parse_query(query_text)
        except QueryError as exc:
            raise QueryRefused(str(exc)) from None
        if self.queries is not None and query.canonical not in self.queries:
            raise QueryRefused(f"query {query.canonical!r} is not in the approved list of "
                               f"analysis {analysis!r}")
        if self.fields is not None:
            allowed = self.fields.get(query.stream)
            if allowed is None:
                raise QueryRefused(f"stream {query.stream!r} is not approved for analysis "
                                   f"{analysis!r}")
            denied = [f for f in query.fields if f not in allowed]
            if denied:
                raise QueryRefused(f"field {denied[0]!r} of {query.stream} is not approved "
                                   f"for analysis {analysis!r}")
        bad = [c for c in cohorts if c not in self.cohorts]
        if bad:
            raise QueryRefused(f"cohort field {bad[0]!r} is not an approved non-sensitive "
                               f"field of analysis {analysis!r}")
        return query
