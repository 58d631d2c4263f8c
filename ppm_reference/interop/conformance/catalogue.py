"""The catalogue of conformance checks: each check is a small record (an ID, the drafts
and sections it comes from, its requirement level, what it sends and exactly what it
expects, the role and profiles it applies to, its tags) and the coroutine that runs it.

The checks register themselves with :func:`check` (``interop.conformance.leader_checks``
and ``interop.conformance.helper_checks``); ``interop.conformance.registry.catalogue``
loads them and lists them in ID order.
A check function takes a :class:`interop.conformance.context.Ctx` and returns normally
when the target behaves as expected, or raises :class:`Fail` (with what was seen) or
:class:`Skip` (with why the check does not apply).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ppm_reference.dap.profiles import SHIPPED


class Level(StrEnum):
    """RFC 2119 requirement level of the draft text a check tests."""

    MUST = "MUST"
    SHOULD = "SHOULD"
    MAY = "MAY"


class Fail(Exception):
    """The target did not do what the check expects (the message says what it did)."""


class Skip(Exception):
    """The check does not apply (the message says why)."""


CheckFunc = Callable[[Any], Awaitable[None]]


@dataclass(frozen=True)
class Check:
    """One conformance check.

    ``refs`` maps a profile name to the section(s) of its draft the check comes from;
    ``profiles`` are the profiles it applies to (the others are skipped with
    ``not_applicable``); ``sends`` and ``expects`` say exactly what goes on the wire and
    what must come back (status, media type, problem type, ``taskid``, the state
    afterwards)."""

    id: str
    role: str                                   # "leader" or "helper"
    level: Level
    title: str
    refs: dict[str, str]
    sends: str
    expects: str
    tags: tuple[str, ...] = ()
    profiles: tuple[str, ...] = SHIPPED
    not_applicable: str = "the draft has no such requirement"
    # What the check's task must be: "time_interval" or "leader_selected" batch mode.
    batch_mode: str = "time_interval"
    func: CheckFunc | None = field(default=None, compare=False, repr=False)
    # Profiles whose draft states the requirement at another level (DAP-09 lets a Leader
    # ignore an expired report where DAP-18 says it MUST discard it).
    levels: dict[str, Level] = field(default_factory=dict, compare=False)

    def level_for(self, profile: str) -> Level:
        return self.levels.get(profile, self.level)

    def level_text(self) -> str:
        others = ", ".join(f"{p}: {lv}" for p, lv in self.levels.items())
        return f"{self.level} ({others})" if others else str(self.level)

    def ref_text(self, profile: str | None = None) -> str:
        """``draft-ietf-ppm-dap-18 §4.4.2`` for one profile, or every profile's."""
        from ppm_reference.dap.profiles import get_profile

        names = [profile] if profile else [p for p in self.profiles if p in self.refs]
        return "; ".join(f"{get_profile(n).draft} §{self.refs[n]}" for n in names
                         if n in self.refs)

    def applies_to(self, profile: str) -> bool:
        return profile in self.profiles

    def matches(self, selectors: Iterable[str]) -> bool:
        """Whether an ``--only``/``--skip`` selector names this check: its ID, an ID
        prefix ending in ``-`` or ``*`` (``L-UPLOAD-``), or one of its tags."""
        for s in selectors:
            if s == self.id or s in self.tags or s == self.level.value:
                return True
            if s.endswith(("*", "-")) and self.id.startswith(s.rstrip("*")):
                return True
        return False


_CHECKS: dict[str, Check] = {}


def check(id: str, role: str, level: Level, title: str, *, refs: dict[str, str],
          sends: str, expects: str, tags: Sequence[str] = (),
          profiles: Sequence[str] = SHIPPED, not_applicable: str = "",
          batch_mode: str = "time_interval", levels: dict[str, Level] | None = None
          ) -> Callable[[CheckFunc], CheckFunc]:
    """Register the decorated coroutine as the check ``id``."""
    def register(func: CheckFunc) -> CheckFunc:
        if id in _CHECKS:
            raise ValueError(f"duplicate check ID {id}")
        _CHECKS[id] = Check(id, role, level, title, dict(refs), sends, expects,
                            (role, *tags), tuple(profiles),
                            not_applicable or "the draft has no such requirement",
                            batch_mode, func, dict(levels or {}))
        return func
    return register


def registered(role: str | None = None) -> list[Check]:
    """The checks registered so far (of ``role``), in ID order; the whole catalogue is
    ``interop.conformance.registry.catalogue()``, which loads the check modules."""
    return sorted((c for c in _CHECKS.values() if role is None or c.role == role),
                  key=lambda c: c.id)


def select(checks: Sequence[Check], only: Sequence[str] = (), skip: Sequence[str] = ()
           ) -> list[Check]:
    out = [c for c in checks if not only or c.matches(only)]
    return [c for c in out if not c.matches(skip)]


def markdown(checks: Sequence[Check]) -> str:
    """``docs/conformance.md``: the catalogue as a document (``ppm conformance --list
    --markdown``)."""
    lines = [
        "# DAP conformance checks",
        "",
        "Generated from the catalogue (`interop/conformance/`) by "
        "`ppm conformance --list --markdown`; do not edit by hand "
        "(`tests/test_conformance.py` checks that it is up to date).",
        "",
        "`ppm conformance --role leader|helper --profile dap-09|dap-18|dap-19 --target URL` "
        "plays the peer of the implementation under test (Client and Collector against a "
        "Leader, Leader against a Helper) and runs these checks. Each check runs on a task "
        "of its own; after every check the target must still answer. A check of level "
        "MUST that fails makes the exit status 1.",
        "",
    ]
    for role in ("leader", "helper"):
        role_checks = [c for c in checks if c.role == role]
        if not role_checks:
            continue
        lines += [f"## {role.capitalize()} ({len(role_checks)} checks)", "",
                  "| ID | level | profiles | title | tags |", "|---|---|---|---|---|"]
        for c in role_checks:
            tags = ", ".join(t for t in c.tags if t != role)
            lines.append(f"| [{c.id}](#{c.id.lower()}) | {c.level_text()} | "
                         f"{', '.join(c.profiles)} | {c.title} | {tags} |")
        lines.append("")
        for c in role_checks:
            lines += [f"### {c.id}", "", f"**{c.level_text()}** {c.title}", "",
                      f"- From: {c.ref_text()}",
                      f"- Profiles: {', '.join(c.profiles)}"
                      + ("" if set(c.profiles) == set(SHIPPED)
                         else f" (others: skipped, {c.not_applicable})"),
                      f"- Task: {c.batch_mode.replace('_', '-')} batch mode",
                      f"- Sends: {c.sends}",
                      f"- Expects: {c.expects}", ""]
    return "\n".join(lines)
