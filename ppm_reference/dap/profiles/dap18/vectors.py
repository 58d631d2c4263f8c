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

What every draft does alike is :mod:`dap.profiles.vector_cases`; this module has the
DAP-18 cases and what DAP-18 does its own way (DAP-19 runs it with its message module).
"""

from __future__ import annotations

from typing import Any

from ppm_reference.dap.codec import DecodeError, Struct
from ppm_reference.dap.hpke import HpkeKeypair
from ppm_reference.dap.profiles.base import Profile
from ppm_reference.dap.profiles.dap18 import messages as messages18
from ppm_reference.dap.profiles.dap18.client import aggregate_share_aad, input_share_aad
from ppm_reference.dap.profiles.dap18.messages import (
    ALL_SCALARS,
    AggregateShareID,
    AggregateShareReq,
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
    Extension,
    HpkeCiphertext,
    Interval,
    LeaderSelectedBatchSelectorConfig,
    PingPongMessage,
    PlaintextInputShare,
    Query,
    Report,
    ReportID,
    ReportMetadata,
    ReportShare,
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
from ppm_reference.dap.profiles.dap18.task import (
    VDAF_CONFIGS,
    Poplar1Config,
    Prio3CountConfig,
    Prio3HistogramConfig,
    Prio3L1BoundSumConfig,
    Prio3MultihotCountVecConfig,
    Prio3SumConfig,
    Prio3SumVecConfig,
    Task,
    decode_vdaf_configuration,
    vdaf_configuration,
)
from ppm_reference.dap.profiles.example_run import ExampleRun
from ppm_reference.dap.profiles.vector_cases import (
    HELPER_URL,
    LEADER_URL,
    DraftVectors,
    ExampleSpec,
)
from ppm_reference.dap.vector_format import ExampleMessages, _hex, _msg, _unhex

SEED = b"ppm-reference dap-18 test vectors"

# ---------------------------------------------------------------------------------------
# Examples: one task, end to end
# ---------------------------------------------------------------------------------------

EXAMPLES = [
    ExampleSpec.prio3_count(
        BatchMode.TIME_INTERVAL, [472222, 472222, 472223],  # in time_precision units
        "Prio3Count, time-interval batch mode, task_interval extension; all HPKE "
        "configs use the mandatory suite X25519/HKDF-SHA256/AES-128-GCM.",
        task_interval=(472000, 1000),
    ),
    ExampleSpec.prio3_histogram(
        BatchMode.LEADER_SELECTED, [472222, 472223, 472223, 472225],
        "Prio3Histogram (length 4, chunk_length 2), leader-selected batch mode; the "
        "Helper uses P-256/HKDF-SHA256/AES-128-GCM and the Collector "
        "X25519/HKDF-SHA256/ChaCha20Poly1305.",
    ),
]


def _job_urls(profile: Profile, base_url: str, task: Any, job: str,
              **job_id: bytes) -> dict[str, str]:
    """Where a job of kind ``job`` is created (``<job>s``) and where it is."""
    return {
        "creation_url": profile.resource_url(f"{job}s", base_url, task_id=task.task_id),
        "url": profile.resource_url(job, base_url, task_id=task.task_id, **job_id),
    }


class Vectors18(DraftVectors):
    """The DAP-18 vectors (and DAP-19's, with its message module)."""

    examples = EXAMPLES
    task_fields = ("task_id", "task_info", "leader_aggregator_endpoint",
                   "helper_aggregator_endpoint", "time_precision", "min_batch_size",
                   "batch_mode", "task_interval")
    input_ids = ("aggregation_job_id", "collection_job_id", "aggregate_share_id")
    verification_key_ids = True
    leader_selected = BatchMode.LEADER_SELECTED
    collection_request = ("collection_job_req", "CollectionJobReq")
    collection_result = ("collection_job_resp", "CollectionJobResp")
    id_types = (ReportID, TaskID, BatchID, AggregationJobID, CollectionJobID,
                AggregateShareID)

    def message_cases(self, m: Any) -> dict[str, list[tuple[str, Any]]]:
        return message_cases(m)

    def invalid_cases(self, m: Any) -> dict[str, list[tuple[str, bytes]]]:
        return invalid_cases(m)

    def types(self, m: Any) -> dict[str, type]:
        return {c.__name__: c for c in (*m.ALL_STRUCTS, *ALL_SCALARS, *VDAF_CONFIGS.values())}

    def task(self, vdaf: Any, task_inputs: dict[str, Any], profile: Profile) -> Any:
        ti = task_inputs["task_interval"]
        return Task.for_vdaf(
            vdaf, **self.task_arguments(task_inputs),
            task_info=_unhex(task_inputs["task_info"], "task_info"),
            batch_mode=BatchMode(task_inputs["batch_mode"]),
            task_interval=Interval(ti["start"], ti["duration"]) if ti else None,
            profile=profile,
        )

    def vdaf_section(self, vdaf: Any, inputs: dict[str, Any], profile: Profile) -> Any:
        vdaf_type, vdaf_config = vdaf_configuration(vdaf, profile)
        _, config_struct = decode_vdaf_configuration(vdaf_type, vdaf_config, profile)
        return {
            "name": inputs["vdaf"]["name"],
            "vdaf_type": vdaf_type,
            "configuration": config_struct.to_json(),
            "vdaf_configuration": _hex(vdaf_config),
        }

    def task_section(self, task: Any, ctx: bytes) -> dict[str, Any]:
        return {
            "task_id_base64url": task.task_id.to_base64url(),
            "task_configuration": _msg(task.configuration()),
            "vdaf_ctx": _hex(ctx),
        }

    def input_share_aad(self, task: Any, report: Any) -> Struct:
        return input_share_aad(task, report.report_metadata, report.public_share)

    def upload_section(self, task: Any, reports: list[Any], upload_reports: list[Any],
                       profile: Profile) -> dict[str, Any]:
        # -- upload (Section 4.4)
        return {
            "url": profile.resource_url("reports", LEADER_URL, task_id=task.task_id),
            "media_type": profile.media_type_for(UploadRequest),
            "reports": upload_reports,
            "upload_request": _msg(UploadRequest(reports)),
        }

    def run(self, task: Any, inputs: dict[str, Any], keys: dict[str, HpkeKeypair],
            reports: list[Any], agg_param: bytes) -> tuple[ExampleRun, Struct]:
        # Each report is its own upload, in the order of the inputs.
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
        run = self.run_core(
            task, inputs, keys,
            uploads=[UploadRequest([report]).encode() for report in reports],
            collection_req=cjr,
            # The Leader draws a leader-selected batch's ID, then its own aggregation job
            # ID (DAP-18 does not send it: we use the Helper's), then the collection job
            # ID; the Helper draws the aggregation job ID and then the aggregate share ID.
            leader_ids=[*([bytes(batch_id)] if batch_id is not None else []), agg_job_id,
                        _unhex(inputs["collection_job_id"], "collection_job_id")],
            helper_ids=[agg_job_id, _unhex(inputs["aggregate_share_id"], "aggregate_share_id")],
            collection_job_id=None,
            # The Aggregators' clock: one time_precision after the last report's time.
            now=(max(times) + 1) * task.time_precision,
        )
        return run, cjr

    def aggregation_urls(self, task: Any, run: ExampleRun, profile: Profile) -> dict[str, Any]:
        # -- aggregation (Section 4.5)
        return _job_urls(profile, HELPER_URL, task, "aggregation_job",
                         aggregation_job_id=AggregationJobID(run.aggregation_job_id))

    def collection_urls(self, task: Any, run: ExampleRun, profile: Profile) -> dict[str, Any]:
        # -- collection (Section 4.6)
        return {
            **_job_urls(profile, LEADER_URL, task, "collection_job",
                        collection_job_id=CollectionJobID(run.collection_job_id)),
            "aggregate_share_url": profile.resource_url(
                "aggregate_share", HELPER_URL, task_id=task.task_id,
                aggregate_share_id=AggregateShareID(run.aggregate_share_id),
            ),
        }

    def aggregate_share_aad(self, task: Any, request: Any, run: ExampleRun,
                            agg_param: bytes) -> Struct:
        return aggregate_share_aad(task, request)

    def more_example_messages(self, m: Any) -> ExampleMessages:
        return [
            (lambda d: [d["task"]["task_configuration"]], m.TaskConfiguration),
            (lambda d: [d["upload"]["upload_request"]], UploadRequest),
        ]


VECTORS = Vectors18(SEED)
derive = VECTORS.derive


# ---------------------------------------------------------------------------------------
# Message vectors
# ---------------------------------------------------------------------------------------

_R1, _R2, _TASK_ID, _BATCH_ID = VECTORS.sample_ids(messages18)


def _changed(m: Any) -> tuple[Any, ...]:
    """The message classes a later draft built on DAP-18 redefines (DAP-19: the ones
    carrying a ReportError or the TaskConfiguration), from the draft's message module."""
    return (m.TaskConfiguration, m.InputShareAad, m.AggregateShareAad, m.ReportUploadStatus,
            m.UploadErrors, m.VerifyResp, m.AggregationJobResp, m.ReportError)


def _ct(i: int) -> HpkeCiphertext:
    return VECTORS.ciphertext(messages18, i)  # type: ignore[no-any-return]


def _task_config(m: Any) -> Any:
    from ppm_reference.dap.profiles.dap18.task import build_task_configuration

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
        "AggregateShareID": [("16-byte ID", AggregateShareID(derive("messages/as", 16)))],
        "Time": [("Time 123456789", Time(123456789)), ("max uint64", Time(2**64 - 1))],
        "Duration": [("Duration 11", Duration(11))],
        "Interval": [("an interval", Interval(472222, 2))],
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
        **VECTORS.aggregation_step_cases(m, VerifyResp, VerifyResp.finish,
                                         ReportError.VDAF_VERIFY_ERROR, VerifyContinue),
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
        "AggregateShareAad": [("aad", AggregateShareAad(_TASK_ID, _task_config(m), cjr_ti))],
        # Appendix B: vdaf_configuration encodings.
        "Prio3CountConfig": [("Empty", Prio3CountConfig())],
        "Prio3SumConfig": [("max_measurement 255", Prio3SumConfig(255))],
        "Prio3SumVecConfig": [("length 10, max 3, chunk 4", Prio3SumVecConfig(10, 3, 4))],
        "Prio3HistogramConfig": [("length 4, chunk 2", Prio3HistogramConfig(4, 2))],
        "Prio3MultihotCountVecConfig": [
            ("length 10, chunk 4, max_weight 3", Prio3MultihotCountVecConfig(10, 4, 3))
        ],
        # draft-ietf-ppm-l1-bound-sum-02 Section 4 (its published vector's parameters).
        "Prio3L1BoundSumConfig": [
            ("length 10, max_value 240, chunk 9", Prio3L1BoundSumConfig(10, 240, 9))
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

