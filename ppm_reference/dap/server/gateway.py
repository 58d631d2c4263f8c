"""The Oblivious HTTP gateway (RFC 9458) in front of the Leader's upload resource.

Paper 000 Section 4.2 asks for an anonymization infrastructure so that the servers do
not learn which Clients contributed ("the privacy amplification by sampling ... depends
on the adversary not learning the set of clients that actually contributes"); it names
Oblivious HTTP. With `ohttp_gateway` in its configuration the Leader serves, at the
well-known URI of RFC 9540 Section 4 (`/.well-known/ohttp-gateway`):

* GET: its key configurations (`application/ohttp-keys`, RFC 9458 Section 3.2);
* POST (`message/ohttp-req`): the gateway resource. The decapsulated binary HTTP request
  (RFC 9292) may target only this Leader's own Client resources: `GET /hpke_config`
  (with or without `?task_id=`) and the upload resource `/tasks/{task-id}/reports` with
  the task's upload method (RFC 9458 Section 6.3: a gateway forwards only to targets it
  is configured for). Anything else is answered, encapsulated, with 403.

Errors follow RFC 9458 Section 5.2: a request that cannot be decapsulated is answered
without encapsulation with 400, as the problem type `ohttp-key` (Section 5.3) when the
key identifier or the algorithms are not the gateway's; nothing is stored. Errors after
decapsulation (a malformed binary HTTP message, a DAP problem) are encapsulated
responses, the DAP problem document as the inner response's content.

The gateway's X25519 key is kept in `ohttp_key_file` (created on first start, mode
0600), so that Clients' cached key configurations survive a restart.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from ppm_reference.dap import bhttp, ohttp
from ppm_reference.dap.common import Role, TaskID
from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.problems import PROBLEM_MEDIA_TYPE
from ppm_reference.dap.profiles import DEFAULT_PROFILE, Profile
from ppm_reference.dap.server import leader as leader_routes
from ppm_reference.dap.server.common import AppState, hpke_config_response, problem_response, state
from ppm_reference.dap.server.serving import read_limited

log = logging.getLogger("ppm.gateway")

@dataclass(frozen=True)
class GatewayKeys:
    keys: tuple[ohttp.GatewayKey, ...]


GATEWAY_KEYS: web.AppKey[GatewayKeys] = web.AppKey("ohttp_keys", GatewayKeys)

_REPORTS = re.compile(r"^/tasks/([A-Za-z0-9_-]+)/reports$")


def load_or_create_key(path: str | Path) -> ohttp.GatewayKey:
    """The gateway key stored in `path` (33 bytes: key ID, X25519 secret), created with
    the OS CSPRNG if the file does not exist."""
    p = Path(path)
    if p.exists():
        data = p.read_bytes()
        if len(data) != 33:
            raise ValueError(f"{p} is not an Oblivious HTTP gateway key file")
        return ohttp.GatewayKey.generate(data[0], data[1:])
    key = ohttp.GatewayKey.generate(1)
    # Written aside, then linked into place: several processes of one Leader starting at
    # once (dap/server/processes.py) never see a partial file, and all use one key.
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(bytes([key.config.key_id]) + key.private_key)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, p)
        except FileExistsError:
            return load_or_create_key(p)  # another process was first: its key
    finally:
        tmp.unlink(missing_ok=True)
    return key


async def get_keys(request: web.Request) -> web.StreamResponse:
    """GET /.well-known/ohttp-gateway: the key configurations (RFC 9540 Section 4)."""
    keys = request.app[GATEWAY_KEYS].keys
    return web.Response(body=ohttp.encode_key_configs([k.config for k in keys]),
                        headers={"Content-Type": ohttp.KEYS_MEDIA_TYPE,
                                 "Cache-Control": "max-age=86400"})


def _plain_error(status: int, title: str, detail: str, type_: str = "about:blank"
                 ) -> web.Response:
    doc = {"type": type_, "title": title, "status": status, "detail": detail}
    return web.Response(status=status, body=json.dumps(doc).encode(),
                        content_type=PROBLEM_MEDIA_TYPE)


def _to_bhttp(resp: web.Response) -> bhttp.Response:
    headers: list[tuple[bytes, bytes]] = []
    for name in ("Content-Type", "Location", "Retry-After"):
        value = resp.headers.get(name)
        if value is not None:
            headers.append((name.lower().encode(), value.encode()))
    body = resp.body if isinstance(resp.body, bytes) else b""
    return bhttp.Response(resp.status, tuple(headers), body)


async def _dispatch(app: web.Application, st: AppState, req: bhttp.Request
                    ) -> web.Response:
    """Serve the decapsulated request from this Leader's own Client resources."""
    method = req.method.decode("ascii", "replace")
    target = req.path.decode("ascii", "replace")
    path, _, query = target.partition("?")
    if path == "/hpke_config" and method == "GET":
        params = dict(part.partition("=")[::2] for part in query.split("&") if part)
        if set(params) - {"task_id"}:
            raise DapProblem("forbidden", "unexpected query parameters", 403, dap_type=False)
        return hpke_config_response(st, params.get("task_id"))
    match = _REPORTS.match(path)
    if match is None or query:
        raise DapProblem("forbidden", "this gateway forwards only to the Leader's Client "
                         "resources", 403, dap_type=False)
    try:
        task_id = bytes(TaskID.from_base64url(match.group(1)))
    except (ValueError, TypeError):
        raise DapProblem("unrecognizedTask", "malformed task ID", 404) from None
    task = st.task(task_id, Role.LEADER)
    expected, _ = task.profile.request("upload")
    if method != expected:
        raise DapProblem("methodNotAllowed", f"{task.profile.name} tasks use {expected} for "
                         "upload", 405, task_id=task_id, dap_type=False)
    content_type = (req.header(b"content-type") or b"").decode("ascii", "replace")
    message = task.profile.message_names["upload"]
    try:
        name = task.profile.message_for_media_type(content_type)
    except ValueError:
        name = None
    if name != message:
        raise DapProblem("invalidMessage", f"expected Content-Type "
                         f"{task.profile.media_type_for(message)}, got {content_type!r}",
                         415, task_id=task_id)
    return await leader_routes.upload_response(app, st, task, req.content)


async def post_gateway(request: web.Request) -> web.StreamResponse:
    """POST /.well-known/ohttp-gateway: an Encapsulated Request (RFC 9458 Section 4.3)."""
    st = state(request)
    got = request.headers.get("Content-Type", "")
    if got.split(";")[0].strip().lower() != ohttp.REQUEST_MEDIA_TYPE:
        return _plain_error(415, "unsupported media type",
                            f"expected {ohttp.REQUEST_MEDIA_TYPE}, got {got!r}")
    # Bounded (413), uncompressed (415) and timed (408) like every DAP request body.
    body = await read_limited(request, st.config.max_upload_bytes, st.config.body_timeout)
    try:
        inner, ctx = ohttp.decapsulate_request(request.app[GATEWAY_KEYS].keys, body)
    except ohttp.OhttpKeyError as exc:
        return _plain_error(400, "key identifier unknown", str(exc), ohttp.KEY_PROBLEM_TYPE)
    except ohttp.OhttpError as exc:
        return _plain_error(400, "cannot decapsulate", str(exc))
    try:
        req = bhttp.Request.decode(inner)
        try:
            resp = await _dispatch(request.app, st, req)
        except DapProblem as problem:
            resp = problem_response(problem, _profile_of(st, problem))
        answer = _to_bhttp(resp)
    except bhttp.BhttpError as exc:
        answer = bhttp.Response(400, ((b"content-type", b"text/plain"),),
                                f"malformed binary HTTP request: {exc}".encode())
    return web.Response(body=ohttp.encapsulate_response(ctx, answer.encode()),
                        headers={"Content-Type": ohttp.RESPONSE_MEDIA_TYPE,
                                 "Cache-Control": "private, no-store"})


def _profile_of(st: AppState, problem: DapProblem) -> Profile:
    task = st.tasks.peek(problem.task_id) if problem.task_id is not None else None
    return task.profile if task is not None else DEFAULT_PROFILE


def add_routes(app: web.Application, key: ohttp.GatewayKey) -> None:
    app[GATEWAY_KEYS] = GatewayKeys((key,))
    app.router.add_get(ohttp.WELL_KNOWN_PATH, get_keys)
    app.router.add_post(ohttp.WELL_KNOWN_PATH, post_gateway)


__all__ = ["GATEWAY_KEYS", "GatewayKeys", "add_routes", "load_or_create_key"]
