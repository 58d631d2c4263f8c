"""`ppm leader|helper --config FILE`: serve the Aggregator an AggregatorConfig JSON file
describes (aiohttp, Ctrl-C to stop). `python -m dap.server FILE` is the same without `ppm`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dap.cli.errors import CliError, run_command, usage_error


def load_config(path: str | Path, role: str | None = None) -> Any:
    """An AggregatorConfig from a JSON file, as a CliError on any problem."""
    from dap.server.config import ConfigError, load_config_file

    try:
        return load_config_file(path, role)
    except ConfigError as exc:
        raise usage_error(str(exc)) from None


def serve(path: str | Path, role: str | None = None,
          processes: dict[str, Any] | None = None) -> int:
    """Run the aggregator a configuration file describes until interrupted.
    `processes`: the command line's --mode, --reuse-port, --frontends and --drivers,
    over the configuration's keys."""
    from dap.server.app import run
    from dap.server.config import ConfigError, with_overrides
    from dap.storage import StorageError

    config = load_config(path, role)
    try:
        config = with_overrides(config, processes or {})
    except ConfigError as exc:
        raise usage_error(str(exc)) from None
    try:
        run(config)
    except (ConfigError, StorageError) as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot serve on {config.listen_host}:{config.listen_port}: "
                       f"{exc.strerror or exc}") from None
    return 0


def _cmd_serve(role: str) -> Callable[[argparse.Namespace], int]:
    def cmd(args: argparse.Namespace) -> int:
        return serve(args.config, role, process_options(args))

    return run_command(cmd)


def add_process_options(p: argparse.ArgumentParser) -> None:
    """--mode, --reuse-port, --frontends, --drivers (dap/server/processes.py)."""
    g = p.add_argument_group("processes (several per Aggregator, one datastore)")
    g.add_argument("--mode", choices=("all", "frontend", "driver"),
                   help="this process serves HTTP and does the background work (all, the "
                   "default), serves HTTP only (frontend), or does the background work "
                   "only, with no listener (driver)")
    g.add_argument("--reuse-port", action="store_true", default=None,
                   help="listen with SO_REUSEPORT, so that several front ends on this host "
                   "share the port")
    g.add_argument("--frontends", type=int, metavar="N",
                   help="supervise N front end processes (sharing the port)")
    g.add_argument("--drivers", type=int, metavar="M",
                   help="supervise M driver processes (background work)")


def process_options(args: argparse.Namespace) -> dict[str, Any]:
    """The process options given on the command line, as configuration keys."""
    names = {"mode": "mode", "reuse_port": "reuse_port", "frontends": "frontends",
             "drivers": "drivers"}
    return {key: getattr(args, attr) for attr, key in names.items()
            if getattr(args, attr, None) is not None}


def _cmd_relay(args: argparse.Namespace) -> int:
    from dap.server.relay import RelayConfig, run

    if not args.gateway.startswith(("http://", "https://")):
        raise usage_error(f"--gateway must be an http(s) URL, got {args.gateway!r}")
    config = RelayConfig(args.gateway, args.source_host, args.max_body)
    try:
        run(config, args.listen_host, args.listen_port)
    except OSError as exc:
        raise CliError(f"cannot serve on {args.listen_host}:{args.listen_port}: "
                       f"{exc.strerror or exc}") from None
    return 0


def register(subparsers: Any) -> None:
    """Add `leader`, `helper` and `relay` to the `ppm` parser."""
    p = subparsers.add_parser(
        "relay", help="run an Oblivious HTTP relay (RFC 9458) for a Leader's gateway",
        description="Forward Encapsulated Requests POSTed to / to one Oblivious HTTP "
        "gateway (a Leader with \"ohttp_gateway\": true), adding nothing about the "
        "Client; GET /.well-known/ohttp-gateway passes the gateway's keys through.")
    p.add_argument("--gateway", required=True, metavar="URL",
                   help="the gateway resource, e.g. http://LEADER/.well-known/ohttp-gateway")
    p.add_argument("--listen-host", default="127.0.0.1")
    p.add_argument("--listen-port", type=int, default=8090)
    p.add_argument("--source-host", metavar="ADDR",
                   help="local address of connections to the gateway")
    p.add_argument("--max-body", type=int, default=1 << 20, help="largest request accepted")
    p.set_defaults(func=run_command(_cmd_relay))
    for role in ("leader", "helper"):
        p = subparsers.add_parser(role, help=f"run the DAP {role.capitalize()} (aiohttp)",
                                  description=f"Serve the DAP {role.capitalize()} "
                                  "described by an AggregatorConfig JSON file.")
        p.add_argument("--config", required=True, metavar="FILE",
                       help="aggregator configuration (JSON, see dap/server/config.py)")
        add_process_options(p)
        p.set_defaults(func=_cmd_serve(role))


__all__ = ["add_process_options", "load_config", "process_options", "register",
           "run_command", "serve"]
