"""TLS for the servers (certificate and key in the configuration; DAP-18 Section 3
requires HTTPS) and credentials that stay with their origin (dap/origin.py): the Leader
never follows a Helper's redirect with its token (the issue's DAP-09 307 case) nor polls a
foreign `Location`; the Collector never polls a foreign `Location` (the issue's DAP-18
collection case) nor follows a redirect."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.dap.client import Client
from ppm_reference.dap.collector import CollectionError, Collector
from ppm_reference.dap.hpke import generate_keypair
from ppm_reference.dap.origin import (
    ForeignLocation,
    _absolute_path_location,
    resolve_location,
    same_origin,
)
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.provision import new_task
from ppm_reference.dap.storage import AggregationJobState
from tests.dap_harness import AggregatorPair, Proto, free_port


def self_signed(folder: Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


@pytest.mark.parametrize("profile", ["dap-18", "dap-09"])
def test_leader_and_helper_over_tls(tmp_path: Path, profile: str) -> None:
    """Both Aggregators serve HTTPS with a self-signed certificate; the Leader trusts it
    through `tls_ca_file`, the Client and Collector through their session: a whole upload
    and collection runs over TLS. A client without the certificate refuses the Leader,
    and plain HTTP to the TLS port gets nothing."""
    cert, key = self_signed(tmp_path)
    tls = {"tls_cert": cert, "tls_key": key}
    proto = Proto(profile)

    async def go() -> None:
        async with AggregatorPair(tmp_path, leader_overrides={**tls, "tls_ca_file": cert},
                                  helper_overrides=tls) as pair:
            assert pair.leader_url.startswith("https://")
            pt = pair.provision(proto.count(), min_batch_size=4, profile=proto.profile)
            ctx = ssl.create_default_context(cafile=cert)
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as s:
                async with Client(pt.task, session=s, clock=pair.clock) as client:
                    await client.upload([1, 0, 1, 1])
                collector = Collector(pt.task, pt.collector_keypair, pt.collector_auth_token,
                                      session=s)
                result = await collector.collect(pair.current_interval_query(pt), timeout=60)
                assert result.report_count == 4 and result.aggregate_result == 3
            async with aiohttp.ClientSession() as s:
                with pytest.raises(aiohttp.ClientConnectorCertificateError):
                    async with s.get(pair.leader_url + "hpke_config"):
                        pass
                with pytest.raises(aiohttp.ClientError):
                    async with s.get(pair.leader_url.replace("https", "http")
                                     + "hpke_config") as r:
                        await r.read()

    asyncio.run(go())


def test_same_origin_rules() -> None:
    assert same_origin("https://a.example/x", "https://a.example:443/y")
    assert not same_origin("https://a.example/", "http://a.example/")
    assert not same_origin("https://a.example/", "https://a.example:8443/")
    assert not same_origin("https://a.example/", "https://b.example/")
    assert resolve_location("https://a.example/tasks/t/collection_jobs",
                            "/tasks/t/collection_jobs/j") == \
        "https://a.example/tasks/t/collection_jobs/j"
    for foreign in ("https://evil.example/j", "//evil.example/j", "http://a.example/j"):
        with pytest.raises(ForeignLocation):
            resolve_location("https://a.example/tasks/t/collection_jobs", foreign)


def _general_resolution(request_url: str, location: str) -> str | None:
    """resolve_location's general path (urljoin, then the origin check)."""
    url = urljoin(request_url, location)
    return url if same_origin(url, request_url) else None


@settings(max_examples=400, deadline=None)
@given(scheme=st.sampled_from(["http", "https", "HTTP", "Https"]),
       host=st.sampled_from(["a.example", "127.0.0.1", "[::1]", "h", "A.Example", "u@h"]),
       port=st.sampled_from(["", ":80", ":443", ":8080"]),
       base_path=st.sampled_from(["", "/", "/tasks/t/aggregation_jobs", "/x/y/", "?q", "#f",
                                  "/p;a?b#c"]),
       location=st.text(alphabet="/ab.-_~%=&?#;:@ \\1A", max_size=16).map(lambda s: "/" + s))
def test_absolute_path_location_is_urljoin(scheme: str, host: str, port: str,
                                           base_path: str, location: str) -> None:
    """The fast path of resolve_location gives urljoin's string wherever it answers
    (and answers for what DAP servers send); elsewhere the general path decides."""
    request_url = f"{scheme}://{host}{port}{base_path}"
    fast = _absolute_path_location(request_url, location)
    if fast is not None:
        assert fast == _general_resolution(request_url, location)
    general = _general_resolution(request_url, location)
    try:
        resolved: str | None = resolve_location(request_url, location)
    except ForeignLocation:
        resolved = None
    assert resolved == general


def test_absolute_path_location_takes_dap_locations() -> None:
    url = "http://127.0.0.1:8080/tasks/dGFzaw/aggregation_jobs"
    loc = "/tasks/dGFzaw/aggregation_jobs/am9iLWlkLTAxMjM0NTY3?step=0"
    assert _absolute_path_location(url, loc) == "http://127.0.0.1:8080" + loc
    assert _absolute_path_location("https://h.example", "/a/b-c_d~e%20/") == \
        "https://h.example/a/b-c_d~e%20/"
    for refused in ("/a/../b", "/a//b", "//evil.example/j", "/a?", "/a#f", "a/b", "/a b",
                    "/./a", "/a/."):
        assert _absolute_path_location(url, refused) is None


# -- fake peers -----------------------------------------------------------------------------


class Peer:
    """A little aiohttp server answering every request with `answer`, recording the
    requests it got (method, path, headers)."""

    def __init__(self, answer: Callable[[web.Request], Awaitable[web.StreamResponse]]
                 ) -> None:
        self.answer = answer
        self.port = free_port()
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def __aenter__(self) -> Peer:
        async def handle(request: web.Request) -> web.StreamResponse:
            await request.read()
            self.seen.append((request.method, request.path, dict(request.headers)))
            return await self.answer(request)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


async def _nothing(request: web.Request) -> web.StreamResponse:
    return web.Response(status=200)


async def _wait_for(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def _upload_one(pair: AggregatorPair, pt: Any) -> None:
    """One report to the real Leader; the fake Helper has no HPKE configuration to
    fetch, so the Client encrypts its share to a key of its own."""
    async with pair.client(pt) as client:
        client._configs = (await client._fetch_config(pair.leader_url),
                           generate_keypair(7).config)
        await client.upload([1])


def _leader_jobs(pair: AggregatorPair, task_id: bytes) -> list[Any]:
    with pair.leader_state.datastore.transaction() as tx:
        rows = tx.c.execute("SELECT job_id FROM aggregation_jobs WHERE task_id=?",  # type: ignore[attr-defined]
                            (bytes(task_id),)).fetchall()
        return [tx.get_aggregation_job(task_id, bytes(r[0])) for r in rows]


@pytest.mark.parametrize("profile", ["dap-09", "dap-18"])
def test_leader_does_not_follow_a_helper_redirect(tmp_path: Path, profile: str) -> None:
    """The issue's DAP-09 case: the Helper URL answers 307 to another origin. The Leader
    does not follow it (its DAP-Auth-Token / bearer token would go along): the thief
    sees no request, the job is kept for a retry with the reason recorded."""
    proto = Proto(profile)

    async def go() -> None:
        async with Peer(_nothing) as thief:
            async def redirect(request: web.Request) -> web.StreamResponse:
                return web.Response(status=307, headers={
                    "Location": f"{thief.url}stolen{request.path}"})

            async with Peer(redirect) as helper, AggregatorPair(tmp_path) as pair:
                pt = new_task(proto.count(), pair.leader_url, helper.url, min_batch_size=1,
                              profile=proto.profile)
                with pair.leader_state.datastore.transaction() as tx:
                    tx.put_task(pt.leader_record)
                await _upload_one(pair, pt)
                jobs = await _wait_for(lambda: [j for j in _leader_jobs(pair, pt.task.task_id)
                                                if j.error])
                assert helper.seen, "the Leader asked the Helper"
                assert "redirect" in jobs[0].error and jobs[0].state == \
                    AggregationJobState.ACTIVE
                await asyncio.sleep(0.3)
                assert thief.seen == []

    asyncio.run(go())


def test_leader_does_not_poll_a_foreign_location(tmp_path: Path) -> None:
    """A DAP-18 Helper answering an aggregation job asynchronously with a `Location` on
    another origin: the Leader does not poll it (with its token); it asks its Helper."""

    async def go() -> None:
        async with Peer(_nothing) as thief:
            async def deferred(request: web.Request) -> web.StreamResponse:
                return web.Response(status=201, headers={
                    "Location": f"{thief.url}poll-here", "Retry-After": "0"})

            async with Peer(deferred) as helper, AggregatorPair(tmp_path) as pair:
                proto = Proto("dap-18")
                pt = new_task(proto.count(), pair.leader_url, helper.url, min_batch_size=1,
                              profile=proto.profile)
                with pair.leader_state.datastore.transaction() as tx:
                    tx.put_task(pt.leader_record)
                await _upload_one(pair, pt)
                await _wait_for(lambda: len(helper.seen) >= 3)
                assert thief.seen == []
                for job in _leader_jobs(pair, pt.task.task_id):
                    assert not (job.helper_url or "").startswith(thief.url)

    asyncio.run(go())


@pytest.mark.parametrize("answer", ["foreign_location", "redirect_on_create",
                                    "redirect_on_poll"])
def test_collector_keeps_its_token_at_the_leader(tmp_path: Path, answer: str) -> None:
    """The issue's DAP-18 case: a Leader answering the collection job with a `Location`
    on another origin; also a 307 on creation or on polling. The Collector refuses each
    with a CollectionError and sends nothing to the other origin."""
    proto = Proto("dap-18")

    async def go() -> None:
        async with Peer(_nothing) as thief:
            async def leader(request: web.Request) -> web.StreamResponse:
                if request.method == "POST" and request.path.endswith("collection_jobs"):
                    if answer == "foreign_location":
                        return web.Response(status=201, headers={
                            "Location": f"{thief.url}job", "Retry-After": "0"})
                    if answer == "redirect_on_create":
                        return web.Response(status=307, headers={
                            "Location": f"{thief.url}job"})
                    return web.Response(status=201, headers={
                        "Location": f"{request.path}/job", "Retry-After": "0"})
                return web.Response(status=307, headers={"Location": f"{thief.url}job"})

            async with Peer(leader) as fake:
                pt = new_task(proto.count(), fake.url, "http://127.0.0.1:1/",
                              min_batch_size=1, profile=get_profile("dap-18"))
                async with Collector(pt.task, pt.collector_keypair,
                                     pt.collector_auth_token) as collector:
                    with pytest.raises(CollectionError) as info:
                        await collector.collect(proto.interval_query(pt, 0, 1), timeout=5)
                expected = "another origin" if answer == "foreign_location" else "redirect"
                assert expected in str(info.value)
                assert fake.seen
                assert thief.seen == []

    asyncio.run(go())


def test_admin_client_does_not_follow_redirects(tmp_path: Path) -> None:
    """urllib would follow a GET redirect with the admin bearer token to any origin."""
    from ppm_reference.dap.admin_client import AdminClient, AdminError

    async def go() -> None:
        async with Peer(_nothing) as thief:
            async def redirect(request: web.Request) -> web.StreamResponse:
                return web.Response(status=302, headers={"Location": f"{thief.url}x"})

            async with Peer(redirect) as admin:
                client = AdminClient(admin.url, "admin-token")
                with pytest.raises(AdminError, match="HTTP 302"):
                    await asyncio.to_thread(client.request, "GET", "internal/tasks")
                assert admin.seen and thief.seen == []

    asyncio.run(go())


def test_answers_are_bounded(tmp_path: Path) -> None:
    """A peer's answer is read up to a limit (dap.origin.read_response): a declared
    length over it is refused unread, a chunked stream as soon as it passes it; the
    clients ask for identity and do not decompress."""
    from ppm_reference.dap.origin import ResponseTooLarge, read_response

    async def go() -> None:
        async def huge(request: web.Request) -> web.StreamResponse:
            if request.path == "/declared":
                resp = web.StreamResponse(headers={"Content-Length": str(1 << 40)})
                await resp.prepare(request)
                await resp.write(bytes(1024))
                return resp
            resp = web.StreamResponse()
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            for _ in range(64):
                await resp.write(bytes(64 * 1024))
            await resp.write_eof()
            return resp

        async with Peer(huge) as peer, aiohttp.ClientSession(auto_decompress=False) as s:
            for path in ("declared", "chunked"):
                async with s.get(peer.url + path) as resp:
                    with pytest.raises(ResponseTooLarge, match="limit"):
                        await read_response(resp, 1 << 20)
            async with s.get(peer.url + "chunked") as resp:
                assert len(await read_response(resp, 8 << 20)) == 64 * 64 * 1024
        collector = Collector(new_task(Proto("dap-18").count(), "http://l/", "http://h/",
                                       profile=get_profile("dap-18")).task,
                              generate_keypair(1), "t")
        assert collector.session.auto_decompress is False
        assert collector.session.headers["Accept-Encoding"] == "identity"
        await collector.close()

    asyncio.run(go())
