//! `fleet-job`: a whole job that a management server runs against many managed targets over
//! mutually authenticated TLS — what server-automation products are measured by: how many
//! targets per minute a job gets through, at one target and at thousands.
//!
//! **One run is one job**, a fixed amount of work rather than a time window: the level
//! `targets:N` ([`crate::measure::load::Load::Targets`]) names N simulated targets, the job runs
//! a sequence of phases ([`Phase`]) against each, and the result's `ops` is the targets
//! completed, `wall_ns` the job's time (its start to its last target's end), the histogram each
//! completed target's time (ns, all its phases).
//!
//! **Processes** (docs/worker-protocol.md, "fleet-job"):
//!
//! - this worker is the *coordinator*: it makes the job's CA and the management server's client
//!   certificate, starts the agents and the slices, checks correctness before anything is timed,
//!   runs the job-level `stage` phase (signing what targets verify), starts the slices at one
//!   instant and gathers what they recorded;
//! - `agents` agent processes (each a [`super::server`] process: the same binary with
//!   `--serve-workload`) each host the targets `i` with `i mod agents` = its index on one
//!   listener, each target with its own certificate (issued by the agent, under the job's CA,
//!   over a key of the fixed pool: `tls/keys/README.md`) and chosen by SNI;
//! - `slices` slice processes (`--fleet-slice`: the management server's workers) share the
//!   targets — target `i` goes to slice `i mod slices` — each with at most `cap` targets in
//!   flight at once (the product's concurrency cap per worker), one thread per target in flight.
//!
//! Slices and agents are pinned apart where the host has a CPU to spare beyond the slices'
//! (slices first, agents on what is left); otherwise nothing is pinned and the result says so.
//!
//! **Per target**, from the management side, over one TLS 1.3 connection with client
//! certificates on both sides:
//!
//! - `connect`: TCP connect, the mutual-TLS handshake (the target presents its certificate, the
//!   management server its own; each verifies the other's chain), and the target's public key
//!   taken from its certificate for verifying its report;
//! - `push`: `items` items of `item_bytes`, each with an authenticator the target checks: an
//!   HMAC (`auth = hmac`, the configuration's `digest`, a key per target, made by the management
//!   server per target) or a signature (`auth = sign`, made once per job in `stage` with the
//!   management key and `sign_digest`, verified by every target with the key of the client
//!   certificate it was shown); the target answers once all are checked;
//! - `checks`: the target hashes its `checks` files (`file_bytes` each, deterministic content)
//!   with `digest` and returns the digests; the management server compares them with its
//!   baseline (computed before the job by a second library, RustCrypto); a differing file is a
//!   *mismatch* (a compliance finding, counted per target), not a failure;
//! - `report`: the target signs a result (its name, what it did; `sign_digest`) with its key and
//!   sends it back; the management server verifies it with the key of the target's certificate.
//!
//! Job kinds ([`KINDS`]) set the reference's phases and sizes: `appconfig` (100 small rules,
//! HMAC'd), `audit` (192 checks), `remediate` (a package, signed); the study may override them.
//!
//! **Failures** are results, not errors: a target whose connection fails, closes mid-phase or
//! presents a certificate the CA did not issue is recorded `failed` with the phase and the
//! reason, and the job goes on. Test-only parameters inject them (`inject_close`,
//! `inject_bad_cert`; `inject_tamper` alters one file of a target, a mismatch).
//!
//! **Correct before timed**: the files' digests by the backend must equal RustCrypto's; an HMAC
//! must equal RustCrypto's; a signature by the backend must verify under another library and
//! one by another library under the backend; and a probe target (`probe.fleet.test`, hosted by
//! every agent, not counted) runs every phase, untimed, from every slice to every agent, and
//! must negotiate what was asked (TLS 1.3, the suite, the group, a signature scheme of the
//! certificate's key type). Otherwise the cell is `invalid` and no job is timed. The probe also
//! takes each process's one-time start-up out of the job: rustls on AWS-LC spends about 90 ms on
//! the first handshake of a process, which fell on whichever slice or agent had not yet served
//! one (seen as a second slice whose first 20 targets all waited ~0.1–0.4 s).
//!
//! **Digests and FIPS.** `digest` is used for HMACs and file digests, `sign_digest` (default:
//! `digest`) for every signature the job makes. TLS signs as TLS 1.3 does (RSA-PSS or ECDSA
//! with SHA-256), and certificates are signed with SHA-256, whatever the configuration. In FIPS
//! mode SHA-1 signature generation is refused as `unsupported`: it is not an approved service of
//! the module (AWS-LC's service indicator approves SHA-224 and up for signing,
//! `crypto/fipsmodule/service_indicator/service_indicator.c`; NIST SP 800-131A Rev. 2), though
//! SHA-1 HMACs and digests are.

use super::base::{allowed_cpus, choice, number, object, parse_with, pin_to, strings, text, Better, Common, Finish, LevelKind,
                  MemorySizing, Metric, Mode, Outcome, ParentLink, Params, ServerSide, Sizing, StartError, TransactionName, Workload,
                  WorkloadCase, WorkloadSpec, COMMON_PARAMS, PROCESS_BYTES, RESULT_BYTES, THREAD_BYTES};
use super::server::{ServerProcess, ServerStats};
use crate::result::{Cell, FleetFields, FleetResult, JobPhase, JobProcess, Measured, Mismatch, Records, ServerResult, TargetFailure, Timeline,
                    Validation, WorkloadDetail};
use super::tls::{self, Authority, CertKind, ClientStack, Group, Identity, NamedIdentity, Negotiated, ServerStack,
                 Session, Stack, Suite, TlsParams, TlsVersion, Transport, Usage};
use crate::backends::{self, Backend, BackendError, Digest, Signer, Verifier};
use crate::measure::clock;
use crate::measure::load::Load;
use crate::measure::procstat::CpuTicks;
use crate::measure::sampler::{self, process_cpu_ns, FdWatch, Sampler};
use crate::measure::{new_histogram, Measurement, Timing};
use crate::ops::keys::KeyPair;
use crate::ops::{DigestAlg, RsaPadding, SigAlg};
use base64::Engine as _;
use serde_json::{json, Map, Value};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const NAME: &str = "fleet-job";
/// The command-line flag that makes a worker one slice of a job (started by the coordinator).
pub const SLICE_FLAG: &str = "--fleet-slice";
/// This workload's own parameters (`hello`'s `op_params`).
pub const PARAMS: [&str; 18] = [
    "job", "phases", "cert", "digest", "sign_digest", "group", "suite", "cap", "slices", "agents", "items",
    "item_bytes", "auth", "checks", "file_bytes", "inject_close", "inject_bad_cert", "inject_tamper",
];
/// Most targets one slice may have in flight (each holds a descriptor in the slice and one in
/// an agent).
pub const MAX_CAP: u64 = 1000;
/// Most slices, and most agents, one job may start.
pub const MAX_PROCESSES: u64 = 64;
/// Most bytes one target may be pushed (items × item_bytes): 256 MiB.
pub const MAX_PUSH_BYTES: u64 = 256 << 20;
/// A connection that waits this long for its peer fails (its target is recorded failed).
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Application writes are made in chunks of this many bytes (rustls buffers at most 64 KiB).
const CHUNK: usize = 16 << 10;
/// The name of the probe target (validation; not counted).
const PROBE: &str = "probe.fleet.test";
/// The management server's certificate name.
const MANAGEMENT: &str = "management.fleet.test";
/// Pool keys: the CA's, the management server's, a rogue CA's (`inject_bad_cert`), and the
/// first of the targets' (target `i` uses `TARGET_KEYS + i mod (POOL_SIZE - TARGET_KEYS)`).
const CA_KEY: usize = 0;
const MANAGEMENT_KEY: usize = 1;
const TARGET_KEYS: usize = 2;

/// A phase of a target's job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Connect,
    Push,
    Checks,
    Report,
}

impl Phase {
    pub const ALL: [Phase; 4] = [Phase::Connect, Phase::Push, Phase::Checks, Phase::Report];
    pub const NAMES: [&'static str; 4] = ["connect", "push", "checks", "report"];

    pub fn name(self) -> &'static str {
        Phase::NAMES[Phase::ALL.iter().position(|p| *p == self).unwrap_or(0)]
    }

    pub fn parse(name: &str) -> Option<Phase> {
        Phase::NAMES.iter().position(|n| *n == name).map(|i| Phase::ALL[i])
    }
}

/// How a pushed item is authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// An HMAC with `digest` under a key per target, made by the management server per target.
    Hmac,
    /// A signature by the management key with `sign_digest`, made once per job (`stage`).
    Sign,
}

impl Auth {
    pub const NAMES: [&'static str; 2] = ["hmac", "sign"];

    pub fn name(self) -> &'static str {
        match self {
            Auth::Hmac => "hmac",
            Auth::Sign => "sign",
        }
    }
}

/// A job kind: the phases and sizes of one of the reference's jobs.
#[derive(Debug)]
pub struct JobKind {
    pub name: &'static str,
    /// What the job does, in words (announced in `hello`, shown in reports).
    pub what: &'static str,
    pub phases: &'static [Phase],
    pub items: u64,
    pub item_bytes: u64,
    pub auth: Auth,
    pub checks: u64,
    pub file_bytes: u64,
}

/// Bytes of `remediate`'s package: 1 MiB, scaled down from the reference's 500 MB package so
/// that a job of 1000 targets moves 1 GiB, not 500 GB (the report states the scale).
pub const PACKAGE_BYTES: u64 = 1 << 20;

/// The job kinds, first the default: `audit`.
pub const KINDS: [JobKind; 3] = [
    JobKind {
        name: "audit",
        what: "192 compliance checks per target: the target hashes 192 files, the management server compares the digests with its baseline",
        phases: &[Phase::Connect, Phase::Checks, Phase::Report],
        items: 0,
        item_bytes: 512,
        auth: Auth::Hmac,
        checks: 192,
        file_bytes: 4096,
    },
    JobKind {
        name: "appconfig",
        what: "100 configuration rules per target, each HMAC'd by the management server (light, server-side work)",
        phases: &[Phase::Connect, Phase::Push, Phase::Report],
        items: 100,
        item_bytes: 512,
        auth: Auth::Hmac,
        checks: 0,
        file_bytes: 4096,
    },
    JobKind {
        name: "remediate",
        what: "one package per target, signed once per job by the management server and verified by every target (network- and CPU-heavy)",
        phases: &[Phase::Connect, Phase::Push, Phase::Report],
        items: 1,
        item_bytes: PACKAGE_BYTES,
        auth: Auth::Sign,
        checks: 0,
        file_bytes: 4096,
    },
];

/// The job kinds' names, in [`KINDS`] order.
pub fn kind_names() -> Vec<&'static str> {
    KINDS.iter().map(|k| k.name).collect()
}

/// `hello`'s `job_kinds`: each kind's phases, sizes and description.
pub fn kinds_json() -> Value {
    KINDS
        .iter()
        .map(|k| {
            (k.name.to_string(), json!({
                "what": k.what, "phases": k.phases.iter().map(|p| p.name()).collect::<Vec<_>>(),
                "items": k.items, "item_bytes": k.item_bytes, "auth": k.auth.name(), "checks": k.checks,
                "file_bytes": k.file_bytes,
            }))
        })
        .collect::<Map<String, Value>>()
        .into()
}

/// The values a parameter takes when not given (a kind's sizes: `job_kinds`).
pub fn defaults() -> Map<String, Value> {
    object(json!({"job": KINDS[0].name, "cert": "rsa2048", "digest": "sha256", "group": "p256",
                  "suite": "aes-128-gcm", "cap": 20, "slices": 1, "agents": 2, "load": "targets:1",
                  "mode": "socket"}))
}

/// A result's fixed part (phases, processes with their CPU timelines) and each target's record,
/// measured with the release worker: 5.2 KB at 10 targets, 11.9 KB at 100, 74 KB at 1000.
const RESULT_BYTES_PER_TARGET: u64 = 96;
/// Each agent's per-target identity (certificate and key state, chosen by name) and the
/// coordinator's per-target record while it gathers them.
const AGENT_BYTES_PER_TARGET: u64 = 8 << 10;
const COORDINATOR_BYTES_PER_TARGET: u64 = 4 << 10;

/// The `fleet-job` workload: a job over `targets:N`, by processes of its own (agents, slices).
pub struct FleetJob;

impl Workload for FleetJob {
    type Request = Spec;

    fn name(&self) -> &'static str {
        NAME
    }

    fn spec(&self) -> WorkloadSpec {
        let mut per_process = Map::new();
        per_process.insert("agents".into(), PROCESS_BYTES.into());
        per_process.insert("slices".into(), PROCESS_BYTES.into());
        let tls: Vec<_> = super::tls_handshake::tls_param_values().into_iter().filter(|(p, _)| PARAMS.contains(p)).collect();
        WorkloadSpec {
            own_params: &PARAMS,
            common_params: &COMMON_PARAMS,
            param_values: tls
                .into_iter()
                .chain([
                    ("job", strings(&kind_names())),
                    ("auth", strings(&Auth::NAMES)),
                    ("sign_digest", DigestAlg::ALL.iter().map(|d| d.name().to_string()).collect()),
                ])
                .collect(),
            defaults: defaults(),
            required: &[],
            job_kinds: Some(kinds_json()),
            levels: &[LevelKind::Targets],
            bytes_per_tx_param: None,
            modes: &[Mode::Socket],
            default_mode: Mode::Socket,
            server: true,
            needs_dir: false,
            file_bytes_param: None,
            job: true,
            calibration_load: Some("targets:10"),
            transaction: TransactionName { one: "target", many: "targets" },
            sizing: Sizing {
                result_bytes: RESULT_BYTES,
                result_bytes_per_s: 0,
                result_bytes_per_target: RESULT_BYTES_PER_TARGET,
                memory: MemorySizing {
                    base_bytes: PROCESS_BYTES,
                    per_target_bytes: AGENT_BYTES_PER_TARGET + COORDINATOR_BYTES_PER_TARGET,
                    per_param_bytes: per_process,
                    per_param_product_bytes: vec![("cap", "slices", THREAD_BYTES)],
                    ..MemorySizing::default()
                },
            },
            metrics: vec![
                Metric::new("targets_per_min", "targets/min", Better::Higher),
                Metric::new("p50_ns", "ns", Better::Lower),
                Metric::new("p99_ns", "ns", Better::Lower),
                Metric::new("client_cpu_ns_per_tx", "ns", Better::Lower),
                Metric::new("server_cpu_ns_per_tx", "ns", Better::Lower),
            ],
        }
    }

    fn parse(&self, backend: &str, params: &Params, _: &Common) -> Result<Spec, String> {
        parse(backend, params)
    }

    fn check(&self, spec: &Spec, backend: &dyn Backend) -> Result<(), String> {
        check(spec, backend)
    }

    fn run(&self, spec: &Spec, case: &WorkloadCase, backend: &dyn Backend, _: Duration, _: Duration) -> Finish {
        run(case, spec, backend)
    }

    fn server_side(&self, spec: &Spec, case: &WorkloadCase, side: &Value) -> Result<ServerSide, StartError> {
        agent_side(spec, &case.backend_name, side)
    }
}

/// A checked `fleet-job` request.
#[derive(Clone, Debug)]
pub struct Spec {
    pub kind: &'static JobKind,
    pub phases: Vec<Phase>,
    pub stack: Stack,
    /// TLS 1.3, the certificate kind (every identity's), the group and the suite.
    pub p: TlsParams,
    pub digest: DigestAlg,
    pub sign_digest: DigestAlg,
    pub cap: usize,
    pub slices: usize,
    pub agents: usize,
    pub items: usize,
    pub item_bytes: usize,
    pub auth: Auth,
    pub checks: usize,
    pub file_bytes: usize,
    /// Test-only: targets whose agent closes the connection at the first request after the
    /// handshake (mid-phase), whose certificate comes from another CA, and one of whose files
    /// differs from the baseline.
    pub inject_close: BTreeSet<usize>,
    pub inject_bad_cert: BTreeSet<usize>,
    pub inject_tamper: BTreeSet<usize>,
}

impl Spec {
    /// Whether the job pushes items with signatures made in `stage`.
    fn stages(&self) -> bool {
        self.phases.contains(&Phase::Push) && self.auth == Auth::Sign && self.items > 0
    }

    /// The signature scheme of the job's signatures (items, reports): the certificate's key with
    /// `sign_digest` (RSA: PKCS #1 v1.5).
    fn sig_alg(&self) -> SigAlg {
        sig_alg(self.p.cert, self.sign_digest)
    }
}

fn sig_alg(cert: CertKind, digest: DigestAlg) -> SigAlg {
    match cert {
        CertKind::Rsa2048 => SigAlg::Rsa { bits: 2048, digest, padding: RsaPadding::Pkcs1 },
        CertKind::Rsa4096 => SigAlg::Rsa { bits: 4096, digest, padding: RsaPadding::Pkcs1 },
        CertKind::EcdsaP256 => SigAlg::EcdsaP256 { digest },
        CertKind::Ed25519 => SigAlg::Ed25519,
    }
}

/// A list of target indices, `"3,17"` (test-only parameters).
fn targets_list(params: &Map<String, Value>, key: &str) -> Result<BTreeSet<usize>, String> {
    let raw = text(params, key, "")?;
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| format!("{key} must list target numbers, e.g. \"3,17\"; got '{raw}'")))
        .collect()
}

fn digest_param(params: &Map<String, Value>, key: &str, default: &str) -> Result<DigestAlg, String> {
    let names: Vec<&str> = DigestAlg::ALL.iter().map(|d| d.name()).collect();
    choice(key, &text(params, key, default)?, DigestAlg::from_name, &names)
}

/// Check a request's parameters. Errors: one line naming the parameter.
pub fn parse(backend: &str, params: &Map<String, Value>) -> Result<Spec, String> {
    let stack = Stack::for_backend(backend).ok_or_else(|| {
        format!("backend '{backend}' has no TLS implementation here; fleet-job runs on aws-lc (rustls + aws-lc-rs), ring (rustls + ring) and openssl")
    })?;
    let job = text(params, "job", KINDS[0].name)?;
    let kind = KINDS.iter().find(|k| k.name == job).ok_or_else(|| {
        format!("unknown job '{job}'; known: {}", kind_names().join(", "))
    })?;
    let phases = match params.get("phases") {
        None | Some(Value::Null) => kind.phases.to_vec(),
        Some(_) => {
            let raw = text(params, "phases", "")?;
            let list = raw
                .split(',')
                .map(str::trim)
                .map(|p| choice("phase", p, Phase::parse, &Phase::NAMES))
                .collect::<Result<Vec<_>, _>>()?;
            if list.first() != Some(&Phase::Connect) {
                return Err(format!("phases must start with connect (every other phase runs on its connection); got '{raw}'"));
            }
            if list.iter().collect::<std::collections::HashSet<_>>().len() != list.len() {
                return Err(format!("phases lists a phase twice: '{raw}'"));
            }
            list
        }
    };
    let cert = choice("cert", &text(params, "cert", "rsa2048")?, CertKind::parse, CertKind::NAMES)?;
    let group = choice("group", &text(params, "group", "p256")?, Group::parse, Group::NAMES)?;
    let suite = choice("suite", &text(params, "suite", "aes-128-gcm")?, Suite::parse, Suite::NAMES)?;
    let digest = digest_param(params, "digest", "sha256")?;
    let sign_digest = digest_param(params, "sign_digest", digest.name())?;
    let auth = match text(params, "auth", kind.auth.name())?.as_str() {
        "hmac" => Auth::Hmac,
        "sign" => Auth::Sign,
        other => return Err(format!("unknown auth '{other}'; known: hmac, sign")),
    };
    let items = number(params, "items", kind.items, 0..=100_000)? as usize;
    let item_bytes = number(params, "item_bytes", kind.item_bytes, 1..=crate::ops::MAX_SIZE as u64)? as usize;
    if (items as u64) * (item_bytes as u64) > MAX_PUSH_BYTES {
        return Err(format!("items × item_bytes is {} bytes per target; at most {MAX_PUSH_BYTES}", items * item_bytes));
    }
    let checks = number(params, "checks", kind.checks, 0..=100_000)? as usize;
    let file_bytes = number(params, "file_bytes", kind.file_bytes, 1..=1 << 20)? as usize;
    if phases.contains(&Phase::Push) && items == 0 {
        return Err("phase push with items = 0 pushes nothing; give items or leave push out of phases".into());
    }
    if phases.contains(&Phase::Checks) && checks == 0 {
        return Err("phase checks with checks = 0 checks nothing; give checks or leave checks out of phases".into());
    }
    let spec = Spec {
        kind,
        phases,
        stack,
        p: TlsParams { version: TlsVersion::Tls13, cert, group, suite, resume: false, record_bytes: None, fallback_group: None },
        digest,
        sign_digest,
        cap: number(params, "cap", 20, 1..=MAX_CAP)? as usize,
        slices: number(params, "slices", 1, 1..=MAX_PROCESSES)? as usize,
        agents: number(params, "agents", 2, 1..=MAX_PROCESSES)? as usize,
        items,
        item_bytes,
        auth,
        checks,
        file_bytes,
        inject_close: targets_list(params, "inject_close")?,
        inject_bad_cert: targets_list(params, "inject_bad_cert")?,
        inject_tamper: targets_list(params, "inject_tamper")?,
    };
    Ok(spec)
}

/// The number of targets of a job level; `Err` (one line) for another kind of level.
pub fn targets_of(load: Load) -> Result<usize, String> {
    match load {
        Load::Targets { targets } => Ok(targets),
        _ => Err("fleet-job's level is a number of targets: load = targets:N".into()),
    }
}

/// Why `spec` is not run in this build on `backend`, before anything is configured: SHA-1
/// signatures in FIPS mode (see the module's documentation).
fn fips_refusal(backend: &str, spec: &Spec) -> Option<String> {
    (crate::fips::mode(backend) && spec.sign_digest == DigestAlg::Sha1).then(|| {
        "SHA-1 signature generation is not an approved service in FIPS mode (the module's service indicator \
         approves SHA-224 and up for signing; NIST SP 800-131A Rev. 2): give sign_digest = \"sha256\" \
         (SHA-1 HMACs and digests remain approved)"
            .to_string()
    })
}

/// A target's DNS name: `t00042.fleet.test`.
pub fn target_name(i: usize) -> String {
    format!("t{i:05}.fleet.test")
}

/// The pool key of target `i`.
fn target_key(i: usize) -> usize {
    TARGET_KEYS + i % (tls::POOL_SIZE - TARGET_KEYS)
}

/// `len` deterministic bytes for `seed` (SplitMix64): the content of files and items, the same
/// on both sides without being sent.
fn fill(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5ca1_ab1e;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The check file `j` (`file_bytes` each); a tampered target's file 0 has its first byte flipped.
fn file(j: usize, len: usize) -> Vec<u8> {
    fill(0xf11e_0000 + j as u64, len)
}

/// Pushed item `j` (`item_bytes` each).
fn item(j: usize, len: usize) -> Vec<u8> {
    fill(0x17e4_0000 + j as u64, len)
}

/// The HMAC key the management server and target `i` share (32 bytes).
fn hmac_key(i: usize) -> Vec<u8> {
    fill(0x4d41_4300_0000 + i as u64, 32)
}

/// A key of the pool in the encodings the backends import ([`KeyPair`]).
struct KeyMaterial {
    pkcs8: Vec<u8>,
    raw: Vec<u8>,
    public: Vec<u8>,
}

impl KeyMaterial {
    fn pair(&self) -> KeyPair<'_> {
        KeyPair { private_pkcs8: &self.pkcs8, private_raw: &self.raw, public: &self.public }
    }
}

/// Pool key `index` of `kind` as [`KeyMaterial`].
fn key_material(kind: CertKind, index: usize) -> Result<KeyMaterial, String> {
    let pkcs8 = tls::pool_key(kind, index).to_vec();
    let key = openssl::pkey::PKey::private_key_from_pkcs8(&pkcs8).map_err(|e| format!("pool key: {e}"))?;
    let public = public_encoding(&key)?;
    let raw = match kind {
        CertKind::EcdsaP256 => {
            key.ec_key().and_then(|k| k.private_key().to_vec_padded(32)).map_err(|e| format!("pool key: {e}"))?
        }
        CertKind::Ed25519 => key.raw_private_key().map_err(|e| format!("pool key: {e}"))?,
        _ => vec![],
    };
    Ok(KeyMaterial { pkcs8, raw, public })
}

/// The public key of `key` in the backends' encoding: PKCS #1 DER (RSA), the uncompressed
/// point (EC), the 32 raw bytes (Ed25519).
fn public_encoding<T: openssl::pkey::HasPublic>(key: &openssl::pkey::PKeyRef<T>) -> Result<Vec<u8>, String> {
    use openssl::pkey::Id;
    let e = |e: openssl::error::ErrorStack| format!("public key: {e}");
    match key.id() {
        Id::RSA => key.rsa().and_then(|r| r.public_key_to_der_pkcs1()).map_err(e),
        Id::EC => {
            let ec = key.ec_key().map_err(e)?;
            let mut ctx = openssl::bn::BigNumContext::new().map_err(e)?;
            ec.public_key().to_bytes(ec.group(), openssl::ec::PointConversionForm::UNCOMPRESSED, &mut ctx).map_err(e)
        }
        Id::ED25519 => key.raw_public_key().map_err(e),
        other => Err(format!("public key of an unexpected type {other:?}")),
    }
}

/// The public key (backends' encoding) of the certificate `der`.
fn public_of_cert(der: &[u8]) -> Result<Vec<u8>, String> {
    let cert = openssl::x509::X509::from_der(der).map_err(|e| format!("the peer certificate does not parse: {e}"))?;
    let key = cert.public_key().map_err(|e| format!("the peer certificate's key: {e}"))?;
    public_encoding(&key)
}

/// The backend called `name` (a real one: `parse` found its TLS stack).
fn backend_of(name: &str) -> Result<Box<dyn Backend>, BackendError> {
    backends::by_name(name).ok_or_else(|| BackendError::Failed(format!("unknown backend {name}")))
}

/// Whether `backend` can make everything `spec`'s phases need (digests, HMACs, signatures of
/// the key kind with `sign_digest`, their verification); `Err(Unsupported)` names what not.
fn check_primitives(backend: &dyn Backend, spec: &Spec) -> Result<(), BackendError> {
    let mine = key_material(spec.p.cert, MANAGEMENT_KEY).map_err(BackendError::Failed)?;
    if spec.phases.contains(&Phase::Checks) {
        backend.digest(spec.digest)?;
    }
    if spec.phases.contains(&Phase::Push) && spec.auth == Auth::Hmac {
        backend.hmac(spec.digest, &hmac_key(0))?;
    }
    if spec.phases.contains(&Phase::Report) || spec.stages() {
        backend.signer(spec.sig_alg(), &mine.pair())?;
        backend.verifier(spec.sig_alg(), &mine.public)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------ wire helpers

/// Write `buf` as application data, in [`CHUNK`]s.
fn send(s: &mut dyn Session, buf: &[u8]) -> Result<(), String> {
    for chunk in buf.chunks(CHUNK) {
        s.write_all(chunk)?;
    }
    Ok(())
}

/// Read exactly `n` bytes of application data.
fn recv(s: &mut dyn Session, n: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match s.read(&mut out[got..])? {
            Some(0) => return Err("the peer closed the connection".into()),
            Some(k) => got += k,
            None => return Err("no data (would block on a blocking socket)".into()),
        }
    }
    Ok(out)
}

fn recv_u32(s: &mut dyn Session) -> Result<u32, String> {
    let b = recv(s, 4)?;
    Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn put_u32(out: &mut Vec<u8>, v: usize) {
    out.extend_from_slice(&(v as u32).to_be_bytes());
}

/// Read one length-prefixed (u32) field of at most `max` bytes.
fn recv_field(s: &mut dyn Session, max: usize) -> Result<Vec<u8>, String> {
    let n = recv_u32(s)? as usize;
    if n > max {
        return Err(format!("a field of {n} bytes, more than the {max} expected"));
    }
    recv(s, n)
}

/// The requests the management server sends after the handshake (one byte each, then the
/// payload): the target's index first, then one per phase, then the end.
mod op {
    pub const TARGET: u8 = b'T';
    pub const PUSH: u8 = b'P';
    pub const CHECKS: u8 = b'C';
    pub const REPORT: u8 = b'R';
    pub const QUIT: u8 = b'Q';
    pub const OK: u8 = b'K';
    pub const ERROR: u8 = b'E';
}

// ------------------------------------------------------------------------------ agents

/// What an agent process hosts: its targets' identities, the files, and how to answer.
struct Agent {
    spec: Spec,
    backend_name: String,
    server: Arc<dyn ServerStack>,
    /// Target index → hosted here (the probe: `usize::MAX`).
    hosted: std::collections::HashSet<usize>,
    files: Vec<Vec<u8>>,
}

/// The per-thread primitives of an agent: one signer per pool key and one digest.
struct AgentThread {
    signers: HashMap<usize, Box<dyn Signer>>,
    digest: Option<Box<dyn Digest>>,
}

thread_local! {
    static AGENT_THREAD: RefCell<AgentThread> = RefCell::new(AgentThread { signers: HashMap::new(), digest: None });
}

/// The agent side in its own process ([`super::server`]): `side` carries `agent` (its index),
/// `targets` (the job's N) and `ca_der` (base64, the job's CA certificate). It issues its
/// targets' certificates (and the probe's) under the CA, with the pool's keys,
/// builds one mutual-TLS server choosing the identity by SNI, and returns the handler serving
/// one target per connection. `setup` says how many it hosts and how long issuing took.
pub fn agent_side(spec: &Spec, backend: &str, side: &Value) -> Result<ServerSide, StartError> {
    let fail = |code: &str, m: String| StartError::new(code, m);
    let index = side["agent"].as_u64().unwrap_or(0) as usize;
    let targets = side["targets"].as_u64().unwrap_or(0) as usize;
    let ca_der = base64::engine::general_purpose::STANDARD
        .decode(side["ca_der"].as_str().unwrap_or(""))
        .map_err(|e| fail("failed", format!("agent {index}: bad CA certificate: {e}")))?;
    let started = clock::monotonic_ns();
    let ca = Authority::from_der(spec.p.cert, CA_KEY, &ca_der).map_err(|e| fail("failed", e))?;
    let rogue = if spec.inject_bad_cert.is_empty() {
        None
    } else {
        Some(Authority::new(spec.p.cert, tls::POOL_SIZE - 1, "cryptoperf rogue CA").map_err(|e| fail("failed", e))?)
    };
    let mut hosted: Vec<usize> = (index..targets).step_by(spec.agents).collect();
    hosted.push(usize::MAX); // the probe, on every agent
    let identities = hosted
        .iter()
        .map(|&i| {
            let (name, key) = if i == usize::MAX { (PROBE.to_string(), TARGET_KEYS) } else { (target_name(i), target_key(i)) };
            let issuer = match &rogue {
                Some(r) if spec.inject_bad_cert.contains(&i) => r,
                _ => &ca,
            };
            issuer.issue(key, &name, Usage::Server).map(|der| NamedIdentity { name, chain_der: vec![der], key_index: key })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail("failed", e))?;
    let server = tls::mutual_server(spec.stack, &ca_der, &identities, &spec.p).map_err(|e| match e {
        BackendError::Unsupported(r) => fail("unsupported", r),
        BackendError::Failed(r) => fail("failed", r),
    })?;
    if let Some(why) = super::tls_handshake::fips_problem(spec.stack, "agent", server.fips()) {
        return Err(fail("unsupported", why));
    }
    let files = (0..spec.checks).map(|j| file(j, spec.file_bytes)).collect();
    let agent = Arc::new(Agent { spec: spec.clone(), backend_name: backend.to_string(), server, hosted: hosted.iter().copied().collect(), files });
    let setup = json!({"agent": index, "hosted": hosted.len(), "issue_ms": (clock::monotonic_ns() - started) as f64 / 1e6});
    // Every serving thread makes its signers (one per pool key its targets use) and its digest
    // before the agent listens: a key parsed at a thread's first report would land in the job.
    let keys: BTreeSet<usize> = hosted.iter().map(|&i| if i == usize::MAX { TARGET_KEYS } else { target_key(i) }).collect();
    let init_agent = agent.clone();
    let thread_init: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
        let _ = prepare_thread(&init_agent, &keys);
    });
    let handler = Arc::new(move |stream: TcpStream, served: &AtomicU64| {
        if serve_target(&agent, stream)? {
            served.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    Ok(ServerSide { handler, setup, thread_init: Some(thread_init) })
}

/// This thread's signers for `keys` and its digest, made now (errors are left for the handler
/// to meet and report at its first connection).
fn prepare_thread(agent: &Agent, keys: &BTreeSet<usize>) -> Result<(), String> {
    let backend = backend_of(&agent.backend_name).map_err(|e| e.to_string())?;
    AGENT_THREAD.with(|t| {
        let mut t = t.borrow_mut();
        if agent.spec.phases.contains(&Phase::Checks) && t.digest.is_none() {
            t.digest = Some(backend.digest(agent.spec.digest).map_err(|e| e.to_string())?);
        }
        if agent.spec.phases.contains(&Phase::Report) {
            for &k in keys {
                if !t.signers.contains_key(&k) {
                    let m = key_material(agent.spec.p.cert, k)?;
                    t.signers.insert(k, backend.signer(agent.spec.sig_alg(), &m.pair()).map_err(|e| e.to_string())?);
                }
            }
        }
        Ok(())
    })
}

/// Serve one connection: a target's side of its phases. `Ok(true)` when the management server
/// ended it (`Q`: one target served), `Ok(false)` when it was closed on purpose (`inject_close`).
fn serve_target(agent: &Agent, stream: TcpStream) -> Result<bool, String> {
    stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(|e| format!("read timeout: {e}"))?;
    stream.set_nonblocking(false).map_err(|e| format!("blocking mode: {e}"))?;
    let mut s = agent.server.accept(Box::new(stream) as Box<dyn Transport>)?;
    if !s.handshake().map_err(|e| format!("agent handshake: {e}"))? {
        return Err("agent handshake would block on a blocking socket".into());
    }
    let spec = &agent.spec;
    let head = recv(&mut *s, 5)?;
    if head[0] != op::TARGET {
        return Err(format!("expected the target's index first, got request {:?}", head[0] as char));
    }
    let raw = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let target = if raw == u32::MAX { usize::MAX } else { raw as usize };
    if !agent.hosted.contains(&target) {
        return Err(format!("target {target} is not hosted by this agent"));
    }
    let backend = backend_of(&agent.backend_name).map_err(|e| e.to_string())?;
    // The management key, from the client certificate the handshake verified (for `sign` items).
    let mut management: Option<Box<dyn Verifier>> = None;
    loop {
        let request = recv(&mut *s, 1)?[0];
        if spec.inject_close.contains(&target) {
            // Test-only: the target goes away in the middle of a phase, without close_notify.
            return Ok(false);
        }
        match request {
            op::PUSH => {
                let count = recv_u32(&mut *s)? as usize;
                let mut problem = None;
                let mut mac = match spec.auth {
                    Auth::Hmac => Some(backend.hmac(spec.digest, &hmac_key(target)).map_err(|e| e.to_string())?),
                    Auth::Sign => None,
                };
                let mut tag = Vec::new();
                for j in 0..count {
                    let data = recv_field(&mut *s, spec.item_bytes)?;
                    let auth = recv_field(&mut *s, 4096)?;
                    let ok = match spec.auth {
                        Auth::Hmac => {
                            mac.as_mut().expect("an HMAC").mac(&data, &mut tag).map_err(|e| e.to_string())?;
                            tag == auth
                        }
                        Auth::Sign => {
                            if management.is_none() {
                                let cert = s.peer_certificate().ok_or("the management server presented no certificate")?;
                                let public = public_of_cert(&cert)?;
                                management = Some(backend.verifier(spec.sig_alg(), &public).map_err(|e| e.to_string())?);
                            }
                            management.as_mut().expect("a verifier").verify(&data, &auth).map_err(|e| e.to_string())?
                        }
                    };
                    if !ok && problem.is_none() {
                        problem = Some(format!("item {j}: its {} does not verify", if spec.auth == Auth::Hmac { "HMAC" } else { "signature" }));
                    }
                }
                match problem {
                    None => send(&mut *s, &[op::OK])?,
                    Some(p) => {
                        let mut out = vec![op::ERROR];
                        put_u32(&mut out, p.len());
                        out.extend_from_slice(p.as_bytes());
                        send(&mut *s, &out)?;
                    }
                }
            }
            op::CHECKS => {
                let count = (recv_u32(&mut *s)? as usize).min(agent.files.len());
                let tampered = spec.inject_tamper.contains(&target);
                let mut out = Vec::with_capacity(count * spec.digest.output_len());
                AGENT_THREAD.with(|t| -> Result<(), String> {
                    let mut t = t.borrow_mut();
                    if t.digest.is_none() {
                        t.digest = Some(backend.digest(spec.digest).map_err(|e| e.to_string())?);
                    }
                    let d = t.digest.as_mut().expect("a digest");
                    let mut one = Vec::new();
                    for (j, f) in agent.files.iter().take(count).enumerate() {
                        if j == 0 && tampered {
                            let mut f = f.clone();
                            f[0] ^= 1;
                            d.digest(&f, &mut one).map_err(|e| e.to_string())?;
                        } else {
                            d.digest(f, &mut one).map_err(|e| e.to_string())?;
                        }
                        out.extend_from_slice(&one);
                    }
                    Ok(())
                })?;
                send(&mut *s, &out)?;
            }
            op::REPORT => {
                let name = if target == usize::MAX { PROBE.to_string() } else { target_name(target) };
                let report = format!(
                    "{name}: {} job done; phases {}; {} items of {} bytes; {} checks of {} bytes hashed with {}",
                    spec.kind.name,
                    spec.phases.iter().map(|p| p.name()).collect::<Vec<_>>().join(","),
                    spec.items, spec.item_bytes, spec.checks, spec.file_bytes, spec.digest.name()
                );
                let key = if target == usize::MAX { TARGET_KEYS } else { target_key(target) };
                let sig = AGENT_THREAD.with(|t| -> Result<Vec<u8>, String> {
                    let mut t = t.borrow_mut();
                    if !t.signers.contains_key(&key) {
                        let m = key_material(spec.p.cert, key)?;
                        let signer = backend.signer(spec.sig_alg(), &m.pair()).map_err(|e| e.to_string())?;
                        t.signers.insert(key, signer);
                    }
                    t.signers.get_mut(&key).expect("a signer").sign(report.as_bytes()).map_err(|e| e.to_string())
                })?;
                let mut out = Vec::with_capacity(report.len() + sig.len() + 8);
                put_u32(&mut out, report.len());
                out.extend_from_slice(report.as_bytes());
                put_u32(&mut out, sig.len());
                out.extend_from_slice(&sig);
                send(&mut *s, &out)?;
            }
            op::QUIT => {
                s.close();
                return Ok(true);
            }
            other => return Err(format!("unknown request {:?}", other as char)),
        }
    }
}

// ------------------------------------------------------------------------------ the management side

/// What a slice needs to run its targets (from the coordinator's configuration line).
struct Management {
    spec: Spec,
    targets: usize,
    backend_name: String,
    client: Arc<dyn ClientStack>,
    agents: Vec<SocketAddr>,
    /// The baseline digests of the check files (RustCrypto's).
    baseline: Vec<Vec<u8>>,
    /// The pushed items, and their signatures once staged (`auth = sign`).
    items: Vec<Vec<u8>>,
}

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
    fn to_json(&self) -> Value {
        json!({"t": self.target, "ph": self.phases.iter().map(|(a, b)| vec![*a, *b]).collect::<Vec<_>>(),
               "fail": self.failure.as_ref().map(|(p, why)| json!({"phase": p.name(), "reason": why})),
               "mm": self.mismatches})
    }

    fn from_json(v: &Value, slice: usize) -> Record {
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

/// One target, from the management side: its phases in order, each timed; the first failure
/// ends it (recorded with its phase and reason). `signatures`: the items' signatures (`sign`);
/// `probe_agent`: for the probe target (`usize::MAX`), the agent to run it on.
fn run_target(m: &Management, target: usize, slice: usize, signatures: &[Vec<u8>], probe_agent: usize) -> Record {
    let mut rec = Record { target, slice, ..Record::default() };
    let backend = match backend_of(&m.backend_name) {
        Ok(b) => b,
        Err(e) => {
            rec.failure = Some((Phase::Connect, e.to_string()));
            return rec;
        }
    };
    let (name, agent) = if target == usize::MAX {
        (PROBE.to_string(), probe_agent % m.agents.len().max(1))
    } else {
        (target_name(target), target % m.agents.len())
    };
    let mut session: Option<Box<dyn Session>> = None;
    let mut target_key: Option<Box<dyn Verifier>> = None;
    for phase in &m.spec.phases {
        let start = clock::monotonic_ns();
        let outcome = match phase {
            Phase::Connect => connect(m, agent, &name, target).map(|(s, v)| {
                rec.negotiated = Some(s.negotiated());
                session = Some(s);
                target_key = Some(v);
            }),
            Phase::Push => push(m, session.as_deref_mut().expect("connected"), &*backend, target, signatures),
            Phase::Checks => checks(m, session.as_deref_mut().expect("connected")).map(|n| rec.mismatches = n),
            Phase::Report => report(session.as_deref_mut().expect("connected"), target_key.as_deref_mut().expect("a key"), &name),
        };
        rec.phases.push((start, clock::monotonic_ns()));
        if let Err(why) = outcome {
            rec.failure = Some((*phase, why));
            return rec;
        }
    }
    if let Some(mut s) = session {
        let _ = s.write_all(&[op::QUIT]);
        s.close();
    }
    rec
}

/// `connect`: TCP, the mutual-TLS handshake with the target named `name`, and a verifier of the
/// key its certificate carries. The index goes out with the first request (no round trip).
fn connect(m: &Management, agent: usize, name: &str, target: usize) -> Result<(Box<dyn Session>, Box<dyn Verifier>), String> {
    let addr = m.agents[agent];
    let stream = TcpStream::connect(addr).map_err(|e| format!("connecting to agent {agent} at {addr}: {e}"))?;
    let _ = stream.set_nodelay(true);
    stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(|e| format!("read timeout: {e}"))?;
    let mut s = m.client.connect_to(Box::new(stream), name)?;
    if !s.handshake().map_err(|e| format!("handshake: {e}"))? {
        return Err("handshake would block on a blocking socket".into());
    }
    let cert = s.peer_certificate().ok_or("the target presented no certificate")?;
    let backend = backend_of(&m.backend_name).map_err(|e| e.to_string())?;
    let verifier = backend.verifier(m.spec.sig_alg(), &public_of_cert(&cert)?).map_err(|e| e.to_string())?;
    let mut head = vec![op::TARGET];
    head.extend_from_slice(&(if target == usize::MAX { u32::MAX } else { target as u32 }).to_be_bytes());
    s.write_all(&head).map_err(|e| format!("sending the target's index: {e}"))?;
    Ok((s, verifier))
}

/// `push`: every item with its authenticator, then the target's answer.
fn push(m: &Management, s: &mut dyn Session, backend: &dyn Backend, target: usize, signatures: &[Vec<u8>]) -> Result<(), String> {
    let mut mac = match m.spec.auth {
        Auth::Hmac => Some(backend.hmac(m.spec.digest, &hmac_key(target)).map_err(|e| e.to_string())?),
        Auth::Sign => None,
    };
    let mut out = vec![op::PUSH];
    put_u32(&mut out, m.items.len());
    let mut tag = Vec::new();
    for (j, data) in m.items.iter().enumerate() {
        let auth: &[u8] = match &mut mac {
            Some(mac) => {
                mac.mac(data, &mut tag).map_err(|e| e.to_string())?;
                &tag
            }
            None => signatures.get(j).ok_or("the items were not staged (no signature)")?,
        };
        put_u32(&mut out, data.len());
        out.extend_from_slice(data);
        put_u32(&mut out, auth.len());
        out.extend_from_slice(auth);
        if out.len() >= CHUNK * 4 {
            send(s, &out)?;
            out.clear();
        }
    }
    send(s, &out)?;
    match recv(s, 1)?[0] {
        op::OK => Ok(()),
        op::ERROR => Err(format!("the target refused the push: {}", String::from_utf8_lossy(&recv_field(s, 4096)?))),
        other => Err(format!("unexpected answer {:?} to the push", other as char)),
    }
}

/// `checks`: ask for every file's digest and compare with the baseline; returns the mismatches.
fn checks(m: &Management, s: &mut dyn Session) -> Result<usize, String> {
    let mut out = vec![op::CHECKS];
    put_u32(&mut out, m.baseline.len());
    send(s, &out)?;
    let len = m.spec.digest.output_len();
    let answer = recv(s, len * m.baseline.len())?;
    Ok(answer.chunks(len).zip(&m.baseline).filter(|(got, want)| got != &want.as_slice()).count())
}

/// `report`: ask for the target's signed result and verify it with its certificate's key.
fn report(s: &mut dyn Session, key: &mut dyn Verifier, name: &str) -> Result<(), String> {
    send(s, &[op::REPORT])?;
    let text = recv_field(s, 64 << 10)?;
    let sig = recv_field(s, 4096)?;
    if !key.verify(&text, &sig).map_err(|e| e.to_string())? {
        return Err("the target's signature on its report does not verify".into());
    }
    if !String::from_utf8_lossy(&text).starts_with(&format!("{name}:")) {
        return Err(format!("the report is not {name}'s"));
    }
    Ok(())
}

/// The `--fleet-slice` process: read the configuration line, prepare (and run the probe target
/// when asked), answer `ready`, wait for `go` (the job's start and the staged signatures), run
/// this slice's targets with at most `cap` in flight, answer `done` with the records, this
/// process's CPU over the job, its CPU timeline, peak RSS and most descriptors open. Returns the
/// exit status.
pub fn slice_main() -> i32 {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets this process's parent-death signal: a slice
    // whose coordinator was killed goes too.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let sampler = Sampler::start();
    let sampler_t0 = clock::monotonic_ns();
    let fds = FdWatch::start();
    let mut link = ParentLink::open();
    let Some(config) = link.message() else { return 1 };
    let pinned = config["pin_cpu"].as_u64().and_then(|c| pin_to(c as usize));
    let m = match management(&config) {
        Ok(m) => m,
        Err(e) => {
            link.say(json!({"type": "error", "message": e}));
            return 2;
        }
    };
    let slice = config["slice"].as_u64().unwrap_or(0) as usize;
    let mut ready = json!({"type": "ready", "pinned_cpu": pinned});
    if config["probe"].as_bool() == Some(true) {
        // The probe on every agent: correctness before the job, and each process's one-time
        // start-up (rustls on AWS-LC: ~90 ms at its first handshake) out of the job's time.
        let signatures = decode_list(&config["probe_signatures"]);
        let recs: Vec<Record> = (0..m.agents.len()).map(|a| run_target(&m, usize::MAX, slice, &signatures, a)).collect();
        let failed = recs.iter().enumerate().find_map(|(a, r)| {
            r.failure.as_ref().map(|(p, why)| format!("on agent {a}: {}: {why}", p.name()))
        });
        ready["probe"] = json!({
            "negotiated": recs.first().and_then(|r| r.negotiated.as_ref()).map(|n| serde_json::to_value(n).unwrap_or_default()),
            "failure": failed,
            "mismatches": recs.iter().map(|r| r.mismatches).sum::<usize>(),
        });
    }
    link.say(ready);
    let Some(go) = link.message() else { return 1 };
    let signatures = decode_list(&go["signatures"]);
    let cpu0 = process_cpu_ns();
    let mine: Vec<usize> = (slice..m.targets).step_by(m.spec.slices).collect();
    let next = AtomicUsize::new(0);
    let records = Mutex::new(Vec::with_capacity(mine.len()));
    std::thread::scope(|scope| {
        for _ in 0..m.spec.cap.min(mine.len()) {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&target) = mine.get(k) else { break };
                let rec = run_target(&m, target, slice, &signatures, 0);
                records.lock().unwrap_or_else(|e| e.into_inner()).push(rec);
            });
        }
    });
    let cpu1 = process_cpu_ns();
    let records = records.into_inner().unwrap_or_else(|e| e.into_inner());
    link.say(json!({
        "type": "done",
        "records": records.iter().map(Record::to_json).collect::<Vec<_>>(),
        "cpu_ns": (cpu1.0 + cpu1.1).saturating_sub(cpu0.0 + cpu0.1),
        "timeline": serde_json::to_value(sampler.stop()).unwrap_or_default(),
        "timeline_start_ns": sampler_t0,
        "peak_rss_bytes": sampler::peak_rss_bytes(),
        "max_fds": fds.stop(),
        "pid": std::process::id(),
        "pinned_cpu": pinned,
    }));
    0
}

fn decode_list(v: &Value) -> Vec<Vec<u8>> {
    v.as_array()
        .map(|a| a.iter().map(|s| base64::engine::general_purpose::STANDARD.decode(s.as_str().unwrap_or("")).unwrap_or_default()).collect())
        .unwrap_or_default()
}

/// A slice's [`Management`] from its configuration line.
fn management(config: &Value) -> Result<Management, String> {
    let params = config["params"].as_object().cloned().unwrap_or_default();
    let backend = config["backend"].as_str().unwrap_or("").to_string();
    let case = parse_with(&FleetJob, &backend, &params)?;
    let spec: Spec = case.request::<Spec>().cloned().ok_or("not a fleet-job")?;
    let targets = targets_of(case.common.load)?;
    let b64 = |k: &str| base64::engine::general_purpose::STANDARD.decode(config[k].as_str().unwrap_or("")).map_err(|e| format!("{k}: {e}"));
    let id = Identity { cert_chain_der: vec![b64("management_der")?], key_pkcs8_der: tls::pool_key(spec.p.cert, MANAGEMENT_KEY).to_vec(),
                        ca_der: b64("ca_der")?, kind: spec.p.cert };
    let client = tls::mutual_client(spec.stack, &id, &spec.p).map_err(|e| e.to_string())?;
    let agents = config["agents"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str()?.parse().ok()).collect())
        .unwrap_or_default();
    let baseline = decode_list(&config["baseline"]);
    let items = (0..spec.items).map(|j| item(j, spec.item_bytes)).collect();
    Ok(Management { spec, targets, backend_name: backend, client, agents, baseline, items })
}

/// A running slice process; killed when dropped.
struct SliceProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    index: usize,
}

impl SliceProcess {
    fn start(config: &Value, index: usize) -> Result<SliceProcess, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the worker binary: {e}"))?;
        let mut child = Command::new(exe)
            .arg(SLICE_FLAG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start slice {index}: {e}"))?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        writeln!(stdin, "{config}").and_then(|_| stdin.flush()).map_err(|e| format!("slice {index}: {e}"))?;
        Ok(SliceProcess { child, stdin, stdout, index })
    }

    /// The next line the slice says, parsed; `Err` when it exited or said `error`.
    fn answer(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line).unwrap_or(0) == 0 {
            return Err(format!("slice {} exited (its stderr is above)", self.index));
        }
        let v: Value = serde_json::from_str(&line).map_err(|e| format!("slice {} said '{}': {e}", self.index, line.trim()))?;
        if v["type"] == "error" {
            return Err(format!("slice {}: {}", self.index, v["message"].as_str().unwrap_or("")));
        }
        Ok(v)
    }

    fn tell(&mut self, v: &Value) -> Result<(), String> {
        writeln!(self.stdin, "{v}").and_then(|_| self.stdin.flush()).map_err(|e| format!("slice {} gone: {e}", self.index))
    }
}

impl Drop for SliceProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------------------ the coordinator

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

fn invalid(why: String, validation: &Validation) -> Finish {
    Finish::Invalid(why, Some(validation.clone()))
}

fn from_backend(e: BackendError, what: &str) -> Finish {
    match e {
        BackendError::Unsupported(r) => Finish::Unsupported(r, None),
        BackendError::Failed(r) => Finish::Invalid(format!("{what}: {r}"), None),
    }
}

/// A check's verdict: `pass: …` or `fail: …`, and the failure (`what` in front) when it failed.
fn verdict(ok: bool, pass: String, fail: String, what: &str, failure: &mut Option<String>) -> String {
    if ok {
        return format!("pass: {pass}");
    }
    let status = format!("fail: {fail}");
    failure.get_or_insert(format!("{what}{status}"));
    status
}

/// The checks of the primitives against a second library, before anything is timed: the
/// validation (`digests`, `hmac`, `signatures`, as the job uses them) and the first failure.
fn validate_primitives(backend: &dyn Backend, backend_name: &str, spec: &Spec, baseline: &[Vec<u8>]) -> Result<(Validation, Option<String>), BackendError> {
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
fn signature_check(backend: &dyn Backend, backend_name: &str, spec: &Spec) -> Result<String, BackendError> {
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
            if let Some(why) = super::tls_handshake::fips_problem(spec.stack, "agent", s.fips()) {
                return Err(why);
            }
        }
        Err(e) => unsupported(e)?,
    }
    match tls::mutual_client(spec.stack, &ca.identity(mgmt, MANAGEMENT_KEY), &spec.p) {
        Ok(c) => match super::tls_handshake::fips_problem(spec.stack, "management", c.fips()) {
            Some(why) => Err(why),
            None => Ok(()),
        },
        Err(e) => unsupported(e),
    }
}

/// What the coordinator made before the job, untimed: the job's PKI (a CA over pool key 0,
/// the management server's client certificate), the baseline digests (RustCrypto's), the
/// validation of the primitives, and the items to push with the management key that signs them.
struct Prepared {
    ca: Authority,
    mgmt_der: Vec<u8>,
    baseline: Vec<Vec<u8>>,
    validation: Validation,
    items: Vec<Vec<u8>>,
    mgmt_key: KeyMaterial,
}

impl Prepared {
    fn new(case: &WorkloadCase, spec: &Spec, backend: &dyn Backend) -> Result<Prepared, Finish> {
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
    fn stage(&self, spec: &Spec, backend: &dyn Backend) -> Result<Vec<Vec<u8>>, BackendError> {
        if self.items.is_empty() {
            return Ok(vec![]);
        }
        let mut signer = backend.signer(spec.sig_alg(), &self.mgmt_key.pair())?;
        self.items.iter().map(|data| signer.sign(data)).collect()
    }
}

/// The management server's baseline: RustCrypto's digests of the check files.
fn baseline(spec: &Spec) -> Result<Vec<Vec<u8>>, BackendError> {
    let mut d = backends::rustcrypto::RustCrypto.digest(spec.digest)?;
    (0..spec.checks)
        .map(|j| {
            let mut out = Vec::new();
            d.digest(&file(j, spec.file_bytes), &mut out).map(|_| out)
        })
        .collect()
}

fn b64(d: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(d)
}

/// Start the agents: each issues its targets' certificates under the CA and listens.
fn start_agents(case: &WorkloadCase, spec: &Spec, targets: usize, ca_der: &[u8], cpus: &[Option<usize>]) -> Result<Vec<ServerProcess>, Finish> {
    (0..spec.agents)
        .map(|a| {
            let mut params = case.raw.clone();
            if case.common.port != 0 {
                params.insert("port".into(), (case.common.port as u64 + a as u64).into());
            }
            let side = json!({"agent": a, "targets": targets, "ca_der": b64(ca_der)});
            ServerProcess::start_side(NAME, &case.backend_name, &params, spec.slices * spec.cap + 1, cpus[a], side).map_err(|e| match e.code.as_str() {
                "unsupported" => Finish::Unsupported(e.message, e.validation),
                _ => Finish::Invalid(format!("agent {a}: {}", e.message), e.validation),
            })
        })
        .collect()
}

/// Start the slices (each runs the probe on every agent first) and wait until each is ready:
/// the slices and their `ready` answers.
fn start_slices(case: &WorkloadCase, spec: &Spec, job: &Prepared, agents: &[String], cpus: &[Option<usize>],
                probe_signatures: &[Vec<u8>]) -> Result<(Vec<SliceProcess>, Vec<Value>), Finish> {
    let mut slices = Vec::with_capacity(spec.slices);
    for j in 0..spec.slices {
        let config = json!({
            "slice": j, "params": case.raw, "backend": case.backend_name, "ca_der": b64(&job.ca.der()),
            "management_der": b64(&job.mgmt_der), "agents": agents, "pin_cpu": cpus[j],
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
fn check_probe(readies: &[Value], spec: &Spec, validation: &mut Validation) -> Result<Negotiated, Finish> {
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
struct Job {
    t0: u64,
    staged: u64,
    dones: Vec<Value>,
    ticks: CpuTicks,
    coordinator_cpu: u64,
    agent_before: Vec<ServerStats>,
    agent_after: Vec<ServerStats>,
    agent_pids: Vec<Option<u32>>,
}

/// Run the job: the agents' counters read, its start, the job-level stage, then every slice
/// at once; wait for each, then stop the agents.
fn run_job(spec: &Spec, backend: &dyn Backend, job: &Prepared, mut agents: Vec<ServerProcess>, slices: &mut [SliceProcess]) -> Result<Job, Finish> {
    let agent_before = agents.iter_mut().map(|a| a.stats()).collect::<Result<Vec<_>, _>>();
    let agent_before = agent_before.map_err(|e| Finish::Invalid(format!("agent: {e}"), None))?;
    let ticks0 = CpuTicks::now();
    let cpu0 = process_cpu_ns();
    let t0 = clock::monotonic_ns();
    let signatures = job.stage(spec, backend).map_err(|e| from_backend(e, "staging the items"))?;
    let staged = clock::monotonic_ns();
    let go = json!({"t0_ns": t0, "signatures": signatures.iter().map(|d| b64(d)).collect::<Vec<_>>()});
    for s in slices.iter_mut() {
        s.tell(&go).map_err(|e| Finish::Invalid(e, None))?;
    }
    let dones = slices.iter_mut().map(|s| s.answer()).collect::<Result<Vec<_>, _>>().map_err(|e| Finish::Invalid(e, None))?;
    let cpu1 = process_cpu_ns();
    let ticks = CpuTicks::now().since(ticks0);
    let agent_pids = agents.iter().map(|a| a.pid()).collect();
    let agent_after = agents.into_iter().map(|a| a.stop()).collect::<Result<Vec<_>, _>>();
    let agent_after = agent_after.map_err(|e| Finish::Invalid(format!("agent: {e}"), None))?;
    let coordinator_cpu = (cpu1.0 + cpu1.1).saturating_sub(cpu0.0 + cpu0.1);
    Ok(Job { t0, staged, dones, ticks, coordinator_cpu, agent_before, agent_after, agent_pids })
}

impl Job {
    /// Every target's record, by target.
    fn records(&self) -> Vec<Record> {
        let mut records: Vec<Record> = self
            .dones
            .iter()
            .enumerate()
            .flat_map(|(j, d)| d["records"].as_array().cloned().unwrap_or_default().into_iter().map(move |r| Record::from_json(&r, j)))
            .collect();
        records.sort_by_key(|r| r.target);
        records
    }

    /// The job as a measurement: `ops` the targets completed, `wall_ns` from its start to its
    /// last target's end, the histogram each completed target's time, `cpu_ns` the coordinator's
    /// then each slice's.
    fn measurement(&self, records: &[Record]) -> Measurement {
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
        cpu_ns.extend(self.dones.iter().map(|d| d["cpu_ns"].as_u64().unwrap_or(0)));
        Measurement {
            ops: completed,
            batch: 1,
            timing: Timing::Individual,
            wall_ns: end.saturating_sub(self.t0).max(1),
            cpu_ns,
            tsc_cycles: None,
            ticks: self.ticks.clone(),
            sample_min_ns: if completed == 0 { 0 } else { histogram.min() },
            sample_max_ns: histogram.max(),
            histogram,
            samples: completed,
        }
    }

    /// µs from the job's start to `ns`.
    fn us(&self, ns: u64) -> i64 {
        ((ns as i128 - self.t0 as i128) as f64 / 1e3).round() as i64
    }

    /// ms from the job's start to `start_ns` (0 when unknown).
    fn offset_ms(&self, start_ns: Option<u64>) -> f64 {
        start_ns.map(|s| (s as i128 - self.t0 as i128) as f64 / 1e6).unwrap_or(0.0)
    }

    /// The records as a table: one row per target, its phases' times in µs since the start.
    fn table(&self, spec: &Spec, records: &[Record]) -> Records {
        let rows = records
            .iter()
            .map(|r| {
                let status = if r.failure.is_none() { "ok" } else { "failed" };
                let mut row = vec![Some(Cell::Number(r.target as i64)), Some(Cell::Number(r.slice as i64)), Some(Cell::Text(status.into()))];
                for k in 0..spec.phases.len() {
                    let (a, b) = r.phases.get(k).map_or((None, None), |(a, b)| (Some(self.us(*a)), Some(self.us(*b))));
                    row.extend([a.map(Cell::Number), b.map(Cell::Number)]);
                }
                row
            })
            .collect();
        let mut columns = vec!["target".to_string(), "slice".to_string(), "status".to_string()];
        for p in &spec.phases {
            columns.push(format!("{}_start_us", p.name()));
            columns.push(format!("{}_end_us", p.name()));
        }
        Records { columns, rows }
    }

    /// Every process of the job (the coordinator, each slice, each agent) with what the
    /// coordinator measured of it; `coordinator` is its own (timeline, start, descriptors).
    fn processes(&self, coordinator: (Timeline, u64, usize), agent_cpus: &[Option<usize>]) -> Vec<JobProcess> {
        let (timeline, start_ns, max_fds) = coordinator;
        let mut out = vec![JobProcess {
            role: "coordinator".into(), index: 0, pid: Some(std::process::id()), pinned_cpu: None, cpu_ns: self.coordinator_cpu,
            peak_rss_bytes: sampler::peak_rss_bytes(), max_fds: Some(max_fds as u64), timeline_offset_ms: self.offset_ms(Some(start_ns)),
            timeline: Some(timeline),
        }];
        out.extend(self.dones.iter().enumerate().map(|(j, d)| JobProcess {
            role: "slice".into(), index: j, pid: d["pid"].as_u64().map(|p| p as u32), pinned_cpu: d["pinned_cpu"].as_u64().map(|c| c as usize),
            cpu_ns: d["cpu_ns"].as_u64().unwrap_or(0), peak_rss_bytes: d["peak_rss_bytes"].as_u64(), max_fds: d["max_fds"].as_u64(),
            timeline_offset_ms: self.offset_ms(d["timeline_start_ns"].as_u64()), timeline: serde_json::from_value(d["timeline"].clone()).unwrap_or_default(),
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
    fn server(&self, agents: &[String]) -> ServerResult {
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
fn fleet_fields(spec: &Spec, targets: usize, job: &Job, records: &[Record], setup_ms: f64, processes: Vec<JobProcess>) -> FleetFields {
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
        file_bytes: spec.file_bytes, phases: names(&spec.phases),
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
        key_pool: format!("every identity's key is one of the {} fixed keys of its kind compiled into the worker (tls/keys): the CA's, the management server's, and {} the targets take in turn; every certificate is made for this job", tls::POOL_SIZE, tls::POOL_SIZE - TARGET_KEYS),
    }
}

/// Run a job: see the module's documentation. The result's fields beyond a primitive's are in
/// `fleet` (docs/worker-protocol.md, "fleet-job").
pub fn run(case: &WorkloadCase, spec: &Spec, backend: &dyn Backend) -> Finish {
    run_checked(case, spec, backend).unwrap_or_else(|f| f)
}

fn run_checked(case: &WorkloadCase, spec: &Spec, backend: &dyn Backend) -> Result<Finish, Finish> {
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
    let (slice_cpus, agent_cpus, placement_note) = placement(spec.slices, spec.agents);
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
            client_timeline: ran.dones.first().and_then(|d| serde_json::from_value(d["timeline"].clone()).ok()),
            placement: placement_note,
            fleet,
        })),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn kinds_set_phases_and_sizes_and_the_study_may_override_them() {
        let s = parse("aws-lc", &params(json!({"job": "appconfig"}))).unwrap();
        assert_eq!(s.phases, vec![Phase::Connect, Phase::Push, Phase::Report]);
        assert_eq!((s.items, s.item_bytes, s.auth), (100, 512, Auth::Hmac));
        let s = parse("aws-lc", &params(json!({}))).unwrap();
        assert_eq!(s.kind.name, "audit");
        assert_eq!((s.checks, s.cap, s.slices, s.agents), (192, 20, 1, 2));
        assert_eq!(s.sign_digest, s.digest);
        let s = parse("openssl", &params(json!({"job": "remediate", "item_bytes": 4096, "phases": "connect,push,checks,report", "checks": 3, "digest": "sha1", "sign_digest": "sha256"}))).unwrap();
        assert_eq!((s.items, s.item_bytes, s.auth, s.checks), (1, 4096, Auth::Sign, 3));
        assert_eq!((s.digest, s.sign_digest), (DigestAlg::Sha1, DigestAlg::Sha256));
    }

    #[test]
    fn bad_params_get_one_line_each() {
        let cases = [
            (json!({"job": "deploy"}), "unknown job 'deploy'"),
            (json!({"phases": "push,report"}), "must start with connect"),
            (json!({"phases": "connect,connect"}), "lists a phase twice"),
            (json!({"phases": "connect,dance"}), "unknown phase 'dance'"),
            (json!({"cap": 0}), "cap must be"),
            (json!({"slices": 65}), "slices must be"),
            (json!({"inject_close": "a,b"}), "inject_close must list target numbers"),
            (json!({"job": "appconfig", "items": 0}), "pushes nothing"),
            (json!({"items": 1000, "item_bytes": 1048576, "phases": "connect,push"}), "at most"),
            (json!({"sign_digest": "md5"}), "unknown sign_digest 'md5'"),
        ];
        for (p, want) in cases {
            let e = parse("aws-lc", &params(p.clone())).err().unwrap_or_default();
            assert!(e.contains(want), "{p}: {e}");
            assert!(!e.contains('\n'));
        }
        assert!(parse("rustcrypto", &Map::new()).unwrap_err().contains("no TLS implementation"));
    }

    #[test]
    fn placement_keeps_agents_off_the_slices_cpus_where_it_can() {
        let n = allowed_cpus().len();
        let (s, a, note) = placement(1, 2);
        if n >= 2 {
            assert!(s[0].is_some() && a.iter().all(|c| c.is_some() && *c != s[0]), "{note}");
        } else {
            assert!(note.starts_with("not pinned"), "{note}");
        }
        let (s, a, note) = placement(n, 2);
        assert!(s.iter().chain(&a).all(Option::is_none) && note.starts_with("not pinned"), "{note}");
    }

    #[test]
    fn content_is_deterministic_and_differs_per_seed() {
        assert_eq!(file(3, 100), file(3, 100));
        assert_ne!(file(3, 100), file(4, 100));
        assert_eq!(file(3, 4096).len(), 4096);
        assert_ne!(hmac_key(1), hmac_key(2));
        assert_eq!(target_name(42), "t00042.fleet.test");
    }

    /// The check files' digests by every backend equal RustCrypto's (the baseline), and a
    /// tampered file is detected: what the management side compares.
    #[test]
    fn file_digests_match_the_second_library_and_a_tampered_file_does_not() {
        let reference = backends::rustcrypto::RustCrypto;
        for alg in [DigestAlg::Sha1, DigestAlg::Sha256] {
            let mut r = reference.digest(alg).unwrap();
            for name in ["openssl", "aws-lc", "ring"] {
                let b = backends::by_name(name).unwrap();
                let Ok(mut d) = b.digest(alg) else { continue };
                for j in 0..4 {
                    let (mut a, mut want) = (Vec::new(), Vec::new());
                    d.digest(&file(j, 4096), &mut a).unwrap();
                    r.digest(&file(j, 4096), &mut want).unwrap();
                    assert_eq!(a, want, "{name} {alg:?} file {j}");
                }
                let mut f = file(0, 4096);
                f[0] ^= 1;
                let (mut a, mut want) = (Vec::new(), Vec::new());
                d.digest(&f, &mut a).unwrap();
                r.digest(&file(0, 4096), &mut want).unwrap();
                assert_ne!(a, want);
            }
        }
    }

    /// Every key kind's pool keys sign with every backend that has the scheme, and the public
    /// key taken from a certificate verifies it (what `report` does).
    #[test]
    fn pool_keys_sign_and_certificates_carry_their_public_keys() {
        for kind in [CertKind::Rsa2048, CertKind::EcdsaP256] {
            let ca = Authority::new(kind, CA_KEY, "test CA").unwrap();
            let leaf = ca.issue(target_key(7), &target_name(7), Usage::Server).unwrap();
            let public = public_of_cert(&leaf).unwrap();
            let m = key_material(kind, target_key(7)).unwrap();
            assert_eq!(public, m.public);
            let alg = sig_alg(kind, DigestAlg::Sha256);
            let b = backends::by_name("aws-lc").unwrap();
            let sig = b.signer(alg, &m.pair()).unwrap().sign(b"report").unwrap();
            assert!(b.verifier(alg, &public).unwrap().verify(b"report", &sig).unwrap());
            assert!(Authority::from_der(kind, CA_KEY, &ca.der()).is_ok());
            assert!(Authority::from_der(kind, MANAGEMENT_KEY, &ca.der()).is_err());
        }
    }

    /// Mutual TLS over TCP between every pair of stacks: the target named by SNI is the one
    /// presented, the client certificate is required, and a certificate from another CA fails.
    #[test]
    fn mutual_tls_picks_the_identity_by_name_and_requires_the_client_certificate() {
        let p = TlsParams { version: TlsVersion::Tls13, cert: CertKind::EcdsaP256, group: Group::P256, suite: Suite::Aes128Gcm,
                            resume: false, record_bytes: None, fallback_group: None };
        let ca = Authority::new(p.cert, CA_KEY, "test CA").unwrap();
        let rogue = Authority::new(p.cert, tls::POOL_SIZE - 1, "rogue CA").unwrap();
        let ids: Vec<_> = (0..3)
            .map(|i| {
                let issuer = if i == 2 { &rogue } else { &ca };
                NamedIdentity { name: target_name(i), chain_der: vec![issuer.issue(target_key(i), &target_name(i), Usage::Server).unwrap()], key_index: target_key(i) }
            })
            .collect();
        let mgmt = ca.identity(ca.issue(MANAGEMENT_KEY, MANAGEMENT, Usage::Client).unwrap(), MANAGEMENT_KEY);
        let stranger = rogue.identity(rogue.issue(MANAGEMENT_KEY, MANAGEMENT, Usage::Client).unwrap(), MANAGEMENT_KEY);
        for ss in Stack::ALL {
            for cs in Stack::ALL {
                let server = tls::mutual_server(*ss, &ca.der(), &ids, &p).unwrap();
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let addr = listener.local_addr().unwrap();
                let srv = server.clone();
                let h = std::thread::spawn(move || {
                    (0..3)
                        .map(|_| {
                            let (stream, _) = listener.accept().unwrap();
                            let mut s = srv.accept(Box::new(stream)).unwrap();
                            let ok = s.handshake().and_then(|_| recv(&mut *s, 1)).is_ok();
                            (ok, s.peer_certificate().is_some())
                        })
                        .collect::<Vec<_>>()
                });
                let attempt = |id: &Identity, name: &str| -> Result<Vec<u8>, String> {
                    let client = tls::mutual_client(*cs, id, &p).unwrap();
                    let stream = TcpStream::connect(addr).unwrap();
                    let mut s = client.connect_to(Box::new(stream), name)?;
                    s.handshake()?;
                    s.write_all(b"x")?;
                    let cert = s.peer_certificate().ok_or("no certificate")?;
                    // TLS 1.3: the server's verdict on the client certificate arrives after the
                    // client's handshake completed; reading surfaces it.
                    let mut b = [0u8; 1];
                    let _ = s.read(&mut b);
                    Ok(cert)
                };
                let what = format!("{cs:?} client, {ss:?} server");
                let cert = attempt(&mgmt, &target_name(1)).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(cert, ids[1].chain_der[0], "{what}: SNI chose another identity");
                let bad = attempt(&mgmt, &target_name(2));
                assert!(bad.is_err(), "{what}: a certificate from another CA was accepted");
                let _ = attempt(&stranger, &target_name(0));
                let seen = h.join().unwrap();
                assert_eq!(seen[0], (true, true), "{what}");
                assert!(!seen[2].0, "{what}: a client certificate from another CA was accepted");
            }
        }
    }
}

