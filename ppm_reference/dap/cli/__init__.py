"""The DAP commands of the `ppm` console script. Each module parses its arguments, calls
the layers (`dap.provision`, `dap.client`, `dap.collector`, `dap.demo`, `dap.server`,
`dap.vectors`) and prints; nothing below `dap.cli` imports it.

    ppm dap vectors generate|check           vectors.py
    ppm leader|helper --config FILE [--check]    serve.py (and ppm config init, relay)
    ppm task create|list|show|delete ...     task.py
    ppm upload --task client-task.json ...   upload.py
    ppm collect --task collector-task.json   collect.py
    ppm demo                                 demo.py

`task create`, `upload`, `collect` and `demo` take `--json` and then print exactly one
JSON object on stdout. Errors are one line on stderr (`ppm: error: ...`) and a non-zero
exit code: 2 for bad input, 1 for a failure while running (set PPM_DEBUG=1 for the
traceback instead); see errors.py. Shared options are in args.py, printing helpers in output.py.
"""

from __future__ import annotations

from typing import Any


def register(subparsers: Any) -> None:
    """Add dap, leader, helper, task, upload, collect and demo to the `ppm` parser."""
    from ppm_reference.dap.cli import collect, demo, serve, task, upload, vectors

    for module in (vectors, serve, task, upload, collect, demo):
        module.register(subparsers)
