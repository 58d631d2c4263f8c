"""`ppm dap vectors generate|check`: write and check the DAP test vectors of a profile.

    ppm dap vectors generate --out DIR [--profile dap-19|dap-18|dap-09] [--json]
                                                  write the test vectors of a profile
    ppm dap vectors check DIR [--json]            re-derive, decode and decrypt them (each
                                                  file's "draft" selects the profile)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ppm_reference.dap.profiles import DEFAULT_PROFILE


def register(subparsers: Any) -> None:
    """Add the ``dap`` sub-command to the ``ppm`` parser."""
    dap = subparsers.add_parser("dap", help="DAP tools (every profile: dap-19, dap-18, dap-09)")
    dap_sub = dap.add_subparsers(dest="dap_command", metavar="COMMAND")
    dap.set_defaults(func=lambda _args: _help(dap))

    vectors = dap_sub.add_parser("vectors", help="DAP test vectors")
    vectors_sub = vectors.add_subparsers(dest="vectors_command", metavar="COMMAND")
    vectors.set_defaults(func=lambda _args: _help(vectors))

    gen = vectors_sub.add_parser("generate", help="write the DAP test vectors of a profile")
    gen.add_argument("--out", required=True, type=Path, help="output directory")
    gen.add_argument("--profile", default=DEFAULT_PROFILE.name,
                     help="DAP profile (dap-19, dap-18, dap-09)")
    gen.add_argument("--json", action="store_true", help="machine-readable output")
    gen.set_defaults(func=_generate)

    chk = vectors_sub.add_parser("check", help="check DAP test vectors (any profile)")
    chk.add_argument("directory", type=Path, nargs="?",
                     help="directory of vector files (default: the vectors shipped with this "
                          "package, every profile)")
    chk.add_argument("--json", action="store_true", help="machine-readable output")
    chk.set_defaults(func=_check)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _generate(args: argparse.Namespace) -> int:
    from ppm_reference.dap.profiles import ProfileError, get_profile
    from ppm_reference.dap.vectors import generate

    try:
        profile = get_profile(args.profile)
    except ProfileError as exc:
        if args.json:
            print(json.dumps({"ok": False, "errors": [str(exc)]}))
        else:
            print(f"ppm dap vectors generate: error: {exc}", file=sys.stderr)
        return 2
    paths = generate(args.out, profile)
    if args.json:
        print(json.dumps({"ok": True, "files": [str(p) for p in paths]}))
    else:
        for p in paths:
            print(p)
        print(f"wrote {len(paths)} files under {args.out}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from ppm_reference.dap.profiles import PROFILES
    from ppm_reference.dap.vectors import CheckReport, check

    if args.directory is None:
        # The vectors shipped with the package: each profile's folder (Profile.vector_dir).
        from ppm_reference.vdaf.packaged import vectors_root

        root = vectors_root()
        dirs = sorted({root / p.vector_dir for p in PROFILES.values() if p.vector_dir
                       and (root / p.vector_dir).is_dir()}) if root else []
        if not dirs:
            return _refuse("no DAP test vectors shipped with this package; give a directory",
                           args.json)
        report = CheckReport()
        for folder in dirs:
            part = check(folder)
            report.files += part.files
            report.checks += part.checks
            report.errors += [f"{folder.name}/{e}" for e in part.errors]
        return _print_report(report, args.json)
    if not args.directory.is_dir():
        return _refuse(f"not a directory: {args.directory}", args.json)
    return _print_report(check(args.directory), args.json)


def _refuse(message: str, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"ok": False, "files": 0, "checks": 0, "errors": [message]}))
    else:
        print(message, file=sys.stderr)
    return 1


def _print_report(report: Any, as_json: bool) -> int:
    if as_json:
        print(
            json.dumps(
                {"ok": report.ok, "files": report.files, "checks": report.checks,
                 "errors": report.errors}
            )
        )
    else:
        for error in report.errors:
            print(f"FAIL {error}")
        status = "ok" if report.ok else "FAILED"
        print(f"{status}: {report.files} files, {report.checks} checks, "
              f"{len(report.errors)} errors")
    return 0 if report.ok else 1
