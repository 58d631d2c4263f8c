"""Secrets at rest (issue 12): the SQLite datastore and its -wal/-shm files are created
0600 (an existing world-readable one is tightened), and with PPM_DATASTORE_KEY the HPKE
private keys, VDAF verify keys, tokens and task options are sealed with AES-256-GCM
(dap/storage/secrets.py): not in the file in the clear, a wrong or missing key refused
with one clear line, a plaintext datastore migrated when first opened with a key."""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppm_reference.dap.core.rand import OS_RNG
from ppm_reference.dap.core.tasks import add_hpke_key
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.provision import new_task
from ppm_reference.dap.storage import HpkeKeyState
from ppm_reference.dap.storage.secrets import (
    KEY_ENV,
    MAGIC,
    DatastoreKeyError,
    SecretBox,
    is_sealed,
    key_from_env,
    parse_key,
)
from ppm_reference.dap.storage.sqlite import SqliteDatastore

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _task(options: dict[str, object] | None = None) -> object:
    profile = get_profile("dap-18")
    pt = new_task(profile.build_vdaf("Prio3Count", {}), "http://l/", "http://h/",
                  profile=profile)
    pt.options.update(options or {"verify_keys": {"1": secrets.token_hex(32)}})
    return pt


def _fill(ds: SqliteDatastore) -> tuple[object, object]:
    pt = _task()
    with ds.transaction() as tx:
        tx.put_task(pt.leader_record)  # type: ignore[attr-defined]
        key = add_hpke_key(tx, HpkeKeyState.ACTIVE, rng=OS_RNG)
    return pt, key


def _raw(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def _secrets_of(pt: object, key: object) -> list[bytes]:
    """The secrets as the datastore would hold them in the clear (options as JSON)."""
    rec = pt.leader_record  # type: ignore[attr-defined]
    return [rec.vdaf_verify_key, rec.aggregator_auth_token.encode(),
            rec.collector_auth_token.encode(),
            json.loads(rec.options)["verify_keys"]["1"].encode(),
            key.private_key]  # type: ignore[attr-defined]


def test_files_are_created_0600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    old = os.umask(0o022)
    try:
        path = tmp_path / "new.sqlite"
        ds = SqliteDatastore(path, "OFF")
        _fill(ds)
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            assert p.exists(), p
            assert _mode(p) == 0o600, (p, oct(_mode(p)))
        ds.close()
    finally:
        os.umask(old)


def test_existing_world_readable_datastore_is_tightened(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    path = tmp_path / "old.sqlite"
    SqliteDatastore(path, "OFF").close()
    path.chmod(0o644)
    SqliteDatastore(path, "OFF").close()
    assert _mode(path) == 0o600


def test_secrets_sealed_with_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a key, none of the secrets is in the file or its WAL in the clear, and the
    records read back equal; without the key, or with another, the datastore refuses to
    open, naming the variable."""
    key = secrets.token_bytes(32)
    monkeypatch.setenv(KEY_ENV, key.hex())
    path = tmp_path / "sealed.sqlite"
    ds = SqliteDatastore(path, "OFF")
    assert ds.encrypted
    pt, hpke = _fill(ds)
    raw = _raw(path)
    for secret in _secrets_of(pt, hpke):
        assert secret not in raw, secret
    assert MAGIC in raw
    with ds.transaction() as tx:
        assert tx.get_task(pt.task.task_id) == pt.leader_record  # type: ignore[attr-defined]
        assert [k.private_key for k in tx.list_hpke_keys()] == [hpke.private_key]  # type: ignore[attr-defined]
    ds.close()

    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(DatastoreKeyError, match=KEY_ENV):
        SqliteDatastore(path, "OFF")
    with pytest.raises(DatastoreKeyError, match="is not the key of the datastore"):
        SqliteDatastore(path, "OFF", key=secrets.token_bytes(32))
    again = SqliteDatastore(path, "OFF", key=key, key_from_env=False)
    with again.transaction() as tx:
        assert tx.get_task(pt.task.task_id) == pt.leader_record  # type: ignore[attr-defined]
    again.close()


def test_plaintext_datastore_is_migrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    """A datastore written without a key keeps working without one; opened with a key
    its secrets are sealed at once, and the plaintext is gone from the file."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    path = tmp_path / "plain.sqlite"
    ds = SqliteDatastore(path, "OFF")
    assert not ds.encrypted
    pt, hpke = _fill(ds)
    ds.close()
    assert all(s in _raw(path) for s in _secrets_of(pt, hpke)), "stored in the clear"
    ds = SqliteDatastore(path, "OFF")  # still readable without a key
    with ds.transaction() as tx:
        assert tx.get_task(pt.task.task_id) == pt.leader_record  # type: ignore[attr-defined]
    ds.close()

    key = secrets.token_bytes(32)
    ds = SqliteDatastore(path, "OFF", key=key)
    with ds.transaction() as tx:
        assert tx.get_task(pt.task.task_id) == pt.leader_record  # type: ignore[attr-defined]
        assert tx.list_hpke_keys()[0].private_key == hpke.private_key  # type: ignore[attr-defined]
    ds.close()
    raw = _raw(path)
    for secret in _secrets_of(pt, hpke):
        assert secret not in raw, secret
    with pytest.raises(DatastoreKeyError):
        SqliteDatastore(path, "OFF", key_from_env=False)


def test_sealed_value_is_bound_to_its_place() -> None:
    box = SecretBox(secrets.token_bytes(32))
    sealed = box.seal(b"token", b"tasks|aggregator_auth_token|A")
    assert is_sealed(sealed) and box.open(sealed, b"tasks|aggregator_auth_token|A") == b"token"
    with pytest.raises(DatastoreKeyError):
        box.open(sealed, b"tasks|aggregator_auth_token|B")


@given(st.binary(max_size=300), st.binary(max_size=40), st.integers(0, 299))
def test_seal_roundtrip_and_tamper_property(plaintext: bytes, aad: bytes, flip: int) -> None:
    box = SecretBox(bytes(range(32)))
    sealed = box.seal(plaintext, aad)
    assert box.open(sealed, aad) == plaintext
    assert len(sealed) == len(MAGIC) + 12 + len(plaintext) + 16
    index = len(MAGIC) + flip % (len(sealed) - len(MAGIC))
    tampered = bytearray(sealed)
    tampered[index] ^= 1
    with pytest.raises(DatastoreKeyError):
        box.open(bytes(tampered), aad)


def test_key_formats() -> None:
    key = secrets.token_bytes(32)
    import base64

    assert parse_key(key.hex()) == key
    assert parse_key(base64.b64encode(key).decode()) == key
    assert parse_key(base64.urlsafe_b64encode(key).decode().rstrip("=")) == key
    for bad in ("abc", key.hex()[:-2], "!" * 44, base64.b64encode(key[:16]).decode()):
        with pytest.raises(DatastoreKeyError, match=KEY_ENV):
            parse_key(bad)
    assert key_from_env({}) is None and key_from_env({KEY_ENV: " "}) is None
    assert key_from_env({KEY_ENV: key.hex()}) == key


def test_server_refuses_an_encrypted_datastore_without_its_key(tmp_path: Path) -> None:
    """`python -m ppm_reference.dap.server` on a sealed datastore without the key: one line, exit 2."""
    key = secrets.token_bytes(32)
    SqliteDatastore(tmp_path / "leader.sqlite", "OFF", key=key).close()
    config = tmp_path / "leader.json"
    config.write_text(json.dumps({"role": "leader", "datastore": "leader.sqlite",
                                  "listen_port": 1}))
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    proc = subprocess.run([sys.executable, "-m", "ppm_reference.dap.server", str(config)], env=env,
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and KEY_ENV in lines[0] and "Traceback" not in proc.stderr, \
        proc.stderr
