//! `fleet-job`'s request: its parameters, the job kinds and phases, checked into a [`Spec`].

use crate::workloads::base::{choice, number, object, text};
use crate::workloads::tls::{self, CertKind, Group, Stack, Suite, TlsParams, TlsVersion};
use crate::measure::load::Load;
use super::latency::Latency;
use crate::ops::{DigestAlg, RsaPadding, SigAlg};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::time::Duration;

pub const NAME: &str = "fleet-job";
/// The command-line flag that makes a worker one slice of a job (started by the coordinator).
pub const SLICE_FLAG: &str = "--fleet-slice";
/// This workload's own parameters (`hello`'s `op_params`).
pub const PARAMS: [&str; 23] = [
    "job", "phases", "cert", "digest", "sign_digest", "group", "suite", "cap", "slices", "agents", "items",
    "item_bytes", "auth", "checks", "file_bytes", "rtt_ms", "target_work_ms", "manager_cpu_ms", "inject_close",
    "inject_bad_cert", "inject_tamper", SLICE_INDEX, START_AT,
];
/// The parameter that makes a run one slice's sub-job of a job spread over machines: slice
/// `slice_index` of `slices`, its targets `i` with `i mod slices = slice_index` (numbered as in
/// the whole job), its own agents beside it (docs/worker-protocol.md, "Slices on several
/// machines").
pub const SLICE_INDEX: &str = "slice_index";
/// The wall-clock instant (ns since the Unix epoch, `CLOCK_REALTIME`) at which a sub-job starts
/// its job, after its setup and checks: every sub-job of one job is given the same one.
pub const START_AT: &str = "start_at_unix_ns";
/// The command-line flag that merges the sub-jobs' results into one job's result.
pub const MERGE_FLAG: &str = "--merge-jobs";
/// A sub-job whose setup ends more than this after its start instant is not run (`invalid`):
/// its slice would start after the others, and the job's time would measure the wait.
pub const MAX_START_LATE_NS: u64 = 10_000_000;
/// Most targets one slice may have in flight (each holds a descriptor in the slice and one in
/// an agent).
pub const MAX_CAP: u64 = 1000;
/// Most slices, and most agents, one job may start.
pub const MAX_PROCESSES: u64 = 64;
/// Most bytes one target may be pushed (items × item_bytes): 256 MiB.
pub const MAX_PUSH_BYTES: u64 = 256 << 20;
/// A connection that waits this long for its peer fails (its target is recorded failed).
pub(super) const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Application writes are made in chunks of this many bytes (rustls buffers at most 64 KiB).
pub(super) const CHUNK: usize = 16 << 10;
/// The name of the probe target (validation; not counted).
pub(super) const PROBE: &str = "probe.fleet.test";
/// The management server's certificate name.
pub(super) const MANAGEMENT: &str = "management.fleet.test";
/// Pool keys: the CA's, the management server's, a rogue CA's (`inject_bad_cert`), and the
/// first of the targets' (target `i` uses `TARGET_KEYS + i mod (POOL_SIZE - TARGET_KEYS)`).
pub(super) const CA_KEY: usize = 0;
pub(super) const MANAGEMENT_KEY: usize = 1;
pub(super) const TARGET_KEYS: usize = 2;

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
    /// Time per target that is not cryptography (round trips, target work, management CPU).
    pub latency: Latency,
    /// Test-only: targets whose agent closes the connection at the first request after the
    /// handshake (mid-phase), whose certificate comes from another CA, and one of whose files
    /// differs from the baseline.
    pub inject_close: BTreeSet<usize>,
    pub inject_bad_cert: BTreeSet<usize>,
    pub inject_tamper: BTreeSet<usize>,
    /// A sub-job ([`SLICE_INDEX`]): the one slice it runs; `None`: the whole job, every slice.
    pub only_slice: Option<usize>,
    /// A sub-job's start instant ([`START_AT`], ns since the Unix epoch).
    pub start_at_unix_ns: Option<u64>,
}

impl Spec {
    /// The slices this run starts (global indices): the one of a sub-job, else `0..slices`.
    pub fn slice_ids(&self) -> Vec<usize> {
        self.only_slice.map_or_else(|| (0..self.slices).collect(), |j| vec![j])
    }

    /// Whether target `i` is in this run's share (every target, unless a sub-job's slice).
    pub fn runs_target(&self, i: usize) -> bool {
        self.only_slice.is_none_or(|j| i % self.slices == j)
    }

    /// Target `target`'s waits per phase and management CPU (the latency model's draws).
    pub(super) fn times_of(&self, target: usize) -> super::latency::TargetTimes {
        self.latency.for_target(target, &self.phases, self.items, self.checks)
    }

    /// Whether the job pushes items with signatures made in `stage`.
    pub(super) fn stages(&self) -> bool {
        self.phases.contains(&Phase::Push) && self.auth == Auth::Sign && self.items > 0
    }

    /// The signature scheme of the job's signatures (items, reports): the certificate's key with
    /// `sign_digest` (RSA: PKCS #1 v1.5).
    pub(super) fn sig_alg(&self) -> SigAlg {
        sig_alg(self.p.cert, self.sign_digest)
    }
}

pub(super) fn sig_alg(cert: CertKind, digest: DigestAlg) -> SigAlg {
    match cert {
        CertKind::Rsa2048 => SigAlg::Rsa { bits: 2048, digest, padding: RsaPadding::Pkcs1 },
        CertKind::Rsa4096 => SigAlg::Rsa { bits: 4096, digest, padding: RsaPadding::Pkcs1 },
        CertKind::EcdsaP256 => SigAlg::EcdsaP256 { digest },
        CertKind::Ed25519 => SigAlg::Ed25519,
    }
}

/// A list of target indices, `"3,17"` (test-only parameters).
pub(super) fn targets_list(params: &Map<String, Value>, key: &str) -> Result<BTreeSet<usize>, String> {
    let raw = text(params, key, "")?;
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| format!("{key} must list target numbers, e.g. \"3,17\"; got '{raw}'")))
        .collect()
}

pub(super) fn digest_param(params: &Map<String, Value>, key: &str, default: &str) -> Result<DigestAlg, String> {
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
    let mut spec = Spec {
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
        latency: Latency::parse(params)?,
        inject_close: targets_list(params, "inject_close")?,
        inject_bad_cert: targets_list(params, "inject_bad_cert")?,
        inject_tamper: targets_list(params, "inject_tamper")?,
        only_slice: None,
        start_at_unix_ns: None,
    };
    let present = |k: &str| params.get(k).is_some_and(|v| !v.is_null());
    if present(SLICE_INDEX) {
        let j = number(params, SLICE_INDEX, 0, 0..=MAX_PROCESSES - 1)? as usize;
        if j >= spec.slices {
            return Err(format!("{SLICE_INDEX} = {j} names no slice of slices = {}; give 0..{}", spec.slices, spec.slices - 1));
        }
        spec.only_slice = Some(j);
    }
    if present(START_AT) {
        if spec.only_slice.is_none() {
            return Err(format!("{START_AT} starts a sub-job at an instant; it needs {SLICE_INDEX} too"));
        }
        spec.start_at_unix_ns = Some(number(params, START_AT, 0, 1..=u64::MAX)?);
    }
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
pub(super) fn fips_refusal(backend: &str, spec: &Spec) -> Option<String> {
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
pub(super) fn target_key(i: usize) -> usize {
    TARGET_KEYS + i % (tls::POOL_SIZE - TARGET_KEYS)
}
