"""Shared test fixtures.

Tests that need the published material (`../shared` beside the project: specs and test
vectors) use the `shared_dir` fixture, which skips with a visible reason when it is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = PROJECT_ROOT.parent / "shared"


def shared_path(*parts: str) -> Path | None:
    """The path under ../shared, or None when ../shared is absent."""
    path = SHARED_DIR.joinpath(*parts)
    return path if path.exists() else None


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED_DIR.is_dir():
        pytest.skip(f"../shared not found beside the project (looked at {SHARED_DIR})")
    return SHARED_DIR
