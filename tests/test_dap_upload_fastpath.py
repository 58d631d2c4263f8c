"""The Leader's per-request shortcuts for one-report-per-request uploads (issue 14): a
body that arrived with its header is taken without waiting (and still held to the
limit), a body still arriving is read as before; the task ID and the Content-Type are
parsed once (bounded caches, same answers); the latency histogram counts each request in
every bucket at or above it (the group commit's wake-up: tests/test_dap_upload_group.py)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from aiohttp.streams import StreamReader

from ppm_reference.dap.problems import PROBLEM_MEDIA_TYPE
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.profiles.dap18.client import generate_report
from ppm_reference.dap.profiles.dap18.messages import UploadRequest
from ppm_reference.dap.server import common
from ppm_reference.dap.server.metrics import BUCKETS, Metrics, exposition
from ppm_reference.vdaf.prio3 import Prio3Count
from tests.dap_harness import AggregatorPair

DAP18 = get_profile("dap-18")
UPLOAD_TYPE = DAP18.media_type_for("UploadRequest")


def _stored(pair: AggregatorPair, task_id: bytes) -> int:
    with pair.leader_state.datastore.transaction() as tx:
        return int(tx.c.execute("SELECT COUNT(*) FROM client_reports WHERE task_id=?",
                                (bytes(task_id),)).fetchone()[0])


async def _raw(port: int, parts: list[bytes], pause: float = 0.0) -> tuple[int, dict[str, str],
                                                                           bytes]:
    """Send a request in `parts` (with `pause` seconds between them) on a fresh
    connection; the status, headers and body of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for i, part in enumerate(parts):
            if i and pause:
                await asyncio.sleep(pause)
            writer.write(part)
            await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, _, v in
                   (line.partition(":") for line in lines[1:] if line)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return status, headers, body
    finally:
        writer.close()


def _request(path: str, body: bytes, *, chunked: bool = False,
             content_type: str = UPLOAD_TYPE) -> tuple[bytes, bytes]:
    """(header, body) of a POST, the body as one chunk when `chunked`."""
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
            f"{framing}\r\nConnection: close\r\n\r\n").encode()
    if chunked:
        body = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    return head, body


def test_bodies_whole_or_arriving_are_read_and_limited(tmp_path: Path,
                                                      monkeypatch: Any) -> None:
    """A report whose body came with the header (taken at once) and one whose body
    comes 0.2 s later (awaited) are both stored; a chunked body over the limit is 413
    either way (the fast path checks the limit too), with nothing stored."""
    vdaf = Prio3Count(2)
    waits: list[int] = []
    readany = StreamReader.readany

    async def counted(self: StreamReader) -> bytes:
        waits.append(1)
        return await readany(self)

    monkeypatch.setattr(StreamReader, "readany", counted)

    async def go() -> None:
        async with AggregatorPair(tmp_path, leader_overrides={"max_upload_bytes": 2048}
                                  ) as pair:
            pt = pair.provision(vdaf)
            keys = pair.leader_state.keyring(), pair.helper_state.keyring()
            path = f"/tasks/{pt.task.task_id.to_base64url()}/reports"

            def upload() -> bytes:
                report = generate_report(
                    pt.task, 1, time=int(time.time()) // pt.task.time_precision,
                    leader_hpke_config=keys[0].config_list().configs[0],
                    helper_hpke_config=keys[1].config_list().configs[0], vdaf=vdaf)
                return UploadRequest((report,)).encode()

            for chunked, pause in ((False, 0.0), (True, 0.0), (False, 0.2), (True, 0.2)):
                head, body = _request(path, upload(), chunked=chunked)
                waits.clear()
                status, _, answer = await _raw(pair.leader_port, [head + body] if not pause
                                               else [head, body], pause)
                assert (status, answer) == (200, b""), (chunked, pause, answer)
                # A body sent 0.2 s after its header is awaited. (One sent with it is
                # usually taken at once, but the server may read the header alone: not
                # asserted, it depends on the machine's load.)
                assert bool(waits) or not pause
            assert _stored(pair, pt.task.task_id) == 4

            big = b"\x00" * 3000
            for pause in (0.0, 0.2):
                head, body = _request(path, big, chunked=True)
                waits.clear()
                status, headers, answer = await _raw(pair.leader_port, [head + body]
                                                     if not pause else [head, body], pause)
                assert bool(waits) or not pause
                assert status == 413
                assert headers["content-type"] == PROBLEM_MEDIA_TYPE
                assert "2048" in json.loads(answer)["detail"]
            assert _stored(pair, pt.task.task_id) == 4

    asyncio.run(go())


def test_task_ids_and_media_types_answer_as_before_from_the_cache(tmp_path: Path,
                                                                  monkeypatch: Any) -> None:
    """A malformed task ID, an unknown task and a wrong Content-Type get the same
    answer the second time (from the caches) as the first; the caches stay bounded."""
    vdaf = Prio3Count(2)
    monkeypatch.setattr(common, "_TASK_IDS_MAX", 8)
    monkeypatch.setattr(common, "_MESSAGE_NAMES_MAX", 4)
    common._TASK_IDS.clear()
    common._MESSAGE_NAMES.clear()

    async def go() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(vdaf)
            good = f"/tasks/{pt.task.task_id.to_base64url()}/reports"
            cases = [
                ("/tasks/AAAA=/reports", UPLOAD_TYPE, 404, "unrecognizedTask"),
                ("/tasks/" + "A" * 43 + "/reports", UPLOAD_TYPE, 404, "unrecognizedTask"),
                (good, "application/dap-report", 415, "invalidMessage"),
                (good, "text/plain", 415, "invalidMessage"),
            ]
            for _ in range(2):
                for path, ctype, want, token in cases:
                    head, body = _request(path, b"x", content_type=ctype)
                    status, _, answer = await _raw(pair.leader_port, [head + body])
                    doc = json.loads(answer)
                    assert (status, doc["type"].rsplit(":", 1)[-1]) == (want, token), path
            for i in range(20):
                head, body = _request(f"/tasks/{'B' * 42}{'AQgw'[i % 4]}/reports", b"x",
                                      content_type=f"application/x-{i}")
                status, _, _ = await _raw(pair.leader_port, [head + body])
                assert status == 404
            assert len(common._TASK_IDS) <= 8
            assert len(common._MESSAGE_NAMES) <= 4

    asyncio.run(go())


def test_latency_histogram_is_cumulative() -> None:
    m = Metrics()
    for seconds in (0.001, 0.005, 0.02, 0.3, 20.0):
        m.observe("/r", "POST", 200, seconds)
    text = exposition(m, {})
    got = {line.split('le="')[1].split('"')[0]: int(line.rsplit(" ", 1)[1])
           for line in text.splitlines()
           if line.startswith("ppm_http_request_duration_seconds_bucket")}
    want = {str(b): sum(1 for s in (0.001, 0.005, 0.02, 0.3, 20.0) if s <= b)
            for b in BUCKETS}
    assert got == {**want, "+Inf": 5}
    assert got["0.005"] == 2 and got["10.0"] == 4



def test_server_process_collects_young_garbage_less_often() -> None:
    """tune_process raises the youngest generation's threshold (it never lowers it, nor
    turns a disabled collector on) and keeps the older generations' settings."""
    import gc

    from ppm_reference.dap.server.serving import GC_GEN0_THRESHOLD, tune_process

    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 7)
        tune_process(serving=False)
        assert gc.get_threshold() == (GC_GEN0_THRESHOLD, 10, 7)
        gc.set_threshold(50_000, 3, 4)
        tune_process(serving=False)
        assert gc.get_threshold() == (50_000, 3, 4)
        gc.set_threshold(0, 10, 10)
        tune_process(serving=False)
        assert gc.get_threshold() == (0, 10, 10)
    finally:
        gc.set_threshold(*saved)
