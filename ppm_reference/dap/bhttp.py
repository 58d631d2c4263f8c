"""Binary HTTP messages (RFC 9292), the plaintext of Oblivious HTTP (RFC 9458).

Encoding writes the known-length form (framing indicators 0 and 1, Section 3.3) and,
as Section 3.8 allows, truncates trailing empty sections. Decoding reads both the
known-length and the indeterminate-length forms (framing indicators 0 to 3), accepts a
message truncated at a section boundary (the rest is empty) and padding (zero bytes
after the message, Section 3.8), and is otherwise strict: a length running past the
end, a status code out of its range, an unknown framing indicator or a non-zero byte
after the message is a :class:`BhttpError`. Field names are written in lowercase
(Section 3.6 asks for lowercase names, as HTTP/2 and HTTP/3 do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

MAX_VARINT = (1 << 62) - 1


class BhttpError(ValueError):
    """A malformed binary HTTP message."""


# -- QUIC variable-length integers (RFC 9000 Section 16) ---------------------------------


def encode_varint(value: int) -> bytes:
    """The shortest encoding of `value` (0 .. 2^62 - 1)."""
    if value < 0 or value > MAX_VARINT:
        raise BhttpError(f"{value} does not fit a variable-length integer")
    if value < 1 << 6:
        return value.to_bytes(1, "big")
    if value < 1 << 14:
        return (value | 0x4000).to_bytes(2, "big")
    if value < 1 << 30:
        return (value | 0x8000_0000).to_bytes(4, "big")
    return (value | 0xC000_0000_0000_0000).to_bytes(8, "big")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def varint(self) -> int:
        if self.at_end():
            raise BhttpError("truncated variable-length integer")
        first = self.data[self.pos]
        size = 1 << (first >> 6)
        if self.pos + size > len(self.data):
            raise BhttpError("truncated variable-length integer")
        value = int.from_bytes(self.data[self.pos : self.pos + size], "big")
        self.pos += size
        return value & ((1 << (8 * size - 2)) - 1)

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise BhttpError(f"length {n} runs past the end of the message")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def vbytes(self) -> bytes:
        return self.take(self.varint())


def _vbytes(data: bytes) -> bytes:
    return encode_varint(len(data)) + data


Fields = tuple[tuple[bytes, bytes], ...]


def _encode_fields(fields: Sequence[tuple[bytes, bytes]]) -> bytes:
    lines = b"".join(_vbytes(name.lower()) + _vbytes(value) for name, value in fields)
    return _vbytes(lines)


def _decode_fields(r: _Reader, known: bool) -> Fields:
    out: list[tuple[bytes, bytes]] = []
    if known:
        sub = _Reader(r.take(r.varint()))
        while not sub.at_end():
            name = sub.vbytes()
            if not name:
                raise BhttpError("empty field name")
            out.append((name, sub.vbytes()))
        return tuple(out)
    while True:
        name = r.vbytes()
        if not name:  # Content Terminator / field section end (Section 3.6)
            return tuple(out)
        out.append((name, r.vbytes()))


def _decode_content(r: _Reader, known: bool) -> bytes:
    if known:
        return r.vbytes()
    chunks: list[bytes] = []
    while True:
        chunk = r.vbytes()
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _padding(r: _Reader) -> None:
    rest = r.data[r.pos :]
    if any(rest):
        raise BhttpError("non-zero bytes after the message")


def _header(headers: Fields, name: bytes) -> bytes | None:
    """The first field named `name` (case-insensitive), or None."""
    return next((v for n, v in headers if n.lower() == name.lower()), None)


def _encode_sections(headers: Fields, content: bytes, trailers: Fields) -> bytes:
    """Header fields, content and trailer fields in the known-length form, with trailing
    empty sections truncated (RFC 9292 Section 3.8)."""
    tail = [_encode_fields(headers), _vbytes(content), _encode_fields(trailers)]
    while tail and tail[-1] == b"\x00":
        tail.pop()
    return b"".join(tail)


def _decode_sections(r: _Reader, known: bool) -> tuple[Fields, bytes, Fields]:
    """Header fields, content and trailer fields, each absent when the message was
    truncated before it (RFC 9292 Section 3.8), then the padding."""
    headers: Fields = ()
    content = b""
    trailers: Fields = ()
    if not r.at_end():
        headers = _decode_fields(r, known)
    if not r.at_end():
        content = _decode_content(r, known)
    if not r.at_end():
        trailers = _decode_fields(r, known)
    _padding(r)
    return headers, content, trailers


@dataclass(frozen=True)
class Request:
    """A binary HTTP request (Section 3.4): control data, header and trailer fields
    (lowercase names as bytes), content."""

    method: bytes
    scheme: bytes
    authority: bytes
    path: bytes
    headers: Fields = ()
    content: bytes = b""
    trailers: Fields = ()

    def header(self, name: bytes) -> bytes | None:
        return _header(self.headers, name)

    def encode(self) -> bytes:
        """Known-length form (framing indicator 0), trailing empty sections truncated."""
        out = [encode_varint(0), _vbytes(self.method), _vbytes(self.scheme),
               _vbytes(self.authority), _vbytes(self.path)]
        return b"".join(out) + _encode_sections(self.headers, self.content, self.trailers)

    @classmethod
    def decode(cls, data: bytes) -> Request:
        r = _Reader(data)
        framing = r.varint()
        if framing not in (0, 2):
            raise BhttpError(f"framing indicator {framing} is not a request")
        known = framing == 0
        method, scheme, authority, path = r.vbytes(), r.vbytes(), r.vbytes(), r.vbytes()
        headers, content, trailers = _decode_sections(r, known)
        return cls(method, scheme, authority, path, headers, content, trailers)


@dataclass(frozen=True)
class Response:
    """A binary HTTP response (Section 3.5): informational responses, final status,
    header and trailer fields, content."""

    status: int
    headers: Fields = ()
    content: bytes = b""
    trailers: Fields = ()
    informational: tuple[tuple[int, Fields], ...] = field(default=())

    def header(self, name: bytes) -> bytes | None:
        return _header(self.headers, name)

    def encode(self) -> bytes:
        """Known-length form (framing indicator 1), trailing empty sections truncated."""
        if not 200 <= self.status <= 599:
            raise BhttpError(f"final status {self.status} outside 200..599")
        out = [encode_varint(1)]
        for status, fields_ in self.informational:
            if not 100 <= status <= 199:
                raise BhttpError(f"informational status {status} outside 100..199")
            out += [encode_varint(status), _encode_fields(fields_)]
        out.append(encode_varint(self.status))
        return b"".join(out) + _encode_sections(self.headers, self.content, self.trailers)

    @classmethod
    def decode(cls, data: bytes) -> Response:
        r = _Reader(data)
        framing = r.varint()
        if framing not in (1, 3):
            raise BhttpError(f"framing indicator {framing} is not a response")
        known = framing == 1
        informational: list[tuple[int, Fields]] = []
        while True:
            status = r.varint()
            if 100 <= status <= 199:
                informational.append((status, _decode_fields(r, known)))
                continue
            if not 200 <= status <= 599:
                raise BhttpError(f"status code {status} out of range")
            break
        headers, content, trailers = _decode_sections(r, known)
        return cls(status, headers, content, trailers, tuple(informational))


__all__ = ["BhttpError", "Request", "Response", "encode_varint"]
