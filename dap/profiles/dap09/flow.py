"""What DAP-09 Clients and Collectors send and receive (:class:`dap.profiles.base.ClientFlow`).

One report per PUT, refused with a problem document (Section 4.4.2); the Collector names
its collection job and PUTs a ``CollectionReq`` (Section 4.6.1); times are seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from dap.common import Interval, ReportError
from dap.profiles.base import ClientFlow
from dap.profiles.dap09 import client as client09
from dap.profiles.dap09 import messages as m09


class Flow09(ClientFlow):
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

    def generate_report(self, task: Any, measurement: Any, *, time: int,
                        leader_hpke_config: Any, helper_hpke_config: Any,
                        vdaf: Any = None, report_id: bytes | None = None,
                        rand: bytes | None = None) -> Any:
        return client09.generate_report(task, measurement, time=time,
                                        leader_hpke_config=leader_hpke_config,
                                        helper_hpke_config=helper_hpke_config, vdaf=vdaf,
                                        report_id=report_id, rand=rand)

    def encode_upload(self, reports: Sequence[Any]) -> tuple[str, bytes]:
        (report,) = reports
        return "Report", report.encode()

    def collection_request(self, query: Any, agg_param: bytes) -> Any:
        return m09.CollectionReq(query, agg_param)

    def decode_collection(self, body: bytes) -> Any:
        return m09.Collection.decode(body)

    def collect_result(self, task: Any, keypair: Any, req: Any, resp: Any,
                       vdaf: Any = None) -> Any:
        return client09.collect_result(task, keypair, req, resp, vdaf=vdaf)

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
