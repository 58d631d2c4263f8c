"""Test vectors of the DAP profiles: generate a profile's files and check a directory.

Each profile's package supplies its vectors (``profile.vectors``, a
:class:`dap.profiles.vector_cases.DraftVectors`: ``generate``, ``check_message_file``,
``check_example_file``); a file is checked by the profile its
``draft`` field names. The shared file format is :mod:`dap.vector_format`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ppm_reference.dap.hpke import HpkeError
from ppm_reference.dap.profiles import PROFILES, Profile, ProfileError
from ppm_reference.dap.vector_format import (
    FORMAT_VERSION,
    CheckReport,
    ExampleMessages,
    VectorError,
    check_example_messages,
    check_message_cases,
)


def profile_for_draft(draft: Any) -> Profile:
    """The profile whose ``draft`` (``"draft-ietf-ppm-dap-18"``) a vector file names."""
    for profile in PROFILES.values():
        if profile.draft == draft and profile.vectors is not None:
            return profile
    raise VectorError(f"no profile with vectors for draft {draft!r}")


def generate(out_dir: Path, profile: Profile) -> list[Path]:
    """Write every vector file of ``profile`` under ``out_dir``; returns the paths written."""
    if profile.vectors is None:
        raise ProfileError(f"{profile.name} has no test vectors")
    return profile.vectors.generate(out_dir, profile)  # type: ignore[no-any-return]


def check(directory: Path) -> CheckReport:
    """Check every ``*.json`` vector file under ``directory`` (of any profile)."""
    report = CheckReport()
    paths = sorted(directory.rglob("*.json"))
    for path in paths:
        where = str(path.relative_to(directory))
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            report.errors.append(f"{where}: cannot read: {exc}")
            continue
        report.files += 1
        try:
            if not isinstance(doc, dict):
                raise VectorError(f"{where}: not a JSON object")
            if doc.get("format_version") != FORMAT_VERSION:
                raise VectorError(f"{where}: unsupported format_version")
            profile = profile_for_draft(doc.get("draft"))
            if doc.get("kind") == "message":
                profile.vectors.check_message_file(doc, report, where, profile)
            elif doc.get("kind") == "example":
                profile.vectors.check_example_file(doc, report, where, profile)
            else:
                raise VectorError(f"{where}: unknown kind {doc.get('kind')!r}")
        except (VectorError, HpkeError, ValueError, KeyError, TypeError) as exc:
            report.errors.append(f"{where}: {type(exc).__name__}: {exc}")
    if not paths:
        report.errors.append(f"no vector files under {directory}")
    return report


__all__ = ["FORMAT_VERSION", "CheckReport", "ExampleMessages", "VectorError", "check",
           "check_example_messages", "check_message_cases", "generate", "profile_for_draft"]
