"""In-band task provisioning (draft-ietf-ppm-dap-taskprov, editors' copy 2026-07-07) for
dap-19 tasks: the DAP-Taskprov header codec, the task ID and verification key
derivations (against independent computations and the draft's example), every opt-out
case in the Leader and the Helper, the peer configuration, the CLI, and a task provisioned
in-band running end to end over real Leader and Helper processes, after which both
Aggregators hold the same task ID and verification key."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.dap.common import BatchMode, Duration, Interval, Time
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.profiles.dap19 import taskprov as tp
from ppm_reference.dap.provision import TaskprovPeering, b64, new_task, new_taskprov_task
from ppm_reference.dap.server.config import AggregatorConfig
from ppm_reference.dap.storage import TaskRecord
from ppm_reference.dap.taskprov import PeerConfigError, advertisement_headers, parse_peers
from ppm_reference.vdaf import registry
from tests.dap_harness import AggregatorPair, server_processes
from tests.test_dap_e2e import collect, query_for, upload

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DAP19 = get_profile("dap-19")
URN = "urn:ietf:params:ppm:dap:error:"

# Section 3.2's example of the header.
EXAMPLE = (":BHRlc3QAG2h0dHBzOi8vbGVhZGVyLmV4YW1wbGUuY29tLwAbaHR0cHM6Ly9oZWxwZXIuZXhhbXBsZS5jb2"
           "0vAAAAAAAAADwAAAAAAAAACgEAAAAAAAEAAAAUAAEAEAAAAAAAAAA8AAAAAAAAAGQ=:")


# -- known answers: the draft's example, the derivations -----------------------------------


def test_draft_example_header() -> None:
    """The example of Section 3.2 is a dap-19 TaskConfiguration: Prio3Count, time
    precision 60 s, min_batch_size 10, time-interval, task_interval (60, 100) in
    time-precision units; it re-encodes to the same header. That task ended in 1970, so
    every participant MUST opt out (Section 3.5)."""
    config = tp.parse_header([EXAMPLE])
    assert config is not None
    assert tp.header_value(config) == EXAMPLE
    decoded = DAP19.messages.TaskConfiguration.decode(config)
    assert decoded.task_info == b"test"
    assert decoded.leader_aggregator_endpoint == b"https://leader.example.com/"
    assert decoded.helper_aggregator_endpoint == b"https://helper.example.com/"
    assert (decoded.time_precision, decoded.min_batch_size) == (60, 10)
    assert decoded.batch_mode == BatchMode.TIME_INTERVAL
    assert decoded.vdaf_type == registry.codepoint("Prio3Count") == 1
    assert decoded.vdaf_configuration == b""
    assert decoded.task_interval() == Interval(Time(60), Duration(100))
    task_id = tp.derive_task_id(config)
    assert task_id == hashlib.sha256(hashlib.sha256(b"dap-taskprov task id").digest()
                                     + config).digest()
    # Within its interval it would be opted into; at its end it is not.
    task = tp.opt_in(config, DAP19, now=100 * 60)
    assert bytes(task.task_id) == task_id and task.config_bytes() == config
    with pytest.raises(tp.OptOut, match="the task ended at 9600"):
        tp.opt_in(config, DAP19, now=160 * 60)
    with pytest.raises(tp.OptOut, match="ended"):
        tp.opt_in(config, DAP19, now=time.time())


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.binary(min_size=32, max_size=32),
       st.integers(1, 100))
def test_property_verify_key_is_rfc5869_hkdf(init: bytes, task_id: bytes, length: int
                                             ) -> None:
    """Section 3.4 against the `cryptography` package's HKDF (RFC 5869, Extract then
    Expand), an independent implementation."""
    salt = hashlib.sha256(b"dap-taskprov").digest()
    expected = HKDF(algorithm=hashes.SHA256(), length=length, salt=salt,
                    info=task_id).derive(init)
    assert tp.derive_verify_key(init, task_id, length) == expected


def test_verify_key_init_must_be_32_bytes() -> None:
    with pytest.raises(ValueError, match="verify_key_init must be 32 bytes, got 31"):
        tp.derive_verify_key(bytes(31), bytes(32), 32)


# -- the header codec (RFC 9651 Item, Byte Sequence) ---------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_property_header_roundtrip(data: bytes) -> None:
    value = tp.header_value(data)
    assert value.startswith(":") and value.endswith(":")
    assert tp.parse_header([value]) == data
    # Parameters are ignored (Section 3.2); so is whitespace around the item.
    assert tp.parse_header([f" {value};a=1;b2=\"x y\";c;d=?0;e=tok/en;f=:AA==:\t"]) == data
    # RFC 9651 4.2.7: parsers SHOULD NOT fail when the '=' padding is missing.
    assert tp.parse_header([value.replace("=", "")]) == data


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_property_header_parser_never_raises(text: str) -> None:
    out = tp.parse_header([text])
    if out is not None:
        assert text.strip(" \t").startswith(":")


@pytest.mark.parametrize("values", [
    [], [":AAAA:", ":AAAA:"],             # absent; two field lines are not an Item
    ['"a string"'], ["42"], ["?1"], ["token"],  # Items of other types
    [":AA=A:"], [":A:"], [":AAAA===:"], [":AA AA:"], [":AAAA"],  # not a Byte Sequence
    [":AAAA:;Bad=1"], [":AAAA:,:AAAA:"], [":AAAA: x"],           # not one Item
])
def test_header_values_that_are_ignored(values: list[str]) -> None:
    assert tp.parse_header(values) is None


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=20), st.integers(0, 255), st.integers(0, 2**32 - 1),
       st.lists(st.tuples(st.integers(0, 2**16 - 1), st.binary(max_size=8)), max_size=3))
def test_property_advertised_configuration_codec(info: bytes, mode: int, vdaf_type: int,
                                                 extensions: list[tuple[int, bytes]]) -> None:
    """The lenient reading of a TaskConfiguration (any batch mode, any extensions) is an
    exact codec, and agrees with the strict dap-19 decoder where that one accepts."""
    raw = tp.AdvertisedConfiguration(
        info, b"https://l.example/", b"https://h.example/", 60, 3, mode, b"", vdaf_type, b"",
        tuple(tp._AnyExtension(t, d) for t, d in extensions))
    data = raw.encode()
    assert tp.read_configuration(data) == raw
    assert tp.read_configuration(data + b"\0") is None
    assert tp.read_configuration(data[:-1]) is None
    try:
        strict = DAP19.messages.TaskConfiguration.decode(data)
    except ValueError:
        return
    assert strict.encode() == data and int(strict.batch_mode) == mode


# -- building configurations for the opt-out cases ----------------------------------------


def _config(leader: str, helper: str, *, vdaf: Any = None, min_batch_size: int = 5,
            interval: Interval | None = None, dp_policy: dict[str, Any] | None = None,
            batch_mode: BatchMode = BatchMode.TIME_INTERVAL, time_precision: int = 60
            ) -> bytes:
    vdaf = vdaf or registry.build("Prio3Count")
    pt = new_task(vdaf, leader, helper, profile=DAP19, min_batch_size=min_batch_size,
                  task_interval=interval, dp_policy=dp_policy, batch_mode=batch_mode,
                  time_precision=time_precision)
    data: bytes = pt.task.config_bytes()
    return data


def _raw(config: bytes, **changes: Any) -> bytes:
    raw = tp.read_configuration(config)
    assert raw is not None
    fields = {f: getattr(raw, f) for f in raw.__dataclass_fields__}
    fields.update(changes)
    data: bytes = tp.AdvertisedConfiguration(**fields).encode()
    return data


def _ext(kind: int, data: bytes) -> Any:
    return tp._AnyExtension(kind, data)


def _now_interval(days: int = 1) -> Interval:
    """A task_interval around now, in 60 s units."""
    now = int(time.time()) // 60
    return Interval(Time(now - 60), Duration(days * 24 * 60))


class Peers:
    """Taskprov between an AggregatorPair's Leader and Helper."""

    def __init__(self, pair: AggregatorPair, **policy: Any) -> None:
        self.peering = TaskprovPeering.generate(pair.leader_url, pair.helper_url)
        pair.leader_config.taskprov_peers = [self.peering.peer_entry("leader", **policy)]
        pair.helper_config.taskprov_peers = [self.peering.peer_entry("helper", **policy)]


async def _post(session: aiohttp.ClientSession, url: str, config: bytes | None,
                task_id: bytes, token: str | None = None,
                header: str | None = None) -> tuple[int, dict[str, Any]]:
    headers = {}
    if config is not None:
        headers["DAP-Taskprov"] = header or tp.header_value(config)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with session.post(url.format(id=b64(task_id)), data=b"", headers=headers) as resp:
        body = await resp.read()
        try:
            doc = json.loads(body)
        except ValueError:
            doc = {}
        return resp.status, doc


def _stored(pair_state: Any, task_id: bytes) -> TaskRecord | None:
    with pair_state.datastore.transaction() as tx:
        record: TaskRecord | None = tx.get_task(task_id)
        return record


# Each case: (name, configuration from (leader_url, helper_url), detail in the answer).
OPT_OUT_CASES: list[tuple[str, Callable[[str, str], bytes], str]] = [
    ("ended", lambda ld, h: _config(ld, h, interval=Interval(Time(1000), Duration(60))),
     "the task ended"),
    ("unknown VDAF", lambda ld, h: _raw(_config(ld, h), vdaf_type=0x0000ABCD),
     "VDAF type 0x0000abcd is not implemented"),
    ("Poplar1 in a leader-selected task (time-interval only here)",
     lambda ld, h: _raw(_config(ld, h, batch_mode=BatchMode.LEADER_SELECTED), vdaf_type=6,
                        vdaf_configuration=b"\x00\x08"),
     "Poplar1 is not implemented in leader-selected tasks"),
    ("invalid VDAF parameters",
     lambda ld, h: _raw(_config(ld, h), vdaf_type=4, vdaf_configuration=bytes(8)),
     "invalid Prio3Histogram parameters"),
    ("unknown batch mode", lambda ld, h: _raw(_config(ld, h), batch_mode=7),
     "batch mode 7 is not implemented"),
    ("unknown task extension",
     lambda ld, h: _raw(_config(ld, h), extensions=(_ext(0x7777, b"x"),)),
     "unrecognized task extension type(s) [30583]"),
    ("repeated task extension",
     lambda ld, h: _raw(_config(ld, h), extensions=(
         _ext(1, _now_interval().encode()), _ext(1, _now_interval().encode()))),
     "a task extension is repeated"),
    ("no such peer", lambda ld, h: _config("https://other-leader.example/",
                                          "https://other-helper.example/"),
     "no taskprov peer"),

    ("min_batch_size below the peer's floor", lambda ld, h: _config(ld, h, min_batch_size=2),
     "min_batch_size 2 is below this Aggregator's minimum 3"),
    ("lifetime longer than the peer's maximum",
     lambda ld, h: _config(ld, h, interval=_now_interval(days=40)),
     "is longer than this Aggregator's maximum 2592000 s"),
    ("no task_interval with a maximum lifetime", lambda ld, h: _config(ld, h),
     "lifetime (unbounded)"),
    ("DP policy that does not fit the VDAF",
     lambda ld, h: _raw(_config(ld, h, vdaf=registry.build("Prio3Histogram", {"length": 4}),
                               interval=_now_interval(),
                               dp_policy={"policy": "HistogramWithAggregatorLaplace",
                                          "epsilon": 1.0}),
                       vdaf_type=1, vdaf_configuration=b""),
     "applies to Prio3Histogram, not Prio3Count"),
]
POLICY = {"min_batch_size": 3, "max_task_lifetime": 30 * 24 * 3600}


@pytest.mark.parametrize("role", ["leader", "helper"])
def test_every_opt_out_case(tmp_path: Path, role: str) -> None:
    """Each case answers invalidTask (Section 2; the dap-19 URN) and stores nothing: at
    the Leader on an upload, at the Helper on an aggregation job of its peer Leader."""

    async def run() -> None:
        pair = AggregatorPair(tmp_path)
        peers = Peers(pair, **POLICY)
        async with pair, aiohttp.ClientSession() as session:
            if role == "leader":
                url, token, state = pair.leader_url + "tasks/{id}/reports", None, \
                    pair.leader_state
            else:
                url, token, state = (pair.helper_url + "tasks/{id}/aggregation_jobs",
                                     peers.peering.aggregator_auth_token, pair.helper_state)
            for name, make, detail in OPT_OUT_CASES:
                config = make(pair.leader_url, pair.helper_url)
                task_id = tp.derive_task_id(config)
                status, doc = await _post(session, url, config, task_id, token)
                assert status == 400, (name, status, doc)
                assert doc["type"] == URN + "invalidTask", (name, doc)
                assert detail in doc["detail"], (name, doc["detail"])
                assert doc["taskid"] == b64(task_id)
                assert _stored(state, task_id) is None, name
            # The task names our peer, but another Aggregator in our role (own_endpoint).
            stranger = _config("https://other-leader.example/", pair.helper_url) \
                if role == "leader" else _config(pair.leader_url, "https://other.example/")
            status, doc = await _post(session, url, stranger, tp.derive_task_id(stranger),
                                      token)
            assert (status, doc["type"]) == (400, URN + "invalidTask")
            assert f"as its {role}, not this Aggregator" in doc["detail"]
            # A valid configuration is opted into (the handler then reads the empty body).
            good = _config(pair.leader_url, pair.helper_url, interval=_now_interval())
            good_id = tp.derive_task_id(good)
            status, doc = await _post(session, url, good, good_id, token)
            assert doc.get("type") != URN + "invalidTask", doc
            record = _stored(state, good_id)
            assert record is not None and record.role == role and record.config == good
    asyncio.run(run())


def test_advertisement_mistakes(tmp_path: Path) -> None:
    """What is not an opt-out: a mismatched task ID (unrecognizedTask, Sections 3.7.1 and
    3.8), a header that is not a Byte Sequence or holds no TaskConfiguration (ignored:
    then the task is unknown), a Helper request without its peer's token (refused before
    anything is stored), a Collector's advertisement of a task the Leader has not opted
    into (Section 3.7.3), an Aggregator without peers (ignores the header); and an
    existing task with the derived ID but another configuration (invalidTask)."""

    async def run() -> None:
        pair = AggregatorPair(tmp_path)
        peers = Peers(pair)
        async with pair, aiohttp.ClientSession() as session:
            reports = pair.leader_url + "tasks/{id}/reports"
            jobs = pair.helper_url + "tasks/{id}/aggregation_jobs"
            good = _config(pair.leader_url, pair.helper_url, interval=_now_interval())
            good_id = tp.derive_task_id(good)
            other_id = os.urandom(32)
            status, doc = await _post(session, reports, good, other_id)
            assert (status, doc["type"]) == (404, URN + "unrecognizedTask")
            assert "not the one derived" in doc["detail"]
            for header in ('"not bytes"', ":!!:", tp.header_value(b"\x01\x02\x03")):
                status, doc = await _post(session, reports, good, good_id, header=header)
                assert (status, doc["type"]) == (404, URN + "unrecognizedTask"), header
                assert doc["detail"] == "unknown task"
            # The Helper: no token, a wrong token.
            status, _ = await _post(session, jobs, good, good_id)
            assert status == 401
            status, _ = await _post(session, jobs, good, good_id, token="wrong")
            assert status == 403
            assert _stored(pair.helper_state, good_id) is None
            # A Collector's request does not make the Leader opt in.
            status, doc = await _post(session, pair.leader_url + "tasks/{id}/collection_jobs",
                                      good, good_id, token=peers.peering.collector_auth_token)
            assert (status, doc["type"]) == (404, URN + "unrecognizedTask")
            assert _stored(pair.leader_state, good_id) is None
            # A task stored under the derived ID with another configuration.
            clash = new_task(registry.build("Prio3Count"), pair.leader_url, pair.helper_url,
                             profile=DAP19, task_id=good_id)
            pair.add(clash)
            status, doc = await _post(session, reports, good, good_id)
            assert (status, doc["type"]) == (400, URN + "invalidTask")
            assert "configured differently" in doc["detail"]
        # Without taskprov_peers the header means nothing.
        plain = AggregatorPair(tmp_path / "plain")
        async with plain, aiohttp.ClientSession() as session:
            good = _config(plain.leader_url, plain.helper_url)
            status, doc = await _post(session, plain.leader_url + "tasks/{id}/reports", good,
                                      tp.derive_task_id(good))
            assert (status, doc["type"]) == (404, URN + "unrecognizedTask")
    (tmp_path / "plain").mkdir()
    asyncio.run(run())


# -- in-band provisioning end to end, in process --------------------------------------------


@pytest.mark.parametrize("mode", [BatchMode.TIME_INTERVAL, BatchMode.LEADER_SELECTED],
                         ids=["time_interval", "leader_selected"])
def test_in_band_task_runs_and_both_aggregators_derive_the_same_key(tmp_path: Path,
                                                                     mode: BatchMode) -> None:
    measurements = [[1, 0, 3], [0, 2, 0], [4, 0, 0], [0, 0, 0], [1, 1, 1]]

    async def run() -> None:
        pair = AggregatorPair(tmp_path, helper_overrides={"async_helper": True,
                                                          "retry_after": 0})
        peers = Peers(pair)
        async with pair:
            vdaf = registry.build("Prio3L1BoundSum", {"length": 3, "max_value": 4})
            pt = new_taskprov_task(
                vdaf, pair.leader_url, pair.helper_url, batch_mode=mode, min_batch_size=5,
                collector_keypair=peers.peering.collector_keypair,
                collector_auth_token=peers.peering.collector_auth_token,
                task_interval=_now_interval())
            task_id = bytes(pt.task.task_id)
            assert task_id == tp.derive_task_id(pt.task.config_bytes())
            assert advertisement_headers(pt.task) == {
                "DAP-Taskprov": tp.header_value(pt.task.config_bytes())}
            for state in (pair.leader_state, pair.helper_state):
                assert _stored(state, task_id) is None
            await upload(pair, pt, measurements)
            collection = await collect(pair, pt, query_for(pair, pt))
            assert collection.report_count == 5
            assert collection.aggregate_result == [6, 3, 4]
            leader = _stored(pair.leader_state, task_id)
            helper = _stored(pair.helper_state, task_id)
            assert leader is not None and helper is not None
            assert (leader.role, helper.role) == ("leader", "helper")
            assert leader.config == helper.config == pt.task.config_bytes()
            key = tp.derive_verify_key(peers.peering.verify_key_init, task_id,
                                       vdaf.VERIFY_KEY_SIZE)
            assert leader.vdaf_verify_key == helper.vdaf_verify_key == key
            assert leader.collector_auth_token == peers.peering.collector_auth_token
            assert helper.collector_auth_token is None
    asyncio.run(run())


def test_non_taskprov_tasks_are_not_advertised() -> None:
    pt = new_task(registry.build("Prio3Count"), "https://l.example/", "https://h.example/",
                  profile=DAP19)
    assert advertisement_headers(pt.task) == {}
    dap18 = new_task(registry.build("Prio3Count"), "https://l.example/", "https://h.example/",
                     profile=get_profile("dap-18"))
    assert advertisement_headers(dap18.task) == {}
    with pytest.raises(ValueError, match="dap-18 tasks have no taskprov"):
        new_taskprov_task(registry.build("Prio3Count"), "https://l.example/",
                          "https://h.example/", collector_keypair=None,  # type: ignore[arg-type]
                          collector_auth_token="t", profile=get_profile("dap-18"))


# -- the peer configuration -----------------------------------------------------------------


def _entry(role: str = "leader", **changes: Any) -> dict[str, Any]:
    peering = TaskprovPeering.generate("https://l.example/", "https://h.example/")
    entry = {**peering.peer_entry(role), **changes}
    return {k: v for k, v in entry.items() if v is not None}


@pytest.mark.parametrize(("role", "changes", "message"), [
    ("leader", {"verify_key_init": b64(bytes(31))}, "must be 32 bytes (taskprov Section 3.4)"),
    ("leader", {"verify_key_init": "***"}, "verify_key_init is not base64url"),
    ("leader", {"peer_role": "leader"}, "peer_role must be 'helper' in a leader's"),
    ("helper", {"peer_role": "helper"}, "peer_role must be 'leader' in a helper's"),
    ("leader", {"collector_auth_token": None}, "missing collector_auth_token"),
    ("helper", {"collector_auth_token": "x"}, "a Helper takes no collector_auth_token"),
    ("leader", {"collector_hpke_config": b64(b"\x01")}, "is not an HpkeConfig"),
    ("leader", {"profile": "dap-18"}, "dap-18 tasks have no taskprov"),
    ("leader", {"profile": "dap-77"}, "unknown DAP profile 'dap-77'"),
    ("leader", {"min_batch_size": 0}, "min_batch_size must be a positive integer"),
    ("leader", {"aggregator_auth_token": "has space"}, "printable ASCII token"),
    ("leader", {"surprise": 1}, "unknown keys ['surprise']"),
    ("leader", {"peer_endpoint": None}, "missing peer_endpoint"),
])
def test_peer_configuration_errors(role: str, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(PeerConfigError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        parse_peers([_entry(role, **changes)], role)
    assert parse_peers([_entry(role)], role)[0].profile is DAP19


def test_server_refuses_a_bad_peer_configuration(tmp_path: Path) -> None:
    config = tmp_path / "leader.json"
    config.write_text(json.dumps({"role": "leader", "datastore": "l.sqlite",
                                  "taskprov_peers": [_entry(verify_key_init=b64(b"short"))]}))
    with pytest.raises(ValueError, match="verify_key_init must be 32 bytes"):
        AggregatorConfig.load(config)
    proc = subprocess.run([sys.executable, "-m", "ppm_reference", "leader", "--config", str(config)],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "verify_key_init must be 32 bytes" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- the CLI and real processes ---------------------------------------------------------------


def ppm(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ppm_reference", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=timeout)


def ppm_json(*args: str) -> dict[str, Any]:
    proc = ppm(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Leader and Helper configuration files; `start()` runs `ppm leader` and `ppm
    helper` as processes, terminated at teardown."""
    with server_processes(tmp_path) as handle:
        yield handle


def _record(datastore: Path) -> tuple[bytes, str, bytes, bytes]:
    with sqlite3.connect(f"file:{datastore}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT task_id, role, config, vdaf_verify_key FROM tasks").fetchall()
    assert len(rows) == 1, rows
    task_id, role, config, key = rows[0]
    return bytes(task_id), str(role), bytes(config), bytes(key)


def test_cli_in_band_task_over_real_processes(tmp_path: Path,
                                              processes: dict[str, Any]) -> None:
    """The README's taskprov flow: `ppm task taskprov-init` writes both servers' peers and
    the Collector's credentials, `ppm task create --taskprov` the task files without
    touching an Aggregator; the first upload makes the Leader opt in, its first
    aggregation job the Helper; the collection is exact; and both datastores hold the
    same task ID and verification key, the ones Sections 3.3 and 3.4 derive."""
    configs, ports = processes["configs"], processes["ports"]
    leader_url = f"http://127.0.0.1:{ports['leader']}/"
    helper_url = f"http://127.0.0.1:{ports['helper']}/"
    peers = tmp_path / "peers"
    init = ppm_json("task", "taskprov-init", "--leader-url", leader_url,
                    "--helper-url", helper_url, "--leader-config", str(configs["leader"]),
                    "--helper-config", str(configs["helper"]), "--min-batch-size", "3",
                    "--out-dir", str(peers))
    creds = peers / "collector-credentials.json"
    assert init["files"]["collector_credentials"] == str(creds)
    for path in (creds, peers / "leader-taskprov-peer.json", configs["leader"]):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    leader_peer = json.loads(configs["leader"].read_text())["taskprov_peers"][0]
    helper_peer = json.loads(configs["helper"].read_text())["taskprov_peers"][0]
    assert leader_peer["verify_key_init"] == helper_peer["verify_key_init"]
    assert (leader_peer["peer_endpoint"], helper_peer["peer_endpoint"]) == \
        (helper_url, leader_url)

    out = tmp_path / "task"
    created = ppm_json("task", "create", "--taskprov", "--collector-credentials", str(creds),
                       "--vdaf", "Histogram", "--length", "4", "--min-batch-size", "3",
                       "--out-dir", str(out))
    assert created["taskprov"] is True
    # No Aggregator was touched: neither datastore exists yet.
    assert not (tmp_path / "leader.sqlite").exists()
    assert not (tmp_path / "helper.sqlite").exists()
    view = json.loads((out / "client-task.json").read_text())
    config = base64.urlsafe_b64decode(view["config"] + "=" * (-len(view["config"]) % 4))
    task_id = tp.derive_task_id(config)
    assert created["task_id"] == view["task_id"] == b64(task_id)
    info = DAP19.messages.TaskConfiguration.decode(config).task_info
    assert info.startswith(b"ppm-reference taskprov ") and len(info) == 23 + 32

    processes["start"]()
    up = ppm_json("upload", "--task", str(out / "client-task.json"), "0", "1", "1", "3", "2")
    assert up["accepted"] == 5 and up["rejected"] == {}
    got = ppm_json("collect", "--task", str(out / "collector-task.json"), "--interval",
                   f"{up['report_time']},3600")
    assert got["report_count"] == 5 and got["result"] == [1, 2, 1, 1]

    leader = _record(tmp_path / "leader.sqlite")
    helper = _record(tmp_path / "helper.sqlite")
    init_key = base64.urlsafe_b64decode(leader_peer["verify_key_init"] + "=")
    expected_key = tp.derive_verify_key(init_key, task_id, 32)
    assert leader == (task_id, "leader", config, expected_key)
    assert helper == (task_id, "helper", config, expected_key)


@pytest.mark.parametrize(("args", "message"), [
    (["--vdaf", "Count"], "--taskprov needs --collector-credentials FILE"),
    (["--vdaf", "Count", "--collector-credentials", "CREDS", "--profile", "dap-18"],
     "--taskprov needs a dap-19 task, not dap-18"),
    (["--vdaf", "Count", "--collector-credentials", "CREDS", "--leader-config", "x.json"],
     "--leader-config does not go with --taskprov"),
    (["--vdaf", "Count", "--collector-credentials", "missing.json"],
     "collector credentials not found: missing.json"),
    (["--vdaf", "Count", "--collector-credentials", "CREDS", "--dp-policy",
      "HistogramWithAggregatorLaplace", "--epsilon", "1"], "applies to Prio3Histogram"),
])
def test_cli_taskprov_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch, args: list[str],
                            message: str) -> None:
    """One clear line and exit status 2 (in process: `ppm.cli.main`)."""
    from ppm_reference.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["task", "taskprov-init", "--leader-url", "https://l.example/",
                 "--helper-url", "https://h.example/", "--out-dir", "peers", "--json"]) == 0
    capsys.readouterr()
    creds = str(tmp_path / "peers" / "collector-credentials.json")
    code = main(["task", "create", "--taskprov", *[creds if a == "CREDS" else a
                                                   for a in args]])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1
