//! A test-only driver of libprio-rs 0.16 (the `prio` crate, pinned in Cargo.toml) for the
//! VDAF-08 cross-checks of `tests/test_peer_libprio.py` and the column of
//! `benchmarks/vdaf.py`. Its sibling `../libprio18` drives prio 0.18 (VDAF-18) with the
//! same protocol.
//!
//! It reads one JSON request on stdin, `{"cases": [CASE, ...]}`, and writes one JSON
//! answer on stdout, `{"results": [RESULT, ...]}`, a result per case in order. Bytes are
//! hex. A case that fails answers `{"error": "..."}` and the others go on; a request that
//! is not JSON is a one-line error on stderr and exit status 2.
//!
//! prio 0.16 speaks VDAF-08 (draft-irtf-cfrg-vdaf-08): no application context, 16-byte
//! seeds and verification keys, 16-byte nonces, and the draft-08 names (prepare_init,
//! prepare_shares_to_prepare_message, prepare_next). Cases (`op`):
//!
//!   shard                 {vdaf, reports: [{measurement, nonce}]}
//!                         -> {reports: [{public_share, input_shares}]}: `shard`, with OS
//!                         randomness (0.16 keeps `shard_with_random` crate-private)
//!   check_vector          {vdaf, vector} -> {ok, mismatch?}: the crate's own test-vector
//!                         checker (`prio3_test::check_test_vec_custom_de`, feature
//!                         test-util) on a VDAF-08 test vector document (schema of the
//!                         draft-08 reference code: `prep`, `prep_shares`, ...). It shards
//!                         each report with the vector's `rand` and asserts every byte
//!                         (public share, input shares, prep shares, prep message, output
//!                         shares, aggregate shares) and the aggregate result; this is how
//!                         0.16 takes explicit randomness
//!   verify                {vdaf, verify_key, reports: [{nonce, public_share,
//!                         input_shares, verifier_shares?, verifier_message?}]}
//!                         -> {reports: [{ok, error?, verifier_shares, verifier_message,
//!                         out_shares}], accepted, agg_shares, agg_result}: both
//!                         Aggregators prepare each report (prep shares are called
//!                         verifier shares here, as in ../libprio18); replacements tamper
//!   unshard               {vdaf, agg_shares, num_measurements} -> {agg_result}
//!   optimal_chunk_length  {lengths: [n, ...]} -> {chunk_lengths: [...]}
//!   bench                 {vdaf, verify_key, measurements, warmup?}
//!                         -> {shard_ns: [...], verify_ns: [...]} per report
//!
//! `vdaf` is `{"type": "Prio3Count" | "Prio3Sum" | "Prio3SumVec" | "Prio3Histogram",
//! "bits", "length", "chunk_length"}` (draft-08 Section 7.4); always two Aggregators.
//! Integers of measurements and aggregate results are JSON numbers or decimal strings
//! (results are decimal strings).

use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use prio::codec::{Encode, ParameterizedDecode};
use prio::vdaf::prio3::{optimal_chunk_length, Prio3Count, Prio3Histogram, Prio3Sum, Prio3SumVec};
use prio::vdaf::prio3_test::check_test_vec_custom_de;
use prio::vdaf::{Aggregator, Client, Collector, PrepareTransition, Vdaf};
use serde::Deserialize;
use serde_json::{json, Map, Value};

const SEED_SIZE: usize = 16;
const NONCE_SIZE: usize = 16;
const SHARES: u8 = 2;

type R<T> = Result<T, String>;

// ---------------------------------------------------------------------------------------
// JSON helpers
// ---------------------------------------------------------------------------------------

fn field<'a>(obj: &'a Value, key: &str) -> R<&'a Value> {
    obj.get(key).ok_or_else(|| format!("missing field {key:?}"))
}

fn hex_of(obj: &Value, key: &str) -> R<Vec<u8>> {
    let text = field(obj, key)?
        .as_str()
        .ok_or_else(|| format!("{key} must be a hex string"))?;
    hex::decode(text).map_err(|e| format!("{key}: bad hex: {e}"))
}

fn hex_list(obj: &Value, key: &str) -> R<Vec<Vec<u8>>> {
    field(obj, key)?
        .as_array()
        .ok_or_else(|| format!("{key} must be a list"))?
        .iter()
        .map(|v| {
            let text = v
                .as_str()
                .ok_or_else(|| format!("{key}: not a hex string"))?;
            hex::decode(text).map_err(|e| format!("{key}: bad hex: {e}"))
        })
        .collect()
}

fn array<'a>(obj: &'a Value, key: &str) -> R<&'a Vec<Value>> {
    field(obj, key)?
        .as_array()
        .ok_or_else(|| format!("{key} must be a list"))
}

fn uint(v: &Value, what: &str) -> R<u128> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .map(u128::from)
            .ok_or_else(|| format!("{what}: not an unsigned integer: {n}")),
        Value::String(s) => s
            .parse::<u128>()
            .map_err(|_| format!("{what}: not an unsigned integer: {s:?}")),
        Value::Bool(b) => Ok(u128::from(*b)),
        _ => Err(format!("{what}: not an integer: {v}")),
    }
}

fn param(spec: &Value, key: &str) -> R<u128> {
    uint(field(spec, key)?, key)
}

fn param_usize(spec: &Value, key: &str) -> R<usize> {
    usize::try_from(param(spec, key)?).map_err(|_| format!("{key} is too large"))
}

fn array_of<T>(v: &Value, what: &str, f: impl Fn(&Value) -> R<T>) -> R<Vec<T>> {
    v.as_array()
        .ok_or_else(|| format!("{what} must be a list"))?
        .iter()
        .map(f)
        .collect()
}

fn bit(v: &Value) -> R<bool> {
    match uint(v, "measurement")? {
        0 => Ok(false),
        1 => Ok(true),
        n => Err(format!("measurement: {n} is not a bit")),
    }
}

fn dec(x: impl ToString) -> Value {
    Value::String(x.to_string())
}

fn nonce_of(obj: &Value) -> R<[u8; NONCE_SIZE]> {
    hex_of(obj, "nonce")?
        .try_into()
        .map_err(|_| format!("nonce must be {NONCE_SIZE} bytes"))
}

fn verify_key_of(obj: &Value) -> R<[u8; SEED_SIZE]> {
    hex_of(obj, "verify_key")?
        .try_into()
        .map_err(|_| format!("verify_key must be {SEED_SIZE} bytes"))
}

fn encoded(x: &impl Encode, what: &str) -> R<String> {
    x.get_encoded()
        .map(hex::encode)
        .map_err(|e| format!("encoding {what}: {e}"))
}

// ---------------------------------------------------------------------------------------
// The VDAFs
// ---------------------------------------------------------------------------------------

/// What differs between the VDAFs: their measurements and aggregate results in JSON.
trait Io: Vdaf {
    fn measurement(v: &Value) -> R<Self::Measurement>;
    fn result(r: &Self::AggregateResult) -> Value;
    /// Runs the crate's test-vector checker on `doc` (it panics on the first mismatch).
    fn check_vector(&self, doc: &str);
}

/// A Count measurement as the vectors write it (0 or 1), for the checker.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
struct CountBit(u8);

impl From<CountBit> for bool {
    fn from(b: CountBit) -> bool {
        b.0 != 0
    }
}

impl Io for Prio3Count {
    fn measurement(v: &Value) -> R<bool> {
        bit(v)
    }
    fn result(r: &u64) -> Value {
        dec(r)
    }
    fn check_vector(&self, doc: &str) {
        check_test_vec_custom_de::<CountBit, bool, u64, _, _, SEED_SIZE>(doc, |_, _| self.clone())
    }
}

impl Io for Prio3Sum {
    fn measurement(v: &Value) -> R<u128> {
        uint(v, "measurement")
    }
    fn result(r: &u128) -> Value {
        dec(r)
    }
    fn check_vector(&self, doc: &str) {
        check_test_vec_custom_de::<u128, u128, u128, _, _, SEED_SIZE>(doc, |_, _| self.clone())
    }
}

impl Io for Prio3SumVec {
    fn measurement(v: &Value) -> R<Vec<u128>> {
        array_of(v, "measurement", |x| uint(x, "measurement"))
    }
    fn result(r: &Vec<u128>) -> Value {
        Value::Array(r.iter().map(dec).collect())
    }
    fn check_vector(&self, doc: &str) {
        check_test_vec_custom_de::<Vec<u128>, Vec<u128>, Vec<u128>, _, _, SEED_SIZE>(doc, |_, _| {
            self.clone()
        })
    }
}

impl Io for Prio3Histogram {
    fn measurement(v: &Value) -> R<usize> {
        usize::try_from(uint(v, "measurement")?).map_err(|_| "measurement too large".into())
    }
    fn result(r: &Vec<u128>) -> Value {
        Value::Array(r.iter().map(dec).collect())
    }
    fn check_vector(&self, doc: &str) {
        check_test_vec_custom_de::<usize, usize, Vec<u128>, _, _, SEED_SIZE>(doc, |_, _| {
            self.clone()
        })
    }
}

enum AnyVdaf {
    Count(Prio3Count),
    Sum(Prio3Sum),
    SumVec(Prio3SumVec),
    Histogram(Prio3Histogram),
}

/// Runs `$body` with `$v` bound to the concrete VDAF of `$any`.
macro_rules! with_vdaf {
    ($any:expr, $v:ident => $body:expr) => {
        match $any {
            AnyVdaf::Count($v) => $body,
            AnyVdaf::Sum($v) => $body,
            AnyVdaf::SumVec($v) => $body,
            AnyVdaf::Histogram($v) => $body,
        }
    };
}

fn build_vdaf(case: &Value) -> R<AnyVdaf> {
    let spec = field(case, "vdaf")?;
    let kind = field(spec, "type")?
        .as_str()
        .ok_or("vdaf.type must be a string")?;
    let err = |e: prio::vdaf::VdafError| format!("{kind}: {e}");
    Ok(match kind {
        "Prio3Count" => AnyVdaf::Count(Prio3Count::new_count(SHARES).map_err(err)?),
        "Prio3Sum" => {
            AnyVdaf::Sum(Prio3Sum::new_sum(SHARES, param_usize(spec, "bits")?).map_err(err)?)
        }
        "Prio3SumVec" => AnyVdaf::SumVec(
            Prio3SumVec::new_sum_vec(
                SHARES,
                param_usize(spec, "bits")?,
                param_usize(spec, "length")?,
                param_usize(spec, "chunk_length")?,
            )
            .map_err(err)?,
        ),
        "Prio3Histogram" => AnyVdaf::Histogram(
            Prio3Histogram::new_histogram(
                SHARES,
                param_usize(spec, "length")?,
                param_usize(spec, "chunk_length")?,
            )
            .map_err(err)?,
        ),
        other => return Err(format!("unknown VDAF {other:?}")),
    })
}

// ---------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------

/// VDAF-08 has no application context: a request may only name the empty one.
fn no_ctx(case: &Value) -> R<()> {
    if case.get("ctx").is_some() && !hex_of(case, "ctx")?.is_empty() {
        return Err("VDAF-08 has no application context: ctx must be empty".into());
    }
    Ok(())
}

fn shard<V>(vdaf: &V, case: &Value) -> R<Value>
where
    V: Io + Client<NONCE_SIZE>,
{
    no_ctx(case)?;
    let mut out = Vec::new();
    for report in array(case, "reports")? {
        let measurement = V::measurement(field(report, "measurement")?)?;
        let nonce = nonce_of(report)?;
        if report.get("rand").is_some() {
            return Err("prio 0.16 shards only with its own randomness: use check_vector".into());
        }
        let (public_share, input_shares) = vdaf
            .shard(&measurement, &nonce)
            .map_err(|e| format!("shard: {e}"))?;
        let shares = input_shares
            .iter()
            .map(|s| encoded(s, "input share"))
            .collect::<R<Vec<_>>>()?;
        out.push(json!({
            "public_share": encoded(&public_share, "public share")?,
            "input_shares": shares,
        }));
    }
    Ok(json!({ "reports": out }))
}

/// One report through both Aggregators: (verifier shares, verifier message, out shares).
fn verify_report<V>(
    vdaf: &V,
    verify_key: &[u8; SEED_SIZE],
    report: &Value,
    record: &mut Map<String, Value>,
) -> R<Vec<V::OutputShare>>
where
    V: Aggregator<SEED_SIZE, NONCE_SIZE> + Vdaf<AggregationParam = ()>,
{
    let nonce = nonce_of(report)?;
    let public_share =
        V::PublicShare::get_decoded_with_param(vdaf, &hex_of(report, "public_share")?)
            .map_err(|e| format!("decoding public share: {e}"))?;
    let encoded_shares = hex_list(report, "input_shares")?;
    if encoded_shares.len() != usize::from(SHARES) {
        return Err(format!("expected {SHARES} input shares"));
    }
    let mut states = Vec::new();
    let mut shares = Vec::new();
    for (agg_id, bytes) in encoded_shares.iter().enumerate() {
        let input_share = V::InputShare::get_decoded_with_param(&(vdaf, agg_id), bytes)
            .map_err(|e| format!("decoding input share {agg_id}: {e}"))?;
        let (state, share) = vdaf
            .prepare_init(verify_key, agg_id, &(), &nonce, &public_share, &input_share)
            .map_err(|e| format!("prepare_init of Aggregator {agg_id}: {e}"))?;
        states.push(state);
        shares.push(share);
    }
    if report.get("verifier_shares").is_some() {
        let replaced = hex_list(report, "verifier_shares")?;
        if replaced.len() != shares.len() {
            return Err(format!("expected {SHARES} verifier shares"));
        }
        for (i, bytes) in replaced.iter().enumerate() {
            shares[i] = V::PrepareShare::get_decoded_with_param(&states[i], bytes)
                .map_err(|e| format!("decoding verifier share {i}: {e}"))?;
        }
    }
    record.insert(
        "verifier_shares".into(),
        json!(shares
            .iter()
            .map(|s| encoded(s, "verifier share"))
            .collect::<R<Vec<_>>>()?),
    );
    let mut message = vdaf
        .prepare_shares_to_prepare_message(&(), shares)
        .map_err(|e| format!("prepare_shares_to_prepare_message: {e}"))?;
    if report.get("verifier_message").is_some() {
        message = V::PrepareMessage::get_decoded_with_param(
            &states[0],
            &hex_of(report, "verifier_message")?,
        )
        .map_err(|e| format!("decoding verifier message: {e}"))?;
    }
    record.insert(
        "verifier_message".into(),
        json!(encoded(&message, "verifier message")?),
    );
    let mut outs = Vec::new();
    for (agg_id, state) in states.into_iter().enumerate() {
        match vdaf
            .prepare_next(state, message.clone())
            .map_err(|e| format!("prepare_next of Aggregator {agg_id}: {e}"))?
        {
            PrepareTransition::Finish(out) => outs.push(out),
            PrepareTransition::Continue(..) => {
                return Err("Prio3 verification did not finish after one round".into())
            }
        }
    }
    Ok(outs)
}

fn verify<V>(vdaf: &V, case: &Value) -> R<Value>
where
    V: Io + Aggregator<SEED_SIZE, NONCE_SIZE> + Collector + Vdaf<AggregationParam = ()>,
{
    no_ctx(case)?;
    let verify_key = verify_key_of(case)?;
    let mut records = Vec::new();
    let mut accepted: Vec<Vec<V::OutputShare>> = vec![Vec::new(); usize::from(SHARES)];
    let mut count = 0usize;
    for report in array(case, "reports")? {
        let mut record = Map::new();
        match verify_report(vdaf, &verify_key, report, &mut record) {
            Ok(outs) => {
                record.insert("ok".into(), json!(true));
                record.insert(
                    "out_shares".into(),
                    json!(outs
                        .iter()
                        .map(|o| encoded(o, "output share"))
                        .collect::<R<Vec<_>>>()?),
                );
                for (j, out) in outs.into_iter().enumerate() {
                    accepted[j].push(out);
                }
                count += 1;
            }
            Err(e) => {
                record.insert("ok".into(), json!(false));
                record.insert("error".into(), json!(e));
            }
        }
        records.push(Value::Object(record));
    }
    let mut agg_shares = Vec::new();
    for outs in accepted {
        agg_shares.push(
            vdaf.aggregate(&(), outs)
                .map_err(|e| format!("aggregate: {e}"))?,
        );
    }
    let encoded_agg = agg_shares
        .iter()
        .map(|a| encoded(a, "aggregate share"))
        .collect::<R<Vec<_>>>()?;
    let result = if count > 0 {
        V::result(
            &vdaf
                .unshard(&(), agg_shares, count)
                .map_err(|e| format!("unshard: {e}"))?,
        )
    } else {
        Value::Null
    };
    Ok(json!({
        "reports": records,
        "accepted": count,
        "agg_shares": encoded_agg,
        "agg_result": result,
    }))
}

fn unshard<V>(vdaf: &V, case: &Value) -> R<Value>
where
    V: Io + Collector + Vdaf<AggregationParam = ()>,
{
    let num = usize::try_from(uint(field(case, "num_measurements")?, "num_measurements")?)
        .map_err(|_| "num_measurements too large")?;
    let shares = hex_list(case, "agg_shares")?
        .iter()
        .map(|b| {
            V::AggregateShare::get_decoded_with_param(&(vdaf, &()), b)
                .map_err(|e| format!("decoding aggregate share: {e}"))
        })
        .collect::<R<Vec<_>>>()?;
    let result = vdaf
        .unshard(&(), shares, num)
        .map_err(|e| format!("unshard: {e}"))?;
    Ok(json!({ "agg_result": V::result(&result) }))
}

fn bench<V>(vdaf: &V, case: &Value) -> R<Value>
where
    V: Io + Client<NONCE_SIZE> + Aggregator<SEED_SIZE, NONCE_SIZE> + Vdaf<AggregationParam = ()>,
{
    no_ctx(case)?;
    let verify_key = verify_key_of(case)?;
    let measurements = array(case, "measurements")?
        .iter()
        .map(V::measurement)
        .collect::<R<Vec<_>>>()?;
    let warmup = case.get("warmup").and_then(Value::as_u64).unwrap_or(1) as usize;
    let mut shard_ns = Vec::new();
    let mut verify_ns = Vec::new();
    for (i, measurement) in measurements.iter().enumerate() {
        let mut nonce = [0u8; NONCE_SIZE];
        nonce[..8].copy_from_slice(&(i as u64).to_be_bytes());
        let t0 = Instant::now();
        let (public_share, input_shares) = vdaf
            .shard(measurement, &nonce)
            .map_err(|e| format!("shard: {e}"))?;
        let t1 = Instant::now();
        let mut states = Vec::new();
        let mut shares = Vec::new();
        for (agg_id, input_share) in input_shares.iter().enumerate() {
            let (state, share) = vdaf
                .prepare_init(&verify_key, agg_id, &(), &nonce, &public_share, input_share)
                .map_err(|e| format!("prepare_init: {e}"))?;
            states.push(state);
            shares.push(share);
        }
        let message = vdaf
            .prepare_shares_to_prepare_message(&(), shares)
            .map_err(|e| format!("prepare_shares_to_prepare_message: {e}"))?;
        for state in states {
            vdaf.prepare_next(state, message.clone())
                .map_err(|e| format!("prepare_next: {e}"))?;
        }
        let t2 = Instant::now();
        if i >= warmup {
            shard_ns.push((t1 - t0).as_nanos() as u64);
            verify_ns.push((t2 - t1).as_nanos() as u64);
        }
    }
    Ok(json!({ "shard_ns": shard_ns, "verify_ns": verify_ns }))
}

/// The crate's checker panics on the first difference; the panic message is the answer.
fn check_vector<V: Io>(vdaf: &V, case: &Value) -> R<Value> {
    no_ctx(case)?;
    let doc = field(case, "vector")?.to_string();
    Ok(
        match catch_unwind(AssertUnwindSafe(|| vdaf.check_vector(&doc))) {
            Ok(()) => json!({ "ok": true }),
            Err(payload) => json!({ "ok": false, "mismatch": panic_message(payload.as_ref()) }),
        },
    )
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

fn run_case(case: &Value) -> R<Value> {
    let op = field(case, "op")?.as_str().ok_or("op must be a string")?;
    if op == "optimal_chunk_length" {
        let lengths = array_of(field(case, "lengths")?, "lengths", |v| {
            usize::try_from(uint(v, "length")?).map_err(|_| "length too large".to_string())
        })?;
        let out: Vec<usize> = lengths.into_iter().map(optimal_chunk_length).collect();
        return Ok(json!({ "chunk_lengths": out }));
    }
    let vdaf = build_vdaf(case)?;
    match op {
        "shard" => with_vdaf!(&vdaf, v => shard(v, case)),
        "verify" => with_vdaf!(&vdaf, v => verify(v, case)),
        "unshard" => with_vdaf!(&vdaf, v => unshard(v, case)),
        "bench" => with_vdaf!(&vdaf, v => bench(v, case)),
        "check_vector" => with_vdaf!(&vdaf, v => check_vector(v, case)),
        other => Err(format!("unknown op {other:?}")),
    }
}

fn main() {
    // A panic inside the crate on some input is that case's error, not the run's end.
    std::panic::set_hook(Box::new(|_| {}));
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("error: reading stdin: {e}");
        std::process::exit(2);
    }
    let request: Value = match serde_json::from_str(&input) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: the request is not JSON: {e}");
            std::process::exit(2);
        }
    };
    let Some(cases) = request.get("cases").and_then(Value::as_array) else {
        eprintln!("error: the request must be {{\"cases\": [...]}}");
        std::process::exit(2);
    };
    let results: Vec<Value> = cases
        .iter()
        .map(
            |case| match catch_unwind(AssertUnwindSafe(|| run_case(case))) {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => json!({ "error": e }),
                Err(payload) => {
                    json!({ "error": format!("panic: {}", panic_message(payload.as_ref())) })
                }
            },
        )
        .collect();
    println!("{}", json!({ "results": results }));
}
