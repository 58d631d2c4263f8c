"""The whole catalogue: the check modules, loaded (they register with
``catalogue.check``)."""

from __future__ import annotations

from ppm_reference.interop.conformance import helper_checks, leader_checks
from ppm_reference.interop.conformance.catalogue import Check, registered

CHECK_MODULES = (leader_checks, helper_checks)


def catalogue(role: str | None = None) -> list[Check]:
    """Every check (of ``role``), in ID order."""
    return registered(role)


__all__ = ["CHECK_MODULES", "catalogue"]
