"""Poplar1 and its IDPF (`vdaf/poplar1.py`, `vdaf/idpf.py`; draft-irtf-cfrg-vdaf-20
Section 8): the IDPF's outputs, the batched evaluation against the draft's per-prefix
one, the sketch against malformed reports, `is_valid`, and strict codecs (hypothesis
round trips and refusals). The published vectors are checked in test_vdaf_vectors.py."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.vdaf.field import Field64, Field255
from ppm_reference.vdaf.idpf import (
    FixedKeyAesHash,
    IdpfBBCGGI21,
    IdpfError,
    decode_index,
    encode_index,
    pack_bits,
    unpack_bits,
)
from ppm_reference.vdaf.poplar1 import EVALUATE, REVEAL, FieldVec, Poplar1, Poplar1V08
from ppm_reference.vdaf.vdaf import VdafError, gen_rand, run_vdaf
from ppm_reference.vdaf.xof import XofFixedKeyAes128

CTX = b"test ctx"


def _bits(n: int, width: int) -> tuple[bool, ...]:
    return tuple(bool((n >> (width - 1 - i)) & 1) for i in range(width))


# -- the IDPF -------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=16, max_size=16), st.binary(max_size=40), st.binary(max_size=20),
       st.integers(1, 5))
def test_fixed_key_hash_is_the_draft_xof(seed: bytes, dst: bytes, binder: bytes,
                                         count: int) -> None:
    ours = FixedKeyAesHash(dst, binder).blocks([seed, seed[::-1]], count)
    assert ours == [XofFixedKeyAes128(s, dst, binder).next(16 * count)
                    for s in (seed, seed[::-1])]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 7), st.data())
def test_idpf_is_a_point_function_on_every_level(bits: int, data: st.DataObject) -> None:
    idpf = IdpfBBCGGI21(2, bits)
    alpha = _bits(data.draw(st.integers(0, 2**bits - 1)), bits)
    beta_inner = [[data.draw(st.integers(0, Field64.MODULUS - 1)) for _ in range(2)]
                  for _ in range(bits - 1)]
    beta_leaf = [data.draw(st.integers(0, Field255.MODULUS - 1)) for _ in range(2)]
    nonce = data.draw(st.binary(min_size=16, max_size=16))
    public_share, keys = idpf.gen(alpha, beta_inner, beta_leaf, CTX, nonce, gen_rand(32))
    for level in range(bits):
        prefixes = [_bits(i, level + 1) for i in range(2 ** (level + 1))]
        shares = [idpf.eval(j, public_share, keys[j], level, prefixes, CTX, nonce)
                  for j in range(2)]
        field = idpf.current_field(level)
        for prefix, y0, y1 in zip(prefixes, *shares, strict=True):
            want = (beta_inner[level] if level < bits - 1 else beta_leaf) \
                if prefix == alpha[: level + 1] else [0, 0]
            assert field.vec_add(y0, y1) == want


def test_batched_eval_equals_the_drafts_per_prefix_walk() -> None:
    """The tree walk shares nodes between prefixes; each value must be what evaluating
    that prefix alone (the draft's loop) gives."""
    rng = random.Random(7)
    idpf = IdpfBBCGGI21(2, 9)
    alpha = _bits(0b101100111, 9)
    beta_inner = [[1, rng.randrange(Field64.MODULUS)] for _ in range(8)]
    public_share, keys = idpf.gen(alpha, beta_inner, [1, 5], CTX, bytes(16), bytes(range(32)))
    for level in (0, 3, 8):
        prefixes = sorted({_bits(rng.randrange(2 ** (level + 1)), level + 1)
                           for _ in range(6)} | {alpha[: level + 1]})
        for j in range(2):
            together = idpf.eval(j, public_share, keys[j], level, prefixes, CTX, bytes(16))
            alone = [idpf.eval(j, public_share, keys[j], level, [p], CTX, bytes(16))[0]
                     for p in prefixes]
            assert together == alone


def test_idpf_refuses_bad_input() -> None:
    idpf = IdpfBBCGGI21(2, 4)
    public_share, keys = idpf.gen(_bits(3, 4), [[1, 1]] * 3, [1, 1], CTX, bytes(16),
                                  bytes(32))
    cases = [
        (lambda: idpf.gen(_bits(3, 3), [[1, 1]] * 3, [1, 1], CTX, bytes(16), bytes(32)),
         "incorrect alpha length"),
        (lambda: idpf.gen(_bits(3, 4), [[1, 1]] * 2, [1, 1], CTX, bytes(16), bytes(32)),
         "incorrect beta_inner length"),
        (lambda: idpf.gen(_bits(3, 4), [[1, 1]] * 3, [1], CTX, bytes(16), bytes(32)),
         "length of beta"),
        (lambda: idpf.eval(2, public_share, keys[0], 0, [(True,)], CTX, bytes(16)),
         "aggregator id"),
        (lambda: idpf.eval(0, public_share, keys[0], 4, [(True,) * 5], CTX, bytes(16)),
         "level out of range"),
        (lambda: idpf.eval(0, public_share, keys[0], 1, [(True, False)] * 2, CTX, bytes(16)),
         "unique"),
        (lambda: idpf.eval(0, public_share, keys[0], 1, [(True,)], CTX, bytes(16)),
         "incorrect prefix length"),
    ]
    for call, message in cases:
        with pytest.raises(IdpfError, match=message):
            call()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), max_size=40))
def test_pack_bits_round_trips(bits: list[bool]) -> None:
    packed = pack_bits(bits)
    assert len(packed) == (len(bits) + 7) // 8
    assert unpack_bits(packed, len(bits)) == bits
    if len(bits) % 8:
        with pytest.raises(IdpfError, match="trailing bits"):
            unpack_bits(packed[:-1] + bytes([packed[-1] | 0x80]), len(bits))
    with pytest.raises(IdpfError, match="wrong length"):
        unpack_bits(packed + b"\x00", len(bits))


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=12))
def test_index_encoding_round_trips_and_keeps_prefixes(data: bytes) -> None:
    index = encode_index(data)
    assert len(index) == 8 * len(data) and decode_index(index) == data
    assert encode_index(data[:1]) == index[:8] or not data


# -- Poplar1: correctness and rejection -----------------------------------------------------


def test_poplar1_counts_prefixes_at_every_level() -> None:
    rng = random.Random(1)
    vdaf = Poplar1(6)
    measurements = [_bits(x, 6) for x in [0b110100] * 3 + [0b000111] * 2 + [0b110101]]
    measurements += [_bits(rng.randrange(64), 6) for _ in range(3)]
    key = gen_rand(vdaf.VERIFY_KEY_SIZE)
    for level in (0, 2, 5):
        prefixes = tuple(_bits(i, level + 1) for i in range(2 ** (level + 1)))
        got = run_vdaf(vdaf, key, (level, prefixes), CTX, measurements)
        want = [sum(m[: level + 1] == p for m in measurements) for p in prefixes]
        assert got == want


def _prepare(vdaf: Poplar1, public_share: object, shares: list[object], agg_param: object,
             nonce: bytes, key: bytes) -> list[int]:
    states, round0 = [], []
    for j in range(2):
        state, share = vdaf.verify_init(key, CTX, j, agg_param, nonce, public_share,
                                        shares[j])
        states.append(state)
        round0.append(share)
    message = vdaf.verifier_shares_to_message(CTX, agg_param, round0)
    round1 = []
    for j in range(2):
        states[j], share = vdaf.verify_next(CTX, states[j], message)
        round1.append(share)
    final = vdaf.verifier_shares_to_message(CTX, agg_param, round1)
    outs = [vdaf.verify_next(CTX, states[j], final) for j in range(2)]
    return vdaf.unshard(agg_param, [vdaf.agg_update(agg_param, vdaf.agg_init(agg_param), o)
                                    for o in outs], 1)


@pytest.mark.parametrize("level", [0, 2, 3])
def test_sketch_rejects_a_two_hot_or_scaled_idpf(level: int) -> None:
    """A Client that programs data value 2 (or a second path) is caught by the sketch at
    the level; the honest report verifies."""
    vdaf = Poplar1(4)
    nonce, key = gen_rand(16), gen_rand(32)
    prefixes = tuple(_bits(i, level + 1) for i in range(2 ** (level + 1)))
    agg_param = (level, prefixes)
    alpha = _bits(0b1011, 4)
    public_share, shares = vdaf.shard(CTX, alpha, nonce, gen_rand(vdaf.RAND_SIZE))
    assert sum(_prepare(vdaf, public_share, list(shares), agg_param, nonce, key)) == 1
    # Re-run the IDPF with data value 2 at every level, keeping the correlation shares.
    beta_inner = [[2, 1]] * 3
    bad_public, keys = vdaf.idpf.gen(alpha, beta_inner, [2, 1], CTX, nonce, gen_rand(32))
    bad = [(keys[j], *shares[j][1:]) for j in range(2)]
    with pytest.raises(VdafError, match="sketch verification failed"):
        _prepare(vdaf, bad_public, bad, agg_param, nonce, key)


def test_tampered_correlation_share_is_rejected() -> None:
    vdaf = Poplar1(3)
    nonce, key = gen_rand(16), gen_rand(32)
    public_share, (s0, s1) = vdaf.shard(CTX, (True, False, True), nonce, gen_rand(128))
    leaf = list(s0[3])
    leaf[1] = (leaf[1] + 1) % Field255.MODULUS
    agg_param = (2, ((True, False, True),))
    with pytest.raises(VdafError, match="sketch verification failed"):
        _prepare(vdaf, public_share, [(s0[0], s0[1], s0[2], leaf), s1], agg_param, nonce, key)


def test_shard_refuses_bad_input() -> None:
    vdaf = Poplar1(4)
    with pytest.raises(VdafError, match="4 booleans"):
        vdaf.shard(CTX, (True,) * 3, bytes(16), bytes(vdaf.RAND_SIZE))
    with pytest.raises(VdafError, match="4 booleans"):
        vdaf.shard(CTX, (1, 0, 1, 0), bytes(16), bytes(vdaf.RAND_SIZE))  # type: ignore[arg-type]
    with pytest.raises(VdafError, match="nonce"):
        vdaf.shard(CTX, (True,) * 4, bytes(15), bytes(vdaf.RAND_SIZE))
    with pytest.raises(VdafError, match="random bytes"):
        vdaf.shard(CTX, (True,) * 4, bytes(16), bytes(vdaf.RAND_SIZE - 1))


def test_is_valid() -> None:
    vdaf = Poplar1(8)
    f, t = False, True
    assert vdaf.is_valid((0, ((f,), (t,))), [])
    assert not vdaf.is_valid((0, ((t,), (f,))), [])          # unsorted
    assert not vdaf.is_valid((0, ((f,), (f,))), [])          # repeated
    first = (0, ((t,),))
    assert vdaf.is_valid((1, ((t, f), (t, t))), [first])
    assert not vdaf.is_valid((1, ((f, t), (t, t))), [first])  # not under a previous prefix
    assert not vdaf.is_valid((0, ((t,),)), [first])           # level did not increase
    assert vdaf.is_valid((5, ((t, f, f, f, f, t),)), [first, (1, ((t, f),))])
    assert not vdaf.is_valid((5, ((t, t, f, f, f, t),)), [first, (1, ((t, f),))])


# -- codecs ---------------------------------------------------------------------------------


@st.composite
def agg_params(draw: st.DrawFn, bits: int = 20) -> tuple[int, tuple[tuple[bool, ...], ...]]:
    level = draw(st.integers(0, bits - 1))
    values = draw(st.lists(st.integers(0, 2 ** (level + 1) - 1), max_size=10, unique=True))
    return (level, tuple(_bits(v, level + 1) for v in sorted(values)))


@settings(max_examples=100, deadline=None)
@given(agg_params())
def test_agg_param_round_trips_strictly(agg_param: tuple[int, tuple[tuple[bool, ...], ...]]
                                       ) -> None:
    vdaf = Poplar1(20)
    encoded = vdaf.encode_agg_param(agg_param)
    level, prefixes = agg_param
    assert len(encoded) == 6 + len(prefixes) * ((level + 8) // 8)
    assert vdaf.decode_agg_param(encoded) == agg_param
    with pytest.raises(VdafError):
        vdaf.decode_agg_param(encoded + b"\x00")
    if prefixes:
        with pytest.raises(VdafError):
            vdaf.decode_agg_param(encoded[:-1])
        if (level + 1) % 8:
            with pytest.raises(VdafError, match="trailing bits"):
                vdaf.decode_agg_param(encoded[:-1] + bytes([encoded[-1] | 1]))
    with pytest.raises(VdafError, match="out of range"):
        Poplar1(level + 1 if level < 19 else 1).decode_agg_param(
            (19).to_bytes(2, "big") + encoded[2:])


def test_agg_param_published_encoding() -> None:
    # Poplar1_5 of the published vectors: level 10, four 11-bit prefixes.
    vdaf = Poplar1(11)
    level, prefixes = vdaf.decode_agg_param(bytes.fromhex("000a000000040000c800c820ffe0"))
    assert level == 10
    assert prefixes[1] == (True, True, False, False, True, False, False, False, False,
                           False, False)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 12), st.sampled_from([Poplar1, Poplar1V08]), st.data())
def test_report_shares_round_trip_strictly(bits: int, cls: type[Poplar1],
                                           data: st.DataObject) -> None:
    vdaf = cls(bits)
    ctx = CTX if cls is Poplar1 else b""  # VDAF-08 has no application context
    alpha = tuple(data.draw(st.lists(st.booleans(), min_size=bits, max_size=bits)))
    public_share, shares = vdaf.shard(ctx, alpha, gen_rand(16), gen_rand(vdaf.RAND_SIZE))
    encoded = vdaf.encode_public_share(public_share)
    assert vdaf.decode_public_share(encoded) == public_share
    for bad in (encoded[:-1], encoded + b"\x00"):
        with pytest.raises(VdafError, match="public share must be"):
            vdaf.decode_public_share(bad)
    if (2 * bits) % 8:  # padding bits of the packed control bits
        with pytest.raises(VdafError, match="trailing bits"):
            vdaf.decode_public_share(bytes([encoded[0] | 0x80]) + encoded[1:]
                                     if 2 * bits < 8 else
                                     encoded[: (2 * bits + 7) // 8 - 1]
                                     + bytes([encoded[(2 * bits + 7) // 8 - 1] | 0x80])
                                     + encoded[(2 * bits + 7) // 8:])
    # A leaf payload element >= p.
    with pytest.raises(VdafError, match="modulus"):
        vdaf.decode_public_share(encoded[:-32] + b"\xff" * 32)
    for j in range(2):
        share_bytes = vdaf.encode_input_share(shares[j])
        assert vdaf.decode_input_share(j, share_bytes) == shares[j]
        with pytest.raises(VdafError, match="input share must be"):
            vdaf.decode_input_share(j, share_bytes + b"\x00")
        with pytest.raises(VdafError, match="modulus"):
            vdaf.decode_input_share(j, share_bytes[:-32] + b"\xff" * 32)
    with pytest.raises(VdafError, match="agg_id"):
        vdaf.decode_input_share(2, vdaf.encode_input_share(shares[0]))


def test_verification_messages_round_trip_and_refuse_bad_lengths() -> None:
    for bits, level in ((4, 1), (4, 3)):  # an inner level (Field64), the leaves (Field255)
        vdaf = Poplar1(bits)
        field = vdaf.idpf.current_field(level)
        agg_param = (level, tuple(itertools.islice(
            (_bits(i, level + 1) for i in range(2 ** (level + 1))), 3)))
        nonce, key = gen_rand(16), gen_rand(32)
        public_share, shares = vdaf.shard(CTX, (True,) * bits, nonce, gen_rand(128))
        state, share = vdaf.verify_init(key, CTX, 0, agg_param, nonce, public_share,
                                        shares[0])
        assert state[0] == EVALUATE and isinstance(share, FieldVec) and share.field is field
        encoded = vdaf.encode_verifier_share(share)
        assert len(encoded) == 3 * field.ENCODED_SIZE
        assert vdaf.decode_verifier_share(state, encoded) == share
        assert vdaf.decode_verifier_message(state, encoded) == share
        with pytest.raises(VdafError, match="must be"):
            vdaf.decode_verifier_share(state, encoded[:-1])
        assert vdaf.decode_verify_state(vdaf.encode_verify_state(state)) == state
        state2, share2 = vdaf.verify_next(CTX, state, share)
        assert state2[0] == REVEAL
        assert vdaf.decode_verifier_share(state2, vdaf.encode_verifier_share(share2)) == share2
        assert vdaf.decode_verifier_message(state2, b"") is None
        with pytest.raises(VdafError, match="empty"):
            vdaf.decode_verifier_message(state2, encoded)
        agg = vdaf.agg_init(agg_param)
        encoded_agg = vdaf.encode_agg_share(agg)
        assert len(encoded_agg) == 3 * field.ENCODED_SIZE
        assert vdaf.decode_agg_share(agg_param, encoded_agg) == agg
        with pytest.raises(VdafError, match="aggregate share"):
            vdaf.decode_agg_share(agg_param, encoded_agg + bytes(field.ENCODED_SIZE))
        with pytest.raises(VdafError, match="FieldVec"):
            vdaf.encode_agg_share([0, 0, 0])


# -- VDAF-08's Poplar1 (draft-irtf-cfrg-vdaf-08 Section 8), for DAP-09 -----------------------


def test_poplar1_v08_counts_and_takes_integer_measurements() -> None:
    vdaf = Poplar1V08(5)
    assert (vdaf.ID, vdaf.RAND_SIZE, vdaf.VERIFY_KEY_SIZE) == (0x1000, 80, 16)
    measurements: list[object] = [0b10110, 0b10110, _bits(0b00111, 5), 0b11111]
    key = gen_rand(16)
    level_2 = (2, tuple(_bits(i, 3) for i in range(8)))
    assert run_vdaf(vdaf, key, level_2, b"", measurements) == [0, 1, 0, 0, 0, 2, 0, 1]
    with pytest.raises(VdafError, match="application context"):
        run_vdaf(vdaf, key, level_2, b"ctx", measurements)
    with pytest.raises(VdafError, match="below 2"):
        vdaf.shard(b"", 32, bytes(16), bytes(80))
    unsorted = (0, ((True,), (False,)))
    public_share, shares = vdaf.shard(b"", 3, bytes(16), bytes(80))
    with pytest.raises(VdafError, match="unique and sorted"):
        vdaf.verify_init(key, b"", 0, unsorted, bytes(16), public_share, shares[0])


def test_poplar1_v08_is_valid_only_forbids_a_level_twice() -> None:
    vdaf = Poplar1V08(8)
    f, t = False, True
    first = (2, ((t, f, f),))
    assert vdaf.is_valid((0, ((f,), (t,))), [first])  # lower levels are allowed in 08
    assert not vdaf.is_valid((2, ((f, f, f),)), [first])


@settings(max_examples=100, deadline=None)
@given(agg_params())
def test_poplar1_v08_agg_param_round_trips_strictly(
        agg_param: tuple[int, tuple[tuple[bool, ...], ...]]) -> None:
    vdaf = Poplar1V08(20)
    encoded = vdaf.encode_agg_param(agg_param)
    level, prefixes = agg_param
    assert len(encoded) == 6 + ((level + 1) * len(prefixes) + 7) // 8
    assert vdaf.decode_agg_param(encoded) == agg_param
    assert vdaf.agg_param_from_json(vdaf.agg_param_to_json(agg_param)) == agg_param
    with pytest.raises(VdafError):
        vdaf.decode_agg_param(encoded + b"\x00")
    if ((level + 1) * len(prefixes)) % 8:
        with pytest.raises(VdafError, match="trailing bits"):
            vdaf.decode_agg_param(encoded[:6] + bytes([encoded[6] | 0x80]) + encoded[7:])


def test_poplar1_v08_published_agg_param() -> None:
    # The JSON [3, [1, 3, 5, 7, 9, 13, 15]] of the published Poplar1_3 (VDAF-08).
    vdaf = Poplar1V08(4)
    param = vdaf.agg_param_from_json([3, [1, 3, 5, 7, 9, 13, 15]])
    assert param[1][5] == (True, True, False, True)
    assert vdaf.agg_param_to_json(vdaf.decode_agg_param(vdaf.encode_agg_param(param))) == \
        [3, [1, 3, 5, 7, 9, 13, 15]]
