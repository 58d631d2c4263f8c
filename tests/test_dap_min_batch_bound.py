"""The minimum batch size report extension in the protocol core, in one process over real
HTTP (tests/dap_harness.py): where each profile carries it, what the Aggregators store,
the malformed and unknown extensions, and the release checks of both Aggregators
(`dap.core.buckets.release_problem`). The same over separate processes, with a Leader
that skips its checks, is tests/test_sampling_e2e.py."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.dap.client import Client
from ppm_reference.dap.common import (
    MIN_BATCH_SIZE_EXTENSION,
    Duration,
    Interval,
    ReportError,
    Role,
    Time,
)
from ppm_reference.dap.core.buckets import MergedBatch, release_problem
from ppm_reference.dap.core.tasks import AggregatorTask, TaskOptions
from ppm_reference.dap.hpke import HpkeError
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.sampling import min_batch_size_extension
from tests.dap_harness import AggregatorPair, Proto


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _bounds(pair: AggregatorPair, task_id: bytes) -> tuple[int, int]:
    out = []
    for st in (pair.leader_state, pair.helper_state):
        with st.datastore.transaction() as tx:
            out.append(max((b.min_batch_bound for b in tx.list_buckets(task_id)), default=-1))
    return out[0], out[1]


@pytest.mark.parametrize("profile", ["dap-19", "dap-18", "dap-09"])
def test_both_aggregators_record_the_largest_bound(tmp_path: Path, profile: str) -> None:
    async def go() -> tuple[int, int]:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(Proto(profile).count(), min_batch_size=1,
                                profile=get_profile(profile), time_precision=3600)
            for bound in (7, 40, 12):
                async with Client(pt.task, extensions=[min_batch_size_extension(bound)]) as c:
                    assert (await c.upload([1])).accepted == 1
            async with Client(pt.task) as c:  # a report without the extension
                assert (await c.upload([0])).accepted == 1
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                with pair.helper_state.datastore.transaction() as tx:
                    n = sum(b.report_count for b in tx.list_buckets(bytes(pt.task.task_id)))
                if n == 4 and _bounds(pair, bytes(pt.task.task_id))[0] == 40:
                    break
                await asyncio.sleep(0.05)
            return _bounds(pair, bytes(pt.task.task_id))

    assert _run(go()) == (40, 40)


def test_where_each_profile_carries_the_extension() -> None:
    ext = min_batch_size_extension(9)
    for name in ("dap-18", "dap-19"):
        args = get_profile(name).flow.report_extension_args([ext])
        assert [(e.extension_type, e.extension_data) for e in args["public_extensions"]] \
            == [ext]
    args = get_profile("dap-09").flow.report_extension_args([ext])
    assert set(args) == {"leader_extensions", "helper_extensions"}


@pytest.mark.parametrize("profile", ["dap-19", "dap-18"])
def test_malformed_bound_is_a_per_report_invalid_message(tmp_path: Path,
                                                         profile: str) -> None:
    async def go() -> Any:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(Proto(profile).count(), min_batch_size=1,
                                profile=get_profile(profile))
            async with Client(pt.task, extensions=[(MIN_BATCH_SIZE_EXTENSION, b"\x00\x01")]
                              ) as c:
                return await c.upload([1])

    result = _run(go())
    assert list(result.rejected.values()) == [ReportError.INVALID_MESSAGE]


def test_dap09_tampered_share_is_undecryptable(tmp_path: Path) -> None:
    # DAP-09 carries the bound inside each Aggregator's encrypted plaintext: changing it
    # means changing the ciphertext, which the AEAD refuses.
    async def go() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(Proto("dap-09").count(), min_batch_size=1,
                                profile=get_profile("dap-09"))
            async with Client(pt.task, extensions=[min_batch_size_extension(3)]) as c:
                (report,) = await c.prepare([1])
            keypair = pair.leader_state.keyring().get(
                report.leader_encrypted_input_share.config_id)
            assert keypair is not None
            ct = report.leader_encrypted_input_share
            bad = dataclasses.replace(ct, payload=ct.payload[:-1] + bytes([ct.payload[-1] ^ 1]))
            open_share = pt.task.profile.flow.client.open_input_share
            aad = pt.task.input_share_aad(report.report_metadata, report.public_share)
            plaintext = open_share(keypair, Role.LEADER, aad, ct, profile=pt.task.profile)
            assert [(e.extension_type, e.extension_data) for e in plaintext.extensions] \
                == [min_batch_size_extension(3)]
            with pytest.raises(HpkeError):
                open_share(keypair, Role.LEADER, aad, bad, profile=pt.task.profile)

    _run(go())


def _merged(count: int, bound: int, duration: int = 1) -> MergedBatch:
    return MergedBatch(None, count, bytes(32), Interval(Time(10), Duration(duration)), [],
                       bound)


def test_release_problem(tmp_path: Path) -> None:
    async def go() -> AggregatorTask:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(Proto("dap-18").count(), min_batch_size=4,
                                time_precision=100)
            return pair.leader_state.task(bytes(pt.task.task_id), Role.LEADER)

    task = _run(go())
    assert release_problem(task, _merged(4, 0)) is None
    assert release_problem(task, _merged(3, 0)) is not None          # min_batch_size
    assert release_problem(task, _merged(9, 10)) is not None         # a report's bound
    assert release_problem(task, _merged(10, 10)) is None
    guarded = dataclasses.replace(task, options=TaskOptions(expected_report_rate=0.02))
    # 2 x 0.02/s x 100 s = 4 reports per time_precision: 4 pass, 5 are held; over two
    # units 8 pass.
    assert release_problem(guarded, _merged(4, 0)) is None
    problem = release_problem(guarded, _merged(5, 0))
    assert problem is not None and "rate guard" in problem.detail
    assert release_problem(guarded, _merged(8, 0, duration=2)) is None
    with pytest.raises(ValueError):
        TaskOptions.from_json('{"expected_report_rate": -1}')
    assert TaskOptions.from_json(TaskOptions(expected_report_rate=0.5).to_json()) \
        == TaskOptions(expected_report_rate=0.5)


def test_leader_selected_batch_grows_to_its_reports_bound(tmp_path: Path) -> None:
    # The Leader fills a leader-selected batch to max_batch_size (3) normally; a batch
    # whose reports ask for 5 is filled to 5 and released only then.
    from ppm_reference.dap.collector import CollectionError, Collector
    from ppm_reference.dap.common import BatchMode

    async def go() -> Any:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(Proto("dap-18").count(), min_batch_size=2,
                                max_batch_size=3, batch_mode=BatchMode.LEADER_SELECTED)
            ext = [min_batch_size_extension(5)]
            query = Proto("dap-18").current_batch_query(pt)
            async with Client(pt.task, extensions=ext) as c:
                await c.upload([1, 1, 1])
            async with Collector(pt.task, pt.collector_keypair,
                                 pt.collector_auth_token) as col:
                with pytest.raises(CollectionError):
                    await col.collect(query, timeout=2.0, max_poll_interval=0.1)
                async with Client(pt.task, extensions=ext) as c:
                    await c.upload([0, 1])
                return await col.collect(query, timeout=20.0, max_poll_interval=0.1)

    result = _run(go())
    assert result.report_count == 5 and result.aggregate_result == 4
