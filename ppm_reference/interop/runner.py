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
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from ppm_reference.dap.profiles import get_profile
from ppm_reference.interop.fields import DIALECTS as _DIALECTS
from ppm_reference.interop.fields import (
    VERSION_NAMES,
    b64decode,
    b64encode,
    interop_of,
    request_version,
    vdaf_from_descriptor,
)

Json = dict[str, Any]
#: The media type of every test API body, exactly (no charset parameter: Janus's driver
#: compares the header with this string).
JSON_MEDIA_TYPE = "application/json"


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


# ---------------------------------------------------------------------------------------
# Request bodies of each dialect
# ---------------------------------------------------------------------------------------

#: ``draft07``: draft-dcook-ppm-dap-interop-test-design-07's bodies, with ``dap_version``
#: and the DAP-18 fields next to the draft's spellings for dap-18 and later (the profile's
#: ``task_bodies``); ``janus``: the bodies Janus's interop driver sends
#: (``interop_binaries/tests/end_to_end.rs``), field for field (see interop/__init__.py).
DIALECTS: tuple[str, ...] = _DIALECTS


def _check_dialect(dialect: str) -> None:
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; known: {list(DIALECTS)}")


def _draft07_version(dap_version: str) -> bool:
    """Whether draft-07's own bodies are this version's (DAP-09: no batch_mode, the
    parameters each role uses): such a version's requests carry no ``dap_version``."""
    return not interop_of(dap_version).runner_sends_dap_version


def _janus_version_field(dap_version: str) -> Json:
    """``dap_version`` in a Janus-dialect body only where the servers could not tell the
    version from Janus's fields (a DAP-18 body means dap-18; dap-19 needs saying)."""
    inferred = request_version({"batch_mode": 1})
    return {} if dap_version == inferred else {"dap_version": dap_version}


def janus_vdaf(dap_version: str, vdaf: Json) -> Json:
    """A ``vdaf`` object as Janus spells it: integers as decimal strings; Prio3Sum and
    Prio3SumVec with ``max_measurement`` (Janus main, VDAF-18) or ``bits`` (Janus 0.7,
    VDAF-08), converted from the other spelling (``max_measurement = 2^bits - 1``)."""
    out: Json = {k: (v if k == "type" else str(v)) for k, v in vdaf.items()}
    if vdaf.get("type") not in ("Prio3Sum", "Prio3SumVec"):
        return out
    if _draft07_version(dap_version):
        if "bits" not in out and "max_measurement" in out:
            out["bits"] = str(int(out["max_measurement"]).bit_length())
        out.pop("max_measurement", None)
    else:
        if "max_measurement" not in out and "bits" in out:
            out["max_measurement"] = str(2 ** int(out["bits"]) - 1)
        out.pop("bits", None)
    return out


def add_task_body(dialect: str, role: str, *, dap_version: str, task_id: str, leader: str,
                  helper: str, vdaf: Json, batch_mode: int, min_batch_size: int,
                  time_precision: int, task_start: int | None = None,
                  task_end: int | None = None, max_batch_size: int | None = None,
                  collector_token: str | None = None, leader_token: str | None = None,
                  vdaf_verify_key: str | None = None,
                  collector_hpke_config: str | None = None,
                  dp_policy: Json | None = None) -> Json:
    """The add_task body of ``dialect`` (``"draft07"`` or ``"janus"``) for ``role``
    (``"collector"``, ``"leader"`` or ``"helper"``); times in seconds, binary values
    base64url strings, as the test API takes them.

    The Collector needs ``collector_token``; the Leader and the Helper need
    ``leader_token``, ``vdaf_verify_key`` and ``collector_hpke_config`` (the Collector's
    add_task answer), the Leader also ``collector_token``. ``max_batch_size``: the
    Leader's and Helper's, leader-selected only. draft07 sends ``task_end`` (as
    ``task_expiration`` and, for DAP-18, ``task_end``) and, for DAP-18 and later,
    ``task_start`` when given; janus sends ``task_start`` and ``task_end`` together
    (DAP-18; Janus 0.7's driver sends neither).

    Another helper provisions tasks through this function: it is the one place that knows
    each dialect's add_task body."""
    _check_dialect(dialect)
    if role not in ("collector", "leader", "helper"):
        raise ValueError(f"add_task role must be collector, leader or helper, not {role!r}")
    if role == "collector" or role == "leader":
        if collector_token is None:
            raise ValueError(f"the {role}'s add_task needs collector_token")
    if role != "collector" and None in (leader_token, vdaf_verify_key, collector_hpke_config):
        raise ValueError("an Aggregator's add_task needs leader_token, vdaf_verify_key and "
                         "collector_hpke_config")
    if dialect == "draft07":
        bodies = interop_of(dap_version).task_bodies(
            get_profile(dap_version), task_id=task_id, leader=leader, helper=helper,
            vdaf=vdaf, batch_mode=batch_mode, min_batch_size=min_batch_size,
            time_precision=time_precision,
            task_end=task_end if task_end is not None else _DEFAULT_TASK_END,
            collector_token=collector_token or "")
        body = dict(bodies.collector if role == "collector" else bodies.aggregator)
        _draft07_interval(body, dap_version, task_start, task_end)
    elif _draft07_version(dap_version):
        # Janus 0.7's driver (DAP-09): the Collector gets no helper and no time precision.
        body = {"task_id": task_id, "leader": leader, "vdaf": janus_vdaf(dap_version, vdaf)}
        if role == "collector":
            body.update(collector_authentication_token=collector_token,
                        query_type=batch_mode)
        else:
            body.update(helper=helper, max_batch_query_count=1, query_type=batch_mode,
                        min_batch_size=min_batch_size, time_precision=time_precision)
    else:
        body = {**_janus_version_field(dap_version), "task_id": task_id, "leader": leader,
                "helper": helper, "vdaf": janus_vdaf(dap_version, vdaf),
                "batch_mode": batch_mode, "min_batch_size": min_batch_size,
                "time_precision": time_precision,
                **_janus_interval(task_start, task_end)}
        if role == "collector":
            body["collector_authentication_token"] = collector_token
    if role != "collector":
        body.update(role=role, leader_authentication_token=leader_token,
                    vdaf_verify_key=vdaf_verify_key, collector_hpke_config=collector_hpke_config)
        if role == "leader":
            body["collector_authentication_token"] = collector_token
        if max_batch_size is not None and batch_mode == 2:
            body["max_batch_size"] = max_batch_size
    if dp_policy is not None:
        body["dp_policy"] = dp_policy
    return body


def upload_body(dialect: str, *, dap_version: str, task_id: str, leader: str, helper: str,
                vdaf: Json, measurement: Any, batch_mode: int, min_batch_size: int,
                time_precision: int, task_start: int | None = None,
                task_end: int | None = None, time: int | None = None,
                dp_policy: Json | None = None) -> Json:
    """The Client's upload body of ``dialect`` (see :func:`add_task_body`; ``time``:
    the report's, seconds, default the Client's clock)."""
    _check_dialect(dialect)
    if dialect == "draft07":
        body = dict(interop_of(dap_version).task_bodies(
            get_profile(dap_version), task_id=task_id, leader=leader, helper=helper,
            vdaf=vdaf, batch_mode=batch_mode, min_batch_size=min_batch_size,
            time_precision=time_precision,
            task_end=task_end if task_end is not None else _DEFAULT_TASK_END,
            collector_token="").upload)
        _draft07_interval(body, dap_version, task_start, task_end)
    elif _draft07_version(dap_version):
        body = {"task_id": task_id, "leader": leader, "helper": helper,
                "vdaf": janus_vdaf(dap_version, vdaf), "time_precision": time_precision}
    else:
        body = {**_janus_version_field(dap_version), "task_id": task_id, "leader": leader,
                "helper": helper, "vdaf": janus_vdaf(dap_version, vdaf),
                "batch_mode": batch_mode, "min_batch_size": min_batch_size,
                "time_precision": time_precision, **_janus_interval(task_start, task_end)}
    body["measurement"] = measurement
    if time is not None:
        body["time"] = time
    if dp_policy is not None:
        body["dp_policy"] = dp_policy
    return body


def collection_start_body(dialect: str, *, dap_version: str, task_id: str, batch_mode: int,
                          batch_interval: tuple[int, int] | None = None,
                          agg_param: str = "") -> Json:
    """The Collector's collection_start body: a time interval ``batch_interval``
    (start, duration; seconds) for batch mode 1, the current batch for 2."""
    _check_dialect(dialect)
    query: Json = {"type": batch_mode}
    if batch_mode == 1:
        if batch_interval is None:
            raise ValueError("a time-interval query needs batch_interval")
        query.update(batch_interval_start=batch_interval[0],
                     batch_interval_duration=batch_interval[1])
    else:
        query["subtype"] = 1                # current batch
    versioned: Json = ({"dap_version": dap_version}
                       if dialect == "draft07" and not _draft07_version(dap_version) else {})
    return {**versioned, "task_id": task_id, "agg_param": agg_param, "query": query}


def _draft07_interval(body: Json, dap_version: str, task_start: int | None,
                      task_end: int | None) -> None:
    """A draft07 body's task interval: the profile's bodies carry ``task_end`` (built with
    :data:`_DEFAULT_TASK_END` when there is none: removed again); ``task_start``, which
    DAP-09 has no counterpart of, is added for dap-18 and later."""
    if task_end is None:
        for name in ("task_end", "task_expiration"):
            body.pop(name, None)
    if task_start is not None and not _draft07_version(dap_version):
        body["task_start"] = task_start


def _janus_interval(task_start: int | None, task_end: int | None) -> Json:
    """Janus wants ``task_start`` whenever ``task_end`` is sent (and the other way)."""
    if (task_start is None) != (task_end is None):
        raise ValueError("the janus dialect sends task_start and task_end together")
    return {} if task_start is None else {"task_start": task_start, "task_end": task_end}


# The task_end a draft07 profile's task_bodies gets when the caller gives none (removed
# from the body again).
_DEFAULT_TASK_END = 2**40


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
                 collect_timeout: float = 60.0, poll_interval: float = 0.2,
                 dialect: str = "draft07") -> None:
        _check_dialect(dialect)
        self.endpoints = endpoints
        self.session = session
        self.time_precision = time_precision
        self.ready_timeout = ready_timeout
        self.collect_timeout = collect_timeout
        self.poll_interval = poll_interval
        self.dialect = dialect

    async def call(self, role: str, command: str, body: Json | None) -> Json:
        """POST ``body`` (None: no body, as Janus's driver sends ready) with
        ``Content-Type: application/json`` exactly. In the janus dialect the answer must
        have exactly that type too, as Janus's driver asserts."""
        url = urljoin(self.endpoints.of(role), f"internal/test/{command}")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": JSON_MEDIA_TYPE} if body is not None else None
        async with self.session.post(url, data=data, headers=headers) as resp:
            if resp.status != 200:
                text = await resp.text()
                raise RunnerError(f"{role} {command}: HTTP {resp.status} {text[:200]}")
            content_type = resp.headers.get("Content-Type")
            if self.dialect == "janus" and content_type != JSON_MEDIA_TYPE:
                raise RunnerError(f"{role} {command}: Content-Type {content_type!r}, not "
                                  f"{JSON_MEDIA_TYPE!r}")
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
        """POST to every role's ready until all answer 200 (draft Section 4.6): ``{}``, or
        no body in the janus dialect."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        for role in ("client", "leader", "helper", "collector"):
            while True:
                try:
                    await self.call(role, "ready", {} if self.dialect == "draft07" else None)
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

    async def _run_case(self, case: Case, outcome: Outcome) -> None:
        tp = self.time_precision
        dialect = self.dialect
        task_id = secrets.token_bytes(32)
        tid = outcome.task_id = b64encode(task_id)
        vdaf = vdaf_from_descriptor(case.vdaf, case.dap_version)
        verify_key = secrets.token_bytes(vdaf.VERIFY_KEY_SIZE)
        leader_token = secrets.token_urlsafe(24)
        collector_token = secrets.token_urlsafe(24)
        now = int(time.time())
        n = len(case.measurements)
        # draft07: dap-09 requests are draft-07's, which has no dap_version. janus: as
        # Janus's driver, task_id, role and hostname only.
        versioned = ({"dap_version": case.dap_version}
                     if dialect == "draft07" and not _draft07_version(case.dap_version)
                     else {})
        endpoint = {}
        for role in ("leader", "helper"):
            host = urlsplit(self.endpoints.of(role)).hostname or "127.0.0.1"
            out = await self.expect_success(role, "endpoint_for_task", {
                "task_id": tid, "role": role, "hostname": host, **versioned})
            ep = out.get("endpoint")
            if not isinstance(ep, str):
                raise RunnerError(f"{role} endpoint_for_task: no endpoint")
            endpoint[role] = urljoin(self.endpoints.of(role), ep)
        outcome.steps.append("endpoint_for_task")
        interval: dict[str, int | None] = {"task_end": (now // tp + 24) * tp}
        interval["task_start"] = (now // tp - 1) * tp if dialect == "janus" else None
        task: Json = {"dap_version": case.dap_version, "task_id": tid,
                      "leader": endpoint["leader"], "helper": endpoint["helper"],
                      "vdaf": case.vdaf, "batch_mode": case.batch_mode, "min_batch_size": n,
                      "time_precision": tp, "dp_policy": case.dp_policy, **interval}
        out = await self.expect_success("collector", "add_task", add_task_body(
            dialect, "collector", collector_token=collector_token, **task))
        hpke = out.get("collector_hpke_config")
        if not isinstance(hpke, str):
            raise RunnerError("collector add_task: no collector_hpke_config")
        for role in ("leader", "helper"):
            await self.expect_success(role, "add_task", add_task_body(
                dialect, role, collector_token=collector_token, leader_token=leader_token,
                vdaf_verify_key=b64encode(verify_key), collector_hpke_config=hpke,
                max_batch_size=n, **task))
        outcome.steps.append("add_task")
        for m in case.measurements:
            await self.expect_success("client", "upload", upload_body(
                dialect, measurement=m, time=now if dialect == "draft07" else None, **task))
        outcome.steps.append("upload")
        if dialect == "draft07":
            batch_interval = ((now // tp - 1) * tp, 3 * tp)
        else:                           # Janus's driver: two precisions from the start
            batch_interval = (now // tp * tp, 2 * tp)
        out = await self.expect_success("collector", "collection_start", collection_start_body(
            dialect, dap_version=case.dap_version, task_id=tid, batch_mode=case.batch_mode,
            batch_interval=batch_interval))
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
    Bearer <token>` (servers started with `ppm interop serve --token`). `kwargs` go to
    :class:`Runner` (``dialect="janus"``: Janus's bodies)."""
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
