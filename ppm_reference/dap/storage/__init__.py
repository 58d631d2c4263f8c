"""The Aggregators' datastore backends: ``dap.storage.sqlite`` (embedded, the default)
and ``dap.storage.postgres`` (several processes or machines sharing one database; the
``postgresql`` extra installs its driver). `open_datastore` picks one from the
configuration's ``datastore``: a ``postgresql://`` (or ``postgres://``) URL, or a path.

The records, states and the ``Transaction`` / ``Datastore`` interface they implement are
the protocol core's (:mod:`dap.core.store`) and are re-exported here.
"""

from __future__ import annotations

import re

from ppm_reference.dap.core.store import (
    AggregateShareJobRecord,
    AggregateShareJobState,
    AggregationJobRecord,
    AggregationJobState,
    BatchBucketRecord,
    BatchResultRecord,
    ClientReportRecord,
    CollectionJobRecord,
    CollectionJobState,
    Datastore,
    HpkeKeyRecord,
    HpkeKeyState,
    LeaderBatchRecord,
    LeaderBatchState,
    ReportAggregationRecord,
    ReportAggregationState,
    ReportState,
    StorageError,
    TaskRecord,
    TaskWorkRecord,
    Transaction,
    iter_chunks,
)

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def redact_url(url: str) -> str:
    """A datastore spec for messages and logs: a URL without its password."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparsable URL>"
    if password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def is_datastore_url(spec: str) -> bool:
    """Whether a configured ``datastore`` is a URL (not a SQLite path)."""
    return _URL.match(spec) is not None


def open_datastore(spec: str, *, sqlite_synchronous: str = "FULL", key: bytes | None = None,
                   key_from_env: bool = True, pool_size: int = 4) -> Datastore:
    """Open the datastore a configuration names: PostgreSQL for a ``postgresql://`` or
    ``postgres://`` URL, otherwise the SQLite file at that path. Any failure (a bad URL,
    an unreachable server, a schema newer than this code, the wrong key) is a
    one-line `StorageError`, and nothing is written."""
    match = _URL.match(spec)
    if match is None:
        from ppm_reference.dap.storage.sqlite import SqliteDatastore

        try:
            return SqliteDatastore(spec, sqlite_synchronous, key=key, key_from_env=key_from_env)
        except StorageError:
            raise
        except Exception as exc:  # sqlite3 and OS errors: one line naming the file
            raise StorageError(f"cannot open the datastore {spec}: {exc}") from None
    if match.group(1).lower() not in ("postgresql", "postgres"):
        raise StorageError(f"unsupported datastore URL scheme {match.group(1)!r}: use "
                           "postgresql://USER@HOST:PORT/DATABASE or a SQLite file path")
    try:
        from ppm_reference.dap.storage.postgres import PostgresDatastore
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("psycopg", "psycopg_pool"):
            raise
        raise StorageError(f"a PostgreSQL datastore needs psycopg ({exc}): install "
                           "ppm-reference[postgresql]") from None
    return PostgresDatastore(spec, key=key, key_from_env=key_from_env, pool_size=pool_size)


__all__ = [
    "AggregateShareJobRecord",
    "AggregateShareJobState",
    "AggregationJobRecord",
    "AggregationJobState",
    "BatchBucketRecord",
    "BatchResultRecord",
    "ClientReportRecord",
    "CollectionJobRecord",
    "CollectionJobState",
    "Datastore",
    "HpkeKeyRecord",
    "HpkeKeyState",
    "LeaderBatchRecord",
    "LeaderBatchState",
    "ReportAggregationRecord",
    "ReportAggregationState",
    "ReportState",
    "StorageError",
    "TaskRecord",
    "TaskWorkRecord",
    "Transaction",
    "is_datastore_url",
    "iter_chunks",
    "open_datastore",
    "redact_url",
]
