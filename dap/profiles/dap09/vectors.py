"""DAP-09 test vectors: generate and check (same schema as :mod:`dap.vectors`).

``messages/<Type>.json`` holds valid values (structured fields and hex encoding) and
encodings a strict decoder must reject for every DAP-09 message type;
``examples/<Vdaf>.json`` a complete run of one DAP-09 task with VDAF-08 (upload,
aggregation, collection) for Prio3Count (time_interval) and Prio3Histogram (fixed_size),
with every key, random input and intermediate value.

Everything is derived from a fixed seed: ``derive(label, n) = SHAKE128(SEED || "/" ||
label)[:n]`` with ``SEED = "ppm-reference dap-09 test vectors"``. Times are in seconds.
HPKE ephemeral keys come from ``*_ephemeral_ikm`` values (test mode only).
The Aggregators' messages are what the protocol core produced in a run of the example
(:mod:`dap.profiles.example_run`), with the recorded IDs handed to it through its ``rng``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dap.codec import DecodeError
from dap.hpke import Aead, HpkeKeypair, Kdf, Kem, derive_keypair
from dap.profiles.base import Profile
from dap.profiles.dap09.client import (
    generate_report,
    open_aggregate_share,
    open_input_share,
    shard,
)
from dap.profiles.dap09.messages import (
    ALL_SCALARS,
    ALL_STRUCTS,
    AggregateShare,
    AggregateShareAad,
    AggregateShareReq,
    AggregationJobContinueReq,
    AggregationJobID,
    AggregationJobInitReq,
    AggregationJobResp,
    BatchID,
    BatchSelector,
    Collection,
    CollectionJobID,
    CollectionReq,
    Duration,
    Empty,
    Extension,
    FixedSizeQuery,
    HpkeCiphertext,
    HpkeConfig,
    HpkeConfigList,
    InputShareAad,
    Interval,
    PartialBatchSelector,
    PingPongMessage,
    PlaintextInputShare,
    PrepareContinue,
    PrepareError,
    PrepareInit,
    PrepareResp,
    Query,
    QueryType,
    Report,
    ReportID,
    ReportMetadata,
    ReportShare,
    Role,
    TaskID,
    Time,
    batch_checksum,
)
from dap.profiles.dap09.task import Task09
from dap.profiles.example_run import message, run_example
from dap.vector_format import (
    FORMAT_VERSION,
    CheckReport,
    ExampleMessages,
    VectorError,
    _diff,
    _dump,
    _hex,
    _msg,
    _unhex,
    _value_json,
    check_example_messages,
    check_message_cases,
)

SEED = b"ppm-reference dap-09 test vectors"
LEADER_URL = "https://leader.example.com/dap/"
HELPER_URL = "https://helper.example.com/dap/"


def derive(label: str, n: int) -> bytes:
    """``SHAKE128(SEED || "/" || label)`` truncated to ``n`` bytes."""
    return hashlib.shake_128(SEED + b"/" + label.encode()).digest(n)


# ---------------------------------------------------------------------------------------
# Examples
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExampleSpec09:
    name: str
    vdaf_name: str
    vdaf_parameters: dict[str, int]
    measurements: list[Any]
    query_type: QueryType
    report_times: list[int]  # POSIX seconds (rounded down by the Client)
    suites: dict[str, tuple[Kem, Kdf, Aead]]
    config_ids: dict[str, int]
    description: str = ""
    time_precision: int = 3600
    min_batch_size: int = 2


_MANDATORY = (Kem.DHKEM_X25519_HKDF_SHA256, Kdf.HKDF_SHA256, Aead.AES_128_GCM)
EXAMPLES = [
    ExampleSpec09(
        name="Prio3Count",
        vdaf_name="Prio3Count",
        vdaf_parameters={},
        measurements=[1, 0, 1],
        query_type=QueryType.TIME_INTERVAL,
        report_times=[1_700_000_000, 1_700_000_100, 1_700_003_700],
        suites={"leader": _MANDATORY, "helper": _MANDATORY, "collector": _MANDATORY},
        config_ids={"leader": 1, "helper": 2, "collector": 200},
        description=(
            "DAP-09 with VDAF-08 Prio3Count, time_interval query; all HPKE configs use "
            "X25519/HKDF-SHA256/AES-128-GCM."
        ),
    ),
    ExampleSpec09(
        name="Prio3Histogram",
        vdaf_name="Prio3Histogram",
        vdaf_parameters={"length": 4, "chunk_length": 2},
        measurements=[0, 3, 3, 1],
        query_type=QueryType.FIXED_SIZE,
        report_times=[1_700_000_000, 1_700_000_001, 1_700_000_002, 1_700_000_003],
        suites={
            "leader": _MANDATORY,
            "helper": (Kem.DHKEM_P256_HKDF_SHA256, Kdf.HKDF_SHA256, Aead.AES_128_GCM),
            "collector": (Kem.DHKEM_X25519_HKDF_SHA256, Kdf.HKDF_SHA256, Aead.CHACHA20_POLY1305),
        },
        config_ids={"leader": 7, "helper": 9, "collector": 33},
        description=(
            "DAP-09 with VDAF-08 Prio3Histogram (length 4, chunk_length 2), fixed_size "
            "query (current_batch); the Helper uses P-256/HKDF-SHA256/AES-128-GCM and the "
            "Collector X25519/HKDF-SHA256/ChaCha20Poly1305."
        ),
    ),
]


def _make_vdaf(name: str, parameters: dict[str, int], profile: Profile) -> Any:
    return profile.vdaf_class(name)(profile.shares, **parameters)


def example_inputs(spec: ExampleSpec09, profile: Profile) -> dict[str, Any]:
    """All inputs of an example, derived from the seed."""
    vdaf = _make_vdaf(spec.vdaf_name, spec.vdaf_parameters, profile)
    p = spec.name
    hpke = {}
    for role in ("leader", "helper", "collector"):
        kem, kdf, aead = spec.suites[role]
        hpke[role] = {"config_id": spec.config_ids[role], "kem_id": int(kem),
                      "kdf_id": int(kdf), "aead_id": int(aead),
                      "ikm": _hex(derive(f"{p}/hpke/{role}/ikm", 66))}
    reports = [
        {
            "measurement": m,
            "report_id": _hex(derive(f"{p}/report/{i}/report_id", 16)),
            "time": t,
            "rand": _hex(derive(f"{p}/report/{i}/rand", vdaf.RAND_SIZE)),
            "leader_ephemeral_ikm": _hex(derive(f"{p}/report/{i}/leader_ephemeral_ikm", 66)),
            "helper_ephemeral_ikm": _hex(derive(f"{p}/report/{i}/helper_ephemeral_ikm", 66)),
        }
        for i, (m, t) in enumerate(zip(spec.measurements, spec.report_times, strict=True))
    ]
    inputs: dict[str, Any] = {
        "vdaf": {"name": spec.vdaf_name, "parameters": dict(spec.vdaf_parameters)},
        "task": {
            "task_id": _hex(derive(f"{p}/task_id", 32)),
            "leader_aggregator_endpoint": LEADER_URL,
            "helper_aggregator_endpoint": HELPER_URL,
            "query_type": int(spec.query_type),
            "time_precision": spec.time_precision,
            "min_batch_size": spec.min_batch_size,
        },
        "hpke": hpke,
        "vdaf_verify_key": _hex(derive(f"{p}/vdaf_verify_key", vdaf.VERIFY_KEY_SIZE)),
        "reports": reports,
        "aggregation_job_id": _hex(derive(f"{p}/aggregation_job_id", 16)),
        "collection_job_id": _hex(derive(f"{p}/collection_job_id", 16)),
        "leader_agg_share_ephemeral_ikm": _hex(derive(f"{p}/collect/leader_ephemeral_ikm", 66)),
        "helper_agg_share_ephemeral_ikm": _hex(derive(f"{p}/collect/helper_ephemeral_ikm", 66)),
    }
    if spec.query_type == QueryType.FIXED_SIZE:
        inputs["batch_id"] = _hex(derive(f"{p}/batch_id", 32))
    return inputs


def _keypair(entry: dict[str, Any]) -> HpkeKeypair:
    return derive_keypair(entry["config_id"], _unhex(entry["ikm"], "ikm"), Kem(entry["kem_id"]),
                          Kdf(entry["kdf_id"]), Aead(entry["aead_id"]))


def build_example(inputs: dict[str, Any], description: str,
                  profile: Profile) -> dict[str, Any]:
    """Compute every output of an example from its inputs. Deterministic."""
    vdaf = _make_vdaf(inputs["vdaf"]["name"], inputs["vdaf"]["parameters"], profile)
    t_in = inputs["task"]
    task = Task09.for_vdaf(
        vdaf,
        task_id=_unhex(t_in["task_id"], "task_id"),
        leader_aggregator_endpoint=t_in["leader_aggregator_endpoint"],
        helper_aggregator_endpoint=t_in["helper_aggregator_endpoint"],
        query_type=QueryType(t_in["query_type"]),
        time_precision=t_in["time_precision"],
        min_batch_size=t_in["min_batch_size"],
        profile=profile,
    )
    ctx = task.vdaf_ctx()
    keys = {role: _keypair(entry) for role, entry in inputs["hpke"].items()}
    verify_key = _unhex(inputs["vdaf_verify_key"], "vdaf_verify_key")
    agg_param = vdaf.encode_agg_param(None)
    out: dict[str, Any] = {
        "kind": "example",
        "format_version": FORMAT_VERSION,
        "draft": profile.draft,
        "vdaf_draft": profile.vdaf_draft,
        "description": description,
        "inputs": inputs,
        "vdaf": {"name": vdaf.NAME, "vdaf_id": vdaf.ID},
        "task": {"task_id_base64url": task.task_id.to_base64url(), "vdaf_ctx": _hex(ctx)},
        "hpke": {role: {"private_key": _hex(kp.private_key), "config": _msg(kp.config)}
                 for role, kp in keys.items()},
        "hpke_config_lists": {role: _msg(HpkeConfigList([keys[role].config]))
                              for role in ("leader", "helper")},
    }

    # -- upload (Section 4.4.2) ---------------------------------------------------------
    reports: list[Report] = []
    upload_reports = []
    for r in inputs["reports"]:
        report_id = ReportID(_unhex(r["report_id"], "report_id"))
        rand = _unhex(r["rand"], "rand")
        sharded = shard(task, vdaf, r["measurement"], report_id, rand)
        report = generate_report(
            task, r["measurement"], time=r["time"],
            leader_hpke_config=keys["leader"].config, helper_hpke_config=keys["helper"].config,
            vdaf=vdaf, report_id=report_id, rand=rand,
            ephemeral_ikms=(_unhex(r["leader_ephemeral_ikm"], "ikm"),
                            _unhex(r["helper_ephemeral_ikm"], "ikm")),
        )
        reports.append(report)
        upload_reports.append({
            "public_share": _hex(sharded.public_share),
            "leader_input_share": _hex(sharded.input_shares[0]),
            "helper_input_share": _hex(sharded.input_shares[1]),
            "leader_plaintext_input_share": _msg(PlaintextInputShare([], sharded.input_shares[0])),
            "helper_plaintext_input_share": _msg(PlaintextInputShare([], sharded.input_shares[1])),
            "input_share_aad": _msg(task.input_share_aad(report.report_metadata,
                                                         report.public_share)),
            "leader_hpke_info": _hex(profile.input_share_info(Role.LEADER)),
            "helper_hpke_info": _hex(profile.input_share_info(Role.HELPER)),
            "report": _msg(report),
        })
    method, resource = profile.request("upload")
    out["upload"] = {
        "method": method,
        "url": profile.resource_url(resource, LEADER_URL, task_id=task.task_id),
        "media_type": profile.media_type_for(Report),
        "reports": upload_reports,
    }

    # -- the protocol run: the Leader and the Helper of dap.core (dap.profiles.example_run)
    # The Client's and the Collector's messages go in; every message an Aggregator sends
    # is what the core produced. Each report is its own upload (DAP-09 has one report per
    # request), in the order of the inputs.
    tp = task.time_precision
    times = [int(r.report_metadata.time) for r in reports]
    start = min(times) - min(times) % tp
    end = max(times) - max(times) % tp + tp
    interval = Interval(start, end - start)  # multiples of time_precision (Section 4.6.1)
    batch_id = None
    if task.query_type == QueryType.FIXED_SIZE:
        batch_id = BatchID(_unhex(inputs["batch_id"], "batch_id"))
        query = Query.fixed_size(FixedSizeQuery.current_batch())
    else:
        query = Query.time_interval(interval)
    collection_req = CollectionReq(query, agg_param)
    collection_job_id = _unhex(inputs["collection_job_id"], "collection_job_id")
    run = run_example(
        task,
        vdaf_verify_key=verify_key,
        verification_key_id=0,  # DAP-09 has one verification key per task
        leader_keypair=keys["leader"],
        helper_keypair=keys["helper"],
        collector_hpke_config=keys["collector"].config,
        uploads=[report.encode() for report in reports],
        report_count=len(reports),
        collection_req=collection_req.encode(),
        # The Leader draws a fixed_size batch's ID, then the aggregation job ID (it names
        # the job: PUT); the Collector names the collection job (PUT). The Helper draws
        # only the ID of its aggregate share job, which DAP-09 never sends: we give it
        # the collection job's.
        leader_ids=[*([bytes(batch_id)] if batch_id is not None else []),
                    _unhex(inputs["aggregation_job_id"], "aggregation_job_id")],
        helper_ids=[collection_job_id],
        collection_job_id=collection_job_id,
        leader_agg_share_ephemeral_ikm=_unhex(inputs["leader_agg_share_ephemeral_ikm"], "ikm"),
        helper_agg_share_ephemeral_ikm=_unhex(inputs["helper_agg_share_ephemeral_ikm"], "ikm"),
        # The Aggregators' clock: one time_precision after the last report's time.
        now=max(times) + tp,
    )

    # -- aggregation (Section 4.5), Prio3 has one round ---------------------------------
    # The VDAF's intermediate values, for the reader: the core computed the same inside.
    agg_shares = [vdaf.agg_init(None), vdaf.agg_init(None)]
    agg_reports = []
    for report in reports:
        nonce = bytes(report.report_metadata.report_id)
        aad = task.input_share_aad(report.report_metadata, report.public_share)
        shares = [
            open_input_share(keys["leader"], Role.LEADER, aad,
                             report.leader_encrypted_input_share, profile=profile).payload,
            open_input_share(keys["helper"], Role.HELPER, aad,
                             report.helper_encrypted_input_share, profile=profile).payload,
        ]
        public_share = vdaf.decode_public_share(report.public_share)
        states, pshares = [], []
        for agg_id in (0, 1):
            state, pshare = vdaf.verify_init(verify_key, ctx, agg_id, None, nonce, public_share,
                                             vdaf.decode_input_share(agg_id, shares[agg_id]))
            states.append(state)
            pshares.append(pshare)
        prep_msg = vdaf.verifier_shares_to_message(ctx, None, pshares)
        out_shares = [vdaf.verify_next(ctx, states[j], prep_msg) for j in (0, 1)]
        for j in (0, 1):
            agg_shares[j] = vdaf.agg_update(None, agg_shares[j], out_shares[j])
        # The Leader initializes; the Helper reaches Finished with an outbound message and
        # answers "continue" with the finish message (Section 4.5.1.2); the Leader then
        # finishes.
        leader_outbound = PingPongMessage.initialize(vdaf.encode_verifier_share(pshares[0]))
        helper_outbound = PingPongMessage.finish(vdaf.encode_verifier_message(prep_msg))
        agg_reports.append({
            "report_id": _hex(nonce),
            "leader_prep_share": _hex(vdaf.encode_verifier_share(pshares[0])),
            "helper_prep_share": _hex(vdaf.encode_verifier_share(pshares[1])),
            "prep_msg": _hex(vdaf.encode_verifier_message(prep_msg)),
            "leader_outbound": _msg(leader_outbound),
            "helper_outbound": _msg(helper_outbound),
            "leader_out_share": _hex(vdaf.encode_out_share(out_shares[0])),
            "helper_out_share": _hex(vdaf.encode_out_share(out_shares[1])),
        })
    agg_job_id = AggregationJobID(run.aggregation_job_id)
    method, resource = profile.request("aggregation_job_init")
    out["aggregation"] = {
        "method": method,
        "url": profile.resource_url(resource, HELPER_URL, task_id=task.task_id,
                                    aggregation_job_id=agg_job_id),
        "media_type": profile.media_type_for(AggregationJobInitReq),
        "agg_param": _hex(agg_param),
        "reports": agg_reports,
        "aggregation_job_init_req": message(AggregationJobInitReq,
                                            run.aggregation_job_init_req),
        "aggregation_job_resp": message(AggregationJobResp, run.aggregation_job_resp),
        "leader_agg_share": _hex(vdaf.encode_agg_share(agg_shares[0])),
        "helper_agg_share": _hex(vdaf.encode_agg_share(agg_shares[1])),
    }

    # -- collection (Section 4.6) -------------------------------------------------------
    share_req = AggregateShareReq.decode(run.aggregate_share_req)
    method, resource = profile.request("collection_job_create")
    share_method, share_resource = profile.request("aggregate_share_create")
    out["collection"] = {
        "method": method,
        "url": profile.resource_url(resource, LEADER_URL, task_id=task.task_id,
                                    collection_job_id=CollectionJobID(run.collection_job_id)),
        "poll_method": profile.request("collection_job_poll")[0],
        "aggregate_share_method": share_method,
        "aggregate_share_url": profile.resource_url(share_resource, HELPER_URL,
                                                    task_id=task.task_id),
        "collection_req": _msg(collection_req),
        "aggregate_share_req": message(AggregateShareReq, run.aggregate_share_req),
        "aggregate_share_aad": _msg(task.aggregate_share_aad(agg_param,
                                                             share_req.batch_selector)),
        "leader_hpke_info": _hex(profile.aggregate_share_info(Role.LEADER)),
        "helper_hpke_info": _hex(profile.aggregate_share_info(Role.HELPER)),
        "aggregate_share": message(AggregateShare, run.aggregate_share),
        "collection": message(Collection, run.collection_job_resp),
        "aggregate_result": vdaf.unshard(None, agg_shares, len(reports)),
    }
    return out


# ---------------------------------------------------------------------------------------
# Message vectors
# ---------------------------------------------------------------------------------------

_R1 = ReportID(derive("messages/report_id/1", 16))
_R2 = ReportID(derive("messages/report_id/2", 16))
_TASK_ID = TaskID(derive("messages/task_id", 32))
_BATCH_ID = BatchID(derive("messages/batch_id", 32))
_IV = Interval(1_700_000_000 - 1_700_000_000 % 3600, 3600)


def _ct(i: int) -> HpkeCiphertext:
    return HpkeCiphertext(i, derive(f"messages/enc/{i}", 32), derive(f"messages/payload/{i}", 24))


def message_cases() -> dict[str, list[tuple[str, Any]]]:
    """Valid sample values of every DAP-09 message type, with a description each."""
    md1 = ReportMetadata(_R1, 1_700_000_000)
    md2 = ReportMetadata(_R2, 1_699_999_200)
    report = Report(md1, derive("messages/public_share", 17), _ct(1), _ct(2))
    report2 = Report(md2, b"", _ct(1), _ct(2))
    prep_init = PrepareInit(ReportShare(md1, report.public_share, _ct(2)),
                            PingPongMessage.initialize(derive("messages/prep_share", 32)).encode())
    q_ti = Query.time_interval(_IV)
    q_id = Query.fixed_size(FixedSizeQuery.by_batch_id(_BATCH_ID))
    q_cur = Query.fixed_size(FixedSizeQuery.current_batch())
    return {
        "ReportID": [("random report ID", _R1)],
        "TaskID": [("random task ID", _TASK_ID)],
        "BatchID": [("random batch ID", _BATCH_ID)],
        "AggregationJobID": [("16-byte job ID", AggregationJobID(derive("messages/aj", 16)))],
        "CollectionJobID": [("16-byte job ID", CollectionJobID(derive("messages/cj", 16)))],
        "Time": [("1700000000 seconds", Time(1_700_000_000)), ("max uint64", Time(2**64 - 1))],
        "Duration": [("one hour", Duration(3600))],
        "Empty": [("empty struct", Empty())],
        "Interval": [("one hour", _IV)],
        "HpkeCiphertext": [("config 1", _ct(1))],
        "HpkeConfig": [("X25519", HpkeConfig(1, 0x0020, 0x0001, 0x0001, derive("pk", 32)))],
        "HpkeConfigList": [
            ("two configs, decreasing preference", HpkeConfigList([
                HpkeConfig(194, 0x0010, 0x0001, 0x0001, b"\x04" + derive("pk1", 64)),
                HpkeConfig(17, 0x0020, 0x0001, 0x0003, derive("pk2", 32)),
            ])),
        ],
        "Extension": [("TBD(0), empty data", Extension(0, b"")),
                      ("unregistered type with data", Extension(0xFF00, b"\x01\x02"))],
        "ReportMetadata": [("report metadata", md1)],
        "Report": [("report", report), ("empty public share", report2)],
        "PlaintextInputShare": [
            ("no extensions", PlaintextInputShare([], b"\x01\x02\x03")),
            ("unsorted extensions, empty payload",
             PlaintextInputShare([Extension(7, b"x"), Extension(1, b"")], b"")),
        ],
        "InputShareAad": [("aad", InputShareAad(_TASK_ID, md1, b"\x05"))],
        "FixedSizeQuery": [("by_batch_id", FixedSizeQuery.by_batch_id(_BATCH_ID)),
                           ("current_batch", FixedSizeQuery.current_batch())],
        "Query": [("time_interval", q_ti), ("fixed_size by_batch_id", q_id),
                  ("fixed_size current_batch", q_cur)],
        "PartialBatchSelector": [("time_interval", PartialBatchSelector.time_interval()),
                                 ("fixed_size", PartialBatchSelector.fixed_size(_BATCH_ID))],
        "BatchSelector": [("time_interval", BatchSelector.time_interval(_IV)),
                          ("fixed_size", BatchSelector.fixed_size(_BATCH_ID))],
        "ReportShare": [("report share", prep_init.report_share)],
        "PrepareInit": [("ping-pong initialize payload", prep_init)],
        "AggregationJobInitReq": [
            ("time_interval", AggregationJobInitReq(b"", PartialBatchSelector.time_interval(),
                                                    [prep_init])),
            ("fixed_size, agg_param", AggregationJobInitReq(
                b"\x00\x01", PartialBatchSelector.fixed_size(_BATCH_ID), [prep_init, prep_init])),
        ],
        "PrepareResp": [
            ("continue", PrepareResp.continue_(_R1, PingPongMessage.finish(b"").encode())),
            ("finished", PrepareResp.finished(_R1)),
            ("reject batch_collected(0)", PrepareResp.reject(_R2, PrepareError.BATCH_COLLECTED)),
            ("reject report_too_early", PrepareResp.reject(_R2, PrepareError.REPORT_TOO_EARLY)),
        ],
        "AggregationJobResp": [
            ("three responses", AggregationJobResp([
                PrepareResp.continue_(_R1, b"\x02\x00\x00\x00\x00"),
                PrepareResp.finished(_R2),
                PrepareResp.reject(_R2, PrepareError.VDAF_PREP_ERROR),
            ])),
        ],
        "PrepareContinue": [("continue", PrepareContinue(_R1, b"\x01\x02"))],
        "AggregationJobContinueReq": [
            ("step 1", AggregationJobContinueReq(1, [PrepareContinue(_R1, b"\x01\x02")])),
        ],
        "PingPongMessage": [
            ("initialize", PingPongMessage.initialize(b"\x01\x02")),
            ("continue", PingPongMessage.continue_(b"\x03", b"\x04\x05")),
            ("finish", PingPongMessage.finish(b"")),
        ],
        "CollectionReq": [("time_interval", CollectionReq(q_ti, b"")),
                          ("fixed_size current_batch", CollectionReq(q_cur, b"\x01"))],
        "Collection": [
            ("fixed_size", Collection(PartialBatchSelector.fixed_size(_BATCH_ID), 1000, _IV,
                                      _ct(200), _ct(200))),
            ("time_interval", Collection(PartialBatchSelector.time_interval(), 2, _IV,
                                         _ct(200), _ct(201))),
        ],
        "AggregateShareReq": [
            ("time_interval", AggregateShareReq(BatchSelector.time_interval(_IV), b"", 2,
                                                batch_checksum([_R1, _R2]))),
            ("fixed_size", AggregateShareReq(BatchSelector.fixed_size(_BATCH_ID), b"\x01", 1,
                                             batch_checksum([_R1]))),
        ],
        "AggregateShare": [("encrypted share", AggregateShare(_ct(200)))],
        "AggregateShareAad": [
            ("time_interval", AggregateShareAad(_TASK_ID, b"", BatchSelector.time_interval(_IV))),
            ("fixed_size", AggregateShareAad(_TASK_ID, b"\x01",
                                             BatchSelector.fixed_size(_BATCH_ID))),
        ],
    }


def invalid_cases() -> dict[str, list[tuple[str, bytes]]]:
    """Encodings that a strict decoder must reject, beyond the generic ones."""
    r1 = bytes(_R1)
    return {
        "HpkeConfigList": [("empty list", b"\x00\x00")],
        "HpkeCiphertext": [("empty enc", b"\x01\x00\x00\x00\x00\x00\x01\x00")],
        "Query": [("reserved query type 0", b"\x00"), ("unknown query type 3", b"\x03"),
                  ("unknown fixed-size query type 2", b"\x02\x02")],
        "PartialBatchSelector": [("reserved query type 0", b"\x00"),
                                 ("fixed_size with short batch ID", b"\x02" + bytes(31))],
        "BatchSelector": [("time_interval with short interval", b"\x01" + bytes(15))],
        "PrepareResp": [("unknown prepare_resp_state 3", r1 + b"\x03"),
                        ("unknown PrepareError 10", r1 + b"\x02\x0a")],
        "AggregationJobInitReq": [("no prepare_inits", bytes(4) + b"\x01" + bytes(4))],
        "AggregationJobResp": [("no prepare_resps", bytes(4)),
                               ("length prefix cuts a PrepareResp", b"\x00\x00\x00\x10" + r1
                                + b"\x01")],
        "AggregationJobContinueReq": [("no prepare_continues", b"\x00\x01" + bytes(4))],
    }


_TYPES: dict[str, type] = {c.__name__: c for c in (*ALL_STRUCTS, *ALL_SCALARS, PingPongMessage)}
_IDS = (ReportID, TaskID, BatchID, AggregationJobID, CollectionJobID)


def build_message_file(name: str, profile: Profile) -> dict[str, Any]:
    cls = _TYPES[name]
    valid = message_cases()[name]
    invalid = list(invalid_cases().get(name, []))
    first = valid[0][1].encode()
    invalid.append(("one trailing byte", first + b"\x00"))
    if first:
        invalid.append(("last byte missing", first[:-1]))
    doc: dict[str, Any] = {
        "kind": "message",
        "format_version": FORMAT_VERSION,
        "draft": profile.draft,
        "message": name,
        "media_type": profile.media_type_for(name) if name in profile.message_types else None,
        "valid": [{"description": d, "fields": _value_json(v), "encoding": v.encode().hex()}
                  for d, v in valid],
        "invalid": [],
    }
    for d, data in invalid:
        try:
            cls.decode(data)  # type: ignore[attr-defined]
        except DecodeError as exc:
            doc["invalid"].append({"description": d, "encoding": data.hex(), "error": str(exc),
                                   "problem_type": exc.problem_type})
        else:  # pragma: no cover - a generator bug
            raise VectorError(f"{name}: invalid case {d!r} decodes")
    if isinstance(valid[0][1], _IDS):
        for case, (_, v) in zip(doc["valid"], valid, strict=True):
            case["base64url"] = v.to_base64url()
    return doc


def generate(out_dir: Path, profile: Profile) -> list[Path]:
    """Write every DAP-09 vector file under ``out_dir``; returns the paths written."""
    written = []
    (out_dir / "messages").mkdir(parents=True, exist_ok=True)
    (out_dir / "examples").mkdir(parents=True, exist_ok=True)
    for name in message_cases():
        path = out_dir / "messages" / f"{name}.json"
        path.write_text(_dump(build_message_file(name, profile)))
        written.append(path)
    for spec in EXAMPLES:
        path = out_dir / "examples" / f"{spec.name}.json"
        path.write_text(_dump(build_example(example_inputs(spec, profile), spec.description,
                                            profile)))
        written.append(path)
    return written


# ---------------------------------------------------------------------------------------
# Check
# ---------------------------------------------------------------------------------------


def check_message_file(doc: dict[str, Any], report: CheckReport, where: str,
                       profile: Profile) -> None:
    check_message_cases(doc, report, where, _TYPES, profile)


_EXAMPLE_MESSAGES: ExampleMessages = [
    (lambda d: [h["config"] for h in d["hpke"].values()], HpkeConfig),
    (lambda d: list(d["hpke_config_lists"].values()), HpkeConfigList),
    (lambda d: [r["report"] for r in d["upload"]["reports"]], Report),
    (lambda d: [r["input_share_aad"] for r in d["upload"]["reports"]], InputShareAad),
    (lambda d: [r[k] for r in d["upload"]["reports"]
                for k in ("leader_plaintext_input_share", "helper_plaintext_input_share")],
     PlaintextInputShare),
    (lambda d: [r[k] for r in d["aggregation"]["reports"]
                for k in ("leader_outbound", "helper_outbound")], PingPongMessage),
    (lambda d: [d["aggregation"]["aggregation_job_init_req"]], AggregationJobInitReq),
    (lambda d: [d["aggregation"]["aggregation_job_resp"]], AggregationJobResp),
    (lambda d: [d["collection"]["collection_req"]], CollectionReq),
    (lambda d: [d["collection"]["aggregate_share_req"]], AggregateShareReq),
    (lambda d: [d["collection"]["aggregate_share_aad"]], AggregateShareAad),
    (lambda d: [d["collection"]["aggregate_share"]], AggregateShare),
    (lambda d: [d["collection"]["collection"]], Collection),
]


def check_example_file(doc: dict[str, Any], report: CheckReport, where: str,
                       profile: Profile) -> None:
    # 1. Re-derive everything from the recorded inputs and compare.
    expected = build_example(doc["inputs"], doc.get("description", ""), profile)
    for problem in _diff(expected, doc):
        report.errors.append(f"{where}: {problem}")
    report.checks += 1
    # 2. Structured fields and encodings agree, both ways.
    check_example_messages(doc, report, where, _EXAMPLE_MESSAGES)
    # 3. Decrypt every ciphertext with the recorded private keys.
    keys = {role: HpkeKeypair(HpkeConfig.from_json(e["config"]["fields"]),
                              _unhex(e["private_key"], "private_key"))
            for role, e in doc["hpke"].items()}
    for i, r in enumerate(doc["upload"]["reports"]):
        rep = Report.decode(_unhex(r["report"]["encoding"], "report"))
        aad = InputShareAad.decode(_unhex(r["input_share_aad"]["encoding"], "aad"))
        for role, server, ct in (("leader", Role.LEADER, rep.leader_encrypted_input_share),
                                 ("helper", Role.HELPER, rep.helper_encrypted_input_share)):
            plain = open_input_share(keys[role], server, aad, ct, profile=profile)
            if plain.encode().hex() != r[f"{role}_plaintext_input_share"]["encoding"]:
                report.errors.append(f"{where}: report {i} {role} share decrypts differently")
            report.checks += 1
    coll = Collection.decode(_unhex(doc["collection"]["collection"]["encoding"], "collection"))
    aad2 = AggregateShareAad.decode(
        _unhex(doc["collection"]["aggregate_share_aad"]["encoding"], "aad"))
    for role, server, ct in (("leader", Role.LEADER, coll.leader_encrypted_agg_share),
                             ("helper", Role.HELPER, coll.helper_encrypted_agg_share)):
        agg_share = open_aggregate_share(keys["collector"], server, aad2, ct, profile=profile)
        if agg_share.hex() != doc["aggregation"][f"{role}_agg_share"]:
            report.errors.append(f"{where}: {role} aggregate share decrypts differently")
        report.checks += 1


__all__ = [
    "EXAMPLES",
    "build_example",
    "build_message_file",
    "check_example_file",
    "check_message_file",
    "derive",
    "example_inputs",
    "generate",
    "invalid_cases",
    "message_cases",
]
