//! The agents: server processes, each hosting its targets (each with its own certificate,
//! chosen by name) and answering the management side's requests.

use crate::workloads::base::{ServerSide, StartError};
use crate::workloads::tls::{self, Authority, NamedIdentity, ServerStack, Session, Transport, Usage};
use crate::backends::{Backend, BackendError, Digest, Signer, Verifier};
use crate::measure::clock;
use base64::Engine as _;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use super::content::*;
use super::spec::*;
use super::wire::*;

/// What an agent process hosts: its targets' identities, the files, and how to answer.
pub(super) struct Agent {
    pub(super) spec: Spec,
    pub(super) backend_name: String,
    pub(super) server: Arc<dyn ServerStack>,
    /// Target index → hosted here (the probe: `usize::MAX`).
    pub(super) hosted: std::collections::HashSet<usize>,
    pub(super) files: Vec<Vec<u8>>,
}

/// The per-thread primitives of an agent: one signer per pool key and one digest.
pub(super) struct AgentThread {
    pub(super) signers: HashMap<usize, Box<dyn Signer>>,
    pub(super) digest: Option<Box<dyn Digest>>,
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
    // (a sub-job's agents host only its slice's share: the targets live beside their slice)
    let mut hosted: Vec<usize> = (index..targets).step_by(spec.agents).filter(|&i| spec.runs_target(i)).collect();
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
    if let Some(why) = crate::workloads::tls_handshake::fips_problem(spec.stack, "agent", server.fips()) {
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
pub(super) fn prepare_thread(agent: &Agent, keys: &BTreeSet<usize>) -> Result<(), String> {
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
pub(super) fn serve_target(agent: &Agent, stream: TcpStream) -> Result<bool, String> {
    stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(|e| format!("read timeout: {e}"))?;
    stream.set_nonblocking(false).map_err(|e| format!("blocking mode: {e}"))?;
    // (a handle on the socket, to lengthen the timeout once the target, and so its waits, is known)
    let control = stream.try_clone().map_err(|e| format!("socket: {e}"))?;
    let mut s = agent.server.accept(Box::new(stream) as Box<dyn Transport>)?;
    if !s.handshake().map_err(|e| format!("agent handshake: {e}"))? {
        return Err("agent handshake would block on a blocking socket".into());
    }
    let head = recv(&mut *s, 5)?;
    if head[0] != op::TARGET {
        return Err(format!("expected the target's index first, got request {:?}", head[0] as char));
    }
    let raw = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let target = if raw == u32::MAX { usize::MAX } else { raw as usize };
    if !agent.hosted.contains(&target) {
        return Err(format!("target {target} is not hosted by this agent"));
    }
    if target != usize::MAX && agent.spec.latency.is_on() {
        // The management side waits between its requests (the latency model): wait for it as long.
        let waits: u64 = agent.spec.times_of(target).wait_ns.iter().sum();
        control.set_read_timeout(Some(IO_TIMEOUT + Duration::from_nanos(waits))).map_err(|e| format!("read timeout: {e}"))?;
    }
    let backend = backend_of(&agent.backend_name).map_err(|e| e.to_string())?;
    // The management key, from the client certificate the handshake verified (for `sign` items).
    let mut management: Option<Box<dyn Verifier>> = None;
    loop {
        let request = recv(&mut *s, 1)?[0];
        if agent.spec.inject_close.contains(&target) {
            // Test-only: the target goes away in the middle of a phase, without close_notify.
            return Ok(false);
        }
        let answer = match request {
            op::PUSH => check_push(agent, &mut *s, &*backend, target, &mut management)?,
            op::CHECKS => digest_files(agent, &mut *s, &*backend, target)?,
            op::REPORT => signed_report(agent, &*backend, target)?,
            op::QUIT => {
                s.close();
                return Ok(true);
            }
            other => return Err(format!("unknown request {:?}", other as char)),
        };
        send(&mut *s, &answer)?;
    }
}

/// `push`: receive the items, check each one's authenticator (an HMAC under the target's key,
/// or the management key's signature, its key taken from the client certificate), and answer
/// `OK` or `ERROR` with the first item that did not verify.
fn check_push(agent: &Agent, s: &mut dyn Session, backend: &dyn Backend, target: usize,
              management: &mut Option<Box<dyn Verifier>>) -> Result<Vec<u8>, String> {
    let spec = &agent.spec;
    let count = recv_u32(s)? as usize;
    let mut problem = None;
    let mut mac = match spec.auth {
        Auth::Hmac => Some(backend.hmac(spec.digest, &hmac_key(target)).map_err(|e| e.to_string())?),
        Auth::Sign => None,
    };
    let mut tag = Vec::new();
    for j in 0..count {
        let data = recv_field(s, spec.item_bytes)?;
        let auth = recv_field(s, 4096)?;
        let ok = match spec.auth {
            Auth::Hmac => {
                mac.as_mut().expect("an HMAC").mac(&data, &mut tag).map_err(|e| e.to_string())?;
                tag == auth
            }
            Auth::Sign => {
                if management.is_none() {
                    let cert = s.peer_certificate().ok_or("the management server presented no certificate")?;
                    let public = public_of_cert(&cert)?;
                    *management = Some(backend.verifier(spec.sig_alg(), &public).map_err(|e| e.to_string())?);
                }
                management.as_mut().expect("a verifier").verify(&data, &auth).map_err(|e| e.to_string())?
            }
        };
        if !ok && problem.is_none() {
            problem = Some(format!("item {j}: its {} does not verify", if spec.auth == Auth::Hmac { "HMAC" } else { "signature" }));
        }
    }
    Ok(match problem {
        None => vec![op::OK],
        Some(p) => {
            let mut out = vec![op::ERROR];
            put_u32(&mut out, p.len());
            out.extend_from_slice(p.as_bytes());
            out
        }
    })
}

/// `checks`: the digests of the target's files (one altered for `inject_tamper`), with this
/// thread's digest.
fn digest_files(agent: &Agent, s: &mut dyn Session, backend: &dyn Backend, target: usize) -> Result<Vec<u8>, String> {
    let spec = &agent.spec;
    let count = (recv_u32(s)? as usize).min(agent.files.len());
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
    Ok(out)
}

/// `report`: the target's result in words, signed with its key (this thread's signer).
fn signed_report(agent: &Agent, backend: &dyn Backend, target: usize) -> Result<Vec<u8>, String> {
    let spec = &agent.spec;
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
    Ok(out)
}
