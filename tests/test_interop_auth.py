"""The interop test API's authentication (issue 12: anyone reaching it could add tasks):
with a token every `/internal/test/` request needs `Authorization: Bearer <token>`, and
`ppm interop run --token` sends it; without one the API serves only on a loopback
address (the container passes --allow-unauthenticated, for a stock draft-07 runner)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from ppm_reference.dap.server.serving import HttpLimits, start_site
from ppm_reference.interop import runner as r
from ppm_reference.interop import server
from tests.dap_harness import free_port

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TOKEN = "interop-test-token"


async def _roles(token: str | None) -> tuple[list[object], r.Endpoints]:
    runners: list[object] = []
    urls = {}
    for role in server.ROLES:
        app = server.build_interop_app(role, token=token)
        port = free_port()
        runners.append(await start_site(app, "127.0.0.1", port, HttpLimits()))
        urls[role] = f"http://127.0.0.1:{port}"
    return runners, r.Endpoints(**urls)


def test_token_is_required_and_checked() -> None:
    async def go() -> None:
        runners, ends = await _roles(TOKEN)
        try:
            url = f"{ends.leader}/internal/test/ready"
            async with aiohttp.ClientSession() as s:
                for headers, status in (({}, 401),
                                        ({"Authorization": "Bearer wrong"}, 403),
                                        ({"Authorization": TOKEN}, 403),
                                        ({"Authorization": f"Bearer {TOKEN}"}, 200)):
                    async with s.post(url, json={}, headers=headers) as resp:
                        body = await resp.json()
                        assert resp.status == status, (headers, resp.status, body)
                        assert body["status"] == ("success" if status == 200 else "error")
                # add_task without the token adds nothing.
                async with s.post(f"{ends.leader}/internal/test/add_task",
                                  json={"task_id": "x"}) as resp:
                    assert resp.status == 401
        finally:
            for runner in runners:
                await runner.cleanup()  # type: ignore[attr-defined]

    asyncio.run(go())


def test_runner_sends_the_token() -> None:
    """A whole case (DAP-18 Prio3Count, time interval) through four token-protected
    roles with `run_all(token=...)`; without the token the runner stops at `ready`."""

    async def go() -> None:
        runners, ends = await _roles(TOKEN)
        try:
            cases = [c for c in r.default_cases("dap-18")
                     if c.vdaf["type"] == "Prio3Count" and c.batch_mode == 1]
            outcomes = await r.run_all(ends, cases, token=TOKEN, collect_timeout=60)
            assert [o.passed for o in outcomes] == [True], [o.detail for o in outcomes]
            with pytest.raises(r.RunnerError, match="HTTP 401"):
                await r.run_all(ends, cases, ready_timeout=0.5)
        finally:
            for runner in runners:
                await runner.cleanup()  # type: ignore[attr-defined]

    asyncio.run(go())


def test_no_token_only_on_loopback() -> None:
    with pytest.raises(server.ServeError, match="--allow-unauthenticated"):
        server.serve("client", "0.0.0.0", free_port())
    proc = subprocess.run([sys.executable, "-m", "ppm_reference", "interop", "serve", "--role",
                           "leader", "--host", "0.0.0.0", "--port", str(free_port())],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "token" in lines[0] and "Traceback" not in proc.stderr
