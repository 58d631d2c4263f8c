"""VDAF-08 (draft-irtf-cfrg-vdaf-08), the wire version of the dap-09 interop profile.

- every published VDAF-08 vector (Prio3, Poplar1, IdpfPoplar, XOF) passes `check`;
- `generate --vdaf-version 08` reproduces the published files byte for byte, and the
  committed `test_vectors/vdaf-08` is that output;
- end to end for every VDAF-08 variant with 2..5 Aggregators, through every codec and
  through the ping-pong topology; invalid measurements and tampered shares rejected;
- the VDAF-08 message codecs round-trip (hypothesis) and are strict;
- the profile data: RAND_SIZE, seed order, XOF framing, codepoints, no ctx;
- FlpGeneric's proof is the coefficient form of draft-20's values.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.cli import main
from ppm_reference.vdaf import vectors
from ppm_reference.vdaf.circuits import Count, Histogram08, MultiHotHistogram, Sum08, SumVec08
from ppm_reference.vdaf.field import Field64, Field128, NttField, poly_eval
from ppm_reference.vdaf.flp import FlpBBCGGI19, FlpGeneric, run_flp, wire_poly_len
from ppm_reference.vdaf.ping_pong import (
    Continued,
    Finished,
    FinishedWithOutbound,
    ping_pong_helper_init,
    ping_pong_leader_continued,
    ping_pong_leader_init,
)
from ppm_reference.vdaf.prio3 import (
    Prio3,
    Prio3Count,
    Prio3CountV08,
    Prio3Histogram,
    Prio3HistogramV08,
    Prio3MultiHotHistogramV08,
    Prio3SumV08,
    Prio3SumVecV08,
    Prio3SumVecWithMultiproofV08,
)
from ppm_reference.vdaf.profiles import VDAF_08, VDAF_18, Prio3Sharding
from ppm_reference.vdaf.vdaf import VdafError, run_vdaf
from ppm_reference.vdaf.vectors import (
    STANDARD_SPECS,
    FileResult,
    VectorSpec,
    check_file,
    dumps,
    generate_vector,
    generate_xof_vector,
    instance_name_from_path,
)
from ppm_reference.vdaf.xof import XofFixedKeyAes128, XofTurboShake128

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ("test-vectors", "vdaf-08")
PUBLISHED_DIR = PROJECT_ROOT.parent / "shared" / Path(*PUBLISHED)
OWN_DIR = PROJECT_ROOT / "test_vectors" / "vdaf-08"
STANDARD = STANDARD_SPECS[8]
XOF_FILES = ("XofTurboShake128.json", "XofFixedKeyAes128.json")
V = 8  # the version number as the tool takes it (`--vdaf-version 08`)
AnyPrio3 = Prio3[Any, Any]


def _published_names(pattern: str) -> list[str]:
    if PUBLISHED_DIR.is_dir():
        return sorted(p.name for p in PUBLISHED_DIR.glob(pattern))
    # One placeholder, so that the test shows up as skipped by the `shared_dir` fixture.
    return ["(published vectors absent)"]


def _explain(result: FileResult) -> str:
    lines = [f"{result.path}: {result.status} {result.reason}"]
    lines += [f"  {op.describe()}: {op.detail}" for op in result.failed_operations]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# The published vectors.


@pytest.mark.parametrize("name", _published_names("*.json"))
def test_published_file_checks(shared_dir: Path, name: str) -> None:
    path = shared_dir.joinpath(*PUBLISHED, name)
    instance = instance_name_from_path(path)
    result = check_file(path, version=V)
    assert not vectors.is_out_of_scope(instance, V)
    assert result.status == "pass", _explain(result)
    # Each file's implied flow was replayed, every step compared with the file.
    assert result.operations and all(op.ok and op.expect_success for op in result.operations)


def test_every_published_prio3_file_passes(shared_dir: Path) -> None:
    names = sorted(p.name for p in shared_dir.joinpath(*PUBLISHED).glob("Prio3*.json"))
    assert len(names) == 11
    results = [check_file(shared_dir.joinpath(*PUBLISHED, n), version=V) for n in names]
    assert [r.path for r in results if r.status != "pass"] == []


def test_check_command_on_the_published_directory(
    shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = shared_dir.joinpath(*PUBLISHED)
    assert main(["vdaf", "vectors", "check", "--vdaf-version", "08", str(directory)]) == 0
    out = capsys.readouterr().out.splitlines()
    # 11 Prio3, 4 Poplar1, the IdpfPoplar and 2 XOF files pass.
    assert out[-1] == "18 passed, 0 failed, 0 skipped"


def test_draft20_tool_rejects_vdaf08_files(shared_dir: Path) -> None:
    """Without `--vdaf-version 08` the VDAF-08 schema and bytes are not accepted."""
    result = check_file(shared_dir.joinpath(*PUBLISHED, "Prio3Count_0.json"))
    assert result.status == "fail"
    result = check_file(shared_dir.joinpath(*PUBLISHED, "XofTurboShake128.json"))
    assert result.status == "fail"


# ---------------------------------------------------------------------------------------
# Generation.


@pytest.mark.parametrize("spec", STANDARD, ids=[s.file_name() for s in STANDARD])
def test_generate_is_byte_identical_to_published(shared_dir: Path, spec: VectorSpec) -> None:
    published = shared_dir.joinpath(*PUBLISHED, spec.file_name()).read_bytes()
    assert dumps(generate_vector(spec, V)).encode() == published


@pytest.mark.parametrize("name", XOF_FILES)
def test_generate_xof_is_byte_identical_to_published(shared_dir: Path, name: str) -> None:
    published = shared_dir.joinpath(*PUBLISHED, name).read_bytes()
    assert dumps(generate_xof_vector(name.removesuffix(".json"), V)).encode() == published


def test_standard_set_is_the_published_set(shared_dir: Path) -> None:
    published = {p.name for p in shared_dir.joinpath(*PUBLISHED).glob("*.json")}
    assert set(vectors.standard_file_names(V)) == published


def test_generate_idpf_poplar_is_byte_identical_to_published(shared_dir: Path) -> None:
    published = shared_dir.joinpath(*PUBLISHED, "IdpfPoplar_0.json").read_bytes()
    assert dumps(vectors.generate_idpf_vector(version=V)).encode() == published


def test_generate_command_writes_the_committed_set(tmp_path: Path) -> None:
    assert main(["vdaf", "vectors", "generate", "--vdaf-version", "08",
                 "--out", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(vectors.standard_file_names(V))
    assert written == sorted(p.name for p in OWN_DIR.glob("*.json"))
    for path in tmp_path.iterdir():
        assert path.read_bytes() == (OWN_DIR / path.name).read_bytes(), path.name


def test_committed_vectors_check(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in OWN_DIR.glob("*.json"))
    assert main(["vdaf", "vectors", "check", "--vdaf-version", "08", *files]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{len(files)} passed, 0 failed, 0 skipped"


def test_generate_one_vector_with_vdaf08_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        ["--vdaf", "Prio3Sum", "--bits", "4", "--measurements", "15", "0", "7"],
        ["--vdaf", "Prio3SumVec", "--shares", "3", "--length", "3", "--bits", "2",
         "--chunk-length", "2"],
        ["--vdaf", "Prio3MultiHotHistogram", "--length", "5", "--max-count", "2",
         "--chunk-length", "2", "--measurements", "[1,0,0,1,0]", "[0,0,0,0,0]"],
    ):
        name = f"{argv[1]}_custom.json"
        assert main(["vdaf", "vectors", "generate", "--vdaf-version", "08",
                     "--out", str(tmp_path), *argv]) == 0, capsys.readouterr()
        doc = json.loads((tmp_path / name).read_text())
        assert "ctx" not in doc and "operations" not in doc and doc["agg_param"] is None
        assert check_file(tmp_path / name, version=V).status == "pass"
    # A draft-20 parameter is refused by a VDAF-08 instance, and vice versa.
    code = main(["vdaf", "vectors", "generate", "--vdaf-version", "08", "--out", str(tmp_path),
                 "--vdaf", "Prio3Sum", "--max-measurement", "5"])
    assert code == 2 and "takes no max_measurement" in capsys.readouterr().err
    code = main(["vdaf", "vectors", "generate", "--out", str(tmp_path),
                 "--vdaf", "Prio3Sum", "--bits", "5"])
    assert code == 2 and "takes no bits" in capsys.readouterr().err


def test_tampered_vdaf08_file_fails(shared_dir: Path, tmp_path: Path) -> None:
    doc = json.loads(shared_dir.joinpath(*PUBLISHED, "Prio3Histogram_1.json").read_text())
    share = doc["prep"][0]["prep_shares"][0][2]
    doc["prep"][0]["prep_shares"][0][2] = share[:-1] + ("1" if share[-1] != "1" else "2")
    path = tmp_path / "Prio3Histogram_1.json"
    path.write_text(dumps(doc))
    result = check_file(path, version=V)
    assert result.status == "fail"
    # The last byte is in Aggregator 2's joint randomness part: its verify_init output
    # differs, and so does the prep message combined from the file's prep shares.
    failed, message = result.failed_operations
    assert failed.operation == "verify_init" and failed.aggregator_id == 2
    assert "prep[0].prep_shares[0][2] mismatch" in failed.detail
    assert message.operation == "verifier_shares_to_message"
    assert "prep[0].prep_messages[0] mismatch" in message.detail
    # An output share element is compared element by element.
    doc = json.loads(shared_dir.joinpath(*PUBLISHED, "Prio3SumVec_1.json").read_text())
    doc["prep"][1]["out_shares"][0][2] = "00" * 16
    path.write_text(dumps(doc))
    result = check_file(path, vdaf_name="Prio3SumVec", version=V)
    assert {op.operation for op in result.failed_operations} == {"verify_next"}
    # A VDAF-08 file has no operations to replay: listing some is a schema error.
    doc["operations"] = []
    path.write_text(dumps(doc))
    assert "no 'operations'" in check_file(path, vdaf_name="Prio3SumVec", version=V).reason


# ---------------------------------------------------------------------------------------
# End to end.


def _bits(r: random.Random, length: int, max_count: int) -> list[int]:
    ones = set(r.sample(range(length), r.randint(0, max_count)))
    return [int(i in ones) for i in range(length)]


def make_variants08(shares: int) -> list[tuple[AnyPrio3, Any, Any]]:
    """Each VDAF-08 variant, a generator of random valid measurements, and the
    aggregate function."""
    def vec_sum(ms: list[list[int]]) -> list[int]:
        return [sum(col) for col in zip(*ms, strict=True)]

    def histogram(length: int) -> Any:
        return lambda ms: [sum(1 for m in ms if m == i) for i in range(length)]

    return [
        (Prio3CountV08(shares), lambda r: r.randint(0, 1), sum),
        (Prio3SumV08(shares, 8), lambda r: r.randrange(256), sum),
        (Prio3SumV08(shares, 1), lambda r: r.randint(0, 1), sum),
        (Prio3SumVecV08(shares, 7, 3, 4), lambda r: [r.randrange(8) for _ in range(7)],
         vec_sum),
        (Prio3HistogramV08(shares, 11, 4), lambda r: r.randrange(11), histogram(11)),
        (Prio3HistogramV08(shares, 1, 1), lambda r: 0, histogram(1)),
        (Prio3MultiHotHistogramV08(shares, 9, 4, 3), lambda r: _bits(r, 9, 4), vec_sum),
        (Prio3MultiHotHistogramV08(shares, 4, 4, 2), lambda r: _bits(r, 4, 4), vec_sum),
        (Prio3SumVecWithMultiproofV08(shares, Field64, 3, 4, 2, 3),
         lambda r: [r.randrange(4) for _ in range(4)], vec_sum),
        (Prio3SumVecWithMultiproofV08(shares, Field128, 1, 2, 5, 1),
         lambda r: [r.randrange(32) for _ in range(2)], vec_sum),
    ]


def _through_messages(vdaf: AnyPrio3, measurement: Any) -> list[list[int]]:
    """One report with every message encoded and decoded on the way; returns the output
    shares (themselves round-tripped through their encoding)."""
    verify_key = os.urandom(vdaf.VERIFY_KEY_SIZE)
    nonce = os.urandom(vdaf.NONCE_SIZE)
    public_share, input_shares = vdaf.shard(b"", measurement, nonce, os.urandom(vdaf.RAND_SIZE))
    ps = vdaf.decode_public_share(vdaf.encode_public_share(public_share))
    states, shares = [], []
    for j, share in enumerate(input_shares):
        decoded = vdaf.decode_input_share(j, vdaf.encode_input_share(share))
        state, vshare = vdaf.verify_init(verify_key, b"", j, None, nonce, ps, decoded)
        state = vdaf.decode_verify_state(vdaf.encode_verify_state(state))
        states.append(state)
        shares.append(vdaf.decode_verifier_share(state, vdaf.encode_verifier_share(vshare)))
    message = vdaf.verifier_shares_to_message(b"", None, shares)
    message = vdaf.decode_verifier_message(states[0], vdaf.encode_verifier_message(message))
    outs = [vdaf.verify_next(b"", s, message) for s in states]
    return [vdaf.decode_out_share(None, vdaf.encode_out_share(o)) for o in outs]


@pytest.mark.parametrize("shares", [2, 3, 4, 5])
def test_end_to_end_every_variant(shares: int) -> None:
    """shard -> verify -> aggregate -> unshard over random valid measurements."""
    rng = random.Random(800 + shares)
    for vdaf, gen, aggregate in make_variants08(shares):
        assert vdaf.PROFILE is VDAF_08
        measurements = [gen(rng) for _ in range(3)]
        result = run_vdaf(vdaf, os.urandom(vdaf.VERIFY_KEY_SIZE), None, b"", measurements)
        assert result == aggregate(measurements), type(vdaf).__name__
        # Again with every message through its codec, aggregated share by share.
        agg_shares = [vdaf.agg_init(None) for _ in range(shares)]
        for m in measurements:
            for j, out in enumerate(_through_messages(vdaf, m)):
                agg_shares[j] = vdaf.agg_update(None, agg_shares[j], out)
        agg_shares = [vdaf.decode_agg_share(None, vdaf.encode_agg_share(a)) for a in agg_shares]
        assert vdaf.unshard(None, agg_shares, len(measurements)) == aggregate(measurements)


@pytest.mark.parametrize("index", range(len(make_variants08(2))))
def test_ping_pong_every_variant(index: int) -> None:
    """Two Aggregators over the ping-pong topology (the same in VDAF-08, Section 5.8)."""
    vdaf, gen, aggregate = make_variants08(2)[index]
    measurement = gen(random.Random(index))
    key = os.urandom(vdaf.VERIFY_KEY_SIZE)
    nonce = os.urandom(16)
    public_share, (leader_share, helper_share) = vdaf.shard(
        b"", measurement, nonce, os.urandom(vdaf.RAND_SIZE))
    ps = vdaf.encode_public_share(public_share)
    leader = ping_pong_leader_init(vdaf, key, b"", b"", nonce, ps,
                                   vdaf.encode_input_share(leader_share))
    assert isinstance(leader, Continued)
    helper = ping_pong_helper_init(vdaf, key, b"", b"", nonce, ps,
                                   vdaf.encode_input_share(helper_share), leader.outbound)
    assert isinstance(helper, FinishedWithOutbound)
    final = ping_pong_leader_continued(vdaf, b"", b"", leader, helper.outbound)
    assert isinstance(final, Finished)
    assert vdaf.unshard(None, [final.out_share, helper.out_share], 1) == \
        aggregate([measurement])


# ---------------------------------------------------------------------------------------
# Invalid measurements and tampered shares.


def test_out_of_range_measurements_are_rejected_by_shard() -> None:
    nonce = bytes(16)
    cases: list[tuple[AnyPrio3, Any, str]] = [
        (Prio3CountV08(2), 2, "0 or 1"),
        (Prio3SumV08(2, 8), 256, "does not fit in 8 bits"),
        (Prio3SumV08(2, 8), -1, "does not fit"),
        (Prio3SumVecV08(2, 3, 4, 2), [1, 2, 16], "does not fit in 4 bits"),
        (Prio3SumVecV08(2, 3, 4, 2), [1, 2], "length 2"),
        (Prio3HistogramV08(2, 4, 2), 4, "not in"),
        (Prio3MultiHotHistogramV08(2, 4, 2, 2), [1, 1, 1, 0], "more than max_count"),
        (Prio3MultiHotHistogramV08(2, 4, 2, 2), [2, 0, 0, 0], "0 or 1"),
        (Prio3MultiHotHistogramV08(2, 4, 2, 2), [1, 0, 0], "length 3"),
    ]
    for vdaf, measurement, message in cases:
        with pytest.raises(VdafError, match=message):
            vdaf.shard(b"", measurement, nonce, bytes(vdaf.RAND_SIZE))


def _invalid_encodings(vdaf: AnyPrio3) -> list[list[int]]:
    """Encoded measurements that are not valid, for each VDAF-08 circuit."""
    valid = vdaf.flp.valid
    q = vdaf.field.MODULUS
    if isinstance(valid, Count):
        return [[2], [q - 1]]
    if isinstance(valid, Sum08):
        enc = valid.encode(0)
        enc[-1] = 2
        return [enc]
    if isinstance(valid, SumVec08):
        enc = valid.encode([0] * valid.length)
        enc[-1] = 3
        return [enc]
    if isinstance(valid, Histogram08):
        a_two = [0] * valid.length
        a_two[0] = 2
        out = [[0] * valid.length, a_two]
        if valid.length > 1:
            out.append([1, 1] + [0] * (valid.length - 2))
        return out
    assert isinstance(valid, MultiHotHistogram)
    good = valid.encode([1] + [0] * (valid.length - 1))
    wrong_count = list(good)
    wrong_count[valid.length] ^= 1  # the count bits disagree with the weight
    not_bit = list(good)
    not_bit[1] = 3
    out = [wrong_count, not_bit]
    if valid.max_count < valid.length:
        # max_count + 1 ones: offset + weight needs one bit more than there is.
        too_many = [1] * (valid.max_count + 1) + [0] * (valid.length - valid.max_count - 1)
        out.append(too_many + [((valid.offset + valid.max_count + 1) >> i) & 1
                               for i in range(valid.bits_for_count)])
    return out


def _shard_encoded(vdaf: AnyPrio3, meas: list[int], nonce: bytes, rand: bytes) -> Any:
    """Shard an already-encoded (possibly invalid) measurement, bypassing `encode`."""
    size = vdaf.xof.SEED_SIZE
    seeds = [rand[i : i + size] for i in range(0, len(rand), size)]
    if vdaf.uses_joint_rand:
        return vdaf.shard_with_joint_rand(b"", meas, nonce, seeds)
    return vdaf.shard_without_joint_rand(b"", meas, seeds)


@pytest.mark.parametrize("shares", [2, 3])
def test_invalid_measurements_are_rejected(shares: int) -> None:
    """A Client that proves an invalid encoding is caught by the Aggregators."""
    variants = [v for v, _, _ in make_variants08(shares)]
    variants.append(Prio3MultiHotHistogramV08(shares, 6, 2, 3))  # 2 bits, offset 1
    for vdaf in variants:
        for meas in _invalid_encodings(vdaf):
            verify_key = os.urandom(vdaf.VERIFY_KEY_SIZE)
            nonce = os.urandom(16)
            public_share, input_shares = _shard_encoded(vdaf, meas, nonce,
                                                        os.urandom(vdaf.RAND_SIZE))
            vshares = [vdaf.verify_init(verify_key, b"", j, None, nonce, public_share, s)[1]
                       for j, s in enumerate(input_shares)]
            with pytest.raises(VdafError, match="verifier check failed"):
                vdaf.verifier_shares_to_message(b"", None, vshares)


def test_tampered_shares_are_rejected() -> None:
    vdaf = Prio3HistogramV08(3, 5, 2)
    key = os.urandom(16)
    nonce = os.urandom(16)
    public_share, input_shares = vdaf.shard(b"", 3, nonce, os.urandom(vdaf.RAND_SIZE))
    assert public_share is not None

    def verify(shares: list[Any], ps: Any = public_share) -> Any:
        out = [vdaf.verify_init(key, b"", j, None, nonce, ps, s) for j, s in enumerate(shares)]
        message = vdaf.verifier_shares_to_message(b"", None, [v for _, v in out])
        return [vdaf.verify_next(b"", state, message) for state, _ in out]

    verify(input_shares)
    meas, proofs, blind = input_shares[0]
    q = vdaf.field.MODULUS
    bad_meas = [(meas[0] + 1) % q, *meas[1:]]
    with pytest.raises(VdafError):
        verify([(bad_meas, proofs, blind), *input_shares[1:]])
    bad_proofs = [*proofs[:-1], (proofs[-1] + 1) % q]
    with pytest.raises(VdafError, match="verifier check failed"):
        verify([(meas, bad_proofs, blind), *input_shares[1:]])
    # A Helper's two seeds: the measurement seed, then the proofs seed.
    meas_seed, proofs_seed, helper_blind = input_shares[2]
    flipped = bytes([proofs_seed[0] ^ 1]) + proofs_seed[1:]
    with pytest.raises(VdafError, match="verifier check failed"):
        verify([*input_shares[:2], (meas_seed, flipped, helper_blind)])
    # A wrong joint randomness part in the public share: the seed check of verify_next.
    bad_public = [public_share[0], bytes(16), public_share[2]]
    with pytest.raises(VdafError):
        verify(input_shares, bad_public)


# ---------------------------------------------------------------------------------------
# The message codecs.


@pytest.mark.parametrize("index", range(len(make_variants08(2))))
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_message_codecs_roundtrip_and_strictness(index: int, data: st.DataObject) -> None:
    shares = data.draw(st.integers(2, 4))
    vdaf, gen, _ = make_variants08(shares)[index]
    size = VDAF_08.seed_size
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    nonce = data.draw(st.binary(min_size=16, max_size=16))
    rand = data.draw(st.binary(min_size=vdaf.RAND_SIZE, max_size=vdaf.RAND_SIZE))
    verify_key = data.draw(st.binary(min_size=size, max_size=size))
    public_share, input_shares = vdaf.shard(b"", gen(rng), nonce, rand)

    encoded = vdaf.encode_public_share(public_share)
    assert len(encoded) == (size * shares if vdaf.uses_joint_rand else 0)
    assert vdaf.decode_public_share(encoded) == public_share
    with pytest.raises(VdafError):
        vdaf.decode_public_share(encoded + b"\0")
    blind = size if vdaf.uses_joint_rand else 0
    for j, share in enumerate(input_shares):
        enc = vdaf.encode_input_share(share)
        if j > 0:
            # Prio3HelperShare(WithJointRand): k_meas_share || k_proofs_share [|| k_blind].
            assert len(enc) == 2 * size + blind
            assert share[:2] == (enc[:size], enc[size : 2 * size])
        else:
            f = vdaf.field.ENCODED_SIZE
            assert len(enc) == f * (vdaf.flp.MEAS_LEN + vdaf.flp.PROOF_LEN * vdaf.PROOFS) + blind
        assert vdaf.decode_input_share(j, enc) == share
        for bad in (enc[:-1], enc + b"\0"):
            with pytest.raises(VdafError):
                vdaf.decode_input_share(j, bad)
        state, vshare = vdaf.verify_init(verify_key, b"", j, None, nonce, public_share, share)
        venc = vdaf.encode_verifier_share(vshare)
        assert len(venc) == vdaf.field.ENCODED_SIZE * vdaf.flp.VERIFIER_LEN * vdaf.PROOFS + blind
        assert vdaf.decode_verifier_share(state, venc) == vshare
        with pytest.raises(VdafError):
            vdaf.decode_verifier_share(state, venc + b"\0")
        assert vdaf.decode_verify_state(vdaf.encode_verify_state(state)) == state
        out = vdaf.verify_next(b"", state, state[1])
        oenc = vdaf.encode_agg_share(out)
        assert vdaf.decode_agg_share(None, oenc) == out
        with pytest.raises(VdafError):
            vdaf.decode_agg_share(None, oenc[1:])
    message = bytes(size) if vdaf.uses_joint_rand else None
    msg_enc = vdaf.encode_verifier_message(message)
    assert vdaf.decode_verifier_message(None, msg_enc) == message
    with pytest.raises(VdafError):
        vdaf.decode_verifier_message(None, msg_enc + b"\0")
    assert vdaf.encode_agg_param(None) == b""
    vdaf.decode_agg_param(b"")
    with pytest.raises(VdafError):
        vdaf.decode_agg_param(b"\0")


@settings(max_examples=25, deadline=None)
@given(seeds=st.lists(st.binary(min_size=16, max_size=16), min_size=3, max_size=3),
       jr=st.booleans())
def test_helper_share_decoding_is_the_inverse(seeds: list[bytes], jr: bool) -> None:
    vdaf = Prio3HistogramV08(2, 3, 2) if jr else Prio3CountV08(2)
    encoded = b"".join(seeds if jr else seeds[:2])
    share = vdaf.decode_input_share(1, encoded)
    assert share == ((*seeds, ) if jr else (*seeds[:2], None))
    assert vdaf.encode_input_share(share) == encoded


# ---------------------------------------------------------------------------------------
# The profile data.


def test_rand_size_and_seed_order_of_both_versions() -> None:
    for shares in range(2, 6):
        # draft-08 Table "VDAF parameters for Prio3": SEED_SIZE * (1 + 2 (SHARES - 1))
        # [+ SEED_SIZE * SHARES with joint randomness].
        assert Prio3CountV08(shares).RAND_SIZE == 16 * (1 + 2 * (shares - 1))
        assert Prio3HistogramV08(shares, 3, 2).RAND_SIZE == \
            16 * (1 + 2 * (shares - 1) + shares)
        # draft-20: SEED_SIZE * SHARES, twice that with joint randomness.
        assert Prio3Count(shares).RAND_SIZE == 32 * shares
        assert Prio3Histogram(shares, 3, 2).RAND_SIZE == 64 * shares
    seeds = [bytes([i]) for i in range(11)]
    # VDAF-08 with joint randomness: (meas, proofs, blind) per Helper, Leader blind, prove.
    layout = VDAF_08.sharding.split(seeds, 4, True)
    assert layout.helpers == [(seeds[0], seeds[1]), (seeds[3], seeds[4]), (seeds[6], seeds[7])]
    assert layout.helper_blinds == [seeds[2], seeds[5], seeds[8]]
    assert (layout.leader_blind, layout.prove) == (seeds[9], seeds[10])
    layout = VDAF_08.sharding.split(seeds[:5], 3, False)
    assert layout.helpers == [(seeds[0], seeds[1]), (seeds[2], seeds[3])]
    assert (layout.leader_blind, layout.prove) == (None, seeds[4])
    # draft-20 with joint randomness: (share, blind) per Helper, Leader blind, prove.
    layout = Prio3Sharding(helper_seeds=1).split(seeds[:6], 3, True)
    assert layout.helpers == [(seeds[0],), (seeds[2],)]
    assert layout.helper_blinds == [seeds[1], seeds[3]]
    assert (layout.leader_blind, layout.prove) == (seeds[4], seeds[5])


def test_codepoints_version_and_seed_sizes() -> None:
    assert [Prio3CountV08.ID, Prio3SumV08.ID, Prio3SumVecV08.ID, Prio3HistogramV08.ID] == \
        [0, 1, 2, 3]
    assert Prio3MultiHotHistogramV08.ID == Prio3SumVecWithMultiproofV08.ID == 0xFFFFFFFF
    assert Prio3Count.ID == 1
    vdaf = Prio3SumV08(2, 4)
    assert (vdaf.VERSION, vdaf.VERIFY_KEY_SIZE, vdaf.xof.SEED_SIZE) == (8, 16, 16)
    assert vdaf.domain_separation_tag(5, b"") == bytes([8, 0, 0, 0, 0, 1, 0, 5])
    assert Prio3Count(2).domain_separation_tag(5, b"ab") == bytes([18, 0, 0, 0, 0, 1, 0, 5]) + b"ab"
    # draft-20 keeps exactly its XOF classes.
    assert VDAF_18.xof is XofTurboShake128 and Prio3Count(2).xof is XofTurboShake128
    assert VDAF_18.xofs["XofFixedKeyAes128"] is XofFixedKeyAes128
    assert VDAF_08.xof is not XofTurboShake128 and VDAF_08.xof is VDAF_08.xofs["XofTurboShake128"]


def test_xof_framing_of_vdaf08() -> None:
    xof = VDAF_08.xof
    # len(dst) is one byte: 255 is the longest dst.
    xof(bytes(16), bytes(255), b"").next(1)
    with pytest.raises(ValueError, match="dst longer than 255"):
        xof(bytes(16), bytes(256), b"")
    with pytest.raises(ValueError, match="dst longer than 255"):
        VDAF_08.xofs["XofFixedKeyAes128"](bytes(16), bytes(256), b"")
    # No seed length byte, so every seed is SEED_SIZE bytes.
    with pytest.raises(ValueError, match="16 bytes"):
        xof(bytes(17), b"", b"")
    # draft-20 takes both (two-byte dst length, seed length byte).
    XofTurboShake128(bytes(17), bytes(256), b"").next(1)
    # Different framing, different stream.
    assert xof(bytes(16), b"d", b"b").next(16) != XofTurboShake128(bytes(16), b"d", b"b").next(16)


def test_vdaf08_has_no_context_string() -> None:
    """VDAF-08 has no ctx: the draft-20 signatures are kept and ctx must be empty."""
    vdaf = Prio3HistogramV08(2, 4, 2)
    key, nonce = os.urandom(16), os.urandom(16)
    with pytest.raises(VdafError, match="no application context"):
        vdaf.shard(b"x", 1, nonce, os.urandom(vdaf.RAND_SIZE))
    public_share, input_shares = vdaf.shard(b"", 1, nonce, os.urandom(vdaf.RAND_SIZE))
    with pytest.raises(VdafError, match="no application context"):
        vdaf.verify_init(key, b"x", 0, None, nonce, public_share, input_shares[0])
    out = [vdaf.verify_init(key, b"", j, None, nonce, public_share, s)
           for j, s in enumerate(input_shares)]
    with pytest.raises(VdafError, match="no application context"):
        vdaf.verifier_shares_to_message(b"x", None, [v for _, v in out])
    message = vdaf.verifier_shares_to_message(b"", None, [v for _, v in out])
    with pytest.raises(VdafError, match="no application context"):
        vdaf.verify_next(b"x", out[0][0], message)
    count = Prio3CountV08(2)  # no joint randomness: no DST in these two steps
    with pytest.raises(VdafError, match="no application context"):
        count.verifier_shares_to_message(b"x", None, [])
    # draft-20 binds any ctx.
    assert run_vdaf(Prio3Count(2), os.urandom(32), None, b"x", [1, 1]) == 2


# ---------------------------------------------------------------------------------------
# FlpGeneric.


def _circuits() -> list[Any]:
    return [Count(Field64), Sum08(Field128, 5), SumVec08(Field128, 3, 2, 2),
            SumVec08(Field64, 4, 3, 5), Histogram08(Field128, 5, 2),
            MultiHotHistogram(Field128, 6, 3, 2)]


@pytest.mark.parametrize("index", range(len(_circuits())))
def test_flp_generic_proof_is_the_coefficient_form(index: int) -> None:
    """For the same randomness, FlpGeneric's gadget polynomial is the polynomial whose
    values draft-20's proof sends: they agree at the first points of H_n."""
    valid = _circuits()[index]
    field: type[NttField] = valid.field
    rng = random.Random(index)
    meas = valid.encode(_valid_measurement(valid, rng))
    prove_rand = [rng.randrange(field.MODULUS) for _ in range(valid.prove_rand_len())]
    joint_rand = [rng.randrange(field.MODULUS) for _ in range(valid.JOINT_RAND_LEN)]
    generic = FlpGeneric(valid)
    coeffs = generic.prove(meas, prove_rand, joint_rand)
    values = FlpBBCGGI19(valid).prove(meas, prove_rand, joint_rand)
    assert len(coeffs) == len(values) == generic.PROOF_LEN
    (g,) = valid.GADGETS
    arity, calls = g.ARITY, valid.GADGET_CALLS[0]
    assert coeffs[:arity] == values[:arity]  # the wire seeds
    n = 1 << (len(coeffs) - arity - 1).bit_length()
    roots = field.nth_root_powers(n)
    poly = coeffs[arity:]
    assert [poly_eval(field, poly, roots[k]) for k in range(len(poly))] == values[arity:]
    assert len(poly) == g.DEGREE * (wire_poly_len(calls) - 1) + 1
    # And it verifies, shared among 1..3 parties.
    for shares in (1, 2, 3):
        assert run_flp(generic, meas, shares)


def _valid_measurement(valid: Any, rng: random.Random) -> Any:
    if isinstance(valid, Count):
        return 1
    if isinstance(valid, Sum08):
        return rng.randrange(1 << valid.bits)
    if isinstance(valid, SumVec08):
        return [rng.randrange(1 << valid.bits) for _ in range(valid.length)]
    if isinstance(valid, Histogram08):
        return rng.randrange(valid.length)
    return _bits(rng, valid.length, valid.max_count)


def test_flp_generic_rejects_invalid_and_malformed_proofs() -> None:
    valid = Histogram08(Field128, 5, 2)
    flp = FlpGeneric(valid)
    assert not run_flp(flp, [1, 1, 0, 0, 0], 2)
    assert not run_flp(flp, [0, 0, 0, 0, 0], 2)
    assert flp.QUERY_RAND_LEN == 1 and flp.VERIFIER_LEN == 1 + 4 + 1
    meas = valid.encode(2)
    proof = flp.prove(meas, [1] * flp.PROVE_RAND_LEN, [5, 7])
    # Changing the top coefficient breaks the gadget check.
    proof[-1] = (proof[-1] + 1) % Field128.MODULUS
    verifier = flp.query(meas, proof, [12345], [5, 7], 1)
    assert not flp.decide(verifier)
