"""The fast paths of the hot messages (dap/profiles/dap18/fast.py) against the generic
codec, and the direct RFC 9180 open (dap/hpke.py) against pyhpke's: on random valid
messages they give equal objects and the same bytes; on random invalid input the fast
decoders refuse (None: the generic codec decides) whatever the generic codec refuses."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppm_reference.dap.codec import DecodeError, EncodeError
from ppm_reference.dap.common import Extension, HpkeCiphertext, ReportID, Time, VerifyRespType
from ppm_reference.dap.hpke import (
    HpkeError,
    _open_base_pyhpke,
    all_suites,
    derive_keypair,
    open_base,
    seal_base,
)
from ppm_reference.dap.profiles.dap18 import fast
from ppm_reference.dap.profiles.dap18 import messages as m18
from ppm_reference.dap.profiles.dap19 import messages as m19

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

small = st.binary(min_size=0, max_size=24)
nonempty = st.binary(min_size=1, max_size=24)


@st.composite
def extensions(draw: Any, cls: type[Any] = Extension) -> tuple[Any, ...]:
    types = sorted(draw(st.sets(st.integers(0, 0xFFFF), max_size=3)))
    return tuple(cls(t, draw(small)) for t in types)


@st.composite
def metadata(draw: Any) -> m18.ReportMetadata:
    exts = draw(extensions()) if draw(st.integers(0, 3)) == 0 else ()
    return m18.ReportMetadata(ReportID(draw(st.binary(min_size=16, max_size=16))),
                              Time(draw(st.integers(0, 2**64 - 1))), exts)


ciphertexts = st.builds(HpkeCiphertext, st.integers(0, 255), nonempty, nonempty)
reports = st.builds(m18.Report, metadata(), small, ciphertexts, ciphertexts)


@st.composite
def init_reqs(draw: Any) -> m18.AggregationJobInitReq:
    inits = tuple(m18.VerifyInit(m18.ReportShare(draw(metadata()), draw(small),
                                                 draw(ciphertexts)), draw(nonempty))
                  for _ in range(draw(st.integers(0, 4))))
    exts = draw(extensions(m18.AggregationJobExtension)) if draw(st.booleans()) else ()
    return m18.AggregationJobInitReq(draw(st.integers(0, 255)), draw(small), exts, inits)


def verify_resps(m: Any) -> Any:
    errors = st.sampled_from(list(m.ReportError))
    rid = st.binary(min_size=16, max_size=16)
    return st.one_of(
        st.builds(lambda r, p: m.VerifyResp.continue_(r, p), rid, nonempty),
        st.builds(lambda r: m.VerifyResp.finish(r), rid),
        st.builds(lambda r, e: m.VerifyResp.reject(r, e), rid, errors))


def mutate(data: bytes, draw: Any) -> bytes:
    """A random edit of an encoding: truncate, flip a byte, insert or append bytes."""
    kind = draw(st.integers(0, 3))
    if not data or kind == 3:
        return data + draw(st.binary(min_size=1, max_size=4))
    i = draw(st.integers(0, len(data) - 1))
    if kind == 0:
        return data[:i]
    if kind == 1:
        return data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
    return data[:i] + draw(st.binary(min_size=1, max_size=4)) + data[i:]


def generic(decode: Any, data: bytes) -> Any:
    try:
        return decode(data)
    except DecodeError:
        return None


# -- Report / UploadRequest ------------------------------------------------------------


@SETTINGS
@given(st.lists(reports, max_size=4))
def test_upload_request_fast_equals_generic(rs: list[m18.Report]) -> None:
    body = m18.UploadRequest(tuple(rs)).encode()
    decoded = fast.decode_upload_reports(body)
    assert decoded is not None
    assert [r for r, _ in decoded] == list(m18.UploadRequest.decode(body).reports)
    assert [raw for _, raw in decoded] == [r.encode() for r in rs]
    for (report, raw), original in zip(decoded, rs, strict=True):
        assert type(report.report_metadata.report_id) is ReportID
        assert type(report.report_metadata.time) is Time
        assert report.encode() == raw == fast.report_encoding(report)
        assert fast.decode_report(raw) == original
        assert fast.encode_metadata(report.report_metadata) == \
            original.report_metadata.encode()


@SETTINGS
@given(st.lists(reports, min_size=1, max_size=3), st.data())
def test_upload_request_fast_refuses_what_generic_refuses(rs: list[m18.Report],
                                                          data: Any) -> None:
    body = mutate(m18.UploadRequest(tuple(rs)).encode(), data.draw)
    want = generic(lambda b: list(m18.UploadRequest.decode(b).reports), body)
    got = fast.decode_upload_reports(body)
    if want is None:
        assert got is None
    elif got is not None:
        assert [r for r, _ in got] == want
    one = mutate(rs[0].encode(), data.draw)
    want_one = generic(m18.Report.decode, one)
    got_one = fast.decode_report(one)
    assert got_one is None if want_one is None else got_one in (None, want_one)


@SETTINGS
@given(st.binary(max_size=80))
def test_random_bytes(body: bytes) -> None:
    for fast_decode, slow in [
        (fast.decode_upload_reports, lambda b: m18.UploadRequest.decode(b)),
        (fast.decode_report, m18.Report.decode),
        (lambda b: fast.decode_init_req(b, m18.AggregationJobInitReq),
         m18.AggregationJobInitReq.decode),
        (lambda b: fast.decode_job_resp(b, m18.ReportError), m18.AggregationJobResp.decode),
        (fast.decode_plaintext_input_share, m18.PlaintextInputShare.decode),
    ]:
        if generic(slow, body) is None:
            assert fast_decode(body) is None


# -- AggregationJobInitReq -------------------------------------------------------------


@SETTINGS
@given(init_reqs(), st.data())
def test_init_req_fast_equals_generic(req: m18.AggregationJobInitReq, data: Any) -> None:
    body = req.encode()
    assert fast.decode_init_req(body, m18.AggregationJobInitReq) == req
    bad = mutate(body, data.draw)
    want = generic(m18.AggregationJobInitReq.decode, bad)
    got = fast.decode_init_req(bad, m18.AggregationJobInitReq)
    assert got is None if want is None else got in (None, want)


@SETTINGS
@given(st.lists(st.tuples(reports, small), max_size=4), st.integers(0, 255), small,
       st.booleans())
def test_init_req_fast_encoding(items: list[tuple[m18.Report, bytes]], key_id: int,
                                agg_param: bytes, with_batch: bool) -> None:
    exts = (m18.AggregationJobExtension.leader_selected_batch_id(b"\x07" * 32),) \
        if with_batch else ()
    got = fast.encode_init_req(m18.AggregationJobInitReq, key_id, agg_param, exts, items)
    try:
        want: bytes | None = m18.AggregationJobInitReq(key_id, agg_param, exts, tuple(
            m18.VerifyInit(m18.ReportShare(r.report_metadata, r.public_share,
                                           r.helper_encrypted_input_share), p)
            for r, p in items)).encode()
    except EncodeError:
        want = None  # an empty payload: the fast encoder leaves it to the generic one
    assert got == want


# -- AggregationJobResp (DAP-18 and DAP-19 error codes) ---------------------------------


@pytest.mark.parametrize("m", [m18, m19], ids=["dap18", "dap19"])
def test_job_resp_fast_equals_generic(m: Any) -> None:
    @SETTINGS
    @given(st.lists(verify_resps(m), max_size=5), st.data())
    def check(resps: list[Any], data: Any) -> None:
        body = m.AggregationJobResp(tuple(resps)).encode()
        items = [(bytes(r.report_id), r.verify_resp_type, r.payload,
                  None if r.report_error is None else int(r.report_error)) for r in resps]
        assert fast.encode_job_resp(items, m.ReportError) == body
        decoded = fast.decode_job_resp(body, m.ReportError)
        assert decoded == [(bytes(r.report_id), r.verify_resp_type, r.payload,
                            r.report_error) for r in resps]
        bad = mutate(body, data.draw)
        if generic(m.AggregationJobResp.decode, bad) is None:
            assert fast.decode_job_resp(bad, m.ReportError) is None

    check()


def test_job_resp_fast_encoder_leaves_invalid_values_to_the_generic_one() -> None:
    rid = b"\x01" * 16
    assert fast.encode_job_resp([(rid, VerifyRespType.CONTINUE, b"", None)],
                                m18.ReportError) is None
    assert fast.encode_job_resp([(rid, VerifyRespType.REJECT, None, 200)],
                                m18.ReportError) is None
    assert fast.encode_job_resp([(rid[:15], VerifyRespType.FINISH, None, None)],
                                m18.ReportError) is None


# -- PlaintextInputShare and InputShareAad -----------------------------------------------


@SETTINGS
@given(extensions(), nonempty, st.data())
def test_plaintext_input_share(exts: tuple[Extension, ...], payload: bytes,
                               data: Any) -> None:
    body = m18.PlaintextInputShare(exts, payload).encode()
    assert fast.decode_plaintext_input_share(body) == (
        payload, [(int(e.extension_type), bytes(e.extension_data)) for e in exts])
    bad = mutate(body, data.draw)
    if generic(m18.PlaintextInputShare.decode, bad) is None:
        assert fast.decode_plaintext_input_share(bad) is None


@SETTINGS
@given(metadata(), small)
def test_input_share_aad(md: m18.ReportMetadata, public_share: bytes) -> None:
    from ppm_reference.dap.profiles.dap18.client import input_share_aad
    from ppm_reference.dap.provision import new_task
    from ppm_reference.vdaf.prio3 import Prio3Count

    task = _TASK.get("t") or _TASK.setdefault(
        "t", new_task(Prio3Count(2), "https://l.example/", "https://h.example/").task)
    assert fast.input_share_aad(task.input_share_aad_prefix, md, public_share) == \
        input_share_aad(task, md, public_share).encode()


_TASK: dict[str, Any] = {}


# -- HPKE: the direct open against pyhpke's ----------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(all_suites()), st.binary(min_size=66, max_size=66), small, small,
       small, st.integers(0, 3))
def test_direct_open_equals_pyhpke(suite: Any, ikm: bytes, info: bytes, aad: bytes,
                                   pt: bytes, tamper: int) -> None:
    kem, kdf, aead = suite
    kp = derive_keypair(3, ikm, kem, kdf, aead)
    ct = seal_base(kp.config, info, aad, pt)
    if tamper == 1:
        ct = HpkeCiphertext(3, ct.enc, bytes([ct.payload[0] ^ 1]) + ct.payload[1:])
    elif tamper == 2:
        ct = HpkeCiphertext(3, ct.enc[:-1] + bytes([ct.enc[-1] ^ 1]), ct.payload)
    elif tamper == 3:
        aad += b"!"
    results = []
    for open_ in (open_base, _open_base_pyhpke):
        try:
            results.append(open_(kp, ct, info, aad))
        except HpkeError:
            results.append(None)
    assert results[0] == results[1]
    assert (results[0] == pt) == (tamper == 0)
