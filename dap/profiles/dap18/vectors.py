"""DAP-18 test vectors: generate and check (schema in test_vectors/README.md).

There are no published DAP test vectors, so this module defines them. A vector
directory holds:

* ``messages/<Type>.json``: for every message type, structured fields and the hex
  encoding of a few valid values, plus encodings every strict decoder must reject;
* ``examples/<Vdaf>.json``: a complete run of one task (upload, aggregation, collection)
  for Prio3Count and Prio3Histogram, with every key, random input and intermediate
  value, so another implementation can reproduce each byte. The run is the protocol
  core's (:mod:`dap.profiles.example_run`): every message an Aggregator sends is what
  ``dap.core`` produced, so the files pin the bytes the servers send.

Everything is derived from a fixed seed: ``derive(label, n) = SHAKE128(SEED || "/" ||
label)[:n]``. HPKE ephemeral keys are derived with RFC 9180 ``DeriveKeyPair`` from
``*_ephemeral_ikm`` values (test mode only: see :func:`dap.hpke.seal_base_deterministic`).
The IDs the Aggregators draw (job, batch and share IDs) are the recorded ones, handed to
the core through its ``rng``.

``check`` re-derives every encoding from the inputs recorded in the files, decodes every
encoding, and decrypts every ciphertext with the recorded private keys.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dap.codec import DecodeError
from dap.hpke import (
    Aead,
    HpkeError,
    HpkeKeypair,
    Kdf,
    Kem,
    derive_keypair,
    open_aggregate_share,
)
from dap.profiles.base import Profile
from dap.profiles.dap18.client import (
    aggregate_share_aad,
    generate_report,
    input_share_aad,
    open_input_share,
    shard,
)
from dap.profiles.dap18.messages import (
    ALL_SCALARS,
    AggregateShare,
    AggregateShareID,
    AggregateShareReq,
    AggregationJobContinueReq,
    AggregationJobExtension,
    AggregationJobID,
    AggregationJobInitReq,
    BatchID,
    BatchMode,
    BatchSelector,
    CollectionJobExtension,
    CollectionJobID,
    CollectionJobReq,
    CollectionJobResp,
    Duration,
    Empty,
    Extension,
    HpkeCiphertext,
    HpkeConfig,
    HpkeConfigList,
    Interval,
    LeaderSelectedBatchSelectorConfig,
    PingPongMessage,
    PlaintextInputShare,
    Query,
    Report,
    ReportID,
    ReportMetadata,
    ReportShare,
    Role,
    TaskExtension,
    TaskID,
    Time,
    TimeIntervalBatchSelectorConfig,
    TimeIntervalQueryConfig,
    UploadRequest,
    VerifyContinue,
    VerifyInit,
    batch_checksum,
)
from dap.profiles.dap18.task import (
    VDAF_CONFIGS,
    Poplar1Config,
    Prio3CountConfig,
    Prio3HistogramConfig,
    Prio3MultihotCountVecConfig,
    Prio3SumConfig,
    Prio3SumVecConfig,
    Task,
    decode_vdaf_configuration,
    vdaf_configuration,
)
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

SEED = b"ppm-reference dap-18 test vectors"




def derive(label: str, n: int) -> bytes:
    """``SHAKE128(SEED || "/" || label)`` truncated to ``n`` bytes."""
    return hashlib.shake_128(SEED + b"/" + label.encode()).digest(n)








# ---------------------------------------------------------------------------------------
# Examples: one task, end to end
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExampleSpec:
    """The fixed choices of one example; every random input is derived from ``name``."""

    name: str
    vdaf_name: str
    vdaf_parameters: dict[str, int]
    measurements: list[Any]
    batch_mode: BatchMode
    report_times: list[int]  # in time_precision units
    suites: dict[str, tuple[Kem, Kdf, Aead]]
    config_ids: dict[str, int]
    task_interval: tuple[int, int] | None = None
    description: str = ""
    time_precision: int = 3600
    min_batch_size: int = 2
    extra: dict[str, Any] = field(default_factory=dict)


_MANDATORY = (Kem.DHKEM_X25519_HKDF_SHA256, Kdf.HKDF_SHA256, Aead.AES_128_GCM)
EXAMPLES = [
    ExampleSpec(
        name="Prio3Count",
        vdaf_name="Prio3Count",
        vdaf_parameters={},
        measurements=[1, 0, 1],
        batch_mode=BatchMode.TIME_INTERVAL,
        report_times=[472222, 472222, 472223],
        suites={"leader": _MANDATORY, "helper": _MANDATORY, "collector": _MANDATORY},
        config_ids={"leader": 1, "helper": 2, "collector": 200},
        task_interval=(472000, 1000),
        description=(
            "Prio3Count, time-interval batch mode, task_interval extension; all HPKE "
            "configs use the mandatory suite X25519/HKDF-SHA256/AES-128-GCM."
        ),
    ),
    ExampleSpec(
        name="Prio3Histogram",
        vdaf_name="Prio3Histogram",
        vdaf_parameters={"length": 4, "chunk_length": 2},
        measurements=[0, 3, 3, 1],
        batch_mode=BatchMode.LEADER_SELECTED,
        report_times=[472222, 472223, 472223, 472225],
        suites={
            "leader": _MANDATORY,
            "helper": (Kem.DHKEM_P256_HKDF_SHA256, Kdf.HKDF_SHA256, Aead.AES_128_GCM),
            "collector": (Kem.DHKEM_X25519_HKDF_SHA256, Kdf.HKDF_SHA256, Aead.CHACHA20_POLY1305),
        },
        config_ids={"leader": 7, "helper": 9, "collector": 33},
        description=(
            "Prio3Histogram (length 4, chunk_length 2), leader-selected batch mode; the "
            "Helper uses P-256/HKDF-SHA256/AES-128-GCM and the Collector "
            "X25519/HKDF-SHA256/ChaCha20Poly1305."
        ),
    ),
]

LEADER_URL = "https://leader.example.com/dap/"
HELPER_URL = "https://helper.example.com/dap/"


def _make_vdaf(name: str, parameters: dict[str, int]) -> Any:
    import vdaf.prio3 as prio3

    return getattr(prio3, name)(2, **parameters)


def example_inputs(spec: ExampleSpec) -> dict[str, Any]:
    """All inputs of an example, derived from the seed (the ``inputs`` section)."""
    vdaf = _make_vdaf(spec.vdaf_name, spec.vdaf_parameters)
    p = spec.name
    hpke = {}
    for role in ("leader", "helper", "collector"):
        kem, kdf, aead = spec.suites[role]
        hpke[role] = {
            "config_id": spec.config_ids[role],
            "kem_id": int(kem),
            "kdf_id": int(kdf),
            "aead_id": int(aead),
            "ikm": _hex(derive(f"{p}/hpke/{role}/ikm", 66)),
        }
    reports = []
    for i, (measurement, t) in enumerate(zip(spec.measurements, spec.report_times, strict=True)):
        reports.append(
            {
                "measurement": measurement,
                "report_id": _hex(derive(f"{p}/report/{i}/report_id", 16)),
                "time": t,
                "rand": _hex(derive(f"{p}/report/{i}/rand", vdaf.RAND_SIZE)),
                "leader_ephemeral_ikm": _hex(derive(f"{p}/report/{i}/leader_ephemeral_ikm", 66)),
                "helper_ephemeral_ikm": _hex(derive(f"{p}/report/{i}/helper_ephemeral_ikm", 66)),
            }
        )
    inputs: dict[str, Any] = {
        "vdaf": {"name": spec.vdaf_name, "parameters": dict(spec.vdaf_parameters)},
        "task": {
            "task_id": _hex(derive(f"{p}/task_id", 32)),
            "task_info": _hex(f"ppm-reference {p} example".encode()),
            "leader_aggregator_endpoint": LEADER_URL,
            "helper_aggregator_endpoint": HELPER_URL,
            "time_precision": spec.time_precision,
            "min_batch_size": spec.min_batch_size,
            "batch_mode": int(spec.batch_mode),
            "task_interval": (
                {"start": spec.task_interval[0], "duration": spec.task_interval[1]}
                if spec.task_interval
                else None
            ),
        },
        "hpke": hpke,
        "vdaf_verify_key": _hex(derive(f"{p}/vdaf_verify_key", vdaf.VERIFY_KEY_SIZE)),
        "verification_key_id": 0,
        "reports": reports,
        "aggregation_job_id": _hex(derive(f"{p}/aggregation_job_id", 16)),
        "collection_job_id": _hex(derive(f"{p}/collection_job_id", 16)),
        "aggregate_share_id": _hex(derive(f"{p}/aggregate_share_id", 16)),
        "leader_agg_share_ephemeral_ikm": _hex(derive(f"{p}/collect/leader_ephemeral_ikm", 66)),
        "helper_agg_share_ephemeral_ikm": _hex(derive(f"{p}/collect/helper_ephemeral_ikm", 66)),
    }
    if spec.batch_mode == BatchMode.LEADER_SELECTED:
        inputs["batch_id"] = _hex(derive(f"{p}/batch_id", 32))
    return inputs


def _keypair(entry: dict[str, Any]) -> HpkeKeypair:
    return derive_keypair(
        entry["config_id"], _unhex(entry["ikm"], "ikm"),
        Kem(entry["kem_id"]), Kdf(entry["kdf_id"]), Aead(entry["aead_id"]),
    )


def build_example(
    inputs: dict[str, Any], description: str, profile: Profile
) -> dict[str, Any]:
    """Compute every output of an example from its inputs. Deterministic."""
    (TaskConfiguration, InputShareAad, AggregateShareAad, ReportUploadStatus, UploadErrors,
     VerifyResp, AggregationJobResp, ReportError) = _changed(profile.messages)
    vdaf = _make_vdaf(inputs["vdaf"]["name"], inputs["vdaf"]["parameters"])
    vdaf_type, vdaf_config = vdaf_configuration(vdaf, profile)
    t_in = inputs["task"]
    ti = t_in["task_interval"]
    task = Task.for_vdaf(
        vdaf,
        task_id=_unhex(t_in["task_id"], "task_id"),
        task_info=_unhex(t_in["task_info"], "task_info"),
        leader_aggregator_endpoint=t_in["leader_aggregator_endpoint"],
        helper_aggregator_endpoint=t_in["helper_aggregator_endpoint"],
        time_precision=t_in["time_precision"],
        min_batch_size=t_in["min_batch_size"],
        batch_mode=BatchMode(t_in["batch_mode"]),
        task_interval=Interval(ti["start"], ti["duration"]) if ti else None,
        profile=profile,
    )
    ctx = task.vdaf_ctx()
    keys = {role: _keypair(entry) for role, entry in inputs["hpke"].items()}
    verify_key = _unhex(inputs["vdaf_verify_key"], "vdaf_verify_key")
    agg_param = vdaf.encode_agg_param(None)
    _, config_struct = decode_vdaf_configuration(vdaf_type, vdaf_config, profile)

    out: dict[str, Any] = {
        "kind": "example",
        "format_version": FORMAT_VERSION,
        "draft": profile.draft,
        "vdaf_draft": profile.vdaf_draft,
        "description": description,
        "inputs": inputs,
        "vdaf": {
            "name": inputs["vdaf"]["name"],
            "vdaf_type": vdaf_type,
            "configuration": config_struct.to_json(),
            "vdaf_configuration": _hex(vdaf_config),
        },
        "task": {
            "task_id_base64url": task.task_id.to_base64url(),
            "task_configuration": _msg(task.configuration()),
            "vdaf_ctx": _hex(ctx),
        },
        "hpke": {
            role: {
                "private_key": _hex(kp.private_key),
                "config": _msg(kp.config),
            }
            for role, kp in keys.items()
        },
        "hpke_config_lists": {
            role: _msg(HpkeConfigList([keys[role].config])) for role in ("leader", "helper")
        },
    }

    # -- upload (Section 4.4) -----------------------------------------------------------
    upload_reports = []
    reports: list[Report] = []
    for r in inputs["reports"]:
        report_id = ReportID(_unhex(r["report_id"], "report_id"))
        rand = _unhex(r["rand"], "rand")
        sharded = shard(task, vdaf, r["measurement"], report_id, rand)
        report = generate_report(
            task,
            r["measurement"],
            time=r["time"],
            leader_hpke_config=keys["leader"].config,
            helper_hpke_config=keys["helper"].config,
            vdaf=vdaf,
            report_id=report_id,
            rand=rand,
            ephemeral_ikms=(
                _unhex(r["leader_ephemeral_ikm"], "ikm"),
                _unhex(r["helper_ephemeral_ikm"], "ikm"),
            ),
        )
        reports.append(report)
        aad = input_share_aad(task, report.report_metadata, sharded.public_share)
        upload_reports.append(
            {
                "public_share": _hex(sharded.public_share),
                "leader_input_share": _hex(sharded.input_shares[0]),
                "helper_input_share": _hex(sharded.input_shares[1]),
                "leader_plaintext_input_share": _msg(
                    PlaintextInputShare([], sharded.input_shares[0])
                ),
                "helper_plaintext_input_share": _msg(
                    PlaintextInputShare([], sharded.input_shares[1])
                ),
                "input_share_aad": _msg(aad),
                "leader_hpke_info": _hex(profile.input_share_info(Role.LEADER)),
                "helper_hpke_info": _hex(profile.input_share_info(Role.HELPER)),
                "report": _msg(report),
            }
        )
    out["upload"] = {
        "url": profile.resource_url("reports", LEADER_URL, task_id=task.task_id),
        "media_type": profile.media_type_for(UploadRequest),
        "reports": upload_reports,
        "upload_request": _msg(UploadRequest(reports)),
    }

    # -- the protocol run: the Leader and the Helper of dap.core (dap.profiles.example_run)
    # The Client's and the Collector's messages go in; every message an Aggregator sends
    # is what the core produced. Each report is its own upload, in the order of the inputs.
    batch_id = None
    if task.batch_mode == BatchMode.LEADER_SELECTED:
        batch_id = BatchID(_unhex(inputs["batch_id"], "batch_id"))
    times = [int(r.report_metadata.time) for r in reports]
    if task.batch_mode == BatchMode.TIME_INTERVAL:
        query = Query.time_interval(Interval(min(times), max(times) - min(times) + 1))
    else:
        query = Query.leader_selected()
    cjr = CollectionJobReq(query=query, agg_param=agg_param, extensions=[])
    agg_job_id = _unhex(inputs["aggregation_job_id"], "aggregation_job_id")
    run = run_example(
        task,
        vdaf_verify_key=verify_key,
        verification_key_id=inputs["verification_key_id"],
        leader_keypair=keys["leader"],
        helper_keypair=keys["helper"],
        collector_hpke_config=keys["collector"].config,
        uploads=[UploadRequest([report]).encode() for report in reports],
        report_count=len(reports),
        collection_req=cjr.encode(),
        # The Leader draws a leader-selected batch's ID, then its own aggregation job ID
        # (DAP-18 does not send it: we use the Helper's), then the collection job ID; the
        # Helper draws the aggregation job ID and then the aggregate share ID.
        leader_ids=[*([bytes(batch_id)] if batch_id is not None else []), agg_job_id,
                    _unhex(inputs["collection_job_id"], "collection_job_id")],
        helper_ids=[agg_job_id, _unhex(inputs["aggregate_share_id"], "aggregate_share_id")],
        collection_job_id=None,
        leader_agg_share_ephemeral_ikm=_unhex(inputs["leader_agg_share_ephemeral_ikm"], "ikm"),
        helper_agg_share_ephemeral_ikm=_unhex(inputs["helper_agg_share_ephemeral_ikm"], "ikm"),
        # The Aggregators' clock: one time_precision after the last report's time.
        now=(max(times) + 1) * task.time_precision,
    )

    # -- aggregation (Section 4.5), Prio3 has one round ---------------------------------
    # The VDAF's intermediate values, for the reader: the core computed the same inside.
    agg_shares = [vdaf.agg_init(None), vdaf.agg_init(None)]
    agg_reports = []
    for report in reports:
        nonce = bytes(report.report_metadata.report_id)
        public_share = vdaf.decode_public_share(report.public_share)
        aad = input_share_aad(task, report.report_metadata, report.public_share)
        shares = [
            open_input_share(keys["leader"], Role.LEADER, aad,
                             report.leader_encrypted_input_share, profile=profile).payload,
            open_input_share(keys["helper"], Role.HELPER, aad,
                             report.helper_encrypted_input_share, profile=profile).payload,
        ]
        states, vshares = [], []
        for agg_id in (0, 1):
            state, vshare = vdaf.verify_init(
                verify_key, ctx, agg_id, None, nonce, public_share,
                vdaf.decode_input_share(agg_id, shares[agg_id]),
            )
            states.append(state)
            vshares.append(vshare)
        vmessage = vdaf.verifier_shares_to_message(ctx, None, vshares)
        out_shares = [vdaf.verify_next(ctx, states[j], vmessage) for j in (0, 1)]
        for j in (0, 1):
            agg_shares[j] = vdaf.agg_update(None, agg_shares[j], out_shares[j])
        # The Leader initializes; the Helper reaches FinishedWithOutbound and answers
        # "continue" with the finish message; the Leader then reaches Finished (Section
        # 4.5.3).
        leader_outbound = PingPongMessage.initialize(vdaf.encode_verifier_share(vshares[0]))
        helper_outbound = PingPongMessage.finish(vdaf.encode_verifier_message(vmessage))
        agg_reports.append(
            {
                "report_id": _hex(nonce),
                "leader_verifier_share": _hex(vdaf.encode_verifier_share(vshares[0])),
                "helper_verifier_share": _hex(vdaf.encode_verifier_share(vshares[1])),
                "verifier_message": _hex(vdaf.encode_verifier_message(vmessage)),
                "leader_outbound": _msg(leader_outbound),
                "helper_outbound": _msg(helper_outbound),
                "leader_out_share": _hex(vdaf.encode_out_share(out_shares[0])),
                "helper_out_share": _hex(vdaf.encode_out_share(out_shares[1])),
            }
        )
    helper_job_id = AggregationJobID(run.aggregation_job_id)
    out["aggregation"] = {
        "creation_url": profile.resource_url(
            "aggregation_jobs", HELPER_URL, task_id=task.task_id
        ),
        "url": profile.resource_url(
            "aggregation_job", HELPER_URL, task_id=task.task_id,
            aggregation_job_id=helper_job_id,
        ),
        "agg_param": _hex(agg_param),
        "reports": agg_reports,
        "aggregation_job_init_req": message(AggregationJobInitReq,
                                            run.aggregation_job_init_req),
        "aggregation_job_resp": message(AggregationJobResp, run.aggregation_job_resp),
        "leader_agg_share": _hex(vdaf.encode_agg_share(agg_shares[0])),
        "helper_agg_share": _hex(vdaf.encode_agg_share(agg_shares[1])),
    }

    # -- collection (Section 4.6) -------------------------------------------------------
    collection_job_id = CollectionJobID(run.collection_job_id)
    agg_share_id = AggregateShareID(run.aggregate_share_id)
    out["collection"] = {
        "creation_url": profile.resource_url(
            "collection_jobs", LEADER_URL, task_id=task.task_id
        ),
        "url": profile.resource_url(
            "collection_job", LEADER_URL, task_id=task.task_id,
            collection_job_id=collection_job_id,
        ),
        "aggregate_share_url": profile.resource_url(
            "aggregate_share", HELPER_URL, task_id=task.task_id,
            aggregate_share_id=agg_share_id,
        ),
        "collection_job_req": _msg(cjr),
        "aggregate_share_req": message(AggregateShareReq, run.aggregate_share_req),
        "aggregate_share_aad": _msg(aggregate_share_aad(task, cjr)),
        "leader_hpke_info": _hex(profile.aggregate_share_info(Role.LEADER)),
        "helper_hpke_info": _hex(profile.aggregate_share_info(Role.HELPER)),
        "aggregate_share": message(AggregateShare, run.aggregate_share),
        "collection_job_resp": message(CollectionJobResp, run.collection_job_resp),
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


def _changed(m: Any) -> tuple[Any, ...]:
    """The message classes a later draft built on DAP-18 redefines (DAP-19: the ones
    carrying a ReportError or the TaskConfiguration), from the draft's message module."""
    return (m.TaskConfiguration, m.InputShareAad, m.AggregateShareAad, m.ReportUploadStatus,
            m.UploadErrors, m.VerifyResp, m.AggregationJobResp, m.ReportError)


def _ct(i: int) -> HpkeCiphertext:
    return HpkeCiphertext(i, derive(f"messages/enc/{i}", 32), derive(f"messages/payload/{i}", 24))


def _task_config(m: Any) -> Any:
    from dap.profiles.dap18.task import build_task_configuration

    return build_task_configuration(
        cls=m.TaskConfiguration,
        task_info=b"message vectors",
        leader_aggregator_endpoint=LEADER_URL,
        helper_aggregator_endpoint=HELPER_URL,
        time_precision=3600,
        min_batch_size=100,
        batch_mode=BatchMode.TIME_INTERVAL,
        vdaf_type=0x00000004,
        vdaf_configuration=bytes.fromhex("0000000a00000003"),
        task_interval=Interval(472000, 1000),
    )


def message_cases(m: Any) -> dict[str, list[tuple[str, Any]]]:
    """Valid sample values of every message type, with a description each."""
    (TaskConfiguration, InputShareAad, AggregateShareAad, ReportUploadStatus, UploadErrors,
     VerifyResp, AggregationJobResp, ReportError) = _changed(m)
    md1 = ReportMetadata(_R1, 472222, [])
    md2 = ReportMetadata(_R2, 472223, [Extension(0x0001, b""), Extension(0xFF00, b"\x01\x02")])
    report = Report(md1, derive("messages/public_share", 17), _ct(1), _ct(2))
    report2 = Report(md2, b"", _ct(1), _ct(2))
    cjr_ti = CollectionJobReq(Query.time_interval(Interval(472222, 2)), b"", [])
    cjr_ls = CollectionJobReq(
        Query.leader_selected(), b"\x01\x02", [CollectionJobExtension(0x0001, b"\xaa")]
    )
    verify_init = VerifyInit(
        ReportShare(md1, report.public_share, _ct(2)),
        PingPongMessage.initialize(derive("messages/verifier_share", 32)).encode(),
    )
    cases: dict[str, list[tuple[str, Any]]] = {
        "ReportID": [("random report ID", _R1)],
        "TaskID": [("random task ID", _TASK_ID)],
        "BatchID": [("random batch ID", _BATCH_ID)],
        "AggregationJobID": [("16-byte job ID", AggregationJobID(derive("messages/aj", 16)))],
        "CollectionJobID": [("16-byte job ID", CollectionJobID(derive("messages/cj", 16)))],
        "AggregateShareID": [("16-byte ID", AggregateShareID(derive("messages/as", 16)))],
        "Time": [("Time 123456789", Time(123456789)), ("max uint64", Time(2**64 - 1))],
        "Duration": [("Duration 11", Duration(11))],
        "Empty": [("empty struct", Empty())],
        "Interval": [("an interval", Interval(472222, 2))],
        "HpkeCiphertext": [("config 1", _ct(1))],
        "Extension": [
            ("empty data", Extension(0x0001, b"")),
            ("with data", Extension(0xFF00, b"\x01\x02")),
        ],
        "TaskExtension": [
            ("task_interval", TaskExtension.task_interval(Interval(472000, 1000))),
            ("unknown type, opaque data", TaskExtension(0x1234, b"\x00\x01")),
        ],
        "AggregationJobExtension": [
            ("leader_selected_batch_id", AggregationJobExtension.leader_selected_batch_id(
                _BATCH_ID)),
        ],
        "CollectionJobExtension": [("unregistered type", CollectionJobExtension(1, b"\xaa"))],
        "TaskConfiguration": [("time-interval task with task_interval", _task_config(m))],
        "HpkeConfig": [("X25519", HpkeConfig(1, 0x0020, 0x0001, 0x0001, derive("pk", 32)))],
        "HpkeConfigList": [
            (
                "two configs, decreasing preference",
                HpkeConfigList([
                    HpkeConfig(194, 0x0010, 0x0001, 0x0001, b"\x04" + derive("pk1", 64)),
                    HpkeConfig(17, 0x0020, 0x0001, 0x0003, derive("pk2", 32)),
                ]),
            )
        ],
        "ReportMetadata": [("no extensions", md1), ("two extensions", md2)],
        "Report": [("report", report), ("empty public share, extensions", report2)],
        "UploadRequest": [("two reports", UploadRequest([report, report2])),
                          ("no reports", UploadRequest([]))],
        "PlaintextInputShare": [
            ("no extensions", PlaintextInputShare([], b"\x01\x02\x03")),
            ("one extension", PlaintextInputShare([Extension(7, b"x")], b"\x01")),
        ],
        "InputShareAad": [("aad", InputShareAad(_TASK_ID, _task_config(m), md1, b"\x05"))],
        "ReportUploadStatus": [
            ("replayed", ReportUploadStatus(_R1, ReportError.REPORT_REPLAYED))
        ],
        "UploadErrors": [
            ("two errors", UploadErrors([
                ReportUploadStatus(_R1, getattr(ReportError, "OUTDATED_CONFIG",
                                                ReportError.HPKE_UNKNOWN_CONFIG_ID)),
                ReportUploadStatus(_R2, ReportError.REPORT_TOO_EARLY),
            ])),
        ],
        "ReportShare": [("report share", verify_init.report_share)],
        "VerifyInit": [("ping-pong initialize payload", verify_init)],
        "AggregationJobInitReq": [
            ("time-interval, no extensions", AggregationJobInitReq(0, b"", [], [verify_init])),
            ("leader-selected batch ID, agg_param", AggregationJobInitReq(
                3, b"\x00\x01", [AggregationJobExtension.leader_selected_batch_id(_BATCH_ID)],
                [verify_init, verify_init])),
        ],
        "VerifyResp": [
            ("continue", VerifyResp.continue_(_R1, PingPongMessage.finish(b"").encode())),
            ("finish", VerifyResp.finish(_R1)),
            ("reject", VerifyResp.reject(_R2, ReportError.HPKE_DECRYPT_ERROR)),
        ],
        "PingPongMessage": [
            ("initialize", PingPongMessage.initialize(b"\x01\x02")),
            ("continue", PingPongMessage.continue_(b"\x03", b"\x04\x05")),
            ("finish", PingPongMessage.finish(b"")),
        ],
        "AggregationJobResp": [
            ("three responses", AggregationJobResp([
                VerifyResp.continue_(_R1, b"\x02\x00\x00\x00\x00"),
                VerifyResp.finish(_R2),
                VerifyResp.reject(_R2, ReportError.VDAF_VERIFY_ERROR),
            ])),
        ],
        "VerifyContinue": [("continue", VerifyContinue(_R1, b"\x01\x02"))],
        "AggregationJobContinueReq": [
            ("step 1", AggregationJobContinueReq(1, [VerifyContinue(_R1, b"\x01\x02")])),
        ],
        "TimeIntervalQueryConfig": [("interval", TimeIntervalQueryConfig(Interval(1, 2)))],
        "TimeIntervalBatchSelectorConfig": [
            ("interval", TimeIntervalBatchSelectorConfig(Interval(1, 2)))
        ],
        "LeaderSelectedBatchSelectorConfig": [
            ("batch ID", LeaderSelectedBatchSelectorConfig(_BATCH_ID))
        ],
        "Query": [
            ("time_interval", Query.time_interval(Interval(472222, 2))),
            ("leader_selected", Query.leader_selected()),
        ],
        "BatchSelector": [
            ("time_interval", BatchSelector.time_interval(Interval(472222, 2))),
            ("leader_selected", BatchSelector.leader_selected(_BATCH_ID)),
        ],
        "CollectionJobReq": [("time-interval", cjr_ti), ("leader-selected", cjr_ls)],
        "CollectionJobResp": [
            ("collection result", CollectionJobResp(1000, Interval(472222, 2), _ct(200),
                                                    _ct(200))),
        ],
        "AggregateShareReq": [
            ("time-interval", AggregateShareReq(
                cjr_ti, BatchSelector.time_interval(Interval(472222, 2)), 2,
                batch_checksum([_R1, _R2]))),
            ("leader-selected", AggregateShareReq(
                cjr_ls, BatchSelector.leader_selected(_BATCH_ID), 1, batch_checksum([_R1]))),
        ],
        "AggregateShare": [("encrypted share", AggregateShare(_ct(200)))],
        "AggregateShareAad": [("aad", AggregateShareAad(_TASK_ID, _task_config(m), cjr_ti))],
        # Appendix B: vdaf_configuration encodings.
        "Prio3CountConfig": [("Empty", Prio3CountConfig())],
        "Prio3SumConfig": [("max_measurement 255", Prio3SumConfig(255))],
        "Prio3SumVecConfig": [("length 10, max 3, chunk 4", Prio3SumVecConfig(10, 3, 4))],
        "Prio3HistogramConfig": [("length 4, chunk 2", Prio3HistogramConfig(4, 2))],
        "Prio3MultihotCountVecConfig": [
            ("length 10, chunk 4, max_weight 3", Prio3MultihotCountVecConfig(10, 4, 3))
        ],
        "Poplar1Config": [("bits 256", Poplar1Config(256))],
    }
    return cases


def _decodes(cls: Any, data: bytes) -> bool:
    try:
        cls.decode(data)
    except DecodeError:
        return False
    return True


def invalid_cases(m: Any) -> dict[str, list[tuple[str, bytes]]]:
    """Encodings that a strict decoder must reject, beyond the generic ones."""
    (TaskConfiguration, InputShareAad, AggregateShareAad, ReportUploadStatus, UploadErrors,
     VerifyResp, AggregationJobResp, ReportError) = _changed(m)
    empty_info = _task_config(m).encode().replace(b"\x0fmessage vectors", b"\x00", 1)
    md = bytes(_R1) + Time(1).encode()

    def ext(extension_type: int) -> bytes:  # an Extension with empty data
        return extension_type.to_bytes(2, "big") + b"\x00\x00"

    return {
        "ReportMetadata": [
            ("public extensions out of order", md + b"\x00\x08" + ext(2) + ext(1)),
            ("duplicate public extension", md + b"\x00\x08" + ext(2) + ext(2)),
            ("length prefix beyond the end", md + b"\x00\x05" + ext(1)),
        ],
        "PlaintextInputShare": [
            ("empty payload", b"\x00\x00" + b"\x00\x00\x00\x00"),
            ("private extensions out of order",
             b"\x00\x08" + ext(9) + ext(3) + b"\x00\x00\x00\x01\x00"),
        ],
        "HpkeCiphertext": [("empty enc", b"\x01\x00\x00\x00\x00\x00\x01\x00")],
        "HpkeConfigList": [("empty list", b"\x00\x00")],
        "VerifyResp": [
            ("unknown verify_resp_type 3", bytes(_R1) + b"\x03"),
            ("reject with reserved ReportError 0", bytes(_R1) + b"\x02\x00"),
            ("reject with unknown ReportError 12", bytes(_R1) + b"\x02\x0c"),
            ("continue with empty payload", bytes(_R1) + b"\x00\x00\x00\x00\x00"),
        ],
        "Query": [
            ("reserved batch mode 0", b"\x00\x00\x00"),
            ("unknown batch mode 3", b"\x03\x00\x00"),
            ("leader_selected with non-empty config", b"\x02\x00\x01\x00"),
            ("time_interval config too short", b"\x01\x00\x08" + bytes(8)),
        ],
        "BatchSelector": [("leader_selected with empty config", b"\x02\x00\x00")],
        "TaskConfiguration": [
            # task_info<1..2^8-1> in DAP-18; DAP-19 allows it empty (#787).
            *([("empty task_info", empty_info)] if not _decodes(TaskConfiguration, empty_info)
              else []),
            ("non-empty batch_config", _task_config(m).encode().replace(
                bytes.fromhex("01" "0000" "00000004"),
                bytes.fromhex("01" "0001" "00" "00000004"))),
        ],
        "AggregationJobInitReq": [
            ("extensions out of order", b"\x00" + bytes(4) + b"\x00\x08" + ext(2) + ext(1)),
        ],
        "CollectionJobReq": [
            ("extensions out of order (invalidExtension)",
             b"\x02\x00\x00" + bytes(4) + b"\x00\x08" + ext(5) + ext(5)),
        ],
        "ReportUploadStatus": [("reserved ReportError 0", bytes(_R1) + b"\x00")],
    }


def _types(m: Any) -> dict[str, type]:
    return {c.__name__: c for c in (*m.ALL_STRUCTS, *ALL_SCALARS, *VDAF_CONFIGS.values())}






def build_message_file(name: str, profile: Profile) -> dict[str, Any]:
    m = profile.messages
    cls = _types(m)[name]
    valid = message_cases(m)[name]
    invalid = list(invalid_cases(m).get(name, []))
    first = valid[0][1].encode()
    invalid.append(("one trailing byte", first + b"\x00"))
    if first:
        invalid.append(("last byte missing", first[:-1]))
    doc: dict[str, Any] = {
        "kind": "message",
        "format_version": FORMAT_VERSION,
        "draft": profile.draft,
        "message": name,
        "media_type": (
            profile.media_type_for(name) if name in profile.message_types else None
        ),
        "valid": [
            {"description": d, "fields": _value_json(v), "encoding": v.encode().hex()}
            for d, v in valid
        ],
        "invalid": [],
    }
    for d, data in invalid:
        try:
            cls.decode(data)  # type: ignore[attr-defined]
        except DecodeError as exc:
            doc["invalid"].append(
                {"description": d, "encoding": data.hex(), "error": str(exc),
                 "problem_type": exc.problem_type}
            )
        else:  # pragma: no cover - a generator bug
            raise VectorError(f"{name}: invalid case {d!r} decodes")
    if isinstance(valid[0][1], ReportID | TaskID | BatchID | AggregationJobID | CollectionJobID
                  | AggregateShareID):
        for case, (_, v) in zip(doc["valid"], valid, strict=True):
            case["base64url"] = v.to_base64url()
    return doc


# ---------------------------------------------------------------------------------------
# Generate and check
# ---------------------------------------------------------------------------------------








def generate(out_dir: Path, profile: Profile) -> list[Path]:
    """Write every vector file of ``profile`` under ``out_dir``; returns the paths written."""
    written = []
    (out_dir / "messages").mkdir(parents=True, exist_ok=True)
    (out_dir / "examples").mkdir(parents=True, exist_ok=True)
    for name in message_cases(profile.messages):
        path = out_dir / "messages" / f"{name}.json"
        path.write_text(_dump(build_message_file(name, profile)))
        written.append(path)
    for spec in EXAMPLES:
        path = out_dir / "examples" / f"{spec.name}.json"
        path.write_text(_dump(build_example(example_inputs(spec), spec.description, profile)))
        written.append(path)
    return written








def check_message_file(doc: dict[str, Any], report: CheckReport, where: str,
                       profile: Profile) -> None:
    check_message_cases(doc, report, where, _types(profile.messages), profile)






def _example_messages(m: Any) -> ExampleMessages:
    (TaskConfiguration, InputShareAad, AggregateShareAad, ReportUploadStatus, UploadErrors,
     VerifyResp, AggregationJobResp, ReportError) = _changed(m)
    return [
    (lambda d: [d["task"]["task_configuration"]], TaskConfiguration),
    (lambda d: [h["config"] for h in d["hpke"].values()], HpkeConfig),
    (lambda d: list(d["hpke_config_lists"].values()), HpkeConfigList),
    (lambda d: [r["report"] for r in d["upload"]["reports"]], Report),
    (lambda d: [r["input_share_aad"] for r in d["upload"]["reports"]], InputShareAad),
    (lambda d: [r[k] for r in d["upload"]["reports"]
                for k in ("leader_plaintext_input_share", "helper_plaintext_input_share")],
     PlaintextInputShare),
    (lambda d: [d["upload"]["upload_request"]], UploadRequest),
    (lambda d: [r[k] for r in d["aggregation"]["reports"]
                for k in ("leader_outbound", "helper_outbound")], PingPongMessage),
    (lambda d: [d["aggregation"]["aggregation_job_init_req"]], AggregationJobInitReq),
    (lambda d: [d["aggregation"]["aggregation_job_resp"]], AggregationJobResp),
    (lambda d: [d["collection"]["collection_job_req"]], CollectionJobReq),
    (lambda d: [d["collection"]["aggregate_share_req"]], AggregateShareReq),
    (lambda d: [d["collection"]["aggregate_share_aad"]], AggregateShareAad),
    (lambda d: [d["collection"]["aggregate_share"]], AggregateShare),
    (lambda d: [d["collection"]["collection_job_resp"]], CollectionJobResp),
    ]


def check_example_file(doc: dict[str, Any], report: CheckReport, where: str,
                       profile: Profile) -> None:
    # 1. Re-derive everything from the recorded inputs and compare.
    expected = build_example(doc["inputs"], doc.get("description", ""), profile)
    for problem in _diff(expected, doc):
        report.errors.append(f"{where}: {problem}")
    report.checks += 1
    # 2. Every structured message in the file agrees with its encoding, both ways.
    check_example_messages(doc, report, where, _example_messages(profile.messages))
    # 3. Decrypt every ciphertext with the recorded private keys.
    try:
        _decrypt_example(doc, report, where, profile)
    except (HpkeError, ValueError, KeyError, TypeError) as exc:
        report.errors.append(f"{where}: decryption check failed: {type(exc).__name__}: {exc}")


def _decrypt_example(doc: dict[str, Any], report: CheckReport, where: str,
                     profile: Profile) -> None:
    (TaskConfiguration, InputShareAad, AggregateShareAad, ReportUploadStatus, UploadErrors,
     VerifyResp, AggregationJobResp, ReportError) = _changed(profile.messages)
    keys = {
        role: HpkeKeypair(
            HpkeConfig.from_json(entry["config"]["fields"]),
            _unhex(entry["private_key"], "private_key"),
        )
        for role, entry in doc["hpke"].items()
    }
    for i, r in enumerate(doc["upload"]["reports"]):
        report_msg = Report.decode(_unhex(r["report"]["encoding"], "report"))
        share_aad = InputShareAad.decode(_unhex(r["input_share_aad"]["encoding"], "aad"))
        for role, server, ct in (
            ("leader", Role.LEADER, report_msg.leader_encrypted_input_share),
            ("helper", Role.HELPER, report_msg.helper_encrypted_input_share),
        ):
            plaintext = open_input_share(keys[role], server, share_aad, ct, profile=profile)
            if plaintext.encode().hex() != r[f"{role}_plaintext_input_share"]["encoding"]:
                report.errors.append(f"{where}: report {i} {role} share decrypts differently")
            report.checks += 1
    resp = CollectionJobResp.decode(
        _unhex(doc["collection"]["collection_job_resp"]["encoding"], "resp")
    )
    aad = AggregateShareAad.decode(
        _unhex(doc["collection"]["aggregate_share_aad"]["encoding"], "aad")
    )
    for role, server, ct in (
        ("leader", Role.LEADER, resp.leader_encrypted_agg_share),
        ("helper", Role.HELPER, resp.helper_encrypted_agg_share),
    ):
        agg_share = open_aggregate_share(keys["collector"], server, aad, ct, profile=profile)
        if agg_share.hex() != doc["aggregation"][f"{role}_agg_share"]:
            report.errors.append(f"{where}: {role} aggregate share decrypts differently")
        report.checks += 1


