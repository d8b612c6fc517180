//! Workloads: what production runs, rather than one primitive — a TLS handshake, a TLS bulk
//! transfer, an IKE-style phase 1, file I/O through an encryption layer — measured at a load
//! level (`crate::measure::load`) and reported through the same `run` request and `result` as
//! the primitives (docs/worker-protocol.md, "Workloads").
//!
//! One file per workload ([`tls_handshake`], [`tls_bulk`], [`ike_phase1`], [`storage`],
//! [`fleet_job`]); a workload with a server side runs that side in a second worker process
//! ([`server`]), pinned to its own CPU where the host has two, so each side's CPU time is
//! measured apart. The TLS implementations live in [`tls`]. `fleet-job` is a fixed amount of
//! work (a job over `targets:N`) rather than a window, run by processes of its own (agents,
//! slices).

pub mod fleet_job;
pub mod ike_phase1;
pub mod server;
pub mod storage;
pub mod tls;
pub mod tls_bulk;
pub mod tls_handshake;

use crate::backends::{Backend, BackendError};
use crate::measure::load::Load;
use serde_json::{json, Map, Value};
use std::net::IpAddr;
use std::time::Duration;

/// Every workload name a `run` request may give as its `op`.
pub const NAMES: [&str; 5] =
    [tls_handshake::NAME, tls_bulk::NAME, ike_phase1::NAME, storage::NAME, fleet_job::NAME];

/// Parameters the workloads share, beside their own: the load level, the mode, where the server
/// listens, and a stall to inject into the server (for testing the latency method). Which of
/// them a workload takes is [`common_params`].
pub const COMMON_PARAMS: [&str; 6] = ["load", "mode", "address", "port", "stall_ms", "stall_every_ms"];

/// The common parameters `name` takes: all of them for the protocol workloads; only `load` for
/// `storage` (it has no server, no socket and one mode).
pub fn common_params(name: &str) -> &'static [&'static str] {
    match name {
        storage::NAME => &COMMON_PARAMS[..1],
        _ => &COMMON_PARAMS,
    }
}

/// Whether `name` is a workload (and not a primitive operation).
pub fn is_workload(name: &str) -> bool {
    NAMES.contains(&name)
}

/// Where the two sides run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Server in its own worker process, clients in this one, over loopback TCP.
    Socket,
    /// Both sides in one thread exchanging records through memory: no sockets, no kernel; the
    /// protocol's own CPU cost, the floor under the socket figure.
    Memory,
    /// File I/O (`storage`, its only mode; not a value of the `mode` parameter, which storage
    /// does not take).
    File,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Socket => "socket",
            Mode::Memory => "memory",
            Mode::File => "file",
        }
    }
}

/// A pause injected into the server: `pause_ms` at the start of every `every_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    pub pause_ms: u64,
    pub every_ms: u64,
}

/// The parameters every workload shares, checked.
#[derive(Clone, Debug)]
pub struct Common {
    pub load: Load,
    pub mode: Mode,
    /// Listening address: loopback unless the request names another explicitly.
    pub address: IpAddr,
    /// Listening port; 0 = one the kernel picks.
    pub port: u16,
    pub stall: Option<Stall>,
}

/// A workload request's own parameters, checked.
pub enum Spec {
    TlsHandshake(tls_handshake::Spec),
    TlsBulk(tls_bulk::Spec),
    IkePhase1(ike_phase1::IkeParams),
    Storage(storage::Spec),
    FleetJob(fleet_job::Spec),
}

/// A checked workload request.
pub struct WorkloadCase {
    pub name: &'static str,
    pub spec: Spec,
    pub common: Common,
    /// The request's `params` as given (the server process parses them again).
    pub raw: Map<String, Value>,
    pub backend_name: String,
}

/// How a workload run ended: `ok` with the result's measured fields, or `unsupported` /
/// `invalid` with the reason (and whatever fields were learnt before, e.g. `validation`).
pub enum Finish {
    Ok(Value),
    Unsupported(String, Value),
    Invalid(String, Value),
}

/// The parameters `name` accepts, in the order `hello` lists them (its own, then the common
/// ones it takes).
pub fn param_names(name: &str) -> Vec<&'static str> {
    let own: &[&str] = match name {
        tls_handshake::NAME => &tls_handshake::PARAMS,
        tls_bulk::NAME => &tls_bulk::PARAMS,
        ike_phase1::NAME => &ike_phase1::PARAMS,
        storage::NAME => &storage::PARAMS,
        fleet_job::NAME => &fleet_job::PARAMS,
        _ => &[],
    };
    own.iter().chain(common_params(name).iter()).copied().collect()
}

/// The values each enumerated workload parameter accepts (merged into `hello`'s
/// `param_values`).
pub fn param_values() -> Map<String, Value> {
    let mut m = Map::new();
    let names = |v: Vec<&'static str>| Value::from(v);
    m.insert("tls_version".into(), tls::TlsVersion::NAMES.into());
    m.insert("cert".into(), tls::CertKind::NAMES.into());
    m.insert("group".into(), tls::Group::NAMES.into());
    m.insert("server_group".into(), tls::Group::NAMES.into());
    m.insert("suite".into(), tls::Suite::NAMES.into());
    m.insert("session".into(), names(vec!["full", "resumed"]));
    m.insert("mode".into(), names(vec!["socket", "memory"]));
    m.insert("dh_group".into(), names(ike_phase1::IkeGroup::ALL.iter().map(|g| g.name()).collect()));
    storage::param_values(&mut m);
    m.insert("job".into(), names(fleet_job::kind_names()));
    m.insert("auth".into(), fleet_job::Auth::NAMES.to_vec().into());
    m.insert("sign_digest".into(), names(crate::ops::DigestAlg::ALL.iter().map(|d| d.name()).collect()));
    m
}

/// `hello`'s `op_params` entry of a workload: `params`, `workload: true`, `defaults` (the value
/// each parameter takes when not given), `default_size_bytes` (null, or the bytes per
/// transaction of a bulk transfer), for a workload with parameters that have no default
/// `required` (storage: `dir`), and `fleet-job`'s `job_kinds` (each kind's phases and sizes).
pub fn op_params(name: &str) -> Value {
    let defaults = match name {
        tls_handshake::NAME => tls_handshake::defaults(),
        tls_bulk::NAME => tls_bulk::defaults(),
        storage::NAME => storage::defaults(),
        fleet_job::NAME => fleet_job::defaults(),
        _ => ike_phase1::defaults(),
    };
    let size = defaults.get("size_bytes").cloned().unwrap_or(Value::Null);
    let mut v = json!({"params": param_names(name), "workload": true, "defaults": defaults, "default_size_bytes": size});
    if name == storage::NAME {
        v["required"] = storage::REQUIRED.to_vec().into();
    }
    if name == fleet_job::NAME {
        v["job_kinds"] = fleet_job::kinds_json();
    }
    v
}

/// Read a string parameter (numbers accepted and spelt as text), or `default`.
pub(crate) fn text(params: &Map<String, Value>, key: &str, default: &str) -> Result<String, String> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(default.to_string()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(Value::Bool(b)) => Ok(b.to_string()),
        Some(other) => Err(format!("{key} must be a string, got {other}")),
    }
}

/// Read a whole-number parameter (a number or its decimal text) within `range`, or `default`.
pub(crate) fn number(params: &Map<String, Value>, key: &str, default: u64, range: std::ops::RangeInclusive<u64>) -> Result<u64, String> {
    let v = match params.get(key) {
        None | Some(Value::Null) => return Ok(default),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    v.filter(|n| range.contains(n)).ok_or_else(|| {
        format!("{key} must be a whole number in {}..={}, got {}", range.start(), range.end(), params[key])
    })
}

/// Parse one enumerated value with `parse`, naming the known ones when it fails.
pub(crate) fn choice<T>(key: &str, value: &str, parse: impl Fn(&str) -> Option<T>, known: &[&str]) -> Result<T, String> {
    parse(value).ok_or_else(|| format!("unknown {key} '{value}'; known: {}", known.join(", ")))
}

/// Check a workload request's `params` (every key known, every value valid).
///
/// Errors: one line naming the parameter and what it accepts.
pub fn parse(name: &str, backend_name: &str, params: &Map<String, Value>) -> Result<WorkloadCase, String> {
    let name: &'static str = NAMES.iter().copied().find(|n| *n == name).ok_or_else(|| format!("unknown workload '{name}'"))?;
    let accepted = param_names(name);
    if let Some(k) = params.keys().find(|k| !accepted.contains(&k.as_str())) {
        return Err(format!("unknown parameter '{k}' for {name}; it takes: {}", accepted.join(", ")));
    }
    // (A workload that does not take a common parameter never sees it: it was refused above,
    // and its default applies.)
    let default_mode = if name == ike_phase1::NAME { "memory" } else { "socket" };
    let mode = match text(params, "mode", default_mode)?.as_str() {
        _ if name == storage::NAME => Mode::File,
        "socket" => Mode::Socket,
        "memory" => Mode::Memory,
        other => return Err(format!("unknown mode '{other}'; known: socket, memory")),
    };
    let default_load = if name == fleet_job::NAME { "targets:1" } else { "closed:1" };
    let load = Load::parse(&text(params, "load", default_load)?)?;
    match (name == fleet_job::NAME, matches!(load, Load::Targets { .. })) {
        (true, false) => return Err(fleet_job::targets_of(load).unwrap_err()),
        (false, true) => return Err(format!("a targets:N level is a fleet-job's; {name} takes closed:N or open:RATE")),
        _ => {}
    }
    let address: IpAddr = text(params, "address", "127.0.0.1")?
        .parse()
        .map_err(|_| format!("address must be an IP address, got {}", params["address"]))?;
    let port = number(params, "port", 0, 0..=65535)? as u16;
    let pause_ms = number(params, "stall_ms", 0, 0..=60_000)?;
    let every_ms = number(params, "stall_every_ms", 1000, 1..=3_600_000)?;
    if pause_ms >= every_ms {
        return Err(format!("stall_ms ({pause_ms}) must be shorter than stall_every_ms ({every_ms})"));
    }
    let stall = (pause_ms > 0).then_some(Stall { pause_ms, every_ms });
    let spec = match name {
        tls_handshake::NAME => Spec::TlsHandshake(tls_handshake::parse(backend_name, params)?),
        tls_bulk::NAME => Spec::TlsBulk(tls_bulk::parse(backend_name, params)?),
        storage::NAME => {
            let spec = storage::parse(params)?;
            storage::check_threads(&spec, load.threads())?;
            Spec::Storage(spec)
        }
        fleet_job::NAME => {
            if mode == Mode::Memory {
                return Err("fleet-job runs its targets over sockets only: mode must be socket".into());
            }
            Spec::FleetJob(fleet_job::parse(backend_name, params)?)
        }
        _ => {
            if mode == Mode::Socket {
                return Err("ike-phase1 runs both sides' crypto in one process: mode must be memory".into());
            }
            Spec::IkePhase1(ike_phase1::parse_params(params)?)
        }
    };
    if mode == Mode::Memory && (stall.is_some() || params.contains_key("port") || params.contains_key("address")) {
        return Err("port, address and stall_ms apply to mode = socket only (memory mode has no server process)".into());
    }
    if name == tls_bulk::NAME && mode == Mode::Memory {
        return Err("tls-bulk runs over sockets only: mode must be socket".into());
    }
    let common = Common { load, mode, address, port, stall };
    Ok(WorkloadCase { name, spec, common, raw: params.clone(), backend_name: backend_name.to_string() })
}

/// Run a checked workload case on `backend` (its library's capability checks already done):
/// validate, then measure at the case's load for `warmup` + `budget`.
pub fn run(case: &WorkloadCase, backend: &dyn Backend, warmup: Duration, budget: Duration) -> Finish {
    // A socket workload pins this thread (and the load threads it starts) to one CPU; the
    // next request in this process starts from the affinity it had before.
    let saved = affinity();
    let finish = match &case.spec {
        Spec::TlsHandshake(spec) => tls_handshake::run(case, spec, warmup, budget),
        Spec::TlsBulk(spec) => tls_bulk::run(case, spec, warmup, budget),
        Spec::IkePhase1(p) => ike_phase1_run(backend, p, &case.common, warmup, budget),
        Spec::Storage(spec) => storage::run(case, spec, backend, warmup, budget),
        Spec::FleetJob(spec) => fleet_job::run(case, spec, backend),
    };
    if let Some(set) = saved {
        // SAFETY: restoring a set sched_getaffinity filled, on the calling thread.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    }
    match finish {
        Finish::Ok(mut v) => {
            v["workload"] = case.name.into();
            v["load"] = case.common.load.to_json();
            v["mode"] = case.common.mode.name().into();
            Finish::Ok(v)
        }
        other => other,
    }
}

/// Whether this worker can run `case` at all, without running it: the TLS implementations
/// configured as asked (client and server, with an identity of the certificate's kind made once
/// per process and kind), the IKE transaction prepared, or the storage layer set up (nothing
/// written; a dm-crypt layer this host lacks). `Err(reason)` for a combination a library (or
/// the host) lacks.
pub fn check(case: &WorkloadCase, backend: &dyn Backend) -> Result<(), String> {
    match &case.spec {
        Spec::TlsHandshake(spec) => tls_handshake::check(spec),
        Spec::TlsBulk(spec) => tls_handshake::check(&spec.tls),
        Spec::IkePhase1(p) => match ike_phase1::prepare(backend, p) {
            Err(BackendError::Unsupported(r)) => Err(r),
            _ => Ok(()),
        },
        Spec::Storage(spec) => storage::check(spec, backend),
        Spec::FleetJob(spec) => fleet_job::check(spec, backend),
    }
}

/// What a request to *run* (not to `check`) needs beyond [`parse`]: `Err(one line)` when a
/// required parameter is missing (storage's `dir`).
pub fn ready_to_run(case: &WorkloadCase) -> Result<(), String> {
    match &case.spec {
        Spec::Storage(spec) => storage::ready_to_run(spec),
        _ => Ok(()),
    }
}

/// `ike-phase1`: validate the transaction's parts, then run it at the load level in this
/// process (both sides' crypto: there is no server process).
fn ike_phase1_run(backend: &dyn Backend, p: &ike_phase1::IkeParams, common: &Common, warmup: Duration, budget: Duration) -> Finish {
    let validation = match ike_phase1::validate(backend, p) {
        Ok(v) => v,
        Err(BackendError::Unsupported(r)) => return Finish::Unsupported(r, json!({})),
        Err(BackendError::Failed(e)) => return Finish::Invalid(format!("validation could not run: {e}"), json!({})),
    };
    let fields = json!({"validation": serde_json::to_value(&validation).unwrap_or_default()});
    if let Some(why) = validation.failure() {
        return Finish::Invalid(why, fields);
    }
    let timeline = crate::measure::sampler::Sampler::start();
    let measured = crate::measure::load::run_load(
        || ike_phase1::prepare(backend, p).map(|f| f as crate::measure::load::TxnFn),
        common.load,
        warmup,
        budget,
    );
    let samples = timeline.stop();
    match measured {
        Ok(lm) => {
            let mut v = measured_fields(&lm, 0);
            v["validation"] = fields["validation"].clone();
            v["client_timeline"] = serde_json::to_value(samples).unwrap_or_default();
            Finish::Ok(v)
        }
        Err(BackendError::Unsupported(r)) => Finish::Unsupported(r, fields),
        Err(BackendError::Failed(e)) => Finish::Invalid(format!("transaction failed while measured: {e}"), fields),
    }
}

/// The `result` fields of a load measurement (as a primitive's, plus `late`), with
/// `bytes_per_op` bytes per transaction.
pub fn measured_fields(lm: &crate::measure::load::LoadMeasurement, bytes_per_op: usize) -> Value {
    let mut v = crate::protocol::measurement_fields(&lm.m, bytes_per_op);
    v["late"] = lm.late.into();
    v
}

/// A helper process's line channel to the worker that started it (a workload's server process,
/// a fleet job's slice): requests one per line on stdin, answers one JSON value per line on
/// stdout, each flushed at once.
pub struct ParentLink {
    lines: std::io::Lines<std::io::StdinLock<'static>>,
    out: std::io::StdoutLock<'static>,
}

impl ParentLink {
    /// Lock this process's stdin and stdout for the channel.
    pub fn open() -> Self {
        use std::io::BufRead;
        Self { lines: std::io::stdin().lock().lines(), out: std::io::stdout().lock() }
    }

    /// The next line, or None at the end of input or a read error (the parent is gone).
    pub fn line(&mut self) -> Option<String> {
        self.lines.next()?.ok()
    }

    /// The next line as JSON (`Value::Null` when it is not JSON), or None as for [`line`](Self::line).
    pub fn message(&mut self) -> Option<Value> {
        self.line().map(|l| serde_json::from_str(&l).unwrap_or_default())
    }

    /// Send `v` as one line; a parent that stopped reading is not an error here (it is gone).
    pub fn say(&mut self, v: Value) {
        use std::io::Write;
        let _ = writeln!(self.out, "{v}");
        let _ = self.out.flush();
    }
}

/// Pin the calling thread (and the threads it starts afterwards) to one CPU. Returns the CPU,
/// or `None` where it cannot (a host with one CPU, or the call failed).
pub fn pin_to(cpu: usize) -> Option<usize> {
    // SAFETY: cpu_set_t is plain data; CPU_SET only writes inside it; sched_setaffinity(0, …)
    // applies to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        (libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0).then_some(cpu)
    }
}

/// The calling thread's affinity mask, or None where it cannot be read.
fn affinity() -> Option<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0).then_some(set)
    }
}

/// The CPUs this thread may run on (its affinity mask), in order.
pub fn allowed_cpus() -> Vec<usize> {
    match affinity() {
        // SAFETY: CPU_ISSET only reads inside the set.
        Some(set) => (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect(),
        None => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn bad_workload_params_get_one_line_each() {
        let cases = [
            (json!({"load": "closed:0"}), "load 'closed:0'"),
            (json!({"mode": "carrier-pigeon"}), "unknown mode"),
            (json!({"port": 70000}), "port must be"),
            (json!({"stall_ms": 1000, "stall_every_ms": 500}), "stall_ms (1000) must be shorter"),
            (json!({"colour": "blue"}), "unknown parameter 'colour'"),
            (json!({"address": "localhost:1"}), "address must be an IP address"),
            (json!({"mode": "memory", "stall_ms": 10}), "mode = socket only"),
        ];
        for (p, want) in cases {
            let e = parse(tls_handshake::NAME, "aws-lc", &params(p.clone())).err().unwrap_or_default();
            assert!(e.contains(want), "{p}: {e}");
            assert!(!e.contains('\n'));
        }
        let e = parse(ike_phase1::NAME, "aws-lc", &params(json!({"mode": "socket"}))).err().unwrap();
        assert!(e.contains("mode must be memory"), "{e}");
    }

    #[test]
    fn defaults_are_loopback_and_one_closed_connection() {
        let c = parse(tls_handshake::NAME, "aws-lc", &Map::new()).unwrap();
        assert!(c.common.address.is_loopback());
        assert_eq!(c.common.port, 0);
        assert_eq!(c.common.load, Load::Closed { concurrency: 1, pace_per_s: None });
        assert_eq!(c.common.mode, Mode::Socket);
    }

    #[test]
    fn every_workload_announces_its_params_and_defaults() {
        for name in NAMES {
            let v = op_params(name);
            let listed: Vec<&str> = v["params"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
            assert_eq!(listed, param_names(name));
            for (k, _) in v["defaults"].as_object().unwrap() {
                assert!(listed.contains(&k.as_str()), "{name}: default for unlisted {k}");
            }
            // Every default is accepted by the parser.
            let defaults = v["defaults"].as_object().unwrap().clone();
            for required in v.get("required").and_then(Value::as_array).cloned().unwrap_or_default() {
                assert!(listed.contains(&required.as_str().unwrap()), "{name}: required {required} is not listed");
                assert!(!defaults.contains_key(required.as_str().unwrap()), "{name}: required {required} has a default");
            }
            let mut p = defaults.clone();
            p.remove("size_bytes");
            if name != tls_bulk::NAME {
                assert!(parse(name, "aws-lc", &defaults).is_ok(), "{name}: {:?}", parse(name, "aws-lc", &defaults).err());
            }
        }
    }
}
