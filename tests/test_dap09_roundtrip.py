"""A DAP-09 task in memory: Client -> Aggregators (VDAF-08 ping-pong) -> Collector.

Every message crosses a simulated wire (encode, then decode) so that the structs are
exercised as the peers would see them.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from ppm_reference.dap.hpke import HpkeError, derive_keypair
from ppm_reference.dap.profiles.dap09 import DAP_09
from ppm_reference.dap.profiles.dap09.client import (
    Client09Error,
    InputShareRejected,
    collect_result,
    decrypt_input_share,
    encrypt_aggregate_share,
    generate_report,
    report_share_for,
)
from ppm_reference.dap.profiles.dap09.messages import (
    AggregateShare,
    AggregateShareReq,
    AggregationJobInitReq,
    AggregationJobResp,
    BatchSelector,
    Collection,
    CollectionReq,
    Extension,
    FixedSizeQuery,
    Interval,
    PartialBatchSelector,
    PrepareError,
    PrepareInit,
    PrepareResp,
    PrepareRespState,
    Query,
    QueryType,
    Report,
    Role,
    batch_checksum,
)
from ppm_reference.dap.profiles.dap09.task import Task09, Task09Error
from ppm_reference.vdaf import ping_pong as pp
from ppm_reference.vdaf.prio3 import Prio3Count, Prio3CountV08, Prio3HistogramV08

LEADER = derive_keypair(1, b"\x01" * 32)
HELPER = derive_keypair(2, b"\x02" * 32)
COLLECTOR = derive_keypair(200, b"\x03" * 32)
T0 = 1_700_000_000  # seconds
PRECISION = 3600


def _wire(msg: Any) -> Any:
    return type(msg).decode(msg.encode())


def _task(vdaf: Any, query_type: QueryType) -> Task09:
    return Task09.for_vdaf(
        vdaf,
        task_id=os.urandom(32),
        leader_aggregator_endpoint="https://leader.example/",
        helper_aggregator_endpoint="https://helper.example/",
        query_type=query_type,
        time_precision=PRECISION,
        min_batch_size=1, profile=DAP_09,)


def run_task(vdaf: Any, measurements: list[Any], query_type: QueryType) -> Any:
    task = _task(vdaf, query_type)
    ctx = task.vdaf_ctx()
    assert ctx == b""
    verify_key = os.urandom(vdaf.VERIFY_KEY_SIZE)

    # Client: upload.
    reports = [
        _wire(generate_report(task, m, time=T0 + i, leader_hpke_config=LEADER.config,
                              helper_hpke_config=HELPER.config))
        for i, m in enumerate(measurements)
    ]
    for r in reports:
        assert r.report_metadata.time == T0 - T0 % PRECISION

    # Leader: decrypt its shares and start preparation.
    agg_param = vdaf.encode_agg_param(None)
    batch_id = os.urandom(32)
    leader_states = {}
    prep_inits = []
    for r in reports:
        plain = decrypt_input_share(task, [LEADER], Role.LEADER, report_share_for(r, Role.LEADER))
        state = pp.ping_pong_leader_init(vdaf, verify_key, ctx, agg_param,
                                         r.report_metadata.report_id, r.public_share,
                                         plain.payload)
        assert isinstance(state, pp.Continued)
        leader_states[r.report_metadata.report_id] = state
        prep_inits.append(PrepareInit(report_share_for(r, Role.HELPER), state.outbound))
    pbs = (PartialBatchSelector.time_interval() if query_type == QueryType.TIME_INTERVAL
           else PartialBatchSelector.fixed_size(batch_id))
    init_req = _wire(AggregationJobInitReq(agg_param, pbs, prep_inits))

    # Helper: decrypt and respond (Prio3 is one round: finish in the first response).
    helper_out = []
    resps = []
    for pi in init_req.prepare_inits:
        rs = pi.report_share
        plain = decrypt_input_share(task, [HELPER], Role.HELPER, rs)
        state = pp.ping_pong_helper_init(vdaf, verify_key, ctx, init_req.agg_param,
                                         rs.report_metadata.report_id, rs.public_share,
                                         plain.payload, pi.payload)
        assert isinstance(state, pp.FinishedWithOutbound)
        helper_out.append(state.out_share)
        resps.append(PrepareResp.continue_(rs.report_metadata.report_id, state.outbound))
    init_resp = _wire(AggregationJobResp(resps))

    # Leader: finish.
    leader_out = []
    for resp in init_resp.prepare_resps:
        assert resp.prepare_resp_state == PrepareRespState.CONTINUE
        state = pp.ping_pong_leader_continued(vdaf, ctx, agg_param,
                                              leader_states[resp.report_id], resp.payload)
        assert isinstance(state, pp.Finished)
        leader_out.append(state.out_share)

    # Collector's query and the batch selector.
    if query_type == QueryType.TIME_INTERVAL:
        query = Query.time_interval(Interval(T0 - T0 % PRECISION, PRECISION))
        selector = BatchSelector.time_interval(query.batch_interval)
    else:
        query = Query.fixed_size(FixedSizeQuery.current_batch())
        selector = BatchSelector.fixed_size(batch_id)
    collection_req = _wire(CollectionReq(query, agg_param))

    # Helper: aggregate share for the Leader's AggregateShareReq.
    ids = [r.report_metadata.report_id for r in reports]
    share_req = _wire(AggregateShareReq(selector, agg_param, len(reports), batch_checksum(ids)))
    helper_agg = vdaf.merge(None, [vdaf.agg_update(None, vdaf.agg_init(None), o)
                                   for o in helper_out])
    helper_share = _wire(AggregateShare(encrypt_aggregate_share(
        task, COLLECTOR.config, Role.HELPER, share_req.agg_param, share_req.batch_selector,
        vdaf.encode_agg_share(helper_agg))))
    leader_agg = vdaf.agg_init(None)
    for o in leader_out:
        leader_agg = vdaf.agg_update(None, leader_agg, o)
    leader_ct = encrypt_aggregate_share(task, COLLECTOR.config, Role.LEADER, agg_param,
                                        selector, vdaf.encode_agg_share(leader_agg))
    collection = _wire(Collection(
        part_batch_selector=pbs,
        report_count=len(reports),
        interval=Interval(T0 - T0 % PRECISION, PRECISION),
        leader_encrypted_agg_share=leader_ct,
        helper_encrypted_agg_share=helper_share.encrypted_aggregate_share,
    ))

    # Collector.
    result = collect_result(task, COLLECTOR, collection_req, collection)
    assert result.report_count == len(measurements)
    assert result.batch_selector == selector
    return result.aggregate_result


@pytest.mark.parametrize("query_type", list(QueryType))
def test_prio3_count(query_type: QueryType) -> None:
    assert run_task(Prio3CountV08(2), [1, 0, 1, 1], query_type) == 3


@pytest.mark.parametrize("query_type", list(QueryType))
def test_prio3_histogram(query_type: QueryType) -> None:
    vdaf = Prio3HistogramV08(2, 4, 2)
    assert run_task(vdaf, [0, 3, 3, 1, 3], query_type) == [1, 1, 0, 3]


def test_task_rejects_non_v08_vdafs_and_bad_parameters() -> None:
    with pytest.raises(Task09Error):
        _task(Prio3Count(2), QueryType.TIME_INTERVAL)  # a VDAF-18 class: wrong ID
    with pytest.raises(Task09Error):
        Task09(task_id=b"\x00" * 32, leader_aggregator_endpoint="https://l",
               helper_aggregator_endpoint="https://h", query_type=QueryType.TIME_INTERVAL,
               time_precision=60, min_batch_size=1, vdaf_name="Prio3Count",
               max_batch_size=10, profile=DAP_09)  # max_batch_size is for fixed_size tasks
    task = _task(Prio3HistogramV08(2, 4, 2), QueryType.FIXED_SIZE)
    assert task.vdaf_parameters == (("chunk_length", 2), ("length", 4))
    with pytest.raises(Client09Error):
        generate_report(task, 0, time=T0, leader_hpke_config=LEADER.config,
                        helper_hpke_config=HELPER.config, vdaf=Prio3HistogramV08(2, 5, 2))


def test_aggregator_rejections() -> None:
    task = _task(Prio3CountV08(2), QueryType.TIME_INTERVAL)
    report = generate_report(task, 1, time=T0, leader_hpke_config=LEADER.config,
                             helper_hpke_config=HELPER.config,
                             helper_extensions=[Extension(7, b"")])
    with pytest.raises(InputShareRejected) as info:
        decrypt_input_share(task, [HELPER], Role.HELPER, report_share_for(report, Role.HELPER))
    assert info.value.error == PrepareError.INVALID_MESSAGE  # unrecognized extension
    plain = decrypt_input_share(task, [HELPER], Role.HELPER,
                                report_share_for(report, Role.HELPER),
                                known_extensions=frozenset({7}))
    assert plain.extensions == (Extension(7, b""),)
    with pytest.raises(InputShareRejected) as info:
        decrypt_input_share(task, [HELPER], Role.LEADER, report_share_for(report, Role.LEADER))
    assert info.value.error == PrepareError.HPKE_UNKNOWN_CONFIG_ID
    # The report's time is bound by the AAD: changing it breaks decryption.
    md = report.report_metadata
    tampered = Report(type(md)(md.report_id, md.time + 1), report.public_share,
                      report.leader_encrypted_input_share, report.helper_encrypted_input_share)
    with pytest.raises(InputShareRejected) as info:
        decrypt_input_share(task, [LEADER], Role.LEADER, report_share_for(tampered, Role.LEADER))
    assert info.value.error == PrepareError.HPKE_DECRYPT_ERROR
    with pytest.raises(Client09Error):
        generate_report(task, 1, time=T0, leader_hpke_config=LEADER.config,
                        helper_hpke_config=HELPER.config,
                        leader_extensions=[Extension(1, b""), Extension(1, b"")])


def test_collector_detects_wrong_batch_selector() -> None:
    vdaf = Prio3CountV08(2)
    task = _task(vdaf, QueryType.FIXED_SIZE)
    agg_param = b""
    sel = BatchSelector.fixed_size(b"\x01" * 32)
    ct = encrypt_aggregate_share(task, COLLECTOR.config, Role.LEADER, agg_param, sel,
                                 vdaf.encode_agg_share(vdaf.agg_init(None)))
    collection = Collection(PartialBatchSelector.fixed_size(b"\x02" * 32), 0, Interval(0, 0),
                            ct, ct)
    req = CollectionReq(Query.fixed_size(FixedSizeQuery.current_batch()), agg_param)
    with pytest.raises(HpkeError):
        collect_result(task, COLLECTOR, req, collection)
    with pytest.raises(Task09Error):
        encrypt_aggregate_share(task, COLLECTOR.config, Role.LEADER, agg_param,
                                BatchSelector.time_interval(Interval(0, 3600)), b"")
