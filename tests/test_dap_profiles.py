"""The profiles as data: a new draft for the cost of its differences, DAP-19's
differences from DAP-18 (specs/draft-ietf-ppm-dap-19-changes.md), and the rule that the
same byte is never read as the same error in both drafts."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ppm_reference.dap import vectors
from ppm_reference.dap.common import ReportError, VerifyRespType
from ppm_reference.dap.core.store import ReportState
from ppm_reference.dap.profiles import PROFILES, SHIPPED, get_profile, register, unregister
from ppm_reference.dap.profiles.dap18 import DAP_18
from ppm_reference.dap.profiles.dap18 import messages as m18
from ppm_reference.dap.profiles.dap19 import DAP_19
from ppm_reference.dap.profiles.dap19 import messages as m19
from ppm_reference.dap.provision import new_task
from ppm_reference.dap.task import TaskError
from tests.dap_harness import AggregatorPair, Proto
from tests.test_dap_e2e import collect, upload

# -- a throwaway profile ---------------------------------------------------------------------


@pytest.fixture
def test_profile() -> Iterator[object]:
    # The whole definition of a profile that differs from DAP-19 only in its version tag
    # (and so in its name, draft and vector directory):
    profile = register(dataclasses.replace(DAP_19, name="dap-test", draft="draft-test",
                                           version_tag=b"dap-test", vector_dir="dap-test"))
    yield profile
    unregister("dap-test")


def test_throwaway_profile_runs_end_to_end(tmp_path: Path, test_profile: object) -> None:
    proto = Proto("dap-test")
    measurements = [1, 0, 1, 1, 0, 1]

    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(proto.count(), min_batch_size=5, profile=proto.profile)
            await upload(pair, pt, measurements)
            collection = await collect(pair, pt, pair.current_interval_query(pt))
            assert collection.report_count == len(measurements)
            assert collection.aggregate_result == sum(measurements)
    asyncio.run(run())


def test_throwaway_profile_has_its_own_vectors(tmp_path: Path, test_profile: object) -> None:
    profile = get_profile("dap-test")
    out = tmp_path / profile.vector_dir
    written = vectors.generate(out, profile)
    assert written
    report = vectors.check(out)
    assert report.ok, report.errors[:5]
    # The version tag separates the domains: the same example is other bytes in dap-19.
    example = json.loads((out / "examples" / "Prio3Count.json").read_text())
    assert example["draft"] == "draft-test"
    assert bytes.fromhex(example["upload"]["reports"][0]["leader_hpke_info"]).startswith(
        b"dap-test input share")
    ours = example["upload"]["reports"][0]["report"]["encoding"]
    other = vectors.generate(tmp_path / "dap-19", DAP_19)
    assert other
    theirs = json.loads((tmp_path / "dap-19" / "examples" / "Prio3Count.json").read_text())
    assert theirs["upload"]["reports"][0]["report"]["encoding"] != ours


def test_registry_refuses_a_second_profile_of_the_same_name() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(dataclasses.replace(DAP_18, name="dap-19"))
    assert list(SHIPPED) == ["dap-19", "dap-18", "dap-09"]
    assert all(name in PROFILES for name in SHIPPED)


# -- ReportError: translated by name, never cast ---------------------------------------------


def test_the_same_byte_is_another_error_in_18_and_19() -> None:
    # Byte 7: task_expired in DAP-18, invalid_message in DAP-19.
    assert DAP_18.wire.errors.decode(7) == ReportError.TASK_EXPIRED
    assert DAP_19.wire.errors.decode(7) == ReportError.INVALID_MESSAGE
    assert DAP_18.wire.errors.decode(9) == ReportError.REPORT_TOO_EARLY
    assert DAP_19.wire.errors.decode(9) == ReportError.UNKNOWN_VERIFICATION_KEY_ID
    # The same core error is written as other bytes.
    reject18 = DAP_18.wire.encode_job_resp([_reject(ReportError.REPORT_TOO_EARLY)])
    reject19 = DAP_19.wire.encode_job_resp([_reject(ReportError.REPORT_TOO_EARLY)])
    assert reject18[-1] == 9 and reject19[-1] == 8
    assert DAP_18.wire.decode_job_resp(reject18)[0].error == ReportError.REPORT_TOO_EARLY
    assert DAP_19.wire.decode_job_resp(reject19)[0].error == ReportError.REPORT_TOO_EARLY


@pytest.mark.parametrize("name", ["dap-19", "dap-18", "dap-09"])
def test_every_wire_error_round_trips(name: str) -> None:
    errors = get_profile(name).wire.errors
    wire_enum = type(next(iter(errors.to_wire.values())))
    for member in wire_enum:
        core = errors.decode(int(member))
        # A wire value read as a core error is written back as the same value, except
        # DAP-09's batch_saturated (read as report_dropped, which it writes as such).
        if member.name != "BATCH_SATURATED":
            assert errors.encode(core) == member, (name, member)
    for core in ReportError:
        assert isinstance(errors.encode(core), wire_enum)


def test_errors_dap19_deleted_are_written_as_their_replacements() -> None:
    errors = DAP_19.wire.errors
    assert errors.encode(ReportError.TASK_EXPIRED) == m19.ReportError.REPORT_DROPPED
    assert errors.encode(ReportError.TASK_NOT_STARTED) == m19.ReportError.REPORT_DROPPED
    assert errors.encode(ReportError.OUTDATED_CONFIG) == m19.ReportError.HPKE_UNKNOWN_CONFIG_ID
    assert [int(e) for e in m19.ReportError] == list(range(1, 11))
    with pytest.raises(Exception, match="ReportError"):
        m19.UploadErrors.decode(bytes(16) + b"\x0b")  # 11 (outdated_config) is gone
    assert m18.UploadErrors.decode(bytes(range(16)) + b"\x0b").status[0].error == 11


def _reject(error: ReportError) -> object:
    from ppm_reference.dap.core.wire import Resp

    return Resp(bytes(range(16)), VerifyRespType.REJECT, error=error)


# -- task_info may be empty in DAP-19 --------------------------------------------------------


def test_empty_task_info_is_dap19_only() -> None:
    def make(profile: object) -> object:
        return new_task(Proto("dap-19").count(), "https://l.example/", "https://h.example/",
                        task_info=b"", profile=profile)  # type: ignore[arg-type]

    task = make(DAP_19).task  # type: ignore[attr-defined]
    config = m19.TaskConfiguration.decode(task.config_bytes())
    assert config.task_info == b""
    with pytest.raises(TaskError):
        make(DAP_18)


# -- unknown verification key IDs (DAP-19 #784) ----------------------------------------------


def _leader_with_extra_key(pair: AggregatorPair, pt: object, key_id: int) -> None:
    """Give the Leader's copy of the task a second verification key the Helper lacks."""
    record = pt.leader_record  # type: ignore[attr-defined]
    options = json.loads(record.options)
    options["verify_keys"] = {str(key_id): bytes(range(len(record.vdaf_verify_key))).hex()}
    record = dataclasses.replace(record, options=json.dumps(options, sort_keys=True))
    with pair.leader_state.datastore.transaction() as tx:
        tx.put_task(record)
    pair.leader_state.tasks.invalidate(record.task_id)


def test_leader_retries_reports_under_a_key_the_dap19_helper_knows(tmp_path: Path) -> None:
    proto = Proto("dap-19")
    measurements = [1, 1, 0, 1, 1, 0, 1]

    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(proto.count(), min_batch_size=5, profile=proto.profile)
            _leader_with_extra_key(pair, pt, 7)
            await upload(pair, pt, measurements)
            collection = await collect(pair, pt, pair.current_interval_query(pt))
            # Every report is counted once, under key 0, after key 7 was refused.
            assert collection.report_count == len(measurements)
            assert collection.aggregate_result == sum(measurements)
            with pair.leader_state.datastore.transaction() as tx:
                stored = tx.get_task(bytes(pt.task.task_id))
                assert stored is not None
                assert json.loads(stored.options)["helper_unknown_key_ids"] == [7]
                rows = tx.c.execute("SELECT COUNT(*) FROM report_aggregations WHERE "
                                    "state='rejected' AND error=?",
                                    (int(ReportError.UNKNOWN_VERIFICATION_KEY_ID),)).fetchall()
                assert rows[0][0] == len(measurements)
            with pair.helper_state.datastore.transaction() as tx:
                assert tx.c.execute("SELECT COUNT(*) FROM aggregated_reports"
                                    ).fetchall()[0][0] == len(measurements)
    asyncio.run(run())


def test_a_dap18_helper_fails_the_job_for_an_unknown_key(tmp_path: Path) -> None:
    proto = Proto("dap-18")

    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(proto.count(), min_batch_size=5, profile=proto.profile)
            _leader_with_extra_key(pair, pt, 7)
            await upload(pair, pt, [1, 0, 1, 1, 1])

            def abandoned() -> bool:
                with pair.leader_state.datastore.transaction() as tx:
                    return tx.c.execute("SELECT COUNT(*) FROM aggregation_jobs WHERE "
                                        "state='abandoned'").fetchall()[0][0] > 0
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while not abandoned():
                assert loop.time() < deadline, "the job was not abandoned"
                await asyncio.sleep(0.05)
            with pair.leader_state.datastore.transaction() as tx:
                # No retry in DAP-18, and the Helper committed nothing.
                assert not tx.count_reports(bytes(pt.task.task_id), (ReportState.NEW,))
            with pair.helper_state.datastore.transaction() as tx:
                assert tx.c.execute("SELECT COUNT(*) FROM aggregated_reports"
                                    ).fetchall()[0][0] == 0
    asyncio.run(run())
