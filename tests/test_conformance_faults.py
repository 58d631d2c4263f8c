"""The conformance suite catches real faults: our Leader and Helper (in this process, real
HTTP on 127.0.0.1) made faulty on purpose, either by an aiohttp reverse proxy in front of
them that rewrites requests and answers, or by monkeypatching the protocol core. For each
fault the checks that should see it run against the faulty server, and at least one of
them must fail. The faults live here, in test code: the product has no fault hooks.

Every fault's checks pass against the servers without the fault (tests/test_conformance.py),
so a failure here is the fault's doing. The score is printed (pytest -s) and asserted: all.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from ppm_reference.dap.profiles import get_profile
from ppm_reference.interop.conformance import catalogue as cat
from ppm_reference.interop.conformance import runner
from ppm_reference.interop.conformance.provision import AdminProvisioner
from ppm_reference.interop.conformance.registry import catalogue
from tests.dap_harness import AggregatorPair, free_port

ADMIN = "fault-admin-token"
LIMIT = 1 << 20

Headers = dict[str, str]
# (proxy, request, headers, body) -> a response to answer instead, or None to forward.
RequestHook = Callable[["FaultProxy", web.Request, Headers, bytes], web.Response | None]
# (request, status, headers, body) -> (status, headers, body)
ResponseHook = Callable[[web.Request, int, Headers, bytes], tuple[int, Headers, bytes]]


@dataclass
class Fault:
    name: str
    role: str
    profile: str
    checks: tuple[str, ...]          # the checks expected to flag it (one is enough)
    request: RequestHook | None = None
    response: ResponseHook | None = None
    patch: Callable[[pytest.MonkeyPatch], None] | None = None
    serialize: bool = False          # handle one request at a time
    die_on_truncation: bool = False  # stop answering after a truncated request
    state: dict[str, Any] = field(default_factory=dict)


class FaultProxy:
    """A reverse proxy to `upstream` that applies the current fault."""

    def __init__(self, upstream: str, session: aiohttp.ClientSession) -> None:
        self.upstream = upstream.rstrip("/")
        self.session = session
        self.fault: Fault | None = None
        self.lock = asyncio.Lock()
        self.dead = False

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.dead:
            return web.Response(status=503, text="dead")
        f = self.fault
        if f is not None and f.serialize:
            async with self.lock:
                return await self._handle(request, f)
        return await self._handle(request, f)

    async def _handle(self, request: web.Request, f: Fault | None) -> web.StreamResponse:
        try:
            body = await request.read()
        except (ConnectionError, aiohttp.ClientPayloadError, asyncio.CancelledError):
            if f is not None and f.die_on_truncation:
                self.dead = True
            return web.Response(status=400)  # the client is gone
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length", "transfer-encoding",
                                        "connection")}
        if f is not None and f.request is not None:
            f.state.pop("body", None)
            instead = f.request(self, request, headers, body)
            if instead is not None:
                return instead
            body = f.state.pop("body", body)
        async with self.session.request(request.method, self.upstream + request.path_qs,
                                        data=body, headers=headers,
                                        allow_redirects=False) as resp:
            rbody = await resp.read()
            status = resp.status
            rheaders = {k: v for k, v in resp.headers.items()
                        if k.lower() in ("content-type", "location", "retry-after",
                                         "cache-control")}
        if f is not None and f.response is not None:
            status, rheaders, rbody = f.response(request, status, rheaders, rbody)
        return web.Response(status=status, headers=rheaders, body=rbody)


# -- rewriting helpers ---------------------------------------------------------------------


def _doc(body: bytes) -> dict[str, Any] | None:
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def rewrite_problem(change: Callable[[dict[str, Any]], None]) -> ResponseHook:
    def hook(req: web.Request, status: int, h: Headers, body: bytes
             ) -> tuple[int, Headers, bytes]:
        doc = _doc(body) if h.get("Content-Type", "").startswith("application/problem") \
            else None
        if doc is not None:
            change(doc)
            body = json.dumps(doc).encode()
        return status, h, body
    return hook


def retype(old: str, new: str) -> ResponseHook:
    prefix = "urn:ietf:params:ppm:dap:error:"

    def change(doc: dict[str, Any]) -> None:
        if doc.get("type") == prefix + old:
            doc["type"] = prefix + new
    return rewrite_problem(change)


def client_errors_as(status: int, body: bytes = b"") -> ResponseHook:
    def hook(req: web.Request, s: int, h: Headers, b: bytes) -> tuple[int, Headers, bytes]:
        if 400 <= s < 500:
            return status, {}, body
        return s, h, b
    return hook


def content_type_of(match: str, new: str) -> ResponseHook:
    def hook(req: web.Request, s: int, h: Headers, b: bytes) -> tuple[int, Headers, bytes]:
        if match in h.get("Content-Type", ""):
            h = {**h, "Content-Type": new}
        return s, h, b
    return hook


def fix_request_media_type(profile: str) -> RequestHook:
    """The server accepts any Content-Type: the proxy puts the right one on requests."""
    p = get_profile(profile)

    def hook(proxy: FaultProxy, req: web.Request, h: Headers, b: bytes) -> None:
        path = req.path
        if path.endswith("/reports"):
            h["Content-Type"] = p.media_type_for(p.message_names["upload"])
        elif "/aggregation_jobs" in path and req.method in ("PUT", "POST") and \
                path.count("/") <= 4:
            h["Content-Type"] = p.media_type_for("AggregationJobInitReq")
        return None
    return hook


def oversized_crash(proxy: FaultProxy, req: web.Request, h: Headers, b: bytes
                    ) -> web.Response | None:
    if len(b) > LIMIT:
        return web.Response(status=500, text="internal error")
    return None


def refuse_repeated_init(proxy: FaultProxy, req: web.Request, h: Headers, b: bytes
                         ) -> web.Response | None:
    if "/aggregation_jobs" not in req.path or req.method not in ("PUT", "POST"):
        return None
    seen = proxy.fault.state.setdefault("seen", set()) if proxy.fault else set()
    key = hashlib.sha256(req.path.encode() + b).digest()
    if key in seen:
        return web.Response(status=409, content_type="application/problem+json",
                            text=json.dumps({"type": "about:blank", "status": 409}))
    seen.add(key)
    return None


def new_location_each_time(req: web.Request, s: int, h: Headers, b: bytes
                           ) -> tuple[int, Headers, bytes]:
    if req.method == "POST" and req.path.endswith("/collection_jobs") and "Location" in h:
        h = {**h, "Location": req.path + "/" + secrets.token_urlsafe(16)}
    return s, h, b


def refuse_delete(kind: str) -> RequestHook:
    def hook(proxy: FaultProxy, req: web.Request, h: Headers, b: bytes
             ) -> web.Response | None:
        if req.method == "DELETE" and f"/{kind}/" in req.path:
            return web.Response(status=405, content_type="application/problem+json",
                                text=json.dumps({"type": "about:blank", "status": 405}))
        return None
    return hook


# Set by the proxy when a DELETE went through: the patched datastore then forgets what
# the replay and double-collection checks need.
FORGOTTEN = {"on": False}


def forget_on_delete(proxy: FaultProxy, req: web.Request, h: Headers, b: bytes) -> None:
    if req.method == "DELETE":
        FORGOTTEN["on"] = True


def forget_after_delete(mp: pytest.MonkeyPatch) -> None:
    from ppm_reference.dap.storage.sqlite import SqliteTransaction

    FORGOTTEN["on"] = False
    for name, value in (("is_report_aggregated", False), ("interval_overlaps_collected",
                                                          False)):
        original = getattr(SqliteTransaction, name)

        def patched(self: Any, *a: Any, _o: Any = original, _v: Any = value,
                    **k: Any) -> Any:
            return _v if FORGOTTEN["on"] else _o(self, *a, **k)
        mp.setattr(SqliteTransaction, name, patched)
    mp.setattr(SqliteTransaction, "mark_report_aggregated",
               lambda self, *a, _o=SqliteTransaction.mark_report_aggregated, **k:
               True if FORGOTTEN["on"] else _o(self, *a, **k))
    mp.setattr(SqliteTransaction, "aggregated_among",
               lambda self, *a, _o=SqliteTransaction.aggregated_among, **k:
               set() if FORGOTTEN["on"] else _o(self, *a, **k))
    mp.setattr(SqliteTransaction, "mark_reports_aggregated",
               lambda self, *a, _o=SqliteTransaction.mark_reports_aggregated, **k:
               _Everything() if FORGOTTEN["on"] else _o(self, *a, **k))


def strip_header(name: str, method: str | None = None) -> ResponseHook:
    def hook(req: web.Request, s: int, h: Headers, b: bytes) -> tuple[int, Headers, bytes]:
        if method is None or req.method == method:
            h = {k: v for k, v in h.items() if k.lower() != name.lower()}
        return s, h, b
    return hook


def corrupt_aggregate_share(req: web.Request, s: int, h: Headers, b: bytes
                            ) -> tuple[int, Headers, bytes]:
    if "aggregate-share" in h.get("Content-Type", "") and b and "req" not in \
            h.get("Content-Type", ""):
        b = b[:-1] + bytes([b[-1] ^ 1])
    return s, h, b


# -- faults in the protocol core (monkeypatched) ---------------------------------------------


def no_auth(mp: pytest.MonkeyPatch) -> None:
    from ppm_reference import dap  # noqa: F401
    mp.setattr(dap.server.helper, "authenticate", lambda *a, **k: None)
    mp.setattr(dap.server.leader, "authenticate", lambda *a, **k: None)


class _Everything(set[bytes]):
    """What a datastore without replay state answers to `mark_reports_aggregated`:
    every report ID newly marked, each time it is asked (a duplicate too)."""

    def __contains__(self, item: object) -> bool:
        return True

    def discard(self, item: bytes) -> None:
        pass


def accept_replays(mp: pytest.MonkeyPatch) -> None:
    from ppm_reference.dap.storage.sqlite import SqliteTransaction

    mp.setattr(SqliteTransaction, "is_report_aggregated", lambda *a, **k: False)
    mp.setattr(SqliteTransaction, "mark_report_aggregated", lambda *a, **k: True)
    mp.setattr(SqliteTransaction, "aggregated_among", lambda *a, **k: set())
    mp.setattr(SqliteTransaction, "mark_reports_aggregated", lambda *a, **k: _Everything())


def release_small_batches(mp: pytest.MonkeyPatch) -> None:
    from ppm_reference import dap  # noqa: F401
    mp.setattr(dap.core.helper, "release_problem", lambda *a, **k: None)
    mp.setattr(dap.core.leader, "required_batch_size", lambda *a, **k: 0)


def release_small_leader_selected_batches(mp: pytest.MonkeyPatch) -> None:
    """The Leader picks any open batch with a report in it, and releases it."""
    from ppm_reference import dap  # noqa: F401
    from ppm_reference.dap.core.store import LeaderBatchState

    release_small_batches(mp)

    def choose_any(tx: Any, task: Any, job: Any) -> bool:
        for batch in tx.list_leader_batches(task.task_id, (LeaderBatchState.OPEN,)):
            if sum(b.report_count for b in tx.list_buckets(task.task_id, [batch.batch_id])):
                batch.state = LeaderBatchState.COLLECTING
                tx.update_leader_batch(batch)
                job.batch_id = batch.batch_id
                tx.update_collection_job(job)
                return True
        return False
    mp.setattr(dap.core.leader, "_choose_batch", choose_any)


def no_time_checks(mp: pytest.MonkeyPatch) -> None:
    for name in ("dap-18", "dap-09"):
        mp.setattr(type(get_profile(name).wire), "time_error", lambda *a, **k: None)


def no_overlap_checks(mp: pytest.MonkeyPatch) -> None:
    from ppm_reference.dap.storage.sqlite import SqliteTransaction

    mp.setattr(SqliteTransaction, "interval_overlaps_collected", lambda *a, **k: False)


def no_duplicate_check(mp: pytest.MonkeyPatch) -> None:
    """The job-level duplicate check removed; with the replay check too (else the
    second copy is rejected as a replay, which the draft allows)."""
    from ppm_reference import dap  # noqa: F401
    accept_replays(mp)

    original = dap.core.helper._check_init_request

    def lenient(task: Any, req: Any) -> Any:
        seen: set[bytes] = set()
        kept = []
        for item in req.items:
            if item.report_id not in seen:
                seen.add(item.report_id)
                kept.append(item)
        dup = list(req.items)
        req.items = kept
        try:
            return original(task, req)
        finally:
            req.items = dup
    mp.setattr(dap.core.helper, "_check_init_request", lenient)


def accept_unknown_report_extensions(mp: pytest.MonkeyPatch) -> None:
    from ppm_reference import dap  # noqa: F401
    for module in (dap.core.leader, dap.core.helper):
        mp.setattr(module, "RECOGNIZED_REPORT_EXTENSIONS",
                   frozenset(module.RECOGNIZED_REPORT_EXTENSIONS) | {0xFFFE})


def accept_any_agg_param(mp: pytest.MonkeyPatch) -> None:
    from ppm_reference.vdaf.prio3 import Prio3

    mp.setattr(Prio3, "decode_agg_param", lambda self, data: None)


def drop_unknown_job_extensions(proxy: FaultProxy, req: web.Request, h: Headers, b: bytes
                                ) -> web.Response | None:
    """The Helper ignores aggregation job extensions it does not know (the proxy removes
    them before it sees the request)."""
    import dataclasses

    from ppm_reference.dap.profiles.dap18 import messages as m18

    if req.method == "POST" and req.path.endswith("/aggregation_jobs"):
        try:
            init = m18.AggregationJobInitReq.decode(b)
        except Exception:  # noqa: BLE001 - not ours to judge
            return None
        kept = tuple(e for e in init.extensions if e.extension_type != 0xFFFE)
        proxy.fault.state["body"] = bytes(dataclasses.replace(init, extensions=kept).encode()) \
            if proxy.fault else b
    return None


def _bump_status(doc: dict[str, Any]) -> None:
    if isinstance(doc.get("status"), int):
        doc["status"] = 400 if doc["status"] != 400 else 404


def _drop_taskid(doc: dict[str, Any]) -> None:
    doc.pop("taskid", None)


FAULTS = [
    Fault("wrong problem type (unrecognizedTask answered as invalidMessage)", "helper",
          "dap-18", ("H-AGG-INIT-002",), response=retype("unrecognizedTask",
                                                         "invalidMessage")),
    Fault("wrong problem type (stepMismatch answered as invalidMessage)", "helper", "dap-18",
          ("H-AGG-CONT-001",), response=retype("stepMismatch", "invalidMessage")),
    Fault("wrong problem type (batchMismatch answered as invalidBatchSize)", "helper",
          "dap-19", ("H-SHARE-002", "H-SHARE-003"),
          response=retype("batchMismatch", "invalidBatchSize")),
    Fault("500 on bad input", "leader", "dap-18", ("L-UPLOAD-004", "L-UPLOAD-005"),
          response=client_errors_as(500, b"internal error")),
    Fault("errors answered 200 (wrong status code)", "leader", "dap-09",
          ("L-UPLOAD-002", "L-HPKE-003"), response=client_errors_as(200)),
    Fault("problem document status differs from the HTTP status", "leader", "dap-09",
          ("L-UPLOAD-002",), response=rewrite_problem(_bump_status)),
    Fault("no taskid in problem documents", "leader", "dap-19", ("L-PROBLEM-001",),
          response=rewrite_problem(_drop_taskid)),
    Fault("wrong media type on AggregationJobResp", "helper", "dap-19", ("H-AGG-INIT-001",),
          response=content_type_of("aggregation-job-resp", "application/octet-stream")),
    Fault("wrong media type on HpkeConfigList", "leader", "dap-09", ("L-HPKE-001",),
          response=content_type_of("hpke-config-list", "application/octet-stream")),
    Fault("accepts any request media type", "leader", "dap-18", ("L-UPLOAD-003",),
          request=fix_request_media_type("dap-18")),
    Fault("Helper ignores authentication", "helper", "dap-09",
          ("H-AGG-INIT-003", "H-AGG-INIT-004", "H-SHARE-007"), patch=no_auth),
    Fault("Leader ignores the Collector's authentication", "leader", "dap-18",
          ("L-COLL-001", "L-COLL-002", "L-COLL-004"), patch=no_auth),
    Fault("Helper accepts a replayed report", "helper", "dap-18", ("H-AGG-INIT-009",),
          patch=accept_replays),
    Fault("Helper releases a batch below min_batch_size", "helper", "dap-09",
          ("H-SHARE-004",), patch=release_small_batches),
    Fault("Leader releases a batch below min_batch_size", "leader", "dap-18",
          ("L-COLL-005",), patch=release_small_batches),
    Fault("Leader releases a leader-selected batch below min_batch_size", "leader",
          "dap-09", ("L-COLL-019",), patch=release_small_leader_selected_batches),
    Fault("accepts reports from the future and after the task", "leader", "dap-18",
          ("L-UPLOAD-008", "L-UPLOAD-009"), patch=no_time_checks),
    Fault("Helper allows overlapping batches", "helper", "dap-19", ("H-SHARE-005",),
          patch=no_overlap_checks),
    Fault("Helper continues duplicate report IDs in one job (no duplicate or replay check)",
          "helper", "dap-18",
          ("H-AGG-INIT-010",), patch=no_duplicate_check),
    Fault("crash (500) on an oversized body", "helper", "dap-18", ("H-ROBUST-001",),
          request=oversized_crash),
    Fault("one request at a time: a slow request blocks others", "leader", "dap-18",
          ("L-ROBUST-003",), serialize=True),
    Fault("stops answering after a truncated request", "helper", "dap-09",
          ("H-ROBUST-002",), die_on_truncation=True),
    Fault("not idempotent: a repeated aggregation job is refused", "helper", "dap-18",
          ("H-AGG-INIT-011",), request=refuse_repeated_init),
    Fault("not idempotent: a repeated collection job request makes a new job", "leader",
          "dap-19", ("L-COLL-011",), response=new_location_each_time),
    Fault("wrong aggregate share", "helper", "dap-18", ("H-SHARE-001", "H-SHARE-006"),
          response=corrupt_aggregate_share),
    Fault("DELETE of an aggregation job forgets its reports", "helper", "dap-09",
          ("H-AGG-DEL-001",), request=forget_on_delete, patch=forget_after_delete),
    Fault("DELETE of an aggregate share forgets the collected batch", "helper", "dap-18",
          ("H-SHARE-011",), request=forget_on_delete, patch=forget_after_delete),
    Fault("DELETE of a collection job answered 405", "leader", "dap-09", ("L-COLL-014",),
          request=refuse_delete("collection_jobs")),
    Fault("no Location for a created collection job", "leader", "dap-18",
          ("L-COLL-011", "L-COLL-014"), response=strip_header("Location", "POST")),
    Fault("hpke_config without Cache-Control", "leader", "dap-18", ("L-HPKE-002",),
          response=strip_header("Cache-Control")),
    Fault("unknown report extensions accepted", "leader", "dap-18", ("L-UPLOAD-017",),
          patch=accept_unknown_report_extensions),
    Fault("Helper accepts an invalid aggregation parameter", "helper", "dap-19",
          ("H-AGG-INIT-022",), patch=accept_any_agg_param),
    Fault("Leader accepts an invalid aggregation parameter", "leader", "dap-09",
          ("L-COLL-017",), patch=accept_any_agg_param),
    Fault("Helper ignores unknown aggregation job extensions", "helper", "dap-18",
          ("H-AGG-INIT-021",), request=drop_unknown_job_extensions),
]


def test_the_suite_flags_every_fault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                     ) -> None:
    flagged: dict[str, str] = {}

    async def go() -> None:
        overrides = {"admin_token": ADMIN, "max_upload_bytes": LIMIT,
                     "max_aggregation_job_bytes": LIMIT, "max_collection_bytes": LIMIT}
        async with AggregatorPair(tmp_path, leader_overrides=overrides,
                                  helper_overrides=overrides) as pair, \
                aiohttp.ClientSession(auto_decompress=False) as session:
            proxies: dict[str, tuple[FaultProxy, str]] = {}
            runners = []
            for role, upstream in (("leader", pair.leader_url), ("helper", pair.helper_url)):
                proxy = FaultProxy(upstream, session)
                app = web.Application(client_max_size=64 * LIMIT)
                app.router.add_route("*", "/{tail:.*}", proxy.handle)
                app_runner = web.AppRunner(app)
                await app_runner.setup()
                port = free_port()
                await web.TCPSite(app_runner, "127.0.0.1", port).start()
                runners.append(app_runner)
                proxies[role] = (proxy, f"http://127.0.0.1:{port}/")
            try:
                for fault in FAULTS:
                    proxy, url = proxies[fault.role]
                    proxy.fault, proxy.dead = fault, False
                    with monkeypatch.context() as mp:
                        if fault.patch is not None:
                            fault.patch(mp)
                        admin = pair.leader_url if fault.role == "leader" else \
                            pair.helper_url
                        prov = AdminProvisioner(
                            get_profile(fault.profile), fault.role, url, admin_url=admin,
                            admin_token=ADMIN, helper_url=pair.helper_url,
                            helper_admin_url=pair.helper_url)
                        checks = cat.select(catalogue(fault.role), fault.checks)
                        assert [c.id for c in checks] == sorted(fault.checks), fault.name
                        results = await runner.run_checks(
                            get_profile(fault.profile), fault.role, url, prov, checks,
                            runner.Options(settle=0.7, timeout=4,
                                           oversize_bytes=2 * LIMIT, concurrency=4))
                    proxy.fault, proxy.dead = None, False
                    # A failure of the suite itself (an exception in a check) is not
                    # a detection.
                    fails = [f"{r.check.id}: {r.detail}" for r in results
                             if r.outcome == runner.FAIL
                             and not r.detail.startswith("unexpected ")]
                    if fails:
                        flagged[fault.name] = fails[0]
            finally:
                for app_runner in runners:
                    await app_runner.cleanup()

    asyncio.run(go())
    print(f"\nconformance fault score: {len(flagged)} of {len(FAULTS)} faults flagged")
    for name, why in flagged.items():
        print(f"  {name}: {why[:150]}")
    missed = [f.name for f in FAULTS if f.name not in flagged]
    assert not missed, f"faults the suite did not flag: {missed}"
    assert len(FAULTS) >= 20
