"""Validity circuits of the Prio3 variants (draft-irtf-cfrg-vdaf-20, Section 7.4).

Each circuit keeps next to it what the aggregation needs: its encoding, truncation and
decoding, and (for the DP policies) the sensitivity of its aggregatable output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ppm_reference.vdaf.field import NttField
from ppm_reference.vdaf.flp import Gadget, Mul, ParallelSum, PolyEval, Valid, WirePlan


class MeasurementError(ValueError):
    """A measurement the circuit cannot encode (out of range, wrong length or type)."""


def _as_int(value: object, what: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if not isinstance(value, int):
        raise MeasurementError(f"{what} must be an integer, got {type(value).__name__}")
    return value


def encode_range_checked_int(field: type[NttField], value: int, max_measurement: int) -> list[int]:
    """Encode an integer in `[0, max_measurement]` as weighted bits (Section 7.4.2)."""
    if value < 0:
        raise MeasurementError("measurement is negative")
    if value > max_measurement:
        raise MeasurementError(f"measurement {value} is larger than {max_measurement}")
    bits = max_measurement.bit_length()
    rest_all_ones_value = (1 << (bits - 1)) - 1
    last_weight = max_measurement - rest_all_ones_value
    if value <= rest_all_ones_value:
        rest, last_elem = value, 0
    else:
        rest, last_elem = value - last_weight, 1
    return [(rest >> i) & 1 for i in range(bits - 1)] + [last_elem]


def decode_range_checked_int(field: type[NttField], encoded: Sequence[int],
                             max_measurement: int) -> int:
    """Inverse of `encode_range_checked_int`; linear, so it also applies to shares."""
    bits = max_measurement.bit_length()
    rest_all_ones_value = (1 << (bits - 1)) - 1
    last_weight = max_measurement - rest_all_ones_value
    q = field.MODULUS
    decoded = 0
    for i, bit in enumerate(encoded[: bits - 1]):
        decoded += (1 << i) * bit
    decoded += last_weight * encoded[bits - 1]
    return decoded % q


def range_check_plan(valid: Valid[Any, Any], max_ones: int) -> list[WirePlan]:
    """The prover's plan for a `ParallelSum(Mul)` range check over a bit vector with at
    most `max_ones` ones (`_range_check_chunks`, `_range_check_one_rand`). The prover
    runs it with num_shares = 1, so in call k the even wires are `r^e * x` (zero unless
    x = 1) and the odd ones `x - 1` (q - 1 unless x = 1; the zero padding of the last
    chunk gives q - 1 too): each one of the measurement puts one value off its base on
    two wires, and every wire has its seed, whatever the measurement."""
    q = valid.field.MODULUS
    gadget = valid.GADGETS[0]
    ones = min(max_ones, valid.MEAS_LEN)
    return [WirePlan((0, q - 1) * (gadget.ARITY // 2), 2 * ones + gadget.ARITY)]


def _range_check_chunks(valid: Valid[Any, Any], meas: list[int], joint_rand: list[int],
                        num_shares: int, chunk_length: int) -> int:
    """The `ParallelSum(Mul)` range check shared by SumVec, Histogram and
    MultihotCountVec: for call i with joint randomness r, the inputs are
    `r^(j+1) * x_j` and `x_j - 1/num_shares` for the chunk's elements x_j (zero-padded)."""
    field = valid.field
    q = field.MODULUS
    shares_inv = pow(num_shares, -1, q)
    gadget = valid.GADGETS[0]
    out = 0
    for i in range(valid.GADGET_CALLS[0]):
        chunk = meas[i * chunk_length : (i + 1) * chunk_length]
        if len(chunk) < chunk_length:
            chunk = chunk + [0] * (chunk_length - len(chunk))
        r = joint_rand[i]
        powers = [r] * chunk_length
        for j in range(1, chunk_length):
            powers[j] = powers[j - 1] * r % q
        inputs = [0] * (2 * chunk_length)
        inputs[0::2] = [w * x % q for w, x in zip(powers, chunk, strict=True)]
        inputs[1::2] = [(x - shares_inv) % q for x in chunk]
        out += gadget.eval(field, inputs)
    return int(out) % q


class Count(Valid[int, int]):
    """Count (Section 7.4.1): the measurement is 0 or 1; C(x) = x*x - x."""

    GADGETS: list[Gadget] = [Mul()]
    GADGET_CALLS = [1]
    MEAS_LEN = 1
    JOINT_RAND_LEN = 0
    OUTPUT_LEN = 1
    EVAL_OUTPUT_LEN = 1

    def __init__(self, field: type[NttField]) -> None:
        self.field = field
        self.GADGETS = [Mul()]

    def encode(self, measurement: int) -> list[int]:
        value = _as_int(measurement, "Count measurement")
        if value not in (0, 1):
            raise MeasurementError(f"Count measurement must be 0 or 1, got {value}")
        return [value]

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        squared = self.GADGETS[0].eval(self.field, [meas[0], meas[0]])
        return [(squared - meas[0]) % self.field.MODULUS]

    def truncate(self, meas: list[int]) -> list[int]:
        return list(meas)

    def decode(self, output: list[int], num_measurements: int) -> int:
        return output[0]

    def sensitivity(self) -> tuple[float, float]:
        """(L1, L2) sensitivity of the aggregate to one measurement being replaced."""
        return (1.0, 1.0)


class Sum(Valid[int, int]):
    """Sum (Section 7.4.2): an integer in `[0, max_measurement]`, range-checked bitwise."""

    JOINT_RAND_LEN = 0
    OUTPUT_LEN = 1

    def __init__(self, field: type[NttField], max_measurement: int) -> None:
        if max_measurement < 1 or max_measurement >= field.MODULUS:
            raise ValueError("max_measurement must be in [1, MODULUS)")
        self.field = field
        self.bits = max_measurement.bit_length()
        self.max_measurement = max_measurement
        self.GADGET_CALLS = [self.bits]
        self.GADGETS = [PolyEval([0, -1, 1], self.bits)]
        self.MEAS_LEN = self.bits
        self.EVAL_OUTPUT_LEN = self.bits

    def encode(self, measurement: int) -> list[int]:
        return encode_range_checked_int(self.field, _as_int(measurement, "Sum measurement"),
                                        self.max_measurement)

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        g = self.GADGETS[0]
        return [g.eval(self.field, [b]) for b in meas]

    def truncate(self, meas: list[int]) -> list[int]:
        return [decode_range_checked_int(self.field, meas, self.max_measurement)]

    def decode(self, output: list[int], num_measurements: int) -> int:
        return output[0]

    def sensitivity(self) -> tuple[float, float]:
        return (float(self.max_measurement), float(self.max_measurement))


class SumVec(Valid[list[int], list[int]]):
    """SumVec (Section 7.4.3): `length` integers, each in `[0, max_measurement]`."""

    EVAL_OUTPUT_LEN = 1

    def __init__(self, field: type[NttField], length: int, max_measurement: int,
                 chunk_length: int) -> None:
        if length < 1 or chunk_length < 1 or max_measurement < 1:
            raise ValueError("length, max_measurement and chunk_length must be positive")
        self.field = field
        self.length = length
        self.bits = max_measurement.bit_length()
        self.max_measurement = max_measurement
        self.chunk_length = chunk_length
        self.GADGETS = [ParallelSum(Mul(), chunk_length)]
        self.GADGET_CALLS = [(length * self.bits + chunk_length - 1) // chunk_length]
        self.MEAS_LEN = length * self.bits
        self.OUTPUT_LEN = length
        self.JOINT_RAND_LEN = self.GADGET_CALLS[0]

    def encode(self, measurement: list[int]) -> list[int]:
        if len(measurement) != self.length:
            raise MeasurementError(
                f"SumVec measurement has length {len(measurement)}, expected {self.length}")
        encoded: list[int] = []
        for val in measurement:
            encoded += encode_range_checked_int(self.field, _as_int(val, "SumVec element"),
                                                self.max_measurement)
        return encoded

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        return [_range_check_chunks(self, meas, joint_rand, num_shares, self.chunk_length)]

    def truncate(self, meas: list[int]) -> list[int]:
        b = self.bits
        return [decode_range_checked_int(self.field, meas[i * b : (i + 1) * b],
                                         self.max_measurement) for i in range(self.length)]

    def decode(self, output: list[int], num_measurements: int) -> list[int]:
        return list(output)

    def sensitivity(self) -> tuple[float, float]:
        """Replacing one measurement moves each of `length` coordinates by at most
        `max_measurement`: L1 = length * max_measurement, L2 = sqrt(length) *
        max_measurement."""
        return (float(self.length * self.max_measurement),
                self.length ** 0.5 * self.max_measurement)


class Histogram(Valid[int, list[int]]):
    """Histogram (Section 7.4.4): a bucket index in `[0, length)`, one-hot encoded."""

    EVAL_OUTPUT_LEN = 2

    def __init__(self, field: type[NttField], length: int, chunk_length: int) -> None:
        if length < 1 or chunk_length < 1:
            raise ValueError("length and chunk_length must be positive")
        self.field = field
        self.length = length
        self.chunk_length = chunk_length
        self.GADGETS = [ParallelSum(Mul(), chunk_length)]
        self.GADGET_CALLS = [(length + chunk_length - 1) // chunk_length]
        self.MEAS_LEN = length
        self.OUTPUT_LEN = length
        self.JOINT_RAND_LEN = self.GADGET_CALLS[0]

    def encode(self, measurement: int) -> list[int]:
        index = _as_int(measurement, "Histogram measurement")
        if not 0 <= index < self.length:
            raise MeasurementError(f"bucket {index} is not in [0, {self.length})")
        encoded = [0] * self.length
        encoded[index] = 1
        return encoded

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        q = self.field.MODULUS
        range_check = _range_check_chunks(self, meas, joint_rand, num_shares,
                                          self.chunk_length)
        sum_check = (sum(meas) - pow(num_shares, -1, q)) % q
        return [range_check, sum_check]

    def prover_wire_plans(self) -> list[WirePlan]:
        return range_check_plan(self, 1)

    def truncate(self, meas: list[int]) -> list[int]:
        return list(meas)

    def decode(self, output: list[int], num_measurements: int) -> list[int]:
        return list(output)

    def sensitivity(self) -> tuple[float, float]:
        """Replacing one measurement moves one count down and another up."""
        return (2.0, 2.0 ** 0.5)


class MultihotCountVec(Valid[list[bool], list[int]]):
    """MultihotCountVec (Section 7.4.5): `length` booleans with at most `max_weight` set."""

    EVAL_OUTPUT_LEN = 2

    def __init__(self, field: type[NttField], length: int, max_weight: int,
                 chunk_length: int) -> None:
        if length < 1 or chunk_length < 1 or not 0 < max_weight <= length:
            raise ValueError("need length > 0, 0 < max_weight <= length, chunk_length > 0")
        if field.MODULUS <= length:
            raise ValueError("length is too large for the current field size")
        self.field = field
        self.bits_for_weight = max_weight.bit_length()
        self.length = length
        self.max_weight = max_weight
        self.chunk_length = chunk_length
        self.GADGETS = [ParallelSum(Mul(), chunk_length)]
        self.GADGET_CALLS = [(length + self.bits_for_weight + chunk_length - 1) // chunk_length]
        self.MEAS_LEN = self.length + self.bits_for_weight
        self.OUTPUT_LEN = self.length
        self.JOINT_RAND_LEN = self.GADGET_CALLS[0]

    def encode(self, measurement: list[bool]) -> list[int]:
        if len(measurement) != self.length:
            raise MeasurementError(
                f"MultihotCountVec measurement has length {len(measurement)}, "
                f"expected {self.length}")
        count_vec = []
        for x in measurement:
            v = _as_int(x, "MultihotCountVec element")
            if v not in (0, 1):
                raise MeasurementError("MultihotCountVec elements must be booleans")
            count_vec.append(v)
        weight = sum(count_vec)
        if weight > self.max_weight:
            raise MeasurementError(f"weight {weight} is larger than max_weight {self.max_weight}")
        return count_vec + encode_range_checked_int(self.field, weight, self.max_weight)

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        q = self.field.MODULUS
        range_check = _range_check_chunks(self, meas, joint_rand, num_shares,
                                          self.chunk_length)
        weight = sum(meas[: self.length])
        weight_reported = decode_range_checked_int(self.field, meas[self.length :],
                                                   self.max_weight)
        return [range_check, (weight - weight_reported) % q]

    def prover_wire_plans(self) -> list[WirePlan]:
        return range_check_plan(self, self.max_weight + self.bits_for_weight)

    def truncate(self, meas: list[int]) -> list[int]:
        return meas[: self.length]

    def decode(self, output: list[int], num_measurements: int) -> list[int]:
        return list(output)

    def sensitivity(self) -> tuple[float, float]:
        """Replacing one measurement changes at most 2*max_weight coordinates by one
        (L1 = 2*max_weight, L2 = sqrt(2*max_weight))."""
        return (2.0 * self.max_weight, (2.0 * self.max_weight) ** 0.5)


class L1BoundSum(Valid[list[int], list[int]]):
    """L1BoundSum (draft-ietf-ppm-l1-bound-sum-02, Section 3): `length` integers, each in
    `[0, max_value]`, whose sum (the L1 norm) is at most `max_value`.

    Encoding (Section 3.2): every component, then the L1 norm, as
    `encode_range_checked_int(., max_value)` (draft-irtf-cfrg-vdaf-20 Section 7.4.2),
    `(length + 1) * bits` elements with `bits = max_value.bit_length()`. The circuit
    (Section 3.3, Figure "Evaluation function") is SumVec's bit check over all of them,
    then `sum(components) - claimed_norm`. Since the claimed norm is itself range-checked
    to `[0, max_value]`, a valid measurement has an L1 norm of at most `max_value`.

    The draft's prose says each component is checked to be in `[0, max_value)` with
    `max_value` exclusive, but its encoding (and its configuration text, "the maximum
    value, inclusive") make `max_value` inclusive; the published vector encodes 240 with
    max_value 240. We follow the code and the vector: inclusive."""

    EVAL_OUTPUT_LEN = 2

    def __init__(self, field: type[NttField], length: int, max_value: int,
                 chunk_length: int) -> None:
        if length < 1 or chunk_length < 1 or max_value < 1:
            raise ValueError("length, max_value and chunk_length must be positive")
        if max_value >= field.MODULUS:
            raise ValueError("max_value must be smaller than the field modulus")
        self.field = field
        self.length = length
        self.max_value = max_value
        self.bits = max_value.bit_length()
        self.chunk_length = chunk_length
        self.MEAS_LEN = (length + 1) * self.bits
        self.GADGETS = [ParallelSum(Mul(), chunk_length)]
        self.GADGET_CALLS = [(self.MEAS_LEN + chunk_length - 1) // chunk_length]
        self.OUTPUT_LEN = length
        self.JOINT_RAND_LEN = self.GADGET_CALLS[0]

    def encode(self, measurement: list[int]) -> list[int]:
        if not isinstance(measurement, list | tuple):
            raise MeasurementError("L1BoundSum measurement must be a list of integers")
        if len(measurement) != self.length:
            raise MeasurementError(
                f"L1BoundSum measurement has length {len(measurement)}, "
                f"expected {self.length}")
        values = [_as_int(v, "L1BoundSum element") for v in measurement]
        encoded: list[int] = []
        for v in values:
            encoded += encode_range_checked_int(self.field, v, self.max_value)
        norm = sum(values)
        if norm > self.max_value:
            raise MeasurementError(
                f"L1 norm {norm} is larger than max_value {self.max_value}")
        return encoded + encode_range_checked_int(self.field, norm, self.max_value)

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        q = self.field.MODULUS
        range_check = _range_check_chunks(self, meas, joint_rand, num_shares,
                                          self.chunk_length)
        b = self.bits
        observed = sum(decode_range_checked_int(self.field, meas[i * b : (i + 1) * b],
                                                self.max_value)
                       for i in range(self.length))
        claimed = decode_range_checked_int(self.field, meas[self.length * b :],
                                           self.max_value)
        return [range_check, (observed - claimed) % q]

    def truncate(self, meas: list[int]) -> list[int]:
        b = self.bits
        return [decode_range_checked_int(self.field, meas[i * b : (i + 1) * b],
                                         self.max_value) for i in range(self.length)]

    def decode(self, output: list[int], num_measurements: int) -> list[int]:
        return list(output)

    def sensitivity(self) -> tuple[float, float]:
        """Replacing one measurement x by y (both non-negative with L1 norm at most
        `max_value`): ||x - y||_1 <= ||x||_1 + ||y||_1 <= 2 * max_value, and
        ||x - y||_2^2 = ||x||_2^2 + ||y||_2^2 - 2 x.y <= ||x||_1^2 + ||y||_1^2 <=
        2 * max_value^2 (x.y >= 0). Both are reached by `max_value` in two different
        coordinates. (Adding or removing one measurement: `max_value` for both.)"""
        return (2.0 * self.max_value, 2.0 ** 0.5 * self.max_value)


class HigherDegree(Valid[int, int]):
    """Test-only circuit with a degree-3 gadget, `x (x - 1) (x - 2)`: accepts 0, 1, 2.

    Not in the draft: it is the circuit behind the published `Prio3HigherDegree` test
    vectors (Field64, one call of `PolyEval([0, 2, -3, 1])`)."""

    JOINT_RAND_LEN = 0
    OUTPUT_LEN = 1
    EVAL_OUTPUT_LEN = 1
    MEAS_LEN = 1
    GADGET_CALLS = [1]

    def __init__(self, field: type[NttField]) -> None:
        self.field = field
        self.GADGETS = [PolyEval([0, 2, -3, 1], 1)]

    def encode(self, measurement: int) -> list[int]:
        value = _as_int(measurement, "HigherDegree measurement")
        if value not in (0, 1, 2):
            raise MeasurementError("HigherDegree measurement must be 0, 1 or 2")
        return [value]

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        return [self.GADGETS[0].eval(self.field, [meas[0]])]

    def truncate(self, meas: list[int]) -> list[int]:
        return list(meas)

    def decode(self, output: list[int], num_measurements: int) -> int:
        return output[0]


# -- VDAF-08 circuits (draft-irtf-cfrg-vdaf-08, Section 7.4) -----------------------------
#
# What differs from draft-20: integers are ranged by a number of bits (Section 6.1,
# `encode_into_bit_vector`), not by a maximum; Sum is over Field128 with a `Range2` gadget
# and joint randomness; each circuit has ONE output (no random linear combination by the
# FLP: EVAL_OUTPUT_LEN = 1, so QUERY_RAND_LEN = len(GADGETS)); and the ParallelSum range
# checks weight element i of the whole (zero-padded) measurement by r^(i+1) for a single
# joint randomness element r, the powers running on across gadget calls, instead of one
# joint randomness element per call.


def encode_bits(field: type[NttField], value: int, bits: int) -> list[int]:
    """`Field.encode_into_bit_vector` (draft-08 Section 6.1): the `bits` low bits."""
    if not 0 <= value < 1 << bits:
        raise MeasurementError(f"{value} does not fit in {bits} bits")
    return [(value >> i) & 1 for i in range(bits)]


def decode_bits(field: type[NttField], vec: Sequence[int]) -> int:
    """`Field.decode_from_bit_vector` (draft-08 Section 6.1); linear, so it applies to
    shares."""
    return sum(x << i for i, x in enumerate(vec)) % field.MODULUS


def _check_bits(field: type[NttField], bits: int) -> None:
    if bits < 1 or 1 << bits >= field.MODULUS:
        raise ValueError(f"bits must be in [1, {field.MODULUS.bit_length() - 1}]")


def _range_check_one_rand(valid: Valid[Any, Any], meas: list[int], r: int, num_shares: int,
                          chunk_length: int) -> int:
    """The ParallelSum(Mul) range check of VDAF-08's SumVec, Histogram and
    MultiHotHistogram: element i of the measurement (zero-padded to whole chunks) enters
    a gadget call as `r^(i+1) * x_i` and `x_i - 1/num_shares`; the calls' outputs are
    summed."""
    field = valid.field
    q = field.MODULUS
    shares_inv = pow(num_shares, -1, q)
    gadget = valid.GADGETS[0]
    calls = valid.GADGET_CALLS[0]
    total = calls * chunk_length
    padded = meas + [0] * (total - len(meas))
    powers = [r] * total
    for i in range(1, total):
        powers[i] = powers[i - 1] * r % q
    out = 0
    for i in range(calls):
        lo, hi = i * chunk_length, (i + 1) * chunk_length
        chunk = padded[lo:hi]
        inputs = [0] * (2 * chunk_length)
        inputs[0::2] = [w * x % q for w, x in zip(powers[lo:hi], chunk, strict=True)]
        inputs[1::2] = [(x - shares_inv) % q for x in chunk]
        out += gadget.eval(field, inputs)
    return out % q


class Sum08(Valid[int, int]):
    """VDAF-08 Sum (draft-08 Section 7.4.2): an integer in `[0, 2^bits)`, its bits
    checked by `Range2(x) = x^2 - x` (here `PolyEval([0, -1, 1])`, the same polynomial)
    and combined as `sum_i r^(i+1) * Range2(bit_i)`."""

    JOINT_RAND_LEN = 1
    OUTPUT_LEN = 1
    EVAL_OUTPUT_LEN = 1

    def __init__(self, field: type[NttField], bits: int) -> None:
        _check_bits(field, bits)
        self.field = field
        self.bits = bits
        self.GADGETS = [PolyEval([0, -1, 1], bits)]
        self.GADGET_CALLS = [bits]
        self.MEAS_LEN = bits

    def encode(self, measurement: int) -> list[int]:
        return encode_bits(self.field, _as_int(measurement, "Sum measurement"), self.bits)

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        q = self.field.MODULUS
        g = self.GADGETS[0]
        r = joint_rand[0]
        out = 0
        r_power = r
        for b in meas:
            out += r_power * g.eval(self.field, [b])
            r_power = r_power * r % q
        return [out % q]

    def truncate(self, meas: list[int]) -> list[int]:
        return [decode_bits(self.field, meas)]

    def decode(self, output: list[int], num_measurements: int) -> int:
        return output[0]

    def sensitivity(self) -> tuple[float, float]:
        top = float((1 << self.bits) - 1)
        return (top, top)


class SumVec08(Valid[list[int], list[int]]):
    """VDAF-08 SumVec (draft-08 Section 7.4.3): `length` integers in `[0, 2^bits)`."""

    JOINT_RAND_LEN = 1
    EVAL_OUTPUT_LEN = 1

    def __init__(self, field: type[NttField], length: int, bits: int,
                 chunk_length: int) -> None:
        if length < 1 or chunk_length < 1:
            raise ValueError("length and chunk_length must be positive")
        _check_bits(field, bits)
        self.field = field
        self.length = length
        self.bits = bits
        self.chunk_length = chunk_length
        self.GADGETS = [ParallelSum(Mul(), chunk_length)]
        self.GADGET_CALLS = [(length * bits + chunk_length - 1) // chunk_length]
        self.MEAS_LEN = length * bits
        self.OUTPUT_LEN = length

    def encode(self, measurement: list[int]) -> list[int]:
        if len(measurement) != self.length:
            raise MeasurementError(
                f"SumVec measurement has length {len(measurement)}, expected {self.length}")
        encoded: list[int] = []
        for val in measurement:
            encoded += encode_bits(self.field, _as_int(val, "SumVec element"), self.bits)
        return encoded

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        return [_range_check_one_rand(self, meas, joint_rand[0], num_shares,
                                      self.chunk_length)]

    def truncate(self, meas: list[int]) -> list[int]:
        b = self.bits
        return [decode_bits(self.field, meas[i * b : (i + 1) * b]) for i in range(self.length)]

    def decode(self, output: list[int], num_measurements: int) -> list[int]:
        return list(output)

    def sensitivity(self) -> tuple[float, float]:
        top = (1 << self.bits) - 1
        return (float(self.length * top), self.length ** 0.5 * top)


class Histogram08(Valid[int, list[int]]):
    """VDAF-08 Histogram (draft-08 Section 7.4.4): a bucket index, one-hot encoded;
    `jr[1] * range_check + jr[1]^2 * (sum - 1/num_shares)` with the range check over
    `jr[0]` as in VDAF-08's SumVec.

    The draft-08 text adds each gadget call's output to the range check multiplied by
    `jr[0]` once more (`range_check += r * GADGETS[0].eval(...)`); the published VDAF-08
    vectors (and the reference code that produced them) do not, and neither do we: the
    verifier shares differ, so interoperating needs the vectors' form."""

    JOINT_RAND_LEN = 2
    EVAL_OUTPUT_LEN = 1

    def __init__(self, field: type[NttField], length: int, chunk_length: int) -> None:
        if length < 1 or chunk_length < 1:
            raise ValueError("length and chunk_length must be positive")
        self.field = field
        self.length = length
        self.chunk_length = chunk_length
        self.GADGETS = [ParallelSum(Mul(), chunk_length)]
        self.GADGET_CALLS = [(length + chunk_length - 1) // chunk_length]
        self.MEAS_LEN = length
        self.OUTPUT_LEN = length

    def encode(self, measurement: int) -> list[int]:
        index = _as_int(measurement, "Histogram measurement")
        if not 0 <= index < self.length:
            raise MeasurementError(f"bucket {index} is not in [0, {self.length})")
        encoded = [0] * self.length
        encoded[index] = 1
        return encoded

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        q = self.field.MODULUS
        range_check = _range_check_one_rand(self, meas, joint_rand[0], num_shares,
                                            self.chunk_length)
        sum_check = (sum(meas) - pow(num_shares, -1, q)) % q
        r = joint_rand[1]
        return [(r * range_check + r * r % q * sum_check) % q]

    def prover_wire_plans(self) -> list[WirePlan]:
        return range_check_plan(self, 1)

    def truncate(self, meas: list[int]) -> list[int]:
        return list(meas)

    def decode(self, output: list[int], num_measurements: int) -> list[int]:
        return list(output)

    def sensitivity(self) -> tuple[float, float]:
        return (2.0, 2.0 ** 0.5)


class MultiHotHistogram(Valid[list[int], list[int]]):
    """The test-only circuit behind the published VDAF-08 `Prio3MultiHotHistogram`
    vectors (not in the draft-08 text; a precursor of draft-09's MultihotCountVec).

    A measurement is `length` bits with at most `max_count` ones. With
    `bits_for_count = max_count.bit_length()` and
    `offset = 2^bits_for_count - 1 - max_count`, the Client appends the bits of
    `offset + weight`; the circuit range-checks all `length + bits_for_count` elements as
    VDAF-08's SumVec does, checks `offset + weight == the appended number` (offset scaled
    by 1/num_shares), and returns `jr[1] * range_check + jr[1]^2 * count_check`. Since the
    appended number is below 2^bits_for_count, the weight is at most max_count."""

    JOINT_RAND_LEN = 2
    EVAL_OUTPUT_LEN = 1

    def __init__(self, field: type[NttField], length: int, max_count: int,
                 chunk_length: int) -> None:
        if length < 1 or chunk_length < 1 or not 0 < max_count <= length:
            raise ValueError("need length > 0, 0 < max_count <= length, chunk_length > 0")
        self.bits_for_count = max_count.bit_length()
        self.offset = (1 << self.bits_for_count) - 1 - max_count
        if field.MODULUS - self.offset <= length:
            raise ValueError("length and max_count are too large for the field")
        self.field = field
        self.length = length
        self.max_count = max_count
        self.chunk_length = chunk_length
        self.GADGETS = [ParallelSum(Mul(), chunk_length)]
        self.GADGET_CALLS = [(length + self.bits_for_count + chunk_length - 1) // chunk_length]
        self.MEAS_LEN = length + self.bits_for_count
        self.OUTPUT_LEN = length

    def encode(self, measurement: list[int]) -> list[int]:
        if len(measurement) != self.length:
            raise MeasurementError(
                f"MultiHotHistogram measurement has length {len(measurement)}, "
                f"expected {self.length}")
        bits = []
        for x in measurement:
            v = _as_int(x, "MultiHotHistogram element")
            if v not in (0, 1):
                raise MeasurementError("MultiHotHistogram elements must be 0 or 1")
            bits.append(v)
        weight = sum(bits)
        if weight > self.max_count:
            raise MeasurementError(f"{weight} ones, more than max_count {self.max_count}")
        return bits + encode_bits(self.field, self.offset + weight, self.bits_for_count)

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        q = self.field.MODULUS
        range_check = _range_check_one_rand(self, meas, joint_rand[0], num_shares,
                                            self.chunk_length)
        shares_inv = pow(num_shares, -1, q)
        count_check = (self.offset * shares_inv + sum(meas[: self.length])
                       - decode_bits(self.field, meas[self.length :])) % q
        r = joint_rand[1]
        return [(r * range_check + r * r % q * count_check) % q]

    def prover_wire_plans(self) -> list[WirePlan]:
        return range_check_plan(self, self.max_count + self.bits_for_count)

    def truncate(self, meas: list[int]) -> list[int]:
        return meas[: self.length]

    def decode(self, output: list[int], num_measurements: int) -> list[int]:
        return list(output)

    def sensitivity(self) -> tuple[float, float]:
        return (2.0 * self.max_count, (2.0 * self.max_count) ** 0.5)
