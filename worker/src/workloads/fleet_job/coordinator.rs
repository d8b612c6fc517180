//! The coordinator: the job's PKI, the checks before timing, the agents and slices started,
//! the job run and what it measured gathered into the result.

use crate::workloads::base::{allowed_cpus, Finish, Outcome, WorkloadCase};
use crate::workloads::server::{ServerProcess, ServerStats};
use crate::result::{Cell, FleetFields, FleetResult, JobPhase, JobProcess, Measured, Mismatch, Records, ServerResult,
                    TargetFailure, Timeline, Validation, WorkloadDetail};
use crate::workloads::tls::{self, Authority, NamedIdentity, Negotiated, Usage};
use crate::backends::{self, Backend, BackendError};
use crate::measure::clock;
use crate::measure::procstat::CpuTicks;
use crate::measure::sampler::{self, process_cpu_ns, FdWatch, Sampler};
use crate::measure::{new_histogram, Measurement, Timing};
use base64::Engine as _;
use serde_json::{json, Value};
use super::content::*;
use super::records::*;
use super::slice::*;
use super::spec::*;

/// Where slices and agents run: per slice and per agent the CPU to pin to (or none), and a note.
/// Slices first, one CPU each; agents on the CPUs left (round robin) — only when at least one
/// is left, else nothing is pinned.
pub fn placement(slices: usize, agents: usize) -> (Vec<Option<usize>>, Vec<Option<usize>>, String) {
    let cpus = allowed_cpus();
    if cpus.len() > slices {
        let spare = &cpus[slices..];
        let s: Vec<_> = cpus[..slices].iter().map(|c| Some(*c)).collect();
        let a: Vec<_> = (0..agents).map(|i| Some(spare[i % spare.len()])).collect();
        let note = format!(
            "slices on CPU {}, agents on CPU {} (the host's {} CPUs)",
            cpus[..slices].iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "),
            spare.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "),
            cpus.len()
        );
        (s, a, note)
    } else {
        let note = format!(
            "not pinned: {slices} slice(s) and {agents} agent(s) share this process's {} CPU(s), none left to keep the agents apart",
            cpus.len()
        );
        (vec![None; slices], vec![None; agents], note)
    }
}

pub(super) fn invalid(why: String, validation: &Validation) -> Finish {
    Finish::Invalid(why, Some(validation.clone()))
}

pub(super) fn from_backend(e: BackendError, what: &str) -> Finish {
    match e {
        BackendError::Unsupported(r) => Finish::Unsupported(r, None),
        BackendError::Failed(r) => Finish::Invalid(format!("{what}: {r}"), None),
    }
}

/// A check's verdict: `pass: …` or `fail: …`, and the failure (`what` in front) when it failed.
pub(super) fn verdict(ok: bool, pass: String, fail: String, what: &str, failure: &mut Option<String>) -> String {
    if ok {
        return format!("pass: {pass}");
    }
    let status = format!("fail: {fail}");
    failure.get_or_insert(format!("{what}{status}"));
    status
}

/// The checks of the primitives against a second library, before anything is timed: the
/// validation (`digests`, `hmac`, `signatures`, as the job uses them) and the first failure.
pub(super) fn validate_primitives(backend: &dyn Backend, backend_name: &str, spec: &Spec, baseline: &[Vec<u8>]) -> Result<(Validation, Option<String>), BackendError> {
    let reference = backends::rustcrypto::RustCrypto;
    let mut v = Validation {
        kat: "not applicable (a job: its digests, HMACs and signatures are checked against a second library below, and a probe target runs every phase before the job)".into(),
        ..Validation::default()
    };
    let mut failure = None;
    if spec.phases.contains(&Phase::Checks) {
        let mut d = backend.digest(spec.digest)?;
        let mut out = Vec::new();
        let differ = (0..spec.checks).find(|&j| d.digest(&file(j, spec.file_bytes), &mut out).is_err() || out != baseline[j]);
        let (name, n) = (spec.digest.name(), spec.checks);
        let fail = format!("file {}'s {name} differs from RustCrypto's", differ.unwrap_or(0));
        v.digests = Some(verdict(differ.is_none(), format!("{n} files' {name} equal RustCrypto's"), fail, "", &mut failure));
    }
    if spec.phases.contains(&Phase::Push) && spec.auth == Auth::Hmac {
        let (mut ours, mut theirs) = (backend.hmac(spec.digest, &hmac_key(0))?, reference.hmac(spec.digest, &hmac_key(0))?);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let msg = item(0, spec.item_bytes);
        ours.mac(&msg, &mut a)?;
        theirs.mac(&msg, &mut b)?;
        let what = format!("HMAC-{} ", spec.digest.name());
        v.hmac = Some(verdict(a == b, "equals RustCrypto's".into(), "differs from RustCrypto's".into(), &what, &mut failure));
    }
    if spec.phases.contains(&Phase::Report) || spec.stages() {
        let status = signature_check(backend, backend_name, spec)?;
        if status.starts_with("fail") {
            failure.get_or_insert(format!("signature cross-check {status}"));
        }
        v.signatures = Some(status);
    }
    Ok((v, failure))
}

/// A signature by `backend` verifies under another library and one by that library under
/// `backend` (the first other library that has the scheme): `pass: …`, `fail: …` or `skipped: …`.
pub(super) fn signature_check(backend: &dyn Backend, backend_name: &str, spec: &Spec) -> Result<String, BackendError> {
    let mine = key_material(spec.p.cert, MANAGEMENT_KEY).map_err(BackendError::Failed)?;
    let alg = spec.sig_alg();
    let msg = b"cryptoperf fleet-job signature check";
    for other_name in ["openssl", "aws-lc", "rustcrypto"].into_iter().filter(|n| *n != backend_name) {
        let Some(other) = backends::by_name(other_name) else { continue };
        let pair = (|| -> Result<(bool, bool), BackendError> {
            let ours = backend.signer(alg, &mine.pair())?.sign(msg)?;
            let theirs = other.signer(alg, &mine.pair())?.sign(msg)?;
            Ok((other.verifier(alg, &mine.public)?.verify(msg, &ours)?, backend.verifier(alg, &mine.public)?.verify(msg, &theirs)?))
        })();
        return Ok(match pair {
            Err(BackendError::Unsupported(_)) => continue,
            Err(BackendError::Failed(e)) => format!("fail: {e}"),
            Ok((true, true)) => format!("pass: verified by {other_name}, and {other_name}'s by {backend_name}"),
            Ok((a, b)) => format!("fail: {other_name} verifies ours: {a}; {backend_name} verifies {other_name}'s: {b}"),
        });
    }
    Ok("skipped: no other library signs and verifies this scheme here".to_string())
}

/// Whether this worker can run `spec` at all ([`Workload::check`]): the FIPS rule, the
/// primitives, and both mutual-TLS configurations over a job's identities.
pub fn check(spec: &Spec, backend: &dyn Backend) -> Result<(), String> {
    if let Some(why) = fips_refusal(backend.info().backend, spec) {
        return Err(why);
    }
    let unsupported = |e: BackendError| match e {
        BackendError::Unsupported(r) => Err(r),
        BackendError::Failed(_) => Ok(()), // not a missing combination: the run says what failed
    };
    if let Err(e) = check_primitives(backend, spec) {
        unsupported(e)?;
    }
    let ca = Authority::new(spec.p.cert, CA_KEY, "cryptoperf fleet CA")?;
    let leaf = ca.issue(TARGET_KEYS, PROBE, Usage::Server)?;
    let mgmt = ca.issue(MANAGEMENT_KEY, MANAGEMENT, Usage::Client)?;
    let ids = [NamedIdentity { name: PROBE.into(), chain_der: vec![leaf], key_index: TARGET_KEYS }];
    match tls::mutual_server(spec.stack, &ca.der(), &ids, &spec.p) {
        Ok(s) => {
            if let Some(why) = crate::workloads::tls_handshake::fips_problem(spec.stack, "agent", s.fips()) {
                return Err(why);
            }
        }
        Err(e) => unsupported(e)?,
    }
    match tls::mutual_client(spec.stack, &ca.identity(mgmt, MANAGEMENT_KEY), &spec.p) {
        Ok(c) => match crate::workloads::tls_handshake::fips_problem(spec.stack, "management", c.fips()) {
            Some(why) => Err(why),
            None => Ok(()),
        },
        Err(e) => unsupported(e),
    }
}

/// What the coordinator made before the job, untimed: the job's PKI (a CA over pool key 0,
/// the management server's client certificate), the baseline digests (RustCrypto's), the
/// validation of the primitives, and the items to push with the management key that signs them.
pub(super) struct Prepared {
    pub(super) ca: Authority,
    pub(super) mgmt_der: Vec<u8>,
    pub(super) baseline: Vec<Vec<u8>>,
    pub(super) validation: Validation,
    pub(super) items: Vec<Vec<u8>>,
    pub(super) mgmt_key: KeyMaterial,
}

impl Prepared {
    pub(super) fn new(case: &WorkloadCase, spec: &Spec, backend: &dyn Backend) -> Result<Prepared, Finish> {
        let ca = Authority::new(spec.p.cert, CA_KEY, "cryptoperf fleet CA").map_err(|e| Finish::Invalid(e, None))?;
        let mgmt_der = ca.issue(MANAGEMENT_KEY, MANAGEMENT, Usage::Client).map_err(|e| Finish::Invalid(e, None))?;
        let baseline = baseline(spec).map_err(|e| from_backend(e, "RustCrypto's digest"))?;
        let (validation, failure) = validate_primitives(backend, &case.backend_name, spec, &baseline).map_err(|e| from_backend(e, "validation"))?;
        if let Some(why) = failure {
            return Err(invalid(why, &validation));
        }
        let mgmt_key = key_material(spec.p.cert, MANAGEMENT_KEY).map_err(|e| Finish::Invalid(e, None))?;
        // The items exist before the job (authored content); staging signs them.
        let items = if spec.stages() { (0..spec.items).map(|j| item(j, spec.item_bytes)).collect() } else { vec![] };
        Ok(Prepared { ca, mgmt_der, baseline, validation, items, mgmt_key })
    }

    /// Sign the items with the management key (`stage`; nothing when the job signs none).
    pub(super) fn stage(&self, spec: &Spec, backend: &dyn Backend) -> Result<Vec<Vec<u8>>, BackendError> {
        if self.items.is_empty() {
            return Ok(vec![]);
        }
        let mut signer = backend.signer(spec.sig_alg(), &self.mgmt_key.pair())?;
        self.items.iter().map(|data| signer.sign(data)).collect()
    }
}

/// The management server's baseline: RustCrypto's digests of the check files.
pub(super) fn baseline(spec: &Spec) -> Result<Vec<Vec<u8>>, BackendError> {
    let mut d = backends::rustcrypto::RustCrypto.digest(spec.digest)?;
    (0..spec.checks)
        .map(|j| {
            let mut out = Vec::new();
            d.digest(&file(j, spec.file_bytes), &mut out).map(|_| out)
        })
        .collect()
}

pub(super) fn b64(d: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(d)
}

/// Start the agents: each issues its targets' certificates under the CA and listens.
pub(super) fn start_agents(case: &WorkloadCase, spec: &Spec, targets: usize, ca_der: &[u8], cpus: &[Option<usize>]) -> Result<Vec<ServerProcess>, Finish> {
    (0..spec.agents)
        .map(|a| {
            let mut params = case.raw.clone();
            if case.common.port != 0 {
                params.insert("port".into(), (case.common.port as u64 + a as u64).into());
            }
            let side = json!({"agent": a, "targets": targets, "ca_der": b64(ca_der)});
            ServerProcess::start_side(NAME, &case.backend_name, &params, spec.slice_ids().len() * spec.cap + 1, cpus[a], side).map_err(|e| match e.code.as_str() {
                "unsupported" => Finish::Unsupported(e.message, e.validation),
                _ => Finish::Invalid(format!("agent {a}: {}", e.message), e.validation),
            })
        })
        .collect()
}

/// Start the slices (each runs the probe on every agent first) and wait until each is ready:
/// the slices and their `ready` answers.
pub(super) fn start_slices(case: &WorkloadCase, spec: &Spec, job: &Prepared, agents: &[String], cpus: &[Option<usize>],
                probe_signatures: &[Vec<u8>]) -> Result<(Vec<SliceProcess>, Vec<Value>), Finish> {
    let mut slices = Vec::with_capacity(spec.slices);
    for (k, j) in spec.slice_ids().into_iter().enumerate() {
        let config = json!({
            "slice": j, "targets": targets_of(case.common.load).unwrap_or(0), "params": case.raw, "backend": case.backend_name,
            "ca_der": b64(&job.ca.der()),
            "management_der": b64(&job.mgmt_der), "agents": agents, "pin_cpu": cpus[k],
            "baseline": job.baseline.iter().map(|d| b64(d)).collect::<Vec<_>>(),
            "probe": true, "probe_signatures": probe_signatures.iter().map(|d| b64(d)).collect::<Vec<_>>(),
        });
        slices.push(SliceProcess::start(&config, j).map_err(|e| Finish::Invalid(e, None))?);
    }
    let readies = slices.iter_mut().map(|s| s.answer()).collect::<Result<Vec<_>, _>>();
    let readies = readies.map_err(|e| invalid(e, &job.validation))?;
    Ok((slices, readies))
}

/// Correct before timed: the probe ran every phase from every slice and negotiated what was
/// asked. Returns its negotiation; `validation` says what was found.
pub(super) fn check_probe(readies: &[Value], spec: &Spec, validation: &mut Validation) -> Result<Negotiated, Finish> {
    if let Some(why) = readies.iter().find_map(|r| r["probe"]["failure"].as_str()) {
        validation.negotiated = Some("probe failed".into());
        return Err(invalid(format!("the probe target failed {why}"), validation));
    }
    let probe = &readies[0]["probe"];
    let Ok(negotiated) = serde_json::from_value::<Negotiated>(probe["negotiated"].clone()) else {
        validation.negotiated = Some("the probe reported no negotiation".into());
        return Err(invalid("the probe target reported no negotiation".into(), validation));
    };
    if let Some(why) = negotiated.mismatch(&spec.p) {
        validation.negotiated = Some(why.clone());
        return Err(invalid(format!("negotiated differs from the request: {why}"), validation));
    }
    if probe["mismatches"].as_u64().unwrap_or(0) > 0 {
        return Err(invalid("the probe target's check digests differ from the baseline".into(), validation));
    }
    validation.negotiated = Some("pass".into());
    validation.probe = Some("pass: every phase ran on probe.fleet.test from every slice to every agent before the job, untimed".into());
    Ok(negotiated)
}

/// What the job itself measured: its start, the end of `stage`, the slices' `done` answers,
/// the host's ticks and the coordinator's CPU over it, and each agent's counters around it.
pub(super) struct Job {
    pub(super) t0: u64,
    /// The job's start on the wall clock (ns since the Unix epoch), read beside `t0`.
    pub(super) start_unix_ns: u64,
    /// The global index of each slice of `dones`, in order.
    pub(super) slice_ids: Vec<usize>,
    pub(super) staged: u64,
    pub(super) dones: Vec<SliceDone>,
    pub(super) ticks: CpuTicks,
    pub(super) coordinator_cpu: u64,
    pub(super) agent_before: Vec<ServerStats>,
    pub(super) agent_after: Vec<ServerStats>,
    pub(super) agent_pids: Vec<Option<u32>>,
}

/// Now on the wall clock (`CLOCK_REALTIME`), ns since the Unix epoch.
pub(super) fn unix_now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Wait until the wall clock reads `at` (ns since the Unix epoch); `Err` (`invalid`, nothing
/// timed) when it is already more than [`MAX_START_LATE_NS`] past: a sub-job started late would
/// put the wait into its job's time.
pub(super) fn wait_until(at: u64) -> Result<(), Finish> {
    let late = unix_now_ns().saturating_sub(at);
    if late > MAX_START_LATE_NS {
        return Err(Finish::Invalid(
            format!("this sub-job's setup ended {:.0} ms after its start instant ({START_AT}); the orchestrator gave too short a margin, so its slice would have started after the others", late as f64 / 1e6),
            None,
        ));
    }
    loop {
        let now = unix_now_ns();
        if now >= at {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_nanos((at - now).min(50_000_000)));
    }
}

/// Run the job: the agents' counters read, its start, the job-level stage, then every slice
/// at once; wait for each, then stop the agents.
pub(super) fn run_job(spec: &Spec, backend: &dyn Backend, job: &Prepared, mut agents: Vec<ServerProcess>, slices: &mut [SliceProcess]) -> Result<Job, Finish> {
    let agent_before = agents.iter_mut().map(|a| a.stats()).collect::<Result<Vec<_>, _>>();
    let agent_before = agent_before.map_err(|e| Finish::Invalid(format!("agent: {e}"), None))?;
    if let Some(at) = spec.start_at_unix_ns {
        wait_until(at)?;
    }
    let ticks0 = CpuTicks::now();
    let cpu0 = process_cpu_ns();
    let t0 = clock::monotonic_ns();
    let start_unix_ns = unix_now_ns();
    let signatures = job.stage(spec, backend).map_err(|e| from_backend(e, "staging the items"))?;
    let staged = clock::monotonic_ns();
    let go = json!({"t0_ns": t0, "signatures": signatures.iter().map(|d| b64(d)).collect::<Vec<_>>()});
    for s in slices.iter_mut() {
        s.tell(&go).map_err(|e| Finish::Invalid(e, None))?;
    }
    let dones = slices
        .iter_mut()
        .map(|s| s.answer().and_then(|v| serde_json::from_value::<SliceDone>(v).map_err(|e| format!("slice {}'s answer: {e}", s.index))))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Finish::Invalid(e, None))?;
    let cpu1 = process_cpu_ns();
    let ticks = CpuTicks::now().since(ticks0);
    let agent_pids = agents.iter().map(|a| a.pid()).collect();
    let agent_after = agents.into_iter().map(|a| a.stop()).collect::<Result<Vec<_>, _>>();
    let agent_after = agent_after.map_err(|e| Finish::Invalid(format!("agent: {e}"), None))?;
    let coordinator_cpu = (cpu1.0 + cpu1.1).saturating_sub(cpu0.0 + cpu0.1);
    Ok(Job { t0, start_unix_ns, slice_ids: spec.slice_ids(), staged, dones, ticks, coordinator_cpu, agent_before, agent_after, agent_pids })
}

impl Job {
    /// Every target's record, by target.
    pub(super) fn records(&self) -> Vec<Record> {
        let mut records: Vec<Record> = self
            .dones
            .iter()
            .enumerate()
            .flat_map(|(j, d)| d.records.iter().map(move |r| Record::from_wire(r, self.slice_ids[j])))
            .collect();
        records.sort_by_key(|r| r.target);
        records
    }

    /// The job as a measurement: `ops` the targets completed, `wall_ns` from its start to its
    /// last target's end, the histogram each completed target's time, `cpu_ns` the coordinator's
    /// then each slice's.
    pub(super) fn measurement(&self, records: &[Record]) -> Measurement {
        let mut histogram = new_histogram();
        let mut end = self.staged;
        for r in records {
            if let (Some(first), Some(last)) = (r.phases.first(), r.phases.last()) {
                end = end.max(last.1);
                if r.failure.is_none() {
                    histogram.saturating_record((last.1 - first.0).max(1));
                }
            }
        }
        let completed = records.iter().filter(|r| r.failure.is_none()).count() as u64;
        let mut cpu_ns = vec![self.coordinator_cpu];
        cpu_ns.extend(self.dones.iter().map(|d| d.cpu_ns));
        Measurement {
            ops: completed,
            batch: 1,
            timing: Timing::Individual,
            wall_ns: end.saturating_sub(self.t0).max(1),
            cpu_ns,
            tsc_cycles: None,
            ticks: self.ticks.clone(),
            companion_cpu_ns: None,
            sample_min_ns: if completed == 0 { 0 } else { histogram.min() },
            sample_max_ns: histogram.max(),
            histogram,
            samples: completed,
        }
    }

    /// µs from the job's start to `ns`.
    pub(super) fn us(&self, ns: u64) -> i64 {
        ((ns as i128 - self.t0 as i128) as f64 / 1e3).round() as i64
    }

    /// ms from the job's start to `start_ns` (0 when unknown).
    pub(super) fn offset_ms(&self, start_ns: Option<u64>) -> f64 {
        start_ns.map(|s| (s as i128 - self.t0 as i128) as f64 / 1e6).unwrap_or(0.0)
    }

    /// The records as a table: one row per target, per phase its start and end in µs since the
    /// job's start, the latency model's wait in it and the slice thread's CPU over it (µs), then
    /// the management CPU the model burnt for the target (µs).
    pub(super) fn table(&self, spec: &Spec, records: &[Record]) -> Records {
        let rows = records
            .iter()
            .map(|r| {
                let status = if r.failure.is_none() { "ok" } else { "failed" };
                let mut row = vec![Some(Cell::Number(r.target as i64)), Some(Cell::Number(r.slice as i64)), Some(Cell::Text(status.into()))];
                let us = |ns: Option<&u64>| ns.map(|n| Cell::Number((*n as f64 / 1e3).round() as i64));
                for k in 0..spec.phases.len() {
                    let (a, b) = r.phases.get(k).map_or((None, None), |(a, b)| (Some(self.us(*a)), Some(self.us(*b))));
                    row.extend([a.map(Cell::Number), b.map(Cell::Number), us(r.waits.get(k)), us(r.cpu.get(k))]);
                }
                row.push(us(Some(&r.other_cpu_ns)));
                row
            })
            .collect();
        let mut columns = vec!["target".to_string(), "slice".to_string(), "status".to_string()];
        for p in &spec.phases {
            for what in ["start", "end", "wait", "cpu"] {
                columns.push(format!("{}_{what}_us", p.name()));
            }
        }
        columns.push("manager_other_cpu_us".into());
        Records { columns, rows }
    }

    /// Every process of the job (the coordinator, each slice, each agent) with what the
    /// coordinator measured of it; `coordinator` is its own (timeline, start, descriptors).
    pub(super) fn processes(&self, coordinator: (Timeline, u64, usize), agent_cpus: &[Option<usize>]) -> Vec<JobProcess> {
        let (timeline, start_ns, max_fds) = coordinator;
        let mut out = vec![JobProcess {
            role: "coordinator".into(), index: 0, pid: Some(std::process::id()), pinned_cpu: None, cpu_ns: self.coordinator_cpu,
            peak_rss_bytes: sampler::peak_rss_bytes(), max_fds: Some(max_fds as u64), timeline_offset_ms: self.offset_ms(Some(start_ns)),
            timeline: Some(timeline),
        }];
        out.extend(self.dones.iter().enumerate().map(|(j, d)| JobProcess {
            role: "slice".into(), index: self.slice_ids[j], pid: d.pid, pinned_cpu: d.pinned_cpu, cpu_ns: d.cpu_ns, peak_rss_bytes: d.peak_rss_bytes,
            max_fds: d.max_fds, timeline_offset_ms: self.offset_ms(d.timeline_start_ns), timeline: d.timeline.clone(),
        }));
        out.extend(self.agent_before.iter().zip(&self.agent_after).enumerate().map(|(a, (before, after))| JobProcess {
            role: "agent".into(), index: a, pid: self.agent_pids[a], pinned_cpu: agent_cpus[a], cpu_ns: after.cpu_ns.saturating_sub(before.cpu_ns),
            peak_rss_bytes: after.peak_rss_bytes, max_fds: after.max_fds.map(|f| f as u64), timeline_offset_ms: self.offset_ms(after.timeline_start_ns),
            timeline: after.timeline.clone(),
        }));
        out
    }

    /// The agents together over the job: the result's `server` (`address` and `timeline` agent
    /// 0's).
    pub(super) fn server(&self, agents: &[String]) -> ServerResult {
        let pairs = || self.agent_before.iter().zip(&self.agent_after);
        ServerResult {
            cpu_ns: Some(pairs().map(|(b, a)| a.cpu_ns.saturating_sub(b.cpu_ns)).sum()),
            transactions: Some(pairs().map(|(b, a)| a.transactions.saturating_sub(b.transactions)).sum()),
            window: Some(true),
            address: agents.first().cloned(),
            timeline: self.agent_after.first().and_then(|a| a.timeline.clone()),
            ..ServerResult::default()
        }
    }
}

/// The result's `fleet`: the job's settings as run, then what it did.
pub(super) fn fleet_fields(spec: &Spec, targets: usize, job: &Job, records: &[Record], setup_ms: f64, processes: Vec<JobProcess>) -> FleetFields {
    let failures: Vec<TargetFailure> = records
        .iter()
        .filter_map(|r| r.failure.as_ref().map(|(p, why)| TargetFailure { target: r.target, slice: r.slice, phase: p.name().into(), reason: why.clone() }))
        .collect();
    let names = |v: &[Phase]| v.iter().map(|p| p.name().to_string()).collect::<Vec<_>>();
    FleetFields {
        job: spec.kind.name.into(), what: spec.kind.what.into(), targets, slices: spec.slices, cap: spec.cap, agents: spec.agents,
        cert: spec.p.cert.name().into(), group: spec.p.group.name().into(), suite: spec.p.suite.name().into(),
        digest: spec.digest.name().into(), sign_digest: spec.sign_digest.name().into(), auth: spec.auth.name().into(),
        items: spec.items, item_bytes: spec.item_bytes,
        push_bytes: if spec.phases.contains(&Phase::Push) { spec.items * spec.item_bytes } else { 0 },
        checks: if spec.phases.contains(&Phase::Checks) { spec.checks } else { 0 },
        file_bytes: spec.file_bytes, phases: names(&spec.phases), latency: spec.latency.describe(),
        completed: records.iter().filter(|r| r.failure.is_none()).count() as u64,
        failed: failures.len(), setup_ms,
        job_phases: if spec.stages() { vec![JobPhase { name: "stage".into(), start_us: 0, end_us: job.us(job.staged) }] } else { vec![] },
        records: job.table(spec, records),
        failures,
        mismatches: records.iter().filter(|r| r.mismatches > 0).map(|r| Mismatch { target: r.target, checks: r.mismatches }).collect(),
        agent_errors: job.agent_after.iter().map(|a| a.errors).sum(),
        agent_first_error: job.agent_after.iter().find_map(|a| a.first_error.clone()),
        processes,
        host_cpus: allowed_cpus().len(),
        start_unix_ns: Some(job.start_unix_ns),
        slice_index: spec.only_slice,
        sub_jobs: None,
        key_pool: format!("every identity's key is one of the {} fixed keys of its kind compiled into the worker (tls/keys): the CA's, the management server's, and {} the targets take in turn; every certificate is made for this job", tls::POOL_SIZE, tls::POOL_SIZE - TARGET_KEYS),
    }
}

/// Run a job: see the module's documentation. The result's fields beyond a primitive's are in
/// `fleet` (docs/worker-protocol.md, "fleet-job").
pub fn run(case: &WorkloadCase, spec: &Spec, backend: &dyn Backend) -> Finish {
    run_checked(case, spec, backend).unwrap_or_else(|f| f)
}

pub(super) fn run_checked(case: &WorkloadCase, spec: &Spec, backend: &dyn Backend) -> Result<Finish, Finish> {
    let targets = targets_of(case.common.load).map_err(|e| Finish::Invalid(e, None))?;
    if let Some(why) = fips_refusal(&case.backend_name, spec) {
        return Err(Finish::Unsupported(why, None));
    }
    check_primitives(backend, spec).map_err(|e| from_backend(e, "preparing the job's primitives"))?;
    let coordinator_sampler = Sampler::start();
    let coordinator_t0 = clock::monotonic_ns();
    let coordinator_fds = FdWatch::start();
    let setup_start = clock::monotonic_ns();
    let mut job = Prepared::new(case, spec, backend)?;
    let (slice_cpus, agent_cpus, placement_note) = placement(spec.slice_ids().len(), spec.agents);
    let agents = start_agents(case, spec, targets, &job.ca.der(), &agent_cpus)?;
    // The probe's staged signatures (the same items as the job's, signed untimed).
    let probe_signatures = job.stage(spec, backend).map_err(|e| from_backend(e, "staging the probe's items"))?;
    let agent_addrs: Vec<String> = agents.iter().map(|a| a.addr.to_string()).collect();
    let (mut slices, readies) = start_slices(case, spec, &job, &agent_addrs, &slice_cpus, &probe_signatures)?;
    let negotiated = check_probe(&readies, spec, &mut job.validation)?;
    let setup_ms = (clock::monotonic_ns() - setup_start) as f64 / 1e6;
    let ran = run_job(spec, backend, &job, agents, &mut slices)?;
    drop(slices);
    let coordinator = (coordinator_sampler.stop(), coordinator_t0, coordinator_fds.stop());
    let records = ran.records();
    let processes = ran.processes(coordinator, &agent_cpus);
    let fleet = fleet_fields(spec, targets, &ran, &records, setup_ms, processes);
    Ok(Finish::Ok(Outcome {
        measured: Measured { late: Some(0), ..Measured::of(&ran.measurement(&records), 0) },
        validation: Some(job.validation),
        detail: WorkloadDetail::Fleet(Box::new(FleetResult {
            negotiated,
            server: ran.server(&agent_addrs),
            client_timeline: ran.dones.first().and_then(|d| d.timeline.clone()),
            placement: placement_note,
            fleet,
        })),
    }))
}
