"""The strict TLS presentation-language codec (dap/codec.py) on small test structs."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import pytest

from ppm_reference.dap.codec import (
    U8,
    U16,
    U32,
    U64,
    DecodeError,
    EncodeError,
    EnumCodec,
    Fixed,
    Opaque,
    Rest,
    Struct,
    StructCodec,
    Vector,
    wire,
)


class Color(IntEnum):
    RED = 1
    GREEN = 2


@dataclass(frozen=True)
class Item(Struct):
    kind: int = wire(U16)
    data: bytes = wire(Opaque(2))


@dataclass(frozen=True)
class Everything(Struct):
    a: int = wire(U8)
    b: int = wire(U16)
    c: int = wire(U32)
    d: int = wire(U64)
    color: Color = wire(EnumCodec(Color, 1))
    fixed: bytes = wire(Fixed(3))
    o1: bytes = wire(Opaque(1, min_len=1))
    o2: bytes = wire(Opaque(2))
    o4: bytes = wire(Opaque(4))
    items: tuple[Item, ...] = wire(Vector(StructCodec(Item), 2, increasing=lambda i: i.kind))
    rest: tuple[Item, ...] = wire(Rest(StructCodec(Item)))


@dataclass(frozen=True)
class Selected(Struct):
    color: Color = wire(EnumCodec(Color, 1))
    red_body: bytes | None = wire(Opaque(1), when=("color", Color.RED))
    green_body: int | None = wire(U16, when=("color", Color.GREEN))


def sample() -> Everything:
    return Everything(
        a=0xFF, b=0x1234, c=0xDEADBEEF, d=2**64 - 1, color=Color.GREEN, fixed=b"xyz",
        o1=b"\x01", o2=b"\x02\x03", o4=b"", items=[Item(1, b"a"), Item(5, b"")],
        rest=[Item(9, b"zz"), Item(3, b"")],
    )


SAMPLE_HEX = (
    "ff" "1234" "deadbeef" "ffffffffffffffff" "02" "78797a"
    "01" "01"            # o1: 1-byte length prefix
    "0002" "0203"        # o2: 2-byte length prefix
    "00000000"           # o4: 4-byte length prefix, empty
    "0009"               # items: 9 bytes of items follow
    "0001" "0001" "61"   # Item(1, b"a")
    "0005" "0000"        # Item(5, b"")
    "0009" "0002" "7a7a"  # rest: no prefix
    "0003" "0000"
)


def test_encoding_layout() -> None:
    assert sample().encode().hex() == SAMPLE_HEX


def test_round_trip_and_normalization() -> None:
    msg = sample()
    assert Everything.decode(msg.encode()) == msg
    assert isinstance(msg.items, tuple)  # lists become tuples: messages are hashable
    assert hash(msg) == hash(Everything.decode(msg.encode()))
    assert msg.color is Color.GREEN


@pytest.mark.parametrize("cut", [1, 5, len(SAMPLE_HEX) // 2 - 1])
def test_short_input_rejected(cut: int) -> None:
    data = bytes.fromhex(SAMPLE_HEX)[:-cut]
    with pytest.raises(DecodeError):
        Everything.decode(data)


def test_trailing_bytes_rejected_for_fixed_structs() -> None:
    with pytest.raises(DecodeError, match="Item: 1 trailing bytes"):
        Item.decode(bytes.fromhex("0001000161" "00"))


def test_rest_absorbs_whole_items_only() -> None:
    # A partial item at the end of a Rest vector is a short-input error, named by index.
    data = bytes.fromhex(SAMPLE_HEX) + b"\x00"
    with pytest.raises(DecodeError, match=r"Everything\.rest\[2\]\.kind: need 2 bytes"):
        Everything.decode(data)


def test_error_names_nested_field() -> None:
    bad = bytearray(bytes.fromhex(SAMPLE_HEX))
    bad[15] = 0x07  # color: after 1 + 2 + 4 + 8 bytes of integers
    with pytest.raises(DecodeError, match=r"^Everything\.color: 7 is not a valid Color$"):
        Everything.decode(bytes(bad))


def test_vector_length_prefix_must_cover_whole_items() -> None:
    # items prefix says 4 bytes, but an Item needs at least 4 and the second is cut.
    data = bytes.fromhex("0006" "0001" "0001" "61" "00")
    v = Vector(StructCodec(Item), 2)
    from ppm_reference.dap.codec import Decoder

    dec = Decoder(data, "X")
    with pytest.raises(DecodeError, match=r"X\[1\]\.kind: need 2 bytes, only 1 left"):
        v.decode(dec)


def test_length_prefix_longer_than_input() -> None:
    with pytest.raises(DecodeError, match="Item.data: need 5 bytes, only 1 left"):
        Item.decode(bytes.fromhex("0001" "0005" "61"))


def test_opaque_minimum_length() -> None:
    data = bytearray(bytes.fromhex(SAMPLE_HEX))
    data[19] = 0  # o1 length 0 < 1 (after the integers, color and fixed)
    del data[20]
    with pytest.raises(DecodeError, match=r"Everything\.o1: length 0 below the minimum 1"):
        Everything.decode(bytes(data))
    with pytest.raises(EncodeError, match=r"Everything\.o1: length 0 below the minimum 1"):
        Everything(**{**sample().__dict__, "o1": b""})


def test_opaque_maximum_length_enforced_at_construction() -> None:
    with pytest.raises(EncodeError, match="above the maximum 255"):
        Everything(**{**sample().__dict__, "o1": b"x" * 256})
    Everything(**{**sample().__dict__, "o1": b"x" * 255})


def test_vector_maximum_length_enforced_at_encoding() -> None:
    items = [Item(i, b"x" * 20) for i in range(3000)]  # > 65535 bytes
    msg = Everything(**{**sample().__dict__, "items": items})
    with pytest.raises(EncodeError, match="vector length"):
        msg.encode()


@pytest.mark.parametrize(
    ("field", "value"),
    [("a", 256), ("a", -1), ("b", 65536), ("c", 2**32), ("d", 2**64), ("a", True), ("a", "1")],
)
def test_integer_range_enforced(field: str, value: object) -> None:
    with pytest.raises(EncodeError, match=f"Everything.{field}"):
        Everything(**{**sample().__dict__, field: value})


def test_fixed_length_enforced() -> None:
    with pytest.raises(EncodeError, match="expected 3 bytes, got 2"):
        Everything(**{**sample().__dict__, "fixed": b"ab"})


def test_unsorted_or_duplicate_extensions_rejected() -> None:
    for kinds in ([5, 1], [2, 2]):
        items_hex = "".join(f"{k:04x}0000" for k in kinds)
        data = bytearray(bytes.fromhex(SAMPLE_HEX))
        start = 29  # offset of the items vector
        assert data[start : start + 2] == b"\x00\x09"
        data[start : start + 11] = bytes.fromhex("0008" + items_hex)
        with pytest.raises(DecodeError, match="strictly increasing") as info:
            Everything.decode(bytes(data))
        assert info.value.field == "Everything.items"
        assert info.value.problem_type == "invalidMessage"
        with pytest.raises(EncodeError, match="strictly increasing"):
            Everything(**{**sample().__dict__, "items": [Item(k, b"") for k in kinds]})


def test_select() -> None:
    red = Selected(Color.RED, red_body=b"ab")
    green = Selected(Color.GREEN, green_body=7)
    assert red.encode().hex() == "01" "02" "6162"
    assert green.encode().hex() == "02" "0007"
    assert Selected.decode(red.encode()) == red
    assert Selected.decode(green.encode()) == green
    with pytest.raises(EncodeError, match="must be None"):
        Selected(Color.RED, red_body=b"", green_body=1)
    with pytest.raises(EncodeError):
        Selected(Color.GREEN)  # missing arm
    with pytest.raises(DecodeError, match="3 is not a valid Color"):
        Selected.decode(b"\x03")
    assert red.to_json() == {"color": 1, "red_body": "6162"}
    assert Selected.from_json(red.to_json()) == red


def test_json_round_trip() -> None:
    msg = sample()
    assert Everything.from_json(msg.to_json()) == msg
    with pytest.raises(ValueError, match="unknown fields"):
        Everything.from_json({**msg.to_json(), "extra": 1})
    with pytest.raises(ValueError, match="missing field"):
        Everything.from_json({k: v for k, v in msg.to_json().items() if k != "a"})


def test_decode_rejects_non_bytes() -> None:
    with pytest.raises(DecodeError):
        Item.decode("0001")  # type: ignore[arg-type]
