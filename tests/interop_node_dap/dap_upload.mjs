// Upload driver for the divviup-ts DAP client `@divviup/dap` 0.9.1 (draft-ietf-ppm-dap-09,
// VDAF-08 through its dependency @divviup/prio3 0.8), run by tests/dap09_node.py.
//
// The package is not installed here: it lives in a cache folder outside the repository.
// Its node_modules directory is given by the DAP_NODE_MODULES environment variable (or
// the first command-line argument). The package's "exports" map has an "import"
// condition only, so it is loaded by the file URL of that entry point.
//
// Request: one JSON object on stdin:
//
//   {"leader": "http://127.0.0.1:8080/", "helper": "http://127.0.0.1:8081/",
//    "task_id": "<base64url, unpadded, 32 bytes>", "time_precision": 3600,
//    "vdaf": {"type": "Prio3Count" | "Prio3Sum" | "Prio3Histogram" | "Prio3SumVec",
//             "bits": ..., "length": ..., "chunk_length": ...},
//    "measurements": [...],
//    "time": <POSIX seconds>}        (optional: the report time instead of "now")
//
// VDAF parameters (the names of our Python classes; they may also sit in "vdaf.params"):
// Prio3Sum "bits"; Prio3Histogram "length", "chunk_length"; Prio3SumVec "length", "bits",
// "chunk_length". Measurements: Prio3Count 0/1 (or a boolean); Prio3Sum an integer (or a
// decimal string, for values past 2^53); Prio3Histogram a bucket index; Prio3SumVec a
// list of integers.
//
// Response: one JSON line on stdout:
//   {"uploaded": n, "package": "@divviup/dap@0.9.1", "protocol": "dap-09"}   exit 0
//   {"error": "message", "uploaded": k, "dap_error"?: {...}}               exit 1
// ("uploaded" on error counts the measurements accepted before the failure; "dap_error"
// is present when the package raised its DAPError, i.e. the server answered with an
// application/problem+json document.)
//
// Package API used (all public: the package's index exports Task, TaskId, DAPError):
//
//   const task = new Task({
//     type: "count" | "sum" | "histogram" | "sumVec",   // the VDAF, with its parameters
//     bits, length, chunkLength,                        // as @divviup/prio3's constructors
//     id: "<base64url task id>",                        // (without "shares")
//     leader: "<url>", helper: "<url>",
//     timePrecisionSeconds: <number>,
//   });
//   await task.sendMeasurement(measurement, { timestamp?: Date });   // once per measurement
//
// sendMeasurement = fetchKeyConfiguration (GET {aggregator}/hpke_config?task_id=<id> to
// both Aggregators, once per Task: the configs are cached) + generateReport (shard, round
// the time down to timePrecisionSeconds, HPKE-seal both input shares) + sendReport
// (PUT {leader}/tasks/<id>/reports, Content-Type application/dap-report); on a
// problem document whose type ends in ":outdatedConfig" it drops the cached configs,
// fetches them again and sends a fresh report once more. One Task serves all
// measurements of a request, so the HPKE configs are fetched once per run.

import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";

const PACKAGE = "@divviup/dap";

async function loadDap() {
  const modulesDir = process.env.DAP_NODE_MODULES || process.argv[2];
  if (!modulesDir) {
    throw new Error(`set DAP_NODE_MODULES to the node_modules holding ${PACKAGE}`);
  }
  const root = path.join(path.resolve(modulesDir), ...PACKAGE.split("/"));
  const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
  const exported = manifest.exports && manifest.exports["."];
  const entry = (exported && (exported.import || exported.default)) || manifest.main;
  const mod = await import(pathToFileURL(path.join(root, entry)).href);
  return { mod, version: manifest.version };
}

function param(spec, name) {
  const value = spec[name] !== undefined ? spec[name] : (spec.params || {})[name];
  if (value === undefined) throw new Error(`${spec.type} needs the parameter "${name}"`);
  return value;
}

// Our VDAF description -> the package's "known VDAF spec" (merged into the Task params).
function vdafSpec(spec) {
  switch (spec && spec.type) {
    case "Prio3Count":
      return { type: "count" };
    case "Prio3Sum":
      return { type: "sum", bits: param(spec, "bits") };
    case "Prio3Histogram":
      return {
        type: "histogram",
        length: param(spec, "length"),
        chunkLength: param(spec, "chunk_length"),
      };
    case "Prio3SumVec":
      return {
        type: "sumVec",
        length: param(spec, "length"),
        bits: param(spec, "bits"),
        chunkLength: param(spec, "chunk_length"),
      };
    default:
      throw new Error(`unknown VDAF type ${JSON.stringify(spec && spec.type)}`);
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

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

function errorMessage(err) {
  if (!err || !err.message) return String(err);
  let message = `${err.name || "Error"}: ${err.message}`;
  // fetch() failures ("fetch failed") carry the socket error as their cause.
  if (err.cause) message += ` (cause: ${err.cause.message || err.cause})`;
  return message;
}

let dap = null; // the loaded package
let uploaded = 0;

async function main() {
  const loaded = await loadDap();
  dap = loaded.mod;
  const { mod, version } = loaded;
  const req = JSON.parse(await readStdin());
  for (const key of ["leader", "helper", "task_id", "time_precision", "vdaf", "measurements"]) {
    if (req[key] === undefined) throw new Error(`missing "${key}"`);
  }
  if (!Array.isArray(req.measurements)) throw new Error('"measurements" must be a list');
  const task = new mod.Task({
    ...vdafSpec(req.vdaf),
    id: req.task_id,
    leader: req.leader,
    helper: req.helper,
    timePrecisionSeconds: req.time_precision,
  });
  const options = req.time === undefined ? undefined : { timestamp: new Date(req.time * 1000) };
  for (const m of req.measurements) {
    await task.sendMeasurement(measurementFor(req.vdaf.type, m), options);
    uploaded += 1;
  }
  process.stdout.write(
    JSON.stringify({
      uploaded,
      package: `${PACKAGE}@${version}`,
      protocol: mod.Task.protocolVersion,
    }) + "\n",
  );
}

main().catch((err) => {
  const out = { error: errorMessage(err), uploaded };
  if (dap && err instanceof dap.DAPError) {
    out.dap_error = {
      type: err.type,
      short_type: err.shortType,
      title: err.title,
      status: err.status,
      detail: err.detail,
      context: err.clientContext,
    };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
  process.stderr.write(`dap_upload: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
