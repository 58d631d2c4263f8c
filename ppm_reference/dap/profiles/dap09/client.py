"""DAP-09 Client, Aggregator-share and Collector computations, as pure functions.

The DAP-09 counterpart of :mod:`dap.profiles.dap18.client`, for a
:class:`dap.profiles.dap09.task.Task09`:

* HPKE with DAP-09's info strings (from the profile) and associated data
  (Sections 4.4.2, 4.5.1.3, 4.6.4): :func:`seal_input_share`, :func:`open_input_share`,
  :func:`seal_aggregate_share`, :func:`open_aggregate_share`;
* Client (Section 4.4.2): measurement -> VDAF-08 ``shard`` with the report ID as nonce
  (and no application context) -> ``PlaintextInputShare`` -> ``SealBase`` to each
  Aggregator -> ``Report``: :func:`generate_report`;
* Aggregators: :func:`decrypt_input_share` (Section 4.5.1.3, including the duplicate
  extension check of Section 4.5.1.4) and :func:`encrypt_aggregate_share` (4.6.4);
* Collector (Sections 4.6.3, 4.6.4): ``Collection`` -> ``OpenBase`` of both aggregate
  shares with the ``BatchSelector`` derived from the query -> ``unshard``:
  :func:`collect_result`.

Randomness is explicit: ``report_id`` and ``rand`` are parameters, drawn from the OS
CSPRNG when omitted; ``ephemeral_ikm(s)`` make HPKE deterministic for TEST VECTORS ONLY.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppm_reference.dap import hpke, sharding
from ppm_reference.dap.codec import DecodeError
from ppm_reference.dap.hpke import HpkeError, HpkeKeypair
from ppm_reference.dap.profiles.base import Profile
from ppm_reference.dap.profiles.dap09.messages import (
    AggregateShareAad,
    BatchSelector,
    Collection,
    CollectionReq,
    Extension,
    HpkeCiphertext,
    HpkeConfig,
    InputShareAad,
    Interval,
    PlaintextInputShare,
    PrepareError,
    Report,
    ReportID,
    ReportMetadata,
    ReportShare,
    Role,
    has_duplicate_extension_types,
)
from ppm_reference.dap.profiles.dap09.task import Task09, vdaf_parameters_of
from ppm_reference.dap.sharding import ShardedReport

# ---------------------------------------------------------------------------------------
# HPKE with DAP-09 info strings and AADs
# ---------------------------------------------------------------------------------------


def seal_input_share(
    config: HpkeConfig,
    server_role: Role,
    aad: InputShareAad,
    plaintext: PlaintextInputShare,
    *,
    profile: Profile,
    ephemeral_ikm: bytes | None = None,
) -> HpkeCiphertext:
    """Section 4.4.2::

        enc, payload = SealBase(pk, "dap-09 input share" || 0x01 || server_role,
                                input_share_aad, plaintext_input_share)
    """
    return hpke.seal_input_share(config, server_role, aad, plaintext, profile=profile,
                                 ephemeral_ikm=ephemeral_ikm)


def open_input_share(
    keypair: HpkeKeypair,
    server_role: Role,
    aad: InputShareAad,
    ciphertext: HpkeCiphertext,
    *,
    profile: Profile,
) -> PlaintextInputShare:
    """Section 4.5.1.3. Raises :class:`dap.hpke.HpkeError` if decryption fails
    (``hpke_decrypt_error``) and :class:`dap.codec.DecodeError` if the plaintext is not a
    ``PlaintextInputShare`` (``invalid_message``)."""
    return PlaintextInputShare.decode(
        hpke.open_input_share_bytes(keypair, server_role, aad, ciphertext, profile=profile))


def seal_aggregate_share(
    config: HpkeConfig,
    server_role: Role,
    aad: AggregateShareAad,
    agg_share: bytes,
    *,
    profile: Profile,
    ephemeral_ikm: bytes | None = None,
) -> HpkeCiphertext:
    """Section 4.6.4::

        enc, payload = SealBase(pk, "dap-09 aggregate share" || server_role || 0x00,
                                agg_share_aad, agg_share)
    """
    return hpke.seal_aggregate_share(config, server_role, aad, agg_share, profile=profile,
                                     ephemeral_ikm=ephemeral_ikm)


def open_aggregate_share(
    keypair: HpkeKeypair,
    server_role: Role,
    aad: AggregateShareAad,
    ciphertext: HpkeCiphertext,
    *,
    profile: Profile,
) -> bytes:
    """Section 4.6.4, the Collector's side."""
    return hpke.open_aggregate_share(keypair, server_role, aad, ciphertext, profile=profile)


class Client09Error(ValueError):
    """A report or a collection result cannot be produced from these inputs."""


def _task_vdaf(task: Task09, vdaf: Any | None) -> Any:
    if vdaf is None:
        return task.vdaf()
    expected = task.vdaf()
    if type(vdaf) is not type(expected) or vdaf_parameters_of(vdaf) != dict(
        task.vdaf_parameters
    ):
        raise Client09Error(f"the VDAF {vdaf!r} is not the task's {task.vdaf_name}")
    return vdaf


def shard(task: Any, vdaf: Any, measurement: Any, report_id: bytes,
          rand: bytes) -> ShardedReport:
    """``Vdaf.shard(measurement, report_id, rand)`` (VDAF-08: ``ctx`` is empty), encoded."""
    return sharding.shard(task, vdaf, measurement, report_id, rand, Client09Error)


def generate_report(task: Task09, measurement: Any, *, time: int,
                    leader_hpke_config: HpkeConfig, helper_hpke_config: HpkeConfig,
                    vdaf: Any | None = None, report_id: bytes | None = None,
                    rand: bytes | None = None, leader_extensions: Sequence[Extension] = (),
                    helper_extensions: Sequence[Extension] = (),
                    ephemeral_ikms: tuple[bytes, bytes] | None = None) -> Report:
    """A ``Report`` for ``measurement`` (Section 4.4.2).

    ``time`` is in POSIX seconds and is rounded down to the task's ``time_precision``.
    A Client whose time is past ``task_expiration`` may opt out of the task; we refuse.
    """
    vdaf = _task_vdaf(task, vdaf)
    report_id = ReportID(report_id if report_id is not None else os.urandom(16))
    rand = rand if rand is not None else os.urandom(vdaf.RAND_SIZE)
    t = task.round_time(time)
    if task.task_expiration is not None and t > task.task_expiration:
        raise Client09Error(f"time {int(t)} is past the task expiration {task.task_expiration}")
    for who, exts in (("leader", leader_extensions), ("helper", helper_extensions)):
        if has_duplicate_extension_types(exts):
            raise Client09Error(f"duplicate extension types for the {who}")

    sharded = shard(task, vdaf, measurement, report_id, rand)
    metadata = ReportMetadata(report_id=report_id, time=t)
    aad = task.input_share_aad(metadata, sharded.public_share)
    ikms: tuple[bytes | None, bytes | None] = (
        ephemeral_ikms if ephemeral_ikms is not None else (None, None)
    )
    ciphertexts = [
        seal_input_share(
            config, role, aad, PlaintextInputShare(exts, share),
            profile=task.profile, ephemeral_ikm=ikm,
        )
        for role, config, exts, share, ikm in (
            (Role.LEADER, leader_hpke_config, leader_extensions, sharded.input_shares[0],
             ikms[0]),
            (Role.HELPER, helper_hpke_config, helper_extensions, sharded.input_shares[1],
             ikms[1]),
        )
    ]
    return Report(metadata, sharded.public_share, ciphertexts[0], ciphertexts[1])


# ---------------------------------------------------------------------------------------
# Aggregators (Sections 4.5.1.3, 4.5.1.4, 4.6.4)
# ---------------------------------------------------------------------------------------


class InputShareRejected(Exception):
    """An input share the Aggregator marks invalid, with the ``PrepareError`` to send."""

    def __init__(self, error: PrepareError, reason: str) -> None:
        super().__init__(f"{error.name.lower()}: {reason}")
        self.error = error
        self.reason = reason


def report_share_for(report: Report, server_role: Role) -> ReportShare:
    """The ``ReportShare`` of one Aggregator (Section 4.5.1.1)."""
    if server_role == Role.LEADER:
        ct = report.leader_encrypted_input_share
    elif server_role == Role.HELPER:
        ct = report.helper_encrypted_input_share
    else:
        raise ValueError(f"not an Aggregator role: {server_role!r}")
    return ReportShare(report.report_metadata, report.public_share, ct)


def decrypt_input_share(
    task: Task09,
    keypairs: Sequence[HpkeKeypair],
    server_role: Role,
    report_share: ReportShare,
    *,
    known_extensions: frozenset[int] = frozenset(),
) -> PlaintextInputShare:
    """Decrypt and check an Aggregator's input share (Sections 4.5.1.3, 4.5.1.4).

    Raises :class:`InputShareRejected` with ``hpke_unknown_config_id`` (no key pair has
    the ciphertext's config ID), ``hpke_decrypt_error`` (decryption failed) or
    ``invalid_message`` (plaintext not a ``PlaintextInputShare``, unknown or duplicate
    extension types). The VDAF decoding check is left to the preparation step."""
    ct = report_share.encrypted_input_share
    keypair = next((k for k in keypairs if k.config.id == ct.config_id), None)
    if keypair is None:
        raise InputShareRejected(PrepareError.HPKE_UNKNOWN_CONFIG_ID,
                                 f"no HPKE config {ct.config_id}")
    aad = task.input_share_aad(report_share.report_metadata, report_share.public_share)
    try:
        plaintext = open_input_share(keypair, server_role, aad, ct, profile=task.profile)
    except HpkeError as exc:
        raise InputShareRejected(PrepareError.HPKE_DECRYPT_ERROR, str(exc)) from None
    except DecodeError as exc:
        raise InputShareRejected(PrepareError.INVALID_MESSAGE, str(exc)) from None
    if has_duplicate_extension_types(plaintext.extensions):
        raise InputShareRejected(PrepareError.INVALID_MESSAGE, "duplicate extension types")
    unknown = sorted({int(e.extension_type) for e in plaintext.extensions} - known_extensions)
    if unknown:
        raise InputShareRejected(PrepareError.INVALID_MESSAGE,
                                 f"unrecognized extensions {unknown}")
    return plaintext


def encrypt_aggregate_share(
    task: Task09,
    collector_hpke_config: HpkeConfig,
    server_role: Role,
    agg_param: bytes,
    batch_selector: BatchSelector,
    agg_share: bytes,
    *,
    ephemeral_ikm: bytes | None = None,
) -> HpkeCiphertext:
    """An Aggregator's encryption of its encoded aggregate share (Section 4.6.4)."""
    aad = task.aggregate_share_aad(agg_param, batch_selector)
    return seal_aggregate_share(collector_hpke_config, server_role, aad, agg_share,
                                profile=task.profile, ephemeral_ikm=ephemeral_ikm)


# ---------------------------------------------------------------------------------------
# Collector (Sections 4.6.3, 4.6.4)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CollectionResult09:
    """What the Collector learns from a collection job."""

    report_count: int
    interval: Interval
    batch_selector: BatchSelector
    aggregate_result: Any

    @property
    def batch_id(self) -> bytes | None:
        """The batch ID of a fixed_size collection, else None."""
        bid = self.batch_selector.batch_id
        return bytes(bid) if bid is not None else None


def decrypt_aggregate_shares(
    task: Task09,
    collector_keypair: HpkeKeypair,
    collection_req: CollectionReq,
    collection: Collection,
) -> tuple[bytes, bytes]:
    """The Leader's and the Helper's encoded aggregate shares. The ``BatchSelector`` in
    the AAD is the query's batch interval (time_interval) or the batch ID the Leader
    sent in ``Collection.part_batch_selector`` (fixed_size)."""
    try:
        selector = collection.batch_selector(collection_req.query)
    except ValueError as exc:
        raise Client09Error(str(exc)) from None
    return sharding.open_aggregate_shares(
        task, collector_keypair, task.aggregate_share_aad(collection_req.agg_param, selector),
        collection.leader_encrypted_agg_share, collection.helper_encrypted_agg_share)


def collect_result(task: Task09, collector_keypair: HpkeKeypair, collection_req: CollectionReq,
                   collection: Collection, *, vdaf: Any | None = None) -> CollectionResult09:
    """The Collector's result of a DAP-09 collection (Section 4.6.3): both aggregate
    shares opened with the ``BatchSelector`` of the collection in the AAD, then unsharded
    with the report count of the ``Collection``."""
    vdaf = _task_vdaf(task, vdaf)
    leader, helper = decrypt_aggregate_shares(task, collector_keypair, collection_req,
                                              collection)
    selector = collection.batch_selector(collection_req.query)
    result = sharding.unshard(vdaf, collection_req.agg_param, (leader, helper),
                              collection.report_count, Client09Error)
    return CollectionResult09(collection.report_count, collection.interval, selector, result)


__all__ = [
    "Client09Error",
    "CollectionResult09",
    "InputShareRejected",
    "ShardedReport",
    "collect_result",
    "decrypt_aggregate_shares",
    "decrypt_input_share",
    "encrypt_aggregate_share",
    "generate_report",
    "open_aggregate_share",
    "open_input_share",
    "report_share_for",
    "seal_aggregate_share",
    "seal_input_share",
    "shard",
]
