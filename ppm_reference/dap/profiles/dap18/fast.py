"""Fast paths for DAP-18's (and DAP-19's) hottest messages, beside the generic codec.

Every report crosses these messages once or twice per Aggregator: ``Report`` in an
``UploadRequest`` (Section 4.4.2), ``ReportShare`` in a ``VerifyInit`` of an
``AggregationJobInitReq`` (Section 4.5.2.1), ``VerifyResp`` in an ``AggregationJobResp``
(Section 4.5.3.2), ``HpkeCiphertext`` in each, ``PlaintextInputShare`` and
``InputShareAad`` around the HPKE open (Section 4.5.3.3). The generic codec
(:mod:`dap.codec`) walks field specs, keeps an error path and validates every value at
construction; here the same bytes are read and written with slices and fixed-width
integers, and the message objects are built without re-validating what was just parsed.

The rule that keeps the two in step: a fast decoder returns ``None`` as soon as anything
is unusual (short input, a length below a vector's floor, trailing bytes, an undeclared
enumeration value, an exception of any kind) and the caller then runs the generic
decoder on the whole input, which raises the exact :class:`dap.codec.DecodeError` (or
accepts it). A fast encoder likewise hands anything its checks do not cover to the
generic encoder. So a fast path can only ever accept what the generic codec accepts,
with equal objects, and write the same bytes; ``tests/test_dap_fast_codec.py`` checks
both on random valid and invalid messages (hypothesis). Report extensions and
aggregation job extensions (rare, short) are decoded by the generic codec inside the
fast path.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ppm_reference.dap.codec import Decoder
from ppm_reference.dap.common import (
    REPORT_EXTENSIONS,
    HpkeCiphertext,
    ReportID,
    Time,
    VerifyRespType,
)
from ppm_reference.dap.profiles.dap18 import messages as m18

_CONTINUE = VerifyRespType.CONTINUE
_FINISH = VerifyRespType.FINISH
_REJECT = VerifyRespType.REJECT
_MAX_U32 = (1 << 32) - 1
# The attribute under which a fast-decoded Report keeps its own encoding (not a field:
# invisible to ==, repr and the generic encoder), so that it is stored without encoding
# it again.
ENCODING = "_fast_encoding"


def _make(cls: type[Any], values: dict[str, Any]) -> Any:
    """A frozen message object with already valid, normalized field values (what the
    generic decoder's constructor would produce from them)."""
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


def _u16(data: bytes, pos: int) -> int:
    return (data[pos] << 8) | data[pos + 1]


def _u32(data: bytes, pos: int) -> int:
    return int.from_bytes(data[pos:pos + 4], "big")


class _Bad(Exception):
    """Leave the fast path (the generic codec decides)."""


def _metadata(data: bytes, pos: int, end: int) -> tuple[Any, int]:
    """``ReportMetadata`` (Section 4.4.2): report_id[16], time u64, extensions<0..2^16-1>."""
    if pos + 26 > end:
        raise _Bad
    n = _u16(data, pos + 24)
    ext_end = pos + 26 + n
    if ext_end > end:
        raise _Bad
    if n:
        exts = REPORT_EXTENSIONS.decode(Decoder(data[pos + 24:ext_end]))
    else:
        exts = ()
    md = _make(m18.ReportMetadata, {
        "report_id": ReportID(data[pos:pos + 16]),
        "time": Time(int.from_bytes(data[pos + 16:pos + 24], "big")),
        "public_extensions": exts})
    return md, ext_end


def _opaque32(data: bytes, pos: int, end: int, min_len: int) -> tuple[bytes, int]:
    if pos + 4 > end:
        raise _Bad
    n = _u32(data, pos)
    stop = pos + 4 + n
    if n < min_len or stop > end:
        raise _Bad
    return data[pos + 4:stop], stop


def _ciphertext(data: bytes, pos: int, end: int) -> tuple[HpkeCiphertext, int]:
    """``HpkeCiphertext`` (Section 4.1): config_id u8, enc<1..2^16-1>, payload<1..2^32-1>."""
    if pos + 3 > end:
        raise _Bad
    config_id = data[pos]
    n = _u16(data, pos + 1)
    enc_end = pos + 3 + n
    if n < 1 or enc_end > end:
        raise _Bad
    payload, stop = _opaque32(data, enc_end, end, 1)
    return _make(HpkeCiphertext, {"config_id": config_id, "enc": data[pos + 3:enc_end],
                                  "payload": payload}), stop


def _report(data: bytes, pos: int, end: int) -> tuple[Any, int]:
    md, pos = _metadata(data, pos, end)
    public_share, pos = _opaque32(data, pos, end, 0)
    leader, pos = _ciphertext(data, pos, end)
    helper, pos = _ciphertext(data, pos, end)
    return _make(m18.Report, {"report_metadata": md, "public_share": public_share,
                              "leader_encrypted_input_share": leader,
                              "helper_encrypted_input_share": helper}), pos


def decode_upload_reports(body: bytes) -> list[tuple[Any, bytes]] | None:
    """The reports of an ``UploadRequest`` with each one's encoding (a slice of the body),
    or None (use the generic decoder)."""
    data = bytes(body)
    out = []
    pos, end = 0, len(data)
    try:
        while pos < end:
            report, stop = _report(data, pos, end)
            raw = data[pos:stop]
            report.__dict__[ENCODING] = raw
            out.append((report, raw))
            pos = stop
    except Exception:  # noqa: BLE001 - anything unusual: the generic codec decides
        return None
    return out


def decode_report(data: bytes) -> Any | None:
    """One ``Report`` (no trailing bytes), or None."""
    data = bytes(data)
    try:
        report, stop = _report(data, 0, len(data))
    except Exception:  # noqa: BLE001
        return None
    if stop != len(data):
        return None
    report.__dict__[ENCODING] = data
    return report


def report_encoding(report: Any) -> bytes:
    """A report's encoding: the bytes it was fast-decoded from, else the generic one."""
    raw = report.__dict__.get(ENCODING)
    return raw if raw is not None else bytes(report.encode())


def decode_init_req(body: bytes, req_cls: type[Any]) -> Any | None:
    """An ``AggregationJobInitReq`` (Section 4.5.2.1) of class ``req_cls``, or None."""
    data = bytes(body)
    end = len(data)
    try:
        if end < 7:
            return None
        key_id = data[0]
        agg_param, pos = _opaque32(data, 1, end, 0)
        if pos + 2 > end:
            return None
        n = _u16(data, pos)
        if pos + 2 + n > end:
            return None
        ext_codec = _specs_codec(req_cls, "extensions")
        exts = ext_codec.decode(Decoder(data[pos:pos + 2 + n])) if n else ()
        pos += 2 + n
        inits = []
        while pos < end:
            md, pos = _metadata(data, pos, end)
            public_share, pos = _opaque32(data, pos, end, 0)
            ct, pos = _ciphertext(data, pos, end)
            payload, pos = _opaque32(data, pos, end, 1)
            share = _make(m18.ReportShare, {"report_metadata": md,
                                            "public_share": public_share,
                                            "encrypted_input_share": ct})
            inits.append(_make(m18.VerifyInit, {"report_share": share, "payload": payload}))
    except Exception:  # noqa: BLE001
        return None
    return _make(req_cls, {"verification_key_id": key_id, "agg_param": agg_param,
                           "extensions": exts, "verify_inits": tuple(inits)})


def _specs_codec(cls: type[Any], name: str) -> Any:
    from ppm_reference.dap.codec import field_specs

    return next(s.codec for s in field_specs(cls) if s.name == name)


def encode_metadata(md: Any) -> bytes:
    """``ReportMetadata`` as the generic encoder writes it."""
    if md.public_extensions:
        return bytes(md.encode())
    return bytes(md.report_id) + int(md.time).to_bytes(8, "big") + b"\x00\x00"


def _encode_ciphertext(ct: Any) -> bytes | None:
    enc, payload = bytes(ct.enc), bytes(ct.payload)
    if not (1 <= len(enc) <= 0xFFFF and 1 <= len(payload) <= _MAX_U32):
        return None
    return (bytes([ct.config_id]) + len(enc).to_bytes(2, "big") + enc
            + len(payload).to_bytes(4, "big") + payload)


def encode_init_req(req_cls: type[Any], verification_key_id: int, agg_param: bytes,
                    extensions: Sequence[Any], items: Sequence[tuple[Any, bytes]]
                    ) -> bytes | None:
    """The encoding of ``AggregationJobInitReq(verification_key_id, agg_param, extensions,
    [VerifyInit(ReportShare(report's metadata, public share, Helper's ciphertext),
    payload)])``, or None (use the generic encoder)."""
    if not (0 <= verification_key_id <= 0xFF and len(agg_param) <= _MAX_U32):
        return None
    ext_bytes = b"\x00\x00"
    if extensions:
        ext_bytes = _encode_vector(req_cls, "extensions", tuple(extensions))
    parts = [bytes([verification_key_id]), len(agg_param).to_bytes(4, "big"), bytes(agg_param),
             ext_bytes]
    for report, payload in items:
        ct = _encode_ciphertext(report.helper_encrypted_input_share)
        ps = bytes(report.public_share)
        if ct is None or not 1 <= len(payload) <= _MAX_U32 or len(ps) > _MAX_U32:
            return None
        parts += [encode_metadata(report.report_metadata), len(ps).to_bytes(4, "big"), ps,
                  ct, len(payload).to_bytes(4, "big"), bytes(payload)]
    return b"".join(parts)


def _encode_vector(cls: type[Any], name: str, value: Any) -> bytes:
    from ppm_reference.dap.codec import Encoder

    enc = Encoder()
    _specs_codec(cls, name).encode(enc, value)
    return enc.getvalue()


def encode_job_resp(items: Sequence[tuple[bytes, VerifyRespType, bytes | None, int | None]],
                    error_enum: type[Any]) -> bytes | None:
    """``AggregationJobResp`` from (report ID, type, payload, wire error code), or None."""
    parts = []
    for rid, kind, payload, error in items:
        if len(rid) != 16:
            return None
        if kind == _CONTINUE:
            if payload is None or not 1 <= len(payload) <= _MAX_U32:
                return None
            parts += [bytes(rid), b"\x00", len(payload).to_bytes(4, "big"), bytes(payload)]
        elif kind == _FINISH:
            parts += [bytes(rid), b"\x01"]
        elif kind == _REJECT:
            if error is None or int(error) not in error_enum._value2member_map_:
                return None
            parts += [bytes(rid), b"\x02", bytes([int(error)])]
        else:
            return None
    return b"".join(parts)


def decode_job_resp(body: bytes, error_enum: type[Any]
                    ) -> list[tuple[bytes, VerifyRespType, bytes | None, Any]] | None:
    """The (report ID, type, payload, wire error) of an ``AggregationJobResp``, or None."""
    data = bytes(body)
    end = len(data)
    pos = 0
    out: list[tuple[bytes, VerifyRespType, bytes | None, Any]] = []
    members = error_enum._value2member_map_
    try:
        while pos < end:
            if pos + 17 > end:
                return None
            rid = data[pos:pos + 16]
            kind = data[pos + 16]
            pos += 17
            if kind == 0:
                payload, pos = _opaque32(data, pos, end, 1)
                out.append((rid, _CONTINUE, payload, None))
            elif kind == 1:
                out.append((rid, _FINISH, None, None))
            elif kind == 2:
                if pos >= end or data[pos] not in members:
                    return None
                out.append((rid, _REJECT, None, members[data[pos]]))
                pos += 1
            else:
                return None
    except Exception:  # noqa: BLE001
        return None
    return out


def decode_plaintext_input_share(data: bytes) -> tuple[bytes, list[tuple[int, bytes]]] | None:
    """``PlaintextInputShare`` (Section 4.4.2.1) as (payload, private extensions), or None."""
    data = bytes(data)
    end = len(data)
    try:
        if end < 2:
            return None
        n = _u16(data, 0)
        if 2 + n > end:
            return None
        exts = REPORT_EXTENSIONS.decode(Decoder(data[:2 + n])) if n else ()
        payload, stop = _opaque32(data, 2 + n, end, 1)
    except Exception:  # noqa: BLE001
        return None
    if stop != end:
        return None
    return payload, [(int(e.extension_type), bytes(e.extension_data)) for e in exts]


def input_share_aad(prefix: bytes, md: Any, public_share: bytes) -> bytes:
    """``InputShareAad`` (Section 4.4.2.1) encoded: ``prefix`` is the task's ``task_id ||
    TaskConfiguration`` (the same for every report)."""
    ps = bytes(public_share)
    return b"".join((prefix, encode_metadata(md), len(ps).to_bytes(4, "big"), ps))


class DecodedReports:
    """Reports decoded at upload, by encoding, until job creation takes them: the Leader
    decodes each report once when one process does both (a bounded memo: at most
    ``limit`` reports, the oldest forgotten first; a miss costs a fast decode)."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._by_encoding: dict[bytes, Any] = {}
        self._lock = threading.Lock()

    def remember(self, decoded: Sequence[tuple[Any, bytes]]) -> None:
        with self._lock:
            memo = self._by_encoding
            for report, raw in decoded:
                memo[raw] = report
            while len(memo) > self.limit:
                del memo[next(iter(memo))]

    def take(self, encoding: bytes) -> Any | None:
        with self._lock:
            return self._by_encoding.pop(bytes(encoding), None)
