"""The Oblivious Relay Resource (RFC 9458 Sections 5 and 6.2): `ppm relay`.

It forwards each Encapsulated Request POSTed to it to one gateway (RFC 9458 uses a
one-to-one mapping, Section 8.2) and the gateway's answer back, and nothing else:

* the forwarded request carries only `Content-Type: message/ohttp-req` and the content;
  no header of the Client's is forwarded and nothing about the Client is added (no Via,
  no Forwarded, no X-Forwarded-For: Section 6.2), so the gateway sees the relay's
  address and nothing of the Client's;
* the answer carries only the gateway's status, Content-Type and content;
* a request that is obviously invalid (another media type, no content, larger than
  `max_body`) is refused with a 4xx problem document without contacting the gateway
  (Section 5); a gateway that cannot be reached is a 502 (Section 5: the relay "can
  generate a response with an appropriate status code").

`GET /.well-known/ohttp-gateway` is passed through to the gateway's key configuration,
so that a Client need not contact the Leader at all. CHOICE: RFC 9458 Section 3 leaves
key distribution open and requires the configuration to be authenticated; a Client that
fetched it through the relay (`dap.client`) trusts the relay not to substitute it, or
pins it (`ppm upload --ohttp-keys FILE`), which a deployment should do.

`source_host` binds the relay's outgoing connections to a local address (tests use a
loopback alias, so that what the Leader sees can be told apart from the Client).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from ppm_reference.dap import ohttp
from ppm_reference.dap.problems import PROBLEM_MEDIA_TYPE

log = logging.getLogger("ppm.relay")

@dataclass(frozen=True)
class RelayConfig:
    gateway_url: str                  # the gateway resource, e.g. LEADER/.well-known/ohttp-gateway
    source_host: str | None = None    # local address of outgoing connections
    max_body: int = 1 << 20
    timeout: float = 30.0


_CONFIG: web.AppKey[RelayConfig] = web.AppKey("relay_config", RelayConfig)
_SESSION: web.AppKey[aiohttp.ClientSession] = web.AppKey("relay_session",
                                                          aiohttp.ClientSession)


def _problem(status: int, title: str, detail: str) -> web.Response:
    doc = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    return web.Response(status=status, body=json.dumps(doc).encode(),
                        content_type=PROBLEM_MEDIA_TYPE)


async def relay_request(request: web.Request) -> web.StreamResponse:
    cfg = request.app[_CONFIG]
    got = request.headers.get("Content-Type", "")
    if got.split(";")[0].strip().lower() != ohttp.REQUEST_MEDIA_TYPE:
        return _problem(415, "unsupported media type",
                        f"expected {ohttp.REQUEST_MEDIA_TYPE}, got {got!r}")
    if request.content_length is not None and request.content_length > cfg.max_body:
        return _problem(413, "content too large", f"more than {cfg.max_body} bytes")
    body = await request.content.read(cfg.max_body + 1)
    if len(body) > cfg.max_body:
        return _problem(413, "content too large", f"more than {cfg.max_body} bytes")
    if not body:
        return _problem(400, "empty request", "no Encapsulated Request")
    try:
        async with request.app[_SESSION].post(
                cfg.gateway_url, data=body,
                headers={"Content-Type": ohttp.REQUEST_MEDIA_TYPE}) as resp:
            content = await resp.read()
            status = resp.status
            content_type = resp.headers.get("Content-Type", "application/octet-stream")
    except (aiohttp.ClientError, TimeoutError) as exc:
        return _problem(502, "gateway unreachable", str(exc) or type(exc).__name__)
    return web.Response(status=status, body=content, headers={"Content-Type": content_type})


async def relay_keys(request: web.Request) -> web.StreamResponse:
    cfg = request.app[_CONFIG]
    url = cfg.gateway_url  # the gateway resource is also its key configuration's URI
    try:
        async with request.app[_SESSION].get(
                url, headers={"Accept": ohttp.KEYS_MEDIA_TYPE}) as resp:
            content = await resp.read()
            status = resp.status
            content_type = resp.headers.get("Content-Type", "application/octet-stream")
    except (aiohttp.ClientError, TimeoutError) as exc:
        return _problem(502, "gateway unreachable", str(exc) or type(exc).__name__)
    return web.Response(status=status, body=content, headers={"Content-Type": content_type})


def build_relay_app(config: RelayConfig) -> web.Application:
    app = web.Application(client_max_size=config.max_body + 1)
    app[_CONFIG] = config

    async def session_ctx(app: web.Application) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(
            local_addr=(config.source_host, 0) if config.source_host else None)
        session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=config.timeout),
            # No default headers beyond what aiohttp needs; no cookies kept.
            cookie_jar=aiohttp.DummyCookieJar())
        app[_SESSION] = session
        yield
        await session.close()

    app.cleanup_ctx.append(session_ctx)
    app.router.add_post("/", relay_request)
    app.router.add_get(ohttp.WELL_KNOWN_PATH, relay_keys)
    return app


def run(config: RelayConfig, host: str, port: int) -> None:
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log.info("relay listening on http://%s:%d/ for %s", host, port, config.gateway_url)
    web.run_app(build_relay_app(config), host=host, port=port, print=None, access_log=None)


__all__ = ["RelayConfig", "build_relay_app", "run"]
