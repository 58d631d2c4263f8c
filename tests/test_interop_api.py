"""The interop test API (draft-dcook-ppm-dap-interop-test-design-07) over real processes:
four `ppm interop serve` subprocesses on 127.0.0.1 (client, leader, helper, collector),
driven by `ppm interop run`, plus wrong requests that must answer `status: "error"` with a
reason and leave the servers usable. The field mapping (interop/fields.py) is tested
without processes: every role must derive byte-identical TaskConfigurations."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interop import fields
from interop.runner import Case, Endpoints, default_cases, run_all
from tests.dap_harness import free_port

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ROLES = ("client", "leader", "helper", "collector")
TASK_ID = base64.urlsafe_b64encode(bytes(range(32))).rstrip(b"=").decode()


def post(url: str, body: Any, raw: bytes | None = None) -> tuple[int, dict[str, Any]]:
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def node_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("interop")


@pytest.fixture(scope="module")
def nodes(node_dir: Path) -> Iterator[dict[str, str]]:
    """The four roles as `ppm interop serve` processes; always terminated."""
    base = node_dir
    procs: list[subprocess.Popen[bytes]] = []
    urls: dict[str, str] = {}
    try:
        for role in ROLES:
            port = free_port()
            log = open(base / f"{role}.out", "wb")  # noqa: SIM115 - closed with the process
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "ppm", "interop", "serve", "--role", role,
                 "--port", str(port), "--data-dir", str(base / role),
                 "--log-dir", str(base / "logs")],
                cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT))
            log.close()
            urls[role] = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        for role, url in urls.items():
            while True:
                try:
                    status, out = post(f"{url}/internal/test/ready", {})
                    if status == 200:
                        break
                except (OSError, ValueError):
                    pass
                for p in procs:
                    assert p.poll() is None, (base / f"{role}.out").read_text()
                assert time.monotonic() < deadline, f"{role} not ready"
                time.sleep(0.1)
        yield urls
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run_cli(nodes: dict[str, str], *extra: str,
            **override: str) -> subprocess.CompletedProcess[str]:
    urls = {**nodes, **override}
    args = [arg for role in ROLES for arg in (f"--{role}", urls[role])]
    return subprocess.run([sys.executable, "-m", "ppm", "interop", "run", *args, *extra],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def run_report(nodes: dict[str, str]) -> dict[str, Any]:
    proc = run_cli(nodes, "--json")
    report: dict[str, Any] = json.loads(proc.stdout)
    report["returncode"] = proc.returncode
    return report


# ---------------------------------------------------------------------------------------
# The runner over the four roles
# ---------------------------------------------------------------------------------------

CASE_NAMES = [c.name for c in default_cases()]


def test_runner_covers_every_vdaf_and_batch_mode() -> None:
    vdafs = {c.vdaf["type"] for c in default_cases()}
    assert vdafs == {"Prio3Count", "Prio3Sum", "Prio3SumVec", "Prio3Histogram",
                     "Prio3MultihotCountVec"}
    assert len(CASE_NAMES) == 10 and len(set(CASE_NAMES)) == 10


def test_runner_exits_zero_when_all_pass(run_report: dict[str, Any]) -> None:
    assert run_report["returncode"] == 0, run_report
    assert run_report["ok"] is True
    assert run_report["passed"] == 10 and run_report["failed"] == 0


@pytest.mark.parametrize("name", CASE_NAMES)
def test_runner_case(run_report: dict[str, Any], name: str) -> None:
    (case,) = [c for c in run_report["cases"] if c["case"] == name]
    assert case["passed"], case
    assert case["result"] == case["expected"]
    assert case["report_count"] == 5


def test_runner_table_and_failure_exit_code(nodes: dict[str, str]) -> None:
    proc = run_cli(nodes, "--vdaf", "Prio3Count")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2/2 cases passed" in proc.stdout
    assert "dap-18/Prio3Count/leader_selected" in proc.stdout
    # The helper answering as the leader: endpoint_for_task refuses the role, every case
    # fails with that reason, and the exit code says so.
    proc = run_cli(nodes, "--vdaf", "Prio3Sum", "--json", leader=nodes["helper"])
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["failed"] == 2
    assert all("role 'leader' sent to the helper" in c["detail"] for c in report["cases"])


def test_dap09_is_reserved(nodes: dict[str, str]) -> None:
    proc = run_cli(nodes, "--dap-version", "dap-09", "--vdaf", "Prio3Count", "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert [c["case"] for c in report["cases"]] == ["dap-09/Prio3Count/time_interval",
                                                    "dap-09/Prio3Count/leader_selected"]
    assert all("'dap-09' is not yet supported" in c["detail"] for c in report["cases"])


def test_dp_policy_task(nodes: dict[str, str]) -> None:
    """A dp_policy object is bound into every role's TaskConfiguration: the collection
    completes (the noisy result is not compared)."""
    case = Case("dap-18/Prio3Histogram+dp", {"type": "Prio3Histogram", "length": "4",
                                            "chunk_length": "2"},
                1, ["0", "1", "1", "3"], None,
                dp_policy={"policy": "HistogramWithAggregatorLaplace", "epsilon": 1.0})
    (outcome,) = asyncio.run(run_all(Endpoints(**nodes), [case]))
    assert outcome.passed, outcome.detail
    assert outcome.report_count == 4 and len(outcome.result) == 4


# ---------------------------------------------------------------------------------------
# Wrong requests
# ---------------------------------------------------------------------------------------


def _collector_task(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task_id": TASK_ID, "leader": "http://127.0.0.1:1/dap/",
        "helper": "http://127.0.0.1:2/dap/", "vdaf": {"type": "Prio3Count"},
        "collector_authentication_token": "token", "batch_mode": 1,
        "min_batch_size": 1, "time_precision": 3600}
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


@pytest.mark.parametrize("changes, reason", [
    ({"vdaf": {"type": "Prio3Unknown"}}, "unsupported VDAF type 'Prio3Unknown'"),
    ({"vdaf": {"type": "Poplar1", "bits": "8"}}, "unsupported VDAF type 'Poplar1'"),
    ({"vdaf": {"type": "Prio3Sum"}}, "missing field vdaf.max_measurement"),
    ({"vdaf": {"type": "Prio3Histogram", "length": "4"}}, "missing field vdaf.chunk_length"),
    ({"min_batch_size": None}, "missing field min_batch_size"),
    ({"collector_authentication_token": None}, "missing field collector_authentication_token"),
    ({"batch_mode": None}, "missing field batch_mode"),
    ({"task_id": "not*base64"}, "task_id is not valid base64url"),
    ({"task_id": "AAAA"}, "task_id must be 32 bytes"),
    ({"query_type": 2}, "batch_mode and query_type disagree"),
    ({"dp_policy": {"policy": "Nope"}}, "unknown DP policy"),
    ({"dp_policy": {"policy": "HistogramWithAggregatorLaplace", "epsilon": 1}},
     "applies to Prio3Histogram"),
    ({"dap_version": "dap-09"}, "not yet supported"),
    ({"dap_version": "dap-99"}, "unknown dap_version"),
])
def test_collector_add_task_errors(nodes: dict[str, str], changes: dict[str, Any],
                                   reason: str) -> None:
    status, out = post(f"{nodes['collector']}/internal/test/add_task", _collector_task(**changes))
    assert status == 200
    assert out["status"] == "error" and reason in out["error"], out
    # The server is still usable: the good request succeeds.
    status, out = post(f"{nodes['collector']}/internal/test/add_task", _collector_task())
    assert (status, out["status"]) == (200, "success"), out
    assert len(fields.b64decode(out["collector_hpke_config"], "x")) > 32


def test_aggregator_and_client_errors(nodes: dict[str, str]) -> None:
    _, good = post(f"{nodes['collector']}/internal/test/add_task", _collector_task())
    agg = {**_collector_task(), "role": "leader", "leader_authentication_token": "t1",
           "vdaf_verify_key": fields.b64encode(bytes(32)),
           "collector_hpke_config": good["collector_hpke_config"]}
    leader = f"{nodes['leader']}/internal/test/add_task"
    for bad, reason in [
        ({"vdaf_verify_key": "###"}, "vdaf_verify_key is not valid base64url"),
        ({"vdaf_verify_key": fields.b64encode(bytes(3))}, "vdaf_verify_key must be 32 bytes"),
        ({"collector_hpke_config": fields.b64encode(b"\x01")}, "not an encoded HpkeConfig"),
        ({"vdaf": {"type": "Prio3Foo"}}, "unsupported VDAF type"),
        ({"leader_authentication_token": None}, "missing field leader_authentication_token"),
        ({"role": "helper"}, "role 'helper' sent to the leader"),
    ]:
        body = {k: v for k, v in {**agg, **bad}.items() if v is not None}
        status, out = post(leader, body)
        assert status == 200 and out["status"] == "error" and reason in out["error"], out
    status, out = post(leader, agg)
    assert out == {"status": "success"}
    # Same task again: idempotent; a different one under the same ID: refused.
    assert post(leader, agg)[1]["status"] == "success"
    out = post(leader, {**agg, "min_batch_size": 2})[1]
    assert out["status"] == "error" and "different task" in out["error"]

    upload = f"{nodes['client']}/internal/test/upload"
    body = {**_collector_task(), "measurement": "1"}
    for bad, reason in [
        ({"measurement": "7"}, "Count measurement must be 0 or 1"),
        ({"measurement": None}, "missing field measurement"),
        ({"measurement": "x"}, "field measurement must be an integer"),
        ({"vdaf": {"type": "Nope"}}, "unsupported VDAF type"),
        ({"task_id": "%%"}, "not valid base64url"),
    ]:
        out = post(upload, {k: v for k, v in {**body, **bad}.items() if v is not None})[1]
        assert out["status"] == "error" and reason in out["error"], out
    # No Leader listens at the task's endpoint: a DAP-level failure, still status error.
    out = post(upload, body)[1]
    assert out["status"] == "error" and out["error"]
    assert post(f"{nodes['client']}/internal/test/ready", {})[0] == 200


def test_collection_errors(nodes: dict[str, str]) -> None:
    url = nodes["collector"] + "/internal/test/"
    assert post(url + "add_task", _collector_task())[1]["status"] == "success"
    out = post(url + "collection_start", {"task_id": TASK_ID, "agg_param": "",
                                          "query": {"type": 2, "subtype": 0,
                                                    "batch_id": TASK_ID}})[1]
    assert out["status"] == "error" and "query.type 2 does not match" in out["error"]
    out = post(url + "collection_start", {"task_id": TASK_ID, "query": {
        "type": 1, "batch_interval_start": 1, "batch_interval_duration": 3600}})[1]
    assert out["status"] == "error" and "aligned" in out["error"]
    out = post(url + "collection_start", {"task_id": fields.b64encode(bytes(32)),
                                          "query": {"type": 1}})[1]
    assert out["status"] == "error" and "unknown task_id" in out["error"]
    out = post(url + "collection_poll", {"handle": "nope"})[1]
    assert out == {"status": "error", "error": "unknown handle"}


def test_unknown_paths_and_bad_bodies(nodes: dict[str, str]) -> None:
    for role, path in [("client", "add_task"), ("leader", "upload"), ("helper", "nope"),
                       ("collector", "endpoint_for_task"), ("leader", "collection_poll")]:
        status, out = post(f"{nodes[role]}/internal/test/{path}", {})
        assert status == 404 and out["status"] == "error", (role, path)
    status, out = post(f"{nodes['collector']}/internal/test/add_task", None, raw=b"{not json")
    assert status == 400 and out["status"] == "error" and "not JSON" in out["error"]
    status, out = post(f"{nodes['leader']}/internal/test/endpoint_for_task",
                       {"task_id": TASK_ID, "role": "leader", "hostname": "leader"})
    assert (status, out) == (200, {"status": "success", "endpoint": "/dap/"})
    # The Leader's DAP resources are under that endpoint on the same port.
    with urllib.request.urlopen(f"{nodes['leader']}/dap/hpke_config", timeout=10) as resp:
        assert resp.status == 200 and len(resp.read()) > 32


def test_logs_and_datastores(nodes: dict[str, str], node_dir: Path,
                             run_report: dict[str, Any]) -> None:
    """Each role logs its commands under --log-dir; each Aggregator keeps one SQLite file
    in its --data-dir."""
    for role in ROLES:
        log = (node_dir / "logs" / f"{role}.log").read_text()
        assert "/internal/test/ready" in log
    assert "added task" in (node_dir / "logs" / "helper.log").read_text()
    for role in ("leader", "helper"):
        assert [p.name for p in (node_dir / role).iterdir()
                if p.suffix == ".sqlite"] == [f"{role}.sqlite"]


# ---------------------------------------------------------------------------------------
# Field mapping: every role derives the same TaskConfiguration
# ---------------------------------------------------------------------------------------

BASE = {"task_id": TASK_ID, "leader": "http://leader:8080/dap/",
        "helper": "http://helper:8080/dap/", "time_precision": 3600, "min_batch_size": 10}


def config_of(body: dict[str, Any]) -> bytes:
    return fields.task_from_fields(body).task.configuration().encode()


def test_draft07_and_janus_spellings_give_the_same_configuration() -> None:
    janus = {**BASE, "batch_mode": 2, "task_end": 1_800_000_000,
             "vdaf": {"type": "Prio3SumVec", "length": 4, "max_measurement": 255,
                      "chunk_length": 2}}
    draft = {**BASE, "query_type": 2, "task_expiration": 1_800_000_000,
             "max_batch_query_count": 1,
             "vdaf": {"type": "Prio3SumVec", "length": "4", "bits": "8", "chunk_length": "2"}}
    assert config_of(janus) == config_of(draft)
    tf = fields.task_from_fields({**draft, "max_batch_query_count": 3})
    assert tf.notes and "ignored" in tf.notes[0]


def test_deterministic_defaults() -> None:
    body = {**BASE, "batch_mode": 1, "vdaf": {"type": "Prio3Count"}}
    task = fields.task_from_fields(body).task
    assert task.task_info == b"interop:" + TASK_ID.encode()
    assert task.task_interval is None and task.dp_policy is None
    assert task.leader_aggregator_endpoint == "http://leader:8080/dap/"
    assert config_of(body) == config_of(dict(reversed(list(body.items()))))
    assert config_of({**body, "task_info": fields.b64encode(b"x")}) != config_of(body)
    # task_start rounds down, task_end rounds up to the time precision.
    interval = fields.task_from_fields(
        {**body, "task_start": 7201, "task_end": 10801}).task.task_interval
    assert interval is not None and (int(interval.start), int(interval.duration)) == (2, 2)


@pytest.mark.parametrize("vdaf, measurement, expected", [
    ({"type": "Prio3Count"}, "1", 1),
    ({"type": "Prio3Sum", "bits": "8"}, "200", 200),
    ({"type": "Prio3Histogram", "length": "3", "chunk_length": "1"}, "2", 2),
    ({"type": "Prio3SumVec", "length": "2", "max_measurement": "3", "chunk_length": "1"},
     ["1", "3"], [1, 3]),
    ({"type": "Prio3MultihotCountVec", "length": "3", "max_weight": "2",
      "chunk_length": "1"}, [True, "0", 1], [True, False, True]),
])
def test_measurements(vdaf: dict[str, Any], measurement: Any, expected: Any) -> None:
    v = fields.vdaf_from_descriptor(vdaf)
    assert fields.measurement_from_json(v, measurement) == expected
    if vdaf["type"] == "Prio3Sum":
        assert v.max_measurement == 255


def test_results_are_decimal_strings() -> None:
    assert fields.result_to_json(3) == "3"
    assert fields.result_to_json([1, 0, 12]) == ["1", "0", "12"]
    with pytest.raises(fields.FieldError, match="disagree"):
        fields.vdaf_from_descriptor({"type": "Prio3Sum", "bits": "8", "max_measurement": "7"})
