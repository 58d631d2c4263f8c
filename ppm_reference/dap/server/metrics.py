"""`GET /metrics`: the Aggregator's metrics in the Prometheus text exposition format
(version 0.0.4), and the access log.

Served when the admin API is (an `admin_token` is configured) and authenticated like it
(`Authorization: Bearer TOKEN`; Prometheus: `authorization: {credentials: TOKEN}`):
the per-task counts tell when reports arrive.

Per process (this process's requests since it started):

    ppm_http_requests_total{route,method,status}        counter
    ppm_http_request_duration_seconds{route}            histogram
    ppm_upload_rejections_total{task,reason}            counter: reports refused at upload

From the datastore at each scrape (the same for every process of an Aggregator):

    ppm_task_reports{task,state}                        gauge: new, in_job, aggregated, failed
    ppm_task_reports_failed{task,reason}                gauge: failed reports by reason
    ppm_task_batches_ready{task}                        gauge: buckets >= min_batch_size
    ppm_task_reports_uncollected{task}                  gauge: aggregated, not collected
    ppm_aggregation_jobs{state}, ppm_collection_jobs{state}   gauges (queue depths)
    ppm_queue_depth{queue}                              reports waiting for a job, active
                                                        aggregation jobs, pending collections

Hand-written rather than prometheus-client: the datastore gauges are computed at scrape
time (a custom collector either way), the format is a few lines of text, and a
dependency's process-global registry would need its multiprocess mode once an Aggregator
runs several processes; here each process answers for its own requests and the shared
datastore. Routes are aiohttp's canonical resources (`/tasks/{task_id}/reports`), so the
label sets stay small whatever the task IDs.
"""

from __future__ import annotations

import hmac
import logging
import time
from bisect import bisect_left
from collections import defaultdict
from typing import Any

from aiohttp import web

from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.server.common import CONFIG_KEY, STATE_KEY, Handler, b64url

log = logging.getLogger("ppm.access")

# Seconds; the histogram's upper bounds.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# At most this many tasks get per-task series (the newest by ID order otherwise).
MAX_TASKS = 500


class Metrics:
    """This process's request counters and latency histograms."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.histograms: dict[str, list[int]] = {}
        self.sums: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        # (task ID base64url, reason) -> reports refused at upload by this process.
        self.rejections: dict[tuple[str, str], int] = defaultdict(int)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests[(route, method, status)] += 1
        # Per route, the requests of each bucket alone (the last: above every bound),
        # added up into the cumulative buckets by `exposition`.
        hist = self.histograms.get(route)
        if hist is None:
            hist = self.histograms[route] = [0] * (len(BUCKETS) + 1)
        hist[bisect_left(BUCKETS, seconds)] += 1  # the first bound >= seconds
        self.sums[route] += seconds
        self.counts[route] += 1


METRICS_KEY = web.AppKey("ppm_metrics", Metrics)


def count_rejections(app: web.Application, task: Any, errors: list[tuple[bytes, Any]]
                     ) -> None:
    """Count the reports an upload refused, by task and reason (they are not stored, so
    the datastore gauges cannot show them)."""
    metrics = app.get(METRICS_KEY)
    if metrics is None or not errors:
        return
    tid = b64url(bytes(task.task_id))
    for _report_id, error in errors:
        metrics.rejections[(tid, getattr(error, "name", str(error)).lower())] += 1


def rejections_of(app: web.Application, task_id: bytes) -> dict[str, int]:
    """A task's reports refused at upload by this process since it started, by reason."""
    metrics = app.get(METRICS_KEY)
    if metrics is None:
        return {}
    tid = b64url(bytes(task_id))
    return {reason: n for (t, reason), n in sorted(metrics.rejections.items()) if t == tid}


def _route(request: web.Request) -> str:
    info = request.match_info
    resource = info.route.resource if info is not None and info.route is not None else None
    return resource.canonical if resource is not None else "unmatched"


@web.middleware
async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count and time every request; with `access_log`, one log line per request."""
    start = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        seconds = time.perf_counter() - start
        route = _route(request)
        request.app[METRICS_KEY].observe(route, request.method, status, seconds)
        if request.app[CONFIG_KEY].access_log:
            extra: dict[str, Any] = {"method": request.method, "route": route,
                                     "path": request.path, "status": status,
                                     "duration_ms": round(seconds * 1000, 2)}
            if request.app[CONFIG_KEY].log_request_peers:
                extra["peer"] = request.remote
            log.info("%s %s %d %.1f ms", request.method, request.path, status,
                     seconds * 1000, extra=extra)


def _labels(**labels: Any) -> str:
    def esc(v: Any) -> str:
        return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in labels.items()) + "}"


def exposition(metrics: Metrics, datastore_gauges: dict[str, list[tuple[dict[str, Any],
                                                                        float]]]) -> str:
    """The text exposition of the process metrics and the datastore gauges."""
    out = ["# HELP ppm_http_requests_total Requests answered by this process.",
           "# TYPE ppm_http_requests_total counter"]
    for (route, method, status), n in sorted(metrics.requests.items()):
        out.append(f"ppm_http_requests_total{_labels(route=route, method=method, status=status)}"
                   f" {n}")
    out += ["# HELP ppm_http_request_duration_seconds Request latency in this process.",
            "# TYPE ppm_http_request_duration_seconds histogram"]
    for route, hist in sorted(metrics.histograms.items()):
        n = 0
        for bound, alone in zip(BUCKETS, hist, strict=False):
            n += alone
            out.append(f"ppm_http_request_duration_seconds_bucket"
                       f"{_labels(route=route, le=bound)} {n}")
        out.append(f"ppm_http_request_duration_seconds_bucket{_labels(route=route, le='+Inf')}"
                   f" {metrics.counts[route]}")
        out.append(f"ppm_http_request_duration_seconds_sum{_labels(route=route)} "
                   f"{metrics.sums[route]:.6f}")
        out.append(f"ppm_http_request_duration_seconds_count{_labels(route=route)} "
                   f"{metrics.counts[route]}")
    out += ["# HELP ppm_upload_rejections_total Uploaded reports this process refused, by "
            "reason.", "# TYPE ppm_upload_rejections_total counter"]
    for (task, reason), n in sorted(metrics.rejections.items()):
        out.append(f"ppm_upload_rejections_total{_labels(task=task, reason=reason)} {n}")
    for name, series in datastore_gauges.items():
        out += [f"# HELP {name} {GAUGE_HELP.get(name, name)}", f"# TYPE {name} gauge"]
        for labels, value in series:
            out.append(f"{name}{_labels(**labels) if labels else ''} {value:g}")
    return "\n".join(out) + "\n"


GAUGE_HELP = {
    "ppm_task_reports": "Reports stored for a task, by state.",
    "ppm_task_reports_failed": "Reports of a task that failed, by reason.",
    "ppm_task_reports_uncollected": "Aggregated reports of a task not yet collected.",
    "ppm_task_batches_ready": "Batch buckets of a task with at least min_batch_size "
                              "aggregated, uncollected reports.",
    "ppm_aggregation_jobs": "Aggregation jobs, by state.",
    "ppm_collection_jobs": "Collection jobs, by state.",
    "ppm_queue_depth": "Work waiting: reports without a job, active aggregation jobs, "
                       "pending collection jobs.",
}


def datastore_gauges(st: Any) -> dict[str, list[tuple[dict[str, Any], float]]]:
    """The per-task gauges from the datastore (empty when it keeps no counters)."""
    from ppm_reference.dap.common import Role
    from ppm_reference.dap.core.store import AggregationJobState, CollectionJobState, ReportState
    from ppm_reference.dap.server.status import summarize

    gauges: dict[str, list[tuple[dict[str, Any], float]]] = defaultdict(list)
    agg_jobs: dict[str, int] = defaultdict(int)
    coll_jobs: dict[str, int] = defaultdict(int)
    waiting = 0
    with st.datastore.read() as tx:
        counters = getattr(tx, "task_counters", None)
        if counters is None:
            return {}
        for record in tx.list_tasks()[:MAX_TASKS]:
            raw = counters(record.task_id)
            try:
                task = st.tasks.get(tx, record.task_id,
                                    Role.LEADER if record.role == "leader" else Role.HELPER)
                min_batch_size: int | None = int(task.task.min_batch_size)
            except (DapProblem, ValueError):
                min_batch_size = None
            c = summarize(raw, min_batch_size)
            tid = b64url(record.task_id)
            by_state: dict[str, int] = defaultdict(int)
            for state, _error, n in raw["reports"]:
                by_state[state] += n
            for state in ReportState:
                gauges["ppm_task_reports"].append(({"task": tid, "state": state.value},
                                                   by_state.get(state.value, 0)))
            waiting += by_state.get(ReportState.NEW.value, 0)
            for reason, n in sorted(c["reports"]["failed_by_reason"].items()):
                gauges["ppm_task_reports_failed"].append(({"task": tid, "reason": reason}, n))
            gauges["ppm_task_reports_uncollected"].append(
                ({"task": tid}, c["batches"]["aggregated_uncollected"]))
            if "ready" in c["batches"]:
                gauges["ppm_task_batches_ready"].append(({"task": tid},
                                                         c["batches"]["ready"]))
            for state, n in c["aggregation_jobs"].items():
                agg_jobs[state] += n
            for state, n in c["collection_jobs"].items():
                coll_jobs[state] += n
    gauges["ppm_aggregation_jobs"] = [({"state": s}, n) for s, n in sorted(agg_jobs.items())]
    gauges["ppm_collection_jobs"] = [({"state": s}, n) for s, n in sorted(coll_jobs.items())]
    pending = sum(n for s, n in coll_jobs.items()
                  if s in (CollectionJobState.START, CollectionJobState.COLLECTING))
    gauges["ppm_queue_depth"] = [
        ({"queue": "reports_without_job"}, waiting),
        ({"queue": "aggregation_jobs_active"}, agg_jobs.get(AggregationJobState.ACTIVE, 0)),
        ({"queue": "collection_jobs_pending"}, pending)]
    return dict(gauges)


async def get_metrics(request: web.Request) -> web.StreamResponse:
    st = request.app[STATE_KEY]
    token = st.config.admin_token
    if not token:
        raise DapProblem("notFound", "metrics are served with the admin API (admin_token)",
                         404, dap_type=False)
    got = request.headers.get("Authorization", "")
    if not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
        raise DapProblem("forbidden", "admin token required", 403, dap_type=False)
    gauges = await st.offload(lambda: datastore_gauges(st))
    text = exposition(request.app[METRICS_KEY], gauges)
    return web.Response(body=text.encode(), headers={
        "Content-Type": "text/plain; version=0.0.4; charset=utf-8",
        "X-Content-Type-Options": "nosniff"})


def install(app: web.Application) -> None:
    """The middleware's counters and `GET /metrics` (call before the app starts)."""
    app[METRICS_KEY] = Metrics()
    app.router.add_get("/metrics", get_metrics)
