"""Poplar1 (draft-irtf-cfrg-vdaf-20, Section 8.2): counts of the measurements that start
with each candidate prefix, verified by the arithmetic sketch of BBCGGI21.

`Poplar1(bits)` is built on `IdpfBBCGGI21(2, bits)` (`vdaf.idpf`) and XofTurboShake128.
Types of the table "VDAF parameters for Poplar1", with field vectors as `list[int]`:

    Measurement     tuple[bool, ...] of length BITS (a list is accepted)
    AggParam        (level, prefixes): prefixes a tuple of bool tuples of length level+1
    PublicShare     the IDPF's correction words
    InputShare      (idpf_key, corr_seed, corr_inner, corr_leaf)
    VerifyState     (step, level, verify_mem), step b"evaluate sketch" / b"reveal sketch"
    VerifierShare   list[int] (3 elements in round one, 1 in round two)
    VerifierMessage list[int] | None (None: the sketch verified, encoded as b"")
    OutShare, AggShare  list[int] over Field64 (inner levels) or Field255 (the leaves)
    AggResult       list[int], one count per prefix

Every operation validates its input and raises `VdafError` on anything malformed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ppm_reference.vdaf.field import Field, FieldError
from ppm_reference.vdaf.idpf import IdpfBBCGGI21, IdpfError, IdpfPoplar, PublicShare
from ppm_reference.vdaf.profiles import VDAF_08, VDAF_18
from ppm_reference.vdaf.vdaf import Vdaf, VdafError
from ppm_reference.vdaf.xof import Xof

# The table "Constants used by Poplar1".
USAGE_SHARD_RAND = 1
USAGE_CORR_INNER = 2
USAGE_CORR_LEAF = 3
USAGE_VERIFY_RAND = 4

AggParam = tuple[int, tuple[tuple[bool, ...], ...]]
InputShare = tuple[bytes, bytes, list[int], list[int]]
VerifyState = tuple[bytes, int, list[int]]


class FieldVec(list[int]):
    """A vector of field elements that knows its field: Poplar1's shares are Field64 or
    Field255 by level, and the draft's encodings (Section 8.2.6) take the field from the
    aggregation parameter, which the VDAF interface's `encode_*` methods do not get."""

    def __init__(self, field: type[Field], values: Sequence[int] = ()) -> None:
        super().__init__(values)
        self.field = field


EVALUATE = b"evaluate sketch"
REVEAL = b"reveal sketch"
_STEPS = (EVALUATE, REVEAL)


class Poplar1(Vdaf):
    """Poplar1 with BITS-bit measurements (Section 8.2)."""

    NAME = "Poplar1"
    ID = VDAF_18.codepoint("Poplar1")
    IDPF: ClassVar[type[IdpfBBCGGI21]] = IdpfBBCGGI21
    SHARES = 2
    ROUNDS = 2
    NONCE_SIZE = 16

    def __init__(self, bits: int) -> None:
        if not 0 < bits < 2**16:
            raise VdafError("Poplar1 needs bits in [1, 2^16)")
        self.bits = bits
        self.idpf = self.IDPF(2, bits)
        self.xof: type[Xof] = self.PROFILE.xof
        self.VERIFY_KEY_SIZE = self.xof.SEED_SIZE
        self.RAND_SIZE = self.xof.SEED_SIZE * 3 + self.idpf.RAND_SIZE

    def _field(self, level: int) -> type[Field]:
        return self.idpf.current_field(level)

    # -- sharding (Section 8.2.1) ---------------------------------------------------------

    def _measurement(self, measurement: Any) -> tuple[bool, ...]:
        if isinstance(measurement, str | bytes) or len(measurement) != self.bits or \
                not all(isinstance(b, bool) for b in measurement):
            raise VdafError(f"a Poplar1 measurement is {self.bits} booleans")
        return tuple(measurement)

    def shard(self, ctx: bytes, measurement: Sequence[bool], nonce: bytes,
              rand: bytes) -> tuple[PublicShare, list[InputShare]]:
        if len(nonce) != self.NONCE_SIZE:
            raise VdafError("incorrect nonce size")
        if len(rand) != self.RAND_SIZE:
            raise VdafError("incorrect size of random bytes argument")
        measurement = self._measurement(measurement)
        bits = self.bits
        inner, leaf = self.idpf.field_inner, self.idpf.field_leaf
        l = self.xof.SEED_SIZE  # noqa: E741 (the draft's name)
        idpf_rand, rest = rand[: self.idpf.RAND_SIZE], rand[self.idpf.RAND_SIZE :]
        seeds = [bytes(rest[i : i + l]) for i in range(0, 3 * l, l)]
        corr_seed, shard_seed = seeds[:2], seeds[2]
        xof = self.xof(shard_seed, self.domain_separation_tag(USAGE_SHARD_RAND, ctx), nonce)
        beta_inner = [[1, k] for k in xof.next_vec(inner, bits - 1)]
        beta_leaf = [1, *xof.next_vec(leaf, 1)]
        try:
            public_share, keys = self.idpf.gen(tuple(measurement), beta_inner, beta_leaf, ctx,
                                               nonce, idpf_rand)
        except IdpfError as exc:
            raise VdafError(str(exc)) from None
        dst_inner = self.domain_separation_tag(USAGE_CORR_INNER, ctx)
        dst_leaf = self.domain_separation_tag(USAGE_CORR_LEAF, ctx)
        offsets = inner.vec_add(
            self.xof.expand_into_vec(inner, corr_seed[0], dst_inner, b"\x00" + nonce,
                                     3 * (bits - 1)),
            self.xof.expand_into_vec(inner, corr_seed[1], dst_inner, b"\x01" + nonce,
                                     3 * (bits - 1)))
        offsets += leaf.vec_add(
            self.xof.expand_into_vec(leaf, corr_seed[0], dst_leaf, b"\x00" + nonce, 3),
            self.xof.expand_into_vec(leaf, corr_seed[1], dst_leaf, b"\x01" + nonce, 3))
        corr_inner: list[list[int]] = [[], []]
        corr_leaf: list[list[int]] = [[], []]
        for level in range(bits):
            field = self._field(level)
            p = field.MODULUS
            k = beta_inner[level][1] if level < bits - 1 else beta_leaf[1]
            a, b, c = offsets[3 * level : 3 * level + 3]
            big_a = (-2 * a + k) % p
            big_b = (a * a + b - a * k + c) % p
            corr1 = xof.next_vec(field, 2)
            corr0 = field.vec_sub([big_a, big_b], corr1)
            if level < bits - 1:
                corr_inner[0] += corr0
                corr_inner[1] += corr1
            else:
                corr_leaf = [corr0, corr1]
        input_shares: list[InputShare] = [
            (keys[j], corr_seed[j], corr_inner[j], corr_leaf[j]) for j in range(2)]
        return (public_share, input_shares)

    # -- verification (Section 8.2.2) -----------------------------------------------------

    def _check_agg_param(self, agg_param: AggParam) -> tuple[int, tuple[tuple[bool, ...], ...]]:
        try:
            level, prefixes = agg_param
        except (TypeError, ValueError):
            raise VdafError("a Poplar1 aggregation parameter is (level, prefixes)") from None
        if not isinstance(level, int) or not 0 <= level < self.bits:
            raise VdafError(f"level {level!r} out of range for {self.bits} bits")
        return level, tuple(tuple(p) for p in prefixes)

    def verify_init(self, verify_key: bytes, ctx: bytes, agg_id: int, agg_param: AggParam,
                    nonce: bytes, public_share: PublicShare,
                    input_share: InputShare) -> tuple[VerifyState, list[int]]:
        if agg_id not in (0, 1):
            raise VdafError("agg_id out of range")
        if len(verify_key) != self.VERIFY_KEY_SIZE:
            raise VdafError("incorrect verify key size")
        if len(nonce) != self.NONCE_SIZE:
            raise VdafError("incorrect nonce size")
        level, prefixes = self._check_agg_param(agg_param)
        (key, corr_seed, corr_inner, corr_leaf) = input_share
        field = self._field(level)
        p = field.MODULUS
        try:
            value = self.idpf.eval(agg_id, public_share, key, level, prefixes, ctx, nonce)
        except IdpfError as exc:
            raise VdafError(str(exc)) from None
        byte_id = bytes([agg_id])
        if level < self.bits - 1:
            corr_xof = self.xof(corr_seed, self.domain_separation_tag(USAGE_CORR_INNER, ctx),
                                byte_id + nonce)
            corr_xof.next_vec(field, 3 * level)  # fast-forward to the level
            big_a, big_b = corr_inner[2 * level : 2 * (level + 1)]
        else:
            corr_xof = self.xof(corr_seed, self.domain_separation_tag(USAGE_CORR_LEAF, ctx),
                                byte_id + nonce)
            big_a, big_b = corr_leaf
        a_share, b_share, c_share = corr_xof.next_vec(field, 3)
        verify_rand = self.xof(verify_key, self.domain_separation_tag(USAGE_VERIFY_RAND, ctx),
                               nonce + level.to_bytes(2, "big")).next_vec(field, len(prefixes))
        s0, s1, s2 = a_share, b_share, c_share
        out_share = []
        for (data_share, auth_share), r in zip(value, verify_rand, strict=True):
            s0 += data_share * r
            s1 += data_share * r * r
            s2 += auth_share * r
            out_share.append(data_share)
        verify_mem = [big_a, big_b, agg_id, *out_share]
        return ((EVALUATE, level, verify_mem), FieldVec(field, [s0 % p, s1 % p, s2 % p]))

    def verify_next(self, ctx: bytes, verify_state: VerifyState,
                    verifier_message: list[int] | None
                    ) -> tuple[VerifyState, list[int]] | list[int]:
        (step, level, verify_mem) = verify_state
        field = self._field(level)
        p = field.MODULUS
        if step == EVALUATE:
            if verifier_message is None:
                verifier_message = self._no_first_message(field)
            if len(verifier_message) != 3:
                raise VdafError("incorrect sketch length")
            big_a, big_b, agg_id = verify_mem[:3]
            m0, m1, m2 = verifier_message
            sketch_share = (agg_id * (m0 * m0 - m1 - m2) + big_a * m0 + big_b) % p
            return ((REVEAL, level, list(verify_mem[3:])), FieldVec(field, [sketch_share]))
        if step == REVEAL:
            if verifier_message is None:
                return FieldVec(field, verify_mem)
            raise VdafError("invalid verifier message")
        raise VdafError("invalid verification state")

    def _no_first_message(self, field: type[Field]) -> list[int]:
        raise VdafError("expected value, got none")

    def verifier_shares_to_message(self, ctx: bytes, agg_param: AggParam,
                                   verifier_shares: list[list[int]]) -> list[int] | None:
        if len(verifier_shares) != 2:
            raise VdafError("incorrect number of verifier shares")
        level, _ = self._check_agg_param(agg_param)
        field = self._field(level)
        if len(verifier_shares[0]) != len(verifier_shares[1]):
            raise VdafError("verifier shares of different lengths")
        sketch = field.vec_add(verifier_shares[0], verifier_shares[1])
        if len(sketch) == 3:
            return FieldVec(field, sketch)
        if len(sketch) == 1:
            if sketch == [0]:
                return None
            raise VdafError("sketch verification failed")
        raise VdafError("incorrect sketch length")

    # -- validity of aggregation parameters (Section 8.2.3) ------------------------------

    def is_valid(self, agg_param: AggParam, previous_agg_params: Sequence[AggParam]) -> bool:
        """Prefixes unique and sorted; levels increasing; each prefix extends one of the
        previous level's prefixes."""
        (level, prefixes) = agg_param
        for i in range(1, len(prefixes)):
            if tuple(prefixes[i - 1]) >= tuple(prefixes[i]):
                return False
        if not previous_agg_params:
            return True
        (last_level, last_prefixes) = previous_agg_params[-1]
        last = {tuple(p) for p in last_prefixes}
        if level <= last_level:
            return False
        return all(tuple(prefix[: last_level + 1]) in last for prefix in prefixes)

    # -- aggregation and unsharding (Sections 8.2.4, 8.2.5) -------------------------------

    def agg_init(self, agg_param: AggParam) -> list[int]:
        level, prefixes = self._check_agg_param(agg_param)
        field = self._field(level)
        return FieldVec(field, field.zeros(len(prefixes)))

    def agg_update(self, agg_param: AggParam, agg_share: list[int],
                   out_share: list[int]) -> list[int]:
        level, _ = self._check_agg_param(agg_param)
        field = self._field(level)
        return FieldVec(field, field.vec_add(agg_share, out_share))

    def merge(self, agg_param: AggParam, agg_shares: list[list[int]]) -> list[int]:
        level, prefixes = self._check_agg_param(agg_param)
        field = self._field(level)
        agg = field.zeros(len(prefixes))
        for share in agg_shares:
            agg = field.vec_add(agg, share)
        return FieldVec(field, agg)

    def unshard(self, agg_param: AggParam, agg_shares: list[list[int]],
                num_measurements: int) -> list[int]:
        return list(self.merge(agg_param, agg_shares))

    # -- message serialization (Section 8.2.6) --------------------------------------------

    def encode_public_share(self, public_share: PublicShare) -> bytes:
        try:
            return self.idpf.encode_public_share(public_share)
        except IdpfError as exc:
            raise VdafError(str(exc)) from None

    def decode_public_share(self, encoded: bytes) -> PublicShare:
        try:
            return self.idpf.decode_public_share(bytes(encoded))
        except IdpfError as exc:
            raise VdafError(str(exc)) from None

    def input_share_size(self) -> int:
        return (self.idpf.KEY_SIZE + self.xof.SEED_SIZE
                + self.idpf.field_inner.ENCODED_SIZE * 2 * (self.bits - 1)
                + self.idpf.field_leaf.ENCODED_SIZE * 2)

    def encode_input_share(self, input_share: InputShare) -> bytes:
        (key, corr_seed, corr_inner, corr_leaf) = input_share
        if len(key) != self.idpf.KEY_SIZE or len(corr_seed) != self.xof.SEED_SIZE or \
                len(corr_inner) != 2 * (self.bits - 1) or len(corr_leaf) != 2:
            raise VdafError("malformed Poplar1 input share")
        return (bytes(key) + bytes(corr_seed) + self.idpf.field_inner.encode_vec(corr_inner)
                + self.idpf.field_leaf.encode_vec(corr_leaf))

    def decode_input_share(self, agg_id: int, encoded: bytes) -> InputShare:
        if agg_id not in (0, 1):
            raise VdafError("agg_id out of range")
        if len(encoded) != self.input_share_size():
            raise VdafError(f"Poplar1 input share must be {self.input_share_size()} bytes, "
                            f"got {len(encoded)}")
        k, s = self.idpf.KEY_SIZE, self.xof.SEED_SIZE
        inner_len = self.idpf.field_inner.ENCODED_SIZE * 2 * (self.bits - 1)
        key = bytes(encoded[:k])
        corr_seed = bytes(encoded[k : k + s])
        try:
            corr_inner = self.idpf.field_inner.decode_vec(encoded[k + s : k + s + inner_len])
            corr_leaf = self.idpf.field_leaf.decode_vec(encoded[k + s + inner_len :])
        except FieldError as exc:
            raise VdafError(f"Poplar1 input share: {exc}") from None
        return (key, corr_seed, corr_inner, corr_leaf)

    def _decode_elems(self, field: type[Field], encoded: bytes, count: int,
                      what: str) -> list[int]:
        if len(encoded) != count * field.ENCODED_SIZE:
            raise VdafError(f"{what} must be {count * field.ENCODED_SIZE} bytes, "
                            f"got {len(encoded)}")
        try:
            return FieldVec(field, field.decode_vec(bytes(encoded)))
        except FieldError as exc:
            raise VdafError(f"{what}: {exc}") from None

    def _state_field(self, verify_state: VerifyState) -> tuple[type[Field], bytes]:
        step, level, _ = verify_state
        if step not in _STEPS:
            raise VdafError("invalid verification state")
        return self._field(level), step

    def _encode_vec(self, vec: Sequence[int], what: str) -> bytes:
        if not isinstance(vec, FieldVec):
            raise VdafError(f"a Poplar1 {what} is a FieldVec (its field is its level's)")
        try:
            return vec.field.encode_vec(vec)
        except (FieldError, OverflowError) as exc:
            raise VdafError(f"{what}: {exc}") from None

    def encode_verifier_share(self, verifier_share: list[int]) -> bytes:
        if len(verifier_share) not in (1, 3):
            raise VdafError("a Poplar1 verifier share has 1 or 3 elements")
        return self._encode_vec(verifier_share, "verifier share")

    def decode_verifier_share(self, verify_state: VerifyState, encoded: bytes) -> list[int]:
        field, step = self._state_field(verify_state)
        return self._decode_elems(field, encoded, 3 if step == EVALUATE else 1,
                                  "Poplar1 verifier share")

    def encode_verifier_message(self, verifier_message: list[int] | None) -> bytes:
        if verifier_message is None:
            return b""
        return self._encode_vec(verifier_message, "verifier message")

    def decode_verifier_message(self, verify_state: VerifyState,
                                encoded: bytes) -> list[int] | None:
        field, step = self._state_field(verify_state)
        if step == REVEAL:
            if encoded:
                raise VdafError("the second-round verifier message is empty")
            return None
        return self._decode_elems(field, encoded, 3, "Poplar1 verifier message")

    def encode_agg_param(self, agg_param: AggParam) -> bytes:
        level, prefixes = agg_param
        if not 0 <= level < 2**16:
            raise VdafError("level out of range")
        if len(prefixes) >= 2**32:
            raise VdafError("too many prefixes")
        out = bytearray(level.to_bytes(2, "big") + len(prefixes).to_bytes(4, "big"))
        for prefix in prefixes:
            if len(prefix) != level + 1:
                raise VdafError("a prefix of a level-L parameter has L+1 bits")
            for i in range(0, len(prefix), 8):
                byte = 0
                for pos, bit in enumerate(prefix[i : i + 8]):
                    byte |= int(bool(bit)) << (7 - pos)
                out.append(byte)
        return bytes(out)

    def decode_agg_param(self, encoded: bytes) -> AggParam:
        """Strict: exact length, zero padding bits, level below BITS."""
        if len(encoded) < 6:
            raise VdafError("Poplar1 aggregation parameter too short")
        level = int.from_bytes(encoded[:2], "big")
        count = int.from_bytes(encoded[2:6], "big")
        if level >= self.bits:
            raise VdafError(f"level {level} out of range for {self.bits} bits")
        per = (level + 1 + 7) // 8
        body = encoded[6:]
        if len(body) != per * count:
            raise VdafError(f"Poplar1 aggregation parameter: {count} prefixes of "
                            f"{level + 1} bits need {per * count} bytes, got {len(body)}")
        leftover = (level + 1) % 8
        mask = (0xFF >> leftover) if leftover else 0
        prefixes = []
        for j in range(count):
            chunk = body[j * per : (j + 1) * per]
            if chunk[-1] & mask:
                raise VdafError("trailing bits in prefix")
            prefixes.append(tuple(bool((chunk[i // 8] >> (7 - i % 8)) & 1)
                                  for i in range(level + 1)))
        return (level, tuple(prefixes))

    def encode_out_share(self, out_share: list[int]) -> bytes:
        return self._encode_vec(out_share, "output share")

    def decode_out_share(self, agg_param: AggParam, encoded: bytes) -> list[int]:
        return self.decode_agg_share(agg_param, encoded)

    def encode_agg_share(self, agg_share: list[int]) -> bytes:
        return self._encode_vec(agg_share, "aggregate share")

    def decode_agg_share(self, agg_param: AggParam, encoded: bytes) -> list[int]:
        level, prefixes = self._check_agg_param(agg_param)
        return self._decode_elems(self._field(level), encoded, len(prefixes),
                                  "Poplar1 aggregate share")

    # -- storage of verification states (not a wire message; Appendix C) ------------------

    def encode_verify_state(self, verify_state: VerifyState) -> bytes:
        step, level, mem = verify_state
        field = self._field(level)
        return bytes([_STEPS.index(step)]) + level.to_bytes(2, "big") + field.encode_vec(mem)

    def decode_verify_state(self, encoded: bytes) -> VerifyState:
        if len(encoded) < 3 or encoded[0] >= len(_STEPS):
            raise VdafError("malformed stored Poplar1 verification state")
        level = int.from_bytes(encoded[1:3], "big")
        if level >= self.bits:
            raise VdafError("malformed stored Poplar1 verification state")
        field = self._field(level)
        try:
            mem = field.decode_vec(bytes(encoded[3:]))
        except FieldError as exc:
            raise VdafError(f"stored verification state: {exc}") from None
        return (_STEPS[encoded[0]], level, mem)


class Poplar1V08(Poplar1):
    """Poplar1 of draft-irtf-cfrg-vdaf-08 (Section 8), for DAP-09: IdpfPoplar, VDAF-08's
    XOF (16-byte seeds) and codepoint, no application context. The Python types are
    draft-20's (bool tuples; an int measurement, the draft-08 type, is accepted too);
    what differs on the wire is the aggregation parameter's encoding (every prefix an
    integer of level+1 bits, packed into one big-endian integer, the first prefix in the
    low bits) and what differs in behaviour is below:

    - `is_valid`: only that no previous parameter had the same level (draft-08 Section
      8.2.3); `verify_init` refuses prefixes that are not unique and sorted;
    - `verify_next` reads a missing first-round message as zeros (draft-08 `prep_next`).

    Our decoding of the aggregation parameter is stricter than draft-08's: non-zero
    padding bits above the last prefix are refused."""

    PROFILE = VDAF_08
    ID = VDAF_08.codepoint("Poplar1")
    IDPF = IdpfPoplar

    def _measurement(self, measurement: Any) -> tuple[bool, ...]:
        if isinstance(measurement, int) and not isinstance(measurement, bool):
            if not 0 <= measurement < 2**self.bits:
                raise VdafError(f"a Poplar1 measurement is below 2^{self.bits}")
            return tuple(bool((measurement >> (self.bits - 1 - i)) & 1)
                         for i in range(self.bits))
        return super()._measurement(measurement)

    def _no_first_message(self, field: type[Field]) -> list[int]:
        return field.zeros(3)

    def verify_init(self, verify_key: bytes, ctx: bytes, agg_id: int, agg_param: AggParam,
                    nonce: bytes, public_share: PublicShare,
                    input_share: InputShare) -> tuple[VerifyState, list[int]]:
        _, prefixes = self._check_agg_param(agg_param)
        if any(prefixes[i - 1] >= prefixes[i] for i in range(1, len(prefixes))):
            raise VdafError("candidate prefixes must be unique and sorted")
        return super().verify_init(verify_key, ctx, agg_id, agg_param, nonce, public_share,
                                   input_share)

    def is_valid(self, agg_param: AggParam, previous_agg_params: Sequence[AggParam]) -> bool:
        level = agg_param[0]
        return all(level != other[0] for other in previous_agg_params)

    def encode_agg_param(self, agg_param: AggParam) -> bytes:
        level, prefixes = agg_param
        if not 0 <= level < 2**16:
            raise VdafError("level out of range")
        if len(prefixes) >= 2**32:
            raise VdafError("too many prefixes")
        width = level + 1
        packed = 0
        for i, prefix in enumerate(prefixes):
            if len(prefix) != width:
                raise VdafError("a prefix of a level-L parameter has L+1 bits")
            packed |= _prefix_int(prefix) << (width * i)
        size = (width * len(prefixes) + 7) // 8
        return level.to_bytes(2, "big") + len(prefixes).to_bytes(4, "big") + \
            packed.to_bytes(size, "big")

    def decode_agg_param(self, encoded: bytes) -> AggParam:
        if len(encoded) < 6:
            raise VdafError("Poplar1 aggregation parameter too short")
        level = int.from_bytes(encoded[:2], "big")
        count = int.from_bytes(encoded[2:6], "big")
        if level >= self.bits:
            raise VdafError(f"level {level} out of range for {self.bits} bits")
        width = level + 1
        size = (width * count + 7) // 8
        if len(encoded) != 6 + size:
            raise VdafError(f"Poplar1 aggregation parameter: {count} prefixes of {width} "
                            f"bits need {size} bytes, got {len(encoded) - 6}")
        packed = int.from_bytes(encoded[6:], "big")
        if packed >> (width * count):
            raise VdafError("trailing bits in the packed prefixes")
        mask = (1 << width) - 1
        return (level, tuple(_int_prefix((packed >> (width * i)) & mask, width)
                             for i in range(count)))

    # The published VDAF-08 vectors write the parameter as JSON `[level, [prefix, ...]]`
    # with integer prefixes (and the measurement as an integer).
    def agg_param_from_json(self, value: Any) -> AggParam:
        try:
            level, prefixes = value
            width = int(level) + 1
            return (int(level), tuple(_int_prefix(int(p), width) for p in prefixes))
        except (TypeError, ValueError):
            raise VdafError(f"not a VDAF-08 Poplar1 aggregation parameter: {value!r}") from None

    def agg_param_to_json(self, agg_param: AggParam) -> Any:
        level, prefixes = agg_param
        return [level, [_prefix_int(p) for p in prefixes]]


def _prefix_int(prefix: Sequence[bool]) -> int:
    out = 0
    for bit in prefix:
        out = (out << 1) | int(bool(bit))
    return out


def _int_prefix(value: int, width: int) -> tuple[bool, ...]:
    return tuple(bool((value >> (width - 1 - i)) & 1) for i in range(width))
