"""The IDPF of BBCGGI21 (draft-irtf-cfrg-vdaf-20, Sections 8.1 and 8.3).

`IdpfBBCGGI21(value_len, bits)` is the incremental distributed point function that
Poplar1 is built on: `gen` programs the path to `alpha` with the values `beta_inner`
(Field64, one vector per inner level) and `beta_leaf` (Field255), and `eval` gives each
of the two Aggregators an additive share of the value at each candidate prefix of a
level (zero off the path).

Field elements are ints, as everywhere in `vdaf` (see `vdaf.field`). The public share is
a list of correction words `(seed_cw, (ctrl_cw_left, ctrl_cw_right), w_cw)`.

Performance. The draft's `eval` walks from the root to each prefix separately and
builds a new XofFixedKeyAes128 (one TurboSHAKE128 key derivation and one AES key
schedule) for every node. Here:

- the fixed AES key depends only on the DST and the nonce (Section 6.2.2), so it is
  derived once per report and usage (`FixedKeyAesHash`), and its output blocks are the
  draft's `XofFixedKeyAes128(seed, dst, nonce).next(...)` (a test checks this);
- `eval` goes level by level over the tree of the prefixes' ancestors, so that a node
  shared by several prefixes is computed once, and every AES call of a level is one
  ECB call over all its nodes' blocks;
- at an inner level that is not the one asked for only the seed part of `convert` (the
  first block) is computed: its value `w` is not used.

Every output is the draft's: same nodes, same XOF streams, the same field values.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from Crypto.Cipher import AES
from Crypto.Hash import TurboSHAKE128

from ppm_reference.vdaf.field import Field, Field64, Field255, FieldError, next_power_of_2
from ppm_reference.vdaf.xof import (
    FRAMING_V08,
    FRAMING_V18,
    Xof,
    XofFixedKeyAes128,
    XofFraming,
    XofTurboShake128,
    format_dst,
    xof_with,
)

CorrectionWord = tuple[bytes, tuple[bool, bool], list[int]]
PublicShare = list[CorrectionWord]

_MASK64 = (1 << 64) - 1


class IdpfError(ValueError):
    """Bad input to the IDPF, or a malformed public share."""


class FixedKeyAesHash:
    """The block function of XofFixedKeyAes128 (Section 6.2.2) with its key derived once.

    `XofFixedKeyAes128(seed, dst, binder).next(16 * count)` is, for the i-th block,
    `AES(k, sigma(seed ^ i)) ^ sigma(seed ^ i)` with k derived from dst and binder only.
    `blocks` computes the first `count` blocks of the streams of many seeds with one ECB
    call."""

    def __init__(self, dst: bytes, binder: bytes, framing: XofFraming = FRAMING_V18) -> None:
        h = TurboSHAKE128.new(domain=2)
        h.update(framing.fixed_key_input(dst, binder))
        self._ecb = AES.new(bytes(h.read(16)), AES.MODE_ECB)
        self.dst = dst
        self.binder = binder
        self.framing = framing

    def blocks(self, seeds: Sequence[bytes], count: int) -> list[bytes]:
        """For each seed, the first `16 * count` bytes of its XOF stream."""
        if not seeds:
            return []
        words: list[int] = []
        for seed in seeds:
            s = int.from_bytes(seed, "little")
            for i in range(count):
                x = s ^ i
                hi = x >> 64
                words.append(hi)
                words.append(hi ^ (x & _MASK64))
        sigma = struct.pack(f"<{len(words)}Q", *words)
        enc = self._ecb.encrypt(sigma)
        out = (int.from_bytes(enc, "little") ^ int.from_bytes(sigma, "little")).to_bytes(
            len(sigma), "little")
        step = 16 * count
        return [out[i : i + step] for i in range(0, len(out), step)]

    def xof(self, seed: bytes) -> Xof:
        """The draft's XOF object for one seed (for the rare reads past the first blocks)."""
        cls = xof_with(XofFixedKeyAes128, XofFixedKeyAes128.SEED_SIZE, self.framing)
        return cls(seed, self.dst, self.binder)


class IdpfBBCGGI21:
    """The IDPF of Section 8.3: SHARES 2, KEY_SIZE 16, Field64 inner values,
    Field255 leaf values."""

    SHARES = 2
    KEY_SIZE = XofFixedKeyAes128.SEED_SIZE
    RAND_SIZE = 2 * XofFixedKeyAes128.SEED_SIZE
    NONCE_SIZE = 16
    field_inner: type[Field] = Field64
    field_leaf: type[Field] = Field255

    def __init__(self, value_len: int, bits: int) -> None:
        if not 0 < bits < 2**16:
            raise IdpfError("bits must be in [1, 2^16)")
        if value_len < 1:
            raise IdpfError("value_len must be positive")
        self.BITS = bits
        self.VALUE_LEN = value_len

    def current_field(self, level: int) -> type[Field]:
        return self.field_inner if level < self.BITS - 1 else self.field_leaf

    # -- key generation (Section 8.3.2) ---------------------------------------------------

    def gen(self, alpha: Sequence[bool], beta_inner: Sequence[Sequence[int]],
            beta_leaf: Sequence[int], ctx: bytes, nonce: bytes,
            rand: bytes) -> tuple[PublicShare, list[bytes]]:
        if len(alpha) != self.BITS:
            raise IdpfError("incorrect alpha length")
        if len(beta_inner) != self.BITS - 1:
            raise IdpfError("incorrect beta_inner length")
        if len(rand) != self.RAND_SIZE:
            raise IdpfError("incorrect rand size")
        self._check_nonce(nonce)
        key = [bytes(rand[: self.KEY_SIZE]), bytes(rand[self.KEY_SIZE :])]
        hashes = self._hashes(ctx, nonce)
        seed = list(key)
        ctrl = [False, True]
        public_share: PublicShare = []
        for level in range(self.BITS):
            bit = bool(alpha[level])
            keep, lose = int(bit), 1 - int(bit)
            (s0, t0) = self._extend(level, seed[0], ctx, nonce, hashes)
            (s1, t1) = self._extend(level, seed[1], ctx, nonce, hashes)
            seed_cw = _xor(s0[lose], s1[lose])
            ctrl_cw = (t0[0] ^ t1[0] ^ (not bit), t0[1] ^ t1[1] ^ bit)
            if ctrl[0]:
                x0 = _xor(s0[keep], seed_cw)
                ctrl[0] = t0[keep] ^ ctrl_cw[keep]
            else:
                x0 = s0[keep]
                ctrl[0] = t0[keep]
            if ctrl[1]:
                x1 = _xor(s1[keep], seed_cw)
                ctrl[1] = t1[keep] ^ ctrl_cw[keep]
            else:
                x1 = s1[keep]
                ctrl[1] = t1[keep]
            (seed[0], w0) = self._convert(level, x0, ctx, nonce, hashes)
            (seed[1], w1) = self._convert(level, x1, ctx, nonce, hashes)
            field = self.current_field(level)
            b = beta_inner[level] if level < self.BITS - 1 else beta_leaf
            if len(b) != self.VALUE_LEN:
                raise IdpfError("length of beta must match the value length")
            p = field.MODULUS
            w_cw = [(bi - a + c) % p for bi, a, c in zip(b, w0, w1, strict=True)]
            if ctrl[1]:
                w_cw = [(-x) % p for x in w_cw]
            public_share.append((seed_cw, ctrl_cw, w_cw))
        return (public_share, key)

    # -- evaluation (Section 8.3.3) -------------------------------------------------------

    def eval(self, agg_id: int, public_share: PublicShare, key: bytes, level: int,
             prefixes: Sequence[Sequence[bool]], ctx: bytes,
             nonce: bytes) -> list[list[int]]:
        """Each Aggregator's share of the value at each prefix of `level` (the draft's
        `eval`, computed over the tree of the prefixes' ancestors; see the module
        docstring)."""
        if agg_id not in range(self.SHARES):
            raise IdpfError("aggregator id out of range")
        if level not in range(self.BITS):
            raise IdpfError("level out of range")
        if len(public_share) != self.BITS:
            raise IdpfError("public share has the wrong number of correction words")
        if len(key) != self.KEY_SIZE:
            raise IdpfError("incorrect key size")
        self._check_nonce(nonce)
        if any(len(prefix) != level + 1 for prefix in prefixes):
            raise IdpfError("incorrect prefix length")
        # A node of depth d is the integer of its d+1 bits (MSB first): its parent is
        # `node >> 1` and the bit that led to it `node & 1`.
        wanted = [int("".join("1" if b else "0" for b in prefix), 2) for prefix in prefixes]
        if len(set(wanted)) != len(wanted):
            raise IdpfError("prefixes must be unique")
        hashes = self._hashes(ctx, nonce)
        # The nodes of the current depth: node -> (seed, ctrl); the root holds the key.
        nodes: dict[int, tuple[bytes, bool]] = {0: (bytes(key), bool(agg_id))}
        values: dict[int, list[int]] = {}
        for current in range(level + 1):
            shift = level - current
            children = sorted({node >> shift for node in wanted})
            parents = sorted({child >> 1 for child in children}) if current else [0]
            cw_seed, cw_ctrl, w_cw = public_share[current]
            extended = dict(zip(parents, self._extend_many(
                current, [nodes[p][0] for p in parents], ctx, nonce, hashes), strict=True))
            seeds: list[bytes] = []
            ctrls: list[bool] = []
            for child in children:
                parent = child >> 1 if current else 0
                (s, t) = extended[parent]
                bit = child & 1
                seed = s[bit]
                ctrl = t[bit]
                if nodes[parent][1]:
                    seed = _xor(seed, cw_seed)
                    ctrl ^= cw_ctrl[bit]
                seeds.append(seed)
                ctrls.append(ctrl)
            last = current == level
            converted = self._convert_many(current, seeds, ctx, nonce, hashes,
                                           want_value=last)
            nodes = {}
            p = self.current_field(current).MODULUS
            for child, ctrl, (next_seed, y) in zip(children, ctrls, converted, strict=True):
                nodes[child] = (next_seed, ctrl)
                if last:
                    if ctrl:
                        y = [(a + b) % p for a, b in zip(y, w_cw, strict=True)]
                    if agg_id == 1:
                        y = [(-a) % p for a in y]
                    values[child] = y
        return [values[node] for node in wanted]

    # -- auxiliary functions (Section 8.3.4) ----------------------------------------------

    def _check_nonce(self, nonce: bytes) -> None:
        if len(nonce) != self.NONCE_SIZE:
            raise IdpfError("incorrect nonce size")

    def _aes_level(self, level: int) -> bool:
        """Whether `extend` and `convert` use XofFixedKeyAes128 at this level (draft-20:
        every level but the last, which uses XofTurboShake128)."""
        return level < self.BITS - 1

    def _hashes(self, ctx: bytes, nonce: bytes) -> tuple[FixedKeyAesHash, FixedKeyAesHash]:
        """The fixed-key AES hashes of `extend` and `convert` for one report."""
        return (FixedKeyAesHash(format_dst(1, 0, 0) + ctx, nonce),
                FixedKeyAesHash(format_dst(1, 0, 1) + ctx, nonce))

    def _leaf_xof(self, seed: bytes, usage: int, ctx: bytes, nonce: bytes) -> XofTurboShake128:
        return XofTurboShake128(seed, format_dst(1, 0, usage) + ctx, nonce)

    def _extend(self, level: int, seed: bytes, ctx: bytes, nonce: bytes,
                hashes: tuple[FixedKeyAesHash, FixedKeyAesHash]
                ) -> tuple[list[bytes], list[bool]]:
        return self._extend_many(level, [seed], ctx, nonce, hashes)[0]

    def _extend_many(self, level: int, seeds: Sequence[bytes], ctx: bytes, nonce: bytes,
                     hashes: tuple[FixedKeyAesHash, FixedKeyAesHash]
                     ) -> list[tuple[list[bytes], list[bool]]]:
        """The draft's `extend` of each seed: two seeds, their low bits the control bits
        (then cleared)."""
        k = self.KEY_SIZE
        if self._aes_level(level):
            streams = hashes[0].blocks(seeds, 2)
        else:
            streams = [self._leaf_xof(seed, 0, ctx, nonce).next(2 * k) for seed in seeds]
        out = []
        for stream in streams:
            s0, s1 = stream[:k], stream[k : 2 * k]
            t = [bool(s0[0] & 1), bool(s1[0] & 1)]
            out.append(([bytes([s0[0] & 0xFE]) + s0[1:], bytes([s1[0] & 0xFE]) + s1[1:]], t))
        return out

    def _convert(self, level: int, seed: bytes, ctx: bytes, nonce: bytes,
                 hashes: tuple[FixedKeyAesHash, FixedKeyAesHash]) -> tuple[bytes, list[int]]:
        return self._convert_many(level, [seed], ctx, nonce, hashes, want_value=True)[0]

    def _convert_many(self, level: int, seeds: Sequence[bytes], ctx: bytes, nonce: bytes,
                      hashes: tuple[FixedKeyAesHash, FixedKeyAesHash], want_value: bool
                      ) -> list[tuple[bytes, list[int]]]:
        """The draft's `convert` of each seed: the next seed, then VALUE_LEN field elements
        by rejection sampling. Without `want_value` the elements are left out (empty)."""
        k = self.KEY_SIZE
        field = self.current_field(level)
        if not self._aes_level(level):
            out = []
            for seed in seeds:
                xof = self._leaf_xof(seed, 1, ctx, nonce)
                next_seed = xof.next(k)
                out.append((next_seed, xof.next_vec(field, self.VALUE_LEN)
                            if want_value else []))
            return out
        size = field.ENCODED_SIZE
        need = k + self.VALUE_LEN * size if want_value else k
        count = -(-need // 16)
        streams = hashes[1].blocks(seeds, count)
        results: list[tuple[bytes, list[int]]] = []
        p = field.MODULUS
        mask = next_power_of_2(p) - 1
        for seed, stream in zip(seeds, streams, strict=True):
            next_seed = stream[:k]
            if not want_value:
                results.append((next_seed, []))
                continue
            # Rejection sampling (Section 6.2): each chunk, masked to the modulus' bit
            # length, is a candidate. A rejection (chance about 2^-32 per Field64 element,
            # 2^-250 per Field255 one) falls back to the draft's XOF for this seed.
            w = [x & mask for x in field._parse(stream[k:need])]
            if any(x >= p for x in w):
                aes_xof = hashes[1].xof(seed)
                aes_xof.next(k)
                w = aes_xof.next_vec(field, self.VALUE_LEN)
            results.append((next_seed, w))
        return results

    # -- the public share's encoding (Section 8.2.6, "Public Share") -----------------------

    def encode_public_share(self, public_share: PublicShare) -> bytes:
        if len(public_share) != self.BITS:
            raise IdpfError("public share has the wrong number of correction words")
        bits: list[bool] = []
        seeds = []
        inner = []
        leaf = b""
        for level, (seed_cw, ctrl_cw, w_cw) in enumerate(public_share):
            if len(seed_cw) != self.KEY_SIZE or len(w_cw) != self.VALUE_LEN:
                raise IdpfError("malformed correction word")
            bits += [bool(ctrl_cw[0]), bool(ctrl_cw[1])]
            seeds.append(bytes(seed_cw))
            field = self.current_field(level)
            try:
                encoded = field.encode_vec(w_cw)
            except (FieldError, OverflowError) as exc:
                raise IdpfError(f"correction word payload: {exc}") from None
            if level < self.BITS - 1:
                inner.append(encoded)
            else:
                leaf = encoded
        return pack_bits(bits) + b"".join(seeds) + b"".join(inner) + leaf

    def public_share_size(self) -> int:
        return ((2 * self.BITS + 7) // 8 + self.KEY_SIZE * self.BITS
                + self.field_inner.ENCODED_SIZE * self.VALUE_LEN * (self.BITS - 1)
                + self.field_leaf.ENCODED_SIZE * self.VALUE_LEN)

    def decode_public_share(self, encoded: bytes) -> PublicShare:
        """Strict: exact length, zero padding bits, field elements in range."""
        if len(encoded) != self.public_share_size():
            raise IdpfError(f"public share must be {self.public_share_size()} bytes, "
                            f"got {len(encoded)}")
        packed_len = (2 * self.BITS + 7) // 8
        bits = unpack_bits(encoded[:packed_len], 2 * self.BITS)
        pos = packed_len
        seeds = [bytes(encoded[pos + i * self.KEY_SIZE : pos + (i + 1) * self.KEY_SIZE])
                 for i in range(self.BITS)]
        pos += self.KEY_SIZE * self.BITS
        fi = self.field_inner.ENCODED_SIZE * self.VALUE_LEN
        try:
            inner = [self.field_inner.decode_vec(encoded[pos + i * fi : pos + (i + 1) * fi])
                     for i in range(self.BITS - 1)]
            pos += fi * (self.BITS - 1)
            leaf = self.field_leaf.decode_vec(encoded[pos:])
        except FieldError as exc:
            raise IdpfError(f"public share: {exc}") from None
        values = [*inner, leaf]
        return [(seeds[i], (bits[2 * i], bits[2 * i + 1]), values[i]) for i in range(self.BITS)]


def pack_bits(bits: Sequence[bool]) -> bytes:
    """Control bits packed LSB first (Section 8.2.6)."""
    out = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        out[i // 8] |= int(bool(bit)) << (i % 8)
    return bytes(out)


def unpack_bits(packed: bytes, length: int) -> list[bool]:
    """The inverse of `pack_bits`; refuses a wrong length or non-zero padding bits."""
    if (length + 7) // 8 != len(packed):
        raise IdpfError("packed control bits of the wrong length")
    if length % 8 and packed[-1] >> (length % 8):
        raise IdpfError("trailing bits in the packed control bits")
    return [bool((packed[i // 8] >> (i % 8)) & 1) for i in range(length)]


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).to_bytes(len(a), "little")


def encode_index(data: bytes, bits: int | None = None) -> tuple[bool, ...]:
    """A byte string as an IDPF index (Section 8.1.1): bytes in order, each MSB first;
    `bits` keeps only the first so many."""
    out = tuple(bool((byte >> (7 - i)) & 1) for byte in data for i in range(8))
    if bits is not None:
        if bits > len(out):
            raise IdpfError(f"{len(data)} bytes have fewer than {bits} bits")
        out = out[:bits]
    return out


def decode_index(index: Sequence[bool]) -> bytes:
    """The bytes of an index whose length is a multiple of 8 (the inverse of
    `encode_index`)."""
    if len(index) % 8:
        raise IdpfError("an index of whole bytes has a multiple of 8 bits")
    return bytes(sum(int(index[i + j]) << (7 - j) for j in range(8))
                 for i in range(0, len(index), 8))


class IdpfPoplar(IdpfBBCGGI21):
    """IdpfPoplar of draft-irtf-cfrg-vdaf-08 (Section 8.3): the same construction with
    VDAF-08's XOF framing and DST version byte, XofFixedKeyAes128 at every level (the
    leaves too), no application context (`ctx` must be empty), a binder of any length in
    place of the nonce, and a public share that interleaves each level's seed and value
    correction words after the packed control bits."""

    def _check_nonce(self, nonce: bytes) -> None:
        pass  # draft-08's binder has no fixed size (its vector uses b"some nonce")

    def _aes_level(self, level: int) -> bool:
        return True

    def _hashes(self, ctx: bytes, nonce: bytes) -> tuple[FixedKeyAesHash, FixedKeyAesHash]:
        if ctx:
            raise IdpfError("IdpfPoplar (VDAF-08) has no application context")
        return (FixedKeyAesHash(format_dst(1, 0, 0, 8), nonce, FRAMING_V08),
                FixedKeyAesHash(format_dst(1, 0, 1, 8), nonce, FRAMING_V08))

    def encode_public_share(self, public_share: PublicShare) -> bytes:
        if len(public_share) != self.BITS:
            raise IdpfError("public share has the wrong number of correction words")
        bits: list[bool] = []
        body = b""
        for level, (seed_cw, ctrl_cw, w_cw) in enumerate(public_share):
            if len(seed_cw) != self.KEY_SIZE or len(w_cw) != self.VALUE_LEN:
                raise IdpfError("malformed correction word")
            bits += [bool(ctrl_cw[0]), bool(ctrl_cw[1])]
            try:
                body += bytes(seed_cw) + self.current_field(level).encode_vec(w_cw)
            except (FieldError, OverflowError) as exc:
                raise IdpfError(f"correction word payload: {exc}") from None
        return pack_bits(bits) + body

    def decode_public_share(self, encoded: bytes) -> PublicShare:
        if len(encoded) != self.public_share_size():
            raise IdpfError(f"public share must be {self.public_share_size()} bytes, "
                            f"got {len(encoded)}")
        packed_len = (2 * self.BITS + 7) // 8
        bits = unpack_bits(encoded[:packed_len], 2 * self.BITS)
        pos = packed_len
        out: PublicShare = []
        for level in range(self.BITS):
            field = self.current_field(level)
            seed = bytes(encoded[pos : pos + self.KEY_SIZE])
            pos += self.KEY_SIZE
            size = field.ENCODED_SIZE * self.VALUE_LEN
            try:
                w = field.decode_vec(encoded[pos : pos + size])
            except FieldError as exc:
                raise IdpfError(f"public share: {exc}") from None
            pos += size
            out.append((seed, (bits[2 * level], bits[2 * level + 1]), w))
        return out


__all__ = ["CorrectionWord", "FixedKeyAesHash", "IdpfBBCGGI21", "IdpfError", "IdpfPoplar",
           "PublicShare",
           "decode_index", "encode_index", "pack_bits", "unpack_bits"]
