//! Collect an aggregate from a DAP-09 Leader with Janus 0.7's collector (`janus_collector`).
//!
//! Job (JSON, the only argument, or `-` for stdin):
//!   {"task_id": "<base64url>", "leader": "http://...", "auth_token": "...",
//!    "auth_header": "Authorization" (Bearer, the default) or "DAP-Auth-Token",
//!    "hpke_config": "<base64url of the encoded HpkeConfig>",
//!    "hpke_private_key": "<base64url>", "vdaf": {...as for the client...},
//!    "query": {"type": "time_interval", "start": 1700000000, "duration": 3600}
//!          or {"type": "fixed_size"} (current batch)
//!          or {"type": "fixed_size", "batch_id": "<base64url>"},
//!    "poll_interval_ms": 200 (optional), "timeout_s": 60 (optional)}
//! Prints {"report_count": N, "aggregate_result": ..., "interval": [start, duration],
//! "batch_id": "<base64url>" (fixed_size) or null}.
//!
//! janus_collector PUTs the CollectionReq to `{leader}/tasks/{task_id}/collection_jobs/{id}`
//! (expecting exactly 201), POSTs to the same URI until 200 (202: not ready), decrypts both
//! aggregate shares and unshards them.

use janus_collector::{AuthenticationToken, Collection, Collector, ExponentialBackoff};
use janus_core::hpke::{HpkeKeypair, HpkePrivateKey};
use janus_messages::{
    query_type::{FixedSize, QueryType, TimeInterval},
    BatchId, Duration, FixedSizeQuery, HpkeConfig, Interval, Query, TaskId, Time,
};
use ppm_peer_janus07::{
    b64, fail, field, read_job, str_field, u64_field, unb64, vdaf_spec, VdafSpec,
};
use prio::{
    codec::Decode,
    vdaf::{self, prio3::Prio3},
};
use serde::Serialize;
use serde_json::{json, Value};
use std::{str::FromStr, time::Duration as StdDuration};
use url::Url;

fn output<T: Serialize, Q: QueryType>(c: &Collection<T, Q>, batch_id: Option<String>) -> Value {
    let (start, duration) = c.interval();
    json!({
        "report_count": c.report_count(),
        "aggregate_result": c.aggregate_result(),
        "interval": [start.timestamp(), duration.num_seconds()],
        "batch_id": batch_id,
    })
}

async fn collect<V>(job: &Value, vdaf: V) -> Value
where
    V: vdaf::Collector<AggregationParam = ()>,
    V::AggregateResult: Serialize,
{
    let task_id = TaskId::from_str(str_field(job, "task_id"))
        .unwrap_or_else(|e| fail(format!("bad task_id: {e}")));
    let leader = Url::parse(str_field(job, "leader"))
        .unwrap_or_else(|e| fail(format!("bad leader URL: {e}")));
    let token = str_field(job, "auth_token");
    let auth = match job.get("auth_header").and_then(Value::as_str).unwrap_or("Authorization") {
        "Authorization" => AuthenticationToken::new_bearer_token_from_string(token),
        "DAP-Auth-Token" => AuthenticationToken::new_dap_auth_token_from_string(token),
        other => fail(format!("unknown auth_header {other:?}")),
    }
    .unwrap_or_else(|e| fail(format!("bad auth_token: {e}")));
    let config = HpkeConfig::get_decoded(&unb64(str_field(job, "hpke_config"), "hpke_config"))
        .unwrap_or_else(|e| fail(format!("bad hpke_config: {e}")));
    let private_key = HpkePrivateKey::new(unb64(str_field(job, "hpke_private_key"),
                                                "hpke_private_key"));
    let poll_ms = job.get("poll_interval_ms").and_then(Value::as_u64).unwrap_or(200);
    let timeout = job.get("timeout_s").and_then(Value::as_u64).unwrap_or(60);
    // The default polls first after 15 s; the Leader's Retry-After still wins when longer.
    let poll = ExponentialBackoff {
        initial_interval: StdDuration::from_millis(poll_ms),
        max_interval: StdDuration::from_millis(poll_ms.max(1000)),
        multiplier: 1.2,
        max_elapsed_time: Some(StdDuration::from_secs(timeout)),
        ..Default::default()
    };
    let requests = ExponentialBackoff {
        initial_interval: StdDuration::from_millis(100),
        max_interval: StdDuration::from_secs(1),
        max_elapsed_time: Some(StdDuration::from_secs(10)),
        ..Default::default()
    };
    let collector = Collector::builder(task_id, leader, auth, HpkeKeypair::new(config, private_key),
                                       vdaf)
        .with_collect_poll_backoff(poll)
        .with_http_request_backoff(requests)
        .build()
        .unwrap_or_else(|e| fail(format!("cannot set up the collector: {e}")));
    let query = field(job, "query");
    match str_field(query, "type") {
        "time_interval" => {
            let interval = Interval::new(
                Time::from_seconds_since_epoch(u64_field(query, "start")),
                Duration::from_seconds(u64_field(query, "duration")),
            )
            .unwrap_or_else(|e| fail(format!("bad interval: {e}")));
            let c = collector
                .collect::<TimeInterval>(Query::new_time_interval(interval), &())
                .await
                .unwrap_or_else(|e| fail(format!("collection failed: {e}")));
            output(&c, None)
        }
        "fixed_size" => {
            let fixed = match query.get("batch_id").and_then(Value::as_str) {
                Some(id) => FixedSizeQuery::ByBatchId {
                    batch_id: BatchId::from_str(id)
                        .unwrap_or_else(|e| fail(format!("bad batch_id: {e}"))),
                },
                None => FixedSizeQuery::CurrentBatch,
            };
            let c = collector
                .collect::<FixedSize>(Query::new_fixed_size(fixed), &())
                .await
                .unwrap_or_else(|e| fail(format!("collection failed: {e}")));
            let id = b64(c.partial_batch_selector().batch_id().as_ref());
            output(&c, Some(id))
        }
        other => fail(format!("unknown query type {other:?} (time_interval, fixed_size)")),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let job = read_job();
    let out = match vdaf_spec(&job) {
        VdafSpec::Count => collect(&job, Prio3::new_count(2).unwrap_or_else(|e| fail(e))).await,
        VdafSpec::Sum { bits } => {
            collect(&job, Prio3::new_sum(2, bits).unwrap_or_else(|e| fail(e))).await
        }
        VdafSpec::SumVec { bits, length, chunk_length } => {
            let vdaf = Prio3::new_sum_vec(2, bits, length, chunk_length)
                .unwrap_or_else(|e| fail(e));
            collect(&job, vdaf).await
        }
        VdafSpec::Histogram { length, chunk_length } => {
            let vdaf = Prio3::new_histogram(2, length, chunk_length).unwrap_or_else(|e| fail(e));
            collect(&job, vdaf).await
        }
    };
    println!("{out}");
}
