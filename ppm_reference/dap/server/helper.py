"""The Helper's HTTP resources (DAP-18 Appendix A: aggregation jobs, aggregate shares) and
its background worker (asynchronous aggregation jobs and aggregate shares)."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from ppm_reference.dap.common import Role
from ppm_reference.dap.core import helper as core
from ppm_reference.dap.core.errors import DapProblem, NotReady
from ppm_reference.dap.core.tasks import AggregatorTask, Keyring
from ppm_reference.dap.server.common import (
    AppState,
    authenticate,
    b64url,
    id_param,
    message_response,
    not_ready_response,
    read_body,
    require_method,
    state,
    task_id_param,
)
from ppm_reference.dap.server.leader import backoff, describe, task_gone
from ppm_reference.dap.server.retention import RetentionTimer
from ppm_reference.dap.server.scheduling import HOLDER, WorkEvent, next_due, sleep_until_work
from ppm_reference.dap.storage import AggregateShareJobState, AggregationJobState

log = logging.getLogger("ppm.helper")
AGGREGATE_SHARE = "aggregate_share"   # lease kind (dap.server.scheduling)
WAKE_KEY: web.AppKey[asyncio.Event] = web.AppKey("helper_wake", asyncio.Event)
# Init requests up to this size are prepared without first looking for their job (see
# _init_job): a few dozen reports.
SMALL_INIT_BYTES = 16 * 1024


def _job_id(request: web.Request) -> bytes:
    return id_param(request, "job_id", 16, "unrecognizedAggregationJob")


async def post_aggregation_jobs(request: web.Request) -> web.StreamResponse:
    """POST {helper}/tasks/{task-id}/aggregation_jobs (DAP-18 Section 4.5.2.2)."""
    st = state(request)
    task = st.task(task_id_param(request), Role.HELPER)
    require_method(request, task, "aggregation_job_init")
    authenticate(request, task, collector=False)
    body = await read_body(request, task, "AggregationJobInitReq",
                           st.config.max_aggregation_job_bytes)
    keyring = st.keyring()
    result = await st.offload_job(_init_job, st, task, body, st.config.async_helper, keyring, None)
    # DEBUG: one line per job is noise at thousands of jobs a minute (and about 2 % of
    # the Helper's CPU with jobs of ten reports); failures are logged where they happen.
    log.debug("aggregation job %s (task %s): %s", result.job_id.hex(),
              bytes(task.task_id).hex()[:16],
              "deferred" if result.response is None else "answered")
    location = f"{request.path}/{b64url(result.job_id)}"
    if result.response is None:
        request.app[WAKE_KEY].set()
        return not_ready_response(st.config, f"{location}?step={result.step}", status=201)
    return message_response(task, "AggregationJobResp", result.response, 201, location)


async def put_aggregation_job(request: web.Request) -> web.StreamResponse:
    """PUT {helper}/tasks/{task-id}/aggregation_jobs/{id} (DAP-09 Section 4.5.1.2): the
    Leader names the job; answered synchronously, 201 with the AggregationJobResp."""
    st = state(request)
    task = st.task(task_id_param(request), Role.HELPER)
    require_method(request, task, "aggregation_job_init")
    authenticate(request, task, collector=False)
    job_id = _job_id(request)
    body = await read_body(request, task, "AggregationJobInitReq",
                           st.config.max_aggregation_job_bytes)
    keyring = st.keyring()
    result = await st.offload_job(_init_job, st, task, body, False, keyring, job_id)
    assert result.response is not None
    return message_response(task, "AggregationJobResp", result.response,
                            task.profile.statuses["aggregation_job_init"])


async def post_aggregation_job(request: web.Request) -> web.StreamResponse:
    """POST {helper}/tasks/{task-id}/aggregation_jobs/{id}: continue (DAP-18 Section
    4.5.4.2, DAP-09 Section 4.5.2.2)."""
    st = state(request)
    task = st.task(task_id_param(request), Role.HELPER)
    authenticate(request, task, collector=False)
    job_id = _job_id(request)
    body = await read_body(request, task, "AggregationJobContinueReq",
                           st.config.max_aggregation_job_bytes)

    def run() -> core.JobResult:
        with st.datastore.transaction() as tx:
            return core.continue_aggregation_job(tx, task, job_id, body)

    result = await st.offload(run)
    location = f"{request.path}?step={result.step}"
    assert result.response is not None
    return message_response(task, "AggregationJobResp", result.response, 200, location)


async def get_aggregation_job(request: web.Request) -> web.StreamResponse:
    """GET {helper}/tasks/{task-id}/aggregation_jobs/{id}?step=N (Section 4.5.2.2)."""
    st = state(request)
    task = st.task(task_id_param(request), Role.HELPER)
    authenticate(request, task, collector=False)
    job_id = _job_id(request)
    raw_step = request.query.get("step")
    try:
        step = int(raw_step) if raw_step is not None else None
    except ValueError:
        raise DapProblem("invalidMessage", "step must be an integer",
                         task_id=task.task_id) from None
    try:
        result = await st.transact(core.get_aggregation_job, task, job_id, step)
    except NotReady:
        return not_ready_response(st.config, f"{request.path}?step={step or 0}")
    assert result.response is not None
    return message_response(task, "AggregationJobResp", result.response, 200,
                            f"{request.path}?step={result.step}")


async def delete_aggregation_job(request: web.Request) -> web.StreamResponse:
    st = state(request)
    task = st.task(task_id_param(request), Role.HELPER)
    authenticate(request, task, collector=False)
    job_id = _job_id(request)
    await st.transact(core.delete_aggregation_job, task, job_id)
    return web.Response(status=200)


async def post_aggregate_shares(request: web.Request) -> web.StreamResponse:
    """POST {helper}/tasks/{task-id}/aggregate_shares (DAP-18 Section 4.6.4, DAP-09
    Section 4.6.2)."""
    st = state(request)
    task = st.task(task_id_param(request), Role.HELPER)
    authenticate(request, task, collector=False)
    body = await read_body(request, task, "AggregateShareReq", st.config.max_collection_bytes)
    # With a DP policy the noise is drawn by the background worker, off the request path,
    # where the profile has asynchronous resources (DAP-09 has none).
    asynchronous = "aggregate_share_poll" in task.profile.requests and (
        st.config.async_aggregate_shares or task.dp_policy is not None)

    def run() -> core.ShareResult:
        with st.datastore.transaction() as tx:
            return core.create_aggregate_share(tx, task, body, asynchronous, rng=st.rng)

    result = await st.offload(run)
    log.info("aggregate share %s (task %s): %s", result.share_id.hex(),
             bytes(task.task_id).hex()[:16],
             "deferred" if result.response is None else "released")
    location = f"{request.path}/{b64url(result.share_id)}"
    if result.response is None:
        request.app[WAKE_KEY].set()
        return not_ready_response(st.config, location, status=201)
    status = task.profile.statuses["aggregate_share"]
    return message_response(task, "AggregateShare", result.response, status,
                            location if status == 201 else None)


async def get_aggregate_share(request: web.Request) -> web.StreamResponse:
    st = state(request)
    task = st.task(task_id_param(request), Role.HELPER)
    authenticate(request, task, collector=False)
    share_id = id_param(request, "share_id", 16, "unrecognizedAggregateShare")
    try:
        result = await st.transact(core.get_aggregate_share, task, share_id)
    except NotReady:
        return not_ready_response(st.config)
    assert result.response is not None
    return message_response(task, "AggregateShare", result.response)


async def delete_aggregate_share(request: web.Request) -> web.StreamResponse:
    st = state(request)
    task = st.task(task_id_param(request), Role.HELPER)
    authenticate(request, task, collector=False)
    share_id = id_param(request, "share_id", 16, "unrecognizedAggregateShare")
    await st.transact(core.delete_aggregate_share, task, share_id)
    return web.Response(status=200)


def _init_job(st: AppState, task: AggregatorTask, body: bytes, asynchronous: bool,
              keyring: Keyring, job_id: bytes | None) -> core.JobResult:
    """Create (and unless asynchronous, process) an aggregation job, in a worker thread:
    the decryption and VDAF preparation run outside the transaction
    (`core.prepare_aggregation_job`), which then only checks and commits, so the
    datastore is held briefly whatever the job's size."""
    now = st.clock()
    prepared = None
    # A small request is prepared without first looking whether its job exists (a
    # retried request): a read transaction per job costs more than the rare preparation
    # wasted on a retry, which the transaction below then answers from the stored job.
    if not asynchronous and (len(body) <= SMALL_INIT_BYTES
                             or not _job_exists(st, task, body, job_id)):
        prepared = core.prepare_aggregation_job(task, keyring, body, now,
                                                st.config.clock_skew, pace=st.baton.pace)
    with st.datastore.transaction() as tx:
        return core.create_aggregation_job(tx, task, body, asynchronous, keyring, now,
                                           st.config.clock_skew, job_id=job_id, rng=st.rng,
                                           prepared=prepared)


def _job_exists(st: AppState, task: AggregatorTask, body: bytes,
                job_id: bytes | None) -> bool:
    """Whether the request is for a job already stored (answered from the datastore
    without preparing anything); the transaction that creates the job looks again."""
    with st.datastore.read() as tx:
        if job_id is not None:
            return tx.get_aggregation_job(task.task_id, job_id) is not None
        return tx.find_aggregation_job_by_hash(task.task_id, core.digest(body)) is not None


def add_routes(app: web.Application) -> None:
    app.router.add_post("/tasks/{task_id}/aggregation_jobs", post_aggregation_jobs)
    app.router.add_put("/tasks/{task_id}/aggregation_jobs/{job_id}", put_aggregation_job)
    app.router.add_post("/tasks/{task_id}/aggregation_jobs/{job_id}", post_aggregation_job)
    app.router.add_get("/tasks/{task_id}/aggregation_jobs/{job_id}", get_aggregation_job)
    app.router.add_delete("/tasks/{task_id}/aggregation_jobs/{job_id}", delete_aggregation_job)
    app.router.add_post("/tasks/{task_id}/aggregate_shares", post_aggregate_shares)
    app.router.add_get("/tasks/{task_id}/aggregate_shares/{share_id}", get_aggregate_share)
    app.router.add_delete("/tasks/{task_id}/aggregate_shares/{share_id}",
                          delete_aggregate_share)


async def worker(app: web.Application, st: AppState) -> None:
    """Process asynchronous aggregation jobs and aggregate shares; resumes whatever a
    previous process left unfinished (everything pending is in the datastore)."""
    wake = app[WAKE_KEY]
    if isinstance(wake, WorkEvent):
        wake.listen(st.datastore)  # other processes' notifications, if any
    retention = RetentionTimer(st)
    while True:
        try:
            # A job thread holding the baton, as the synchronous answers' work
            # (AppState.offload_job): one job's CPU-bound work at a time per process.
            busy = await st.offload_job(run_pending, st)
        except Exception:  # noqa: BLE001 - keep the worker alive, log, retry later
            log.exception("helper worker step failed")
            busy = False
        retention.maybe_run()
        if not busy:
            # Until the next due time, a wake-up, or the poll (dap.server.scheduling).
            try:
                due = await st.offload(next_due, st.datastore, "helper", retention.next_at)
            except Exception:  # noqa: BLE001 - the datastore is unavailable
                log.exception("helper: cannot read the next due time")
                due = None
            await sleep_until_work(wake, st.clock(), due, st.config.work_poll_interval,
                                   st.config.worker_interval)
        else:
            await asyncio.sleep(0)


def run_pending(st: AppState) -> bool:
    """One pass over pending Helper work, in a job thread holding the baton (`worker`;
    it hands the baton on between chunks of a job's reports). Returns whether anything
    was done.

    Each job and each aggregate share is processed on its own: one that raises (its
    task deleted, a VDAF too large for memory) has its error recorded on it and is
    retried with backoff, then failed after `max_item_attempts` (at once if its task
    is gone); the others go on."""
    keyring = st.keyring()
    now = st.clock()
    done = False
    with st.datastore.transaction() as tx:
        jobs = [j for j in tx.acquire_aggregation_jobs("helper", now,
                                                       min(30.0, st.config.job_lease), 8)
                if j.response is None]
        shares = tx.list_aggregate_share_jobs((AggregateShareJobState.START,), now)
    for job in jobs:
        try:
            task = st.task(job.task_id, Role.HELPER)
            # The decryption and VDAF work outside the transaction (see _init_job).
            prepared = core.prepare_aggregation_job(task, keyring, job.request, now,
                                                    st.config.clock_skew,
                                                    pace=st.baton.pace)
            with st.datastore.transaction() as tx:
                # Compare-and-set on the lease token (another process may have taken
                # the job over after our lease expired).
                fresh = tx.get_leased_aggregation_job(job.task_id, job.job_id,
                                                      job.lease_token)
                if fresh is not None and fresh.response is None \
                        and fresh.state == AggregationJobState.ACTIVE:
                    core.process_aggregation_job(tx, task, fresh, keyring, now,
                                                 st.config.clock_skew, prepared=prepared)
                    fresh.lease_expiry = 0.0
                    tx.update_aggregation_job(fresh)
        except Exception as exc:  # noqa: BLE001 - isolate the job, record the error
            _job_failed(st, job.task_id, job.job_id, exc, job.lease_token)
        done = True
    for share in shares:
        try:
            task = st.task(share.task_id, Role.HELPER)
            with st.datastore.transaction() as tx:
                fresh_share = tx.get_aggregate_share_job(share.task_id, share.share_id)
                # One process computes (and noises) a share: a lease held for the
                # transaction, which is where the share is computed.
                if fresh_share is not None and \
                        fresh_share.state == AggregateShareJobState.START and \
                        tx.try_lease(AGGREGATE_SHARE, bytes(share.task_id)
                                     + bytes(share.share_id), HOLDER, now,
                                     st.config.job_lease):
                    core.finish_aggregate_share(tx, task, fresh_share, rng=st.rng)
                    tx.release_lease(AGGREGATE_SHARE, bytes(share.task_id)
                                     + bytes(share.share_id), HOLDER)
                    done = True
        except Exception as exc:  # noqa: BLE001 - isolate the share, record the error
            _share_failed(st, share.task_id, share.share_id, exc)
            done = True
    return done


def _job_failed(st: AppState, task_id: bytes, job_id: bytes, exc: BaseException,
                lease_token: bytes) -> None:
    log.warning("aggregation job %s failed: %s", job_id.hex(), describe(exc))
    with st.datastore.transaction() as tx:
        fresh = tx.get_leased_aggregation_job(task_id, job_id, lease_token)
        if fresh is None or fresh.state != AggregationJobState.ACTIVE:
            return
        fresh.attempts += 1
        if task_gone(exc) or fresh.attempts >= st.config.max_item_attempts:
            core.fail_aggregation_job(tx, fresh, describe(exc))
            return
        fresh.error = describe(exc)
        fresh.next_attempt_at = st.clock() + backoff(fresh.attempts)
        fresh.lease_expiry = 0.0
        tx.update_aggregation_job(fresh)


def _share_failed(st: AppState, task_id: bytes, share_id: bytes, exc: BaseException) -> None:
    log.warning("aggregate share %s failed: %s", share_id.hex(), describe(exc))
    try:
        task = st.task(task_id, Role.HELPER)
    except Exception:  # noqa: BLE001 - the task is gone or cannot be loaded
        task = None
    with st.datastore.transaction() as tx:
        fresh = tx.get_aggregate_share_job(task_id, share_id)
        if fresh is None or fresh.state != AggregateShareJobState.START:
            return
        fresh.attempts += 1
        if task is None or fresh.attempts >= st.config.max_item_attempts:
            core.fail_aggregate_share(tx, task, fresh, describe(exc))
            return
        fresh.error_detail = describe(exc)
        fresh.next_attempt_at = st.clock() + backoff(fresh.attempts)
        tx.update_aggregate_share_job(fresh)
