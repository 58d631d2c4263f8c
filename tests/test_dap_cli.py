"""The DAP command line: `ppm demo`, the by-hand flow (`ppm task create`, `ppm leader`,
`ppm helper`, `ppm upload`, `ppm collect`) in subprocesses, and clear errors on bad input."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.cli import main
from ppm_reference.dap.cli.args import build_vdaf
from ppm_reference.dap.cli.errors import CliError
from ppm_reference.dap.cli.upload import parse_measurement
from ppm_reference.dap.provision import new_task
from tests.dap_harness import server_processes

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def ppm(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ppm_reference", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=timeout)


def ppm_json(*args: str) -> dict[str, Any]:
    proc = ppm(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)  # exactly one JSON object
    return out


# ---------------------------------------------------------------------------------------
# ppm demo
# ---------------------------------------------------------------------------------------


def test_demo_json() -> None:
    proc = ppm("demo", "--reports", "200", "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no progress bar or status lines with --json
    result = json.loads(proc.stdout)
    assert result["ok"] is True
    assert result["vdaf"] == "Prio3Histogram"
    assert result["dp_policy"] == {"policy": "HistogramWithAggregatorRandomization",
                                   "epsilon": 1.0, "delta": 1e-9}
    assert len(result["true"]) == 10 and sum(result["true"]) == 200
    assert result["report_count"] == 200
    # The simulated distribution is visibly non-uniform (bucket 0 is the most frequent).
    assert result["true"][0] == max(result["true"]) > 2 * result["true"][-1]
    g = result["guarantee"]
    assert g["trust_model"] == "OAOC" and g["epsilon"] == 1.0
    assert 0 < g["delta"] <= 1e-9 and g["protected"] is True
    assert set(result["guarantees"]) == {"OAOC", "OAMC", "OC"}
    # Each bucket's error is the sum of two discrete Gaussians (sigma ~7.8 each, std ~11):
    # |error| > 100 (over 9 std) has probability below 1e-18 per bucket.
    std = result["error"]["expected_std"]
    assert 10 < std < 12
    errors = [p - t for p, t in zip(result["private"], result["true"], strict=True)]
    assert errors == result["error"]["per_bucket"]
    assert max(abs(e) for e in errors) < 100


def test_demo_without_policy_is_exact() -> None:
    result = ppm_json("demo", "--vdaf", "SumVec", "--policy", "none", "--reports", "60",
                      "--length", "4", "--batch-mode", "leader-selected")
    assert result["vdaf"] == "Prio3SumVec" and result["dp_policy"] is None
    assert result["report_count"] == 60
    assert result["private"] == result["true"]
    assert result["guarantee"]["protected"] is False


# ---------------------------------------------------------------------------------------
# The by-hand flow, every party in its own process
# ---------------------------------------------------------------------------------------


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Two configuration files with free ports; `start()` runs `ppm leader` and
    `ppm helper`, terminated at teardown."""
    with server_processes(tmp_path, admin_token="test-admin-token") as handle:
        yield handle


@pytest.mark.parametrize("profile", ["dap-18", "dap-09"])
def test_by_hand_flow(tmp_path: Path, servers: dict[str, Any], profile: str) -> None:
    """The README's flow, for a task of each profile (dap-09: VDAF-08, PUT uploads,
    collector-named collection jobs; leader-selected is DAP-09's fixed_size)."""
    configs, ports = servers["configs"], servers["ports"]
    # 1. A time-interval task written straight into the (not yet running) datastores.
    out = tmp_path / "task1"
    created = ppm_json("task", "create", "--profile", profile,
                       "--vdaf", "Prio3Histogram", "--length", "4",
                       "--min-batch-size", "5", "--leader-config", str(configs["leader"]),
                       "--helper-config", str(configs["helper"]), "--out-dir", str(out))
    assert created["leader_url"] == f"http://127.0.0.1:{ports['leader']}/"
    assert created["dp_policy"] is None
    collector_file = out / "collector-task.json"
    assert stat.S_IMODE(os.stat(collector_file).st_mode) == 0o600
    client_view = json.loads((out / "client-task.json").read_text())
    assert "collector_private_key" not in client_view
    assert json.loads(collector_file.read_text())["task_id"] == created["task_id"]

    servers["start"]()
    measurements = [0, 1, 1, 3, 2, 1, 0]
    up = ppm_json("upload", "--task", str(out / "client-task.json"),
                  *map(str, measurements))
    assert up["accepted"] == 7 and up["rejected"] == {}
    start = up["report_time"]
    got = ppm_json("collect", "--task", str(collector_file), "--interval", f"{start},3600")
    assert got["report_count"] == 7
    assert got["result"] == got["aggregate_result"] == [2, 3, 1, 1]
    assert got["interval"]["start"] == start and got["interval"]["duration"] == 3600

    # 2. A leader-selected SumVec task through the admin APIs of the running servers.
    out2 = tmp_path / "task2"
    # (VDAF-08 takes a bit width: a maximum of 2^3 - 1 serves both profiles.)
    ppm_json("task", "create", "--profile", profile,
             "--vdaf", "SumVec", "--length", "3", "--max-measurement", "7",
             "--batch-mode", "leader-selected", "--min-batch-size", "3",
             "--leader-admin", f"http://127.0.0.1:{ports['leader']}/",
             "--helper-admin", f"http://127.0.0.1:{ports['helper']}/internal/",
             "--admin-token", "test-admin-token", "--out-dir", str(out2))
    vectors = [[1, 2, 3], [5, 0, 0], [0, 0, 4]]
    up = ppm_json("upload", "--task", str(out2 / "client-task.json"),
                  *(json.dumps(v) for v in vectors))
    assert up["accepted"] == 3
    got = ppm_json("collect", "--task", str(out2 / "collector-task.json"), "--current-batch")
    assert got["report_count"] == 3 and got["result"] == [6, 2, 7]

    # The human-readable output, on the next leader-selected batch: the Collector deletes
    # a job once it has the result, so the identical request creates a new job.
    up = ppm_json("upload", "--task", str(out2 / "client-task.json"),
                  *(json.dumps(v) for v in [[1, 1, 1], [2, 2, 2], [0, 0, 1]]))
    assert up["accepted"] == 3
    proc = ppm("collect", "--task", str(out2 / "collector-task.json"), "--current-batch")
    assert proc.returncode == 0, proc.stderr
    assert "reports:  3" in proc.stdout and "[3, 3, 4]" in proc.stdout, proc.stdout
    # The first task's interval was collected once; asking again gets the result it
    # released (stored, not computed again); an overlapping interval is a batch overlap.
    again = ppm_json("collect", "--task", str(collector_file), "--interval", f"{start},3600")
    assert (again["report_count"], again["result"]) == (7, [2, 3, 1, 1])
    proc = ppm("collect", "--task", str(collector_file), "--interval", f"{start},7200")
    assert proc.returncode != 0 and "batchOverlap" in proc.stderr


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_servers_on_either_event_loop(tmp_path: Path, event_loop: str) -> None:
    """`event_loop` picks the servers' loop (asyncio's own, or uvloop, the default where
    it is installed); the protocol is the same on both: an upload and its collection."""
    if event_loop == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop is not installed")
    with server_processes(tmp_path, event_loop=event_loop) as servers:
        out = tmp_path / "task"
        ppm_json("task", "create", "--vdaf", "Prio3Sum", "--max-measurement", "9",
                 "--min-batch-size", "3", "--leader-config", str(servers["configs"]["leader"]),
                 "--helper-config", str(servers["configs"]["helper"]), "--out-dir", str(out))
        servers["start"]()
        for role in ("leader", "helper"):
            log = (tmp_path / f"{role}.log").read_text()
            assert f"(event loop: {event_loop})" in log, log
        up = ppm_json("upload", "--task", str(out / "client-task.json"), "4", "9", "0", "2")
        assert up["accepted"] == 4
        got = ppm_json("collect", "--task", str(out / "collector-task.json"),
                       "--interval", f"{up['report_time']},3600")
        assert (got["report_count"], got["result"]) == (4, 15)


# ---------------------------------------------------------------------------------------
# Bad input: a clear message and a non-zero exit code
# ---------------------------------------------------------------------------------------


def test_unknown_vdaf_subprocess() -> None:
    proc = ppm("demo", "--vdaf", "Prio3Bogus")
    assert proc.returncode == 2
    assert "unknown VDAF 'Prio3Bogus'" in proc.stderr and "Prio3Histogram" in proc.stderr
    assert proc.stdout == ""


@pytest.fixture
def task_files(tmp_path: Path) -> dict[str, Path]:
    """Views of a task whose Aggregators do not exist (for checks made before any I/O)."""
    pt = new_task(build_vdaf("Prio3Histogram", length=4), "http://127.0.0.1:9/",
                  "http://127.0.0.1:9/", min_batch_size=1, time_precision=3600)
    files = {"client": tmp_path / "client-task.json",
             "collector": tmp_path / "collector-task.json"}
    files["client"].write_text(json.dumps(pt.client_view()))
    files["collector"].write_text(json.dumps(pt.collector_view()))
    return files


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("measurement", ["4", "-1", "x", "[0,1]", "1.5", "true"])
def test_bad_measurement(capsys: pytest.CaptureFixture[str], task_files: dict[str, Path],
                         measurement: str) -> None:
    code, out, err = run_main(capsys, "upload", "--task", str(task_files["client"]), "0",
                              measurement)
    assert code == 2
    assert f"bad measurement {measurement!r}" in err
    assert "bucket index in [0, 4)" in err
    assert out == ""


def test_bad_input_errors(capsys: pytest.CaptureFixture[str], task_files: dict[str, Path],
                          tmp_path: Path) -> None:
    code, out, err = run_main(capsys, "upload", "--task", str(task_files["client"]), "1",
                              "[1]", "--json")
    assert code == 2 and json.loads(out) == {"ok": False, "error": err.split("error: ")[1]
                                             .strip()}

    code, _, err = run_main(capsys, "collect", "--task", str(task_files["collector"]),
                            "--interval", "1000,3600")
    assert code == 2 and "not aligned" in err and "--interval 0,7200" in err

    code, _, err = run_main(capsys, "collect", "--task", str(task_files["collector"]),
                            "--current-batch")
    assert code == 2 and "leader-selected" in err

    code, _, err = run_main(capsys, "collect", "--task", str(task_files["client"]),
                            "--interval", "0,3600")
    assert code == 2 and "collector_private_key" in err

    code, _, err = run_main(capsys, "upload", "--task", str(tmp_path / "missing.json"), "1")
    assert code == 2 and "task file not found" in err

    # Nothing listening: a failure while running is exit code 1 with the reason.
    code, _, err = run_main(capsys, "upload", "--task", str(task_files["client"]), "1")
    assert code == 1 and "cannot connect to 127.0.0.1:9" in err

    config = tmp_path / "helper.json"
    config.write_text(json.dumps({"role": "helper", "datastore": "h.sqlite"}))
    code, _, err = run_main(capsys, "leader", "--config", str(config))
    assert code == 2 and "configures a helper, not a leader" in err
    config.write_text(json.dumps({"role": "helper", "datastore": "h.sqlite", "bogus": 1}))
    code, _, err = run_main(capsys, "helper", "--config", str(config))
    assert code == 2 and "unknown configuration keys: ['bogus']" in err
    config.write_text(json.dumps({"role": "helper", "datastore": "h.sqlite"}))

    code, _, err = run_main(capsys, "task", "create", "--vdaf", "Histogram", "--length", "4",
                            "--dp-policy", "SumVecWithAggregatorLaplace", "--epsilon", "1",
                            "--leader-config", str(config), "--helper-config", str(config))
    assert code == 2 and "configures a helper, not a leader" in err
    leader = tmp_path / "leader.json"
    leader.write_text(json.dumps({"role": "leader", "datastore": "l.sqlite"}))
    code, _, err = run_main(capsys, "task", "create", "--vdaf", "Histogram", "--length", "4",
                            "--dp-policy", "SumVecWithAggregatorLaplace", "--epsilon", "1",
                            "--leader-config", str(leader), "--helper-config", str(config))
    assert code == 2 and "applies to Prio3SumVec, not Prio3Histogram" in err
    assert not (tmp_path / "h.sqlite").exists()  # nothing was provisioned

    code, _, err = run_main(capsys, "task", "create", "--vdaf", "Nope", "--leader-config",
                            str(leader), "--helper-config", str(config))
    assert code == 2 and "unknown VDAF 'Nope'" in err


def test_python_m_dap_server_bad_config(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "ppm_reference.dap.server", str(tmp_path / "none.json")],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "configuration file not found" in proc.stderr


def test_parse_measurement_per_vdaf() -> None:
    count = build_vdaf("Prio3Count")
    assert parse_measurement("1", count) == 1 and parse_measurement("true", count) == 1
    sumvec = build_vdaf("Prio3SumVec", length=3, max_measurement=5)
    assert parse_measurement("[1, 2, 5]", sumvec) == [1, 2, 5]
    multihot = build_vdaf("Prio3MultihotCountVec", length=3, max_weight=2)
    assert parse_measurement("[1, 0, true]", multihot) == [True, False, True]
    for vdaf, text in ((count, "2"), (sumvec, "[1, 2, 6]"), (sumvec, "[1, 2]"),
                       (multihot, "[1, 1, 1]"), (build_vdaf("Prio3Sum", max_measurement=9),
                                                 "10")):
        with pytest.raises(CliError, match="bad measurement"):
            parse_measurement(text, vdaf)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"vdaf": "Prio3SumVec", "max_measurement": 3}, "Prio3SumVec needs --length"),
    ({"vdaf": "Prio3Histogram", "length": 0}, "Prio3Histogram needs --length >= 1, got 0"),
    ({"vdaf": "Prio3Histogram", "length": 4, "chunk_length": 0},
     "Prio3Histogram needs --chunk-length >= 1, got 0"),
    ({"vdaf": "Prio3Histogram", "length": 4, "max_weight": 2},
     "Prio3Histogram takes no parameter '--max-weight' (its parameters are --length, "
     "--chunk-length)"),
    ({"vdaf": "Prio3MultihotCountVec", "length": 2, "max_weight": 3},
     "invalid Prio3MultihotCountVec parameters (--length 2, --max-weight 3, --chunk-length "
     "2)"),
    ({"vdaf": "Prio3Sum", "bits": 3}, "Prio3Sum of VDAF-18 takes --max-measurement, not --bits"),
    ({"vdaf": "Prio3Sum", "max_measurement": 10, "profile": "dap-09"},
     "Prio3Sum of VDAF-08 takes --bits b, or a --max-measurement of 2^b - 1; 10 is not"),
    ({"vdaf": "Prio3Sum", "profile": "dap-09"}, "Prio3Sum of VDAF-08 needs --bits"),
    ({"vdaf": "Prio3MultihotCountVec", "length": 4, "max_weight": 2, "profile": "dap-09"},
     "Prio3MultihotCountVec is not a VDAF of draft-irtf-cfrg-vdaf-08 (VDAF-08); it first "
     "appears in VDAF-10"),
    ({"vdaf": "Prio3Count", "profile": "dap-99"}, "unknown DAP profile 'dap-99'"),
])
def test_build_vdaf_errors_name_the_options(kwargs: dict[str, Any], message: str) -> None:
    name = kwargs.pop("vdaf")
    with pytest.raises(CliError) as info:
        build_vdaf(name, **kwargs)
    assert info.value.code == 2 and message in str(info.value)


def test_build_vdaf_by_profile() -> None:
    from ppm_reference.vdaf import registry

    vdaf = build_vdaf("Prio3SumVec", length=10, max_measurement=255)
    assert registry.describe(vdaf) == "Prio3SumVec(length=10, max_measurement=255, chunk_length=12)"
    vdaf = build_vdaf("Prio3SumVec", length=10, max_measurement=255, profile="dap-09")
    assert registry.describe(vdaf) == "Prio3SumVec(length=10, bits=8, chunk_length=12) [vdaf-08]"
    assert registry.version_of(build_vdaf("Prio3Count", profile="dap-09")) == "08"
