//! A target's record: its phases' times, as far as it got, and why it failed.

use crate::workloads::tls::Negotiated;
use crate::result::Timeline;
use serde::{Deserialize, Serialize};
use super::spec::*;

/// One target's record: its phases' (start, end) in monotonic ns, in order, as far as it got.
#[derive(Clone, Debug, Default)]
pub struct Record {
    pub target: usize,
    pub slice: usize,
    pub phases: Vec<(u64, u64)>,
    /// Per phase (as far as it got): the latency model's wait in it (ns; 0 when the model is
    /// off) and the slice thread's CPU over it (ns, the busy loop of `manager_cpu_ms` included).
    pub waits: Vec<u64>,
    pub cpu: Vec<u64>,
    /// The management CPU the latency model burnt for this target (ns, in its last phase).
    pub other_cpu_ns: u64,
    /// `None`: completed; else the phase that failed and why (one line).
    pub failure: Option<(Phase, String)>,
    /// Check files whose digest differed from the baseline.
    pub mismatches: usize,
    /// What the management side saw negotiated (kept for the probe).
    pub negotiated: Option<Negotiated>,
}

impl Record {
    /// The record as a slice sends it.
    pub(super) fn to_wire(&self) -> WireRecord {
        WireRecord {
            t: self.target,
            ph: self.phases.clone(),
            w: self.waits.clone(),
            c: self.cpu.clone(),
            o: self.other_cpu_ns,
            fail: self.failure.as_ref().map(|(p, why)| WireFailure { phase: p.name().into(), reason: why.clone() }),
            mm: self.mismatches,
        }
    }

    /// A record slice `slice` sent.
    pub(super) fn from_wire(w: &WireRecord, slice: usize) -> Record {
        let failure = w.fail.as_ref().map(|f| (Phase::parse(&f.phase).unwrap_or(Phase::Connect), f.reason.clone()));
        Record { target: w.t, slice, phases: w.ph.clone(), waits: w.w.clone(), cpu: w.c.clone(), other_cpu_ns: w.o, failure,
                 mismatches: w.mm, negotiated: None }
    }
}

/// A record on the line from a slice to the coordinator (short names: a job of 10,000 targets
/// sends 10,000 of them): target, phases' (start, end) ns, their waits and thread CPU (ns), the
/// management CPU burnt (ns), failure, mismatches.
#[derive(Debug, Serialize, Deserialize)]
pub struct WireRecord {
    t: usize,
    ph: Vec<(u64, u64)>,
    w: Vec<u64>,
    c: Vec<u64>,
    o: u64,
    fail: Option<WireFailure>,
    mm: usize,
}

/// The phase a target failed in and why.
#[derive(Debug, Serialize, Deserialize)]
pub struct WireFailure {
    phase: String,
    reason: String,
}

/// What a slice answers once its targets are done: their records, and what it measured of
/// itself over the job (CPU, timeline and its start, peak RSS, most descriptors open).
#[derive(Debug, Serialize, Deserialize)]
pub struct SliceDone {
    /// `done`.
    #[serde(rename = "type")]
    pub kind: String,
    pub records: Vec<WireRecord>,
    pub cpu_ns: u64,
    pub timeline: Option<Timeline>,
    pub timeline_start_ns: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
    pub max_fds: Option<u64>,
    pub pid: Option<u32>,
    pub pinned_cpu: Option<usize>,
}
