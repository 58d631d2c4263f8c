"""Shared test fixtures.

Tests that need the published material (`../shared` beside the project: specs and test
vectors) use the `shared_dir` fixture, which skips with a visible reason when it is absent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.pg_harness import PgDatabase, pg_use, require_pg

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


# -- PostgreSQL (tests.pg_harness) ---------------------------------------------------------


@pytest.fixture(scope="session")
def pg_database() -> Iterator[PgDatabase]:
    """A scratch PostgreSQL database for this test session (one per xdist worker),
    dropped at the end; skips with the reason when no server answers."""
    require_pg()
    with pg_use():
        db = PgDatabase()
    try:
        yield db
    finally:
        with pg_use():
            db.drop()


@pytest.fixture
def datastore_spec(request: pytest.FixtureRequest, tmp_path: Path
                   ) -> Iterator[Callable[[str], str]]:
    """`spec(label)`: a new datastore for the test's `backend` parameter (a SQLite file
    in tmp_path, or a fresh schema of the session's PostgreSQL database, the test
    holding the PostgreSQL test lock: see tests.pg_harness.pg_use); SQLite for a test
    not parametrized by backend."""
    callspec = getattr(request.node, "callspec", None)
    backend = getattr(request, "param", None) or (
        "sqlite" if callspec is None else callspec.params.get("backend", "sqlite"))
    if backend == "postgresql":
        db: PgDatabase = request.getfixturevalue("pg_database")
        with pg_use():
            yield db.new_url
    else:
        yield lambda label: str(tmp_path / f"{label}.sqlite")
