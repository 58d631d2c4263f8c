"""How the project's HTTP servers (Leader, Helper, interop test API) face the network:
bounded request bodies, connection and body timeouts, a cap on concurrent connections,
aiohttp's own parser errors as problem documents, TLS, and work moved off the event loop.

Threats answered here (issue 12): a small compressed body inflating to gigabytes, a large
plain body decoded and stored on the event loop, clients that send headers or bodies
slowly, and thousands of idle connections exhausting file descriptors.

* **Bodies** are read by :func:`read_limited` from the raw stream: a per-resource limit
  (``Content-Length`` checked before reading, the bytes counted while reading) answered
  413; a deadline for the whole body answered 408. The servers do not decompress
  (``auto_decompress=False``): a body with a ``Content-Encoding`` other than
  ``identity`` is refused with 415 and ``Accept-Encoding: identity`` (RFC 9110 Section
  15.5.16) before a byte of it is read. DAP messages are HPKE ciphertexts and random
  shares, which do not compress, and no draft asks an Aggregator to accept a content
  coding, so the limit on the raw body is the limit on the decoded one.
* **Connections**: ``idle_timeout`` closes a connection that has not sent a complete
  request header within that many seconds of opening or of its previous response (which
  covers partial headers); at ``max_connections`` a new connection evicts the oldest idle
  one, or is closed at once when none is idle, so that idle connections cannot keep a
  client out and file descriptors stay bounded.
* **Parser errors** (a malformed request line or header) are answered with a problem
  document and logged as one line, not as text/plain with a traceback.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import logging
import signal
import ssl
import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

from ppm_reference.dap.problems import PROBLEM_MEDIA_TYPE

log = logging.getLogger("ppm.server")

T = TypeVar("T")

KiB = 1024
MiB = 1024 * KiB
GIL_SWITCH_INTERVAL = 0.0005   # seconds (see GuardedRunner)
GC_GEN0_THRESHOLD = 5000       # container allocations (see tune_process)


@dataclass(frozen=True)
class HttpLimits:
    """Connection-level limits of one server (see the module docstring)."""

    idle_timeout: float = 15.0      # seconds without a complete request header
    body_timeout: float = 30.0      # seconds for a whole request body
    max_connections: int = 1000     # open connections at once
    lingering_time: float = 1.0     # seconds spent discarding an unread body


class HttpProblem(Exception):
    """An HTTP-level refusal (413, 415, 408) answered as an RFC 9457 problem document.

    Neither DAP-09 nor DAP-18 (nor DAP-19) defines a problem type for an oversized,
    compressed or slow body: their types describe protocol errors, and
    ``invalidMessage`` ("the payload was malformed") would be wrong for a well-formed
    body that is merely too large. So the type is ``about:blank`` (RFC 9457 Section
    4.2.1: the problem is what the status code says) for every profile, with the
    status's title, a detail, and the task ID when the request named a known task."""

    def __init__(self, status: int, title: str, detail: str, *,
                 headers: dict[str, str] | None = None, task_id: bytes | None = None,
                 close: bool = True) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.headers = dict(headers or {})
        self.task_id = task_id
        self.close = close

    def response(self) -> web.Response:
        doc: dict[str, Any] = {"type": "about:blank", "title": self.title,
                               "status": self.status, "detail": self.detail}
        if self.task_id is not None:
            import base64

            doc["taskid"] = base64.urlsafe_b64encode(bytes(self.task_id)).rstrip(
                b"=").decode()
        resp = web.Response(status=self.status, body=json.dumps(doc).encode(),
                            content_type=PROBLEM_MEDIA_TYPE, headers=self.headers)
        if self.close:
            # The rest of the body is not wanted: do not keep the connection.
            resp.force_close()
        return resp


def too_large(limit: int, task_id: bytes | None = None) -> HttpProblem:
    return HttpProblem(413, "Content Too Large",
                       f"request body larger than {limit} bytes", task_id=task_id)


async def read_limited(request: web.Request, limit: int, timeout: float,
                       task_id: bytes | None = None) -> bytes:
    """The raw request body, at most ``limit`` bytes, read within ``timeout`` seconds.

    Refuses (without reading the body) a ``Content-Encoding`` other than identity (415)
    and a ``Content-Length`` over the limit (413); counts the bytes of a chunked body as
    they arrive (413 as soon as they pass the limit, never holding more than ``limit``
    plus one chunk); a body not complete within ``timeout`` is 408."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise HttpProblem(415, "Unsupported Media Type",
                          f"Content-Encoding {encoding!r} is not accepted; send the body "
                          "uncompressed", headers={"Accept-Encoding": "identity"},
                          task_id=task_id)
    length = request.content_length
    if length is not None and length > limit:
        raise too_large(limit, task_id)
    content = request.content
    if content.is_eof():
        # The whole body came with the header (a small upload): it is in memory already,
        # with nothing to wait for (and no deadline to arm).
        body = content.read_nowait()
        if len(body) > limit:
            raise too_large(limit, task_id)
        return body
    buf = bytearray()
    try:
        async with asyncio.timeout(timeout):
            while True:
                chunk = await content.readany()
                if not chunk:
                    break
                buf += chunk
                if len(buf) > limit:
                    raise too_large(limit, task_id)
    except TimeoutError:
        raise HttpProblem(408, "Request Timeout", f"request body not received within "
                          f"{timeout:g} s", task_id=task_id) from None
    return bytes(buf)


# -- the aiohttp server -------------------------------------------------------------------


def handler_args(limits: HttpLimits) -> dict[str, Any]:
    """``web.Application(handler_args=...)``: the per-connection settings of the aiohttp
    protocol, whatever runner serves the app (no decompression; the idle timeout from
    the connection's start covers partial headers; short lingering on an unread body)."""
    return {"auto_decompress": False, "keepalive_timeout": limits.idle_timeout,
            "lingering_time": limits.lingering_time, "max_line_size": 8190,
            "max_field_size": 8190, "max_headers": 128}


class _GuardedHandler(RequestHandler):
    """aiohttp's per-connection protocol, with parser errors answered as problem
    documents and logged in one line."""

    def handle_error(self, request: Any, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500:
            log.error("internal error before the request reached a handler: %s",
                      type(exc).__name__ if exc else message)
            detail = "internal server error"
        else:
            detail = message or (str(exc) if exc else "malformed HTTP request")
            detail = " ".join(detail.split())  # aiohttp's messages span lines
            log.info("refused a malformed HTTP request from %s: %s",
                     getattr(request, "remote", "?"), detail)
        if request.writer.output_size > 0:
            raise ConnectionError("response already started")
        title = {400: "Bad Request", 413: "Content Too Large",
                 431: "Request Header Fields Too Large"}.get(status, "Error")
        return HttpProblem(status, title, detail[:200]).response()

    @property
    def idle(self) -> bool:
        """No request is being handled (waiting for one, or for the rest of its
        header)."""
        return not getattr(self, "_request_in_progress", False) and not self._messages


class _GuardedServer(Server):
    """aiohttp's connection factory with a cap on open connections."""

    def __init__(self, inner: Server, max_connections: int) -> None:
        super().__init__(inner.request_handler, request_factory=inner.request_factory,
                         handler_cancellation=inner.handler_cancellation,
                         loop=inner._loop, **inner._kwargs)
        self.max_connections = max_connections
        self.refused = 0
        self.evicted = 0
        # Every handler made and not yet closed, oldest first (asyncio may accept a burst
        # of connections before any of them is registered as made).
        self._live: dict[_GuardedHandler, None] = {}

    @property
    def open_connections(self) -> int:
        return len(self._live)

    def connection_lost(self, handler: RequestHandler,
                        exc: BaseException | None = None) -> None:
        self._live.pop(handler, None)  # type: ignore[call-overload]
        super().connection_lost(handler, exc)

    def __call__(self) -> RequestHandler:
        if len(self._live) >= self.max_connections:
            # Evict the oldest idle connection; with none idle, refuse this one (it is
            # closed as soon as it is made).
            victim = next((h for h in self._live if h.transport is not None and h.idle),
                          None)
            if victim is None:
                self.refused += 1
                return _Refuse()  # type: ignore[return-value]
            self.evicted += 1
            self._live.pop(victim, None)
            victim.force_close()
        handler = _GuardedHandler(self, loop=self._loop, **self._kwargs)
        self._live[handler] = None
        return handler


class _Refuse(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.abort() if isinstance(transport, asyncio.Transport) else transport.close()


# File descriptors kept free for everything but client connections (the listening
# socket, the datastore and its WAL, outgoing requests to the Helper, log files).
FD_RESERVE = 64


def connection_cap(max_connections: int) -> int:
    """`max_connections`, lowered to what the process's file descriptor limit allows:
    past it, accepting fails with "Too many open files" (and asyncio logs each failure)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # pragma: no cover - not Unix
        return max_connections
    if soft == resource.RLIM_INFINITY or soft - FD_RESERVE >= max_connections:
        return max_connections
    cap = max(1, soft - FD_RESERVE)
    log.warning("max_connections %d lowered to %d: the file descriptor limit is %d",
                max_connections, cap, soft)
    return cap


def tune_process(serving: bool = True) -> None:
    """Interpreter settings for a server process (process-wide: a server process is
    dedicated to serving; a driver, without `serving`, takes only the second).

    * Worker threads doing CPU work (decoding, VDAF preparation) hold the GIL; the event
      loop thread gets it back within the interpreter's switch interval, which each of a
      request's many GIL hand-offs may wait. 5 ms by default: shortened, so that requests
      stay fast while a large job is prepared.
    * The cyclic garbage collector runs its youngest generation every 700 net container
      allocations by default. Decoding a job's reports or serving a burst of one-report
      uploads passes that hundreds of times a second, each pass costing about as much
      as a small request (measured: about 5 % of the Leader's CPU), while what they
      allocate is nearly all freed by reference counting. A few thousand: the passes
      become rare, and the cyclic garbage they would find (asyncio's exception and
      future cycles) is still collected soon.
    """
    if serving and sys.getswitchinterval() > GIL_SWITCH_INTERVAL:
        sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    gen0, *older = gc.get_threshold()
    if 0 < gen0 < GC_GEN0_THRESHOLD:  # 0: the collector is off, leave it so
        gc.set_threshold(GC_GEN0_THRESHOLD, *older)


class GuardedRunner(web.AppRunner):
    """``web.AppRunner`` serving with :class:`_GuardedServer` (connection cap, parser
    errors as problem documents). Use it (:func:`start_site`) for every server."""

    def __init__(self, app: web.Application, limits: HttpLimits, **kwargs: Any) -> None:
        super().__init__(app, access_log=None, **kwargs)
        self.limits = limits
        tune_process()

    async def _make_server(self) -> Server:
        inner = await super()._make_server()
        return _GuardedServer(inner, connection_cap(self.limits.max_connections))

    @property
    def guarded(self) -> _GuardedServer | None:
        server = self.server
        return server if isinstance(server, _GuardedServer) else None


def ssl_context(cert_file: str | None, key_file: str | None) -> ssl.SSLContext | None:
    """The server's TLS context from a PEM certificate (chain) and key, or None."""
    if not cert_file and not key_file:
        return None
    if not cert_file or not key_file:
        raise ValueError("TLS needs both tls_cert and tls_key")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    return ctx


def client_ssl_context(ca_file: str | None) -> ssl.SSLContext | bool:
    """The context verifying the peers of outgoing requests: the system's trust store,
    plus ``ca_file`` when given (for a private CA or a self-signed certificate)."""
    if not ca_file:
        return True
    ctx = ssl.create_default_context()
    ctx.load_verify_locations(ca_file)
    return ctx


async def start_site(app: web.Application, host: str, port: int, limits: HttpLimits,
                     tls: ssl.SSLContext | None = None, reuse_port: bool = False
                     ) -> GuardedRunner:
    """Set up ``app`` behind a :class:`GuardedRunner` and listen on host:port (with
    `reuse_port`, SO_REUSEPORT: several front end processes share the port and the
    kernel spreads the connections over them)."""
    runner = GuardedRunner(app, limits)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, ssl_context=tls,
                          backlog=min(1024, max(16, limits.max_connections)),
                          reuse_port=reuse_port or None).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


# What runs a server's event loop (`event_loop` in the configuration): uvloop (libuv)
# when it is installed, asyncio's own loop otherwise, or either by name.
EVENT_LOOPS = ("auto", "uvloop", "asyncio")


def uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def event_loop_name(event_loop: str = "auto") -> str:
    """The loop `run_loop` uses for an `event_loop` setting: "uvloop" or "asyncio"
    (ValueError for a name not in EVENT_LOOPS, or "uvloop" when it is not installed)."""
    if event_loop not in EVENT_LOOPS:
        raise ValueError(f"event_loop must be one of {', '.join(EVENT_LOOPS)}, not "
                         f"{json.dumps(event_loop)}")
    if event_loop == "asyncio":
        return "asyncio"
    if uvloop_installed():
        return "uvloop"
    if event_loop == "uvloop":
        raise ValueError('event_loop "uvloop": the uvloop package is not installed '
                         "(pip install uvloop)")
    return "asyncio"


def run_loop(main: Coroutine[Any, Any, None], event_loop: str = "auto") -> None:
    """Run a server's `main` to its end on the event loop `event_loop` names.

    uvloop (libuv, the default where it is installed) costs less per request and per
    hand-off between the loop and the worker threads (`AppState.offload`) than asyncio's
    selector loop. Measured on these 2-core machines: 5 % less CPU per request for a
    minimal aiohttp handler, 80-95 us instead of 130 us per `run_in_executor` round
    trip, and 3-4 % less Leader + Helper CPU per report with one-report uploads
    (benchmarks/dap_e2e.py). The protocol code does not depend on the loop."""
    factory = None  # asyncio's own (asyncio.run's)
    if event_loop_name(event_loop) == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)


def serve_forever(app: web.Application, host: str, port: int, limits: HttpLimits,
                  tls: ssl.SSLContext | None = None, reuse_port: bool = False,
                  event_loop: str = "auto") -> None:
    """Serve until SIGINT or SIGTERM, then shut down cleanly (cleanup hooks run), on the
    event loop `event_loop` names (`run_loop`)."""

    async def main() -> None:
        runner = await start_site(app, host, port, limits, tls, reuse_port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - not Unix
                pass
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    run_loop(main(), event_loop)


def run_without_listener(app: web.Application,
                         health: tuple[web.Application, str, int] | None = None,
                         event_loop: str = "auto") -> None:
    """Run ``app``'s startup and background work with no HTTP listener (a driver
    process, `mode: driver`) until SIGINT or SIGTERM, then shut down cleanly. `health`:
    (app, host, port) of a small health check served meanwhile."""

    async def main() -> None:
        tune_process(serving=False)
        runner = web.AppRunner(app)
        await runner.setup()  # on_startup and cleanup_ctx: the background worker starts
        health_runner = None
        if health is not None:
            health_runner = web.AppRunner(health[0])
            await health_runner.setup()
            await web.TCPSite(health_runner, health[1], health[2]).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - not Unix
                pass
        try:
            await stop.wait()
        finally:
            if health_runner is not None:
                await health_runner.cleanup()
            await runner.cleanup()

    run_loop(main(), event_loop)
