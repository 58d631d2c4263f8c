"""Prio3L1BoundSum (draft-ietf-ppm-l1-bound-sum-02): the circuit, the VDAF, the published
vector, and the registry entry."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.cli import main
from ppm_reference.vdaf import registry, vectors
from ppm_reference.vdaf.circuits import L1BoundSum, MeasurementError
from ppm_reference.vdaf.circuits import encode_range_checked_int as erci
from ppm_reference.vdaf.field import Field128
from ppm_reference.vdaf.flp import run_flp
from ppm_reference.vdaf.prio3 import Prio3L1BoundSum
from ppm_reference.vdaf.vdaf import VdafError, run_vdaf

PUBLISHED = ("test-vectors", "l1-bound-sum-02", "Prio3L1BoundSum_0.json")
OWN = Path(__file__).resolve().parent.parent / "test_vectors" / "l1-bound-sum-02"
CTX = b"l1 test"


def test_parameters_of_table_1() -> None:
    """Section 3, Table 1: Field128, one proof, TurboSHAKE128; codepoint 7 (Section 6)."""
    vdaf = Prio3L1BoundSum(2, 10, 240, 9)
    assert vdaf.ID == 0x00000007 == registry.codepoint("Prio3L1BoundSum")
    assert vdaf.flp.field is Field128
    assert vdaf.PROOFS == 1
    assert vdaf.xof.__name__.startswith("XofTurboShake128")
    valid = vdaf.flp.valid
    # (length + 1) * bits with bits = 240.bit_length() = 8 (Section 3.2).
    assert valid.MEAS_LEN == 88
    assert valid.OUTPUT_LEN == 10
    assert valid.GADGET_CALLS == [10] == [valid.JOINT_RAND_LEN]


def test_published_vector_checks_and_regenerates(shared_dir: Path) -> None:
    path = shared_dir.joinpath(*PUBLISHED)
    result = vectors.check_file(path)
    assert result.status == "pass", result.reason
    assert len(result.operations) == 33 and all(op.ok for op in result.operations)
    version, specs = vectors.extra_set("l1-bound-sum-02")
    assert version == 18 and [s.file_name() for s in specs] == [path.name]
    assert vectors.dumps(vectors.generate_vector(specs[0], version)).encode() == \
        path.read_bytes()
    # The committed copy is the same file.
    assert (OWN / path.name).read_bytes() == path.read_bytes()


def test_cli_generate_set_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vdaf", "vectors", "generate", "--set", "l1-bound-sum-02",
                 "--out", str(tmp_path)]) == 0
    out = tmp_path / "Prio3L1BoundSum_0.json"
    assert out.read_bytes() == (OWN / out.name).read_bytes()
    assert main(["vdaf", "vectors", "check", str(out)]) == 0
    assert "PASS" in capsys.readouterr().out
    # One vector for chosen parameters, with the default measurements.
    assert main(["vdaf", "vectors", "generate", "--vdaf", "Prio3L1BoundSum", "--length", "4",
                 "--max-value", "5", "--chunk-length", "3", "--out", str(tmp_path)]) == 0
    assert main(["vdaf", "vectors", "check", str(tmp_path / "Prio3L1BoundSum_custom.json")]) \
        == 0


def test_tampered_vector_fails(shared_dir: Path, tmp_path: Path) -> None:
    text = shared_dir.joinpath(*PUBLISHED).read_text()
    # Change the measurement of report 1 (240 -> 239): the shares no longer match.
    tampered = text.replace('"measurement": [\n                240,', '"measurement": [\n'
                            '                239,', 1)
    assert tampered != text
    path = tmp_path / "Prio3L1BoundSum_0.json"
    path.write_text(tampered)
    result = vectors.check_file(path)
    assert result.status == "fail"
    assert "reports[1].public_share mismatch" in result.failed_operations[0].detail


def _valid_measurements(length: int, max_value: int) -> st.SearchStrategy[list[int]]:
    """Vectors of `length` non-negative integers with sum at most `max_value`."""
    @st.composite
    def draw(d: st.DrawFn) -> list[int]:
        budget = d(st.integers(0, max_value))
        out = []
        for _ in range(length):
            v = d(st.integers(0, budget))
            out.append(v)
            budget -= v
        return d(st.permutations(out))
    return draw()


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_property_valid_measurements_sum(data: st.DataObject) -> None:
    length = data.draw(st.integers(1, 6))
    max_value = data.draw(st.integers(1, 300))
    chunk = data.draw(st.integers(1, 8))
    vdaf = Prio3L1BoundSum(2, length, max_value, chunk)
    ms = data.draw(st.lists(_valid_measurements(length, max_value), min_size=1, max_size=3))
    result = run_vdaf(vdaf, os.urandom(32), None, CTX, ms)
    assert result == [sum(col) for col in zip(*ms, strict=True)]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_property_circuit_accepts_exactly_the_l1_ball(data: st.DataObject) -> None:
    """The FLP accepts an encoding iff every component and the norm are in [0, max_value]
    and the norm is their sum; the Client-side encoder refuses everything else."""
    length = data.draw(st.integers(1, 4))
    max_value = data.draw(st.integers(1, 20))
    valid = L1BoundSum(Field128, length, max_value, data.draw(st.integers(1, 5)))
    meas = data.draw(st.lists(st.integers(0, max_value + 3), min_size=length,
                              max_size=length))
    if sum(meas) <= max_value:
        assert len(valid.encode(meas)) == (length + 1) * valid.bits
        assert valid.truncate(valid.encode(meas)) == meas
        assert run_flp(Prio3L1BoundSum(2, length, max_value, valid.chunk_length).flp,
                       valid.encode(meas), 1)
    else:
        with pytest.raises(MeasurementError):
            valid.encode(meas)


def _cheating_encodings(valid: L1BoundSum) -> list[list[int]]:
    """Encodings a cheating Client might prove: each must fail verification."""
    q = Field128.MODULUS
    b, n, top = valid.bits, valid.length, valid.max_value
    def enc(values: list[int], norm: int) -> list[int]:
        return [x for v in values for x in erci(Field128, v, top)] + erci(Field128, norm, top)

    over = [top, 1] + [0] * (n - 2)           # norm top + 1, claimed top
    out: list[list[int]] = [enc(over, top)]
    understated = enc([1] + [0] * (n - 1), 0)  # claimed norm 0 for a norm of 1
    out.append(understated)
    not_a_bit = enc([0] * n, 0)
    not_a_bit[0] = 2                           # a component of 2 claimed as a bit
    out.append(not_a_bit)
    negative = enc([0] * n, 0)
    negative[0] = q - 1                        # components -1 and +1: the norm 0 is
    negative[b] = 1                            # their sum, but -1 is not a bit
    out.append(negative)
    return out


def test_cheating_clients_are_rejected() -> None:
    vdaf = Prio3L1BoundSum(2, 3, 6, 4)
    valid = vdaf.flp.valid
    assert isinstance(valid, L1BoundSum)
    size = vdaf.xof.SEED_SIZE
    for meas in _cheating_encodings(valid):
        verify_key = os.urandom(vdaf.VERIFY_KEY_SIZE)
        nonce = os.urandom(16)
        rand = os.urandom(vdaf.RAND_SIZE)
        seeds = [rand[i : i + size] for i in range(0, len(rand), size)]
        public_share, input_shares = vdaf.shard_with_joint_rand(CTX, meas, nonce, seeds)
        vshares = [vdaf.verify_init(verify_key, CTX, j, None, nonce, public_share, s)[1]
                   for j, s in enumerate(input_shares)]
        with pytest.raises(VdafError, match="verifier check failed"):
            vdaf.verifier_shares_to_message(CTX, None, vshares)


@pytest.mark.parametrize(("measurement", "message"), [
    ([7, 0, 0], "measurement 7 is larger than 6"),
    ([3, 3, 1], "L1 norm 7 is larger than max_value 6"),
    ([1, 2], "has length 2, expected 3"),
    ([-1, 0, 0], "negative"),
    ([1.5, 0, 0], "must be an integer"),
    (3, "must be a list"),
])
def test_measurement_errors(measurement: Any, message: str) -> None:
    with pytest.raises(MeasurementError, match=message):
        L1BoundSum(Field128, 3, 6, 2).encode(measurement)


def test_registry_builds_with_default_chunk_length() -> None:
    vdaf = registry.build("Prio3L1BoundSum", {"length": 10, "max_value": "240"})
    assert isinstance(vdaf, Prio3L1BoundSum)
    assert registry.parameters_of(vdaf) == {"length": 10, "max_value": 240, "chunk_length": 13}
    assert registry.describe(vdaf) == "Prio3L1BoundSum(length=10, max_value=240, chunk_length=13)"
    assert registry.from_codepoint(7) == "Prio3L1BoundSum"
    with pytest.raises(registry.RegistryError, match="Prio3L1BoundSum needs max_value"):
        registry.build("Prio3L1BoundSum", {"length": 3})
    with pytest.raises(registry.RegistryError, match="not a VDAF of draft-irtf-cfrg-vdaf-08"):
        registry.build("Prio3L1BoundSum", {"length": 3, "max_value": 4}, "08")


def test_sensitivity_is_reached() -> None:
    """(L1, L2) of replacing one measurement: 2 * max_value and sqrt(2) * max_value, met by
    max_value in two different coordinates; no pair of valid measurements exceeds them."""
    valid = L1BoundSum(Field128, 3, 5, 2)
    l1, l2 = valid.sensitivity()
    assert (l1, l2) == (10.0, 2.0 ** 0.5 * 5)
    rng = random.Random(20)
    ball = [[a, b, c] for a in range(6) for b in range(6) for c in range(6) if a + b + c <= 5]
    worst1 = worst2 = 0.0
    for _ in range(2000):
        x, y = rng.choice(ball), rng.choice(ball)
        worst1 = max(worst1, sum(abs(u - v) for u, v in zip(x, y, strict=True)))
        worst2 = max(worst2, sum((u - v) ** 2 for u, v in zip(x, y, strict=True)) ** 0.5)
    d = [5, 0, 0], [0, 5, 0]
    assert sum(abs(u - v) for u, v in zip(*d, strict=True)) == l1
    assert worst1 <= l1 and worst2 <= l2 + 1e-9
