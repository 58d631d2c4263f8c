"""In-band task provisioning in the Leader and the Helper (draft-ietf-ppm-dap-taskprov,
editors' copy of 2026-07-07; the draft's own text is ``profile.taskprov``, here only
what an Aggregator does with it).

**Peers.** Long-lived assets are exchanged out of band (Section 3): an Aggregator takes
part in taskprov only with the peers its configuration names, under ``taskprov_peers``::

    "taskprov_peers": [{
      "peer_role": "helper",                    # the other Aggregator's role
      "peer_endpoint": "https://helper.example/",   # byte for byte as in task configs
      "own_endpoint": "https://leader.example/",    # optional: this Aggregator's own
      "verify_key_init": "<base64url, 32 bytes>",   # Section 3.4, shared by both
      "collector_hpke_config": "<base64url HpkeConfig>",  # the Collector's, for shares
      "aggregator_auth_token": "...",           # the Leader's bearer token to the Helper
      "collector_auth_token": "...",            # Leader only: the Collector's token
      "profile": "dap-19",                      # optional: the DAP draft of its tasks
      "min_batch_size": 10,                     # optional: opt out of smaller batches
      "max_task_lifetime": 2592000              # optional, seconds: opt out of longer
    }]                                          # task_intervals (Section 3.5, MAY)

Who may provision: a task is opted into only if the configuration names a configured
peer as the other Aggregator (the Leader looks up the ``helper_aggregator_endpoint``, the
Helper the ``leader_aggregator_endpoint``) and, when the entry has an ``own_endpoint``,
this Aggregator as itself; and the Helper provisions only for a request that carries that
peer's ``aggregator_auth_token`` (checked before anything is stored). Without
``own_endpoint`` a Client could make the Leader opt into a task naming another Leader,
which the Helper would then refuse.
``ppm task taskprov-init`` writes both Aggregators' entries and the Collector's
credentials.

**Where the hook is.** :func:`middleware` runs before every handler of a
``/tasks/{task-id}/...`` request, where the handlers look their task up. With a
``DAP-Taskprov`` header (Section 3.2) and peers configured it:

1. ignores a header that is not a Byte Sequence holding a ``TaskConfiguration``;
2. answers ``unrecognizedTask`` if the task ID derived from the configuration (Section
   3.3) is not the request's (Sections 3.7.1, 3.8);
3. answers ``invalidTask`` when it opts out (Section 3.5): the configuration names no
   configured peer, the task has ended, its batch mode, VDAF or an extension is not
   implemented, it does not fit the peer's ``min_batch_size`` or ``max_task_lifetime``,
   its DP policy does not fit its VDAF, or an existing task with that ID has another
   configuration;
4. otherwise stores the task (once; Operational Considerations: an Aggregator that opted
   in does not opt out later) with the verification key derived from the peer's
   ``verify_key_init`` (Section 3.4), and lets the handler run as for any task.

The Leader opts in on uploads (Section 3.7.1) and the Helper on any request of the
Leader's (Section 3.8: every aggregation job step and aggregate share request carries
the header). A Collector's request advertises the task too, but the Leader does not opt
in from it: "the Leader would need to abort the collect request with unrecognizedTask"
(Section 3.7.3); the advertisement is still checked against the stored task.

A Leader advertises its taskprov tasks in every request to the Helper
(``dap.server.leader``), as Clients and Collectors do (``dap.client``,
``dap.collector``), all through ``dap.taskprov.advertisement_headers``: a task is a
taskprov task when its ID is the one derived from its configuration.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from aiohttp import web

from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.core.store import TaskRecord
from ppm_reference.dap.core.tasks import AggregatorTask
from ppm_reference.dap.profiles import Profile, get_profile
from ppm_reference.dap.server.common import STATE_KEY, Handler, bearer_token, task_id_param
from ppm_reference.dap.taskprov import PeerConfigError, TaskprovPeer, parse_peers

log = logging.getLogger("ppm.taskprov")


PEERS_KEY: web.AppKey[tuple[TaskprovPeer, ...]] = web.AppKey("taskprov_peers", tuple)


def install(app: web.Application, entries: Any, own_role: str) -> None:
    """Read the configuration's peers into the app (raises
    :class:`dap.taskprov.PeerConfigError`)."""
    app[PEERS_KEY] = parse_peers(entries, own_role)


# ---------------------------------------------------------------------------------------
# The hook: every /tasks/{task-id}/... request
# ---------------------------------------------------------------------------------------


@web.middleware
async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    peers = request.app.get(PEERS_KEY, ())
    if peers and "task_id" in request.match_info and _resource(request) is not None:
        values = request.headers.getall("DAP-Taskprov", [])
        if values:
            advertised(request, peers, values)
    return await handler(request)


def _resource(request: web.Request) -> str | None:
    """The DAP resource after ``tasks/{task-id}/`` (reports, aggregation_jobs, ...) of a
    DAP request, wherever the app is mounted; None for other paths (the admin API)."""
    parts = request.path.split("/")
    if "internal" in parts or "tasks" not in parts:
        return None
    i = parts.index("tasks")
    return parts[i + 2] if len(parts) > i + 2 else ""


def _invalid(task_id: bytes, detail: str) -> DapProblem:
    # AMBIGUITY: the draft names the error type (Section 2) but no HTTP status; 400, as
    # for DAP's other errors about the request's content. An advertisement naming no
    # configured peer could be read as "not supported" (unrecognizedTask); we answer
    # invalidTask: this Aggregator supports taskprov and opts out (Section 3.5, "deemed
    # insufficient for privacy": no trusted peer vouches for the task).
    return DapProblem("invalidTask", detail, 400, task_id=task_id)


def advertised(request: web.Request, peers: tuple[TaskprovPeer, ...],
               values: list[str]) -> None:
    """Process a request's task advertisement (see the module docstring)."""
    st = request.app[STATE_KEY]
    own_role = st.config.role
    profiles = {p.profile.name: p.profile for p in peers}
    for profile in profiles.values():
        tp = profile.taskprov
        config = tp.parse_header(values)
        raw = tp.read_configuration(config) if config is not None else None
        if raw is None:
            continue  # not a TaskConfiguration: ignored (Section 3.2)
        task_id = tp.derive_task_id(config)
        if task_id != task_id_param(request):
            raise DapProblem("unrecognizedTask", "the task ID is not the one derived from "
                             "the DAP-Taskprov task configuration", 404,
                             task_id=task_id_param(request))
        endpoint, ours = (raw.helper_aggregator_endpoint, raw.leader_aggregator_endpoint) \
            if own_role == "leader" else \
            (raw.leader_aggregator_endpoint, raw.helper_aggregator_endpoint)
        peer = next((p for p in peers if p.profile is profile
                     and p.peer_endpoint.encode("ascii") == endpoint), None)
        if peer is None:
            raise _invalid(task_id, f"no taskprov peer {endpoint.decode(errors='replace')!r} "
                           f"is configured to provision tasks with this {own_role}")
        if peer.own_endpoint is not None and peer.own_endpoint.encode("ascii") != ours:
            raise _invalid(task_id, f"the task names {ours.decode(errors='replace')!r} as "
                           f"its {own_role}, not this Aggregator ({peer.own_endpoint})")
        if own_role == "helper":
            _authenticate_peer(request, peer, task_id)
        with st.datastore.transaction() as tx:
            existing = tx.get_task(task_id)
            if existing is not None:
                if existing.config != config or existing.profile != profile.name:
                    raise _invalid(task_id, "a task with this ID is configured differently")
                return  # opted in before: never opt out (Operational Considerations)
            if own_role == "leader" and _resource(request) != "reports":
                return  # the Leader opts in on uploads only (Section 3.7.3)
            record = _opt_in(st, peer, profile, config, task_id)
            tx.put_task(record)
        st.tasks.invalidate(task_id)
        log.info("taskprov: opted into task %s from peer %s", task_id.hex(),
                 peer.peer_endpoint)
        return


def _authenticate_peer(request: web.Request, peer: TaskprovPeer, task_id: bytes) -> None:
    """The Helper provisions only for its peer Leader (its bearer token)."""
    token = bearer_token(request)
    if token is None:
        raise DapProblem("unauthorized", "missing bearer token", 401, task_id=task_id,
                         dap_type=False)
    if not hmac.compare_digest(token.encode(), peer.aggregator_auth_token.encode()):
        raise DapProblem("forbidden", "wrong bearer token", 403, task_id=task_id,
                         dap_type=False)


def _opt_in(st: Any, peer: TaskprovPeer, profile: Profile, config: bytes,
            task_id: bytes) -> TaskRecord:
    """The task record of an advertised task this Aggregator opts into, or the
    ``invalidTask`` problem of why it opts out."""
    tp = profile.taskprov
    try:
        task = tp.opt_in(config, profile, st.clock())
    except tp.error as exc:
        raise _invalid(task_id, str(exc)) from None
    if task.min_batch_size < peer.min_batch_size:
        raise _invalid(task_id, f"min_batch_size {task.min_batch_size} is below this "
                       f"Aggregator's minimum {peer.min_batch_size}")
    interval = task.task_interval
    if peer.max_task_lifetime is not None and (
            interval is None
            or int(interval.duration) * int(task.time_precision) > peer.max_task_lifetime):
        lifetime = "unbounded" if interval is None else \
            f"{int(interval.duration) * int(task.time_precision)} s"
        raise _invalid(task_id, f"the task lifetime ({lifetime}) is longer than this "
                       f"Aggregator's maximum {peer.max_task_lifetime} s")
    vdaf = task.vdaf()
    own_role = st.config.role
    record = TaskRecord(
        task_id=task_id, role=own_role, profile=profile.name, config=bytes(config),
        vdaf_verify_key=tp.derive_verify_key(peer.verify_key_init, task_id,
                                             vdaf.VERIFY_KEY_SIZE),
        collector_hpke_config=peer.collector_hpke_config,
        aggregator_auth_token=peer.aggregator_auth_token,
        collector_auth_token=peer.collector_auth_token if own_role == "leader" else None)
    try:  # what TaskCache would refuse later: a DP policy that does not fit the VDAF
        _ = AggregatorTask.from_record(record, get_profile).dp_policy
    except ValueError as exc:
        raise _invalid(task_id, f"cannot configure the task: {exc}") from None
    return record


__all__ = ["PEERS_KEY", "PeerConfigError", "TaskprovPeer", "advertised", "install",
           "middleware", "parse_peers"]
