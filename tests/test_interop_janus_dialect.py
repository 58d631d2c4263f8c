"""Our four interop roles driven exactly as Janus's interop driver drives its own
(divviup/janus ``interop_binaries/tests/end_to_end.rs``, ``run()`` and its five
scenarios), for the two Janus lines we meet:

* ``janus-0.7`` (DAP-09, VDAF-08): the requests, field for field, of the stored
  end_to_end.rs of the 0.7 era (``query_type``, ``bits``, 16-byte verification key,
  ``max_batch_query_count``, the Collector without ``helper``);
* ``janus-main`` (DAP-18, VDAF-18): the same driver with Janus main's DAP-18 fields, as
  measured in issue 13 and in its interop binaries (``batch_mode``, ``max_measurement`` for
  Prio3Sum and Prio3SumVec, 32-byte key, every role given the TaskConfiguration's fields,
  ``task_start`` with ``task_end``, no ``task_info``: Janus binds ``task-info``).

Every response gets the driver's assertions: HTTP 200, ``Content-Type`` exactly
``application/json``, a JSON object, ``status`` ``"success"`` (``"complete"`` for the
final poll), ``endpoint`` ``"/"`` (and the DAP URLs are the roles' root URLs),
``collector_hpke_config`` / ``handle`` strings, ``batch_id`` base64url for a fixed-size
collection (DAP-09; a DAP-18 collection has no batch ID), ``report_count`` an integer,
``interval_start`` / ``interval_duration`` numbers, and the scenario's check of
``result`` (a string / an array of strings). We also check the exact aggregate (the
driver does not), and that every DAP request between our roles went to the root path
with ``DAP-Auth-Token`` and no ``Authorization`` (what Janus's interop aggregator
accepts for DAP-18).

The roles are our in-process `ppm interop serve` applications on 127.0.0.1 (one set for
the module; Janus starts fresh containers per scenario, which changes nothing the driver
sees: every scenario has its own task). The driver is synchronous (urllib), in the test
thread, as Janus's is a client of the containers.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web

from ppm_reference.dap.collector import Collector
from ppm_reference.dap.core.tasks import TaskOptions, auth_header_for
from ppm_reference.dap.hpke import generate_keypair
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.profiles.dap18 import DAP_18
from ppm_reference.dap.profiles.dap18.interop import task_from_fields
from ppm_reference.dap.server.serving import HttpLimits, start_site
from ppm_reference.interop import runner as r
from ppm_reference.interop import server
from ppm_reference.interop.fields import request_dialect
from tests.dap_harness import free_port

JSON_MEDIA_TYPE = "application/json"
TIME_PRECISION = 3600


# ---------------------------------------------------------------------------------------
# The four roles, in a thread of their own
# ---------------------------------------------------------------------------------------


@dataclass
class Roles:
    urls: dict[str, str]
    # (role, path, has DAP-Auth-Token, has Authorization) of every DAP request the Leader
    # and the Helper received.
    dap_requests: list[tuple[str, str, bool, bool]]


def _recorder(role: str, seen: list[tuple[str, str, bool, bool]]) -> Any:
    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        if not request.path.startswith("/internal/test/") \
                and server.REDISPATCHED not in request:
            seen.append((role, request.path, "DAP-Auth-Token" in request.headers,
                         "Authorization" in request.headers))
        response: web.StreamResponse = await handler(request)
        return response

    return record


@pytest.fixture(scope="module")
def roles() -> Iterator[Roles]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    seen: list[tuple[str, str, bool, bool]] = []
    runners: list[Any] = []
    urls: dict[str, str] = {}

    async def start() -> None:
        for role in server.ROLES:
            app = server.build_interop_app(role)
            if role in ("leader", "helper"):
                app.middlewares.append(_recorder(role, seen))
            port = free_port()
            runners.append(await start_site(app, "127.0.0.1", port, HttpLimits()))
            urls[role] = f"http://127.0.0.1:{port}/"

    async def stop() -> None:
        for runner in runners:
            await runner.cleanup()

    asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield Roles(urls, seen)
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


# ---------------------------------------------------------------------------------------
# The driver: end_to_end.rs's run()
# ---------------------------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def post(url: str, body: Any | None) -> tuple[int, str | None, Any]:
    """POST (a JSON body, or none as the driver's readiness probe): status,
    Content-Type, parsed body."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": JSON_MEDIA_TYPE} if body is not None else {}
    req = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, resp.headers.get("Content-Type"), json.loads(raw or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), None


def call(base: str, command: str, body: Any, what: str) -> dict[str, Any]:
    """One test API request with the assertions the driver makes on every answer."""
    status, content_type, out = post(f"{base}internal/test/{command}", body)
    assert status == 200, f"{what}: HTTP {status}"
    assert content_type == JSON_MEDIA_TYPE, f"{what}: Content-Type {content_type!r}"
    assert isinstance(out, dict), f"{what} response is not an object"
    return out


def expect_success(base: str, command: str, body: Any, what: str) -> dict[str, Any]:
    out = call(base, command, body, what)
    assert "status" in out, f'{what} response is missing "status"'
    assert out["status"] == "success", f"{what} error: {out.get('error')}"
    return out


def await_ready_ok(base: str) -> None:
    """await_ready_ok: POST /internal/test/ready (no body) every 250 ms until a success
    status, for at most 30 s."""
    deadline = time.monotonic() + 30
    while True:
        try:
            status, _, _ = post(f"{base}internal/test/ready", None)
            if 200 <= status < 300:
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{base} not ready"
        time.sleep(0.25)


@dataclass(frozen=True)
class Line:
    """What differs between the two Janus lines' drivers."""

    name: str
    dap_version: str
    verify_key_length: int
    leader_selected: str            # the name of batch mode 2
    # (task_id, leader, helper, vdaf, token, mode, n) -> collector add_task body
    collector_body: Callable[..., dict[str, Any]]
    # (task_id, leader, helper, vdaf, mode, n) -> what the Aggregators' bodies share
    aggregator_body: Callable[..., dict[str, Any]]
    # (task_id, leader, helper, vdaf, mode, n) -> upload body without the measurement
    upload_body: Callable[..., dict[str, Any]]


def _task_interval(now: int) -> dict[str, int]:
    return {"task_start": (now // TIME_PRECISION - 1) * TIME_PRECISION,
            "task_end": (now // TIME_PRECISION + 24) * TIME_PRECISION}


JANUS_07 = Line(
    "janus-0.7", "dap-09", 16, "fixed_size",
    collector_body=lambda tid, leader, helper, vdaf, token, mode, n, now: {
        "task_id": tid, "leader": leader, "vdaf": vdaf,
        "collector_authentication_token": token, "query_type": mode},
    aggregator_body=lambda tid, leader, helper, vdaf, mode, n, now: {
        "task_id": tid, "leader": leader, "helper": helper, "vdaf": vdaf,
        "max_batch_query_count": 1, "query_type": mode, "min_batch_size": n,
        "time_precision": TIME_PRECISION},
    upload_body=lambda tid, leader, helper, vdaf, mode, n, now: {
        "task_id": tid, "leader": leader, "helper": helper, "vdaf": vdaf,
        "time_precision": TIME_PRECISION},
)

JANUS_MAIN = Line(
    "janus-main", "dap-18", 32, "leader_selected",
    collector_body=lambda tid, leader, helper, vdaf, token, mode, n, now: {
        "task_id": tid, "leader": leader, "helper": helper, "vdaf": vdaf,
        "batch_mode": mode, "min_batch_size": n, "time_precision": TIME_PRECISION,
        **_task_interval(now), "collector_authentication_token": token},
    aggregator_body=lambda tid, leader, helper, vdaf, mode, n, now: {
        "task_id": tid, "leader": leader, "helper": helper, "vdaf": vdaf,
        "batch_mode": mode, "min_batch_size": n, "time_precision": TIME_PRECISION,
        **_task_interval(now)},
    upload_body=lambda tid, leader, helper, vdaf, mode, n, now: {
        "task_id": tid, "leader": leader, "helper": helper, "vdaf": vdaf,
        "batch_mode": mode, "min_batch_size": n, "time_precision": TIME_PRECISION,
        **_task_interval(now)},
)


def run(roles: Roles, line: Line, leader_selected: bool, vdaf: dict[str, Any],
        measurements: list[Any]) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """end_to_end.rs's run(): one whole aggregation through the four roles. Returns the
    result, the complete collection_poll answer and the bodies sent (for the runner's
    comparison)."""
    urls = roles.urls
    mode = 2 if leader_selected else 1
    for role in server.ROLES:
        await_ready_ok(urls[role])
    task_id = b64(secrets.token_bytes(32))
    aggregator_auth_token = b64(secrets.token_bytes(16))
    collector_auth_token = b64(secrets.token_bytes(16))
    vdaf_verify_key = b64(secrets.token_bytes(line.verify_key_length))
    n = len(measurements)
    now = int(time.time())
    # The roles' URLs as the others reach them (Janus: the container names).
    leader, helper = urls["leader"], urls["helper"]

    for role in ("leader", "helper"):
        out = expect_success(urls[role], "endpoint_for_task", {
            "task_id": task_id, "role": role, "hostname": "127.0.0.1"},
            f"{role} endpoint_for_task")
        assert "endpoint" in out, 'endpoint_for_task response is missing "endpoint"'
        assert out["endpoint"] == "/"

    collector_body = line.collector_body(task_id, leader, helper, vdaf, collector_auth_token,
                                         mode, n, now)
    out = expect_success(urls["collector"], "add_task", collector_body,
                         "collector add_task")
    assert "collector_hpke_config" in out
    hpke = out["collector_hpke_config"]
    assert isinstance(hpke, str), '"collector_hpke_config" value is not a string'

    shared = line.aggregator_body(task_id, leader, helper, vdaf, mode, n, now)
    bodies = {"collector": collector_body}
    for role in ("leader", "helper"):
        body = {**shared, "leader_authentication_token": aggregator_auth_token,
                "role": role, "vdaf_verify_key": vdaf_verify_key,
                "collector_hpke_config": hpke}
        if role == "leader":
            body["collector_authentication_token"] = collector_auth_token
        if leader_selected:
            body["max_batch_size"] = n
        bodies[role] = body
        expect_success(urls[role], "add_task", body, f"{role} add_task")

    start_timestamp = int(time.time())
    upload = line.upload_body(task_id, leader, helper, vdaf, mode, n, now)
    bodies["upload"] = upload
    for measurement in measurements:
        expect_success(urls["client"], "upload", {**upload, "measurement": measurement},
                       "upload")

    if leader_selected:
        query: dict[str, Any] = {"type": mode, "subtype": 1}      # current_batch
    else:
        # Two time precisions from the rounded-down start, in case the uploads spilled
        # over a batch boundary.
        query = {"type": mode,
                 "batch_interval_start": start_timestamp // TIME_PRECISION * TIME_PRECISION,
                 "batch_interval_duration": TIME_PRECISION * 2}
    bodies["query"] = query

    # A current-batch query may fail until enough reports are ready: retried every
    # second for 15 s (a time-interval one is not retried).
    attempts_deadline = time.monotonic() + (15 if leader_selected else 0)
    while True:
        out = expect_success(urls["collector"], "collection_start", {
            "task_id": task_id, "agg_param": b64(b""), "query": query},
            "collection_start")
        assert "handle" in out, 'collection_start response is missing "handle"'
        handle = out["handle"]
        assert isinstance(handle, str), '"handle" value is not a string'
        poll_deadline = time.monotonic() + 60
        while True:
            poll = call(urls["collector"], "collection_poll", {"handle": handle},
                        "collection_poll")
            assert "status" in poll, 'collection_poll response is missing "status"'
            status = poll["status"]
            assert isinstance(status, str), '"status" value is not a string'
            if status != "in progress":
                break
            assert time.monotonic() < poll_deadline, "timed out fetching aggregation result"
            time.sleep(0.5)
        if status == "error":
            assert time.monotonic() < attempts_deadline, (
                f"timed out waiting for collect to succeed: {poll.get('error')}")
            time.sleep(1)
            continue
        assert status == "complete", f"error: {poll.get('error')}"
        break
    if leader_selected and line.dap_version == "dap-09":
        batch_id = poll.get("batch_id")
        assert isinstance(batch_id, str), 'completed poll is missing "batch_id"'
        base64.urlsafe_b64decode(batch_id + "=" * (-len(batch_id) % 4))
    assert isinstance(poll.get("report_count"), int), '"report_count" is not an integer'
    assert not isinstance(poll["report_count"], bool)
    for name in ("interval_start", "interval_duration"):
        assert isinstance(poll.get(name), int | float), f'"{name}" is not a number'
    assert "result" in poll, 'completed collection_poll response is missing "result"'
    return poll["result"], poll, bodies


# ---------------------------------------------------------------------------------------
# The five scenarios
# ---------------------------------------------------------------------------------------


def _vdaf(line: Line, vdaf: dict[str, Any]) -> dict[str, Any]:
    """The driver's Prio3Sum / Prio3SumVec objects take ``bits`` on 0.7 and
    ``max_measurement`` on main. Janus 0.7's scenarios use 64 bits; a VDAF-18 Prio3Sum
    cannot express 2^64 - 1 (Field64), so main's Sum case uses 2^32 - 1."""
    if line.dap_version == "dap-09" or vdaf["type"] not in ("Prio3Sum", "Prio3SumVec"):
        return vdaf
    out = {k: v for k, v in vdaf.items() if k != "bits"}
    bits = 32 if vdaf["type"] == "Prio3Sum" else int(vdaf["bits"])
    out["max_measurement"] = str(2**bits - 1)
    return out


def is_string(result: Any) -> bool:
    return isinstance(result, str)


def is_string_array(result: Any) -> bool:
    return isinstance(result, list) and all(isinstance(e, str) for e in result)


COUNT = ["0", "1", "1", "0", "1", "0", "1", "0", "1", "1", "0", "1", "0", "1", "0", "0",
         "0", "0"]
COUNT_FIXED = ["0", "1", "1", "1", "0", "1", "0", "1", "0", "0"]
SUM = ["0", "10", "9", "21", "8", "12", "14"]
SUM_VEC = [["0", "0", "0", "10"], ["0", "0", "10", "0"], ["0", "10", "0", "0"],
           ["10", "0", "0", "0"]]
HISTOGRAM = ["0", "1", "2", "3", "4", "5"]

# (name, leader-selected, vdaf, measurements, the driver's check, our exact aggregate)
SCENARIOS: list[tuple[str, bool, dict[str, Any], list[Any], Callable[[Any], bool], Any]] = [
    ("e2e_prio3_count", False, {"type": "Prio3Count"}, COUNT, is_string, "8"),
    ("e2e_prio3_sum", False, {"type": "Prio3Sum", "bits": "64"}, SUM, is_string, "74"),
    ("e2e_prio3_sum_vec", False,
     {"type": "Prio3SumVec", "bits": "64", "length": "4", "chunk_length": "18"}, SUM_VEC,
     is_string_array, ["10", "10", "10", "10"]),
    ("e2e_prio3_histogram", False,
     {"type": "Prio3Histogram", "length": "6", "chunk_length": "2"}, HISTOGRAM,
     is_string_array, ["1", "1", "1", "1", "1", "1"]),
    ("e2e_prio3_count_{leader_selected}", True, {"type": "Prio3Count"}, COUNT_FIXED,
     is_string, "5"),
]

CASES = [pytest.param(line, *scenario, id=f"{line.name}/"
                      + scenario[0].format(leader_selected=line.leader_selected))
         for line in (JANUS_MAIN, JANUS_07) for scenario in SCENARIOS]


@pytest.mark.parametrize("line, name, leader_selected, vdaf, measurements, check, expected",
                         CASES)
def test_janus_end_to_end(roles: Roles, line: Line, name: str, leader_selected: bool,
                          vdaf: dict[str, Any], measurements: list[Any],
                          check: Callable[[Any], bool], expected: Any) -> None:
    vdaf = _vdaf(line, vdaf)
    before = len(roles.dap_requests)
    result, poll, bodies = run(roles, line, leader_selected, vdaf, measurements)
    assert check(result), f"{name}: result {result!r} has the wrong shape"
    # Ours, beyond the driver: the exact aggregate and count.
    assert result == expected
    assert poll["report_count"] == len(measurements)

    # Every DAP request went to the root URL (endpoint "/"), and a DAP-18 task's tokens
    # travelled as DAP-Auth-Token, never Authorization (DAP-09 uses DAP-Auth-Token too).
    seen = roles.dap_requests[before:]
    assert {role for role, *_ in seen} == {"leader", "helper"}
    assert not [path for _, path, *_ in seen if path.startswith("/dap/")]
    authenticated = [(role, path, dap, bearer) for role, path, dap, bearer in seen
                     if path.startswith("/tasks/") and not path.endswith("/reports")]
    assert authenticated and all(dap and not bearer for *_, dap, bearer in authenticated)

    # `ppm interop run --dialect janus` sends these bodies, field for field.
    now = bodies["upload"].get("task_end")
    interval = ({"task_start": bodies["upload"]["task_start"], "task_end": now}
                if now is not None else {})
    task = {"dap_version": line.dap_version, "task_id": bodies["collector"]["task_id"],
            "leader": roles.urls["leader"], "helper": roles.urls["helper"], "vdaf": vdaf,
            "batch_mode": 2 if leader_selected else 1, "min_batch_size": len(measurements),
            "time_precision": TIME_PRECISION, **interval}
    assert r.add_task_body("janus", "collector", collector_token=bodies["collector"][
        "collector_authentication_token"], **task) == bodies["collector"]
    for role in ("leader", "helper"):
        sent = bodies[role]
        assert r.add_task_body(
            "janus", role, collector_token=bodies["collector"]["collector_authentication_token"],
            leader_token=sent["leader_authentication_token"],
            vdaf_verify_key=sent["vdaf_verify_key"],
            collector_hpke_config=sent["collector_hpke_config"],
            max_batch_size=len(measurements), **task) == sent
    assert r.upload_body("janus", measurement="1", **task) == {**bodies["upload"],
                                                               "measurement": "1"}
    query = bodies["query"]
    interval_arg = ((query["batch_interval_start"], query["batch_interval_duration"])
                    if not leader_selected else None)
    assert r.collection_start_body(
        "janus", dap_version=line.dap_version, task_id=task["task_id"],
        batch_mode=task["batch_mode"], batch_interval=interval_arg) == {
        "task_id": task["task_id"], "agg_param": "", "query": query}


# ---------------------------------------------------------------------------------------
# The pieces, without servers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, dialect", [
    ({"batch_mode": 1}, "janus"),                       # Janus's DAP-18 add_task
    ({"query_type": 1}, "janus"),                       # a stock draft-07 runner
    ({}, "janus"),
    ({"dap_version": "dap-18", "batch_mode": 1}, "draft07"),
    ({"dap_version": "dap-09"}, "draft07"),
])
def test_request_dialect(body: dict[str, Any], dialect: str) -> None:
    assert request_dialect(body) == dialect


def test_peer_auth_header_only_for_janus_dap18() -> None:
    dap18, dap09 = get_profile("dap-18"), get_profile("dap-09")
    assert server.peer_auth_header(dap18, {"batch_mode": 1}) == "DAP-Auth-Token"
    assert server.peer_auth_header(dap18, {"dap_version": "dap-18"}) is None
    # DAP-09 tokens are DAP-Auth-Token anyway: nothing to override.
    assert server.peer_auth_header(dap09, {"query_type": 1}) is None


def test_task_option_auth_header() -> None:
    opts = TaskOptions(auth_header="DAP-Auth-Token", max_batch_size=5)
    assert TaskOptions.from_json(opts.to_json()) == opts
    assert TaskOptions.from_json("{}").auth_header is None
    with pytest.raises(ValueError, match="auth_header"):
        TaskOptions.from_json('{"auth_header": "X-Token"}')
    assert auth_header_for("DAP-Auth-Token", "t") == ("DAP-Auth-Token", "t")
    assert auth_header_for("Authorization", "t") == ("Authorization", "Bearer t")


def test_collector_auth_header() -> None:
    task = task_from_fields({
        "task_id": b64(bytes(32)), "leader": "http://l/", "helper": "http://h/",
        "vdaf": {"type": "Prio3Count"}, "batch_mode": 1, "min_batch_size": 1,
        "time_precision": 60}, DAP_18).task
    keypair = generate_keypair(1)
    assert Collector(task, keypair, "tok")._headers()["Authorization"] == "Bearer tok"
    janus = Collector(task, keypair, "tok", auth_header="DAP-Auth-Token")._headers()
    assert janus["DAP-Auth-Token"] == "tok" and "Authorization" not in janus
    with pytest.raises(ValueError, match="auth_header"):
        Collector(task, keypair, "tok", auth_header="Cookie")


def test_janus_vdaf_spellings() -> None:
    sum_vec = {"type": "Prio3SumVec", "length": "3", "bits": "4", "chunk_length": "2"}
    assert r.janus_vdaf("dap-18", sum_vec) == {
        "type": "Prio3SumVec", "length": "3", "max_measurement": "15", "chunk_length": "2"}
    assert r.janus_vdaf("dap-09", {"type": "Prio3Sum", "max_measurement": 255}) == {
        "type": "Prio3Sum", "bits": "8"}
    assert r.janus_vdaf("dap-18", {"type": "Prio3Histogram", "length": 4,
                                   "chunk_length": 2}) == {
        "type": "Prio3Histogram", "length": "4", "chunk_length": "2"}


def test_body_builders_refuse_incomplete_requests() -> None:
    task: dict[str, Any] = {"dap_version": "dap-18", "task_id": b64(bytes(32)),
                            "leader": "http://l/", "helper": "http://h/",
                            "vdaf": {"type": "Prio3Count"}, "batch_mode": 1,
                            "min_batch_size": 1, "time_precision": 60}
    with pytest.raises(ValueError, match="dialect"):
        r.add_task_body("daphne", "collector", collector_token="c", **task)
    with pytest.raises(ValueError, match="collector_token"):
        r.add_task_body("janus", "leader", leader_token="l", vdaf_verify_key="k",
                        collector_hpke_config="h", **task)
    with pytest.raises(ValueError, match="leader_token"):
        r.add_task_body("draft07", "helper", **task)
    with pytest.raises(ValueError, match="together"):
        r.add_task_body("janus", "collector", collector_token="c", task_end=3600, **task)
    with pytest.raises(ValueError, match="batch_interval"):
        r.collection_start_body("janus", dap_version="dap-18", task_id="t", batch_mode=1)
    # dap-19 cannot be told from Janus's fields: only then does a janus body say it.
    body = r.add_task_body("janus", "collector", collector_token="c",
                           **{**task, "dap_version": "dap-19"})
    assert body["dap_version"] == "dap-19"
    assert "dap_version" not in r.add_task_body("janus", "collector", collector_token="c",
                                                **task)


@pytest.mark.parametrize("dialect", r.DIALECTS)
@pytest.mark.parametrize("version", ["dap-18", "dap-19"])
@pytest.mark.parametrize("vdaf", [
    {"type": "Prio3SumVec", "length": "3", "bits": "4", "chunk_length": "2"},
    {"type": "Prio3Sum", "max_measurement": "255"},
])
def test_every_role_derives_one_task_configuration(dialect: str, version: str,
                                                   vdaf: dict[str, Any]) -> None:
    """The bodies of either dialect give the Client, Collector, Leader and Helper the
    same DAP-18 TaskConfiguration (bound into every AAD), with the task interval the
    bodies say (rounded down) and Janus's task_info."""
    profile = get_profile(version)
    task: dict[str, Any] = {
        "dap_version": version, "task_id": b64(bytes(range(32))),
        "leader": "http://127.0.0.1:1/", "helper": "http://127.0.0.1:2/", "vdaf": vdaf,
        "batch_mode": 2, "min_batch_size": 7, "time_precision": 3600,
        "task_start": 3600 * 10 + 5, "task_end": 3600 * 40 + 5}
    bodies = {
        "collector": r.add_task_body(dialect, "collector", collector_token="c", **task),
        "upload": r.upload_body(dialect, measurement="1", **task),
        **{role: r.add_task_body(dialect, role, collector_token="c", leader_token="l",
                                 vdaf_verify_key=b64(bytes(32)),
                                 collector_hpke_config="AA", max_batch_size=9, **task)
           for role in ("leader", "helper")}}
    configs = set()
    for role, body in bodies.items():
        assert server.version_of(body).name == version, role
        reader = profile.interop
        tf = reader.task_fields(profile, body, "client" if role == "upload" else role)
        configs.add(tf.task.config_bytes())
        assert tf.task.task_info == b"task-info"
        interval = tf.task.task_interval
        assert interval is not None
        assert (int(interval.start), int(interval.duration)) == (10, 30)
    assert len(configs) == 1
    assert bodies["leader"]["max_batch_size"] == 9
