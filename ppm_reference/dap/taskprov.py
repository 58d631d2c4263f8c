"""In-band task provisioning (draft-ietf-ppm-dap-taskprov), what is not the draft's
text (``Profile.taskprov``) nor the server's hook (``dap.server.taskprov``):

* the ``DAP-Taskprov`` advertisement a request for a task carries (Section 3.2), for the
  Client, the Collector and the Leader alike (:func:`advertisement_headers`). A task is
  advertised when its profile has taskprov (dap-19) and its ID is the one derived from
  its configuration (Section 3.3), which no randomly drawn task ID is: the task files of
  ``ppm task create --taskprov`` need no flag;
* an Aggregator's taskprov peers, the ``taskprov_peers`` entries of its server
  configuration (:class:`TaskprovPeer`; the format is in ``dap.server.taskprov``).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from ppm_reference.dap.common import HpkeConfig
from ppm_reference.dap.profiles import Profile, ProfileError, get_profile


def advertisement_headers(task: Any) -> dict[str, str]:
    """``{"DAP-Taskprov": ":<base64 TaskConfiguration>:"}`` for a taskprov task (a
    ``dap.task.DapTask``), ``{}`` for any other."""
    tp = getattr(task.profile, "taskprov", None)
    if tp is None or not tp.advertises(task):
        return {}
    return {str(tp.header): str(tp.header_value(task.config_bytes()))}


def is_taskprov_task(task: Any) -> bool:
    """Whether requests for ``task`` advertise it."""
    return bool(advertisement_headers(task))



class PeerConfigError(ValueError):
    """A ``taskprov_peers`` entry that cannot be used; the message names the field."""


def _b64(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise PeerConfigError(f"{where} must be a base64url string")
    text = value.rstrip("=")
    try:
        out = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise PeerConfigError(f"{where} is not base64url") from None
    if base64.urlsafe_b64encode(out).rstrip(b"=").decode() != text:
        raise PeerConfigError(f"{where} is not base64url")
    return out


def _token(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or not value.isascii() \
            or not value.isprintable() or " " in value:
        raise PeerConfigError(f"{where} must be a non-empty printable ASCII token")
    return value


@dataclass(frozen=True)
class TaskprovPeer:
    """One peer Aggregator this one runs taskprov tasks with (see the module
    docstring)."""

    peer_role: str
    peer_endpoint: str
    verify_key_init: bytes
    collector_hpke_config: bytes
    aggregator_auth_token: str
    collector_auth_token: str | None
    profile: Profile
    min_batch_size: int = 1
    max_task_lifetime: int | None = None
    own_endpoint: str | None = None

    KEYS = ("peer_role", "peer_endpoint", "own_endpoint", "verify_key_init",
            "collector_hpke_config",
            "aggregator_auth_token", "collector_auth_token", "profile", "min_batch_size",
            "max_task_lifetime")

    @classmethod
    def from_json(cls, data: Any, own_role: str, where: str = "taskprov_peers[]"
                  ) -> TaskprovPeer:
        """An entry of ``taskprov_peers`` for an Aggregator of role ``own_role``."""
        if not isinstance(data, dict):
            raise PeerConfigError(f"{where} must be an object")
        unknown = sorted(set(data) - set(cls.KEYS))
        if unknown:
            raise PeerConfigError(f"{where}: unknown keys {unknown}")
        for key in ("peer_role", "peer_endpoint", "verify_key_init", "collector_hpke_config",
                    "aggregator_auth_token"):
            if data.get(key) is None:
                raise PeerConfigError(f"{where}: missing {key}")
        peer_role = data["peer_role"]
        expected = "helper" if own_role == "leader" else "leader"
        if peer_role != expected:
            raise PeerConfigError(f"{where}.peer_role must be {expected!r} in a {own_role}'s "
                                  f"configuration, got {peer_role!r}")
        endpoint = data["peer_endpoint"]
        own = data.get("own_endpoint")
        for key, value in (("peer_endpoint", endpoint), ("own_endpoint", own)):
            if value is not None and (not isinstance(value, str) or not value.isascii()
                                      or not value):
                raise PeerConfigError(f"{where}.{key} must be an ASCII URL")
        try:
            profile = get_profile(data.get("profile") or "dap-19")
        except ProfileError as exc:
            raise PeerConfigError(f"{where}.profile: {exc}") from None
        tp = profile.taskprov
        if tp is None:
            raise PeerConfigError(f"{where}.profile: {profile.name} tasks have no taskprov "
                                  "(draft-ietf-ppm-dap-taskprov is written for dap-19)")
        init = _b64(data["verify_key_init"], f"{where}.verify_key_init")
        if len(init) != tp.verify_key_init_size:
            raise PeerConfigError(f"{where}.verify_key_init must be {tp.verify_key_init_size} "
                                  f"bytes (taskprov Section 3.4), got {len(init)}")
        hpke = _b64(data["collector_hpke_config"], f"{where}.collector_hpke_config")
        try:
            HpkeConfig.decode(hpke)
        except ValueError as exc:
            raise PeerConfigError(f"{where}.collector_hpke_config is not an HpkeConfig: "
                                  f"{exc}") from None
        collector_token = data.get("collector_auth_token")
        if own_role == "leader":
            if collector_token is None:
                raise PeerConfigError(f"{where}: missing collector_auth_token (a Leader "
                                      "authenticates the Collector)")
            collector_token = _token(collector_token, f"{where}.collector_auth_token")
        elif collector_token is not None:
            raise PeerConfigError(f"{where}: a Helper takes no collector_auth_token")
        min_batch = data.get("min_batch_size", 1)
        lifetime = data.get("max_task_lifetime")
        for key, value in (("min_batch_size", min_batch), ("max_task_lifetime", lifetime)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise PeerConfigError(f"{where}.{key} must be a positive integer")
        return cls(peer_role=peer_role, peer_endpoint=endpoint, verify_key_init=init,
                   collector_hpke_config=hpke,
                   aggregator_auth_token=_token(data["aggregator_auth_token"],
                                                f"{where}.aggregator_auth_token"),
                   collector_auth_token=collector_token, profile=profile,
                   min_batch_size=min_batch, max_task_lifetime=lifetime, own_endpoint=own)


def parse_peers(entries: Any, own_role: str) -> tuple[TaskprovPeer, ...]:
    """Every ``taskprov_peers`` entry, checked; raises :class:`PeerConfigError`."""
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise PeerConfigError("taskprov_peers must be a list")
    peers = tuple(TaskprovPeer.from_json(e, own_role, f"taskprov_peers[{i}]")
                  for i, e in enumerate(entries))
    seen = set()
    for peer in peers:
        key = (peer.profile.name, peer.peer_endpoint)
        if key in seen:
            raise PeerConfigError(f"taskprov_peers: {peer.peer_endpoint} is listed twice")
        seen.add(key)
    return peers


__all__ = ["PeerConfigError", "TaskprovPeer", "advertisement_headers", "is_taskprov_task",
           "parse_peers"]
