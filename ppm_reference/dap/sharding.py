"""The steps of the Client and the Collector that are the same in every draft.

* Sharding (DAP-18 Section 4.4.2.1, DAP-09 Section 4.4.2): ``Vdaf.shard(ctx, measurement,
  report_id, rand)`` with the task's application context (``task.vdaf_ctx()``:
  ``version_tag || task_id``, empty for VDAF-08), encoded for the
  ``PlaintextInputShare`` of each Aggregator.
* Unsharding (DAP-18 Section 4.6.6, DAP-09 Section 4.6.3): open both aggregate shares
  with the draft's associated data, then ``Vdaf.unshard(agg_param, [leader, helper],
  report_count)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ppm_reference.dap.common import HpkeCiphertext, ReportID, Role
from ppm_reference.dap.hpke import HpkeKeypair, open_aggregate_share


@dataclass(frozen=True)
class ShardedReport:
    """The encoded public share and the two encoded input shares (Leader's first)."""

    public_share: bytes
    input_shares: tuple[bytes, bytes]


def shard(task: Any, vdaf: Any, measurement: Any, report_id: bytes, rand: bytes,
          error: type[Exception] = ValueError) -> ShardedReport:
    """Shard and encode a measurement; an unusable input raises ``error`` (the caller's
    draft-specific error class) with a one-line reason."""
    if len(rand) != vdaf.RAND_SIZE:
        raise error(f"rand must be {vdaf.RAND_SIZE} bytes, got {len(rand)}")
    try:
        public_share, input_shares = vdaf.shard(task.vdaf_ctx(), measurement,
                                                bytes(ReportID(report_id)), rand)
    except (ValueError, TypeError) as exc:
        raise error(f"cannot shard measurement {measurement!r}: {exc}") from None
    if len(input_shares) != 2:
        raise error(f"expected 2 input shares, got {len(input_shares)}")
    return ShardedReport(vdaf.encode_public_share(public_share),
                         (vdaf.encode_input_share(input_shares[0]),
                          vdaf.encode_input_share(input_shares[1])))


def open_aggregate_shares(task: Any, keypair: HpkeKeypair, aad: Any, leader: HpkeCiphertext,
                          helper: HpkeCiphertext) -> tuple[bytes, bytes]:
    """The Leader's and the Helper's encoded aggregate shares, opened with the draft's
    ``AggregateShareAad`` ``aad``. Raises :class:`dap.hpke.HpkeError`."""
    return (open_aggregate_share(keypair, Role.LEADER, aad, leader, profile=task.profile),
            open_aggregate_share(keypair, Role.HELPER, aad, helper, profile=task.profile))


def unshard(vdaf: Any, agg_param: bytes, shares: tuple[bytes, bytes], report_count: int,
            error: type[Exception] = ValueError) -> Any:
    """``Vdaf.unshard`` of the two encoded aggregate shares; a failure raises ``error``."""
    try:
        param = vdaf.decode_agg_param(agg_param)
        decoded = [vdaf.decode_agg_share(param, s) for s in shares]
        return vdaf.unshard(param, decoded, report_count)
    except (ValueError, TypeError) as exc:
        raise error(f"cannot unshard the aggregate shares: {exc}") from None
