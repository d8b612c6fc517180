//! The `result` message, typed (docs/worker-protocol.md, "run" and "Workloads"): [`RunResult`]
//! holds what every result says (the request, the library, the status, the CPU mask and
//! capabilities), the validation, the measurement ([`Measured`]) and, for a workload, what it
//! adds ([`WorkloadResult`]: the TLS, IKE, storage and fleet parts). It serialises to the
//! message the orchestrator stores (field names and shapes are the compatibility line: a field
//! is added, never renamed or removed), and its JSON Schema is generated from these types into
//! `tests/fixtures/worker-result.schema.json` (a test fails when that file is stale).
//!
//! Free-form values stay `serde_json::Value`: the request's `params` as given, and the
//! library's `capabilities` (`cpu::Capabilities::to_json`).

use crate::kat;
use crate::measure::load::{Load, LoadMeasurement};
use crate::measure::sampler::CpuSample;
use crate::measure::{Measurement, Timing};
use base64::Engine as _;
use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The message's `type`: always `result`.
#[derive(Clone, Copy, Debug, Serialize, JsonSchema)]
pub enum MessageType {
    #[serde(rename = "result")]
    Result,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Measured.
    Ok,
    /// The backend (or the host) lacks it, or has no runtime CPU mask and one was asked for.
    Unsupported,
    /// Validation failed, or the CPU mask was not applied: never timed.
    Invalid,
}

/// One `result` message.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunResult {
    #[serde(rename = "type")]
    pub message: MessageType,
    /// As requested.
    pub id: String,
    pub backend: String,
    pub op: String,
    /// Of the backend.
    pub library: String,
    pub library_version: String,
    /// The library ran in FIPS mode.
    pub fips: bool,
    /// The FIPS provider it ran under (`LibraryInfo::fips_provider`), as it names itself:
    /// "OpenSSL FIPS Provider 3.1.2". Absent outside FIPS mode and for a library that is its
    /// own module (AWS-LC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fips_provider: Option<String>,
    /// A primitive's resolved parameters (defaults filled in); a workload's as given.
    pub params: Map<String, Value>,
    /// Threads that ran (1 for a workload).
    pub threads: usize,
    pub status: Status,
    /// For `unsupported` and `invalid`: what and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The CPU mask and capabilities (absent when the backend cannot run in this build at all).
    #[serde(flatten)]
    pub mask: Option<MaskFields>,
    /// A primitive's standing under the FIPS module (`crate::fips::run_fields`): whether the
    /// module approves the operation as timed (always true outside FIPS mode) and, when not, why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fips_approved: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fips_reason: Option<String>,
    /// The checks made before anything was timed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
    /// What was measured (`ok` only).
    #[serde(flatten)]
    pub measured: Option<Measured>,
    /// A workload's own fields (`ok` only).
    #[serde(flatten)]
    pub workload: Option<WorkloadResult>,
}

impl RunResult {
    /// A result with every optional part absent, `status` to be set.
    pub fn new(id: String, backend: String, op: String, info: &crate::backends::LibraryInfo, params: Map<String, Value>, threads: usize) -> Self {
        RunResult {
            message: MessageType::Result,
            id,
            backend,
            op,
            library: info.library.clone(),
            library_version: info.library_version.clone(),
            fips: info.fips,
            fips_provider: info.fips_provider.clone(),
            params,
            threads,
            status: Status::Ok,
            reason: None,
            mask: None,
            fips_approved: None,
            fips_reason: None,
            validation: None,
            measured: None,
            workload: None,
        }
    }

    /// This result ended `status` (`unsupported`, `invalid`) for `reason`.
    pub fn ended(mut self, status: Status, reason: String) -> Self {
        self.status = status;
        self.reason = Some(reason);
        self
    }

    /// The message as JSON (keys in order, as every message the worker sends).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a result serialises")
    }
}

/// The CPU capability mask asked for and what the library uses.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MaskFields {
    /// The requested mask, as sent (null: none).
    pub cpu_mask: Option<String>,
    /// What the library uses, read in this process (docs/worker-protocol.md, "run").
    pub capabilities: Value,
    /// With a mask and a maskable library: the flags the mask took away here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_mask_cleared: Option<Vec<String>>,
}

/// The checks before timing: a primitive's known answer and cross-backend checks, or what a
/// workload checks (the negotiation, the sectors on disk, the job's digests and signatures).
/// A field a kind of result does not check is absent.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Validation {
    /// `pass`, `fail: <why>` or `not applicable (<why>)`.
    pub kat: String,
    /// Where the known answer comes from (document and test case).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kat_source: Option<String>,
    /// TLS workloads, `fleet-job`: `pass`, or what differed from the request.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub negotiated: Option<String>,
    /// `storage`: whether the sectors on disk hold what they must (`pass: …`, `fail: …`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub on_disk: Option<String>,
    /// `storage`: the raw sectors decrypted by another library (`pass: <library> …`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cross_decrypt: Option<String>,
    /// `fleet-job`: the files' digests, the HMAC and the signatures against a second library,
    /// and the probe target.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub digests: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hmac: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signatures: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub probe: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cross_checks: Option<Vec<CrossCheck>>,
}

impl From<kat::Validation> for Validation {
    fn from(v: kat::Validation) -> Self {
        Validation {
            kat: v.kat.to_string(),
            kat_source: Some(v.kat_source),
            cross_checks: Some(v.cross_checks.into_iter().map(CrossCheck::from).collect()),
            ..Validation::default()
        }
    }
}

/// One check against another implementation.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct CrossCheck {
    /// The other backend (or, for TLS, `<client> client → <server> server`).
    pub with: String,
    /// `pass`, `fail` or `skipped`.
    pub status: String,
    /// What was checked, or why it failed or was skipped.
    pub detail: String,
}

impl From<kat::CrossCheck> for CrossCheck {
    fn from(c: kat::CrossCheck) -> Self {
        CrossCheck { with: c.with, status: c.status.to_string(), detail: c.detail }
    }
}

/// The measured fields: a primitive's operations, or a workload's transactions.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Measured {
    /// Operations (transactions) completed in the window, all threads.
    pub ops: u64,
    /// Message bytes processed per operation (0 for unsized ones).
    pub bytes_per_op: usize,
    /// Operations per timed sample.
    pub batch: u64,
    pub timing: Timing,
    /// Length of the measuring window (`CLOCK_MONOTONIC`), the longest thread's.
    pub wall_ns: u64,
    /// On-CPU time of each thread over its window.
    pub cpu_ns: Vec<u64>,
    pub cpu_ns_total: u64,
    /// Reference cycles over thread 0's window, where the TSC exists.
    pub tsc_cycles: Option<u64>,
    /// System-wide `/proc/stat` ticks across the window.
    pub steal_ticks: u64,
    pub busy_ticks: u64,
    pub total_ticks: u64,
    /// Latency per operation in ns: HdrHistogram V2 compressed, base64.
    pub histogram: String,
    pub samples: u64,
    pub sample_ns_stats: MinMax,
    /// Workloads: open-level transactions that started more than 1 ms after they were due.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late: Option<u64>,
    /// A device backend whose work runs in a process of its own on this host (a PKCS#11 token
    /// behind a daemon: `CRYPTOPERF_PKCS11_DAEMON_PID`): that process tree's CPU over the span
    /// the `/proc/stat` ticks cover (the window), ns. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_process_cpu_ns: Option<u64>,
    /// A workload whose client side includes a process of its own (`ike-sa`'s initiator
    /// daemon): that process tree's CPU over the window, ns — the client's work outside this
    /// process, so a host's other load leaves it out. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_process_cpu_ns: Option<u64>,
}

/// The shortest and longest sample, ns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MinMax {
    pub min: u64,
    pub max: u64,
}

impl Measured {
    /// The fields of `m`, with `bytes_per_op` bytes per operation (histogram encoded).
    pub fn of(m: &Measurement, bytes_per_op: usize) -> Measured {
        let mut encoded = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&m.histogram, &mut encoded)
            .expect("serialising a histogram into memory cannot fail");
        Measured {
            ops: m.ops,
            bytes_per_op,
            batch: m.batch,
            timing: m.timing,
            wall_ns: m.wall_ns,
            cpu_ns: m.cpu_ns.clone(),
            cpu_ns_total: m.cpu_ns.iter().sum(),
            tsc_cycles: m.tsc_cycles,
            steal_ticks: m.ticks.steal,
            busy_ticks: m.ticks.busy,
            total_ticks: m.ticks.total,
            histogram: base64::engine::general_purpose::STANDARD.encode(encoded),
            samples: m.samples,
            sample_ns_stats: MinMax { min: m.sample_min_ns, max: m.sample_max_ns },
            late: None,
            device_process_cpu_ns: m.companion_cpu_ns,
            peer_process_cpu_ns: None,
        }
    }

    /// A load level's window: [`Measured::of`] with `late`.
    pub fn of_load(lm: &LoadMeasurement, bytes_per_op: usize) -> Measured {
        Measured { late: Some(lm.late), ..Measured::of(&lm.m, bytes_per_op) }
    }
}

/// CPU over time, one sample per 100 ms (`measure::sampler`).
pub type Timeline = Vec<CpuSample>;

// ---- workloads ---------------------------------------------------------------------------------

/// What a workload's result adds: its name, level and mode, and its own part.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkloadResult {
    pub workload: String,
    pub load: Level,
    /// `socket`, `memory` or `file`.
    pub mode: String,
    #[serde(flatten)]
    pub detail: WorkloadDetail,
}

/// A load level as run.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Level {
    /// `closed`, `open` or `targets`.
    pub kind: String,
    /// `closed`: connections.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// `open`: client threads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// `targets`: the job's targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub targets: Option<usize>,
    /// The pace (closed) or the arrival rate (open), per second; null for an unpaced closed
    /// level and a job.
    pub rate_per_s: Option<f64>,
    /// Latency measured from when each transaction was due.
    pub corrected: bool,
}

impl From<&Load> for Level {
    fn from(load: &Load) -> Level {
        let level = |kind: &str, rate_per_s, corrected| Level {
            kind: kind.into(),
            concurrency: None,
            threads: None,
            targets: None,
            rate_per_s,
            corrected,
        };
        match *load {
            Load::Closed { concurrency, pace_per_s } => Level { concurrency: Some(concurrency), ..level("closed", pace_per_s, false) },
            Load::Open { rate_per_s, threads } => Level { threads: Some(threads), ..level("open", Some(rate_per_s), true) },
            Load::Targets { targets } => Level { targets: Some(targets), ..level("targets", None, false) },
        }
    }
}

/// Each workload kind's own part of the result.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum WorkloadDetail {
    /// `tls-handshake`, `tls-bulk`.
    Tls(TlsResult),
    /// `fleet-job`.
    Fleet(Box<FleetResult>),
    /// `storage`.
    Storage(StorageResult),
    /// `ike-phase1`.
    Ike(IkeResult),
    /// `ike-sa`.
    IkeSa(IkeSaResult),
    /// A workload with nothing of its own (the tests' `echo`; kept in every build, so the
    /// schema is one).
    #[allow(dead_code)]
    Plain(PlainResult),
}

/// What one side of a completed TLS handshake reports was negotiated.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Negotiated {
    /// `"TLSv1.3"` or `"TLSv1.2"`.
    pub version: String,
    /// IANA name, e.g. `"TLS_AES_128_GCM_SHA256"`, `"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"`.
    pub cipher_suite: String,
    /// `x25519`, `p256`, `x25519mlkem768`; `"none"` when no key exchange happened (TLS 1.2
    /// resumption); otherwise the library's name or `"0xXXXX"`.
    pub group: String,
    /// IANA name, lowercase (`"rsa_pss_rsae_sha256"`, `"ecdsa_secp256r1_sha256"`, `"ed25519"`,
    /// `"rsa_pkcs1_sha256"`, …); `"none"` when resumed (no certificate signature).
    pub signature_scheme: String,
    /// Whether the session was resumed (PSK / session ticket) rather than a full handshake.
    pub resumed: bool,
}

/// A negotiation of the timed transactions, with how many had it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NegotiatedCount {
    #[serde(flatten)]
    pub negotiated: Negotiated,
    pub count: u64,
}

/// The server side of a workload.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct ServerResult {
    /// The server process's CPU time over the window (memory mode: the server side's share of
    /// `cpu_ns`; `fleet-job`: the agents' over the job); null against an external server.
    pub cpu_ns: Option<u64>,
    /// Transactions the server completed over the same window.
    pub transactions: Option<u64>,
    /// The counters were read at the window's start (after the warm-up) and at its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<bool>,
    /// Where it listened (null in memory mode).
    pub address: Option<String>,
    /// The server process's CPU over time.
    pub timeline: Option<Timeline>,
    /// `tls-bulk`: connections the server failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    /// The client measured against a server it did not start (`connect`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<bool>,
    /// The server's key on a device whose work runs in a process of its own (a PKCS#11 token
    /// behind a daemon: `CRYPTOPERF_PKCS11_DAEMON_PID`): that process tree's CPU over the same
    /// window as `cpu_ns`, ns. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_process_cpu_ns: Option<u64>,
}

impl ServerResult {
    /// A server this worker did not start, at `address`: its tree's CPU over the window
    /// (`cpu_ns`, `None` when not read) and, over the same window, the `transactions` the
    /// client completed against it (one per transaction: the same span as the CPU read).
    pub fn external(address: String, cpu_ns: Option<u64>, transactions: u64) -> ServerResult {
        ServerResult {
            address: Some(address),
            external: Some(true),
            cpu_ns,
            transactions: cpu_ns.map(|_| transactions),
            window: cpu_ns.map(|_| true),
            ..ServerResult::default()
        }
    }
}

/// `tls-handshake` and `tls-bulk`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TlsResult {
    /// The validated transaction's negotiation.
    pub negotiated: Negotiated,
    /// `tls-handshake`: the timed transactions' negotiations, most frequent first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negotiated_counts: Option<Vec<NegotiatedCount>>,
    pub server: ServerResult,
    /// Memory mode: the client side's share of `cpu_ns`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_side_cpu_ns: Option<u64>,
    /// The client process's CPU over time.
    pub client_timeline: Timeline,
    /// Where the sides ran.
    pub placement: String,
}

/// `ike-phase1`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct IkeResult {
    pub client_timeline: Timeline,
}

/// `ike-sa`: IKE SAs set up with a responder daemon by this worker's initiator daemon.
#[derive(Debug, Serialize, JsonSchema)]
pub struct IkeSaResult {
    /// What the first IKE SA negotiated (read back from the initiator), checked against
    /// `proposal` before the window.
    pub negotiated_proposal: IkeProposal,
    /// strongSwan's proposal keywords offered, e.g. `aes128gcm16-prfsha256-ecp256`.
    pub proposal: String,
    /// The certificates' key kind (`rsa2048`, `ecdsa-p256`, ...), both peers'.
    pub cert: String,
    /// The responder's CPU over the window and the IKE SAs set up in it.
    pub server: ServerResult,
    /// The responder daemon's version and loaded plugins; null when its vici socket was not
    /// where the workload looks (`charon.vici` in the server's directory).
    pub responder: Option<IkeDaemon>,
    /// The initiator daemon's, with its CPU over the window (`cpu_ns`).
    pub initiator: Option<IkeDaemon>,
    /// The worker process's CPU over time (the vici load threads; the initiator's work is in
    /// `initiator.cpu_ns`).
    pub client_timeline: Timeline,
    /// Where the sides ran.
    pub placement: String,
}

/// What an IKE SA negotiated, as strongSwan's vici names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct IkeProposal {
    /// `encr-alg`, e.g. `AES_GCM_16`.
    pub encryption: String,
    /// `encr-keysize`, e.g. `128`.
    pub key_bits: String,
    /// `integ-alg` (null for an AEAD).
    pub integrity: Option<String>,
    /// `prf-alg`, e.g. `PRF_HMAC_SHA2_256`.
    pub prf: String,
    /// `dh-group`, e.g. `ECP_256`.
    pub dh_group: String,
}

impl IkeProposal {
    /// `AES_GCM_16-128/PRF_HMAC_SHA2_256/ECP_256`, as strongSwan prints a proposal.
    pub fn text(&self) -> String {
        let integ = self.integrity.as_ref().map(|i| format!("/{i}")).unwrap_or_default();
        format!("{}-{}{integ}/{}/{}", self.encryption, self.key_bits, self.prf, self.dh_group)
    }
}

/// An IKE daemon as it describes itself over vici.
#[derive(Debug, Serialize, JsonSchema)]
pub struct IkeDaemon {
    /// `version`'s daemon and version, e.g. `charon 5.9.8`.
    pub version: String,
    /// `stats`' loaded plugins, in load order.
    pub plugins: Vec<String>,
    /// Its process tree's CPU over the window, ns (the initiator's; null for the responder,
    /// whose CPU is `server.cpu_ns`).
    pub cpu_ns: Option<u64>,
    /// Whether a process of its tree has OpenSSL's FIPS provider (`fips.so`) mapped (the
    /// responder's, read from `/proc/<pid>/maps`); null when not read.
    pub openssl_fips_provider: Option<bool>,
}

/// A workload with no fields of its own.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PlainResult {}

/// `storage`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StorageResult {
    /// The worker process's CPU over time.
    pub client_timeline: Timeline,
    pub storage: StorageFields,
}

/// `storage`'s settings as run and what the window did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StorageFields {
    pub scheme: String,
    pub pattern: String,
    pub direction: String,
    /// % of I/Os that read.
    pub read_pct: u32,
    pub block_bytes: usize,
    pub file_bytes: u64,
    pub sector_bytes: usize,
    pub direct: bool,
    pub fsync: String,
    pub cache: String,
    pub layer: String,
    /// In the window: `reads + writes = ops`.
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// The whole worker process's CPU over the window (`getrusage`).
    pub process_user_ns: u64,
    pub process_system_ns: u64,
    /// The `fdatasync` after the window (`fsync = end`), else 0.
    pub fsync_end_ns: u64,
    /// What encrypted (`none` for clear).
    pub library: String,
}

/// `fleet-job`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FleetResult {
    /// The probe target's negotiation.
    pub negotiated: Negotiated,
    /// The agents (the targets' side) over the job; `address` and `timeline` are agent 0's.
    pub server: ServerResult,
    /// Slice 0's CPU over time.
    pub client_timeline: Option<Timeline>,
    pub placement: String,
    pub fleet: FleetFields,
}

/// A fleet job's settings as run, its targets' records and its processes.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FleetFields {
    pub job: String,
    /// What the job does, in words.
    pub what: String,
    pub targets: usize,
    pub slices: usize,
    pub cap: usize,
    pub agents: usize,
    pub cert: String,
    pub group: String,
    pub suite: String,
    pub digest: String,
    pub sign_digest: String,
    pub auth: String,
    pub items: usize,
    pub item_bytes: usize,
    pub push_bytes: usize,
    pub checks: usize,
    pub file_bytes: usize,
    pub phases: Vec<String>,
    /// The latency model (time per target that is not cryptography): each part's distribution
    /// and where its waits are applied; null when off (`fleet_job::latency`).
    pub latency: Value,
    pub completed: u64,
    pub failed: usize,
    /// Certificates, processes and probe before the job.
    pub setup_ms: f64,
    /// Job-level phases (`stage`, when items are signed).
    pub job_phases: Vec<JobPhase>,
    pub records: Records,
    pub failures: Vec<TargetFailure>,
    pub mismatches: Vec<Mismatch>,
    pub agent_errors: u64,
    pub agent_first_error: Option<String>,
    pub processes: Vec<JobProcess>,
    pub host_cpus: usize,
    /// What the identities' keys are.
    pub key_pool: String,
    /// The job's start on the wall clock (ns since the Unix epoch; absent from older workers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_unix_ns: Option<u64>,
    /// A sub-job's result: the one slice it ran (`slice_index`); absent for a whole job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice_index: Option<usize>,
    /// A job merged from sub-jobs (`--merge-jobs`): where each slice ran and its sub-job's
    /// times; absent for a job run whole on one host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_jobs: Option<Vec<SubJob>>,
}

/// One slice's sub-job of a job spread over machines: where it ran (as the caller that placed
/// it said: a Ray node's id, its address and host name) and its own times.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct SubJob {
    pub slice: usize,
    pub node_id: Option<String>,
    pub address: Option<String>,
    pub hostname: Option<String>,
    /// Its job's start on its host's wall clock (ns since the Unix epoch).
    pub start_unix_ns: u64,
    /// Its job's time, its start to its last target's end (its host's monotonic clock).
    pub wall_ns: u64,
    /// Its setup before the job (certificates, processes, probe).
    pub setup_ms: f64,
    /// Its host's CPUs.
    pub host_cpus: usize,
    /// Its targets completed.
    pub completed: u64,
}

/// A job-level phase, µs since the job started.
#[derive(Debug, Serialize, JsonSchema)]
pub struct JobPhase {
    pub name: String,
    pub start_us: i64,
    pub end_us: i64,
}

/// One row per target: `target`, `slice`, `status` (`ok`/`failed`), then each phase's start and
/// end in µs since the job started (null for phases not reached).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Records {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Option<Cell>>>,
}

/// One value of a record.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Cell {
    Number(i64),
    Text(String),
}

/// A target that failed, in which phase and why.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TargetFailure {
    pub target: usize,
    pub slice: usize,
    pub phase: String,
    pub reason: String,
}

/// A target with check files whose digest differed from the baseline.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Mismatch {
    pub target: usize,
    pub checks: usize,
}

/// What the coordinator measured of one of the job's processes over the job.
#[derive(Debug, Serialize, JsonSchema)]
pub struct JobProcess {
    /// `coordinator`, `slice` or `agent`.
    pub role: String,
    pub index: usize,
    pub pid: Option<u32>,
    pub pinned_cpu: Option<usize>,
    pub cpu_ns: u64,
    pub peak_rss_bytes: Option<u64>,
    /// Most descriptors open at once.
    pub max_fds: Option<u64>,
    /// When its CPU timeline started, relative to the job's start.
    pub timeline_offset_ms: f64,
    pub timeline: Option<Timeline>,
}

/// The JSON Schema of [`RunResult`] (pretty, `\n`-terminated): `cryptoperf-worker
/// --result-schema` prints it; tests/fixtures/worker-result.schema.json keeps it.
pub fn schema_text() -> String {
    let schema = schemars::schema_for!(RunResult);
    serde_json::to_string_pretty(&schema).expect("a schema serialises") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the schema is kept, from the repository's root.
    const SCHEMA_PATH: &str = "tests/fixtures/worker-result.schema.json";

    /// The schema fixture is what these types generate; `CRYPTOPERF_WRITE_SCHEMA=1` rewrites it.
    #[test]
    fn the_schema_fixture_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(SCHEMA_PATH);
        let now = schema_text();
        if std::env::var_os("CRYPTOPERF_WRITE_SCHEMA").is_some() {
            std::fs::write(&path, &now).unwrap();
        }
        let stored = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            stored == now,
            "{SCHEMA_PATH} is not the schema of worker/src/result.rs; regenerate it with \
             `CRYPTOPERF_WRITE_SCHEMA=1 cargo test --manifest-path worker/Cargo.toml the_schema_fixture_is_current` \
             (or `cryptoperf-worker --result-schema > {SCHEMA_PATH}`) and commit it"
        );
    }

    /// A level reads as it always has: each kind's own count, the rate (null when none), and
    /// whether latency is corrected.
    #[test]
    fn levels_keep_their_shape() {
        let json = |load: Load| serde_json::to_value(Level::from(&load)).unwrap();
        assert_eq!(
            json(Load::Closed { concurrency: 4, pace_per_s: None }),
            serde_json::json!({"kind": "closed", "concurrency": 4, "rate_per_s": null, "corrected": false})
        );
        assert_eq!(
            json(Load::Open { rate_per_s: 250.0, threads: 32 }),
            serde_json::json!({"kind": "open", "threads": 32, "rate_per_s": 250.0, "corrected": true})
        );
        assert_eq!(json(Load::Targets { targets: 7 }), serde_json::json!({"kind": "targets", "targets": 7, "rate_per_s": null, "corrected": false}));
    }

    /// The schema names every field of a result and each workload's part.
    #[test]
    fn the_schema_covers_every_kind_of_result() {
        let schema: Value = serde_json::from_str(&schema_text()).unwrap();
        let text = schema.to_string();
        for field in ["histogram", "cpu_mask", "validation", "late", "negotiated_counts", "window", "storage", "fleet", "records", "kat_source"] {
            assert!(text.contains(&format!("\"{field}\"")), "{field}");
        }
    }
}
