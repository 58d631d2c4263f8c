"""Options shared by `ppm` commands: argparse types, and the objects options name (a
VDAF of a DAP profile, a batch mode)."""

from __future__ import annotations

import argparse
from typing import Any

from ppm_reference.dap.cli.errors import usage_errors
from ppm_reference.dap.profiles import DEFAULT_PROFILE
from ppm_reference.vdaf import registry

# The VDAFs of `--vdaf` (VDAF-18's; a dap-09 task takes those of them VDAF-08 has).
VDAF_NAMES = registry.names()
BATCH_MODES = ("time-interval", "leader-selected")


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")


def vdaf_name_arg(text: str) -> str:
    """argparse type: a VDAF name, with or without the `Prio3` prefix, any case."""
    key = text.lower().removeprefix("prio3")
    for name in VDAF_NAMES:
        if name.lower().removeprefix("prio3") == key:
            return name
    raise argparse.ArgumentTypeError(
        f"unknown VDAF {text!r}; choose from {', '.join(VDAF_NAMES)}")


def policy_name_arg(text: str) -> str:
    """argparse type: a DP policy name (any case) or `none`."""
    from ppm_reference.dap.dp import POLICIES

    if text.lower() == "none":
        return "none"
    for name in POLICIES:
        if name.lower() == text.lower():
            return name
    raise argparse.ArgumentTypeError(
        f"unknown DP policy {text!r}; choose from none, {', '.join(POLICIES)}")


def batch_mode_arg(text: str) -> str:
    key = text.lower().replace("_", "-")
    if key not in BATCH_MODES:
        raise argparse.ArgumentTypeError(
            f"unknown batch mode {text!r}; choose from {', '.join(BATCH_MODES)}")
    return key


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def port_arg(text: str) -> int:
    """argparse type: a TCP port, 0..65535 (0: any free port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0..65535, got {text}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (seconds, rates)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def batch_mode_of(name: str) -> Any:
    from ppm_reference.dap.common import BatchMode

    return BatchMode.TIME_INTERVAL if name == "time-interval" else BatchMode.LEADER_SELECTED


def build_vdaf(name: str, *, length: int | None = None, max_measurement: int | None = None,
               max_weight: int | None = None, chunk_length: int | None = None,
               profile: str = DEFAULT_PROFILE.name, bits: int | None = None,
               max_value: int | None = None) -> Any:
    """The VDAF `name` of the DAP profile's VDAF version (`Profile.build_vdaf`, i.e.
    `vdaf.registry`), from option values. Raises CliError (usage) naming the option when
    a parameter is missing, invalid or not one the VDAF takes."""
    from ppm_reference.dap.profiles import get_profile

    params = {"length": length, "max_measurement": max_measurement, "bits": bits,
              "max_weight": max_weight, "chunk_length": chunk_length,
              "max_value": max_value}
    with usage_errors():
        return get_profile(profile).build_vdaf(name, params)
