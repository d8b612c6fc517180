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

mod agent;
mod content;
mod coordinator;
mod latency;
mod merge;
mod records;
mod slice;
mod spec;
mod wire;
#[cfg(test)]
mod tests;

use super::base::{strings, Common, Finish, LevelKind, MemorySizing, Mode, Params, Planned, ServerSide, Sizing,
                  StartError, Spread, TransactionName, Workload, WorkloadCase, WorkloadSpec, COMMON_PARAMS,
                  PROCESS_BYTES, RESULT_BYTES, THREAD_BYTES};
use crate::backends::Backend;
use crate::ops::DigestAlg;
use super::tls::CertKind;
use serde_json::{Map, Value};
use std::time::Duration;
use agent::agent_side;
use coordinator::{check, run};
pub use merge::merge_main;
pub use slice::slice_main;
pub use spec::*;

/// A result's fixed part (phases, processes with their CPU timelines) and each target's record,
/// measured with the release worker: 5.2 KB at 10 targets, 11.9 KB at 100, 74 KB at 1000.
const RESULT_BYTES_PER_TARGET: u64 = 96;
/// Each agent's per-target identity (certificate and key state, chosen by name) and the
/// coordinator's per-target record while it gathers them.
const AGENT_BYTES_PER_TARGET: u64 = 8 << 10;
const COORDINATOR_BYTES_PER_TARGET: u64 = 4 << 10;

/// A rough estimate of one target's share of a job's set-up and cryptography, s, by the
/// certificate kind (the CA signs each target's certificate; each handshake signs and
/// verifies): fitted to whole jobs on a 2-vCPU AMD EPYC host (2026-11-29: 1000 targets took
/// 6.2-8.7 ms each with RSA-2048 and 20.1-21.9 ms with RSA-4096, set-up included); the
/// elliptic-curve kinds take the fit's fixed part. For time estimates only.
fn per_target_work_s(cert: CertKind) -> f64 {
    match cert {
        CertKind::Rsa2048 => 0.0075,
        CertKind::Rsa4096 => 0.021,
        CertKind::EcdsaP256 | CertKind::Ed25519 => 0.005,
    }
}

/// The `fleet-job` workload: a job over `targets:N`, by processes of its own (agents, slices).
pub struct FleetJob;

impl Workload for FleetJob {
    type Request = Spec;

    const NAME: &'static str = NAME;

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
            server_under_test: None,
            file_params: &[],
            connection_params: &["cap", "slices"],
            needs_dir: false,
            file_bytes_param: None,
            job: true,
            calibration_load: Some("targets:10"),
            spread: Some(Spread { count_param: "slices", index_param: SLICE_INDEX, start_param: START_AT, merge_flag: MERGE_FLAG, setup_ms_pointer: "/fleet/setup_ms" }),
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
        }
    }

    fn parse(&self, backend: &str, params: &Params, _: &Common) -> Result<Spec, String> {
        parse(backend, params)
    }

    fn check(&self, spec: &Spec, backend: &dyn Backend) -> Result<(), String> {
        check(spec, backend)
    }

    fn planned(&self, spec: &Spec, common: &Common) -> Planned {
        let Ok(n) = targets_of(common.load) else { return Planned::default() };
        Planned {
            wait_s: spec.latency.planned_wait_s(n, spec.slices, spec.cap, &spec.phases, spec.items, spec.checks),
            work_s: Some(n as f64 * per_target_work_s(spec.p.cert)),
        }
    }

    fn run(&self, spec: &Spec, case: &WorkloadCase, backend: &dyn Backend, _: Duration, _: Duration) -> Finish {
        run(case, spec, backend)
    }

    fn server_side(&self, spec: &Spec, case: &WorkloadCase, side: &Value) -> Result<ServerSide, StartError> {
        agent_side(spec, &case.backend_name, side)
    }
}
