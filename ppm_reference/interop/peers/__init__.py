"""Test-only drivers of other implementations, built from their published crates.

Each subfolder of this package that holds a ``Cargo.toml`` is one small Cargo project
with pinned versions and a committed ``Cargo.lock`` (built with ``--locked``, so the
lock file is the record of exactly what we test against). The product stays Python:
these programs exist only so that the tests and benchmarks can run the peers'
published code beside ours.

They are built into a cache folder outside the repository, shared by every project
(one ``target/``, so crates common to several peers compile once) and reused between
runs: ``$PPM_PEERS_CACHE`` or, by default, ``~/.cache/ppm-reference/peers``.

    python -m ppm_reference.interop.peers build            # every peer
    python -m ppm_reference.interop.peers build libprio18  # one
    python -m ppm_reference.interop.peers list             # what exists, what is built

The tests call :func:`build` themselves (a no-op when the cache is warm) and skip, with
the reason shown, only when ``cargo`` is absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parent


class PeerBuildError(Exception):
    """A peer could not be built (the message holds cargo's last lines)."""


def cache_dir() -> Path:
    """The folder the peers are built into (created on first use)."""
    env = os.environ.get("PPM_PEERS_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "ppm-reference" / "peers"
    return base


def target_dir() -> Path:
    return cache_dir() / "target"


def projects() -> list[str]:
    """The names of the peer projects (the subfolders with a Cargo.toml), sorted."""
    return sorted(p.parent.name for p in PEERS_DIR.glob("*/Cargo.toml"))


def cargo() -> str | None:
    """The path of ``cargo``, or None when no Rust toolchain is installed."""
    found = shutil.which("cargo")
    if found:
        return found
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "bin" / "cargo"
    return str(home) if home.exists() else None


def binary_names(name: str) -> list[str]:
    """The binaries a project declares (``[[bin]]`` names; default: the package name)."""
    import tomllib

    manifest = tomllib.loads((PEERS_DIR / name / "Cargo.toml").read_text())
    bins = [str(b["name"]) for b in manifest.get("bin", [])]
    return bins or [str(manifest["package"]["name"])]


def binary(name: str, bin_name: str | None = None) -> Path:
    """The path a project's binary is (or will be) built at."""
    return target_dir() / "release" / (bin_name or binary_names(name)[0])


def build(name: str, *, quiet: bool = True) -> Path:
    """Build one peer project (``cargo build --release --locked``) and return its binary.

    Raises :class:`PeerBuildError` when cargo is missing or the build fails.
    """
    if name not in projects():
        raise PeerBuildError(f"no peer project {name!r} (have: {', '.join(projects())})")
    exe = cargo()
    if exe is None:
        raise PeerBuildError("cargo is not installed (install a Rust toolchain to build "
                             "the peers)")
    target_dir().mkdir(parents=True, exist_ok=True)
    cmd = [exe, "build", "--release", "--locked",
           "--manifest-path", str(PEERS_DIR / name / "Cargo.toml"),
           "--target-dir", str(target_dir())]
    if quiet:
        cmd.append("--quiet")
    proc = subprocess.run(cmd, capture_output=quiet, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or "").strip().splitlines()[-20:])
        raise PeerBuildError(f"building peer {name} failed (cargo exit {proc.returncode})"
                             + (f":\n{tail}" if tail else ""))
    return binary(name)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ("build", "list"):
        print("usage: python -m ppm_reference.interop.peers build [NAME ...] | list",
              file=sys.stderr)
        return 2
    if args[0] == "list":
        for name in projects():
            built = all(binary(name, b).exists() for b in binary_names(name))
            print(f"{name}\t{'built' if built else 'not built'}\t{binary(name)}")
        return 0
    names = args[1:] or projects()
    for name in names:
        start = time.monotonic()
        try:
            build(name, quiet=False)
        except PeerBuildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"built {name} in {time.monotonic() - start:.1f} s -> {binary(name)}")
    return 0
