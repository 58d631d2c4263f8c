"""The VDAF registry: the one place that builds a VDAF from (name, parameters, version).

Names are the "Scheme" column of the VDAF Identifiers registry (draft-irtf-cfrg-vdaf-20
Section 10; draft-irtf-cfrg-vdaf-08 Section 10): `Prio3Histogram`, not the class name.
A version is a VDAF wire version as `vdaf.profiles` defines it:

    "18"  draft-irtf-cfrg-vdaf-18..20 (VDAF-18): Prio3Count, Prio3Sum, Prio3SumVec,
          Prio3Histogram, Prio3MultihotCountVec (Section 7.4), Poplar1 (Section 8); the
          classes `Prio3Count`, ...; and Prio3L1BoundSum (draft-ietf-ppm-l1-bound-sum-02,
          codepoint 0x00000007), a Prio3 variant on the VDAF-18 wire
    "08"  draft-irtf-cfrg-vdaf-08 (VDAF-08): Prio3Count, Prio3Sum, Prio3SumVec,
          Prio3Histogram (draft-08 Section 7.4), Poplar1 (Section 8), and the test-only
          Prio3MultiHotHistogram of the published VDAF-08 vectors; the classes
          `Prio3CountV08`, ...

`Poplar1` (Section 8) is registered in both versions (`vdaf.poplar1`: `Poplar1`, and
`Poplar1V08` for VDAF-08), with the parameter `bits`; it always has two shares. The
test-only variants of the draft's vectors (Prio3SumVecWithMultiproof,
Prio3HigherDegree) take a field class and are built by `vdaf.vectors` directly; they are
not registry VDAFs.

Parameters are the constructor arguments after `shares`, by name (`parameters_of` gives
them back, so `build(name_of(v), parameters_of(v), version_of(v))` rebuilds `v`):

    length            SumVec, Histogram, MultihotCountVec, MultiHotHistogram, L1BoundSum
    max_measurement   Sum, SumVec (VDAF-18)
    bits              Sum, SumVec (VDAF-08; a max_measurement of 2^b - 1 is accepted too)
    max_weight        MultihotCountVec
    max_value         L1BoundSum (the L1 bound, and so each component's bound)
    max_count         MultiHotHistogram (VDAF-08, test-only)
    bits              Poplar1 (VDAF-18): the length of each measurement in bits
    chunk_length      SumVec, Histogram, MultihotCountVec, MultiHotHistogram, L1BoundSum;
                      when absent,
                      `default_chunk_length`

Values are ints or decimal strings, each at least 1; a `None` value counts as absent.
Every failure is a `RegistryError` (a ValueError) with a one-line message that names the
VDAF and the parameter, in the parameter names above (a command line maps them to its
option names).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ppm_reference.vdaf import poplar1, prio3
from ppm_reference.vdaf.profiles import VDAF_08, VDAF_18, VdafProfile

DEFAULT_VERSION = "18"

#: VDAF IDs 0xFFFF0000 to 0xFFFFFFFF are for private use in both drafts (Section 10).
PRIVATE_USE = range(0xFFFF0000, 0x1_0000_0000)



class RegistryError(ValueError):
    """A VDAF the registry cannot build or name: unknown name, a name the version does
    not have, or a missing or invalid parameter."""


@dataclass(frozen=True)
class _Version:
    key: str
    profile: VdafProfile
    short: str            # "VDAF-18"
    drafts: range         # the drafts with this wire
    classes: tuple[type[Any], ...]

    @property
    def draft_names(self) -> str:
        first, last = self.drafts[0], self.drafts[-1]
        return f"draft-irtf-cfrg-vdaf-{first:02d}" + (f"..{last:02d}" if last != first else "")

    @property
    def label(self) -> str:
        return f"{self.draft_names} ({self.short})"


_VERSIONS: dict[str, _Version] = {
    "18": _Version(
        key="18", profile=VDAF_18, short="VDAF-18",
        drafts=range(18, 21),
        classes=(prio3.Prio3Count, prio3.Prio3Sum, prio3.Prio3SumVec, prio3.Prio3Histogram,
                 prio3.Prio3MultihotCountVec, prio3.Prio3L1BoundSum, poplar1.Poplar1)),
    "08": _Version(
        key="08", profile=VDAF_08, short="VDAF-08",
        drafts=range(8, 9),
        classes=(prio3.Prio3CountV08, prio3.Prio3SumV08, prio3.Prio3SumVecV08,
                 prio3.Prio3HistogramV08, poplar1.Poplar1V08,
                 prio3.Prio3MultiHotHistogramV08)),
}

#: Registered in the drafts' Section 10 but not implemented by this project.
_NOT_IMPLEMENTED = ("Poplar1",)

# Why a name is missing from a version, for the refusal message.
_ABSENT_BECAUSE = {
    # draft-irtf-cfrg-vdaf-20, Change Log, "10": "Define Prio3MultihotCountVec".
    ("08", "Prio3MultihotCountVec"): "it first appears in VDAF-10",
    ("08", "Prio3L1BoundSum"): (
        "draft-ietf-ppm-l1-bound-sum-02 defines it on the VDAF-18 wire"),
    ("18", "Prio3MultiHotHistogram"): (
        "it is a test-only VDAF of the published VDAF-08 test vectors; VDAF-18 has "
        "Prio3MultihotCountVec"),
}

_CLASS_INDEX: dict[type[Any], tuple[str, str]] = {
    cls: (cls.NAME, v.key) for v in _VERSIONS.values() for cls in v.classes}

_DECIMAL = re.compile(r"\s*-?[0-9]+\s*")


# ---------------------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------------------


def versions() -> tuple[str, ...]:
    """The VDAF versions the registry knows: `("18", "08")`."""
    return tuple(_VERSIONS)


def _version(version: str | int | VdafProfile) -> _Version:
    """A version given as "18"/"08", as a profile name ("vdaf-18"), as the profile's
    VERSION byte (18, 8) or as the `VdafProfile` itself."""
    for v in _VERSIONS.values():
        if version is v.profile or (isinstance(version, int) and not isinstance(version, bool)
                                    and version == v.profile.version):
            return v
        if isinstance(version, str) and version in (v.key, v.profile.name):
            return v
    known = ", ".join(f"{v.key} ({v.draft_names})" for v in _VERSIONS.values())
    raise RegistryError(f"unknown VDAF version {version!r}; known: {known}")


def profile(version: str | int | VdafProfile = DEFAULT_VERSION) -> VdafProfile:
    """The `vdaf.profiles` object of a version."""
    return _version(version).profile


def version_for_draft(draft: str) -> str:
    """The version of a draft name: `draft-irtf-cfrg-vdaf-20` -> "18" (drafts 18 to 20
    share the wire), `draft-irtf-cfrg-vdaf-08` -> "08"."""
    match = re.fullmatch(r"draft-irtf-cfrg-vdaf-([0-9]{2})", draft)
    if match is not None:
        number = int(match.group(1))
        for v in _VERSIONS.values():
            if number in v.drafts:
                return v.key
    raise RegistryError(f"{draft!r} is not a VDAF draft this project speaks; known: "
                        + ", ".join(v.label for v in _VERSIONS.values()))


# ---------------------------------------------------------------------------------------
# Names and parameters
# ---------------------------------------------------------------------------------------


def names(version: str | int | VdafProfile = DEFAULT_VERSION, *,
          test_only: bool = True, agg_param: bool = True) -> tuple[str, ...]:
    """The names `build` accepts in a version, in codepoint order. `test_only=False`
    leaves out the test-only ones (private-use codepoints), `agg_param=False` the ones
    with a non-empty aggregation parameter (Poplar1)."""
    v = _version(version)
    return tuple(cls.NAME for cls in v.classes
                 if (test_only or v.profile.codepoint(cls.NAME) not in PRIVATE_USE)
                 and (agg_param or not takes_agg_param(cls.NAME)))


#: VDAFs whose aggregation parameter is chosen by the Collector (Prio3's is empty).
_WITH_AGG_PARAM = ("Poplar1",)


def takes_agg_param(name: str) -> bool:
    """Whether VDAF `name` has a non-empty aggregation parameter: its reports cannot be
    aggregated before the Collector names one (DAP-18 Section 4.5.1 "Eager
    Aggregation")."""
    return name in _WITH_AGG_PARAM


def _class(name: str, v: _Version) -> type[Any]:
    for cls in v.classes:
        if cls.NAME == name:
            return cls
    if name in _NOT_IMPLEMENTED:
        raise RegistryError(f"{name} is a VDAF of {v.label} but this project does not "
                            "implement it")
    if any(cls.NAME == name for other in _VERSIONS.values() for cls in other.classes):
        reason = _ABSENT_BECAUSE.get((v.key, name))
        raise RegistryError(f"{name} is not a VDAF of {v.label}"
                            + (f"; {reason}" if reason else ""))
    raise RegistryError(f"unknown VDAF {name!r}; choose from {', '.join(names(v.key))}")


# By class: `inspect.signature` is slow (it was a third of a task's load), and these are
# asked each time a task is loaded.
_TAKES_SHARES: dict[type[Any], bool] = {}
_PARAMETER_NAMES: dict[type[Any], tuple[str, ...]] = {}


def takes_shares(cls: type[Any]) -> bool:
    """Whether the VDAF class's constructor takes the number of shares (Poplar1's does
    not: it always has two)."""
    known = _TAKES_SHARES.get(cls)
    if known is None:
        known = _TAKES_SHARES[cls] = "shares" in inspect.signature(cls.__init__).parameters
    return known


def constructor_parameters(cls: type[Any]) -> tuple[str, ...]:
    """A VDAF class's constructor parameters after self and (when it takes one)
    shares, in order."""
    known = _PARAMETER_NAMES.get(cls)
    if known is None:
        names = tuple(inspect.signature(cls.__init__).parameters)[1:]
        known = _PARAMETER_NAMES[cls] = tuple(n for n in names if n != "shares")
    return known


def parameter_names(name: str, version: str | int | VdafProfile = DEFAULT_VERSION
                    ) -> tuple[str, ...]:
    """The parameters of VDAF `name` in constructor order (`("length", "chunk_length")`)."""
    return constructor_parameters(_class(name, _version(version)))


def _entry(vdaf: Any) -> tuple[str, str]:
    try:
        return _CLASS_INDEX[type(vdaf)]
    except KeyError:
        raise RegistryError(f"{type(vdaf).__name__} is not a VDAF of the registry") from None


def name_of(vdaf: Any) -> str:
    """The registry name of a VDAF object: `Prio3Histogram` for both `Prio3Histogram` and
    `Prio3HistogramV08`."""
    return _entry(vdaf)[0]


def version_of(vdaf: Any) -> str:
    """The version of a VDAF object: "18" or "08"."""
    return _entry(vdaf)[1]


def parameters_of(vdaf: Any) -> dict[str, int]:
    """The parameters of a VDAF object (`{"length": 10, "chunk_length": 3}`), in
    constructor order."""
    _entry(vdaf)
    return {p: int(getattr(vdaf, p)) for p in constructor_parameters(type(vdaf))}


def describe(vdaf: Any) -> str:
    """`Prio3Histogram(length=10, chunk_length=3)`, with ` [vdaf-08]` after a VDAF-08
    one."""
    name, key = _entry(vdaf)
    params = ", ".join(f"{k}={v}" for k, v in parameters_of(vdaf).items())
    suffix = "" if key == DEFAULT_VERSION else f" [{_VERSIONS[key].profile.name}]"
    return f"{name}({params}){suffix}"


# ---------------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------------


def _integer(name: str, key: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        out = value
    elif isinstance(value, str) and _DECIMAL.fullmatch(value):
        out = int(value)
    else:
        raise RegistryError(f"{name} needs an integer {key}, got {value!r}")
    if out < 1:
        raise RegistryError(f"{name} needs {key} >= 1, got {out}")
    return out


def _bits08(name: str, values: dict[str, int]) -> None:
    """VDAF-08 Sum and SumVec take a bit width; a max_measurement of 2^b - 1 says the same
    (draft-08 Sections 7.4.2 and 7.4.3). Replaces max_measurement by bits in `values`."""
    top = values.pop("max_measurement", None)
    if top is None:
        if "bits" not in values:
            raise RegistryError(f"{name} of VDAF-08 needs bits (or a max_measurement of "
                                "2^b - 1)")
        return
    if top & (top + 1):
        raise RegistryError(f"{name} of VDAF-08 takes bits b, or a max_measurement of "
                            f"2^b - 1; {top} is not")
    bits = values.setdefault("bits", top.bit_length())
    if bits != top.bit_length():
        raise RegistryError(f"{name} of VDAF-08: bits {bits} and max_measurement {top} "
                            f"disagree (2^{bits} - 1 = {2**bits - 1})")


def optimal_chunk_length(measurement_length: int) -> int:
    """The chunk length that makes the proof shortest for an encoded measurement of
    `measurement_length` field elements, as libprio-rs computes it
    (`prio::vdaf::prio3::optimal_chunk_length`, the same in prio 0.16 and 0.18), so that a
    task made with our defaults matches one made by Divvi Up or Firefox.

    The drafts only say that about the square root of the measurement length is a good
    choice (draft-20 Section 7.4.3); libprio-rs minimises what the ParallelSum gadget
    costs in the proof instead. For each number of gadget calls `2^k - 1`, k = 1 ..
    floor(log2(n + 1)), the chunk length is `ceil(n / calls)` and the cost
    `2 * chunk + 2 * (next_power_of_two(calls + 1) - 1)` (the gadget's arity and the
    degree of its wire polynomials); the cheapest wins, and of equally cheap ones the one
    with more calls (the crate scans k downward and keeps the first minimum). For
    example 160 (SumVec with 8 bits and length 20) gives 11, where isqrt gives 12.
    A length of at most 1 gives 1."""
    n = measurement_length
    if n <= 1:
        return 1
    best_cost, best_chunk = None, 1
    for log2 in range((n + 1).bit_length() - 1, 0, -1):
        calls = (1 << log2) - 1
        chunk = -(-n // calls)
        # The crate's 2 * (next_power_of_two(calls + 1) - 1) is 2 * calls: calls + 1 is
        # already a power of two.
        cost = 2 * chunk + 2 * calls
        if best_cost is None or cost < best_cost:
            best_cost, best_chunk = cost, chunk
    return best_chunk


def encoded_measurement_length(name: str, params: Mapping[str, int]) -> int:
    """The length, in field elements, of the encoded measurement of a VDAF with a
    chunk_length (draft-20 Sections 7.4.3 to 7.4.5; draft-08 Section 7.4):

        SumVec             length * bits, bits = bit length of max_measurement
                           (VDAF-08: `bits`), at least 1
        MultihotCountVec   length + bits of max_weight, at least 1 bit
        MultiHotHistogram  length + bits of max_count (VDAF-08 test-only)
        Histogram          length
        L1BoundSum         (length + 1) * bits of max_value
                           (draft-ietf-ppm-l1-bound-sum-02 Section 3.1)

    `params` are valid integer parameters (without chunk_length)."""
    if name == "Prio3SumVec":
        bits = params.get("bits") or max(1, params["max_measurement"].bit_length())
        return params["length"] * bits
    if name == "Prio3MultihotCountVec":
        return params["length"] + max(1, params["max_weight"].bit_length())
    if name == "Prio3MultiHotHistogram":
        return params["length"] + max(1, params["max_count"].bit_length())
    if name == "Prio3Histogram":
        return params["length"]
    if name == "Prio3L1BoundSum":
        return (params["length"] + 1) * max(1, params["max_value"].bit_length())
    raise RegistryError(f"{name} has no chunk_length")


def default_chunk_length(name: str, params: Mapping[str, int]) -> int:
    """The `chunk_length` a VDAF gets when none is given: libprio-rs's
    `optimal_chunk_length` of its encoded measurement length
    (`encoded_measurement_length`), which Divvi Up and Firefox use, so that tasks made
    with our defaults are the same VDAF as theirs (issue 13; until then it was
    isqrt of that length, which the drafts suggest: draft-20 Section 7.4.3).
    `params` are valid integer parameters (without chunk_length)."""
    return optimal_chunk_length(encoded_measurement_length(name, params))


def build(name: str, params: Mapping[str, Any] | None = None,
          version: str | int | VdafProfile = DEFAULT_VERSION, shares: int = 2) -> Any:
    """The VDAF `name` of `version` with these parameters and `shares` Aggregators
    (see the module docstring). Raises RegistryError."""
    v = _version(version)
    cls = _class(name, v)
    takes = constructor_parameters(cls)
    given = {k: value for k, value in (params or {}).items() if value is not None}
    # VDAF-08's Sum and SumVec take a bit width, also spelled as max_measurement 2^b - 1.
    width08 = "bits" in takes and name in ("Prio3Sum", "Prio3SumVec")
    accepted = set(takes) | ({"max_measurement"} if width08 else set())
    for key in given:
        if key in accepted:
            continue
        if key == "bits" and "max_measurement" in takes:
            raise RegistryError(f"{name} of {v.short} takes max_measurement, not bits "
                                "(bits b is max_measurement 2^b - 1)")
        which = f"its parameters are {', '.join(takes)}" if takes else "it has none"
        raise RegistryError(f"{name} takes no parameter {key!r} ({which})")
    values = {k: _integer(name, k, value) for k, value in given.items()}
    if width08:
        _bits08(name, values)
    for key in takes:
        if key not in values and key != "chunk_length":
            raise RegistryError(f"{name} needs {key}")
    if "chunk_length" in takes and "chunk_length" not in values:
        values["chunk_length"] = default_chunk_length(name, values)
    count = _integer(name, "shares", shares)
    make: Callable[..., Any] = cls  # the variant's own signature, not Prio3's
    if not takes_shares(cls):
        if count != cls.SHARES:
            raise RegistryError(f"{name} has exactly {cls.SHARES} shares, not {count}")
        make = lambda _shares, **kw: cls(**kw)  # noqa: E731
    try:
        return make(count, **values)
    except (ValueError, TypeError) as exc:
        args = ", ".join(f"{k} {values[k]}" for k in takes)
        what = f"{name} parameters ({args})" if takes else name
        raise RegistryError(f"invalid {what}: {exc}") from None


# ---------------------------------------------------------------------------------------
# Codepoints (Section 10)
# ---------------------------------------------------------------------------------------


_CODEPOINTS: dict[str, Mapping[str, int]] = {}


def _codepoints(v: _Version) -> Mapping[str, int]:
    """The version's registry: its VDAFs, Poplar1, and its test-only VDAFs (private use).
    Memoised, read-only (a DAP task's load asks it three times)."""
    known = _CODEPOINTS.get(v.key)
    if known is None:
        ours = set(names(v.key)) | set(_NOT_IMPLEMENTED)
        known = _CODEPOINTS[v.key] = MappingProxyType(
            {n: cp for n, cp in v.profile.codepoints.items() if n in ours})
    return known


def codepoint(name: str, version: str | int | VdafProfile = DEFAULT_VERSION) -> int:
    """The VDAF ID of `name` in `version` (the class attribute `ID` of its VDAFs): VDAF-18
    Prio3Count 1 ... Prio3MultihotCountVec 5, Poplar1 6, Prio3L1BoundSum 7; VDAF-08
    Prio3Count 0 ... Prio3Histogram 3, Poplar1 0x1000; a test-only VDAF has 0xFFFFFFFF."""
    v = _version(version)
    if name not in _NOT_IMPLEMENTED:
        _class(name, v)  # refuses names the version does not have
    return v.profile.codepoint(name)


def from_codepoint(value: int, version: str | int | VdafProfile = DEFAULT_VERSION) -> str:
    """The name of the VDAF with this ID in `version`. A private-use ID names no VDAF."""
    v = _version(version)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
        raise RegistryError(f"a VDAF ID is a 32-bit unsigned integer, got {value!r}")
    if value in PRIVATE_USE:
        raise RegistryError(f"VDAF ID 0x{value:08x} is reserved for private use in "
                            f"{v.label}; it names no VDAF")
    for name, cp in _codepoints(v).items():
        if cp == value:
            return name
    raise RegistryError(f"no VDAF has ID 0x{value:08x} in {v.label}")


__all__ = [
    "DEFAULT_VERSION",
    "PRIVATE_USE",
    "RegistryError",
    "build",
    "codepoint",
    "constructor_parameters",
    "default_chunk_length",
    "describe",
    "encoded_measurement_length",
    "from_codepoint",
    "name_of",
    "names",
    "optimal_chunk_length",
    "parameter_names",
    "parameters_of",
    "profile",
    "takes_agg_param",
    "takes_shares",
    "version_for_draft",
    "version_of",
    "versions",
]


def vdaf_class(name: str, version: str | int | VdafProfile = DEFAULT_VERSION) -> type[Any]:
    """The class implementing VDAF `name` in `version` (raises `RegistryError`)."""
    return _class(name, _version(version))


def codepoints(version: str | int | VdafProfile = DEFAULT_VERSION) -> dict[str, int]:
    """The version's VDAF IDs by name (with Poplar1 and the test-only VDAFs)."""
    return dict(_codepoints(_version(version)))
