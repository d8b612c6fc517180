//! `tls-handshake`: one transaction = connect, a full or resumed TLS handshake, a one-byte
//! request and a one-byte response, close — so both sides have finished (a TLS 1.3 server
//! completes on the client's Finished) and the client has its session tickets.
//!
//! Socket mode: the server in its own worker process ([`super::server`]), the client threads in
//! this one, each pinned to its own CPU where the host has two. Memory mode: both sides in one
//! thread through buffers ([`tls::transaction_in_memory`]), each side's CPU time read around
//! its own calls.
//!
//! Correct before timed: before the window, the server side checks that its implementation
//! interoperates with every other one (both directions, in memory: the cross-check), and the
//! client's first transactions must negotiate exactly what was asked (version, suite, group,
//! signature scheme's key type, resumed or not); otherwise the cell is `invalid` and never
//! timed. During the window every transaction's negotiated parameters are tallied, and one that
//! differs makes the cell invalid too.

use super::base::{allowed_cpus, choice, object, pin_to, strings, text, Common, Finish, Mode, Outcome,
                  Params, ServerSide, ServerUnderTest, StartError, TransactionName, Workload, WorkloadCase, WorkloadSpec, COMMON_PARAMS};
use super::server::ServerProcess;
use super::tls::{self, CertKind, ClientStack, Group, Identity, Negotiated, ServerStack, Stack, Suite, TlsParams, TlsVersion};
use crate::backends::{Backend, BackendError};
use crate::measure::load::{run_load, run_load_with, LoadMeasurement, TxnFn};
use crate::measure::proctree::WindowCpu;
use crate::measure::sampler::Sampler;
use crate::result::{CrossCheck, Measured, NegotiatedCount, ServerResult, Timeline, TlsResult, Validation, WorkloadDetail};
use base64::Engine as _;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const NAME: &str = "tls-handshake";
/// This workload's own parameters (`hello`'s `op_params`).
pub const PARAMS: [&str; 12] = ["tls_version", "cert", "group", "suite", "session", "server_group", "connect", "ca_file",
                                "server_pid", "server_cgroup", "request", "stack"];

/// The values a parameter takes when not given.
pub fn defaults() -> Map<String, Value> {
    object(json!({"tls_version": "1.3", "cert": "ecdsa-p256", "group": "x25519", "suite": "aes-128-gcm",
                  "session": "full", "load": "closed:1", "mode": "socket"}))
}

/// The enumerated TLS parameters' values (`tls-handshake`, `tls-bulk` and `fleet-job` take
/// some of them).
pub fn tls_param_values() -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("tls_version", strings(TlsVersion::NAMES)),
        ("cert", strings(CertKind::NAMES)),
        ("group", strings(Group::NAMES)),
        ("server_group", strings(Group::NAMES)),
        ("suite", strings(Suite::NAMES)),
    ]
}

/// The `tls-handshake` workload.
pub struct TlsHandshake;

impl Workload for TlsHandshake {
    type Request = Spec;

    const NAME: &'static str = NAME;

    fn spec(&self) -> WorkloadSpec {
        let mut values = tls_param_values();
        values.push(("session", strings(&["full", "resumed"])));
        values.push(("stack", Stack::backend_names()));
        WorkloadSpec {
            own_params: &PARAMS,
            common_params: &COMMON_PARAMS,
            param_values: values,
            defaults: defaults(),
            server_under_test: Some(ServerUnderTest {
                connect_param: "connect",
                ca_file_param: "ca_file",
                pid_param: "server_pid",
                cgroup_param: "server_cgroup",
                ..ServerUnderTest::default()
            }),
            file_params: &["ca_file"],
            ..WorkloadSpec::windowed(
                &[Mode::Socket, Mode::Memory],
                TransactionName { one: "handshake", many: "handshakes" },
            )
        }
    }

    fn parse(&self, backend: &str, params: &Params, _: &Common) -> Result<Spec, String> {
        parse(backend, params)
    }

    fn check(&self, spec: &Spec, _: &dyn Backend) -> Result<(), String> {
        check(spec)
    }

    fn run(&self, spec: &Spec, case: &WorkloadCase, _: &dyn Backend, warmup: Duration, budget: Duration) -> Finish {
        run(case, spec, warmup, budget)
    }

    fn server_side(&self, spec: &Spec, _: &WorkloadCase, _: &Value) -> Result<ServerSide, StartError> {
        server_side(spec)
    }
}

/// A checked `tls-handshake` (and `tls-bulk`) request: the implementation and what to negotiate.
#[derive(Clone, Debug)]
pub struct Spec {
    pub stack: Stack,
    pub p: TlsParams,
    /// `connect` + `ca_file`: measure the client against a server that is already listening
    /// there (e.g. nginx or `openssl s_server` a study started), trusting the CA certificate in
    /// that PEM file; with `server_pid`/`server_cgroup` also the server's CPU over the window,
    /// with `request` a `GET` after each handshake ([`tls::external`]).
    pub external: Option<tls::external::External>,
    /// `server_group`: the one group the server offers, when it is to differ from `group` (a
    /// server without the group asked for). The client then offers it too, after `group`, as
    /// real clients offer several, so what such a server negotiates can be seen — and, being
    /// not what was asked, makes the cell invalid.
    pub server_group: Option<Group>,
    /// `stack` naming a TLS implementation other than the cell backend's own: the backend that
    /// makes the server's handshake signatures with its key ([`tls::backend_key`]), e.g.
    /// `pkcs11` (the key on a token); `None`: the stack's own provider signs.
    pub key_backend: Option<String>,
}

/// Parse the TLS parameters shared by `tls-handshake` and `tls-bulk`.
pub fn parse(backend: &str, params: &Map<String, Value>) -> Result<Spec, String> {
    let stack_name = text(params, "stack", backend)?;
    let stack = Stack::for_backend(&stack_name).ok_or_else(|| match params.get("stack") {
        Some(_) => format!("stack '{stack_name}' has no TLS implementation here; TLS runs on aws-lc (rustls + aws-lc-rs), ring (rustls + ring) and openssl"),
        None => format!("backend '{backend}' has no TLS implementation here; TLS workloads run on aws-lc (rustls + aws-lc-rs), ring (rustls + ring) \
                         and openssl (tls-handshake's stack = \"aws-lc\" runs rustls with the server key on {backend})"),
    })?;
    let key_backend = (stack.backend() != backend).then(|| backend.to_string());
    let version = choice("tls_version", &text(params, "tls_version", "1.3")?, TlsVersion::parse,
                         TlsVersion::NAMES)?;
    let cert = choice("cert", &text(params, "cert", "ecdsa-p256")?, CertKind::parse,
                      CertKind::NAMES)?;
    let group = choice("group", &text(params, "group", "x25519")?, Group::parse,
                       Group::NAMES)?;
    let suite = choice("suite", &text(params, "suite", "aes-128-gcm")?, Suite::parse,
                       Suite::NAMES)?;
    let resume = match text(params, "session", "full")?.as_str() {
        "full" => false,
        "resumed" => true,
        other => return Err(format!("unknown session '{other}'; known: full, resumed")),
    };
    let external = tls::external::parse(params)?;
    let server_group = match params.get("server_group") {
        None => None,
        Some(_) => Some(choice("server_group", &text(params, "server_group", "")?, Group::parse,
                               Group::NAMES)?),
    };
    let p = TlsParams { version, cert, group, suite, resume, record_bytes: None, fallback_group: server_group.filter(|g| *g != group) };
    if key_backend.is_some() && external.is_some() {
        return Err(format!("stack = \"{stack_name}\" on backend '{backend}' puts the server key on {backend}, but connect names a server this worker does not run"));
    }
    Ok(Spec { stack, p, external, server_group, key_backend })
}

/// Both directions of interoperation between `ours` and every other implementation, in memory,
/// with `id` (full handshakes): `[{with, status: pass|fail|skipped, detail}]`.
pub fn cross_checks(ours: Stack, id: &Identity, p: &TlsParams) -> Vec<CrossCheck> {
    let full = TlsParams { resume: false, ..p.clone() };
    // Another implementation's server holds the key itself (only ours signs on a backend).
    let own_key = Identity { signing: None, ..id.clone() };
    let mut out = Vec::new();
    if let Some(key) = &id.signing {
        out.push(CrossCheck { with: "the server key's backend".into(), status: "pass".into(), detail: key.checked.clone() });
    }
    for other in Stack::ALL.iter().copied().filter(|s| *s != ours) {
        for (client_stack, server_stack) in [(other, ours), (ours, other)] {
            let with = format!("{} client → {} server", client_stack.name(), server_stack.name());
            let server_id = if server_stack == ours { id } else { &own_key };
            let pair = tls::server(server_stack, server_id, &full).and_then(|s| tls::client(client_stack, id, &full).map(|c| (c, s)));
            let (status, detail) = match pair {
                Err(BackendError::Unsupported(r)) => ("skipped", r),
                Err(BackendError::Failed(e)) => ("fail", e),
                Ok((c, s)) => match tls::transaction_in_memory(&*c, &*s) {
                    Ok(o) => match o.negotiated.mismatch(&full) {
                        None => ("pass", format!("{} {} {}", o.negotiated.version, o.negotiated.cipher_suite, o.negotiated.group)),
                        Some(why) => ("fail", why),
                    },
                    Err(e) => ("fail", e),
                },
            };
            out.push(CrossCheck { with, status: status.into(), detail });
        }
    }
    out
}

/// The first failed cross-check as one line, if any.
fn cross_check_failure(checks: &[CrossCheck]) -> Option<String> {
    checks.iter().find(|c| c.status == "fail").map(|c| format!("cross-check failed: {}: {}", c.with, c.detail))
}

/// A TLS workload's validation: the cross-checks, and whether the negotiation was what was asked
/// (`pass`, or what differed).
pub fn validation(kat: &str, checks: Vec<CrossCheck>, negotiated: &str) -> Validation {
    Validation { kat: kat.into(), negotiated: Some(negotiated.into()), cross_checks: Some(checks), ..Validation::default() }
}

/// This workload's `kat`: its primitives are checked on their own.
const KAT: &str = "not applicable (a protocol workload: its primitives have their own known-answer tests; here the negotiated parameters are checked)";

/// Why a stack's configuration is not measured in the FIPS build: its library runs in FIPS mode
/// here, yet the TLS configuration is not FIPS by the stack's own account (rustls's
/// `fips()`, OpenSSL's provider); `None` outside the FIPS build or when it is.
pub fn fips_problem(stack: Stack, side: &str, fips: bool) -> Option<String> {
    (crate::fips::mode(stack.backend()) && !fips).then(|| {
        format!("the {side}'s TLS configuration on {} is not FIPS-approved by the library's own account", stack.name())
    })
}

/// Whether `spec`'s client and server can be configured ([`Workload::check`]). Identities
/// are made once per certificate kind in this process: a check never needs a fresh key.
pub fn check(spec: &Spec) -> Result<(), String> {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    static IDS: OnceLock<Mutex<HashMap<CertKind, Arc<Identity>>>> = OnceLock::new();
    let id = {
        let mut ids = IDS.get_or_init(Default::default).lock().unwrap();
        match ids.get(&spec.p.cert) {
            Some(id) => id.clone(),
            None => {
                let id = Arc::new(Identity::generate(spec.p.cert)?);
                ids.insert(spec.p.cert, id.clone());
                id
            }
        }
    };
    let offered = TlsParams { group: spec.server_group.unwrap_or(spec.p.group), fallback_group: None, ..spec.p };
    let unsupported = |e: BackendError| match e {
        BackendError::Unsupported(r) => Err(r),
        BackendError::Failed(_) => Ok(()), // not a missing combination: the run says what failed
    };
    if let Some(name) = &spec.key_backend {
        if spec.stack == Stack::OpenSsl {
            return Err(format!("OpenSSL's TLS here signs only with a key it holds; the server key on {name} needs stack = \"aws-lc\" or \"ring\" (rustls)"));
        }
        tls::backend_key::BackendKey::supported(name, &id)?;
    }
    if spec.external.is_none() {
        match tls::server(spec.stack, &id, &offered) {
            Ok(s) => {
                if let Some(why) = fips_problem(spec.stack, "server", s.fips()) {
                    return Err(why);
                }
            }
            Err(e) => unsupported(e)?,
        }
    }
    match tls::client(spec.stack, &id, &spec.p) {
        Ok(c) => match fips_problem(spec.stack, "client", c.fips()) {
            Some(why) => Err(why),
            None => Ok(()),
        },
        Err(e) => unsupported(e),
    }
}

/// Build an implementation's server with a fresh identity, or why not.
pub fn make_server(spec: &Spec) -> Result<(Identity, Arc<dyn ServerStack>), StartError> {
    let mut id = Identity::generate(spec.p.cert).map_err(|e| StartError::new("failed", format!("cannot make the certificate: {e}")))?;
    if let Some(name) = &spec.key_backend {
        let key = tls::backend_key::BackendKey::open(name, &id).map_err(|e| match e {
            BackendError::Unsupported(r) => StartError::new("unsupported", r),
            BackendError::Failed(r) => StartError::new("invalid", format!("the server key on {name}: {r}")),
        })?;
        id.signing = Some(Arc::new(key));
    }
    // The server offers only its group: the one asked for, or `server_group`.
    let offered = TlsParams { group: spec.server_group.unwrap_or(spec.p.group), fallback_group: None, ..spec.p.clone() };
    let server = tls::server(spec.stack, &id, &offered).map_err(|e| match e {
        BackendError::Unsupported(r) => StartError::new("unsupported", r),
        BackendError::Failed(r) => StartError::new("failed", r),
    })?;
    if let Some(why) = fips_problem(spec.stack, "server", server.fips()) {
        return Err(StartError::new("unsupported", why));
    }
    Ok((id, server))
}

/// The server side in its own process: a fresh identity (the private key never leaves this
/// process), the cross-checks, and the handler serving one transaction per connection. `setup`
/// carries the CA certificate (DER, base64) and the cross-checks.
pub fn server_side(spec: &Spec) -> Result<ServerSide, StartError> {
    let (id, server) = make_server(spec)?;
    let setup = server_setup(spec, &id)?;
    let handler = Arc::new(move |stream, served: &AtomicU64| {
        tls::transaction_server(&*server, stream)?;
        served.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    Ok(ServerSide { handler, setup, thread_init: None })
}

/// The server process's checks and the `setup` it hands the client: the cross-checks with
/// every other implementation (a failed one stops the cell: `invalid`) and the CA certificate
/// (DER, base64) the client trusts. The private key is not in it.
pub fn server_setup(spec: &Spec, id: &Identity) -> Result<Value, StartError> {
    let checks = cross_checks(spec.stack, id, &spec.p);
    if let Some(why) = cross_check_failure(&checks) {
        return Err(StartError { code: "invalid".into(), message: why, validation: Some(validation(KAT, checks, "not checked")) });
    }
    Ok(json!({"ca_der": base64::engine::general_purpose::STANDARD.encode(&id.ca_der), "cross_checks": checks}))
}

/// Negotiated parameters of the timed transactions, counted.
#[derive(Default)]
pub struct Tally(Mutex<HashMap<Negotiated, u64>>);

impl Tally {
    pub fn add(&self, n: Negotiated) {
        *self.0.lock().unwrap().entry(n).or_default() += 1;
    }
    /// Each negotiation with its count, most frequent first.
    pub fn counts(&self) -> Vec<NegotiatedCount> {
        let map = self.0.lock().unwrap();
        let mut v: Vec<_> = map.iter().map(|(n, c)| NegotiatedCount { negotiated: n.clone(), count: *c }).collect();
        v.sort_by(|a, b| b.count.cmp(&a.count));
        v
    }
    /// The first tallied negotiation that is not what `p` asked for, with its count.
    pub fn mismatch(&self, p: &TlsParams) -> Option<String> {
        let map = self.0.lock().unwrap();
        map.iter().find_map(|(n, c)| n.mismatch(p).map(|why| format!("{c} timed handshake(s): {why}")))
    }
}

/// Client's CA-only identity, from the server's setup.
fn trust_from(setup: &Value, kind: CertKind) -> Result<Identity, String> {
    let ca = setup["ca_der"].as_str().ok_or("the server sent no CA certificate")?;
    let ca_der = base64::engine::general_purpose::STANDARD.decode(ca).map_err(|e| format!("bad CA certificate: {e}"))?;
    Ok(Identity { cert_chain_der: vec![], key_pkcs8_der: vec![], ca_der, kind, signing: None })
}

/// Where the client threads and the server run: (client CPU, server CPU, a note), pinned
/// apart on a host with two or more CPUs.
pub fn placement() -> (Option<usize>, Option<usize>, String) {
    let cpus = allowed_cpus();
    if cpus.len() >= 2 {
        (Some(cpus[0]), Some(cpus[1]), format!("client threads on CPU {}, server process on CPU {}", cpus[0], cpus[1]))
    } else {
        (None, None, format!("not pinned: this process may use {} CPU(s), so client and server share it", cpus.len()))
    }
}

/// Start the server process and prime/validate a client of it: the common part of the TLS
/// workloads in socket mode. Returns the server, the client stack, the server's cross-checks,
/// the placement note and the client's trust; `Err(Finish)` when the cell cannot be measured.
pub fn start_socket(case: &WorkloadCase, spec: &Spec, threads: usize) -> Result<(ServerProcess, Arc<dyn ClientStack>, Vec<CrossCheck>, String, Identity), Finish> {
    let (client_cpu, server_cpu, note) = placement();
    let server = ServerProcess::start(case.name, &case.backend_name, &case.raw, threads, server_cpu).map_err(|e| e.finish("server"))?;
    let client_pinned = client_cpu.and_then(pin_to);
    let note = match (client_pinned, server.pinned_cpu) {
        (Some(c), Some(s)) => format!("client threads on CPU {c}, server process on CPU {s}"),
        (None, None) if client_cpu.is_none() => note,
        (c, s) => format!("pinning failed (client CPU {c:?}, server CPU {s:?}): the sides may share CPUs"),
    };
    let checks: Vec<CrossCheck> = serde_json::from_value(server.setup["cross_checks"].clone()).unwrap_or_default();
    let id = trust_from(&server.setup, spec.p.cert).map_err(|e| Finish::Invalid(e, None))?;
    let client = make_client(spec, &id)?;
    Ok((server, client, checks, note, id))
}

/// The client stack for `spec` trusting `id`, or the cell's answer: `unsupported` where the
/// library lacks it (or it is not FIPS in the FIPS build), `invalid` where it failed.
fn make_client(spec: &Spec, id: &Identity) -> Result<Arc<dyn ClientStack>, Finish> {
    let client = tls::client(spec.stack, id, &spec.p).map_err(|e| match e {
        BackendError::Unsupported(r) => Finish::Unsupported(r, None),
        BackendError::Failed(r) => Finish::Invalid(format!("client: {r}"), None),
    })?;
    match fips_problem(spec.stack, "client", client.fips()) {
        Some(why) => Err(Finish::Unsupported(why, None)),
        None => Ok(client),
    }
}

/// The client a load thread uses: the shared one, or — when sessions are resumed — one of its
/// own, primed with one (untimed) transaction, so each thread resumes its own session as an
/// independent client would (threads sharing one client would race for its tickets, which
/// TLS 1.3 allows to be used once, and fall back to full handshakes).
pub fn thread_client(
    shared: &Arc<dyn ClientStack>,
    spec: &Spec,
    trust: &Identity,
    prime: impl Fn(&dyn ClientStack) -> Result<(), String>,
) -> Result<Arc<dyn ClientStack>, BackendError> {
    if !spec.p.resume {
        return Ok(shared.clone());
    }
    let own = tls::client(spec.stack, trust, &spec.p)?;
    prime(&*own).map_err(|e| BackendError::Failed(format!("priming a client's session: {e}")))?;
    Ok(own)
}

/// Run `tls-handshake` (validation, then the load level).
pub fn run(case: &WorkloadCase, spec: &Spec, warmup: Duration, budget: Duration) -> Finish {
    let finish = match (&spec.external, case.common.mode) {
        (Some(ext), _) => run_external(case, spec, ext, warmup, budget),
        (None, Mode::Memory) => run_memory(case, spec, warmup, budget),
        // (`File` is not one of this workload's modes: the spec refuses it.)
        (None, Mode::Socket | Mode::File) => run_socket(case, spec, warmup, budget),
    };
    finish.unwrap_or_else(|f| f)
}

/// `invalid` for `why`, with the cross-checks and what the negotiation check found.
fn invalid(why: String, checks: Vec<CrossCheck>, negotiated: &str) -> Finish {
    Finish::Invalid(why, Some(validation(KAT, checks, negotiated)))
}

/// The validated negotiation: the first two transactions (the first primes the session cache
/// when resuming), the second of which must negotiate exactly what was asked.
fn first_two(spec: &Spec, checks: &[CrossCheck], mut transaction: impl FnMut() -> Result<Negotiated, String>) -> Result<Negotiated, Finish> {
    let negotiated = transaction()
        .and_then(|_| transaction())
        .map_err(|e| invalid(format!("handshake failed: {e}"), checks.to_vec(), "handshake failed"))?;
    match negotiated.mismatch(&spec.p) {
        Some(why) => Err(invalid(format!("negotiated differs from the request: {why}"), checks.to_vec(), &why)),
        None => Ok(negotiated),
    }
}

/// The window's outcome once the timed transactions' negotiations are tallied: `invalid` when
/// one differs from the request.
fn tallied(spec: &Spec, tally: &Tally, checks: &[CrossCheck]) -> Result<(), Finish> {
    match tally.mismatch(&spec.p) {
        Some(why) => Err(invalid(format!("negotiated differs from the request: {why}"), checks.to_vec(), &why)),
        None => Ok(()),
    }
}

/// The result of a TLS handshake window.
fn outcome(lm: &LoadMeasurement, checks: Vec<CrossCheck>, negotiated: Negotiated, tally: &Tally, server: ServerResult,
           client_timeline: Timeline, placement: String) -> Finish {
    Finish::Ok(Outcome {
        measured: Measured::of_load(lm, 0),
        validation: Some(validation(KAT, checks, "pass")),
        detail: WorkloadDetail::Tls(TlsResult {
            negotiated,
            negotiated_counts: Some(tally.counts()),
            server,
            client_side_cpu_ns: None,
            client_timeline,
            placement,
        }),
    })
}

fn run_socket(case: &WorkloadCase, spec: &Spec, warmup: Duration, budget: Duration) -> Result<Finish, Finish> {
    let load = case.common.load;
    let (server, client, checks, placement, trust) = start_socket(case, spec, load.threads())?;
    let addr = server.addr;
    let negotiated = first_two(spec, &checks, || tls::transaction_client(&*client, addr))?;
    let tally = Arc::new(Tally::default());
    let make = || {
        let client = thread_client(&client, spec, &trust, |c| tls::transaction_client(c, addr).map(|_| ()))?;
        let tally = tally.clone();
        Ok(Box::new(move || {
            let n = tls::transaction_client(&*client, addr).map_err(BackendError::Failed)?;
            tally.add(n);
            Ok(())
        }) as TxnFn)
    };
    let w = socket_window(server, make, load, warmup, budget, "transaction")?;
    tallied(spec, &tally, &checks)?;
    if let Some(e) = w.first_error {
        return Err(Finish::Invalid(format!("the server failed {} transaction(s): {e}", w.errors), None));
    }
    Ok(outcome(&w.lm, checks, negotiated, &tally, w.server, w.client_timeline, placement))
}

/// What a socket workload's window measured on both sides (`socket_window`).
pub struct SocketWindow {
    /// The client side's measurement.
    pub lm: LoadMeasurement,
    /// The client process's CPU timeline.
    pub client_timeline: Timeline,
    /// The result's `server`: `cpu_ns` and `transactions` over the window (`window: true`),
    /// `address`, `timeline`.
    pub server: ServerResult,
    /// Connections the server failed, and the first failure's text.
    pub errors: u64,
    pub first_error: Option<String>,
}

/// Run `make`'s transactions at `load` against the running `server` for `warmup` + `budget`:
/// the server's counters read at the window's start (after the warm-up, while every load thread
/// waits: `run_load_with`'s step between the two) and after its end, so `server.cpu_ns` and
/// `server.transactions` are the window's own (`server.window: true`); both sides' CPU sampled,
/// the server stopped. `what` names a transaction in the error (`transaction`, `transfer`).
/// `Err` is the cell's `invalid` answer when the window or the server failed.
pub fn socket_window<F>(mut server: ServerProcess, make: F, load: crate::measure::load::Load, warmup: Duration,
                        budget: Duration, what: &str) -> Result<SocketWindow, Finish>
where
    F: Fn() -> Result<TxnFn, BackendError> + Sync,
{
    let addr = server.addr;
    let mut before = None;
    let sampler = Sampler::start();
    let measured = run_load_with(make, load, warmup, budget, || {
        before = Some(server.stats().map_err(|e| BackendError::Failed(format!("server: {e}")))?);
        Ok(())
    });
    let client_timeline = sampler.stop();
    let after = server.stats();
    let stopped = server.stop();
    let lm = measured.map_err(|e| Finish::Invalid(format!("{what} failed while measured: {e}"), None))?;
    let (before, after, stopped) = match (before, after, stopped) {
        (Some(b), Ok(a), Ok(s)) => (b, a, s),
        (_, Err(e), _) | (_, _, Err(e)) => return Err(Finish::Invalid(format!("server: {e}"), None)),
        (None, _, _) => return Err(Finish::Invalid("server: its counters were not read at the window's start".into(), None)),
    };
    if let Some(e) = before.device_cpu_error.as_ref().or(after.device_cpu_error.as_ref()) {
        return Err(Finish::Invalid(format!("server: its key's own process could not be read over the window: {e}"), None));
    }
    Ok(SocketWindow {
        lm,
        client_timeline,
        server: ServerResult {
            cpu_ns: Some(after.cpu_ns.saturating_sub(before.cpu_ns)),
            transactions: Some(after.transactions.saturating_sub(before.transactions)),
            window: Some(true),
            address: Some(addr.to_string()),
            timeline: stopped.timeline,
            device_process_cpu_ns: before.device_cpu_ns.zip(after.device_cpu_ns).map(|(b, a)| a.saturating_sub(b)),
            ..ServerResult::default()
        },
        errors: stopped.errors,
        first_error: stopped.first_error,
    })
}

/// Run `make`'s transactions at the case's level in this process, the process's CPU sampled:
/// the window and the timeline, or `invalid` when a transaction failed.
fn sampled_window<F>(case: &WorkloadCase, make: F, warmup: Duration, budget: Duration) -> Result<(LoadMeasurement, Timeline), Finish>
where
    F: Fn() -> Result<TxnFn, BackendError> + Sync,
{
    let sampler = Sampler::start();
    let measured = run_load(make, case.common.load, warmup, budget);
    let timeline = sampler.stop();
    let lm = measured.map_err(|e| Finish::Invalid(format!("transaction failed while measured: {e}"), None))?;
    Ok((lm, timeline))
}

fn run_memory(case: &WorkloadCase, spec: &Spec, warmup: Duration, budget: Duration) -> Result<Finish, Finish> {
    let (id, server) = make_server(spec).map_err(|e| match e.code.as_str() {
        "unsupported" => Finish::Unsupported(e.message, None),
        _ => Finish::Invalid(e.message, None),
    })?;
    let client = make_client(spec, &id)?;
    let checks = cross_checks(spec.stack, &id, &spec.p);
    if let Some(why) = cross_check_failure(&checks) {
        return Err(invalid(why, checks, "not checked"));
    }
    let negotiated = first_two(spec, &checks, || tls::transaction_in_memory(&*client, &*server).map(|o| o.negotiated))?;
    let tally = Arc::new(Tally::default());
    // Each side's CPU per transaction, over every transaction run (warm-up included).
    let (client_ns, server_ns, count) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let make = || {
        let client = thread_client(&client, spec, &id, |c| tls::transaction_in_memory(c, &*server).map(|_| ()))?;
        let (server, tally) = (server.clone(), tally.clone());
        let (client_ns, server_ns, count) = (client_ns.clone(), server_ns.clone(), count.clone());
        Ok(Box::new(move || {
            let o = tls::transaction_in_memory(&*client, &*server).map_err(BackendError::Failed)?;
            client_ns.fetch_add(o.client_cpu_ns, Ordering::Relaxed);
            server_ns.fetch_add(o.server_cpu_ns, Ordering::Relaxed);
            count.fetch_add(1, Ordering::Relaxed);
            tally.add(o.negotiated);
            Ok(())
        }) as TxnFn)
    };
    let (lm, timeline) = sampled_window(case, make, warmup, budget)?;
    tallied(spec, &tally, &checks)?;
    let n = count.load(Ordering::Relaxed).max(1) as f64;
    let per_side = |total: &AtomicU64| (total.load(Ordering::Relaxed) as f64 / n * lm.m.ops as f64) as u64;
    // Both sides ran in the client's threads: `cpu_ns` is theirs together; these split it.
    let server = ServerResult { cpu_ns: Some(per_side(&server_ns)), transactions: Some(lm.m.ops), ..ServerResult::default() };
    let placement = "memory mode: client and server sides in the same thread".to_string();
    let mut finish = outcome(&lm, checks, negotiated, &tally, server, timeline, placement);
    if let Finish::Ok(Outcome { detail: WorkloadDetail::Tls(tls), .. }) = &mut finish {
        tls.client_side_cpu_ns = Some(per_side(&client_ns));
    }
    Ok(finish)
}

/// The client against an external server (`connect`, `ca_file`): the transactions of
/// [`tls::external::transaction`], every negotiation checked against what the parameters ask
/// (a server that negotiated something else makes the cell invalid); with `server_pid` or
/// `server_cgroup`, the server tree's CPU read at the window's start (while the load threads
/// wait) and end, so `server.cpu_ns` is the window's own, and a server gone by then (died
/// mid-window) makes the cell invalid.
fn run_external(case: &WorkloadCase, spec: &Spec, ext: &tls::external::External, warmup: Duration, budget: Duration) -> Result<Finish, Finish> {
    let ca_file = &ext.ca_file;
    let pem = std::fs::read(ca_file).map_err(|e| Finish::Invalid(format!("cannot read ca_file {}: {e}", ca_file.display()), None))?;
    let ca_der = openssl::x509::X509::from_pem(&pem)
        .and_then(|c| c.to_der())
        .map_err(|e| Finish::Invalid(format!("ca_file {} is not a PEM certificate: {e}", ca_file.display()), None))?;
    let id = Identity { cert_chain_der: vec![], key_pkcs8_der: vec![], ca_der, kind: spec.p.cert, signing: None };
    let client = make_client(spec, &id)?;
    let addr = ext.addr;
    // (No cross-checks against a server this worker did not start: no validation either.)
    let negotiated = first_two(spec, &[], || tls::external::transaction(&*client, ext)).map_err(|f| match f {
        Finish::Invalid(why, _) => Finish::Invalid(why.replacen("handshake failed", &format!("handshake with {addr} failed"), 1), None),
        other => other,
    })?;
    let (client_cpu, _, _) = placement();
    let pinned = client_cpu.and_then(pin_to);
    let tally = Arc::new(Tally::default());
    let make = || {
        let client = thread_client(&client, spec, &id, |c| tls::external::transaction(c, ext).map(|_| ()))?;
        let (tally, ext) = (tally.clone(), ext.clone());
        Ok(Box::new(move || {
            tally.add(tls::external::transaction(&*client, &ext).map_err(BackendError::Failed)?);
            Ok(())
        }) as TxnFn)
    };
    let server_died = |e: String| BackendError::Failed(format!("the server under test at {addr}: {e}"));
    let mut window = WindowCpu::new(ext.cpu.as_ref());
    let sampler = Sampler::start();
    let measured = run_load_with(make, case.common.load, warmup, budget, || window.start().map_err(server_died));
    let timeline = sampler.stop();
    let after = window.end();
    let lm = measured.map_err(|e| Finish::Invalid(format!("transaction failed while measured: {e}"), None))?;
    let cpu_ns = after.map_err(|e| Finish::Invalid(format!("the server under test at {addr} died during the window: {e}"), None))?;
    tallied(spec, &tally, &[]).map_err(|f| match f {
        Finish::Invalid(why, _) => Finish::Invalid(why, None),
        other => other,
    })?;
    // The server's transactions over the window are the connections the client completed in
    // it (one handshake each): the same span as the server's CPU read above.
    let server = ServerResult::external(addr.to_string(), cpu_ns, lm.m.ops);
    let placement = match (pinned, &ext.cpu) {
        (Some(c), Some(src)) => format!("client threads on CPU {c}; the external server placed by whoever started it (its CPU from {})", src.name()),
        (Some(c), None) => format!("client threads on CPU {c}; the external server placed by whoever started it"),
        (None, _) => "not pinned".to_string(),
    };
    Ok(outcome(&lm, vec![], negotiated, &tally, server, timeline, placement))
}
