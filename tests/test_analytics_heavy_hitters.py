"""Poplar1 heavy hitters over DAP (`analytics/heavy_hitters.py`, `ppm analytics
heavy-hitters`, `dap/core/agg_params.py`).

- the walk down the prefix tree, against a local Poplar1 run: it asks for each level's
  survivors' children, every parameter valid after the previous ones;
- end to end over real HTTP (tests/dap_harness.py: a Leader and a Helper on 127.0.0.1)
  with planted heavy hitters, for every shipped profile (dap-09 with VDAF-08's Poplar1),
  once through `ppm analytics heavy-hitters` as a separate process;
- the Aggregators' rules for aggregation parameters: a batch collected once per
  parameter, each valid after the previous ones, with the same interval; a report
  aggregated once per parameter; time-interval only.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.analytics.heavy_hitters import (
    HeavyHittersError,
    bit_string,
    children,
    collect_heavy_hitters,
    describe,
    walk,
)
from ppm_reference.dap.collector import CollectionError
from ppm_reference.dap.common import BatchMode, ReportError, Role
from ppm_reference.dap.core import agg_params
from ppm_reference.dap.profiles import get_profile
from ppm_reference.vdaf.poplar1 import Poplar1, Poplar1V08
from ppm_reference.vdaf.vdaf import gen_rand, run_vdaf
from tests.dap_harness import PROTOS, AggregatorPair, Proto

PROJECT_ROOT = Path(__file__).resolve().parent.parent
FAST = {"worker_interval": 0.01}
POLL = 0.05


def _bits(value: int, width: int) -> tuple[bool, ...]:
    return tuple(bool((value >> (width - 1 - i)) & 1) for i in range(width))


def planted(bits: int, seed: int) -> tuple[list[tuple[bool, ...]], dict[str, int]]:
    """Two heavy hitters (12 and 9 reports) among 19 reports of other strings, each of
    which is held by fewer than 8 reports: with threshold 8 exactly the two are heavy."""
    rng = random.Random(seed)
    heavy = {_bits(0x41 % 2**bits, bits): 12, _bits(0x5A % 2**bits, bits): 9}
    measurements = [m for m, n in heavy.items() for _ in range(n)]
    while len(measurements) < 40:
        m = _bits(rng.randrange(2**bits), bits)
        if m not in heavy and measurements.count(m) < 7:
            measurements.append(m)
    rng.shuffle(measurements)
    return measurements, {bit_string(m): n for m, n in heavy.items()}


# -- the walk, locally ----------------------------------------------------------------------


def test_walk_finds_the_planted_strings_with_valid_parameters() -> None:
    vdaf = Poplar1(8)
    measurements, heavy = planted(8, seed=1)
    key = gen_rand(32)
    asked: list[Any] = []

    async def collect(agg_param: bytes) -> tuple[list[int], int]:
        param = vdaf.decode_agg_param(agg_param)
        assert vdaf.is_valid(param, asked), "the walk sent an invalid parameter"
        asked.append(param)
        return run_vdaf(vdaf, key, param, b"ctx", measurements), len(measurements)

    result = asyncio.run(walk(vdaf, collect, threshold=8))
    assert {bit_string(p): c for p, c in result.heavy} == heavy
    assert result.complete and [lv.level for lv in result.levels] == list(range(8))
    # Each level asks for the children of the previous level's survivors only.
    for before, after in zip(result.levels, result.levels[1:], strict=False):
        assert after.candidates == children([p for p, _ in before.survivors(8)])
    # A threshold above every count stops at level 0 with nothing.
    asked.clear()
    none = asyncio.run(walk(vdaf, collect, threshold=41))
    assert none.heavy == [] and not none.complete and len(none.levels) == 1


def test_walk_refuses_what_it_cannot_do() -> None:
    async def never(agg_param: bytes) -> tuple[list[int], int]:
        raise AssertionError("must not collect")

    with pytest.raises(HeavyHittersError, match="Poplar1 task"):
        asyncio.run(walk(object(), never, threshold=1))
    with pytest.raises(HeavyHittersError, match="at least 1"):
        asyncio.run(walk(Poplar1(4), never, threshold=0))

    async def everything(agg_param: bytes) -> tuple[list[int], int]:
        level, prefixes = Poplar1(6).decode_agg_param(agg_param)
        return [5] * len(prefixes), 5

    with pytest.raises(HeavyHittersError, match="level 3 has 16 candidate prefixes"):
        asyncio.run(walk(Poplar1(6), everything, threshold=1, max_candidates=8))


def test_describe_whole_bytes() -> None:
    assert describe(_bits(0x41, 8)) == {"bits": "01000001", "hex": "41", "text": "A"}
    assert describe(_bits(5, 3)) == {"bits": "101"}


# -- end to end over HTTP ------------------------------------------------------------------


async def _upload(pair: AggregatorPair, pt: Any, measurements: list[Any]) -> None:
    async with pair.client(pt) as client:
        result = await client.upload(measurements)
    assert result.accepted == len(measurements)


def poplar1(profile: str, bits: int) -> Poplar1:
    """The profile's Poplar1: VDAF-08's for dap-09, draft-20's otherwise."""
    return Poplar1V08(bits) if get_profile(profile).vdaf_version == "08" else Poplar1(bits)


@pytest.mark.parametrize("profile", [p.name for p in PROTOS])
def test_heavy_hitters_end_to_end(tmp_path: Path, profile: str) -> None:
    measurements, heavy = planted(8, seed=2)

    async def scenario() -> None:
        async with AggregatorPair(tmp_path, FAST, FAST) as pair:
            vdaf = poplar1(profile, 8)
            pt = pair.provision(vdaf, min_batch_size=10, profile=get_profile(profile))
            await _upload(pair, pt, measurements)
            query = pair.current_interval_query(pt)
            async with pair.collector(pt) as collector:
                result = await collect_heavy_hitters(collector, query, 8, timeout=20,
                                                     poll_interval=POLL)
                assert {bit_string(p): c for p, c in result.heavy} == heavy
                assert all(lv.report_count == len(measurements) for lv in result.levels)
                # Level 0 counts every report.
                assert sum(result.levels[0].counts) == len(measurements)
                # The batch is released at each level once: the same level-0 query again
                # gets the stored result (no second computation, no new noise).
                again = vdaf.encode_agg_param((0, ((False,), (True,))))
                repeated = await collector.collect(query, again, timeout=5,
                                                   max_poll_interval=POLL)
                assert repeated.aggregate_result == list(result.levels[0].counts)
                assert repeated.report_count == len(measurements)
            # The Helper recorded each report at every level it verified.
            with pair.helper_state.datastore.transaction() as tx:
                rows = tx.list_collected_agg_params(pt.task.task_id, 0, 2**62)
                assert sorted(vdaf.decode_agg_param(p)[0] for _, _, p in rows) == \
                    list(range(8))

    asyncio.run(scenario())


def test_heavy_hitters_command(tmp_path: Path) -> None:
    """`ppm analytics heavy-hitters` as a user runs it: a separate process, against the
    servers over HTTP, with the collector-task.json `ppm task create` writes."""
    measurements, heavy = planted(8, seed=3)

    async def scenario() -> tuple[int, str, str]:
        async with AggregatorPair(tmp_path, FAST, FAST) as pair:
            pt = pair.provision(Poplar1(8), min_batch_size=10, profile=get_profile("dap-19"))
            await _upload(pair, pt, measurements)
            task_file = tmp_path / "collector-task.json"
            task_file.write_text(json.dumps(pt.collector_view()))
            tp = pt.task.time_precision
            start = (int(pair.clock()) // tp - 5) * tp
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "ppm_reference", "analytics", "heavy-hitters",
                "--task", str(task_file), "--interval", f"{start},{10 * tp}",
                "--threshold", "8", "--poll-interval", str(POLL), "--json",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                cwd=str(PROJECT_ROOT))
            out, err = await asyncio.wait_for(proc.communicate(), 60)
            assert proc.returncode is not None
            return proc.returncode, out.decode(), err.decode()

    code, out, err = asyncio.run(scenario())
    assert code == 0, err
    report = json.loads(out)
    assert report["complete"] is True and report["threshold"] == 8
    assert {h["bits"]: h["count"] for h in report["heavy_hitters"]} == heavy
    assert [h["text"] for h in report["heavy_hitters"]] == ["A", "Z"]
    assert len(report["levels"]) == 8
    assert err.count("level ") == 8  # one progress line per level on stderr


def test_heavy_hitters_command_refuses_a_prio3_task(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from ppm_reference.cli import main
    from ppm_reference.dap.provision import new_task
    from ppm_reference.vdaf.prio3 import Prio3Count

    pt = new_task(Prio3Count(2), "http://127.0.0.1:1/", "http://127.0.0.1:2/")
    task_file = tmp_path / "collector-task.json"
    task_file.write_text(json.dumps(pt.collector_view()))
    code = main(["analytics", "heavy-hitters", "--task", str(task_file), "--interval",
                 "0,3600", "--threshold", "3"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "heavy hitters need a Poplar1 task" in err[0]


# -- the Aggregators' rules -----------------------------------------------------------------


def test_collection_rules_for_aggregation_parameters(tmp_path: Path) -> None:
    f, t = False, True
    measurements = [_bits(x, 4) for x in [0b1010] * 6 + [0b0011] * 5]

    async def scenario() -> None:
        async with AggregatorPair(tmp_path, FAST, FAST) as pair:
            vdaf = Poplar1(4)
            pt = pair.provision(vdaf, min_batch_size=5, profile=get_profile("dap-19"))
            await _upload(pair, pt, measurements)
            proto = Proto("dap-19")
            now = int(pair.clock()) // pt.task.time_precision
            query = proto.interval_query(pt, now - 5, 10)
            async with pair.collector(pt) as c:
                async def collect(level: int, prefixes: list[str], q: Any = query) -> Any:
                    param = (level, tuple(tuple(ch == "1" for ch in p) for p in prefixes))
                    return await c.collect(q, vdaf.encode_agg_param(param), timeout=10,
                                           max_poll_interval=POLL)

                # Unsorted prefixes: invalid on their own (DAP-18 Section 4.3).
                with pytest.raises(CollectionError, match="invalidAggregationParameter"):
                    await collect(0, ["1", "0"])
                first = await collect(1, ["00", "10"])  # a first level need not be 0
                assert first.aggregate_result == [5, 6]
                # Not after level 1: the same level, and a prefix under no candidate.
                with pytest.raises(CollectionError, match="invalidAggregationParameter"):
                    await collect(1, ["01"])
                with pytest.raises(CollectionError, match="invalidAggregationParameter"):
                    await collect(2, ["110"])
                # Another interval overlapping the collected batch.
                with pytest.raises(CollectionError, match="batchOverlap"):
                    await collect(2, ["101"], proto.interval_query(pt, now - 4, 10))
                leaf = await collect(3, ["0011", "1010", "1011"])
                assert leaf.aggregate_result == [5, 6, 0]
            # A report uploaded into the collected batch is refused (batch_collected is
            # the Leader's answer for a collected interval).
            async with pair.client(pt) as client:
                late = await client.upload([_bits(0b1010, 4)])
            assert late.accepted == 0 and list(late.rejected.values()) == \
                [ReportError.BATCH_COLLECTED]
            # Each report was aggregated at levels 1 and 3, and no other level is valid
            # for it any more below 3.
            st = pair.helper_state
            task = st.task(pt.task.task_id, Role.HELPER)
            with st.datastore.transaction() as tx:
                tid = pt.task.task_id
                any_report = tx.c.execute(  # type: ignore[attr-defined]
                    "SELECT report_id FROM report_agg_params LIMIT 1").fetchone()[0]
                history = tx.report_agg_params(tid, [any_report])[bytes(any_report)]
                assert [vdaf.decode_agg_param(p)[0] for p in history] == [1, 3]
                time_unit = int(pair.clock()) // pt.task.time_precision
                for level, prefix, want in [
                        (2, (f, f, t), ReportError.REPORT_REPLAYED),   # below the last level
                        (3, (t, f, t, f), ReportError.REPORT_REPLAYED)]:  # used already
                    param = vdaf.encode_agg_param((level, (prefix,)))
                    assert agg_params.replay_error(tx, task, any_report, time_unit,
                                                   param) == want

    asyncio.run(scenario())


def test_dap09_max_batch_query_count(tmp_path: Path) -> None:
    """DAP-09 Section 4.6.6: a batch queried with more distinct parameters than the task's
    max_batch_query_count is refused with batchQueriedTooManyTimes."""
    import dataclasses

    async def scenario() -> None:
        async with AggregatorPair(tmp_path, FAST, FAST) as pair:
            vdaf = Poplar1V08(4)
            pt = pair.provision(vdaf, min_batch_size=2, profile=get_profile("dap-09"))
            assert pt.task.max_batch_query_count == 4  # one query per level by default
            pt.task = dataclasses.replace(pt.task, max_batch_query_count=2)
            pair.add(pt)
            await _upload(pair, pt, [_bits(0b1010, 4)] * 2 + [_bits(0b0110, 4)])
            query = pair.current_interval_query(pt)
            async with pair.collector(pt) as c:
                for level in (0, 2):
                    param = (level, tuple(_bits(i, level + 1) for i in range(2 ** (level + 1))))
                    got = await c.collect(query, vdaf.encode_agg_param(param), timeout=10,
                                          max_poll_interval=POLL)
                    assert sum(got.aggregate_result) == 3
                with pytest.raises(CollectionError, match="batchQueriedTooManyTimes"):
                    await c.collect(query, vdaf.encode_agg_param((3, (_bits(10, 4),))),
                                    timeout=5)

    asyncio.run(scenario())


def test_poplar1_leader_selected_is_refused_at_collection(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with AggregatorPair(tmp_path, FAST, FAST) as pair:
            vdaf = Poplar1(4)
            pt = pair.provision(vdaf, min_batch_size=1, profile=get_profile("dap-18"),
                                batch_mode=BatchMode.LEADER_SELECTED)
            await _upload(pair, pt, [_bits(3, 4)])
            async with pair.collector(pt) as c:
                with pytest.raises(CollectionError, match="time interval only"):
                    await c.collect(Proto("dap-18").current_batch_query(pt),
                                    vdaf.encode_agg_param((0, ((False,), (True,)))),
                                    timeout=5)
            # Nothing was aggregated eagerly either.
            with pair.leader_state.datastore.transaction() as tx:
                assert tx.count_active_aggregation_jobs(pt.task.task_id) == 0

    asyncio.run(scenario())


def test_prio3_interval_is_still_collected_once(tmp_path: Path) -> None:
    """Prio3 keeps its rules: its one parameter, a batch released once (the same query
    again gets the stored result)."""
    from ppm_reference.vdaf.prio3 import Prio3Count

    async def scenario() -> None:
        async with AggregatorPair(tmp_path, FAST, FAST) as pair:
            pt = pair.provision(Prio3Count(2), min_batch_size=2, profile=get_profile("dap-19"))
            await _upload(pair, pt, [1, 0, 1])
            query = pair.current_interval_query(pt)
            async with pair.collector(pt) as c:
                got = await c.collect(query, timeout=10, max_poll_interval=POLL)
                assert got.aggregate_result == 2
                again = await c.collect(query, timeout=5, max_poll_interval=POLL)
                assert (again.aggregate_result, again.report_count) == (2, got.report_count)

    asyncio.run(scenario())


def test_upload_and_collect_commands_on_a_poplar1_task(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from ppm_reference.cli import main
    from ppm_reference.dap.cli.errors import CliError
    from ppm_reference.dap.cli.upload import parse_measurement
    from ppm_reference.dap.provision import new_task

    vdaf = Poplar1(16)
    assert parse_measurement("0100000101011010", vdaf) == _bits(0x415A, 16)
    assert parse_measurement("hex:415a", vdaf) == _bits(0x415A, 16)
    assert parse_measurement("text:AZ", vdaf) == _bits(0x415A, 16)
    assert parse_measurement("text:A", vdaf) == _bits(0x4100, 16)  # zero-padded
    for bad in ("0101", "hex:41", "text:ABC", "01000001010110102", "hex:zz"):
        with pytest.raises(CliError, match="expected 16 bits as 0/1, or hex:/text: for 2"):
            parse_measurement(bad, vdaf)
    pt = new_task(vdaf, "http://127.0.0.1:1/", "http://127.0.0.1:2/",
                  profile=get_profile("dap-19"))
    task_file = tmp_path / "collector-task.json"
    task_file.write_text(json.dumps(pt.collector_view()))
    assert main(["collect", "--task", str(task_file), "--interval", "0,60"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ppm: error: a Poplar1 task is collected with an aggregation parameter: "
                   "use ppm analytics heavy-hitters"]


def test_task_create_refuses_a_leader_selected_poplar1_task(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ppm_reference.cli import main

    for role, name in (("leader", "l.json"), ("helper", "h.json")):
        (tmp_path / name).write_text(json.dumps({"role": role, "datastore": f"{role}.sqlite"}))
    code = main(["task", "create", "--vdaf", "Poplar1", "--bits", "8", "--batch-mode",
                 "leader-selected", "--leader-config", str(tmp_path / "l.json"),
                 "--helper-config", str(tmp_path / "h.json")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Poplar1 tasks are time-interval" in err[0]
    # Nothing was provisioned into either datastore.
    from ppm_reference.dap.storage.sqlite import SqliteDatastore

    for role in ("leader", "helper"):
        store = SqliteDatastore(tmp_path / f"{role}.sqlite")
        with store.transaction() as tx:
            assert tx.list_tasks() == []
        store.close()
