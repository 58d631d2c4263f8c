//! Shared parts of the two test-only drivers of Janus 0.7 (DAP-09, VDAF-08 via prio 0.16):
//! reading the JSON job description, naming the VDAF, reporting errors.
//!
//! Both programs take one argument, a JSON object (or `-` to read it from stdin), and print
//! exactly one JSON object on stdout. On failure they print `error: ...` on stderr and exit 1.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use serde_json::Value;
use std::io::Read;

/// A VDAF-08 Prio3 instance as named by the job (the names of our VDAF registry).
#[derive(Debug, Clone, Copy)]
pub enum VdafSpec {
    Count,
    Sum { bits: usize },
    SumVec { bits: usize, length: usize, chunk_length: usize },
    Histogram { length: usize, chunk_length: usize },
}

/// Print a one-line error and exit 1.
pub fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}

/// The job: the first argument as JSON, or stdin when it is `-`.
pub fn read_job() -> Value {
    let arg = std::env::args().nth(1).unwrap_or_else(|| {
        fail("usage: <program> JOB_JSON (or - to read the JSON from stdin)")
    });
    let text = if arg == "-" {
        let mut buf = String::new();
        std::io::stdin()
            .read_to_string(&mut buf)
            .unwrap_or_else(|e| fail(format!("cannot read stdin: {e}")));
        buf
    } else {
        arg
    };
    serde_json::from_str(&text).unwrap_or_else(|e| fail(format!("the job is not JSON: {e}")))
}

pub fn field<'a>(job: &'a Value, name: &str) -> &'a Value {
    job.get(name).unwrap_or_else(|| fail(format!("the job has no {name:?}")))
}

pub fn str_field<'a>(job: &'a Value, name: &str) -> &'a str {
    field(job, name).as_str().unwrap_or_else(|| fail(format!("{name:?} must be a string")))
}

pub fn u64_field(job: &Value, name: &str) -> u64 {
    field(job, name)
        .as_u64()
        .unwrap_or_else(|| fail(format!("{name:?} must be a non-negative integer")))
}

pub fn usize_field(job: &Value, name: &str) -> usize {
    usize::try_from(u64_field(job, name)).unwrap_or_else(|_| fail(format!("{name:?} too large")))
}

pub fn unb64(text: &str, what: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .unwrap_or_else(|e| fail(format!("{what} is not base64url: {e}")))
}

pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// `{"type": "Prio3SumVec", "bits": 3, "length": 4, "chunk_length": 2}` and the like.
pub fn vdaf_spec(job: &Value) -> VdafSpec {
    let v = field(job, "vdaf");
    match str_field(v, "type") {
        "Prio3Count" => VdafSpec::Count,
        "Prio3Sum" => VdafSpec::Sum { bits: usize_field(v, "bits") },
        "Prio3SumVec" => VdafSpec::SumVec {
            bits: usize_field(v, "bits"),
            length: usize_field(v, "length"),
            chunk_length: usize_field(v, "chunk_length"),
        },
        "Prio3Histogram" => VdafSpec::Histogram {
            length: usize_field(v, "length"),
            chunk_length: usize_field(v, "chunk_length"),
        },
        other => fail(format!(
            "unsupported VDAF {other:?} (Prio3Count, Prio3Sum, Prio3SumVec, Prio3Histogram)"
        )),
    }
}
