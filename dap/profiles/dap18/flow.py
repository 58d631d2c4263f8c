"""What DAP-18 Clients and Collectors send and receive (:class:`dap.profiles.base.ClientFlow`).

Uploads are one ``UploadRequest`` of many reports answered by ``UploadErrors`` (Section
4.4.2); collection jobs are created with POST and named by the Leader's ``Location``
(Section 4.6.1); report times and intervals count ``time_precision`` units (Section 4.1.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dap.common import Interval, Time
from dap.profiles.base import ClientFlow
from dap.profiles.dap18 import client as client18
from dap.profiles.dap18 import messages as m18


class Flow18(ClientFlow):
    def __init__(self, wire: Any) -> None:
        self.wire = wire

    def report_time(self, task: Any, now_seconds: float) -> int:
        return Time.from_seconds(int(now_seconds), task.time_precision)

    def generate_report(self, task: Any, measurement: Any, *, time: int,
                        leader_hpke_config: Any, helper_hpke_config: Any,
                        vdaf: Any = None, report_id: bytes | None = None,
                        rand: bytes | None = None) -> Any:
        return client18.generate_report(task, measurement, time=time,
                                        leader_hpke_config=leader_hpke_config,
                                        helper_hpke_config=helper_hpke_config, vdaf=vdaf,
                                        report_id=report_id, rand=rand)

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

    def collect_result(self, task: Any, keypair: Any, req: Any, resp: Any,
                       vdaf: Any = None) -> Any:
        return client18.collect_result(task, keypair, req, resp, vdaf=vdaf)

    def interval_unit(self, task: Any) -> int:
        return int(task.time_precision)

    def query_interval(self, task: Any, units: Interval) -> Any:
        return m18.Query.time_interval(units)

    def query_current_batch(self, task: Any) -> Any:
        return m18.Query.leader_selected()
