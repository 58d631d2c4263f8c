"""DAP-09 HPKE: info strings and associated data of input and aggregate shares."""

from __future__ import annotations

import pytest

from ppm_reference.dap.hpke import HpkeError, derive_keypair, open_base, seal_base
from ppm_reference.dap.profiles.dap09 import DAP_09
from ppm_reference.dap.profiles.dap09.client import (
    open_aggregate_share,
    open_input_share,
    seal_aggregate_share,
    seal_input_share,
)
from ppm_reference.dap.profiles.dap09.messages import (
    AggregateShareAad,
    BatchSelector,
    Extension,
    InputShareAad,
    Interval,
    PlaintextInputShare,
    ReportMetadata,
    Role,
    TaskID,
)
from ppm_reference.dap.profiles.dap18 import DAP_18

KP = derive_keypair(3, bytes(range(32)))
TASK = TaskID(b"\x01" * 32)
AAD = InputShareAad(TASK, ReportMetadata(b"\x02" * 16, 1_700_000_000), b"public")
PLAIN = PlaintextInputShare([Extension(0, b"x")], b"input share")


def test_info_strings_are_the_drafts() -> None:
    assert DAP_09.input_share_info(Role.LEADER) == b"dap-09 input share\x01\x02"
    assert DAP_09.input_share_info(Role.HELPER) == b"dap-09 input share\x01\x03"
    assert DAP_09.aggregate_share_info(Role.LEADER) == b"dap-09 aggregate share\x02\x00"
    assert DAP_09.aggregate_share_info(Role.HELPER) == b"dap-09 aggregate share\x03\x00"


@pytest.mark.parametrize("role", [Role.LEADER, Role.HELPER])
def test_input_share_seal_open(role: Role) -> None:
    ct = seal_input_share(KP.config, role, AAD, PLAIN, profile=DAP_09)
    assert ct.config_id == 3
    assert open_input_share(KP, role, AAD, ct, profile=DAP_09) == PLAIN
    # The info string is DAP-09's: raw OpenBase with it works, with DAP-18's it does not.
    raw = open_base(KP, ct, b"dap-09 input share\x01" + bytes([role]), AAD.encode())
    assert raw == PLAIN.encode()
    with pytest.raises(HpkeError):
        open_input_share(KP, role, AAD, ct, profile=DAP_18)


def test_input_share_wrong_aad_role_or_key_fails() -> None:
    ct = seal_input_share(KP.config, Role.HELPER, AAD, PLAIN, profile=DAP_09)
    other_time = InputShareAad(TASK, ReportMetadata(b"\x02" * 16, 1_700_000_001), b"public")
    other_task = InputShareAad(TaskID(b"\x09" * 32), AAD.report_metadata, b"public")
    other_public = InputShareAad(TASK, AAD.report_metadata, b"publiC")
    for aad in (other_time, other_task, other_public):
        with pytest.raises(HpkeError):
            open_input_share(KP, Role.HELPER, aad, ct, profile=DAP_09)
    with pytest.raises(HpkeError):
        open_input_share(KP, Role.LEADER, AAD, ct, profile=DAP_09)
    with pytest.raises(HpkeError):
        open_input_share(derive_keypair(3, bytes(32)), Role.HELPER, AAD, ct, profile=DAP_09)


def test_input_share_plaintext_must_decode() -> None:
    from ppm_reference.dap.codec import DecodeError

    info = DAP_09.input_share_info(Role.LEADER)
    ct = seal_base(KP.config, info, AAD.encode(), b"\x00")  # not a PlaintextInputShare
    with pytest.raises(DecodeError):
        open_input_share(KP, Role.LEADER, AAD, ct, profile=DAP_09)


def test_aggregate_share_seal_open() -> None:
    aad = AggregateShareAad(TASK, b"", BatchSelector.time_interval(Interval(3600, 3600)))
    for role in (Role.LEADER, Role.HELPER):
        ct = seal_aggregate_share(KP.config, role, aad, b"agg share", profile=DAP_09)
        assert open_aggregate_share(KP, role, aad, ct, profile=DAP_09) == b"agg share"
        other = Role.HELPER if role == Role.LEADER else Role.LEADER
        with pytest.raises(HpkeError):
            open_aggregate_share(KP, other, aad, ct, profile=DAP_09)
        for bad in (
            AggregateShareAad(TASK, b"\x00", aad.batch_selector),
            AggregateShareAad(TASK, b"", BatchSelector.time_interval(Interval(3600, 7200))),
            AggregateShareAad(TASK, b"", BatchSelector.fixed_size(b"\x00" * 32)),
        ):
            with pytest.raises(HpkeError):
                open_aggregate_share(KP, role, bad, ct, profile=DAP_09)


def test_deterministic_sealing_for_vectors() -> None:
    a = seal_input_share(KP.config, Role.LEADER, AAD, PLAIN, ephemeral_ikm=b"\x05" * 32, profile=DAP_09)
    b = seal_input_share(KP.config, Role.LEADER, AAD, PLAIN, ephemeral_ikm=b"\x05" * 32, profile=DAP_09)
    assert a == b
    assert seal_input_share(KP.config, Role.LEADER, AAD, PLAIN, profile=DAP_09) != a


def test_choose_config_accepts_a_dap09_list() -> None:
    from ppm_reference.dap.hpke import choose_config
    from ppm_reference.dap.profiles.dap09.messages import HpkeConfig, HpkeConfigList

    unsupported = HpkeConfig(9, 0x9999, 1, 1, b"\x00" * 32)
    configs = HpkeConfigList.decode(HpkeConfigList([unsupported, KP.config]).encode())
    assert choose_config(configs) == KP.config  # type: ignore[arg-type]
