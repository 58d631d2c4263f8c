"""``ppm interop ...`` sub-commands.

    ppm interop serve --role client|leader|helper|collector [--port 8080]
                      [--host 127.0.0.1] [--data-dir DIR] [--log-dir DIR]
                      [--token T | --token-file FILE] [--allow-unauthenticated]
    ppm interop run --client URL --leader URL --helper URL --collector URL
                    [--vdaf NAME ...] [--batch-mode time_interval|leader_selected]
                    [--dap-version dap-19|dap-18|dap-09|all ...] [--dialect draft07|janus]
                    [--concurrency 4] [--json]
                    [--token T | --token-file FILE]

The test API takes a token (`--token`, `--token-file`, or $PPM_INTEROP_TOKEN) that
`run` sends as `Authorization: Bearer`; without one it serves only on a loopback
address unless `--allow-unauthenticated` (the container, for a stock draft-07 runner).

`serve` runs the test API of one role (interop/server.py), for dap-18 and dap-09 tasks
alike; `run` drives four of them through every case (interop/runner.py) of both protocol
versions, or of those `--dap-version` names, and exits 1 if any case fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from ppm_reference.dap.cli.args import port_arg, positive_float, positive_int
from ppm_reference.interop import runner as r
from ppm_reference.interop import server
from ppm_reference.interop.fields import interop_of


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "interop", help="DAP interop test API (draft-dcook-ppm-dap-interop-test-design)")
    sub = parser.add_subparsers(dest="interop_command", metavar="COMMAND")
    parser.set_defaults(func=lambda _a: (parser.print_help(), 2)[1])

    serve = sub.add_parser("serve", help="serve the test API of one role")
    serve.add_argument("--role", required=True, choices=server.ROLES)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=port_arg, default=8080)
    serve.add_argument("--data-dir", default=None,
                       help="folder of the Aggregator's SQLite datastore (default: a "
                            "temporary folder removed on exit)")
    serve.add_argument("--log-dir", default=None,
                       help="also write the log to DIR/ROLE.log (the container uses /logs)")
    _token_options(serve, "require this token (Authorization: Bearer) on the test API")
    serve.add_argument("--allow-unauthenticated", action="store_true",
                       help="serve without a token on a non-loopback --host (a private "
                            "test network: a stock draft-07 runner sends no credential)")
    serve.set_defaults(func=_serve)

    run = sub.add_parser("run", help="run the interop test cases against four roles")
    for role in ("client", "leader", "helper", "collector"):
        run.add_argument(f"--{role}", required=True, metavar="URL",
                         help=f"base URL of the {role}'s test API")
    run.add_argument("--vdaf", action="append", default=None,
                     help="only cases of this VDAF (repeatable)")
    run.add_argument("--batch-mode", choices=tuple(_batch_modes()),
                     default=None, help="only cases of this batch mode (fixed_size is "
                                        "DAP-09's name of leader_selected)")
    run.add_argument("--dap-version", action="append", default=None,
                     choices=[*r.VERSIONS, "all"],
                     help="only cases of this protocol version (repeatable; default all)")
    run.add_argument("--dialect", choices=r.DIALECTS, default="draft07",
                     help="the request bodies: draft07 (draft-dcook-ppm-dap-interop-test-"
                          "design-07, with dap_version for dap-18 and later) or janus "
                          "(what Janus's interop driver sends)")
    run.add_argument("--concurrency", type=positive_int, default=4, help="cases run at once")
    run.add_argument("--time-precision", type=int, default=3600)
    run.add_argument("--timeout", type=positive_float, default=60.0,
                     help="seconds a collection may take")
    run.add_argument("--json", action="store_true", help="machine-readable output")
    _token_options(run, "send this token to the four test APIs")
    run.set_defaults(func=_run)


def _token_options(parser: argparse.ArgumentParser, help_text: str) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--token", default=None,
                       help=f"{help_text} (default: ${server.TOKEN_ENV})")
    group.add_argument("--token-file", default=None, metavar="FILE",
                       help="read the token from FILE (first line)")


def _token(args: argparse.Namespace) -> str | None:
    """The token from --token, --token-file or the environment (None: no token)."""
    if args.token:
        return str(args.token)
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as fh:
                token = fh.readline().strip()
        except OSError as exc:
            raise server.ServeError(f"cannot read --token-file {args.token_file}: "
                                    f"{exc.strerror or exc}") from None
        if not token:
            raise server.ServeError(f"--token-file {args.token_file} is empty")
        return token
    return os.environ.get(server.TOKEN_ENV, "").strip() or None


def _batch_modes() -> dict[str, int]:
    """Every draft's names of the batch modes (time_interval, leader_selected, and DAP-09's
    fixed_size) -> the batch mode number."""
    return {name: mode for version in r.VERSIONS
            for mode, name in interop_of(version).batch_mode_names.items()}


def _port_free(host: str, port: int) -> str | None:
    """Why (host, port) cannot be served, or None: checked before the server logs that
    it listens, so that a busy port is one line."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(infos[0][4])
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _serve(args: argparse.Namespace) -> int:
    busy = _port_free(args.host, args.port)
    if busy is not None:
        print(f"ppm interop serve: error: cannot serve on {args.host}:{args.port}: {busy} "
              "(choose another --port)", file=sys.stderr)
        return 1
    try:
        server.serve(args.role, args.host, args.port, args.data_dir, args.log_dir,
                     token=_token(args), allow_unauthenticated=args.allow_unauthenticated)
    except server.ServeError as exc:
        print(f"ppm interop serve: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"ppm interop serve: error: cannot serve on {args.host}:{args.port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def _run(args: argparse.Namespace) -> int:
    versions = [] if not args.dap_version or "all" in args.dap_version \
        else args.dap_version
    cases = r.default_cases(*versions)
    if args.vdaf:
        # Prio3Count, prio3count or Count: the VDAF type with or without Prio3, any case.
        wanted = {v.lower().removeprefix("prio3") for v in args.vdaf}
        known = sorted({c.vdaf["type"] for c in cases})
        cases = [c for c in cases if c.vdaf["type"].lower().removeprefix("prio3") in wanted]
        if not cases:
            print(f"ppm interop run: error: no case for --vdaf {' '.join(args.vdaf)}; the "
                  f"cases' VDAFs are {', '.join(known)}", file=sys.stderr)
            return 2
    if args.batch_mode:
        mode = _batch_modes()[args.batch_mode]
        cases = [c for c in cases if c.batch_mode == mode]
    endpoints = r.Endpoints(args.client, args.leader, args.helper, args.collector)
    try:
        outcomes = asyncio.run(r.run_all(
            endpoints, cases, args.concurrency, token=_token(args),
            time_precision=args.time_precision, collect_timeout=args.timeout,
            dialect=args.dialect))
    except (r.RunnerError, server.ServeError) as exc:
        if args.json:
            print(json.dumps({"ok": False, "error": str(exc), "cases": []}))
        print(f"ppm interop run: error: {exc}", file=sys.stderr)
        return 1
    passed = sum(o.passed for o in outcomes)
    ok = bool(outcomes) and passed == len(outcomes)
    if args.json:
        print(json.dumps({"ok": ok, "passed": passed, "failed": len(outcomes) - passed,
                          "cases": [o.to_json() for o in outcomes]}))
    else:
        print(r.format_table(outcomes))
    return 0 if ok else 1
