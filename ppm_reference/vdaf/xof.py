"""Extendable output functions (draft-irtf-cfrg-vdaf-20, Section 6.2).

The two XOFs are defined once. What differs between VDAF versions is data: the seed size
and how the domain separation tag and the seed are framed before absorbing
(`XofFraming`). `xof_with` derives the XOF class of a version from these; the profiles
(`vdaf.profiles`) hold them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypeVar, cast

from Crypto.Cipher import AES
from Crypto.Hash import TurboSHAKE128

from ppm_reference.vdaf.field import Field, memoize, next_power_of_2

#: The draft's `VERSION` constant (Section 2): draft-irtf-cfrg-vdaf-18..20 use 18.
VERSION = 18


def format_dst(algo_class: int, algo: int, usage: int, version: int = VERSION) -> bytes:
    """Domain separation tag (Section 6.2.3): version, class, algorithm ID and usage."""
    if not 0 <= algo_class < 2**8:
        raise ValueError("algo_class out of range")
    if not 0 <= algo < 2**32:
        raise ValueError("algo out of range")
    if not 0 <= usage < 2**16:
        raise ValueError("usage out of range")
    return (
        version.to_bytes(1, "big")
        + algo_class.to_bytes(1, "big")
        + algo.to_bytes(4, "big")
        + usage.to_bytes(2, "big")
    )


@dataclass(frozen=True)
class XofFraming:
    """How an XOF lays out its inputs before absorbing them.

    draft-irtf-cfrg-vdaf-20 (Section 6.2.1): `len(dst)` in 2 bytes, little-endian, and a
    one-byte `len(seed)` before the seed of XofTurboShake128. VDAF-08 (Section 6.2.1):
    `len(dst)` in 1 byte and no seed length (every seed is SEED_SIZE bytes)."""

    dst_len_size: int
    seed_len_prefix: bool

    def turboshake128_input(self, seed: bytes, dst: bytes, binder: bytes,
                            seed_size: int) -> bytes:
        """The message XofTurboShake128 absorbs."""
        dst_len = self._dst_len(dst, "XofTurboShake128")
        if self.seed_len_prefix:
            if len(seed) > 255:
                raise ValueError("XofTurboShake128: seed longer than 255 bytes")
            return dst_len + dst + len(seed).to_bytes(1, "little") + seed + binder
        if len(seed) != seed_size:
            raise ValueError(f"XofTurboShake128: seed must be {seed_size} bytes")
        return dst_len + dst + seed + binder

    def fixed_key_input(self, dst: bytes, binder: bytes) -> bytes:
        """The message from which XofFixedKeyAes128 derives its AES key."""
        return self._dst_len(dst, "XofFixedKeyAes128") + dst + binder

    def _dst_len(self, dst: bytes, who: str) -> bytes:
        if len(dst) >= 1 << (8 * self.dst_len_size):
            raise ValueError(f"{who}: dst longer than {(1 << (8 * self.dst_len_size)) - 1} bytes")
        return len(dst).to_bytes(self.dst_len_size, "little")


#: draft-irtf-cfrg-vdaf-18..20.
FRAMING_V18 = XofFraming(dst_len_size=2, seed_len_prefix=True)
#: draft-irtf-cfrg-vdaf-08.
FRAMING_V08 = XofFraming(dst_len_size=1, seed_len_prefix=False)


class Xof:
    """The XOF interface (Section 6.2)."""

    SEED_SIZE: ClassVar[int]
    FRAMING: ClassVar[XofFraming] = FRAMING_V18

    def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
        raise NotImplementedError

    def next(self, length: int) -> bytes:
        raise NotImplementedError

    @classmethod
    def derive_seed(cls, seed: bytes, dst: bytes, binder: bytes) -> bytes:
        return cls(seed, dst, binder).next(cls.SEED_SIZE)

    def next_vec(self, field: type[Field], length: int) -> list[int]:
        """The next `length` field elements, by rejection sampling (Section 6.2).

        Reads the stream in bulk: the elements accepted are exactly those of the draft's
        one-element-at-a-time loop, in the same order, because rejected chunks are skipped
        and replacements are read from the stream that follows.
        """
        m = next_power_of_2(field.MODULUS) - 1
        p = field.MODULUS
        size = field.ENCODED_SIZE
        vec: list[int] = []
        while len(vec) < length:
            need = length - len(vec)
            chunk = field._parse(self.next(need * size))
            if m != (1 << (8 * size)) - 1:
                chunk = [x & m for x in chunk]
            vec.extend(x for x in chunk if x < p)
        return vec

    @classmethod
    def expand_into_vec(
        cls, field: type[Field], seed: bytes, dst: bytes, binder: bytes, length: int
    ) -> list[int]:
        return cls(seed, dst, binder).next_vec(field, length)


class XofTurboShake128(Xof):
    """XofTurboShake128 (Section 6.2.1): TurboSHAKE128 with domain byte 1 over
    `len(dst) (2 bytes LE) || dst || len(seed) (1 byte) || seed || binder` (the framing
    of draft-20; see `XofFraming` for VDAF-08's)."""

    SEED_SIZE = 32

    def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
        self._h = TurboSHAKE128.new(domain=1)
        self._h.update(self.FRAMING.turboshake128_input(seed, dst, binder, self.SEED_SIZE))

    def next(self, length: int) -> bytes:
        # pycryptodome exposes absorb-then-squeeze: successive reads continue the stream.
        return bytes(self._h.read(length))


class XofFixedKeyAes128(Xof):
    """XofFixedKeyAes128 (Section 6.2.2): fixed-key AES-128 in the circular
    correlation-robust hash mode, the key derived by TurboSHAKE128 (domain byte 2)."""

    SEED_SIZE = 16

    def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
        if len(seed) != self.SEED_SIZE:
            raise ValueError("XofFixedKeyAes128: incorrect seed size")
        h = TurboSHAKE128.new(domain=2)
        h.update(self.FRAMING.fixed_key_input(dst, binder))
        self._cipher = AES.new(bytes(h.read(16)), AES.MODE_ECB)
        self._seed = int.from_bytes(seed, "little")
        self._consumed = 0

    def next(self, length: int) -> bytes:
        offset = self._consumed % 16
        first = self._consumed // 16
        last = (self._consumed + length) // 16
        self._consumed += length
        sigmas = []
        for i in range(first, last + 1):
            block = (self._seed ^ i).to_bytes(16, "little")
            lo, hi = block[:8], block[8:]
            sigmas.append(hi + bytes(a ^ b for a, b in zip(hi, lo, strict=True)))
        sigma = b"".join(sigmas)
        enc = self._cipher.encrypt(sigma)
        out = (int.from_bytes(enc, "little") ^ int.from_bytes(sigma, "little")).to_bytes(
            len(sigma), "little"
        )
        return out[offset : offset + length]


X = TypeVar("X", bound=Xof)


@memoize
def _derived_xof(base: type[Xof], seed_size: int, framing: XofFraming) -> type[Xof]:
    doc = (f"{base.__name__} with {seed_size}-byte seeds and framing {framing} "
           f"(derived from a VDAF profile).")
    return type(base.__name__, (base,), {"SEED_SIZE": seed_size, "FRAMING": framing,
                                         "__doc__": doc, "__module__": __name__})


def xof_with(base: type[X], seed_size: int, framing: XofFraming) -> type[X]:
    """The XOF `base` with another seed size and framing (the same class when they are
    the base's own). One class per combination, so that identity comparisons hold."""
    if base.SEED_SIZE == seed_size and base.FRAMING == framing:
        return base
    return cast(type[X], _derived_xof(base, seed_size, framing))
