"""`ppm interop serve`: the interop test API of one role (see the package docstring for
the request fields).

All requests are POSTs of JSON objects under ``/internal/test/``; every answer is a JSON
object with ``status`` (``"success"``, ``"error"``, or for collection_poll ``"complete"``
/ ``"in progress"``) and, on error, ``error`` with the reason. A command that was
understood is answered 200 whatever the DAP outcome (draft Section 4); a body that is not
a JSON object gets 400; an unknown ``/internal/test/`` path gets 404; every answer is
``Content-Type: application/json`` exactly. The Leader and Helper also serve their DAP
resources on the same port, at the root (:data:`DAP_ENDPOINT`, what endpoint_for_task
returns, as Janus's driver requires) and under :data:`DAP_PREFIX`: one DAP app, backed by
one SQLite datastore (see interop/__init__.py for the Janus dialect).

Protocol versions are a table (:data:`VERSIONS`: one :class:`Version` for each shipped
profile with ``interop`` field readers, ``"dap-18"`` and ``"dap-09"`` today): a request's
version (its ``dap_version``, else ``batch_mode`` means dap-18 and anything else
dap-09; see :func:`interop.fields.request_version`) selects the implementation of the
role's commands; collection_start and collection_poll follow their task's version.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from ppm_reference.dap.client import Client, UploadError
from ppm_reference.dap.collector import CollectionError, Collector
from ppm_reference.dap.common import ReportError
from ppm_reference.dap.core.tasks import validate_task
from ppm_reference.dap.hpke import HpkeError, HpkeKeypair, generate_keypair
from ppm_reference.dap.origin import NO_COMPRESSION
from ppm_reference.dap.profiles import Profile, get_profile
from ppm_reference.dap.profiles.interop_base import InteropFields, TaskFields
from ppm_reference.dap.server.app import build_app
from ppm_reference.dap.server.common import STATE_KEY, AppState
from ppm_reference.dap.server.config import AggregatorConfig
from ppm_reference.dap.server.serving import (
    HttpLimits,
    HttpProblem,
    handler_args,
    read_limited,
    serve_forever,
)
from ppm_reference.dap.storage import TaskRecord, open_datastore
from ppm_reference.dap.task import DapTask
from ppm_reference.interop import fields as f
from ppm_reference.interop.fields import FieldError

log = logging.getLogger("ppm.interop")

ROLES = ("client", "leader", "helper", "collector")
# An Aggregator serves its DAP resources at the root of its port (endpoint_for_task's
# answer, which Janus's driver requires and uses) and, as before, under DAP_PREFIX.
DAP_ENDPOINT = "/"
DAP_PREFIX = "/dap"

Json = dict[str, Any]


def json_response(body: Json, status: int = 200,
                  headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer with ``Content-Type: application/json`` exactly: Janus's interop driver
    compares the header with that string, so aiohttp's ``; charset=utf-8`` (JSON is UTF-8
    by definition, RFC 8259 Section 8.1) fails it."""
    return web.Response(body=json.dumps(body).encode(), status=status, headers=headers,
                        content_type="application/json")


def ok(**extra: Any) -> Json:
    return {"status": "success", **extra}


def error(reason: str) -> Json:
    return {"status": "error", "error": reason}


# ---------------------------------------------------------------------------------------
# Role state
# ---------------------------------------------------------------------------------------


@dataclass
class CollectorTask:
    version: str
    task: DapTask
    keypair: HpkeKeypair
    auth_token: str
    collector: Collector


@dataclass
class CollectionHandle:
    version: str
    task_id: bytes
    job_url: str
    request: Any                    # CollectionJobReq (DAP-18) / CollectionReq (DAP-09)
    result: Json | None = None


@dataclass
class Node:
    """What one `ppm interop serve` process holds."""

    role: str
    aggregator: AppState | None = None               # Leader / Helper
    collector_tasks: dict[bytes, CollectorTask] = field(default_factory=dict)
    handles: dict[str, CollectionHandle] = field(default_factory=dict)
    _session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60),
                                                  auto_decompress=False,
                                                  headers=NO_COMPRESSION)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


# ---------------------------------------------------------------------------------------
# Protocol versions
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decoded:
    """A collection result, whatever the version: times in seconds."""

    report_count: int
    interval_start: int
    interval_duration: int
    aggregate_result: Any
    batch_id: bytes | None = None


class Version:
    """The role commands of one DAP version, through dap.client, dap.collector and the
    aggregator apps (all profile-generic). The version's profile supplies the rest: how
    request fields become its task and a ``query`` object its query
    (``profile.interop``), and how a Collector decodes a finished collection
    (``profile.flow``); the commands are shared."""

    def __init__(self, profile: Profile) -> None:
        if profile.interop is None:
            raise ValueError(f"profile {profile.name} has no interop field readers")
        self.profile = profile
        self.fields: InteropFields = profile.interop

    @property
    def name(self) -> str:
        return self.profile.name

    def task_fields(self, body: Json, role: str) -> TaskFields:
        return self.fields.task_fields(self.profile, body, role)

    def query(self, body: Any, task: Any) -> Any:
        return self.fields.query(self.profile, body, task)

    def decode(self, ct: CollectorTask, request: Any, resp: Any) -> Decoded:
        flow = ct.task.profile.flow
        result = flow.collect_result(ct.task, ct.keypair, request, resp,
                                     vdaf=ct.collector.vdaf)
        unit = flow.interval_unit(ct.task)
        batch_id = result.batch_id
        return Decoded(result.report_count, int(result.interval.start) * unit,
                       int(result.interval.duration) * unit, result.aggregate_result,
                       bytes(batch_id) if batch_id is not None else None)

    async def aggregator_add_task(self, node: Node, body: Json) -> Json:
        st = node.aggregator
        assert st is not None
        role = f.string(body, "role")
        if role != node.role:
            raise FieldError(f"role {role!r} sent to the {node.role}")
        tf = self.task_fields(body, role)
        verify_key = f.b64decode(f.require(body, "vdaf_verify_key"), "vdaf_verify_key")
        if len(verify_key) != tf.vdaf.VERIFY_KEY_SIZE:
            raise FieldError(f"vdaf_verify_key must be {tf.vdaf.VERIFY_KEY_SIZE} bytes, "
                             f"got {len(verify_key)}")
        collector_config = f.hpke_config(body, "collector_hpke_config")
        token = f.auth_token(body, "leader_authentication_token")
        collector_token = (f.auth_token(body, "collector_authentication_token")
                           if role == "leader" else None)
        options: Json = {}
        if tf.max_batch_size is not None:
            options["max_batch_size"] = tf.max_batch_size
        header = peer_auth_header(self.profile, body)
        if header is not None:
            options["auth_header"] = header
        record = TaskRecord(
            task_id=bytes(tf.task.task_id), role=role, profile=self.name,
            config=tf.task.config_bytes(), vdaf_verify_key=verify_key,
            collector_hpke_config=collector_config.encode(), aggregator_auth_token=token,
            collector_auth_token=collector_token, options=json.dumps(options, sort_keys=True))
        try:
            validate_task(record, get_profile, st.config.min_batch_size_floor)
        except (ValueError, KeyError, TypeError) as exc:
            raise FieldError(f"task refused: {exc}") from None
        with st.datastore.transaction() as tx:
            existing = tx.get_task(record.task_id)
            if existing is not None and existing != record:
                return error("a different task with this task_id exists")
            tx.put_task(record)
        st.tasks.invalidate(record.task_id)
        log.info("%s: added %s task %s (%s)", node.role, self.name,
                 f.b64encode(record.task_id), type(tf.vdaf).__name__)
        return ok(**({"notes": list(tf.notes)} if tf.notes else {}))

    async def collector_add_task(self, node: Node, body: Json) -> Json:
        tf = self.task_fields(body, "collector")
        token = f.auth_token(body, "collector_authentication_token")
        task_id = bytes(tf.task.task_id)
        header = peer_auth_header(self.profile, body)
        existing = node.collector_tasks.get(task_id)
        if existing is not None and existing.version == self.name \
                and existing.task.config_bytes() == tf.task.config_bytes() \
                and existing.auth_token == token and existing.collector.auth_header == header:
            keypair = existing.keypair
        else:
            keypair = generate_keypair(secrets.randbelow(256))
            collector = Collector(tf.task, keypair, token, session=node.session,
                                  auth_header=header)
            node.collector_tasks[task_id] = CollectorTask(self.name, tf.task, keypair, token,
                                                          collector)
        log.info("collector: added %s task %s (%s)", self.name, f.b64encode(task_id),
                 type(tf.vdaf).__name__)
        return ok(collector_hpke_config=f.b64encode(keypair.config.encode()),
                  **({"notes": list(tf.notes)} if tf.notes else {}))

    async def upload(self, node: Node, body: Json) -> Json:
        tf = self.task_fields(body, "client")
        measurement = f.measurement_from_json(tf.vdaf, f.require(body, "measurement"))
        when = body.get("time")
        time_seconds = f.integer(when, "time") if when is not None else None
        client = Client(tf.task, session=node.session)
        try:
            result = await client.upload([measurement], time_seconds=time_seconds)
        except UploadError as exc:
            return error(str(exc))
        except self.fields.report_errors as exc:
            return error(f"cannot build the report: {exc}")
        except aiohttp.ClientError as exc:
            return error(f"upload failed: {type(exc).__name__}: {exc}")
        if result.rejected:
            reasons = sorted({_report_error(e) for e in result.rejected.values()})
            return error(f"report rejected by the Leader: {', '.join(reasons)}")
        return ok()

    async def collection_start(self, node: Node, body: Json, ct: CollectorTask) -> Json:
        agg_param = (f.b64decode(body["agg_param"], "agg_param")
                     if body.get("agg_param") is not None else b"")
        query = self.query(f.require(body, "query"), ct.task)
        try:
            job_url, req = await ct.collector.start(query, agg_param)
        except CollectionError as exc:
            return error(str(exc))
        except aiohttp.ClientError as exc:
            return error(f"collection request failed: {type(exc).__name__}: {exc}")
        handle = secrets.token_urlsafe(16)
        node.handles[handle] = CollectionHandle(self.name, bytes(ct.task.task_id), job_url,
                                                req)
        return ok(handle=handle)

    async def collection_poll(self, node: Node, handle: CollectionHandle) -> Json:
        if handle.result is not None:
            return handle.result
        ct = node.collector_tasks[handle.task_id]
        try:
            resp, _ = await ct.collector.poll(handle.job_url)
        except CollectionError as exc:
            return error(str(exc))
        except aiohttp.ClientError as exc:
            return error(f"poll failed: {type(exc).__name__}: {exc}")
        if resp is None:
            return {"status": "in progress"}
        try:
            result = self.decode(ct, handle.request, resp)
        except (ValueError, HpkeError) as exc:
            handle.result = error(f"cannot decrypt or unshard the aggregate: {exc}")
            return handle.result
        out: Json = {
            "status": "complete", "report_count": result.report_count,
            "interval_start": result.interval_start,
            "interval_duration": result.interval_duration,
            "result": f.result_to_json(result.aggregate_result)}
        if result.batch_id is not None:
            out["batch_id"] = f.b64encode(result.batch_id)
        if ct.collector.policy is not None:
            out["debiased_result"] = f.result_to_json(ct.collector.policy.debias_agg_result(
                result.aggregate_result, result.report_count))
        handle.result = out
        try:
            await ct.collector.delete(handle.job_url)
        except (CollectionError, aiohttp.ClientError) as exc:
            log.warning("could not delete collection job %s: %s", handle.job_url, exc)
        return out


def peer_auth_header(profile: Profile, body: Json) -> str | None:
    """The header of the DAP tokens of a task added by ``body`` when it is not the
    profile's own: ``DAP-Auth-Token`` for a DAP-18-or-later task of the Janus dialect
    (:func:`interop.fields.request_dialect`), whose interop aggregator accepts no other.
    Our Aggregators accept both headers from any peer (dap.server.common.bearer_token)."""
    if f.request_dialect(body) == "janus" and profile.auth_header != "DAP-Auth-Token":
        return "DAP-Auth-Token"
    return None


def _report_error(err: ReportError | int) -> str:
    try:
        return ReportError(err).name.lower()
    except ValueError:
        return str(err)


# dap_version -> implementation: every profile with interop field readers.
VERSIONS: dict[str, Version] = {p.name: Version(p) for p in f.interop_profiles()}


def version_of(body: Json) -> Version:
    """The version of a request (see :func:`interop.fields.request_version`)."""
    return VERSIONS[f.request_version(body)]


# ---------------------------------------------------------------------------------------
# HTTP layer
# ---------------------------------------------------------------------------------------

NODE_KEY: web.AppKey[Node] = web.AppKey("interop_node", Node)
Command = Callable[[Node, Json], Awaitable[Json]]


def command(func: Command) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """Wrap a command: parse the JSON object, map FieldError to a status error, never let
    an exception take the server down."""

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            raw = await read_limited(request, MAX_COMMAND_BYTES, BODY_TIMEOUT)
        except HttpProblem as exc:
            resp = json_response(error(exc.detail), status=exc.status,
                                 headers=exc.headers)
            resp.force_close()
            return resp
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return json_response(error("request body is not JSON"), status=400)
        if not isinstance(body, dict):
            return json_response(error("request body must be a JSON object"), status=400)
        node = request.app[NODE_KEY]
        try:
            out = await func(node, body)
        except FieldError as exc:
            out = error(str(exc))
        except Exception as exc:  # noqa: BLE001 - report, log and stay up
            log.exception("%s %s failed", node.role, request.path)
            out = error(f"internal error: {type(exc).__name__}: {exc}")
        if out.get("status") == "error":
            log.warning("%s %s: %s", node.role, request.path, out.get("error"))
        else:
            log.info("%s %s: %s", node.role, request.path, out.get("status"))
        return json_response(out)

    return handler


async def cmd_ready(node: Node, body: Json) -> Json:
    return ok()


async def cmd_endpoint_for_task(node: Node, body: Json) -> Json:
    f.task_id_field(body)
    role = f.string(body, "role")
    if role != node.role:
        raise FieldError(f"role {role!r} sent to the {node.role}")
    version_of(body)
    return ok(endpoint=DAP_ENDPOINT)


async def cmd_add_task(node: Node, body: Json) -> Json:
    impl = version_of(body)
    if node.role == "collector":
        return await impl.collector_add_task(node, body)
    return await impl.aggregator_add_task(node, body)


async def cmd_upload(node: Node, body: Json) -> Json:
    return await version_of(body).upload(node, body)


async def cmd_collection_start(node: Node, body: Json) -> Json:
    """Follows the version the task was added with; a ``dap_version`` must agree."""
    task_id = f.task_id_field(body)
    ct = node.collector_tasks.get(task_id)
    if ct is None:
        raise FieldError("unknown task_id: add_task it first")
    if body.get("dap_version") is not None and version_of(body).name != ct.version:
        raise FieldError(f"dap_version {body['dap_version']!r} does not match the task, "
                         f"added as {ct.version}")
    return await VERSIONS[ct.version].collection_start(node, body, ct)


async def cmd_collection_poll(node: Node, body: Json) -> Json:
    handle_id = f.string(body, "handle")
    handle = node.handles.get(handle_id)
    if handle is None:
        raise FieldError("unknown handle")
    return await VERSIONS[handle.version].collection_poll(node, handle)


# role -> command name -> implementation (draft Sections 4.2 to 4.4).
COMMANDS: dict[str, dict[str, Command]] = {
    "client": {"ready": cmd_ready, "upload": cmd_upload},
    "leader": {"ready": cmd_ready, "endpoint_for_task": cmd_endpoint_for_task,
               "add_task": cmd_add_task},
    "helper": {"ready": cmd_ready, "endpoint_for_task": cmd_endpoint_for_task,
               "add_task": cmd_add_task},
    "collector": {"ready": cmd_ready, "add_task": cmd_add_task,
                  "collection_start": cmd_collection_start,
                  "collection_poll": cmd_collection_poll},
}


# The test API's request limits: its commands are small JSON objects (an upload's
# measurement is the largest, a vector of a few thousand numbers).
MAX_COMMAND_BYTES = 4 * 1024 * 1024
BODY_TIMEOUT = 30.0
TOKEN_ENV = "PPM_INTEROP_TOKEN"
TOKEN_KEY: web.AppKey[str] = web.AppKey("interop_token", str)


def token_middleware(token: str) -> Any:
    """Require `Authorization: Bearer <token>` on the test API (`/internal/test/...`).

    The interop test design (draft-dcook-ppm-dap-interop-test-design-07) defines no
    authentication: a stock runner sends none, and relies on the containers sitting on
    a private network. Outside one, a token keeps anyone who reaches the port from adding
    tasks with their own credentials; `ppm interop run --token` sends it. The DAP
    resources (at the root and under /dap/) are authenticated by DAP itself and are not
    affected."""
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def check(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.startswith("/internal/test/"):
            got = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(got, expected):
                return json_response(error("the test API requires its token "
                                           "(Authorization: Bearer ...)"),
                                     status=401 if not got else 403)
        response: web.StreamResponse = await handler(request)
        return response

    return check


async def not_found(request: web.Request) -> web.StreamResponse:
    return json_response(error(f"no test API {request.path} for this role"), status=404)


def build_interop_app(role: str, data_dir: str | Path | None = None, *,
                      aggregator_overrides: dict[str, Any] | None = None,
                      token: str | None = None) -> web.Application:
    """The application of one role. For an Aggregator, the DAP app (with its background
    worker) is mounted under DAP_PREFIX, its SQLite datastore in `data_dir` (a temporary
    folder, removed on shutdown, when None). With a `token`, the test API requires it
    (see :func:`token_middleware`)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}")
    node = Node(role)
    limits = AggregatorConfig(role="leader", datastore="", **{
        k: v for k, v in (aggregator_overrides or {}).items()
        if k in ("idle_timeout", "body_timeout", "max_connections")}).limits
    # The DAP app mounted below reads its bodies with its own limits; this backstop is
    # the largest of them.
    app = web.Application(client_max_size=64 * 1024 * 1024,
                          middlewares=[token_middleware(token)] if token else [],
                          handler_args=handler_args(limits))
    app[LIMITS_KEY] = limits
    app[NODE_KEY] = node
    for name, func in COMMANDS[role].items():
        app.router.add_post(f"/internal/test/{name}", command(func))
    app.router.add_route("*", "/internal/test/{tail:.*}", not_found)
    if role in ("leader", "helper"):
        temp = data_dir is None
        folder = Path(tempfile.mkdtemp(prefix=f"ppm-interop-{role}-") if temp
                      else data_dir)  # type: ignore[arg-type]
        folder.mkdir(parents=True, exist_ok=True)
        config = AggregatorConfig(**{
            "role": role, "datastore": str(folder / f"{role}.sqlite"),
            "sqlite_synchronous": "NORMAL", "min_job_size": 1, "straggler_age": 0.0,
            "worker_interval": 0.05, "retry_after": 1, **(aggregator_overrides or {})})
        datastore = open_datastore(config.datastore,
                                   sqlite_synchronous=config.sqlite_synchronous)
        dap_app = build_app(config, datastore=datastore)
        node.aggregator = dap_app[STATE_KEY]
        app.add_subapp(DAP_PREFIX, dap_app)
        # Registered last, so that /internal/test/ and /dap/ resolve first.
        app.router.add_route("*", "/{tail:.*}", dap_at_root)

        async def close_datastore(app: web.Application) -> None:
            datastore.close()
            if temp:
                shutil.rmtree(folder, ignore_errors=True)

        app.on_cleanup.append(close_datastore)

    async def close_node(app: web.Application) -> None:
        await node.close()

    app.on_cleanup.append(close_node)
    return app


async def dap_at_root(request: web.Request) -> web.StreamResponse:
    """A request for a DAP resource at the root of the port (``/hpke_config``,
    ``/tasks/...``): served by the DAP app mounted under DAP_PREFIX, as if it had been
    sent there -- the same routes, middlewares and state, so both paths are one
    Aggregator. (aiohttp mounts a sub-application only under a non-empty prefix, and a
    second copy of the DAP app would be a second Aggregator.)"""
    target = request.rel_url.with_path(DAP_PREFIX + request.rel_url.path)
    inner = request.clone(rel_url=target)
    inner[REDISPATCHED] = request.path
    # Application._handle resolves and runs a request through the app's router and
    # middlewares: what aiohttp itself calls for every request.
    response = await request.app._handle(inner)
    # The DAP app names new resources (Location) after the path it saw: give the peer
    # the root path it used.
    location = response.headers.get("Location")
    if location and location.startswith(DAP_PREFIX + "/") and not response.prepared:
        response.headers["Location"] = location[len(DAP_PREFIX):]
    return response


#: In a request re-dispatched by :func:`dap_at_root`, the root path it was sent to (the
#: outer app's middlewares see such a request twice).
REDISPATCHED: web.RequestKey[str] = web.RequestKey("ppm_interop_dap_at_root", str)


LIMITS_KEY: web.AppKey[HttpLimits] = web.AppKey("interop_limits", HttpLimits)
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class ServeError(Exception):
    """`ppm interop serve` cannot start as asked (one line)."""


def serve(role: str, host: str, port: int, data_dir: str | None = None,
          log_dir: str | None = None, token: str | None = None,
          allow_unauthenticated: bool = False) -> None:
    """Run one role until interrupted (SIGINT / SIGTERM). Without a token, only on a
    loopback address, unless `allow_unauthenticated` (the container: a stock draft-07
    runner sends no credential)."""
    if not token and host not in LOOPBACK and not allow_unauthenticated:
        raise ServeError(f"the test API on {host} would be open to anyone who reaches it: "
                         f"give a token (--token, --token-file or {TOKEN_ENV}), or "
                         "--allow-unauthenticated on a private test network")
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_dir:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(Path(log_dir) / f"{role}.log"))
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    app = build_interop_app(role, data_dir, token=token)
    log.info("interop %s listening on http://%s:%d/internal/test/ (%s)", role, host, port,
             "token required" if token else "no authentication")
    # SIGTERM (how the test runner stops containers) and SIGINT shut down cleanly: the
    # worker stops, the datastore closes, a temporary data folder is removed.
    serve_forever(app, host, port, app[LIMITS_KEY])
