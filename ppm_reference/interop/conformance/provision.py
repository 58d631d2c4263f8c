"""How the conformance suite gets a task into the implementation under test: the one
module that provisions.

* :class:`AdminProvisioner`: this project's admin API (``POST /internal/tasks``, see
  ``dap.server.admin``) of the target and, against a Leader, of its Helper.
* :class:`InteropProvisioner`: the interop test API (``POST /internal/test/add_task``,
  draft-dcook-ppm-dap-interop-test-design-07 Section 4.3), in the draft-07 dialect
  (the bodies of ``interop.runner``/the profile's ``InteropFields.task_bodies``) or the
  Janus dialect (:func:`interop.runner.add_task_body`, the dialects' one builder).
* :class:`TaskFileProvisioner`: tasks provisioned beforehand, one file per task: against
  a Leader the Collector's task file ``ppm task create`` writes (``collector-task.json``),
  against a Helper the Leader's provisioning JSON (the body of ``POST /internal/tasks``
  with ``role`` "leader": the task, the VDAF verification key, the aggregator token; add
  ``collector_private_key`` to let the aggregate-share checks open the share). Each check
  takes a task of its own from the pool; when none fits, the check is skipped.

Every provisioner gives a :class:`dap.provision.ProvisionedTask` that holds what the
suite's side of the protocol needs (the task, and the secrets of the roles it plays).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import aiohttp

from ppm_reference.dap.common import BatchMode, Duration, HpkeConfig, Interval, Time
from ppm_reference.dap.hpke import HpkeKeypair, generate_keypair
from ppm_reference.dap.profiles import Profile
from ppm_reference.dap.provision import ProvisionedTask, b64, new_task, unb64
from ppm_reference.interop.conformance.catalogue import Skip

#: The Leader named in tasks provisioned into a Helper under test: the suite plays it and
#: is never called back.
SUITE_LEADER_URL = "https://conformance-leader.invalid/"


class ProvisionFailed(Exception):
    """The target (or its peer) refused a task the suite needs."""


@dataclass(frozen=True)
class TaskNeeds:
    """The task a check needs. ``task_window`` (start, end) in seconds puts the task
    interval (DAP-09: the expiration, its end) where a check needs it."""

    batch_mode: str = "time_interval"
    min_batch_size: int = 2
    time_precision: int = 3600
    task_window: tuple[int, int] | None = None

    @property
    def mode(self) -> BatchMode:
        return BatchMode.TIME_INTERVAL if self.batch_mode == "time_interval" \
            else BatchMode.LEADER_SELECTED


def _local_task(profile: Profile, needs: TaskNeeds, leader_url: str, helper_url: str
                ) -> ProvisionedTask:
    vdaf = profile.build_vdaf("Prio3Count", {})
    interval = None
    if needs.task_window is not None:
        start, end = needs.task_window
        tp = needs.time_precision
        interval = Interval(Time(start // tp), Duration((end - start) // tp))
    return new_task(vdaf, leader_url, helper_url, batch_mode=needs.mode,
                    min_batch_size=needs.min_batch_size, time_precision=needs.time_precision,
                    task_interval=interval, profile=profile,
                    max_batch_size=needs.min_batch_size
                    if needs.mode == BatchMode.LEADER_SELECTED else None)


class Provisioner:
    """Makes a task for each check."""

    def __init__(self, profile: Profile, role: str, target: str,
                 helper_url: str | None = None) -> None:
        self.profile = profile
        self.role = role
        self.target = target
        # The Helper of a Leader under test (as the Leader reaches it), or the target.
        self.helper_url = helper_url or (target if role == "helper" else "")

    @property
    def leader_url(self) -> str:
        return self.target if self.role == "leader" else SUITE_LEADER_URL

    async def new_task(self, needs: TaskNeeds) -> ProvisionedTask:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


class AdminProvisioner(Provisioner):
    """Tasks written through this project's admin API (the target's and, against a
    Leader, its Helper's)."""

    def __init__(self, profile: Profile, role: str, target: str, *, admin_url: str,
                 admin_token: str, helper_url: str | None = None,
                 helper_admin_url: str | None = None) -> None:
        super().__init__(profile, role, target, helper_url)
        if role == "leader" and (not helper_url or not helper_admin_url):
            raise ProvisionFailed("against a Leader, --helper-url and --helper-admin are "
                                  "needed with --admin")
        self.admin_url = admin_url
        self.helper_admin_url = helper_admin_url
        self.token = admin_token

    def describe(self) -> str:
        return f"admin API {self.admin_url}"

    async def new_task(self, needs: TaskNeeds) -> ProvisionedTask:
        from ppm_reference.dap.admin_client import AdminClient
        from ppm_reference.dap.provision import AdminTarget, ProvisionError, provision

        pt = _local_task(self.profile, needs, self.leader_url, self.helper_url)
        try:
            if self.role == "leader":
                assert self.helper_admin_url is not None
                helper = AdminTarget("helper", AdminClient(self.helper_admin_url, self.token))
                leader = AdminTarget("leader", AdminClient(self.admin_url, self.token))
                await asyncio.to_thread(provision, pt, helper, leader)
            else:
                await asyncio.to_thread(
                    AdminTarget("helper", AdminClient(self.admin_url, self.token)).put, pt)
        except (ProvisionError, OSError, ValueError) as exc:
            raise ProvisionFailed(f"admin API refused the task: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - AdminError and urllib errors
            raise ProvisionFailed(f"admin API refused the task: {exc}") from None
        return pt


class InteropProvisioner(Provisioner):
    """Tasks added through the interop test API (``add_task``) of the target and, against
    a Leader, of its Helper (``--helper-interop-api``)."""

    def __init__(self, profile: Profile, role: str, target: str, *, api_url: str,
                 dialect: str = "draft07", helper_api_url: str | None = None,
                 helper_url: str | None = None, token: str | None = None) -> None:
        super().__init__(profile, role, target, helper_url)
        if role == "leader" and (not helper_api_url or not helper_url):
            raise ProvisionFailed("against a Leader, --helper-interop-api and --helper-url "
                                  "are needed with --interop-api")
        if dialect not in ("draft07", "janus"):
            raise ProvisionFailed(f"unknown interop dialect {dialect!r}")
        self.api_url = api_url
        self.helper_api_url = helper_api_url
        self.dialect = dialect
        self.token = token

    def describe(self) -> str:
        return f"interop test API {self.api_url} ({self.dialect})"

    def bodies(self, needs: TaskNeeds, task_id: str, verify_key: bytes, leader_token: str,
               collector_token: str, collector_config: HpkeConfig) -> dict[str, Any]:
        """The add_task body for the Leader (``role`` leader, with the Collector's
        token) and for the Helper, in the dialect."""
        tp = needs.time_precision
        task_end = needs.task_window[1] if needs.task_window else \
            (int(time.time()) // tp + 24 * 30) * tp
        mode = 1 if needs.batch_mode == "time_interval" else 2
        max_batch = needs.min_batch_size if mode == 2 else None
        hpke = b64(collector_config.encode())
        vdaf = {"type": "Prio3Count"}
        if self.dialect == "janus":
            start = needs.task_window[0] if needs.task_window else None
            # The one builder of Janus's bodies: interop.runner.add_task_body.
            from ppm_reference.interop.runner import add_task_body

            bodies = {role: add_task_body(
                "janus", role, dap_version=self.profile.name, task_id=task_id,
                leader=self.leader_url, helper=self.helper_url, vdaf=vdaf, batch_mode=mode,
                min_batch_size=needs.min_batch_size, max_batch_size=max_batch,
                time_precision=tp, task_start=start if start is not None else
                (int(time.time()) // tp - 24) * tp, task_end=task_end,
                vdaf_verify_key=b64(verify_key), leader_token=leader_token,
                collector_token=collector_token, collector_hpke_config=hpke)
                for role in ("leader", "helper")}
            if needs.task_window is not None:
                for body in bodies.values():
                    # Janus 0.7's driver sends no expiration, but its binaries take
                    # `task_expiration` (seconds); the window checks need the task's end.
                    body.setdefault("task_expiration", task_end)
            return bodies
        # draft-07: the runner's bodies (interop.runner._task_bodies).
        bodies = self.profile.interop.task_bodies(
            self.profile, task_id=task_id, leader=self.leader_url, helper=self.helper_url,
            vdaf=vdaf, batch_mode=mode, min_batch_size=needs.min_batch_size,
            time_precision=tp, task_end=task_end, collector_token=collector_token)
        aggregator = dict(bodies.aggregator)
        if needs.task_window is not None and self.profile.interop.runner_sends_dap_version:
            # DAP-18/19 tasks have a start (DAP-09's have only an expiration).
            for body in (aggregator,):
                body["task_start"] = needs.task_window[0]
        if max_batch is not None:
            aggregator["max_batch_size"] = max_batch
        aggregator.update(leader_authentication_token=leader_token,
                          vdaf_verify_key=b64(verify_key), collector_hpke_config=hpke)
        return {"leader": {**aggregator, "role": "leader",
                           "collector_authentication_token": collector_token},
                "helper": {**aggregator, "role": "helper"}}

    async def _add(self, session: aiohttp.ClientSession, api: str, body: dict[str, Any]
                   ) -> None:
        url = urljoin(api if api.endswith("/") else api + "/", "internal/test/add_task")
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with session.post(url, json=body, headers=headers) as resp:
            text = await resp.text()
            if resp.status != 200:
                raise ProvisionFailed(f"add_task at {api}: HTTP {resp.status} {text[:200]}")
        try:
            out = json.loads(text)
        except ValueError:
            raise ProvisionFailed(f"add_task at {api}: answer is not JSON") from None
        if not isinstance(out, dict) or out.get("status") != "success":
            raise ProvisionFailed(f"add_task at {api}: {out}")

    async def new_task(self, needs: TaskNeeds) -> ProvisionedTask:
        task_id = secrets.token_bytes(32)
        vdaf = self.profile.build_vdaf("Prio3Count", {})
        verify_key = secrets.token_bytes(vdaf.VERIFY_KEY_SIZE)
        leader_token, collector_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        keypair = generate_keypair(secrets.randbelow(256))
        bodies = self.bodies(needs, b64(task_id), verify_key, leader_token, collector_token,
                             keypair.config)
        # Our side's copy of the task, read from the same body as the target reads it.
        from ppm_reference.interop.fields import interop_of

        fields = interop_of(self.profile.name).task_fields(self.profile, bodies[self.role],
                                                           self.role)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
            if self.role == "leader":
                assert self.helper_api_url is not None
                await self._add(s, self.helper_api_url, bodies["helper"])
            await self._add(s, self.api_url, bodies[self.role])
        return ProvisionedTask(fields.task, verify_key, leader_token, collector_token,
                               keypair, {})


class TaskFileProvisioner(Provisioner):
    """Tasks provisioned beforehand (see the module); each is used by one check."""

    def __init__(self, profile: Profile, role: str, target: str, paths: list[str]) -> None:
        super().__init__(profile, role, target)
        self.pool: list[tuple[str, ProvisionedTask]] = []
        for path in paths:
            self.pool.append((path, self._read(path)))

    def describe(self) -> str:
        return f"{len(self.pool)} task file(s)"

    def _read(self, path: str) -> ProvisionedTask:
        from ppm_reference.dap.provision import task_from_view

        try:
            view = json.loads(Path(path).read_text())
            if not isinstance(view, dict):
                raise ValueError("not a JSON object")
            task = task_from_view(view)
            if task.profile.name != self.profile.name:
                raise ValueError(f"a {task.profile.name} task, not {self.profile.name}")
            keypair = None
            if "collector_private_key" in view:
                keypair = HpkeKeypair(HpkeConfig.decode(unb64(view["collector_hpke_config"])),
                                      unb64(view["collector_private_key"]))
            if self.role == "leader":
                for key in ("collector_auth_token", "collector_private_key"):
                    if key not in view:
                        raise ValueError(f"lacks {key} (is it a collector-task.json?)")
                assert keypair is not None
                return ProvisionedTask(task, b"", "", view["collector_auth_token"], keypair,
                                       {})
            for key in ("vdaf_verify_key", "aggregator_auth_token"):
                if key not in view:
                    raise ValueError(f"lacks {key} (is it a Leader's task JSON?)")
            # Without collector_private_key the share checks that open it are skipped.
            maybe_keypair: Any = keypair
            return ProvisionedTask(task, unb64(view["vdaf_verify_key"]),
                                   view["aggregator_auth_token"], "",
                                   maybe_keypair, dict(view.get("options") or {}))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ProvisionFailed(f"task file {path}: {exc}") from None

    async def new_task(self, needs: TaskNeeds) -> ProvisionedTask:
        if needs.task_window is not None:
            raise Skip("needs a task with a particular task interval (not from task files)")
        for i, (_path, pt) in enumerate(self.pool):
            if pt.task.batch_mode == needs.mode:
                del self.pool[i]
                return pt
        raise Skip(f"no unused {needs.batch_mode} task file left (give more --task-file)")
