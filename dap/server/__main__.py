"""`python -m dap.server CONFIG_FILE`: run the Leader or Helper the configuration file
describes (its `role`), like `ppm leader --config FILE` / `ppm helper --config FILE`."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dap.server",
        description="Serve a DAP-18 Leader or Helper from an AggregatorConfig JSON file.")
    parser.add_argument("config", metavar="CONFIG_FILE", help="aggregator configuration")
    args = parser.parse_args(argv)
    from dap.cli.serve import run_command, serve

    return run_command(lambda a: serve(a.config))(args)


if __name__ == "__main__":
    sys.exit(main())
