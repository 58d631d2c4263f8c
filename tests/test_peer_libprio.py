"""Cross-check of our Prio3 against libprio-rs, the `prio` crate of Divvi Up, Janus and
Firefox (issue 13), for both wire versions: prio 0.18.1 (VDAF-18, peer `libprio18`) and
prio 0.16.8 (VDAF-08, peer `libprio16`), two Aggregators, several parameter sets of
Count, Sum, SumVec, Histogram and (VDAF-18) MultihotCountVec and L1BoundSum, some with
our default chunk_length.

- (a) reports sharded by libprio-rs (its own randomness) verify in ours and aggregate to
  the exact result;
- (b) reports sharded by ours verify in libprio-rs and aggregate to the exact result;
- (c) tampered input shares, public shares, verifier (prep) shares and verifier messages
  are rejected by both;
- (d) both compute the same bytes: prio 0.18 shards with our randomness
  (`shard_with_random`) into our public and input shares; in both versions its verifier
  shares, verifier messages, output and aggregate shares of our reports are ours; prio
  0.16, whose `shard_with_random` is crate-private, runs its own test-vector checker on
  vectors that we generate with fresh randomness;
- our default chunk_length is the crate's `optimal_chunk_length`.

All the peer's work of a version is one process run (`exchange`). The peers are built
on first use (`tests.peers`); the tests skip only when cargo is absent. A tampered share
passes a proof check with probability at most about 2^-50 (the degree of the checked
polynomials over the size of Field64); every other assertion is deterministic.
"""

from __future__ import annotations

import functools
import random
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from ppm_reference.interop.peers import libprio
from ppm_reference.vdaf import registry
from ppm_reference.vdaf.vdaf import VdafError
from tests.peers import peer_binary

CTX = b"ppm libprio-rs cross-check"
REPORTS = 4  # per parameter set and direction


@dataclass(frozen=True)
class ParamSet:
    name: str
    params: dict[str, int]
    measure: Callable[[random.Random, Any], Any]  # (rng, vdaf) -> a valid measurement


def _count(rng: random.Random, v: Any) -> int:
    return rng.randrange(2)


def _sum(rng: random.Random, v: Any) -> int:
    top = v.max_measurement if hasattr(v, "max_measurement") else 2**v.bits - 1
    return rng.choice([0, top, rng.randrange(top + 1)])


def _sumvec(rng: random.Random, v: Any) -> list[int]:
    top = v.max_measurement if hasattr(v, "max_measurement") else 2**v.bits - 1
    return [rng.choice([0, top, rng.randrange(top + 1)]) for _ in range(v.length)]


def _histogram(rng: random.Random, v: Any) -> int:
    return rng.randrange(v.length)


def _multihot(rng: random.Random, v: Any) -> list[bool]:
    ones = set(rng.sample(range(v.length), rng.randrange(min(v.max_weight, v.length) + 1)))
    return [i in ones for i in range(v.length)]


def _l1(rng: random.Random, v: Any) -> list[int]:
    """A vector whose L1 norm is at most max_value (sometimes exactly)."""
    budget = rng.choice([v.max_value, rng.randrange(v.max_value + 1)])
    out = [0] * v.length
    for _ in range(budget):
        out[rng.randrange(v.length)] += 1
    return out


# chunk_length absent: our default (which must be libprio-rs's optimal_chunk_length).
SETS: dict[str, list[ParamSet]] = {
    "18": [
        ParamSet("Prio3Count", {}, _count),
        ParamSet("Prio3Sum", {"max_measurement": 1}, _sum),
        ParamSet("Prio3Sum", {"max_measurement": 1000}, _sum),
        ParamSet("Prio3Sum", {"max_measurement": 2**32 - 1}, _sum),
        ParamSet("Prio3SumVec", {"length": 1, "max_measurement": 1, "chunk_length": 1}, _sumvec),
        ParamSet("Prio3SumVec", {"length": 20, "max_measurement": 255}, _sumvec),
        ParamSet("Prio3SumVec", {"length": 10, "max_measurement": 100, "chunk_length": 3},
                 _sumvec),
        ParamSet("Prio3Histogram", {"length": 2, "chunk_length": 1}, _histogram),
        ParamSet("Prio3Histogram", {"length": 10, "chunk_length": 3}, _histogram),
        ParamSet("Prio3Histogram", {"length": 100}, _histogram),
        ParamSet("Prio3MultihotCountVec", {"length": 4, "max_weight": 2, "chunk_length": 2},
                 _multihot),
        ParamSet("Prio3MultihotCountVec", {"length": 30, "max_weight": 5}, _multihot),
        ParamSet("Prio3MultihotCountVec", {"length": 6, "max_weight": 6, "chunk_length": 4},
                 _multihot),
        # draft-ietf-ppm-l1-bound-sum (the crate cites -01, we implement -02: same wire).
        ParamSet("Prio3L1BoundSum", {"length": 3, "max_value": 5, "chunk_length": 2}, _l1),
        ParamSet("Prio3L1BoundSum", {"length": 10, "max_value": 240}, _l1),
    ],
    "08": [
        ParamSet("Prio3Count", {}, _count),
        ParamSet("Prio3Sum", {"bits": 1}, _sum),
        ParamSet("Prio3Sum", {"bits": 8}, _sum),
        ParamSet("Prio3Sum", {"bits": 32}, _sum),
        ParamSet("Prio3SumVec", {"length": 1, "bits": 1, "chunk_length": 1}, _sumvec),
        ParamSet("Prio3SumVec", {"length": 20, "bits": 8}, _sumvec),
        ParamSet("Prio3SumVec", {"length": 10, "bits": 3, "chunk_length": 4}, _sumvec),
        ParamSet("Prio3Histogram", {"length": 2, "chunk_length": 1}, _histogram),
        ParamSet("Prio3Histogram", {"length": 10, "chunk_length": 3}, _histogram),
        ParamSet("Prio3Histogram", {"length": 100}, _histogram),
    ],
}

VERSIONS = ("18", "08")


# ---------------------------------------------------------------------------------------
# Ours
# ---------------------------------------------------------------------------------------


def expected_for(vdaf: Any, measurements: list[Any]) -> Any:
    """The aggregate result, computed from the plain measurements."""
    name = registry.name_of(vdaf)
    if name in ("Prio3Count", "Prio3Sum"):
        return sum(int(m) for m in measurements)
    if name == "Prio3Histogram":
        return [sum(1 for m in measurements if m == i) for i in range(vdaf.length)]
    return [sum(int(m[i]) for m in measurements) for i in range(vdaf.length)]


def ctx_of(vdaf: Any) -> bytes:
    return CTX if registry.version_of(vdaf) == "18" else b""


@dataclass
class Verified:
    ok: bool
    error: str = ""
    verifier_shares: list[str] = field(default_factory=list)
    verifier_message: str = ""
    out_shares: list[Any] = field(default_factory=list)


def ours_verify(vdaf: Any, verify_key: bytes, nonce: bytes, public_share: bytes,
                input_shares: list[bytes], verifier_shares: list[bytes] | None = None,
                verifier_message: bytes | None = None) -> Verified:
    """Both Aggregators of ours on one encoded report; replacements tamper."""
    ctx = ctx_of(vdaf)
    try:
        pub = vdaf.decode_public_share(public_share)
        states, shares = [], []
        for j, encoded in enumerate(input_shares):
            state, share = vdaf.verify_init(verify_key, ctx, j, None, nonce, pub,
                                            vdaf.decode_input_share(j, encoded))
            states.append(state)
            shares.append(share)
        if verifier_shares is not None:
            shares = [vdaf.decode_verifier_share(s, b) for s, b in zip(states, verifier_shares,
                                                                       strict=True)]
        encoded_shares = [vdaf.encode_verifier_share(s).hex() for s in shares]
        message = vdaf.verifier_shares_to_message(ctx, None, shares)
        if verifier_message is not None:
            message = vdaf.decode_verifier_message(states[0], verifier_message)
        outs = [vdaf.verify_next(ctx, s, message) for s in states]
    except VdafError as exc:
        return Verified(False, str(exc))
    return Verified(True, "", encoded_shares, vdaf.encode_verifier_message(message).hex(), outs)


def add_one(field_cls: Any, encoded: bytes, index: int = 0) -> bytes:
    """`encoded` (a vector of field elements, maybe followed by seeds) with 1 added to
    element `index`: still canonical, so only the proof check can catch it."""
    size = field_cls.ENCODED_SIZE
    elem = field_cls.decode_vec(encoded[index * size:(index + 1) * size])[0]
    new = field_cls.encode_vec([(elem + 1) % field_cls.MODULUS])
    return encoded[:index * size] + new + encoded[(index + 1) * size:]


def flip(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1:]


def tamperings(vdaf: Any, public_share: bytes, input_shares: list[bytes]
               ) -> dict[str, tuple[bytes, list[bytes]]]:
    """Tampered versions of an encoded report (public share, input shares), by kind."""
    out = {
        "leader measurement share + 1": (public_share,
                                         [add_one(vdaf.field, input_shares[0]),
                                          input_shares[1]]),
        "helper seed bit flipped": (public_share,
                                    [input_shares[0], flip(input_shares[1], 3)]),
    }
    if public_share:  # joint randomness: the Leader's part of the public share
        out["public share bit flipped"] = (flip(public_share, 0), input_shares)
    return out


# ---------------------------------------------------------------------------------------
# The peer's batch (one process run per version)
# ---------------------------------------------------------------------------------------


@dataclass
class Item:
    """One parameter set: our VDAF, the measurements, our reports and the peer's answers."""
    vdaf: Any
    measurements_theirs: list[Any]
    measurements_ours: list[Any]
    verify_key: bytes
    ours: list[dict[str, Any]]              # our reports: nonce, rand, public/input shares
    their_nonces: list[bytes] = field(default_factory=list)  # of the peer's own shards
    answers: dict[str, Any] = field(default_factory=dict)  # peer's answers by case


def _report_json(r: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"nonce": r["nonce"].hex(), "public_share": r["public_share"].hex(),
            "input_shares": [s.hex() for s in r["input_shares"]], **extra}


def vector_v08(vdaf: Any, item: Item) -> dict[str, Any]:
    """A VDAF-08 test vector document (the draft-08 reference code's schema, which the
    crate's checker reads) of our reports, computed by ours."""
    prep = []
    outs: list[list[list[int]]] = [[], []]
    for r, m in zip(item.ours, item.measurements_ours, strict=True):
        got = ours_verify(vdaf, item.verify_key, r["nonce"], r["public_share"],
                          r["input_shares"])
        assert got.ok, got.error
        for j in range(2):
            outs[j].append(got.out_shares[j])
        prep.append({
            "measurement": libprio.measurement_json(m),
            "nonce": r["nonce"].hex(), "rand": r["rand"].hex(),
            "public_share": r["public_share"].hex(),
            "input_shares": [s.hex() for s in r["input_shares"]],
            "prep_shares": [got.verifier_shares],
            "prep_messages": [got.verifier_message],
            "out_shares": [[vdaf.field.encode_vec([x]).hex() for x in o]
                           for o in got.out_shares],
        })
    agg_shares = []
    for j in range(2):
        agg = vdaf.agg_init(None)
        for o in outs[j]:
            agg = vdaf.agg_update(None, agg, o)
        agg_shares.append(agg)
    return {
        "verify_key": item.verify_key.hex(), "shares": 2, "prep": prep,
        "agg_shares": [vdaf.encode_agg_share(a).hex() for a in agg_shares],
        "agg_result": vdaf.unshard(None, agg_shares, len(prep)),
        **registry.parameters_of(vdaf),
    }


OPTIMAL_LENGTHS = list(range(0, 12_001)) + [2**k + d for k in range(14, 31) for d in (-1, 0, 1)]


@functools.cache
def exchange(version: str) -> tuple[list[Item], dict[str, Any]]:
    """Build the cases of a version, run them in one process of the peer, and return the
    items with the peer's answers, and the answers that belong to no item."""
    project = libprio.PEER_OF_VERSION[version]
    exe = peer_binary(project)
    rng = random.Random(f"libprio-{version}")
    items: list[Item] = []
    cases: list[dict[str, Any]] = []
    where: list[tuple[int | None, str]] = []

    def add(item_index: int | None, key: str, case: dict[str, Any]) -> None:
        cases.append(case)
        where.append((item_index, key))

    for index, ps in enumerate(SETS[version]):
        vdaf = registry.build(ps.name, ps.params, version)
        spec = libprio.vdaf_spec(vdaf)
        ctx = ctx_of(vdaf)
        verify_key = rng.randbytes(vdaf.VERIFY_KEY_SIZE)
        m_theirs = [ps.measure(rng, vdaf) for _ in range(REPORTS)]
        m_ours = [ps.measure(rng, vdaf) for _ in range(REPORTS)]
        ours = []
        for m in m_ours:
            nonce, rand = rng.randbytes(vdaf.NONCE_SIZE), rng.randbytes(vdaf.RAND_SIZE)
            pub, shares = vdaf.shard(ctx, m, nonce, rand)
            ours.append({"nonce": nonce, "rand": rand,
                         "public_share": vdaf.encode_public_share(pub),
                         "input_shares": [vdaf.encode_input_share(s) for s in shares]})
        item = Item(vdaf, m_theirs, m_ours, verify_key, ours)
        items.append(item)
        base = {"vdaf": spec, "ctx": ctx.hex()}
        # (a) their shards, with their randomness
        item.their_nonces = [rng.randbytes(vdaf.NONCE_SIZE) for _ in m_theirs]
        add(index, "shard", {**base, "op": "shard", "reports": [
            {"measurement": libprio.measurement_json(m), "nonce": n.hex()}
            for m, n in zip(m_theirs, item.their_nonces, strict=True)]})
        # (d) VDAF-18: their shards with our randomness
        if version == "18":
            add(index, "shard_with_random", {**base, "op": "shard", "reports": [
                {"measurement": libprio.measurement_json(m), "nonce": r["nonce"].hex(),
                 "rand": r["rand"].hex()} for m, r in zip(m_ours, ours, strict=True)]})
        else:
            doc = vector_v08(vdaf, item)
            add(index, "check_vector", {**base, "op": "check_vector", "vector": doc})
            bad = dict(doc, prep=[dict(doc["prep"][0], input_shares=[
                flip(bytes.fromhex(doc["prep"][0]["input_shares"][0]), 0).hex(),
                doc["prep"][0]["input_shares"][1]])] + doc["prep"][1:])
            add(index, "check_vector_bad", {**base, "op": "check_vector", "vector": bad})
        # (b), (d) our reports in their Aggregators
        add(index, "verify", {**base, "op": "verify", "verify_key": verify_key.hex(),
                              "reports": [_report_json(r) for r in ours]})
        # (c) our reports tampered, in their Aggregators
        tampered = []
        first = ours[0]
        for pub, shares in tamperings(vdaf, first["public_share"],
                                      first["input_shares"]).values():
            tampered.append(_report_json(dict(first, public_share=pub, input_shares=shares)))
        good = ours_verify(vdaf, verify_key, first["nonce"], first["public_share"],
                           first["input_shares"])
        shares_hex = good.verifier_shares
        tampered.append(_report_json(first, verifier_shares=[
            add_one(vdaf.field, bytes.fromhex(shares_hex[0])).hex(), shares_hex[1]]))
        if good.verifier_message:
            tampered.append(_report_json(first, verifier_message=flip(
                bytes.fromhex(good.verifier_message), 0).hex()))
        add(index, "verify_tampered", {**base, "op": "verify", "verify_key": verify_key.hex(),
                                       "reports": tampered})
    add(None, "optimal", {"op": "optimal_chunk_length", "lengths": OPTIMAL_LENGTHS})
    results = libprio.run(exe, cases)
    extra: dict[str, Any] = {}
    for (item_index, key), result in zip(where, results, strict=True):
        if item_index is None:
            extra[key] = result
        else:
            items[item_index].answers[key] = result
    return items, extra


def _label(item: Item) -> str:
    return registry.describe(item.vdaf)


def _ok(answer: dict[str, Any], what: str) -> dict[str, Any]:
    assert "error" not in answer, f"{what}: the peer failed: {answer.get('error')}"
    return answer


# ---------------------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_their_reports_verify_and_aggregate_in_ours(version: str) -> None:
    items, _ = exchange(version)
    for item in items:
        vdaf = item.vdaf
        reports = _ok(item.answers["shard"], _label(item))["reports"]
        assert len(reports) == REPORTS
        aggs = [vdaf.agg_init(None) for _ in range(2)]
        for report, nonce in zip(reports, item.their_nonces, strict=True):
            got = ours_verify(vdaf, item.verify_key, nonce,
                              bytes.fromhex(report["public_share"]),
                              [bytes.fromhex(s) for s in report["input_shares"]])
            assert got.ok, f"{_label(item)}: ours rejects libprio-rs's report: {got.error}"
            aggs = [vdaf.agg_update(None, a, o) for a, o in zip(aggs, got.out_shares,
                                                                strict=True)]
        result = vdaf.unshard(None, aggs, REPORTS)
        assert result == expected_for(vdaf, item.measurements_theirs), _label(item)


@pytest.mark.parametrize("version", VERSIONS)
def test_our_reports_verify_and_aggregate_in_theirs(version: str) -> None:
    items, _ = exchange(version)
    for item in items:
        answer = _ok(item.answers["verify"], _label(item))
        rejected = [r.get("error") for r in answer["reports"] if not r["ok"]]
        assert not rejected, f"{_label(item)}: libprio-rs rejects our reports: {rejected}"
        assert answer["accepted"] == REPORTS
        got = libprio.result_from_json(answer["agg_result"])
        assert got == expected_for(item.vdaf, item.measurements_ours), _label(item)


@pytest.mark.parametrize("version", VERSIONS)
def test_tampered_reports_are_rejected_by_both(version: str) -> None:
    items, _ = exchange(version)
    for item in items:
        vdaf = item.vdaf
        first = item.ours[0]
        kinds = list(tamperings(vdaf, first["public_share"], first["input_shares"]))
        kinds.append("leader verifier share + 1")
        good = ours_verify(vdaf, item.verify_key, first["nonce"], first["public_share"],
                           first["input_shares"])
        if good.verifier_message:
            kinds.append("verifier message bit flipped")
        answer = _ok(item.answers["verify_tampered"], _label(item))
        assert len(answer["reports"]) == len(kinds)
        for kind, report in zip(kinds, answer["reports"], strict=True):
            assert not report["ok"], f"{_label(item)}: libprio-rs accepts: {kind}"
        assert answer["accepted"] == 0
        # The same tampering in ours.
        for kind, (pub, shares) in tamperings(vdaf, first["public_share"],
                                              first["input_shares"]).items():
            got = ours_verify(vdaf, item.verify_key, first["nonce"], pub, shares)
            assert not got.ok, f"{_label(item)}: ours accepts: {kind}"
        # libprio-rs's verifier shares of our report, tampered, in ours.
        theirs = _ok(item.answers["verify"], _label(item))["reports"][0]
        their_shares = [bytes.fromhex(s) for s in theirs["verifier_shares"]]
        got = ours_verify(vdaf, item.verify_key, first["nonce"], first["public_share"],
                          first["input_shares"],
                          verifier_shares=[add_one(vdaf.field, their_shares[0]),
                                           their_shares[1]])
        assert not got.ok, f"{_label(item)}: ours accepts a tampered verifier share"
        if theirs["verifier_message"]:
            got = ours_verify(vdaf, item.verify_key, first["nonce"], first["public_share"],
                              first["input_shares"], verifier_message=flip(
                                  bytes.fromhex(theirs["verifier_message"]), 0))
            assert not got.ok, f"{_label(item)}: ours accepts a tampered verifier message"


@pytest.mark.parametrize("version", VERSIONS)
def test_both_compute_the_same_bytes(version: str) -> None:
    items, _ = exchange(version)
    for item in items:
        vdaf, label = item.vdaf, _label(item)
        if version == "18":
            shards = _ok(item.answers["shard_with_random"], label)["reports"]
            for mine, theirs in zip(item.ours, shards, strict=True):
                assert theirs["public_share"] == mine["public_share"].hex(), label
                assert theirs["input_shares"] == [s.hex() for s in mine["input_shares"]], label
        else:
            check = _ok(item.answers["check_vector"], label)
            assert check["ok"], f"{label}: the crate's checker: {check.get('mismatch')}"
            bad = _ok(item.answers["check_vector_bad"], label)
            assert not bad["ok"], f"{label}: the crate's checker accepts a wrong vector"
        answer = _ok(item.answers["verify"], label)
        aggs = [vdaf.agg_init(None) for _ in range(2)]
        for mine, theirs in zip(item.ours, answer["reports"], strict=True):
            got = ours_verify(vdaf, item.verify_key, mine["nonce"], mine["public_share"],
                              mine["input_shares"])
            assert got.ok
            assert theirs["verifier_shares"] == got.verifier_shares, label
            assert theirs["verifier_message"] == got.verifier_message, label
            assert theirs["out_shares"] == [vdaf.encode_out_share(o).hex()
                                            for o in got.out_shares], label
            aggs = [vdaf.agg_update(None, a, o) for a, o in zip(aggs, got.out_shares,
                                                                strict=True)]
        assert answer["agg_shares"] == [vdaf.encode_agg_share(a).hex() for a in aggs], label


@pytest.mark.parametrize("version", VERSIONS)
def test_default_chunk_length_is_libprios_optimal_chunk_length(version: str) -> None:
    _, extra = exchange(version)
    theirs = _ok(extra["optimal"], "optimal_chunk_length")["chunk_lengths"]
    ours = [registry.optimal_chunk_length(n) for n in OPTIMAL_LENGTHS]
    diff = [(n, a, b) for n, a, b in zip(OPTIMAL_LENGTHS, ours, theirs, strict=True) if a != b]
    assert not diff, f"(length, ours, libprio-rs): {diff[:10]}"
    by_length = dict(zip(OPTIMAL_LENGTHS, theirs, strict=True))
    # Firefox's and Divvi Up's SumVec with 8 bits and length 20: 11 (isqrt gave 12).
    sumvec = {"length": 20, "bits": 8} if version == "08" else {"length": 20,
                                                               "max_measurement": 255}
    assert registry.build("Prio3SumVec", sumvec, version).chunk_length == 11 == by_length[160]
    # The default of every VDAF with a chunk_length is the crate's value for its encoded
    # measurement length.
    names = [n for n in libprio.PEER_VDAFS[libprio.PEER_OF_VERSION[version]]
             if "chunk_length" in registry.parameter_names(n, version)]
    for name in names:
        for length in (1, 2, 3, 7, 20, 100, 333, 1000):
            params: dict[str, int] = {"length": length}
            if name == "Prio3SumVec":
                params |= {"bits": 8} if version == "08" else {"max_measurement": 1000}
            if name == "Prio3MultihotCountVec":
                params["max_weight"] = max(1, length // 3)
            if name == "Prio3L1BoundSum":
                params["max_value"] = 1000
            built = registry.build(name, params, version)
            encoded = registry.encoded_measurement_length(name, params)
            assert built.flp.MEAS_LEN == encoded, (name, params)
            assert built.chunk_length == by_length[encoded], (name, params)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_peer_answers_bad_requests_with_one_line_errors(version: str) -> None:
    exe = peer_binary(libprio.PEER_OF_VERSION[version])
    proc = subprocess.run([str(exe)], input="not json", capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: the request is not JSON") and \
        proc.stderr.count("\n") == 1
    results = libprio.run(exe, [
        {"op": "nope"},
        {"op": "shard", "vdaf": {"type": "Prio3Poplar"}, "reports": []},
        {"op": "verify", "vdaf": {"type": "Prio3Count"}, "verify_key": "00"},
        {"op": "shard", "vdaf": {"type": "Prio3Histogram", "length": 4, "chunk_length": 2},
         "reports": [{"measurement": 4, "nonce": "00" * 16}]},
        {"op": "shard", "vdaf": {"type": "Prio3Histogram", "length": 4, "chunk_length": 2},
         "reports": [{"measurement": 3, "nonce": "00" * 16}]},
    ])
    errors = [r.get("error", "") for r in results]
    assert "missing field \"vdaf\"" in errors[0]
    assert "unknown VDAF \"Prio3Poplar\"" in errors[1]
    assert "verify_key must be" in errors[2]
    # prio 0.16.8 and 0.18.1 panic on a Histogram bucket out of range (Histogram's
    # encode_measurement indexes without a check) instead of returning an error; the
    # driver makes a panic that case's error, and the batch goes on.
    assert errors[3].startswith(("shard:", "panic: index out of bounds")), errors[3]
    assert len(results[4]["reports"]) == 1
