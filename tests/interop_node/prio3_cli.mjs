// JSON-over-stdin/stdout driver for @divviup/prio3 (VDAF-08), used by
// tests/test_interop_divviup_prio3.py to cross-check our VDAF-08 Prio3.
//
// The package is not installed here: it lives in a cache folder outside the repository.
// Its node_modules directory is given by the PRIO3_NODE_MODULES environment variable
// (or the first command-line argument).
//
// Requests (one JSON object on stdin, one JSON object on stdout):
//
//   {"op": "shard", "vdaf": {"type": "Prio3Sum", "params": {"bits": 8}},
//    "measurements": [...], "nonces": ["hex", ...], "rands": ["hex", ...]?}
//   -> {"rand_size": n, "reports": [{"public_share": "hex", "input_shares": ["hex", "hex"]}]}
//
//   {"op": "verify", "vdaf": {...}, "verify_key": "hex",
//    "reports": [{"nonce": "hex", "public_share": "hex", "input_shares": ["hex", "hex"]}]}
//   -> {"reports": [{"ok": true, "prep_shares": [...], "prep_message": "hex",
//                    "out_shares": ["hex", "hex"]} | {"ok": false, "error": "..."}],
//       "agg_shares": ["hex", "hex"], "aggregate": ..., "count": n}
//
// The package has no decoders for its wire messages (only encoders), so the decoding of
// public shares and input shares below is ours, written from VDAF-08 Section 7.2.6 and
// built on the package's own field and XOF (the same calls its `shard` uses to expand a
// Helper's seeds). Everything else is the package's code: shard, prepareInit,
// unshardPreparationShares, prepareNext, aggregate, unshard and the encoders.
//
// `vdaf.params` uses the names of our Python classes: bits, length, chunk_length.
// Measurements: Prio3Count takes 0/1 (or a boolean); Prio3Sum an integer (a decimal string
// for large values); Prio3SumVec a list of integers; Prio3Histogram a bucket index.
// Aggregates come back with bigints as decimal strings.

import { createRequire } from "node:module";
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";
import path from "node:path";

const SHARES = 2;
// Usage values of VDAF-08 Section 7.2.7 (the package's private `Usage` enum).
const USAGE_MEAS_SHARE = 1;
const USAGE_PROOF_SHARE = 2;

async function loadPrio3() {
  const modulesDir = process.env.PRIO3_NODE_MODULES || process.argv[2];
  if (!modulesDir) {
    throw new Error("set PRIO3_NODE_MODULES to the node_modules holding @divviup/prio3");
  }
  const require = createRequire(path.join(path.resolve(modulesDir), "..", "noop.js"));
  const entry = require.resolve("@divviup/prio3");
  const version = require("@divviup/prio3/package.json").version;
  const mod = await import(pathToFileURL(entry).href);
  return { mod, version };
}

function build(mod, spec) {
  const { type, params = {} } = spec;
  switch (type) {
    case "Prio3Count":
      return new mod.Prio3Count({ shares: SHARES });
    case "Prio3Sum":
      return new mod.Prio3Sum({ shares: SHARES, bits: params.bits });
    case "Prio3SumVec":
      return new mod.Prio3SumVec({
        shares: SHARES,
        length: params.length,
        bits: params.bits,
        chunkLength: params.chunk_length,
      });
    case "Prio3Histogram":
      return new mod.Prio3Histogram({
        shares: SHARES,
        length: params.length,
        chunkLength: params.chunk_length,
      });
    default:
      throw new Error(`unknown VDAF type ${type}`);
  }
}

function measurementFor(type, m) {
  if (type === "Prio3Count") {
    if (m === 0 || m === 1) return m === 1;
    return m; // booleans pass through; anything else is left for the package to reject
  }
  if (type === "Prio3Sum" && typeof m === "string") return BigInt(m);
  return m;
}

const hex = (buf) => Buffer.from(buf).toString("hex");
const unhex = (s) => Buffer.from(s, "hex");

function jsonable(value) {
  if (typeof value === "bigint") return value.toString();
  if (Array.isArray(value)) return value.map(jsonable);
  return value;
}

async function shard(vdaf, req) {
  const { measurements, nonces } = req;
  if (nonces.length !== measurements.length) throw new Error("one nonce per measurement");
  const reports = [];
  for (let i = 0; i < measurements.length; i++) {
    const rand = req.rands ? unhex(req.rands[i]) : randomBytes(vdaf.randSize);
    const { publicShare, inputShares } = await vdaf.shard(
      measurementFor(req.vdaf.type, measurements[i]),
      unhex(nonces[i]),
      rand,
    );
    reports.push({
      public_share: hex(vdaf.encodePublicShare(publicShare)),
      input_shares: inputShares.map((s) => hex(vdaf.encodeInputShare(s))),
    });
  }
  return { rand_size: vdaf.randSize, reports };
}

// --- decoding (ours; the package only encodes) ---------------------------------------

function decodePublicShare(vdaf, encoded) {
  const seedSize = vdaf.xof.seedSize;
  if (!vdaf.useJointRand()) {
    if (encoded.length !== 0) throw new Error("public share must be empty");
    return { jointRandParts: [] };
  }
  if (encoded.length !== seedSize * vdaf.shares) {
    throw new Error(`public share must be ${seedSize * vdaf.shares} bytes`);
  }
  const jointRandParts = [];
  for (let j = 0; j < vdaf.shares; j++) {
    jointRandParts.push(Buffer.from(encoded.subarray(j * seedSize, (j + 1) * seedSize)));
  }
  return { jointRandParts };
}

async function decodeInputShare(vdaf, aggId, encoded) {
  const { flp, field, proofs } = vdaf;
  const seedSize = vdaf.xof.seedSize;
  const blindLen = vdaf.useJointRand() ? seedSize : 0;
  if (aggId === 0) {
    const measLen = flp.measurementLen * field.encodedSize;
    const proofsLen = flp.proofLen * proofs * field.encodedSize;
    if (encoded.length !== measLen + proofsLen + blindLen) {
      throw new Error(`leader input share must be ${measLen + proofsLen + blindLen} bytes`);
    }
    return {
      measurementShare: field.decode(encoded.subarray(0, measLen)),
      proofsShare: field.decode(encoded.subarray(measLen, measLen + proofsLen)),
      blind: Buffer.from(encoded.subarray(measLen + proofsLen)),
    };
  }
  if (encoded.length !== 2 * seedSize + blindLen) {
    throw new Error(`helper input share must be ${2 * seedSize + blindLen} bytes`);
  }
  const measSeed = Buffer.from(encoded.subarray(0, seedSize));
  const proofsSeed = Buffer.from(encoded.subarray(seedSize, 2 * seedSize));
  const blind = Buffer.from(encoded.subarray(2 * seedSize));
  // Expanded exactly as the package's own shard() expands a Helper's seeds.
  const measurementShare = await vdaf.pseudorandom(
    flp.measurementLen, USAGE_MEAS_SHARE, measSeed, Buffer.of(aggId));
  const proofsShare = await vdaf.pseudorandom(
    flp.proofLen * proofs, USAGE_PROOF_SHARE, proofsSeed, Buffer.from([proofs, aggId]));
  return { measurementShare, proofsShare, blind };
}

// --- preparation (theirs) -------------------------------------------------------------

async function verify(vdaf, req) {
  const verifyKey = unhex(req.verify_key);
  if (verifyKey.length !== vdaf.verifyKeySize) {
    throw new Error(`verify key must be ${vdaf.verifyKeySize} bytes`);
  }
  const results = [];
  const outSharesByAgg = Array.from({ length: vdaf.shares }, () => []);
  for (const report of req.reports) {
    try {
      const nonce = unhex(report.nonce);
      if (nonce.length !== vdaf.nonceSize) throw new Error("bad nonce length");
      if (report.input_shares.length !== vdaf.shares) throw new Error("wrong number of shares");
      const encodedPublic = unhex(report.public_share);
      const prepared = [];
      for (let aggId = 0; aggId < vdaf.shares; aggId++) {
        // Each Aggregator decodes its own copy: prepareInit writes into the public share.
        const publicShare = decodePublicShare(vdaf, encodedPublic);
        const inputShare = await decodeInputShare(vdaf, aggId, unhex(report.input_shares[aggId]));
        prepared.push(
          await vdaf.prepareInit(verifyKey, aggId, null, nonce, publicShare, inputShare));
      }
      const prepShares = prepared.map((p) => p.preparationShare);
      const prepMessage = await vdaf.unshardPreparationShares(null, prepShares);
      const outShares = prepared.map(
        (p) => vdaf.prepareNext(p.preparationState, prepMessage).outputShare);
      outShares.forEach((s, aggId) => outSharesByAgg[aggId].push(s));
      results.push({
        ok: true,
        prep_shares: prepShares.map((s) => hex(vdaf.encodePreparationShare(s))),
        prep_message: hex(vdaf.encodePreparationMessage(prepMessage)),
        out_shares: outShares.map((s) => hex(vdaf.field.encode(s))),
      });
    } catch (err) {
      results.push({ ok: false, error: String(err && err.message ? err.message : err) });
    }
  }
  const count = outSharesByAgg[0].length;
  const aggShares = outSharesByAgg.map((shares) => vdaf.aggregate(null, shares));
  return {
    reports: results,
    count,
    agg_shares: aggShares.map((s) => hex(vdaf.encodeAggregatorShare(s))),
    aggregate: count > 0 ? jsonable(vdaf.unshard(null, aggShares, count)) : null,
  };
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function main() {
  const { mod, version } = await loadPrio3();
  const req = JSON.parse(await readStdin());
  let out;
  if (req.op === "version") {
    out = { version };
  } else {
    const vdaf = build(mod, req.vdaf);
    if (req.op === "shard") out = await shard(vdaf, req);
    else if (req.op === "verify") out = await verify(vdaf, req);
    else throw new Error(`unknown op ${req.op}`);
    out.version = version;
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((err) => {
  process.stderr.write(`prio3_cli: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
