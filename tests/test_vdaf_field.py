"""Fields, NTT, Lagrange-basis algorithms and XOFs (draft-irtf-cfrg-vdaf-20, Section 6)."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.vdaf.field import (
    Field64,
    Field128,
    Field255,
    FieldError,
    Lagrange,
    NttField,
    ntt_batch,
    poly_eval,
)
from ppm_reference.vdaf.xof import XofFixedKeyAes128, XofTurboShake128, format_dst

ALL_FIELDS = [Field64, Field128, Field255]
NTT_FIELDS = [Field64, Field128]


def field_vec(field: type, max_size: int = 20) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, field.MODULUS - 1), max_size=max_size)


@pytest.mark.parametrize("field", ALL_FIELDS, ids=lambda f: f.NAME)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_encode_decode_roundtrip(field: type, data: st.DataObject) -> None:
    vec = data.draw(field_vec(field))
    encoded = field.encode_vec(vec)
    assert len(encoded) == len(vec) * field.ENCODED_SIZE
    assert field.decode_vec(encoded) == vec


@pytest.mark.parametrize("field", ALL_FIELDS, ids=lambda f: f.NAME)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_decode_rejects_bad_lengths_and_overflow(field: type, data: st.DataObject) -> None:
    vec = data.draw(field_vec(field, 5))
    encoded = field.encode_vec(vec)
    extra = data.draw(st.integers(1, field.ENCODED_SIZE - 1))
    with pytest.raises(FieldError):
        field.decode_vec(encoded + bytes(extra))
    big = data.draw(st.integers(field.MODULUS, 2 ** (8 * field.ENCODED_SIZE) - 1))
    with pytest.raises(FieldError, match="overflow"):
        field.decode_vec(encoded + big.to_bytes(field.ENCODED_SIZE, "little"))


def test_field_parameters() -> None:
    assert Field64.MODULUS == 2**64 - 2**32 + 1
    assert Field128.MODULUS == 2**128 - 7 * 2**66 + 1
    for field in NTT_FIELDS:
        g, q = field.gen(), field.MODULUS
        assert pow(g, field.GEN_ORDER, q) == 1
        assert pow(g, field.GEN_ORDER // 2, q) != 1  # the order is exactly GEN_ORDER
        w = field.nth_root(16)
        assert pow(w, 16, q) == 1 and pow(w, 8, q) != 1
    assert Field128.elem(-1) == Field128.MODULUS - 1
    with pytest.raises(FieldError):
        Field64.elem(Field64.MODULUS)


@pytest.mark.parametrize("field", NTT_FIELDS, ids=lambda f: f.NAME)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_ntt_matches_direct_evaluation(field: type[NttField], data: st.DataObject) -> None:
    n = data.draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    coeffs = data.draw(st.lists(st.integers(0, field.MODULUS - 1), min_size=n, max_size=n))
    q = field.MODULUS
    values = field.ntt(coeffs, n)
    roots = field.nth_root_powers(n)
    assert values == [poly_eval(field, coeffs, x) for x in roots]
    twisted = field.ntt(coeffs, n, set_s=True)
    s = field.nth_root(2 * n)
    assert twisted == [poly_eval(field, coeffs, s * x % q) for x in roots]
    assert field.inv_ntt(values, n) == coeffs


@pytest.mark.parametrize("field", NTT_FIELDS, ids=lambda f: f.NAME)
def test_ntt_batch_equals_single(field: type[NttField]) -> None:
    rng = random.Random(7)
    vecs = [[rng.randrange(field.MODULUS) for _ in range(64)] for _ in range(9)]
    batch = ntt_batch(field, vecs, False)
    assert batch == [field.ntt(v, 64) for v in vecs]


@pytest.mark.parametrize("field", NTT_FIELDS, ids=lambda f: f.NAME)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_lagrange_algorithms(field: type[NttField], data: st.DataObject) -> None:
    """Each Lagrange-basis algorithm agrees with the monomial basis."""
    q = field.MODULUS
    n = data.draw(st.sampled_from([2, 4, 8, 16]))
    coeffs = data.draw(st.lists(st.integers(0, q - 1), min_size=n, max_size=n))
    x = data.draw(st.integers(0, q - 1))
    lag = Lagrange(field)
    values = field.ntt(coeffs, n)
    assert lag.poly_eval(values, x) == poly_eval(field, coeffs, x)
    assert lag.double_evaluations(values) == field.ntt(coeffs, 2 * n)
    other = data.draw(st.lists(st.integers(0, q - 1), min_size=n, max_size=n))
    product = lag.poly_mul(values, field.ntt(other, n))
    assert lag.poly_eval(product, x) == poly_eval(field, coeffs, x) * poly_eval(field, other, x) % q
    # Extending: a polynomial of degree < k known at the first k points of H_2n.
    k = data.draw(st.integers(1, 2 * n))
    low = coeffs[: min(k, n)]
    full = field.ntt(low, 2 * n)
    partial = full[:k]
    lag.extend_values_to_power_of_2(partial, 2 * n)
    assert partial == full


def test_format_dst() -> None:
    assert format_dst(0, 0x01020304, 0x0506) == bytes([18, 0, 1, 2, 3, 4, 5, 6])
    assert format_dst(1, 1, 1, version=8)[0] == 8
    with pytest.raises(ValueError):
        format_dst(0, 2**32, 0)


@pytest.mark.parametrize("xof", [XofTurboShake128, XofFixedKeyAes128], ids=lambda x: x.__name__)
def test_xof_published_vector(xof: type, shared_dir) -> None:  # type: ignore[no-untyped-def]
    """The XOF vectors of ../shared/test-vectors/vdaf-18."""
    d = json.loads((shared_dir / "test-vectors" / "vdaf-18" / f"{xof.__name__}.json").read_text())
    seed, dst, binder = (bytes.fromhex(d[k]) for k in ("seed", "dst", "binder"))
    assert xof.derive_seed(seed, dst, binder).hex() == d["derived_seed"]
    vec = xof.expand_into_vec(Field128, seed, dst, binder, d["length"])
    assert Field128.encode_vec(vec).hex() == d["expanded_vec_field128"]


@pytest.mark.parametrize("xof", [XofTurboShake128, XofFixedKeyAes128], ids=lambda x: x.__name__)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_xof_stream_is_split_invariant(xof: type, data: st.DataObject) -> None:
    """`next(a) || next(b)` equals `next(a + b)`: the stream does not depend on chunking,
    which the bulk rejection sampling of `next_vec` relies on."""
    seed = data.draw(st.binary(min_size=xof.SEED_SIZE, max_size=xof.SEED_SIZE))
    dst = data.draw(st.binary(max_size=20))
    binder = data.draw(st.binary(max_size=40))
    a = data.draw(st.integers(0, 70))
    b = data.draw(st.integers(0, 70))
    one = xof(seed, dst, binder)
    two = xof(seed, dst, binder)
    assert one.next(a) + one.next(b) == two.next(a + b)


def test_next_vec_rejection_sampling_matches_one_at_a_time() -> None:
    """Field255 rejects about half of its 32-byte chunks (mask 2^255 - 1 is applied
    first, so in fact rarely); Field64 with the mask of all ones rejects values >= p. Check
    that the bulk sampler returns what an element-at-a-time loop would."""
    for field in (Field64, Field128, Field255):
        seed = bytes(range(32))
        fast = XofTurboShake128(seed, b"dst", b"b").next_vec(field, 300)
        slow_xof = XofTurboShake128(seed, b"dst", b"b")
        mask = (1 << (field.MODULUS - 1).bit_length()) - 1
        slow: list[int] = []
        while len(slow) < 300:
            x = int.from_bytes(slow_xof.next(field.ENCODED_SIZE), "little") & mask
            if x < field.MODULUS:
                slow.append(x)
        assert fast == slow


def test_xof_rejects_bad_seeds() -> None:
    with pytest.raises(ValueError):
        XofFixedKeyAes128(bytes(15), b"", b"")
    with pytest.raises(ValueError):
        XofTurboShake128(bytes(256), b"", b"")
