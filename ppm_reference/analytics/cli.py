"""`ppm analytics ...`: the seed-paper systems from the command line.

Each system provides `register(subparsers)` in its own CLI module, listed in `_AREAS`; a
module that does not exist yet is skipped, so that systems land independently (the same
pattern as `ppm/cli.py`).
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

_AREAS = (
    "ppm_reference.analytics.federated.cli",
    "ppm_reference.analytics.heatmap.cli",
    "ppm_reference.analytics.heavy_hitters_cli",
)


def register(subparsers: Any) -> None:
    """Add `ppm analytics` and the sub-commands of every system present."""
    parser = subparsers.add_parser(
        "analytics", help="systems of the seed papers on DAP (heatmaps, n-grams, ...)",
        description="Systems of the seed papers run over real DAP tasks.")
    sub = parser.add_subparsers(dest="analytics_command", metavar="SYSTEM")
    found = 0
    for name in _AREAS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                continue
            raise
        module.register(sub)
        found += 1

    def _no_system(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=_no_system)
