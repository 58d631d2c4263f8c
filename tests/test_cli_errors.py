"""Every `ppm` command on bad input: one clear line on stderr, never a traceback (issue 16).

The argparse tree is enumerated, so a sub-command added later is covered: each leaf gets
an unknown option, a value its typed options cannot parse, and no arguments at all. Then
the issue's own list, each reproduced (in process, `ppm.cli.main` with capsys) before it
was fixed: `ppm dp` on epsilon 0 / delta > 1 / n 0 and RAPPOR below its amplification
threshold, the vector checkers, the interop commands, `task create --out-dir` over an
earlier task, swapped admin URLs, the only active HPKE key, uploads outside the task
interval, `collect` timeouts (with re-polling the job by its URL), the server
configuration's types, and the README's generated configuration table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """A command that configures logging (interop serve) must not leave a handler on a
    captured stream that a later test closes."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


def has_mpl() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def leaves() -> list[tuple[list[str], argparse.ArgumentParser]]:
    """Every sub-command that runs something: (its words, its parser)."""
    out: list[tuple[list[str], argparse.ArgumentParser]] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and path:
            out.append((path, parser))
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, [*path, name])

    walk(build_parser(), [])
    return out


LEAVES = leaves()
IDS = [" ".join(p) for p, _ in LEAVES]


def one_line(capsys: pytest.CaptureFixture[str], prefix: str = "ppm") -> str:
    """The one line on stderr (asserted: exactly one, no traceback), without its prefix."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    assert lines[0].startswith(prefix) and "error:" in lines[0], err
    return lines[0]


def test_the_tree_is_enumerated() -> None:
    names = set(IDS)
    # A sample of every area: if the walk broke, the parametrized tests below would
    # silently test nothing.
    assert {"dp rappor", "vdaf vectors check", "dap vectors check", "task create", "upload",
            "collect", "demo", "interop serve", "leader", "config init"} <= names
    assert len(LEAVES) >= 30


@pytest.mark.parametrize("path", [p for p, _ in LEAVES], ids=IDS)
def test_unknown_option_is_one_line_with_the_command_name(
        path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*path, "--frobnicate"]) == 2
    line = one_line(capsys)
    # The sub-command's own name (ppm demo --frobnicate used to print ppm's usage).
    assert line.startswith(f"ppm {' '.join(path)}: error: ")
    assert "unrecognized arguments: --frobnicate" in line or "are required" in line
    assert f"see ppm {' '.join(path)} --help" in line


@pytest.mark.parametrize("path,parser", LEAVES, ids=IDS)
def test_unparsable_values_are_one_line(path: list[str], parser: argparse.ArgumentParser,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    typed = [a for a in parser._actions if a.option_strings
             and (a.type not in (None, str, Path) or a.choices)]
    for action in typed:
        option = action.option_strings[-1]
        assert main([*path, option, "@@"]) == 2, option
        line = one_line(capsys)
        assert f"argument {option}" in line or option in line, line


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=31, max_size=31), st.sampled_from(["show", "delete"]))
def test_task_ids_beginning_with_a_dash_are_values(rest: bytes, command: str) -> None:
    """One task ID in 64 begins with "-" (base64url of a first byte below 4); the CLI used
    to read it as an option (`-h...` even as --help) and say TASK_ID was missing."""
    import base64

    task_id = base64.urlsafe_b64encode(b"\xf8" + rest).decode().rstrip("=")
    assert task_id.startswith("-")
    parser = build_parser()
    args = parser.parse_args(["task", command, "--admin", "http://127.0.0.1:1/", task_id])
    assert args.task_id == task_id
    # Before the other options too, and as an option's value.
    args = parser.parse_args(["task", command, task_id, "--admin", "http://127.0.0.1:1/"])
    assert args.task_id == task_id and args.admin == "http://127.0.0.1:1/"
    args = parser.parse_args(["task", command, "--admin", task_id, task_id])
    assert args.admin == task_id


def test_options_still_win_over_the_id_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["task", "show", "-h"]) == 0
    assert "TASK_ID" in capsys.readouterr().out
    assert main(["task", "show", "--admin", "http://127.0.0.1:1/", "-x" * 2]) == 2
    assert "TASK_ID" in one_line(capsys)


# The sub-commands with a required argument (the others run with none given).
REQUIRING = [(p, x) for p, x in LEAVES if any(a.required for a in x._actions)]


def test_most_commands_require_something() -> None:
    assert len(REQUIRING) >= 20


@pytest.mark.parametrize("path,parser", REQUIRING, ids=[" ".join(p) for p, _ in REQUIRING])
def test_missing_required_arguments_are_one_line(
        path: list[str], parser: argparse.ArgumentParser,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(path) == 2
    assert "required" in one_line(capsys)


# -- ppm dp ------------------------------------------------------------------------------

DP_BAD = {"--epsilon": "0", "--eps0": "0", "--sigma": "0", "--delta": "1.5", "--n": "0",
          "--m": "0", "--clients": "0", "--length": "0", "--rounds": "0", "--q": "2"}

DP_GOOD = {"--epsilon": "1", "--eps0": "1", "--sigma": "2", "--delta": "1e-6", "--n": "1000",
           "--m": "10", "--clients": "3", "--length": "4", "--rounds": "2", "--q": "0.1",
           "--sensitivity": "1", "--fp": "1e-9"}


def _dp_checkable(parser: argparse.ArgumentParser) -> bool:
    return bool({o for a in parser._actions for o in a.option_strings} & set(DP_BAD))


DP_LEAVES = [(p, x) for p, x in LEAVES if p[0] == "dp" and _dp_checkable(x)]


def test_every_dp_command_but_tables_is_checked() -> None:
    skipped = {" ".join(p) for p, x in LEAVES if p[0] == "dp" and not _dp_checkable(x)}
    assert skipped <= {"dp tables"}, skipped


@pytest.mark.parametrize("path,parser", DP_LEAVES, ids=[" ".join(p) for p, _ in DP_LEAVES])
def test_dp_bad_parameters(path: list[str], parser: argparse.ArgumentParser,
                           capsys: pytest.CaptureFixture[str]) -> None:
    options = {o for a in parser._actions for o in a.option_strings}
    required = [a.option_strings[-1] for a in parser._actions if a.required]
    checked = 0
    for option, bad in DP_BAD.items():
        if option in options:
            args = {o: DP_GOOD[o] for o in required}
            args[option] = bad
            assert main([*path, *(x for kv in args.items() for x in kv)]) == 2, option
            assert option in one_line(capsys)
            checked += 1
    assert checked


def test_dp_rappor_below_the_amplification_threshold(
        capsys: pytest.CaptureFixture[str]) -> None:
    # n below about 200 used to crash formatting the (absent) Renyi order.
    assert main(["dp", "rappor", "--eps0", "3", "--n", "100", "--delta", "1e-9"]) == 0
    out = capsys.readouterr().out
    assert "(6.000000, 1e-09)-DP" in out and "too few Clients" in out
    assert main(["dp", "rappor", "--eps0", "3", "--n", "100", "--delta", "1e-9",
                 "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["epsilon"] == 6.0 and obj["order"] is None


def test_dp_values_the_layers_refuse_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # Accepted by argparse, refused by dp_policy: still one line, also with --json.
    assert main(["dp", "distributed-laplace", "--epsilon", "x", "--clients", "3",
                 "--json"]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and json.loads(captured.out)["ok"] is False


def test_best_integer_order_is_the_exhaustive_scan() -> None:
    """The bracketed search of `ppm dp batch-size` (issue 16: minutes of scanning every
    integer order) finds the order the exhaustive scan over 2..4096 finds."""
    from ppm_reference.dp_policy import accounting
    from ppm_reference.dp_policy.calibration import rdp_to_dp

    # (Over orders 2..1024 to keep the exhaustive scan short; the optima are inside.)
    for eps0, n in ((3.0, 1000), (5.0, 3000), (1.0, 2000), (7.0, 20000), (0.5, 500)):
        rr = accounting.AggregatedRandomizedResponse(n, eps0)

        def curve(a: float, rr: Any = rr) -> float:
            return 2.0 * rr.rdp(a)

        fast = accounting.best_integer_order(curve, 1e-9, top=1024)
        exhaustive = rdp_to_dp(curve, 1e-9, [float(a) for a in range(2, 1025)])
        assert fast == exhaustive, (eps0, n)
        assert 2 < fast[1] < 1024, (eps0, n)  # an interior optimum: a real search


def test_dp_batch_size_is_the_smallest(capsys: pytest.CaptureFixture[str]) -> None:
    from ppm_reference.dp_policy import accounting

    steps: list[tuple[int, int]] = []
    n = accounting.rappor_min_batch_size(3.0, 1.0, 1e-9, progress=lambda lo, hi: steps.append(
        (lo, hi)))
    assert n is not None and steps
    assert accounting.rappor_amplification(3.0, n, 1e-9).epsilon <= 1.0
    assert accounting.rappor_amplification(3.0, n - 1, 1e-9).epsilon > 1.0
    assert main(["dp", "batch-size", "--eps0", "3", "--epsilon", "1", "--delta", "1e-9",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["batch_size"] == n
    assert main(["dp", "batch-size", "--eps0", "3", "--epsilon", "1", "--delta", "1e-9",
                 "--n-max", "100"]) == 0
    assert "not reached by n = 100" in capsys.readouterr().out


# -- vectors, interop, demo --------------------------------------------------------------


def test_vdaf_vectors_version_from_the_folder(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    # Without --vdaf-version every vdaf-08 file used to fail as if the code were broken.
    assert main(["vdaf", "vectors", "check", str(ROOT / "test_vectors/vdaf-08")]) == 0
    assert " 0 failed" in capsys.readouterr().out
    # Outside a vdaf-NN folder, the file's layout tells.
    src = ROOT / "test_vectors/vdaf-08/Prio3Count_0.json"
    (tmp_path / "Prio3Count_0.json").write_bytes(src.read_bytes())
    assert main(["vdaf", "vectors", "check", str(tmp_path)]) == 0
    capsys.readouterr()
    # An empty folder is an error, not "0 passed".
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["vdaf", "vectors", "check", str(empty)]) == 2
    assert "no vector files" in one_line(capsys)
    assert main(["dap", "vectors", "check", str(empty)]) != 0


def test_interop_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["interop", "serve", "--role", "leader", "--port", "99999"]) == 2
    assert "0..65535" in one_line(capsys)
    urls = ["--client", "http://127.0.0.1:1", "--leader", "http://127.0.0.1:1",
            "--helper", "http://127.0.0.1:1", "--collector", "http://127.0.0.1:1"]
    assert main(["interop", "run", *urls, "--vdaf", "Frobnicate"]) == 2
    assert "Prio3Count" in one_line(capsys)


def test_interop_serve_on_a_busy_port(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["interop", "serve", "--role", "helper", "--port", str(port)]) != 0
    assert "already in use" in one_line(capsys)


def test_json_output_into_a_closed_pipe() -> None:
    proc = subprocess.run(
        f"{sys.executable} -m ppm_reference dp tables --json | head -c 1", shell=True,
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_demo_bars_fit_the_terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ppm_reference.dap.cli.demo import render

    monkeypatch.setenv("COLUMNS", "60")
    result = {"report_count": 10, "vdaf_description": "Prio3Histogram", "batch_mode":
              "time-interval", "dp_policy": None, "vdaf": "Prio3Histogram",
              "interval": {"start_utc": "2026-01-01T00:00:00Z", "duration": 3600},
              "true": [1, 0, 9], "private": [1.0, 300.0, -5.0],
              "error": {"per_bucket": [0, 300, -14], "max_abs": 300, "rmse": 1.0},
              "guarantee": {"trust_model": None, "note": "none"}, "guarantees": {},
              "timings": {"total": 1, "setup": 0, "upload": 0, "collect": 0}}
    assert max(len(line) for line in render(result).splitlines()) <= 80
    pytest.importorskip("matplotlib", reason="matplotlib (the 'plot' extra) is absent")
    from ppm_reference.dap.cli.demo import plot_demo

    plot_demo(str(tmp_path / "demo.png"), result)
    assert (tmp_path / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- server configuration ----------------------------------------------------------------


@pytest.mark.parametrize("config,message", [
    ({"role": "leader", "datastore": "x.sqlite", "worker_interval": "fast"},
     'worker_interval must be a number, not "fast"'),
    ({"role": "leader", "datastore": "x.sqlite", "listen_port": "8081"},
     'listen_port must be an integer, not "8081"'),
    ({"datastore": "x.sqlite"}, "missing required key(s) role"),
    ({"role": "aggregator", "datastore": "x.sqlite"}, 'role must be "leader" or "helper"'),
    ({"role": "leader", "datastore": "x.sqlite", "async_helper": 1},
     "async_helper must be true or false"),
    ({"role": "leader", "datastore": "x.sqlite", "listen_port": 70000}, "0..65535"),
    ({"role": "leader", "datastore": "x.sqlite", "frobnicate": 1}, "unknown configuration"),
    ({"role": "leader", "datastore": "x.sqlite", "event_loop": "libuv"},
     'event_loop must be one of auto, uvloop, asyncio, not "libuv"'),
    ([1, 2], "must be a JSON object"),
])
def test_server_config_types(config: Any, message: str, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    for role in ("leader",):
        assert main([role, "--config", str(path), "--check"]) == 2
        assert message in one_line(capsys)


def test_event_loop_without_uvloop(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Where uvloop is not installed, "auto" is asyncio's loop and "uvloop" a clear
    configuration error; where it is, "auto" is uvloop."""
    from ppm_reference.dap.server import serving

    assert serving.event_loop_name("asyncio") == "asyncio"
    if serving.uvloop_installed():
        assert serving.event_loop_name("auto") == serving.event_loop_name("uvloop") == "uvloop"
    monkeypatch.setattr(serving, "uvloop_installed", lambda: False)
    assert serving.event_loop_name("auto") == "asyncio"
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"role": "leader", "datastore": "x.sqlite",
                                "event_loop": "uvloop"}))
    assert main(["leader", "--config", str(path), "--check"]) == 2
    assert 'event_loop "uvloop": the uvloop package is not installed' in one_line(capsys)
    assert not (tmp_path / "x.sqlite").exists()


def test_run_loop_runs_on_the_named_loop() -> None:
    from ppm_reference.dap.server.serving import run_loop

    seen: list[str] = []

    async def main() -> None:
        seen.append(type(asyncio.get_running_loop()).__module__)

    run_loop(main(), "asyncio")
    assert seen[-1].startswith("asyncio")
    pytest.importorskip("uvloop", reason="uvloop is not installed")
    run_loop(main(), "uvloop")
    assert seen[-1].startswith("uvloop")


def test_config_types_come_from_the_dataclass() -> None:
    """A key another module adds to AggregatorConfig is checked from its annotation."""
    import dataclasses

    from ppm_reference.dap.server.config import AggregatorConfig, check_types

    @dataclasses.dataclass
    class Extended(AggregatorConfig):
        datastore_url: str | None = None
        front_ends: int = 1

    with pytest.raises(ValueError, match="front_ends must be an integer"):
        Extended(role="leader", datastore="x", front_ends="two")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="datastore_url must be a string or null"):
        Extended(role="leader", datastore="x", datastore_url=5)  # type: ignore[arg-type]
    check_types(Extended(role="leader", datastore="x", datastore_url="postgres://h/db"))


def test_config_init_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "init", "--out-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    for role in ("leader", "helper"):
        text = (tmp_path / f"{role}.json").read_text()
        assert '"# worker_interval"' in text  # commented
        assert main([role, "--config", str(tmp_path / f"{role}.json"), "--check"]) == 0
        assert f"a valid {role} configuration" in capsys.readouterr().out
    assert main(["helper", "--config", str(tmp_path / "leader.json"), "--check"]) == 2
    assert "not a helper" in one_line(capsys)
    assert main(["config", "init", "--out-dir", str(tmp_path)]) == 2
    assert "exists" in one_line(capsys)


def test_readme_configuration_keys_are_current() -> None:
    from ppm_reference.dap.server.config import README_BEGIN, README_END, readme_section

    text = (ROOT / "README.md").read_text()
    section = text[text.index(README_BEGIN):text.index(README_END) + len(README_END)]
    assert section == readme_section(), \
        "README is stale: run python -m ppm_reference.dap.server.config --readme"


# -- tasks, uploads and collections against running Aggregators --------------------------


class ServersInThread:
    """A Leader and a Helper (tests/dap_harness.AggregatorPair) on an event loop of their
    own, so that the CLI's blocking admin client and its own asyncio.run can call them."""

    def __init__(self, tmp_path: Path, **leader: Any) -> None:
        from tests.dap_harness import AggregatorPair

        overrides = {"admin_token": "tok", "min_batch_size_floor": 1}
        self.pair = AggregatorPair(tmp_path, {**overrides, **leader}, overrides)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> Any:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.pair.start(), self.loop).result(30)
        self.pair.loop = self.loop  # type: ignore[attr-defined] - for tests that stop one
        return self.pair

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.pair.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Any]:
    with ServersInThread(tmp_path) as pair:
        yield pair


def admin(url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    req = urllib.request.Request(url + "internal/" + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer tok"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            content = resp.read()
            return resp.status, json.loads(content) if content else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def create(pair: Any, out: Path, *extra: str, swap: bool = False) -> int:
    leader, helper = (pair.helper_url, pair.leader_url) if swap else \
        (pair.leader_url, pair.helper_url)
    return main(["task", "create", "--vdaf", "Count", "--min-batch-size", "2",
                 "--leader-admin", leader, "--helper-admin", helper, "--admin-token", "tok",
                 "--out-dir", str(out), *extra])


def test_task_files_and_admin_urls(servers: Any, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "task"
    assert create(servers, out, swap=True) == 2
    assert "swapped" in one_line(capsys)
    assert not out.exists()  # refused before anything was provisioned
    assert create(servers, out) == 0
    first = (out / "collector-task.json").read_text()
    capsys.readouterr()
    # A second task into the same folder would lose the first one's collector key.
    assert create(servers, out) == 2
    assert "--force" in one_line(capsys)
    assert (out / "collector-task.json").read_text() == first
    assert create(servers, out, "--force") == 0
    assert (out / "collector-task.json").read_text() != first


def test_the_only_active_hpke_key_stays(servers: Any) -> None:
    status, keys = admin(servers.leader_url, "GET", "hpke_keys")
    active = [k["config_id"] for k in keys if k["state"] == "active"]
    assert status == 200 and len(active) == 1
    status, doc = admin(servers.leader_url, "DELETE", f"hpke_keys/{active[0]}")
    assert status == 409 and "only active key" in doc["detail"]
    status, _ = admin(servers.leader_url, "PUT", f"hpke_keys/{active[0]}",
                      {"state": "expired"})
    assert status == 409
    # With another active key, the old one goes.
    status, new = admin(servers.leader_url, "POST", "hpke_keys", {"state": "active"})
    assert status == 201
    assert admin(servers.leader_url, "DELETE", f"hpke_keys/{active[0]}")[0] == 200


@pytest.mark.parametrize("profile", ["dap-19", "dap-09"])
def test_upload_outside_the_task_interval(servers: Any, tmp_path: Path, profile: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "task"
    assert create(servers, out, "--task-start", "3600", "--task-end", "7200",
                  "--profile", profile) == 0
    capsys.readouterr()
    assert main(["upload", "--task", str(out / "client-task.json"), "1"]) == 2
    line = one_line(capsys)
    assert "has ended" in line and "1970-01-01T02:00:00Z (7200)" in line
    assert "Interval(" not in line


def test_collect_waits_says_why_and_repolls(servers: Any, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "task"
    assert create(servers, out) == 0
    capsys.readouterr()
    client_task, collector_task = out / "client-task.json", out / "collector-task.json"
    assert main(["upload", "--task", str(client_task), "1", "--json"]) == 0
    interval = json.loads(capsys.readouterr().out)["collect_hint"].split()[1]
    assert main(["collect", "--task", str(collector_task), "--interval", interval,
                 "--timeout", "-1"]) == 2
    assert "--timeout" in one_line(capsys)
    # One report, min_batch_size 2: the batch is not released.
    assert main(["collect", "--task", str(collector_task), "--interval", interval,
                 "--timeout", "1"]) == 1
    line = one_line(capsys)
    # What it waited for, from the Leader (PPM-Collection-Status): 1 report of 2.
    # (1 once the Leader has aggregated it; 0 if the poll came first on a loaded machine)
    assert re.search(r"[01] of min_batch_size 2 reports aggregated in this interval", line)
    assert "--job http" in line
    job = line.split("--job ")[1].split()[0]
    # The job stays; once enough reports are in, polling it gives the result.
    assert main(["upload", "--task", str(client_task), "1", "0"]) == 0
    capsys.readouterr()
    result = tmp_path / "result.json"
    deadline = time.time() + 30
    code = 1
    while code != 0 and time.time() < deadline:
        code = main(["collect", "--task", str(collector_task), "--interval", interval,
                     "--job", job, "--timeout", "5", "--out", str(result),
                     *(["--plot", str(tmp_path / "r.png")] if has_mpl() else [])])
    assert code == 0
    if has_mpl():
        assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    kept = json.loads(result.read_text())
    assert kept["result"] == 2 and kept["report_count"] == 3 and kept["job_url"] == job
    # Uploading into the collected interval: one summary line, no hint to collect it.
    capsys.readouterr()
    assert main(["upload", "--task", str(client_task), *["1"] * 20]) == 1
    captured = capsys.readouterr()
    assert "20 batch_collected" in captured.out
    assert captured.out.count("\n") <= 3 and "ppm collect" not in captured.out
    # Refused at upload, so not stored: counted by the Leader's /metrics.
    task_id = json.loads(client_task.read_text())["task_id"]
    assert f'ppm_upload_rejections_total{{task="{task_id}",reason="batch_collected"}} 20' \
        in scrape(servers.leader_url)
    assert main(["task", "show", "--admin", servers.leader_url, "--admin-token", "tok",
                 task_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["counters"]["reports"]
    assert shown["rejected_at_upload"] == {"batch_collected": 20}


def test_task_list_show_delete(servers: Any, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "task"
    assert create(servers, out) == 0
    assert main(["upload", "--task", str(out / "client-task.json"), "1", "0", "1"]) == 0
    task_id = json.loads((out / "client-task.json").read_text())["task_id"]
    capsys.readouterr()
    base = ["--admin", servers.leader_url, "--admin-token", "tok"]
    assert main(["task", "list", *base, "--json"]) == 0
    assert [t["task_id"] for t in json.loads(capsys.readouterr().out)["tasks"]] == [task_id]
    deadline, status = time.time() + 30, {}
    while time.time() < deadline:  # the Leader aggregates the 3 reports
        assert main(["task", "show", *base, str(out / "client-task.json"), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        if status["counters"]["reports"]["aggregated"] == 3:
            break
        time.sleep(0.2)
    c = status["counters"]
    assert c["reports"]["received"] == 3 and c["reports"]["pending"] == 0
    assert c["batches"] == {"aggregated_uncollected": 3, "collected_reports": 0,
                            "min_batch_size": 2, "ready": 1}
    assert main(["task", "show", *base, task_id]) == 0
    assert "3 received, 0 pending, 3 aggregated, 0 failed" in capsys.readouterr().out
    assert main(["task", "show", *base, "not-a-task"]) == 2
    assert "not a task ID" in one_line(capsys)
    assert main(["task", "delete", *base, task_id]) == 0
    capsys.readouterr()
    assert main(["task", "show", *base, task_id]) == 1
    assert "404" in one_line(capsys)


# -- logs and metrics --------------------------------------------------------------------


def test_metrics_endpoint(servers: Any, tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "task"
    assert create(servers, out) == 0
    assert main(["upload", "--task", str(out / "client-task.json"), "1", "0"]) == 0
    capsys.readouterr()
    url = servers.leader_url + "metrics"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=10)
    assert refused.value.code == 403
    req = urllib.request.Request(url, headers={"Authorization": "Bearer tok"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    task_id = json.loads((out / "client-task.json").read_text())["task_id"]
    lines = text.splitlines()
    # Requests by canonical route (no task IDs in the label), with their latencies.
    upload = [x for x in lines if x.startswith("ppm_http_requests_total")
              and 'route="/tasks/{task_id}/reports"' in x]
    assert upload and int(upload[0].rsplit(" ", 1)[1]) >= 1
    assert any(x.startswith("ppm_http_request_duration_seconds_bucket") and 'le="+Inf"' in x
               for x in lines)
    reports = {x.split("state=")[1].split('"')[1]: float(x.rsplit(" ", 1)[1]) for x in lines
               if x.startswith("ppm_task_reports{") and task_id in x}
    assert sum(reports.values()) == 2
    assert any(x.startswith('ppm_queue_depth{queue="reports_without_job"}') for x in lines)
    # Every sample line is NAME{LABELS} VALUE or NAME VALUE; every family has a TYPE.
    families = {x.split()[2] for x in lines if x.startswith("# TYPE")}
    for x in lines:
        if not x.startswith("#"):
            name = x.split("{")[0].split(" ")[0]
            base = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
            assert name in families or base in families, x
            float(x.rsplit(" ", 1)[1])


def test_json_log_lines() -> None:
    import logging

    from ppm_reference.dap.server.logs import JsonFormatter, configure

    record = logging.LogRecord("ppm.access", logging.INFO, __file__, 1, "%s %s %d",
                               ("GET", "/hpke_config", 200), None)
    record.route = "/hpke_config"
    obj = json.loads(JsonFormatter().format(record))
    assert obj["message"] == "GET /hpke_config 200" and obj["route"] == "/hpke_config"
    assert obj["level"] == "INFO" and obj["logger"] == "ppm.access"
    with pytest.raises(ValueError, match="log_format"):
        configure("INFO", "xml")


def test_log_options_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "init", "--out-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    leader = str(tmp_path / "leader.json")
    assert main(["leader", "--config", leader, "--log-format", "xml"]) == 2
    assert "--log-format" in one_line(capsys)
    assert main(["leader", "--config", leader, "--log-level", "debug", "--check"]) == 0


def scrape(url: str) -> list[str]:
    req = urllib.request.Request(url + "metrics", headers={"Authorization": "Bearer tok"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read().decode().splitlines()


def test_collect_names_a_helper_that_is_down(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # The Leader forms a job 2 s after the first report (min_job_size 10): time to stop
    # the Helper after the Client has fetched its HPKE configuration.
    with ServersInThread(tmp_path, min_job_size=10, straggler_age=2.0) as servers:
        out = tmp_path / "task"
        assert create(servers, out) == 0
        assert main(["upload", "--task", str(out / "client-task.json"), "1", "0", "1",
                     "--json"]) == 0
        helper_runner = servers.runners[0]  # AggregatorPair starts the Helper first
        asyncio.run_coroutine_threadsafe(helper_runner.cleanup(), servers.loop).result(30)
        interval = json.loads(capsys.readouterr().out.splitlines()[-1])["collect_hint"]
        assert main(["collect", "--task", str(out / "collector-task.json"), "--interval",
                     interval.split()[1], "--timeout", "6"]) == 1
        line = one_line(capsys)
        assert "0 of min_batch_size 2 reports aggregated in this interval" in line
        assert "3 of the task's waiting for aggregation" in line
        assert "aggregation jobs are being retried" in line


def test_dp_result_with_noise_and_guarantee(servers: Any, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "task"
    assert main(["task", "create", "--vdaf", "Histogram", "--length", "3",
                 "--min-batch-size", "2", "--dp-policy", "HistogramWithAggregatorLaplace",
                 "--epsilon", "1", "--leader-admin", servers.leader_url, "--helper-admin",
                 servers.helper_url, "--admin-token", "tok", "--out-dir", str(out)]) == 0
    capsys.readouterr()
    assert main(["upload", "--task", str(out / "client-task.json"), "0", "1", "2", "1",
                 "--json"]) == 0
    interval = json.loads(capsys.readouterr().out)["collect_hint"].split()[1]
    deadline, code = time.time() + 30, 1
    while code != 0 and time.time() < deadline:
        code = main(["collect", "--task", str(out / "collector-task.json"), "--interval",
                     interval, "--timeout", "5"])
    assert code == 0
    text = capsys.readouterr().out
    assert "noise:    expected standard deviation" in text
    assert "privacy:  1-DP (pure, replacement) in trust model OAOC" in text
    # The same interval again: the stored result, with the same guarantee, as JSON.
    assert main(["collect", "--task", str(out / "collector-task.json"), "--interval",
                 interval, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["noise_std"] > 0 and obj["guarantee"]["epsilon"] == 1.0
    assert obj["report_count"] == 4 and len(obj["result"]) == 3
