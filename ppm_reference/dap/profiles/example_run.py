"""Running an example of the test vectors through the protocol core.

The example files (``test_vectors/<draft>/examples/*.json``) pin the bytes the servers
send. Each profile's ``vectors.build_example`` therefore does not script the protocol:
it hands the Client's and the Collector's messages to :func:`run_example`, which runs
the Leader and the Helper of :mod:`dap.core` in one process, each with its own
in-memory SQLite datastore, and returns the messages the core produced:

1. the Leader stores the uploaded reports (``dap.core.leader.upload``);
2. it creates the aggregation job (``create_aggregation_jobs``) and the Helper answers
   it (``dap.core.helper.create_aggregation_job``); the Leader processes the answer;
3. the Leader creates the collection job and builds the ``AggregateShareReq``
   (``create_collection_job``, ``prepare_collection``), the Helper answers with its
   encrypted aggregate share (``create_aggregate_share``) and the Leader combines the
   two (``finish_collection``).

What the core would draw at random is injected, FOR TEST VECTORS ONLY:

* the IDs it draws from its ``rng`` (aggregation job, leader-selected batch, collection
  job, aggregate share job) come from a :class:`RecordedRng` that hands out the
  vector's recorded IDs in order and fails on any other draw;
* the HPKE ephemeral keys of the two encrypted aggregate shares come from the vector's
  ``*_agg_share_ephemeral_ikm`` (the core's ``ephemeral_ikm`` parameters of
  ``finish_collection`` and ``create_aggregate_share``, which the servers never pass);
* the clock: ``now`` is passed to every core call.

Each report is uploaded in its own request, one second after the previous one: the
Leader puts reports into a job in arrival order (and by report ID among reports that
arrived at the same time), so this keeps the reports of the job in the order of the
example's inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ppm_reference.dap.common import HpkeConfig, Role
from ppm_reference.dap.core import helper, leader
from ppm_reference.dap.core.errors import DapProblem, NotReady
from ppm_reference.dap.core.store import (
    AggregationJobState,
    CollectionJobState,
    HpkeKeyRecord,
    HpkeKeyState,
    ReportState,
    TaskRecord,
)
from ppm_reference.dap.core.tasks import AggregatorTask, Keyring, TaskOptions
from ppm_reference.dap.hpke import HpkeKeypair
from ppm_reference.dap.storage.sqlite import SqliteDatastore
from ppm_reference.dap.vector_format import VectorError

T = TypeVar("T")


class RecordedRng:
    """An :class:`dap.core.rand.Rng` that returns recorded values, in order. FOR TEST
    VECTORS ONLY. ``token_bytes(n)`` hands out the next value, which must be ``n`` bytes
    long; any other draw, or a draw past the last value, is a :class:`VectorError` (the
    core drew something the vector does not record)."""

    def __init__(self, label: str, values: Sequence[bytes]) -> None:
        self.label = label
        self._values = [bytes(v) for v in values]

    def token_bytes(self, n: int) -> bytes:
        if not self._values:
            raise VectorError(f"{self.label}: the core drew {n} random bytes the vector "
                              "does not record")
        value = self._values.pop(0)
        if len(value) != n:
            raise VectorError(f"{self.label}: the core drew {n} random bytes, the next "
                              f"recorded value has {len(value)}")
        return value

    def randbelow(self, n: int) -> int:
        raise VectorError(f"{self.label}: the core drew an integer below {n}")

    def getrandbits(self, k: int) -> int:
        raise VectorError(f"{self.label}: the core drew {k} random bits")

    def choice(self, seq: Sequence[T]) -> T:
        raise VectorError(f"{self.label}: the core drew a random choice")

    def check_exhausted(self) -> None:
        if self._values:
            raise VectorError(f"{self.label}: {len(self._values)} recorded values unused")


@dataclass
class ExampleRun:
    """The messages the core produced in an example, as bytes."""

    aggregation_job_id: bytes           # the job's ID at the Helper (in its URL)
    aggregation_job_init_req: bytes     # Leader -> Helper
    aggregation_job_resp: bytes         # Helper -> Leader
    collection_job_id: bytes
    aggregate_share_req: bytes          # Leader -> Helper
    aggregate_share_id: bytes           # the Helper's aggregate share job
    aggregate_share: bytes              # Helper -> Leader
    collection_job_resp: bytes          # Leader -> Collector


def run_example(
    task: Any,
    *,
    vdaf_verify_key: bytes,
    verification_key_id: int,
    leader_keypair: HpkeKeypair,
    helper_keypair: HpkeKeypair,
    collector_hpke_config: HpkeConfig,
    uploads: Sequence[bytes],
    report_count: int,
    collection_req: bytes,
    leader_ids: Sequence[bytes],
    helper_ids: Sequence[bytes],
    collection_job_id: bytes | None,
    leader_agg_share_ephemeral_ikm: bytes,
    helper_agg_share_ephemeral_ikm: bytes,
    now: int,
) -> ExampleRun:
    """Run one example through the Leader and the Helper of the core (see the module).

    ``task`` is the profile's task; ``uploads`` the upload request bodies, one report
    each; ``collection_req`` the Collector's request body. ``leader_ids`` and
    ``helper_ids`` are what each Aggregator draws from its ``rng``, in order;
    ``collection_job_id`` is the ID the Collector chose where it chooses it (DAP-09, a
    PUT), else None. ``now`` is the clock in seconds when the first report arrives."""
    profile = task.profile
    clock_skew = 0
    aggregators: dict[Role, tuple[SqliteDatastore, AggregatorTask]] = {}
    for role, keypair in ((Role.LEADER, leader_keypair), (Role.HELPER, helper_keypair)):
        name = "leader" if role == Role.LEADER else "helper"
        # max_batch_size: a leader-selected batch takes every report of the example.
        options = TaskOptions(max_batch_size=report_count)
        record = TaskRecord(bytes(task.task_id), name, profile.name, task.config_bytes(),
                            vdaf_verify_key, collector_hpke_config.encode(),
                            aggregator_auth_token="example", options=options.to_json())
        store = SqliteDatastore(":memory:")
        with store.transaction() as tx:
            tx.put_task(record)
            tx.put_hpke_key(HpkeKeyRecord(keypair.config.id, keypair.config.encode(),
                                          keypair.private_key, HpkeKeyState.ACTIVE))
        # Built directly rather than with `from_record`, so that an unregistered profile
        # (a test's throwaway one) runs too.
        aggregators[role] = (store, AggregatorTask(
            record=record, task=task, role=role, options=options,
            collector_hpke_config=collector_hpke_config,
            verify_keys={verification_key_id: vdaf_verify_key}))
    leader_store, leader_task = aggregators[Role.LEADER]
    helper_store, helper_task = aggregators[Role.HELPER]
    leader_rng = RecordedRng("Leader", leader_ids)
    helper_rng = RecordedRng("Helper", helper_ids)
    try:
        # -- upload ---------------------------------------------------------------------
        for i, body in enumerate(uploads):
            with leader_store.transaction() as tx:
                keyring = Keyring.load(tx)
                errors = leader.upload(tx, leader_task, keyring, body, now + i, clock_skew)
            if errors:
                raise VectorError("the Leader refused report(s) " + ", ".join(
                    f"{rid.hex()}: {err.name.lower()}" for rid, err in errors))
        now += len(uploads)

        # -- aggregation ----------------------------------------------------------------
        sizes = leader.JobSizes(min_job_size=1, max_job_size=report_count, jobs_per_pass=1)
        with leader_store.transaction() as tx:
            jobs = leader.create_aggregation_jobs(tx, leader_task, Keyring.load(tx), now,
                                                  sizes, clock_skew, rng=leader_rng)
            in_job = tx.count_reports(leader_task.task_id, (ReportState.IN_JOB,))
        if len(jobs) != 1 or in_job != report_count:
            raise VectorError(f"the Leader made {len(jobs)} aggregation jobs, not one job "
                              "of every report")
        job = jobs[0]
        init_request = job.request  # the Leader drops it once the job is finished
        put = profile.request("aggregation_job_init")[0] == "PUT"  # the Leader names it
        with helper_store.transaction() as tx:
            result = helper.create_aggregation_job(
                tx, helper_task, job.request, False, Keyring.load(tx), now, clock_skew,
                job_id=job.job_id if put else None, rng=helper_rng)
        if result.response is None:
            raise VectorError("the Helper did not answer the aggregation job")
        with leader_store.transaction() as tx:
            state = leader.process_aggregation_job_response(tx, leader_task, job,
                                                            result.response)
        if state != AggregationJobState.FINISHED:
            raise VectorError(f"the Leader's aggregation job ended {state}")

        # -- collection -----------------------------------------------------------------
        with leader_store.transaction() as tx:
            coll_id = leader.create_collection_job(tx, leader_task, collection_req, now,
                                                   job_id=collection_job_id, rng=leader_rng)
            coll_job = tx.get_collection_job(leader_task.task_id, coll_id)
            assert coll_job is not None
            share_request = leader.prepare_collection(tx, leader_task, coll_job, now, None)
        if share_request is None:
            raise VectorError("the Leader's collection job is not ready")
        with helper_store.transaction() as tx:
            share = helper.create_aggregate_share(
                tx, helper_task, share_request.body, False, rng=helper_rng,
                ephemeral_ikm=helper_agg_share_ephemeral_ikm)
        if share.response is None:
            raise VectorError("the Helper did not answer the AggregateShareReq")
        with leader_store.transaction() as tx:
            coll_job = tx.get_collection_job(leader_task.task_id, coll_id)
            assert coll_job is not None
            leader.finish_collection(tx, leader_task, coll_job, share_request,
                                     share.response,
                                     ephemeral_ikm=leader_agg_share_ephemeral_ikm)
            if coll_job.state != CollectionJobState.FINISHED or coll_job.response is None:
                raise VectorError(f"the collection job ended {coll_job.state}: "
                                  f"{coll_job.error} {coll_job.error_detail}")
            collection = leader.get_collection_job(tx, leader_task, coll_id)
        leader_rng.check_exhausted()
        helper_rng.check_exhausted()
    except (DapProblem, NotReady) as exc:
        # The example's inputs make an Aggregator refuse a request (a `check` of an
        # edited file): a vector error, not a crash.
        raise VectorError(f"the protocol run failed: {type(exc).__name__}: {exc}") from None
    finally:
        leader_store.close()
        helper_store.close()
    return ExampleRun(result.job_id, init_request, result.response, coll_id,
                      share_request.body, share.share_id, share.response, collection)


def message(cls: Any, data: bytes) -> dict[str, Any]:
    """The vector entry (``fields`` and ``encoding``) of a message the core produced:
    ``data`` decoded with ``cls``, which must encode back to the same bytes."""
    value = cls.decode(data)
    if value.encode() != data:
        raise VectorError(f"{cls.__name__} does not encode back to the core's bytes")
    return {"fields": value.to_json(), "encoding": bytes(data).hex()}


__all__ = ["ExampleRun", "RecordedRng", "message", "run_example"]
