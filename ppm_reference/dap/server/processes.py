"""One Aggregator as several processes on one host: `ppm leader --frontends N --drivers M`
(or `"frontends"` / `"drivers"` in the configuration).

The supervisor starts N front ends (`mode: frontend`: HTTP only; with N > 1 they share
`listen_port` through SO_REUSEPORT, the kernel spreading connections over them) and M
drivers (`mode: driver`: the background work, no listener but, with `health_port`, a
health check on health_port + i for driver i), all on the configuration's
datastore, and restarts any that exits (with a backoff when one keeps failing). SIGINT
or SIGTERM stops them all (SIGTERM to each, SIGKILL after `STOP_GRACE` seconds).

Each child is `python -m ppm_reference.dap.server CHILD_CONFIG`, where CHILD_CONFIG is
the supervisor's configuration with the child's `mode` (written 0600 beside nothing: a
temporary file, since the configuration may hold the admin token); the environment
(PPM_DATASTORE_KEY) is inherited. The processes share nothing but the datastore (see
dap/server/scheduling.py for how they divide the work), so front ends and drivers may as
well run on other hosts.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from ppm_reference.dap.server.config import AggregatorConfig

log = logging.getLogger("ppm.processes")

STOP_GRACE = 10.0
_POLL = 0.2


@dataclass
class Child:
    name: str
    config_path: str
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    failures: int = 0
    restart_at: float = 0.0
    restarts: int = 0

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "ppm_reference.dap.server",
                                      self.config_path],
                                     preexec_fn=_die_with_parent)
        self.started_at = time.monotonic()
        log.info("%s started (pid %d)", self.name, self.proc.pid)


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, SIGTERM when the supervisor dies (even by
    SIGKILL), so that no orphaned front end keeps the port."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def child_configs(config: AggregatorConfig, folder: Path) -> list[tuple[str, str]]:
    """(name, configuration file) of each child process."""
    out = []
    base = config.to_dict()
    base.update(frontends=0, drivers=0)
    plan = [("frontend", i) for i in range(config.frontends)] + \
           [("driver", i) for i in range(config.drivers)]
    for mode, i in plan:
        data = dict(base, mode=mode)
        if mode == "frontend" and config.frontends > 1:
            data["reuse_port"] = True
        if mode == "driver" and config.health_port is not None:
            data["health_port"] = config.health_port + i  # one port per driver
        path = folder / f"{config.role}-{mode}-{i}.json"
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        out.append((f"{config.role} {mode} {i}", str(path)))
    return out


def supervise(config: AggregatorConfig) -> None:
    """Run and supervise the configuration's front ends and drivers until SIGINT or
    SIGTERM."""
    stop = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    with tempfile.TemporaryDirectory(prefix="ppm-") as folder:
        children = [Child(name, path) for name, path in child_configs(config, Path(folder))]
        log.info("%s: %d front end(s) on %s:%d, %d driver(s)", config.role, config.frontends,
                 config.listen_host, config.listen_port, config.drivers)
        try:
            for child in children:
                child.start()
            while not stop:
                time.sleep(_POLL)
                now = time.monotonic()
                for child in children:
                    _watch(child, now)
        finally:
            _stop_all(children)
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _watch(child: Child, now: float) -> None:
    """Restart a child that exited: at once the first time, then with a backoff while
    it keeps failing within a minute of its start."""
    if child.proc is None:
        if now >= child.restart_at:
            child.restarts += 1
            child.start()
        return
    code = child.proc.poll()
    if code is None:
        return
    child.failures = child.failures + 1 if now - child.started_at < 60 else 1
    delay = 0.0 if child.failures <= 1 else min(30.0, 0.5 * 2 ** (child.failures - 2))
    log.warning("%s exited with status %s; restarting in %.1f s", child.name, code, delay)
    child.proc = None
    child.restart_at = now + delay


def _stop_all(children: list[Child]) -> None:
    running = [c.proc for c in children if c.proc is not None and c.proc.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    for proc in running:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


__all__ = ["child_configs", "supervise"]
