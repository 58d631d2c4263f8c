"""The divviup-ts DAP-09 client (`@divviup/dap` 0.9.1, npm) as a report uploader for tests.

    from tests.dap09_node import run_dap_upload

    out = run_dap_upload({
        "leader": "http://127.0.0.1:8080/", "helper": "http://127.0.0.1:8081/",
        "task_id": task_id_b64url, "time_precision": 3600,
        "vdaf": {"type": "Prio3Histogram", "length": 4, "chunk_length": 2},
        "measurements": [0, 3, 3],
    })
    assert out["uploaded"] == 3, out

The driver is tests/interop_node_dap/dap_upload.mjs (its header documents the request
and the package API it uses). The package is installed by `npm ci` from the pinned
tests/interop_node_dap/package.json and package-lock.json into
`$PPM_INTEROP_CACHE/dap-0.9.1` (default `~/.cache/ppm-interop/dap-0.9.1`), outside the
repository, and reused while those manifests are unchanged (tests/node_support.py).

Under pytest, :func:`install_dap_client` (and so :func:`run_dap_upload`) skips the
calling test with a visible reason when node or npm is missing or when npm fails for
lack of network; any other install failure raises :class:`NodeInstallError` (an error).
Pass ``skip=False`` to get :class:`NodeUnavailable` raised instead.

What the client does on the wire (observed with tests/test_dap09_node_driver.py):
``GET {aggregator}/hpke_config?task_id=<id>`` to both Aggregators (``Accept:
application/dap-hpke-config-list``; it requires the answer's Content-Type to be exactly
that, without parameters), once per run; then per measurement ``PUT
{leader}/tasks/<id>/reports`` with ``Content-Type: application/dap-report`` and no
authentication header; any 2xx is success. Report times are rounded down to
``time_precision``. A leader URL with a path is treated as a directory (a trailing ``/``
is added).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.node_support import (
    Installed,
    NodeInstallError,
    NodePackage,
    NodeUnavailable,
    install_once,
    node_unavailable_reason,
    report_line,
)

PACKAGE_NAME = "@divviup/dap"
PACKAGE_VERSION = "0.9.1"
NODE_DIR = Path(__file__).resolve().parent / "interop_node_dap"
DRIVER = NODE_DIR / "dap_upload.mjs"
PACKAGE = NodePackage(PACKAGE_NAME, PACKAGE_VERSION, NODE_DIR, f"dap-{PACKAGE_VERSION}")


class DapUploadError(RuntimeError):
    """The driver reported an error (``run_dap_upload(..., check=True)``)."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(f"dap_upload.mjs: {result.get('error')}")
        self.result = result


def task_id_b64(task_id: bytes) -> str:
    """A task ID as DAP writes it in URLs: base64url without padding."""
    return base64.urlsafe_b64encode(bytes(task_id)).rstrip(b"=").decode()


def node_dap_available() -> str | None:
    """Why the DAP client cannot run here (node or npm missing, node too old), or None.
    (Whether the registry is reachable is only known by installing.)"""
    return node_unavailable_reason(PACKAGE)


def _install(skip: bool, request: Any = None) -> Installed:
    try:
        installed = install_once(PACKAGE)
    except NodeUnavailable as exc:
        if not skip:
            raise
        import pytest

        pytest.skip(str(exc))
    if request is not None:
        report_line(request, installed.message)
    return installed


def install_dap_client(*, skip: bool = True, request: Any = None) -> Path:
    """Install (or reuse) `@divviup/dap` 0.9.1 in the cache; the cache folder (it holds
    node_modules). ``request`` (a pytest FixtureRequest) shows the outcome on the
    terminal."""
    return _install(skip, request).cache


def run_dap_upload(spec: dict[str, Any], timeout: float = 120, *, check: bool = False,
                   skip: bool = True) -> dict[str, Any]:
    """Run the driver on ``spec`` (see tests/interop_node_dap/dap_upload.mjs); its JSON
    answer: ``{"uploaded": n, ...}`` or ``{"error": "...", "uploaded": k, ...}``.

    ``spec["task_id"]`` may be given as bytes. With ``check=True`` an error answer raises
    :class:`DapUploadError`. A driver that crashes without a JSON answer, or runs past
    ``timeout`` seconds, raises RuntimeError with its stderr."""
    installed = _install(skip)
    spec = dict(spec)
    if isinstance(spec.get("task_id"), bytes | bytearray):
        spec["task_id"] = task_id_b64(spec["task_id"])
    env = dict(os.environ, DAP_NODE_MODULES=str(installed.modules),
               NODE_PATH=str(installed.modules))
    try:
        proc = subprocess.run(
            [installed.node, str(DRIVER)], input=json.dumps(spec), capture_output=True,
            text=True, env=env, cwd=installed.cache, timeout=timeout, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr
        raise RuntimeError(f"dap_upload.mjs ran past {timeout} s:\n{stderr or ''}") from None
    lines = proc.stdout.strip().splitlines()
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"dap_upload.mjs exited {proc.returncode} without a JSON answer:\n"
                           f"stdout: {proc.stdout}\nstderr: {proc.stderr}") from None
    if proc.returncode != 0 and "error" not in result:
        result["error"] = f"exit status {proc.returncode}"
    if "error" in result:
        result["stderr"] = proc.stderr
        if check:
            raise DapUploadError(result)
    return result


__all__ = [
    "DRIVER",
    "DapUploadError",
    "NodeInstallError",
    "NodeUnavailable",
    "PACKAGE",
    "PACKAGE_VERSION",
    "install_dap_client",
    "node_dap_available",
    "run_dap_upload",
    "task_id_b64",
]
