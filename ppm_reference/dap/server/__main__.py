"""`python -m ppm_reference.dap.server CONFIG_FILE`: run the Leader or Helper the configuration file
describes (its `role`), like `ppm leader --config FILE` / `ppm helper --config FILE`.
It uses the server package alone (no command-line module of `ppm`)."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ppm_reference.dap.server",
        description="Serve a DAP Leader or Helper from an AggregatorConfig JSON file.")
    parser.add_argument("config", metavar="CONFIG_FILE", help="aggregator configuration")
    parser.add_argument("--mode", choices=("all", "frontend", "driver"),
                        help="HTTP and background work (all), HTTP only (frontend), or "
                        "background work only (driver)")
    parser.add_argument("--reuse-port", action="store_true", default=None,
                        help="SO_REUSEPORT: front ends on this host share the port")
    parser.add_argument("--frontends", type=int, metavar="N",
                        help="supervise N front end processes")
    parser.add_argument("--drivers", type=int, metavar="M",
                        help="supervise M driver processes")
    args = parser.parse_args(argv)
    from ppm_reference.dap.server.app import run
    from ppm_reference.dap.server.config import ConfigError, load_config_file, with_overrides

    overrides = {k: v for k, v in (("mode", args.mode), ("reuse_port", args.reuse_port),
                                   ("frontends", args.frontends), ("drivers", args.drivers))
                 if v is not None}
    try:
        config = with_overrides(load_config_file(args.config), overrides)
    except ConfigError as exc:
        print(f"python -m ppm_reference.dap.server: error: {exc}", file=sys.stderr)
        return 2
    from ppm_reference.dap.storage import StorageError

    try:
        run(config)
    except (ConfigError, StorageError) as exc:
        print(f"python -m ppm_reference.dap.server: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"python -m ppm_reference.dap.server: error: cannot serve on {config.listen_host}:"
              f"{config.listen_port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
