"""The protocol core's view of a profile's wire messages.

The Leader and Helper logic (`dap.core.leader`, `dap.core.helper`) is written once; what
differs between drafts on the wire is behind the small interface :class:`Wire` defined
here, which each profile implements in its package (``dap/profiles/<draft>/wire.py``) and
hands out as ``profile.wire``. What the drafts implemented so far differ in:

* message shapes: DAP-18 `VerifyInit` / `VerifyResp` / `CollectionJobReq` against DAP-09
  `PrepareInit` / `PrepareResp` / `CollectionReq`, the batch ID of an aggregation job in an
  extension (DAP-18 Section 5.2.2) or a `PartialBatchSelector` (DAP-09 Section 4.5.1.1);
* time: DAP-18 counts report times and intervals in `time_precision` units (Section
  4.1.1), DAP-09 in seconds. The core always works in units (batch buckets are one unit
  wide); a DAP-09 report at second `t` is in unit `t // time_precision`, and a DAP-09
  batch interval must be a whole number of units (DAP-09 Section 4.6.5.1.1, boundary
  check) so it converts exactly;
* report errors: the core uses `dap.common.ReportError` (every draft's errors by name);
  each wire translates them to its draft's enumeration and back with an
  :class:`ErrorTranslation`, by name and never by casting the number: DAP-18's
  `task_expired(7)` is DAP-19's `invalid_message(7)`. Errors a draft lacks are written
  as the nearest one it has (DAP-19 deleted `task_expired`, `task_not_started` and
  `outdated_config` for `report_dropped` and `hpke_unknown_config_id`);
* HPKE associated data: DAP-18 binds the `TaskConfiguration` and the `CollectionJobReq`,
  DAP-09 the task ID, report metadata and the `BatchSelector` (DAP-09 Sections 4.4.2,
  4.6.4);
* upload results: DAP-18 answers a batch of reports with `UploadErrors`; DAP-09 takes one
  report per request and answers errors with problem documents (Section 4.4.2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ppm_reference.dap.codec import DecodeError
from ppm_reference.dap.common import (
    BatchMode,
    HpkeCiphertext,
    Interval,
    ReportError,
    ReportID,
    Role,
    VerifyRespType,
)
from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.hpke import HpkeKeypair


@dataclass
class InitItem:
    """One report of an aggregation job initialization request."""

    metadata: Any                   # the profile's ReportMetadata (bound into the AAD)
    report_id: bytes
    time: int                       # in time_precision units
    public_share: bytes
    ciphertext: HpkeCiphertext
    payload: bytes                  # the Leader's first ping-pong message


@dataclass
class InitReq:
    agg_param: bytes
    batch_id: bytes | None
    verification_key_id: int
    items: list[InitItem]


@dataclass
class Resp:
    """A per-report response (`VerifyResp` / `PrepareResp`)."""

    report_id: bytes
    kind: VerifyRespType
    payload: bytes | None = None
    error: ReportError | None = None


@dataclass
class CollReq:
    """A collection request (`CollectionJobReq` / `CollectionReq`), times in units.

    `batch_id` is set for a DAP-09 `by_batch_id` query; `cjr` is the DAP-18
    `CollectionJobReq` (bound into DAP-18's AggregateShareAad)."""

    agg_param: bytes
    batch_mode: BatchMode
    interval: Interval | None = None
    batch_id: bytes | None = None
    cjr: Any = None


@dataclass
class ShareReq:
    """An `AggregateShareReq`, times in units."""

    coll: CollReq
    interval: Interval | None       # the batch selector's interval (time-interval)
    batch_id: bytes | None          # the batch selector's batch ID (leader-selected)
    report_count: int
    checksum: bytes


@dataclass(frozen=True)
class ErrorTranslation:
    """How one draft writes the core's :class:`ReportError` on the wire and reads it back.

    Built by name (:meth:`by_name`): a core error is written as the wire member of the
    same name unless ``substitutes`` names another, and a wire member is read as the core
    error of the same name unless ``read_as`` names another."""

    to_wire: Mapping[ReportError, IntEnum]
    from_wire: Mapping[int, ReportError]

    @classmethod
    def by_name(cls, wire_enum: type[IntEnum], *,
                substitutes: Mapping[ReportError, str] | None = None,
                read_as: Mapping[str, ReportError] | None = None) -> ErrorTranslation:
        subs = dict(substitutes or {})
        reads = dict(read_as or {})
        to_wire = {e: wire_enum[subs.get(e, e.name)] for e in ReportError}
        from_wire = {int(w): reads.get(w.name) or ReportError[w.name] for w in wire_enum}
        return cls(to_wire, from_wire)

    def encode(self, error: ReportError) -> IntEnum:
        return self.to_wire[ReportError(error)]

    def decode(self, code: int) -> ReportError:
        """The core's error for a decoded wire value (the decoder has already refused
        values the draft does not declare)."""
        return self.from_wire[int(code)]


class Wire:
    """What the core needs from a profile's messages. Decoders raise `DapProblem`."""

    # The draft's message module (``dap.profiles.<draft>.messages``).
    m: Any
    # The draft's per-report error codes (see ErrorTranslation).
    errors: ErrorTranslation
    # Whether a Helper rejects each report of a job whose verification_key_id it does not
    # know (DAP-19 #784) rather than failing the job with invalidMessage.
    unknown_key_per_report: bool = False
    # The report error of an unrecognized report extension, and whether the Leader's
    # upload refuses such a report alone (DAP-19 #789) rather than the whole request
    # with unsupportedExtension.
    extension_error: ReportError = ReportError.INVALID_MESSAGE
    extension_errors_per_report: bool = False
    # Whether the Collector's encrypted aggregate shares are bound to the collection
    # request (DAP-18: the CollectionJobReq is in the AggregateShareAad, Section 4.6.7),
    # so that a released result answers only a byte-identical request; DAP-09 binds the
    # batch selector (Section 4.6.4), so a `by_batch_id` query gets the result that a
    # `current_batch` query released for that batch.
    result_bound_to_request: bool = True

    report_cls: Any

    def upload_answer(self, task: Any, errors: Sequence[tuple[bytes, ReportError]]
                      ) -> bytes | None:
        """The body answering an upload (None: no body), or a raised `DapProblem`."""
        raise NotImplementedError

    # -- reports and time ---------------------------------------------------------------
    def decode_report(self, body: bytes) -> Any:
        return self.report_cls.decode(body)

    def encode_report(self, report: Any) -> bytes:
        """A report's encoding, as the Leader stores it (a profile may return the bytes
        the report was decoded from instead of encoding it again)."""
        return bytes(report.encode())

    def decode_upload(self, body: bytes) -> list[Any]:
        """The reports of an upload request. Raises `DecodeError`."""
        raise NotImplementedError

    def report_time(self, task: Any, metadata: Any) -> int:
        raise NotImplementedError

    def time_error(self, task: Any, metadata: Any, now: float, clock_skew: int,
                   check_too_early: bool = True) -> ReportError | None:
        raise NotImplementedError

    def public_extensions(self, metadata: Any) -> list[tuple[int, bytes]]:
        """The report's public extensions as (type, data) (none before DAP-18)."""
        return []

    def public_extension_types(self, metadata: Any) -> list[int]:
        return [t for t, _ in self.public_extensions(metadata)]

    def open_input_share(self, task: Any, keypair: HpkeKeypair, role: Role, metadata: Any,
                         public_share: bytes, ciphertext: HpkeCiphertext
                         ) -> tuple[bytes, list[tuple[int, bytes]]]:
        """Decrypt an input share: (VDAF input share, private extensions as (type,
        data)). Raises `HpkeError` or `DecodeError`."""
        raise NotImplementedError

    # -- aggregation --------------------------------------------------------------------
    def encode_init_req(self, task: Any, agg_param: bytes, batch_id: bytes | None,
                        items: Sequence[tuple[Any, bytes]],
                        verification_key_id: int = 0) -> bytes:
        raise NotImplementedError

    def decode_init_req(self, task: Any, body: bytes) -> InitReq:
        raise NotImplementedError

    def encode_job_resp(self, resps: Sequence[Resp]) -> bytes:
        raise NotImplementedError

    def decode_job_resp(self, body: bytes) -> list[Resp]:
        """Raises `DecodeError`."""
        raise NotImplementedError

    # The continuation request has the same shape in both drafts: (step, [(id, msg)]).
    continue_req_cls: Any
    continue_item_cls: Any

    def encode_continue_req(self, step: int, items: Sequence[tuple[bytes, bytes]]) -> bytes:
        return bytes(self.continue_req_cls(step, tuple(
            self.continue_item_cls(ReportID(rid), payload)
            for rid, payload in items)).encode())

    def decode_continue_req(self, task: Any, body: bytes) -> tuple[int, list[tuple[bytes,
                                                                                  bytes]]]:
        try:
            req = self.continue_req_cls.decode(body)
        except DecodeError as exc:
            raise invalid_message(task, exc) from None
        items = req.verify_continues if hasattr(req, "verify_continues") \
            else req.prepare_continues
        return int(req.step), [(bytes(c.report_id), bytes(c.payload)) for c in items]

    # -- collection ---------------------------------------------------------------------
    def decode_collection_req(self, task: Any, body: bytes) -> CollReq:
        raise NotImplementedError

    def encode_share_req(self, task: Any, coll: CollReq, interval: Interval | None,
                         batch_id: bytes | None, report_count: int, checksum: bytes) -> bytes:
        raise NotImplementedError

    def decode_share_req(self, task: Any, body: bytes) -> ShareReq:
        raise NotImplementedError

    def encrypt_agg_share(self, task: Any, role: Role, coll: CollReq,
                          interval: Interval | None, batch_id: bytes | None,
                          encoded: bytes, *, ephemeral_ikm: bytes | None = None
                          ) -> HpkeCiphertext:
        """Encrypt an aggregate share to the Collector. HPKE draws a fresh ephemeral key
        from the OS CSPRNG; ``ephemeral_ikm`` derives it instead and is FOR TEST VECTORS
        ONLY (see :func:`dap.hpke.seal_base_deterministic`): the servers never pass it."""
        raise NotImplementedError

    def encode_agg_share(self, ciphertext: HpkeCiphertext) -> bytes:
        """``AggregateShare`` (DAP-18 Section 4.6.4, DAP-09 Section 4.6.3)."""
        return bytes(self.m.AggregateShare(ciphertext).encode())

    def decode_agg_share(self, body: bytes) -> HpkeCiphertext:
        """Raises `DecodeError`."""
        ct: HpkeCiphertext = self.m.AggregateShare.decode(body).encrypted_aggregate_share
        return ct

    def encode_collection(self, task: Any, coll: CollReq, batch_id: bytes | None,
                          report_count: int, interval: Interval, leader: HpkeCiphertext,
                          helper: HpkeCiphertext) -> bytes:
        raise NotImplementedError


def invalid_message(task: Any, exc: Exception, token: str = "invalidMessage") -> DapProblem:
    return DapProblem(token, str(exc), task_id=task.task_id)
