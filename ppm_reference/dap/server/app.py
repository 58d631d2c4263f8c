"""Build and run the Leader or Helper aiohttp application.

Resources (DAP-18 Appendix A) are served at the root of the listening address:
`/hpke_config`, `/tasks/{task-id}/...`; the admin API (provisioning tasks, rotating HPKE
keys) is under `/internal/`, enabled by an `admin_token` in the configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from ppm_reference.dap.common import Role
from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.core.rand import OS_RNG, Rng
from ppm_reference.dap.core.tasks import AggregatorTask, add_hpke_key
from ppm_reference.dap.dp import keep_noise_reserves
from ppm_reference.dap.server import admin, gateway, logs, metrics, taskprov
from ppm_reference.dap.server import helper as helper_routes
from ppm_reference.dap.server import leader as leader_routes
from ppm_reference.dap.server.common import (
    CONFIG_KEY,
    STATE_KEY,
    AppState,
    Handler,
    hpke_config_response,
    problem_middleware,
    state,
)
from ppm_reference.dap.server.config import AggregatorConfig, ConfigError
from ppm_reference.dap.server.scheduling import WorkEvent
from ppm_reference.dap.server.serving import (
    event_loop_name,
    handler_args,
    run_without_listener,
    serve_forever,
    ssl_context,
)
from ppm_reference.dap.storage import Datastore, HpkeKeyState, open_datastore

log = logging.getLogger("ppm.server")


async def get_hpke_config(request: web.Request) -> web.StreamResponse:
    """GET {aggregator}/hpke_config (DAP-18 Section 4.4.1; DAP-09 Section 4.4.1 with
    `?task_id=`): the active configurations, newest (preferred) first, cacheable.

    The keys are the Aggregator's, not a task's. With a `task_id` the task must exist
    (`unrecognizedTask` otherwise, as DAP-09 requires) and the answer has its profile's
    media type: exactly `application/dap-hpke-config-list` for a DAP-09 task, which
    DAP-09 Clients check. Without one, DAP-18's."""
    return hpke_config_response(state(request), request.query.get("task_id"))


@web.middleware
async def peer_log_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """With `log_request_peers`: one log line per request naming the peer's address, so
    that an audit (or a test) can see which addresses reach this server. Off by default
    (paper 000 Section 4.8: minimize logging)."""
    log.info("request from %s: %s %s", request.remote, request.method, request.path)
    return await handler(request)


def ensure_hpke_key(datastore: Datastore, rng: Rng) -> None:
    """A fresh aggregator gets one active X25519 key."""
    with datastore.transaction() as tx:
        if not [k for k in tx.list_hpke_keys() if k.state == HpkeKeyState.ACTIVE]:
            add_hpke_key(tx, HpkeKeyState.ACTIVE, rng=rng)


class DpTaskList:
    """`dp_tasks`, listed again only after `spacing` times as long as the last listing
    took: the noise reserves are checked often, and listing (and loading) every task each
    time would cost an idle Aggregator with many tasks a share of a core
    (benchmarks/idle_tasks.py), while with a few tasks a new DP task's reserve starts
    filling at the next check."""

    def __init__(self, st: AppState, spacing: float = 100.0) -> None:
        self.st = st
        self.spacing = spacing
        self._tasks: list[AggregatorTask] = []
        self._next = 0.0

    def __call__(self) -> list[AggregatorTask]:
        start = time.monotonic()
        if start >= self._next:
            self._tasks = dp_tasks(self.st)
            done = time.monotonic()
            self._next = done + self.spacing * (done - start)
        return self._tasks


def dp_tasks(st: AppState) -> list[AggregatorTask]:
    """This Aggregator's tasks that have a DP policy (for their noise reserves)."""
    role = Role.LEADER if st.config.role == "leader" else Role.HELPER
    out = []
    # A read snapshot: the listing (about 0.4 s for 1,000 tasks on their first load)
    # does not hold up the writers.
    with st.datastore.read() as tx:
        for record in tx.list_tasks():
            if record.role != st.config.role:
                continue
            try:
                task = st.tasks.get(tx, record.task_id, role)
            except (DapProblem, ValueError):
                continue  # refused when used, with the reason
            if task.dp_policy is not None:
                out.append(task)
    return out


# The background worker's asyncio tasks (a driver's health check looks at them).
WORKER_TASKS: web.AppKey[list[asyncio.Task[None]]] = web.AppKey("worker_tasks", list)


def health_app(app: web.Application) -> web.Application:
    """A driver's health check (`health_port`): GET /healthz answers 200 while its
    background worker runs, 503 once it has stopped (it never should)."""
    async def healthz(request: web.Request) -> web.StreamResponse:
        tasks = app.get(WORKER_TASKS, [])
        running = bool(tasks) and not any(t.done() for t in tasks)
        return web.json_response({"role": app[CONFIG_KEY].role, "mode": "driver",
                                  "worker": "running" if running else "stopped"},
                                 status=200 if running else 503)

    health = web.Application()
    health.router.add_get("/healthz", healthz)
    return health


def build_app(config: AggregatorConfig, datastore: Datastore | None = None,
              clock: Callable[[], float] = time.time,
              background: bool = True, rng: Rng = OS_RNG) -> web.Application:
    """The Leader's or Helper's application. With `background` (and unless the
    configuration's `mode` is "frontend"), its worker starts with the app (and is
    cancelled on shutdown). `rng` is all the randomness the protocol core draws (IDs,
    HPKE keys); the OS CSPRNG unless a test passes a seeded one."""
    background = background and config.mode != "frontend"
    ds = datastore or open_datastore(config.datastore,
                                     sqlite_synchronous=config.sqlite_synchronous)
    ensure_hpke_key(ds, rng)
    st = AppState(config, ds, clock, rng)
    middlewares = [metrics.middleware, problem_middleware]
    if config.taskprov_peers:
        # Provisions an advertised task before the handler looks it up. Only with peers
        # (fixed at start): each middleware is a layer of every request.
        middlewares.append(taskprov.middleware)
    if config.log_request_peers:
        middlewares.insert(0, peer_log_middleware)
    # Every body is read through serving.read_limited with its resource's limit; aiohttp's
    # own limit is only the backstop for any other read.
    app = web.Application(middlewares=middlewares, client_max_size=config.max_body_bytes,
                          handler_args=handler_args(config.limits))
    app[CONFIG_KEY] = config
    taskprov.install(app, config.taskprov_peers, config.role)
    app[STATE_KEY] = st
    app.router.add_get("/hpke_config", get_hpke_config)
    admin.add_routes(app)
    metrics.install(app)  # GET /metrics, with the admin API's token
    if config.role == "leader":
        leader_routes.add_routes(app)
        app[leader_routes.WAKE_KEY] = WorkEvent(ds, "leader")
        if config.ohttp_gateway:
            gateway.add_routes(app, gateway.load_or_create_key(config.gateway_key_path()))
    else:
        helper_routes.add_routes(app)
        app[helper_routes.WAKE_KEY] = WorkEvent(ds, "helper")

    async def run_worker(app: web.Application) -> AsyncIterator[None]:
        if config.role == "leader":
            worker = leader_routes.LeaderWorker(app, st)
            task = asyncio.create_task(worker.run())
        else:
            task = asyncio.create_task(helper_routes.worker(app, st))
        # DP noise is drawn here, in the background, never on a request (dap.dp).
        noise = asyncio.create_task(keep_noise_reserves(
            DpTaskList(st), st.rng, min(1.0, max(0.05, 4 * config.worker_interval))))
        app[WORKER_TASKS] = [task, noise]
        yield
        for t in (task, noise):
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t

    async def close_datastore(app: web.Application) -> None:
        st.close()  # the worker threads finish what they run, before the datastore closes
        if datastore is None:
            ds.close()

    if background:
        app.cleanup_ctx.append(run_worker)
    app.on_cleanup.append(close_datastore)
    return app


def run(config: AggregatorConfig) -> None:
    """Serve until interrupted (`ppm leader` / `ppm helper`). A configuration that
    cannot be used (TLS files, the datastore key) raises ConfigError or StorageError."""
    logs.configure(config.log_level, config.log_format)
    if config.frontends or config.drivers:
        from ppm_reference.dap.server.processes import supervise

        supervise(config)
        return
    if config.mode == "driver":
        app = build_app(config)
        health = None
        if config.health_port is not None:
            health = (health_app(app), config.listen_host, config.health_port)
        log.info("%s driver (background work, no listener) started (event loop: %s)",
                 config.role, event_loop_name(config.event_loop))
        run_without_listener(app, health, config.event_loop)
        return
    try:
        tls = ssl_context(config.tls_cert, config.tls_key)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load the TLS certificate and key ({config.tls_cert}, "
                          f"{config.tls_key}): {exc}") from None
    app = build_app(config)
    log.info("%s %s listening on %s://%s:%d/ (event loop: %s)", config.role,
             "front end" if config.mode == "frontend" else "(HTTP and background work)",
             config.scheme, config.listen_host, config.listen_port,
             event_loop_name(config.event_loop))
    serve_forever(app, config.listen_host, config.listen_port, config.limits, tls,
                  config.reuse_port, config.event_loop)


__all__ = ["build_app", "run", "DapProblem"]
