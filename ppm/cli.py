"""Entry point of the `ppm` console script.

Each area of the project contributes its sub-commands through a `register(subparsers)`
function in its own `cli` module, so that areas stay independent:

    ppm vdaf ...     vdaf/cli.py
    ppm dp ...       dp_policy/cli.py
    ppm dap ..., leader, helper, task, upload, collect, demo     dap/cli/

A registered sub-command sets `func` on its parser; `func(args)` returns the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules that provide `register(subparsers)`. A module that does not exist yet is skipped,
# so that areas can land one at a time.
_AREAS = ("vdaf.cli", "dp_policy.cli", "dap.cli", "interop.cli", "interop.conformance.cli",
          "analytics.cli")


def version_line() -> str:
    """``ppm-reference 0.1.0 (DAP profiles dap-09, dap-18, dap-19; VDAF 08, 18)``."""
    from importlib import metadata

    try:
        version = metadata.version("ppm-reference")
    except metadata.PackageNotFoundError:      # run from a checkout without installing
        version = "unknown (not installed)"
    from dap.profiles import PROFILES
    from vdaf.vectors import VERSIONS

    profiles = ", ".join(sorted(PROFILES))
    vdafs = ", ".join(f"{v:02d}" for v in sorted(VERSIONS))
    return f"ppm-reference {version} (DAP profiles {profiles}; VDAF {vdafs})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ppm",
        description="Reference implementation of the IETF Privacy Preserving Measurement stack.",
    )
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _AREAS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    return int(func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
