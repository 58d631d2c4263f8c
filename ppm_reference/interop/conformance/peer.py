"""The suite's side of the protocol, built from this project's own Client, Collector and
protocol core, with the hooks the malformed-message checks use to change one field."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from ppm_reference.dap.client import Client
from ppm_reference.dap.collector import Collection, CollectionError, Collector
from ppm_reference.dap.common import Duration, HpkeConfig, Interval, ReportError, Time
from ppm_reference.dap.provision import ProvisionedTask
from ppm_reference.interop.conformance.catalogue import Fail
from ppm_reference.interop.conformance.context import Answer, Ctx

# -- VDAFs that write one input share wrong ------------------------------------------------


def mutating_vdaf(vdaf: Any, share: int, mutate: Callable[[Any, bytes], bytes]) -> Any:
    """A copy of ``vdaf`` whose ``encode_input_share`` passes the encoding of input share
    ``share`` (0: the Leader's, 1: the Helper's, in the order ``dap.sharding.shard`` encodes
    them) through ``mutate(vdaf, encoded)``. Same class name and parameters, so that the
    task's VDAF configuration still matches."""
    import copy
    import types

    calls = {"n": 0}
    original = vdaf.encode_input_share

    def encode_input_share(self: Any, input_share: Any) -> bytes:
        encoded: bytes = original(input_share)
        index = calls["n"] % 2
        calls["n"] += 1
        return mutate(self, encoded) if index == share else encoded

    obj = copy.copy(vdaf)
    obj.encode_input_share = types.MethodType(encode_input_share, obj)
    return obj


def out_of_range_first_element(vdaf: Any, encoded: bytes) -> bytes:
    """The first field element replaced by all one bits: at least the field's modulus."""
    n: int = vdaf.field.ENCODED_SIZE
    return b"\xff" * n + encoded[n:]


def off_by_one_first_element(vdaf: Any, encoded: bytes) -> bytes:
    """The first field element plus one (a valid element, so the share decodes, but the
    measurement shares no longer add up to a valid measurement: verification fails)."""
    n: int = vdaf.field.ENCODED_SIZE
    value = (int.from_bytes(encoded[:n], "little") + 1) % int(vdaf.field.MODULUS)
    return value.to_bytes(n, "little") + encoded[n:]


def flip_first_byte(_vdaf: Any, encoded: bytes) -> bytes:
    return bytes([encoded[0] ^ 0x01]) + encoded[1:]


def with_ciphertext(report: Any, leader: bool, **changes: Any) -> Any:
    """The report with fields of one encrypted input share changed (``config_id``,
    ``payload``, ``enc``)."""
    name = "leader_encrypted_input_share" if leader else "helper_encrypted_input_share"
    ct = getattr(report, name)
    return dataclasses.replace(report, **{name: dataclasses.replace(ct, **changes)})


def task_without_interval_check(task: Any) -> Any:
    """A copy of ``task`` for which the draft's Client makes a report at any time (the
    checks of reports outside the task interval): the same parameters on the wire (the
    task interval that DAP-18 binds into the HPKE associated data is unchanged), but
    an interval that contains every time; DAP-09's expiration, which its AAD does not
    bind, removed."""
    fields = {f.name for f in dataclasses.fields(task)}
    changes: dict[str, Any] = {}
    if "task_expiration" in fields:
        changes["task_expiration"] = None
    interval = getattr(task, "task_interval", None)
    if interval is not None:
        changes["task_interval"] = _AnyTime(interval.start, interval.duration)
    return dataclasses.replace(task, **changes)


class _AnyTime(Interval):
    def contains(self, time: int) -> bool:
        return True


def corrupt(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0x80]) if data else b"\x00"


# -- the Client and Collector against a Leader ---------------------------------------------


class LeaderPeer:
    """Client and Collector of one task against the Leader under test."""

    def __init__(self, ctx: Ctx, pt: ProvisionedTask) -> None:
        self.ctx = ctx
        self.pt = pt
        self.task = pt.task
        self.flow = pt.task.profile.flow
        self.client = Client(pt.task, session=ctx.session)
        self._configs: tuple[HpkeConfig, HpkeConfig] | None = None

    async def configs(self) -> tuple[HpkeConfig, HpkeConfig]:
        if self._configs is None:
            try:
                self._configs = await self.client.hpke_configs()
            except Exception as exc:  # noqa: BLE001 - UploadError, decode errors
                raise Fail(f"cannot get the Aggregators' HPKE configurations: {exc}") from None
        return self._configs

    async def reports(self, n: int, measurement: int = 1, *, seconds: float | None = None,
                      vdaf: Any = None) -> list[Any]:
        leader, helper = await self.configs()
        now = time.time() if seconds is None else seconds
        t = self.flow.report_time(self.task, now)
        return [self.flow.generate_report(self.task, measurement, time=t,
                                          leader_hpke_config=leader,
                                          helper_hpke_config=helper,
                                          vdaf=vdaf or self.client.vdaf)
                for _ in range(n)]

    def upload_url(self) -> str:
        return self.ctx.url("reports", self.pt)

    async def upload_raw(self, body: bytes, content_type: str | None = None,
                         method: str | None = None) -> Answer:
        message = self.task.profile.message_names["upload"]
        ct = content_type if content_type is not None else \
            self.task.profile.media_type_for(message)
        return await self.ctx.send(method or self.task.profile.request("upload")[0],
                                   self.upload_url(), body, ct)

    async def upload(self, reports: Sequence[Any]) -> dict[bytes, ReportError]:
        """Upload the reports (one request, or one per report where the draft says so);
        every request must succeed or refuse reports the draft's way; the refused reports
        and their errors."""
        refused: dict[bytes, ReportError] = {}
        groups = [[r] for r in reports] if self.flow.one_report_per_request else [list(reports)]
        for group in groups:
            _, body = self.flow.encode_upload(group)
            ans = await self.upload_raw(body)
            refused.update(self.report_errors(ans, group))
        return refused

    def report_errors(self, ans: Answer, group: Sequence[Any]) -> dict[bytes, ReportError]:
        """The reports an upload answer refused: DAP-18/19 ``UploadErrors`` in a 200, or
        DAP-09's problem document for its single report."""
        if 200 <= ans.status < 300:
            try:
                return dict(self.flow.decode_upload_errors(ans.body))
            except Exception as exc:  # noqa: BLE001 - decode errors
                raise Fail(f"upload answer does not decode: {exc}") from None
        doc = ans.problem()
        token = None
        if doc is not None and isinstance(doc.get("type"), str):
            token = doc["type"].removeprefix(self.task.profile.problem_type_prefix)
        if len(group) == 1 and token in self.flow.upload_problems:
            return {self.flow.report_id(group[0]): self.flow.upload_problems[token]}
        raise Fail(f"upload refused as a whole: {ans.brief()}")

    # -- collection -----------------------------------------------------------------------
    def collector(self) -> Collector:
        return Collector(self.task, self.pt.collector_keypair, self.pt.collector_auth_token,
                         session=self.ctx.session)

    def query(self, start_unit: int | None = None, units: int = 3) -> Any:
        tp = int(self.task.time_precision)
        now_unit = int(time.time()) // tp
        start = now_unit - 1 if start_unit is None else start_unit
        return self.flow.query_interval(self.task, Interval(Time(start), Duration(units)))

    async def collect(self, query: Any = None) -> Collection:
        try:
            return await self.collector().collect(
                query if query is not None else self.query(), timeout=self.ctx.timeout,
                max_poll_interval=0.2)
        except CollectionError as exc:
            if exc.status >= 500:
                raise Fail(f"server error while collecting: {exc}") from None
            raise Fail(f"collection failed: {exc}") from None

    async def upload_and_count(self, good: int, extra: Sequence[Any]) -> int:
        """Upload ``good`` valid reports and the ``extra`` ones, collect, and return the
        report count."""
        await self.upload(await self.reports(good))
        if extra:
            await self.upload(extra)
        result = await self.collect()
        return int(result.report_count)

    def collection_body(self, query: Any = None, agg_param: bytes = b"") -> tuple[str, bytes]:
        req = self.flow.collection_request(query if query is not None else self.query(),
                                           agg_param)
        return type(req).__name__, bytes(req.encode())

    async def start_collection(self, body: bytes, message: str, *,
                               headers: dict[str, str] | None = None,
                               job_id: bytes | None = None, content_type: str | None = None
                               ) -> tuple[Answer, str | None]:
        """Create a collection job (POST, or PUT to a URL with ``job_id`` or a fresh ID);
        the answer and the job's URL (None when refused)."""
        import secrets

        from ppm_reference.dap.origin import resolve_location

        h = self.ctx.auth(self.pt.collector_auth_token) if headers is None else headers
        if self.flow.collector_chooses_job_id:
            url = self.ctx.url("collection_job", self.pt,
                               collection_job_id=job_id or secrets.token_bytes(16))
        else:
            url = self.ctx.url("collection_jobs", self.pt)
        ans = await self.ctx.op("collection_job_create", url, body, message, h,
                                content_type=content_type)
        if not 200 <= ans.status < 300:
            return ans, None
        if self.flow.collector_chooses_job_id:
            return ans, url
        loc = ans.headers.get("location")
        if not loc:
            raise Fail(f"collection job created without a Location: {ans.brief()}")
        return ans, resolve_location(url, loc)

    async def poll(self, job_url: str, headers: dict[str, str] | None = None) -> Answer:
        h = self.ctx.auth(self.pt.collector_auth_token) if headers is None else headers
        return await self.ctx.op("collection_job_poll", job_url, None, None, h)

    async def poll_until(self, job_url: str, seconds: float) -> Answer:
        """Poll until an answer with a body or an error, or ``seconds`` pass (the last
        not-ready answer)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            ans = await self.poll(job_url)
            if ans.status >= 400 or (ans.body and ans.status != 202):
                return ans
            if loop.time() > deadline:
                return ans
            await asyncio.sleep(0.1)


# -- the Leader against a Helper -----------------------------------------------------------


@dataclasses.dataclass
class Prepared:
    """One report the suite (as Leader) prepared: the report, the Leader's ping-pong
    state and its first message to the Helper."""

    report: Any
    state: Any
    payload: bytes

    @property
    def report_id(self) -> bytes:
        return bytes(self.report.report_metadata.report_id)


class HelperPeer:
    """The Leader of one task against the Helper under test, built on this project's
    protocol core: its reports are made by the Client code for an HPKE key of the suite
    (the Leader's share) and the Helper's advertised configuration; its messages are the
    profile's wire encodings (``profile.wire``)."""

    def __init__(self, ctx: Ctx, pt: ProvisionedTask) -> None:
        import secrets

        from ppm_reference.dap.core.store import TaskRecord
        from ppm_reference.dap.core.tasks import AggregatorTask
        from ppm_reference.dap.hpke import generate_keypair
        from ppm_reference.dap.profiles import get_profile

        self.ctx = ctx
        self.pt = pt
        self.task = pt.task
        self.profile = pt.task.profile
        self.flow = self.profile.flow
        self.wire = self.profile.wire
        self.keypair = generate_keypair(secrets.randbelow(256))
        self.collector_keypair = pt.collector_keypair or generate_keypair(1)
        record = TaskRecord(bytes(pt.task.task_id), "leader", self.profile.name,
                            pt.task.config_bytes(), pt.vdaf_verify_key,
                            self.collector_keypair.config.encode(),
                            aggregator_auth_token=pt.aggregator_auth_token,
                            collector_auth_token="conformance",
                            options=json_options(pt.options))
        self.atask = AggregatorTask.from_record(record, get_profile)
        self.vdaf = self.task.vdaf()
        self._helper_config: HpkeConfig | None = None

    def headers(self) -> dict[str, str]:
        return self.ctx.auth(self.pt.aggregator_auth_token)

    async def helper_config(self) -> HpkeConfig:
        from ppm_reference.dap.common import HpkeConfigList
        from ppm_reference.dap.hpke import choose_config

        if self._helper_config is None:
            resource = self.profile.request("hpke_config")[1]
            ans = await self.ctx.send("GET", self.ctx.url(resource, self.pt))
            self.ctx.expect_success(ans, 200)
            try:
                self._helper_config = choose_config(HpkeConfigList.decode(ans.body))
            except Exception as exc:  # noqa: BLE001 - decode errors
                raise Fail(f"the Helper's HpkeConfigList does not decode: {exc}") from None
        return self._helper_config

    async def reports(self, n: int, *, seconds: float | None = None, vdaf: Any = None,
                      measurement: int = 1) -> list[Any]:
        helper = await self.helper_config()
        now = time.time() if seconds is None else seconds
        t = self.flow.report_time(self.task, now)
        return [self.flow.generate_report(self.task, measurement, time=t,
                                          leader_hpke_config=self.keypair.config,
                                          helper_hpke_config=helper, vdaf=vdaf or self.vdaf)
                for _ in range(n)]

    def prepare(self, report: Any, verify_key: bytes | None = None) -> Prepared:
        """The Leader's side of a report: open its share, ping-pong init."""
        from ppm_reference.dap.common import Role
        from ppm_reference.vdaf.ping_pong import Continued, ping_pong_leader_init

        md = report.report_metadata
        share, _ = self.wire.open_input_share(self.atask, self.keypair, Role.LEADER, md,
                                              report.public_share,
                                              report.leader_encrypted_input_share)
        state = ping_pong_leader_init(self.vdaf, verify_key or self.pt.vdaf_verify_key,
                                      self.task.vdaf_ctx(), b"", bytes(md.report_id),
                                      report.public_share, share)
        if not isinstance(state, Continued):
            raise Fail(f"the suite could not prepare its own report: {state}")
        return Prepared(report, state, state.outbound)

    async def prepared(self, n: int, **kwargs: Any) -> list[Prepared]:
        return [self.prepare(r) for r in await self.reports(n, **kwargs)]

    def init_body(self, items: Sequence[Prepared], batch_id: bytes | None = None,
                  key_id: int = 0, payloads: Sequence[bytes] | None = None) -> bytes:
        pays = payloads if payloads is not None else [p.payload for p in items]
        return bytes(self.wire.encode_init_req(self.atask, b"", batch_id,
                                               [(p.report, pay) for p, pay in
                                                zip(items, pays, strict=True)],
                                               verification_key_id=key_id))

    def init_url(self, job_id: bytes | None = None) -> tuple[str, bytes | None]:
        import secrets

        resource = self.profile.request("aggregation_job_init")[1]
        if "{aggregation-job-id}" in self.profile.resources[resource]:
            job_id = job_id or secrets.token_bytes(16)
            return self.ctx.url(resource, self.pt, aggregation_job_id=job_id), job_id
        return self.ctx.url(resource, self.pt), None

    async def init(self, body: bytes, *, job_id: bytes | None = None,
                   headers: dict[str, str] | None = None, content_type: str | None = None
                   ) -> tuple[Answer, str]:
        """Send an AggregationJobInitReq; the answer (after polling, where the Helper
        answers asynchronously) and the job's URL."""
        from ppm_reference.dap.origin import resolve_location

        url, _ = self.init_url(job_id)
        ans = await self.ctx.op("aggregation_job_init", url, body, "AggregationJobInitReq",
                                self.headers() if headers is None else headers,
                                content_type=content_type)
        job_url = url
        loc = ans.headers.get("location")
        if 200 <= ans.status < 300 and loc:
            job_url = resolve_location(url, loc)
        if 200 <= ans.status < 300 and not ans.body and "aggregation_job_poll" in \
                self.profile.requests:
            ans = await self.poll_job(job_url)
        return ans, job_url.split("?", 1)[0]

    async def poll_job(self, job_url: str) -> Answer:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ctx.timeout
        while True:
            ans = await self.ctx.send("GET", job_url, headers=self.headers())
            if ans.status >= 400 or ans.body:
                return ans
            if loop.time() > deadline:
                raise Fail(f"aggregation job not ready after {self.ctx.timeout} s")
            await asyncio.sleep(0.1)

    def responses(self, ans: Answer) -> list[Any]:
        self.ctx.expect_success(ans, message="AggregationJobResp")
        try:
            return list(self.wire.decode_job_resp(ans.body))
        except Exception as exc:  # noqa: BLE001 - decode errors
            raise Fail(f"AggregationJobResp does not decode: {exc}") from None

    def expect_rejected(self, ans: Answer, item: Prepared,
                        errors: tuple[ReportError, ...]) -> None:
        from ppm_reference.dap.common import VerifyRespType

        resps = {bytes(r.report_id): r for r in self.responses(ans)}
        r = resps.get(item.report_id)
        if r is None:
            raise Fail("the AggregationJobResp has no answer for the report")
        if r.kind != VerifyRespType.REJECT:
            raise Fail(f"expected the report rejected with "
                       f"{'/'.join(e.name.lower() for e in errors)}, got {r.kind.name}")
        if r.error not in errors:
            raise Fail(f"expected {'/'.join(e.name.lower() for e in errors)}, got "
                       f"{r.error.name.lower() if r.error is not None else None}")

    def finish(self, items: Sequence[Prepared], ans: Answer) -> list[tuple[Prepared, Any]]:
        """The output shares of the reports the Helper continued (the job of a one-round
        VDAF ends here); Fail unless it answered each report, in order."""
        from ppm_reference.dap.common import VerifyRespType
        from ppm_reference.vdaf.ping_pong import (
            Finished,
            FinishedWithOutbound,
            ping_pong_leader_continued,
        )

        resps = self.responses(ans)
        if [bytes(r.report_id) for r in resps] != [p.report_id for p in items]:
            raise Fail("the AggregationJobResp does not answer the reports in order")
        out = []
        for p, r in zip(items, resps, strict=True):
            if r.kind != VerifyRespType.CONTINUE:
                err = r.error.name.lower() if r.error is not None else r.kind.name
                raise Fail(f"a valid report was not continued: {err}")
            state = ping_pong_leader_continued(self.vdaf, self.task.vdaf_ctx(), b"", p.state,
                                               r.payload or b"")
            if not isinstance(state, Finished | FinishedWithOutbound):
                raise Fail(f"the Helper's message does not finish verification: {state}")
            out.append((p, state.out_share))
        return out

    async def aggregate(self, n: int, batch_id: bytes | None = None
                        ) -> list[tuple[Prepared, Any]]:
        items = await self.prepared(n)
        ans, _ = await self.init(self.init_body(items, batch_id=batch_id))
        return self.finish(items, ans)

    # -- aggregate shares -----------------------------------------------------------------
    def interval(self, start_unit: int | None = None, units: int = 3) -> Interval:
        tp = int(self.task.time_precision)
        start = int(time.time()) // tp - 1 if start_unit is None else start_unit
        return Interval(Time(start), Duration(units))

    def coll_req(self, interval: Interval | None) -> Any:
        """The Collector's request the share request carries or binds: a time-interval
        query, or (``interval`` None) a leader-selected current-batch query."""
        query = self.flow.query_interval(self.task, interval) if interval is not None \
            else self.flow.query_current_batch(self.task)
        req = self.flow.collection_request(query, b"")
        return self.wire.decode_collection_req(self.atask, bytes(req.encode())), req

    def share_body(self, interval: Interval | None, report_ids: Sequence[bytes],
                   report_count: int | None = None, checksum: bytes | None = None,
                   batch_id: bytes | None = None) -> bytes:
        from ppm_reference.dap.common import batch_checksum

        coll, _ = self.coll_req(interval)
        return bytes(self.wire.encode_share_req(
            self.atask, coll, interval, batch_id,
            len(report_ids) if report_count is None else report_count,
            batch_checksum(report_ids) if checksum is None else checksum))

    async def share(self, body: bytes, headers: dict[str, str] | None = None) -> Answer:
        from ppm_reference.dap.origin import resolve_location

        url = self.ctx.url("aggregate_shares", self.pt)
        ans = await self.ctx.op("aggregate_share_create", url, body, "AggregateShareReq",
                                self.headers() if headers is None else headers)
        loc = ans.headers.get("location")
        if 200 <= ans.status < 300 and not ans.body and loc:
            share_url = resolve_location(url, loc)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.ctx.timeout
            while True:
                ans = await self.ctx.send("GET", share_url, headers=self.headers())
                if ans.status >= 400 or ans.body:
                    break
                if loop.time() > deadline:
                    raise Fail(f"aggregate share not ready after {self.ctx.timeout} s")
                await asyncio.sleep(0.1)
        return ans

    def check_share(self, ans: Answer, interval: Interval | None,
                    outs: Sequence[tuple[Prepared, Any]], batch_id: bytes | None = None
                    ) -> Any:
        """The aggregate result of the Helper's share and the suite's Leader share, as
        the Collector would compute it (Fail if the share does not open)."""
        from ppm_reference.dap.common import Role

        self.ctx.expect_success(ans, message="AggregateShare")
        try:
            helper_ct = self.wire.decode_agg_share(ans.body)
        except Exception as exc:  # noqa: BLE001 - decode errors
            raise Fail(f"AggregateShare does not decode: {exc}") from None
        vdaf = self.vdaf
        agg = vdaf.agg_init(None)
        for _, out in outs:
            agg = vdaf.agg_update(None, agg, out)
        coll, req = self.coll_req(interval)
        leader_ct = self.wire.encrypt_agg_share(self.atask, Role.LEADER, coll, interval,
                                                batch_id, vdaf.encode_agg_share(agg))
        # The collection's interval (of the reports' times, for a leader-selected batch).
        spanned = interval or self.interval(units=3)
        body = self.wire.encode_collection(self.atask, coll, batch_id, len(outs), spanned,
                                           leader_ct, helper_ct)
        try:
            resp = self.flow.decode_collection(body)
            result = self.flow.collect_result(self.task, self.collector_keypair, req, resp,
                                              vdaf=vdaf)
        except Exception as exc:  # noqa: BLE001 - HPKE and VDAF errors
            raise Fail(f"the Helper's aggregate share does not open or unshard: {exc}") \
                from None
        return result.aggregate_result


def json_options(options: dict[str, Any]) -> str:
    import json

    return json.dumps(options or {}, sort_keys=True)
