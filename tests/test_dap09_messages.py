"""DAP-09 messages: round trips, decoder fuzzing, hand-written golden encodings, strictness.

The golden encodings were written by hand, field by field, from the struct definitions of
draft-ietf-ppm-dap-09 (RFC 8446 Section 3 for the length prefixes: a vector's prefix is as
wide as its ceiling needs, 2 bytes for <..2^16-1>, 4 bytes for <..2^32-1>). They check
the declarations of dap/messages09.py against the draft, which round trips generated from
those same declarations cannot do.
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
from ppm_reference.dap.profiles.dap09.messages import (
    ALL_SCALARS,
    ALL_STRUCTS,
    HTTP_MESSAGES,
    AggregateShare,
    AggregateShareAad,
    AggregateShareReq,
    AggregationJobContinueReq,
    AggregationJobID,
    AggregationJobInitReq,
    AggregationJobResp,
    BatchID,
    BatchSelector,
    Collection,
    CollectionJobID,
    CollectionReq,
    Duration,
    Extension,
    FixedSizeQuery,
    FixedSizeQueryType,
    HpkeCiphertext,
    HpkeConfig,
    HpkeConfigList,
    InputShareAad,
    Interval,
    PartialBatchSelector,
    PlaintextInputShare,
    PrepareContinue,
    PrepareError,
    PrepareInit,
    PrepareResp,
    PrepareRespState,
    Query,
    QueryType,
    Report,
    ReportID,
    ReportMetadata,
    ReportShare,
    TaskID,
    Time,
    has_duplicate_extension_types,
)

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------
# Strategies derived from the wire declarations, `select` arms included
# ---------------------------------------------------------------------------------------


def codec_strategy(codec: Any) -> st.SearchStrategy[Any]:
    if isinstance(codec, EnumCodec):
        return st.sampled_from(list(codec.enum_cls))
    if isinstance(codec, Uint):
        return st.integers(0, codec.max).map(codec.wrap)
    if isinstance(codec, Fixed):
        return st.binary(min_size=codec.size, max_size=codec.size).map(codec.wrap)
    if isinstance(codec, Opaque):
        return st.binary(min_size=codec.min_len, max_size=min(codec.max_len, 20))
    if isinstance(codec, StructCodec):
        return struct_strategy(codec.cls)
    if isinstance(codec, Rest):
        raise TypeError("DAP-09 has no rest-of-message vectors")
    if isinstance(codec, Vector):
        assert codec.increasing is None  # DAP-09 has no sorted lists
        return st.lists(codec_strategy(codec.item), min_size=1 if codec.min_len else 0,
                        max_size=3).map(tuple)
    raise TypeError(f"no strategy for {codec!r}")


def struct_strategy(cls: type[Struct]) -> st.SearchStrategy[Any]:
    specs = field_specs(cls)

    @st.composite
    def build(draw: Any) -> Any:
        values: dict[str, Any] = {}
        for spec in specs:
            if spec.when is not None and values[spec.when[0]] not in spec.when[1]:
                values[spec.name] = None
            else:
                values[spec.name] = draw(codec_strategy(spec.codec))
        return cls(**values)

    return build()


def test_every_http_message_is_a_struct_of_the_module() -> None:
    assert set(HTTP_MESSAGES) <= set(ALL_STRUCTS)
    assert len(ALL_STRUCTS) == len(set(ALL_STRUCTS)) == 26


@pytest.mark.parametrize("cls", ALL_STRUCTS, ids=lambda c: c.__name__)
@SETTINGS
@given(data=st.data())
def test_round_trip(cls: type[Struct], data: Any) -> None:
    msg = data.draw(struct_strategy(cls))
    encoded = msg.encode()
    decoded = cls.decode(encoded)
    assert decoded == msg
    assert decoded.encode() == encoded
    assert cls.from_json(msg.to_json()) == msg
    # Strict: one trailing byte and one missing byte are both rejected.
    with pytest.raises(DecodeError):
        cls.decode(encoded + b"\x00")
    if encoded:
        with pytest.raises(DecodeError):
            cls.decode(encoded[:-1])


@pytest.mark.parametrize("cls", ALL_SCALARS, ids=lambda c: c.__name__)
def test_scalars_round_trip(cls: type) -> None:
    if issubclass(cls, bytes):
        value = cls(bytes(range(cls.SIZE)))  # type: ignore[attr-defined]
        assert cls.decode(value.encode()) == value  # type: ignore[attr-defined]
        with pytest.raises(DecodeError):
            cls.decode(value.encode() + b"\x00")  # type: ignore[attr-defined]
    else:
        value = cls(1_700_000_000)
        assert value.encode() == (1_700_000_000).to_bytes(8, "big")
        assert cls.decode(value.encode()) == value


@pytest.mark.parametrize("cls", ALL_STRUCTS, ids=lambda c: c.__name__)
@SETTINGS
@given(data=st.data())
def test_decoder_fuzz(cls: type[Struct], data: Any) -> None:
    """Mutated encodings either fail with DecodeError or decode to a message that
    re-encodes to exactly the same bytes."""
    msg = data.draw(struct_strategy(cls))
    buf = bytearray(msg.encode())
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(8):
        mutated = bytearray(buf)
        op = rng.randrange(4)
        if op == 0 and mutated:
            mutated[rng.randrange(len(mutated))] ^= 1 << rng.randrange(8)
        elif op == 1 and mutated:
            del mutated[rng.randrange(len(mutated)):]
        elif op == 2:
            mutated.insert(rng.randrange(len(mutated) + 1), rng.randrange(256))
        elif mutated:
            i = rng.randrange(len(mutated))
            mutated[i] = rng.choice([0, 1, 2, 3, 0xFF])
        try:
            decoded = cls.decode(bytes(mutated))
        except DecodeError:
            continue
        assert decoded.encode() == bytes(mutated)


@SETTINGS
@given(st.binary(max_size=80))
def test_random_bytes_never_crash(data: bytes) -> None:
    for cls in ALL_STRUCTS:
        try:
            decoded = cls.decode(data)
        except DecodeError:
            continue
        assert decoded.encode() == data


# ---------------------------------------------------------------------------------------
# Golden encodings, written by hand from the draft
# ---------------------------------------------------------------------------------------

RID = bytes(range(16))  # ReportID
TID = bytes([0xAA]) * 32  # TaskID
BID = bytes([0xBB]) * 32  # BatchID


def _h(s: str) -> bytes:
    return bytes.fromhex("".join(s.split()))


def test_golden_report() -> None:
    report = Report(
        report_metadata=ReportMetadata(RID, 1_700_000_000),
        public_share=b"\x01\x02",
        leader_encrypted_input_share=HpkeCiphertext(7, b"\xe1\xe2", b"\xc1\xc2\xc3"),
        helper_encrypted_input_share=HpkeCiphertext(9, b"\xe3", b"\xc4"),
    )
    expected = _h(
        "000102030405060708090a0b0c0d0e0f"  # report_id: opaque ReportID[16]
        "000000006553f100"  # time: uint64, 1700000000 seconds
        "00000002 0102"  # public_share<0..2^32-1>
        "07 0002 e1e2 00000003 c1c2c3"  # leader: config_id, enc<1..2^16-1>, payload<1..2^32-1>
        "09 0001 e3 00000001 c4"  # helper_encrypted_input_share
    )
    assert report.encode() == expected
    assert Report.decode(expected) == report
    # There is no public extensions list in DAP-09's ReportMetadata: 24 bytes exactly.
    assert len(report.report_metadata.encode()) == 24


def test_golden_aggregation_job_init_req() -> None:
    prep_init = PrepareInit(
        report_share=ReportShare(
            report_metadata=ReportMetadata(RID, 3600),
            public_share=b"",
            encrypted_input_share=HpkeCiphertext(1, b"\xee", b"\xcc\xdd"),
        ),
        payload=b"\x00\x00\x00\x00\x01\x99",  # a ping-pong initialize message
    )
    expected_prep_init = (
        RID.hex() + "0000000000000e10"  # report_metadata: report_id, time 3600
        + "00000000"  # public_share (empty)
        + "01" + "0001ee" + "00000002ccdd"  # encrypted_input_share
        + "00000006" + "000000000199"  # payload<0..2^32-1>
    )
    # time_interval: agg_param, then PartialBatchSelector = query_type only.
    req = AggregationJobInitReq(b"", PartialBatchSelector.time_interval(), [prep_init])
    n = len(bytes.fromhex(expected_prep_init))
    assert n == 16 + 8 + 4 + (1 + 3 + 6) + (4 + 6)
    expected = _h("00000000" + "01" + f"{n:08x}" + expected_prep_init)
    assert req.encode() == expected
    assert AggregationJobInitReq.decode(expected) == req
    # fixed_size: the batch ID follows the query type; prepare_inits has a 4-byte prefix.
    req2 = AggregationJobInitReq(b"\x05", PartialBatchSelector.fixed_size(BID), [prep_init] * 2)
    expected2 = _h("00000001 05" + "02" + BID.hex() + f"{2 * n:08x}" + expected_prep_init * 2)
    assert req2.encode() == expected2
    assert AggregationJobInitReq.decode(expected2) == req2


def test_golden_collection() -> None:
    collection = Collection(
        part_batch_selector=PartialBatchSelector.fixed_size(BID),
        report_count=3,
        interval=Interval(1_700_000_000 - 1_700_000_000 % 3600, 7200),
        leader_encrypted_agg_share=HpkeCiphertext(200, b"\x01", b"\x02\x03"),
        helper_encrypted_agg_share=HpkeCiphertext(200, b"\x04\x05", b"\x06"),
    )
    expected = _h(
        "02" + BID.hex()  # PartialBatchSelector: fixed_size, batch_id
        + "0000000000000003"  # report_count: uint64
        + f"{1_699_999_200:016x}" + "0000000000001c20"  # interval: start, duration 7200
        + "c8 0001 01 00000002 0203"  # leader_encrypted_agg_share
        + "c8 0002 0405 00000001 06"  # helper_encrypted_agg_share
    )
    assert collection.encode() == expected
    assert Collection.decode(expected) == collection
    ti = Collection(PartialBatchSelector.time_interval(), 0, Interval(0, 0),
                    collection.leader_encrypted_agg_share, collection.helper_encrypted_agg_share)
    assert ti.encode() == _h(
        "01" + "00" * 8 + "00" * 16 + "c8000101000000020203" + "c80002040500000001" + "06"
    )


def test_golden_queries_and_selectors() -> None:
    iv = Interval(1_659_544_000, 1000)
    iv_hex = "0000000062eaa1c0" "00000000000003e8"
    assert Query.time_interval(iv).encode() == _h("01" + iv_hex)
    assert Query.fixed_size(FixedSizeQuery.by_batch_id(BID)).encode() == _h("02 00" + BID.hex())
    assert Query.fixed_size(FixedSizeQuery.current_batch()).encode() == _h("02 01")
    assert BatchSelector.time_interval(iv).encode() == _h("01" + iv_hex)
    assert BatchSelector.fixed_size(BID).encode() == _h("02" + BID.hex())
    req = CollectionReq(Query.time_interval(iv), b"")
    assert req.encode() == _h("01" + iv_hex + "00000000")
    aad = AggregateShareAad(TaskID(TID), b"\x07", BatchSelector.fixed_size(BID))
    assert aad.encode() == _h(TID.hex() + "00000001 07" + "02" + BID.hex())
    share_req = AggregateShareReq(BatchSelector.time_interval(iv), b"", 10, b"\x11" * 32)
    assert share_req.encode() == _h("01" + iv_hex + "00000000" + "000000000000000a" + "11" * 32)


def test_golden_prepare_messages() -> None:
    assert PrepareResp.continue_(RID, b"\xab").encode() == _h(RID.hex() + "00 00000001 ab")
    assert PrepareResp.finished(RID).encode() == _h(RID.hex() + "01")
    assert PrepareResp.reject(RID, PrepareError.BATCH_COLLECTED).encode() == _h(RID.hex() + "02 00")
    assert PrepareResp.reject(RID, PrepareError.REPORT_TOO_EARLY).encode() == _h(
        RID.hex() + "02 09")
    resp = AggregationJobResp([PrepareResp.finished(RID)])
    assert resp.encode() == _h("00000011" + RID.hex() + "01")
    cont = AggregationJobContinueReq(1, [PrepareContinue(RID, b"")])
    assert cont.encode() == _h("0001" + "00000014" + RID.hex() + "00000000")


def test_golden_upload_structs() -> None:
    pis = PlaintextInputShare([Extension(0, b"\x01")], b"")
    assert pis.encode() == _h("0005 0000 0001 01" + "00000000")
    aad = InputShareAad(TaskID(TID), ReportMetadata(RID, 60), b"\x0f")
    assert aad.encode() == _h(TID.hex() + RID.hex() + "000000000000003c" + "00000001 0f")
    config = HpkeConfig(1, 0x20, 1, 1, b"\x42" * 32)
    assert HpkeConfigList([config]).encode() == _h(
        "0029" + "01 0020 0001 0001 0020" + "42" * 32
    )
    assert AggregateShare(HpkeCiphertext(1, b"\x02", b"\x03")).encode() == _h(
        "01 0001 02 00000001 03")


# ---------------------------------------------------------------------------------------
# Strictness
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "data", "where"),
    [
        (Query, _h("00"), "query_type"),  # reserved(0) never decodes
        (Query, _h("03"), "query_type"),
        (Query, _h("02 02"), "fixed_size_query.query_type"),
        (PartialBatchSelector, _h("00"), "query_type"),
        (PartialBatchSelector, _h("02" + "bb" * 31), "batch_id"),
        (BatchSelector, _h("01" + "00" * 15), "batch_interval"),
        (PrepareResp, _h(RID.hex() + "03"), "prepare_resp_state"),
        (PrepareResp, _h(RID.hex() + "02 0a"), "prepare_error"),
        (AggregationJobResp, _h("00000000"), "prepare_resps"),  # <1..2^32-1>
        (AggregationJobContinueReq, _h("0001 00000000"), "prepare_continues"),
        (HpkeConfigList, _h("0000"), "configs"),  # <1..2^16-1>
        (HpkeCiphertext, _h("01 0000 00000001 00"), "enc"),  # enc<1..>
        (HpkeCiphertext, _h("01 0001 00 00000000"), "payload"),  # payload<1..>
        (CollectionReq, _h("01" + "00" * 16 + "00000001"), "agg_param"),  # truncated
        (AggregationJobResp, _h("00000011" + RID.hex() + "01" + "00"), ""),  # trailing
    ],
)
def test_strict_decoding(cls: type[Struct], data: bytes, where: str) -> None:
    with pytest.raises(DecodeError) as info:
        cls.decode(data)
    assert where in info.value.field or where in str(info.value)
    assert info.value.problem_type == "invalidMessage"


def test_vector_length_prefix_must_cover_whole_items() -> None:
    # prepare_resps whose length prefix cuts a PrepareResp in half.
    data = _h("00000010" + RID.hex() + "01")
    with pytest.raises(DecodeError):
        AggregationJobResp.decode(data)


def test_selects_reject_inactive_arms() -> None:
    with pytest.raises(EncodeError):
        Query(QueryType.TIME_INTERVAL, batch_interval=Interval(0, 1),
              fixed_size_query=FixedSizeQuery.current_batch())
    with pytest.raises(EncodeError):
        PartialBatchSelector(QueryType.TIME_INTERVAL, BatchID(BID))
    with pytest.raises(EncodeError):
        PrepareResp(ReportID(RID), PrepareRespState.FINISHED, payload=b"")
    with pytest.raises(EncodeError):
        FixedSizeQuery(FixedSizeQueryType.CURRENT_BATCH, BatchID(BID))
    with pytest.raises(EncodeError):
        AggregationJobInitReq(b"", PartialBatchSelector.time_interval(), [])


def test_extensions_unsorted_decode_and_duplicates_are_detected() -> None:
    pis = PlaintextInputShare([Extension(5, b""), Extension(1, b"")], b"x")
    assert PlaintextInputShare.decode(pis.encode()) == pis  # no ordering rule in DAP-09
    assert not has_duplicate_extension_types(pis.extensions)
    assert has_duplicate_extension_types([Extension(1, b""), Extension(1, b"\x00")])


def test_batch_selector_for_collection() -> None:
    iv = Interval(3600, 3600)
    assert BatchSelector.for_collection(
        Query.time_interval(iv), PartialBatchSelector.time_interval()
    ) == BatchSelector.time_interval(iv)
    assert BatchSelector.for_collection(
        Query.fixed_size(FixedSizeQuery.current_batch()), PartialBatchSelector.fixed_size(BID)
    ) == BatchSelector.fixed_size(BID)
    with pytest.raises(ValueError):
        BatchSelector.for_collection(Query.time_interval(iv), PartialBatchSelector.fixed_size(BID))


def test_times_are_seconds() -> None:
    assert Time.rounded(1_700_000_123, 3600) == 1_699_999_200
    assert isinstance(ReportMetadata(RID, 5).time, Time)
    assert isinstance(Interval(1, 2).duration, Duration)
    assert AggregationJobID.random() != AggregationJobID.random()
    assert len(CollectionJobID.random()) == 16
