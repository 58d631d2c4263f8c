"""The VDAF registry (`vdaf.registry`): every name of every version builds, round-trips
through (name_of, parameters_of, version_of), runs, and every bad input has its message."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.vdaf import prio3, registry
from ppm_reference.vdaf.poplar1 import Poplar1, Poplar1V08
from ppm_reference.vdaf.profiles import VDAF_08, VDAF_18
from ppm_reference.vdaf.registry import RegistryError
from ppm_reference.vdaf.vdaf import gen_rand, run_vdaf

# Small valid parameters of each name, by version.
EXAMPLES: dict[str, dict[str, dict[str, Any]]] = {
    "18": {
        "Prio3Count": {},
        "Prio3Sum": {"max_measurement": 10},
        "Prio3SumVec": {"length": 3, "max_measurement": 5},
        "Prio3Histogram": {"length": 4},
        "Prio3MultihotCountVec": {"length": 4, "max_weight": 2},
        "Prio3L1BoundSum": {"length": 3, "max_value": 6},
        "Poplar1": {"bits": 8},
    },
    "08": {
        "Prio3Count": {},
        "Prio3Sum": {"bits": 4},
        "Prio3SumVec": {"length": 3, "bits": 3},
        "Prio3Histogram": {"length": 4},
        "Poplar1": {"bits": 8},
        "Prio3MultiHotHistogram": {"length": 4, "max_count": 2},
    },
}

MEASUREMENTS: dict[str, Any] = {
    "Prio3Count": 1, "Prio3Sum": 7, "Prio3SumVec": [1, 0, 5], "Prio3Histogram": 2,
    "Prio3MultihotCountVec": [True, False, True, False], "Prio3MultiHotHistogram": [1, 0, 1, 0],
    "Prio3L1BoundSum": [1, 0, 5],
    "Poplar1": [True, False, True, True, False, False, False, True],
}

CLASSES = {
    ("18", "Prio3Count"): prio3.Prio3Count,
    ("18", "Prio3Sum"): prio3.Prio3Sum,
    ("18", "Prio3SumVec"): prio3.Prio3SumVec,
    ("18", "Prio3Histogram"): prio3.Prio3Histogram,
    ("18", "Prio3MultihotCountVec"): prio3.Prio3MultihotCountVec,
    ("18", "Prio3L1BoundSum"): prio3.Prio3L1BoundSum,
    ("18", "Poplar1"): Poplar1,
    ("08", "Prio3Count"): prio3.Prio3CountV08,
    ("08", "Prio3Sum"): prio3.Prio3SumV08,
    ("08", "Prio3SumVec"): prio3.Prio3SumVecV08,
    ("08", "Prio3Histogram"): prio3.Prio3HistogramV08,
    ("08", "Poplar1"): Poplar1V08,
    ("08", "Prio3MultiHotHistogram"): prio3.Prio3MultiHotHistogramV08,
}

CASES = [(version, name) for version, table in EXAMPLES.items() for name in table]


def test_versions_and_names() -> None:
    assert registry.versions() == ("18", "08")
    assert registry.names() == registry.names("18") == tuple(EXAMPLES["18"])
    assert registry.names("08") == tuple(EXAMPLES["08"])
    assert registry.names("08", test_only=False) == ("Prio3Count", "Prio3Sum", "Prio3SumVec",
                                                     "Prio3Histogram", "Poplar1")
    assert registry.names("18", test_only=False) == registry.names("18")
    assert set(registry.names("18")) - set(registry.names("18", agg_param=False)) == \
        {"Poplar1"}
    assert registry.takes_agg_param("Poplar1") and not registry.takes_agg_param("Prio3Sum")
    # The other spellings of a version.
    for spelling in ("08", "vdaf-08", 8, VDAF_08):
        assert registry.profile(spelling) is VDAF_08
    for spelling in ("18", "vdaf-18", 18, VDAF_18):
        assert registry.profile(spelling) is VDAF_18
    assert registry.version_for_draft("draft-irtf-cfrg-vdaf-20") == "18"
    assert registry.version_for_draft("draft-irtf-cfrg-vdaf-18") == "18"
    assert registry.version_for_draft("draft-irtf-cfrg-vdaf-08") == "08"


@pytest.mark.parametrize(("version", "name"), CASES)
def test_build_round_trips_and_runs(version: str, name: str) -> None:
    vdaf = registry.build(name, EXAMPLES[version][name], version)
    assert type(vdaf) is CLASSES[version, name]
    assert registry.name_of(vdaf) == name == vdaf.NAME
    assert registry.version_of(vdaf) == version
    assert vdaf.PROFILE is registry.profile(version)
    assert vdaf.SHARES == 2
    params = registry.parameters_of(vdaf)
    assert tuple(params) == registry.parameter_names(name, version)
    again = registry.build(registry.name_of(vdaf), params, registry.version_of(vdaf))
    assert type(again) is type(vdaf) and registry.parameters_of(again) == params
    # Decimal strings are as good as ints.
    text = registry.build(name, {k: str(v) for k, v in params.items()}, version)
    assert registry.parameters_of(text) == params
    # The object works: one measurement through shard, verify, aggregate, unshard.
    if name == "Poplar1":  # the count of each 2-bit prefix
        agg_param = (1, ((False, False), (False, True), (True, False), (True, True)))
        result = run_vdaf(vdaf, gen_rand(vdaf.VERIFY_KEY_SIZE), agg_param, b"",
                          [MEASUREMENTS[name]])
        assert result == [0, 0, 1, 0]
        return
    result = run_vdaf(vdaf, gen_rand(vdaf.VERIFY_KEY_SIZE), None, b"", [MEASUREMENTS[name]])
    expected = MEASUREMENTS[name]
    if isinstance(expected, list):
        expected = [int(x) for x in expected]
    elif name in ("Prio3Histogram",):
        expected = [int(i == expected) for i in range(4)]
    assert result == expected


def test_shares() -> None:
    vdaf = registry.build("Prio3Histogram", {"length": 3}, shares=3)
    assert vdaf.SHARES == 3
    with pytest.raises(RegistryError, match=re.escape("Prio3Count needs shares >= 1, got 0")):
        registry.build("Prio3Count", {}, shares=0)
    with pytest.raises(RegistryError, match=re.escape("invalid Prio3Count: SHARES must be in")):
        registry.build("Prio3Count", {}, shares=1)


def test_describe() -> None:
    assert registry.describe(registry.build("Prio3Histogram", {"length": 10})) == \
        "Prio3Histogram(length=10, chunk_length=4)"
    assert registry.describe(registry.build("Prio3Count")) == "Prio3Count()"
    assert registry.describe(registry.build("Prio3Sum", {"max_measurement": 7}, "08")) == \
        "Prio3Sum(bits=3) [vdaf-08]"
    assert registry.describe(registry.build("Prio3MultihotCountVec",
                                            {"length": 10, "max_weight": 3})) == \
        "Prio3MultihotCountVec(length=10, max_weight=3, chunk_length=4)"


def test_optimal_chunk_length_is_libprios() -> None:
    """The values of libprio-rs's own unit test of `optimal_chunk_length` (prio 0.16 and
    0.18, `test_optimal_chunk_length`); tests/test_peer_libprio.py compares every length
    up to 12000 with the crate itself."""
    o = registry.optimal_chunk_length
    assert [o(n) for n in (0, 1, 2, 3, 18, 19, 40, 10_000, 100_000)] == \
        [1, 1, 2, 1, 6, 3, 6, 79, 393]
    # By hand: 80 elements in 7 calls of 12 cost 2 * 12 + 2 * 7 = 38, the least of
    # (2, 63) 130, (3, 31) 68, (6, 15) 42, (27, 3) 60, (80, 1) 162.
    assert o(80) == 12
    # Firefox's and Divvi Up's SumVec with 8 bits and length 20 (isqrt(160) would be 12).
    assert o(160) == 11


def test_default_chunk_length_is_libprios_optimal_chunk_length() -> None:
    def chunk(name: str, params: dict[str, int | None], version: str = "18") -> int:
        return registry.parameters_of(registry.build(name, params, version))["chunk_length"]

    o = registry.optimal_chunk_length
    # SumVec: length * bit length of max_measurement elements.
    assert chunk("Prio3SumVec", {"length": 20, "max_measurement": 255}) == o(160) == 11
    assert chunk("Prio3SumVec", {"length": 10, "max_measurement": 255}) == o(80) == 12
    assert chunk("Prio3SumVec", {"length": 1, "max_measurement": 1}) == 1
    assert chunk("Prio3SumVec", {"length": 20, "bits": 8}, "08") == 11
    assert chunk("Prio3SumVec", {"length": 20, "max_measurement": 255}, "08") == 11
    # MultihotCountVec: length + bit length of max_weight.
    assert chunk("Prio3MultihotCountVec", {"length": 20, "max_weight": 5}) == o(23) == 4
    # L1BoundSum: (length + 1) * bit length of max_value (l1-bound-sum-02 3.1).
    assert chunk("Prio3L1BoundSum", {"length": 10, "max_value": 240}) == o(88) == 13
    # Histogram: length.
    assert chunk("Prio3Histogram", {"length": 1}) == 1
    assert chunk("Prio3Histogram", {"length": 100}) == o(100) == 7
    assert chunk("Prio3Histogram", {"length": 100}, "08") == 7
    assert chunk("Prio3MultiHotHistogram", {"length": 20, "max_count": 5}, "08") == o(23)
    # A given chunk_length wins; None means absent.
    assert chunk("Prio3Histogram", {"length": 100, "chunk_length": 10}) == 10
    assert chunk("Prio3Histogram", {"length": 100, "chunk_length": None}) == 7
    with pytest.raises(RegistryError, match="Prio3Sum has no chunk_length"):
        registry.default_chunk_length("Prio3Sum", {"max_measurement": 3})


def test_codepoints() -> None:
    # draft-irtf-cfrg-vdaf-20 Section 10.
    assert {n: registry.codepoint(n, "18") for n in registry.names("18")} == {
        "Prio3Count": 1, "Prio3Sum": 2, "Prio3SumVec": 3, "Prio3Histogram": 4,
        "Prio3MultihotCountVec": 5, "Poplar1": 6, "Prio3L1BoundSum": 7}
    assert registry.codepoint("Poplar1") == 6
    # draft-irtf-cfrg-vdaf-08 Section 10; the test-only variant has the private-use ID.
    assert {n: registry.codepoint(n, "08") for n in registry.names("08")} == {
        "Prio3Count": 0, "Prio3Sum": 1, "Prio3SumVec": 2, "Prio3Histogram": 3,
        "Poplar1": 0x1000, "Prio3MultiHotHistogram": 0xFFFFFFFF}
    assert registry.codepoint("Poplar1", "08") == 0x1000
    for version, name in CASES:
        vdaf = registry.build(name, EXAMPLES[version][name], version)
        assert vdaf.ID == registry.codepoint(name, version)
        if registry.codepoint(name, version) not in registry.PRIVATE_USE:
            assert registry.from_codepoint(vdaf.ID, version) == name
    assert registry.from_codepoint(6) == "Poplar1"
    assert registry.from_codepoint(0x1000, "08") == "Poplar1"
    assert registry.from_codepoint(0, "08") == "Prio3Count"


@pytest.mark.parametrize(("call", "message"), [
    (lambda: registry.codepoint("Prio3MultihotCountVec", "08"),
     "Prio3MultihotCountVec is not a VDAF of draft-irtf-cfrg-vdaf-08 (VDAF-08); it first "
     "appears in VDAF-10"),
    (lambda: registry.codepoint("Prio3Bogus"), "unknown VDAF 'Prio3Bogus'"),
    (lambda: registry.from_codepoint(0xFFFFFFFF, "08"),
     "VDAF ID 0xffffffff is reserved for private use in draft-irtf-cfrg-vdaf-08 (VDAF-08); "
     "it names no VDAF"),
    (lambda: registry.from_codepoint(0xFFFF0000), "reserved for private use"),
    (lambda: registry.from_codepoint(8),
     "no VDAF has ID 0x00000008 in draft-irtf-cfrg-vdaf-18..20 (VDAF-18)"),
    (lambda: registry.from_codepoint(7, "08"),
     "no VDAF has ID 0x00000007 in draft-irtf-cfrg-vdaf-08 (VDAF-08)"),
    (lambda: registry.from_codepoint(5, "08"), "no VDAF has ID 0x00000005 in "
     "draft-irtf-cfrg-vdaf-08 (VDAF-08)"),
    (lambda: registry.from_codepoint(2**32), "a VDAF ID is a 32-bit unsigned integer"),
    (lambda: registry.from_codepoint(-1), "a VDAF ID is a 32-bit unsigned integer"),
    (lambda: registry.from_codepoint(True), "a VDAF ID is a 32-bit unsigned integer"),
    (lambda: registry.names("19"),
     "unknown VDAF version '19'; known: 18 (draft-irtf-cfrg-vdaf-18..20), 08 "
     "(draft-irtf-cfrg-vdaf-08)"),
    (lambda: registry.names(True), "unknown VDAF version True"),
    (lambda: registry.version_for_draft("draft-irtf-cfrg-vdaf-13"),
     "'draft-irtf-cfrg-vdaf-13' is not a VDAF draft this project speaks"),
    (lambda: registry.name_of(object()), "object is not a VDAF of the registry"),
    (lambda: registry.parameters_of(prio3.Prio3HigherDegree(2)),
     "Prio3HigherDegree is not a VDAF of the registry"),
    (lambda: registry.describe(None), "NoneType is not a VDAF of the registry"),
    (lambda: registry.parameter_names("Prio3Nope"), "unknown VDAF 'Prio3Nope'"),
])
def test_lookup_errors(call: Any, message: str) -> None:
    with pytest.raises(RegistryError, match=re.escape(message)):
        call()


@pytest.mark.parametrize(("name", "params", "version", "message"), [
    # Names.
    ("Prio3Bogus", {}, "18", "unknown VDAF 'Prio3Bogus'; choose from Prio3Count, Prio3Sum, "
     "Prio3SumVec, Prio3Histogram, Prio3MultihotCountVec, Prio3L1BoundSum, Poplar1"),
    ("prio3count", {}, "18", "unknown VDAF 'prio3count'"),
    ("Prio3MultihotCountVec", {"length": 4, "max_weight": 2}, "08",
     "Prio3MultihotCountVec is not a VDAF of draft-irtf-cfrg-vdaf-08 (VDAF-08); it first "
     "appears in VDAF-10"),
    ("Prio3MultiHotHistogram", {"length": 4, "max_count": 2}, "18",
     "Prio3MultiHotHistogram is not a VDAF of draft-irtf-cfrg-vdaf-18..20 (VDAF-18); it is "
     "a test-only VDAF of the published VDAF-08 test vectors"),
    ("Poplar1", {}, "18", "Poplar1 needs bits"),
    ("Poplar1", {}, "08", "Poplar1 needs bits"),
    ("Prio3SumVecWithMultiproof", {}, "18", "unknown VDAF 'Prio3SumVecWithMultiproof'"),
    ("Prio3Count", {}, "20", "unknown VDAF version '20'"),
    # Missing parameters.
    ("Prio3Sum", {}, "18", "Prio3Sum needs max_measurement"),
    ("Prio3SumVec", {"max_measurement": 3}, "18", "Prio3SumVec needs length"),
    ("Prio3SumVec", {"length": 3}, "18", "Prio3SumVec needs max_measurement"),
    ("Prio3SumVec", {"length": None, "max_measurement": 3}, "18", "Prio3SumVec needs length"),
    ("Prio3Histogram", {}, "18", "Prio3Histogram needs length"),
    ("Prio3Histogram", {}, "08", "Prio3Histogram needs length"),
    ("Prio3MultihotCountVec", {"length": 3}, "18", "Prio3MultihotCountVec needs max_weight"),
    ("Prio3MultiHotHistogram", {"length": 3}, "08", "Prio3MultiHotHistogram needs max_count"),
    ("Prio3Sum", {}, "08",
     "Prio3Sum of VDAF-08 needs bits (or a max_measurement of 2^b - 1)"),
    ("Prio3SumVec", {"length": 3}, "08",
     "Prio3SumVec of VDAF-08 needs bits (or a max_measurement of 2^b - 1)"),
    ("Prio3SumVec", {"bits": 3}, "08", "Prio3SumVec needs length"),
    # Bad values.
    ("Prio3Histogram", {"length": 0}, "18", "Prio3Histogram needs length >= 1, got 0"),
    ("Prio3Histogram", {"length": "-3"}, "18", "Prio3Histogram needs length >= 1, got -3"),
    ("Prio3Histogram", {"length": 4, "chunk_length": 0}, "18",
     "Prio3Histogram needs chunk_length >= 1, got 0"),
    ("Prio3Histogram", {"length": "four"}, "18",
     "Prio3Histogram needs an integer length, got 'four'"),
    ("Prio3Histogram", {"length": "1_000"}, "18",
     "Prio3Histogram needs an integer length, got '1_000'"),
    ("Prio3Histogram", {"length": 4.0}, "18", "Prio3Histogram needs an integer length, got 4.0"),
    ("Prio3Histogram", {"length": True}, "18",
     "Prio3Histogram needs an integer length, got True"),
    ("Prio3Sum", {"max_measurement": 0}, "18", "Prio3Sum needs max_measurement >= 1, got 0"),
    ("Prio3Sum", {"max_measurement": 2**64}, "18",
     "invalid Prio3Sum parameters (max_measurement 18446744073709551616): "
     "max_measurement must be in"),
    ("Prio3MultihotCountVec", {"length": 2, "max_weight": 3}, "18",
     "invalid Prio3MultihotCountVec parameters (length 2, max_weight 3, chunk_length 2): "
     "need length > 0, "
     "0 < max_weight <= length"),
    ("Prio3MultiHotHistogram", {"length": 2, "max_count": 3}, "08",
     "invalid Prio3MultiHotHistogram parameters (length 2, max_count 3, chunk_length 2): "
     "need length > 0"),
    ("Prio3Sum", {"bits": 0}, "08", "Prio3Sum needs bits >= 1, got 0"),
    ("Prio3Sum", {"bits": 128}, "08",
     "invalid Prio3Sum parameters (bits 128): bits must be in [1, 127]"),
    # VDAF-08 bit widths.
    ("Prio3Sum", {"max_measurement": 10}, "08",
     "Prio3Sum of VDAF-08 takes bits b, or a max_measurement of 2^b - 1; 10 is not"),
    ("Prio3SumVec", {"length": 2, "max_measurement": "8"}, "08",
     "Prio3SumVec of VDAF-08 takes bits b, or a max_measurement of 2^b - 1; 8 is not"),
    ("Prio3Sum", {"bits": 3, "max_measurement": 15}, "08",
     "Prio3Sum of VDAF-08: bits 3 and max_measurement 15 disagree (2^3 - 1 = 7)"),
    ("Prio3Sum", {"bits": 3}, "18",
     "Prio3Sum of VDAF-18 takes max_measurement, not bits (bits b is max_measurement "
     "2^b - 1)"),
    ("Prio3SumVec", {"length": 2, "max_measurement": 3, "bits": 2}, "18",
     "Prio3SumVec of VDAF-18 takes max_measurement, not bits"),
    # Parameters the VDAF does not take.
    ("Prio3Count", {"length": 3}, "18", "Prio3Count takes no parameter 'length' (it has none)"),
    ("Prio3Histogram", {"length": 3, "max_weight": 2}, "18",
     "Prio3Histogram takes no parameter 'max_weight' (its parameters are length, "
     "chunk_length)"),
    ("Prio3MultiHotHistogram", {"length": 4, "max_weight": 2}, "08",
     "Prio3MultiHotHistogram takes no parameter 'max_weight' (its parameters are length, "
     "max_count, chunk_length)"),
    ("Prio3Histogram", {"length": 3, "shares": 3}, "18",
     "Prio3Histogram takes no parameter 'shares'"),
])
def test_build_errors(name: str, params: dict[str, Any], version: str, message: str) -> None:
    with pytest.raises(RegistryError, match=re.escape(message)) as info:
        registry.build(name, params, version)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)


def test_poplar1_has_two_shares_and_bits_below_2_16() -> None:
    with pytest.raises(RegistryError, match="Poplar1 has exactly 2 shares, not 3"):
        registry.build("Poplar1", {"bits": 8}, shares=3)
    with pytest.raises(RegistryError, match="invalid Poplar1 parameters"):
        registry.build("Poplar1", {"bits": 2**16})


def test_none_values_are_absent() -> None:
    vdaf = registry.build("Prio3Count", {"length": None, "max_measurement": None,
                                         "bits": None, "chunk_length": None})
    assert registry.parameters_of(vdaf) == {}
    vdaf = registry.build("Prio3Sum", {"bits": None, "max_measurement": 7}, "08")
    assert registry.parameters_of(vdaf) == {"bits": 3}
    vdaf = registry.build("Prio3Sum", {"bits": 3, "max_measurement": 7}, "08")
    assert registry.parameters_of(vdaf) == {"bits": 3}


# -- properties over (small) parameter ranges -----------------------------------------------

small = st.integers(min_value=1, max_value=40)
chunk = st.none() | st.integers(min_value=1, max_value=12)


@st.composite
def params18(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(registry.names("18")))
    length = draw(small)
    table: dict[str, dict[str, Any]] = {
        "Prio3Count": {},
        "Prio3Sum": {"max_measurement": draw(st.integers(1, 2**63))},
        "Prio3SumVec": {"length": length, "max_measurement": draw(st.integers(1, 2**20)),
                        "chunk_length": draw(chunk)},
        "Prio3Histogram": {"length": length, "chunk_length": draw(chunk)},
        "Prio3MultihotCountVec": {"length": length,
                                  "max_weight": draw(st.integers(1, length)),
                                  "chunk_length": draw(chunk)},
        "Prio3L1BoundSum": {"length": length, "max_value": draw(st.integers(1, 2**20)),
                            "chunk_length": draw(chunk)},
        "Poplar1": {"bits": draw(st.integers(1, 2**16 - 1))},
    }
    return name, table[name]


@st.composite
def params08(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(registry.names("08")))
    length = draw(small)
    bits = draw(st.integers(1, 20))
    width: dict[str, Any] = draw(st.sampled_from(
        [{"bits": bits}, {"max_measurement": 2**bits - 1},
         {"bits": bits, "max_measurement": str(2**bits - 1)}]))
    table: dict[str, dict[str, Any]] = {
        "Prio3Count": {},
        "Prio3Sum": width,
        "Prio3SumVec": {"length": length, "chunk_length": draw(chunk), **width},
        "Prio3Histogram": {"length": length, "chunk_length": draw(chunk)},
        "Prio3MultiHotHistogram": {"length": length, "max_count": draw(st.integers(1, length)),
                                   "chunk_length": draw(chunk)},
        "Poplar1": {"bits": bits},
    }
    return name, table[name]


def _check_round_trip(name: str, params: dict[str, Any], version: str) -> None:
    vdaf = registry.build(name, params, version)
    got = registry.parameters_of(vdaf)
    for key, value in params.items():
        if value is not None and key in got:
            assert got[key] == int(value)
    if params.get("chunk_length") is None and "chunk_length" in got:
        without = {k: v for k, v in got.items() if k != "chunk_length"}
        assert got["chunk_length"] == registry.default_chunk_length(name, without)
    again = registry.build(registry.name_of(vdaf), got, registry.version_of(vdaf))
    assert type(again) is type(vdaf) and registry.parameters_of(again) == got
    assert registry.describe(again) == registry.describe(vdaf)
    assert vdaf.ID == registry.codepoint(name, version)


@settings(max_examples=60, deadline=None)
@given(params18())
def test_property_round_trip_18(case: tuple[str, dict[str, Any]]) -> None:
    _check_round_trip(*case, "18")


@settings(max_examples=60, deadline=None)
@given(params08())
def test_property_round_trip_08(case: tuple[str, dict[str, Any]]) -> None:
    _check_round_trip(*case, "08")


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=2**20))
def test_property_vdaf08_takes_only_all_ones(top: int) -> None:
    if top & (top + 1) == 0:
        vdaf = registry.build("Prio3Sum", {"max_measurement": top}, "08")
        assert registry.parameters_of(vdaf) == {"bits": top.bit_length()}
    else:
        with pytest.raises(RegistryError, match=f"; {top} is not$"):
            registry.build("Prio3Sum", {"max_measurement": top}, "08")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(registry.names("18")), st.integers(max_value=0),
       st.sampled_from(["length", "max_measurement", "max_weight", "max_value",
                        "chunk_length"]))
def test_property_non_positive_values_name_the_parameter(name: str, value: int,
                                                         key: str) -> None:
    params = {**EXAMPLES["18"][name], key: value}
    if key not in registry.parameter_names(name):
        with pytest.raises(RegistryError, match=f"takes no parameter '{key}'"):
            registry.build(name, params)
    else:
        with pytest.raises(RegistryError, match=re.escape(f"{name} needs {key} >= 1, got "
                                                          f"{value}")):
            registry.build(name, params)


# -- the registry and its neighbours ---------------------------------------------------------


def test_registry_imports_only_vdaf() -> None:
    """The registry sits in the bottom layer: importing it loads no dap, interop, ppm or
    dp_policy module."""
    code = ("import sys, ppm_reference.vdaf.registry; print(sorted({m.split('.')[0] for m in sys.modules "
            "if m.split('.')[0] in ('dap', 'interop', 'ppm', 'dp_policy')}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "[]"


def test_dap_profiles_take_their_vdafs_from_the_registry() -> None:
    """Every DAP profile names its VDAFs through the registry, for its VDAF draft."""
    from ppm_reference.dap.profiles import PROFILES

    for dap_profile in PROFILES.values():
        version = registry.version_for_draft(dap_profile.vdaf_draft)
        assert dap_profile.vdaf_version == version
        for name in registry.names(version):
            assert dap_profile.vdaf_class(name).NAME == name
            assert dap_profile.vdaf_types[name] == registry.codepoint(name, version)
