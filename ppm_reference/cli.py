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
import os
import re
import sys
from typing import Any, NoReturn

# Modules that provide `register(subparsers)`. A module that does not exist yet is skipped,
# so that areas can land one at a time.
_AREAS = (
    "ppm_reference.vdaf.cli",
    "ppm_reference.dp_policy.cli",
    "ppm_reference.dap.cli",
    "ppm_reference.interop.cli",
    "ppm_reference.interop.conformance.cli",
    "ppm_reference.analytics.cli",
)


def version_line() -> str:
    """``ppm-reference 0.1.0 (DAP profiles dap-09, dap-18, dap-19; VDAF 08, 18)``."""
    from importlib import metadata

    try:
        version = metadata.version("ppm-reference")
    except metadata.PackageNotFoundError:      # run from a checkout without installing
        version = "unknown (not installed)"
    from ppm_reference.dap.profiles import PROFILES
    from ppm_reference.vdaf.vectors import VERSIONS

    profiles = ", ".join(sorted(PROFILES))
    vdafs = ", ".join(f"{v:02d}" for v in sorted(VERSIONS))
    return f"ppm-reference {version} (DAP profiles {profiles}; VDAF {vdafs})"


# A DAP ID (task ID, batch ID, ...: 32 bytes, unpadded base64url, DAP section 4.1) is
# 43 characters and may begin with "-" (one in 64 IDs).
_DASH_ID = re.compile(r"-[A-Za-z0-9_-]{42}")


class PpmArgumentParser(argparse.ArgumentParser):
    """Bad usage is one line, `PROG: error: MESSAGE (see PROG --help)`, exit code 2;
    sub-command parsers inherit the class (argparse makes them of their parent's).

    A word shaped like a 32-byte base64url ID that begins with "-" is a value, not an
    option: argparse would otherwise read `-hXc...` as `-h` with an argument, or report
    the positional TASK_ID as missing."""

    def _parse_optional(self, arg_string: str) -> Any:
        # argparse's own (private) classifier of a word; None has meant "a positional"
        # in every version, though its other answers changed shape in 3.12.
        if _DASH_ID.fullmatch(arg_string) and arg_string not in self._option_string_actions:
            return None                         # argparse's "this is a positional"
        return super()._parse_optional(arg_string)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = PpmArgumentParser(
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


def _mark_leaves(parser: argparse.ArgumentParser) -> None:
    """Record on every sub-command parser itself (`_ppm_parser`), so that an unknown
    option is reported with that sub-command's usage, not the top level's."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(_ppm_parser=sub)
                _mark_leaves(sub)


def _one_line(exc: BaseException) -> tuple[str, int]:
    """The last resort for a failure no command handled: one line and exit code 1."""
    try:
        from ppm_reference.dap.cli.errors import describe_error
    except ImportError:  # pragma: no cover - the dap layer is always installed
        return f"{type(exc).__name__}: {exc}", 1
    return describe_error(exc)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    _mark_leaves(parser)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            leaf = getattr(args, "_ppm_parser", parser)
            leaf.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, --version, or bad usage (already printed)
        return exc.code if isinstance(exc.code, int) else 2
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except BrokenPipeError:
        # `ppm ... | head`: the reader left; say nothing more (and let the interpreter's
        # final flush of stdout not fail either).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("ppm: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - no traceback reaches the user
        if os.environ.get("PPM_DEBUG"):
            raise
        message, code = _one_line(exc)
        print(f"ppm: error: {message} (PPM_DEBUG=1 shows the traceback)", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
