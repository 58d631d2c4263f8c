"""``ppm conformance``: run the conformance catalogue against a DAP Leader or Helper.

    ppm conformance --role leader|helper --profile dap-09|dap-18|dap-19 --target URL
        (--interop-api URL [--dialect draft07|janus] [--helper-interop-api URL]
         | --admin URL --admin-token T [--helper-admin URL]
         | --task-file FILE ...)
        [--helper-url URL] [--only ID|TAG ...] [--skip ID|TAG ...]
        [--json] [--junit-xml FILE] [--timeout S] [--settle S] [--oversize-bytes N]
    ppm conformance --list [--markdown] [--role R]

Against a Leader the suite is the Client and the Collector (the Leader's Helper must be
running, and be given the task too: --helper-interop-api or --helper-admin); against a
Helper it is the Leader. Exit status 1 when a MUST check fails, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from ppm_reference.dap.profiles import SHIPPED, get_profile
from ppm_reference.interop.conformance import catalogue as cat


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "conformance", help="test a DAP Leader or Helper against the drafts",
        description="Run the conformance catalogue against a DAP Leader or Helper "
                    "(docs/conformance.md lists the checks).")
    p.add_argument("--role", choices=("leader", "helper"))
    p.add_argument("--profile", choices=SHIPPED, default=None)
    p.add_argument("--target", metavar="URL", help="DAP endpoint of the Aggregator under test")
    p.add_argument("--helper-url", metavar="URL",
                   help="against a Leader: its Helper's DAP endpoint (named in the tasks)")
    g = p.add_argument_group("provisioning (one of)")
    g.add_argument("--interop-api", metavar="URL",
                   help="the target's interop test API (draft-dcook-ppm-dap-interop-test-"
                        "design): tasks are added with add_task")
    g.add_argument("--dialect", choices=("draft07", "janus"), default="draft07",
                   help="add_task body dialect of --interop-api (default draft07)")
    g.add_argument("--helper-interop-api", metavar="URL",
                   help="against a Leader: its Helper's interop test API")
    g.add_argument("--interop-token", default=None,
                   help="token for the interop test API (default: $PPM_INTEROP_TOKEN)")
    g.add_argument("--admin", metavar="URL", help="the target's admin API (this project's "
                                                  "Aggregators)")
    g.add_argument("--helper-admin", metavar="URL",
                   help="against a Leader: its Helper's admin API")
    g.add_argument("--admin-token", default=None, help="admin API token (default: "
                                                       "$PPM_ADMIN_TOKEN)")
    g.add_argument("--task-file", action="append", default=[], metavar="FILE",
                   help="a provisioned task (repeatable; each check uses one): against a "
                        "Leader a collector-task.json, against a Helper the Leader's task "
                        "JSON (the body of POST /internal/tasks)")
    p.add_argument("--only", action="append", default=[], metavar="ID|TAG",
                   help="run only these checks (ID, ID prefix ending in -, tag or level; "
                        "repeatable, or comma-separated)")
    p.add_argument("--skip", action="append", default=[], metavar="ID|TAG",
                   help="skip these checks (same forms as --only)")
    p.add_argument("--list", action="store_true", help="print the catalogue and exit")
    p.add_argument("--markdown", action="store_true",
                   help="with --list: the catalogue as docs/conformance.md")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--junit-xml", metavar="FILE", help="write a JUnit XML report")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="seconds a request, job or collection may take (default 20)")
    p.add_argument("--settle", type=float, default=2.0,
                   help="seconds to watch that a batch is NOT released (default 2)")
    p.add_argument("--oversize-bytes", type=int, default=64 * 1024 * 1024 + 1,
                   help="body size of the oversized-request checks, above the target's "
                        "limit (default 64 MiB + 1; a target that reads it whole skips "
                        "them)")
    p.add_argument("--concurrency", type=int, default=4, help="checks run at once")
    p.set_defaults(func=main)


def _split(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _error(message: str) -> int:
    print(f"ppm conformance: error: {message}", file=sys.stderr)
    return 2


def main(args: argparse.Namespace) -> int:
    from ppm_reference.interop.conformance.registry import catalogue

    checks = cat.select(catalogue(args.role), _split(args.only), _split(args.skip))
    if args.list:
        if args.markdown:
            print(cat.markdown(checks))
        elif args.json:
            print(json.dumps([{"id": c.id, "role": c.role, "level": str(c.level),
                               "title": c.title, "profiles": list(c.profiles),
                               "refs": c.refs, "tags": list(c.tags), "sends": c.sends,
                               "expects": c.expects} for c in checks], indent=2))
        else:
            for c in checks:
                print(f"{c.id:<16} {c.level:<6} {','.join(c.profiles):<20} {c.title}")
        return 0
    if not args.role or not args.profile or not args.target:
        return _error("--role, --profile and --target are needed (or --list)")
    try:
        provisioner = _provisioner(args)
    except Exception as exc:  # noqa: BLE001 - ProvisionFailed and bad arguments
        return _error(str(exc))
    from ppm_reference.interop.conformance import runner

    opts = runner.Options(settle=args.settle, timeout=args.timeout,
                          oversize_bytes=args.oversize_bytes, concurrency=args.concurrency)
    profile = get_profile(args.profile)
    try:
        results = asyncio.run(runner.run_checks(profile, args.role, args.target, provisioner,
                                                checks, opts))
    except KeyboardInterrupt:
        return 130
    if args.junit_xml:
        Path(args.junit_xml).write_bytes(runner.junit_xml(results, args.profile, args.role,
                                                          args.target))
    if args.json:
        print(json.dumps(runner.to_json(results, args.profile, args.role, args.target),
                         indent=2))
    else:
        print(runner.table(results, args.profile, args.role, args.target))
    return 1 if runner.must_failed(results) else 0


def _provisioner(args: argparse.Namespace) -> Any:
    from ppm_reference.interop.conformance import provision as pv

    profile = get_profile(args.profile)
    chosen = [bool(args.interop_api), bool(args.admin), bool(args.task_file)]
    if sum(chosen) != 1:
        raise ValueError("give one of --interop-api, --admin and --task-file")
    if args.interop_api:
        token = args.interop_token or os.environ.get("PPM_INTEROP_TOKEN")
        return pv.InteropProvisioner(profile, args.role, args.target,
                                     api_url=args.interop_api, dialect=args.dialect,
                                     helper_api_url=args.helper_interop_api,
                                     helper_url=args.helper_url, token=token)
    if args.admin:
        token = args.admin_token or os.environ.get("PPM_ADMIN_TOKEN")
        if not token:
            raise ValueError("--admin needs --admin-token (or $PPM_ADMIN_TOKEN)")
        return pv.AdminProvisioner(profile, args.role, args.target, admin_url=args.admin,
                                   admin_token=token, helper_url=args.helper_url,
                                   helper_admin_url=args.helper_admin)
    return pv.TaskFileProvisioner(profile, args.role, args.target, args.task_file)
