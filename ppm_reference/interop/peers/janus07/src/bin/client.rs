//! Upload measurements to a DAP-09 Leader with Janus 0.7's client (`janus_client`).
//!
//! Job (JSON, the only argument, or `-` for stdin):
//!   {"task_id": "<base64url>", "leader": "http://...", "helper": "http://...",
//!    "time_precision": 3600, "vdaf": {"type": "Prio3Histogram", "length": 4,
//!    "chunk_length": 2}, "measurements": [0, 3, 1], "time": 1700000000 (optional)}
//! Measurements: Count 0/1 or false/true, Sum an integer, SumVec a list of integers,
//! Histogram a bucket index. Prints {"uploaded": N}.
//!
//! The client fetches both HPKE configurations (`GET {aggregator}/hpke_config?task_id=`),
//! shards each measurement, and PUTs each report to `{leader}/tasks/{task_id}/reports`;
//! janus_client takes any 2xx answer as success.

use janus_client::Client;
use janus_collector::ExponentialBackoff;
use janus_messages::{Duration, TaskId, Time};
use ppm_peer_janus07::{
    fail, field, read_job, str_field, u64_field, vdaf_spec, VdafSpec,
};
use prio::vdaf::{self, prio3::Prio3};
use serde_json::{json, Value};
use std::{str::FromStr, time::Duration as StdDuration};
use url::Url;

fn measurements<T>(job: &Value, convert: impl Fn(&Value) -> Option<T>, what: &str) -> Vec<T> {
    field(job, "measurements")
        .as_array()
        .unwrap_or_else(|| fail("\"measurements\" must be a list"))
        .iter()
        .map(|m| convert(m).unwrap_or_else(|| fail(format!("bad measurement {m} ({what})"))))
        .collect()
}

fn as_u128(v: &Value) -> Option<u128> {
    v.as_u64().map(u128::from)
}

async fn upload<V: vdaf::Client<16>>(job: &Value, vdaf: V, ms: Vec<V::Measurement>) -> usize {
    let task_id = TaskId::from_str(str_field(job, "task_id"))
        .unwrap_or_else(|e| fail(format!("bad task_id: {e}")));
    let url = |name: &str| {
        Url::parse(str_field(job, name)).unwrap_or_else(|e| fail(format!("bad {name} URL: {e}")))
    };
    let precision = Duration::from_seconds(u64_field(job, "time_precision"));
    // Give up quickly on a peer that keeps failing (the default retries for minutes).
    let backoff = ExponentialBackoff {
        initial_interval: StdDuration::from_millis(100),
        max_interval: StdDuration::from_secs(1),
        max_elapsed_time: Some(StdDuration::from_secs(10)),
        ..Default::default()
    };
    let client = Client::builder(task_id, url("leader"), url("helper"), precision, vdaf)
        .with_backoff(backoff)
        .build()
        .await
        .unwrap_or_else(|e| fail(format!("cannot set up the client: {e}")));
    let time = job.get("time").and_then(Value::as_u64);
    for (i, m) in ms.iter().enumerate() {
        let result = match time {
            Some(t) => client.upload_with_time(m, Time::from_seconds_since_epoch(t)).await,
            None => client.upload(m).await,
        };
        if let Err(e) = result {
            fail(format!("upload of measurement {i} failed: {e}"));
        }
    }
    ms.len()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let job = read_job();
    let uploaded = match vdaf_spec(&job) {
        VdafSpec::Count => {
            let ms = measurements(&job, |v| v.as_bool().or(match v.as_u64() {
                Some(0) => Some(false),
                Some(1) => Some(true),
                _ => None,
            }), "0 or 1");
            upload(&job, Prio3::new_count(2).unwrap_or_else(|e| fail(e)), ms).await
        }
        VdafSpec::Sum { bits } => {
            let ms = measurements(&job, as_u128, "an integer");
            upload(&job, Prio3::new_sum(2, bits).unwrap_or_else(|e| fail(e)), ms).await
        }
        VdafSpec::SumVec { bits, length, chunk_length } => {
            let ms = measurements(&job, |v| {
                v.as_array()?.iter().map(as_u128).collect::<Option<Vec<_>>>()
            }, "a list of integers");
            let vdaf = Prio3::new_sum_vec(2, bits, length, chunk_length)
                .unwrap_or_else(|e| fail(e));
            upload(&job, vdaf, ms).await
        }
        VdafSpec::Histogram { length, chunk_length } => {
            let ms = measurements(&job, |v| v.as_u64().and_then(|x| usize::try_from(x).ok()),
                                  "a bucket index");
            let vdaf = Prio3::new_histogram(2, length, chunk_length).unwrap_or_else(|e| fail(e));
            upload(&job, vdaf, ms).await
        }
    };
    println!("{}", json!({"uploaded": uploaded}));
}
