"""Oblivious HTTP (RFC 9458) on pyhpke, for Client uploads through a relay.

No maintained Oblivious HTTP library exists for Python on PyPI (the registry lists none;
"oblivious" is an OPRF/OT toolkit), so this is written from the RFC on the HPKE
primitives the project already uses (`pyhpke`):

* key configurations (Section 3.1) and the `application/ohttp-keys` list (Section 3.2);
* request encapsulation (Section 4.3): hdr = key_id || kem_id || kdf_id || aead_id,
  info = "message/bhttp request" || 0x00 || hdr, SetupBaseS, Seal with empty aad;
  enc_request = hdr || enc || ct;
* response encapsulation (Section 4.4): secret = Export("message/bhttp response",
  max(Nn, Nk)), salt = enc || response_nonce, prk = Extract(salt, secret),
  key = Expand(prk, "key", Nk), nonce = Expand(prk, "nonce", Nn),
  enc_response = response_nonce || Seal(key, nonce, "", response).

Errors (Section 5.2): a request the gateway cannot decapsulate is answered without
encapsulation with a 4xx status; an unknown key identifier or a KEM/KDF/AEAD the key
does not support is `OhttpKeyError`, which the gateway answers with the problem type
`https://iana.org/assignments/http-problem-types#ohttp-key` (Section 5.3); any other
failure (truncated message, failed decryption) is `OhttpError` (400).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric import x25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pyhpke import AEADId, CipherSuite, KDFId, KEMId, KEMKeyPair, PyHPKEError

from ppm_reference.dap.hpke import _KEY_SIZES, Aead, Kdf, Kem

REQUEST_MEDIA_TYPE = "message/ohttp-req"
RESPONSE_MEDIA_TYPE = "message/ohttp-res"
KEYS_MEDIA_TYPE = "application/ohttp-keys"
#: RFC 9540 Section 4: the gateway's well-known URI; GET with Accept
#: application/ohttp-keys returns its key configurations, POST is the gateway resource.
WELL_KNOWN_PATH = "/.well-known/ohttp-gateway"
KEY_PROBLEM_TYPE = "https://iana.org/assignments/http-problem-types#ohttp-key"

_REQUEST_LABEL = b"message/bhttp request"
_RESPONSE_LABEL = b"message/bhttp response"
# Nk, Nn of each AEAD (RFC 9180 Section 7.3).
_AEAD_SIZES = {Aead.AES_128_GCM: (16, 12), Aead.AES_256_GCM: (32, 12),
               Aead.CHACHA20_POLY1305: (32, 12)}


class OhttpError(ValueError):
    """An Encapsulated Request or Response that cannot be processed."""


class OhttpKeyError(OhttpError):
    """The request names a key or algorithms the gateway does not have (Section 5.3)."""


@dataclass(frozen=True)
class KeyConfig:
    """A key configuration (Section 3.1)."""

    key_id: int
    kem_id: int
    public_key: bytes
    symmetric: tuple[tuple[int, int], ...]   # (kdf_id, aead_id) pairs

    def encode(self) -> bytes:
        if not 0 <= self.key_id <= 255 or not self.symmetric:
            raise OhttpError("key_id is one byte and at least one algorithm pair is needed")
        algs = b"".join(k.to_bytes(2, "big") + a.to_bytes(2, "big")
                        for k, a in self.symmetric)
        return (self.key_id.to_bytes(1, "big") + self.kem_id.to_bytes(2, "big")
                + self.public_key + len(algs).to_bytes(2, "big") + algs)

    @classmethod
    def decode(cls, data: bytes) -> KeyConfig:
        if len(data) < 3:
            raise OhttpError("truncated key configuration")
        key_id, kem_id = data[0], int.from_bytes(data[1:3], "big")
        if kem_id not in Kem._value2member_map_:
            raise OhttpError(f"unsupported KEM 0x{kem_id:04x}")
        npk = _KEY_SIZES[Kem(kem_id)][0]
        pos = 3 + npk
        if len(data) < pos + 2:
            raise OhttpError("truncated key configuration")
        public_key = data[3:pos]
        n = int.from_bytes(data[pos : pos + 2], "big")
        algs = data[pos + 2 :]
        if n != len(algs) or n < 4 or n % 4:
            raise OhttpError("bad symmetric algorithms length")
        pairs = tuple((int.from_bytes(algs[i : i + 2], "big"),
                       int.from_bytes(algs[i + 2 : i + 4], "big")) for i in range(0, n, 4))
        return cls(key_id, kem_id, public_key, pairs)


def encode_key_configs(configs: Sequence[KeyConfig]) -> bytes:
    """`application/ohttp-keys` (Section 3.2): each configuration prefixed with its
    2-byte length."""
    out = []
    for c in configs:
        enc = c.encode()
        out.append(len(enc).to_bytes(2, "big") + enc)
    return b"".join(out)


def decode_key_configs(data: bytes) -> list[KeyConfig]:
    """The key configurations of an `application/ohttp-keys` body; a collection with an
    encoding error is discarded whole (Section 3.2: Clients MUST discard it)."""
    out, pos = [], 0
    while pos < len(data):
        if pos + 2 > len(data):
            raise OhttpError("truncated key configuration list")
        n = int.from_bytes(data[pos : pos + 2], "big")
        if pos + 2 + n > len(data):
            raise OhttpError("truncated key configuration list")
        out.append(KeyConfig.decode(data[pos + 2 : pos + 2 + n]))
        pos += 2 + n
    if not out:
        raise OhttpError("empty key configuration list")
    return out


def _suite(kem: int, kdf: int, aead: int) -> CipherSuite:
    try:
        return CipherSuite.new(KEMId(kem), KDFId(kdf), AEADId(aead))
    except (ValueError, PyHPKEError) as exc:
        raise OhttpKeyError(f"unsupported HPKE suite: {exc}") from None


def _header(key_id: int, kem: int, kdf: int, aead: int) -> bytes:
    return (key_id.to_bytes(1, "big") + kem.to_bytes(2, "big") + kdf.to_bytes(2, "big")
            + aead.to_bytes(2, "big"))


@dataclass
class ClientContext:
    """What a Client keeps to open the Encapsulated Response."""

    suite: CipherSuite
    context: object
    enc: bytes
    aead: int


@dataclass(frozen=True)
class GatewayKey:
    """The gateway's private key for one key configuration (X25519 here)."""

    config: KeyConfig
    private_key: bytes

    @classmethod
    def generate(cls, key_id: int = 1, private_key: bytes | None = None) -> GatewayKey:
        """An X25519 key configuration with HKDF-SHA256 and AES-128-GCM (the choice of
        RFC 9458 Appendix A) and ChaCha20-Poly1305."""
        sk = private_key if private_key is not None else os.urandom(32)
        pk = x25519.X25519PrivateKey.from_private_bytes(sk).public_key().public_bytes(
            Encoding.Raw, PublicFormat.Raw)
        return cls(KeyConfig(key_id, Kem.DHKEM_X25519_HKDF_SHA256, pk,
                             ((Kdf.HKDF_SHA256, Aead.AES_128_GCM),
                              (Kdf.HKDF_SHA256, Aead.CHACHA20_POLY1305))), sk)

    def __repr__(self) -> str:  # never print secrets
        return f"GatewayKey(config={self.config!r}, private_key=<{len(self.private_key)} bytes>)"


def encapsulate_request(config: KeyConfig, request: bytes, kdf: int | None = None,
                        aead: int | None = None, ephemeral_secret: bytes | None = None
                        ) -> tuple[bytes, ClientContext]:
    """Section 4.3: (enc_request, context). The first algorithm pair of the
    configuration unless one is chosen. `ephemeral_secret` (a raw X25519 secret key) is
    FOR KNOWN-ANSWER TESTS ONLY: Clients MUST use a fresh context per request (Section
    6.1), which the default (the OS CSPRNG) gives."""
    if kdf is None or aead is None:
        kdf, aead = config.symmetric[0]
    if (kdf, aead) not in config.symmetric:
        raise OhttpError("the key configuration does not offer this KDF and AEAD")
    suite = _suite(config.kem_id, kdf, aead)
    hdr = _header(config.key_id, config.kem_id, kdf, aead)
    info = _REQUEST_LABEL + b"\x00" + hdr
    pkr = suite.kem.deserialize_public_key(config.public_key)
    eks = None
    if ephemeral_secret is not None:
        if config.kem_id != Kem.DHKEM_X25519_HKDF_SHA256:
            raise OhttpError("a fixed ephemeral key is supported for X25519 only")
        pub = x25519.X25519PrivateKey.from_private_bytes(ephemeral_secret).public_key()
        eks = KEMKeyPair(suite.kem.deserialize_private_key(ephemeral_secret),
                         suite.kem.deserialize_public_key(
                             pub.public_bytes(Encoding.Raw, PublicFormat.Raw)))
    enc, ctx = suite.create_sender_context(pkr, info, eks=eks)
    ct = ctx.seal(request, b"")
    return hdr + enc + ct, ClientContext(suite, ctx, enc, aead)


def _response_keys(suite: CipherSuite, context: object, enc: bytes, aead: int,
                   nonce: bytes) -> tuple[bytes, bytes]:
    nk, nn = _AEAD_SIZES[Aead(aead)]
    secret = context.export(_RESPONSE_LABEL, max(nn, nk))  # type: ignore[attr-defined]
    prk = suite.kdf.extract(enc + nonce, secret)
    return suite.kdf.expand(prk, b"key", nk), suite.kdf.expand(prk, b"nonce", nn)


def decapsulate_response(ctx: ClientContext, enc_response: bytes) -> bytes:
    """Section 4.4, the Client's side: the binary HTTP response."""
    nk, nn = _AEAD_SIZES[Aead(ctx.aead)]
    size = max(nn, nk)
    if len(enc_response) < size:
        raise OhttpError("truncated Encapsulated Response")
    nonce, ct = enc_response[:size], enc_response[size:]
    key, aead_nonce = _response_keys(ctx.suite, ctx.context, ctx.enc, ctx.aead, nonce)
    try:
        return bytes(ctx.suite.aead.import_key(key).open(ct, aead_nonce, b""))
    except (ValueError, PyHPKEError, InvalidTag) as exc:
        raise OhttpError(f"cannot open the Encapsulated Response: {exc}") from None


@dataclass
class GatewayContext:
    """What the gateway keeps to encapsulate its response."""

    suite: CipherSuite
    context: object
    enc: bytes
    aead: int


def decapsulate_request(keys: Sequence[GatewayKey], enc_request: bytes
                        ) -> tuple[bytes, GatewayContext]:
    """Section 4.3, the gateway's side: (binary HTTP request, context). Raises
    `OhttpKeyError` for an unknown key or unsupported algorithms, `OhttpError` for any
    other failure (the gateway answers both without encapsulation, Section 5.2)."""
    if len(enc_request) < 7:
        raise OhttpError("truncated Encapsulated Request")
    key_id = enc_request[0]
    kem, kdf, aead = (int.from_bytes(enc_request[i : i + 2], "big") for i in (1, 3, 5))
    key = next((k for k in keys if k.config.key_id == key_id), None)
    if key is None or key.config.kem_id != kem:
        raise OhttpKeyError(f"key identifier {key_id} with KEM 0x{kem:04x} is unknown")
    if (kdf, aead) not in key.config.symmetric or aead not in _AEAD_SIZES:
        raise OhttpKeyError(f"KDF 0x{kdf:04x} with AEAD 0x{aead:04x} is not offered")
    nenc = _KEY_SIZES[Kem(kem)][0]
    if len(enc_request) < 7 + nenc:
        raise OhttpError("truncated Encapsulated Request")
    enc, ct = enc_request[7 : 7 + nenc], enc_request[7 + nenc :]
    suite = _suite(kem, kdf, aead)
    info = _REQUEST_LABEL + b"\x00" + enc_request[:7]
    try:
        skr = suite.kem.deserialize_private_key(key.private_key)
        ctx = suite.create_recipient_context(enc, skr, info)
        request = ctx.open(ct, b"")
    except (ValueError, PyHPKEError) as exc:
        raise OhttpError(f"cannot decrypt the Encapsulated Request: {exc}") from None
    return bytes(request), GatewayContext(suite, ctx, enc, aead)


def encapsulate_response(ctx: GatewayContext, response: bytes,
                         response_nonce: bytes | None = None) -> bytes:
    """Section 4.4, the gateway's side. `response_nonce` is FOR KNOWN-ANSWER TESTS ONLY
    (the default draws it from the OS CSPRNG)."""
    nk, nn = _AEAD_SIZES[Aead(ctx.aead)]
    nonce = response_nonce if response_nonce is not None else os.urandom(max(nn, nk))
    if len(nonce) != max(nn, nk):
        raise OhttpError("the response nonce is max(Nn, Nk) bytes")
    key, aead_nonce = _response_keys(ctx.suite, ctx.context, ctx.enc, ctx.aead, nonce)
    return nonce + bytes(ctx.suite.aead.import_key(key).seal(response, aead_nonce, b""))


__all__ = [
    "KEYS_MEDIA_TYPE", "KEY_PROBLEM_TYPE", "REQUEST_MEDIA_TYPE", "RESPONSE_MEDIA_TYPE",
    "WELL_KNOWN_PATH", "ClientContext", "GatewayContext", "GatewayKey", "KeyConfig",
    "OhttpError", "OhttpKeyError", "decapsulate_request", "decapsulate_response",
    "decode_key_configs", "encapsulate_request", "encapsulate_response",
    "encode_key_configs",
]
