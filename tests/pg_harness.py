"""Running the datastore tests on PostgreSQL as well as SQLite.

`PgDatabase` is a database of its own (``ppm_test_<random>``, created on the server at
127.0.0.1:5432 or at $PPM_TEST_POSTGRES, dropped at the end); each datastore a test
needs is a fresh schema in it (`new_url`), so that a Leader and a Helper, or two tests,
never share tables. `pg_unavailable()` says why PostgreSQL tests skip (no server
answering, or no driver); in CI the server is there and they run.

`pg_use()` is held (shared) while a test uses PostgreSQL, and exclusively by the test
that restarts the server, so that the restart never cuts another test's connections
(a lock file shared by every pytest process on the machine).

`raw_connect(spec)` opens a datastore (a SQLite path or a PostgreSQL URL) for the tests'
own SQL, sqlite3-style (``?`` parameters, ``execute(...).fetchone()``, iteration).
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

ADMIN_URL = os.environ.get("PPM_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
BACKENDS = ("sqlite", "postgresql")

_unavailable: list[str | None] = []


def pg_unavailable() -> str | None:
    """Why PostgreSQL tests cannot run here (None: they can). Asked once per process."""
    if not _unavailable:
        reason: str | None = None
        try:
            import psycopg
        except ImportError:
            reason = "psycopg is not installed (pip install -e '.[test]')"
        else:
            try:
                psycopg.connect(ADMIN_URL, connect_timeout=3).close()
            except psycopg.Error as exc:
                reason = (f"no PostgreSQL server answers at {ADMIN_URL}: "
                          f"{' '.join(str(exc).split())[:200]}")
        _unavailable.append(reason)
    return _unavailable[0]


LOCK_PATH = os.path.join(tempfile.gettempdir(), "ppm-test-postgresql.lock")


@contextmanager
def pg_use(exclusive: bool = False) -> Iterator[None]:
    """Hold the PostgreSQL test lock: shared to use the server, exclusive to restart it."""
    fd = os.open(LOCK_PATH, os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # releases the lock


def require_pg() -> None:
    reason = pg_unavailable()
    if reason is not None:
        pytest.skip(reason)


def url_with_database(url: str, name: str) -> str:
    base, _, query = url.partition("?")
    return base.rsplit("/", 1)[0] + "/" + name + (("?" + query) if query else "")


class PgDatabase:
    """A scratch database; `new_url()` gives each datastore its own schema in it."""

    def __init__(self, admin_url: str = ADMIN_URL) -> None:
        import psycopg

        self.name = "ppm_test_" + secrets.token_hex(5)
        self.admin_url = admin_url
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.name}")
        self.url = url_with_database(admin_url, self.name)
        self._n = 0

    def new_url(self, label: str = "ds", durable: bool = False) -> str:
        """The URL of a fresh, empty schema (search_path set through libpq options).
        Not `durable`: synchronous_commit=off, as the SQLite tests' synchronous=OFF (the
        tests crash Aggregator processes, not the database server)."""
        import psycopg

        self._n += 1
        schema = re.sub(r"[^a-z0-9_]", "_", f"{label.lower()}_{self._n}_{secrets.token_hex(3)}")
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in self.url else "?"
        fast = "" if durable else "%20-csynchronous_commit%3Doff"
        return f"{self.url}{sep}options=-csearch_path%3D{schema}{fast}"

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


class _PgRaw:
    """A PostgreSQL connection with sqlite3's surface, for the tests' own queries."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        if sql.strip().upper() == "BEGIN":  # a consistent snapshot, as SQLite's read
            sql = "BEGIN ISOLATION LEVEL REPEATABLE READ"
        sql = re.sub(r"x'([0-9a-fA-F]*)'", r"'\\x\1'::bytea", sql)
        return self.conn.execute(sql.replace("?", "%s"), tuple(args))

    def close(self) -> None:
        self.conn.close()

    def __iter__(self) -> Iterator[Any]:  # pragma: no cover - not used
        raise TypeError


def is_pg(spec: str) -> bool:
    return spec.startswith(("postgresql://", "postgres://"))


def raw_connect(spec: str, read_only: bool = False) -> Any:
    """sqlite3-like connection to a datastore (SQLite path or PostgreSQL URL)."""
    if is_pg(spec):
        return _PgRaw(spec)
    if read_only:
        return sqlite3.connect(f"file:{spec}?mode=ro", uri=True, timeout=10.0,
                               isolation_level=None)
    return sqlite3.connect(spec, isolation_level=None)
