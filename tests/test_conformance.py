"""`ppm conformance` against this project's own Leader and Helper (`ppm leader` and `ppm
helper` as processes on 127.0.0.1), for every shipped profile and both roles: every MUST
and SHOULD check passes; a check is skipped only where it does not apply to the profile.

Also: the JUnit report has one testcase per check, `docs/conformance.md` is the
catalogue's, `--only`/`--skip` select by ID, prefix and tag, and the interop test API
provisioning (draft-07 and Janus dialects) works against `ppm interop serve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.cli import main
from ppm_reference.dap.profiles import SHIPPED
from ppm_reference.interop.conformance import catalogue as cat
from ppm_reference.interop.conformance.registry import catalogue
from tests.dap_harness import free_port, server_processes

ROOT = Path(__file__).resolve().parent.parent
ADMIN_TOKEN = "conformance-admin-token"
# Small body limits so that the oversized-request checks send little.
LIMIT = 1 << 20


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("conformance")
    with server_processes(tmp, admin_token=ADMIN_TOKEN, max_upload_bytes=LIMIT,
                          max_aggregation_job_bytes=LIMIT, max_collection_bytes=LIMIT) as s:
        s["start"]()
        yield {"leader": f"http://127.0.0.1:{s['ports']['leader']}/",
               "helper": f"http://127.0.0.1:{s['ports']['helper']}/"}


def run_suite(servers: dict[str, str], role: str, profile: str, tmp_path: Path,
              capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any],
                                                                        Path]:
    target = servers[role]
    # .ci/run keeps the JUnit reports (PPM_CONFORMANCE_JUNIT_DIR).
    out_dir = Path(os.environ.get("PPM_CONFORMANCE_JUNIT_DIR") or tmp_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    junit = out_dir / f"conformance-{role}-{profile}.xml"
    rc = main(["conformance", "--role", role, "--profile", profile, "--target", target,
               "--admin", target, "--admin-token", ADMIN_TOKEN,
               "--helper-url", servers["helper"], "--helper-admin", servers["helper"],
               "--json", "--junit-xml", str(junit), "--settle", "1", "--timeout", "10",
               "--oversize-bytes", str(2 * LIMIT), "--concurrency", "6", *extra])
    out = json.loads(capsys.readouterr().out)
    return rc, out, junit


@pytest.mark.parametrize("role", ["leader", "helper"])
@pytest.mark.parametrize("profile", SHIPPED)
def test_own_aggregators_conform(servers: dict[str, str], role: str, profile: str,
                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, junit = run_suite(servers, role, profile, tmp_path, capsys)
    failed = [f"{r['id']}: {r['detail']}" for r in out["results"] if r["outcome"] == "fail"]
    assert not failed, "\n".join(failed)
    assert rc == 0 and out["ok"]
    checks = catalogue(role)
    assert [r["id"] for r in out["results"]] == [c.id for c in checks]
    for r, c in zip(out["results"], checks, strict=True):
        if r["outcome"] == "skip":
            # Only checks that do not apply to the profile are skipped.
            assert not c.applies_to(profile), f"{c.id} skipped: {r['detail']}"
            assert r["detail"].startswith(f"not applicable to {profile}")
        else:
            assert c.applies_to(profile) and r["outcome"] == "pass"
    # JUnit: one testcase per check, skipped ones with their reason.
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == len(checks)
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert len(skipped) == sum(1 for c in checks if not c.applies_to(profile))
    assert all(s.find("skipped").get("message") for s in skipped)  # type: ignore[union-attr]
    assert suite.get("failures") == "0"


def test_docs_are_generated_from_the_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/conformance.md is `ppm conformance --list --markdown` (regenerate it with
    `python -m ppm_reference conformance --list --markdown > docs/conformance.md`)."""
    assert main(["conformance", "--list", "--markdown"]) == 0
    generated = capsys.readouterr().out
    assert (ROOT / "docs" / "conformance.md").read_text() == generated
    for c in catalogue():
        assert f"### {c.id}" in generated


def test_catalogue_records_are_complete() -> None:
    checks = catalogue()
    assert len({c.id for c in checks}) == len(checks)
    for c in checks:
        assert c.id.startswith("L-" if c.role == "leader" else "H-")
        assert c.sends and c.expects and c.title and c.func is not None
        assert set(c.profiles) <= set(SHIPPED)
        # Every applicable profile names the draft section the check comes from.
        assert all(p in c.refs for p in c.profiles), c.id
    # The list: every problem type a peer can provoke is expected somewhere.
    import inspect

    sources = "".join(inspect.getsource(c.func) for c in checks if c.func)
    for token in ("invalidMessage", "unrecognizedTask", "unrecognizedAggregationJob",
                  "batchInvalid", "invalidBatchSize", "batchMismatch", "stepMismatch",
                  "batchOverlap", "batchQueriedTooManyTimes", "missingTaskID",
                  "invalidAggregationParameter", "unsupportedExtension", "invalidExtension",
                  "REPORT_REPLAYED", "HPKE_DECRYPT_ERROR", "HPKE_UNKNOWN_CONFIG_ID",
                  "REPORT_TOO_EARLY", "TASK_EXPIRED", "REPORT_DROPPED", "TASK_NOT_STARTED",
                  "VDAF_VERIFY_ERROR", "INVALID_MESSAGE", "BATCH_COLLECTED",
                  "UNKNOWN_VERIFICATION_KEY_ID", "UNSUPPORTED_EXTENSION", "RETRY_ERRORS"):
        # RETRY_ERRORS: outdated_config (DAP-18) and hpke_unknown_config_id (DAP-19).
        assert token in sources, token


def test_selection_by_id_prefix_tag_and_level() -> None:
    checks = catalogue()
    assert [c.id for c in cat.select(checks, ["L-UPLOAD-001"])] == ["L-UPLOAD-001"]
    prefix = cat.select(checks, ["H-SHARE-"])
    assert prefix and all(c.id.startswith("H-SHARE-") for c in prefix)
    auth = cat.select(checks, ["auth"])
    assert auth and all("auth" in c.tags for c in auth)
    should = cat.select(checks, ["SHOULD"])
    assert should and all(c.level == cat.Level.SHOULD for c in should)
    rest = cat.select(checks, (), ["auth", "robustness"])
    assert not any({"auth", "robustness"} & set(c.tags) for c in rest)
    assert len(rest) + len({c.id for c in checks if {"auth", "robustness"} & set(c.tags)}) \
        == len(checks)


def test_exit_status_and_junit_of_failures(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Exit status 1 only when a MUST check fails; the JUnit report carries the failure's
    detail and the skip's reason."""
    from ppm_reference.interop.conformance import runner

    checks = {c.id: c for c in catalogue("leader")}
    must, should = checks["L-UPLOAD-001"], checks["L-PROBLEM-001"]
    skipped = checks["L-HPKE-003"]

    def fake(outcomes: dict[str, str]) -> Any:
        async def run(profile: Any, role: str, target: str, prov: Any, selected: Any,
                      opts: Any) -> list[runner.Result]:
            return [runner.Result(c, outcomes.get(c.id, runner.PASS),
                                  f"detail of {c.id}", 0.1, ["POST x: HTTP 500"])
                    for c in selected]
        return run

    args = ["conformance", "--role", "leader", "--profile", "dap-18", "--target",
            "http://127.0.0.1:1/", "--task-file", str(tmp_path / "none.json")]
    monkeypatch.setattr("ppm_reference.interop.conformance.provision.TaskFileProvisioner.__init__",
                        lambda self, *a, **k: None)
    junit = tmp_path / "r.xml"
    monkeypatch.setattr(runner, "run_checks", fake({should.id: runner.FAIL,
                                                    skipped.id: runner.SKIP}))
    assert main([*args, "--junit-xml", str(junit)]) == 0
    assert "0 MUST" in capsys.readouterr().out
    monkeypatch.setattr(runner, "run_checks", fake({must.id: runner.FAIL}))
    assert main([*args, "--junit-xml", str(junit)]) == 1
    assert "FAIL" in capsys.readouterr().out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failure = next(c for c in suite.findall("testcase") if c.find("failure") is not None)
    assert must.id in str(failure.get("name"))
    fail_el = failure.find("failure")
    assert fail_el is not None and fail_el.get("type") == "MUST"
    assert f"detail of {must.id}" in (fail_el.text or "")


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--role", "leader"]) == 2
    assert "--role, --profile and --target" in capsys.readouterr().err
    assert main(["conformance", "--role", "helper", "--profile", "dap-18", "--target",
                 "http://127.0.0.1:1/"]) == 2
    assert "give one of --interop-api" in capsys.readouterr().err


def test_task_files(servers: dict[str, str], tmp_path: Path,
                    capsys: pytest.CaptureFixture[str]) -> None:
    """Tasks provisioned beforehand: `ppm task create` writes the Collector's file (the
    Leader's checks); a check takes a file of its own, and is skipped when none is
    left."""
    files = []
    for i in range(2):
        out_dir = tmp_path / f"t{i}"
        assert main(["task", "create", "--vdaf", "Prio3Count", "--profile", "dap-18",
                     "--min-batch-size", "2", "--time-precision", "3600",
                     "--leader-admin", servers["leader"], "--helper-admin", servers["helper"],
                     "--admin-token", ADMIN_TOKEN, "--out-dir", str(out_dir)]) == 0
        capsys.readouterr()
        files += ["--task-file", str(out_dir / "collector-task.json")]
    rc = main(["conformance", "--role", "leader", "--profile", "dap-18", "--target",
               servers["leader"], *files, "--only", "L-UPLOAD-001,L-COLL-009,L-HPKE-001",
               "--json", "--timeout", "10"])
    out = json.loads(capsys.readouterr().out)
    outcomes = {r["id"]: (r["outcome"], r["detail"]) for r in out["results"]}
    assert rc == 0, outcomes
    assert sorted(o for o, _ in outcomes.values()) == ["pass", "pass", "skip"], outcomes
    assert any("no unused" in d for o, d in outcomes.values() if o == "skip")


@pytest.fixture(scope="module")
def interop_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`ppm interop serve` of a Leader and a Helper (DAP resources under /dap/)."""
    import time
    import urllib.request

    tmp = tmp_path_factory.mktemp("interop")
    urls: dict[str, str] = {}
    procs = []
    logs = []
    try:
        for role in ("helper", "leader"):
            port = free_port()
            log = open(tmp / f"{role}.log", "w")  # noqa: SIM115 - closed below
            logs.append(log)
            (tmp / role).mkdir()
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "ppm_reference", "interop", "serve", "--role", role, "--port",
                 str(port), "--data-dir", str(tmp / role)],
                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log))
            urls[role] = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 30
        for proc, (role, url) in zip(procs, urls.items(), strict=True):
            while True:
                try:
                    req = urllib.request.Request(url + "internal/test/ready", data=b"{}",
                                                 method="POST")
                    with urllib.request.urlopen(req, timeout=1):
                        break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise AssertionError((tmp / f"{role}.log").read_text()) from None
                    time.sleep(0.1)
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)
        for log in logs:
            log.close()


@pytest.mark.parametrize(("dialect", "profile"), [("draft07", "dap-09"), ("janus", "dap-09"),
                                                  ("janus", "dap-18")])
@pytest.mark.parametrize("role", ["leader", "helper"])
def test_interop_api_provisioning(interop_api: dict[str, str], dialect: str, profile: str,
                                  role: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The Aggregators of `ppm interop serve`, their tasks added with add_task in either
    dialect (draft-07's bodies exactly for dap-09): the whole suite passes (the oversized
    checks send 2 MiB, below these servers' limits, and are skipped)."""
    target = interop_api[role] + "dap/"
    args = ["conformance", "--role", role, "--profile", profile, "--target", target,
            "--interop-api", interop_api[role], "--dialect", dialect, "--timeout", "10",
            "--settle", "1", "--oversize-bytes", str(2 * LIMIT)]
    if role == "leader":
        args += ["--helper-interop-api", interop_api["helper"],
                 "--helper-url", interop_api["helper"] + "dap/"]
    rc = main(args)
    out = capsys.readouterr().out  # the table
    assert rc == 0, out
    assert " 0 failed (0 MUST)" in out, out
    assert "FAIL" not in out, out
