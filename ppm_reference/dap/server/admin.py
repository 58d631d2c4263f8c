"""The admin API of an aggregator, under `/internal/`, authenticated with the
configuration's `admin_token` (absent: the API is disabled).

    GET    /internal/health                       liveness
    POST   /internal/tasks                        provision a task (JSON, see TaskSpec)
    GET    /internal/tasks                        list task IDs
    GET    /internal/tasks/{task_id}              a task's counters (dap/server/status.py)
    DELETE /internal/tasks/{task_id}              remove a task
    GET    /internal/hpke_keys                    list keys (id, state, config)
    POST   /internal/hpke_keys                    add a key {"state": "pending", "kem": ...}
    PUT    /internal/hpke_keys/{config_id}        change state {"state": "active"}
    DELETE /internal/hpke_keys/{config_id}        delete a key (not the only active
                                                  one, unless ?force=true)

HPKE key rotation: add a key as `pending` (it decrypts, but is not advertised), make it
`active` once every replica has it (advertised first), then mark the old key `expired`
(no longer advertised, still decrypts for clients with a cached configuration, for at
least twice `hpke_cache_max_age`), and finally delete it.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from aiohttp import web

from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.core.tasks import (
    HPKE_STATES,
    MIN_BATCH_SIZE_FLOOR,
    add_hpke_key,
    validate_task,
)
from ppm_reference.dap.hpke import Aead, Kdf, Kem
from ppm_reference.dap.profiles import PROFILES, get_profile
from ppm_reference.dap.server.common import b64url, state
from ppm_reference.dap.server.serving import read_limited
from ppm_reference.dap.storage import HpkeKeyState, StorageError, TaskRecord


def _check_admin(request: web.Request) -> None:
    token = state(request).config.admin_token
    if not token:
        raise DapProblem("notFound", "admin API disabled", 404, dap_type=False)
    got = request.headers.get("Authorization", "")
    if not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
        raise DapProblem("forbidden", "admin token required", 403, dap_type=False)


async def _json(request: web.Request) -> dict[str, Any]:
    config = state(request).config
    raw = await read_limited(request, config.max_admin_bytes, config.body_timeout)
    try:
        data = json.loads(raw)
    except ValueError:
        raise DapProblem("badRequest", "body is not JSON", 400, dap_type=False) from None
    if not isinstance(data, dict):
        raise DapProblem("badRequest", "body must be a JSON object", 400, dap_type=False)
    return data


def task_record_from_json(data: dict[str, Any],
                          min_batch_size_floor: int = MIN_BATCH_SIZE_FLOOR) -> TaskRecord:
    """A TaskRecord from the provisioning JSON (binary values in unpadded base64url):
    task_id, role, profile, config (encoded TaskConfiguration), vdaf_verify_key,
    collector_hpke_config (encoded HpkeConfig), aggregator_auth_token,
    collector_auth_token (Leader), options (object: see `dap.core.tasks.TaskOptions`).
    The task is checked as the Aggregator would run it (`dap.core.tasks.validate_task`:
    option types and ranges, batch sizes against `min_batch_size_floor`, the VDAF's size,
    the DP policy); any problem is a 400 problem document naming it."""
    import base64

    def b(key: str) -> bytes:
        value = data.get(key)
        if not isinstance(value, str):
            raise DapProblem("badRequest", f"missing {key}", 400, dap_type=False)
        try:
            return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        except ValueError:
            raise DapProblem("badRequest", f"{key} is not base64url", 400,
                             dap_type=False) from None

    role = data.get("role")
    if role not in ("leader", "helper"):
        raise DapProblem("badRequest", "role must be leader or helper", 400, dap_type=False)
    token = data.get("aggregator_auth_token")
    if not isinstance(token, str) or not token:
        raise DapProblem("badRequest", "missing aggregator_auth_token", 400, dap_type=False)
    profile = data.get("profile")
    if not isinstance(profile, str) or profile not in PROFILES:
        raise DapProblem("badRequest", f"profile must be one of {sorted(PROFILES)}", 400,
                         dap_type=False)
    options = data.get("options")
    if options is not None and not isinstance(options, dict):
        raise DapProblem("badRequest", "options must be a JSON object", 400, dap_type=False)
    collector_token = data.get("collector_auth_token")
    if collector_token is not None and not isinstance(collector_token, str):
        raise DapProblem("badRequest", "collector_auth_token must be a string", 400,
                         dap_type=False)
    record = TaskRecord(b("task_id"), role, profile, b("config"),
                        b("vdaf_verify_key"), b("collector_hpke_config"), token,
                        collector_token, json.dumps(options or {}, sort_keys=True))
    try:
        # An aggregator refuses a task it cannot run, its DP policy included.
        _ = validate_task(record, get_profile, min_batch_size_floor).dp_policy
    except DapProblem:
        raise
    except Exception as exc:  # noqa: BLE001 - any reason to refuse is the client's: 400
        # (e.g. epsilon 0 in the DP policy, a VDAF too large to build): never a 500.
        raise DapProblem("badRequest", f"task refused: {_reason(exc)}", 400,
                         dap_type=False) from None
    if role == "leader" and not record.collector_auth_token:
        raise DapProblem("badRequest", "a Leader task needs collector_auth_token", 400,
                         dap_type=False)
    return record


def _reason(exc: BaseException) -> str:
    """One line about a refused value (the exception's message, bounded)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def _config_id(request: web.Request) -> int:
    """The `{config_id}` of a key resource: an HPKE config ID, 0 to 255 (400 otherwise)."""
    raw = request.match_info["config_id"]
    if not raw.isdigit() or not 0 <= int(raw) <= 255:
        raise DapProblem("badRequest", "config_id must be an integer from 0 to 255", 400,
                         dap_type=False)
    return int(raw)


def _task_id(request: web.Request) -> bytes:
    import base64
    import binascii

    raw = request.match_info["task_id"]
    try:
        task_id = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
    except (ValueError, binascii.Error):
        task_id = b""
    if len(task_id) != 32:
        raise DapProblem("badRequest", "task_id must be 32 bytes in base64url", 400,
                         dap_type=False)
    return task_id


async def health(request: web.Request) -> web.StreamResponse:
    return web.json_response({"status": "ok", "role": state(request).config.role})


async def post_task(request: web.Request) -> web.StreamResponse:
    _check_admin(request)
    st = state(request)
    record = task_record_from_json(await _json(request), st.config.min_batch_size_floor)
    with st.datastore.transaction() as tx:
        existing = tx.get_task(record.task_id)
        if existing is not None and existing != record:
            raise DapProblem("conflict", "a different task with this ID exists", 409,
                             dap_type=False)
        tx.put_task(record)
    st.tasks.invalidate(record.task_id)
    return web.json_response({"task_id": b64url(record.task_id)}, status=201)


async def list_tasks(request: web.Request) -> web.StreamResponse:
    _check_admin(request)
    st = state(request)
    with st.datastore.transaction() as tx:
        tasks = tx.list_tasks()
    return web.json_response([{"task_id": b64url(t.task_id), "role": t.role,
                               "profile": t.profile} for t in tasks])


async def get_task(request: web.Request) -> web.StreamResponse:
    """A task and its counters: reports received, pending, aggregated and failed by
    reason; jobs by state; batches ready and collected (`dap.server.status`)."""
    from ppm_reference.dap.common import Role
    from ppm_reference.dap.server.status import task_status

    _check_admin(request)
    task_id = _task_id(request)
    st = state(request)
    with st.datastore.transaction() as tx:
        record = tx.get_task(task_id)
        if record is None:
            raise DapProblem("notFound", "no such task", 404, dap_type=False)
        try:
            task = st.tasks.get(tx, task_id, Role.LEADER if record.role == "leader"
                                else Role.HELPER)
        except (DapProblem, ValueError):
            task = None
        status = task_status(tx, record, task)
    from ppm_reference.dap.server.metrics import rejections_of

    if status.get("counters") is not None:
        status["counters"]["reports"]["rejected_at_upload"] = rejections_of(request.app,
                                                                           task_id)
    return web.json_response(status)


async def delete_task(request: web.Request) -> web.StreamResponse:
    _check_admin(request)
    task_id = _task_id(request)
    st = state(request)
    with st.datastore.transaction() as tx:
        tx.delete_task(task_id)
    st.tasks.invalidate(task_id)
    return web.Response(status=200)


async def list_keys(request: web.Request) -> web.StreamResponse:
    _check_admin(request)
    st = state(request)
    with st.datastore.transaction() as tx:
        keys = tx.list_hpke_keys()
    return web.json_response([{"config_id": k.config_id, "state": k.state,
                               "config": b64url(k.config)} for k in keys])


async def post_key(request: web.Request) -> web.StreamResponse:
    _check_admin(request)
    data = await _json(request)
    suite: dict[str, Any] = {}
    try:
        if "kem" in data:
            suite["kem"] = Kem(int(data["kem"]))
        if "kdf" in data:
            suite["kdf"] = Kdf(int(data["kdf"]))
        if "aead" in data:
            suite["aead"] = Aead(int(data["aead"]))
    except (ValueError, TypeError):
        raise DapProblem("badRequest", "unsupported HPKE algorithm", 400, dap_type=False) from None
    config_id = data.get("config_id")
    if config_id is not None and (not isinstance(config_id, int) or isinstance(config_id, bool)
                                  or not 0 <= config_id <= 255):
        raise DapProblem("badRequest", "config_id must be an integer from 0 to 255", 400,
                         dap_type=False)
    st = state(request)
    with st.datastore.transaction() as tx:
        try:
            record = add_hpke_key(tx, data.get("state", HpkeKeyState.PENDING), config_id,
                                  rng=st.rng, **suite)
        except StorageError as exc:
            raise DapProblem("conflict", _reason(exc), 409, dap_type=False) from None
        except (ValueError, TypeError) as exc:
            raise DapProblem("badRequest", _reason(exc), 400, dap_type=False) from None
    st.invalidate_keyring()
    return web.json_response({"config_id": record.config_id, "state": record.state,
                              "config": b64url(record.config)}, status=201)


async def put_key(request: web.Request) -> web.StreamResponse:
    _check_admin(request)
    data = await _json(request)
    new_state = data.get("state")
    if new_state not in HPKE_STATES:
        raise DapProblem("badRequest", f"state must be one of {HPKE_STATES}", 400,
                         dap_type=False)
    st = state(request)
    config_id = _config_id(request)
    with st.datastore.transaction() as tx:
        if new_state != HpkeKeyState.ACTIVE:
            _keep_an_active_key(tx, config_id, request)
        try:
            tx.set_hpke_key_state(config_id, HpkeKeyState(new_state))
        except StorageError:
            raise DapProblem("notFound", f"no HPKE key with config id {config_id}", 404,
                             dap_type=False) from None
    st.invalidate_keyring()
    return web.Response(status=200)


async def delete_key(request: web.Request) -> web.StreamResponse:
    _check_admin(request)
    st = state(request)
    config_id = _config_id(request)
    with st.datastore.transaction() as tx:
        _keep_an_active_key(tx, config_id, request)
        tx.delete_hpke_key(config_id)
    st.invalidate_keyring()
    return web.Response(status=200)


def _keep_an_active_key(tx: Any, config_id: int, request: web.Request) -> None:
    """Refuse (409) to delete or retire the only active HPKE key: the Aggregator would
    advertise no configuration and every Client upload would fail. `?force=true`
    overrides."""
    if request.query.get("force", "").lower() in ("1", "true", "yes"):
        return
    active = [k.config_id for k in tx.list_hpke_keys() if k.state == HpkeKeyState.ACTIVE]
    if active == [config_id]:
        raise DapProblem("conflict", f"HPKE key {config_id} is the only active key: "
                         "without it Clients cannot upload; add and activate another key "
                         "first (or add ?force=true)", 409, dap_type=False)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/internal/health", health)
    app.router.add_post("/internal/tasks", post_task)
    app.router.add_get("/internal/tasks", list_tasks)
    app.router.add_get("/internal/tasks/{task_id}", get_task)
    app.router.add_delete("/internal/tasks/{task_id}", delete_task)
    app.router.add_get("/internal/hpke_keys", list_keys)
    app.router.add_post("/internal/hpke_keys", post_key)
    app.router.add_put("/internal/hpke_keys/{config_id}", put_key)
    app.router.add_delete("/internal/hpke_keys/{config_id}", delete_key)
