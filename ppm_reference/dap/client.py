"""The DAP Client (DAP-18 Section 4.4, DAP-09 Section 4.4): fetch the Aggregators' HPKE
configurations, apply the task's client-side DP randomization, shard, encrypt, upload.

Written once for every profile: what a draft sends is its ``profile.flow``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from ppm_reference.dap import bhttp, ohttp
from ppm_reference.dap.codec import DecodeError
from ppm_reference.dap.common import HpkeConfig, HpkeConfigList, ReportError
from ppm_reference.dap.dp import decode_spec, policy_from_spec
from ppm_reference.dap.hpke import choose_config
from ppm_reference.dap.ohttp import KeyConfig
from ppm_reference.dap.problems import ProblemDocument, ProblemDocumentError
from ppm_reference.dap.task import DapTask
from ppm_reference.dap.taskprov import advertisement_headers

#: Per-report errors after which the Client refreshes the HPKE configurations and sends the
#: report once more (re-encrypted, never re-noised): DAP-18's `outdated_config` (Section
#: 4.4.2), which DAP-19 replaced with `hpke_unknown_config_id`.
RETRY_ERRORS = frozenset({ReportError.OUTDATED_CONFIG, ReportError.HPKE_UNKNOWN_CONFIG_ID})


class UploadError(Exception):
    """The Leader refused an upload request as a whole."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"upload failed with HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


@dataclass
class UploadResult:
    accepted: int
    rejected: dict[bytes, ReportError]


@dataclass(frozen=True)
class RelayRoute:
    """Send everything meant for the Leader through an Oblivious HTTP relay (RFC 9458;
    paper 000 Section 4.2): each request to the Leader (its HPKE configuration, the
    uploads) is a binary HTTP message encapsulated to the Leader's gateway and POSTed to
    `relay_url`, so the Leader sees the relay's address only. `key_config` pins the
    gateway's key configuration; without it the Client fetches it through the relay
    (`dap.server.relay`: a deployment should pin it, RFC 9458 Section 3)."""

    relay_url: str
    key_config: KeyConfig | None = None


class Client:
    """Uploads measurements for one task of any profile. HPKE configurations are fetched
    once and cached; `outdated_config` errors refresh them and retry once (DAP-18 Section
    4.4.2.2).

    `extensions` are (type, data) report extensions put into every report for both
    Aggregators (e.g. `dap.sampling.min_batch_size_extension`); `relay` sends the
    Leader's requests through an Oblivious HTTP relay; `source_host` binds the Client's
    own connections to a local address (multi-homed hosts, tests)."""

    def __init__(self, task: DapTask, session: aiohttp.ClientSession | None = None,
                 clock: Any = time.time, *, extensions: Sequence[tuple[int, bytes]] = (),
                 relay: RelayRoute | None = None, source_host: str | None = None) -> None:
        self.task = task
        self.flow = task.profile.flow
        self.vdaf = task.vdaf()
        self._session = session
        self._own_session = session is None
        self._configs: tuple[HpkeConfig, HpkeConfig] | None = None
        self.clock = clock
        self.policy = (policy_from_spec(decode_spec(task.dp_policy), self.vdaf)
                       if task.dp_policy is not None else None)
        self.extensions = tuple(extensions)
        self.relay = relay
        self._ohttp_config = relay.key_config if relay is not None else None
        self.source_host = source_host

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                local_addr=(self.source_host, 0) if self.source_host else None)
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60),
                                                  connector=connector)
        return self._session

    async def _request(self, method: str, url: str, body: bytes | None = None,
                       content_type: str | None = None, leader: bool = False,
                       extra_headers: dict[str, str] | None = None
                       ) -> tuple[int, str, bytes]:
        """(status, Content-Type, content) of a request; one meant for the Leader goes
        through the relay when the Client has one (`extra_headers` then travel inside the
        encapsulated request)."""
        extra = extra_headers or {}
        if not (leader and self.relay is not None):
            headers = {"Content-Type": content_type} if content_type else {}
            headers.update(extra)
            async with self.session.request(method, url, data=body, headers=headers) as resp:
                return resp.status, resp.headers.get("Content-Type", ""), await resp.read()
        key_config = await self._gateway_config()
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        inner_headers = (((b"content-type", content_type.encode()),) if content_type else ()
                         ) + tuple((k.lower().encode(), v.encode()) for k, v in extra.items())
        inner = bhttp.Request(method.encode(), parts.scheme.encode(), parts.netloc.encode(),
                              target.encode(), inner_headers, body or b"")
        enc_request, ctx = ohttp.encapsulate_request(key_config, inner.encode())
        async with self.session.post(self.relay.relay_url, data=enc_request,
                                     headers={"Content-Type": ohttp.REQUEST_MEDIA_TYPE}
                                     ) as resp:
            status, got, content = (resp.status, resp.headers.get("Content-Type", ""),
                                    await resp.read())
        if status != 200 or got.split(";")[0].strip() != ohttp.RESPONSE_MEDIA_TYPE:
            # Not encapsulated: an error of the relay or of the gateway (RFC 9458 5.2).
            raise UploadError(status, "relay or gateway refused the request: "
                              + content[:200].decode(errors="replace"))
        try:
            answer = bhttp.Response.decode(ohttp.decapsulate_response(ctx, content))
        except (ohttp.OhttpError, bhttp.BhttpError) as exc:
            raise UploadError(status, f"bad Encapsulated Response: {exc}") from None
        return (answer.status, (answer.header(b"content-type") or b"").decode(),
                answer.content)

    async def _gateway_config(self) -> KeyConfig:
        if self._ohttp_config is None:
            assert self.relay is not None
            url = self.relay.relay_url.rstrip("/") + ohttp.WELL_KNOWN_PATH
            status, _, body = await self._request("GET", url)
            if status != 200:
                raise UploadError(status, "cannot get the gateway's key configuration")
            try:
                configs = ohttp.decode_key_configs(body)
            except ohttp.OhttpError as exc:
                raise UploadError(status, f"bad gateway key configuration: {exc}") from None
            self._ohttp_config = configs[0]
        return self._ohttp_config

    async def _fetch_config(self, base_url: str, leader: bool = False) -> HpkeConfig:
        profile = self.task.profile
        resource = profile.request("hpke_config")[1]
        ids = {"task_id": bytes(self.task.task_id)} \
            if "{task-id}" in profile.resources[resource] else {}
        url = profile.resource_url(resource, base_url, **ids)
        status, _, body = await self._request("GET", url, leader=leader)
        if status != 200:
            raise UploadError(status, f"hpke_config: {body[:200]!r}")
        try:
            return choose_config(HpkeConfigList.decode(body))
        except (DecodeError, ValueError) as exc:
            raise UploadError(status, f"bad hpke_config response: {exc}") from None

    async def hpke_configs(self, refresh: bool = False) -> tuple[HpkeConfig, HpkeConfig]:
        if self._configs is None or refresh:
            self._configs = (
                await self._fetch_config(self.task.leader_aggregator_endpoint, leader=True),
                await self._fetch_config(self.task.helper_aggregator_endpoint))
        return self._configs

    def randomize(self, measurements: Sequence[Any]) -> list[Any]:
        """The measurements with the task's client-side DP noise applied (the policy's
        `add_noise_to_measurement`, draft-wang-ppm-differential-privacy Section 5), or
        unchanged without a policy. Call it ONCE per measurement: a Client that noised
        the same measurement again (say, to retry an upload) would hand out independent
        noisy copies, and the local guarantee degrades with each (two RAPPOR(eps0) copies
        of one measurement are about 2 eps0-DP)."""
        if self.policy is None:
            return list(measurements)
        return [self.policy.add_noise_to_measurement(m) for m in measurements]

    async def encrypt(self, noisy: Sequence[Any], time_seconds: float | None = None
                      ) -> list[Any]:
        """Reports (fresh report IDs, sharing and HPKE encryption) of measurements
        already through `randomize`: no noise is drawn here."""
        leader, helper = await self.hpke_configs()
        now = time_seconds if time_seconds is not None else self.clock()
        t = self.flow.report_time(self.task, now)
        return [self.flow.generate_report(self.task, m, time=t, leader_hpke_config=leader,
                                          helper_hpke_config=helper, vdaf=self.vdaf,
                                          extensions=self.extensions)
                for m in noisy]

    async def prepare(self, measurements: Sequence[Any],
                      time_seconds: float | None = None, randomized: bool = False
                      ) -> list[Any]:
        """Reports for the measurements (client-side DP noise applied when the task's
        policy has one, unless they are `randomized` already, e.g. dummy reports made by
        `dap.sampling.dummy_measurement`): `randomize`, then `encrypt`."""
        noisy = list(measurements) if randomized else self.randomize(measurements)
        return await self.encrypt(noisy, time_seconds)

    async def upload_reports(self, reports: Sequence[Any]) -> UploadResult:
        """Send the reports in one upload request (DAP-18's UploadRequest), or one by one
        where the profile uploads a report per request (DAP-09, where a refused report is
        a problem document: mapped to its ReportError)."""
        if self.flow.one_report_per_request:
            return await self._put_reports(reports)
        url = self.task.profile.resource_url("reports", self.task.leader_aggregator_endpoint,
                                             task_id=self.task.task_id)
        message, body = self.flow.encode_upload(reports)
        method = self.task.profile.request("upload")[0]
        status, _, content = await self._request(
            method, url, body, self.task.profile.media_type_for(message), leader=True,
            extra_headers=advertisement_headers(self.task))
        if status >= 400:
            try:
                doc = ProblemDocument.from_json(content)
                detail = f"{doc.type}: {doc.detail or ''}"
            except ProblemDocumentError:
                detail = content[:200].decode(errors="replace")
            raise UploadError(status, detail)
        rejected: dict[bytes, ReportError] = self.flow.decode_upload_errors(content)
        return UploadResult(len(reports) - len(rejected), rejected)

    async def _put_reports(self, reports: Sequence[Any], concurrency: int = 16
                           ) -> UploadResult:
        """One request per report (DAP-09 Section 4.4.2), `concurrency` at a time."""
        url = self.task.profile.resource_url("reports", self.task.leader_aggregator_endpoint,
                                             task_id=self.task.task_id)
        method = self.task.profile.request("upload")[0]
        sem = asyncio.Semaphore(concurrency)

        async def put(report: Any) -> ReportError | None:
            message, body = self.flow.encode_upload([report])
            async with sem:
                status, _, content = await self._request(
                    method, url, body, self.task.profile.media_type_for(message),
                    leader=True)
            if status < 400:
                return None
            try:
                doc = ProblemDocument.from_json(content)
                token = doc.dap_problem(self.task.profile)
                detail = f"{doc.type}: {doc.detail or ''}"
            except ProblemDocumentError:
                token, detail = None, content[:200].decode(errors="replace")
            if token not in self.flow.upload_problems:
                raise UploadError(status, detail)
            error: ReportError = self.flow.upload_problems[str(token)]
            return error

        errors = await asyncio.gather(*(put(r) for r in reports))
        rejected = {self.flow.report_id(r): e
                    for r, e in zip(reports, errors, strict=True) if e is not None}
        return UploadResult(len(reports) - len(rejected), rejected)

    async def upload(self, measurements: Sequence[Any], batch_size: int = 500,
                     time_seconds: float | None = None) -> UploadResult:
        """Prepare and upload measurements in requests of `batch_size` reports. Reports
        refused for their HPKE configuration (`outdated_config`; `hpke_unknown_config_id`
        where the draft has no `outdated_config`, DAP-19) are sent once more, as freshly
        generated reports (DAP-18 Section 4.4.2) after refreshing the configurations.

        The retry re-encrypts the SAME noisy measurements: the task's DP noise is drawn
        once per measurement (`randomize`), never again for a retry, so that a Leader
        that fakes `outdated_config` learns nothing more than from one report. The retry
        keeps the first attempt's report time (the same batch interval)."""
        total = UploadResult(0, {})
        for i in range(0, len(measurements), batch_size):
            noisy = self.randomize(measurements[i : i + batch_size])
            now = time_seconds if time_seconds is not None else self.clock()
            reports = await self.encrypt(noisy, now)
            result = await self.upload_reports(reports)
            outdated = [j for j, r in enumerate(reports)
                        if result.rejected.get(self.flow.report_id(r)) in RETRY_ERRORS]
            if outdated:
                await self.hpke_configs(refresh=True)
                for j in outdated:
                    result.rejected.pop(self.flow.report_id(reports[j]))
                retry = await self.upload_reports(
                    await self.encrypt([noisy[j] for j in outdated], now))
                result.accepted += retry.accepted
                result.rejected.update(retry.rejected)
            total.accepted += result.accepted
            total.rejected.update(result.rejected)
        return total


def upload_sync(task: DapTask, measurements: Sequence[Any], **kwargs: Any) -> UploadResult:
    """Blocking convenience wrapper around `Client.upload`."""
    async def go() -> UploadResult:
        async with Client(task) as client:
            return await client.upload(measurements, **kwargs)
    return asyncio.run(go())
