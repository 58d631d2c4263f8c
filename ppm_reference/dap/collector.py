"""The DAP Collector (DAP-18 Section 4.6, DAP-09 Section 4.6): create a collection job,
poll it (honouring Retry-After), decrypt the aggregate shares, unshard, and debias with
the task's DP policy.

DAP-18: POST `CollectionJobReq` to `collection_jobs` (the Leader names the job), GET to
poll. DAP-09: PUT `CollectionReq` to `collection_jobs/{id}` with an ID the Collector draws,
POST to poll (202 until ready), and the Leader's answer is a `Collection` whose partial
batch selector gives the fixed_size batch ID. The profile chooses (``profile.flow``); the
Collector is written once."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from typing import Any

import aiohttp

from ppm_reference.dap.dp import decode_spec, policy_from_spec
from ppm_reference.dap.hpke import HpkeKeypair
from ppm_reference.dap.origin import (
    NO_COMPRESSION,
    ForeignLocation,
    read_response,
    resolve_location,
)
from ppm_reference.dap.problems import ProblemDocument, ProblemDocumentError
from ppm_reference.dap.task import DapTask
from ppm_reference.dap.taskprov import advertisement_headers


class CollectionError(Exception):
    def __init__(self, status: int, problem_type: str, detail: str) -> None:
        super().__init__(f"collection failed (HTTP {status}): {problem_type} {detail}".strip())
        self.status = status
        self.problem_type = problem_type
        self.detail = detail


@dataclass
class Collection:
    report_count: int
    interval: Any                   # the profile's Interval (DAP-09: seconds)
    aggregate_result: Any           # unsharded (field values mapped by the VDAF)
    debiased_result: Any            # after the DP policy's debias step (or the same)
    job_url: str
    batch_id: bytes | None = None   # DAP-09 fixed_size: the batch the Leader chose


class Collector:
    def __init__(self, task: DapTask, keypair: HpkeKeypair, auth_token: str,
                 session: aiohttp.ClientSession | None = None,
                 auth_header: str | None = None) -> None:
        """``auth_header``: the header that carries the token when it is not the
        profile's own (``"DAP-Auth-Token"`` for a Leader that accepts only that one, as
        Janus's interop aggregator does for DAP-18 tasks; or ``"Authorization"``)."""
        if auth_header not in (None, "Authorization", "DAP-Auth-Token"):
            raise ValueError(f"unknown auth_header {auth_header!r}")
        self.auth_header = auth_header
        self.task = task
        self.flow = task.profile.flow
        self.keypair = keypair
        self.auth_token = auth_token
        self.vdaf = task.vdaf()
        self._session = session
        self._own = session is None
        self.policy = (policy_from_spec(decode_spec(task.dp_policy), self.vdaf)
                       if task.dp_policy is not None else None)
        self.last_status: str | None = None  # what the last not-ready poll waited for

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            # Answers uncompressed and bounded (dap/origin.py).
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60),
                                                  auto_decompress=False,
                                                  headers=NO_COMPRESSION)
        return self._session

    async def close(self) -> None:
        if self._own and self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Collector:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        if self.auth_header == "DAP-Auth-Token":
            name, value = self.auth_header, self.auth_token
        elif self.auth_header == "Authorization":
            name, value = self.auth_header, f"Bearer {self.auth_token}"
        else:
            name, value = self.task.profile.auth_header_for(self.auth_token)
        # A taskprov task is advertised in every request (draft-ietf-ppm-dap-taskprov
        # Section 3.9, "Collector Behavior").
        h = {name: value, **advertisement_headers(self.task)}
        if content_type:
            h["Content-Type"] = content_type
        return h

    async def start(self, query: Any, agg_param: bytes = b"") -> tuple[str, Any]:
        """Create the collection job; returns its URL and the request (DAP-18: POST a
        CollectionJobReq, the URL from Location; DAP-09: PUT a CollectionReq to a URL
        with a fresh job ID)."""
        profile = self.task.profile
        req = self.flow.collection_request(query, agg_param)
        method, resource = profile.request("collection_job_create")
        ids: dict[str, bytes] = {"task_id": bytes(self.task.task_id)}
        if self.flow.collector_chooses_job_id:
            ids["collection_job_id"] = secrets.token_bytes(16)
        url = profile.resource_url(resource, self.task.leader_aggregator_endpoint, **ids)
        async with self.session.request(method, url, data=req.encode(), headers=self._headers(
                profile.media_type_for(req)), allow_redirects=False) as resp:
            content = await read_response(resp)
            _check_status(resp.status, content, resp.headers.get("Location"))
            location = resp.headers.get("Location")
        if self.flow.collector_chooses_job_id:
            return url, req
        if not location:
            raise CollectionError(resp.status, "", "no Location header")
        try:
            # The job is polled with the token: only on the Leader's origin (dap/origin.py).
            return resolve_location(url, location), req
        except ForeignLocation as exc:
            raise CollectionError(resp.status, "", str(exc)) from None

    async def poll(self, job_url: str) -> tuple[Any | None, float]:
        method, _ = self.task.profile.request("collection_job_poll")
        async with self.session.request(method, job_url, headers=self._headers(),
                                        allow_redirects=False) as resp:
            content = await read_response(resp)
            _check_status(resp.status, content, resp.headers.get("Location"))
            retry = resp.headers.get("Retry-After")
            # Our Leader says what a job waits for (dap.server.status; not in the drafts).
            self.last_status = resp.headers.get("PPM-Collection-Status")
        if not content or resp.status == 202:
            return None, float(retry) if retry else 1.0
        return self.flow.decode_collection(content), 0.0

    async def collect(self, query: Any, agg_param: bytes = b"", timeout: float = 120.0,
                      max_poll_interval: float = 1.0, delete_after: bool = True) -> Collection:
        """Run a collection job to the end and return the (debiased) result.

        With `delete_after` (the default) the job is deleted once its result is in hand or
        it has failed (Section 4.6.3; the batch stays collected). DAP-18 makes creation
        idempotent on the request bytes, and every leader-selected `CollectionJobReq` is
        the same bytes: without the deletion, asking for the next batch would return the
        previous job, and retrying after `invalidBatchSize` would return the failed one."""
        job_url, req = await self.start(query, agg_param)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                resp, retry_after = await self.poll(job_url)
            except CollectionError:
                if delete_after:
                    await self._delete_quietly(job_url)
                raise
            if resp is not None:
                break
            if loop.time() > deadline:
                raise CollectionError(0, "timeout", f"job {job_url} not ready after "
                                      f"{timeout:.0f} s")
            await asyncio.sleep(min(retry_after, max_poll_interval))
        if delete_after:
            await self._delete_quietly(job_url)
        result = self.flow.collect_result(self.task, self.keypair, req, resp, vdaf=self.vdaf)
        batch_id = result.batch_id
        debiased = result.aggregate_result
        if self.policy is not None:
            debiased = self.policy.debias_agg_result(result.aggregate_result,
                                                     result.report_count)
        return Collection(result.report_count, result.interval, result.aggregate_result,
                          debiased, job_url, batch_id)

    async def _delete_quietly(self, job_url: str) -> None:
        try:
            await self.delete(job_url)
        except (CollectionError, aiohttp.ClientError):
            pass

    async def delete(self, job_url: str) -> None:
        async with self.session.delete(job_url, headers=self._headers(),
                                       allow_redirects=False) as resp:
            _check_status(resp.status, await read_response(resp), resp.headers.get("Location"))


def _check_status(status: int, content: bytes, location: str | None) -> None:
    """Errors, and redirects (never followed: the token stays with the Leader's origin),
    become CollectionError."""
    if 300 <= status < 400:
        raise CollectionError(status, "", f"the Leader redirected to {location!r}; "
                                          "redirects are not followed")
    if status >= 400:
        raise _error(status, content)


def _error(status: int, content: bytes) -> CollectionError:
    try:
        doc = ProblemDocument.from_json(content)
        return CollectionError(status, doc.type, doc.detail or "")
    except ProblemDocumentError:
        return CollectionError(status, "", content[:200].decode(errors="replace"))
