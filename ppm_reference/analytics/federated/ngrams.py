"""Interactive n-gram discovery ([MJTB+22] = paper 004, Section 1 and Appendix B) over
real DAP tasks.

Round k learns k-grams. Its recipe is a `PrefixTree` whose leaves are the (k-1)-grams
found in round k - 1 (round 1: the empty prefix) and whose tokens are the known words
(round 1: the `known_tokens` most common words of the vocabulary; later rounds: the
1-grams found in round 1, "the set of known tokens for completing this prefix tree",
Section 4.1). Each round is a DAP task provisioned through the Aggregators' admin APIs:

* `rappor` mode: `Prio3MultihotCountVec` with the `MultiHotHistogramWithClientRandomization`
  policy: each device's Client applies symmetric one-hot encoding with eps0 (Appendix C),
  the cohort-aggregate epsilon comes from amplification by aggregation over the minimum
  cohort (Theorem C.3);
* `histogram` mode: `Prio3Histogram` with `HistogramWithAggregatorRandomization`: each
  Aggregator adds discrete Gaussian noise to its aggregate share (no local DP).

The devices of round k run the on-device pipeline (`analytics.federated.device`): query
class, task check, budget Checks 1 to 3 on their own SQLite ledger, then one matching
k-gram (the always-send rule when none matches), uploaded through the DAP Client; the
Collector's debiased histogram decides the next round.

**The fleet** (a simulation, drawn with a seeded `random.Random`; everything the
protocol and the DP noise draw comes from the CSPRNG): a vocabulary of `vocabulary` words
w0, w1, ... with Zipf(`zipf`) frequencies; every device holds `phrases_per_device`
phrases, each of them a planted n-gram with probability `planted_share` (split evenly
between the planted n-grams) and otherwise `background_length` Zipf words. The planted
n-grams use words of ranks [`planted_min_rank`, `known_tokens`) so that their words are
known tokens, and none is a prefix of another. The fleet is split into one cohort per
round (each device reports at most once: k_Allowed = 1, as in Table 1).

**Deciding a round** (the analyst's post-processing): a bucket (leaf, next word) of the
debiased histogram is found when its count exceeds both `min_share` of the round's
reports (the analyst's interest: 1% by default) and z sigma, where sigma is the standard
deviation of one debiased coordinate (Theorem C.2: sqrt(n e^eps0) / (e^eps0 - 1); or
sqrt(2) sigma_Aggregator for the two Aggregators' Gaussian noise) and z = Phi^-1(1 -
alpha/B) for B buckets: at most alpha false discoveries per round in expectation, by
the union bound, when the noise is about Gaussian. Devices without a matching k-gram
report OOV (the always-send rule, `analytics.federated.device`), which is never found.

**Scoring**: the discovered n-grams are the found k-grams (k >= 2) that no later round
extended; precision is the share of them that are relevant -- a planted n-gram or a
contiguous part of one of at least two words ("w39 w33" of the planted "w40 w39 w33" is
as frequent as the planted n-gram, and ends a phrase) -- and recall the share of planted
n-grams that were found. The run also reports, from the accountants, the
cohort-aggregate epsilon each device spent and the local epsilon of each report.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import math
import random
import secrets
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from statistics import NormalDist
from typing import Any

from ppm_reference.analytics.federated.budget import BudgetAccountant, DevicePolicy, FieldAllowance
from ppm_reference.analytics.federated.device import DataStore, encode_answer, verify
from ppm_reference.analytics.federated.query import QueryClass
from ppm_reference.analytics.federated.recipe import END, PrefixTree, Privacy, Recipe

ANALYSIS = "org.ietf.ppm.example.ngram-discovery"
STREAM = "KeyboardNGrams"
FIELD = "ngrams"
QUERY = f"SELECT {FIELD} FROM {STREAM}"
MODES = ("rappor", "histogram")
TIME_PRECISION = 3600


class DiscoveryError(Exception):
    """The discovery cannot run with these settings, or a round failed."""


# ---------------------------------------------------------------------------------------
# The simulated fleet
# ---------------------------------------------------------------------------------------


@dataclass
class FleetSpec:
    devices: int = 100_000
    vocabulary: int = 5000
    zipf: float = 1.0
    phrases_per_device: int = 1
    background_length: tuple[int, int] = (2, 5)
    planted: int = 4
    planted_lengths: tuple[int, int] = (2, 4)
    planted_share: float = 0.6
    planted_min_rank: int = 8
    known_tokens: int = 64
    seed: int = 2024


@dataclass
class Fleet:
    spec: FleetSpec
    words: list[str]
    planted: list[tuple[str, ...]]
    phrases: list[list[tuple[str, ...]]]          # per device

    def share(self, ngrams: Sequence[tuple[str, ...]]) -> dict[tuple[str, ...], float]:
        """The fraction of devices holding each n-gram (the ground truth, for reports)."""
        want = set(ngrams)
        lengths = {len(g) for g in want}
        counts: Counter[tuple[str, ...]] = Counter()
        for phrases in self.phrases:
            held: set[tuple[str, ...]] = set()
            for p in phrases:
                for n in lengths:
                    for i in range(len(p) - n + 1):
                        w = p[i : i + n]
                        if w in want:
                            held.add(w)
            counts.update(held)
        n = max(1, len(self.phrases))
        return {g: counts[g] / n for g in want}


def make_fleet(spec: FleetSpec) -> Fleet:
    """The simulated devices' data (see the module docstring)."""
    if spec.devices < 1 or spec.vocabulary < spec.known_tokens or spec.known_tokens < 2:
        raise DiscoveryError("need devices >= 1 and 2 <= known_tokens <= vocabulary")
    if not 0 <= spec.planted_share <= 1:
        raise DiscoveryError("planted_share must be in [0, 1]")
    lo_len, hi_len = spec.planted_lengths
    if not 2 <= lo_len <= hi_len:
        raise DiscoveryError("planted n-grams have at least 2 words")
    if spec.known_tokens - spec.planted_min_rank < hi_len:
        raise DiscoveryError("too few known tokens above planted_min_rank")
    rng = random.Random(spec.seed)
    words = [f"w{r}" for r in range(spec.vocabulary)]
    cum = list(itertools.accumulate(1.0 / (r + 1) ** spec.zipf
                                    for r in range(spec.vocabulary)))
    pool = words[spec.planted_min_rank : spec.known_tokens]
    planted: list[tuple[str, ...]] = []
    tries = 0
    while len(planted) < spec.planted:
        tries += 1
        if tries > 10_000:
            raise DiscoveryError("cannot draw that many distinct planted n-grams")
        g = tuple(rng.sample(pool, rng.randint(lo_len, hi_len)))
        if any(g[: len(p)] == p or p[: len(g)] == g for p in planted):
            continue
        planted.append(g)
    total = cum[-1]
    b_lo, b_hi = spec.background_length
    phrases: list[list[tuple[str, ...]]] = []
    for _ in range(spec.devices):
        mine = []
        for _ in range(spec.phrases_per_device):
            if planted and rng.random() < spec.planted_share:
                mine.append(planted[rng.randrange(len(planted))])
            else:
                n = rng.randint(b_lo, b_hi)
                mine.append(tuple(words[min(bisect.bisect_left(cum, rng.random() * total),
                                            spec.vocabulary - 1)] for _ in range(n)))
        phrases.append(mine)
    return Fleet(spec, words, planted, phrases)


# ---------------------------------------------------------------------------------------
# Settings, recipes, rounds
# ---------------------------------------------------------------------------------------


@dataclass
class Settings:
    mode: str = "rappor"
    eps0: float = 2.5                 # rappor: the symmetric one-hot parameter
    epsilon: float = 1.0              # histogram: the Aggregators' (epsilon, delta)
    delta: float = 1e-6
    budget: float = 1.0               # the devices' allowed epsilon for the analysis
    local_budget: float | None = 5.0  # the devices' allowed local epsilon (replacement)
    max_n: int | None = None          # default: the longest planted n-gram
    max_prefixes: int = 24
    max_tokens: int = 24
    alpha: float = 0.05
    min_share: float = 0.01           # ignore buckets below this share of the reports
    min_cohort_fraction: float = 0.9
    fp: float = 1e-9
    profile: str = "dap-19"
    upload_batch: int = 1000
    collect_timeout: float = 900.0

    def check(self) -> None:
        if self.mode not in MODES:
            raise DiscoveryError(f"mode must be one of {', '.join(MODES)}")
        for name in ("eps0", "epsilon", "budget"):
            if not getattr(self, name) > 0:
                raise DiscoveryError(f"{name} must be positive")
        if not 0 < self.delta < 1 or not 0 < self.alpha < 1:
            raise DiscoveryError("delta and alpha must be in (0, 1)")
        if not 0 <= self.min_share < 1:
            raise DiscoveryError("min_share must be in [0, 1)")
        if not 0 < self.min_cohort_fraction <= 1:
            raise DiscoveryError("min_cohort_fraction must be in (0, 1]")
        if self.max_n is not None and self.max_n < 1:
            raise DiscoveryError("max_n must be at least 1")


def device_policy(settings: Settings) -> DevicePolicy:
    """What the simulated devices ship with: the analysis may receive one report of
    `budget`; the n-gram field has the same aggregate allowance and the local limit."""
    local = None if settings.local_budget is None else Fraction(str(settings.local_budget))
    budget = Fraction(str(settings.budget))
    return DevicePolicy(ANALYSIS, budget, 1, {FIELD: FieldAllowance(local, budget, 1)})


def query_class() -> QueryClass:
    return QueryClass.allowlist(ANALYSIS, {STREAM: [FIELD]})


def round_up(x: float, digits: int = 4) -> Fraction:
    """x rounded up to `digits` decimals, as an exact decimal."""
    scale = 10 ** digits
    return Fraction(math.ceil(x * scale - 1e-9), scale)


def round_privacy(settings: Settings, min_cohort: int) -> Privacy:
    """The privacy object of a round's recipe: the epsilon each report costs."""
    from ppm_reference.analytics.federated.device import rappor_epsilon

    if settings.mode == "rappor":
        eps = rappor_epsilon(settings.eps0, min_cohort, settings.delta)
        return Privacy("symmetric-ohe", Fraction(str(settings.eps0)), round_up(eps),
                       settings.delta, min_cohort)
    return Privacy("none", None, Fraction(str(settings.epsilon)), settings.delta, min_cohort)


def round_recipe(k: int, leaves: Sequence[tuple[str, ...]], tokens: Sequence[str],
                 privacy: Privacy) -> Recipe:
    tree = PrefixTree.from_leaves(FIELD, leaves, tokens)
    return Recipe(f"ngrams-round-{k}", "1", ANALYSIS, QUERY, tree, {FIELD: tree}, (),
                  "sinceBeginning", privacy, {FIELD: tree})


def round_vdaf(settings: Settings, bins: int) -> tuple[str, dict[str, int],
                                                        dict[str, Any]]:
    """(VDAF name, parameters, DP policy spec) of a round's task."""
    from ppm_reference.dap import dp

    chunk = max(1, int(math.isqrt(bins)))
    if settings.mode == "rappor":
        spec = dp.make_spec(dp.MULTIHOT_CLIENT_RANDOMIZATION, eps0=settings.eps0,
                            fp=settings.fp)
        assert spec is not None
        weight = dp.required_max_weight(spec, "Prio3MultihotCountVec", bins)
        assert weight is not None
        return ("Prio3MultihotCountVec",
                {"length": bins, "max_weight": weight, "chunk_length": chunk}, spec)
    spec = dp.make_spec("HistogramWithAggregatorRandomization", epsilon=settings.epsilon,
                        delta=settings.delta)
    assert spec is not None
    return "Prio3Histogram", {"length": bins, "chunk_length": chunk}, spec


def noise_sigma(policy: Any, n: int) -> float:
    """The standard deviation of one debiased coordinate (see the module docstring)."""
    rappor = getattr(policy, "rappor", None)
    if rappor is not None:
        return float(rappor.debiased_std(n))
    return math.sqrt(2.0) * float(policy.sigma)


@dataclass
class RoundResult:
    k: int
    recipe: Recipe
    task_id: str
    vdaf: str
    dp_policy: dict[str, Any]
    cohort: int
    answered: int
    refused: dict[str, int]
    matched: int
    report_count: int
    epsilon_per_report: float
    threshold: float
    oov: float                      # the OOV bucket: about the devices without a match
    found: list[tuple[tuple[str, ...], float]]
    ended: list[tuple[tuple[str, ...], float]]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"round": self.k, "task_id": self.task_id, "vdaf": self.vdaf,
                "bins": self.recipe.bins, "dp_policy": self.dp_policy,
                "leaves": [" ".join(x) for x in getattr(self.recipe.root, "leaves", ())],
                "cohort": self.cohort, "answered": self.answered, "refused": self.refused,
                "matched": self.matched, "report_count": self.report_count,
                "min_cohort": self.recipe.privacy.min_cohort if self.recipe.privacy else None,
                "epsilon_per_report": self.epsilon_per_report,
                "threshold": round(self.threshold, 3), "oov": round(self.oov, 2),
                "found": [{"ngram": " ".join(g), "count": round(c, 2)}
                          for g, c in self.found],
                "ended": [{"ngram": " ".join(g), "count": round(c, 2)}
                          for g, c in self.ended],
                "seconds": round(self.seconds, 3)}


def decide(recipe: Recipe, counts: Sequence[float], sigma: float, alpha: float,
           min_count: float = 0.0) -> tuple[list[tuple[tuple[str, ...], float]],
                      list[tuple[tuple[str, ...], float]], float]:
    """(found k-grams, leaves found to end a phrase, threshold) of a round; each list
    sorted by decreasing count. See "Deciding a round" in the module docstring."""
    tree = recipe.root
    assert isinstance(tree, PrefixTree)
    z = NormalDist().inv_cdf(1.0 - alpha / max(1, len(counts)))
    threshold = max(z * sigma, min_count)
    found: list[tuple[tuple[str, ...], float]] = []
    ended: list[tuple[tuple[str, ...], float]] = []
    for b in range(1, len(counts)):
        excess = float(counts[b])
        if excess <= threshold:
            continue
        d = tree.decode(b)
        assert d is not None
        leaf, nxt = d
        if nxt is None:
            continue            # an unknown next word: nothing to learn
        if nxt == END:
            ended.append((leaf, excess))
        else:
            found.append((leaf + (nxt,), excess))
    found.sort(key=lambda t: -t[1])
    ended.sort(key=lambda t: -t[1])
    return found, ended, threshold


# ---------------------------------------------------------------------------------------
# Aggregation backends: real DAP Aggregators, or an in-memory sum (tests of the logic)
# ---------------------------------------------------------------------------------------


class Backend:
    """Where a round's reports go: `leader_url`/`helper_url` for the task, `provision`
    the task, `aggregate` the devices' measurements (upload and collect)."""

    leader_url = "http://127.0.0.1:1/"
    helper_url = "http://127.0.0.1:2/"

    async def provision(self, pt: Any) -> None:
        raise NotImplementedError

    async def aggregate(self, pt: Any, measurements: list[Any], settings: Settings
                        ) -> tuple[int, list[float]]:
        """(report count, debiased counts)."""
        raise NotImplementedError

    async def close(self) -> None:
        pass


class LocalBackend(Backend):
    """No Aggregators: the task's DP policy applied in memory (Client noise on each
    measurement, noise on each of the two aggregate shares, debiasing). For tests of the
    discovery logic and the algorithm-only rows of the benchmark."""

    async def provision(self, pt: Any) -> None:
        pass

    async def aggregate(self, pt: Any, measurements: list[Any], settings: Settings
                        ) -> tuple[int, list[float]]:
        from ppm_reference.dap.dp import task_policy

        policy = task_policy(pt.task)
        length = int(policy.length)
        total = [0] * length
        for m in measurements:
            noisy = policy.add_noise_to_measurement(m)
            if isinstance(noisy, int):
                total[noisy] += 1
            else:
                for i, bit in enumerate(noisy):
                    total[i] += int(bit)
        modulus = policy.modulus
        shares = [[x % modulus for x in total], [0] * length]
        policy.precompute_noise(2 * length)
        shares = [policy.add_noise_to_agg_share(s) for s in shares]
        agg = [(a + b) % modulus for a, b in zip(shares[0], shares[1], strict=True)]
        return len(measurements), [float(x) for x in policy.debias_agg_result(
            agg, len(measurements))]


class DapBackend(Backend):
    """A real Leader and Helper: tasks are provisioned through their admin APIs (Helper
    first, `dap.provision.provision`), measurements uploaded through the DAP Client in
    requests of `upload_batch` reports, the result collected by the Collector over a
    time interval that covers the uploads."""

    def __init__(self, leader_url: str, helper_url: str, admin_token: str) -> None:
        from ppm_reference.dap.admin_client import AdminClient
        from ppm_reference.dap.provision import AdminTarget

        self.leader_url, self.helper_url = leader_url, helper_url
        self.leader = AdminTarget("leader", AdminClient(leader_url, admin_token))
        self.helper = AdminTarget("helper", AdminClient(helper_url, admin_token))

    async def provision(self, pt: Any) -> None:
        from ppm_reference.dap.provision import provision

        # The admin client is synchronous; the Aggregators may run on this event loop.
        await asyncio.to_thread(provision, pt, self.helper, self.leader)

    async def aggregate(self, pt: Any, measurements: list[Any], settings: Settings
                        ) -> tuple[int, list[float]]:
        from ppm_reference.dap.client import Client
        from ppm_reference.dap.collector import Collector
        from ppm_reference.dap.common import Duration, Interval, Time

        first = int(time.time())
        async with Client(pt.task) as client:
            result = await client.upload(measurements, batch_size=settings.upload_batch)
        last = int(time.time())
        if result.rejected:
            raise DiscoveryError(f"the Leader rejected {len(result.rejected)} of "
                                 f"{len(measurements)} reports")
        lo, hi = first // TIME_PRECISION, last // TIME_PRECISION
        query = pt.task.profile.flow.query_interval(
            pt.task, Interval(Time(lo), Duration(hi - lo + 1)))
        async with Collector(pt.task, pt.collector_keypair,
                             pt.collector_auth_token) as collector:
            collection = await collector.collect(query, timeout=settings.collect_timeout,
                                                 max_poll_interval=0.25)
        return collection.report_count, [float(x) for x in collection.debiased_result]


class LocalAggregators(DapBackend):
    """A Leader and a Helper started in this process on 127.0.0.1 (free ports, SQLite
    files in a temporary directory, the admin API enabled with a random token), as the
    demo does; `close` stops them."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.runners: list[Any] = []
        self.token = secrets.token_urlsafe(16)

    async def start(self) -> LocalAggregators:
        import socket

        from aiohttp import web

        from ppm_reference.dap.server.app import build_app
        from ppm_reference.dap.server.config import AggregatorConfig

        urls: dict[str, str] = {}
        for role in ("helper", "leader"):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
            config = AggregatorConfig(
                role=role, datastore=str(Path(self.directory) / f"{role}.sqlite"),
                listen_host="127.0.0.1", listen_port=port, sqlite_synchronous="NORMAL",
                worker_interval=0.02, straggler_age=0.2, retry_after=1,
                admin_token=self.token)
            runner = web.AppRunner(build_app(config), access_log=None)
            await runner.setup()
            self.runners.append(runner)
            await web.SockSite(runner, sock).start()
            urls[role] = f"http://127.0.0.1:{port}/"
        super().__init__(urls["leader"], urls["helper"], self.token)
        return self

    async def close(self) -> None:
        for runner in reversed(self.runners):
            await runner.cleanup()
        self.runners.clear()


# ---------------------------------------------------------------------------------------
# The orchestrator
# ---------------------------------------------------------------------------------------


@dataclass
class Discovery:
    settings: Settings
    fleet: Fleet
    rounds: list[RoundResult] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    discovered: list[tuple[str, ...]] = field(default_factory=list)
    privacy: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def relevant(self) -> set[tuple[str, ...]]:
        """The planted n-grams and their contiguous sub-n-grams of two words or more:
        every one of them is held by at least the planted n-gram's share of devices."""
        return {g[i:j] for g in self.fleet.planted
                for i in range(len(g)) for j in range(i + 2, len(g) + 1)}

    @property
    def precision(self) -> float:
        if not self.discovered:
            return 0.0
        relevant = self.relevant
        return sum(1 for g in self.discovered if g in relevant) / len(self.discovered)

    @property
    def recall(self) -> float:
        if not self.fleet.planted:
            return 1.0
        found = {g for r in self.rounds for g, _ in r.found}
        return sum(1 for g in self.fleet.planted if g in found) / len(self.fleet.planted)

    def to_json(self) -> dict[str, Any]:
        shares = self.fleet.share(self.discovered + self.fleet.planted)
        planted = set(self.fleet.planted)
        relevant = self.relevant
        return {
            "ok": True, "mode": self.settings.mode, "devices": self.fleet.spec.devices,
            "settings": {"eps0": self.settings.eps0, "epsilon": self.settings.epsilon,
                         "delta": self.settings.delta, "budget": self.settings.budget,
                         "local_budget": self.settings.local_budget,
                         "alpha": self.settings.alpha, "profile": self.settings.profile},
            "fleet": {"vocabulary": self.fleet.spec.vocabulary, "zipf": self.fleet.spec.zipf,
                      "planted_share": self.fleet.spec.planted_share,
                      "phrases_per_device": self.fleet.spec.phrases_per_device,
                      "known_tokens": self.fleet.spec.known_tokens,
                      "seed": self.fleet.spec.seed},
            "planted": [{"ngram": " ".join(g), "device_share": round(shares[g], 4),
                         "found": g in {x for r in self.rounds for x, _ in r.found}}
                        for g in self.fleet.planted],
            "words": self.words,
            "discovered": [{"ngram": " ".join(g), "planted": g in planted,
                            "relevant": g in relevant,
                            "device_share": round(shares[g], 4)} for g in self.discovered],
            "precision": self.precision, "recall": self.recall,
            "rounds": [r.to_json() for r in self.rounds],
            "privacy": self.privacy, "seconds": round(self.seconds, 3)}


async def discover(fleet: Fleet, settings: Settings, backend: Backend,
                   ledger: str | Path | None = None,
                   status: Callable[[str], None] = lambda _m: None) -> Discovery:
    """Run the rounds (see the module docstring) and score them."""
    from ppm_reference.dap.dp import task_policy
    from ppm_reference.dap.profiles import get_profile
    from ppm_reference.dap.provision import b64, new_task
    from ppm_reference.dp_policy.mechanisms import default_rng

    settings.check()
    t0 = time.monotonic()
    profile = get_profile(settings.profile)
    max_n = settings.max_n or max((len(g) for g in fleet.planted), default=2)
    n_dev = len(fleet.phrases)
    order = list(range(n_dev))
    random.Random(fleet.spec.seed + 1).shuffle(order)
    cohorts = [order[i::max_n] for i in range(max_n)]
    policy = device_policy(settings)
    qclass = query_class()
    rng = default_rng()
    out = Discovery(settings, fleet)

    with tempfile.TemporaryDirectory(prefix="ppm-ngrams-") as tmp:
        path = str(ledger) if ledger is not None else str(Path(tmp) / "ledgers.sqlite")
        accountant = BudgetAccountant(path, durable=False)
        try:
            accountant.install(policy, (f"device-{i}" for i in range(n_dev)))
            tokens = fleet.words[: fleet.spec.known_tokens]
            leaves: list[tuple[str, ...]] = [()]
            for k in range(1, max_n + 1):
                t_round = time.monotonic()
                cohort = cohorts[k - 1]
                m = max(1, int(len(cohort) * settings.min_cohort_fraction))
                privacy = round_privacy(settings, m)
                recipe = round_recipe(k, leaves, tokens, privacy)
                name, params, spec = round_vdaf(settings, recipe.bins)
                if settings.mode == "rappor" and privacy.aggregate_epsilon > policy.epsilon:
                    raise DiscoveryError(
                        f"round {k}: a report of eps0 {settings.eps0} in a cohort of at "
                        f"least {m} costs epsilon {float(privacy.aggregate_epsilon):g}, "
                        f"more than the devices' budget {settings.budget:g}: use more "
                        "devices, a smaller eps0 or a larger budget")
                vdaf = profile.build_vdaf(name, params)
                pt = new_task(vdaf, backend.leader_url, backend.helper_url,
                              min_batch_size=m, time_precision=TIME_PRECISION,
                              dp_policy=spec, profile=profile,
                              task_info=f"ngrams round {k}".encode())
                await backend.provision(pt)
                status(f"round {k}: task {b64(bytes(pt.task.task_id))[:12]}... "
                       f"{name}(length {recipe.bins}), cohort {len(cohort)}")
                # The checks every device makes alike (same recipe, task and OS policy)...
                query, charge = verify(recipe, pt.task, qclass, policy.local_model)
                # ... and each device's own ledger (Checks 1 to 3, atomic per device).
                names = [f"device-{i}" for i in cohort]
                refused = accountant.charge_many(charge, names)
                measurements: list[Any] = []
                matched = 0
                for i, dev in zip(cohort, names, strict=True):
                    if dev in refused:
                        continue
                    store = DataStore({STREAM: {FIELD: fleet.phrases[i]}})
                    answer = encode_answer(recipe, store.read(query), rng)
                    matched += answer.matched
                    measurements.append(answer.measurement)
                reasons = Counter(f"check {e.check}" for e in refused.values())
                if len(measurements) < m:
                    first = next(iter(refused.values()), None)
                    raise DiscoveryError(
                        f"round {k}: only {len(measurements)} of {len(cohort)} devices "
                        f"answered (minimum cohort {m})"
                        + (f"; {len(refused)} refused, e.g. {first}" if first else ""))
                count, debiased = await backend.aggregate(pt, measurements, settings)
                sigma = noise_sigma(task_policy(pt.task), count)
                found, ended, threshold = decide(recipe, debiased, sigma,
                                                        settings.alpha,
                                                        settings.min_share * count)
                out.rounds.append(RoundResult(
                    k, recipe, b64(bytes(pt.task.task_id)), name, spec, len(cohort),
                    len(measurements), dict(reasons), matched, count,
                    float(privacy.aggregate_epsilon), threshold, debiased[0], found, ended,
                    time.monotonic() - t_round))
                status(f"round {k}: {count} reports, found {len(found)} "
                       f"{k}-gram(s) above {threshold:.1f}")
                if not found:
                    break
                if k == 1:
                    out.words = [g[0] for g, _ in found[: settings.max_tokens]]
                    tokens = out.words
                leaves = [g for g, _ in found[: settings.max_prefixes]]
            out.privacy = accountant.fleet_spent(ANALYSIS)
        finally:
            accountant.close()
    grams = [g for r in out.rounds if r.k >= 2 for g, _ in r.found]
    out.discovered = [g for g in grams
                      if not any(len(h) > len(g) and h[: len(g)] == g for h in grams)]
    out.seconds = time.monotonic() - t0
    return out


async def run(fleet_spec: FleetSpec, settings: Settings, *, leader: str | None = None,
              helper: str | None = None, admin_token: str | None = None,
              local: bool = False, ledger: str | Path | None = None,
              status: Callable[[str], None] = lambda _m: None) -> Discovery:
    """Make the fleet and discover: against the Aggregators at `leader`/`helper` (their
    admin APIs under the same base URLs), or a Leader and Helper started here, or (with
    `local`) without Aggregators."""
    fleet = make_fleet(fleet_spec)
    backend: Backend
    with tempfile.TemporaryDirectory(prefix="ppm-ngrams-aggregators-") as tmp:
        if local:
            backend = LocalBackend()
        elif leader or helper:
            if not (leader and helper and admin_token):
                raise DiscoveryError("external Aggregators need --leader, --helper and "
                                     "--admin-token")
            backend = DapBackend(leader, helper, admin_token)
        else:
            backend = await LocalAggregators(tmp).start()
            status(f"leader {backend.leader_url}  helper {backend.helper_url}")
        try:
            return await discover(fleet, settings, backend, ledger, status)
        finally:
            await backend.close()
