"""The Aggregators' datastore backends (``dap.storage.sqlite``, the embedded default).

The records, states and the ``Transaction`` / ``Datastore`` interface they implement are
the protocol core's (:mod:`dap.core.store`) and are re-exported here.
"""

from __future__ import annotations

from dap.core.store import (
    AggregateShareJobRecord,
    AggregateShareJobState,
    AggregationJobRecord,
    AggregationJobState,
    BatchBucketRecord,
    BatchResultRecord,
    ClientReportRecord,
    CollectionJobRecord,
    CollectionJobState,
    Datastore,
    HpkeKeyRecord,
    HpkeKeyState,
    LeaderBatchRecord,
    LeaderBatchState,
    ReportAggregationRecord,
    ReportAggregationState,
    ReportState,
    StorageError,
    TaskRecord,
    TaskWorkRecord,
    Transaction,
    iter_chunks,
)

__all__ = [
    "AggregateShareJobRecord",
    "AggregateShareJobState",
    "AggregationJobRecord",
    "AggregationJobState",
    "BatchBucketRecord",
    "BatchResultRecord",
    "ClientReportRecord",
    "CollectionJobRecord",
    "CollectionJobState",
    "Datastore",
    "HpkeKeyRecord",
    "HpkeKeyState",
    "LeaderBatchRecord",
    "LeaderBatchState",
    "ReportAggregationRecord",
    "ReportAggregationState",
    "ReportState",
    "StorageError",
    "TaskRecord",
    "TaskWorkRecord",
    "Transaction",
    "iter_chunks",
]
