"""draft-ietf-ppm-dap-09: its messages, task, wire, client flow, vectors and interop fields.

``DAP_09`` is the profile object; the modules of this package are its internals and are
imported only from ``dap/profiles/`` (an import-linter contract).
"""

from __future__ import annotations

from dap.profiles.base import Profile, _frozen
from dap.profiles.dap09 import messages as m09
from dap.profiles.dap09 import vectors
from dap.profiles.dap09.flow import Flow09
from dap.profiles.dap09.interop import INTEROP_09
from dap.profiles.dap09.task import Task09
from dap.profiles.dap09.wire import Wire09

_WIRE = Wire09()

DAP_09 = Profile(
    name="dap-09",
    draft="draft-ietf-ppm-dap-09",
    vdaf_draft="draft-irtf-cfrg-vdaf-08",
    # Sections 4.4.2 and 4.6.4: info strings "dap-09 input share" and "dap-09 aggregate
    # share" (same role bytes as DAP-18).
    version_tag=b"dap-09",
    binds_vdaf_ctx=False,
    # Section 8.1: one media type per message (CollectionReq is "dap-collect-req").
    media_type_template="application/dap-{message}",
    message_types=_frozen(
        {
            "HpkeConfigList": "hpke-config-list",
            "Report": "report",
            "AggregationJobInitReq": "aggregation-job-init-req",
            "AggregationJobResp": "aggregation-job-resp",
            "AggregationJobContinueReq": "aggregation-job-continue-req",
            "AggregateShareReq": "aggregate-share-req",
            "AggregateShare": "aggregate-share",
            "CollectionReq": "collect-req",
            "Collection": "collection",
        }
    ),
    # Sections 4.3 (Resource URIs), 4.4.1, 4.4.2, 4.5.1.1, 4.5.2.1, 4.6.1, 4.6.2. Aggregation and
    # collection job ids are chosen by the Leader and the Collector (16 bytes each).
    resources=_frozen(
        {
            "hpke_config": "{aggregator}/hpke_config",
            "hpke_config_for_task": "{aggregator}/hpke_config?task_id={task-id}",
            "reports": "{leader}/tasks/{task-id}/reports",
            "aggregation_job": (
                "{helper}/tasks/{task-id}/aggregation_jobs/{aggregation-job-id}"
            ),
            "collection_job": "{leader}/tasks/{task-id}/collection_jobs/{collection-job-id}",
            "aggregate_shares": "{helper}/tasks/{task-id}/aggregate_shares",
        }
    ),
    requests=_frozen(
        {
            "hpke_config": ("GET", "hpke_config_for_task"),
            "upload": ("PUT", "reports"),
            "aggregation_job_init": ("PUT", "aggregation_job"),
            "aggregation_job_continue": ("POST", "aggregation_job"),
            "aggregation_job_delete": ("DELETE", "aggregation_job"),
            "collection_job_create": ("PUT", "collection_job"),
            "collection_job_poll": ("POST", "collection_job"),
            "collection_job_delete": ("DELETE", "collection_job"),
            "aggregate_share_create": ("POST", "aggregate_shares"),
        }
    ),
    # Sections 3.2 (Errors) and 8.3 (URN sub-namespace).
    problem_type_prefix="urn:ietf:params:ppm:dap:error:",
    problem_types=frozenset(
        {
            "invalidMessage",
            "unrecognizedTask",
            "unrecognizedAggregationJob",
            "outdatedConfig",
            "reportRejected",
            "reportTooEarly",
            "batchInvalid",
            "invalidBatchSize",
            "batchQueriedTooManyTimes",
            "batchMismatch",
            "unauthorizedRequest",
            "missingTaskID",
            "stepMismatch",
            "batchOverlap",
        }
    ),
    # Section 6 (Compliance Requirements): the same suite as DAP-18.
    mandatory_hpke_suite=(0x0020, 0x0001, 0x0001),
    # Section 3.1 lists the DAP-Auth-Token header of draft-dcook-ppm-dap-interop-test-design
    # as one allowed scheme; Janus 0.7 and Daphne use it between Aggregators.
    auth_header="DAP-Auth-Token",
    auth_value_prefix="",
    messages=m09,
    task_cls=Task09,
    wire=_WIRE,
    flow=Flow09(),
    interop=INTEROP_09,
    vectors=vectors,
    vector_dir="dap-09",
    problem_aliases=_frozen({
        "unauthorized": "unauthorizedRequest",
        "forbidden": "unauthorizedRequest",
        "invalidAggregationParameter": "invalidMessage",
        "unsupportedExtension": "invalidMessage",
        "invalidExtension": "invalidMessage",
    }),
)
