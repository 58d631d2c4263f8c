"""The registry of DAP profiles: one package per draft under ``dap/profiles/``.

Engine code (everything in ``dap/`` outside this folder, and the layers above) names no
draft: it gets a :class:`~dap.profiles.base.Profile` from here by name
(:func:`get_profile`) or from a task (``task.profile``) and asks it. See ARCHITECTURE.md
for how to add a draft.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ppm_reference.dap.profiles.base import ClientFlow, Profile, ProfileError
from ppm_reference.dap.profiles.dap09 import DAP_09
from ppm_reference.dap.profiles.dap18 import DAP_18
from ppm_reference.dap.profiles.dap19 import DAP_19

_PROFILES: dict[str, Profile] = {}


def register(profile: Profile) -> Profile:
    """Make ``profile`` known by its name (tests register throwaway profiles)."""
    existing = _PROFILES.get(profile.name)
    if existing is not None and existing is not profile:
        raise ProfileError(f"a different profile {profile.name!r} is already registered")
    _PROFILES[profile.name] = profile
    return profile


def unregister(name: str) -> None:
    _PROFILES.pop(name, None)


for _p in (DAP_19, DAP_18, DAP_09):
    register(_p)

#: The profiles known now, by name (a live read-only view).
PROFILES: Mapping[str, Profile] = MappingProxyType(_PROFILES)
#: The profile of new tasks.
DEFAULT_PROFILE: Profile = DAP_19
#: The drafts this implementation ships, newest first.
SHIPPED: tuple[str, ...] = ("dap-19", "dap-18", "dap-09")


def get_profile(name: str) -> Profile:
    try:
        return _PROFILES[name]
    except KeyError:
        raise ProfileError(f"unknown DAP profile {name!r}; known: {sorted(_PROFILES)}") from None


__all__ = ["ClientFlow", "DEFAULT_PROFILE", "PROFILES", "Profile", "ProfileError", "SHIPPED",
           "get_profile", "register", "unregister"]
