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

What every draft does alike is :mod:`dap.profiles.vector_cases`; this module has the
DAP-09 cases and what DAP-09 does its own way.
"""

from __future__ import annotations

from typing import Any

from ppm_reference.dap.codec import Struct
from ppm_reference.dap.hpke import HpkeKeypair
from ppm_reference.dap.profiles.base import Profile
from ppm_reference.dap.profiles.dap09 import messages as messages09
from ppm_reference.dap.profiles.dap09.messages import (
    ALL_SCALARS,
    ALL_STRUCTS,
    AggregateShareAad,
    AggregateShareReq,
    AggregationJobID,
    AggregationJobInitReq,
    BatchID,
    BatchSelector,
    Collection,
    CollectionJobID,
    CollectionReq,
    Duration,
    Extension,
    FixedSizeQuery,
    HpkeCiphertext,
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
    TaskID,
    Time,
    batch_checksum,
)
from ppm_reference.dap.profiles.dap09.task import Task09
from ppm_reference.dap.profiles.example_run import ExampleRun
from ppm_reference.dap.profiles.vector_cases import (
    HELPER_URL,
    LEADER_URL,
    DraftVectors,
    ExampleSpec,
)
from ppm_reference.dap.vector_format import _hex, _unhex

SEED = b"ppm-reference dap-09 test vectors"

# ---------------------------------------------------------------------------------------
# Examples
# ---------------------------------------------------------------------------------------

EXAMPLES = [
    ExampleSpec.prio3_count(
        QueryType.TIME_INTERVAL,
        [1_700_000_000, 1_700_000_100, 1_700_003_700],  # POSIX seconds (rounded down)
        "DAP-09 with VDAF-08 Prio3Count, time_interval query; all HPKE configs use "
        "X25519/HKDF-SHA256/AES-128-GCM.",
    ),
    ExampleSpec.prio3_histogram(
        QueryType.FIXED_SIZE, [1_700_000_000, 1_700_000_001, 1_700_000_002, 1_700_000_003],
        "DAP-09 with VDAF-08 Prio3Histogram (length 4, chunk_length 2), fixed_size "
        "query (current_batch); the Helper uses P-256/HKDF-SHA256/AES-128-GCM and the "
        "Collector X25519/HKDF-SHA256/ChaCha20Poly1305.",
    ),
]


class Vectors09(DraftVectors):
    """The DAP-09 vectors: a task without task_info or extensions, one report per upload,
    the Collector names the collection job, and the ``Collection`` it gets back."""

    examples = EXAMPLES
    task_fields = ("task_id", "leader_aggregator_endpoint", "helper_aggregator_endpoint",
                   "query_type", "time_precision", "min_batch_size")
    batch_mode_field = "query_type"
    input_ids = ("aggregation_job_id", "collection_job_id")
    verification_key_ids = False
    leader_selected = QueryType.FIXED_SIZE
    verifier_terms = ("prep_share", "prep_msg")
    collection_request = ("collection_req", "CollectionReq")
    collection_result = ("collection", "Collection")
    id_types = (ReportID, TaskID, BatchID, AggregationJobID, CollectionJobID)

    def message_cases(self, m: Any) -> dict[str, list[tuple[str, Any]]]:
        return message_cases(m)

    def invalid_cases(self, m: Any) -> dict[str, list[tuple[str, bytes]]]:
        return invalid_cases()

    def types(self, m: Any) -> dict[str, type]:
        return _TYPES

    def task(self, vdaf: Any, task_inputs: dict[str, Any], profile: Profile) -> Any:
        return Task09.for_vdaf(vdaf, **self.task_arguments(task_inputs),
                               query_type=QueryType(task_inputs["query_type"]),
                               profile=profile)

    def vdaf_section(self, vdaf: Any, inputs: dict[str, Any], profile: Profile) -> Any:
        return {"name": vdaf.NAME, "vdaf_id": vdaf.ID}

    def task_section(self, task: Any, ctx: bytes) -> dict[str, Any]:
        return {"task_id_base64url": task.task_id.to_base64url(), "vdaf_ctx": _hex(ctx)}

    def input_share_aad(self, task: Any, report: Any) -> Struct:
        return task.input_share_aad(report.report_metadata,  # type: ignore[no-any-return]
                                    report.public_share)

    def upload_section(self, task: Any, reports: list[Any], upload_reports: list[Any],
                       profile: Profile) -> dict[str, Any]:
        # -- upload (Section 4.4.2)
        method, resource = profile.request("upload")
        return {
            "method": method,
            "url": profile.resource_url(resource, LEADER_URL, task_id=task.task_id),
            "media_type": profile.media_type_for(Report),
            "reports": upload_reports,
        }

    def run(self, task: Any, inputs: dict[str, Any], keys: dict[str, HpkeKeypair],
            reports: list[Any], agg_param: bytes) -> tuple[ExampleRun, Struct]:
        # Each report is its own upload (DAP-09 has one report per request), in the
        # order of the inputs.
        tp = task.time_precision
        times = [int(r.report_metadata.time) for r in reports]
        start = min(times) - min(times) % tp
        end = max(times) - max(times) % tp + tp
        interval = Interval(start, end - start)  # multiples of time_precision (4.6.1)
        batch_id = None
        if task.query_type == QueryType.FIXED_SIZE:
            batch_id = BatchID(_unhex(inputs["batch_id"], "batch_id"))
            query = Query.fixed_size(FixedSizeQuery.current_batch())
        else:
            query = Query.time_interval(interval)
        collection_req = CollectionReq(query, agg_param)
        collection_job_id = _unhex(inputs["collection_job_id"], "collection_job_id")
        run = self.run_core(
            task, inputs, keys, uploads=[report.encode() for report in reports],
            collection_req=collection_req,
            # The Leader draws a fixed_size batch's ID, then the aggregation job ID (it
            # names the job: PUT); the Collector names the collection job (PUT). The
            # Helper draws only the ID of its aggregate share job, which DAP-09 never
            # sends: we give it the collection job's.
            leader_ids=[*([bytes(batch_id)] if batch_id is not None else []),
                        _unhex(inputs["aggregation_job_id"], "aggregation_job_id")],
            helper_ids=[collection_job_id], collection_job_id=collection_job_id,
            now=max(times) + tp,  # the Aggregators' clock: one time_precision later
        )
        return run, collection_req

    def aggregation_urls(self, task: Any, run: ExampleRun, profile: Profile) -> dict[str, Any]:
        # -- aggregation (Section 4.5)
        method, resource = profile.request("aggregation_job_init")
        return {
            "method": method,
            "url": profile.resource_url(resource, HELPER_URL, task_id=task.task_id,
                                        aggregation_job_id=AggregationJobID(
                                            run.aggregation_job_id)),
            "media_type": profile.media_type_for(AggregationJobInitReq),
        }

    def collection_urls(self, task: Any, run: ExampleRun, profile: Profile) -> dict[str, Any]:
        # -- collection (Section 4.6)
        method, resource = profile.request("collection_job_create")
        share_method, share_resource = profile.request("aggregate_share_create")
        return {
            "method": method,
            "url": profile.resource_url(resource, LEADER_URL, task_id=task.task_id,
                                        collection_job_id=CollectionJobID(run.collection_job_id)),
            "poll_method": profile.request("collection_job_poll")[0],
            "aggregate_share_method": share_method,
            "aggregate_share_url": profile.resource_url(share_resource, HELPER_URL,
                                                        task_id=task.task_id),
        }

    def aggregate_share_aad(self, task: Any, request: Any, run: ExampleRun,
                            agg_param: bytes) -> Struct:
        share_req = AggregateShareReq.decode(run.aggregate_share_req)
        return task.aggregate_share_aad(  # type: ignore[no-any-return]
            agg_param, share_req.batch_selector)


VECTORS = Vectors09(SEED)
derive = VECTORS.derive


# ---------------------------------------------------------------------------------------
# Message vectors
# ---------------------------------------------------------------------------------------

_R1, _R2, _TASK_ID, _BATCH_ID = VECTORS.sample_ids(messages09)
_IV = Interval(1_700_000_000 - 1_700_000_000 % 3600, 3600)


def _ct(i: int) -> HpkeCiphertext:
    return VECTORS.ciphertext(messages09, i)  # type: ignore[no-any-return]


def message_cases(m: Any) -> dict[str, list[tuple[str, Any]]]:
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
        "Time": [("1700000000 seconds", Time(1_700_000_000)), ("max uint64", Time(2**64 - 1))],
        "Duration": [("one hour", Duration(3600))],
        "Interval": [("one hour", _IV)],
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
        **VECTORS.aggregation_step_cases(m, PrepareResp, PrepareResp.finished,
                                         PrepareError.VDAF_PREP_ERROR, PrepareContinue),
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

__all__ = ["EXAMPLES", "SEED", "VECTORS", "Vectors09", "derive", "invalid_cases", "message_cases"]
