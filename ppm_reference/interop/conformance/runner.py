"""Running the catalogue against a target, and the reports: a table, JSON, JUnit XML."""

from __future__ import annotations

import asyncio
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from ppm_reference.dap.profiles import Profile
from ppm_reference.interop.conformance.catalogue import Check, Fail, Level, Skip
from ppm_reference.interop.conformance.context import Ctx
from ppm_reference.interop.conformance.provision import Provisioner

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass
class Result:
    check: Check
    outcome: str
    detail: str = ""
    seconds: float = 0.0
    log: list[str] = field(default_factory=list)
    profile: str = ""

    @property
    def level(self) -> Level:
        return self.check.level_for(self.profile)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.check.id, "level": str(self.level), "title": self.check.title,
                "outcome": self.outcome, "detail": self.detail,
                "seconds": round(self.seconds, 3), "tags": list(self.check.tags),
                "requests": self.log}


@dataclass
class Options:
    settle: float = 2.0
    timeout: float = 20.0
    oversize_bytes: int = 64 * 1024 * 1024 + 1
    concurrency: int = 4


async def run_checks(profile: Profile, role: str, target: str, provisioner: Provisioner,
                     checks: Sequence[Check], options: Options | None = None
                     ) -> list[Result]:
    """Run each check on a task of its own (``concurrency`` at a time; the robustness
    checks, which time requests against each other, alone at the end); after each, the
    target must still answer."""
    opts = options or Options()
    results: dict[str, Result] = {}
    conn = aiohttp.TCPConnector(limit=64, force_close=False)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=opts.timeout),
                                     connector=conn, auto_decompress=False) as session:
        async def one(c: Check) -> None:
            ctx = Ctx(profile, role, target, provisioner, session, settle=opts.settle,
                      timeout=opts.timeout, oversize_bytes=opts.oversize_bytes)
            results[c.id] = await _run_one(ctx, c, opts)
            results[c.id].profile = profile.name

        parallel = [c for c in checks if "robustness" not in c.tags]
        alone = [c for c in checks if "robustness" in c.tags]
        sem = asyncio.Semaphore(max(1, opts.concurrency))

        async def limited(c: Check) -> None:
            async with sem:
                await one(c)

        await asyncio.gather(*(limited(c) for c in parallel))
        for c in alone:
            await one(c)
    return [results[c.id] for c in checks]


async def _run_one(ctx: Ctx, c: Check, opts: Options) -> Result:
    if not c.applies_to(ctx.profile.name):
        return Result(c, SKIP, f"not applicable to {ctx.profile.name}: {c.not_applicable}")
    start = time.monotonic()
    outcome, detail = PASS, ""
    assert c.func is not None
    try:
        await asyncio.wait_for(c.func(ctx), opts.timeout * 3 + opts.settle)
    except Fail as exc:
        outcome, detail = FAIL, str(exc)
    except Skip as exc:
        outcome, detail = SKIP, str(exc)
    except TimeoutError:
        outcome, detail = FAIL, f"no outcome after {opts.timeout * 3 + opts.settle:.0f} s"
    except Exception as exc:  # noqa: BLE001 - an unexpected answer broke the check
        outcome, detail = FAIL, f"unexpected {type(exc).__name__}: {exc}"
    broken = await ctx.still_answers()
    if broken is not None:
        outcome = FAIL
        detail = (detail + "; " if detail else "") + f"the target no longer answers: {broken}"
    return Result(c, outcome, detail, time.monotonic() - start, ctx.log)


def must_failed(results: Sequence[Result]) -> list[Result]:
    return [r for r in results if r.outcome == FAIL and r.level == Level.MUST]


def summary(results: Sequence[Result]) -> dict[str, int]:
    out = {PASS: 0, FAIL: 0, SKIP: 0}
    for r in results:
        out[r.outcome] += 1
    out["must_failed"] = len(must_failed(results))
    return out


def table(results: Sequence[Result], profile: str, role: str, target: str) -> str:
    lines = [f"ppm conformance: {role} {target} ({profile})", ""]
    width = max((len(r.check.id) for r in results), default=10)
    for r in results:
        mark = {PASS: "PASS", FAIL: "FAIL", SKIP: "skip"}[r.outcome]
        lines.append(f"{r.check.id:<{width}}  {r.level:<6}  {mark}  "
                     f"{r.seconds:5.2f}s  {r.check.title}")
        if r.detail:
            lines.append(f"{'':<{width}}  {'':<6}        {r.detail}")
    s = summary(results)
    lines += ["", f"{s[PASS]} passed, {s[FAIL]} failed ({s['must_failed']} MUST), "
                  f"{s[SKIP]} skipped"]
    return "\n".join(lines)


def to_json(results: Sequence[Result], profile: str, role: str, target: str
            ) -> dict[str, Any]:
    return {"ok": not must_failed(results), "profile": profile, "role": role,
            "target": target, "summary": summary(results),
            "results": [r.to_json() for r in results]}


def junit_xml(results: Sequence[Result], profile: str, role: str, target: str) -> bytes:
    """One testsuite, one testcase per check: a failure with the detail, or skipped with
    the reason. A failed SHOULD or MAY check is a failure too, its level in the name."""
    s = summary(results)
    suite = ET.Element("testsuite", name=f"ppm conformance {role} {profile}",
                       tests=str(len(results)), failures=str(s[FAIL]), errors="0",
                       skipped=str(s[SKIP]),
                       time=f"{sum(r.seconds for r in results):.3f}")
    props = ET.SubElement(suite, "properties")
    for name, value in (("target", target), ("profile", profile), ("role", role)):
        ET.SubElement(props, "property", name=name, value=value)
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"conformance.{role}.{profile}",
                             name=f"{r.check.id} [{r.level}] {r.check.title}",
                             time=f"{r.seconds:.3f}")
        if r.outcome == FAIL:
            fail = ET.SubElement(case, "failure", message=r.detail[:500],
                                 type=str(r.level))
            fail.text = "\n".join([r.detail, "", *r.log])
        elif r.outcome == SKIP:
            ET.SubElement(case, "skipped", message=r.detail)
    root = ET.Element("testsuites")
    root.append(suite)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))
