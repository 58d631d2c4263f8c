"""Installing a pinned npm package into a cache folder outside the repository.

Shared by the tests that run a divviup-ts package under node (`@divviup/prio3` in
tests/test_interop_divviup_prio3.py, `@divviup/dap` through tests/dap09_node.py).

A package is pinned by a folder of the repository holding `package.json` and
`package-lock.json` (see :class:`NodePackage`). It is installed with `npm ci` into
`$PPM_INTEROP_CACHE/<cache_name>` (default `~/.cache/ppm-interop/<cache_name>`) and reused
while the pinned manifests are unchanged: after a successful install the manifests are
copied into the cache folder together with a stamp file that names their digest, and an
install is "current" when the stamp matches the repository's manifests and the installed
package has the pinned version. An interrupted or failed install leaves no stamp, so the
next run installs again. Concurrent installs into one cache folder (parallel test
workers) are serialised with a lock file.

Outcomes: :class:`NodeUnavailable` when node or npm is missing or npm fails for lack of
network (callers skip with the reason), :class:`NodeInstallError` for any other failure
(callers fail). :func:`pytest_install` maps them onto pytest.skip and pytest.fail.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFESTS = ("package.json", "package-lock.json")
STAMP = ".ppm-interop-installed"
INSTALL_TIMEOUT = 300
MIN_NODE_MAJOR = 18  # global fetch, WebCrypto
# npm error codes and messages that mean "no network", as opposed to a broken manifest.
NETWORK_ERRORS = (
    "ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH",
    "EHOSTUNREACH", "network", "fetch failed", "ERR_SOCKET_TIMEOUT", "ENOTCACHED",
)


class NodeUnavailable(RuntimeError):
    """node/npm are missing or the registry cannot be reached: a reason to skip."""


class NodeInstallError(RuntimeError):
    """npm failed for another reason (a broken pin, a corrupt cache): an error."""


@dataclass(frozen=True)
class NodePackage:
    """An npm package pinned by ``manifest_dir``/package.json and package-lock.json."""

    name: str  # "@divviup/dap"
    version: str  # "0.9.1"
    manifest_dir: Path
    cache_name: str  # the folder under the cache root, e.g. "dap-0.9.1"


@dataclass(frozen=True)
class Installed:
    node: str  # the node executable
    cache: Path  # the cache folder (holds node_modules)
    version: str  # the installed version of the package
    message: str  # "reusing install in ..." or "npm ci into ... took 3.2 s"

    @property
    def modules(self) -> Path:
        return self.cache / "node_modules"


def cache_root() -> Path:
    base = os.environ.get("PPM_INTEROP_CACHE")
    return Path(base).expanduser() if base else Path.home() / ".cache" / "ppm-interop"


def cache_dir(package: NodePackage) -> Path:
    return cache_root() / package.cache_name


def node_tools() -> tuple[str | None, str | None]:
    return shutil.which("node"), shutil.which("npm")


def node_unavailable_reason(package: NodePackage) -> str | None:
    """Why ``package`` cannot be run here (node or npm missing, node too old), or None."""
    node, npm = node_tools()
    if node is None or npm is None:
        return (f"node and npm are needed for {package.name} {package.version} "
                f"(node: {node or 'missing'}, npm: {npm or 'missing'})")
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True,
                             timeout=30, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run {node} --version: {exc}"
    match = re.match(r"v(\d+)\.", out)
    if match is None or int(match.group(1)) < MIN_NODE_MAJOR:
        return f"node {out or '?'} is too old for {package.name} (need >= {MIN_NODE_MAJOR})"
    return None


def installed_version(package: NodePackage, cache: Path) -> str | None:
    manifest = cache / "node_modules" / Path(*package.name.split("/")) / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def manifests_digest(directory: Path) -> str:
    digest = hashlib.sha256()
    for name in MANIFESTS:
        data = (directory / name).read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def is_current(package: NodePackage, cache: Path) -> bool:
    """The install in ``cache`` was made from the repository's current manifests and
    holds the pinned version."""
    try:
        stamp = (cache / STAMP).read_text().strip()
    except OSError:
        return False
    return (stamp == manifests_digest(package.manifest_dir)
            and installed_version(package, cache) == package.version)


@contextlib.contextmanager
def _locked(cache: Path) -> Iterator[None]:
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.parent / f".{cache.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def install(package: NodePackage) -> Installed:
    """Install ``package`` into its cache folder, or reuse the current install there.

    Raises :class:`NodeUnavailable` (skip) or :class:`NodeInstallError` (fail)."""
    reason = node_unavailable_reason(package)
    if reason is not None:
        raise NodeUnavailable(reason)
    node, npm = node_tools()
    assert node is not None and npm is not None
    cache = cache_dir(package)
    with _locked(cache):
        if is_current(package, cache):
            return Installed(node, cache, package.version,
                             f"{package.name} {package.version}: reusing install in {cache}")
        cache.mkdir(parents=True, exist_ok=True)
        (cache / STAMP).unlink(missing_ok=True)
        for name in MANIFESTS:
            shutil.copyfile(package.manifest_dir / name, cache / name)
        started = time.monotonic()
        try:
            # `npm ci`: exactly the lock file's tree, node_modules removed first.
            proc = subprocess.run(
                [npm, "ci", "--prefix", str(cache), "--no-audit", "--no-fund",
                 "--ignore-scripts"],
                cwd=cache, capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise NodeUnavailable(f"npm ci of {package.name} timed out after "
                                  f"{INSTALL_TIMEOUT} s (no network?)") from None
        took = time.monotonic() - started
        output = proc.stdout + proc.stderr
        if proc.returncode != 0:
            tail = _excerpt(output)
            if any(marker in output for marker in NETWORK_ERRORS):
                raise NodeUnavailable(
                    f"npm ci of {package.name} failed for lack of network:\n{tail}")
            raise NodeInstallError(f"npm ci of {package.name} into {cache} failed:\n{tail}")
        version = installed_version(package, cache)
        if version != package.version:
            raise NodeInstallError(f"{package.name} installed in {cache} is {version}, "
                                   f"pinned {package.version}")
        (cache / STAMP).write_text(manifests_digest(package.manifest_dir) + "\n")
        return Installed(node, cache, version,
                         f"{package.name} {package.version}: npm ci into {cache} "
                         f"took {took:.1f} s")


def _excerpt(output: str) -> str:
    """npm's first lines (the error) and last lines (the summary)."""
    lines = output.strip().splitlines()
    if len(lines) <= 25:
        return "\n".join(lines)
    return "\n".join(lines[:10] + ["..."] + lines[-12:])


_MEMO: dict[str, Installed | Exception] = {}


def install_once(package: NodePackage) -> Installed:
    """:func:`install`, at most once per process and cache folder (the outcome, including
    a failure, is remembered)."""
    key = str(cache_dir(package))
    if key not in _MEMO:
        try:
            _MEMO[key] = install(package)
        except (NodeUnavailable, NodeInstallError) as exc:
            _MEMO[key] = exc
    outcome = _MEMO[key]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def report_line(request: Any, line: str) -> None:
    """A line on the terminal even under output capture (and in the captured output);
    ``request`` is a pytest FixtureRequest, or None for a plain print."""
    print(line)
    if request is None:
        return
    plugins = request.config.pluginmanager
    reporter = plugins.get_plugin("terminalreporter")
    capture = plugins.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.ensure_newline()
        reporter.write_line(f"[interop] {line}")


def pytest_install(package: NodePackage, request: Any = None) -> Installed:
    """:func:`install_once` for a test: pytest.skip on :class:`NodeUnavailable`,
    pytest.fail on :class:`NodeInstallError`; the outcome is reported on the terminal."""
    import pytest

    try:
        installed = install_once(package)
    except NodeUnavailable as exc:
        pytest.skip(str(exc))
    except NodeInstallError as exc:
        pytest.fail(str(exc))
    report_line(request, installed.message)
    return installed


__all__ = [
    "Installed",
    "NodeInstallError",
    "NodePackage",
    "NodeUnavailable",
    "cache_dir",
    "cache_root",
    "install",
    "install_once",
    "installed_version",
    "is_current",
    "node_unavailable_reason",
    "pytest_install",
    "report_line",
]
