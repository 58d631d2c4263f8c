"""What DAP-18 Clients and Collectors send and receive (:class:`dap.profiles.base.ClientFlow`).

Uploads are one ``UploadRequest`` of many reports answered by ``UploadErrors`` (Section
4.4.2); collection jobs are created with POST and named by the Leader's ``Location``
(Section 4.6.1); report times and intervals count ``time_precision`` units (Section 4.1.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ppm_reference.dap.common import Extension, Interval, Time
from ppm_reference.dap.profiles.base import ClientFlow
from ppm_reference.dap.profiles.dap18 import client as client18
from ppm_reference.dap.profiles.dap18 import messages as m18


class Flow18(ClientFlow):
    client = client18

    def __init__(self, wire: Any) -> None:
        self.wire = wire

    def report_time(self, task: Any, now_seconds: float) -> int:
        return Time.from_seconds(int(now_seconds), task.time_precision)

    def report_extension_args(self, extensions: Sequence[tuple[int, bytes]]
                              ) -> dict[str, Any]:
        """Public extensions (in ReportMetadata, bound into both Aggregators' HPKE
        associated data, Section 4.4.2.1), in increasing type order (Section 4.4.3)."""
        if not extensions:
            return {}
        return {"public_extensions": tuple(
            Extension(t, bytes(d)) for t, d in sorted(extensions))}

    def encode_upload(self, reports: Sequence[Any]) -> tuple[str, bytes]:
        return "UploadRequest", m18.UploadRequest(tuple(reports)).encode()

    def decode_upload_errors(self, body: bytes) -> dict[bytes, Any]:
        if not body:
            return {}
        return {bytes(s.id): self.wire.errors.decode(s.error)
                for s in self.wire.m.UploadErrors.decode(body).status}

    def collection_request(self, query: Any, agg_param: bytes) -> Any:
        return m18.CollectionJobReq(query, agg_param, ())

    def decode_collection(self, body: bytes) -> Any:
        return m18.CollectionJobResp.decode(body)

    def interval_unit(self, task: Any) -> int:
        return int(task.time_precision)

    def query_interval(self, task: Any, units: Interval) -> Any:
        return m18.Query.time_interval(units)

    def query_current_batch(self, task: Any) -> Any:
        return m18.Query.leader_selected()
