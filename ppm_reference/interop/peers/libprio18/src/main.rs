//! A test-only driver of libprio-rs (the `prio` crate, pinned in Cargo.toml) for the
//! cross-checks of `tests/test_peer_libprio.py` and the column of `benchmarks/vdaf.py`.
//!
//! It reads one JSON request on stdin, `{"cases": [CASE, ...]}`, and writes one JSON
//! answer on stdout, `{"results": [RESULT, ...]}`, a result per case in
//! order. Bytes are hex. A case that fails answers `{"error": "..."}` and the others go
//! on; a request that is not JSON is a one-line error on stderr and exit status 2.
//!
//! prio 0.18 speaks VDAF-18 (draft-irtf-cfrg-vdaf-18..20): an application context `ctx`,
//! 32-byte seeds and verification keys, 16-byte nonces. Cases (`op`):
//!
//!   shard                 {vdaf, ctx, reports: [{measurement, nonce, rand?}]}
//!                         -> {reports: [{public_share, input_shares}]}; with `rand` the
//!                         crate's `shard_with_random` (feature test-util), else `shard`
//!   verify                {vdaf, ctx, verify_key, reports: [{nonce, public_share,
//!                         input_shares, verifier_shares?, verifier_message?}]}
//!                         -> {reports: [{ok, error?, verifier_shares, verifier_message,
//!                         out_shares}], accepted, agg_shares, agg_result}: both
//!                         Aggregators verify each report; `verifier_shares` or
//!                         `verifier_message` replace the computed ones (tampering); the
//!                         accepted reports are aggregated and unsharded
//!   unshard               {vdaf, agg_shares, num_measurements} -> {agg_result}
//!   optimal_chunk_length  {lengths: [n, ...]} -> {chunk_lengths: [...]}
//!   bench                 {vdaf, ctx, verify_key, measurements, warmup?}
//!                         -> {shard_ns: [...], verify_ns: [...]}: per report, `shard`
//!                         with OS randomness, then verify_init of both Aggregators,
//!                         verifier_shares_to_message and verify_next of both
//!
//! `vdaf` is `{"type": "Prio3Count" | "Prio3Sum" | "Prio3SumVec" | "Prio3Histogram" |
//! "Prio3MultihotCountVec" | "Prio3L1BoundSum", "max_measurement", "length",
//! "max_weight", "max_value", "chunk_length"}` (the parameters of draft-20 Section 7.4 and
//! draft-ietf-ppm-l1-bound-sum); always two Aggregators. Integers of
//! measurements and aggregate results are JSON numbers or decimal strings (results are
//! decimal strings, so that 128-bit values survive).

use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use prio::codec::{Encode, ParameterizedDecode};
use prio::vdaf::prio3::{
    optimal_chunk_length, Prio3Count, Prio3Histogram, Prio3L1BoundSum, Prio3MultihotCountVec,
    Prio3Sum, Prio3SumVec,
};
use prio::vdaf::test_utils::TestVectorClient;
use prio::vdaf::{Aggregator, Client, Collector, Vdaf, VerifyTransition};
use serde_json::{json, Map, Value};

const SEED_SIZE: usize = 32;
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
}

impl Io for Prio3Count {
    fn measurement(v: &Value) -> R<bool> {
        bit(v)
    }
    fn result(r: &u64) -> Value {
        dec(r)
    }
}

impl Io for Prio3Sum {
    fn measurement(v: &Value) -> R<u64> {
        u64::try_from(uint(v, "measurement")?).map_err(|_| "measurement too large".into())
    }
    fn result(r: &u64) -> Value {
        dec(r)
    }
}

impl Io for Prio3SumVec {
    fn measurement(v: &Value) -> R<Vec<u128>> {
        array_of(v, "measurement", |x| uint(x, "measurement"))
    }
    fn result(r: &Vec<u128>) -> Value {
        Value::Array(r.iter().map(dec).collect())
    }
}

impl Io for Prio3L1BoundSum {
    fn measurement(v: &Value) -> R<Vec<u128>> {
        array_of(v, "measurement", |x| uint(x, "measurement"))
    }
    fn result(r: &Vec<u128>) -> Value {
        Value::Array(r.iter().map(dec).collect())
    }
}

impl Io for Prio3Histogram {
    fn measurement(v: &Value) -> R<usize> {
        usize::try_from(uint(v, "measurement")?).map_err(|_| "measurement too large".into())
    }
    fn result(r: &Vec<u128>) -> Value {
        Value::Array(r.iter().map(dec).collect())
    }
}

impl Io for Prio3MultihotCountVec {
    fn measurement(v: &Value) -> R<Vec<bool>> {
        array_of(v, "measurement", bit)
    }
    fn result(r: &Vec<u128>) -> Value {
        Value::Array(r.iter().map(dec).collect())
    }
}

enum AnyVdaf {
    Count(Prio3Count),
    Sum(Prio3Sum),
    SumVec(Prio3SumVec),
    Histogram(Prio3Histogram),
    MultihotCountVec(Prio3MultihotCountVec),
    L1BoundSum(Prio3L1BoundSum),
}

/// Runs `$body` with `$v` bound to the concrete VDAF of `$any`.
macro_rules! with_vdaf {
    ($any:expr, $v:ident => $body:expr) => {
        match $any {
            AnyVdaf::Count($v) => $body,
            AnyVdaf::Sum($v) => $body,
            AnyVdaf::SumVec($v) => $body,
            AnyVdaf::Histogram($v) => $body,
            AnyVdaf::MultihotCountVec($v) => $body,
            AnyVdaf::L1BoundSum($v) => $body,
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
            let max = u64::try_from(param(spec, "max_measurement")?)
                .map_err(|_| "max_measurement too large")?;
            AnyVdaf::Sum(Prio3Sum::new_sum(SHARES, max).map_err(err)?)
        }
        "Prio3SumVec" => AnyVdaf::SumVec(
            Prio3SumVec::new_sum_vec(
                SHARES,
                param(spec, "max_measurement")?,
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
        "Prio3MultihotCountVec" => AnyVdaf::MultihotCountVec(
            Prio3MultihotCountVec::new_multihot_count_vec(
                SHARES,
                param_usize(spec, "length")?,
                param_usize(spec, "max_weight")?,
                param_usize(spec, "chunk_length")?,
            )
            .map_err(err)?,
        ),
        "Prio3L1BoundSum" => AnyVdaf::L1BoundSum(
            Prio3L1BoundSum::new_l1_bound_sum(
                SHARES,
                param(spec, "max_value")?,
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

fn ctx_of(case: &Value) -> R<Vec<u8>> {
    if case.get("ctx").is_some() {
        hex_of(case, "ctx")
    } else {
        Ok(Vec::new())
    }
}

fn shard<V>(vdaf: &V, case: &Value) -> R<Value>
where
    V: Io + Client<NONCE_SIZE> + TestVectorClient<NONCE_SIZE>,
{
    let ctx = ctx_of(case)?;
    let mut out = Vec::new();
    for report in array(case, "reports")? {
        let measurement = V::measurement(field(report, "measurement")?)?;
        let nonce = nonce_of(report)?;
        let (public_share, input_shares) = if report.get("rand").is_some() {
            let rand = hex_of(report, "rand")?;
            vdaf.shard_with_random(&ctx, &measurement, &nonce, &rand)
        } else {
            vdaf.shard(&ctx, &measurement, &nonce)
        }
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
    ctx: &[u8],
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
            .verify_init(
                verify_key,
                ctx,
                agg_id,
                &(),
                &nonce,
                &public_share,
                &input_share,
            )
            .map_err(|e| format!("verify_init of Aggregator {agg_id}: {e}"))?;
        states.push(state);
        shares.push(share);
    }
    if report.get("verifier_shares").is_some() {
        let replaced = hex_list(report, "verifier_shares")?;
        if replaced.len() != shares.len() {
            return Err(format!("expected {SHARES} verifier shares"));
        }
        for (i, bytes) in replaced.iter().enumerate() {
            shares[i] = V::VerifierShare::get_decoded_with_param(&states[i], bytes)
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
        .verifier_shares_to_message(ctx, &(), shares)
        .map_err(|e| format!("verifier_shares_to_message: {e}"))?;
    if report.get("verifier_message").is_some() {
        message = V::VerifierMessage::get_decoded_with_param(
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
            .verify_next(ctx, state, message.clone())
            .map_err(|e| format!("verify_next of Aggregator {agg_id}: {e}"))?
        {
            VerifyTransition::Finish(out) => outs.push(out),
            VerifyTransition::Continue(..) => {
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
    let ctx = ctx_of(case)?;
    let verify_key = verify_key_of(case)?;
    let mut records = Vec::new();
    let mut accepted: Vec<Vec<V::OutputShare>> = vec![Vec::new(); usize::from(SHARES)];
    let mut count = 0usize;
    for report in array(case, "reports")? {
        let mut record = Map::new();
        match verify_report(vdaf, &ctx, &verify_key, report, &mut record) {
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
    let ctx = ctx_of(case)?;
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
            .shard(&ctx, measurement, &nonce)
            .map_err(|e| format!("shard: {e}"))?;
        let t1 = Instant::now();
        let mut states = Vec::new();
        let mut shares = Vec::new();
        for (agg_id, input_share) in input_shares.iter().enumerate() {
            let (state, share) = vdaf
                .verify_init(
                    &verify_key,
                    &ctx,
                    agg_id,
                    &(),
                    &nonce,
                    &public_share,
                    input_share,
                )
                .map_err(|e| format!("verify_init: {e}"))?;
            states.push(state);
            shares.push(share);
        }
        let message = vdaf
            .verifier_shares_to_message(&ctx, &(), shares)
            .map_err(|e| format!("verifier_shares_to_message: {e}"))?;
        for state in states {
            vdaf.verify_next(&ctx, state, message.clone())
                .map_err(|e| format!("verify_next: {e}"))?;
        }
        let t2 = Instant::now();
        if i >= warmup {
            shard_ns.push((t1 - t0).as_nanos() as u64);
            verify_ns.push((t2 - t1).as_nanos() as u64);
        }
    }
    Ok(json!({ "shard_ns": shard_ns, "verify_ns": verify_ns }))
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
                    let msg = payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panic".into());
                    json!({ "error": format!("panic: {msg}") })
                }
            },
        )
        .collect();
    println!("{}", json!({ "results": results }));
}
