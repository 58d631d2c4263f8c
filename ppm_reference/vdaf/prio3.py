"""Prio3 (draft-irtf-cfrg-vdaf-20, Section 7) and its variants (Section 7.4), and the
Prio3 variants of VDAF-08 (draft-irtf-cfrg-vdaf-08, Sections 7 and 7.4).

`Prio3` is written once; the wire version is its class attribute `PROFILE`
(`vdaf.profiles`), which gives the XOF, the DST version byte, the context rule, the
sharding layout, the FLP class and the codepoints. The draft-20 variants (`Prio3Count`,
`Prio3Sum`, ...) use VDAF_18; the VDAF-08 ones (`Prio3CountV08`, `Prio3SumV08`, ...) are
a few lines each with `PROFILE = VDAF_08` and VDAF-08's circuits. `NAME` is a variant's
registry name (the same in both versions).

Types follow Table 8 of the draft, with field vectors as `list[int]`:

    PublicShare      list[bytes] | None          (joint randomness parts)
    InputShare       (meas_share, proofs_share, blind) for the Leader (agg_id 0),
                     (seed, blind) for a Helper in draft-20 and
                     (meas_seed, proofs_seed, blind) in VDAF-08;
                     blind is None without joint randomness
    VerifyState      (out_share, corrected_joint_rand_seed)
    VerifierShare    (verifiers_share, joint_rand_part)
    VerifierMessage  bytes | None                (joint randomness seed)
    OutShare, AggShare  list[int]

Every operation validates its inputs and raises `VdafError` on anything malformed, so
that an Aggregator can reject a report rather than crash.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from ppm_reference.vdaf.circuits import (
    Count,
    HigherDegree,
    Histogram,
    Histogram08,
    L1BoundSum,
    MeasurementError,
    MultihotCountVec,
    MultiHotHistogram,
    Sum,
    Sum08,
    SumVec,
    SumVec08,
)
from ppm_reference.vdaf.field import Field64, Field128, FieldError, NttField
from ppm_reference.vdaf.flp import FlpBBCGGI19, FlpError
from ppm_reference.vdaf.profiles import VDAF_08, VDAF_18
from ppm_reference.vdaf.vdaf import Vdaf, VdafError
from ppm_reference.vdaf.xof import Xof

Measurement = TypeVar("Measurement")
AggResult = TypeVar("AggResult")

# Usages of the domain separation tag (Table 9).
USAGE_MEAS_SHARE = 1
USAGE_PROOF_SHARE = 2
USAGE_JOINT_RANDOMNESS = 3
USAGE_PROVE_RANDOMNESS = 4
USAGE_QUERY_RANDOMNESS = 5
USAGE_JOINT_RAND_SEED = 6
USAGE_JOINT_RAND_PART = 7

PublicShare = list[bytes] | None
InputShare = tuple[Any, ...]
VerifyState = tuple[list[int], bytes | None]
VerifierShare = tuple[list[int], bytes | None]
VerifierMessage = bytes | None


def _byte(x: int) -> bytes:
    return x.to_bytes(1, "big")


class Prio3(Vdaf, Generic[Measurement, AggResult]):
    """Prio3 over an FLP (Section 7.2). One verification round, no aggregation parameter."""

    NAME: ClassVar[str]
    NONCE_SIZE = 16
    ROUNDS = 1

    def __init__(self, shares: int, flp: FlpBBCGGI19[Measurement, AggResult],
                 num_proofs: int) -> None:
        if not 2 <= shares < 256:
            raise ValueError("SHARES must be in [2, 256)")
        if not 1 <= num_proofs < 256:
            raise ValueError("PROOFS must be in [1, 256)")
        self.SHARES = shares
        self.flp = flp
        self.field: type[NttField] = flp.field
        self.PROOFS = num_proofs
        self.xof: type[Xof] = self.PROFILE.xof
        self.VERIFY_KEY_SIZE = self.xof.SEED_SIZE
        self.RAND_SIZE = self.PROFILE.sharding.rand_size(self.xof.SEED_SIZE, shares,
                                                          flp.JOINT_RAND_LEN > 0)

    @property
    def uses_joint_rand(self) -> bool:
        return self.flp.JOINT_RAND_LEN > 0

    # -- sharding (Section 7.2.1) ---------------------------------------------------------

    def shard(self, ctx: bytes, measurement: Measurement, nonce: bytes,
              rand: bytes) -> tuple[PublicShare, list[InputShare]]:
        self.check_ctx(ctx)
        if len(nonce) != self.NONCE_SIZE:
            raise VdafError("incorrect nonce size")
        if len(rand) != self.RAND_SIZE:
            raise VdafError("incorrect size of random bytes argument")
        size = self.xof.SEED_SIZE
        seeds = [rand[i : i + size] for i in range(0, self.RAND_SIZE, size)]
        try:
            meas = self.flp.encode(measurement)
        except (MeasurementError, TypeError) as exc:
            raise VdafError(f"invalid measurement: {exc}") from exc
        if self.uses_joint_rand:
            return self.shard_with_joint_rand(ctx, meas, nonce, seeds)
        return self.shard_without_joint_rand(ctx, meas, seeds)

    # A Helper's seeds (`ShardSeeds.helpers[j]`): its measurement share is expanded from
    # the first, its proofs share from the last (the same seed in draft-20).

    def shard_without_joint_rand(self, ctx: bytes, meas: list[int],
                                 seeds: list[bytes]) -> tuple[PublicShare, list[InputShare]]:
        layout = self.PROFILE.sharding.split(seeds, self.SHARES, False)
        field = self.field
        leader_meas_share = meas
        for j, helper in enumerate(layout.helpers):
            leader_meas_share = field.vec_sub(
                leader_meas_share, self.helper_meas_share(ctx, j + 1, helper[0]))
        prove_rands = self.prove_rands(ctx, layout.prove)
        leader_proofs_share: list[int] = []
        n = self.flp.PROVE_RAND_LEN
        for k in range(self.PROOFS):
            leader_proofs_share += self.flp.prove(meas, prove_rands[k * n : (k + 1) * n], [])
        for j, helper in enumerate(layout.helpers):
            leader_proofs_share = field.vec_sub(
                leader_proofs_share, self.helper_proofs_share(ctx, j + 1, helper[-1]))
        input_shares: list[InputShare] = [(leader_meas_share, leader_proofs_share, None)]
        input_shares += [(*helper, None) for helper in layout.helpers]
        return (None, input_shares)

    def shard_with_joint_rand(self, ctx: bytes, meas: list[int], nonce: bytes,
                              seeds: list[bytes]) -> tuple[PublicShare, list[InputShare]]:
        layout = self.PROFILE.sharding.split(seeds, self.SHARES, True)
        helper_blinds = [b for b in layout.helper_blinds if b is not None]
        leader_blind = layout.leader_blind
        assert leader_blind is not None and len(helper_blinds) == self.SHARES - 1
        field = self.field

        leader_meas_share = meas
        joint_rand_parts = []
        for j, helper in enumerate(layout.helpers):
            helper_meas_share = self.helper_meas_share(ctx, j + 1, helper[0])
            leader_meas_share = field.vec_sub(leader_meas_share, helper_meas_share)
            joint_rand_parts.append(self.joint_rand_part(
                ctx, j + 1, helper_blinds[j], helper_meas_share, nonce))
        joint_rand_parts.insert(0, self.joint_rand_part(
            ctx, 0, leader_blind, leader_meas_share, nonce))

        prove_rands = self.prove_rands(ctx, layout.prove)
        joint_rands = self.joint_rands(ctx, self.joint_rand_seed(ctx, joint_rand_parts))
        leader_proofs_share: list[int] = []
        n = self.flp.PROVE_RAND_LEN
        m = self.flp.JOINT_RAND_LEN
        for k in range(self.PROOFS):
            leader_proofs_share += self.flp.prove(
                meas, prove_rands[k * n : (k + 1) * n], joint_rands[k * m : (k + 1) * m])
        for j, helper in enumerate(layout.helpers):
            leader_proofs_share = field.vec_sub(
                leader_proofs_share, self.helper_proofs_share(ctx, j + 1, helper[-1]))

        input_shares: list[InputShare] = [(leader_meas_share, leader_proofs_share, leader_blind)]
        input_shares += [(*helper, blind)
                         for helper, blind in zip(layout.helpers, helper_blinds, strict=True)]
        return (joint_rand_parts, input_shares)

    # -- verification (Section 7.2.2) -----------------------------------------------------

    def verify_init(self, verify_key: bytes, ctx: bytes, agg_id: int, agg_param: None,
                    nonce: bytes, public_share: PublicShare,
                    input_share: InputShare) -> tuple[VerifyState, VerifierShare]:
        self.check_ctx(ctx)
        if len(verify_key) != self.VERIFY_KEY_SIZE:
            raise VdafError("incorrect verify_key size")
        if not 0 <= agg_id < self.SHARES:
            raise VdafError("agg_id out of range")
        if len(nonce) != self.NONCE_SIZE:
            raise VdafError("incorrect nonce size")
        self._check_public_share(public_share)
        meas_share, proofs_share, blind = self.expand_input_share(ctx, agg_id, input_share)
        out_share = self.flp.truncate(meas_share)

        joint_rands: list[int] = []
        corrected_joint_rand_seed, joint_rand_part = None, None
        if self.uses_joint_rand:
            assert public_share is not None and blind is not None
            joint_rand_part = self.joint_rand_part(ctx, agg_id, blind, meas_share, nonce)
            parts = list(public_share)
            parts[agg_id] = joint_rand_part
            corrected_joint_rand_seed = self.joint_rand_seed(ctx, parts)
            joint_rands = self.joint_rands(ctx, corrected_joint_rand_seed)

        query_rands = self.query_rands(verify_key, ctx, nonce)
        flp = self.flp
        verifiers_share: list[int] = []
        pl, ql, jl = flp.PROOF_LEN, flp.QUERY_RAND_LEN, flp.JOINT_RAND_LEN
        try:
            for k in range(self.PROOFS):
                verifiers_share += flp.query(
                    meas_share,
                    proofs_share[k * pl : (k + 1) * pl],
                    query_rands[k * ql : (k + 1) * ql],
                    joint_rands[k * jl : (k + 1) * jl],
                    self.SHARES,
                )
        except FlpError as exc:
            raise VdafError(str(exc)) from exc
        return ((out_share, corrected_joint_rand_seed), (verifiers_share, joint_rand_part))

    def verifier_shares_to_message(self, ctx: bytes, agg_param: None,
                                   verifier_shares: list[VerifierShare]) -> VerifierMessage:
        self.check_ctx(ctx)
        if len(verifier_shares) != self.SHARES:
            raise VdafError(f"expected {self.SHARES} verifier shares, got {len(verifier_shares)}")
        field = self.field
        vl = self.flp.VERIFIER_LEN
        verifiers = field.zeros(vl * self.PROOFS)
        joint_rand_parts = []
        for verifiers_share, joint_rand_part in verifier_shares:
            if len(verifiers_share) != vl * self.PROOFS:
                raise VdafError("verifier share of the wrong length")
            verifiers = field.vec_add(verifiers, verifiers_share)
            if self.uses_joint_rand:
                if joint_rand_part is None or len(joint_rand_part) != self.xof.SEED_SIZE:
                    raise VdafError("verifier share lacks a joint randomness part")
                joint_rand_parts.append(joint_rand_part)
        for k in range(self.PROOFS):
            if not self.flp.decide(verifiers[k * vl : (k + 1) * vl]):
                raise VdafError("proof verifier check failed")
        if self.uses_joint_rand:
            return self.joint_rand_seed(ctx, joint_rand_parts)
        return None

    def verify_next(self, ctx: bytes, verify_state: VerifyState,
                    verifier_message: VerifierMessage) -> list[int]:
        self.check_ctx(ctx)
        out_share, corrected_joint_rand_seed = verify_state
        if verifier_message != corrected_joint_rand_seed:
            raise VdafError("joint randomness check failed")
        return out_share

    def is_valid(self, agg_param: None, previous_agg_params: list[None]) -> bool:
        """A report is aggregated at most once (Section 7.2.3)."""
        return len(previous_agg_params) == 0

    # -- aggregation and unsharding (Sections 7.2.4, 7.2.5) -------------------------------

    def agg_init(self, agg_param: None) -> list[int]:
        return self.field.zeros(self.flp.OUTPUT_LEN)

    def agg_update(self, agg_param: None, agg_share: list[int],
                   out_share: list[int]) -> list[int]:
        return self.field.vec_add(agg_share, out_share)

    def merge(self, agg_param: None, agg_shares: list[list[int]]) -> list[int]:
        agg = self.agg_init(None)
        for agg_share in agg_shares:
            agg = self.field.vec_add(agg, agg_share)
        return agg

    def unshard(self, agg_param: None, agg_shares: list[list[int]],
                num_measurements: int) -> AggResult:
        return self.flp.decode(self.merge(None, agg_shares), num_measurements)

    # -- auxiliary functions (Section 7.2.6) ----------------------------------------------

    def helper_meas_share(self, ctx: bytes, agg_id: int, share: bytes) -> list[int]:
        return self.xof.expand_into_vec(
            self.field, share, self.domain_separation_tag(USAGE_MEAS_SHARE, ctx),
            _byte(agg_id), self.flp.MEAS_LEN)

    def helper_proofs_share(self, ctx: bytes, agg_id: int, share: bytes) -> list[int]:
        return self.xof.expand_into_vec(
            self.field, share, self.domain_separation_tag(USAGE_PROOF_SHARE, ctx),
            _byte(self.PROOFS) + _byte(agg_id), self.flp.PROOF_LEN * self.PROOFS)

    def expand_input_share(self, ctx: bytes, agg_id: int,
                           input_share: InputShare) -> tuple[list[int], list[int], bytes | None]:
        if agg_id > 0:
            count = self.PROFILE.sharding.helper_seeds
            if len(input_share) != count + 1:
                raise VdafError(f"helper input share must be {count} seed(s) and a blind")
            *seeds, blind = input_share
            if not all(isinstance(s, bytes) and len(s) == self.xof.SEED_SIZE for s in seeds):
                raise VdafError("helper input share seed of the wrong size")
            meas_share = self.helper_meas_share(ctx, agg_id, seeds[0])
            proofs_share = self.helper_proofs_share(ctx, agg_id, seeds[-1])
        else:
            if len(input_share) != 3:
                raise VdafError("leader input share must be (meas_share, proofs_share, blind)")
            meas_share, proofs_share, blind = input_share
            if not isinstance(meas_share, list) or not isinstance(proofs_share, list):
                raise VdafError("leader input share must hold field vectors")
            if len(meas_share) != self.flp.MEAS_LEN or \
                    len(proofs_share) != self.flp.PROOF_LEN * self.PROOFS:
                raise VdafError("leader input share of the wrong length")
        if self.uses_joint_rand:
            if not isinstance(blind, bytes) or len(blind) != self.xof.SEED_SIZE:
                raise VdafError("input share lacks a blind of the right size")
        elif blind is not None:
            raise VdafError("unexpected blind in input share")
        return (meas_share, proofs_share, blind)

    def prove_rands(self, ctx: bytes, prove_seed: bytes) -> list[int]:
        return self.xof.expand_into_vec(
            self.field, prove_seed, self.domain_separation_tag(USAGE_PROVE_RANDOMNESS, ctx),
            _byte(self.PROOFS), self.flp.PROVE_RAND_LEN * self.PROOFS)

    def query_rands(self, verify_key: bytes, ctx: bytes, nonce: bytes) -> list[int]:
        return self.xof.expand_into_vec(
            self.field, verify_key, self.domain_separation_tag(USAGE_QUERY_RANDOMNESS, ctx),
            _byte(self.PROOFS) + nonce, self.flp.QUERY_RAND_LEN * self.PROOFS)

    def joint_rand_part(self, ctx: bytes, agg_id: int, blind: bytes, meas_share: list[int],
                        nonce: bytes) -> bytes:
        return self.xof.derive_seed(
            blind, self.domain_separation_tag(USAGE_JOINT_RAND_PART, ctx),
            _byte(agg_id) + nonce + self.field.encode_vec(meas_share))

    def joint_rand_seed(self, ctx: bytes, joint_rand_parts: list[bytes]) -> bytes:
        return self.xof.derive_seed(
            bytes(self.xof.SEED_SIZE), self.domain_separation_tag(USAGE_JOINT_RAND_SEED, ctx),
            b"".join(joint_rand_parts))

    def joint_rands(self, ctx: bytes, joint_rand_seed: bytes) -> list[int]:
        return self.xof.expand_into_vec(
            self.field, joint_rand_seed, self.domain_separation_tag(USAGE_JOINT_RANDOMNESS, ctx),
            _byte(self.PROOFS), self.flp.JOINT_RAND_LEN * self.PROOFS)

    # -- message serialization (Section 7.2.7) --------------------------------------------

    def _check_public_share(self, public_share: PublicShare) -> None:
        if self.uses_joint_rand:
            if public_share is None or len(public_share) != self.SHARES or any(
                    not isinstance(p, bytes) or len(p) != self.xof.SEED_SIZE
                    for p in public_share):
                raise VdafError("public share must hold one joint randomness part per share")
        elif public_share is not None:
            raise VdafError("public share must be empty")

    def encode_public_share(self, public_share: PublicShare) -> bytes:
        self._check_public_share(public_share)
        return b"".join(public_share) if public_share is not None else b""

    def decode_public_share(self, encoded: bytes) -> PublicShare:
        if not self.uses_joint_rand:
            if encoded:
                raise VdafError("public share must be empty")
            return None
        size = self.xof.SEED_SIZE
        if len(encoded) != size * self.SHARES:
            raise VdafError(f"public share must be {size * self.SHARES} bytes")
        return [bytes(encoded[i : i + size]) for i in range(0, len(encoded), size)]

    def encode_input_share(self, input_share: InputShare) -> bytes:
        field = self.field
        if isinstance(input_share[0], list):  # the Leader's: field vectors
            meas_share, proofs_share, blind = input_share
            out = field.encode_vec(meas_share) + field.encode_vec(proofs_share)
        else:  # a Helper's: its seeds, then the blind
            *seeds, blind = input_share
            out = b"".join(seeds)
        if self.uses_joint_rand:
            out += blind
        return out

    def decode_input_share(self, agg_id: int, encoded: bytes) -> InputShare:
        if not 0 <= agg_id < self.SHARES:
            raise VdafError("agg_id out of range")
        size = self.xof.SEED_SIZE
        blind_len = size if self.uses_joint_rand else 0
        if agg_id == 0:
            f = self.field.ENCODED_SIZE
            meas_len = self.flp.MEAS_LEN * f
            proofs_len = self.flp.PROOF_LEN * self.PROOFS * f
            if len(encoded) != meas_len + proofs_len + blind_len:
                raise VdafError(
                    f"leader input share must be {meas_len + proofs_len + blind_len} bytes")
            try:
                meas_share = self.field.decode_vec(encoded[:meas_len])
                proofs_share = self.field.decode_vec(encoded[meas_len : meas_len + proofs_len])
            except FieldError as exc:
                raise VdafError(f"leader input share: {exc}") from exc
            blind = bytes(encoded[meas_len + proofs_len :]) if blind_len else None
            return (meas_share, proofs_share, blind)
        seeds_len = size * self.PROFILE.sharding.helper_seeds
        if len(encoded) != seeds_len + blind_len:
            raise VdafError(f"helper input share must be {seeds_len + blind_len} bytes")
        seeds = [bytes(encoded[i : i + size]) for i in range(0, seeds_len, size)]
        return (*seeds, bytes(encoded[seeds_len:]) if blind_len else None)

    def encode_verifier_share(self, verifier_share: VerifierShare) -> bytes:
        verifiers_share, joint_rand_part = verifier_share
        out = self.field.encode_vec(verifiers_share)
        if self.uses_joint_rand:
            assert joint_rand_part is not None
            out += joint_rand_part
        return out

    def decode_verifier_share(self, verify_state: VerifyState | None,
                              encoded: bytes) -> VerifierShare:
        f = self.field.ENCODED_SIZE
        vlen = self.flp.VERIFIER_LEN * self.PROOFS * f
        plen = self.xof.SEED_SIZE if self.uses_joint_rand else 0
        if len(encoded) != vlen + plen:
            raise VdafError(f"verifier share must be {vlen + plen} bytes")
        try:
            verifiers_share = self.field.decode_vec(encoded[:vlen])
        except FieldError as exc:
            raise VdafError(f"verifier share: {exc}") from exc
        return (verifiers_share, bytes(encoded[vlen:]) if plen else None)

    def encode_verifier_message(self, verifier_message: VerifierMessage) -> bytes:
        return verifier_message if verifier_message is not None else b""

    def decode_verifier_message(self, verify_state: VerifyState | None,
                                encoded: bytes) -> VerifierMessage:
        if self.uses_joint_rand:
            if len(encoded) != self.xof.SEED_SIZE:
                raise VdafError(f"verifier message must be {self.xof.SEED_SIZE} bytes")
            return bytes(encoded)
        if encoded:
            raise VdafError("verifier message must be empty")
        return None

    def encode_verify_state(self, verify_state: VerifyState) -> bytes:
        """Serialise a verification state for storage. Not a wire message: the draft
        leaves its representation to implementations (Appendix C)."""
        out_share, seed = verify_state
        return self.field.encode_vec(out_share) + (seed if seed is not None else b"")

    def decode_verify_state(self, encoded: bytes) -> VerifyState:
        size = self.flp.OUTPUT_LEN * self.field.ENCODED_SIZE
        seed_len = self.xof.SEED_SIZE if self.uses_joint_rand else 0
        if len(encoded) != size + seed_len:
            raise VdafError("stored verification state of the wrong length")
        out_share = self._decode_vec_of_len(encoded[:size], self.flp.OUTPUT_LEN, "state")
        return (out_share, bytes(encoded[size:]) if seed_len else None)

    def encode_agg_param(self, agg_param: None) -> bytes:
        if agg_param is not None:
            raise VdafError("Prio3 has no aggregation parameter")
        return b""

    def decode_agg_param(self, encoded: bytes) -> None:
        if encoded:
            raise VdafError("Prio3 aggregation parameter must be empty")
        return None

    def encode_out_share(self, out_share: list[int]) -> bytes:
        return self.field.encode_vec(out_share)

    def decode_out_share(self, agg_param: None, encoded: bytes) -> list[int]:
        return self._decode_vec_of_len(encoded, self.flp.OUTPUT_LEN, "output share")

    def encode_agg_share(self, agg_share: list[int]) -> bytes:
        return self.field.encode_vec(agg_share)

    def decode_agg_share(self, agg_param: None, encoded: bytes) -> list[int]:
        return self._decode_vec_of_len(encoded, self.flp.OUTPUT_LEN, "aggregate share")

    def _decode_vec_of_len(self, encoded: bytes, length: int, what: str) -> list[int]:
        if len(encoded) != length * self.field.ENCODED_SIZE:
            raise VdafError(f"{what} must be {length * self.field.ENCODED_SIZE} bytes")
        try:
            return self.field.decode_vec(encoded)
        except FieldError as exc:
            raise VdafError(f"{what}: {exc}") from exc


# -- variants of draft-20 (Section 7.4) ------------------------------------------------


class Prio3Count(Prio3[int, int]):
    """Prio3Count (Section 7.4.1): Field64, Count circuit, one proof."""

    NAME = "Prio3Count"
    ID = VDAF_18.codepoint(NAME)

    def __init__(self, shares: int) -> None:
        super().__init__(shares, self.PROFILE.flp(Count(Field64)), 1)


class Prio3Sum(Prio3[int, int]):
    """Prio3Sum (Section 7.4.2): Field64, Sum(max_measurement), one proof."""

    NAME = "Prio3Sum"
    ID = VDAF_18.codepoint(NAME)

    def __init__(self, shares: int, max_measurement: int) -> None:
        self.max_measurement = max_measurement
        super().__init__(shares, self.PROFILE.flp(Sum(Field64, max_measurement)), 1)


class Prio3SumVec(Prio3[list[int], list[int]]):
    """Prio3SumVec (Section 7.4.3): Field128, SumVec(length, max_measurement,
    chunk_length), one proof."""

    NAME = "Prio3SumVec"
    ID = VDAF_18.codepoint(NAME)

    def __init__(self, shares: int, length: int, max_measurement: int,
                 chunk_length: int) -> None:
        self.length = length
        self.max_measurement = max_measurement
        self.chunk_length = chunk_length
        super().__init__(
            shares, self.PROFILE.flp(SumVec(Field128, length, max_measurement, chunk_length)), 1)


class Prio3Histogram(Prio3[int, list[int]]):
    """Prio3Histogram (Section 7.4.4): Field128, Histogram(length, chunk_length)."""

    NAME = "Prio3Histogram"
    ID = VDAF_18.codepoint(NAME)

    def __init__(self, shares: int, length: int, chunk_length: int) -> None:
        self.length = length
        self.chunk_length = chunk_length
        super().__init__(shares, self.PROFILE.flp(Histogram(Field128, length, chunk_length)), 1)


class Prio3MultihotCountVec(Prio3[list[bool], list[int]]):
    """Prio3MultihotCountVec (Section 7.4.5): Field128, MultihotCountVec(length,
    max_weight, chunk_length), one proof."""

    NAME = "Prio3MultihotCountVec"
    ID = VDAF_18.codepoint(NAME)

    def __init__(self, shares: int, length: int, max_weight: int, chunk_length: int) -> None:
        self.length = length
        self.max_weight = max_weight
        self.chunk_length = chunk_length
        super().__init__(
            shares,
            self.PROFILE.flp(MultihotCountVec(Field128, length, max_weight, chunk_length)), 1)


class Prio3L1BoundSum(Prio3[list[int], list[int]]):
    """Prio3L1BoundSum (draft-ietf-ppm-l1-bound-sum-02, Section 3, Table 1): Field128,
    L1BoundSum(length, max_value, chunk_length), one proof, XofTurboShake128; VDAF ID
    0x00000007 (Section 6). Built on VDAF-18 (draft-irtf-cfrg-vdaf-18..20)."""

    NAME = "Prio3L1BoundSum"
    ID = VDAF_18.codepoint(NAME)

    def __init__(self, shares: int, length: int, max_value: int, chunk_length: int) -> None:
        self.length = length
        self.max_value = max_value
        self.chunk_length = chunk_length
        super().__init__(
            shares, self.PROFILE.flp(L1BoundSum(Field128, length, max_value, chunk_length)), 1)


class Prio3SumVecWithMultiproof(Prio3[list[int], list[int]]):
    """Test-only: SumVec over a chosen field with several proofs (Section 7.1.2,
    "Multiple Proofs"). Not a registered VDAF: it uses the private-use ID 0xFFFFFFFF,
    like the draft's test vectors."""

    NAME = "Prio3SumVecWithMultiproof"
    ID = VDAF_18.codepoint(NAME)

    def __init__(self, shares: int, field: type[NttField], num_proofs: int, length: int,
                 max_measurement: int, chunk_length: int) -> None:
        self.length = length
        self.max_measurement = max_measurement
        self.chunk_length = chunk_length
        self.num_proofs = num_proofs
        super().__init__(
            shares, self.PROFILE.flp(SumVec(field, length, max_measurement, chunk_length)),
            num_proofs)


class Prio3HigherDegree(Prio3[int, int]):
    """Test-only: Prio3 over the degree-3 `HigherDegree` circuit (Field64), ID
    0xFFFFFFFF, as in the draft's test vectors."""

    NAME = "Prio3HigherDegree"
    ID = VDAF_18.codepoint(NAME)

    def __init__(self, shares: int) -> None:
        super().__init__(shares, self.PROFILE.flp(HigherDegree(Field64)), 1)


# -- variants of VDAF-08 (draft-irtf-cfrg-vdaf-08, Section 7.4) ---------------------------
#
# XofTurboShake128 with 16-byte seeds, FlpGeneric, VDAF-08's circuits and codepoints: all
# of it comes from `PROFILE = VDAF_08` and the circuit classes. The registry names (NAME)
# are those of draft-08; the class names carry `V08` so that both versions can be
# imported side by side.


class Prio3CountV08(Prio3[int, int]):
    """VDAF-08 Prio3Count (draft-08 Section 7.4.1): Field64, the Count circuit (the
    same as draft-20's), one proof."""

    PROFILE = VDAF_08
    NAME = "Prio3Count"
    ID = VDAF_08.codepoint(NAME)

    def __init__(self, shares: int) -> None:
        super().__init__(shares, self.PROFILE.flp(Count(Field64)), 1)


class Prio3SumV08(Prio3[int, int]):
    """VDAF-08 Prio3Sum (draft-08 Section 7.4.2): Field128, an integer in
    `[0, 2^bits)` range-checked bit by bit with one joint randomness element."""

    PROFILE = VDAF_08
    NAME = "Prio3Sum"
    ID = VDAF_08.codepoint(NAME)

    def __init__(self, shares: int, bits: int) -> None:
        self.bits = bits
        super().__init__(shares, self.PROFILE.flp(Sum08(Field128, bits)), 1)


class Prio3SumVecV08(Prio3[list[int], list[int]]):
    """VDAF-08 Prio3SumVec (draft-08 Section 7.4.3): Field128, `length` integers in
    `[0, 2^bits)`."""

    PROFILE = VDAF_08
    NAME = "Prio3SumVec"
    ID = VDAF_08.codepoint(NAME)

    def __init__(self, shares: int, length: int, bits: int, chunk_length: int) -> None:
        self.length = length
        self.bits = bits
        self.chunk_length = chunk_length
        super().__init__(
            shares, self.PROFILE.flp(SumVec08(Field128, length, bits, chunk_length)), 1)


class Prio3HistogramV08(Prio3[int, list[int]]):
    """VDAF-08 Prio3Histogram (draft-08 Section 7.4.4): Field128, a bucket index."""

    PROFILE = VDAF_08
    NAME = "Prio3Histogram"
    ID = VDAF_08.codepoint(NAME)

    def __init__(self, shares: int, length: int, chunk_length: int) -> None:
        self.length = length
        self.chunk_length = chunk_length
        super().__init__(
            shares, self.PROFILE.flp(Histogram08(Field128, length, chunk_length)), 1)


class Prio3MultiHotHistogramV08(Prio3[list[int], list[int]]):
    """Test-only: the `Prio3MultiHotHistogram` of the published VDAF-08 test vectors
    (not in the draft-08 text): Field128, a bit vector with at most `max_count` ones,
    private-use ID 0xFFFFFFFF. See `vdaf.circuits.MultiHotHistogram`."""

    PROFILE = VDAF_08
    NAME = "Prio3MultiHotHistogram"
    ID = VDAF_08.codepoint(NAME)

    def __init__(self, shares: int, length: int, max_count: int, chunk_length: int) -> None:
        self.length = length
        self.max_count = max_count
        self.chunk_length = chunk_length
        super().__init__(
            shares,
            self.PROFILE.flp(MultiHotHistogram(Field128, length, max_count, chunk_length)), 1)


class Prio3SumVecWithMultiproofV08(Prio3[list[int], list[int]]):
    """Test-only: VDAF-08's SumVec over a chosen field with several proofs (draft-08
    Section 7.1.2), private-use ID 0xFFFFFFFF, as in the published VDAF-08 vectors
    (Field64, 4 proofs: read off their byte sizes)."""

    PROFILE = VDAF_08
    NAME = "Prio3SumVecWithMultiproof"
    ID = VDAF_08.codepoint(NAME)

    def __init__(self, shares: int, field: type[NttField], num_proofs: int, length: int,
                 bits: int, chunk_length: int) -> None:
        self.length = length
        self.bits = bits
        self.chunk_length = chunk_length
        self.num_proofs = num_proofs
        super().__init__(
            shares, self.PROFILE.flp(SumVec08(field, length, bits, chunk_length)), num_proofs)
