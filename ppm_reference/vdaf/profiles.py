"""VDAF versions as data: one small profile object per wire version.

The project speaks two VDAF versions (DESIGN.md, "Versions are data"):

    VDAF_18  draft-irtf-cfrg-vdaf-18..20, VERSION byte 18 (the default; DAP-18)
    VDAF_08  draft-irtf-cfrg-vdaf-08,     VERSION byte 8  (DAP-09 interop)

A profile holds every difference that is a constant, and names the one that is an
algorithm. The code asks the profile; it does not test version numbers:

    version         `format_dst`'s VERSION byte (vdaf.Vdaf.domain_separation_tag)
    seed_size       Xof.SEED_SIZE, hence VERIFY_KEY_SIZE, blinds, joint randomness parts
    xof_framing     how the XOFs frame dst and seed (vdaf.xof.XofFraming)
    binds_ctx       whether the application context `ctx` is appended to every DST
    sharding        Prio3's layout of `rand` and of the Helpers' input shares
    flp             the FLP class: FlpBBCGGI19 (gadget polynomial values, draft-20) or
                    FlpGeneric (coefficients, VDAF-08)
    codepoints      the VDAF IDs of the version's registry (Section 10 of its draft):
                    the Prio3 variants, Poplar1 (`vdaf.poplar1`) and the test-only
                    variants (private-use ID)

The validity circuits differ between the versions as well (VDAF-08's Sum takes `bits`,
its range checks use one joint randomness element for all chunks); those are separate
circuit classes in `vdaf.circuits`, chosen by the Prio3 variant classes of each version
in `vdaf.prio3`. What is the same in both and so not here: NONCE_SIZE 16, the usages of
Table 9 and Prio3's XOF binders (`byte(PROOFS)` in the prove, query, joint randomness and
proofs-share binders: the draft-08 text and the published VDAF-08 vectors agree).

Context string. VDAF-08 has no application context: its API has no `ctx` argument and
its DSTs are `format_dst(...)` alone. We keep the draft-20 method signatures for both
versions; a VDAF_08 instance *requires* `ctx == b""` and raises `VdafError` otherwise,
rather than silently ignoring a context the caller believes is bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ppm_reference.vdaf.flp import FlpBBCGGI19, FlpGeneric
from ppm_reference.vdaf.xof import (
    FRAMING_V08,
    FRAMING_V18,
    Xof,
    XofFixedKeyAes128,
    XofFraming,
    XofTurboShake128,
    xof_with,
)

#: The private-use codepoint of the test-only Prio3 variants (both versions).
TEST_ONLY_ID = 0xFFFFFFFF


class ShardSeeds(NamedTuple):
    """The seeds `rand` is cut into by Prio3's sharding."""

    helpers: list[tuple[bytes, ...]]   # per Helper: the seeds its input share carries
    helper_blinds: list[bytes | None]  # per Helper: its blind (None without joint rand)
    leader_blind: bytes | None
    prove: bytes


@dataclass(frozen=True)
class Prio3Sharding:
    """How Prio3 cuts `rand` into seeds and what a Helper's input share holds.

    `helper_seeds` is the number of seeds in a Helper's input share: draft-20 sends one
    (both the measurement and the proof shares are expanded from it, Section 7.2.1),
    VDAF-08 two, the measurement share's then the proofs share's (Section 7.2.1 of
    draft-08). `rand` is, in order: for each Helper its seeds and (with joint
    randomness) its blind; the Leader's blind (with joint randomness); the prover seed.
    That gives both drafts' RAND_SIZE and seed order."""

    helper_seeds: int

    def rand_size(self, seed_size: int, shares: int, joint_rand: bool) -> int:
        per_helper = self.helper_seeds + (1 if joint_rand else 0)
        return seed_size * ((shares - 1) * per_helper + (2 if joint_rand else 1))

    def split(self, seeds: list[bytes], shares: int, joint_rand: bool) -> ShardSeeds:
        """Assign the seeds `rand` is cut into (RAND_SIZE / SEED_SIZE of them)."""
        per_helper = self.helper_seeds + (1 if joint_rand else 0)
        helpers = []
        blinds: list[bytes | None] = []
        for j in range(shares - 1):
            mine = seeds[j * per_helper : (j + 1) * per_helper]
            helpers.append(tuple(mine[: self.helper_seeds]))
            blinds.append(mine[self.helper_seeds] if joint_rand else None)
        rest = seeds[(shares - 1) * per_helper :]
        leader_blind = rest.pop(0) if joint_rand else None
        return ShardSeeds(helpers, blinds, leader_blind, rest[0])


@dataclass(frozen=True)
class VdafProfile:
    """One VDAF wire version (see the module docstring)."""

    name: str
    draft: str
    version: int
    seed_size: int
    xof_framing: XofFraming
    binds_ctx: bool
    sharding: Prio3Sharding
    flp: type[FlpBBCGGI19[Any, Any]]
    codepoints: Mapping[str, int] = field(default_factory=dict)

    @property
    def xof(self) -> type[Xof]:
        """Prio3's XOF, XofTurboShake128 with this version's seed size and framing."""
        return xof_with(XofTurboShake128, self.seed_size, self.xof_framing)

    @property
    def xofs(self) -> dict[str, type[Xof]]:
        """Every XOF of this version by name (for the XOF test vectors)."""
        return {
            "XofTurboShake128": self.xof,
            "XofFixedKeyAes128": xof_with(XofFixedKeyAes128, XofFixedKeyAes128.SEED_SIZE,
                                          self.xof_framing),
        }

    def codepoint(self, name: str) -> int:
        """The VDAF ID of a Prio3 variant in this version."""
        try:
            return self.codepoints[name]
        except KeyError:
            raise KeyError(f"{name} has no codepoint in {self.name}") from None


VDAF_18 = VdafProfile(
    name="vdaf-18",
    draft="draft-irtf-cfrg-vdaf-20",
    version=18,
    seed_size=32,
    xof_framing=FRAMING_V18,
    binds_ctx=True,
    sharding=Prio3Sharding(helper_seeds=1),
    flp=FlpBBCGGI19,
    # Section 10 ("IANA Considerations") of draft-20.
    codepoints={
        "Prio3Count": 0x00000001,
        "Prio3Sum": 0x00000002,
        "Prio3SumVec": 0x00000003,
        "Prio3Histogram": 0x00000004,
        "Prio3MultihotCountVec": 0x00000005,
        "Poplar1": 0x00000006,
        # draft-ietf-ppm-l1-bound-sum-02, Section 6 (IANA Considerations).
        "Prio3L1BoundSum": 0x00000007,
        "Prio3SumVecWithMultiproof": TEST_ONLY_ID,
        "Prio3HigherDegree": TEST_ONLY_ID,
    },
)

VDAF_08 = VdafProfile(
    name="vdaf-08",
    draft="draft-irtf-cfrg-vdaf-08",
    version=8,
    seed_size=16,
    xof_framing=FRAMING_V08,
    binds_ctx=False,
    sharding=Prio3Sharding(helper_seeds=2),
    flp=FlpGeneric,
    codepoints={
        # Section 10 ("IANA Considerations") of draft-08.
        "Prio3Count": 0x00000000,
        "Prio3Sum": 0x00000001,
        "Prio3SumVec": 0x00000002,
        "Prio3Histogram": 0x00000003,
        "Poplar1": 0x00001000,
        # Test-only variants of the published VDAF-08 vectors (not in the draft text).
        "Prio3SumVecWithMultiproof": TEST_ONLY_ID,
        "Prio3MultiHotHistogram": TEST_ONLY_ID,
    },
)

PROFILES: dict[int, VdafProfile] = {p.version: p for p in (VDAF_18, VDAF_08)}
