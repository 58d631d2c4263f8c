"""The interop test API (draft-dcook-ppm-dap-interop-test-design-07) over real processes:
four `ppm interop serve` subprocesses on 127.0.0.1 (client, leader, helper, collector),
driven by `ppm interop run` through every case of both protocol versions (dap-18 and
dap-09, one set of processes for all), plus wrong requests of each version that must
answer `status: "error"` with a reason and leave the servers usable. The field mapping
(interop/fields.py) is tested without processes: every role must derive byte-identical
DAP-18 TaskConfigurations, and the request-version rule is a table."""

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

from ppm_reference.dap.profiles.dap09 import DAP_09
from ppm_reference.dap.profiles.dap09 import messages as m09
from ppm_reference.dap.profiles.dap09.interop import PLACEHOLDER_HELPER, query09_from_json
from ppm_reference.dap.profiles.dap09.interop import task09_from_fields as _task09_from_fields
from ppm_reference.dap.profiles.dap09.task import Task09
from ppm_reference.dap.profiles.dap18 import DAP_18
from ppm_reference.dap.profiles.dap18.interop import task_from_fields as _task_from_fields
from ppm_reference.interop import fields
from ppm_reference.interop.runner import VERSIONS, Case, Endpoints, default_cases, run_all
from ppm_reference.interop.server import version_of
from tests.dap_harness import free_port


def task_from_fields(body: dict[str, Any]) -> Any:
    return _task_from_fields(body, DAP_18)


def task09_from_fields(body: dict[str, Any], role: str) -> Any:
    return _task09_from_fields(body, role, DAP_09)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ROLES = ("client", "leader", "helper", "collector")
TASK_ID = base64.urlsafe_b64encode(bytes(range(32))).rstrip(b"=").decode()
# The wrong-request tests of each version use their own task ID on the shared servers.
TASK_IDS = {"dap-18": TASK_ID, "dap-09": fields.b64encode(bytes(range(32, 64))),
            "dap-19": fields.b64encode(bytes(range(64, 96)))}


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
                [sys.executable, "-m", "ppm_reference", "interop", "serve", "--role", role,
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
    return subprocess.run([sys.executable, "-m", "ppm_reference", "interop", "run", *args, *extra],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module", params=["draft07", "janus"])
def run_report(nodes: dict[str, str], request: pytest.FixtureRequest) -> dict[str, Any]:
    """`ppm interop run` over the four processes, in each dialect (draft-07's bodies, and
    Janus's: --dialect janus)."""
    proc = run_cli(nodes, "--json", "--dialect", request.param)
    report: dict[str, Any] = json.loads(proc.stdout)
    report["returncode"] = proc.returncode
    return report


# ---------------------------------------------------------------------------------------
# The runner over the four roles
# ---------------------------------------------------------------------------------------

CASE_NAMES = [c.name for c in default_cases()]
RUNNER_VDAFS = {
    "dap-19": {"Prio3Count", "Prio3Sum", "Prio3SumVec", "Prio3Histogram",
               "Prio3MultihotCountVec", "Prio3L1BoundSum"},
    "dap-18": {"Prio3Count", "Prio3Sum", "Prio3SumVec", "Prio3Histogram",
               "Prio3MultihotCountVec", "Prio3L1BoundSum"},
    # VDAF-08 has no Prio3MultihotCountVec and no Prio3L1BoundSum.
    "dap-09": {"Prio3Count", "Prio3Sum", "Prio3SumVec", "Prio3Histogram"},
}


@pytest.mark.parametrize("version", VERSIONS)
def test_runner_covers_every_vdaf_and_batch_mode(version: str) -> None:
    cases = default_cases(version)
    assert {c.vdaf["type"] for c in cases} == RUNNER_VDAFS[version]
    assert {(c.vdaf["type"], c.batch_mode) for c in cases} == \
        {(v, m) for v in RUNNER_VDAFS[version] for m in (1, 2)}
    assert all(c.dap_version == version and c.name.startswith(version + "/") for c in cases)


def test_default_cases_are_every_version() -> None:
    # 12 cases each for dap-19 and dap-18 (6 VDAFs x 2 batch modes), 8 for dap-09.
    assert len(CASE_NAMES) == 32 and len(set(CASE_NAMES)) == 32
    assert CASE_NAMES == [c.name for v in VERSIONS for c in default_cases(v)]
    assert "dap-09/Prio3Sum/fixed_size" in CASE_NAMES
    with pytest.raises(ValueError, match="unknown DAP versions"):
        default_cases("dap-10")


def test_runner_exits_zero_when_all_pass(run_report: dict[str, Any]) -> None:
    assert run_report["returncode"] == 0, run_report
    assert run_report["ok"] is True
    assert run_report["passed"] == len(CASE_NAMES) and run_report["failed"] == 0
    assert [c["case"] for c in run_report["cases"]] == CASE_NAMES


@pytest.mark.parametrize("name", CASE_NAMES)
def test_runner_case(run_report: dict[str, Any], name: str) -> None:
    (case,) = [c for c in run_report["cases"] if c["case"] == name]
    assert case["passed"], case
    assert case["result"] == case["expected"]
    assert case["report_count"] == 5
    # A DAP-09 fixed_size collection names its batch; DAP-18 results carry no batch ID.
    if case["batch_mode"] == "fixed_size":
        assert len(fields.b64decode(case["batch_id"], "batch_id")) == 32
    else:
        assert case["batch_id"] is None


def test_runner_table_and_failure_exit_code(nodes: dict[str, str]) -> None:
    proc = run_cli(nodes, "--vdaf", "Prio3Count")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6/6 cases passed" in proc.stdout
    for name in ("dap-19/Prio3Count/leader_selected", "dap-18/Prio3Count/leader_selected",
                 "dap-09/Prio3Count/fixed_size"):
        assert name in proc.stdout
    # The helper answering as the leader: endpoint_for_task refuses the role, every case
    # fails with that reason, and the exit code says so.
    proc = run_cli(nodes, "--vdaf", "Prio3Sum", "--json", leader=nodes["helper"])
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["failed"] == 6
    assert all("role 'leader' sent to the helper" in c["detail"] for c in report["cases"])


@pytest.mark.parametrize("selector, names", [
    (["--dap-version", "dap-18"], ["dap-18/Prio3Histogram/time_interval"]),
    (["--dap-version", "dap-09"], ["dap-09/Prio3Histogram/time_interval"]),
    (["--dap-version", "dap-09", "--dap-version", "dap-18"],
     ["dap-18/Prio3Histogram/time_interval", "dap-09/Prio3Histogram/time_interval"]),
    (["--dap-version", "dap-19"], ["dap-19/Prio3Histogram/time_interval"]),
    (["--dap-version", "all", "--batch-mode", "fixed_size"],
     ["dap-19/Prio3Histogram/leader_selected", "dap-18/Prio3Histogram/leader_selected",
      "dap-09/Prio3Histogram/fixed_size"]),
])
def test_runner_version_selector(nodes: dict[str, str], selector: list[str],
                                 names: list[str]) -> None:
    if "--batch-mode" not in selector:
        selector = [*selector, "--batch-mode", "time_interval"]
    proc = run_cli(nodes, "--vdaf", "Prio3Histogram", *selector, "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, report
    assert [c["case"] for c in report["cases"]] == names


@pytest.mark.parametrize("version", VERSIONS)
def test_dp_policy_task(nodes: dict[str, str], version: str) -> None:
    """A dp_policy object reaches every role (bound into the DAP-18 TaskConfiguration;
    agreed out of band for DAP-09): the collection completes (the noisy result is not
    compared)."""
    case = Case(f"{version}/Prio3Histogram+dp", {"type": "Prio3Histogram", "length": "4",
                                                "chunk_length": "2"},
                1, ["0", "1", "1", "3"], None, dap_version=version,
                dp_policy={"policy": "HistogramWithAggregatorLaplace", "epsilon": 1.0})
    (outcome,) = asyncio.run(run_all(Endpoints(**nodes), [case]))
    assert outcome.passed, outcome.detail
    assert outcome.report_count == 4 and len(outcome.result) == 4


# ---------------------------------------------------------------------------------------
# Wrong requests
# ---------------------------------------------------------------------------------------


MULTIHOT = {"type": "Prio3MultihotCountVec", "length": "4", "max_weight": "2",
            "chunk_length": "2"}
NO_LEADER = "http://127.0.0.1:1/dap/"


def _drop_none(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def _collector_task(version: str = "dap-18", **changes: Any) -> dict[str, Any]:
    """A good Collector add_task body: DAP-18 with the fields Janus sends, DAP-09 exactly
    as draft-07 sends it (no dap_version: the absence of batch_mode makes it dap-09). A
    change to None removes the field."""
    body: dict[str, Any] = {
        "task_id": TASK_IDS[version], "leader": NO_LEADER, "vdaf": {"type": "Prio3Count"},
        "collector_authentication_token": "token"}
    if version == "dap-09":
        body.update(query_type=1)
    else:
        body.update(helper="http://127.0.0.1:2/dap/", batch_mode=1, min_batch_size=2,
                    time_precision=3600)
    if version == "dap-19":  # batch_mode alone means dap-18: name the version
        body.update(dap_version="dap-19")
    return _drop_none({**body, **changes})


def _aggregator_task(version: str, hpke: str, **changes: Any) -> dict[str, Any]:
    """A good Leader add_task body (DAP-09: draft-07's fields; its VDAF-08 verification
    keys are 16 bytes)."""
    body = {**_collector_task(version), "role": "leader", "leader_authentication_token": "t1",
            "vdaf_verify_key": fields.b64encode(bytes(16 if version == "dap-09" else 32)),
            "collector_hpke_config": hpke}
    if version == "dap-09":
        body.update(helper="http://127.0.0.1:2/dap/", min_batch_size=2, time_precision=3600,
                    max_batch_query_count=1, task_expiration=2_000_000_000)
    return _drop_none({**body, **changes})


def _upload(version: str, **changes: Any) -> dict[str, Any]:
    """A good Client upload body (DAP-09: draft-07's fields, no query type)."""
    body: dict[str, Any] = {**_collector_task(version), "measurement": "1"}
    if version == "dap-09":
        body = {k: body[k] for k in ("task_id", "leader", "vdaf", "measurement")}
        body.update(helper="http://127.0.0.1:2/dap/", time_precision=3600)
    return _drop_none({**body, **changes})


COLLECTOR_ADD_TASK_ERRORS = [
    ("dap-18", {"vdaf": {"type": "Prio3Unknown"}}, "unsupported VDAF type 'Prio3Unknown'"),
    ("dap-18", {"vdaf": {"type": "Poplar1", "bits": "8"}}, "unsupported VDAF type 'Poplar1'"),
    ("dap-18", {"vdaf": {"type": "Prio3Sum"}}, "missing field vdaf.max_measurement"),
    ("dap-18", {"vdaf": {"type": "Prio3Histogram", "length": "4"}},
     "missing field vdaf.chunk_length"),
    ("dap-18", {"min_batch_size": None}, "missing field min_batch_size"),
    ("dap-18", {"collector_authentication_token": None},
     "missing field collector_authentication_token"),
    ("dap-18", {"batch_mode": None, "dap_version": "dap-18"}, "missing field batch_mode"),
    ("dap-18", {"task_id": "not*base64"}, "task_id is not valid base64url"),
    ("dap-18", {"task_id": "AAAA"}, "task_id must be 32 bytes"),
    ("dap-18", {"query_type": 2}, "batch_mode and query_type disagree"),
    ("dap-18", {"dp_policy": {"policy": "Nope"}}, "unknown DP policy"),
    ("dap-18", {"dp_policy": {"policy": "HistogramWithAggregatorLaplace", "epsilon": 1}},
     "applies to Prio3Histogram"),
    ("dap-18", {"dap_version": "dap-99"}, "unknown dap_version"),
    # DAP-09 (VDAF-08)
    ("dap-09", {"vdaf": {"type": "Prio3Unknown"}},
     "unsupported VDAF type 'Prio3Unknown' for dap-09"),
    ("dap-09", {"vdaf": {"type": "Poplar1", "bits": "8"}},
     "unsupported VDAF type 'Poplar1' for dap-09"),
    ("dap-09", {"vdaf": MULTIHOT},
     "Prio3MultihotCountVec is not a VDAF of draft-irtf-cfrg-vdaf-08"),
    ("dap-09", {"vdaf": {"type": "Prio3Sum"}}, "missing field vdaf.bits"),
    ("dap-09", {"vdaf": {"type": "Prio3Sum", "max_measurement": "200"}}, "not 2^bits - 1"),
    ("dap-09", {"vdaf": {"type": "Prio3Sum", "bits": "128"}}, "invalid Prio3Sum parameters"),
    ("dap-09", {"vdaf": {"type": "Prio3SumVec", "bits": "8", "length": "2"}},
     "missing field vdaf.chunk_length"),
    ("dap-09", {"query_type": None}, "missing field query_type"),
    ("dap-09", {"query_type": None, "dap_version": "dap-09"}, "missing field query_type"),
    ("dap-09", {"query_type": 3}, "unknown batch mode or query type 3"),
    ("dap-09", {"dap_version": "dap-09", "batch_mode": 2}, "query_type and batch_mode disagree"),
    ("dap-09", {"task_id": "not*base64"}, "task_id is not valid base64url"),
    ("dap-09", {"task_id": fields.b64encode(bytes(33))}, "task_id must be 32 bytes"),
    ("dap-09", {"collector_authentication_token": None},
     "missing field collector_authentication_token"),
    ("dap-09", {"leader": None}, "missing field leader"),
    ("dap-09", {"dp_policy": {"policy": "Nope"}}, "unknown DP policy"),
    # An explicit dap_version wins over the inference: a DAP-18 Collector needs `helper`.
    ("dap-09", {"dap_version": "dap-18"}, "missing field helper"),
]


@pytest.mark.parametrize("version, changes, reason", COLLECTOR_ADD_TASK_ERRORS)
def test_collector_add_task_errors(nodes: dict[str, str], version: str,
                                   changes: dict[str, Any], reason: str) -> None:
    url = f"{nodes['collector']}/internal/test/add_task"
    status, out = post(url, _collector_task(version, **changes))
    assert status == 200
    assert out["status"] == "error" and reason in out["error"], out
    # The server is still usable: the good request succeeds.
    status, out = post(url, _collector_task(version))
    assert (status, out["status"]) == (200, "success"), out
    assert len(fields.b64decode(out["collector_hpke_config"], "x")) > 32


AGGREGATOR_ADD_TASK_ERRORS: dict[str, list[tuple[dict[str, Any], str]]] = {
    "both": [
        ({"vdaf_verify_key": "###"}, "vdaf_verify_key is not valid base64url"),
        ({"collector_hpke_config": fields.b64encode(b"\x01")}, "not an encoded HpkeConfig"),
        ({"vdaf": {"type": "Prio3Foo"}}, "unsupported VDAF type"),
        ({"leader_authentication_token": None}, "missing field leader_authentication_token"),
        ({"leader_authentication_token": "a b"}, "not safe as an HTTP header value"),
        ({"role": "helper"}, "role 'helper' sent to the leader"),
        # Provisioning limits (dap.core.tasks.check_task_limits).
        ({"min_batch_size": 1}, "below this Aggregator's floor of 2"),
        ({"vdaf": {"type": "Prio3Histogram", "length": str(2**30), "chunk_length": "32768"}},
         "this Aggregator runs at most 65536"),
    ],
    "dap-18": [
        ({"vdaf_verify_key": fields.b64encode(bytes(3))}, "vdaf_verify_key must be 32 bytes"),
    ],
    "dap-19": [
        ({"vdaf_verify_key": fields.b64encode(bytes(3))}, "vdaf_verify_key must be 32 bytes"),
    ],
    "dap-09": [
        ({"vdaf_verify_key": fields.b64encode(bytes(32))}, "vdaf_verify_key must be 16 bytes"),
        ({"vdaf": MULTIHOT}, "Prio3MultihotCountVec is not a VDAF of"),
        ({"query_type": None}, "missing field query_type"),
        ({"min_batch_size": None}, "missing field min_batch_size"),
        ({"time_precision": None}, "missing field time_precision"),
        ({"helper": None}, "missing field helper"),
        ({"max_batch_size": 5}, "max_batch_size is a fixed_size parameter"),
        ({"query_type": 2, "min_batch_size": 5, "max_batch_size": 4},
         "max_batch_size must be at least min_batch_size"),
        ({"max_batch_query_count": 0}, "max_batch_query_count must be at least 1"),
    ],
}

UPLOAD_ERRORS: dict[str, list[tuple[dict[str, Any], str]]] = {
    "both": [
        ({"measurement": "7"}, "Count measurement must be 0 or 1"),
        ({"measurement": None}, "missing field measurement"),
        ({"measurement": "x"}, "field measurement must be an integer"),
        ({"vdaf": {"type": "Nope"}}, "unsupported VDAF type"),
        ({"task_id": "%%"}, "not valid base64url"),
    ],
    "dap-18": [],
    "dap-19": [],
    "dap-09": [
        ({"time_precision": None}, "missing field time_precision"),
        ({"vdaf": MULTIHOT, "measurement": [True, False, False, False]},
         "Prio3MultihotCountVec is not a VDAF of"),
        ({"vdaf": {"type": "Prio3Sum", "bits": "4"}, "measurement": "16"},
         "does not fit in 4 bits"),
    ],
}


@pytest.mark.parametrize("version", VERSIONS)
def test_aggregator_and_client_errors(nodes: dict[str, str], version: str) -> None:
    _, good = post(f"{nodes['collector']}/internal/test/add_task", _collector_task(version))
    agg = _aggregator_task(version, good["collector_hpke_config"])
    leader = f"{nodes['leader']}/internal/test/add_task"
    for bad, reason in AGGREGATOR_ADD_TASK_ERRORS["both"] + AGGREGATOR_ADD_TASK_ERRORS[version]:
        status, out = post(leader, _drop_none({**agg, **bad}))
        assert status == 200 and out["status"] == "error" and reason in out["error"], \
            (bad, out)
    status, out = post(leader, agg)
    assert out == {"status": "success"}
    # Same task again: idempotent; a different one under the same ID: refused.
    assert post(leader, agg)[1]["status"] == "success"
    out = post(leader, {**agg, "min_batch_size": 3})[1]
    assert out["status"] == "error" and "different task" in out["error"]

    upload = f"{nodes['client']}/internal/test/upload"
    body = _upload(version)
    for bad, reason in UPLOAD_ERRORS["both"] + UPLOAD_ERRORS[version]:
        out = post(upload, _drop_none({**body, **bad}))[1]
        assert out["status"] == "error" and reason in out["error"], (bad, out)
    # No Leader listens at the task's endpoint: a DAP-level failure, still status error.
    out = post(upload, body)[1]
    assert out["status"] == "error" and "upload failed" in out["error"]
    assert post(f"{nodes['client']}/internal/test/ready", {})[0] == 200


@pytest.mark.parametrize("version", VERSIONS)
def test_collection_errors(nodes: dict[str, str], version: str) -> None:
    url = nodes["collector"] + "/internal/test/"
    tid = TASK_IDS[version]
    # A time-interval task whose Collector knows the time precision (draft-07 does not
    # send it to the Collector, but accepts it): misaligned intervals are refused locally.
    task = _collector_task(version, time_precision=3600)
    assert post(url + "add_task", task)[1]["status"] == "success"
    for query, reason in [
        ({"type": 2, "subtype": 0, "batch_id": TASK_ID}, "query.type 2 does not match"),
        ({"type": 1, "batch_interval_start": 1, "batch_interval_duration": 3600}, "aligned"),
        ({"type": 1, "batch_interval_start": 3600}, "missing field batch_interval_duration"),
        ("1", "field query must be an object"),
    ]:
        out = post(url + "collection_start", {"task_id": tid, "agg_param": "",
                                              "query": query})[1]
        assert out["status"] == "error" and reason in out["error"], (query, out)
    out = post(url + "collection_start", {"task_id": tid, "agg_param": "%",
                                          "query": {"type": 1}})[1]
    assert out["status"] == "error" and "agg_param is not valid base64url" in out["error"]
    out = post(url + "collection_start", {"task_id": fields.b64encode(bytes(32)),
                                          "query": {"type": 1}})[1]
    assert out["status"] == "error" and "unknown task_id" in out["error"]
    other = "dap-18" if version == "dap-09" else "dap-09"
    out = post(url + "collection_start", {"task_id": tid, "dap_version": other,
                                          "query": {"type": 1}})[1]
    assert out["status"] == "error" and f"added as {version}" in out["error"], out
    out = post(url + "collection_poll", {"handle": "nope"})[1]
    assert out == {"status": "error", "error": "unknown handle"}


def test_dap09_fixed_size_query_errors(nodes: dict[str, str]) -> None:
    url = nodes["collector"] + "/internal/test/"
    assert post(url + "add_task", _collector_task("dap-09", query_type=2))[1]["status"] == \
        "success"
    for query, reason in [
        ({"subtype": 1}, "missing field query.type"),
        ({"type": 1, "batch_interval_start": 0, "batch_interval_duration": 3600},
         "query.type 1 does not match the task's query_type 2"),
        ({"type": 2, "subtype": 0}, "missing field batch_id"),
        ({"type": 2, "subtype": 0, "batch_id": "###"}, "query.batch_id is not valid base64url"),
        ({"type": 2, "subtype": 0, "batch_id": "AAAA"}, "query.batch_id must be 32 bytes"),
        ({"type": 2, "subtype": 7}, "unknown fixed-size query type 7"),
    ]:
        out = post(url + "collection_start", {"task_id": TASK_IDS["dap-09"], "agg_param": "",
                                              "query": query})[1]
        assert out["status"] == "error" and reason in out["error"], (query, out)
    # A well-formed query reaches the Leader, who is not there: a DAP-level error.
    out = post(url + "collection_start", {"task_id": TASK_IDS["dap-09"], "agg_param": "",
                                          "query": {"type": 2, "subtype": 1}})[1]
    assert out["status"] == "error" and "collection request failed" in out["error"]


def test_dap09_by_batch_id_query(nodes: dict[str, str], run_report: dict[str, Any]) -> None:
    """A by_batch_id query (subtype 0) goes to the real Leader. An unknown batch ID is
    batchInvalid. The batch the runner collected was queried with Prio3's one (empty)
    aggregation parameter: DAP-09 Section 4.6.5.3 counts distinct aggregation
    parameters, so querying it again may give the same result; our Leader currently
    refuses it with batchQueriedTooManyTimes. Either answer is accepted here."""
    (case,) = [c for c in run_report["cases"] if c["case"] == "dap-09/Prio3Count/fixed_size"]
    url = nodes["collector"] + "/internal/test/"

    def by_id(batch_id: str) -> dict[str, Any]:
        return post(url + "collection_start", {
            "task_id": case["task_id"], "agg_param": "",
            "query": {"type": 2, "subtype": 0, "batch_id": batch_id}})[1]

    out = by_id(fields.b64encode(bytes(32)))
    assert out["status"] == "error" and "batchInvalid" in out["error"], out
    out = by_id(case["batch_id"])
    if out["status"] == "error":
        assert "batchQueriedTooManyTimes" in out["error"], out
        return
    deadline = time.monotonic() + 30
    while (poll := post(url + "collection_poll", {"handle": out["handle"]})[1])["status"] \
            == "in progress":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert poll["status"] == "complete", poll
    assert (poll["result"], poll["report_count"], poll["batch_id"]) == \
        (case["result"], case["report_count"], case["batch_id"])


def test_unknown_paths_and_bad_bodies(nodes: dict[str, str]) -> None:
    for role, path in [("client", "add_task"), ("leader", "upload"), ("helper", "nope"),
                       ("collector", "endpoint_for_task"), ("leader", "collection_poll")]:
        status, out = post(f"{nodes[role]}/internal/test/{path}", {})
        assert status == 404 and out["status"] == "error", (role, path)
    status, out = post(f"{nodes['collector']}/internal/test/add_task", None, raw=b"{not json")
    assert status == 400 and out["status"] == "error" and "not JSON" in out["error"]
    status, out = post(f"{nodes['leader']}/internal/test/endpoint_for_task",
                       {"task_id": TASK_ID, "role": "leader", "hostname": "leader"})
    assert (status, out) == (200, {"status": "success", "endpoint": "/"})
    # The Leader's DAP resources are at that endpoint (the root: Janus's driver requires
    # "/") and, as before, under /dap/ on the same port: one Aggregator, the same keys.
    configs = []
    for path in ("/hpke_config", "/dap/hpke_config"):
        with urllib.request.urlopen(f"{nodes['leader']}{path}", timeout=10) as resp:
            assert resp.status == 200
            configs.append(resp.read())
    assert len(configs[0]) > 32 and configs[0] == configs[1]
    # Every answer of the test API is exactly application/json (Janus's driver compares).
    req = urllib.request.Request(f"{nodes['leader']}/internal/test/ready", data=b"",
                                 method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.headers["Content-Type"] == "application/json"


def test_logs_and_datastores(nodes: dict[str, str], node_dir: Path,
                             run_report: dict[str, Any]) -> None:
    """Each role logs its commands under --log-dir; each Aggregator keeps one SQLite file
    in its --data-dir."""
    for role in ROLES:
        log = (node_dir / "logs" / f"{role}.log").read_text()
        assert "/internal/test/ready" in log
    helper_log = (node_dir / "logs" / "helper.log").read_text()
    assert "added dap-18 task" in helper_log and "added dap-09 task" in helper_log
    for role in ("leader", "helper"):
        assert [p.name for p in (node_dir / role).iterdir()
                if p.suffix == ".sqlite"] == [f"{role}.sqlite"]


# ---------------------------------------------------------------------------------------
# Field mapping: every role derives the same TaskConfiguration
# ---------------------------------------------------------------------------------------

BASE = {"task_id": TASK_ID, "leader": "http://leader:8080/dap/",
        "helper": "http://helper:8080/dap/", "time_precision": 3600, "min_batch_size": 10}


def config_of(body: dict[str, Any]) -> bytes:
    return task_from_fields(body).task.configuration().encode()


def test_draft07_and_janus_spellings_give_the_same_configuration() -> None:
    janus = {**BASE, "batch_mode": 2, "task_end": 1_800_000_000,
             "vdaf": {"type": "Prio3SumVec", "length": 4, "max_measurement": 255,
                      "chunk_length": 2}}
    draft = {**BASE, "query_type": 2, "task_expiration": 1_800_000_000,
             "max_batch_query_count": 1,
             "vdaf": {"type": "Prio3SumVec", "length": "4", "bits": "8", "chunk_length": "2"}}
    assert config_of(janus) == config_of(draft)
    tf = task_from_fields({**draft, "max_batch_query_count": 3})
    assert tf.notes and "ignored" in tf.notes[0]


def test_deterministic_defaults() -> None:
    body = {**BASE, "batch_mode": 1, "vdaf": {"type": "Prio3Count"}}
    task = task_from_fields(body).task
    # No task_info: the one Janus's interop binaries bind.
    assert task.task_info == b"task-info"
    assert task.task_interval is None and task.dp_policy is None
    assert task.leader_aggregator_endpoint == "http://leader:8080/dap/"
    assert config_of(body) == config_of(dict(reversed(list(body.items()))))
    assert config_of({**body, "task_info": fields.b64encode(b"x")}) != config_of(body)
    # task_start and task_end round down to the time precision, as Janus's binaries do.
    interval = task_from_fields(
        {**body, "task_start": 7201, "task_end": 14399}).task.task_interval
    assert interval is not None and (int(interval.start), int(interval.duration)) == (2, 1)


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


# ---------------------------------------------------------------------------------------
# DAP-09 fields and the request-version rule
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, version", [
    ({}, "dap-09"),                                             # draft-07 endpoint_for_task
    ({"query_type": 1}, "dap-09"),                              # draft-07 add_task
    ({"time_precision": 60, "measurement": "1"}, "dap-09"),     # draft-07 upload
    ({"batch_mode": 1}, "dap-18"),                              # Janus (DAP-18)
    ({"batch_mode": 2, "query_type": 2}, "dap-18"),             # our runner's dap-18 bodies
    ({"query_type": 1, "dap_version": "dap-18"}, "dap-18"),     # explicit version wins
    ({"batch_mode": 1, "dap_version": "dap-09"}, "dap-09"),
])
def test_request_version(body: dict[str, Any], version: str) -> None:
    assert fields.request_version(body) == version
    assert version_of(body).name == version


@pytest.mark.parametrize("name", ["dap-99", "DAP-09", 9])
def test_request_version_unknown(name: Any) -> None:
    with pytest.raises(fields.FieldError, match="unknown dap_version"):
        fields.request_version({"dap_version": name})


DRAFT07 = {"task_id": TASK_IDS["dap-09"], "leader": "http://leader:8080/dap/",
           "vdaf": {"type": "Prio3SumVec", "length": "4", "bits": "8", "chunk_length": "2"}}
DRAFT07_AGGREGATOR = {**DRAFT07, "helper": "http://helper:8080/dap/", "query_type": 2,
                      "min_batch_size": 10, "max_batch_size": None, "time_precision": 3600,
                      "max_batch_query_count": 1, "task_expiration": 1_800_000_000}


def test_dap09_task_from_draft07_fields() -> None:
    task = task09_from_fields(DRAFT07_AGGREGATOR, "leader").task
    assert task.profile.name == "dap-09" and task.vdaf_name == "Prio3SumVec"
    assert dict(task.vdaf_parameters) == {"length": 4, "bits": 8, "chunk_length": 2}
    assert (int(task.query_type), task.min_batch_size, task.max_batch_size) == (2, 10, None)
    assert (task.time_precision, task.max_batch_query_count, task.task_expiration) == \
        (3600, 1, 1_800_000_000)
    assert task.helper_aggregator_endpoint == "http://helper:8080/dap/"
    # DAP-18 spellings where they do not conflict: batch_mode 2 is fixed_size, task_end
    # is task_expiration, max_measurement 2^bits - 1 is bits.
    janus = {**DRAFT07_AGGREGATOR, "query_type": None, "batch_mode": 2,
             "task_expiration": None, "task_end": 1_800_000_000,
             "vdaf": {**DRAFT07["vdaf"], "bits": None, "max_measurement": "255"}}
    janus["vdaf"] = {k: v for k, v in janus["vdaf"].items() if v is not None}
    assert task09_from_fields(janus, "helper").task.config_bytes() == \
        task.config_bytes()
    with pytest.raises(fields.FieldError, match="task_end and task_expiration disagree"):
        task09_from_fields({**DRAFT07_AGGREGATOR, "task_end": 1}, "leader")
    tf = task09_from_fields({**DRAFT07_AGGREGATOR, "task_start": 0,
                                    "task_info": "eA"}, "leader")
    assert len(tf.notes) == 2 and all("ignored" in n for n in tf.notes)


def test_dap09_each_role_needs_only_its_draft07_fields() -> None:
    """DAP-09 binds only the task ID into its AADs: the Collector gets no helper or time
    precision and the Client no query type, as draft-07 sends them."""
    collector = task09_from_fields(
        {**DRAFT07, "query_type": 1, "collector_authentication_token": "t"}, "collector")
    assert collector.task.helper_aggregator_endpoint == PLACEHOLDER_HELPER
    assert collector.task.time_precision == 1
    client = task09_from_fields(
        {**DRAFT07, "helper": "http://helper:8080/dap/", "time_precision": 3600}, "client")
    assert int(client.task.query_type) == 1 and client.task.time_precision == 3600
    with pytest.raises(fields.FieldError, match="missing field query_type"):
        task09_from_fields(DRAFT07, "collector")
    with pytest.raises(fields.FieldError, match="missing field helper"):
        task09_from_fields({**DRAFT07, "time_precision": 60}, "client")
    with pytest.raises(fields.FieldError, match="missing field min_batch_size"):
        task09_from_fields({**DRAFT07_AGGREGATOR, "min_batch_size": None}, "helper")


@pytest.mark.parametrize("vdaf, measurement, expected, cls", [
    ({"type": "Prio3Count"}, "1", 1, "Prio3CountV08"),
    ({"type": "Prio3Sum", "bits": "8"}, "200", 200, "Prio3SumV08"),
    ({"type": "Prio3Sum", "max_measurement": "255"}, "255", 255, "Prio3SumV08"),
    ({"type": "Prio3Histogram", "length": "3", "chunk_length": "1"}, "2", 2,
     "Prio3HistogramV08"),
    ({"type": "Prio3SumVec", "length": "2", "bits": "2", "chunk_length": "1"},
     ["1", "3"], [1, 3], "Prio3SumVecV08"),
])
def test_dap09_vdafs_are_vdaf08(vdaf: dict[str, Any], measurement: Any, expected: Any,
                                cls: str) -> None:
    v = fields.vdaf_from_descriptor(vdaf, "dap-09")
    assert type(v).__name__ == cls and v.VERIFY_KEY_SIZE == 16
    assert fields.measurement_from_json(v, measurement) == expected


def test_dap09_queries() -> None:
    task = task09_from_fields(DRAFT07_AGGREGATOR, "leader").task
    assert isinstance(task, Task09)
    current = query09_from_json({"type": 2, "subtype": 1}, task)
    assert current == m09.Query.fixed_size(m09.FixedSizeQuery.current_batch())
    by_id = query09_from_json(
        {"type": "2", "subtype": "0", "batch_id": fields.b64encode(bytes(range(32)))}, task)
    assert by_id.fixed_size_query is not None
    assert bytes(by_id.fixed_size_query.batch_id or b"") == bytes(range(32))
    ti = task09_from_fields({**DRAFT07_AGGREGATOR, "query_type": 1}, "leader").task
    assert isinstance(ti, Task09)
    query = query09_from_json(
        {"type": 1, "batch_interval_start": 7200, "batch_interval_duration": 3600}, ti)
    assert query.batch_interval == m09.Interval(m09.Time(7200), m09.Duration(3600))
