"""Finite fields (draft-irtf-cfrg-vdaf-20, Section 6.1).

Field elements are plain Python ints in `[0, MODULUS)` and vectors are `list[int]`:
there is no per-element object, which is what makes the reference code slow. A field is
a class with class methods only; code passes the class (`type[Field]`) around, as the
draft does.

The draft's Lagrange-basis algorithms (Section 6.1.3.2) are in `Lagrange`. They are
implemented with the same results as the draft's listings but restructured for speed
(prefix/suffix products instead of running products, dot products instead of nested
loops); every result is an exact field value, so the bytes are identical.
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Callable, Sequence
from functools import cache
from operator import add, mul, sub
from typing import ClassVar, ParamSpec, TypeVar, cast

_P = ParamSpec("_P")
_R = TypeVar("_R")


def memoize(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """`functools.cache`, typed so that field classes are accepted as arguments."""
    return cast(Callable[_P, _R], cache(fn))


class FieldError(ValueError):
    """A byte string or value that is not a valid field element or vector."""


def next_power_of_2(x: int) -> int:
    """The smallest power of two >= x (Section 2)."""
    if x <= 1:
        return 1
    return 1 << (x - 1).bit_length()


def assert_power_of_2(x: int) -> int:
    """log2(x) if x is a positive power of two; raises otherwise (Section 2)."""
    if x <= 0 or x & (x - 1):
        raise ValueError(f"{x} is not a positive power of two")
    return x.bit_length() - 1


class Field:
    """A prime field: the interface of Section 6.1."""

    MODULUS: ClassVar[int]
    ENCODED_SIZE: ClassVar[int]
    NAME: ClassVar[str]

    @classmethod
    def zeros(cls, length: int) -> list[int]:
        return [0] * length

    @classmethod
    def rand_vec(cls, length: int) -> list[int]:
        """Uniform random vector from the OS CSPRNG (not used normatively by the draft)."""
        p = cls.MODULUS
        return [secrets.randbelow(p) for _ in range(length)]

    @classmethod
    def elem(cls, x: int) -> int:
        """The draft's `Field(integer)`: integers in `(-MODULUS, MODULUS)`, negatives negated."""
        if not -cls.MODULUS < x < cls.MODULUS:
            raise FieldError(f"{x} is out of range for {cls.NAME}")
        return x % cls.MODULUS

    @classmethod
    def inv(cls, x: int) -> int:
        if x % cls.MODULUS == 0:
            raise ZeroDivisionError("inverse of zero")
        return pow(x, -1, cls.MODULUS)

    # -- encoding (Section 6.1.1) -------------------------------------------------------

    @classmethod
    def encode_vec(cls, vec: Sequence[int]) -> bytes:
        """Little-endian encoding of each element, concatenated."""
        size = cls.ENCODED_SIZE
        return b"".join([x.to_bytes(size, "little") for x in vec])

    @classmethod
    def decode_vec(cls, encoded: bytes) -> list[int]:
        """Strict decoding: the length must be a multiple of ENCODED_SIZE, values < MODULUS."""
        size = cls.ENCODED_SIZE
        if len(encoded) % size != 0:
            raise FieldError(
                f"{cls.NAME}: input length {len(encoded)} is not a multiple of {size}"
            )
        vec = cls._parse(bytes(encoded))
        p = cls.MODULUS
        for x in vec:
            if x >= p:
                raise FieldError(f"{cls.NAME}: modulus overflow")
        return vec

    @classmethod
    def _parse(cls, encoded: bytes) -> list[int]:
        """Split into little-endian integers of ENCODED_SIZE bytes (no range check)."""
        size = cls.ENCODED_SIZE
        fb = int.from_bytes
        return [fb(encoded[i : i + size], "little") for i in range(0, len(encoded), size)]

    # -- vector arithmetic (Section 6.1.1) -----------------------------------------------

    @classmethod
    def vec_add(cls, left: Sequence[int], right: Sequence[int]) -> list[int]:
        if len(left) != len(right):
            raise ValueError("mismatched vector sizes")
        p = cls.MODULUS
        return [(x + y) % p for x, y in zip(left, right, strict=True)]

    @classmethod
    def vec_sub(cls, left: Sequence[int], right: Sequence[int]) -> list[int]:
        if len(left) != len(right):
            raise ValueError("mismatched vector sizes")
        p = cls.MODULUS
        return [(x - y) % p for x, y in zip(left, right, strict=True)]

    @classmethod
    def vec_neg(cls, vec: Sequence[int]) -> list[int]:
        p = cls.MODULUS
        return [(-x) % p for x in vec]

    @classmethod
    def dot(cls, left: Sequence[int], right: Sequence[int]) -> int:
        return int(sum(map(mul, left, right))) % cls.MODULUS


class NttField(Field):
    """An NTT-friendly field (Section 6.1.2)."""

    GEN_ORDER: ClassVar[int]
    GENERATOR: ClassVar[int]

    @classmethod
    def gen(cls) -> int:
        return cls.GENERATOR

    @classmethod
    def nth_root(cls, n: int) -> int:
        """The principal n-th root of unity, `gen() ** (GEN_ORDER // n)`."""
        assert_power_of_2(n)
        if n > cls.GEN_ORDER:
            raise ValueError(f"no {n}-th root of unity in {cls.NAME}")
        return _nth_root(cls, n)

    @classmethod
    def nth_root_powers(cls, n: int) -> list[int]:
        """`[Wn**0, ..., Wn**(n-1)]` (a cached list: do not modify it)."""
        return _root_powers(cls, n)

    @classmethod
    def ntt(cls, p: Sequence[int], n: int, set_s: bool = False) -> list[int]:
        """Evaluations of the polynomial with coefficients `p` at `Wn**i` (or `s*Wn**i`
        with `s = nth_root(2n)` when `set_s`), for `i` in `[0, n)`."""
        if len(p) > n:
            raise ValueError("polynomial longer than the transform")
        coeffs = list(p) + [0] * (n - len(p))
        if set_s:
            s = _root_powers(cls, 2 * n)
            q = cls.MODULUS
            coeffs = [c * s[i] % q for i, c in enumerate(coeffs)]
        return _ntt(cls, coeffs, False)

    @classmethod
    def inv_ntt(cls, v: Sequence[int], n: int) -> list[int]:
        """Coefficients of the polynomial whose evaluations at `Wn**i` are `v`."""
        if len(v) != n:
            raise ValueError("inv_ntt expects exactly n evaluations")
        n_inv = pow(n, -1, cls.MODULUS)
        return ntt_batch(cls, [v], True, [n_inv] * n)[0]


@memoize
def _nth_root(field: type[NttField], n: int) -> int:
    return pow(field.GENERATOR, field.GEN_ORDER // n, field.MODULUS)


@memoize
def _root_powers(field: type[NttField], n: int) -> list[int]:
    w = _nth_root(field, n)
    q = field.MODULUS
    out = [1] * n
    for i in range(1, n):
        out[i] = out[i - 1] * w % q
    return out


@cache
def _bit_reverse(n: int) -> tuple[int, ...]:
    bits = n.bit_length() - 1
    return tuple(int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(n))


@memoize
def _stage_twiddles(field: type[NttField], n: int, inverse: bool) -> list[list[int]]:
    """Twiddle factors of each radix-2 stage of a size-n transform."""
    q = field.MODULUS
    stages = []
    half = 1
    while half < n:
        w = _nth_root(field, 2 * half)
        if inverse:
            w = pow(w, -1, q)
        tw = [1] * half
        for i in range(1, half):
            tw[i] = tw[i - 1] * w % q
        stages.append(tw)
        half *= 2
    return stages


def _ntt(field: type[NttField], a: list[int], inverse: bool) -> list[int]:
    """Radix-2 transform of one vector (natural-order output, unscaled)."""
    return ntt_batch(field, [a], inverse)[0]


def ntt_batch(field: type[NttField], vecs: Sequence[Sequence[int]], inverse: bool,
              scale: Sequence[int] | None = None) -> list[list[int]]:
    """The same radix-2 transform (forward, or inverse without the 1/n factor) of several
    vectors of one power-of-two length, natural order in and out.

    The vectors are laid end to end and each butterfly stage is done with list slices:
    for the pairs (i, i + half) that share a twiddle, `flat[k::step]` and
    `flat[k + half::step]` are whole Python lists, so the interpreter runs one list
    operation per group instead of one loop iteration per butterfly. Sums and differences
    are left unreduced (they grow by at most MODULUS per stage and may be negative); the
    products are reduced, and everything once at the end, multiplied by `scale[i]` (a
    per-position factor, e.g. 1/n and a coset twist) when given.
    """
    if not vecs:
        return []
    n = len(vecs[0])
    assert_power_of_2(n)
    count = len(vecs)
    q = field.MODULUS
    rev = _bit_reverse(n)
    flat = [v[r] for v in vecs for r in rev]
    size = len(flat)
    half = 1
    for tw in _stage_twiddles(field, n, inverse):
        step = 2 * half
        if half <= count * (n // step):
            for k in range(half):
                w = tw[k]
                lo = flat[k::step]
                hi = flat[k + half :: step]
                t = hi if w == 1 else [x * w % q for x in hi]
                flat[k::step] = list(map(add, lo, t))
                flat[k + half :: step] = list(map(sub, lo, t))
        else:
            for start in range(0, size, step):
                mid = start + half
                lo = flat[start:mid]
                t = [x * w % q for x, w in zip(flat[mid : start + step], tw, strict=True)]
                flat[start:mid] = list(map(add, lo, t))
                flat[mid : start + step] = list(map(sub, lo, t))
        half = step
    if scale is None:
        out = [x % q for x in flat]
    else:
        out = [x * s % q for x, s in zip(flat, list(scale) * count, strict=True)]
    return [out[i * n : (i + 1) * n] for i in range(count)]


class Field64(NttField):
    """Field64 (Table 3): p = 2^32 * 4294967295 + 1."""

    MODULUS = 2**32 * 4294967295 + 1
    ENCODED_SIZE = 8
    GEN_ORDER = 2**32
    GENERATOR = pow(7, 4294967295, 2**32 * 4294967295 + 1)
    NAME = "Field64"

    @classmethod
    def _parse(cls, encoded: bytes) -> list[int]:
        return list(struct.unpack(f"<{len(encoded) // 8}Q", encoded))

    @classmethod
    def encode_vec(cls, vec: Sequence[int]) -> bytes:
        try:
            return struct.pack(f"<{len(vec)}Q", *vec)
        except struct.error as exc:
            raise FieldError(f"Field64: cannot encode: {exc}") from None


class Field128(NttField):
    """Field128 (Table 3): p = 2^66 * 4611686018427387897 + 1."""

    MODULUS = 2**66 * 4611686018427387897 + 1
    ENCODED_SIZE = 16
    GEN_ORDER = 2**66
    GENERATOR = pow(7, 4611686018427387897, 2**66 * 4611686018427387897 + 1)
    NAME = "Field128"

    @classmethod
    def _parse(cls, encoded: bytes) -> list[int]:
        words = struct.unpack(f"<{len(encoded) // 8}Q", encoded)
        return [lo | (hi << 64) for lo, hi in zip(words[0::2], words[1::2], strict=True)]


class Field255(Field):
    """Field255 (Table 3): p = 2^255 - 19 (used by Poplar1; not NTT-friendly)."""

    MODULUS = 2**255 - 19
    ENCODED_SIZE = 32
    NAME = "Field255"


FIELDS: dict[str, type[Field]] = {f.NAME: f for f in (Field64, Field128, Field255)}


def poly_eval(field: type[Field], p: Sequence[int], x: int) -> int:
    """Evaluate a polynomial in the monomial basis at x (Horner; Section 6.1.3.1)."""
    q = field.MODULUS
    out = 0
    for c in reversed(p):
        out = (out * x + c) % q
    return out


class Lagrange:
    """Polynomials in the Lagrange basis over the first n powers of the principal n-th
    root of unity (Section 6.1.3.2)."""

    def __init__(self, field: type[NttField]) -> None:
        self.field = field

    def poly_mul(self, p: list[int], q: list[int]) -> list[int]:
        """Multiply two polynomials in the Lagrange basis; output has 2n evaluations."""
        n = len(p)
        assert_power_of_2(n)
        if len(q) != n:
            raise ValueError("mismatched polynomial lengths")
        m = self.field.MODULUS
        return [a * b % m for a, b in zip(self.double_evaluations(p),
                                          self.double_evaluations(q), strict=True)]

    def poly_eval(self, p: list[int], x: int) -> int:
        return self.poly_eval_batched([p], x)[0]

    def poly_eval_batched(self, polys: Sequence[Sequence[int]], x: int) -> list[int]:
        """Evaluate each polynomial (n evaluations each, n a power of two) at x.

        The draft's running-product algorithm computes, for each polynomial,
        `factor * sum_i p[i] * w^i * prod_{l != i} (w^l - x)` with
        `factor = (-1)^(n-1) / n`. The weights do not depend on the polynomial, so they are
        computed once with prefix and suffix products (no inversion), and each result is a
        dot product.
        """
        if not polys:
            return []
        n = len(polys[0])
        if any(len(p) != n for p in polys):
            raise ValueError("polynomials of different lengths")
        weights = self.eval_weights(n, x)
        m = self.field.MODULUS
        return [sum(map(mul, weights, p)) % m for p in polys]

    def eval_weights(self, n: int, x: int) -> list[int]:
        """Weights `c` with `p(x) = sum_i c[i] * p[i]` for any p given by n evaluations."""
        assert_power_of_2(n)
        f = self.field
        m = f.MODULUS
        nodes = f.nth_root_powers(n)
        d = [(w - x) % m for w in nodes]
        suffix = [1] * (n + 1)
        for i in range(n - 1, -1, -1):
            suffix[i] = suffix[i + 1] * d[i] % m
        factor = pow(n, -1, m)
        if (n - 1) % 2:
            factor = m - factor
        weights = [0] * n
        prefix = factor
        for i in range(n):
            weights[i] = prefix * nodes[i] % m * suffix[i + 1] % m
            prefix = prefix * d[i] % m
        return weights

    def extend_values_to_power_of_2(self, p: list[int], n: int) -> None:
        """Append evaluations to p (in place) until it has n of them (n a power of two).

        The polynomial has degree < len(p) and p holds its values at the first len(p)
        points of the n-th roots of unity. When one value is missing (the only case
        Prio3's degree-2 gadgets need) it follows in linear time from the vanishing of the
        coefficient of x^(n-1): `sum_i p[i] * w^i = 0`. Otherwise the draft's quadratic
        algorithm is used.
        """
        assert_power_of_2(n)
        k0 = len(p)
        if k0 > n:
            raise ValueError("more evaluations than points")
        if k0 == n:
            return
        f = self.field
        m = f.MODULUS
        x = f.nth_root_powers(n)
        if k0 == n - 1:
            s = sum(map(mul, p, x)) % m
            # v_{n-1} * w^(n-1) = -s and w^(n-1) = w^-1, so v_{n-1} = -s * w.
            p.append((-s * x[1]) % m if n > 1 else 0)
            return
        w = [0] * n
        for i in range(k0):
            acc = 1
            for j in range(k0):
                if i != j:
                    acc = acc * (x[i] - x[j]) % m
            w[i] = acc
        for k in range(k0, n):
            for i in range(k):
                w[i] = w[i] * (x[i] - x[k]) % m
            y_num, y_den = 0, 1
            for i, v in enumerate(p):
                y_num = (y_num * w[i] + y_den * v) % m
                y_den = y_den * w[i] % m
            acc = 1
            for j in range(k):
                acc = acc * (x[k] - x[j]) % m
            w[k] = acc
            p.append((-w[k] * y_num * pow(y_den, -1, m)) % m)

    def double_evaluations(self, p: list[int]) -> list[int]:
        """2n evaluations (on the 2n-th roots of unity) from n Lagrange-basis ones."""
        n = len(p)
        assert_power_of_2(n)
        f = self.field
        odd = f.ntt(f.inv_ntt(p, n), n, True)
        return [v for pair in zip(p, odd, strict=True) for v in pair]
