"""HPKE (RFC 9180) for DAP: sealing and key derivation on top of ``pyhpke``, opening
written directly on ``cryptography`` (:func:`open_base`: every report is opened twice, and
the direct open with the parsed private key kept is the faster; pyhpke's open stays as
the reference the tests compare it with).

* :class:`HpkeKeypair` pairs an ``HpkeConfig`` (DAP-18 Section 4.4.1) with its private key;
  :func:`generate_keypair` draws one from the OS CSPRNG and :func:`derive_keypair`
  derives one deterministically (RFC 9180 ``DeriveKeyPair``) for tests and vectors.
* :func:`seal_base` / :func:`open_base` are RFC 9180 ``SealBase`` / ``OpenBase``.
* :func:`seal_input_share` / :func:`open_input_share` (Sections 4.4.2.1, 4.5.3.3) and
  :func:`seal_aggregate_share` / :func:`open_aggregate_share` (Section 4.6.7) apply the
  draft's info strings (from the profile) and associated data (``InputShareAad``,
  ``AggregateShareAad``, both of which embed the ``TaskConfiguration``).

Every algorithm of the RFC 9180 registries that ``pyhpke`` implements is supported: KEMs
P-256, P-384, P-521, X25519, X448; KDFs HKDF-SHA256/384/512; AEADs AES-128-GCM,
AES-256-GCM, ChaCha20Poly1305 (the export-only AEAD cannot seal and is not supported).
DAP-18 allows any HPKE ciphersuite (Section 4.4.1) and mandates X25519 / HKDF-SHA256 /
AES-128-GCM (Section 7).

All failures raise :class:`HpkeError`, the one exception type of this layer, with a
message that says what did not match (config id, key, or authentication).
"""

from __future__ import annotations

import hmac
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric import ec, x448, x25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from pyhpke import AEADId, CipherSuite, KDFId, KEMId, KEMKeyInterface, KEMKeyPair, PyHPKEError

from ppm_reference.dap.common import HpkeCiphertext, HpkeConfig, HpkeConfigList, Role

if TYPE_CHECKING:
    from ppm_reference.dap.profiles.base import Profile


class HpkeError(Exception):
    """Sealing or opening failed, or a configuration is unusable."""


class Kem(IntEnum):
    """HPKE KEM identifiers (RFC 9180 Section 7.1) that we support."""

    DHKEM_P256_HKDF_SHA256 = 0x0010
    DHKEM_P384_HKDF_SHA384 = 0x0011
    DHKEM_P521_HKDF_SHA512 = 0x0012
    DHKEM_X25519_HKDF_SHA256 = 0x0020
    DHKEM_X448_HKDF_SHA512 = 0x0021


class Kdf(IntEnum):
    """HPKE KDF identifiers (RFC 9180 Section 7.2)."""

    HKDF_SHA256 = 0x0001
    HKDF_SHA384 = 0x0002
    HKDF_SHA512 = 0x0003


class Aead(IntEnum):
    """HPKE AEAD identifiers (RFC 9180 Section 7.3) that can seal."""

    AES_128_GCM = 0x0001
    AES_256_GCM = 0x0002
    CHACHA20_POLY1305 = 0x0003


# (Npk, Nsk) of each KEM (RFC 9180 Section 7.1): serialized public and private key sizes.
_KEY_SIZES: dict[Kem, tuple[int, int]] = {
    Kem.DHKEM_P256_HKDF_SHA256: (65, 32),
    Kem.DHKEM_P384_HKDF_SHA384: (97, 48),
    Kem.DHKEM_P521_HKDF_SHA512: (133, 66),
    Kem.DHKEM_X25519_HKDF_SHA256: (32, 32),
    Kem.DHKEM_X448_HKDF_SHA512: (56, 56),
}


def all_suites() -> list[tuple[Kem, Kdf, Aead]]:
    """Every supported (KEM, KDF, AEAD) triple."""
    return list(itertools.product(Kem, Kdf, Aead))


def is_supported(config: HpkeConfig) -> bool:
    """Whether we implement the config's KEM, KDF and AEAD."""
    return (
        config.kem_id in Kem._value2member_map_
        and config.kdf_id in Kdf._value2member_map_
        and config.aead_id in Aead._value2member_map_
    )


def choose_config(configs: HpkeConfigList) -> HpkeConfig:
    """The Aggregator's most preferred config that we support (Section 4.4.1).

    The Client aborts if the list is empty or names no supported algorithm triple."""
    for config in configs.configs:
        if is_supported(config):
            return config
    raise HpkeError("no HPKE config with a supported KEM, KDF and AEAD")


def _suite(config: HpkeConfig) -> CipherSuite:
    if not is_supported(config):
        raise HpkeError(
            f"unsupported HPKE suite kem=0x{config.kem_id:04x} kdf=0x{config.kdf_id:04x} "
            f"aead=0x{config.aead_id:04x}"
        )
    return CipherSuite.new(KEMId(config.kem_id), KDFId(config.kdf_id), AEADId(config.aead_id))


def _public_key(suite: CipherSuite, config: HpkeConfig) -> KEMKeyInterface:
    npk, _ = _KEY_SIZES[Kem(config.kem_id)]
    if len(config.public_key) != npk:
        raise HpkeError(
            f"public key of HPKE config {config.id} is {len(config.public_key)} bytes, "
            f"KEM 0x{config.kem_id:04x} needs {npk}"
        )
    try:
        return suite.kem.deserialize_public_key(config.public_key)
    except (ValueError, PyHPKEError) as exc:
        raise HpkeError(f"invalid public key in HPKE config {config.id}: {exc}") from None


def _serialize_private_key(kem: Kem, key: KEMKeyInterface) -> bytes:
    """RFC 9180 ``SerializePrivateKey`` (pyhpke's EC serialization is not the RFC's)."""
    raw = key.raw
    if isinstance(raw, ec.EllipticCurvePrivateKey):
        return raw.private_numbers().private_value.to_bytes(_KEY_SIZES[kem][1], "big")
    if isinstance(raw, x25519.X25519PrivateKey | x448.X448PrivateKey):
        return raw.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    raise HpkeError(f"cannot serialize private key of type {type(raw).__name__}")


@dataclass(frozen=True)
class HpkeKeypair:
    """An ``HpkeConfig`` with the serialized private key (RFC 9180 SerializePrivateKey)."""

    config: HpkeConfig
    private_key: bytes

    def __repr__(self) -> str:  # never print secrets
        return f"HpkeKeypair(config={self.config!r}, private_key=<{len(self.private_key)} bytes>)"

    def _private(self, suite: CipherSuite) -> KEMKeyInterface:
        _, nsk = _KEY_SIZES[Kem(self.config.kem_id)]
        if len(self.private_key) != nsk:
            raise HpkeError(f"private key is {len(self.private_key)} bytes, need {nsk}")
        try:
            return suite.kem.deserialize_private_key(self.private_key)
        except (ValueError, PyHPKEError) as exc:
            raise HpkeError(f"invalid private key: {exc}") from None


def _keypair_from(config_id: int, kem: Kem, kdf: Kdf, aead: Aead, kp: KEMKeyPair) -> HpkeKeypair:
    config = HpkeConfig(
        id=config_id,
        kem_id=kem,
        kdf_id=kdf,
        aead_id=aead,
        public_key=kp.public_key.to_public_bytes(),
    )
    return HpkeKeypair(config, _serialize_private_key(kem, kp.private_key))


def derive_keypair(
    config_id: int,
    ikm: bytes,
    kem: Kem = Kem.DHKEM_X25519_HKDF_SHA256,
    kdf: Kdf = Kdf.HKDF_SHA256,
    aead: Aead = Aead.AES_128_GCM,
) -> HpkeKeypair:
    """Derive a key pair from ``ikm`` (RFC 9180 Section 7.1.3 ``DeriveKeyPair``)."""
    if len(ikm) < _KEY_SIZES[Kem(kem)][1]:
        # RFC 9180 Section 7.1.3: ikm SHOULD have at least Nsk bytes of entropy.
        raise HpkeError(f"ikm must be at least {_KEY_SIZES[Kem(kem)][1]} bytes")
    suite = CipherSuite.new(KEMId(kem), KDFId(kdf), AEADId(aead))
    return _keypair_from(config_id, Kem(kem), Kdf(kdf), Aead(aead), suite.kem.derive_key_pair(ikm))


def generate_keypair(
    config_id: int,
    kem: Kem = Kem.DHKEM_X25519_HKDF_SHA256,
    kdf: Kdf = Kdf.HKDF_SHA256,
    aead: Aead = Aead.AES_128_GCM,
    random_bytes: Callable[[int], bytes] = os.urandom,
) -> HpkeKeypair:
    """A fresh key pair; the defaults are the suite DAP-18 Section 7 makes mandatory.
    ``random_bytes(n)`` supplies the ``ikm`` (the OS CSPRNG unless the caller passes its
    own randomness, e.g. the protocol core's ``Rng.token_bytes``)."""
    return derive_keypair(config_id, random_bytes(_KEY_SIZES[Kem(kem)][1]), kem, kdf, aead)


def _seal(
    config: HpkeConfig, info: bytes, aad: bytes, plaintext: bytes, eks: bytes | None
) -> HpkeCiphertext:
    suite = _suite(config)
    pkr = _public_key(suite, config)
    ephemeral = suite.kem.derive_key_pair(eks) if eks is not None else None
    try:
        enc, ctx = suite.create_sender_context(pkr, info, eks=ephemeral)
        payload = ctx.seal(plaintext, aad)
    except (ValueError, PyHPKEError) as exc:
        raise HpkeError(f"HPKE seal to config {config.id} failed: {exc}") from None
    return HpkeCiphertext(config_id=config.id, enc=enc, payload=payload)


def seal_base(config: HpkeConfig, info: bytes, aad: bytes, plaintext: bytes) -> HpkeCiphertext:
    """RFC 9180 ``SealBase`` to ``config``, with a fresh ephemeral key."""
    return _seal(config, info, aad, plaintext, None)


def seal_base_deterministic(
    config: HpkeConfig, info: bytes, aad: bytes, plaintext: bytes, ephemeral_ikm: bytes
) -> HpkeCiphertext:
    """``SealBase`` with the ephemeral key derived from ``ephemeral_ikm``.

    FOR TEST VECTORS ONLY. Reusing ``ephemeral_ikm`` with the same recipient and info
    reuses the AEAD key and nonce, which destroys confidentiality and integrity.
    """
    return _seal(config, info, aad, plaintext, ephemeral_ikm)


def open_base(keypair: HpkeKeypair, ciphertext: HpkeCiphertext, info: bytes, aad: bytes) -> bytes:
    """RFC 9180 ``OpenBase``. Raises :class:`HpkeError` if the config id does not match the
    key pair or if decapsulation or authentication fails.

    Written directly on ``cryptography`` (:class:`_Recipient`), with the parsed private key
    cached; the known-answer tests of RFC 9180 Appendix A check it, and
    :func:`_open_base_pyhpke` (the same operation through ``pyhpke``) is kept for the
    tests that compare the two."""
    if ciphertext.config_id != keypair.config.id:
        raise HpkeError(
            f"ciphertext is for HPKE config {ciphertext.config_id}, "
            f"key pair has config {keypair.config.id}"
        )
    return _recipient(keypair).open(bytes(ciphertext.enc), info, aad, bytes(ciphertext.payload))


def _open_base_pyhpke(keypair: HpkeKeypair, ciphertext: HpkeCiphertext, info: bytes,
                      aad: bytes) -> bytes:
    """``OpenBase`` through ``pyhpke`` (the reference the direct open is tested against)."""
    if ciphertext.config_id != keypair.config.id:
        raise HpkeError(f"ciphertext is for HPKE config {ciphertext.config_id}")
    suite = _suite(keypair.config)
    skr = keypair._private(suite)
    try:
        ctx = suite.create_recipient_context(ciphertext.enc, skr, info)
        return ctx.open(ciphertext.payload, aad)
    except (ValueError, PyHPKEError) as exc:
        raise HpkeError(
            f"HPKE open failed (wrong key, info or associated data?): {exc}"
        ) from None


# -- a direct RFC 9180 OpenBase on `cryptography` ---------------------------------------

# KEM -> (hash of its HKDF, Nsecret, Nenc) (RFC 9180 Section 7.1).
_KEM_PARAMS: dict[Kem, tuple[str, int, int]] = {
    Kem.DHKEM_P256_HKDF_SHA256: ("sha256", 32, 65),
    Kem.DHKEM_P384_HKDF_SHA384: ("sha384", 48, 97),
    Kem.DHKEM_P521_HKDF_SHA512: ("sha512", 64, 133),
    Kem.DHKEM_X25519_HKDF_SHA256: ("sha256", 32, 32),
    Kem.DHKEM_X448_HKDF_SHA512: ("sha512", 64, 56),
}
_KDF_HASH = {Kdf.HKDF_SHA256: "sha256", Kdf.HKDF_SHA384: "sha384", Kdf.HKDF_SHA512: "sha512"}
# AEAD -> (Nk, Nn) (RFC 9180 Section 7.3).
_AEAD_PARAMS = {Aead.AES_128_GCM: (16, 12), Aead.AES_256_GCM: (32, 12),
                Aead.CHACHA20_POLY1305: (32, 12)}
_EC_CURVES: dict[Kem, ec.EllipticCurve] = {
    Kem.DHKEM_P256_HKDF_SHA256: ec.SECP256R1(),
    Kem.DHKEM_P384_HKDF_SHA384: ec.SECP384R1(),
    Kem.DHKEM_P521_HKDF_SHA512: ec.SECP521R1(),
}


def _labeled_extract(hash_name: str, suite_id: bytes, salt: bytes, label: bytes,
                     ikm: bytes) -> bytes:
    """``LabeledExtract`` (RFC 9180 Section 4): HKDF-Extract(salt, "HPKE-v1" || suite_id ||
    label || ikm); HKDF-Extract is HMAC keyed with the salt (RFC 5869 Section 2.2)."""
    return hmac.digest(salt, b"HPKE-v1" + suite_id + label + ikm, hash_name)


def _labeled_expand(hash_name: str, suite_id: bytes, prk: bytes, label: bytes, info: bytes,
                    length: int) -> bytes:
    """``LabeledExpand`` (RFC 9180 Section 4): HKDF-Expand(prk, I2OSP(L, 2) || "HPKE-v1" ||
    suite_id || label || info, L) (RFC 5869 Section 2.3)."""
    labeled = length.to_bytes(2, "big") + b"HPKE-v1" + suite_id + label + info
    out, block = b"", b""
    counter = 1
    while len(out) < length:
        block = hmac.digest(prk, block + labeled + bytes([counter]), hash_name)
        out += block
        counter += 1
    return out[:length]


class _Recipient:
    """A parsed private key with what ``OpenBase`` derives from the suite alone: the KEM's
    ``SetupBaseR`` (``Decap``, RFC 9180 Section 4.1) and key schedule (Section 5.1, mode
    ``mode_base``, default PSK) and the first ``Open`` (Section 5.2, sequence number 0)."""

    def __init__(self, keypair: HpkeKeypair) -> None:
        config = keypair.config
        suite = _suite(config)  # raises HpkeError for an unsupported suite
        self.kem = Kem(config.kem_id)
        kdf, aead = Kdf(config.kdf_id), Aead(config.aead_id)
        raw = keypair._private(suite).raw  # pyhpke validates the serialized key
        self.sk: Any = raw
        if isinstance(raw, ec.EllipticCurvePrivateKey):
            self.pkrm = raw.public_key().public_bytes(Encoding.X962,
                                                      PublicFormat.UncompressedPoint)
        else:
            self.pkrm = raw.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.kem_hash, self.nsecret, self.nenc = _KEM_PARAMS[self.kem]
        self.kem_suite_id = b"KEM" + int(self.kem).to_bytes(2, "big")
        self.suite_id = (b"HPKE" + int(self.kem).to_bytes(2, "big")
                         + int(kdf).to_bytes(2, "big") + int(aead).to_bytes(2, "big"))
        self.kdf_hash = _KDF_HASH[kdf]
        self.nk, self.nn = _AEAD_PARAMS[aead]
        self.aead_cls = ChaCha20Poly1305 if aead == Aead.CHACHA20_POLY1305 else AESGCM
        # psk_id_hash = LabeledExtract("", "psk_id_hash", default_psk_id = "")
        self.psk_id_hash = _labeled_extract(self.kdf_hash, self.suite_id, b"",
                                            b"psk_id_hash", b"")
        self._contexts: dict[bytes, bytes] = {}

    def _dh(self, enc: bytes) -> bytes:
        """``DH(skR, DeserializePublicKey(enc))``; cryptography refuses an all-zero X25519
        / X448 output and points off the curve (RFC 9180 Section 7.1.4)."""
        if len(enc) != self.nenc:
            raise ValueError(f"enc is {len(enc)} bytes, KEM needs {self.nenc}")
        sk = self.sk
        if isinstance(sk, x25519.X25519PrivateKey):
            return sk.exchange(x25519.X25519PublicKey.from_public_bytes(enc))
        if isinstance(sk, x448.X448PrivateKey):
            return sk.exchange(x448.X448PublicKey.from_public_bytes(enc))
        if enc[0] != 4:
            raise ValueError("enc is not an uncompressed point")
        pk = ec.EllipticCurvePublicKey.from_encoded_point(_EC_CURVES[self.kem], enc)
        return bytes(sk.exchange(ec.ECDH(), pk))

    def _context(self, info: bytes) -> bytes:
        """``key_schedule_context = mode || psk_id_hash || info_hash`` (one per info)."""
        ctx = self._contexts.get(info)
        if ctx is None:
            info_hash = _labeled_extract(self.kdf_hash, self.suite_id, b"", b"info_hash", info)
            ctx = b"\x00" + self.psk_id_hash + info_hash
            if len(self._contexts) < 64:
                self._contexts[bytes(info)] = ctx
        return ctx

    def open(self, enc: bytes, info: bytes, aad: bytes, ct: bytes) -> bytes:
        try:
            dh = self._dh(enc)
        except ValueError as exc:
            raise HpkeError(f"HPKE open failed (wrong key, info or associated data?): "
                            f"{exc}") from None
        # ExtractAndExpand (Section 4.1) with kem_context = enc || pkRm.
        h, sid = self.kem_hash, self.kem_suite_id
        eae_prk = _labeled_extract(h, sid, b"", b"eae_prk", dh)
        shared = _labeled_expand(h, sid, eae_prk, b"shared_secret", enc + self.pkrm,
                                 self.nsecret)
        # KeySchedule (Section 5.1), mode_base, psk = "".
        kh, suite = self.kdf_hash, self.suite_id
        ctx = self._context(info)
        secret = _labeled_extract(kh, suite, shared, b"secret", b"")
        key = _labeled_expand(kh, suite, secret, b"key", ctx, self.nk)
        base_nonce = _labeled_expand(kh, suite, secret, b"base_nonce", ctx, self.nn)
        try:
            # The first message: nonce = base_nonce XOR I2OSP(0, Nn) = base_nonce.
            return self.aead_cls(key).decrypt(base_nonce, ct, aad)
        except (InvalidTag, ValueError) as exc:
            raise HpkeError(f"HPKE open failed (wrong key, info or associated data?): "
                            f"{type(exc).__name__}") from None


def _recipient(keypair: HpkeKeypair) -> _Recipient:
    """The parsed private key of ``keypair``, kept on the key pair object (not a field:
    invisible to ==, hash and repr). An Aggregator opens every report with one of the few
    key pairs of its keyring, and parsing the key is a good part of an open; the parsed
    key lives exactly as long as the key pair object (a deleted key is not kept alive by
    a cache once the keyring that held it is dropped)."""
    r: _Recipient | None = keypair.__dict__.get("_recipient")
    if r is None:
        r = _Recipient(keypair)
        keypair.__dict__["_recipient"] = r
    return r


# ---------------------------------------------------------------------------------------
# DAP uses of HPKE
# ---------------------------------------------------------------------------------------


class Encodable(Protocol):
    """A message with `encode()`: the AADs and plaintexts of any DAP profile (DAP-18's and
    DAP-09's structs differ, the HPKE steps do not; the profile gives the info strings)."""

    def encode(self) -> bytes: ...


def seal_input_share(
    config: HpkeConfig,
    server_role: Role,
    aad: Encodable,
    plaintext: Encodable,
    *,
    profile: Profile,
    ephemeral_ikm: bytes | None = None,
) -> HpkeCiphertext:
    """Encrypt an input share to an Aggregator (Section 4.4.2.1)::

        enc, payload = SealBase(pk, "dap-18 input share" || 0x01 || server_role,
                                input_share_aad, plaintext_input_share)

    ``ephemeral_ikm`` is for test vectors only (see :func:`seal_base_deterministic`).
    """
    info = profile.input_share_info(server_role)
    return _seal(config, info, aad.encode(), plaintext.encode(), ephemeral_ikm)


def open_input_share_bytes(
    keypair: HpkeKeypair,
    server_role: Role,
    aad: Encodable,
    ciphertext: HpkeCiphertext,
    *,
    profile: Profile,
) -> bytes:
    """The plaintext of an input share, undecoded (each profile decodes its own
    ``PlaintextInputShare``)."""
    info = profile.input_share_info(server_role)
    return open_base(keypair, ciphertext, info, aad.encode())


def seal_aggregate_share(
    config: HpkeConfig,
    server_role: Role,
    aad: Encodable,
    agg_share: bytes,
    *,
    profile: Profile,
    ephemeral_ikm: bytes | None = None,
) -> HpkeCiphertext:
    """Encrypt an encoded aggregate share to the Collector (Section 4.6.7)::

        enc, payload = SealBase(pk, "dap-18 aggregate share" || server_role || 0x00,
                                agg_share_aad, agg_share)
    """
    info = profile.aggregate_share_info(server_role)
    return _seal(config, info, aad.encode(), agg_share, ephemeral_ikm)


def open_aggregate_share(
    keypair: HpkeKeypair,
    server_role: Role,
    aad: Encodable,
    ciphertext: HpkeCiphertext,
    *,
    profile: Profile,
) -> bytes:
    """Decrypt an aggregate share from ``server_role`` (Section 4.6.7)."""
    info = profile.aggregate_share_info(server_role)
    return open_base(keypair, ciphertext, info, aad.encode())
