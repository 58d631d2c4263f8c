"""Samplable anonymous aggregation end to end over real processes (issue 17; paper 000
Sections 3-4, paper 002): a Helper, an honest Leader (with its Oblivious HTTP gateway
and peer logging), a Leader modified to skip its own release checks, and an Oblivious
HTTP relay, each a separate `python` process on loopback addresses:

* the Client connects from 127.0.0.3, the relay's outgoing connections from 127.0.0.2,
  everything else (provisioning, the Collector) from 127.0.0.1, so the honest Leader's
  peer log says who reached it;
* sampled-out Clients send nothing (the Leader sees exactly one upload per sampled
  Client);
* a batch below the largest minimum batch size bound of its reports is released by
  neither Aggregator, also when the Leader is modified to release it (the Helper
  refuses); once enough reports arrive it is released;
* the rate guard holds a batch that arrived faster than twice the expected rate, at
  both Aggregators;
* stripping or changing the bound makes the report undecryptable (HPKE AAD);
* dummy reports are counted like any report and add nothing to the result;
* uploads through the relay are accepted exactly like direct ones, the Leader seeing
  only the relay's address; a tampered encapsulation is refused with RFC 9458's errors
  and nothing is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import json
import math
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ppm_reference.dap import ohttp
from ppm_reference.dap.admin_client import AdminClient
from ppm_reference.dap.client import Client, RelayRoute
from ppm_reference.dap.collector import CollectionError, Collector
from ppm_reference.dap.common import MIN_BATCH_SIZE_EXTENSION, Extension, ReportError
from ppm_reference.dap.core.rand import SeededRng
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.provision import ProvisionedTask, new_task
from ppm_reference.dap.sampling import (
    Decision,
    ParticipationPlan,
    min_batch_size_extension,
    zero_measurement,
)
from tests.dap_harness import Proto, free_port

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TOKEN = "admin-token"
CLIENT_ADDR, RELAY_ADDR = "127.0.0.3", "127.0.0.2"

# A Leader whose own release checks are removed: it asks the Helper for the aggregate
# share of any batch that reaches the task's min_batch_size, whatever its reports' bounds
# and rate ("even when the Leader is modified to try").
EVIL_LEADER = """
import sys
import ppm_reference.dap.core.leader as leader
leader.required_batch_size = lambda task, merged: int(task.task.min_batch_size)
leader.rate_exceeded = lambda task, merged: None
from ppm_reference.dap.server.app import run
from ppm_reference.dap.server.config import AggregatorConfig
run(AggregatorConfig.load(sys.argv[1]))
"""


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


@dataclass
class Proc:
    name: str
    argv: list[str]
    log: Path
    url: str
    probe: str
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=PROJECT_ROOT,
                                         preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + self.probe, timeout=2):
                    return
            except urllib.error.HTTPError:
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)
        raise AssertionError(f"{self.name} did not start:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@dataclass
class Cluster:
    tmp: Path
    helper: Proc
    leader: Proc
    evil: Proc
    relay: Proc

    def provision(self, vdaf: Any, leader: Proc, options: dict[str, Any] | None = None,
                  **kwargs: Any) -> ProvisionedTask:
        pt = new_task(vdaf, leader.url, self.helper.url, **kwargs)
        pt = dataclasses.replace(pt, options={**pt.options, **(options or {})})
        AdminClient(self.helper.url, TOKEN).put_task(pt.admin_json("helper"))
        AdminClient(leader.url, TOKEN).put_task(pt.admin_json("leader"))
        return pt

    def leader_db(self, leader: Proc) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.tmp / (leader.name + '.sqlite')}?mode=ro",
                               uri=True)


def _aggregator(tmp: Path, name: str, role: str, evil: bool = False,
                **overrides: Any) -> Proc:
    port = free_port()
    config = {"role": role, "datastore": f"{name}.sqlite", "listen_port": port,
              "admin_token": TOKEN, "sqlite_synchronous": "NORMAL", "worker_interval": 0.02,
              "retry_after": 0, "straggler_age": 0.0,
              # Tasks of one or two reports: the development setting of the floor.
              "min_batch_size_floor": 1, **overrides}
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(config))
    argv = ([sys.executable, "-c", EVIL_LEADER, str(path)] if evil
            else [sys.executable, "-m", "ppm_reference.dap.server", str(path)])
    return Proc(name, argv, tmp / f"{name}.log", f"http://127.0.0.1:{port}/", "hpke_config")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("sampling")
    give_up = {"collection_give_up_after": 2.0}
    helper = _aggregator(tmp, "helper", "helper")
    leader = _aggregator(tmp, "leader", "leader", ohttp_gateway=True, log_request_peers=True,
                         **give_up)
    evil = _aggregator(tmp, "evil", "leader", evil=True, **give_up)
    relay_port = free_port()
    relay = Proc("relay", [sys.executable, "-m", "ppm_reference", "relay", "--gateway",
                           leader.url.rstrip("/") + ohttp.WELL_KNOWN_PATH,
                           "--listen-port", str(relay_port), "--source-host", RELAY_ADDR],
                 tmp / "relay.log", f"http://127.0.0.1:{relay_port}/",
                 ohttp.WELL_KNOWN_PATH.lstrip("/"))
    procs = [helper, leader, evil]
    try:
        for p in procs:
            p.start()
        relay.start()
        procs.append(relay)
        yield Cluster(tmp, helper, leader, evil, relay)
    finally:
        for p in procs:
            p.stop()


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _collect(pt: ProvisionedTask, timeout: float = 30.0) -> Any:
    query = Proto(pt.task.profile.name).interval_query(
        pt, int(time.time()) // pt.task.time_precision - 2, 4)
    async with Collector(pt.task, pt.collector_keypair, pt.collector_auth_token) as col:
        return await col.collect(query, timeout=timeout)


async def _upload(pt: ProvisionedTask, measurements: list[Any], **kwargs: Any) -> Any:
    async with Client(pt.task, source_host=CLIENT_ADDR, **kwargs) as client:
        return await client.upload(measurements)


def _count_vdaf(profile: str) -> Any:
    return Proto(profile).count()


# -- sampling ------------------------------------------------------------------------------


def test_sampled_out_clients_send_nothing(cluster: Cluster) -> None:
    pt = cluster.provision(_count_vdaf("dap-18"), cluster.leader, min_batch_size=1,
                           profile=get_profile("dap-18"))
    plan = ParticipationPlan(q=0.3)
    rng = SeededRng(b"issue-17 sampled-out")
    decisions = [plan.decide(rng) for _ in range(30)]
    sampled = [i for i, d in enumerate(decisions) if d == Decision.CONTRIBUTE]
    assert 0 < len(sampled) < 30  # the seed gives a mixed population

    async def go() -> None:
        for i in range(30):
            if decisions[i] == Decision.CONTRIBUTE:
                await _upload(pt, [1])

    _run(go())
    posts = [line for line in cluster.leader.log.read_text().splitlines()
             if f"POST /tasks/{pt.admin_json('leader')['task_id']}/reports" in line]
    assert len(posts) == len(sampled)
    assert all(f"request from {CLIENT_ADDR}" in line for line in posts)
    result = _run(_collect(pt))
    assert result.report_count == len(sampled) and result.aggregate_result == len(sampled)


# -- the minimum batch size bound ----------------------------------------------------------


@pytest.mark.parametrize("profile", ["dap-19", "dap-18", "dap-09"])
@pytest.mark.parametrize("evil", [False, True], ids=["leader", "modified-leader"])
def test_batch_below_a_reports_bound_is_not_released(cluster: Cluster, profile: str,
                                                     evil: bool) -> None:
    leader = cluster.evil if evil else cluster.leader
    pt = cluster.provision(_count_vdaf(profile), leader, min_batch_size=2,
                           time_precision=3600, profile=get_profile(profile))
    bound = [min_batch_size_extension(5)]
    _run(_upload(pt, [1, 1, 0], extensions=bound))
    with pytest.raises(CollectionError) as info:
        _run(_collect(pt))
    assert "invalidBatchSize" in info.value.problem_type + str(info.value)
    # The honest Leader gave up on its own; the modified one asked, and the Helper said no.
    assert ("Helper:" in str(info.value)) == evil
    assert "fewer than 5" in str(info.value) or "bound 5 of its reports" in str(info.value)
    _run(_upload(pt, [1, 0], extensions=bound))
    result = _run(_collect(pt))
    assert result.report_count == 5 and result.aggregate_result == 3


def test_rate_guard_holds_at_both_aggregators(cluster: Cluster) -> None:
    # 2 x 0.0005/s over a 3600 s bucket allows 3.6 reports; 6 arrived.
    for leader in (cluster.leader, cluster.evil):
        pt = cluster.provision(_count_vdaf("dap-18"), leader,
                               {"expected_report_rate": 0.0005}, min_batch_size=2,
                               time_precision=3600, profile=get_profile("dap-18"))
        _run(_upload(pt, [1] * 6))
        with pytest.raises(CollectionError) as info:
            _run(_collect(pt))
        assert "rate guard" in str(info.value)
        assert ("Helper:" in str(info.value)) == (leader is cluster.evil)


@pytest.mark.parametrize("profile", ["dap-19", "dap-18"])
def test_stripping_or_changing_the_bound_makes_the_report_undecryptable(
        cluster: Cluster, profile: str) -> None:
    pt = cluster.provision(_count_vdaf(profile), cluster.leader, min_batch_size=1,
                           time_precision=3600, profile=get_profile(profile))

    async def go() -> None:
        async with Client(pt.task, source_host=CLIENT_ADDR,
                          extensions=[min_batch_size_extension(1000)]) as client:
            good, stripped, changed = await client.prepare([1, 1, 1])
            md = stripped.report_metadata
            stripped = dataclasses.replace(stripped, report_metadata=dataclasses.replace(
                md, public_extensions=()))
            md = changed.report_metadata
            changed = dataclasses.replace(changed, report_metadata=dataclasses.replace(
                md, public_extensions=(Extension(MIN_BATCH_SIZE_EXTENSION,
                                                 (1).to_bytes(4, "big")),)))
            res = await client.upload_reports([stripped, changed])
            assert res.accepted == 2  # the Leader decrypts only when aggregating

    _run(go())
    deadline = time.monotonic() + 20
    errors: list[int] = []
    while time.monotonic() < deadline:
        with contextlib.closing(cluster.leader_db(cluster.leader)) as db:
            errors = [row[0] for row in db.execute(
                "SELECT error FROM client_reports WHERE task_id=? AND state='failed'",
                (bytes(pt.task.task_id),))]
        if len(errors) == 2:
            break
        time.sleep(0.1)
    assert errors == [int(ReportError.HPKE_DECRYPT_ERROR)] * 2
    # Nothing of them reached a batch: with min_batch_size 1 nothing is collectable.
    with pytest.raises(CollectionError):
        _run(_collect(pt, timeout=10))


# -- dummies -------------------------------------------------------------------------------


def test_dummy_reports_are_counted_and_add_nothing(cluster: Cluster) -> None:
    proto = Proto("dap-18")
    vdaf = proto.sum(13)
    pt = cluster.provision(vdaf, cluster.leader, min_batch_size=1, time_precision=3600,
                           profile=get_profile("dap-18"))
    plan = ParticipationPlan(q=0.4, dummy_rate=0.5, min_batch_size=1)
    rng = SeededRng(b"issue-17 dummies")
    values = [(7 * i + 3) % 14 for i in range(40)]
    decisions = [plan.decide(rng) for _ in values]
    real = [v for v, d in zip(values, decisions, strict=True) if d == Decision.CONTRIBUTE]
    n_dummy = sum(d == Decision.DUMMY for d in decisions)
    assert real and n_dummy
    zero = zero_measurement("Prio3Sum", {"max_measurement": 13})

    async def go() -> tuple[list[int], list[int]]:
        async with Client(pt.task, source_host=CLIENT_ADDR,
                          extensions=plan.extensions()) as client:
            reals = await client.prepare(real)
            dummies = await client.prepare([zero] * n_dummy)
            # On the wire a dummy is a report like any other: same length, same extensions.
            sizes = sorted({len(r.encode()) for r in reals + dummies})
            exts = {tuple(r.report_metadata.public_extensions) for r in reals + dummies}
            result = await client.upload_reports(reals + dummies)
            assert result.accepted == len(real) + n_dummy
            return sizes, [len(exts)]

    sizes, ext_kinds = _run(go())
    assert len(sizes) == 1 and ext_kinds == [1]
    result = _run(_collect(pt))
    assert result.report_count == len(real) + n_dummy
    assert result.aggregate_result == sum(real)


# -- the Oblivious HTTP relay --------------------------------------------------------------


@pytest.mark.parametrize("profile", ["dap-18", "dap-09"])
def test_uploads_through_the_relay(cluster: Cluster, profile: str) -> None:
    leader = cluster.leader
    before = leader.log.read_text().count("\n")
    pt_relay = cluster.provision(Proto(profile).histogram(4, 2), leader, min_batch_size=3,
                                 time_precision=3600, profile=get_profile(profile))
    pt_direct = cluster.provision(Proto(profile).histogram(4, 2), leader, min_batch_size=3,
                                  time_precision=3600, profile=get_profile(profile))
    measurements = [0, 3, 3, 1, 2]
    route = RelayRoute(cluster.relay.url)
    via_relay = _run(_upload(pt_relay, measurements, relay=route))
    direct = _run(_upload(pt_direct, measurements))
    assert via_relay.accepted == direct.accepted == 5 and not via_relay.rejected
    assert _run(_collect(pt_relay)).aggregate_result == \
        _run(_collect(pt_direct)).aggregate_result == [1, 1, 1, 2]
    lines = leader.log.read_text().splitlines()[before:]
    tid_relay = pt_relay.admin_json("leader")["task_id"]
    tid_direct = pt_direct.admin_json("leader")["task_id"]
    gateway = [x for x in lines if ohttp.WELL_KNOWN_PATH in x]
    assert gateway and all(f"request from {RELAY_ADDR}:" in x for x in gateway)
    # Through the relay the Leader saw no request of the Client at all: no report POST
    # of that task, nothing from the Client's address but the direct task's requests.
    assert not [x for x in lines if f"/tasks/{tid_relay}/reports" in x]
    from_client = [x for x in lines if f"request from {CLIENT_ADDR}:" in x]
    assert from_client and all(tid_direct in x or "hpke_config" in x for x in from_client)
    assert len([x for x in from_client if "hpke_config" in x]) == 1  # the direct Client's
    # DAP-09 uploads one report per PUT: five encapsulated requests, one per report.
    # (plus one for the hpke_config fetched through the relay; the GET is the keys)
    uploads = len([x for x in gateway if ": POST " in x]) - 1
    assert uploads == (5 if profile == "dap-09" else 1)


def test_a_refused_report_through_the_relay_is_answered_like_a_direct_one(
        cluster: Cluster) -> None:
    pt = cluster.provision(_count_vdaf("dap-19"), cluster.leader, min_batch_size=1,
                           profile=get_profile("dap-19"))

    async def go() -> tuple[Any, Any]:
        results = []
        for route in (RelayRoute(cluster.relay.url), None):
            async with Client(pt.task, source_host=CLIENT_ADDR, relay=route,
                              extensions=[(0xFFEE, b"")]) as client:
                results.append(await client.upload([1]))
        return results[0], results[1]

    via_relay, direct = _run(go())
    assert list(via_relay.rejected.values()) == list(direct.rejected.values()) == \
        [ReportError.UNSUPPORTED_EXTENSION]


def test_tampered_encapsulation_is_refused_and_nothing_stored(cluster: Cluster) -> None:
    pt = cluster.provision(_count_vdaf("dap-18"), cluster.leader, min_batch_size=1,
                           profile=get_profile("dap-18"))

    def stored() -> int:
        with contextlib.closing(cluster.leader_db(cluster.leader)) as db:
            return int(db.execute("SELECT COUNT(*) FROM client_reports WHERE task_id=?",
                                  (bytes(pt.task.task_id),)).fetchone()[0])

    async def go() -> list[tuple[int, dict[str, Any]]]:
        async with aiohttp.ClientSession() as session:
            async with session.get(cluster.relay.url.rstrip("/") + ohttp.WELL_KNOWN_PATH) \
                    as resp:
                config = ohttp.decode_key_configs(await resp.read())[0]
            async with Client(pt.task) as client:
                (report,) = await client.prepare([1])
            message, body = pt.task.profile.flow.encode_upload([report])
            from ppm_reference.dap import bhttp

            inner = bhttp.Request(b"POST", b"http", b"leader", (
                f"/tasks/{pt.admin_json('leader')['task_id']}/reports").encode(),
                ((b"content-type", pt.task.profile.media_type_for(message).encode()),),
                body).encode()
            enc, _ = ohttp.encapsulate_request(config, inner)
            flipped = enc[:-1] + bytes([enc[-1] ^ 1])          # AEAD tag broken
            wrong_key = bytes([enc[0] ^ 0x7F]) + enc[1:]         # unknown key identifier
            answers = []
            for bad in (flipped, wrong_key, enc[:20]):
                async with session.post(cluster.relay.url, data=bad, headers={
                        "Content-Type": ohttp.REQUEST_MEDIA_TYPE}) as resp:
                    answers.append((resp.status, json.loads(await resp.read())))
            return answers

    answers = _run(go())
    assert [status for status, _ in answers] == [400, 400, 400]
    assert answers[1][1]["type"] == ohttp.KEY_PROBLEM_TYPE  # RFC 9458 Section 5.3
    assert answers[0][1]["type"] == "about:blank"
    assert stored() == 0


def test_randomized_dummies_leave_the_debiased_result_unbiased(cluster: Cluster) -> None:
    # MultiHotHistogramWithClientRandomization (symmetric RAPPOR, eps0 = 1, length 10):
    # dummies are RAPPOR of the zero vector, debiased with the real reports among n =
    # report_count. The sum over coordinates of the debiased result estimates the number
    # of real (one-hot) reports; its standard deviation is sqrt(n L p (1 - p)) / (1 - 2p)
    # (independent flips), and we accept 5.5 of them: false-failure probability 3.8e-8.
    # Unrandomized zero dummies would shift it by -L p / (1 - 2p) each: -582 for 100,
    # far outside the tolerance (334), so the test tells the two apart.
    from ppm_reference.dap import dp
    from ppm_reference.dap.sampling import dummy_measurement

    length, eps0, n_real, n_dummy = 10, 1.0, 300, 100
    spec = dp.make_spec("MultiHotHistogramWithClientRandomization", epsilon=1.0,
                        delta=1e-9, eps0=eps0, fp=1e-9)
    assert spec is not None
    max_weight = dp.required_max_weight(spec, "Prio3MultihotCountVec", length)
    vdaf = get_profile("dap-18").build_vdaf(
        "Prio3MultihotCountVec", {"length": length, "max_weight": max_weight,
                                  "chunk_length": 3})
    pt = cluster.provision(vdaf, cluster.leader, min_batch_size=1, time_precision=3600,
                           profile=get_profile("dap-18"), dp_policy=spec)
    policy = dp.policy_from_spec(spec, vdaf)

    async def go() -> None:
        async with Client(pt.task, source_host=CLIENT_ADDR) as client:
            reals = await client.prepare([i % length for i in range(n_real)])
            dummies = await client.prepare(
                [dummy_measurement("Prio3MultihotCountVec", {"length": length}, policy)
                 for _ in range(n_dummy)], randomized=True)
            result = await client.upload_reports(reals + dummies)
            assert result.accepted == n_real + n_dummy

    _run(go())
    result = _run(_collect(pt))
    n = n_real + n_dummy
    assert result.report_count == n
    p = 1 / (math.exp(eps0) + 1)
    sd = math.sqrt(n * length * p * (1 - p)) / (1 - 2 * p)
    assert abs(sum(result.debiased_result) - n_real) <= 5.5 * sd


def test_ppm_upload_samples_on_the_device(cluster: Cluster, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from ppm_reference.cli import main

    pt = cluster.provision(Proto("dap-18").sum(13), cluster.leader, min_batch_size=1,
                           time_precision=3600, profile=get_profile("dap-18"))
    task_file = tmp_path / "client-task.json"
    task_file.write_text(json.dumps(pt.client_view()))
    tid = pt.admin_json("leader")["task_id"]
    # q = 0: every Client samples itself out, nothing reaches the Leader.
    assert main(["upload", "--task", str(task_file), "--sample-rate", "0", "--json",
                 "3", "4", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["accepted"], out["sampled_out"], out["dummies"]) == (0, 3, 0)
    assert f"/tasks/{tid}/reports" not in cluster.leader.log.read_text()
    # With dummy rate 1 each sends a zero report instead, here through the relay and with
    # a bound: counted, adding nothing.
    assert main(["upload", "--task", str(task_file), "--sample-rate", "0", "--dummy-rate",
                 "1", "--relay", cluster.relay.url, "--min-batch-bound", "3", "--json",
                 "3", "4", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["accepted"], out["sampled_out"], out["dummies"]) == (3, 3, 3)
    result = _run(_collect(pt))
    assert (result.report_count, result.aggregate_result) == (3, 0)
