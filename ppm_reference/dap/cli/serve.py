"""`ppm leader|helper --config FILE`: serve the Aggregator an AggregatorConfig JSON file
describes (aiohttp, Ctrl-C to stop). `python -m ppm_reference.dap.server FILE` is the same
without `ppm`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppm_reference.dap.cli.args import port_arg
from ppm_reference.dap.cli.errors import CliError, run_command, usage_error


def load_config(path: str | Path, role: str | None = None) -> Any:
    """An AggregatorConfig from a JSON file, as a CliError on any problem."""
    from ppm_reference.dap.server.config import ConfigError, load_config_file

    try:
        return load_config_file(path, role)
    except ConfigError as exc:
        raise usage_error(str(exc)) from None


def serve(path: str | Path, role: str | None = None,
          processes: dict[str, Any] | None = None) -> int:
    """Run the aggregator a configuration file describes until interrupted.
    `processes`: the command line's --mode, --reuse-port, --frontends and --drivers,
    over the configuration's keys."""
    return serve_config(load_config(path, role), processes)


def serve_config(config: Any, processes: dict[str, Any] | None = None) -> int:
    """Run the aggregator of an AggregatorConfig until interrupted."""
    from ppm_reference.dap.server.app import run
    from ppm_reference.dap.server.config import ConfigError, with_overrides
    from ppm_reference.dap.storage import StorageError

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
        config = load_config(args.config, role)
        overrides = {k: v for k, v in (("log_level", args.log_level),
                                       ("log_format", args.log_format)) if v is not None}
        overrides.update(process_options(args))
        from ppm_reference.dap.server.config import ConfigError, with_overrides

        try:
            config = with_overrides(config, overrides)
        except ConfigError as exc:
            raise usage_error(str(exc)) from None
        if args.check:
            print(f"{args.config}: a valid {role} configuration (listens on "
                  f"{config.scheme}://{config.listen_host}:{config.listen_port}/, datastore "
                  f"{config.datastore}, admin API {'on' if config.admin_token else 'off'}, "
                  f"mode {config.mode})")
            return 0
        return serve_config(config)

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
    from ppm_reference.dap.server.relay import RelayConfig, run

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
    p.add_argument("--listen-port", type=port_arg, default=8090)
    p.add_argument("--source-host", metavar="ADDR",
                   help="local address of connections to the gateway")
    p.add_argument("--max-body", type=int, default=1 << 20, help="largest request accepted")
    p.set_defaults(func=run_command(_cmd_relay))
    for role in ("leader", "helper"):
        p = subparsers.add_parser(role, help=f"run the DAP {role.capitalize()} (aiohttp)",
                                  description=f"Serve the DAP {role.capitalize()} "
                                  "described by an AggregatorConfig JSON file.")
        p.add_argument("--config", required=True, metavar="FILE",
                       help="aggregator configuration (JSON, see dap/server/config.py; "
                       "ppm config init writes one)")
        p.add_argument("--check", action="store_true",
                       help="check the configuration (every key's type and value) and exit")
        p.add_argument("--log-level", type=str.upper,
                       choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                       help="override the configuration's log_level (default INFO)")
        p.add_argument("--log-format", choices=("text", "json"),
                       help="override log_format: text, or json (one object per line)")
        add_process_options(p)
        p.set_defaults(func=_cmd_serve(role))
    _register_config(subparsers)


# The keys `ppm config init` writes, with the comment written before each.
_INIT_KEYS = {
    "role": "leader or helper",
    "listen_host": "address to listen on (0.0.0.0: every interface)",
    "listen_port": "TCP port",
    "datastore": "SQLite file, relative to this file",
    "admin_token": "bearer token of the admin API under /internal/ (remove to disable it)",
    "worker_interval": "seconds between the background worker's passes",
    "min_batch_size_floor": "refuse tasks with a smaller min_batch_size",
    "log_request_peers": "log each request's peer address",
}


def _cmd_config_init(args: argparse.Namespace) -> int:
    import json
    import secrets

    from ppm_reference.dap.cli.output import write_json_file
    from ppm_reference.dap.server.config import AggregatorConfig

    out = Path(args.out_dir)
    paths = {role: out / f"{role}.json" for role in ("leader", "helper")}
    for path in paths.values():
        if path.exists() and not args.force:
            raise usage_error(f"{path} exists; choose another --out-dir, or --force")
    out.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    for port, (role, path) in zip((args.port, args.port + 1), paths.items(), strict=True):
        config = AggregatorConfig(role=role, datastore=f"{role}.sqlite",
                                  listen_port=port, admin_token=token)
        values = config.to_dict()
        data: dict[str, object] = {
            "#": f"DAP {role} configuration (ppm {role} --config {path.name}); every key: "
                 "README 'Configuration keys'. Keys starting with # are comments."}
        for key, comment in _INIT_KEYS.items():
            data[f"# {key}"] = comment
            data[key] = values[key]
        AggregatorConfig.from_dict(json.loads(json.dumps(data)))  # what we write is valid
        write_json_file(path, data, private=True, sort_keys=False)  # the admin token
    print(f"wrote {paths['leader']} and {paths['helper']} (mode 0600: they hold the admin "
          f"token); start them with: ppm leader --config {paths['leader']} & "
          f"ppm helper --config {paths['helper']} &")
    return 0


def _register_config(subparsers: Any) -> None:
    p = subparsers.add_parser("config", help="write or check Aggregator configurations")
    sub = p.add_subparsers(dest="config_command", metavar="COMMAND")
    p.set_defaults(func=lambda _args: (p.print_help(), 2)[1])
    init = sub.add_parser("init", help="write a commented leader.json and helper.json",
                          description="Write a Leader's and a Helper's configuration "
                          "(ports PORT and PORT+1 on 127.0.0.1, SQLite datastores beside "
                          "them, one admin token) with a comment before each key.")
    init.add_argument("--out-dir", default=".", metavar="DIR", help="default: .")
    init.add_argument("--port", type=port_arg, default=8081,
                      help="the Leader's port (the Helper's is the next); default 8081")
    init.add_argument("--force", action="store_true", help="overwrite existing files")
    init.set_defaults(func=run_command(_cmd_config_init))


__all__ = ["add_process_options", "load_config", "process_options", "register",
           "run_command", "serve"]
