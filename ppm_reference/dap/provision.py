"""Task provisioning: one place that makes a task's parameters and secrets for the Leader,
the Helper, the Client and the Collector (DAP-18 leaves distribution out of band).

`new_task(...)` draws the task ID, the VDAF verification key, the bearer tokens and the
Collector's HPKE key pair; `ProvisionedTask` gives each party its view:
`leader_record` / `helper_record` for the Aggregators' datastores (or, as JSON, their
admin API), `client_view()` for Clients, and the Collector's credentials.

`provision(pt, helper, leader)` writes a task to both Aggregators, each an `AdminTarget`
(its admin API, through `dap.admin_client`) or a `DatastoreTarget` (its SQLite datastore).

In-band provisioning (draft-ietf-ppm-dap-taskprov) touches no Aggregator:
`TaskprovPeering.generate(...)` makes the long-lived assets two Aggregators and a Collector
share out of band (the `taskprov_peers` entries of both server configurations and the
Collector's credentials), and `new_taskprov_task(...)` a task whose ID is derived from
its configuration; its Client and Collector advertise it, and the Aggregators opt in.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ppm_reference.dap.common import BatchMode, HpkeConfig, Interval
from ppm_reference.dap.dp import encode_spec
from ppm_reference.dap.hpke import HpkeKeypair, generate_keypair
from ppm_reference.dap.profiles import DEFAULT_PROFILE, Profile, get_profile
from ppm_reference.dap.storage import TaskRecord


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(bytes(data)).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class ProvisionedTask:
    task: Any                       # dap.profiles.dap18.task.Task or dap.profiles.dap09.task.Task09
    vdaf_verify_key: bytes
    aggregator_auth_token: str
    collector_auth_token: str
    collector_keypair: HpkeKeypair
    options: dict[str, Any]

    def record(self, role: str) -> TaskRecord:
        return TaskRecord(
            task_id=bytes(self.task.task_id), role=role, profile=self.task.profile.name,
            config=self.task.config_bytes(), vdaf_verify_key=self.vdaf_verify_key,
            collector_hpke_config=self.collector_keypair.config.encode(),
            aggregator_auth_token=self.aggregator_auth_token,
            collector_auth_token=self.collector_auth_token if role == "leader" else None,
            options=json.dumps(self.options, sort_keys=True))

    @property
    def leader_record(self) -> TaskRecord:
        return self.record("leader")

    @property
    def helper_record(self) -> TaskRecord:
        return self.record("helper")

    def admin_json(self, role: str) -> dict[str, Any]:
        """The body of `POST /internal/tasks` for this aggregator."""
        rec = self.record(role)
        out: dict[str, Any] = {
            "task_id": b64(rec.task_id), "role": role, "profile": rec.profile,
            "config": b64(rec.config), "vdaf_verify_key": b64(rec.vdaf_verify_key),
            "collector_hpke_config": b64(rec.collector_hpke_config),
            "aggregator_auth_token": rec.aggregator_auth_token, "options": self.options}
        if rec.collector_auth_token:
            out["collector_auth_token"] = rec.collector_auth_token
        return out

    def client_view(self) -> dict[str, Any]:
        """What a Client needs: the task ID and configuration (no secrets)."""
        return {"task_id": b64(self.task.task_id), "profile": self.task.profile.name,
                "config": b64(self.task.config_bytes())}

    def collector_view(self) -> dict[str, Any]:
        """What the Collector needs: the task, its HPKE key pair and its bearer token."""
        return {**self.client_view(),
                "collector_hpke_config": b64(self.collector_keypair.config.encode()),
                "collector_private_key": b64(self.collector_keypair.private_key),
                "collector_auth_token": self.collector_auth_token}


def new_task(vdaf: Any, leader_url: str, helper_url: str, *,
             batch_mode: BatchMode = BatchMode.TIME_INTERVAL, min_batch_size: int = 10,
             time_precision: int = 60, task_interval: Interval | None = None,
             dp_policy: dict[str, Any] | None = None, max_batch_size: int | None = None,
             task_info: bytes = b"ppm-reference task", profile: Profile = DEFAULT_PROFILE,
             task_id: bytes | None = None) -> ProvisionedTask:
    """A new task of `profile` (DAP-18 `Task` or DAP-09 `Task09`) and its secrets.

    For a DAP-09 task, `batch_mode` picks the query type (leader-selected: fixed_size),
    `max_batch_size` is the fixed_size task parameter, `task_interval` gives the
    `task_expiration` (its end; DAP-09 tasks have no start) and `task_info` is unused."""
    dp = encode_spec(dp_policy) if dp_policy else None
    task_id = task_id or secrets.token_bytes(32)
    task, options = profile.task_cls.provision(
        vdaf, profile=profile, task_id=task_id, task_info=task_info, leader_url=leader_url,
        helper_url=helper_url, time_precision=time_precision, min_batch_size=min_batch_size,
        batch_mode=batch_mode, task_interval=task_interval, max_batch_size=max_batch_size,
        dp_policy=dp)
    return ProvisionedTask(task, secrets.token_bytes(vdaf.VERIFY_KEY_SIZE),
                           secrets.token_urlsafe(24), secrets.token_urlsafe(24),
                           generate_keypair(secrets.randbelow(256)), options)


@dataclass
class TaskprovPeering:
    """The out-of-band assets of taskprov between one Leader and one Helper (draft-ietf-
    ppm-dap-taskprov Section 3: the Collector's HPKE configuration, the request
    authentication tokens, and the `verify_key_init` of Section 3.4)."""

    leader_url: str
    helper_url: str
    verify_key_init: bytes
    aggregator_auth_token: str
    collector_auth_token: str
    collector_keypair: HpkeKeypair
    profile: Profile = DEFAULT_PROFILE

    @classmethod
    def generate(cls, leader_url: str, helper_url: str,
                 profile: Profile = DEFAULT_PROFILE) -> TaskprovPeering:
        if profile.taskprov is None:
            raise ValueError(f"{profile.name} tasks have no taskprov (draft-ietf-ppm-dap-"
                             "taskprov is written for dap-19)")
        return cls(leader_url, helper_url,
                   secrets.token_bytes(profile.taskprov.verify_key_init_size),
                   secrets.token_urlsafe(24), secrets.token_urlsafe(24),
                   generate_keypair(secrets.randbelow(256)), profile)

    def peer_entry(self, role: str, **policy: Any) -> dict[str, Any]:
        """The `taskprov_peers` entry of the configuration of the Aggregator of `role`
        (naming the other one), with optional `min_batch_size` / `max_task_lifetime`."""
        leader = role == "leader"
        entry: dict[str, Any] = {
            "peer_role": "helper" if leader else "leader",
            "peer_endpoint": self.helper_url if leader else self.leader_url,
            "own_endpoint": self.leader_url if leader else self.helper_url,
            "verify_key_init": b64(self.verify_key_init),
            "collector_hpke_config": b64(self.collector_keypair.config.encode()),
            "aggregator_auth_token": self.aggregator_auth_token,
            "profile": self.profile.name, **policy}
        if leader:
            entry["collector_auth_token"] = self.collector_auth_token
        return entry

    def collector_credentials(self) -> dict[str, Any]:
        """What the Collector keeps (secret): its HPKE key pair and bearer token."""
        return {"leader_url": self.leader_url, "helper_url": self.helper_url,
                "profile": self.profile.name,
                "collector_hpke_config": b64(self.collector_keypair.config.encode()),
                "collector_private_key": b64(self.collector_keypair.private_key),
                "collector_auth_token": self.collector_auth_token}


def new_taskprov_task(vdaf: Any, leader_url: str, helper_url: str, *,
                      collector_keypair: HpkeKeypair, collector_auth_token: str,
                      batch_mode: BatchMode = BatchMode.TIME_INTERVAL,
                      min_batch_size: int = 10, time_precision: int = 60,
                      task_interval: Interval | None = None,
                      dp_policy: dict[str, Any] | None = None, task_info: bytes | None = None,
                      profile: Profile = DEFAULT_PROFILE) -> ProvisionedTask:
    """A task for in-band provisioning: its ID is derived from its TaskConfiguration
    (draft-ietf-ppm-dap-taskprov Section 3.3), and the Collector's key pair and token are
    the long-lived ones of the peering. `task_info` defaults to 16 random bytes (hex)
    after "ppm-reference taskprov ", as the draft's Security Considerations suggest
    against task enumeration. No verification key: the Aggregators derive it."""
    if profile.taskprov is None:
        raise ValueError(f"{profile.name} tasks have no taskprov (draft-ietf-ppm-dap-taskprov "
                         "is written for dap-19)")
    if task_info is None:
        task_info = b"ppm-reference taskprov " + secrets.token_hex(16).encode()
    dp = encode_spec(dp_policy) if dp_policy else None
    params: dict[str, Any] = dict(
        profile=profile, task_info=task_info, leader_url=leader_url, helper_url=helper_url,
        time_precision=time_precision, min_batch_size=min_batch_size, batch_mode=batch_mode,
        task_interval=task_interval, max_batch_size=None, dp_policy=dp)
    draft, _ = profile.task_cls.provision(vdaf, task_id=bytes(32), **params)
    task_id = profile.taskprov.derive_task_id(draft.config_bytes())
    task, options = profile.task_cls.provision(vdaf, task_id=task_id, **params)
    return ProvisionedTask(task, b"", "", collector_auth_token, collector_keypair, options)


def task_from_view(view: dict[str, Any]) -> Any:
    """A task of its profile from `client_view()` / `collector_view()` JSON (which names
    the profile: a view without one is refused rather than read as some draft)."""
    if "profile" not in view:
        raise ValueError("the task file names no profile")
    profile = get_profile(view["profile"])
    return profile.task_from_config_bytes(unb64(view["task_id"]), unb64(view["config"]))


def collector_keypair_from_view(view: dict[str, Any]) -> HpkeKeypair:
    return HpkeKeypair(HpkeConfig.decode(unb64(view["collector_hpke_config"])),
                       unb64(view["collector_private_key"]))


# ---------------------------------------------------------------------------------------
# Writing a task into the Aggregators
# ---------------------------------------------------------------------------------------


class ProvisionError(Exception):
    """A task could not be written to an Aggregator."""


class TaskRefused(ProvisionError):
    """The Aggregator would refuse the task (the checks its admin API makes)."""


def aggregator_url(config: Any) -> str:
    """The DAP endpoint of the aggregator an `AggregatorConfig` describes, as seen from
    this host (a wildcard listen address becomes 127.0.0.1; https with a TLS
    certificate)."""
    host = config.listen_host
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    scheme = "https" if getattr(config, "tls_cert", None) else "http"
    return f"{scheme}://{host}:{config.listen_port}/"


class Target:
    """Where one Aggregator's copy of a task goes."""

    role: str

    @property
    def url(self) -> str:
        """The aggregator's DAP endpoint as seen by Clients and its peer (default)."""
        raise NotImplementedError

    @property
    def where(self) -> str:
        """How the task gets there, for people."""
        raise NotImplementedError

    def put(self, pt: ProvisionedTask) -> None:
        raise NotImplementedError

    def remove(self, pt: ProvisionedTask) -> None:
        raise NotImplementedError


class AdminTarget(Target):
    """An Aggregator provisioned through its admin API (`POST /internal/tasks`)."""

    def __init__(self, role: str, client: Any) -> None:
        self.role = role
        self.client = client        # dap.admin_client.AdminClient

    @property
    def url(self) -> str:
        return str(self.client.base)

    @property
    def where(self) -> str:
        return f"admin API {self.client.base}"

    def put(self, pt: ProvisionedTask) -> None:
        self.client.put_task(pt.admin_json(self.role))

    def remove(self, pt: ProvisionedTask) -> None:
        self.client.delete_task(b64(bytes(pt.task.task_id)))


class DatastoreTarget(Target):
    """An Aggregator provisioned by writing into its datastore (SQLite or PostgreSQL; it
    may be running: it reads tasks from the datastore on first use)."""

    def __init__(self, role: str, config: Any) -> None:
        self.role = role
        self.config = config        # dap.server.config.AggregatorConfig

    @property
    def url(self) -> str:
        return aggregator_url(self.config)

    @property
    def where(self) -> str:
        from ppm_reference.dap.storage import redact_url

        return f"datastore {redact_url(self.config.datastore)}"

    def _open(self) -> Any:
        from ppm_reference.dap.storage import open_datastore

        return open_datastore(self.config.datastore,
                              sqlite_synchronous=self.config.sqlite_synchronous)

    def put(self, pt: ProvisionedTask) -> None:
        from ppm_reference.dap.core.errors import DapProblem
        from ppm_reference.dap.server.admin import task_record_from_json
        from ppm_reference.dap.storage import redact_url

        try:  # the checks the admin API makes, the DP policy included
            record = task_record_from_json(pt.admin_json(self.role),
                                           self.config.min_batch_size_floor)
        except DapProblem as exc:
            raise TaskRefused(f"the {self.role} would refuse the task: {exc.detail}") from None
        try:
            ds = self._open()
        except Exception as exc:  # noqa: BLE001 - sqlite3 errors have no common base here
            raise ProvisionError(f"cannot open the {self.role} datastore "
                                 f"{redact_url(self.config.datastore)}: {exc}") from None
        try:
            with ds.transaction() as tx:
                existing = tx.get_task(record.task_id)
                if existing is not None and existing != record:
                    raise ProvisionError(f"the {self.role} datastore has a different task "
                                         "with this ID")
                tx.put_task(record)
        finally:
            ds.close()

    def remove(self, pt: ProvisionedTask) -> None:
        ds = self._open()
        try:
            with ds.transaction() as tx:
                tx.delete_task(bytes(pt.task.task_id))
        finally:
            ds.close()


def provision(pt: ProvisionedTask, helper: Target, leader: Target,
              warn: Callable[[str], None] = lambda _message: None) -> None:
    """Write the task to the Helper, then to the Leader, so that the Leader never runs a
    task its Helper lacks. If the Leader fails, the task is removed from the Helper again
    (best effort: a failure to remove is passed to `warn`) and the error propagates."""
    helper.put(pt)
    try:
        leader.put(pt)
    except BaseException:
        try:
            helper.remove(pt)
        except Exception as exc:  # noqa: BLE001 - report, but the first error matters
            warn(f"could not remove the task from the {helper.role}: {exc}")
        raise
