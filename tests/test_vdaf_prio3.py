"""Prio3 end to end and its message codecs (draft-irtf-cfrg-vdaf-20, Section 7)."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.vdaf.circuits import Count, Histogram, MultihotCountVec, Sum, SumVec
from ppm_reference.vdaf.field import Field64, Field128, Lagrange
from ppm_reference.vdaf.flp import FlpBBCGGI19, Mul, ParallelSum, PolyEval, extend_polys
from ppm_reference.vdaf.prio3 import (
    Prio3,
    Prio3Count,
    Prio3HigherDegree,
    Prio3Histogram,
    Prio3MultihotCountVec,
    Prio3Sum,
    Prio3SumVec,
    Prio3SumVecWithMultiproof,
)
from ppm_reference.vdaf.vdaf import VdafError, run_vdaf

CTX = b"test context"


def make_variants(shares: int) -> list[tuple[Prio3, Any]]:
    """Each variant with a generator of random valid measurements."""
    return [
        (Prio3Count(shares), lambda r: r.randint(0, 1)),
        (Prio3Sum(shares, 1337), lambda r: r.randint(0, 1337)),
        (Prio3SumVec(shares, 7, 5, 3), lambda r: [r.randint(0, 5) for _ in range(7)]),
        (Prio3Histogram(shares, 11, 4), lambda r: r.randrange(11)),
        (Prio3MultihotCountVec(shares, 9, 4, 3),
         lambda r: _multihot(r, 9, 4)),
        (Prio3SumVecWithMultiproof(shares, Field64, 3, 4, 3, 2),
         lambda r: [r.randint(0, 3) for _ in range(4)]),
        (Prio3HigherDegree(shares), lambda r: r.randint(0, 2)),
    ]


def _multihot(r: random.Random, length: int, max_weight: int) -> list[bool]:
    ones = set(r.sample(range(length), r.randint(0, max_weight)))
    return [i in ones for i in range(length)]


def expected(vdaf: Prio3, measurements: list[Any]) -> Any:
    name = type(vdaf).__name__
    if name in ("Prio3Count", "Prio3Sum", "Prio3HigherDegree"):
        return sum(measurements)
    if name == "Prio3Histogram":
        return [sum(1 for m in measurements if m == i) for i in range(vdaf.length)]  # type: ignore[attr-defined]
    if name == "Prio3MultihotCountVec":
        return [sum(int(m[i]) for m in measurements) for i in range(vdaf.length)]  # type: ignore[attr-defined]
    return [sum(col) for col in zip(*measurements, strict=True)]


@pytest.mark.parametrize("shares", [2, 3, 4, 5])
def test_end_to_end_every_variant(shares: int) -> None:
    """shard -> verify -> aggregate -> unshard over random valid measurements."""
    rng = random.Random(shares)
    for vdaf, gen in make_variants(shares):
        measurements = [gen(rng) for _ in range(4)]
        verify_key = os.urandom(vdaf.VERIFY_KEY_SIZE)
        result = run_vdaf(vdaf, verify_key, None, CTX, measurements)
        assert result == expected(vdaf, measurements), type(vdaf).__name__


def test_large_shares_count() -> None:
    vdaf = Prio3Histogram(255, 4, 2)
    assert run_vdaf(vdaf, os.urandom(32), None, CTX, [3, 1]) == [0, 1, 0, 1]
    with pytest.raises(ValueError):
        Prio3Count(256)
    with pytest.raises(ValueError):
        Prio3Count(1)


def _run_report_through_messages(vdaf: Prio3, measurement: Any, ctx_client: bytes = CTX,
                                 ctx_agg: bytes = CTX) -> list[list[int]]:
    """One report, every message encoded and decoded on the way, as over a network."""
    verify_key = os.urandom(vdaf.VERIFY_KEY_SIZE)
    nonce = os.urandom(vdaf.NONCE_SIZE)
    public_share, input_shares = vdaf.shard(ctx_client, measurement, nonce,
                                            os.urandom(vdaf.RAND_SIZE))
    ps = vdaf.decode_public_share(vdaf.encode_public_share(public_share))
    states, shares = [], []
    for j, share in enumerate(input_shares):
        decoded = vdaf.decode_input_share(j, vdaf.encode_input_share(share))
        state, vshare = vdaf.verify_init(verify_key, ctx_agg, j, None, nonce, ps, decoded)
        states.append(state)
        shares.append(vdaf.decode_verifier_share(state, vdaf.encode_verifier_share(vshare)))
    message = vdaf.verifier_shares_to_message(ctx_agg, None, shares)
    message = vdaf.decode_verifier_message(states[0], vdaf.encode_verifier_message(message))
    return [vdaf.verify_next(ctx_agg, s, message) for s in states]


def test_context_mismatch_fails_verification() -> None:
    """Aggregators and Client disagreeing on ctx must reject the report (Section 5.1)."""
    for vdaf, gen in make_variants(2):
        m = gen(random.Random(1))
        _run_report_through_messages(vdaf, m)
        with pytest.raises(VdafError):
            _run_report_through_messages(vdaf, m, ctx_client=b"a", ctx_agg=b"b")


def _invalid_encodings(vdaf: Prio3) -> list[list[int]]:
    """Encoded measurements that the circuit must reject."""
    flp = vdaf.flp
    valid = flp.valid
    q = flp.field.MODULUS
    if isinstance(valid, Count):
        return [[2], [q - 1]]
    if isinstance(valid, Sum):
        return [[2] + [0] * (valid.bits - 1), [0] * (valid.bits - 1) + [q - 1]]
    if isinstance(valid, Histogram):
        two_hot = [0] * valid.length
        two_hot[0] = two_hot[1] = 1
        zero_hot = [0] * valid.length
        a_two = [0] * valid.length
        a_two[2] = 2
        return [two_hot, zero_hot, a_two]
    if isinstance(valid, MultihotCountVec):
        good = valid.encode([True] + [False] * (valid.length - 1))
        wrong_weight = list(good)
        wrong_weight[valid.length] ^= 1  # weight bits say 0
        not_bit = list(good)
        not_bit[1] = 3
        return [wrong_weight, not_bit]
    if isinstance(valid, SumVec):
        enc = valid.encode([0] * valid.length)
        enc[0] = 2
        return [enc]
    # HigherDegree accepts 0, 1, 2 only.
    return [[3], [q - 1]]


def _shard_encoded(vdaf: Prio3, meas: list[int], nonce: bytes, rand: bytes) -> Any:
    """Shard an already-encoded (possibly invalid) measurement, bypassing `encode`."""
    size = vdaf.xof.SEED_SIZE
    seeds = [rand[i : i + size] for i in range(0, len(rand), size)]
    if vdaf.uses_joint_rand:
        return vdaf.shard_with_joint_rand(CTX, meas, nonce, seeds)
    return vdaf.shard_without_joint_rand(CTX, meas, seeds)


@pytest.mark.parametrize("shares", [2, 3])
def test_invalid_measurements_are_rejected(shares: int) -> None:
    """A client that proves an invalid encoding is caught by the aggregators."""
    for vdaf, _ in make_variants(shares):
        for meas in _invalid_encodings(vdaf):
            verify_key = os.urandom(vdaf.VERIFY_KEY_SIZE)
            nonce = os.urandom(16)
            public_share, input_shares = _shard_encoded(vdaf, meas, nonce,
                                                        os.urandom(vdaf.RAND_SIZE))
            vshares = [vdaf.verify_init(verify_key, CTX, j, None, nonce, public_share, s)[1]
                       for j, s in enumerate(input_shares)]
            with pytest.raises(VdafError, match="verifier check failed"):
                vdaf.verifier_shares_to_message(CTX, None, vshares)


def test_tampered_shares_are_rejected() -> None:
    """Changing any field element of the leader's share, or any seed, breaks the proof
    or the joint randomness check."""
    vdaf = Prio3Histogram(2, 5, 2)
    rng = random.Random(3)
    verify_key = os.urandom(32)
    nonce = os.urandom(16)
    public_share, input_shares = vdaf.shard(CTX, 2, nonce, os.urandom(vdaf.RAND_SIZE))
    meas_share, proofs_share, blind = input_shares[0]
    for _ in range(10):
        tampered_meas = list(meas_share)
        i = rng.randrange(len(tampered_meas))
        tampered_meas[i] = (tampered_meas[i] + 1) % Field128.MODULUS
        states, vshares = zip(*[
            vdaf.verify_init(verify_key, CTX, 0, None, nonce, public_share,
                             (tampered_meas, proofs_share, blind)),
            vdaf.verify_init(verify_key, CTX, 1, None, nonce, public_share, input_shares[1]),
        ], strict=True)
        with pytest.raises(VdafError):
            msg = vdaf.verifier_shares_to_message(CTX, None, list(vshares))
            vdaf.verify_next(CTX, states[0], msg)
    bad_public = [public_share[0], bytes(32)]  # type: ignore[index]
    states, vshares = zip(*[vdaf.verify_init(verify_key, CTX, j, None, nonce, bad_public, s)
                            for j, s in enumerate(input_shares)], strict=True)
    # Aggregator 0 corrects only its own part, so it derives other joint randomness than
    # the client did: the proof check (or else the joint randomness check) fails.
    with pytest.raises(VdafError):
        msg = vdaf.verifier_shares_to_message(CTX, None, list(vshares))
        vdaf.verify_next(CTX, states[0], msg)


def test_measurement_errors_are_clear() -> None:
    with pytest.raises(VdafError, match="bucket 11"):
        Prio3Histogram(2, 11, 4).shard(CTX, 11, bytes(16), bytes(128))
    with pytest.raises(VdafError, match="0 or 1"):
        Prio3Count(2).shard(CTX, 2, bytes(16), bytes(64))
    with pytest.raises(VdafError, match="larger than"):
        Prio3Sum(2, 10).shard(CTX, 11, bytes(16), bytes(64))
    with pytest.raises(VdafError, match="weight"):
        Prio3MultihotCountVec(2, 4, 1, 2).shard(CTX, [True, True, False, False], bytes(16),
                                                bytes(128))
    with pytest.raises(VdafError, match="nonce"):
        Prio3Count(2).shard(CTX, 1, bytes(15), bytes(64))
    with pytest.raises(VdafError, match="random bytes"):
        Prio3Count(2).shard(CTX, 1, bytes(16), bytes(63))


# -- codecs ------------------------------------------------------------------------------


@pytest.mark.parametrize("index", range(7))
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_message_codecs_roundtrip_and_strictness(index: int, data: st.DataObject) -> None:
    shares = data.draw(st.integers(2, 4))
    vdaf, gen = make_variants(shares)[index]
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    nonce = data.draw(st.binary(min_size=16, max_size=16))
    rand = data.draw(st.binary(min_size=vdaf.RAND_SIZE, max_size=vdaf.RAND_SIZE))
    verify_key = data.draw(st.binary(min_size=32, max_size=32))
    public_share, input_shares = vdaf.shard(CTX, gen(rng), nonce, rand)

    encoded = vdaf.encode_public_share(public_share)
    assert vdaf.decode_public_share(encoded) == public_share
    with pytest.raises(VdafError):
        vdaf.decode_public_share(encoded + b"\0")
    for j, share in enumerate(input_shares):
        enc = vdaf.encode_input_share(share)
        assert vdaf.decode_input_share(j, enc) == share
        assert vdaf.encode_input_share(vdaf.decode_input_share(j, enc)) == enc
        for bad in (enc[:-1], enc + b"\0"):
            with pytest.raises(VdafError):
                vdaf.decode_input_share(j, bad)
        state, vshare = vdaf.verify_init(verify_key, CTX, j, None, nonce, public_share, share)
        venc = vdaf.encode_verifier_share(vshare)
        assert vdaf.decode_verifier_share(state, venc) == vshare
        with pytest.raises(VdafError):
            vdaf.decode_verifier_share(state, venc + b"\0")
        out = vdaf.verify_next(CTX, state, state[1])
        oenc = vdaf.encode_agg_share(out)
        assert vdaf.decode_agg_share(None, oenc) == out
        with pytest.raises(VdafError):
            vdaf.decode_agg_share(None, oenc[1:])
    assert vdaf.decode_agg_param(vdaf.encode_agg_param(None)) is None
    with pytest.raises(VdafError):
        vdaf.decode_agg_param(b"\0")
    msg_enc = vdaf.encode_verifier_message(None if not vdaf.uses_joint_rand else bytes(32))
    vdaf.decode_verifier_message(None, msg_enc)
    with pytest.raises(VdafError):
        vdaf.decode_verifier_message(None, msg_enc + b"\0")


def test_leader_share_rejects_field_overflow() -> None:
    vdaf = Prio3Count(2)
    _, input_shares = vdaf.shard(CTX, 1, bytes(16), bytes(64))
    enc = bytearray(vdaf.encode_input_share(input_shares[0]))
    enc[0:8] = (2**64 - 1).to_bytes(8, "little")
    with pytest.raises(VdafError, match="overflow"):
        vdaf.decode_input_share(0, bytes(enc))


# -- the fast gadget polynomial equals the draft's literal algorithm ---------------------


def _draft_eval_poly_mul_sum(field: type, wires: list[list[int]]) -> list[int]:
    """ParallelSum(Mul).eval_poly exactly as listed in Appendix A (poly_mul per pair)."""
    lag = Lagrange(field)
    q = field.MODULUS
    out = [0] * (2 * len(wires[0]))
    for a, b in zip(wires[0::2], wires[1::2], strict=True):
        out = [(x + y) % q for x, y in zip(out, lag.poly_mul(a, b), strict=True)]
    return out


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_extend_polys_matches_draft(data: st.DataObject) -> None:
    """Random, sparse, and mostly-constant wires, every path of `extend_polys`."""
    field = data.draw(st.sampled_from([Field64, Field128]))
    q = field.MODULUS
    p = data.draw(st.sampled_from([2, 4, 8, 16, 32, 64]))
    calls = data.draw(st.integers(0, p - 1))
    count = data.draw(st.integers(1, 4))
    elem = st.one_of(st.just(0), st.just(1), st.just(q - 1), st.integers(0, q - 1))
    wires = []
    for _ in range(2 * count):
        kind = data.draw(st.sampled_from(["random", "sparse", "affine"]))
        if kind == "random":
            w = [data.draw(st.integers(0, q - 1)) for _ in range(p)]
        elif kind == "sparse":
            w = [data.draw(elem) if data.draw(st.booleans()) else 0 for _ in range(p)]
        else:
            base = data.draw(elem)
            w = [data.draw(elem)] + [base if data.draw(st.integers(0, 4)) else data.draw(elem)
                                     for _ in range(calls)] + [0] * (p - 1 - calls)
        wires.append(w)
    gadget = ParallelSum(Mul(), count)
    assert gadget.eval_poly(field, wires, calls) == _draft_eval_poly_mul_sum(field, wires)
    # The extension itself on a larger domain (degree-3 gadgets use n = 4p).
    ext = extend_polys(field, wires, 4 * p, calls)
    lag = Lagrange(field)
    for w, e in zip(wires, ext, strict=True):
        assert e == lag.double_evaluations(lag.double_evaluations(w))


def test_poly_eval_gadget_matches_draft() -> None:
    field = Field64
    g = PolyEval([0, 2, -3, 1], 5)
    rng = random.Random(5)
    wire = [rng.randrange(field.MODULUS) for _ in range(8)]
    ours = g.eval_poly(field, [wire])
    # Draft: inv_ntt, ntt to self.n points, evaluate p at each.
    mono = field.inv_ntt(wire, 8)
    points = field.ntt(mono, g.n)
    assert ours == [g.eval(field, [x]) for x in points]


def test_flp_parameters_of_variants() -> None:
    """Proof and verifier lengths from the draft's formulas (Section 7.3.2)."""
    flp = FlpBBCGGI19(Histogram(Field128, 1000, 31))
    # 33 calls -> wire polys of 64, ARITY 62, gadget poly 2*63+1.
    assert flp.PROOF_LEN == 62 + 127
    assert flp.VERIFIER_LEN == 1 + 62 + 1
    assert flp.JOINT_RAND_LEN == 33
    assert flp.QUERY_RAND_LEN == 1 + 2
    flp_sum = FlpBBCGGI19(Sum(Field64, 2**32 - 1))
    assert flp_sum.MEAS_LEN == 32 and flp_sum.PROOF_LEN == 1 + 2 * 63 + 1
