"""Strict codec for the TLS presentation language as used by DAP.

DAP-18 Section 3.4 ("Presentation Language") defines every message with the
presentation language of RFC 8446, Section 3, and encodes messages as that RFC does:

* fixed-width unsigned integers in network byte order (``uint8`` ... ``uint64``);
* fixed-length opaque vectors (``opaque x[n]``), written without a length prefix;
* variable-length vectors (``T x<floor..ceiling>``) prefixed by their length *in bytes*,
  the prefix being as wide as needed to hold ``ceiling`` (1, 2 or 4 bytes here);
* enumerations as unsigned integers as wide as their largest declared value;
* ``select`` on an enumerated field that is decoded earlier in the same struct;
* and, specific to DAP, "rest of the HTTP message" vectors such as
  ``Report reports[message_length]``, which take all remaining bytes.

Messages are frozen dataclasses deriving from :class:`Struct`; each field declares its
wire codec with :func:`wire`. The same declaration drives encoding, decoding, validation at
construction and the JSON form used by the DAP test vectors, so the four cannot drift apart.

Decoding is strict: short input, trailing bytes, lengths below a vector's floor,
undeclared enumeration values and extension lists that are not in strictly increasing
order of type all raise :class:`DecodeError`, whose message names the offending field
(``"Report.report_metadata.public_extensions[1]: ..."``). Constructing a message with
invalid values raises :class:`EncodeError`. Both derive from :class:`CodecError`, the one
exception type of this layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from typing import Any, Generic, TypeVar

__all__ = [
    "CodecError",
    "DecodeError",
    "EncodeError",
    "Encoder",
    "Decoder",
    "Codec",
    "Uint",
    "EnumCodec",
    "Fixed",
    "Opaque",
    "StructCodec",
    "Vector",
    "Rest",
    "Struct",
    "wire",
    "U8",
    "U16",
    "U32",
    "U64",
]

T = TypeVar("T")
S = TypeVar("S", bound="Struct")

# Problem type (DAP-18 Section 3.6) a receiver reports for a malformed message.
INVALID_MESSAGE = "invalidMessage"


class CodecError(ValueError):
    """Base class of the errors of the codec layer."""


class DecodeError(CodecError):
    """A byte string is not a valid encoding of the message being decoded.

    ``field`` is the dotted path of the offending field (``"Report.public_share"``),
    ``reason`` the bare description, and ``problem_type`` the DAP problem type token
    (DAP-18 Section 3.6) the draft asks a server to answer with. It is ``invalidMessage``
    except where the draft names another error for the same condition (unsorted
    collection job extensions are ``invalidExtension``, DAP-18 Section 4.6.2).
    """

    def __init__(self, reason: str, *, field: str = "", problem_type: str = INVALID_MESSAGE):
        self.reason = reason
        self.field = field
        self.problem_type = problem_type
        super().__init__(f"{field}: {reason}" if field else reason)


class EncodeError(CodecError):
    """A message was constructed with a value its wire format cannot carry."""


class Encoder:
    """Append-only byte buffer."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def uint(self, value: int, width: int) -> None:
        self.buf += value.to_bytes(width, "big")

    def raw(self, data: bytes) -> None:
        self.buf += data

    def getvalue(self) -> bytes:
        return bytes(self.buf)


class Decoder:
    """Reads a bounded window of a byte string, tracking the path of the current field.

    A decoder never reads past its window: :meth:`sub` makes a decoder for the body of a
    length-prefixed vector whose window ends where the vector ends.
    """

    __slots__ = ("_data", "_pos", "_end", "_path")

    def __init__(self, data: bytes, root: str = "") -> None:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise DecodeError(f"expected bytes, got {type(data).__name__}", field=root)
        self._data = bytes(data)
        self._pos = 0
        self._end = len(self._data)
        self._path: list[str] = [root] if root else []

    # -- position ---------------------------------------------------------------------
    def remaining(self) -> int:
        return self._end - self._pos

    def at_end(self) -> bool:
        return self._pos >= self._end

    # -- error reporting ----------------------------------------------------------------
    @property
    def path(self) -> str:
        return "".join(self._path).lstrip(".")

    def error(self, reason: str, problem_type: str = INVALID_MESSAGE) -> DecodeError:
        return DecodeError(reason, field=self.path, problem_type=problem_type)

    @contextmanager
    def field(self, name: str) -> Iterator[None]:
        self._path.append("." + name)
        try:
            yield
        finally:
            self._path.pop()

    @contextmanager
    def index(self, i: int) -> Iterator[None]:
        self._path.append(f"[{i}]")
        try:
            yield
        finally:
            self._path.pop()

    # -- reading ------------------------------------------------------------------------
    def read(self, n: int) -> bytes:
        if n > self.remaining():
            raise self.error(f"need {n} bytes, only {self.remaining()} left")
        out = self._data[self._pos : self._pos + n]
        self._pos += n
        return out

    def uint(self, width: int) -> int:
        return int.from_bytes(self.read(width), "big")

    def sub(self, n: int) -> Decoder:
        """A decoder over the next ``n`` bytes; this decoder skips past them."""
        if n > self.remaining():
            raise self.error(f"length prefix says {n} bytes, only {self.remaining()} left")
        child = Decoder.__new__(Decoder)
        child._data = self._data
        child._pos = self._pos
        child._end = self._pos + n
        child._path = self._path  # shared: the child is used strictly inside this field
        self._pos += n
        return child

    def finish(self) -> None:
        if not self.at_end():
            raise self.error(f"{self.remaining()} trailing bytes")


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise ValueError(f"expected bytes, got {type(value).__name__}")


def _as_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected int, got {type(value).__name__}")
    return int(value)


class Codec(Generic[T]):
    """Wire codec of one field type. ``coerce`` validates and normalizes Python values."""

    def encode(self, enc: Encoder, value: T) -> None:
        raise NotImplementedError

    def decode(self, dec: Decoder) -> T:
        raise NotImplementedError

    def coerce(self, value: Any) -> T:
        raise NotImplementedError

    def to_json(self, value: T) -> Any:
        raise NotImplementedError

    def from_json(self, obj: Any) -> T:
        raise NotImplementedError


class Uint(Codec[int]):
    """``uintN``: an unsigned integer of ``width`` bytes. ``wrap`` is an int subclass."""

    def __init__(self, width: int, wrap: Callable[[int], int] = int) -> None:
        self.width = width
        self.max = (1 << (8 * width)) - 1
        self.wrap = wrap

    def coerce(self, value: Any) -> int:
        v = _as_int(value)
        if not 0 <= v <= self.max:
            raise ValueError(f"{v} out of range for uint{8 * self.width}")
        return value if type(value) is self.wrap else self.wrap(v)

    def encode(self, enc: Encoder, value: int) -> None:
        enc.uint(value, self.width)

    def decode(self, dec: Decoder) -> int:
        return self.wrap(dec.uint(self.width))

    def to_json(self, value: int) -> Any:
        return int(value)

    def from_json(self, obj: Any) -> int:
        return self.coerce(obj)


U8 = Uint(1)
U16 = Uint(2)
U32 = Uint(4)
U64 = Uint(8)

E = TypeVar("E", bound=IntEnum)


class EnumCodec(Codec[E]):
    """An enumeration; only the values the draft declares (not ``reserved``) decode."""

    def __init__(self, enum_cls: type[E], width: int) -> None:
        self.enum_cls = enum_cls
        self.width = width

    def coerce(self, value: Any) -> E:
        if isinstance(value, self.enum_cls):
            return value
        return self.enum_cls(_as_int(value))

    def encode(self, enc: Encoder, value: E) -> None:
        enc.uint(int(value), self.width)

    def decode(self, dec: Decoder) -> E:
        v = dec.uint(self.width)
        try:
            return self.enum_cls(v)
        except ValueError:
            raise dec.error(f"{v} is not a valid {self.enum_cls.__name__}") from None

    def to_json(self, value: E) -> Any:
        return int(value)

    def from_json(self, obj: Any) -> E:
        return self.coerce(obj)


class Fixed(Codec[bytes]):
    """``opaque x[n]``: exactly ``n`` bytes, no length prefix. ``wrap`` is a bytes subclass."""

    def __init__(self, size: int, wrap: Callable[[bytes], bytes] = bytes) -> None:
        self.size = size
        self.wrap = wrap

    def coerce(self, value: Any) -> bytes:
        b = _as_bytes(value)
        if len(b) != self.size:
            raise ValueError(f"expected {self.size} bytes, got {len(b)}")
        return value if type(value) is self.wrap else self.wrap(b)

    def encode(self, enc: Encoder, value: bytes) -> None:
        enc.raw(value)

    def decode(self, dec: Decoder) -> bytes:
        return self.wrap(dec.read(self.size))

    def to_json(self, value: bytes) -> Any:
        return bytes(value).hex()

    def from_json(self, obj: Any) -> bytes:
        return self.coerce(_hex(obj))


def _hex(obj: Any) -> bytes:
    if not isinstance(obj, str):
        raise ValueError(f"expected a hex string, got {type(obj).__name__}")
    return bytes.fromhex(obj)


class Opaque(Codec[bytes]):
    """``opaque x<min_len..2^(8*width)-1>``: a byte string with a ``width``-byte length prefix.

    ``ascii`` restricts the content to 7-bit ASCII (the ``Url`` type, DAP-18 Section 4.1).
    """

    def __init__(self, width: int, min_len: int = 0, ascii: bool = False) -> None:
        self.width = width
        self.min_len = min_len
        self.max_len = (1 << (8 * width)) - 1
        self.ascii = ascii

    def _check(self, b: bytes) -> str | None:
        if len(b) < self.min_len:
            return f"length {len(b)} below the minimum {self.min_len}"
        if len(b) > self.max_len:
            return f"length {len(b)} above the maximum {self.max_len}"
        if self.ascii and not b.isascii():
            return "not ASCII"
        return None

    def coerce(self, value: Any) -> bytes:
        b = _as_bytes(value)
        problem = self._check(b)
        if problem:
            raise ValueError(problem)
        return b

    def encode(self, enc: Encoder, value: bytes) -> None:
        enc.uint(len(value), self.width)
        enc.raw(value)

    def decode(self, dec: Decoder) -> bytes:
        n = dec.uint(self.width)
        b = dec.read(n)
        problem = self._check(b)
        if problem:
            raise dec.error(problem)
        return b

    def to_json(self, value: bytes) -> Any:
        return value.hex()

    def from_json(self, obj: Any) -> bytes:
        return self.coerce(_hex(obj))


class StructCodec(Codec[S]):
    """A nested struct, encoded in place."""

    def __init__(self, cls: type[S]) -> None:
        self.cls = cls

    def coerce(self, value: Any) -> S:
        if not isinstance(value, self.cls):
            raise ValueError(f"expected {self.cls.__name__}, got {type(value).__name__}")
        return value

    def encode(self, enc: Encoder, value: S) -> None:
        value.encode_into(enc)

    def decode(self, dec: Decoder) -> S:
        return self.cls.decode_from(dec)

    def to_json(self, value: S) -> Any:
        return value.to_json()

    def from_json(self, obj: Any) -> S:
        return self.cls.from_json(obj)


class Vector(Codec[tuple[T, ...]]):
    """``T x<min_len..2^(8*width)-1>``: items prefixed by their total length in bytes.

    If ``increasing`` is given, it maps an item to its sort key and the vector must be in
    strictly increasing order of that key (DAP's extension lists); a violation is reported
    with problem type ``unsorted_problem``.
    """

    def __init__(
        self,
        item: Codec[T],
        width: int,
        min_len: int = 0,
        increasing: Callable[[T], int] | None = None,
        unsorted_problem: str = INVALID_MESSAGE,
    ) -> None:
        self.item = item
        self.width = width
        self.min_len = min_len
        self.max_len = (1 << (8 * width)) - 1
        self.increasing = increasing
        self.unsorted_problem = unsorted_problem

    def _order_problem(self, items: tuple[T, ...]) -> str | None:
        if self.increasing is None:
            return None
        keys = [self.increasing(x) for x in items]
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1]:
                return (
                    f"types must be strictly increasing, but item {i} has type {keys[i]} "
                    f"after {keys[i - 1]}"
                )
        return None

    def coerce(self, value: Any) -> tuple[T, ...]:
        if isinstance(value, str | bytes | bytearray) or not hasattr(value, "__iter__"):
            raise ValueError(f"expected a sequence, got {type(value).__name__}")
        items = []
        for i, x in enumerate(value):
            try:
                items.append(self.item.coerce(x))
            except ValueError as exc:
                raise ValueError(f"[{i}]: {exc}") from None
        out = tuple(items)
        problem = self._order_problem(out)
        if problem:
            raise ValueError(problem)
        return out

    def encode(self, enc: Encoder, value: tuple[T, ...]) -> None:
        body = Encoder()
        for x in value:
            self.item.encode(body, x)
        n = len(body.buf)
        if not self.min_len <= n <= self.max_len:
            raise EncodeError(
                f"vector length {n} bytes outside [{self.min_len}, {self.max_len}]"
            )
        enc.uint(n, self.width)
        enc.raw(body.getvalue())

    def decode(self, dec: Decoder) -> tuple[T, ...]:
        n = dec.uint(self.width)
        if n < self.min_len:
            raise dec.error(f"vector length {n} bytes below the minimum {self.min_len}")
        body = dec.sub(n)
        items: list[T] = []
        while not body.at_end():
            with body.index(len(items)):
                items.append(self.item.decode(body))
        out = tuple(items)
        problem = self._order_problem(out)
        if problem:
            raise dec.error(problem, self.unsorted_problem)
        return out

    def to_json(self, value: tuple[T, ...]) -> Any:
        return [self.item.to_json(x) for x in value]

    def from_json(self, obj: Any) -> tuple[T, ...]:
        if not isinstance(obj, list):
            raise ValueError(f"expected a list, got {type(obj).__name__}")
        return self.coerce([self.item.from_json(x) for x in obj])


class Rest(Vector[T]):
    """``T x[message_length]``: items filling the rest of the message, no length prefix.

    DAP-18 uses this for the last field of messages that are whole HTTP bodies
    (``UploadRequest.reports``, ``AggregationJobInitReq.verify_inits``, ...).
    """

    def __init__(self, item: Codec[T]) -> None:
        super().__init__(item, width=0)
        self.max_len = -1

    def encode(self, enc: Encoder, value: tuple[T, ...]) -> None:
        for x in value:
            self.item.encode(enc, x)

    def decode(self, dec: Decoder) -> tuple[T, ...]:
        items: list[T] = []
        while not dec.at_end():
            with dec.index(len(items)):
                items.append(self.item.decode(dec))
        return tuple(items)


@dataclasses.dataclass(frozen=True)
class _FieldSpec:
    name: str
    codec: Codec[Any]
    # ``select``: the field is present iff the named earlier field has one of these values.
    when: tuple[str, frozenset[Any]] | None


def wire(codec: Codec[Any], *, when: tuple[str, Any] | None = None) -> Any:
    """Declare a dataclass field's wire codec.

    ``when=("selector_field", values)`` makes the field one arm of a ``select``: it is
    encoded only when the selector field (declared earlier) takes one of ``values``, and
    must be ``None`` otherwise.
    """
    meta: dict[str, Any] = {"wire": codec}
    if when is not None:
        selector, values = when
        vals = frozenset(values) if isinstance(values, set | frozenset | tuple) else {values}
        meta["when"] = (selector, frozenset(vals))
        return dataclasses.field(default=None, metadata=meta)
    return dataclasses.field(metadata=meta)


_SPECS: dict[type, tuple[_FieldSpec, ...]] = {}


def _specs(cls: type) -> tuple[_FieldSpec, ...]:
    cached = _SPECS.get(cls)
    if cached is not None:
        return cached
    specs = []
    for f in dataclasses.fields(cls):
        if "wire" not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name} has no wire codec")
        specs.append(_FieldSpec(f.name, f.metadata["wire"], f.metadata.get("when")))
    for spec in specs[:-1]:
        if isinstance(spec.codec, Rest):
            raise TypeError(f"{cls.__name__}.{spec.name}: a Rest vector must be the last field")
    _SPECS[cls] = out = tuple(specs)
    return out


class Struct:
    """Base of wire structs: frozen dataclasses whose fields are declared with :func:`wire`.

    ``Msg.decode(data)`` parses a complete encoding (no trailing bytes) and
    ``msg.encode()`` produces it. Construction validates and normalizes every field
    (``bytes``-like to ``bytes``, lists to tuples, ints to enum members) and raises
    :class:`EncodeError` naming the field on invalid values; subclasses add cross-field
    rules by overriding :meth:`_check`.
    """

    def __post_init__(self) -> None:
        name = type(self).__name__
        for spec in _specs(type(self)):
            value = getattr(self, spec.name)
            if spec.when is not None and not self._active(spec):
                if value is not None:
                    raise EncodeError(
                        f"{name}.{spec.name}: must be None unless {spec.when[0]} is one of "
                        f"{sorted(spec.when[1])}"
                    )
                continue
            try:
                coerced = spec.codec.coerce(value)
            except (ValueError, TypeError) as exc:
                raise EncodeError(f"{name}.{spec.name}: {exc}") from None
            object.__setattr__(self, spec.name, coerced)
        try:
            self._check()
        except EncodeError:
            raise
        except ValueError as exc:
            raise EncodeError(f"{name}: {exc}") from None

    def _active(self, spec: _FieldSpec) -> bool:
        assert spec.when is not None
        return getattr(self, spec.when[0]) in spec.when[1]

    def _check(self) -> None:
        """Cross-field validation; raise ValueError. Runs after field coercion."""

    # -- wire form ----------------------------------------------------------------------
    def encode_into(self, enc: Encoder) -> None:
        for spec in _specs(type(self)):
            if spec.when is not None and not self._active(spec):
                continue
            try:
                spec.codec.encode(enc, getattr(self, spec.name))
            except EncodeError as exc:
                raise EncodeError(f"{type(self).__name__}.{spec.name}: {exc}") from None

    def encode(self) -> bytes:
        enc = Encoder()
        self.encode_into(enc)
        return enc.getvalue()

    @classmethod
    def decode_from(cls: type[S], dec: Decoder) -> S:
        values: dict[str, Any] = {}
        for spec in _specs(cls):
            if spec.when is not None and values[spec.when[0]] not in spec.when[1]:
                values[spec.name] = None
                continue
            with dec.field(spec.name):
                values[spec.name] = spec.codec.decode(dec)
        try:
            return cls(**values)
        except EncodeError as exc:
            # A cross-field rule (``_check``) failed; field values are already valid.
            message = str(exc)
            prefix = cls.__name__
            if message.startswith(prefix + "."):
                where, _, reason = message[len(prefix) :].partition(": ")
                raise DecodeError(reason, field=dec.path + where) from None
            raise dec.error(message.removeprefix(prefix + ": ")) from None

    @classmethod
    def decode(cls: type[S], data: bytes) -> S:
        """Decode a complete encoding; raise :class:`DecodeError` on any deviation."""
        dec = Decoder(data, cls.__name__)
        out = cls.decode_from(dec)
        dec.finish()
        return out

    # -- JSON form (test vectors) ------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in _specs(type(self)):
            if spec.when is not None and not self._active(spec):
                continue
            out[spec.name] = spec.codec.to_json(getattr(self, spec.name))
        return out

    @classmethod
    def from_json(cls: type[S], obj: Any) -> S:
        if not isinstance(obj, dict):
            raise ValueError(f"{cls.__name__}: expected an object, got {type(obj).__name__}")
        specs = _specs(cls)
        unknown = set(obj) - {s.name for s in specs}
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
        values: dict[str, Any] = {}
        for spec in specs:
            if spec.name not in obj:
                if spec.when is not None:
                    values[spec.name] = None
                    continue
                raise ValueError(f"{cls.__name__}: missing field {spec.name!r}")
            values[spec.name] = spec.codec.from_json(obj[spec.name])
        return cls(**values)


def field_specs(cls: type[Struct]) -> tuple[_FieldSpec, ...]:
    """The wire fields of a struct class, in order (for tests and tooling)."""
    return _specs(cls)
