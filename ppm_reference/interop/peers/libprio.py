"""Talking to the libprio-rs peers (`libprio18`: prio 0.18, VDAF-18; `libprio16`: prio
0.16, VDAF-08), for the cross-check tests and the benchmark.

Each peer is a small program that reads one JSON request `{"cases": [...]}` on stdin and
answers `{"results": [...]}` (the protocol is in its `src/main.rs`). This module turns
our VDAF objects into the peer's `vdaf` description and runs a batch of cases in one
process. It does not build anything: `interop.peers.build` (or `tests.peers`) does.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from ppm_reference.interop import peers
from ppm_reference.vdaf import registry

#: The peer project of each VDAF version of the registry.
PEER_OF_VERSION = {"18": "libprio18", "08": "libprio16"}

#: The VDAFs each peer drives (prio 0.16 has no MultihotCountVec of VDAF-08; prio 0.18's
#: Prio3L1BoundSum cites draft-ietf-ppm-l1-bound-sum-01, ours -02: the same wire).
PEER_VDAFS = {
    "libprio18": ("Prio3Count", "Prio3Sum", "Prio3SumVec", "Prio3Histogram",
                  "Prio3MultihotCountVec", "Prio3L1BoundSum"),
    "libprio16": ("Prio3Count", "Prio3Sum", "Prio3SumVec", "Prio3Histogram"),
}


class PeerError(Exception):
    """The peer program failed as a whole (not one case: a case's error is its answer)."""


def peer_for(vdaf: Any) -> str:
    """The peer project that speaks the wire version of our VDAF object."""
    return PEER_OF_VERSION[registry.version_of(vdaf)]


def vdaf_spec(vdaf: Any) -> dict[str, Any]:
    """The peer's description of our VDAF object: its registry name as `type` and its
    parameters by their registry names (`max_measurement`, `bits`, `length`,
    `max_weight`, `chunk_length`), which are the peer's too."""
    name = registry.name_of(vdaf)
    peer = peer_for(vdaf)
    if name not in PEER_VDAFS[peer]:
        raise PeerError(f"{peer} does not drive {name}")
    if vdaf.SHARES != 2:
        raise PeerError("the libprio-rs peers run two Aggregators")
    return {"type": name, **registry.parameters_of(vdaf)}


def measurement_json(measurement: Any) -> Any:
    """A measurement as the peer reads it: integers, lists of integers or of booleans."""
    if isinstance(measurement, bool):
        return int(measurement)
    if isinstance(measurement, list):
        return [measurement_json(x) for x in measurement]
    return measurement


def result_from_json(value: Any) -> Any:
    """An aggregate result as the peer writes it (decimal strings) as ours (ints)."""
    if isinstance(value, list):
        return [result_from_json(x) for x in value]
    if isinstance(value, str):
        return int(value)
    return value


def run(binary: Path, cases: list[dict[str, Any]], timeout: float = 600.0
        ) -> list[dict[str, Any]]:
    """Run a batch of cases in one process of the peer and return its results, one per
    case (a failed case is `{"error": ...}`)."""
    proc = subprocess.run([str(binary)], input=json.dumps({"cases": cases}),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise PeerError(f"{binary.name} exited with {proc.returncode}: "
                        f"{proc.stderr.strip()[-500:]}")
    try:
        answer = json.loads(proc.stdout)
        results = answer["results"]
    except (ValueError, KeyError, TypeError) as exc:
        raise PeerError(f"{binary.name} answered no results: {exc}") from None
    if not isinstance(results, list) or len(results) != len(cases):
        raise PeerError(f"{binary.name} answered {len(results)} results for "
                        f"{len(cases)} cases")
    return [dict(r) for r in results]


def crate_version(project: str, crate: str = "prio") -> str | None:
    """The version of `crate` that the project's committed Cargo.lock pins."""
    lock = peers.PEERS_DIR / project / "Cargo.lock"
    try:
        text = lock.read_text()
    except OSError:
        return None
    match = re.search(r'\[\[package\]\]\s*name = "' + re.escape(crate)
                      + r'"\s*version = "([^"]+)"', text)
    return match.group(1) if match else None
