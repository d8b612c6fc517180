//! Time per target that is not cryptography: the network's round trips, the target's own work
//! and the management server's non-cryptographic CPU — what makes a real job take tens of
//! seconds per target where the simulated targets alone take milliseconds.
//!
//! Three optional parameters, each a distribution ([`Dist`]) in milliseconds:
//!
//! - `rtt_ms`: the delay of one network round trip. Each phase waits for its round trips
//!   ([`round_trips`]): `connect` two (TCP's and TLS 1.3's handshake), `push`, `checks` and
//!   `report` one each (the request and its answer).
//! - `target_work_ms`: the time the target spends on one pushed item or one check (applying a
//!   rule, reading a file), waited for by the management side; no CPU is burnt for it.
//! - `manager_cpu_ms`: the management server's own CPU per target that is not cryptography
//!   (parsing the report, writing to its database), spent as a busy loop on the slice thread's
//!   CPU clock at the end of the target's last phase.
//!
//! **Where the waits are applied**: in the management side's thread, as a sleep at the point of
//! the phase where it would wait (connect: before its TCP connect; the others: after the
//! request is sent, before the answer is read). A sleeping thread holds its connection and its
//! place under the cap and burns no CPU, as a thread blocked on the network does; no `tc netem`
//! is needed, so it works in any container. The result says so (`latency.applied`).
//!
//! **Paired by target**: every value is drawn from a generator seeded with the target's index
//! (and the parameter), so target `i` waits the same in every configuration and block: the
//! waits add no noise to a comparison.

use crate::measure::clock;
use rand::{Rng, SeedableRng};
use rand::rngs::StdRng;
use rand_distr::{Distribution, LogNormal};
use serde_json::{json, Map, Value};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;
use super::spec::Phase;

/// Where the waits are applied, as the result says it.
pub const APPLIED: &str = "management-side wait: the slice thread sleeps where it would wait for the network or the target";
/// The largest value a distribution may be given or draw: 10 minutes per round trip, item or target.
pub const MAX_MS: f64 = 600_000.0;
/// The standard normal quantile at 0.99 (a lognormal's p99 is exp(μ + 2.3263 σ)).
const Z99: f64 = 2.326_347_874_040_841;

/// A distribution of a time in milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    /// Always this many ms: `20` or `"fixed:20"`.
    Fixed(f64),
    /// Uniform between two values: `"uniform:10-30"`.
    Uniform(f64, f64),
    /// Lognormal with this median and 99th percentile: `"lognormal:p50=20,p99=200"`.
    LogNormal { p50: f64, p99: f64 },
}

impl Dist {
    /// Parse `key`'s value: a number (fixed), `fixed:X`, `uniform:A-B` or
    /// `lognormal:p50=X,p99=Y` (ms). Errors: one line naming `key` and the forms it takes.
    pub fn parse(key: &str, value: &Value) -> Result<Dist, String> {
        let forms = "a number of ms, \"fixed:20\", \"uniform:10-30\" or \"lognormal:p50=20,p99=200\"";
        let bad = |why: &str| format!("{key} {why}; give {forms}");
        let text = match value {
            Value::Number(n) => return Dist::fixed(n.as_f64().unwrap_or(-1.0)).map_err(|w| bad(&w)),
            Value::String(s) => s.trim().to_string(),
            other => return Err(bad(&format!("must be a number or a string, got {other}"))),
        };
        let num = |s: &str| s.trim().parse::<f64>().map_err(|_| bad(&format!("has '{s}' where a number of ms goes")));
        let dist = if let Some(rest) = text.strip_prefix("fixed:") {
            Dist::fixed(num(rest)?).map_err(|w| bad(&w))?
        } else if let Some(rest) = text.strip_prefix("uniform:") {
            let (a, b) = rest.split_once('-').ok_or_else(|| bad(&format!("'{text}' has no range A-B")))?;
            let (a, b) = (num(a)?, num(b)?);
            if !(0.0 <= a && a <= b && b <= MAX_MS) {
                return Err(bad(&format!("'{text}' is not a range 0 <= A <= B <= {MAX_MS}")));
            }
            Dist::Uniform(a, b)
        } else if let Some(rest) = text.strip_prefix("lognormal:") {
            let mut p50 = None;
            let mut p99 = None;
            for part in rest.split(',') {
                match part.split_once('=').map(|(k, v)| (k.trim(), v)) {
                    Some(("p50", v)) => p50 = Some(num(v)?),
                    Some(("p99", v)) => p99 = Some(num(v)?),
                    _ => return Err(bad(&format!("'{text}' has '{part}', not p50=X or p99=Y"))),
                }
            }
            let (Some(p50), Some(p99)) = (p50, p99) else { return Err(bad(&format!("'{text}' needs both p50 and p99"))) };
            if !(0.0 < p50 && p50 <= p99 && p99 <= MAX_MS) {
                return Err(bad(&format!("'{text}' is not 0 < p50 <= p99 <= {MAX_MS}")));
            }
            Dist::LogNormal { p50, p99 }
        } else {
            match text.parse::<f64>() {
                Ok(x) => Dist::fixed(x).map_err(|w| bad(&w))?,
                Err(_) => return Err(bad(&format!("is '{text}'"))),
            }
        };
        Ok(dist)
    }

    fn fixed(x: f64) -> Result<Dist, String> {
        if (0.0..=MAX_MS).contains(&x) {
            Ok(Dist::Fixed(x))
        } else {
            Err(format!("is {x} ms, outside 0..{MAX_MS}"))
        }
    }

    /// One draw, in ns.
    pub fn sample_ns(&self, rng: &mut StdRng) -> u64 {
        let ms = match *self {
            Dist::Fixed(x) => x,
            Dist::Uniform(a, b) => if b > a { rng.gen_range(a..=b) } else { a },
            Dist::LogNormal { p50, p99 } => {
                let sigma = (p99 / p50).ln() / Z99;
                if sigma <= 0.0 {
                    p50
                } else {
                    LogNormal::new(p50.ln(), sigma).map(|d| d.sample(rng)).unwrap_or(p50)
                }
            }
        };
        (ms.clamp(0.0, MAX_MS) * 1e6) as u64
    }

    /// The distribution's mean in ms (lognormal: exp(μ + σ²/2)).
    pub fn mean_ms(&self) -> f64 {
        match *self {
            Dist::Fixed(x) => x,
            Dist::Uniform(a, b) => (a + b) / 2.0,
            Dist::LogNormal { p50, p99 } => {
                let sigma = (p99 / p50).ln() / Z99;
                p50 * (sigma * sigma / 2.0).exp()
            }
        }
    }

    /// As the result states it: `{"dist": "lognormal", "p50_ms": 20, "p99_ms": 200, "mean_ms": …}`.
    pub fn describe(&self) -> Value {
        let mut v = match *self {
            Dist::Fixed(x) => json!({"dist": "fixed", "ms": x}),
            Dist::Uniform(a, b) => json!({"dist": "uniform", "low_ms": a, "high_ms": b}),
            Dist::LogNormal { p50, p99 } => json!({"dist": "lognormal", "p50_ms": p50, "p99_ms": p99}),
        };
        v["mean_ms"] = json!(self.mean_ms());
        v
    }
}

/// Round trips each phase waits for: connect two (TCP's handshake, then TLS 1.3's), the others
/// one (the request and its answer).
pub fn round_trips(phase: Phase) -> u64 {
    match phase {
        Phase::Connect => 2,
        Phase::Push | Phase::Checks | Phase::Report => 1,
    }
}

/// The latency model of a job: which of its three parts are on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Latency {
    pub rtt: Option<Dist>,
    pub target_work: Option<Dist>,
    pub manager_cpu: Option<Dist>,
}

/// One target's draws: the wait of each phase (ns, in the job's phase order) and the management
/// CPU to burn at its end (ns).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetTimes {
    pub wait_ns: Vec<u64>,
    pub manager_cpu_ns: u64,
}

impl Latency {
    /// The model from a request's parameters (each absent or null: off).
    pub fn parse(params: &Map<String, Value>) -> Result<Latency, String> {
        let get = |key: &str| match params.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => Dist::parse(key, v).map(Some),
        };
        Ok(Latency { rtt: get("rtt_ms")?, target_work: get("target_work_ms")?, manager_cpu: get("manager_cpu_ms")? })
    }

    pub fn is_on(&self) -> bool {
        self.rtt.is_some() || self.target_work.is_some() || self.manager_cpu.is_some()
    }

    /// Target `target`'s draws for `phases`; `items`, `checks`: the units of target work of the
    /// push and checks phases. The same target gets the same draws in every run.
    pub fn for_target(&self, target: usize, phases: &[Phase], items: usize, checks: usize) -> TargetTimes {
        let mut rng = StdRng::seed_from_u64(0x6a6f_625f_7469_6d65 ^ (target as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let wait_ns = phases
            .iter()
            .map(|&p| {
                let rtt: u64 = self.rtt.as_ref().map_or(0, |d| (0..round_trips(p)).map(|_| d.sample_ns(&mut rng)).sum());
                let units = match p {
                    Phase::Push => items,
                    Phase::Checks => checks,
                    _ => 0,
                };
                let work: u64 = self.target_work.as_ref().map_or(0, |d| (0..units).map(|_| d.sample_ns(&mut rng)).sum());
                rtt + work
            })
            .collect();
        let manager_cpu_ns = self.manager_cpu.as_ref().map_or(0, |d| d.sample_ns(&mut rng));
        TargetTimes { wait_ns, manager_cpu_ns }
    }

    /// The wall-clock seconds a job's latency model takes by itself, cryptography and setup left
    /// out: each of the `slices` runs its targets (`i ≡ slice mod slices`, in order) on up to
    /// `cap` threads, a free thread taking the next target (as `slice.rs` runs them), each
    /// target taking its waits and its management CPU ([`Latency::for_target`], the very draws
    /// a run makes); the job's time is its slowest slice's. 0 when the model is off.
    pub fn planned_wait_s(&self, targets: usize, slices: usize, cap: usize, phases: &[Phase], items: usize,
                          checks: usize) -> f64 {
        if !self.is_on() {
            return 0.0;
        }
        let slices = slices.max(1);
        let mut slowest = 0u64;
        for slice in 0..slices {
            let mut free: BinaryHeap<Reverse<u64>> = (0..cap.max(1)).map(|_| Reverse(0)).collect();
            for target in (slice..targets).step_by(slices) {
                let t = self.for_target(target, phases, items, checks);
                let took = t.wait_ns.iter().sum::<u64>() + t.manager_cpu_ns;
                let Reverse(at) = free.pop().unwrap_or(Reverse(0));
                free.push(Reverse(at + took));
            }
            slowest = slowest.max(free.into_iter().map(|Reverse(at)| at).max().unwrap_or(0));
        }
        slowest as f64 / 1e9
    }

    /// As the result states it (`fleet.latency`): each part's distribution, and where the waits
    /// are applied; `null` when off.
    pub fn describe(&self) -> Value {
        if !self.is_on() {
            return Value::Null;
        }
        let part = |d: &Option<Dist>| d.as_ref().map_or(Value::Null, Dist::describe);
        json!({"rtt": part(&self.rtt), "round_trips": {"connect": 2, "push": 1, "checks": 1, "report": 1},
               "target_work": part(&self.target_work), "manager_cpu": part(&self.manager_cpu), "applied": APPLIED})
    }
}

/// Sleep `ns` (nothing for 0).
pub fn wait(ns: u64) {
    if ns > 0 {
        std::thread::sleep(Duration::from_nanos(ns));
    }
}

/// Burn `ns` of this thread's CPU in a loop (nothing for 0); returns the thread CPU it took.
pub fn burn(ns: u64) -> u64 {
    if ns == 0 {
        return 0;
    }
    let start = clock::thread_cpu_ns();
    let mut x = 0u64;
    while clock::thread_cpu_ns().saturating_sub(start) < ns {
        for i in 0..1000u64 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
        }
    }
    std::hint::black_box(x);
    clock::thread_cpu_ns().saturating_sub(start)
}
