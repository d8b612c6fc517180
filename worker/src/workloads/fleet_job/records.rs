//! A target's record: its phases' times, as far as it got, and why it failed.

use crate::workloads::tls::Negotiated;
use serde_json::{json, Value};
use super::spec::*;

/// One target's record: its phases' (start, end) in monotonic ns, in order, as far as it got.
#[derive(Clone, Debug, Default)]
pub struct Record {
    pub target: usize,
    pub slice: usize,
    pub phases: Vec<(u64, u64)>,
    /// `None`: completed; else the phase that failed and why (one line).
    pub failure: Option<(Phase, String)>,
    /// Check files whose digest differed from the baseline.
    pub mismatches: usize,
    /// What the management side saw negotiated (kept for the probe).
    pub negotiated: Option<Negotiated>,
}

impl Record {
    pub(super) fn to_json(&self) -> Value {
        json!({"t": self.target, "ph": self.phases.iter().map(|(a, b)| vec![*a, *b]).collect::<Vec<_>>(),
               "fail": self.failure.as_ref().map(|(p, why)| json!({"phase": p.name(), "reason": why})),
               "mm": self.mismatches})
    }

    pub(super) fn from_json(v: &Value, slice: usize) -> Record {
        let phases = v["ph"]
            .as_array()
            .map(|a| a.iter().map(|p| (p[0].as_u64().unwrap_or(0), p[1].as_u64().unwrap_or(0))).collect())
            .unwrap_or_default();
        let failure = v["fail"].as_object().map(|f| {
            (Phase::parse(f["phase"].as_str().unwrap_or("")).unwrap_or(Phase::Connect), f["reason"].as_str().unwrap_or("").to_string())
        });
        Record { target: v["t"].as_u64().unwrap_or(0) as usize, slice, phases, failure,
                 mismatches: v["mm"].as_u64().unwrap_or(0) as usize, negotiated: None }
    }
}
