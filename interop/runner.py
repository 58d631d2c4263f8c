"""`ppm interop run`: the test runner of draft-dcook-ppm-dap-interop-test-design-07
Section 4.7 ("Test Runner Operation"), over four already running containers/processes.

For each case: ready on all four roles (retried), a random task ID, tokens and VDAF
verification key, endpoint_for_task on the Leader and the Helper (a relative endpoint is
resolved against that role's URL), add_task on the Collector (which returns its HPKE
configuration), the Leader and the Helper, one upload per measurement through the Client,
collection_start, and collection_poll until complete; the result and report count are
compared with the expected aggregate.

The cases (:func:`default_cases`) are, for each protocol version, every Prio3 VDAF of the
draft in both batch modes (query types), plus Prio3MultihotCountVec and Prio3L1BoundSum
for dap-18 and dap-19 (VDAF-08, which dap-09 runs, has neither):

* dap-18 requests carry ``dap_version`` and the DAP-18 fields (batch_mode,
  min_batch_size, time_precision, task_end, max_measurement) to every role, next to the
  draft-07 spellings (query_type, task_expiration, max_batch_query_count, bits) where they
  do not conflict;
* dap-09 requests are draft-07's request bodies exactly (no ``dap_version``: the servers
  must recognise them as dap-09 as they would a stock draft-07 runner's), and a
  fixed_size collection must report its ``batch_id``.

Every case also checks the report count and that the collection's interval contains the
upload time.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import aiohttp

from dap.profiles import get_profile
from interop.fields import (
    VERSION_NAMES,
    b64decode,
    b64encode,
    interop_of,
    vdaf_from_descriptor,
)

Json = dict[str, Any]


class RunnerError(Exception):
    """A step of a case failed."""


@dataclass(frozen=True)
class Case:
    name: str
    vdaf: Json
    batch_mode: int                 # 1 time-interval, 2 leader-selected
    measurements: list[Any]
    expected: Any                   # the draft's result encoding; None: not compared
    dap_version: str = "dap-18"
    dp_policy: Json | None = None


@dataclass
class Outcome:
    case: Case
    passed: bool
    seconds: float
    detail: str = ""
    result: Any = None
    report_count: int | None = None
    batch_id: str | None = None
    task_id: str | None = None      # base64url, to find the case in the roles' logs
    steps: list[str] = field(default_factory=list)

    def to_json(self) -> Json:
        return {"case": self.case.name, "vdaf": self.case.vdaf["type"],
                "batch_mode": _mode_name(self.case.dap_version, self.case.batch_mode),
                "dap_version": self.case.dap_version, "passed": self.passed,
                "seconds": round(self.seconds, 2), "report_count": self.report_count,
                "result": self.result, "expected": self.case.expected,
                "batch_id": self.batch_id, "task_id": self.task_id,
                "detail": self.detail}


#: The versions the runner covers, newest first: every shipped profile with interop
#: field readers.
VERSIONS: tuple[str, ...] = VERSION_NAMES


def _mode_name(dap_version: str, batch_mode: int) -> str:
    """The draft's name of a batch mode (DAP-09 calls them query types: 2 is
    fixed_size)."""
    return interop_of(dap_version).batch_mode_names[batch_mode]


# Measurements and expected aggregates of each VDAF type; the ``vdaf`` object of a case
# is its draft's (``runner_vdafs`` of the profile's interop field readers, draft Section
# 4.1.1 attribute names and string-encoded integers), and a draft without the type has no
# case of it (VDAF-08, which dap-09 runs, has no Prio3MultihotCountVec).
_VDAF_CASES: list[tuple[str, list[Any], Any]] = [
    ("Prio3Count", ["1", "0", "1", "1", "0"], "3"),
    ("Prio3Sum", ["10", "0", "255", "7", "1"], "273"),          # max_measurement 255
    ("Prio3SumVec",                                              # length 3, max 15
     [["1", "2", "3"], ["15", "0", "0"], ["0", "0", "1"], ["2", "2", "2"], ["0", "15", "0"]],
     ["18", "19", "6"]),
    ("Prio3Histogram", ["0", "3", "3", "1", "3"], ["1", "1", "0", "3"]),  # length 4
    ("Prio3MultihotCountVec",                                    # length 4, max_weight 2
     [[True, False, False, True], [False, False, False, False], [True, True, False, False],
      [False, False, True, False], [True, False, False, False]],
     ["3", "1", "1", "1"]),
    ("Prio3L1BoundSum",                                          # length 3, max_value 10
     [["10", "0", "0"], ["1", "2", "3"], ["0", "0", "0"], ["0", "9", "1"], ["4", "4", "2"]],
     ["15", "15", "6"]),
]


def default_cases(*dap_versions: str) -> list[Case]:
    """The cases of the given versions (default: all of :data:`VERSIONS`), dap-18 first."""
    unknown = set(dap_versions) - set(VERSIONS)
    if unknown:
        raise ValueError(f"unknown DAP versions {sorted(unknown)}; known: {list(VERSIONS)}")
    cases = []
    for version in VERSIONS:
        if dap_versions and version not in dap_versions:
            continue
        vdafs = interop_of(version).runner_vdafs
        for kind, measurements, expected in _VDAF_CASES:
            vdaf = vdafs.get(kind)
            if vdaf is None:
                continue
            for mode in (1, 2):
                name = f"{version}/{vdaf['type']}/{_mode_name(version, mode)}"
                cases.append(Case(name, vdaf, mode, measurements, expected, version))
    return cases


@dataclass
class Endpoints:
    client: str
    leader: str
    helper: str
    collector: str

    def of(self, role: str) -> str:
        url: str = getattr(self, role)
        return url if url.endswith("/") else url + "/"


class Runner:
    def __init__(self, endpoints: Endpoints, session: aiohttp.ClientSession, *,
                 time_precision: int = 3600, ready_timeout: float = 30.0,
                 collect_timeout: float = 60.0, poll_interval: float = 0.2) -> None:
        self.endpoints = endpoints
        self.session = session
        self.time_precision = time_precision
        self.ready_timeout = ready_timeout
        self.collect_timeout = collect_timeout
        self.poll_interval = poll_interval

    async def call(self, role: str, command: str, body: Json) -> Json:
        url = urljoin(self.endpoints.of(role), f"internal/test/{command}")
        async with self.session.post(url, json=body) as resp:
            if resp.status != 200:
                text = await resp.text()
                raise RunnerError(f"{role} {command}: HTTP {resp.status} {text[:200]}")
            out = await resp.json(content_type=None)
        if not isinstance(out, dict):
            raise RunnerError(f"{role} {command}: answer is not a JSON object")
        return out

    async def expect_success(self, role: str, command: str, body: Json) -> Json:
        out = await self.call(role, command, body)
        if out.get("status") != "success":
            raise RunnerError(f"{role} {command}: {out.get('status')}: {out.get('error')}")
        return out

    async def wait_ready(self) -> None:
        """POST {} to every role's ready until all answer 200 (draft Section 4.6)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        for role in ("client", "leader", "helper", "collector"):
            while True:
                try:
                    await self.call(role, "ready", {})
                    break
                except (aiohttp.ClientError, RunnerError, OSError) as exc:
                    if loop.time() > deadline:
                        raise RunnerError(f"{role} not ready: {exc}") from None
                    await asyncio.sleep(0.2)

    async def run_case(self, case: Case) -> Outcome:
        start = time.monotonic()
        outcome = Outcome(case, False, 0.0)
        try:
            await self._run_case(case, outcome)
        except (TimeoutError, RunnerError, aiohttp.ClientError, ValueError) as exc:
            outcome.detail = str(exc) or type(exc).__name__
        outcome.seconds = time.monotonic() - start
        return outcome

    def _task_bodies(self, case: Case, tid: str, endpoint: dict[str, str], now: int,
                     collector_token: str) -> tuple[Json, Json, Json]:
        """The task fields of collector add_task, aggregator add_task and upload."""
        tp = self.time_precision
        task_end = (now // tp + 24) * tp
        n = len(case.measurements)
        bodies = interop_of(case.dap_version).task_bodies(
            get_profile(case.dap_version), task_id=tid, leader=endpoint["leader"],
            helper=endpoint["helper"], vdaf=case.vdaf, batch_mode=case.batch_mode,
            min_batch_size=n, time_precision=tp, task_end=task_end,
            collector_token=collector_token)
        collector, aggregator, upload = bodies.collector, bodies.aggregator, bodies.upload
        if case.batch_mode == 2:
            aggregator["max_batch_size"] = n
        if case.dp_policy is not None:
            for body in (collector, aggregator, upload):
                body["dp_policy"] = case.dp_policy
        return collector, aggregator, upload

    async def _run_case(self, case: Case, outcome: Outcome) -> None:
        tp = self.time_precision
        task_id = secrets.token_bytes(32)
        tid = outcome.task_id = b64encode(task_id)
        vdaf = vdaf_from_descriptor(case.vdaf, case.dap_version)
        verify_key = secrets.token_bytes(vdaf.VERIFY_KEY_SIZE)
        leader_token = secrets.token_urlsafe(24)
        collector_token = secrets.token_urlsafe(24)
        now = int(time.time())
        # dap-09 requests are draft-07's, which has no dap_version.
        versioned = ({"dap_version": case.dap_version}
                     if interop_of(case.dap_version).runner_sends_dap_version else {})
        endpoint = {}
        for role in ("leader", "helper"):
            out = await self.expect_success(role, "endpoint_for_task", {
                "task_id": tid, "role": role, "hostname": "127.0.0.1", **versioned})
            ep = out.get("endpoint")
            if not isinstance(ep, str):
                raise RunnerError(f"{role} endpoint_for_task: no endpoint")
            endpoint[role] = urljoin(self.endpoints.of(role), ep)
        outcome.steps.append("endpoint_for_task")
        collector, aggregator, upload = self._task_bodies(
            case, tid, endpoint, now, collector_token)
        out = await self.expect_success("collector", "add_task", collector)
        hpke = out.get("collector_hpke_config")
        if not isinstance(hpke, str):
            raise RunnerError("collector add_task: no collector_hpke_config")
        aggregator.update(leader_authentication_token=leader_token,
                          vdaf_verify_key=b64encode(verify_key), collector_hpke_config=hpke)
        await self.expect_success("leader", "add_task", {
            **aggregator, "role": "leader", "collector_authentication_token": collector_token})
        await self.expect_success("helper", "add_task", {**aggregator, "role": "helper"})
        outcome.steps.append("add_task")
        for m in case.measurements:
            await self.expect_success("client", "upload", {
                **upload, "measurement": m, "time": now})
        outcome.steps.append("upload")
        query: Json = {"type": case.batch_mode}
        if case.batch_mode == 1:
            query.update(batch_interval_start=(now // tp - 1) * tp,
                         batch_interval_duration=3 * tp)
        else:
            query["subtype"] = 1
        out = await self.expect_success("collector", "collection_start", {
            **versioned, "task_id": tid, "agg_param": "", "query": query})
        handle = out.get("handle")
        if not isinstance(handle, str):
            raise RunnerError("collection_start: no handle")
        outcome.steps.append("collection_start")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.collect_timeout
        while True:
            out = await self.call("collector", "collection_poll", {"handle": handle})
            status = out.get("status")
            if status in ("complete", "success"):
                break
            if status != "in progress":
                raise RunnerError(f"collection_poll: {status}: {out.get('error')}")
            if loop.time() > deadline:
                raise RunnerError(f"collection not complete after {self.collect_timeout} s")
            await asyncio.sleep(self.poll_interval)
        outcome.steps.append("collection_poll")
        outcome.result = out.get("result")
        outcome.report_count = out.get("report_count")
        batch_id = out.get("batch_id")
        outcome.batch_id = batch_id if isinstance(batch_id, str) else None
        outcome.passed, outcome.detail = _check(case, out, now)


def _check(case: Case, out: Json, now: int) -> tuple[bool, str]:
    """Compare a complete collection_poll answer with the case."""
    problems = []
    if case.expected is not None and out.get("result") != case.expected:
        problems.append(f"result {out.get('result')} != expected {case.expected}")
    if out.get("report_count") != len(case.measurements):
        problems.append(f"report_count {out.get('report_count')} != "
                        f"{len(case.measurements)}")
    start, duration = out.get("interval_start"), out.get("interval_duration")
    if not (isinstance(start, int) and isinstance(duration, int)
            and start <= now < start + duration):
        problems.append(f"interval [{start}, +{duration}) does not contain the upload "
                        f"time {now}")
    if interop_of(case.dap_version).reports_batch_id and case.batch_mode == 2:
        try:
            if len(b64decode(out.get("batch_id"), "batch_id")) != 32:
                problems.append("batch_id is not 32 bytes")
        except ValueError as exc:
            problems.append(f"fixed_size collection: {exc}")
    return not problems, "; ".join(problems)


async def run_all(endpoints: Endpoints, cases: list[Case], concurrency: int = 4,
                  token: str | None = None, **kwargs: Any) -> list[Outcome]:
    """Run the cases; with a `token`, every test API request carries `Authorization:
    Bearer <token>` (servers started with `ppm interop serve --token`)."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120),
                                     headers=headers) as session:
        runner = Runner(endpoints, session, **kwargs)
        await runner.wait_ready()
        sem = asyncio.Semaphore(max(1, concurrency))

        async def one(case: Case) -> Outcome:
            async with sem:
                return await runner.run_case(case)

        return list(await asyncio.gather(*(one(c) for c in cases)))


def format_table(outcomes: list[Outcome]) -> str:
    rows = [("case", "result", "seconds", "detail")]
    for o in outcomes:
        rows.append((o.case.name, "PASS" if o.passed else "FAIL", f"{o.seconds:.1f}",
                     o.detail or str(o.result)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
    passed = sum(o.passed for o in outcomes)
    lines.append(f"{passed}/{len(outcomes)} cases passed")
    return "\n".join(lines)
