"""The Client's sharding step, the same in every draft (DAP-18 Section 4.4.2.1, DAP-09
Section 4.4.2): ``Vdaf.shard(ctx, measurement, report_id, rand)`` with the task's
application context (``task.vdaf_ctx()``: ``version_tag || task_id``, empty for VDAF-08),
encoded for the ``PlaintextInputShare`` of each Aggregator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dap.common import ReportID


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
