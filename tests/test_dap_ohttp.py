"""Oblivious HTTP (RFC 9458) and Binary HTTP (RFC 9292): the RFC 9458 Appendix A
known-answer values, codec properties, and the RFC's errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppm_reference.dap import bhttp, ohttp

# RFC 9458 Appendix A, "Complete Example of a Request and Response".
SK = bytes.fromhex("3c168975674b2fa8e465970b79c8dcf09f1c741626480bd4c6162fc5b6a98e1a")
KEY_CONFIG = bytes.fromhex("01002031e1f05a740102115220e9af918f738674aec95f54db6e04eb705aae8e"
                           "79815500080001000100010003")
REQUEST = bytes.fromhex("00034745540568747470730b6578616d706c652e636f6d012f")
EPHEMERAL_SK = bytes.fromhex(
    "bc51d5e930bda26589890ac7032f70ad12e4ecb37abb1b65b1256c9c48999c73")
ENC = bytes.fromhex("4b28f881333e7c164ffc499ad9796f877f4e1051ee6d31bad19dec96c208b472")
INFO = bytes.fromhex("6d6573736167652f626874747020726571756573740001002000010001")
ENC_REQUEST = bytes.fromhex(
    "010020000100014b28f881333e7c164ffc499ad9796f877f4e1051ee6d31bad1"
    "9dec96c208b4726374e469135906992e1268c594d2a10c695d858c40a026e796"
    "5e7d86b83dd440b2c0185204b4d63525")
RESPONSE = bytes.fromhex("0140c8")
SECRET = bytes.fromhex("62d87a6ba569ee81014c2641f52bea36")
RESPONSE_NONCE = bytes.fromhex("c789e7151fcba46158ca84b04464910d")
PRK = bytes.fromhex("979aaeae066cf211ab407b31ae49767f344e1501e475c84e8aff547cc5a683db")
AEAD_KEY = bytes.fromhex("5d0172a080e428b16d298c4ea0db620d")
AEAD_NONCE = bytes.fromhex("f6bf1aeb88d6df87007fa263")
ENC_RESPONSE = bytes.fromhex("c789e7151fcba46158ca84b04464910d86f9013e404feea014e7be4a441f234f"
                             "857fbd")


def test_appendix_a_key_configuration() -> None:
    key = ohttp.GatewayKey.generate(1, SK)
    assert key.config.encode() == KEY_CONFIG
    assert ohttp.KeyConfig.decode(KEY_CONFIG) == key.config
    assert ohttp.decode_key_configs(ohttp.encode_key_configs([key.config])) == [key.config]


def test_appendix_a_binary_http_messages() -> None:
    req = bhttp.Request.decode(REQUEST)
    assert (req.method, req.scheme, req.authority, req.path) == \
        (b"GET", b"https", b"example.com", b"/")
    assert req.encode() == REQUEST  # truncated after the control data (RFC 9292 3.8)
    resp = bhttp.Response.decode(RESPONSE)
    assert resp.status == 200 and resp.encode() == RESPONSE


def test_appendix_a_request_and_response() -> None:
    config = ohttp.KeyConfig.decode(KEY_CONFIG)
    enc_request, client_ctx = ohttp.encapsulate_request(config, REQUEST, 1, 1,
                                                        ephemeral_secret=EPHEMERAL_SK)
    assert enc_request == ENC_REQUEST
    assert enc_request[7:39] == ENC
    assert b"message/bhttp request\x00" + enc_request[:7] == INFO
    request, gateway_ctx = ohttp.decapsulate_request([ohttp.GatewayKey(config, SK)],
                                                     ENC_REQUEST)
    assert request == REQUEST
    # The intermediate values of the response encapsulation.
    secret = gateway_ctx.context.export(b"message/bhttp response", 16)  # type: ignore[attr-defined]
    assert secret == SECRET
    prk = gateway_ctx.suite.kdf.extract(ENC + RESPONSE_NONCE, secret)
    assert prk == PRK
    assert gateway_ctx.suite.kdf.expand(prk, b"key", 16) == AEAD_KEY
    assert gateway_ctx.suite.kdf.expand(prk, b"nonce", 12) == AEAD_NONCE
    assert ohttp.encapsulate_response(gateway_ctx, RESPONSE, RESPONSE_NONCE) == ENC_RESPONSE
    assert ohttp.decapsulate_response(client_ctx, ENC_RESPONSE) == RESPONSE


def test_fresh_contexts_round_trip_with_each_aead() -> None:
    key = ohttp.GatewayKey.generate(7)
    for kdf, aead in key.config.symmetric:
        enc, cctx = ohttp.encapsulate_request(key.config, b"hello", kdf, aead)
        req, gctx = ohttp.decapsulate_request([key], enc)
        assert req == b"hello"
        assert ohttp.decapsulate_response(cctx, ohttp.encapsulate_response(gctx, b"bye")) \
            == b"bye"
    a, _ = ohttp.encapsulate_request(key.config, b"x")
    b, _ = ohttp.encapsulate_request(key.config, b"x")
    assert a != b  # a new HPKE context for every request (RFC 9458 Section 6.1)


def test_errors_of_section_5() -> None:
    key = ohttp.GatewayKey.generate(1, SK)
    with pytest.raises(ohttp.OhttpKeyError):  # unknown key identifier
        ohttp.decapsulate_request([key], b"\x02" + ENC_REQUEST[1:])
    with pytest.raises(ohttp.OhttpKeyError):  # an AEAD the configuration does not offer
        ohttp.decapsulate_request([key], ENC_REQUEST[:5] + b"\x00\x02" + ENC_REQUEST[7:])
    with pytest.raises(ohttp.OhttpError) as info:  # tampered ciphertext
        ohttp.decapsulate_request([key], ENC_REQUEST[:-1] + b"\x00")
    assert not isinstance(info.value, ohttp.OhttpKeyError)
    with pytest.raises(ohttp.OhttpError):
        ohttp.decapsulate_request([key], ENC_REQUEST[:30])
    _, cctx = ohttp.encapsulate_request(key.config, REQUEST, 1, 1,
                                        ephemeral_secret=EPHEMERAL_SK)
    with pytest.raises(ohttp.OhttpError):
        ohttp.decapsulate_response(cctx, ENC_RESPONSE[:-1] + b"\x00")
    with pytest.raises(ohttp.OhttpError):
        ohttp.decode_key_configs(KEY_CONFIG)  # not length-prefixed: discarded whole
    with pytest.raises(ohttp.OhttpError):
        ohttp.decode_key_configs(b"")


# -- codec properties ----------------------------------------------------------------------

_bytes = st.binary(max_size=40)
_fields = st.lists(st.tuples(st.binary(min_size=1, max_size=10).map(bytes.lower), _bytes),
                   max_size=4).map(tuple)


@given(st.integers(min_value=0, max_value=bhttp.MAX_VARINT))
def test_varint_round_trip(value: int) -> None:
    enc = bhttp.encode_varint(value)
    assert len(enc) in (1, 2, 4, 8)
    assert bhttp.Response.decode(b"\x01" + bhttp.encode_varint(200)).status == 200
    r = bhttp._Reader(enc)
    assert r.varint() == value and r.at_end()


@given(_bytes, _bytes, _bytes, _bytes, _fields, _bytes, _fields, st.integers(0, 5))
def test_request_round_trip(method: bytes, scheme: bytes, authority: bytes, path: bytes,
                            headers: bhttp.Fields, content: bytes, trailers: bhttp.Fields,
                            padding: int) -> None:
    req = bhttp.Request(method, scheme, authority, path, headers, content, trailers)
    assert bhttp.Request.decode(req.encode() + bytes(padding)) == req


@given(st.integers(200, 599), _fields, _bytes, _fields,
       st.lists(st.tuples(st.integers(100, 199), _fields), max_size=2).map(tuple))
def test_response_round_trip(status: int, headers: bhttp.Fields, content: bytes,
                             trailers: bhttp.Fields,
                             informational: tuple[tuple[int, bhttp.Fields], ...]) -> None:
    resp = bhttp.Response(status, headers, content, trailers, informational)
    assert bhttp.Response.decode(resp.encode()) == resp


@given(st.integers(0, 255), st.binary(min_size=32, max_size=32),
       st.lists(st.tuples(st.sampled_from([1, 2, 3]), st.sampled_from([1, 2, 3])),
                min_size=1, max_size=3).map(tuple))
def test_key_config_round_trip(key_id: int, pk: bytes,
                               algs: tuple[tuple[int, int], ...]) -> None:
    config = ohttp.KeyConfig(key_id, 0x0020, pk, algs)
    assert ohttp.KeyConfig.decode(config.encode()) == config


def test_bhttp_strictness() -> None:
    with pytest.raises(bhttp.BhttpError):
        bhttp.Request.decode(REQUEST + b"\x01")  # not padding
    with pytest.raises(bhttp.BhttpError):
        bhttp.Request.decode(RESPONSE)  # a response is not a request
    with pytest.raises(bhttp.BhttpError):
        bhttp.Response.decode(b"\x01" + bhttp.encode_varint(99))
    with pytest.raises(bhttp.BhttpError):
        bhttp.Request.decode(b"\x00\x05GET")  # a length past the end
    # Indeterminate-length form (framing 2): fields end with an empty name, content with
    # an empty chunk.
    indeterminate = (b"\x02\x03GET\x05https\x00\x01/" + b"\x01a\x01b\x00"
                     + b"\x02hi\x01!\x00" + b"\x00")
    req = bhttp.Request.decode(indeterminate)
    assert req.headers == ((b"a", b"b"),) and req.content == b"hi!"


@given(st.lists(st.tuples(st.integers(0, 255), st.binary(min_size=32, max_size=32)),
                min_size=1, max_size=3))
def test_key_config_list_round_trip(keys: list[tuple[int, bytes]]) -> None:
    configs = [ohttp.KeyConfig(k, 0x0020, pk, ((1, 1),)) for k, pk in keys]
    encoded = ohttp.encode_key_configs(configs)
    assert ohttp.decode_key_configs(encoded) == configs
    with pytest.raises(ohttp.OhttpError):
        ohttp.decode_key_configs(encoded[:-1])  # a truncated list is discarded whole
