"""What a check works with: the target, the profile, a task of its own, raw HTTP, and the
expectations every check shares (an error is a 4xx problem document of the draft's type;
a 5xx is never an acceptable answer to bad input)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from ppm_reference.dap.problems import PROBLEM_MEDIA_TYPE
from ppm_reference.dap.profiles import Profile
from ppm_reference.dap.provision import ProvisionedTask
from ppm_reference.interop.conformance.catalogue import Fail, Skip
from ppm_reference.interop.conformance.provision import Provisioner, ProvisionFailed, TaskNeeds


@dataclass
class Answer:
    """One HTTP answer (or None as status when the connection failed)."""

    method: str
    url: str
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def problem(self) -> dict[str, Any] | None:
        if self.content_type.split(";")[0].strip().lower() != PROBLEM_MEDIA_TYPE:
            return None
        try:
            doc = json.loads(self.body)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def brief(self) -> str:
        doc = self.problem()
        what = f"{doc.get('type')} {doc.get('detail', '')}".strip() if doc else \
            f"{self.content_type or 'no content type'}, {len(self.body)} bytes"
        return f"{self.method} {self.url.split('//', 1)[-1].split('/', 1)[-1]}: " \
               f"HTTP {self.status} ({what[:160]})"


@dataclass
class Ctx:
    profile: Profile
    role: str
    target: str
    provisioner: Provisioner
    session: aiohttp.ClientSession
    # Seconds to watch that something does NOT happen (a batch below min_batch_size is
    # not released); seconds a collection or job may take.
    settle: float = 2.0
    timeout: float = 20.0
    # Bytes of the body sent by the oversized-request checks.
    oversize_bytes: int = 64 * 1024 * 1024 + 1
    log: list[str] = field(default_factory=list)

    # -- tasks --------------------------------------------------------------------------
    async def task(self, needs: TaskNeeds | None = None) -> ProvisionedTask:
        needs = needs or TaskNeeds()
        try:
            return await self.provisioner.new_task(needs)
        except ProvisionFailed as exc:
            if needs.task_window is not None:
                # An implementation may refuse a task that has ended or not started:
                # not a protocol failure.
                raise Skip(f"the target refused a task with this interval: {exc}") from None
            raise Fail(f"cannot provision the check's task: {exc}") from None

    def url(self, resource: str, pt: ProvisionedTask | None = None, base: str | None = None,
            **ids: bytes) -> str:
        if pt is not None and "{task-id}" in self.profile.resources[resource]:
            ids = {"task_id": bytes(pt.task.task_id), **ids}
        return self.profile.resource_url(resource, base or self.target, **ids)

    def auth(self, token: str | None) -> dict[str, str]:
        if not token:
            return {}
        name, value = self.profile.auth_header_for(token)
        return {name: value}

    # -- HTTP ---------------------------------------------------------------------------
    async def send(self, method: str, url: str, body: bytes | None = None,
                   content_type: str | None = None, headers: dict[str, str] | None = None
                   ) -> Answer:
        h = dict(headers or {})
        if content_type is not None:
            h["Content-Type"] = content_type
        try:
            async with self.session.request(method, url, data=body, headers=h,
                                            allow_redirects=False) as resp:
                content = await resp.read()
                ans = Answer(method, url, resp.status,
                             {k.lower(): v for k, v in resp.headers.items()}, content)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise Fail(f"{method} {url}: no answer ({type(exc).__name__}: {exc})") from None
        self.log.append(ans.brief())
        if ans.status >= 500:
            raise Fail(f"server error: {ans.brief()}")
        return ans

    async def op(self, operation: str, url: str, body: bytes | None, message: str | None,
                 headers: dict[str, str] | None = None, content_type: str | None = None
                 ) -> Answer:
        """The request of a protocol operation (the profile's method) with a message body
        of the profile's media type (or ``content_type``)."""
        method = self.profile.request(operation)[0]
        ct = content_type if content_type is not None else \
            (self.profile.media_type_for(message) if message else None)
        return await self.send(method, url, body, ct, headers)

    async def still_answers(self) -> str | None:
        """None if the target answers GET hpke_config, else what went wrong."""
        url = self.profile.resource_url("hpke_config", self.target)
        try:
            async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as resp:
                await resp.read()
                if resp.status >= 500:
                    return f"GET hpke_config answers HTTP {resp.status}"
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            return f"GET hpke_config: {type(exc).__name__}: {exc}"
        return None

    # -- expectations -------------------------------------------------------------------
    def expect_success(self, ans: Answer, status: int | None = None,
                       message: str | None = None) -> None:
        """A 2xx answer (exactly ``status`` if given) with the media type of ``message``."""
        if not 200 <= ans.status < 300 or (status is not None and ans.status != status):
            want = status or "2xx"
            raise Fail(f"expected HTTP {want}, got {ans.brief()}")
        if message is not None:
            want_ct = self.profile.media_type_for(message)
            try:
                got = self.profile.message_for_media_type(ans.content_type)
            except ValueError:
                got = None
            if got != message:
                raise Fail(f"expected Content-Type {want_ct}, got {ans.content_type!r}")

    def expect_problem(self, ans: Answer, token: str | None = None,
                       pt: ProvisionedTask | None = None, statuses: tuple[int, ...] = (),
                       any_of: tuple[str, ...] = ()) -> None:
        """A client error (4xx; one of ``statuses`` if given); with ``token`` (or
        ``any_of``), a problem document (``application/problem+json``) of that DAP type,
        whose ``status`` member, if present, equals the HTTP status."""
        if not 400 <= ans.status < 500 or (statuses and ans.status not in statuses):
            want = "/".join(map(str, statuses)) if statuses else "4xx"
            raise Fail(f"expected HTTP {want}, got {ans.brief()}")
        tokens = tuple(self.profile.problem_token(t) for t in ((token,) if token else any_of))
        if not tokens:
            return
        doc = ans.problem()
        if doc is None:
            raise Fail(f"expected a problem document of type {'/'.join(tokens)}, got "
                       f"{ans.brief()}")
        uris = {self.profile.problem_type_prefix + t for t in tokens}
        if doc.get("type") not in uris:
            raise Fail(f"expected problem type {' or '.join(sorted(uris))}, got "
                       f"{doc.get('type')!r} ({ans.brief()})")
        if "status" in doc and doc["status"] != ans.status:
            raise Fail(f"problem document status {doc['status']} differs from HTTP "
                       f"{ans.status}")

    def expect_taskid(self, ans: Answer, pt: ProvisionedTask) -> None:
        from ppm_reference.dap.provision import b64

        doc = ans.problem()
        want = b64(bytes(pt.task.task_id))
        if doc is None or doc.get("taskid") != want:
            raise Fail(f"expected a problem document with taskid {want}, got "
                       f"{(doc or {}).get('taskid')!r} ({ans.brief()})")


async def raw_exchange(url: str, head: bytes, body_parts: list[tuple[bytes, float]],
                       read_timeout: float = 5.0, close_early: bool = False
                       ) -> bytes:
    """Send a hand-made HTTP/1.1 request over a plain TCP connection: ``head`` (request
    line and headers), then each body part after its delay; return what the server
    answered before closing (b"" when ``close_early`` hangs up after the parts)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    ssl = parts.scheme == "https" or None
    reader, writer = await asyncio.open_connection(host, port, ssl=ssl)
    try:
        writer.write(head)
        await writer.drain()
        for data, delay in body_parts:
            if delay:
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
        if close_early:
            return b""
        try:
            return await asyncio.wait_for(reader.read(65536), read_timeout)
        except TimeoutError:
            return b""
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


def request_head(method: str, url: str, content_type: str, length: int,
                 headers: dict[str, str] | None = None) -> bytes:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    lines = [f"{method} {path} HTTP/1.1", f"Host: {parts.netloc}",
             f"Content-Type: {content_type}", f"Content-Length: {length}",
             "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()
