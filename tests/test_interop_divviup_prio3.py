"""Cross-check of our VDAF-08 Prio3 against divviup-ts (`@divviup/prio3` 0.8.0, npm).

Item of the dap-09 interop issue: reports sharded by `@divviup/prio3` verify and
aggregate in our VDAF-08 code, and reports sharded by ours verify in theirs.

For Prio3Count, Prio3Sum, Prio3SumVec and Prio3Histogram (2 Aggregators, small
parameters, several random measurements each):

1. theirs shard (their own randomness) -> our decode, verify_init, verifier_shares_to_message,
   verify_next for both Aggregators -> agg_update/merge -> unshard equals the exact sum;
   a tampered report is rejected by us;
2. ours shard -> their prepare (both Aggregators) verifies every honest report, rejects a
   tampered one, their aggregate equals the exact sum; their verifier shares, verifier
   message, output shares and aggregate shares equal ours byte for byte;
3. the same measurement, nonce and rand sharded by both gives identical bytes;
plus an anchor: their library run on the published VDAF-08 `_0` vectors reproduces them,
so that a disagreement can be attributed to one side.

The package is installed with npm into a cache folder outside the repository:
`$PPM_INTEROP_CACHE/prio3-0.8.0` (default `~/.cache/ppm-interop/prio3-0.8.0`) from the
pinned `tests/interop_node/package.json` and `package-lock.json`, and reused while those
are unchanged (tests/node_support.py). The tests skip with a visible reason when node or
npm is missing or when the install fails for lack of network; any other install failure
is an error.

The driver `tests/interop_node/prio3_cli.mjs` speaks JSON over stdin/stdout. The package
has encoders but no decoders for its messages, so the driver decodes public and input
shares itself (VDAF-08 Section 7.2.6) with the package's field and XOF; everything else on
that side (shard, prepareInit, unshardPreparationShares, prepareNext, aggregate, unshard,
encoders) is the package's code.

Test inputs (measurements, nonces, rands, verify keys) come from a seeded `random.Random`
so that a failure reproduces; they are test data, not secrets.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.vdaf.prio3 import (
    Prio3,
    Prio3CountV08,
    Prio3HistogramV08,
    Prio3SumV08,
    Prio3SumVecV08,
)
from ppm_reference.vdaf.vdaf import VdafError
from tests.node_support import NodePackage, pytest_install

PACKAGE_VERSION = "0.8.0"
NODE_DIR = Path(__file__).resolve().parent / "interop_node"
DRIVER = NODE_DIR / "prio3_cli.mjs"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
PUBLISHED_DIR = PROJECT_ROOT.parent / "shared" / "test-vectors" / "vdaf-08"
CTX = b""  # VDAF-08 has no application context
SHARES = 2
REPORTS = 6  # honest reports per VDAF and direction
NODE_TIMEOUT = 120
PACKAGE = NodePackage("@divviup/prio3", PACKAGE_VERSION, NODE_DIR,
                      f"prio3-{PACKAGE_VERSION}")
AnyPrio3 = Prio3[Any, Any]


# ---------------------------------------------------------------------------------------
# The four VDAFs: our instance, the driver's description, measurements and exact sums.


@dataclass
class Case:
    name: str
    ours: AnyPrio3
    js: dict[str, Any]
    sample: Any  # (random.Random) -> measurement
    exact: Any  # (list of measurements) -> aggregate result


def _vec_sum(ms: list[list[int]], length: int) -> list[int]:
    return [sum(m[i] for m in ms) for i in range(length)]


def _histogram(ms: list[int], length: int) -> list[int]:
    return [sum(1 for m in ms if m == i) for i in range(length)]


def _cases() -> dict[str, Case]:
    sum_bits = 8
    sv_length, sv_bits, sv_chunk = 4, 3, 5  # 12 measurement elements, a partial last chunk
    h_length, h_chunk = 5, 2
    return {
        c.name: c
        for c in [
            Case("Prio3Count", Prio3CountV08(SHARES), {"type": "Prio3Count", "params": {}},
                 lambda r: r.randrange(2), sum),
            Case("Prio3Sum", Prio3SumV08(SHARES, sum_bits),
                 {"type": "Prio3Sum", "params": {"bits": sum_bits}},
                 lambda r: r.randrange(2**sum_bits), sum),
            Case("Prio3SumVec", Prio3SumVecV08(SHARES, sv_length, sv_bits, sv_chunk),
                 {"type": "Prio3SumVec",
                  "params": {"length": sv_length, "bits": sv_bits, "chunk_length": sv_chunk}},
                 lambda r: [r.randrange(2**sv_bits) for _ in range(sv_length)],
                 lambda ms: _vec_sum(ms, sv_length)),
            Case("Prio3Histogram", Prio3HistogramV08(SHARES, h_length, h_chunk),
                 {"type": "Prio3Histogram",
                  "params": {"length": h_length, "chunk_length": h_chunk}},
                 lambda r: r.randrange(h_length),
                 lambda ms: _histogram(ms, h_length)),
        ]
    }


CASES = _cases()


def _normalise(result: Any) -> Any:
    """Their aggregate (numbers, or bigints as decimal strings) as Python ints."""
    if isinstance(result, list):
        return [int(x) for x in result]
    return int(result)


def _rng(*labels: str) -> random.Random:
    return random.Random("|".join(("divviup-prio3-interop",) + labels))


# ---------------------------------------------------------------------------------------
# Installing the package and running the driver.


@dataclass
class Node:
    node: str
    modules: Path
    version: str

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        env = dict(os.environ, PRIO3_NODE_MODULES=str(self.modules))
        proc = subprocess.run(
            [self.node, str(DRIVER)], input=json.dumps(request), capture_output=True,
            text=True, env=env, timeout=NODE_TIMEOUT, check=False,
        )
        if proc.returncode != 0:
            pytest.fail(f"prio3_cli.mjs {request.get('op')} failed:\n{proc.stderr}")
        out: dict[str, Any] = json.loads(proc.stdout)
        assert out["version"] == self.version
        return out


@pytest.fixture(scope="module")
def divviup(request: pytest.FixtureRequest) -> Node:
    installed = pytest_install(PACKAGE, request)
    return Node(installed.node, installed.modules, installed.version)


# ---------------------------------------------------------------------------------------
# Our side of the flow.


def _our_verify(vdaf: AnyPrio3, verify_key: bytes, nonce: bytes, public_share_hex: str,
                input_shares_hex: list[str]) -> tuple[list[list[int]], list[bytes], bytes]:
    """Decode and verify one report for both Aggregators: (out_shares, encoded verifier
    shares, encoded verifier message). Raises VdafError on rejection."""
    public_share = vdaf.decode_public_share(bytes.fromhex(public_share_hex))
    states, verifier_shares = [], []
    for agg_id, share_hex in enumerate(input_shares_hex):
        encoded = bytes.fromhex(share_hex)
        input_share = vdaf.decode_input_share(agg_id, encoded)
        assert vdaf.encode_input_share(input_share) == encoded  # our codec round-trips theirs
        state, verifier_share = vdaf.verify_init(
            verify_key, CTX, agg_id, None, nonce, public_share, input_share)
        states.append(state)
        # Through the wire, as two Aggregators would exchange them.
        verifier_shares.append(vdaf.decode_verifier_share(
            state, vdaf.encode_verifier_share(verifier_share)))
    message = vdaf.verifier_shares_to_message(CTX, None, verifier_shares)
    encoded_message = vdaf.encode_verifier_message(message)
    out_shares = [
        vdaf.verify_next(CTX, state, vdaf.decode_verifier_message(state, encoded_message))
        for state in states
    ]
    return out_shares, [vdaf.encode_verifier_share(s) for s in verifier_shares], encoded_message


def _tamper(input_share_hex: str) -> str:
    """Flip the lowest bit of the first byte (the Leader's first measurement-share element,
    or a Helper's first seed byte)."""
    raw = bytearray(bytes.fromhex(input_share_hex))
    raw[0] ^= 1
    return raw.hex()


# ---------------------------------------------------------------------------------------
# (1) theirs shard -> ours verify and aggregate.


@pytest.mark.parametrize("name", list(CASES))
def test_theirs_shard_ours_verify_and_aggregate(divviup: Node, name: str) -> None:
    case = CASES[name]
    vdaf = case.ours
    rng = _rng("theirs->ours", name)
    measurements = [case.sample(rng) for _ in range(REPORTS)]
    nonces = [rng.randbytes(vdaf.NONCE_SIZE) for _ in measurements]
    verify_key = rng.randbytes(vdaf.VERIFY_KEY_SIZE)
    assert len(verify_key) == 16  # VDAF-08 verify keys (and seeds) are 16 bytes

    # No rands given: their library draws its own randomness.
    sharded = divviup.run({"op": "shard", "vdaf": case.js, "measurements": measurements,
                           "nonces": [n.hex() for n in nonces]})
    assert sharded["rand_size"] == vdaf.RAND_SIZE
    reports = sharded["reports"]
    assert len(reports) == REPORTS

    agg_shares = [vdaf.agg_init(None) for _ in range(SHARES)]
    for nonce, report in zip(nonces, reports, strict=True):
        out_shares, _, _ = _our_verify(vdaf, verify_key, nonce, report["public_share"],
                                       report["input_shares"])
        for agg_id in range(SHARES):
            agg_shares[agg_id] = vdaf.agg_update(None, agg_shares[agg_id], out_shares[agg_id])
    # Aggregate shares go through the wire too.
    agg_shares = [vdaf.decode_agg_share(None, vdaf.encode_agg_share(a)) for a in agg_shares]
    assert vdaf.unshard(None, agg_shares, REPORTS) == case.exact(measurements)

    # A tampered report of theirs is rejected by us, for either Aggregator's share.
    for agg_id in range(SHARES):
        shares = list(reports[0]["input_shares"])
        shares[agg_id] = _tamper(shares[agg_id])
        with pytest.raises(VdafError):
            _our_verify(vdaf, verify_key, nonces[0], reports[0]["public_share"], shares)


# ---------------------------------------------------------------------------------------
# (2) ours shard -> theirs verify and aggregate.


@pytest.mark.parametrize("name", list(CASES))
def test_ours_shard_theirs_verify_and_aggregate(divviup: Node, name: str) -> None:
    case = CASES[name]
    vdaf = case.ours
    rng = _rng("ours->theirs", name)
    measurements = [case.sample(rng) for _ in range(REPORTS)]
    verify_key = rng.randbytes(vdaf.VERIFY_KEY_SIZE)

    reports, expected = [], []
    for measurement in measurements:
        nonce = rng.randbytes(vdaf.NONCE_SIZE)
        public_share, input_shares = vdaf.shard(
            CTX, measurement, nonce, rng.randbytes(vdaf.RAND_SIZE))
        public_hex = vdaf.encode_public_share(public_share).hex()
        shares_hex = [vdaf.encode_input_share(s).hex() for s in input_shares]
        reports.append(
            {"nonce": nonce.hex(), "public_share": public_hex, "input_shares": shares_hex})
        expected.append(_our_verify(vdaf, verify_key, nonce, public_hex, shares_hex))
    # One tampered copy of the first report per Aggregator: both must be rejected.
    tampered = []
    for agg_id in range(SHARES):
        shares = list(reports[0]["input_shares"])
        shares[agg_id] = _tamper(shares[agg_id])
        tampered.append(dict(reports[0], input_shares=shares))

    result = divviup.run({"op": "verify", "vdaf": case.js, "verify_key": verify_key.hex(),
                          "reports": reports + tampered})
    verdicts = result["reports"]
    assert [v["ok"] for v in verdicts] == [True] * REPORTS + [False] * SHARES, [
        v.get("error") for v in verdicts]
    assert result["count"] == REPORTS
    assert _normalise(result["aggregate"]) == case.exact(measurements)

    # Their verification is byte-identical to ours, message by message.
    our_agg_shares = [vdaf.agg_init(None) for _ in range(SHARES)]
    for verdict, (out_shares, verifier_shares, message) in zip(verdicts, expected,
                                                                strict=False):
        assert verdict["prep_shares"] == [s.hex() for s in verifier_shares]
        assert verdict["prep_message"] == message.hex()
        assert verdict["out_shares"] == [vdaf.encode_out_share(s).hex() for s in out_shares]
        for agg_id in range(SHARES):
            our_agg_shares[agg_id] = vdaf.agg_update(None, our_agg_shares[agg_id],
                                                     out_shares[agg_id])
    assert result["agg_shares"] == [vdaf.encode_agg_share(a).hex() for a in our_agg_shares]


# ---------------------------------------------------------------------------------------
# (3) same measurement, nonce and rand: same bytes.


@pytest.mark.parametrize("name", list(CASES))
def test_same_randomness_same_bytes(divviup: Node, name: str) -> None:
    case = CASES[name]
    vdaf = case.ours
    rng = _rng("same-bytes", name)
    measurements = [case.sample(rng) for _ in range(REPORTS)]
    nonces = [rng.randbytes(vdaf.NONCE_SIZE) for _ in measurements]
    rands = [rng.randbytes(vdaf.RAND_SIZE) for _ in measurements]

    theirs = divviup.run({"op": "shard", "vdaf": case.js, "measurements": measurements,
                          "nonces": [n.hex() for n in nonces],
                          "rands": [r.hex() for r in rands]})
    assert theirs["rand_size"] == vdaf.RAND_SIZE
    for measurement, nonce, rand, report in zip(measurements, nonces, rands,
                                                theirs["reports"], strict=True):
        public_share, input_shares = vdaf.shard(CTX, measurement, nonce, rand)
        assert report["public_share"] == vdaf.encode_public_share(public_share).hex(), (
            measurement)
        assert report["input_shares"] == [vdaf.encode_input_share(s).hex()
                                          for s in input_shares], measurement


# ---------------------------------------------------------------------------------------
# Anchor: their library against the published VDAF-08 vectors.


@pytest.mark.parametrize("name", list(CASES))
def test_their_library_reproduces_published_vector(divviup: Node, name: str) -> None:
    path = PUBLISHED_DIR / f"{name}_0.json"
    if not path.is_file():
        pytest.skip(f"published VDAF-08 vector not found at {path}")
    doc = json.loads(path.read_text())
    assert doc["shares"] == SHARES
    params = {k: doc[k] for k in ("bits", "length", "chunk_length") if k in doc}
    spec = {"type": name, "params": params}
    preps = doc["prep"]

    sharded = divviup.run({"op": "shard", "vdaf": spec,
                           "measurements": [p["measurement"] for p in preps],
                           "nonces": [p["nonce"] for p in preps],
                           "rands": [p["rand"] for p in preps]})
    for prep, report in zip(preps, sharded["reports"], strict=True):
        assert report["public_share"] == prep["public_share"]
        assert report["input_shares"] == prep["input_shares"]

    verified = divviup.run({"op": "verify", "vdaf": spec, "verify_key": doc["verify_key"],
                            "reports": [{"nonce": p["nonce"], "public_share": p["public_share"],
                                         "input_shares": p["input_shares"]} for p in preps]})
    for prep, verdict in zip(preps, verified["reports"], strict=True):
        assert verdict["ok"], verdict.get("error")
        assert verdict["prep_shares"] == prep["prep_shares"][0]
        assert verdict["prep_message"] == prep["prep_messages"][0]
        assert verdict["out_shares"] == ["".join(s) for s in prep["out_shares"]]
    assert verified["agg_shares"] == doc["agg_shares"]
    assert _normalise(verified["aggregate"]) == doc["agg_result"]
