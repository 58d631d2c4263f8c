"""A Leader and a Helper running in this process, over real HTTP on 127.0.0.1.

    async with AggregatorPair(tmp_path, helper_overrides={"async_helper": True}) as pair:
        pt = pair.provision(Prio3Count(2), min_batch_size=5)
        async with pair.client(pt) as client:
            await client.upload([1, 0, 1, 1, 0])
        async with pair.collector(pt) as collector:
            result = await collector.collect(pair.current_interval_query(pt))

Each aggregator has its own SQLite file under `tmp_path`; `pair.leader_state` /
`pair.helper_state` give the AppState (datastore, clock) for white-box assertions. The
clock is injectable (`clock=`) so that tests can move time.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from ppm_reference.dap.client import Client
from ppm_reference.dap.collector import Collector
from ppm_reference.dap.common import Duration, Interval, Time
from ppm_reference.dap.profiles import SHIPPED
from ppm_reference.dap.provision import ProvisionedTask, new_task
from ppm_reference.dap.server.app import build_app
from ppm_reference.dap.server.common import STATE_KEY, AppState
from ppm_reference.dap.server.config import AggregatorConfig
from ppm_reference.dap.server.serving import ssl_context, start_site

# Ports for the test servers: below Linux's ephemeral range (32768-60999 by default),
# from which the kernel takes the source port of every outgoing connection and bind(0)'s
# port. A port picked there is free when picked but may be taken by another test's
# connection before the server binds it ("address already in use", seen with four xdist
# workers). Each xdist worker has 1,000 ports of its own, each checked before use.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_PORT_BASE = 20000 + (_WORKER % 12) * 1000
_NEXT_PORT = itertools.count()


def free_port() -> int:
    for _ in range(1000):
        port = _PORT_BASE + next(_NEXT_PORT) % 1000
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (another server, another test session)
            return port
    with socket.socket() as s:  # every one in use: the kernel's choice
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AggregatorPair:
    def __init__(self, tmp_path: Path, leader_overrides: dict[str, Any] | None = None,
                 helper_overrides: dict[str, Any] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.tmp_path = Path(tmp_path)
        self.clock = clock
        self.leader_port = free_port()
        self.helper_port = free_port()
        base = {"sqlite_synchronous": "NORMAL", "worker_interval": 0.02, "retry_after": 1,
                "straggler_age": 0.0}
        # (an override may name another datastore, e.g. a PostgreSQL URL)
        self.leader_config = AggregatorConfig(**{
            "role": "leader", "datastore": str(self.tmp_path / "leader.sqlite"),
            "listen_port": self.leader_port, **base, **(leader_overrides or {})})
        self.helper_config = AggregatorConfig(**{
            "role": "helper", "datastore": str(self.tmp_path / "helper.sqlite"),
            "listen_port": self.helper_port, **base, **(helper_overrides or {})})
        self.runners: list[web.AppRunner] = []
        self.leader_app: web.Application | None = None
        self.helper_app: web.Application | None = None

    @property
    def leader_url(self) -> str:
        return f"{self.leader_config.scheme}://127.0.0.1:{self.leader_port}/"

    @property
    def helper_url(self) -> str:
        return f"{self.helper_config.scheme}://127.0.0.1:{self.helper_port}/"

    async def start(self) -> AggregatorPair:
        self.helper_app = await self._start(self.helper_config)
        self.leader_app = await self._start(self.leader_config)
        return self

    async def _start(self, config: AggregatorConfig) -> web.Application:
        app = build_app(config, clock=self.clock)
        # The servers' own runner: connection cap, timeouts, parser errors as problems.
        runner = await start_site(app, "127.0.0.1", config.listen_port, config.limits,
                                  ssl_context(config.tls_cert, config.tls_key))
        self.runners.append(runner)
        return app

    async def stop(self) -> None:
        for runner in reversed(self.runners):
            await runner.cleanup()
        self.runners.clear()

    async def __aenter__(self) -> AggregatorPair:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def leader_state(self) -> AppState:
        assert self.leader_app is not None
        return self.leader_app[STATE_KEY]

    @property
    def helper_state(self) -> AppState:
        assert self.helper_app is not None
        return self.helper_app[STATE_KEY]

    def provision(self, vdaf: Any, **kwargs: Any) -> ProvisionedTask:
        """A new task for `vdaf`, stored in both aggregators' datastores. Without a
        `profile`, a dap-18 task: the request-by-request tests write DAP-18 messages by
        hand (the scenarios that run on every profile pass theirs)."""
        if "profile" not in kwargs:
            from ppm_reference.dap.profiles import get_profile

            kwargs["profile"] = get_profile("dap-18")
        pt = new_task(vdaf, self.leader_url, self.helper_url, **kwargs)
        self.add(pt)
        return pt

    def add(self, pt: ProvisionedTask) -> None:
        for st, record in ((self.leader_state, pt.leader_record),
                           (self.helper_state, pt.helper_record)):
            with st.datastore.transaction() as tx:
                tx.put_task(record)
            st.tasks.invalidate(record.task_id)

    def client(self, pt: ProvisionedTask) -> Client:
        return Client(pt.task, clock=self.clock)

    def collector(self, pt: ProvisionedTask) -> Collector:
        return Collector(pt.task, pt.collector_keypair, pt.collector_auth_token)

    def current_interval_query(self, pt: ProvisionedTask, back: int = 5,
                               forward: int = 5) -> Any:
        """A time-interval query around the current time (in time_precision units; a
        DAP-09 query in seconds for a dap-09 task)."""
        now = int(self.clock()) // pt.task.time_precision
        return Proto(pt.task.profile.name).interval_query(pt, now - back, back + forward)


# -- the two protocol profiles, for tests that run the same scenario on both -----------------


class Proto:
    """What differs, for a test, between profiles, asked of the profile itself: the VDAF
    classes (through ``vdaf.registry`` for the profile's VDAF draft), how queries and
    intervals are written (``profile.flow``). Scenarios are written once against this
    object; a new profile runs them by being named in ``PROTOS``."""

    def __init__(self, name: str) -> None:
        from ppm_reference.dap.profiles import get_profile

        self.name = name
        self.profile = get_profile(name)
        # VDAF-08 (dap-09) takes bit widths instead of maxima, and has MultihotCountVec
        # only as the test-only MultiHotHistogram of its published vectors.
        self.vdaf08 = self.profile.vdaf_version == "08"
        # Whether the Collector names its collection jobs (DAP-09) rather than the Leader.
        self.dap09 = self.profile.flow.collector_chooses_job_id

    def __repr__(self) -> str:
        return self.name

    def _vdaf(self, name: str, **params: int) -> Any:
        return self.profile.build_vdaf(name, params)

    def count(self) -> Any:
        return self._vdaf("Prio3Count")

    def sum(self, max_measurement: int) -> Any:
        if self.vdaf08:
            return self._vdaf("Prio3Sum", bits=max_measurement.bit_length())
        return self._vdaf("Prio3Sum", max_measurement=max_measurement)

    def sumvec(self, length: int, max_measurement: int, chunk_length: int) -> Any:
        if self.vdaf08:
            return self._vdaf("Prio3SumVec", length=length,
                              bits=max_measurement.bit_length(), chunk_length=chunk_length)
        return self._vdaf("Prio3SumVec", length=length, max_measurement=max_measurement,
                          chunk_length=chunk_length)

    def histogram(self, length: int, chunk_length: int) -> Any:
        return self._vdaf("Prio3Histogram", length=length, chunk_length=chunk_length)

    def multihot(self, length: int, max_weight: int, chunk_length: int) -> Any:
        """Prio3MultihotCountVec; for VDAF-08 the MultiHotHistogram of its vectors."""
        if self.vdaf08:
            from ppm_reference.vdaf.prio3 import Prio3MultiHotHistogramV08

            return Prio3MultiHotHistogramV08(2, length, max_weight, chunk_length)
        return self._vdaf("Prio3MultihotCountVec", length=length, max_weight=max_weight,
                          chunk_length=chunk_length)

    # Queries, with times given in time_precision units.
    def interval_query(self, pt: ProvisionedTask, start: int, duration: int) -> Any:
        return self.profile.flow.query_interval(pt.task, Interval(Time(start),
                                                                  Duration(duration)))

    def current_batch_query(self, pt: ProvisionedTask | None = None) -> Any:
        return self.profile.flow.query_current_batch(pt.task if pt else None)

    def units(self, pt: ProvisionedTask, interval: Any) -> tuple[int, int]:
        """(start, duration) of a collection's interval in time_precision units."""
        p = pt.task.time_precision // self.profile.flow.interval_unit(pt.task)
        assert int(interval.start) % p == 0 and int(interval.duration) % p == 0
        return int(interval.start) // p, int(interval.duration) // p


PROTOS = [Proto(name) for name in SHIPPED]


# -- `ppm leader` and `ppm helper` as processes ----------------------------------------------


def wait_ready(proc: Any, port: int, timeout: float = 20.0, log: Path | None = None) -> None:
    """Wait until the server process answers GET /hpke_config (its log in the error when
    it exits first)."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = log.read_text() if log is not None and log.exists() else ""
            raise AssertionError(f"server exited with {proc.returncode}: {said}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/hpke_config",
                                        timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"server on port {port} not ready after {timeout} s")


@contextmanager
def server_processes(tmp_path: Path, **config: Any) -> Iterator[dict[str, Any]]:
    """A Leader and a Helper configuration file with free ports (plus `config`);
    `start()` runs `ppm helper` and `ppm leader` as processes, terminated on exit. Their
    logs go to `tmp_path/{role}.log` (a pipe nobody reads would block a server once its
    buffer is full)."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    ports = {"leader": free_port(), "helper": free_port()}
    configs = {}
    for role, port in ports.items():
        path = tmp_path / f"{role}.json"
        path.write_text(json.dumps({
            "role": role, "listen_port": port, "datastore": f"{role}.sqlite",
            "sqlite_synchronous": "NORMAL", "worker_interval": 0.02, "straggler_age": 0.0,
            **config}))
        configs[role] = path
    procs: list[subprocess.Popen[str]] = []
    logs: list[Any] = []

    def start() -> None:
        for role in ("helper", "leader"):
            log = open(tmp_path / f"{role}.log", "w")  # noqa: SIM115 - closed on exit
            logs.append(log)
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "ppm_reference", role, "--config", str(configs[role])],
                cwd=root, stdout=subprocess.DEVNULL, stderr=log, text=True))
        for proc, role in zip(procs, ("helper", "leader"), strict=True):
            wait_ready(proc, ports[role], log=tmp_path / f"{role}.log")

    try:
        yield {"ports": ports, "configs": configs, "start": start}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in logs:
            log.close()
