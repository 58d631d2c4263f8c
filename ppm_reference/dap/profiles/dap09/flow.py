"""What DAP-09 Clients and Collectors send and receive (:class:`dap.profiles.base.ClientFlow`).

One report per PUT, refused with a problem document (Section 4.4.2); the Collector names
its collection job and PUTs a ``CollectionReq`` (Section 4.6.1); times are seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from ppm_reference.dap.common import Interval, ReportError
from ppm_reference.dap.profiles.base import ClientFlow
from ppm_reference.dap.profiles.dap09 import client as client09
from ppm_reference.dap.profiles.dap09 import messages as m09


class Flow09(ClientFlow):
    client = client09

    one_report_per_request = True
    collector_chooses_job_id = True
    upload_problems = MappingProxyType({
        "outdatedConfig": ReportError.OUTDATED_CONFIG,
        "reportTooEarly": ReportError.REPORT_TOO_EARLY,
        "reportRejected": ReportError.REPORT_DROPPED,
    })

    def report_time(self, task: Any, now_seconds: float) -> int:
        # Seconds; generate_report rounds them to time_precision (Section 4.4.2).
        return int(now_seconds)

    def report_extension_args(self, extensions: Sequence[tuple[int, bytes]]
                              ) -> dict[str, Any]:
        """DAP-09 has no public extensions: the extension goes into both Aggregators'
        PlaintextInputShare (Section 4.4.2), authenticated by each one's AEAD."""
        if not extensions:
            return {}
        exts = tuple(m09.Extension(t, bytes(d)) for t, d in sorted(extensions))
        return {"leader_extensions": exts, "helper_extensions": exts}

    def encode_upload(self, reports: Sequence[Any]) -> tuple[str, bytes]:
        (report,) = reports
        return "Report", report.encode()

    def collection_request(self, query: Any, agg_param: bytes) -> Any:
        return m09.CollectionReq(query, agg_param)

    def decode_collection(self, body: bytes) -> Any:
        return m09.Collection.decode(body)

    def interval_unit(self, task: Any) -> int:
        return 1

    def query_interval(self, task: Any, units: Interval) -> Any:
        p = int(task.time_precision)
        return m09.Query.time_interval(m09.Interval(
            m09.Time(int(units.start) * p), m09.Duration(int(units.duration) * p)))

    def query_current_batch(self, task: Any) -> Any:
        return m09.Query.fixed_size(m09.FixedSizeQuery.current_batch())

    def query_batch_id(self, task: Any, batch_id: bytes) -> Any:
        return m09.Query.fixed_size(m09.FixedSizeQuery.by_batch_id(m09.BatchID(batch_id)))
