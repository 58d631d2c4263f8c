"""What the Leader and Helper apps share: the problem-document middleware, request
authentication, media types and the asynchronous-response conventions (DAP-18 Section 3)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from aiohttp import web

from ppm_reference.dap.common import Role, TaskID
from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.core.rand import OS_RNG, Rng
from ppm_reference.dap.core.tasks import AggregatorTask, Keyring, TaskCache
from ppm_reference.dap.problems import PROBLEM_MEDIA_TYPE
from ppm_reference.dap.profiles import DEFAULT_PROFILE, Profile, get_profile
from ppm_reference.dap.server.config import AggregatorConfig
from ppm_reference.dap.server.serving import HttpProblem, read_limited
from ppm_reference.dap.storage import Datastore
from ppm_reference.dap.storage.sqlite import FairRLock

log = logging.getLogger("ppm.server")

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CONFIG_KEY: web.AppKey[AggregatorConfig] = web.AppKey("config", AggregatorConfig)
STATE_KEY: web.AppKey[AppState] = web.AppKey("state", object)  # type: ignore[arg-type]


class Baton:
    """The right to do an aggregation job's work (decryption, VDAF preparation, and its
    transactions) in this process: one job thread at a time holds it.

    On CPython, threads doing HPKE and VDAF work side by side cost much more CPU for the
    same result: the GIL changes hands at every C call that releases it (cffi's XOF, the
    HPKE primitives), and a thread waiting for it is woken each time. Measured: the floor
    work (HPKE open and VDAF preparation) in 2-3 threads of one process took 1.6-2.2x the
    CPU per report of one thread; at 100 tasks (Count, SQLite, benchmarks/dap_e2e.py) the
    Helper took about 8 s of CPU for 10,000 reports with its jobs side by side, 4-5.5 s
    one at a time. Several cores are used by several processes (`frontends`, `drivers`),
    each with its own GIL.

    So that a large job does not hold up another task's (no request holds up another),
    the holder calls `pace` between chunks of reports (`dap.core` preparations,
    PACE_REPORTS): the baton then goes to the longest waiting job (a fair lock), and
    comes back in turn. Waiting threads sleep. Rule against deadlock: `pace` is never
    called inside a transaction (the baton could then wait for a job that waits for the
    transaction's lock); a holder may open transactions, and no other thread waits for the
    baton while holding one."""

    def __init__(self) -> None:
        self._lock = FairRLock()

    def __enter__(self) -> Baton:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def pace(self) -> None:
        """Hand the baton to the longest waiting job, if any, and wait for it again."""
        if self._lock.has_waiters():
            self._lock.release()
            self._lock.acquire()


class AppState:
    """Per-app objects: datastore, task cache, clock and randomness (both injectable for
    tests: the handlers and background workers pass `rng` to the protocol core)."""

    def __init__(self, config: AggregatorConfig, datastore: Datastore,
                 clock: Callable[[], float] = time.time, rng: Rng = OS_RNG) -> None:
        self.config = config
        self.datastore = datastore
        self.tasks = TaskCache(get_profile)
        self.clock = clock
        self.rng = rng
        self._keyring: Keyring | None = None
        self._keyring_at = 0.0
        # Blocking work (decoding, decryption, VDAF preparation, bounded transactions) runs
        # here, off the event loop; several threads, so that one large request does not
        # hold up another task's. 0 threads: on the event loop (deterministic tests).
        self.executor = (ThreadPoolExecutor(config.worker_threads,
                                            thread_name_prefix=f"ppm-{config.role}")
                         if config.worker_threads > 0 else None)
        # Aggregation jobs (decryption, VDAF preparation and their transactions) run in
        # threads of their own, each holding the `baton` (one at a time; see `Baton`).
        self.baton = Baton()
        self.job_executor = (ThreadPoolExecutor(config.worker_threads,
                                                thread_name_prefix=f"ppm-{config.role}-job")
                             if config.worker_threads > 0 else None)

    async def offload(self, func: Callable[..., T], *args: Any) -> T:
        """Run `func(*args)` in a worker thread (see `executor`), the event loop answering
        other requests meanwhile."""
        if self.executor is None:
            return func(*args)
        return await asyncio.get_running_loop().run_in_executor(self.executor, func, *args)

    async def transact(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`func(tx, *args, **kwargs)` in a datastore transaction, in a worker thread: a
        request handler never waits on the event loop for the datastore (on PostgreSQL,
        possibly for another process's lock), which would hold up every other request."""
        def run() -> T:
            with self.datastore.transaction() as tx:
                return func(tx, *args, **kwargs)
        return await self.offload(run)

    async def offload_job(self, func: Callable[..., T], *args: Any) -> T:
        """Run `func(*args)`, an aggregation job's work, in a job thread holding the
        `baton`. `func` may open transactions, and pass `self.baton.pace` to the core's
        preparation outside them (never inside one: see `Baton`)."""
        def run() -> T:
            with self.baton:
                return func(*args)
        if self.job_executor is None:
            return run()
        return await asyncio.get_running_loop().run_in_executor(self.job_executor, run)

    def close(self) -> None:
        for executor in (self.job_executor, self.executor):
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)

    def keyring(self) -> Keyring:
        """HPKE keys, reloaded at most once a second (so rotations take effect)."""
        now = time.monotonic()
        if self._keyring is None or now - self._keyring_at > 1.0:
            with self.datastore.read() as tx:
                self._keyring = Keyring.load(tx)
            self._keyring_at = now
        return self._keyring

    def invalidate_keyring(self) -> None:
        self._keyring = None

    def task(self, task_id: bytes, role: Role) -> AggregatorTask:
        # A loaded task is answered without the datastore (which a worker thread may be
        # holding for a large job's commit).
        task = self.tasks.peek(task_id)
        if task is not None and task.role == role:
            return task
        # A read (PostgreSQL: a snapshot beside the writers, without the exclusive mode's
        # lock): loading a task, on the event loop, must not wait for a writer.
        with self.datastore.read() as tx:
            return self.tasks.get(tx, task_id, role)


def problem_response(problem: DapProblem, profile: Profile = DEFAULT_PROFILE) -> web.Response:
    """The problem document of an error (DAP-18 Section 3.6, DAP-09 Section 3.2), with the
    error types of the task's profile."""
    token = profile.problem_token(problem.token)
    doc: dict[str, Any] = {"status": problem.status, "title": token}
    if (problem.dap_type or token != problem.token) and token in profile.problem_types:
        doc["type"] = profile.problem_type_uri(token)
    else:
        doc["type"] = "about:blank"
    if problem.detail:
        doc["detail"] = problem.detail
    if problem.task_id is not None:
        doc["taskid"] = TaskID(problem.task_id).to_base64url()
    if problem.unsupported_extensions is not None:
        doc["unsupported_extensions"] = list(problem.unsupported_extensions)
    import json

    return web.Response(status=problem.status, body=json.dumps(doc).encode(),
                        content_type=PROBLEM_MEDIA_TYPE)


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn protocol errors into problem documents (Section 3.6); never leak a traceback."""
    try:
        return await handler(request)
    except DapProblem as problem:
        return problem_response(problem, _problem_profile(request, problem))
    except HttpProblem as problem:
        return problem.response()
    except web.HTTPException as exc:
        if exc.status == 413:
            # aiohttp's own client_max_size (a backstop: handlers read with a limit).
            return HttpProblem(413, "Content Too Large", "request body too large").response()
        if exc.status >= 400 and exc.content_type != PROBLEM_MEDIA_TYPE:
            return problem_response(DapProblem(exc.reason, exc.text or "", exc.status,
                                               dap_type=False))
        raise
    except Exception:  # noqa: BLE001 - last line of defence: log and answer 500
        log.exception("internal error handling %s %s", request.method, request.path)
        return problem_response(DapProblem("internalError", "internal server error", 500,
                                           dap_type=False))


def _problem_profile(request: web.Request, problem: DapProblem) -> Profile:
    """The profile whose error types answer a problem: the task's, when the problem names
    a task the app has loaded (and DAP-18's otherwise)."""
    if problem.task_id is None:
        return DEFAULT_PROFILE
    st = request.app.get(STATE_KEY)
    task = st.tasks.peek(problem.task_id) if st is not None else None
    return task.profile if task is not None else DEFAULT_PROFILE


def require_method(request: web.Request, task: AggregatorTask, operation: str) -> None:
    """Resources shared by both profiles take the method the task's profile gives the
    operation (e.g. DAP-18 POSTs reports, DAP-09 PUTs them)."""
    method, _ = task.profile.request(operation)
    if request.method != method:
        raise DapProblem("methodNotAllowed", f"{task.profile.name} tasks use {method} for "
                         f"{operation}", 405, task_id=task.task_id, dap_type=False)


# Task IDs of recent requests, by their base64url form: the strict decode once per task
# rather than once per request (a report upload is one request per report). Bounded: IDs
# that are never seen again (a client trying random ones) only make it start over.
_TASK_IDS: dict[str, bytes] = {}
_TASK_IDS_MAX = 4096


def task_id_param(request: web.Request) -> bytes:
    raw = request.match_info["task_id"]
    task_id = _TASK_IDS.get(raw)
    if task_id is None:
        try:
            task_id = bytes(TaskID.from_base64url(raw))
        except (ValueError, binascii.Error, TypeError):
            raise DapProblem("unrecognizedTask", "malformed task ID", 404) from None
        if len(_TASK_IDS) >= _TASK_IDS_MAX:
            _TASK_IDS.clear()
        _TASK_IDS[raw] = task_id
    return task_id


def id_param(request: web.Request, name: str, size: int, token: str) -> bytes:
    raw = request.match_info[name]
    try:
        value = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
    except (ValueError, binascii.Error):
        value = b""
    if len(value) != size or b64url(value) != raw:
        # The handlers resolve the task first: its ID is known (Section 3.6: taskid).
        raise DapProblem(token, f"malformed {name}", 404, task_id=task_id_param(request))
    return value


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(bytes(data)).rstrip(b"=").decode()


def bearer_token(request: web.Request) -> str | None:
    """The request's token: `Authorization: Bearer T` (DAP-18 Section 3.5's example), or
    `DAP-Auth-Token: T`, which DAP-09 deployments, Janus and the interop test design use."""
    value = request.headers.get("Authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    legacy = request.headers.get("DAP-Auth-Token", "").strip()
    return legacy or None


def authenticate(request: web.Request, task: AggregatorTask, collector: bool) -> None:
    """Token authentication (DAP-18 Section 3.5, DAP-09 Section 3.1), compared in constant
    time. Checked before anything is read or written. Either header is accepted for
    either profile."""
    token = bearer_token(request)
    if token is None:
        raise DapProblem("unauthorized", "missing bearer token", 401, task_id=task.task_id,
                         dap_type=False)
    if not task.check_auth_token(token, collector=collector):
        raise DapProblem("forbidden", "wrong bearer token", 403, task_id=task.task_id,
                         dap_type=False)


async def read_body(request: web.Request, task: AggregatorTask, message: str,
                    limit: int) -> bytes:
    """The request body, after checking its media type against the expected message: at
    most `limit` bytes (413 otherwise, nothing read beyond the limit), uncompressed (415),
    within the configuration's `body_timeout` (408); see `serving.read_limited`."""
    profile = task.profile
    got = request.headers.get("Content-Type", "")
    if message_for_media_type(profile, got) != message:
        expected = profile.media_type_for(message)
        raise DapProblem("invalidMessage", f"expected Content-Type {expected}, got {got!r}",
                         415, task_id=task.task_id)
    return await read_limited(request, limit, request.app[STATE_KEY].config.body_timeout,
                              task_id=task.task_id)


# (profile name, Content-Type) -> (the profile, its message name or None): a Client sends
# the same Content-Type with every upload, parsed once. Bounded like _TASK_IDS.
_MESSAGE_NAMES: dict[tuple[str, str], tuple[Profile, str | None]] = {}
_MESSAGE_NAMES_MAX = 1024


def message_for_media_type(profile: Profile, content_type: str) -> str | None:
    """`Profile.message_for_media_type`, None for a media type the profile does not
    know."""
    key = (profile.name, content_type)
    cached = _MESSAGE_NAMES.get(key)
    if cached is not None and cached[0] is profile:  # (not another of that name)
        return cached[1]
    try:
        name: str | None = profile.message_for_media_type(content_type)
    except ValueError:
        name = None
    if len(_MESSAGE_NAMES) >= _MESSAGE_NAMES_MAX:
        _MESSAGE_NAMES.clear()
    _MESSAGE_NAMES[key] = (profile, name)
    return name


def message_response(task: AggregatorTask, message: str, body: bytes, status: int = 200,
                     location: str | None = None) -> web.Response:
    headers = {"Content-Type": task.profile.media_type_for(message)}
    if location:
        headers["Location"] = location
    return web.Response(status=status, body=body, headers=headers)


def not_ready_response(config: AggregatorConfig, location: str | None = None,
                       status: int = 200, retry_after: int | None = None) -> web.Response:
    headers = {"Retry-After": str(retry_after or config.retry_after)}
    if location:
        headers["Location"] = location
    return web.Response(status=status, headers=headers)


def state(request: web.Request) -> AppState:
    return request.app[STATE_KEY]


def hpke_config_response(st: AppState, raw: str | None) -> web.Response:
    """The answer to GET hpke_config (with `raw`, the `task_id` query parameter), for the
    resource above and for the Oblivious HTTP gateway."""
    profile = DEFAULT_PROFILE
    if raw is not None:
        try:
            task_id = bytes(TaskID.from_base64url(raw))
        except (ValueError, binascii.Error, TypeError):
            raise DapProblem("unrecognizedTask", "malformed task ID", 404) from None
        cached = st.tasks.peek(task_id)  # without the datastore, when loaded
        role: str | None
        if cached is not None:
            role, name = cached.record.role, cached.record.profile
        else:
            with st.datastore.transaction() as tx:
                record = tx.get_task(task_id)
            role, name = (record.role, record.profile) if record else (None, "")
        if role != st.config.role:
            raise DapProblem("unrecognizedTask", "unknown task", 404, task_id=task_id)
        profile = get_profile(name)
    config_list = st.keyring().config_list()
    return web.Response(body=config_list.encode(), headers={
        "Content-Type": profile.media_type_for("HpkeConfigList"),
        "Cache-Control": f"max-age={st.config.hpke_cache_max_age}",
    })
