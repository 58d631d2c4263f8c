"""A client of an Aggregator's admin API (`/internal/...`, see `dap.server.admin`).

The admin API is JSON over HTTP with a bearer token. This client is synchronous (urllib),
for provisioning from a command or a script; the DAP protocol itself goes through
`dap.client` / `dap.collector` (aiohttp). Every failure is an `AdminError` whose message
says which request failed and why (the problem document's detail when there is one).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urljoin, urlsplit


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: urllib would send the bearer token along, to any
    origin (see dap/origin.py). A 3xx is then an error like any other."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class AdminError(Exception):
    """An admin API request failed: the Aggregator is unreachable or refused it."""


def admin_base(url: str) -> str:
    """The aggregator's base URL from an admin URL given with or without `/internal/`.
    Raises ValueError for anything but an http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    path = parts.path
    if "/internal" in path:
        path = path[: path.index("/internal")]
    return f"{parts.scheme}://{parts.netloc}{path.rstrip('/')}/"


class AdminClient:
    """The admin API of the Aggregator at `url` (its base URL, or any URL under
    `/internal/`), authenticated with `token`."""

    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.base = admin_base(url)
        self.token = token
        self.timeout = timeout

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One call; the decoded JSON response (None when empty). Raises AdminError."""
        url = urljoin(self.base, path)
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with _OPENER.open(req, timeout=self.timeout) as resp:
                content = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:500].decode(errors="replace")
            try:
                doc = json.loads(detail)
                detail = doc.get("detail") or doc.get("title") or detail
            except ValueError:
                pass
            raise AdminError(f"{method} {url}: HTTP {exc.code}: {detail}") from None
        except urllib.error.URLError as exc:
            raise AdminError(f"cannot reach the admin API at {url}: {exc.reason}") from None
        except OSError as exc:
            raise AdminError(f"cannot reach the admin API at {url}: {exc}") from None
        try:
            return json.loads(content) if content else None
        except ValueError:
            raise AdminError(f"{method} {url}: the response is not JSON") from None

    def put_task(self, body: dict[str, Any]) -> Any:
        """`POST /internal/tasks` with a task's JSON (`ProvisionedTask.admin_json`)."""
        return self.request("POST", "internal/tasks", body)

    def delete_task(self, task_id_b64: str) -> Any:
        """`DELETE /internal/tasks/{task_id}` (base64url task ID)."""
        return self.request("DELETE", f"internal/tasks/{task_id_b64}")
