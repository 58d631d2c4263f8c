"""Build and run the Leader or Helper aiohttp application.

Resources (DAP-18 Appendix A) are served at the root of the listening address:
`/hpke_config`, `/tasks/{task-id}/...`; the admin API (provisioning tasks, rotating HPKE
keys) is under `/internal/`, enabled by an `admin_token` in the configuration.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from dap.common import TaskID
from dap.core.errors import DapProblem
from dap.core.rand import OS_RNG, Rng
from dap.core.tasks import add_hpke_key
from dap.profiles import DEFAULT_PROFILE, get_profile
from dap.server import admin
from dap.server import helper as helper_routes
from dap.server import leader as leader_routes
from dap.server.common import CONFIG_KEY, STATE_KEY, AppState, problem_middleware, state
from dap.server.config import AggregatorConfig, ConfigError
from dap.server.serving import handler_args, serve_forever, ssl_context
from dap.storage import Datastore, HpkeKeyState
from dap.storage.sqlite import SqliteDatastore

log = logging.getLogger("ppm.server")


async def get_hpke_config(request: web.Request) -> web.StreamResponse:
    """GET {aggregator}/hpke_config (DAP-18 Section 4.4.1; DAP-09 Section 4.4.1 with
    `?task_id=`): the active configurations, newest (preferred) first, cacheable.

    The keys are the Aggregator's, not a task's. With a `task_id` the task must exist
    (`unrecognizedTask` otherwise, as DAP-09 requires) and the answer has its profile's
    media type: exactly `application/dap-hpke-config-list` for a DAP-09 task, which
    DAP-09 Clients check. Without one, DAP-18's."""
    st = state(request)
    profile = DEFAULT_PROFILE
    raw = request.query.get("task_id")
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


def ensure_hpke_key(datastore: Datastore, rng: Rng) -> None:
    """A fresh aggregator gets one active X25519 key."""
    with datastore.transaction() as tx:
        if not [k for k in tx.list_hpke_keys() if k.state == HpkeKeyState.ACTIVE]:
            add_hpke_key(tx, HpkeKeyState.ACTIVE, rng=rng)


def build_app(config: AggregatorConfig, datastore: Datastore | None = None,
              clock: Callable[[], float] = time.time,
              background: bool = True, rng: Rng = OS_RNG) -> web.Application:
    """The Leader's or Helper's application. With `background`, its worker starts with
    the app (and is cancelled on shutdown). `rng` is all the randomness the protocol
    core draws (IDs, HPKE keys); the OS CSPRNG unless a test passes a seeded one."""
    ds = datastore or SqliteDatastore(config.datastore, config.sqlite_synchronous)
    ensure_hpke_key(ds, rng)
    st = AppState(config, ds, clock, rng)
    # Every body is read through serving.read_limited with its resource's limit; aiohttp's
    # own limit is only the backstop for any other read.
    app = web.Application(middlewares=[problem_middleware],
                          client_max_size=config.max_body_bytes,
                          handler_args=handler_args(config.limits))
    app[CONFIG_KEY] = config
    app[STATE_KEY] = st
    app.router.add_get("/hpke_config", get_hpke_config)
    admin.add_routes(app)
    if config.role == "leader":
        leader_routes.add_routes(app)
        app[leader_routes.WAKE_KEY] = asyncio.Event()
    else:
        helper_routes.add_routes(app)
        app[helper_routes.WAKE_KEY] = asyncio.Event()

    async def run_worker(app: web.Application) -> AsyncIterator[None]:
        if config.role == "leader":
            worker = leader_routes.LeaderWorker(app, st)
            task = asyncio.create_task(worker.run())
        else:
            task = asyncio.create_task(helper_routes.worker(app, st))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

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
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        tls = ssl_context(config.tls_cert, config.tls_key)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load the TLS certificate and key ({config.tls_cert}, "
                          f"{config.tls_key}): {exc}") from None
    app = build_app(config)
    log.info("%s listening on %s://%s:%d/", config.role, config.scheme, config.listen_host,
             config.listen_port)
    serve_forever(app, config.listen_host, config.listen_port, config.limits, tls)


__all__ = ["build_app", "run", "DapProblem"]
