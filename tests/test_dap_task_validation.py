"""Task options are validated when a task is provisioned (admin API, `ppm task create`,
the interop API: `dap.core.tasks.validate_task`): types, ranges, batch sizes, the VDAF's
size; a refusal is a 400 problem document (or one line from the CLI) naming the
problem, and nothing is stored."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.core.tasks import MAX_VDAF_ELEMENTS, TaskOptions, vdaf_elements
from ppm_reference.dap.provision import ProvisionedTask, new_task
from tests.dap_harness import PROTOS, AggregatorPair

PROTO = PROTOS[0]
PROJECT_ROOT = Path(__file__).resolve().parent.parent
TOKEN = "admin-secret"


async def post_task(pair: AggregatorPair, body: dict[str, Any]) -> tuple[int, Any, str]:
    async with aiohttp.ClientSession() as s, s.post(
            f"{pair.helper_url}internal/tasks", data=json.dumps(body),
            headers={"Authorization": f"Bearer {TOKEN}"}) as resp:
        return resp.status, await resp.json(content_type=None), resp.content_type


def task(pair: AggregatorPair, vdaf: Any = None, **kwargs: Any) -> ProvisionedTask:
    kwargs.setdefault("min_batch_size", 10)
    return new_task(vdaf or PROTO.count(), pair.leader_url, pair.helper_url,
                    profile=PROTO.profile, **kwargs)


LS = {"batch_mode": BatchMode.LEADER_SELECTED}

# (task parameters, options, words of the refusal)
REFUSED: list[tuple[dict[str, Any], Any, str]] = [
    (LS, {"max_batch_size": "abc"}, "max_batch_size must be an integer, got 'abc'"),
    (LS, {"max_batch_size": -5}, "max_batch_size must be in [1, 4294967295], got -5"),
    (LS, {"max_batch_size": 0}, "max_batch_size must be in [1,"),
    (LS, {"max_batch_size": True}, "max_batch_size must be an integer"),
    (LS, {"max_batch_size": 9}, "max_batch_size 9 is below min_batch_size 10"),
    ({}, {"max_batch_size": 20}, "applies to the leader-selected batch mode only"),
    ({}, {"colour": "red"}, "unknown task options ['colour']"),
    ({}, {"verify_keys": {"300": "00" * 32}}, "verify_keys key ID must be in [1, 255]"),
    ({}, {"verify_keys": {"1": "zz"}}, "verify_keys[1] is not hex"),
    ({}, {"verify_keys": {"1": "00"}}, "verification key 1 is 1 bytes, the VDAF needs 32"),
    ({}, {"verify_keys": ["00"]}, "verify_keys must be an object"),
    ({}, {"helper_unknown_key_ids": [256]}, "helper_unknown_key_ids must be in [0, 255]"),
    ({}, "not an object", "options must be a JSON object"),
    ({"min_batch_size": 1}, {}, "min_batch_size 1 is below this Aggregator's floor of 2"),
]


def test_admin_api_refuses_bad_tasks(tmp_path: Path) -> None:
    async def run() -> None:
        async with AggregatorPair(tmp_path, helper_overrides={"admin_token": TOKEN}) as pair:
            for params, options, words in REFUSED:
                body = task(pair, **params).admin_json("helper")
                body["options"] = options
                status, doc, ctype = await post_task(pair, body)
                assert (status, ctype) == (400, "application/problem+json"), (words, doc)
                assert words in doc["detail"] and "\n" not in doc["detail"], (words, doc)
            huge = task(pair, PROTO.histogram(2**30, 2**15)).admin_json("helper")
            status, doc, _ = await post_task(pair, huge)
            assert status == 400 and f"at most {MAX_VDAF_ELEMENTS}" in doc["detail"]
            with pair.helper_state.datastore.transaction() as tx:
                assert tx.list_tasks() == []  # nothing stored
            # Accepted: good options, and the largest VDAF allowed.
            good = task(pair, max_batch_size=12, **LS).admin_json("helper")
            assert (await post_task(pair, good))[0] == 201
            edge = PROTO.histogram(MAX_VDAF_ELEMENTS, 256)
            assert vdaf_elements(edge) == MAX_VDAF_ELEMENTS
            assert (await post_task(pair, task(pair, edge).admin_json("helper")))[0] == 201
    asyncio.run(run())


def test_min_batch_size_floor_is_configurable(tmp_path: Path) -> None:
    """1 only where the server says so (tests, development); a floor can also be raised
    (DAP-18 Section 8.6.3: opt out of tasks whose minimum batch size is too small)."""
    async def run() -> None:
        async with AggregatorPair(tmp_path, helper_overrides={
                "admin_token": TOKEN, "min_batch_size_floor": 1}) as pair:
            assert (await post_task(pair, task(pair, min_batch_size=1).admin_json(
                "helper")))[0] == 201
        async with AggregatorPair(tmp_path / "b", helper_overrides={
                "admin_token": TOKEN, "min_batch_size_floor": 100}) as pair:
            status, doc, _ = await post_task(pair, task(pair, min_batch_size=99).admin_json(
                "helper"))
            assert status == 400 and "floor of 100" in doc["detail"]
    (tmp_path / "b").mkdir()
    asyncio.run(run())


def ppm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ppm_reference", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "words"), [
    (["--vdaf", "Prio3Histogram", "--length", str(2**30)], "at most 65536"),
    (["--vdaf", "Prio3Count", "--min-batch-size", "1"], "below this Aggregator's floor"),
])
def test_cli_refuses_in_one_line(tmp_path: Path, args: list[str], words: str) -> None:
    configs = []
    for role, port in (("leader", 9), ("helper", 10)):
        path = tmp_path / f"{role}.json"
        path.write_text(json.dumps({"role": role, "datastore": f"{role}.sqlite",
                                    "listen_port": port}))
        configs += [f"--{role}-config", str(path)]
    proc = ppm("task", "create", *args, *configs, "--out-dir", str(tmp_path / "out"))
    assert proc.returncode == 2, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ppm: error: ") and words in lines[0], \
        proc.stderr
    assert not (tmp_path / "out").exists()


# -- TaskOptions as a codec: its JSON round-trips, and nothing else gets through ---------


@given(st.none() | st.integers(1, 2**32 - 1),
       st.dictionaries(st.integers(1, 255), st.binary(min_size=1, max_size=40).map(bytes.hex),
                       max_size=4),
       st.lists(st.integers(0, 255), max_size=5))
@settings(max_examples=200, deadline=None)
def test_task_options_round_trip(max_batch_size: int | None, keys: dict[int, str],
                                 unknown: list[int]) -> None:
    opts = TaskOptions(max_batch_size, tuple(sorted(keys.items())),
                       tuple(sorted(set(unknown))))
    assert TaskOptions.from_json(opts.to_json()) == opts


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


@given(st.dictionaries(st.sampled_from(["max_batch_size", "verify_keys",
                                        "helper_unknown_key_ids", "other"]), JSON))
@settings(max_examples=300, deadline=None)
def test_task_options_refuse_with_value_error_only(data: dict[str, Any]) -> None:
    try:
        opts = TaskOptions.from_json(json.dumps(data))
    except ValueError:
        return
    # What is accepted is well typed.
    assert opts.max_batch_size is None or (type(opts.max_batch_size) is int
                                           and opts.max_batch_size >= 1)
    assert all(type(k) is int and 1 <= k <= 255 for k, _ in opts.verify_keys)
    assert all(type(k) is int and 0 <= k <= 255 for k in opts.helper_unknown_key_ids)
