"""Test support for the peers of `interop.peers`: build on first use, skip without cargo.

    from tests.peers import peer_binary
    exe = peer_binary("libprio18")          # skips (reason shown) only if cargo is absent

A build failure is a test failure, not a skip: in CI cargo is present and every peer
must build.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from ppm_reference.interop import peers


@functools.cache
def _build(name: str) -> Path:
    return peers.build(name)


def peer_binary(name: str, bin_name: str | None = None) -> Path:
    if peers.cargo() is None:
        pytest.skip(f"cargo is not installed: the {name} peer cannot be built")
    try:
        _build(name)
    except peers.PeerBuildError as exc:
        pytest.fail(str(exc))
    return peers.binary(name, bin_name)
