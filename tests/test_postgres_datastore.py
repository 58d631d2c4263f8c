"""The PostgreSQL datastore (dap.storage.postgres) beyond the suites it shares with SQLite
(crash and simulation suites, parametrized by backend):

* `ppm leader` / `ppm helper` with a bad datastore URL, a database that is down (a
  port nothing listens on), a schema newer than the code: a one-line error, exit code
  1, no traceback, and nothing written;
* transactions that PostgreSQL aborts are retried when that is safe (replaying what
  they read) and refused when not;
* `acquire_aggregation_jobs` from concurrent transactions never leases a job twice;
* a PostgreSQL restart in the middle of a run (`pg_ctlcluster ... restart`): every
  acknowledged report is counted exactly once and nothing is released below
  min_batch_size. It runs in a database of its own and in its own xdist group; other
  PostgreSQL users (other tests, other processes on the machine) are disconnected for
  the moment of the restart, which the datastore's retries absorb.

Skipped with the reason where no PostgreSQL server answers (tests.pg_harness).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.dap.storage import (
    AggregationJobRecord,
    ClientReportRecord,
    StorageError,
    open_datastore,
)
from tests.dap_harness import PROTOS, free_port
from tests.pg_harness import PgDatabase, pg_unavailable, pg_use, url_with_database

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TID = bytes(range(32))


@pytest.fixture(autouse=True)
def _need_pg(request: pytest.FixtureRequest) -> Iterator[None]:
    reason = pg_unavailable()
    if reason is not None:
        pytest.skip(reason)
    if request.node.get_closest_marker("pg_restart") is not None:
        yield  # takes the lock exclusively itself
    else:
        with pg_use():
            yield


_MANY = """
import json, os, sys
from ppm_reference.cli import main
for config, env in json.loads(sys.argv[1]):
    os.environ.update(env)
    try:
        code = main([json.load(open(config))["role"], "--config", config])
    except SystemExit as exc:
        code = exc.code
    print(f"@@rc={code}", file=sys.stderr, flush=True)
"""


def run_ppm(tmp_path: Path, cases: list[tuple[str, str, dict[str, str]]]
            ) -> list[tuple[int, str]]:
    """Run `ppm ROLE --config FILE` for each (role, datastore, env) case, in one Python
    process (one start-up): [(exit code, stderr)]."""
    runs = []
    for i, (role, datastore, env) in enumerate(cases):
        config = tmp_path / f"{role}{i}.json"
        config.write_text(json.dumps({"role": role, "datastore": datastore,
                                      "listen_port": free_port()}))
        runs.append((str(config), env))
    result = subprocess.run([sys.executable, "-c", _MANY, json.dumps(runs)],
                            capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT)
    out = []
    err = result.stderr
    for _ in cases:
        text, _, err = err.partition("@@rc=")
        code, _, err = err.partition("\n")
        out.append((int(code) if code.isdigit() else -1, text))
    assert "Traceback" not in result.stderr, result.stderr
    return out


def assert_one_line_error(result: tuple[int, str], *needles: str) -> None:
    code, err = result[0], result[1].strip()
    assert code == 1, result
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err


def test_bad_urls_and_server_down(tmp_path: Path) -> None:
    """Bad URLs, a server that is down (nothing listens on the port), a password in the
    URL: one line each, exit code 1, no file written, the password not shown."""
    port = free_port()
    cases = [
        ("postgresql://postgres@127.0.0.1:notaport/db", "invalid datastore URL"),
        ("postgresql://postgres@127.0.0.1:5432", "name the database"),
        ("postgresq://postgres@127.0.0.1:5432/db", "unsupported datastore URL scheme"),
        ("postgresql://postgres@127.0.0.1:5432/db?bogus_option=1", "invalid datastore URL"),
        (f"postgresql://postgres@127.0.0.1:{port}/ppm", "cannot connect to the datastore"),
        (f"postgresql://u:s3cret@127.0.0.1:{port}/db", "cannot connect to the datastore"),
    ]
    results = run_ppm(tmp_path, [("leader", url, {}) for url, _ in cases])
    for (_, needle), result in zip(cases, results, strict=True):
        assert_one_line_error(result, needle)
    assert "s3cret" not in results[-1][1] and "u:***@" in results[-1][1]
    assert all(p.suffix == ".json" for p in tmp_path.iterdir())  # no datastore file made


@pytest.fixture(scope="module")
def own_db() -> Iterator[PgDatabase]:
    with pg_use():
        db = PgDatabase()
    try:
        yield db
    finally:
        with pg_use():
            db.drop()


def _tables(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        return sorted(r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE "
            "table_schema = current_schema()"))


def test_newer_schema_is_refused_and_nothing_written(tmp_path: Path, own_db: PgDatabase
                                                     ) -> None:
    import psycopg

    url = own_db.new_url("newer")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (99)")
    result, = run_ppm(tmp_path, [("leader", url, {})])
    assert_one_line_error(result, "schema version 99", "upgrade")
    assert _tables(url) == ["schema_version"]
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(99,)]


def test_missing_database_and_wrong_key(tmp_path: Path, own_db: PgDatabase) -> None:
    missing = url_with_database(own_db.url, own_db.name + "_missing")
    sealed = own_db.new_url("sealed")
    open_datastore(sealed, key=bytes.fromhex("11" * 32)).close()
    results = run_ppm(tmp_path, [("leader", missing, {}),
                                 ("leader", sealed, {"PPM_DATASTORE_KEY": "22" * 32}),
                                 ("helper", sealed, {"PPM_DATASTORE_KEY": ""})])
    assert_one_line_error(results[0], "does not exist")
    assert_one_line_error(results[1], "PPM_DATASTORE_KEY is not the key")
    assert_one_line_error(results[2], "encrypted secrets")


def test_migrations_are_idempotent_and_concurrent(own_db: PgDatabase) -> None:
    """Processes starting together migrate once (advisory lock)."""
    url = own_db.new_url("concurrent")
    errors: list[BaseException] = []

    def open_close() -> None:
        try:
            open_datastore(url, key_from_env=False).close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_close) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert "client_reports" in _tables(url)


def test_conflicting_transactions_retry_only_when_safe(own_db: PgDatabase) -> None:
    """Concurrent (serializable) mode. Two transactions that read and write the same
    rows: PostgreSQL aborts one. The one whose reads are unchanged on replay is retried
    and commits; the one whose reads changed raises (and nothing of it is stored)."""
    from ppm_reference.dap.storage.postgres import PostgresDatastore

    url = own_db.new_url("conflict")
    ds = PostgresDatastore(url, key_from_env=False, concurrency="serializable")
    try:
        with ds.transaction() as tx:
            tx.put_client_report(ClientReportRecord(TID, b"a" * 16, 1, b"x", created_at=1.0))
        # T1 reads the report count, T2 inserts a report and commits, then T1 writes
        # what it decided from its (now stale) count: a true conflict.
        barrier = threading.Event()
        done = threading.Event()

        def other() -> None:
            barrier.wait()
            with ds.transaction() as tx2:
                tx2.put_client_report(ClientReportRecord(TID, b"b" * 16, 1, b"x",
                                                         created_at=2.0))
                tx2.count_reports(TID, ("new",))  # type: ignore[arg-type]
            done.set()

        thread = threading.Thread(target=other)
        thread.start()
        with pytest.raises(StorageError, match="changed|aborted"), ds.transaction() as tx:
            n = tx.count_reports(TID, ("new",))  # type: ignore[arg-type]
            barrier.set()
            assert done.wait(30)
            tx.put_client_report(ClientReportRecord(TID, bytes([n]) * 16, 1, b"y",
                                                    created_at=3.0))
        thread.join()
        with ds.transaction() as tx:
            ids = {r.report_id for r in tx.list_new_reports(TID, 10)}
        assert ids == {b"a" * 16, b"b" * 16}  # T1 wrote nothing
        # A retry that is safe: the conflicting write does not change what T1 read.
        barrier.clear()
        done.clear()

        def unrelated() -> None:
            barrier.wait()
            with ds.transaction() as tx2:
                tx2.count_reports(TID, ("new",))  # type: ignore[arg-type]
                tx2.put_client_report(ClientReportRecord(bytes(32), b"c" * 16, 1, b"x",
                                                         created_at=4.0))
            done.set()

        thread = threading.Thread(target=unrelated)
        thread.start()
        with ds.transaction() as tx:
            n = tx.count_reports(TID, ("new",))  # type: ignore[arg-type]
            barrier.set()
            assert done.wait(30)
            tx.put_client_report(ClientReportRecord(TID, bytes([n]) * 16, 1, b"z",
                                                    created_at=5.0))
        thread.join()
        with ds.transaction() as tx:
            assert len(tx.list_new_reports(TID, 10)) == 3
    finally:
        ds.close()


@pytest.mark.parametrize("concurrency", ["exclusive", "serializable"])
def test_concurrent_acquire_never_leases_a_job_twice(own_db: PgDatabase, concurrency: str
                                                     ) -> None:
    from ppm_reference.dap.storage.postgres import PostgresDatastore

    url = own_db.new_url("lease")
    ds = PostgresDatastore(url, key_from_env=False, pool_size=4, concurrency=concurrency)
    try:
        with ds.transaction() as tx:
            for i in range(60):
                tx.put_aggregation_job(AggregationJobRecord(
                    TID, i.to_bytes(16, "big"), "leader", "active", 0, b"",  # type: ignore
                    created_at=float(i)))
        taken: list[bytes] = []
        lock = threading.Lock()

        def driver() -> None:
            for _ in range(10):
                try:
                    with ds.transaction() as tx:
                        jobs = tx.acquire_aggregation_jobs("leader", 100.0, 60.0, 3)
                except StorageError:
                    continue  # an aborted acquisition leases nothing
                with lock:
                    taken.extend(j.job_id for j in jobs)

        threads = [threading.Thread(target=driver) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(taken) == len(set(taken)) and taken
        with ds.transaction() as tx:
            assert len(tx.acquire_aggregation_jobs("leader", 100.0, 60.0, 100)) == \
                60 - len(taken)
    finally:
        ds.close()


def test_exclusive_transactions_lose_no_update(own_db: PgDatabase) -> None:
    """The default mode: read-modify-write transactions from several threads and two
    datastores (as two processes would) never overlap: no increment is lost and no
    transaction fails."""
    from ppm_reference.dap.storage import TaskWorkRecord

    url = own_db.new_url("exclusive")
    stores = [open_datastore(url, key_from_env=False), open_datastore(url, key_from_env=False)]
    try:
        with stores[0].transaction() as tx:
            tx.put_task_work(TaskWorkRecord(TID, 0, 0.0, ""))

        def bump(ds: Any) -> None:
            for _ in range(15):
                with ds.transaction() as tx:
                    work = tx.get_task_work(TID)
                    assert work is not None
                    time.sleep(0.001)  # a window for another writer, were there one
                    work.attempts += 1
                    tx.put_task_work(work)

        threads = [threading.Thread(target=bump, args=(stores[i % 2],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with stores[1].transaction() as tx:
            work = tx.get_task_work(TID)
        assert work is not None and work.attempts == 60
    finally:
        for ds in stores:
            ds.close()


# -- a PostgreSQL restart in the middle of a run ----------------------------------------------


def _cluster_version() -> str | None:
    try:
        versions = sorted(os.listdir("/etc/postgresql"), key=lambda v: float(v))
    except (OSError, ValueError):
        return None
    return versions[-1] if versions else None


@pytest.mark.pg_restart
@pytest.mark.xdist_group("pg_restart")
def test_postgres_restart_mid_run(tmp_path: Path) -> None:
    """Holds the PostgreSQL test lock exclusively: no other test (of any pytest process
    here) uses the server during the restart."""
    with pg_use(exclusive=True):
        _restart_mid_run(tmp_path)


def _restart_mid_run(tmp_path: Path) -> None:
    from ppm_reference.dap.common import BatchMode
    from ppm_reference.dap.provision import new_task
    from tests.test_dap_crash import (
        Cluster,
        check_exactly_once,
        provision,
        report_states,
        upload,
        wait_until,
    )

    version = _cluster_version()
    if shutil.which("pg_ctlcluster") is None or version is None or os.geteuid() != 0:
        pytest.skip("cannot restart PostgreSQL here (needs pg_ctlcluster, "
                    "/etc/postgresql/VERSION and root)")
    db = PgDatabase()
    cluster = Cluster(tmp_path, lambda role: db.new_url(role, durable=True))
    try:
        proto = PROTOS[0]
        rng = random.Random(7)
        helper = cluster.aggregator("helper")
        leader = cluster.aggregator("leader", max_job_size=10, job_concurrency=2)
        n, min_batch = 300, 300
        pt = new_task(proto.count(), leader.url, helper.url, batch_mode=BatchMode.LEADER_SELECTED,
                      min_batch_size=min_batch, max_batch_size=min_batch,
                      profile=proto.profile)
        provision(pt, leader, helper)
        helper.start()
        leader.start()
        measurements = [rng.randrange(2) for _ in range(n)]
        asyncio.run(upload(pt, measurements[: n // 2], per_request=30))

        def restart() -> None:
            subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main",
                            "restart"], check=True, capture_output=True, timeout=120)

        wait_until(lambda: report_states(leader.datastore).get("aggregated", 0) >= 20, 60,
                   "aggregation to start")
        started = _postmaster_start(db.url)
        # Restart while the second half is being uploaded and the first aggregated.
        restarter = threading.Timer(0.3, restart)
        restarter.start()
        accepted = _upload_retrying(pt, measurements[n // 2:], per_request=10)
        restarter.join()
        assert _postmaster_start(db.url) != started, "PostgreSQL did not restart"
        assert accepted == n - n // 2
        # Nothing was released early: the batch only fills with every report.
        assert _collected(leader.datastore) == 0
        query = proto.current_batch_query()
        check_exactly_once(pt, leader, helper, measurements, sum(measurements), query)
    finally:
        cluster.kill_all()
        db.drop()


def _postmaster_start(url: str) -> Any:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
        return None if row is None else row[0]


def _collected(spec: str) -> int:
    from tests.test_dap_crash import count_rows

    return count_rows(spec, "SELECT COUNT(*) FROM batch_results")


def _upload_retrying(pt: Any, measurements: list[Any], per_request: int) -> int:
    """Upload in small requests; a request refused while the database restarts is sent
    again (the same reports). The number of reports stored: accepted, or, on a request
    sent again, refused as replays. A commit whose connection the restart cut has an
    unknown outcome and is answered with a 500 (dap.storage.postgres); if it did commit,
    the Aggregator answers the second sending with report_replayed, and those reports
    are stored (and must be counted) all the same."""
    from ppm_reference.dap.client import Client
    from ppm_reference.dap.common import ReportError

    async def go() -> int:
        accepted = 0
        async with Client(pt.task) as client:
            reports = await client.prepare(measurements)
            for i in range(0, len(reports), per_request):
                chunk = reports[i : i + per_request]
                deadline = time.monotonic() + 90
                resent = False
                while True:
                    try:
                        result = await client.upload_reports(chunk)
                    except Exception:  # noqa: BLE001 - 500 during the restart: send again
                        if time.monotonic() > deadline:
                            raise
                        resent = True
                        await asyncio.sleep(0.2)
                        continue
                    refused = [e for e in result.rejected.values()
                               if not (resent and e == ReportError.REPORT_REPLAYED)]
                    accepted += len(chunk) - len(refused)
                    break
        return accepted

    return asyncio.run(go())


# -- secrets at rest, as on SQLite (tests/test_datastore_secrets.py) -------------------------


def _pg_dump(url: str) -> bytes:
    """Every value of the tables holding secrets, as bytes."""
    import psycopg

    out = b""
    with psycopg.connect(url) as conn:
        for table in ("tasks", "hpke_keys", "secrets_meta"):
            for row in conn.execute(f"SELECT * FROM {table}"):
                for v in row:
                    out += v if isinstance(v, bytes) else str(v).encode()
    return out


def test_secrets_sealed_and_plaintext_migrated(own_db: PgDatabase) -> None:
    from ppm_reference.dap.storage.secrets import MAGIC, DatastoreKeyError
    from tests.test_datastore_secrets import _fill, _secrets_of

    url = own_db.new_url("secrets")
    ds = open_datastore(url, key_from_env=False)
    assert not ds.encrypted  # type: ignore[attr-defined]
    pt, hpke = _fill(ds)  # type: ignore[arg-type]
    ds.close()
    assert all(s in _pg_dump(url) for s in _secrets_of(pt, hpke)), "stored in the clear"

    key = os.urandom(32)
    ds = open_datastore(url, key=key)  # the plaintext secrets are sealed at once
    with ds.transaction() as tx:
        assert tx.get_task(pt.task.task_id) == pt.leader_record  # type: ignore[attr-defined]
        assert [k.private_key for k in tx.list_hpke_keys()] == [hpke.private_key]  # type: ignore[attr-defined]
    ds.close()
    raw = _pg_dump(url)
    assert MAGIC.hex().encode() in raw or MAGIC in raw
    for secret in _secrets_of(pt, hpke):
        assert secret not in raw, secret
    with pytest.raises(DatastoreKeyError, match="PPM_DATASTORE_KEY"):
        open_datastore(url, key_from_env=False)
    with pytest.raises(DatastoreKeyError, match="is not the key"):
        open_datastore(url, key=os.urandom(32))


def test_config_keeps_datastore_urls(tmp_path: Path) -> None:
    from ppm_reference.dap.server.config import AggregatorConfig, ConfigError

    url = "postgresql://ppm:pw@db.example:5432/leader?sslmode=require"
    path = tmp_path / "leader.json"
    path.write_text(json.dumps({"role": "leader", "datastore": url}))
    config = AggregatorConfig.load(path)
    assert config.datastore == url
    with pytest.raises(ConfigError, match="ohttp_key_file"):
        config.gateway_key_path()
    path.write_text(json.dumps({"role": "leader", "datastore": "l.sqlite"}))
    assert AggregatorConfig.load(path).datastore == str(tmp_path.resolve() / "l.sqlite")


def test_provisioning_into_a_postgres_datastore(own_db: PgDatabase) -> None:
    """`ppm task create --leader-config` writes the task into a PostgreSQL datastore as
    into a SQLite one (dap.provision.DatastoreTarget)."""
    from ppm_reference.dap.profiles import get_profile
    from ppm_reference.dap.provision import DatastoreTarget, new_task
    from ppm_reference.dap.server.config import AggregatorConfig

    url = own_db.new_url("provision")
    config = AggregatorConfig(role="leader", datastore=url)
    profile = get_profile("dap-19")
    pt = new_task(profile.build_vdaf("Prio3Count", {}), "http://l/", "http://h/",
                  profile=profile)
    target = DatastoreTarget("leader", config)
    target.put(pt)
    target.put(pt)  # the same task again: nothing changes
    ds = open_datastore(url, key_from_env=False)
    try:
        with ds.transaction() as tx:
            assert tx.list_tasks() == [pt.leader_record]
    finally:
        ds.close()
    assert "***" not in target.where and url.split("?")[0] in target.where


def test_version_1_schema_without_the_lease_tables_gets_them(own_db: PgDatabase) -> None:
    """A version-1 schema made before the lease token, `work_leases` and the due-work
    indexes were added to version 1 gets them when opened; its jobs keep their rows."""
    import psycopg

    url = own_db.new_url("late")
    open_datastore(url, key_from_env=False).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE work_leases")
        conn.execute("DROP INDEX client_reports_new_tasks")
        conn.execute("DROP INDEX aggregate_share_jobs_state")
        conn.execute("ALTER TABLE aggregation_jobs DROP COLUMN lease_token")
        conn.execute("INSERT INTO aggregation_jobs VALUES (%s, %s, 'leader', 'active', 0, "
                     "'', NULL, 'r', 'h', '', NULL, NULL, 0, 0, 0, NULL, 1)",
                     (TID, b"j" * 16))
    ds = open_datastore(url, key_from_env=False)
    try:
        with ds.transaction() as tx:
            old = tx.get_aggregation_job(TID, b"j" * 16)
            assert old is not None and old.lease_token == b""
            [leased] = tx.acquire_aggregation_jobs("leader", 10.0, 5.0, 5)
            assert len(leased.lease_token) == 16
            assert tx.get_leased_aggregation_job(TID, b"j" * 16, leased.lease_token) == leased
            assert tx.try_lease("retention", b"leader", b"A", 10.0, 5.0)
            tx.put_client_report(ClientReportRecord(TID, b"r" * 16, 5, b"x"))
            assert tx.tasks_with_new_reports(5) == [TID]
    finally:
        ds.close()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(1,)]
        indexes = {r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}
    assert {"client_reports_new_tasks", "aggregate_share_jobs_state"} <= indexes
    open_datastore(url, key_from_env=False).close()  # and again: nothing more to add


def test_work_notification_payloads() -> None:
    """A payload is the schema, then the hex IDs of the news' tasks: matched against the
    listener's schema as a whole (a quoted schema name may contain spaces)."""
    from ppm_reference.dap.storage.postgres import _news_of
    a, b = bytes(range(32)), bytes(32)
    assert _news_of("s", "s") == (True, None)
    assert _news_of(f"s {a.hex()} {b.hex()}", "s") == (True, {a, b})
    assert _news_of(f"my schema {a.hex()}", "my schema") == (True, {a})
    assert _news_of("my schema", "my schema") == (True, None)
    assert _news_of(f"my {a.hex()}", "my schema")[0] is False
    assert _news_of("my schema", "my")[0] is False       # another schema's
    assert _news_of("s2", "s")[0] is False
    assert _news_of("s zz", "s")[0] is False             # schema "s zz"'s
    assert _news_of("", None)[0] is False


def test_work_notifications_wake_other_processes_of_the_same_schema(own_db: PgDatabase
                                                                    ) -> None:
    """notify_work / listen_work (dap.server.scheduling.WorkNotifier) by NOTIFY/LISTEN:
    a listener is woken by another datastore's notification for its role in its schema,
    not by another role's or another schema's (notifications reach every listener of
    the database in one order, so the listeners' first wake-ups show what they got)."""
    url, other_url = own_db.new_url("notify"), own_db.new_url("notify_other")
    stores = [open_datastore(u, key_from_env=False) for u in (url, url, other_url, url)]
    listener, sender, other_schema, helper_listener = stores
    got: dict[str, list[int]] = {"leader": [], "other": [], "helper": []}
    named: dict[str, list[set[bytes] | None]] = {name: [] for name in got}
    events = {name: threading.Event() for name in got}

    def on(name: str) -> Any:
        def callback(task_ids: set[bytes] | None) -> None:
            got[name].append(len(got["leader"]) + len(got["other"]) + len(got["helper"]))
            named[name].append(task_ids)
            events[name].set()
        return callback

    try:
        listener.listen_work("leader", on("leader"))                # type: ignore[attr-defined]
        other_schema.listen_work("leader", on("other"))             # type: ignore[attr-defined]
        helper_listener.listen_work("helper", on("helper"))         # type: ignore[attr-defined]
        for ds in (listener, other_schema, helper_listener):
            assert ds.wait_listening(20)                            # type: ignore[attr-defined]
        sender.notify_work("leader")                                # type: ignore[attr-defined]
        assert events["leader"].wait(20), "no wake-up within 20 s"
        sender.notify_work("helper")                                # type: ignore[attr-defined]
        assert events["helper"].wait(20)
        other_schema.notify_work("leader")                          # type: ignore[attr-defined]
        assert events["other"].wait(20)
        # Each listener woke first for its own notification, none for the others'.
        assert len(got["leader"]) == 1 and len(got["helper"]) == 1
        assert got["other"][0] == 2
        assert named["leader"] == [None] and named["helper"] == [None]
        # News of a few tasks names them (a driver then looks again only at those);
        # of more than NOTIFY_MAX_TASKS, none (any task).
        from ppm_reference.dap.storage import postgres
        few = {bytes([i]) * 32 for i in range(3)}
        many = {i.to_bytes(32, "big") for i in range(postgres.NOTIFY_MAX_TASKS + 1)}
        for ids, want in ((few, few), (many, None)):
            events["leader"].clear()
            sender.notify_work("leader", ids)                       # type: ignore[attr-defined]
            assert events["leader"].wait(20)
            assert named["leader"][-1] == want
    finally:
        for ds in stores:
            ds.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("ppm-pg-listen")]
