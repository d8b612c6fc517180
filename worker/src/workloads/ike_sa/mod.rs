//! `ike-sa`: IKE SAs set up with a real IKEv2 responder — strongSwan's charon, which the
//! orchestrator starts as the operation's server under test — by an initiator charon of this
//! worker's own ([`charon`]), so the responder does all a VPN gateway does for an IKE SA: the
//! messages, the DH, the PRF and key derivation, nonces, its certificate's signature and the
//! peer's verification, its crypto plugins' code and its threads.
//!
//! One transaction = one IKE SA: IKE_SA_INIT + IKE_AUTH without a CHILD SA (RFC 6023 childless,
//! so no kernel state), timed from the vici `initiate` to its answer, then its deletion asked
//! for without waiting (an INFORMATIONAL exchange the responder also pays for, over the same
//! window). The responder's process tree's CPU is read at the window's start and end, so
//! `server.cpu_ns / server.transactions` is its CPU per IKE SA set up and deleted.
//!
//! Correct before timed: the first IKE SA, before the window, must have negotiated exactly the
//! proposal the parameters ask (encryption, integrity, PRF, DH group, read back from the
//! initiator's `list-sas`); a responder that refuses the proposal or negotiates another makes
//! the cell invalid with the daemon's reason. The daemons' versions and loaded plugins (vici
//! `version`, `stats`) are in the result, so a plugin switch (`openssl` vs `gmp`) is visible.
//!
//! The cell's backend names no library here: the daemons' crypto plugins do the work.

mod charon;

use super::base::{allowed_cpus, choice, object, pin_to, strings, text, Common, Finish, Mode, Outcome, Params,
                  ServerUnderTest, TransactionName, Workload, WorkloadCase, WorkloadSpec};
use crate::backends::{Backend, BackendError};
use crate::measure::load::{run_load_with, TxnFn};
use crate::measure::proctree::{self, TreeSource, WindowCpu};
use crate::measure::sampler::Sampler;
use crate::result::{IkeDaemon, IkeProposal, IkeSaResult, Measured, ServerResult, WorkloadDetail};
use serde_json::{json, Map, Value};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const NAME: &str = "ike-sa";
/// This workload's own parameters (`hello`'s `op_params`).
pub const PARAMS: [&str; 11] = ["dh_group", "encryption", "prf", "cert", "connect", "ca_file", "server_pid",
                                "server_cgroup", "server_dir", "client_cert", "client_key"];
/// The common parameters it takes: the load level, and the mode (socket only: the daemons
/// talk over loopback UDP).
const COMMON: [&str; 2] = ["load", "mode"];

/// The DH groups (IKEv2 transform type 4): our name, strongSwan's proposal keyword, and the
/// name vici reports for it. The names and the set are `ike-phase1`'s (hello has one list per
/// parameter name, and a study sets the daemon beside the composite of the same group).
const GROUPS: [(&str, &str, &str); 3] = [
    ("modp2048", "modp2048", "MODP_2048"),
    ("ecp256", "ecp256", "ECP_256"),
    ("x25519", "curve25519", "CURVE_25519"),
];
/// The encryption (and integrity, for CBC) transforms: strongSwan's keywords, then vici's
/// `encr-alg`, `encr-keysize` and `integ-alg` (None for an AEAD).
const ENCRYPTIONS: [(&str, &str, &str, Option<&str>); 4] = [
    ("aes128gcm16", "AES_GCM_16", "128", None),
    ("aes256gcm16", "AES_GCM_16", "256", None),
    ("aes128-sha256", "AES_CBC", "128", Some("HMAC_SHA2_256_128")),
    ("aes256-sha384", "AES_CBC", "256", Some("HMAC_SHA2_384_192")),
];
/// The PRFs: strongSwan's keyword and vici's `prf-alg`.
const PRFS: [(&str, &str); 2] = [("prfsha256", "PRF_HMAC_SHA2_256"), ("prfsha384", "PRF_HMAC_SHA2_384")];
/// The certificate kinds the orchestrator makes for both peers: `tls-handshake`'s (one list per
/// parameter name in hello).
const CERTS: [&str; 4] = ["rsa2048", "rsa4096", "ecdsa-p256", "ed25519"];

/// The values a parameter takes when not given.
pub fn defaults() -> Map<String, Value> {
    object(json!({"dh_group": "ecp256", "encryption": "aes128gcm16", "prf": "prfsha256", "cert": "rsa2048",
                  "load": "closed:1"}))
}

/// A checked `ike-sa` request.
#[derive(Clone, Debug)]
pub struct Spec {
    group: (&'static str, &'static str, &'static str),
    encryption: (&'static str, &'static str, &'static str, Option<&'static str>),
    prf: (&'static str, &'static str),
    cert: &'static str,
    responder: Option<Responder>,
}

/// The responder the orchestrator started, and what the initiator needs to reach it.
#[derive(Clone, Debug)]
struct Responder {
    addr: SocketAddr,
    ca_file: PathBuf,
    cpu: Option<TreeSource>,
    dir: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

impl Spec {
    /// strongSwan's proposal keyword string, e.g. `aes128gcm16-prfsha256-ecp256`.
    pub fn proposal(&self) -> String {
        format!("{}-{}-{}", self.encryption.0, self.prf.0, self.group.1)
    }

    /// Whether IKE SA `sa` (its `list-sas` entry) negotiated this proposal; else what it did.
    fn check_negotiated(&self, sa: &rustici::Message) -> Result<IkeProposal, String> {
        let got = IkeProposal {
            encryption: charon::value(sa, "encr-alg").unwrap_or_default(),
            key_bits: charon::value(sa, "encr-keysize").unwrap_or_default(),
            integrity: charon::value(sa, "integ-alg"),
            prf: charon::value(sa, "prf-alg").unwrap_or_default(),
            dh_group: charon::value(sa, "dh-group").unwrap_or_default(),
        };
        let want = IkeProposal {
            encryption: self.encryption.1.into(),
            key_bits: self.encryption.2.into(),
            integrity: self.encryption.3.map(str::to_string),
            prf: self.prf.1.into(),
            dh_group: self.group.2.into(),
        };
        if got == want {
            Ok(got)
        } else {
            Err(format!("the IKE SA negotiated {} instead of {} ({})", got.text(), want.text(), self.proposal()))
        }
    }
}

fn path(params: &Params, key: &str) -> Result<Option<PathBuf>, String> {
    let v = text(params, key, "")?;
    Ok((!v.is_empty()).then(|| PathBuf::from(v)))
}

fn parse(params: &Params) -> Result<Spec, String> {
    let names = |t: &[&'static str]| t.to_vec();
    let group = choice("dh_group", &text(params, "dh_group", "ecp256")?, |n| GROUPS.iter().copied().find(|g| g.0 == n),
                       &names(&GROUPS.map(|g| g.0)))?;
    let encryption = choice("encryption", &text(params, "encryption", "aes128gcm16")?,
                            |n| ENCRYPTIONS.iter().copied().find(|e| e.0 == n), &names(&ENCRYPTIONS.map(|e| e.0)))?;
    let prf = choice("prf", &text(params, "prf", "prfsha256")?, |n| PRFS.iter().copied().find(|p| p.0 == n),
                     &names(&PRFS.map(|p| p.0)))?;
    let cert = choice("cert", &text(params, "cert", "rsa2048")?, |n| CERTS.iter().copied().find(|c| *c == n), &CERTS)?;
    let connect = text(params, "connect", "")?;
    let responder = if connect.is_empty() {
        None
    } else {
        let addr = connect.parse().map_err(|_| format!("connect must be IP:PORT, got '{connect}'"))?;
        let need = |k: &str| path(params, k)?.ok_or_else(|| format!("{k} goes with connect: ike-sa loads a responder cryptoperf started"));
        let cpu = TreeSource::from_params(Some(&text(params, "server_pid", "")?), Some(&text(params, "server_cgroup", "")?))?;
        Some(Responder { addr, ca_file: need("ca_file")?, cpu, dir: need("server_dir")?, client_cert: need("client_cert")?,
                         client_key: need("client_key")? })
    };
    Ok(Spec { group, encryption, prf, cert, responder })
}

/// The `ike-sa` workload.
pub struct IkeSa;

impl Workload for IkeSa {
    type Request = Spec;

    const NAME: &'static str = NAME;

    fn spec(&self) -> WorkloadSpec {
        WorkloadSpec {
            own_params: &PARAMS,
            common_params: &COMMON,
            param_values: vec![
                ("dh_group", strings(&GROUPS.map(|g| g.0))),
                ("encryption", strings(&ENCRYPTIONS.map(|e| e.0))),
                ("prf", strings(&PRFS.map(|p| p.0))),
                ("cert", strings(&CERTS)),
            ],
            defaults: defaults(),
            server_under_test: Some(ServerUnderTest {
                connect_param: "connect",
                ca_file_param: "ca_file",
                pid_param: "server_pid",
                cgroup_param: "server_cgroup",
                dir_param: Some("server_dir"),
                client_cert_param: Some("client_cert"),
                client_key_param: Some("client_key"),
                ready_file: Some("ready"),
            }),
            // the files the worker reads (the orchestrator passes them; a study may name them)
            file_params: &["ca_file", "client_cert", "client_key"],
            server: false,
            ..WorkloadSpec::windowed(&[Mode::Socket], TransactionName { one: "IKE SA", many: "IKE SAs" })
        }
    }

    fn parse(&self, _: &str, params: &Params, _: &Common) -> Result<Spec, String> {
        parse(params)
    }

    fn check(&self, _: &Spec, _: &dyn Backend) -> Result<(), String> {
        check_ready()
    }

    fn run(&self, spec: &Spec, case: &WorkloadCase, _: &dyn Backend, warmup: Duration, budget: Duration) -> Finish {
        match run(spec, case, warmup, budget) {
            Ok(f) | Err(f) => f,
        }
    }
}

fn invalid(why: String) -> Finish {
    Finish::Invalid(why, None)
}

/// Start the initiator, check the first IKE SA's proposal, then measure at the case's level.
fn run(spec: &Spec, case: &WorkloadCase, warmup: Duration, budget: Duration) -> Result<Finish, Finish> {
    let r = spec.responder.as_ref().ok_or_else(|| {
        Finish::Unsupported("ike-sa loads a responder that cryptoperf starts (an operation's `server`, see docs/ike-responder.md); \
                             it has no responder of its own".into(), None)
    })?;
    check_ready().map_err(|why| Finish::Unsupported(why, None))?;
    let cpus = allowed_cpus();
    let client_cpu = (cpus.len() >= 2).then(|| cpus[0]);
    let threads = case.common.load.threads();
    let proposal = spec.proposal();
    let config = charon::InitiatorConfig {
        proposal: &proposal,
        responder: r.addr,
        ca_file: &r.ca_file,
        cert_file: &r.client_cert,
        key_file: &r.client_key,
        threads: (2 * threads + 8).min(64),
    };
    let initiator = charon::Initiator::start(&r.dir.join("initiator"), &config, client_cpu).map_err(invalid)?;
    let negotiated = first_sa(spec, &initiator).map_err(|why| invalid(format!("{why} (initiator: {})", initiator.log_tail())))?;
    let initiator_daemon = charon::Vici::connect(&initiator.vici).and_then(|mut v| v.daemon()).ok();
    let responder_daemon = charon::Vici::connect(&r.dir.join("charon.vici")).and_then(|mut v| v.daemon()).ok();
    let pinned = client_cpu.and_then(pin_to);
    let make = || -> Result<TxnFn, BackendError> {
        let mut vici = charon::Vici::connect(&initiator.vici).map_err(BackendError::Failed)?;
        Ok(Box::new(move || {
            let id = vici.establish(0).map_err(BackendError::Failed)?;
            vici.delete(id).map_err(BackendError::Failed)
        }) as TxnFn)
    };
    let init_tree = TreeSource::Proc(initiator.pid());
    let gone = |who: &str, e: String| BackendError::Failed(format!("the {who} at {}: {e}", r.addr));
    let mut window = WindowCpu::new(r.cpu.as_ref());
    let mut init_before = None;
    let sampler = Sampler::start();
    let measured = run_load_with(make, case.common.load, warmup, budget, || {
        window.start().map_err(|e| gone("responder", e))?;
        init_before = init_tree.read().ok();
        Ok(())
    });
    let client_timeline = sampler.stop();
    let after = window.end();
    let init_after = init_tree.read().ok();
    let lm = measured.map_err(|e| invalid(format!("an IKE SA failed while measured: {e} (initiator: {})", initiator.log_tail())))?;
    let cpu_ns = after.map_err(|e| invalid(format!("the responder at {} died during the window: {e}", r.addr)))?;
    let server = ServerResult::external(r.addr.to_string(), cpu_ns, lm.m.ops);
    let daemon = |d: Option<(String, Vec<String>)>, cpu_ns, fips| {
        d.map(|(version, plugins)| IkeDaemon { version, plugins, cpu_ns, openssl_fips_provider: fips })
    };
    let fips = |pid: Option<u32>| pid.and_then(|p| proctree::tree_maps(Path::new("/proc"), p, "/fips.so").ok());
    let responder_pid = match r.cpu {
        Some(TreeSource::Proc(p)) => Some(p),
        _ => None,
    };
    let initiator_cpu = init_before.zip(init_after).map(|(b, a)| a.cpu_ns.saturating_sub(b.cpu_ns));
    let placement = match pinned {
        Some(c) => format!("load threads and the initiator charon on CPU {c}; the responder placed by cryptoperf"),
        None => "not pinned".to_string(),
    };
    Ok(Finish::Ok(Outcome {
        measured: Measured { peer_process_cpu_ns: initiator_cpu, ..Measured::of_load(&lm, 0) },
        validation: None,
        detail: WorkloadDetail::IkeSa(IkeSaResult {
            negotiated_proposal: negotiated,
            proposal,
            cert: spec.cert.into(),
            server,
            responder: daemon(responder_daemon, None, fips(responder_pid)),
            initiator: daemon(initiator_daemon, initiator_cpu, fips(Some(initiator.pid()))),
            client_timeline,
            placement,
        }),
    }))
}

/// Whether this host can run the initiator: charon and swanctl installed, and root.
fn check_ready() -> Result<(), String> {
    charon::charon_path()?;
    charon::swanctl_path()?;
    charon::can_unshare()
}

/// The first IKE SA, untimed: set up, its proposal checked against `spec`'s, deleted.
fn first_sa(spec: &Spec, initiator: &charon::Initiator) -> Result<IkeProposal, String> {
    let mut vici = charon::Vici::connect(&initiator.vici)?;
    let id = vici.establish(1).map_err(|why| format!("no IKE SA with the responder ({}): {why}", spec.proposal()))?;
    let negotiated = spec.check_negotiated(&vici.sa(id)?)?;
    vici.delete(id)?;
    Ok(negotiated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Params {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn parameters_make_strongswans_proposal_and_refuse_what_they_do_not_know() {
        let s = parse(&params(json!({"dh_group": "x25519", "encryption": "aes256-sha384", "prf": "prfsha384"}))).unwrap();
        assert_eq!(s.proposal(), "aes256-sha384-prfsha384-curve25519");
        assert_eq!(parse(&Params::new()).unwrap().proposal(), "aes128gcm16-prfsha256-ecp256");
        for (bad, word) in [
            (json!({"dh_group": "modp3072"}), "unknown dh_group 'modp3072'"),
            (json!({"connect": "127.0.0.1:500"}), "ca_file goes with connect"),
            (json!({"connect": "localhost"}), "IP:PORT"),
        ] {
            let e = parse(&params(bad.clone())).unwrap_err();
            assert!(e.contains(word) && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn a_negotiation_is_checked_field_by_field() {
        let s = parse(&params(json!({"dh_group": "modp2048"}))).unwrap();
        let sa = |group: &str| {
            rustici::Message::new()
                .section_start("cryptoperf")
                .kv_str("encr-alg", "AES_GCM_16")
                .kv_str("encr-keysize", "128")
                .kv_str("prf-alg", "PRF_HMAC_SHA2_256")
                .kv_str("dh-group", group)
                .section_end()
        };
        assert_eq!(s.check_negotiated(&sa("MODP_2048")).unwrap().dh_group, "MODP_2048");
        let e = s.check_negotiated(&sa("ECP_256")).unwrap_err();
        assert!(e.contains("ECP_256") && e.contains("MODP_2048"), "{e}");
    }
}
