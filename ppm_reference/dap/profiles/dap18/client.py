"""The Client's and the Collector's computations, as pure functions without I/O.

Client (DAP-18 Section 4.4.2.1): measurement -> ``Vdaf.shard`` -> ``PlaintextInputShare``
-> HPKE ``SealBase`` to each Aggregator -> ``Report``.

Collector (Sections 4.6.6, 4.6.7): ``CollectionJobResp`` -> HPKE ``OpenBase`` of both
aggregate shares -> ``Vdaf.unshard``.

Randomness is explicit: ``report_id`` and ``rand`` are parameters (drawn from the OS
CSPRNG when omitted). HPKE draws its own ephemeral keys, except when test vectors pass
``ephemeral_ikms``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppm_reference.dap import sharding
from ppm_reference.dap.common import (
    Extension,
    HpkeCiphertext,
    HpkeConfig,
    Interval,
    ReportID,
    Role,
    Time,
)
from ppm_reference.dap.hpke import (
    HpkeKeypair,
    open_input_share_bytes,
    seal_aggregate_share,
    seal_input_share,
)
from ppm_reference.dap.profiles.base import Profile
from ppm_reference.dap.profiles.dap18.messages import (
    AggregateShareAad,
    CollectionJobReq,
    CollectionJobResp,
    InputShareAad,
    PlaintextInputShare,
    Report,
    ReportMetadata,
)
from ppm_reference.dap.profiles.dap18.task import Task, vdaf_configuration
from ppm_reference.dap.sharding import ShardedReport


class ClientError(ValueError):
    """A report or a collection result cannot be produced from these inputs."""


def _check_vdaf(task: Task, vdaf: Any | None) -> Any:
    """The task's VDAF; a VDAF passed in must be the one the task configuration names."""
    if vdaf is None:
        return task.vdaf()
    if vdaf_configuration(vdaf, task.profile) != (task.vdaf_type, task.vdaf_configuration):
        raise ClientError("the VDAF does not match the task's vdaf_type/vdaf_configuration")
    return vdaf


# ---------------------------------------------------------------------------------------
# Client (Section 4.4.2.1)
# ---------------------------------------------------------------------------------------


def shard(task: Any, vdaf: Any, measurement: Any, report_id: bytes,
          rand: bytes) -> ShardedReport:
    """``Vdaf.shard("dap-18" || task_id, measurement, report_id, rand)``, encoded."""
    return sharding.shard(task, vdaf, measurement, report_id, rand, ClientError)


def open_input_share(keypair: HpkeKeypair, server_role: Role, aad: InputShareAad,
                     ciphertext: HpkeCiphertext, *, profile: Profile) -> PlaintextInputShare:
    """Decrypt and decode an input share (Section 4.5.3.3).

    Raises :class:`dap.hpke.HpkeError` if decryption fails (report error
    ``hpke_decrypt_error``) and :class:`dap.codec.DecodeError` if the plaintext is not a
    valid ``PlaintextInputShare`` (report error ``invalid_message``, Section 4.5.3.4).

    AMBIGUITY: Section 4.5.3.3 says an unrecognized HPKE config ID is also
    ``hpke_decrypt_error``, although ``ReportError`` has ``hpke_unknown_config_id(4)``
    (and the Leader's upload uses ``outdated_config``). The error message of the
    :class:`HpkeError` says which case it was; the caller picks the code."""
    return PlaintextInputShare.decode(
        open_input_share_bytes(keypair, server_role, aad, ciphertext, profile=profile))


def input_share_aad(
    task: Task, report_metadata: ReportMetadata, public_share: bytes
) -> InputShareAad:
    """``InputShareAad`` for a report of ``task`` (Section 4.4.2.1)."""
    return task.profile.messages.InputShareAad(  # type: ignore[no-any-return]
        task_id=task.task_id,
        task_configuration=task.configuration(),
        report_metadata=report_metadata,
        public_share=public_share,
    )


def _check_extensions(
    public: Sequence[Extension], private: Sequence[Extension], who: str
) -> None:
    # Section 4.4.2.2 / 4.5.3.4: an extension type may not appear both in the public
    # extensions and in an Aggregator's private extensions.
    both = {e.extension_type for e in public} & {e.extension_type for e in private}
    if both:
        raise ClientError(f"extension types {sorted(both)} are both public and private ({who})")


def generate_report(
    task: Task,
    measurement: Any,
    *,
    time: int,
    leader_hpke_config: HpkeConfig,
    helper_hpke_config: HpkeConfig,
    vdaf: Any | None = None,
    report_id: bytes | None = None,
    rand: bytes | None = None,
    public_extensions: Sequence[Extension] = (),
    leader_private_extensions: Sequence[Extension] = (),
    helper_private_extensions: Sequence[Extension] = (),
    ephemeral_ikms: tuple[bytes, bytes] | None = None,
) -> Report:
    """Produce a ``Report`` for ``measurement`` (Section 4.4.2.1).

    ``time`` is in units of the task's ``time_precision`` (Section 4.1.1); use
    ``Time.from_seconds``. ``report_id`` and ``rand`` default to fresh CSPRNG output.
    ``ephemeral_ikms`` (Leader's, Helper's) make HPKE deterministic: TEST VECTORS ONLY.
    Extension lists must be sorted by type (Section 4.4.3).
    """
    vdaf = _check_vdaf(task, vdaf)
    report_id = ReportID(report_id if report_id is not None else os.urandom(16))
    rand = rand if rand is not None else os.urandom(vdaf.RAND_SIZE)
    t = Time(time)
    interval = task.task_interval
    if interval is not None and not interval.contains(t):
        raise ClientError(f"time {int(t)} is outside the task interval {interval}")
    _check_extensions(public_extensions, leader_private_extensions, "leader")
    _check_extensions(public_extensions, helper_private_extensions, "helper")

    sharded = shard(task, vdaf, measurement, report_id, rand)
    metadata = ReportMetadata(report_id=report_id, time=t, public_extensions=public_extensions)
    aad = input_share_aad(task, metadata, sharded.public_share)
    ikms = ephemeral_ikms if ephemeral_ikms is not None else (None, None)
    ciphertexts = []
    for role, config, private, input_share, ikm in (
        (Role.LEADER, leader_hpke_config, leader_private_extensions, sharded.input_shares[0],
         ikms[0]),
        (Role.HELPER, helper_hpke_config, helper_private_extensions, sharded.input_shares[1],
         ikms[1]),
    ):
        plaintext = PlaintextInputShare(private_extensions=private, payload=input_share)
        ciphertexts.append(
            seal_input_share(
                config, role, aad, plaintext, profile=task.profile, ephemeral_ikm=ikm
            )
        )
    return Report(
        report_metadata=metadata,
        public_share=sharded.public_share,
        leader_encrypted_input_share=ciphertexts[0],
        helper_encrypted_input_share=ciphertexts[1],
    )


# ---------------------------------------------------------------------------------------
# Aggregate share encryption (Section 4.6.7) and Collector (Section 4.6.6)
# ---------------------------------------------------------------------------------------


def aggregate_share_aad(task: Task, collection_job_req: CollectionJobReq) -> AggregateShareAad:
    """``AggregateShareAad`` for a collection job of ``task`` (Section 4.6.7)."""
    return task.profile.messages.AggregateShareAad(  # type: ignore[no-any-return]
        task_id=task.task_id,
        task_configuration=task.configuration(),
        collection_job_req=collection_job_req,
    )


def encrypt_aggregate_share(
    task: Task,
    collector_hpke_config: HpkeConfig,
    server_role: Role,
    collection_job_req: CollectionJobReq,
    agg_share: bytes,
    *,
    ephemeral_ikm: bytes | None = None,
) -> HpkeCiphertext:
    """An Aggregator's encryption of its encoded aggregate share to the Collector."""
    aad = aggregate_share_aad(task, collection_job_req)
    return seal_aggregate_share(
        collector_hpke_config, server_role, aad, agg_share,
        profile=task.profile, ephemeral_ikm=ephemeral_ikm,
    )


def decrypt_aggregate_shares(
    task: Task,
    collector_keypair: HpkeKeypair,
    collection_job_req: CollectionJobReq,
    collection_job_resp: CollectionJobResp,
) -> tuple[bytes, bytes]:
    """The Leader's and the Helper's encoded aggregate shares. Raises
    :class:`dap.hpke.HpkeError` if either does not decrypt."""
    return sharding.open_aggregate_shares(
        task, collector_keypair, aggregate_share_aad(task, collection_job_req),
        collection_job_resp.leader_encrypted_agg_share,
        collection_job_resp.helper_encrypted_agg_share)


@dataclass(frozen=True)
class CollectionResult:
    """What the Collector learns from a collection job (Section 4.6.6)."""

    report_count: int
    interval: Interval
    aggregate_result: Any
    batch_id: bytes | None = None   # DAP-18 does not tell the Collector its batch ID


def collect_result(
    task: Task,
    collector_keypair: HpkeKeypair,
    collection_job_req: CollectionJobReq,
    collection_job_resp: CollectionJobResp,
    *,
    vdaf: Any | None = None,
) -> CollectionResult:
    """Decrypt both aggregate shares and unshard them (Section 4.6.6)::

        agg_result = Vdaf.unshard(agg_param, [leader_agg_share, helper_agg_share],
                                  report_count)
    """
    vdaf = _check_vdaf(task, vdaf)
    leader, helper = decrypt_aggregate_shares(
        task, collector_keypair, collection_job_req, collection_job_resp
    )
    result = sharding.unshard(vdaf, collection_job_req.agg_param, (leader, helper),
                              collection_job_resp.report_count, ClientError)
    return CollectionResult(
        report_count=collection_job_resp.report_count,
        interval=collection_job_resp.interval,
        aggregate_result=result,
    )
