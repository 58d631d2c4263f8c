"""End to end over real HTTP (tests/dap_harness.py): Client -> Leader <-> Helper -> Collector.

Every scenario runs for both protocol profiles (`proto`: dap-18 with VDAF 18, dap-09 with
VDAF-08; `tests.dap_harness.Proto` holds what differs: VDAF classes, query encodings).

* every Prio3 variant x both batch modes x synchronous and asynchronous Helper (DAP-09
  has no asynchronous Helper: its aggregation jobs are answered synchronously): the
  collected result is the exact aggregate of the uploaded measurements;
* the DP policies: the debiased result is within a tolerance derived from the noise's
  distribution (each test states its false-failure probability);
* a batch over several time_precision buckets, two successive collections, eager
  aggregation while uploads continue.

The parameters are small (a handful of reports, short vectors) so that the file runs in
well under a minute. Errors are in test_dap_errors.py.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ppm_reference.dap.collector import Collection
from ppm_reference.dap.common import BatchMode
from ppm_reference.dap.profiles.dap18.messages import Query
from ppm_reference.dap.provision import ProvisionedTask, new_task
from ppm_reference.dp_policy import policies
from tests.dap_harness import PROTOS, AggregatorPair, Proto

MODES = [BatchMode.TIME_INTERVAL, BatchMode.LEADER_SELECTED]
# The Helper answers asynchronous resources with Retry-After: 0, so that the Leader polls
# again at once (the default of 1 s would only slow the tests down).
SYNC = {"async_helper": False}
ASYNC = {"async_helper": True, "retry_after": 0}


class OffsetClock:
    """A clock that runs at real speed from a chosen start (servers keep working: their
    retries and polls are scheduled on this clock)."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.t0 = time.monotonic()

    def __call__(self) -> float:
        return self.start + (time.monotonic() - self.t0)


def aligned_start(precision: int) -> float:
    """A time just after the start of a time_precision bucket (so that a test does not
    straddle a bucket boundary by accident)."""
    return float((int(time.time()) // precision + 1) * precision + 1)


# -- the VDAFs and their measurements -------------------------------------------------------

VDAFS: dict[str, tuple[Callable[[Proto], Any], Callable[[int], Any]]] = {
    "count": (lambda p: p.count(), lambda i: i % 3 == 0),
    "sum": (lambda p: p.sum(13), lambda i: (5 * i + 3) % 14),
    "sumvec": (lambda p: p.sumvec(3, 5, 2), lambda i: [i % 6, (2 * i) % 6, 5 - i % 6]),
    "histogram": (lambda p: p.histogram(5, 2), lambda i: (3 * i) % 5),
    "multihot": (lambda p: p.multihot(4, 2, 2),
                 lambda i: [i % 2 == 0, i % 3 == 0, False, i % 4 == 1]),
}


def exact_aggregate(name: str, measurements: list[Any]) -> Any:
    """The aggregate computed in the clear, the value the Collector must get."""
    if name == "count":
        return sum(int(m) for m in measurements)
    if name == "sum":
        return sum(measurements)
    if name == "histogram":
        length = 5
        return [sum(1 for m in measurements if m == b) for b in range(length)]
    # sumvec, multihot: coordinate-wise sums
    return [sum(int(m[j]) for m in measurements) for j in range(len(measurements[0]))]


def query_for(pair: AggregatorPair, pt: ProvisionedTask) -> Any:
    if pt.task.batch_mode == BatchMode.TIME_INTERVAL:
        return pair.current_interval_query(pt)
    return Proto(pt.task.profile.name).current_batch_query()


async def upload(pair: AggregatorPair, pt: ProvisionedTask, measurements: list[Any],
                 time_seconds: float | None = None) -> None:
    async with pair.client(pt) as client:
        result = await client.upload(measurements, time_seconds=time_seconds)
    assert result.rejected == {}
    assert result.accepted == len(measurements)


async def collect(pair: AggregatorPair, pt: ProvisionedTask, query: Any) -> Collection:
    async with pair.collector(pt) as collector:
        return await collector.collect(query, timeout=30, max_poll_interval=0.05)


async def wait_for(predicate: Callable[[], bool], timeout: float = 20.0,
                   what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def sql(state: Any, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with state.datastore.transaction() as tx:
        return [tuple(r) for r in tx.c.execute(query, args).fetchall()]


# -- exact aggregates: every Prio3 variant, both batch modes, sync and async Helper ---------


# DAP-09 aggregation jobs are synchronous: no "async" Helper variant for dap-09.
PROTO_HELPERS = [pytest.param(p, h, id=f"{p.name}-{hid}") for p in PROTOS
                 for h, hid in ((SYNC, "sync"), (ASYNC, "async"))
                 if not (p.dap09 and h is ASYNC)]
proto_param = pytest.mark.parametrize("proto", PROTOS, ids=[p.name for p in PROTOS])


@pytest.mark.parametrize(("proto", "helper"), PROTO_HELPERS)
@pytest.mark.parametrize("mode", MODES, ids=["time_interval", "leader_selected"])
@pytest.mark.parametrize("name", list(VDAFS))
def test_exact_aggregate(tmp_path: Path, name: str, mode: BatchMode, proto: Proto,
                         helper: dict[str, Any]) -> None:
    make_vdaf, measurement = VDAFS[name]
    measurements = [measurement(i) for i in range(7)]

    async def run() -> None:
        async with AggregatorPair(tmp_path, helper_overrides=helper) as pair:
            # Leader-selected: the batch holds every report (max_batch_size), so the
            # collected batch is known.
            pt = pair.provision(make_vdaf(proto), batch_mode=mode, min_batch_size=5,
                                max_batch_size=len(measurements), profile=proto.profile)
            await upload(pair, pt, measurements)
            if mode == BatchMode.LEADER_SELECTED:
                # The Leader may release any batch of min_batch_size reports or more; for
                # the batch to hold every report, they must all be assigned to it before
                # the collection job chooses it (DAP-09 uploads arrive one by one, and a
                # job may start before the last one).
                await wait_for(lambda: sql(pair.leader_state, "SELECT COUNT(*) FROM "
                                           "client_reports WHERE state=?", "new") == [(0,)],
                               what="every report in an aggregation job")
            collection = await collect(pair, pt, query_for(pair, pt))
            assert collection.report_count == len(measurements)
            assert collection.aggregate_result == exact_aggregate(name, measurements)
            # Both Aggregators committed every report exactly once.
            for state in (pair.leader_state, pair.helper_state):
                rows = sql(state, "SELECT SUM(report_count) FROM batch_buckets")
                assert rows == [(len(measurements),)]
                assert sql(state, "SELECT COUNT(*) FROM aggregated_reports") == \
                    [(len(measurements),)]
            # The interval is the smallest one containing the reports' times.
            now = int(pair.clock()) // pt.task.time_precision
            start, duration = proto.units(pt, collection.interval)
            assert now - 1 <= start <= now
            assert 1 <= duration <= 2
    asyncio.run(run())


# -- DP policies ----------------------------------------------------------------------------
#
# The tolerance on the debiased result is computed from the exact distribution of the
# error on one coordinate: the smallest t >= 6 standard deviations such that
# P(|error| > t) <= 1e-10. With at most 8 coordinates a test fails falsely with
# probability at most 8e-10. (The noise comes from the OS CSPRNG, so no seed is fixed.)

FALSE_FAILURE_PER_COORDINATE = 1e-10


def convolve(a: dict[float, float], b: dict[float, float]) -> dict[float, float]:
    out: dict[float, float] = {}
    for x, px in a.items():
        for y, py in b.items():
            out[x + y] = out.get(x + y, 0.0) + px * py
    return out


def normalized(weights: dict[float, float]) -> dict[float, float]:
    total = math.fsum(weights.values())
    return {x: w / total for x, w in weights.items()}


def discrete_gaussian_pmf(sigma: float) -> dict[float, float]:
    bound = int(12 * sigma) + 12
    return normalized({float(x): math.exp(-x * x / (2 * sigma * sigma))
                       for x in range(-bound, bound + 1)})


def discrete_laplace_pmf(scale: float) -> dict[float, float]:
    bound = int(40 * scale) + 40
    return normalized({float(x): math.exp(-abs(x) / scale) for x in range(-bound, bound + 1)})


def binomial_pmf(n: int, p: float) -> dict[float, float]:
    return {float(k): math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(n + 1)}


def std(pmf: dict[float, float]) -> float:
    mean = math.fsum(x * p for x, p in pmf.items())
    return math.sqrt(math.fsum((x - mean) ** 2 * p for x, p in pmf.items()))


def tolerance(error_pmf: dict[float, float]) -> float:
    """The smallest t >= 6 std with P(|error| > t) <= FALSE_FAILURE_PER_COORDINATE."""
    sd = std(error_pmf)
    for t in sorted({6 * sd} | {abs(x) for x in error_pmf if abs(x) >= 6 * sd}):
        tail = math.fsum(p for x, p in error_pmf.items() if abs(x) > t + 1e-9)
        if tail <= FALSE_FAILURE_PER_COORDINATE:
            return t
    raise AssertionError("no tolerance found")


def aggregator_noise_tolerance(mechanism_pmf: dict[float, float]) -> float:
    # Each Aggregator adds independent noise to its aggregate share.
    return tolerance(convolve(mechanism_pmf, mechanism_pmf))


DP_CASES = {
    # name: (vdaf, spec, measurements, batch mode, helper)
    "HistogramWithAggregatorRandomization": (
        lambda p: p.histogram(4, 2),
        {"epsilon": 5.0, "delta": 1e-6}, [0] * 30 + [1] * 15 + [2] * 10 + [3] * 5,
        BatchMode.TIME_INTERVAL, SYNC),
    "HistogramWithAggregatorLaplace": (
        lambda p: p.histogram(4, 2),
        {"epsilon": 5.0}, [0] * 24 + [1] * 12 + [2] * 9,
        BatchMode.LEADER_SELECTED, ASYNC),
    "SumVecWithAggregatorRandomization": (
        lambda p: p.sumvec(3, 3, 2),
        {"epsilon": 10.0, "delta": 1e-6}, [[i % 4, 3, (i * 7) % 4] for i in range(40)],
        BatchMode.TIME_INTERVAL, ASYNC),
}


@proto_param
@pytest.mark.parametrize("policy", list(DP_CASES))
def test_dp_aggregator_noise(tmp_path: Path, policy: str, proto: Proto) -> None:
    make_vdaf, params, measurements, mode, helper = DP_CASES[policy]
    vdaf = make_vdaf(proto)
    if policy == "SumVecWithAggregatorRandomization":
        exact = exact_aggregate("sumvec", measurements)
    else:
        exact = [sum(1 for m in measurements if m == b) for b in range(vdaf.length)]

    async def run() -> None:
        async with AggregatorPair(tmp_path, helper_overrides=helper) as pair:
            pt = pair.provision(vdaf, batch_mode=mode, min_batch_size=len(measurements),
                                dp_policy={"policy": policy, **params}, profile=proto.profile)
            task_policy = pair.collector(pt).policy
            assert type(task_policy).__name__ == policy
            if policy == "HistogramWithAggregatorLaplace":
                tol = aggregator_noise_tolerance(discrete_laplace_pmf(task_policy.scale))
            else:
                tol = aggregator_noise_tolerance(discrete_gaussian_pmf(task_policy.sigma))
            # The check is not vacuous: losing the largest count would fail it.
            assert tol < max(exact) / 2
            await upload(pair, pt, measurements)
            collection = await collect(pair, pt, query_for(pair, pt))
            assert collection.report_count == len(measurements)
            debiased = collection.debiased_result
            assert len(debiased) == len(exact)
            for got, want in zip(debiased, exact, strict=True):
                assert abs(got - want) <= tol, (debiased, exact, tol)
            # The noise is in the aggregate shares, not in the stored batch buckets.
            for state in (pair.leader_state, pair.helper_state):
                assert sql(state, "SELECT SUM(report_count) FROM batch_buckets") == \
                    [(len(measurements),)]
    asyncio.run(run())


@proto_param
def test_dp_client_randomization(tmp_path: Path, proto: Proto) -> None:
    """MultiHotHistogramWithClientRandomization: each Client noises its one-hot vector
    with symmetric RAPPOR; the Collector debiases."""
    eps0, length, fp = 3.0, 8, 1e-9
    policy = policies.MultiHotHistogramWithClientRandomization(eps0, length, fp)
    # The task's VDAF must use the policy's max_weight (7 here: fewer than length).
    vdaf = proto.multihot(length, policy.max_weight, 3)
    assert policy.max_weight < length
    buckets = [0] * 30 + [3] * 14 + [i % length for i in range(16)]
    n = len(buckets)
    exact = [buckets.count(b) for b in range(length)]
    p = policy.rappor.p
    tols = []
    for ones in exact:
        # The noisy count is Bin(ones, 1 - p) + Bin(n - ones, p); debiasing divides the
        # deviation from its mean by 1 - 2p.
        counts = convolve(binomial_pmf(ones, 1 - p), binomial_pmf(n - ones, p))
        mean = ones * (1 - p) + (n - ones) * p
        tols.append(tolerance({(x - mean) / (1 - 2 * p): q for x, q in counts.items()}))
    assert max(tols) < max(exact) / 2

    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(vdaf, batch_mode=BatchMode.LEADER_SELECTED, min_batch_size=n,
                                dp_policy={"policy": "MultiHotHistogramWithClientRandomization",
                                           "eps0": eps0, "fp": fp}, profile=proto.profile)
            await upload(pair, pt, buckets)
            collection = await collect(pair, pt, proto.current_batch_query())
            assert collection.report_count == n
            # The aggregate is of noised bit vectors: each coordinate in [0, n].
            assert all(0 <= c <= n for c in collection.aggregate_result)
            for got, want, tol in zip(collection.debiased_result, exact, tols, strict=True):
                assert abs(got - want) <= tol, (collection.debiased_result, exact, tols)
    asyncio.run(run())


@proto_param
def test_dp_policy_max_weight_must_match(tmp_path: Path, proto: Proto) -> None:
    """An Aggregator refuses a task whose VDAF does not use the policy's max_weight."""
    spec = {"policy": "MultiHotHistogramWithClientRandomization", "eps0": 3.0, "fp": 1e-9}
    max_weight = policies.MultiHotHistogramWithClientRandomization(3.0, 8, 1e-9).max_weight

    async def run() -> None:
        admin = {"admin_token": "admin"}
        async with AggregatorPair(tmp_path, leader_overrides=admin) as pair, \
                aiohttp.ClientSession() as session:
            for weight, status in ((max_weight + 1, 400), (max_weight, 201)):
                pt = new_task(proto.multihot(8, weight, 3), pair.leader_url,
                              pair.helper_url, dp_policy=spec, profile=proto.profile)
                async with session.post(pair.leader_url + "internal/tasks",
                                        json=pt.admin_json("leader"),
                                        headers={"Authorization": "Bearer admin"}) as resp:
                    assert resp.status == status, await resp.text()
                    if status == 400:
                        assert "max_weight" in (await resp.json())["detail"]
    asyncio.run(run())


# -- collections over several buckets, successive collections, eager aggregation ------------


@proto_param
def test_collection_over_several_buckets(tmp_path: Path, proto: Proto) -> None:
    precision = 10
    start = aligned_start(precision)
    clock = OffsetClock(start + 40)
    base = int(start) // precision

    async def run() -> None:
        async with AggregatorPair(tmp_path, clock=clock) as pair:
            pt = pair.provision(proto.sum(100), min_batch_size=6, time_precision=precision,
                                profile=proto.profile)
            by_bucket = {0: [1, 2], 1: [10, 20], 3: [33, 44, 55]}
            for offset, values in by_bucket.items():
                await upload(pair, pt, values, time_seconds=start + offset * precision)
            # Four buckets (the third is empty): one batch over all of them.
            collection = await collect(pair, pt, proto.interval_query(pt, base, 4))
            assert collection.report_count == 7
            assert collection.aggregate_result == sum(sum(v) for v in by_bucket.values())
            # The smallest interval that contains every report time.
            assert proto.units(pt, collection.interval) == (base, 4)
            for state in (pair.leader_state, pair.helper_state):
                rows = sql(state, "SELECT report_count FROM batch_buckets ORDER BY bucket")
                assert rows == [(2,), (2,), (3,)]
    asyncio.run(run())


@proto_param
@pytest.mark.parametrize("mode", MODES, ids=["time_interval", "leader_selected"])
def test_two_successive_collections(tmp_path: Path, mode: BatchMode, proto: Proto) -> None:
    precision = 10
    start = aligned_start(precision)
    clock = OffsetClock(start + 30)
    base = int(start) // precision
    first, second = [1, 2, 3, 4, 5], [10, 20, 30, 40, 50]

    async def run() -> None:
        async with AggregatorPair(tmp_path, clock=clock,
                                  helper_overrides=ASYNC) as pair:
            pt = pair.provision(proto.sum(100), batch_mode=mode, min_batch_size=5,
                                time_precision=precision, profile=proto.profile)
            if mode == BatchMode.TIME_INTERVAL:
                await upload(pair, pt, first, time_seconds=start)
                await upload(pair, pt, second, time_seconds=start + 2 * precision)
                one = await collect(pair, pt, proto.interval_query(pt, base, 1))
                two = await collect(pair, pt, proto.interval_query(pt, base + 1, 2))
                assert (one.aggregate_result, two.aggregate_result) == (sum(first),
                                                                        sum(second))
                assert proto.units(pt, one.interval) == (base, 1)
                assert proto.units(pt, two.interval) == (base + 2, 1)
                assert sql(pair.helper_state, "SELECT start, end_ FROM collected_intervals "
                           "ORDER BY start") == [(base, base + 1), (base + 1, base + 3)]
            elif proto.dap09:
                await upload(pair, pt, first + second)
                # DAP-09: the Collector names each collection job, so two current_batch
                # queries are two jobs and take two batches.
                one = await collect(pair, pt, proto.current_batch_query())
                two = await collect(pair, pt, proto.current_batch_query())
                assert two.job_url != one.job_url and one.batch_id != two.batch_id
                assert one.aggregate_result + two.aggregate_result == sum(first + second)
                assert sql(pair.helper_state, "SELECT COUNT(*) FROM collected_buckets") == \
                    [(2,)]
            else:
                await upload(pair, pt, first + second)
                query = Query.leader_selected()
                async with pair.collector(pt) as collector:
                    # DAP-18 Section 4.6.1: a POST of a byte-identical CollectionJobReq
                    # returns the existing job, and every leader-selected query is the
                    # same bytes. So the Collector deletes a job once it has its result
                    # and the next identical request asks for the next batch (DRAFT
                    # AMBIGUITY: the draft does not say how a Collector asks for a second
                    # leader-selected batch).
                    one = await collector.collect(query, timeout=30, max_poll_interval=0.05,
                                                  delete_after=False)
                    again, _ = await collector.start(query)
                    assert again == one.job_url
                    await collector.delete(one.job_url)
                    two = await collector.collect(query, timeout=30, max_poll_interval=0.05)
                assert two.job_url != one.job_url
                # Two different batches of 5 (the target size is min_batch_size), which
                # together hold every report exactly once.
                assert one.aggregate_result + two.aggregate_result == sum(first + second)
                assert sql(pair.helper_state, "SELECT COUNT(*) FROM collected_buckets") == \
                    [(2,)]
            assert one.report_count == two.report_count == 5
            # A third collection has nothing left to collect: it never completes.
    asyncio.run(run())


@proto_param
@pytest.mark.parametrize("mode", MODES, ids=["time_interval", "leader_selected"])
def test_eager_aggregation_while_uploading(tmp_path: Path, mode: BatchMode,
                                           proto: Proto) -> None:
    """Reports are aggregated as they arrive, before any collection job exists; the
    collection then only combines the batch buckets."""
    rounds = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    total = sum(len(r) for r in rounds)

    async def run() -> None:
        async with AggregatorPair(tmp_path) as pair:
            pt = pair.provision(proto.sum(10), batch_mode=mode, min_batch_size=total,
                                max_batch_size=total, profile=proto.profile)
            done = 0
            for values in rounds:
                await upload(pair, pt, values)
                done += len(values)

                def committed(n: int = done) -> bool:
                    return all(sql(s, "SELECT COALESCE(SUM(report_count), 0) FROM "
                                   "batch_buckets") == [(n,)]
                               for s in (pair.leader_state, pair.helper_state))
                await wait_for(committed, what=f"{done} reports aggregated")
                assert sql(pair.leader_state, "SELECT COUNT(*) FROM collection_jobs") == [(0,)]
            assert sql(pair.leader_state, "SELECT COUNT(*) FROM aggregation_jobs") >= [(3,)]
            collection = await collect(pair, pt, query_for(pair, pt))
            assert collection.report_count == total
            assert collection.aggregate_result == sum(sum(r) for r in rounds)
    asyncio.run(run())
