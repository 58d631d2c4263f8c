"""draft-ietf-ppm-dap-18: its messages, task, wire, client flow, vectors and interop fields.

``DAP_18`` is the profile object; the modules of this package are its internals and are
imported only from ``dap/profiles/`` (an import-linter contract).
"""

from __future__ import annotations

from dap.profiles.base import Profile, _frozen
from dap.profiles.dap18 import messages as m18
from dap.profiles.dap18 import vectors
from dap.profiles.dap18.flow import Flow18
from dap.profiles.dap18.interop import INTEROP_18
from dap.profiles.dap18.task import Task
from dap.profiles.dap18.wire import Wire18

_WIRE = Wire18()

DAP_18 = Profile(
    name="dap-18",
    draft="draft-ietf-ppm-dap-18",
    vdaf_draft="draft-irtf-cfrg-vdaf-20",
    version_tag=b"dap-18",
    binds_vdaf_ctx=True,
    media_type_template="application/ppm-dap;message={message}",
    # Section 9.1 (IANA: Protocol Message Media Type).
    message_types=_frozen(
        {
            "HpkeConfigList": "hpke-config-list",
            "UploadRequest": "upload-req",
            "UploadErrors": "upload-errors",
            "AggregationJobInitReq": "aggregation-job-init-req",
            "AggregationJobResp": "aggregation-job-resp",
            "AggregationJobContinueReq": "aggregation-job-continue-req",
            "AggregateShareReq": "aggregate-share-req",
            "AggregateShare": "aggregate-share",
            "CollectionJobReq": "collection-job-req",
            "CollectionJobResp": "collection-job-resp",
        }
    ),
    # Section 3 and Appendix A (HTTP Resources Reference).
    resources=_frozen(
        {
            "hpke_config": "{aggregator}/hpke_config",
            "reports": "{leader}/tasks/{task-id}/reports",
            "aggregation_jobs": "{helper}/tasks/{task-id}/aggregation_jobs",
            "aggregation_job": (
                "{helper}/tasks/{task-id}/aggregation_jobs/{aggregation-job-id}"
            ),
            "collection_jobs": "{leader}/tasks/{task-id}/collection_jobs",
            "collection_job": "{leader}/tasks/{task-id}/collection_jobs/{collection-job-id}",
            "aggregate_shares": "{helper}/tasks/{task-id}/aggregate_shares",
            "aggregate_share": (
                "{helper}/tasks/{task-id}/aggregate_shares/{aggregate-share-id}"
            ),
        }
    ),
    # Sections 4.4.1, 4.4.2, 4.5.2, 4.5.4, 4.6.1, 4.6.4: resources are created with POST
    # (server-chosen ids) and polled with GET.
    requests=_frozen(
        {
            "hpke_config": ("GET", "hpke_config"),
            "upload": ("POST", "reports"),
            "aggregation_job_init": ("POST", "aggregation_jobs"),
            "aggregation_job_continue": ("POST", "aggregation_job"),
            "aggregation_job_poll": ("GET", "aggregation_job"),
            "aggregation_job_delete": ("DELETE", "aggregation_job"),
            "collection_job_create": ("POST", "collection_jobs"),
            "collection_job_poll": ("GET", "collection_job"),
            "collection_job_delete": ("DELETE", "collection_job"),
            "aggregate_share_create": ("POST", "aggregate_shares"),
            "aggregate_share_poll": ("GET", "aggregate_share"),
        }
    ),
    # Sections 3.6 (Errors) and 9.3 (URN sub-namespace).
    problem_type_prefix="urn:ietf:params:ppm:dap:error:",
    problem_types=frozenset(
        {
            "invalidMessage",
            "unrecognizedTask",
            "unrecognizedAggregationJob",
            "batchInvalid",
            "invalidBatchSize",
            "invalidAggregationParameter",
            "batchMismatch",
            "stepMismatch",
            "batchOverlap",
            "unsupportedExtension",
            "invalidExtension",
        }
    ),
    # Section 7 (Compliance Requirements): DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
    # AES-128-GCM.
    mandatory_hpke_suite=(0x0020, 0x0001, 0x0001),
    # Section 3.5 (HTTPS Request Authentication) examples: OAuth 2.0 bearer tokens.
    auth_header="Authorization",
    auth_value_prefix="Bearer ",
    messages=m18,
    task_cls=Task,
    wire=_WIRE,
    flow=Flow18(_WIRE),
    interop=INTEROP_18,
    vectors=vectors,
    vector_dir="dap-18",
)
