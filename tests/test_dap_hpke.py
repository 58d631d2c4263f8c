"""HPKE for DAP (dap/hpke.py): every supported suite, RFC 9180 known answers, DAP info
strings and associated data, and the failure cases."""

from __future__ import annotations

import pytest

from ppm_reference.dap.codec import DecodeError
from ppm_reference.dap.common import (
    BatchMode,
    Extension,
    HpkeCiphertext,
    HpkeConfig,
    HpkeConfigList,
    Role,
)
from ppm_reference.dap.hpke import (
    Aead,
    HpkeError,
    HpkeKeypair,
    Kdf,
    Kem,
    all_suites,
    choose_config,
    derive_keypair,
    generate_keypair,
    is_supported,
    open_aggregate_share,
    open_base,
    seal_aggregate_share,
    seal_base,
    seal_base_deterministic,
    seal_input_share,
)
from ppm_reference.dap.profiles.dap18 import DAP_18
from ppm_reference.dap.profiles.dap18.client import open_input_share
from ppm_reference.dap.profiles.dap18.messages import (
    AggregateShareAad,
    CollectionJobReq,
    InputShareAad,
    PlaintextInputShare,
    Query,
    ReportMetadata,
    TaskConfiguration,
)

# RFC 9180 Appendix A.1.1 and A.3.1 (Base mode, first encryption): published values.
RFC9180_INFO = bytes.fromhex("4f6465206f6e2061204772656369616e2055726e")
RFC9180_PT = bytes.fromhex("4265617574792069732074727574682c20747275746820626561757479")
RFC9180_AAD = bytes.fromhex("436f756e742d30")
RFC9180_CASES = [
    pytest.param(
        Kem.DHKEM_X25519_HKDF_SHA256,
        "6db9df30aa07dd42ee5e8181afdb977e538f5e1fec8a06223f33f7013e525037",  # ikmR
        "4612c550263fc8ad58375df3f557aac531d26850903e55a9f23f21d8534e8ac8",  # skRm
        "3948cfe0ad1ddb695d780e59077195da6c56506b027329794ab02bca80815c4d",  # pkRm
        "7268600d403fce431561aef583ee1613527cff655c1343f29812e66706df3234",  # ikmE
        "37fda3567bdbd628e88668c3c8d7e97d1d1253b6d4ea6d44c150f741f1bf4431",  # enc
        "f938558b5d72f1a23810b4be2ab4f84331acc02fc97babc53a52ae8218a355a96d8770ac83d07bea87e1"
        "3c512a",
        id="A.1.1-X25519",
    ),
    pytest.param(
        Kem.DHKEM_P256_HKDF_SHA256,
        "668b37171f1072f3cf12ea8a236a45df23fc13b82af3609ad1e354f6ef817550",
        "f3ce7fdae57e1a310d87f1ebbde6f328be0a99cdbcadf4d6589cf29de4b8ffd2",
        "04fe8c19ce0905191ebc298a9245792531f26f0cece2460639e8bc39cb7f706a826a779b4cf969b8a0e5"
        "39c7f62fb3d30ad6aa8f80e30f1d128aafd68a2ce72ea0",
        "4270e54ffd08d79d5928020af4686d8f6b7d35dbe470265f1f5aa22816ce860e",
        "04a92719c6195d5085104f469a8b9814d5838ff72b60501e2c4466e5e67b325ac98536d7b61a1af4b78e"
        "5b7f951c0900be863c403ce65c9bfcb9382657222d18c4",
        "5ad590bb8baa577f8619db35a36311226a896e7342a6d836d8b7bcd2f20b6c7f9076ac232e3ab2523f39"
        "513434",
        id="A.3.1-P256",
    ),
]


@pytest.mark.parametrize(("kem", "ikm_r", "sk_r", "pk_r", "ikm_e", "enc", "ct"), RFC9180_CASES)
def test_rfc9180_known_answers(
    kem: Kem, ikm_r: str, sk_r: str, pk_r: str, ikm_e: str, enc: str, ct: str
) -> None:
    kp = derive_keypair(5, bytes.fromhex(ikm_r), kem, Kdf.HKDF_SHA256, Aead.AES_128_GCM)
    assert kp.private_key.hex() == sk_r
    assert kp.config.public_key.hex() == pk_r
    sealed = seal_base_deterministic(
        kp.config, RFC9180_INFO, RFC9180_AAD, RFC9180_PT, bytes.fromhex(ikm_e)
    )
    assert sealed == HpkeCiphertext(5, bytes.fromhex(enc), bytes.fromhex(ct))
    assert open_base(kp, sealed, RFC9180_INFO, RFC9180_AAD) == RFC9180_PT


def test_all_suites_are_the_pyhpke_ones() -> None:
    suites = all_suites()
    assert len(suites) == 5 * 3 * 3
    assert (Kem.DHKEM_X25519_HKDF_SHA256, Kdf.HKDF_SHA256, Aead.AES_128_GCM) in suites


@pytest.mark.parametrize(("kem", "kdf", "aead"), all_suites(), ids=lambda x: x.name)
def test_seal_open_every_suite(kem: Kem, kdf: Kdf, aead: Aead) -> None:
    kp = generate_keypair(42, kem, kdf, aead)
    assert (kp.config.kem_id, kp.config.kdf_id, kp.config.aead_id) == (kem, kdf, aead)
    assert is_supported(kp.config)
    ct = seal_base(kp.config, b"info", b"aad", b"plaintext")
    assert ct.config_id == 42
    assert open_base(kp, ct, b"info", b"aad") == b"plaintext"
    # A key pair survives serialization of its private key.
    again = HpkeKeypair(HpkeConfig.decode(kp.config.encode()), kp.private_key)
    assert open_base(again, ct, b"info", b"aad") == b"plaintext"
    with pytest.raises(HpkeError):
        open_base(kp, ct, b"info", b"other aad")
    # Fresh ephemeral keys: sealing twice differs.
    assert seal_base(kp.config, b"info", b"aad", b"plaintext").enc != ct.enc


def test_mandatory_suite_is_the_default() -> None:
    kp = generate_keypair(1)
    assert (kp.config.kem_id, kp.config.kdf_id, kp.config.aead_id) == DAP_18.mandatory_hpke_suite


def test_open_failures() -> None:
    kp = generate_keypair(1)
    other = generate_keypair(1)
    ct = seal_base(kp.config, b"info", b"aad", b"secret")
    with pytest.raises(HpkeError, match="HPKE open failed"):
        open_base(other, ct, b"info", b"aad")  # wrong key, same config id
    with pytest.raises(HpkeError, match="HPKE open failed"):
        open_base(kp, ct, b"inf0", b"aad")  # wrong info
    with pytest.raises(HpkeError, match="HPKE open failed"):
        open_base(kp, ct, b"info", b"aad!")  # wrong aad
    tampered = HpkeCiphertext(ct.config_id, ct.enc, bytes([ct.payload[0] ^ 1]) + ct.payload[1:])
    with pytest.raises(HpkeError, match="HPKE open failed"):
        open_base(kp, tampered, b"info", b"aad")
    with pytest.raises(HpkeError, match="ciphertext is for HPKE config 9"):
        open_base(kp, HpkeCiphertext(9, ct.enc, ct.payload), b"info", b"aad")
    with pytest.raises(HpkeError):
        open_base(kp, HpkeCiphertext(1, ct.enc[:-1], ct.payload), b"info", b"aad")


def test_unusable_configs() -> None:
    kp = generate_keypair(1)
    unsupported = HpkeConfig(2, 0x0020, 0x0001, 0xFFFF, kp.config.public_key)  # export-only
    assert not is_supported(unsupported)
    with pytest.raises(HpkeError, match="unsupported HPKE suite"):
        seal_base(unsupported, b"", b"", b"x")
    short_key = HpkeConfig(1, 0x0020, 0x0001, 0x0001, b"\x01" * 31)
    with pytest.raises(HpkeError, match="needs 32"):
        seal_base(short_key, b"", b"", b"x")
    off_curve = HpkeConfig(1, 0x0010, 0x0001, 0x0001, b"\x04" + b"\x01" * 64)
    with pytest.raises(HpkeError, match="invalid public key"):
        seal_base(off_curve, b"", b"", b"x")
    with pytest.raises(HpkeError, match="private key is 31 bytes"):
        open_base(HpkeKeypair(kp.config, kp.private_key[:31]), HpkeCiphertext(1, b"e", b"p"),
                  b"", b"")


def test_choose_config_takes_first_supported() -> None:
    a = generate_keypair(1, Kem.DHKEM_P256_HKDF_SHA256).config
    b = generate_keypair(2).config
    weird = HpkeConfig(3, 0x9999, 0x0001, 0x0001, b"\x00")
    assert choose_config(HpkeConfigList([weird, a, b])) == a
    with pytest.raises(HpkeError, match="no HPKE config"):
        choose_config(HpkeConfigList([weird]))


def test_derive_keypair_is_deterministic() -> None:
    ikm = bytes(range(32))
    assert derive_keypair(1, ikm) == derive_keypair(1, ikm)
    assert derive_keypair(1, ikm).config != derive_keypair(1, bytes(32)).config
    with pytest.raises(HpkeError, match="at least 32"):
        derive_keypair(1, b"short")
    assert "private_key=<32 bytes>" in repr(derive_keypair(1, ikm))


# ---------------------------------------------------------------------------------------
# DAP info strings and associated data
# ---------------------------------------------------------------------------------------


def test_info_strings() -> None:
    # Sections 4.4.2.1 and 4.6.7.
    assert DAP_18.input_share_info(Role.LEADER) == b"dap-18 input share\x01\x02"
    assert DAP_18.input_share_info(Role.HELPER) == b"dap-18 input share\x01\x03"
    assert DAP_18.aggregate_share_info(Role.LEADER) == b"dap-18 aggregate share\x02\x00"
    assert DAP_18.aggregate_share_info(Role.HELPER) == b"dap-18 aggregate share\x03\x00"
    with pytest.raises(ValueError):
        DAP_18.input_share_info(Role.CLIENT)


def _task_config(min_batch_size: int = 10) -> TaskConfiguration:
    return TaskConfiguration(
        b"t", b"https://leader", b"https://helper", 3600, min_batch_size,
        BatchMode.TIME_INTERVAL, b"", 1, b"", [],
    )


def _input_share_aad(config: TaskConfiguration, task_id: bytes = b"\x07" * 32) -> InputShareAad:
    return InputShareAad(task_id, config, ReportMetadata(b"\x01" * 16, 5, []), b"ps")


def test_input_share_seal_open() -> None:
    kp = generate_keypair(3)
    aad = _input_share_aad(_task_config())
    pt = PlaintextInputShare([Extension(7, b"x")], b"input share")
    ct = seal_input_share(kp.config, Role.HELPER, aad, pt, profile=DAP_18)
    assert open_input_share(kp, Role.HELPER, aad, ct, profile=DAP_18) == pt
    # Explicit check of what is bound: info with the recipient's role, and the AAD bytes.
    assert open_base(kp, ct, b"dap-18 input share\x01\x03", aad.encode()) == pt.encode()
    with pytest.raises(HpkeError):
        open_input_share(kp, Role.LEADER, aad, ct, profile=DAP_18)  # info names the other Aggregator
    with pytest.raises(HpkeError):  # the task configuration is bound (Section 8.6.5)
        open_input_share(kp, Role.HELPER, _input_share_aad(_task_config(11)), ct, profile=DAP_18)
    with pytest.raises(HpkeError):
        open_input_share(kp, Role.HELPER, _input_share_aad(_task_config(), b"\x08" * 32), ct, profile=DAP_18)


def test_input_share_malformed_plaintext_is_a_decode_error() -> None:
    kp = generate_keypair(3)
    aad = _input_share_aad(_task_config())
    info = DAP_18.input_share_info(Role.LEADER)
    # Unsorted private extensions: the Aggregator marks the report invalid_message.
    bad = bytes.fromhex("0008" "0002" "0000" "0001" "0000" "00000001" "00")
    ct = seal_base(kp.config, info, aad.encode(), bad)
    with pytest.raises(DecodeError, match="private_extensions"):
        open_input_share(kp, Role.LEADER, aad, ct, profile=DAP_18)


def test_aggregate_share_seal_open() -> None:
    kp = generate_keypair(200, Kem.DHKEM_P384_HKDF_SHA384, Kdf.HKDF_SHA384, Aead.AES_256_GCM)
    cjr = CollectionJobReq(Query.leader_selected(), b"", [])
    aad = AggregateShareAad(b"\x07" * 32, _task_config(), cjr)
    ct = seal_aggregate_share(kp.config, Role.LEADER, aad, b"agg share", profile=DAP_18)
    assert open_aggregate_share(kp, Role.LEADER, aad, ct, profile=DAP_18) == b"agg share"
    assert open_base(kp, ct, b"dap-18 aggregate share\x02\x00", aad.encode()) == b"agg share"
    with pytest.raises(HpkeError):
        open_aggregate_share(kp, Role.HELPER, aad, ct, profile=DAP_18)
    other_req = AggregateShareAad(b"\x07" * 32, _task_config(), CollectionJobReq(
        Query.leader_selected(), b"\x00", []))
    with pytest.raises(HpkeError):
        open_aggregate_share(kp, Role.LEADER, other_req, ct, profile=DAP_18)
    # Deterministic sealing for vectors.
    ikm = bytes(range(48))
    a = seal_aggregate_share(kp.config, Role.LEADER, aad, b"x", ephemeral_ikm=ikm, profile=DAP_18)
    b = seal_aggregate_share(kp.config, Role.LEADER, aad, b"x", ephemeral_ikm=ikm, profile=DAP_18)
    assert a == b
