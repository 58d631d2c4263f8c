"""Secrets at rest: the datastore's HPKE private keys, VDAF verify keys (the task's and
any extra `verify_keys` in its options) and tokens, optionally sealed with AES-256-GCM
under a key from the environment (`PPM_DATASTORE_KEY`).

A sealed value is ``MAGIC || nonce (12 bytes) || ciphertext || tag``, with associated
data naming its table, column and row (a sealed value moved to another row or column does
not open). The datastore keeps a sealed check value, so that a wrong key is reported
when the datastore is opened, not at the first report; without a key, a datastore with
sealed secrets refuses to open with a message naming the variable.

Generate a key with ``python3 -c 'import secrets; print(secrets.token_hex(32))'``.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ppm_reference.dap.core.store import StorageError

KEY_ENV = "PPM_DATASTORE_KEY"
MAGIC = b"PPMSEAL\x01"
_NONCE = 12
KEY_HELP = (f"{KEY_ENV} must be 32 bytes in hex (64 characters) or base64; generate one "
            "with: python3 -c 'import secrets; print(secrets.token_hex(32))'")


class DatastoreKeyError(StorageError):
    """The datastore key is missing, malformed, or not the one the secrets were sealed
    with (one line, naming the environment variable)."""


def parse_key(text: str) -> bytes:
    """A 32-byte key from hex or (url-safe) base64 text."""
    text = text.strip()
    if re.fullmatch(r"[0-9a-fA-F]{64}", text):
        return bytes.fromhex(text)
    try:
        key = base64.b64decode(text.replace("-", "+").replace("_", "/")
                               + "=" * (-len(text) % 4), validate=True)
    except (ValueError, binascii.Error):
        raise DatastoreKeyError(KEY_HELP) from None
    if len(key) != 32:
        raise DatastoreKeyError(KEY_HELP)
    return key


def key_from_env(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key in `PPM_DATASTORE_KEY`, or None when it is unset or empty."""
    value = (os.environ if environ is None else environ).get(KEY_ENV, "")
    return parse_key(value) if value.strip() else None


def is_sealed(value: object) -> bool:
    return isinstance(value, bytes | memoryview) and bytes(value[:len(MAGIC)]) == MAGIC


class SecretBox:
    """AES-256-GCM sealing of datastore secrets under one key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise DatastoreKeyError(KEY_HELP)
        self._aead = AESGCM(key)

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        return MAGIC + nonce + self._aead.encrypt(nonce, plaintext, aad)

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        body = bytes(sealed)[len(MAGIC):]
        try:
            return self._aead.decrypt(body[:_NONCE], body[_NONCE:], aad)
        except (InvalidTag, ValueError):
            raise DatastoreKeyError(f"{KEY_ENV} does not open this datastore's secrets "
                                    "(wrong key, or the value was altered)") from None
