"""Issue 12: the Client's sharding takes the same code path, with the same number of
field operations, whatever the measurement.

The prover extends its wire polynomials by a plan fixed by the circuit
(`Valid.prover_wire_plans`), not by the wires' values: the batched NTTs (how many
vectors, of what length) and the sparse scale-and-add steps are counted here for
contrasting measurements of each circuit. No timing is measured (that is
`benchmarks/client_timing.py`); the counts must be equal, and under the old
value-driven heuristic they are not (the test would catch its return)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from ppm_reference.vdaf import flp, registry
from ppm_reference.vdaf.prio3 import Prio3MultiHotHistogramV08


class Trace:
    def __init__(self) -> None:
        self.ntts: list[tuple[int, int, bool]] = []
        self.scale_adds = 0
        self.zero_terms = 0


@contextmanager
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[Trace]:
    trace = Trace()
    ntt_batch, scale_add = flp.ntt_batch, flp._scale_add

    def counting_ntt(field: Any, vecs: Any, inverse: bool, scale: Any = None) -> Any:
        trace.ntts.append((len(vecs), len(vecs[0]) if vecs else 0, inverse))
        return ntt_batch(field, vecs, inverse, scale)

    def counting_scale_add(acc: list[int], v: int, col: list[int]) -> list[int]:
        trace.scale_adds += 1
        trace.zero_terms += v == 0
        return scale_add(acc, v, col)

    with monkeypatch.context() as m:
        m.setattr(flp, "ntt_batch", counting_ntt)
        m.setattr(flp, "_scale_add", counting_scale_add)
        yield trace


def shard_trace(vdaf: Any, measurement: Any, monkeypatch: pytest.MonkeyPatch) -> Trace:
    nonce, rand = os.urandom(vdaf.NONCE_SIZE), os.urandom(vdaf.RAND_SIZE)
    with traced(monkeypatch) as trace:
        vdaf.shard(b"", measurement, nonce, rand)  # VDAF-08 takes no context
    return trace


def v20(name: str, **params: int) -> Any:
    return registry.build(name, params, shares=2)


def v08(name: str, **params: int) -> Any:
    return registry.build(name, params, version="08", shares=2)


CASES = [
    ("SumVec max 1", v20("Prio3SumVec", length=60, max_measurement=1, chunk_length=7),
     [[0] * 60, [1] * 60, [i % 2 for i in range(60)]]),
    ("SumVec max 255", v20("Prio3SumVec", length=20, max_measurement=255, chunk_length=9),
     [[0] * 20, [255] * 20, list(range(20))]),
    ("Sum", v20("Prio3Sum", max_measurement=2**16 - 1), [0, 2**16 - 1, 12345]),
    ("Count", v20("Prio3Count"), [0, 1]),
    ("Histogram", v20("Prio3Histogram", length=50, chunk_length=7), [0, 49, 23]),
    ("MultihotCountVec",
     v20("Prio3MultihotCountVec", length=50, max_weight=6, chunk_length=7),
     [[False] * 50, [True] * 6 + [False] * 44, [i % 9 == 0 for i in range(50)]]),
    ("SumVec (VDAF-08)", v08("Prio3SumVec", length=30, bits=3, chunk_length=5),
     [[0] * 30, [7] * 30]),
    ("Histogram (VDAF-08)", v08("Prio3Histogram", length=40, chunk_length=6), [0, 39]),
    ("MultiHotHistogram (VDAF-08)", Prio3MultiHotHistogramV08(2, 40, 5, 6),
     [[0] * 40, [1] * 5 + [0] * 35]),
]


@pytest.mark.parametrize(("label", "vdaf", "measurements"), CASES,
                         ids=[c[0] for c in CASES])
def test_shard_operations_do_not_depend_on_the_measurement(
        label: str, vdaf: Any, measurements: list[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    traces = [shard_trace(vdaf, m, monkeypatch) for m in measurements]
    first = traces[0]
    for t in traces[1:]:
        assert t.ntts == first.ntts, label
        assert t.scale_adds == first.scale_adds, label
    # Padding terms are worth q, never 0 (a product with 0 is cheaper in CPython).
    assert all(t.zero_terms == 0 for t in traces)


@contextmanager
def value_driven_prover() -> Iterator[None]:
    """The prover before issue 12: the plan is ignored."""
    original = flp.extend_polys

    def heuristic(field: Any, polys: Any, n: int, num_calls: int | None = None,
                  plan: Any = None) -> list[list[int]]:
        return original(field, polys, n, num_calls)

    flp.extend_polys = heuristic
    try:
        yield
    finally:
        flp.extend_polys = original


def test_the_trace_tells_the_old_heuristic_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the plan, a sparse SumVec (of the size in issue 12) takes the sparse
    path and a dense one the batched NTTs: the trace above sees the difference."""
    vdaf = v20("Prio3SumVec", length=1000, max_measurement=1, chunk_length=31)
    with value_driven_prover():
        sparse = shard_trace(vdaf, [0] * 1000, monkeypatch)
        dense = shard_trace(vdaf, [1] * 1000, monkeypatch)
    assert sparse.ntts != dense.ntts


def test_planned_and_heuristic_extensions_agree() -> None:
    """The planned path computes the same evaluations (the vectors pin the proofs too)."""
    vdaf = v20("Prio3MultihotCountVec", length=50, max_weight=6, chunk_length=7)
    valid = vdaf.flp.valid
    field = valid.field
    plan = valid.prover_wire_plans()[0]
    calls = valid.GADGET_CALLS[0]
    p = flp.wire_poly_len(calls)
    q = field.MODULUS
    wires = []
    for j in range(valid.GADGETS[0].ARITY):
        base = plan.bases[j] or 0
        col = [base] * calls
        # One element x = 1 at call 3: wire 2 (r^e x) is off its base 0 there, wire 3
        # (x - 1) is 0, off its base q - 1.
        if j == 2:
            col[3] = 12345
        if j == 3:
            col[3] = 0
        wires.append([field.rand_vec(1)[0], *col, *[0] * (p - 1 - calls)])
    n = 2 * p
    assert flp.extend_polys(field, wires, n, calls, plan) == \
        flp.extend_polys(field, wires, n, calls)
    # A wire too far from its plan (not a valid measurement) still extends exactly.
    wires[0][1 : calls + 1] = [(7 * k + 1) % q for k in range(calls)]
    assert flp.extend_polys(field, wires, n, calls, plan) == \
        flp.extend_polys(field, wires, n, calls)
