"""Fully linear proofs: the FLP interface (draft-irtf-cfrg-vdaf-20, Section 7.1), the
BBCGGI19 proof system (Section 7.3) and its gadgets (Appendix A).

Field elements are ints in `[0, MODULUS)`. The proof system follows the draft's
listings; the one place where it departs from their structure is the computation of
gadget polynomials (`extend_polys`), which produces the same evaluations faster.

The two VDAF versions we speak run the same proof system and differ only in how a proof
carries each gadget polynomial: draft-20 sends its values on the roots of unity
(`FlpBBCGGI19`), VDAF-08 ("FlpGeneric", draft-irtf-cfrg-vdaf-08 Section 7.3) its
coefficients (`FlpGeneric`). That choice is two methods: the prover's
`gadget_poly_for_proof` and the verifier's shim class (`QueryGadget` or
`CoefficientQueryGadget`).
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from operator import add, mul
from typing import Any, Generic, TypeVar

from ppm_reference.vdaf.field import (
    Lagrange,
    NttField,
    assert_power_of_2,
    memoize,
    next_power_of_2,
    ntt_batch,
    poly_eval,
)

Measurement = TypeVar("Measurement")
AggResult = TypeVar("AggResult")


class FlpError(ValueError):
    """An FLP failure (malformed proof or query input)."""


def wire_poly_len(gadget_calls: int) -> int:
    """Coordinates of each wire polynomial of a gadget (Section 7.3.2)."""
    return next_power_of_2(1 + gadget_calls)


def gadget_poly_len(gadget_degree: int, wire_polynomial_len: int) -> int:
    """Coordinates of a gadget polynomial (Section 7.3.2)."""
    return gadget_degree * (wire_polynomial_len - 1) + 1


# -- domain extension of wire polynomials ------------------------------------------------
#
# A wire polynomial is given by its p values on H_p, the p-th roots of unity. The gadget
# polynomial is the gadget applied pointwise to the wire polynomials on H_n (n >= p, the
# draft's `eval_poly`), so each wire must first be evaluated on H_n. H_n is the union of
# the cosets z*H_p for z = w_n^c, c in [0, n/p). On the coset z*H_p,
#
#     A(z * w_p^k) = sum_i a_i * gamma_z[(k - i) mod p],
#     gamma_z[m]   = (z^p - 1) / (p * (z * w_p^m - 1)),
#
# (the Lagrange basis at those points), a cyclic convolution. A sparse wire (the prover's
# wires are mostly zeros and ones next to one random seed) is extended by summing rotated
# copies of gamma_z, in O(nnz * p); a dense one by an inverse NTT and a twisted NTT.


@memoize
def _coset_kernel_rotations(field: type[NttField], p: int, n: int, c: int) -> list[list[int]]:
    """rotations[i][k] = gamma_z[(k - i) mod p] for z = w_n^c."""
    q = field.MODULUS
    z = pow(field.nth_root(n), c, q)
    zp = pow(z, p, q)
    w = field.nth_root_powers(p)
    scale = (zp - 1) * pow(p, -1, q) % q
    gamma = [scale * pow((z * w[m] - 1) % q, -1, q) % q for m in range(p)]
    return [gamma[p - i :] + gamma[: p - i] if i else list(gamma) for i in range(p)]


@memoize
def _coset_twist(field: type[NttField], p: int, n: int, c: int) -> list[int]:
    """`z^i / p` for z = w_n^c: folds the inverse NTT's scaling and the coset shift."""
    q = field.MODULUS
    z = pow(field.nth_root(n), c, q)
    out = [pow(p, -1, q)] * p
    for i in range(1, p):
        out[i] = out[i - 1] * z % q
    return out


# Rough costs (microseconds, CPython 3.11) of the ways to extend one wire of length 64:
# adding one rotated kernel column, scaling an accumulated column, and the two batched
# NTTs of the dense path. Only the choice of path depends on them, never the result.
_COST_ADD = 1.5
_COST_SCALE = 4.0
_COST_DENSE = 100.0


@memoize
def _call_indicator_coset(field: type[NttField], p: int, n: int, c: int,
                          num_calls: int) -> list[int]:
    """Values on z*H_p of the wire that is 1 at positions 1..num_calls and 0 elsewhere."""
    rots = _coset_kernel_rotations(field, p, n, c)
    acc = [0] * p
    for k in range(1, num_calls + 1):
        acc = list(map(add, acc, rots[k]))
    return [a % field.MODULUS for a in acc]


def _sparse_plan(vals: Sequence[int], p: int,
                 num_calls: int | None) -> tuple[float, int, dict[int, list[int]]]:
    """Decompose a wire as `base * e + sum_v v * (sum of unit vectors at positions(v))`,
    e the indicator of the call positions 1..num_calls, and estimate the cost."""
    base = 0
    resid = vals
    if num_calls:
        window = vals[1 : num_calls + 1]
        best, count = Counter(window).most_common(1)[0]
        if best and count > 2:
            base = best
            resid = [vals[0], *[v - base for v in window], *vals[num_calls + 1 :]]
    groups: dict[int, list[int]] = {}
    for i in [i for i, v in enumerate(resid) if v]:
        groups.setdefault(resid[i], []).append(i)
    nnz = sum(len(pos) for pos in groups.values())
    scales = len(groups) - (1 in groups) + (1 if base else 0)
    cost = (nnz * _COST_ADD + scales * _COST_SCALE) * p / 64
    return cost, base, groups


@dataclass(frozen=True)
class WirePlan:
    """How the prover extends the wires of one gadget, fixed by the circuit and its
    parameters, never by the wires' values (issue 12: the Client's sharding time must not
    depend on the measurement).

    `bases[i]` is None for a wire that takes the dense path, or the value `base` of a
    sparse wire: one whose values at the call positions minus `base` (and its seed) are
    nonzero at few positions for every valid measurement. `terms` bounds the number of
    those positions over all the sparse wires together; the sparse path then does
    exactly `terms` scale-and-add steps, padding with zero terms."""

    bases: tuple[int | None, ...]
    terms: int

    def is_dense(self, p: int) -> bool:
        """Whether the sparse wires take the dense path after all: by the cost model of
        `_sparse_plan`, from the plan alone."""
        sparse = sum(b is not None for b in self.bases)
        return sparse == 0 or (self.terms + sparse) * _COST_SCALE * p / 64 > \
            _COST_DENSE * sparse


def _scale_add(acc: list[int], v: int, col: list[int]) -> list[int]:
    """acc + v * col (one term of a planned sparse wire)."""
    return [a + v * g for a, g in zip(acc, col, strict=True)]


def _planned_terms(polys: Sequence[Sequence[int]], plan: WirePlan, num_calls: int,
                   modulus: int) -> dict[int, list[tuple[int, int]]] | None:
    """For each sparse wire, its (position, value) terms off the base, the first wire's
    padded with terms worth zero to `plan.terms` in all; None if there are more (only an
    invalid measurement: the caller then takes the dense path, which is exact)."""
    out: dict[int, list[tuple[int, int]]] = {}
    total = 0
    for idx, base in enumerate(plan.bases):
        if base is None:
            continue
        vals = polys[idx]
        resid = [vals[0], *[v - base for v in vals[1 : num_calls + 1]],
                 *vals[num_calls + 1 :]]
        out[idx] = [(i, v) for i, v in enumerate(resid) if v]
        total += len(out[idx])
    if total > plan.terms:
        return None
    if out:
        # Padding terms add q * column, zero modulo q, with operands of the size of the
        # real terms' (a product with 0 would be cheaper in CPython).
        out[next(iter(out))] += [(0, modulus)] * (plan.terms - total)
    return out


def extend_polys(field: type[NttField], polys: Sequence[Sequence[int]], n: int,
                 num_calls: int | None = None,
                 plan: WirePlan | None = None) -> list[list[int]]:
    """Evaluations on H_n (natural order) of polynomials given by their values on H_p.

    `num_calls`, when given, says that positions `1..num_calls` hold gadget inputs (and
    the rest a seed and zero padding): a wire that is mostly one constant there, such as
    `x - 1` for bits x, then extends cheaply. Exact in every case.

    Without `plan`, each wire's path is chosen from its values (fastest, but the time
    then depends on the values). With a `WirePlan` (and `num_calls`), the paths and the
    number of operations are fixed by the plan: what the prover (the Client) uses, so
    that its time does not depend on the measurement (only on the sizes of the big
    integers CPython multiplies)."""
    if not polys:
        return []
    p = len(polys[0])
    assert_power_of_2(p)
    assert_power_of_2(n)
    if n < p:
        raise ValueError("target domain smaller than the polynomial")
    if any(len(v) != p for v in polys):
        raise ValueError("polynomials of different lengths")
    if n == p:
        return [list(v) for v in polys]
    q = field.MODULUS
    ratio = n // p
    if num_calls is not None and not 0 <= num_calls < p:
        num_calls = None
    planned: dict[int, list[tuple[int, int]]] | None = None
    if plan is not None:
        if len(plan.bases) != len(polys) or num_calls is None:
            raise ValueError("a plan needs one base per wire and num_calls")
        planned = {} if plan.is_dense(p) else _planned_terms(polys, plan, num_calls, q)
        if planned is None:
            planned = {}
    out = []
    dense: list[int] = []
    for idx, vals in enumerate(polys):
        full = [0] * n
        full[0::ratio] = vals
        out.append(full)
        if planned is not None and plan is not None:
            entries = planned.get(idx)
            if entries is None:
                dense.append(idx)
                continue
            base = plan.bases[idx] or 0
            for c in range(1, ratio):
                rots = _coset_kernel_rotations(field, p, n, c)
                ind = _call_indicator_coset(field, p, n, c, num_calls or 0)
                acc = [base * g for g in ind]
                for k, v in entries:
                    acc = _scale_add(acc, v, rots[k])
                full[c::ratio] = [a % q for a in acc]
            continue
        cost, base, groups = _sparse_plan(vals, p, num_calls)
        if cost > _COST_DENSE:
            dense.append(idx)
            continue
        for c in range(1, ratio):
            rots = _coset_kernel_rotations(field, p, n, c)
            acc = [0] * p
            if base:
                ind = _call_indicator_coset(field, p, n, c, num_calls or 0)
                acc = [base * g for g in ind]
            for v, positions in groups.items():
                col = rots[positions[0]]
                for k in positions[1:]:
                    col = list(map(add, col, rots[k]))
                acc = list(map(add, acc, col)) if v == 1 else \
                    [a + v * g for a, g in zip(acc, col, strict=True)]
            full[c::ratio] = [a % q for a in acc]
    if dense:
        vecs = [polys[i] for i in dense]
        for c in range(1, ratio):
            # Coefficients scaled by z^i / p, then a forward transform: values on z*H_p.
            twisted = ntt_batch(field, vecs, True, _coset_twist(field, p, n, c))
            for i, coset in zip(dense, ntt_batch(field, twisted, False), strict=True):
                out[i][c::ratio] = coset
    return out


# -- gadgets (Appendix A) ----------------------------------------------------------------


class Gadget:
    """A gadget: a non-affine arithmetic sub-circuit (Section 7.3.2)."""

    ARITY: int
    DEGREE: int

    def eval(self, field: type[NttField], inp: list[int]) -> int:
        raise NotImplementedError

    def eval_points(self, field: type[NttField], wires: list[list[int]]) -> list[int]:
        """The gadget applied at every point, given each input wire's values there."""
        return [self.eval(field, list(col)) for col in zip(*wires, strict=True)]

    def eval_poly(self, field: type[NttField], inp_poly: list[list[int]],
                  num_calls: int | None = None,
                  plan: WirePlan | None = None) -> list[int]:
        """The gadget over the polynomial ring, with inputs and output in the Lagrange
        basis; the output has `next_power_of_2(gadget_poly_len(DEGREE, p))` values.
        `num_calls` and `plan` are for `extend_polys` (speed, and a data-independent
        path)."""
        n = next_power_of_2(gadget_poly_len(self.DEGREE, len(inp_poly[0])))
        return self.eval_points(field, extend_polys(field, inp_poly, n, num_calls, plan))


class Mul(Gadget):
    """Multiplication gadget (Appendix A.1)."""

    ARITY = 2
    DEGREE = 2

    def eval(self, field: type[NttField], inp: list[int]) -> int:
        return inp[0] * inp[1] % field.MODULUS

    def eval_points(self, field: type[NttField], wires: list[list[int]]) -> list[int]:
        q = field.MODULUS
        return [a * b % q for a, b in zip(wires[0], wires[1], strict=True)]


class PolyEval(Gadget):
    """Polynomial-evaluation gadget (Appendix A.2): `p(x)` for fixed coefficients."""

    ARITY = 1

    def __init__(self, p: list[int], num_calls: int) -> None:
        for i in reversed(range(len(p))):
            if p[i] != 0:
                p = p[: i + 1]
                break
        else:
            raise ValueError("invalid polynomial: zero length")
        self.p = list(p)
        self.DEGREE = len(p) - 1
        self.n = next_power_of_2(gadget_poly_len(self.DEGREE, wire_poly_len(num_calls)))

    def eval(self, field: type[NttField], inp: list[int]) -> int:
        q = field.MODULUS
        x = inp[0]
        out = 0
        for c in reversed(self.p):
            out = (out * x + c) % q
        return out

    def eval_points(self, field: type[NttField], wires: list[list[int]]) -> list[int]:
        q = field.MODULUS
        coeffs = [c % q for c in reversed(self.p)]
        out = []
        for x in wires[0]:
            acc = 0
            for c in coeffs:
                acc = (acc * x + c) % q
            out.append(acc)
        return out


class ParallelSum(Gadget):
    """Parallel-sum gadget (Appendix A.3): the sum of `count` calls of a subcircuit."""

    def __init__(self, subcircuit: Gadget, count: int) -> None:
        self.subcircuit = subcircuit
        self.count = count
        self.ARITY = subcircuit.ARITY * count
        self.DEGREE = subcircuit.DEGREE

    def eval(self, field: type[NttField], inp: list[int]) -> int:
        q = field.MODULUS
        if isinstance(self.subcircuit, Mul):
            return int(sum(map(mul, inp[0::2], inp[1::2]))) % q
        a = self.subcircuit.ARITY
        return sum(self.subcircuit.eval(field, inp[i * a : (i + 1) * a])
                   for i in range(self.count)) % q

    def eval_points(self, field: type[NttField], wires: list[list[int]]) -> list[int]:
        q = field.MODULUS
        if isinstance(self.subcircuit, Mul):
            acc = [0] * len(wires[0])
            for a, b in zip(wires[0::2], wires[1::2], strict=True):
                acc = [s + x * y for s, x, y in zip(acc, a, b, strict=True)]
            return [s % q for s in acc]
        arity = self.subcircuit.ARITY
        acc = [0] * len(wires[0])
        for i in range(self.count):
            part = self.subcircuit.eval_points(field, wires[i * arity : (i + 1) * arity])
            acc = list(map(add, acc, part))
        return [s % q for s in acc]


# -- validity circuits (Section 7.3.2) ---------------------------------------------------


class Valid(Generic[Measurement, AggResult]):
    """A validity circuit. Concrete circuits are in `vdaf.circuits`."""

    field: type[NttField]
    GADGETS: list[Gadget]
    GADGET_CALLS: list[int]
    MEAS_LEN: int
    JOINT_RAND_LEN: int
    EVAL_OUTPUT_LEN: int
    OUTPUT_LEN: int

    def eval(self, meas: list[int], joint_rand: list[int], num_shares: int) -> list[int]:
        raise NotImplementedError

    def encode(self, measurement: Measurement) -> list[int]:
        raise NotImplementedError

    def truncate(self, meas: list[int]) -> list[int]:
        raise NotImplementedError

    def decode(self, output: list[int], num_measurements: int) -> AggResult:
        raise NotImplementedError

    def prove_rand_len(self) -> int:
        return sum(g.ARITY for g in self.GADGETS)

    def query_rand_len(self) -> int:
        query_rand_len = len(self.GADGETS)
        if self.EVAL_OUTPUT_LEN > 1:
            query_rand_len += self.EVAL_OUTPUT_LEN
        return query_rand_len

    def proof_len(self) -> int:
        length = 0
        for g, g_calls in zip(self.GADGETS, self.GADGET_CALLS, strict=True):
            p = wire_poly_len(g_calls)
            length += g.ARITY + gadget_poly_len(g.DEGREE, p)
        return length

    def verifier_len(self) -> int:
        length = 1
        for g in self.GADGETS:
            length += g.ARITY + 1
        return length

    def prover_wire_plans(self) -> list[WirePlan]:
        """For each gadget, how the prover extends its wires (`WirePlan`), from the
        circuit's parameters only. The default is the dense path for every wire; a
        circuit whose valid measurements make some wires structurally sparse says so
        (the range-checked bit vectors: `vdaf.circuits.range_check_plan`)."""
        return [WirePlan((None,) * g.ARITY, 0) for g in self.GADGETS]

    def with_gadgets(self, gadgets: list[Gadget]) -> Valid[Measurement, AggResult]:
        """A shallow copy of the circuit whose gadgets are replaced (the shims' `wrap`)."""
        wrapped = copy.copy(self)
        wrapped.GADGETS = gadgets
        return wrapped


def _wires(seeds: list[int], calls: list[list[int]], p: int) -> list[list[int]]:
    """`wires[j][k]`: seed j at k = 0, the j-th input of call k at k >= 1, zero padding
    to the wire polynomial length p (the shims of Appendix A.4)."""
    pad = [0] * (p - 1 - len(calls))
    if calls:
        return [[s, *col, *pad] for s, col in zip(seeds, zip(*calls, strict=True), strict=True)]
    return [[s, *pad] for s in seeds]


class ProveGadget(Gadget):
    """Shim recording the input wires of each call while evaluating the gadget
    (Appendix A.4)."""

    def __init__(self, field: type[NttField], wire_seeds: list[int], g: Gadget,
                 g_calls: int) -> None:
        self.inner = g
        self.ARITY = g.ARITY
        self.DEGREE = g.DEGREE
        self.seeds = wire_seeds
        self.calls: list[list[int]] = []
        self.p = wire_poly_len(g_calls)

    def eval(self, field: type[NttField], inp: list[int]) -> int:
        self.calls.append(inp)
        return self.inner.eval(field, inp)

    def wires(self) -> list[list[int]]:
        """`wires[j][k]`: seed at k = 0, the j-th input of call k at k >= 1, zero padding."""
        return _wires(self.seeds, self.calls, self.p)


class QueryGadget(Gadget):
    """Shim recording the input wires of each call and answering each call from the
    gadget polynomial of the proof (Appendix A.4), given by its values on the roots of
    unity (draft-20)."""

    def __init__(self, field: type[NttField], wire_seeds: list[int], gadget_poly: list[int],
                 g: Gadget, g_calls: int) -> None:
        self.ARITY = g.ARITY
        self.DEGREE = g.DEGREE
        self.seeds = wire_seeds
        self.calls: list[list[int]] = []
        self.p = wire_poly_len(g_calls)
        # `poly[k * step]` is the gadget polynomial at the k-th power of the p-th root.
        self.poly, self.step = self.call_values(field, gadget_poly)

    def call_values(self, field: type[NttField], gadget_poly: list[int]) -> tuple[list[int], int]:
        """The gadget polynomial's values on H_size (size >= p) and the stride to H_p."""
        p = self.p
        lag = Lagrange(field)
        n = next_power_of_2(len(gadget_poly))
        poly = list(gadget_poly)
        lag.extend_values_to_power_of_2(poly, n)
        size = next_power_of_2(gadget_poly_len(self.DEGREE, p))
        while len(poly) < size:
            poly = lag.double_evaluations(poly)
        return poly, 1 << (assert_power_of_2(size) - assert_power_of_2(p))

    def gadget_check(self, field: type[NttField], t: int) -> int:
        """The gadget polynomial at the query point t (the verifier's `y`)."""
        return Lagrange(field).poly_eval(self.poly, t)

    def eval(self, field: type[NttField], inp: list[int]) -> int:
        self.calls.append(inp)
        return self.poly[len(self.calls) * self.step]

    def wires(self) -> list[list[int]]:
        return _wires(self.seeds, self.calls, self.p)


class CoefficientQueryGadget(QueryGadget):
    """The query shim of VDAF-08's FlpGeneric (draft-irtf-cfrg-vdaf-08, Section 7.3.3.2):
    the proof gives the gadget polynomial by its coefficients. Call k is answered with
    its value at alpha^k (alpha the p-th root of unity) and the check `y` is its value
    at t, as in the draft; the values on H_p come from one size-p NTT of the
    coefficients folded modulo x^p - 1 (the same values, computed faster)."""

    def call_values(self, field: type[NttField], gadget_poly: list[int]) -> tuple[list[int], int]:
        self.coeffs = list(gadget_poly)
        p = self.p
        folded = [0] * p
        for i, c in enumerate(gadget_poly):
            folded[i % p] += c
        q = field.MODULUS
        return field.ntt([c % q for c in folded], p), 1

    def gadget_check(self, field: type[NttField], t: int) -> int:
        return poly_eval(field, self.coeffs, t)


# -- the proof system (Section 7.3) ------------------------------------------------------


class FlpBBCGGI19(Generic[Measurement, AggResult]):
    """The FLP of BBCGGI19 Section 4.2 for a validity circuit (Section 7.3).

    Gadget polynomials travel as their values on the roots of unity (draft-20); see
    `FlpGeneric` for VDAF-08's coefficients."""

    #: The verifier's shim: how it reads a gadget polynomial from the proof.
    QUERY_GADGET: type[QueryGadget] = QueryGadget

    def __init__(self, valid: Valid[Measurement, AggResult]) -> None:
        self.valid = valid
        self.field = valid.field
        self.PROVE_RAND_LEN = valid.prove_rand_len()
        self.QUERY_RAND_LEN = valid.query_rand_len()
        self.JOINT_RAND_LEN = valid.JOINT_RAND_LEN
        self.MEAS_LEN = valid.MEAS_LEN
        self.OUTPUT_LEN = valid.OUTPUT_LEN
        self.PROOF_LEN = valid.proof_len()
        self.VERIFIER_LEN = valid.verifier_len()

    # The AFE part (Section 7.1.1).
    def encode(self, measurement: Measurement) -> list[int]:
        return self.valid.encode(measurement)

    def truncate(self, meas: list[int]) -> list[int]:
        return self.valid.truncate(meas)

    def decode(self, output: list[int], num_measurements: int) -> AggResult:
        return self.valid.decode(output, num_measurements)

    def prove(self, meas: list[int], prove_rand: list[int], joint_rand: list[int]) -> list[int]:
        """Generate a proof (Section 7.3.3)."""
        valid = self.valid
        if len(meas) != valid.MEAS_LEN or len(prove_rand) != self.PROVE_RAND_LEN \
                or len(joint_rand) != self.JOINT_RAND_LEN:
            raise FlpError("prove: wrong input lengths")
        shims: list[Any] = []
        rest = prove_rand
        for g, g_calls in zip(valid.GADGETS, valid.GADGET_CALLS, strict=True):
            seeds, rest = rest[: g.ARITY], rest[g.ARITY :]
            shims.append(ProveGadget(self.field, seeds, g, g_calls))
        valid.with_gadgets(shims).eval(meas, joint_rand, 1)

        proof: list[int] = []
        # The wires are extended by a plan fixed by the circuit, so that the prover's
        # time does not depend on the measurement (a Client's sharding time is visible
        # to a network observer).
        plans = valid.prover_wire_plans()
        for shim, g_calls, plan in zip(shims, valid.GADGET_CALLS, plans, strict=True):
            p = wire_poly_len(g_calls)
            proof += shim.seeds
            gadget_poly = shim.inner.eval_poly(self.field, shim.wires(), g_calls, plan)
            proof += self.gadget_poly_for_proof(gadget_poly, gadget_poly_len(shim.DEGREE, p))
        return proof

    def gadget_poly_for_proof(self, values: list[int], length: int) -> list[int]:
        """What the proof carries of a gadget polynomial given by its values on H_n
        (n a power of two >= length): draft-20 sends the first `length` values."""
        return values[:length]

    def query(self, meas: list[int], proof: list[int], query_rand: list[int],
              joint_rand: list[int], num_shares: int) -> list[int]:
        """Query a (share of a) measurement and proof (Section 7.3.4)."""
        valid = self.valid
        if len(meas) != valid.MEAS_LEN or len(proof) != self.PROOF_LEN \
                or len(query_rand) != self.QUERY_RAND_LEN \
                or len(joint_rand) != self.JOINT_RAND_LEN:
            raise FlpError("query: wrong input lengths")
        q = self.field.MODULUS
        shims: list[Any] = []
        rest = proof
        for g, g_calls in zip(valid.GADGETS, valid.GADGET_CALLS, strict=True):
            p = wire_poly_len(g_calls)
            g_poly_len = gadget_poly_len(g.DEGREE, p)
            seeds, rest = rest[: g.ARITY], rest[g.ARITY :]
            gadget_poly, rest = rest[:g_poly_len], rest[g_poly_len:]
            shims.append(self.QUERY_GADGET(self.field, seeds, gadget_poly, g, g_calls))
        out = valid.with_gadgets(shims).eval(meas, joint_rand, num_shares)

        if valid.EVAL_OUTPUT_LEN > 1:
            rand, query_rand = (query_rand[: valid.EVAL_OUTPUT_LEN],
                                query_rand[valid.EVAL_OUTPUT_LEN :])
            v = sum(map(mul, rand, out)) % q
        else:
            [v] = out

        lag = Lagrange(self.field)
        verifier = [v]
        for shim, t in zip(shims, query_rand, strict=True):
            p = shim.p
            if pow(t, p, q) == 1:
                raise FlpError("test point is a root of unity")
            verifier += lag.poly_eval_batched(shim.wires(), t)
            verifier.append(shim.gadget_check(self.field, t))
        return verifier

    def decide(self, verifier: list[int]) -> bool:
        """Decide validity from the (combined) verifier message (Section 7.3.5)."""
        if len(verifier) != self.VERIFIER_LEN:
            raise FlpError("decide: wrong verifier length")
        if verifier[0] != 0:
            return False
        rest = verifier[1:]
        for g in self.valid.GADGETS:
            wire_checks, rest = rest[: g.ARITY], rest[g.ARITY :]
            gadget_check, rest = rest[0], rest[1:]
            if g.eval(self.field, wire_checks) != gadget_check:
                return False
        return True


class FlpGeneric(FlpBBCGGI19[Measurement, AggResult]):
    """VDAF-08's "FlpGeneric" (draft-irtf-cfrg-vdaf-08, Section 7.3): the proof is
    `seed_1 + coeff_1 + ... + seed_H + coeff_H`, each `coeff_i` the coefficients of the
    gadget polynomial (Section 7.3.3.1); the verifier evaluates them (Section 7.3.3.2).
    Proof and verifier lengths, the verifier layout `[v] + x_1 + [y_1] + ...` and the
    decision are those of draft-20."""

    QUERY_GADGET = CoefficientQueryGadget

    def gadget_poly_for_proof(self, values: list[int], length: int) -> list[int]:
        # The coefficients beyond `length` are zero: the degree is below `length`.
        return self.field.inv_ntt(values, len(values))[:length]


def run_flp(flp: FlpBBCGGI19[Measurement, AggResult], meas: list[int], num_shares: int) -> bool:
    """Run the FLP on an encoded measurement with fresh randomness (Section 7.1)."""
    field = flp.field
    joint_rand = field.rand_vec(flp.JOINT_RAND_LEN)
    prove_rand = field.rand_vec(flp.PROVE_RAND_LEN)
    query_rand = field.rand_vec(flp.QUERY_RAND_LEN)
    proof = flp.prove(meas, prove_rand, joint_rand)
    meas_shares = additive_secret_share(meas, num_shares, field)
    proof_shares = additive_secret_share(proof, num_shares, field)
    verifier = field.zeros(flp.VERIFIER_LEN)
    for ms, ps in zip(meas_shares, proof_shares, strict=True):
        verifier = field.vec_add(verifier, flp.query(ms, ps, query_rand, joint_rand, num_shares))
    return flp.decide(verifier)


def additive_secret_share(x: list[int], num_shares: int, field: type[NttField]) -> list[list[int]]:
    """Split x into num_shares vectors that add up to it (Section 2)."""
    shares = [field.rand_vec(len(x)) for _ in range(num_shares - 1)]
    last = list(x)
    for s in shares:
        last = field.vec_sub(last, s)
    return [*shares, last]
