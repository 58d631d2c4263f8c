"""The VDAF interface (draft-irtf-cfrg-vdaf-20, Section 5) and its execution."""

from __future__ import annotations

import secrets
from typing import Any, ClassVar

from ppm_reference.vdaf.profiles import VDAF_18, VdafProfile
from ppm_reference.vdaf.xof import format_dst


class VdafError(ValueError):
    """A VDAF operation failed: bad input, failed verification, or a malformed message.

    An Aggregator that sees this for a report MUST reject the report (Section 5)."""


def gen_rand(length: int) -> bytes:
    """Bytes from the OS CSPRNG (Section 2)."""
    return secrets.token_bytes(length)


class Vdaf:
    """Base class of VDAFs: the constants of Table 4 and the shared domain separation.

    Concrete VDAFs implement `shard`, `verify_init`, `verifier_shares_to_message`,
    `verify_next`, `agg_init`, `agg_update`, `merge`, `unshard`, `is_valid` and the
    message encodings, with the draft's names and signatures.

    `PROFILE` is the wire version the class speaks (`vdaf.profiles`); draft-20 (VDAF_18)
    unless a subclass says otherwise."""

    PROFILE: ClassVar[VdafProfile] = VDAF_18
    ID: ClassVar[int]
    SHARES: int
    ROUNDS: int
    NONCE_SIZE: int
    RAND_SIZE: int
    VERIFY_KEY_SIZE: int

    @property
    def VERSION(self) -> int:  # noqa: N802 (the draft's name)
        return self.PROFILE.version

    def domain_separation_tag(self, usage: int, ctx: bytes) -> bytes:
        """`format_dst(0, ID, usage) || ctx` (Section 5); VDAF-08 has no ctx."""
        return format_dst(0, self.ID, usage, self.PROFILE.version) + self.check_ctx(ctx)

    def check_ctx(self, ctx: bytes) -> bytes:
        """The context string as bound into DSTs. A profile without a context (VDAF-08)
        accepts only the empty one (see `vdaf.profiles`)."""
        if ctx and not self.PROFILE.binds_ctx:
            raise VdafError(f"{self.PROFILE.draft} has no application context: ctx must be "
                            f"empty, got {len(ctx)} bytes")
        return ctx

    # Declared for type checkers; defined by each VDAF.
    def shard(self, ctx: bytes, measurement: Any, nonce: bytes,
              rand: bytes) -> tuple[Any, list[Any]]:
        raise NotImplementedError

    def verify_init(self, verify_key: bytes, ctx: bytes, agg_id: int, agg_param: Any,
                    nonce: bytes, public_share: Any, input_share: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    def verifier_shares_to_message(self, ctx: bytes, agg_param: Any,
                                   verifier_shares: list[Any]) -> Any:
        raise NotImplementedError

    def verify_next(self, ctx: bytes, verify_state: Any, verifier_message: Any) -> Any:
        raise NotImplementedError

    def agg_init(self, agg_param: Any) -> Any:
        raise NotImplementedError

    def agg_update(self, agg_param: Any, agg_share: Any, out_share: Any) -> Any:
        raise NotImplementedError

    def merge(self, agg_param: Any, agg_shares: list[Any]) -> Any:
        raise NotImplementedError

    def unshard(self, agg_param: Any, agg_shares: list[Any], num_measurements: int) -> Any:
        raise NotImplementedError


def run_vdaf(vdaf: Vdaf, verify_key: bytes, agg_param: Any, ctx: bytes,
             measurements: list[Any]) -> Any:
    """Execute the VDAF on the measurements in one process (Section 5.6)."""
    agg_shares = [vdaf.agg_init(agg_param) for _ in range(vdaf.SHARES)]
    for measurement in measurements:
        nonce = gen_rand(vdaf.NONCE_SIZE)
        rand = gen_rand(vdaf.RAND_SIZE)
        public_share, input_shares = vdaf.shard(ctx, measurement, nonce, rand)
        states = []
        outbound = []
        for j in range(vdaf.SHARES):
            state, share = vdaf.verify_init(verify_key, ctx, j, agg_param, nonce,
                                            public_share, input_shares[j])
            states.append(state)
            outbound.append(share)
        for _ in range(vdaf.ROUNDS - 1):
            message = vdaf.verifier_shares_to_message(ctx, agg_param, outbound)
            outbound = []
            for j in range(vdaf.SHARES):
                out = vdaf.verify_next(ctx, states[j], message)
                states[j], share = out
                outbound.append(share)
        message = vdaf.verifier_shares_to_message(ctx, agg_param, outbound)
        for j in range(vdaf.SHARES):
            out_share = vdaf.verify_next(ctx, states[j], message)
            agg_shares[j] = vdaf.agg_update(agg_param, agg_shares[j], out_share)
    return vdaf.unshard(agg_param, agg_shares, len(measurements))
