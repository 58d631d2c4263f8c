"""Client upload and Collector finalization (dap/client_core.py), end to end through the
wire formats, with the Aggregators' part simulated with the VDAF API."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ppm_reference.dap.common import BatchMode, Extension, Interval, Role, Time
from ppm_reference.dap.hpke import HpkeError, HpkeKeypair, Kem, generate_keypair
from ppm_reference.dap.profiles.dap18 import DAP_18
from ppm_reference.dap.profiles.dap18.client import (
    ClientError,
    aggregate_share_aad,
    collect_result,
    decrypt_aggregate_shares,
    encrypt_aggregate_share,
    generate_report,
    input_share_aad,
    open_input_share,
)
from ppm_reference.dap.profiles.dap18.messages import (
    CollectionJobReq,
    CollectionJobResp,
    Query,
    Report,
    UploadRequest,
)
from ppm_reference.dap.profiles.dap18.task import Task

prio3 = pytest.importorskip("ppm_reference.vdaf.prio3")

TIME_PRECISION = 3600
NOW = Time.from_seconds(1_700_000_000, TIME_PRECISION)


def make_task(vdaf: Any, **overrides: Any) -> Task:
    params: dict[str, Any] = dict(
        task_id=os.urandom(32),
        task_info=b"client core test",
        leader_aggregator_endpoint="https://leader.example/",
        helper_aggregator_endpoint="https://helper.example/",
        time_precision=TIME_PRECISION,
        min_batch_size=1,
        batch_mode=BatchMode.TIME_INTERVAL,
    )
    params.setdefault("profile", DAP_18)
    params.update(overrides)
    return Task.for_vdaf(vdaf, **params)


class Aggregators:
    """Leader and Helper, reduced to what they do with the bytes: decrypt input shares,
    verify with the VDAF, aggregate, and encrypt aggregate shares."""

    def __init__(self, task: Task, vdaf: Any, collector: HpkeKeypair) -> None:
        self.task, self.vdaf, self.collector = task, vdaf, collector
        self.keys = {
            Role.LEADER: generate_keypair(1),
            Role.HELPER: generate_keypair(2, Kem.DHKEM_P256_HKDF_SHA256),
        }
        self.verify_key = os.urandom(vdaf.VERIFY_KEY_SIZE)
        self.agg_shares = [vdaf.agg_init(None), vdaf.agg_init(None)]
        self.count = 0
        self.times: list[int] = []

    def aggregate(self, report: Report) -> None:
        vdaf, ctx = self.vdaf, self.task.vdaf_ctx()
        aad = input_share_aad(self.task, report.report_metadata, report.public_share)
        nonce = bytes(report.report_metadata.report_id)
        public_share = vdaf.decode_public_share(report.public_share)
        states, shares = [], []
        for agg_id, role, ct in (
            (0, Role.LEADER, report.leader_encrypted_input_share),
            (1, Role.HELPER, report.helper_encrypted_input_share),
        ):
            plaintext = open_input_share(self.keys[role], role, aad, ct, profile=DAP_18)
            state, share = vdaf.verify_init(
                self.verify_key, ctx, agg_id, None, nonce, public_share,
                vdaf.decode_input_share(agg_id, plaintext.payload),
            )
            states.append(state)
            shares.append(share)
        message = vdaf.verifier_shares_to_message(ctx, None, shares)
        for j in (0, 1):
            out_share = vdaf.verify_next(ctx, states[j], message)
            self.agg_shares[j] = vdaf.agg_update(None, self.agg_shares[j], out_share)
        self.count += 1
        self.times.append(int(report.report_metadata.time))

    def collect(self, req: CollectionJobReq) -> CollectionJobResp:
        encrypted = [
            encrypt_aggregate_share(
                self.task, self.collector.config, role, req,
                self.vdaf.encode_agg_share(self.agg_shares[j]),
            )
            for j, role in ((0, Role.LEADER), (1, Role.HELPER))
        ]
        start = min(self.times)
        return CollectionJobResp(
            self.count, Interval(start, max(self.times) - start + 1), encrypted[0], encrypted[1]
        )


CASES = [
    (lambda: prio3.Prio3Count(2), [1, 0, 1, 1], 3),
    (lambda: prio3.Prio3Sum(2, 100), [1, 100, 42], 143),
    (lambda: prio3.Prio3SumVec(2, 3, 7, 2), [[1, 2, 3], [7, 0, 1]], [8, 2, 4]),
    (lambda: prio3.Prio3Histogram(2, 4, 2), [0, 3, 3, 1], [1, 1, 0, 2]),
    (lambda: prio3.Prio3MultihotCountVec(2, 4, 2, 2),
     [[True, False, True, False], [False, False, True, False]], [1, 0, 2, 0]),
]


@pytest.mark.parametrize(
    ("make", "measurements", "expected"), CASES,
    ids=["Count", "Sum", "SumVec", "Histogram", "MultihotCountVec"],
)
def test_upload_aggregate_collect(make: Any, measurements: list[Any], expected: Any) -> None:
    vdaf = make()
    task = make_task(vdaf)
    collector = generate_keypair(200)
    aggs = Aggregators(task, vdaf, collector)
    reports = [
        generate_report(
            task, m, time=NOW + i, vdaf=vdaf,
            leader_hpke_config=aggs.keys[Role.LEADER].config,
            helper_hpke_config=aggs.keys[Role.HELPER].config,
        )
        for i, m in enumerate(measurements)
    ]
    # Over the wire as one upload request.
    uploaded = UploadRequest.decode(UploadRequest(reports).encode()).reports
    assert len({r.report_metadata.report_id for r in uploaded}) == len(measurements)
    for report in uploaded:
        aggs.aggregate(report)
    req = CollectionJobReq(Query.time_interval(Interval(NOW, 10)), b"", [])
    resp = CollectionJobResp.decode(aggs.collect(req).encode())
    result = collect_result(task, collector, req, resp)  # VDAF from the task configuration
    assert result.aggregate_result == expected
    assert result.report_count == len(measurements)
    assert result.interval == Interval(NOW, len(measurements))


def test_report_is_deterministic_given_randomness_and_ephemeral_keys() -> None:
    vdaf = prio3.Prio3Histogram(2, 4, 2)
    task = make_task(vdaf)
    leader, helper = generate_keypair(1), generate_keypair(2)
    kwargs: dict[str, Any] = dict(
        time=NOW, leader_hpke_config=leader.config, helper_hpke_config=helper.config,
        report_id=b"\x01" * 16, rand=b"\x02" * vdaf.RAND_SIZE,
    )
    a = generate_report(task, 2, ephemeral_ikms=(b"\x03" * 32, b"\x04" * 32), **kwargs)
    b = generate_report(task, 2, ephemeral_ikms=(b"\x03" * 32, b"\x04" * 32), **kwargs)
    c = generate_report(task, 2, **kwargs)  # fresh HPKE ephemeral keys
    assert a == b
    assert a.public_share == c.public_share and a.report_metadata == c.report_metadata
    assert a.leader_encrypted_input_share != c.leader_encrypted_input_share


def test_input_shares_are_bound_to_the_task_configuration() -> None:
    vdaf = prio3.Prio3Count(2)
    task = make_task(vdaf, min_batch_size=100)
    # Same task ID and VDAF, but an Aggregator configured with another min_batch_size.
    other = make_task(vdaf, task_id=task.task_id, min_batch_size=10)
    leader, helper = generate_keypair(1), generate_keypair(2)
    report = generate_report(
        task, 1, time=NOW, leader_hpke_config=leader.config, helper_hpke_config=helper.config
    )
    good_aad = input_share_aad(task, report.report_metadata, report.public_share)
    open_input_share(leader, Role.LEADER, good_aad, report.leader_encrypted_input_share, profile=DAP_18)
    bad_aad = input_share_aad(other, report.report_metadata, report.public_share)
    with pytest.raises(HpkeError):
        open_input_share(leader, Role.LEADER, bad_aad, report.leader_encrypted_input_share, profile=DAP_18)
    with pytest.raises(HpkeError):  # each share is for one Aggregator
        open_input_share(helper, Role.HELPER, good_aad, report.leader_encrypted_input_share, profile=DAP_18)


def test_private_extensions_are_encrypted() -> None:
    vdaf = prio3.Prio3Count(2)
    task = make_task(vdaf)
    leader, helper = generate_keypair(1), generate_keypair(2)
    report = generate_report(
        task, 1, time=NOW, leader_hpke_config=leader.config, helper_hpke_config=helper.config,
        public_extensions=[Extension(5, b"pub")],
        helper_private_extensions=[Extension(6, b"secret")],
    )
    assert report.report_metadata.public_extensions == (Extension(5, b"pub"),)
    aad = input_share_aad(task, report.report_metadata, report.public_share)
    helper_pt = open_input_share(helper, Role.HELPER, aad, report.helper_encrypted_input_share, profile=DAP_18)
    leader_pt = open_input_share(leader, Role.LEADER, aad, report.leader_encrypted_input_share, profile=DAP_18)
    assert helper_pt.private_extensions == (Extension(6, b"secret"),)
    assert leader_pt.private_extensions == ()
    assert b"secret" not in report.encode()


def test_client_rejections() -> None:
    vdaf = prio3.Prio3Count(2)
    task = make_task(vdaf, task_interval=Interval(NOW, 2))
    leader, helper = generate_keypair(1), generate_keypair(2)
    kwargs: dict[str, Any] = dict(leader_hpke_config=leader.config,
                                  helper_hpke_config=helper.config)
    generate_report(task, 1, time=NOW + 1, **kwargs)
    with pytest.raises(ClientError, match="outside the task interval"):
        generate_report(task, 1, time=NOW + 2, **kwargs)
    with pytest.raises(ClientError, match="both public and private"):
        generate_report(task, 1, time=NOW, public_extensions=[Extension(1, b"")],
                        leader_private_extensions=[Extension(1, b"")], **kwargs)
    with pytest.raises(ClientError, match="cannot shard"):
        generate_report(task, 2, time=NOW, **kwargs)  # Count takes 0 or 1
    with pytest.raises(ClientError, match="does not match"):
        generate_report(task, 1, time=NOW, vdaf=prio3.Prio3Sum(2, 1), **kwargs)
    with pytest.raises(ClientError, match="rand must be"):
        generate_report(task, 1, time=NOW, rand=b"short", **kwargs)


def test_collector_rejects_wrong_request_or_key() -> None:
    vdaf = prio3.Prio3Count(2)
    task = make_task(vdaf)
    collector = generate_keypair(200)
    aggs = Aggregators(task, vdaf, collector)
    aggs.aggregate(generate_report(
        task, 1, time=NOW, leader_hpke_config=aggs.keys[Role.LEADER].config,
        helper_hpke_config=aggs.keys[Role.HELPER].config,
    ))
    req = CollectionJobReq(Query.time_interval(Interval(NOW, 1)), b"", [])
    resp = aggs.collect(req)
    assert collect_result(task, collector, req, resp, vdaf=vdaf).aggregate_result == 1
    # The aggregate shares are bound to the collection job request.
    other_req = CollectionJobReq(Query.time_interval(Interval(NOW, 2)), b"", [])
    with pytest.raises(HpkeError):
        decrypt_aggregate_shares(task, collector, other_req, resp)
    with pytest.raises(HpkeError):
        decrypt_aggregate_shares(task, generate_keypair(200), req, resp)
    # Leader and Helper shares are not interchangeable (the info names the sender).
    swapped = CollectionJobResp(resp.report_count, resp.interval,
                                resp.helper_encrypted_agg_share, resp.leader_encrypted_agg_share)
    with pytest.raises(HpkeError):
        decrypt_aggregate_shares(task, collector, req, swapped)
    assert aggregate_share_aad(task, req).task_configuration == task.configuration()
