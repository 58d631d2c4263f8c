"""How a `ppm` command fails: one line on stderr (`ppm: error: ...`), with `--json` also
`{"ok": false, "error": ...}` on stdout, and exit code 2 for bad input, 1 for a failure
while running (PPM_DEBUG=1: the traceback instead). Layer errors that name a parameter
are reworded with the option that sets it (`needs length` -> `needs --length`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ppm_reference.dap.cli.output import emit_json


class CliError(Exception):
    """A failure to report to the user in one line; `code` is the exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def usage_error(message: str) -> CliError:
    return CliError(message, 2)


# A registry parameter -> its `ppm task create` option, for the registry's messages.
VDAF_OPTIONS = {"length": "--length", "max_measurement": "--max-measurement", "bits": "--bits",
                "max_weight": "--max-weight", "chunk_length": "--chunk-length",
                "max_value": "--max-value"}
# A DP policy parameter (and the VDAF length a policy needs) -> its option.
DP_OPTIONS = {"epsilon": "--epsilon", "delta": "--delta", "eps0": "--eps0", "fp": "--fp",
              "length": "--length"}


def _rewording(options: dict[str, str]) -> Callable[[str], str]:
    word = re.compile(r"\b(" + "|".join(options) + r")\b")
    return lambda message: word.sub(lambda m: options[m.group(1)], message)


_vdaf_words = _rewording(VDAF_OPTIONS)
_dp_words = _rewording(DP_OPTIONS)


def vdaf_usage_error(exc: Exception) -> CliError:
    """A `vdaf.registry` error as a usage error, in the option names (`needs --length`)."""
    return usage_error(_vdaf_words(str(exc)))


def dp_usage_error(exc: Exception) -> CliError:
    """A `dap.dp.DpSpecError` as a usage error, in the option names (`needs --epsilon`)."""
    return usage_error(_dp_words(str(exc)))


@contextmanager
def usage_errors() -> Iterator[None]:
    """Turn the errors the layers raise for bad parameters (VDAF registry, DAP profile, DP
    policy) into usage errors."""
    from ppm_reference.dap.dp import DpSpecError
    from ppm_reference.vdaf.registry import RegistryError

    try:
        yield
    except RegistryError as exc:
        raise vdaf_usage_error(exc) from None
    except DpSpecError as exc:
        raise dp_usage_error(exc) from None
    except ValueError as exc:  # ProfileError, and a policy that does not fit the VDAF
        raise usage_error(str(exc)) from None


def run_command(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command: a CliError or an expected failure becomes one line on stderr (and,
    with --json, `{"ok": false, "error": ...}` on stdout) and a non-zero exit code."""

    def wrapper(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except KeyboardInterrupt:
            print("ppm: interrupted", file=sys.stderr)
            return 130
        except Exception as exc:  # noqa: BLE001 - every failure gets a clear message
            if os.environ.get("PPM_DEBUG"):
                raise
            message, code = describe_error(exc)
            print(f"ppm: error: {message}", file=sys.stderr)
            if getattr(args, "json", False):
                emit_json({"ok": False, "error": message})
            return code

    return wrapper


def describe_error(exc: BaseException) -> tuple[str, int]:
    """A one-line message and exit code for a failure."""
    import aiohttp

    from ppm_reference.dap.admin_client import AdminError
    from ppm_reference.dap.client import UploadError
    from ppm_reference.dap.collector import CollectionError
    from ppm_reference.dap.demo import DemoError
    from ppm_reference.dap.provision import ProvisionError

    if isinstance(exc, CliError):
        return str(exc), exc.code
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect to {exc.host}:{exc.port} ({exc.os_error.strerror or exc})", 1
    if isinstance(exc, aiohttp.ClientError | asyncio.TimeoutError):
        return f"HTTP request failed: {type(exc).__name__} {exc}".strip(), 1
    if isinstance(exc, UploadError | CollectionError | AdminError | ProvisionError | DemoError):
        return str(exc), 1
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""), 1
    return f"{type(exc).__name__}: {exc}", 1
