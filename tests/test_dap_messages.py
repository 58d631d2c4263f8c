"""DAP-18 messages: property round trips, decoder fuzzing, and hand-written golden encodings.

The golden encodings below were written by hand from the struct definitions in
draft-ietf-ppm-dap-18 (and RFC 8446 Section 3 for the length prefixes), field by field,
using the values of the draft's examples where it gives them. They check the wire
declarations in dap/messages.py against the draft, which the round-trip properties
(generated from those same declarations) cannot do.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppm_reference.dap.codec import (
    DecodeError,
    EncodeError,
    EnumCodec,
    Fixed,
    Opaque,
    Rest,
    Struct,
    StructCodec,
    Uint,
    Vector,
    field_specs,
)
from ppm_reference.dap.common import (
    AggregationJobID,
    BatchID,
    BatchMode,
    Duration,
    Extension,
    HpkeCiphertext,
    HpkeConfig,
    HpkeConfigList,
    Interval,
    PingPongMessage,
    ReportError,
    ReportID,
    TaskID,
    Time,
    VerifyRespType,
    batch_checksum,
)
from ppm_reference.dap.profiles.dap18.messages import (
    ALL_SCALARS,
    ALL_STRUCTS,
    AggregateShare,
    AggregateShareReq,
    AggregationJobContinueReq,
    AggregationJobExtension,
    AggregationJobInitReq,
    AggregationJobResp,
    BatchSelector,
    CollectionJobExtension,
    CollectionJobReq,
    CollectionJobResp,
    PlaintextInputShare,
    Query,
    Report,
    ReportMetadata,
    ReportShare,
    ReportUploadStatus,
    TaskConfiguration,
    TaskExtension,
    UploadErrors,
    UploadRequest,
    VerifyContinue,
    VerifyInit,
    VerifyResp,
)
from ppm_reference.dap.profiles.dap18.task import VDAF_CONFIGS

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# ---------------------------------------------------------------------------------------
# Strategies, derived from the wire declarations, with overrides for cross-field rules
# ---------------------------------------------------------------------------------------

_ASCII = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1,
                 max_size=30).map(lambda s: s.encode("ascii"))


def codec_strategy(codec: Any) -> st.SearchStrategy[Any]:
    if isinstance(codec, Uint):
        return st.integers(0, codec.max).map(codec.wrap)
    if isinstance(codec, EnumCodec):
        return st.sampled_from(list(codec.enum_cls))
    if isinstance(codec, Fixed):
        return st.binary(min_size=codec.size, max_size=codec.size).map(codec.wrap)
    if isinstance(codec, Opaque):
        if codec.ascii:
            return _ASCII
        return st.binary(min_size=codec.min_len, max_size=min(codec.max_len, 24))
    if isinstance(codec, StructCodec):
        return struct_strategy(codec.cls)
    if isinstance(codec, Rest):
        return st.lists(codec_strategy(codec.item), max_size=3).map(tuple)
    if isinstance(codec, Vector):
        item = codec_strategy(codec.item)
        min_size = 1 if codec.min_len else 0
        if codec.increasing is not None:
            key = codec.increasing
            return st.lists(item, min_size=min_size, max_size=3, unique_by=key).map(
                lambda xs: tuple(sorted(xs, key=key))
            )
        return st.lists(item, min_size=min_size, max_size=3).map(tuple)
    raise TypeError(f"no strategy for {codec!r}")


_intervals = st.builds(Interval, st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))

OVERRIDES: dict[type, st.SearchStrategy[Any]] = {
    Query: st.one_of(_intervals.map(Query.time_interval), st.just(Query.leader_selected())),
    BatchSelector: st.one_of(
        _intervals.map(BatchSelector.time_interval),
        st.binary(min_size=32, max_size=32).map(BatchSelector.leader_selected),
    ),
    # Type 1 is task_interval, whose data must be an Interval.
    TaskExtension: st.one_of(
        _intervals.map(TaskExtension.task_interval),
        st.builds(TaskExtension, st.integers(2, 0xFFFF), st.binary(max_size=8)),
        st.builds(TaskExtension, st.just(0), st.binary(max_size=8)),
    ),
}
FIELD_OVERRIDES: dict[tuple[type, str], st.SearchStrategy[Any]] = {
    (TaskConfiguration, "batch_config"): st.just(b""),
}


def struct_strategy(cls: type[Struct]) -> st.SearchStrategy[Any]:
    if cls in OVERRIDES:
        return OVERRIDES[cls]

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        values: dict[str, Any] = {}
        for spec in field_specs(cls):
            if spec.when is not None and values[spec.when[0]] not in spec.when[1]:
                values[spec.name] = None
                continue
            key = (cls, spec.name)
            if key in FIELD_OVERRIDES:
                strategy = FIELD_OVERRIDES[key]
            else:
                strategy = codec_strategy(spec.codec)
            values[spec.name] = draw(strategy)
        return cls(**values)

    return build()


SCALAR_STRATEGIES: dict[type, st.SearchStrategy[Any]] = {
    cls: (
        st.integers(0, 2**64 - 1).map(cls)
        if issubclass(cls, int)
        else st.binary(min_size=cls.SIZE, max_size=cls.SIZE).map(cls)  # type: ignore[attr-defined]
    )
    for cls in ALL_SCALARS
}

ALL_TYPES: list[type] = [*ALL_STRUCTS, *ALL_SCALARS, *VDAF_CONFIGS.values()]


def strategy_for(cls: type) -> st.SearchStrategy[Any]:
    return SCALAR_STRATEGIES[cls] if cls in SCALAR_STRATEGIES else struct_strategy(cls)


def test_every_issue_message_is_covered() -> None:
    names = {c.__name__ for c in ALL_TYPES}
    required = """ReportID TaskID AggregationJobID CollectionJobID BatchID Time Duration Interval
    Extension ReportMetadata PlaintextInputShare InputShareAad HpkeConfig HpkeConfigList
    HpkeCiphertext Report UploadRequest UploadErrors TaskConfiguration TaskExtension
    VerifyInit ReportShare VerifyResp AggregationJobInitReq AggregationJobContinueReq
    AggregationJobResp AggregationJobExtension Query BatchSelector CollectionJobReq
    CollectionJobResp AggregateShareReq AggregateShare AggregateShareAad""".split()
    assert set(required) <= names


# ---------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL_TYPES, ids=lambda c: c.__name__)
@SETTINGS
@given(data=st.data())
def test_round_trip(cls: type, data: st.DataObject) -> None:
    msg = data.draw(strategy_for(cls))
    encoded = msg.encode()
    decoded = cls.decode(encoded)  # type: ignore[attr-defined]
    assert decoded == msg
    assert type(decoded) is cls
    assert decoded.encode() == encoded
    if isinstance(msg, Struct):
        assert cls.from_json(msg.to_json()) == msg  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------
# Decoder fuzzing: only DecodeError, or a decode that re-encodes to the same bytes
# ---------------------------------------------------------------------------------------


def _decode_strictly(cls: type, data: bytes) -> None:
    try:
        msg = cls.decode(data)  # type: ignore[attr-defined]
    except DecodeError:
        return
    assert msg.encode() == data, f"{cls.__name__} decoded non-canonical bytes {data.hex()}"


@pytest.mark.parametrize("cls", ALL_TYPES, ids=lambda c: c.__name__)
@SETTINGS
@given(data=st.binary(max_size=120))
def test_fuzz_random_bytes(cls: type, data: bytes) -> None:
    _decode_strictly(cls, data)


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    op = rng.randrange(6)
    if op == 0 and b:  # flip a byte
        i = rng.randrange(len(b))
        b[i] ^= rng.randrange(1, 256)
    elif op == 1 and b:  # truncate
        del b[rng.randrange(len(b)) :]
    elif op == 2:  # insert
        b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
    elif op == 3 and b:  # delete
        del b[rng.randrange(len(b))]
    elif op == 4:  # append garbage
        b += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4)))
    elif b:  # set a byte to an extreme value (lengths, enums)
        b[rng.randrange(len(b))] = rng.choice([0x00, 0x01, 0x7F, 0xFF])
    return bytes(b)


@pytest.mark.parametrize("cls", ALL_TYPES, ids=lambda c: c.__name__)
@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_fuzz_mutated_encodings(cls: type, data: st.DataObject, seed: int) -> None:
    encoded = data.draw(strategy_for(cls)).encode()
    rng = random.Random(seed)
    for _ in range(8):
        encoded_mut = encoded
        for _ in range(rng.randrange(1, 4)):
            encoded_mut = _mutate(encoded_mut, rng)
        _decode_strictly(cls, encoded_mut)


# ---------------------------------------------------------------------------------------
# Golden encodings, by hand from the draft
# ---------------------------------------------------------------------------------------

RID_A = bytes.fromhex("0a0b0c0d0e0f00010203040506070809")
RID_B = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")


def test_golden_report() -> None:
    # Section 4.4.2, with the values of the example in Section 4.4.2.3 (time 17419860).
    report = Report(
        report_metadata=ReportMetadata(
            report_id=RID_A, time=17419860, public_extensions=[Extension(0x0123, b"\xaa\xbb")]
        ),
        public_share=b"\x0a\x0b",
        leader_encrypted_input_share=HpkeCiphertext(1, b"\x0f\x0e\x0d\x0c", b"\x0b\x0a\x09\x08"),
        helper_encrypted_input_share=HpkeCiphertext(2, b"\x0c\x0d\x0e\x0f", b"\x08\x00\x0a\x0b"),
    )
    expected = (
        # ReportMetadata
        "0a0b0c0d0e0f00010203040506070809"  # report_id: opaque ReportID[16], no prefix
        "000000000109ce54"  # time: uint64 17419860
        "0006"  # public_extensions<0..2^16-1>: 6 bytes
        "0123" "0002" "aabb"  # Extension: extension_type uint16, extension_data<0..2^16-1>
        "00000002" "0a0b"  # public_share<0..2^32-1>: 4-byte length
        # leader_encrypted_input_share: config_id uint8, enc<1..2^16-1>, payload<1..2^32-1>
        "01" "0004" "0f0e0d0c" "00000004" "0b0a0908"
        "02" "0004" "0c0d0e0f" "00000004" "08000a0b"  # helper_encrypted_input_share
    )
    assert report.encode().hex() == expected
    assert Report.decode(bytes.fromhex(expected)) == report
    # UploadRequest is the reports back to back, without a length prefix.
    assert UploadRequest([report, report]).encode().hex() == expected * 2
    assert UploadRequest.decode(b"") == UploadRequest(())


def test_golden_report_empty_extensions() -> None:
    # Section 4.4.2.3 writes the empty extension list as [0x00, 0x00].
    md = ReportMetadata(RID_A, 17419860, [])
    assert md.encode().hex() == "0a0b0c0d0e0f00010203040506070809" "000000000109ce54" "0000"


def test_golden_aggregation_job_init_req() -> None:
    # Section 4.5.3.1, with the extension of the example in Section 4.5.3.5.
    batch_id = bytes(range(0x1F, -1, -1))  # 1f 1e ... 00
    req = AggregationJobInitReq(
        verification_key_id=7,
        agg_param=bytes.fromhex("00010204"),
        extensions=[AggregationJobExtension.leader_selected_batch_id(batch_id)],
        verify_inits=[
            VerifyInit(
                report_share=ReportShare(
                    report_metadata=ReportMetadata(RID_A, 1000, []),
                    public_share=b"",
                    encrypted_input_share=HpkeCiphertext(3, b"\xaa", b"\xbb\xcc"),
                ),
                payload=bytes.fromhex("c0ffee"),
            ),
            VerifyInit(
                report_share=ReportShare(
                    report_metadata=ReportMetadata(RID_B, 1001, []),
                    public_share=b"\x01",
                    encrypted_input_share=HpkeCiphertext(3, b"\xdd", b"\xee"),
                ),
                payload=b"\x00",
            ),
        ],
    )
    expected = (
        "07"  # verification_key_id: uint8
        "00000004" "00010204"  # agg_param<0..2^32-1>
        "0024"  # extensions<0..2^16-1>: 36 bytes
        "0001" "0020" + batch_id.hex()  # leader_selected_batch_id(1), BatchID as data
        # verify_inits[verify_inits_length]: no prefix, rest of the message
        + "0a0b0c0d0e0f00010203040506070809" "00000000000003e8" "0000"  # report_metadata
        "00000000"  # public_share: empty
        "03" "0001" "aa" "00000002" "bbcc"  # encrypted_input_share
        "00000003" "c0ffee"  # VerifyInit.payload<1..2^32-1>
        "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff" "00000000000003e9" "0000"
        "00000001" "01"
        "03" "0001" "dd" "00000001" "ee"
        "00000001" "00"
    )
    assert req.encode().hex() == expected
    decoded = AggregationJobInitReq.decode(bytes.fromhex(expected))
    assert decoded == req
    assert decoded.leader_selected_batch_id() == batch_id


def test_golden_collection_job_resp() -> None:
    # Section 4.6.1, values of the example in Section 4.6.1.1.
    resp = CollectionJobResp(
        report_count=1000,
        interval=Interval(16595440, 1),
        leader_encrypted_agg_share=HpkeCiphertext(9, b"\x01\x02", b"\x03"),
        helper_encrypted_agg_share=HpkeCiphertext(9, b"\x04", b"\x05\x06\x07"),
    )
    expected = (
        "00000000000003e8"  # report_count: uint64 1000
        "0000000000fd39f0" "0000000000000001"  # interval: start 16595440, duration 1
        "09" "0002" "0102" "00000001" "03"  # leader_encrypted_agg_share
        "09" "0001" "04" "00000003" "050607"  # helper_encrypted_agg_share
    )
    assert resp.encode().hex() == expected
    assert CollectionJobResp.decode(bytes.fromhex(expected)) == resp


def test_golden_hpke_config_list() -> None:
    # The example of Section 4.4.1.1 (public keys shortened to four bytes).
    configs = HpkeConfigList(
        [
            HpkeConfig(194, 0x0010, 0x0001, 0x0001, bytes.fromhex("01020304")),
            HpkeConfig(17, 0x0020, 0x0001, 0x0003, bytes.fromhex("04030201")),
        ]
    )
    expected = (
        "001a"  # HpkeConfigList<10..2^16-1>: 26 bytes
        "c2" "0010" "0001" "0001" "0004" "01020304"
        "11" "0020" "0001" "0003" "0004" "04030201"
    )
    assert configs.encode().hex() == expected
    assert HpkeConfigList.decode(bytes.fromhex(expected)) == configs
    with pytest.raises(DecodeError, match="below the minimum 10"):
        HpkeConfigList.decode(bytes.fromhex("0000"))
    with pytest.raises(EncodeError):
        HpkeConfigList([]).encode()


def test_golden_upload_errors() -> None:
    errors = UploadErrors([ReportUploadStatus(RID_A, ReportError.REPORT_REPLAYED)])
    assert errors.encode().hex() == "0a0b0c0d0e0f00010203040506070809" "02"
    assert UploadErrors.decode(b"") == UploadErrors(())


def test_golden_verify_resp_select() -> None:
    # Section 4.5.3.2: continue(0) carries payload<1..2^32-1>, finish(1) Empty,
    # reject(2) a ReportError (uint8).
    cont = VerifyResp.continue_(RID_A, b"\x99")
    fin = VerifyResp.finish(RID_A)
    rej = VerifyResp.reject(RID_A, ReportError.VDAF_VERIFY_ERROR)
    rid = "0a0b0c0d0e0f00010203040506070809"
    assert cont.encode().hex() == rid + "00" "00000001" "99"
    assert fin.encode().hex() == rid + "01"
    assert rej.encode().hex() == rid + "02" "06"
    resp = AggregationJobResp([cont, fin, rej])
    assert resp.encode() == cont.encode() + fin.encode() + rej.encode()
    assert AggregationJobResp.decode(resp.encode()) == resp
    for bad in (rid + "03", rid + "02" "00", rid + "02" "0c", rid + "00" "00000000"):
        with pytest.raises(DecodeError, match="VerifyResp"):
            VerifyResp.decode(bytes.fromhex(bad))


def test_golden_aggregation_job_continue_req() -> None:
    req = AggregationJobContinueReq(step=1, verify_continues=[VerifyContinue(RID_A, b"\x01")])
    assert req.encode().hex() == "0001" "0a0b0c0d0e0f00010203040506070809" "00000001" "01"


def test_golden_collection_job_req_and_aggregate_share_req() -> None:
    # Sections 4.6.1 and 4.6.4, values of the example in Section 4.6.4.1.
    cjr = CollectionJobReq(
        query=Query.time_interval(Interval(1659540, 100)),
        agg_param=b"\x00\x01",
        extensions=[],
    )
    cjr_hex = (
        "01"  # batch_mode: time_interval(1), uint8
        "0010" "0000000000195294" "0000000000000064"  # config<0..2^16-1>: Interval
        "00000002" "0001"  # agg_param<0..2^32-1>
        "0000"  # extensions<0..2^16-1>
    )
    assert cjr.encode().hex() == cjr_hex
    req = AggregateShareReq(
        collection_job_req=cjr,
        batch_selector=BatchSelector.time_interval(Interval(1659544, 10)),
        report_count=1000,
        checksum=bytes([0x0A] * 32),
    )
    expected = (
        cjr_hex
        + "01" "0010" "0000000000195298" "000000000000000a"  # batch_selector
        + "00000000000003e8"  # report_count
        + "0a" * 32  # checksum: opaque[32], no prefix
    )
    assert req.encode().hex() == expected
    assert AggregateShareReq.decode(bytes.fromhex(expected)) == req
    # Leader-selected: empty query config; selector config is the BatchID.
    assert Query.leader_selected().encode().hex() == "02" "0000"
    bid = bytes(range(32))
    assert BatchSelector.leader_selected(bid).encode().hex() == "02" "0020" + bid.hex()
    assert BatchSelector.leader_selected(bid).batch_id == bid
    share = AggregateShare(HpkeCiphertext(1, b"\x02", b"\x03"))
    assert share.encode().hex() == "01" "0001" "02" "00000001" "03"


def test_golden_task_configuration() -> None:
    config = TaskConfiguration(
        task_info=b"demo",
        leader_aggregator_endpoint=b"https://l.example/",
        helper_aggregator_endpoint=b"https://h/",
        time_precision=3600,
        min_batch_size=100,
        batch_mode=BatchMode.LEADER_SELECTED,
        batch_config=b"",
        vdaf_type=0x00000004,
        vdaf_configuration=bytes.fromhex("0000000a00000003"),
        extensions=[TaskExtension.task_interval(Interval(10, 20))],
    )
    expected = (
        "04" "64656d6f"  # task_info<1..2^8-1>: 1-byte length
        "0012" + b"https://l.example/".hex()  # Url<1..2^16-1>
        + "000a" + b"https://h/".hex()
        + "0000000000000e10"  # time_precision: uint64 3600
        "0000000000000064"  # min_batch_size: uint64 100
        "02"  # batch_mode: leader_selected
        "0000"  # batch_config<0..2^16-1>: empty
        "00000004"  # vdaf_type: uint32 (Prio3Histogram)
        "0008" "0000000a00000003"  # vdaf_configuration<0..2^16-1>
        "0014" "0001" "0010" "000000000000000a" "0000000000000014"  # task_interval ext
    )
    assert config.encode().hex() == expected
    assert TaskConfiguration.decode(bytes.fromhex(expected)) == config
    assert config.task_interval() == Interval(10, 20)


def test_golden_plaintext_input_share_and_ping_pong() -> None:
    pis = PlaintextInputShare([Extension(1, b""), Extension(2, b"x")], b"\xab")
    assert pis.encode().hex() == "0009" "0001" "0000" "0002" "0001" "78" "00000001" "ab"
    # VDAF-20 Section 5.7: initialize(0) share; continue(1) message, share; finish(2) message
    assert PingPongMessage.initialize(b"\x01").encode().hex() == "00" "00000001" "01"
    assert PingPongMessage.continue_(b"\x02", b"\x03").encode().hex() == (
        "01" "00000001" "02" "00000001" "03"
    )
    assert PingPongMessage.finish(b"").encode().hex() == "02" "00000000"


# ---------------------------------------------------------------------------------------
# Strictness beyond the generic codec tests
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "hex_data", "match"),
    [
        (Query, "00" "0000", "0 is not a valid BatchMode"),
        (Query, "03" "0000", "3 is not a valid BatchMode"),
        (Query, "02" "0001" "00", "config for LEADER_SELECTED"),
        (Query, "01" "0000", "config for TIME_INTERVAL"),
        (BatchSelector, "02" "0000", "config for LEADER_SELECTED"),
        (ReportUploadStatus, "00" * 16 + "00", "0 is not a valid ReportError"),
        (ReportUploadStatus, "00" * 16 + "0c", "12 is not a valid ReportError"),
        (HpkeCiphertext, "01" "0000" "00000001" "00", "enc: length 0 below the minimum 1"),
        (HpkeCiphertext, "01" "0001" "00" "00000000", "payload: length 0 below the minimum 1"),
        (PlaintextInputShare, "0000" "00000000", "payload: length 0 below the minimum 1"),
        (VerifyContinue, "00" * 16 + "00000000", "payload: length 0 below the minimum 1"),
        (Extension, "0001" "0002" "00", "need 2 bytes, only 1 left"),
    ],
)
def test_rejections(cls: type, hex_data: str, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        cls.decode(bytes.fromhex(hex_data))  # type: ignore[attr-defined]


def test_report_extensions_must_be_strictly_increasing() -> None:
    md = "00" * 16 + "0000000000000001"
    for exts in ("0002" "0000" "0001" "0000", "0001" "0000" "0001" "0000"):
        data = bytes.fromhex(md + "0008" + exts)
        with pytest.raises(DecodeError, match="public_extensions: types must be strictly"):
            ReportMetadata.decode(data)
    with pytest.raises(EncodeError):
        ReportMetadata(RID_A, 1, [Extension(2, b""), Extension(1, b"")])


def test_collection_job_extension_order_maps_to_invalid_extension() -> None:
    data = bytes.fromhex("02" "0000" "00000000" "0008" "0005" "0000" "0005" "0000")
    with pytest.raises(DecodeError) as info:
        CollectionJobReq.decode(data)
    assert info.value.problem_type == "invalidExtension"
    assert info.value.field == "CollectionJobReq.extensions"
    CollectionJobReq(Query.leader_selected(), b"", [CollectionJobExtension(1, b"")])


def test_aggregation_job_extension_order_is_invalid_message() -> None:
    data = bytes.fromhex("00" "00000000" "0008" "0002" "0000" "0001" "0000")
    with pytest.raises(DecodeError) as info:
        AggregationJobInitReq.decode(data)
    assert info.value.problem_type == "invalidMessage"


def test_task_configuration_strictness() -> None:
    good = TaskConfiguration(b"x", b"https://a", b"https://b", 1, 1, 1, b"", 1, b"", [])
    enc = good.encode()
    # batch_config must be empty for both batch modes of DAP-18.
    with pytest.raises(EncodeError, match="batch_config must be empty"):
        TaskConfiguration(b"x", b"https://a", b"https://b", 1, 1, 1, b"\x00", 1, b"", [])
    bad = enc.replace(
        bytes.fromhex("01" "0000" "00000001"), bytes.fromhex("01" "0001" "00" "00000001")
    )
    with pytest.raises(DecodeError, match="batch_config must be empty"):
        TaskConfiguration.decode(bad)
    # task_info<1..2^8-1> cannot be empty; URLs must be ASCII.
    with pytest.raises(DecodeError, match="task_info: length 0"):
        TaskConfiguration.decode(b"\x00" + enc[2:])
    with pytest.raises(EncodeError, match="not ASCII"):
        TaskConfiguration(b"x", "https://ä".encode(), b"https://b", 1, 1, 1, b"", 1, b"", [])
    # A task_interval extension must carry exactly one Interval.
    with pytest.raises(EncodeError, match="task_interval extension_data"):
        TaskExtension(1, b"\x00" * 15)
    TaskExtension(2, b"\x00" * 15)  # unknown extensions are opaque here


def test_leader_selected_batch_id_extension_payload() -> None:
    req = AggregationJobInitReq(0, b"", [AggregationJobExtension(1, b"\x00" * 31)], [])
    with pytest.raises(DecodeError, match="BatchID"):
        req.leader_selected_batch_id()
    assert AggregationJobInitReq(0, b"", [], []).leader_selected_batch_id() is None


# ---------------------------------------------------------------------------------------
# Identifiers, times, checksum
# ---------------------------------------------------------------------------------------


def test_base64url_ids_from_the_draft() -> None:
    # Section 3: the draft's URL example.
    task_id = TaskID(bytes.fromhex(
        "f0163447364ccf1bc0e3affcca6873c9c381f64acdf9020662f83f46c07219e7"))
    job_id = AggregationJobID(bytes.fromhex("95ceda51e1a9752368b0d961f9466128"))
    assert task_id.to_base64url() == "8BY0RzZMzxvA46_8ymhzycOB9krN-QIGYvg_RsByGec"
    assert job_id.to_base64url() == "lc7aUeGpdSNosNlh-UZhKA"
    assert TaskID.from_base64url("8BY0RzZMzxvA46_8ymhzycOB9krN-QIGYvg_RsByGec") == task_id
    assert AggregationJobID.from_base64url("lc7aUeGpdSNosNlh-UZhKA") == job_id


@pytest.mark.parametrize(
    "text",
    [
        "lc7aUeGpdSNosNlh-UZhKA==",  # padding
        "lc7aUeGpdSNosNlh+UZhKA",  # standard alphabet
        "lc7aUeGpdSNosNlh-UZhKB",  # non-canonical trailing bits
        "lc7aUeGpdSNosNlh-UZh",  # wrong length
        "lc7aUeGpdSNosNlh-UZhK!",  # not base64
    ],
)
def test_base64url_strict(text: str) -> None:
    with pytest.raises(DecodeError):
        AggregationJobID.from_base64url(text)


def test_id_types() -> None:
    rid = ReportID.random()
    assert len(rid) == 16 and isinstance(rid, bytes)
    assert ReportID.decode(rid.encode()) == rid
    with pytest.raises(ValueError):
        ReportID(b"\x00" * 15)
    with pytest.raises(TypeError):
        ReportID(16)  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match="ReportID: 1 trailing bytes"):
        ReportID.decode(b"\x00" * 17)
    assert BatchID.random() != BatchID.random()


def test_time_examples_from_the_draft() -> None:
    # Section 4.1.1.1: time_precision 10 s; Time 123456789 is POSIX 1234567890.
    t = Time(123456789)
    assert t.to_seconds(10) == 1234567890
    assert Time.from_seconds(1234567899, 10) == t
    assert Time.from_seconds(1234567890, 10).encode().hex() == "00000000075bcd15"
    interval = Interval(t, Duration(11))
    assert interval.end * 10 == 1234568000
    assert interval.contains(t) and not interval.contains(interval.end)
    with pytest.raises(ValueError):
        Time(2**64)
    assert Duration.decode(bytes.fromhex("000000000000000b")) == 11


def test_batch_checksum() -> None:
    import hashlib

    a = hashlib.sha256(RID_A).digest()
    b = hashlib.sha256(RID_B).digest()
    assert batch_checksum([]) == bytes(32)
    assert batch_checksum([RID_A]) == a
    assert batch_checksum([RID_A, RID_B]) == bytes(x ^ y for x, y in zip(a, b, strict=True))
    assert batch_checksum([RID_A, RID_B, RID_A]) == b


def test_verify_resp_type_values() -> None:
    assert [int(v) for v in VerifyRespType] == [0, 1, 2]


@given(st.integers(0, 2**64 - 1))
def test_time_bucket_is_the_encoded_interval(t: int) -> None:
    """`time_bucket` packs the report's time-unit Interval directly (a fast path): the
    same bytes as the codec's, which decode back to (t, 1)."""
    from ppm_reference.dap.common import Duration, Interval, Time
    from ppm_reference.dap.core.buckets import time_bucket

    encoded = Interval(Time(t), Duration(1)).encode()
    assert time_bucket(t) == encoded
    decoded = Interval.decode(time_bucket(t))
    assert (int(decoded.start), int(decoded.duration)) == (t, 1)
