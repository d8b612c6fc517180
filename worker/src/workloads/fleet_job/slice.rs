//! The slices: the management server's worker processes, each running its share of the
//! targets with at most `cap` in flight.

use crate::workloads::base::{pin_to, ParentLink};
use crate::workloads::tls::{self, ClientStack, Identity, Session};
use crate::backends::{Backend, Verifier};
use crate::measure::clock;
use crate::measure::sampler::{self, process_cpu_ns, FdWatch, Sampler};
use base64::Engine as _;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use super::content::*;
use super::latency::{self, TargetTimes};
use super::records::*;
use super::spec::*;
use super::wire::*;

/// What a slice needs to run its targets (from the coordinator's configuration line).
pub(super) struct Management {
    pub(super) spec: Spec,
    pub(super) targets: usize,
    pub(super) backend_name: String,
    pub(super) client: Arc<dyn ClientStack>,
    pub(super) agents: Vec<SocketAddr>,
    /// The baseline digests of the check files (RustCrypto's).
    pub(super) baseline: Vec<Vec<u8>>,
    /// The pushed items, and their signatures once staged (`auth = sign`).
    pub(super) items: Vec<Vec<u8>>,
}

/// One target, from the management side: its phases in order, each timed; the first failure
/// ends it (recorded with its phase and reason). `signatures`: the items' signatures (`sign`);
/// `probe_agent`: for the probe target (`usize::MAX`), the agent to run it on.
pub(super) fn run_target(m: &Management, target: usize, slice: usize, signatures: &[Vec<u8>], probe_agent: usize) -> Record {
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
    // The latency model's draws for this target (all zero when it is off; the probe waits none)
    let times = if target == usize::MAX { TargetTimes::default() } else { m.spec.times_of(target) };
    let last = m.spec.phases.len().saturating_sub(1);
    for (k, phase) in m.spec.phases.iter().enumerate() {
        let start = clock::monotonic_ns();
        let cpu_start = clock::thread_cpu_ns();
        let wait_ns = times.wait_ns.get(k).copied().unwrap_or(0);
        let outcome = match phase {
            Phase::Connect => {
                latency::wait(wait_ns);
                connect(m, agent, &name, target).map(|(s, v)| {
                    rec.negotiated = Some(s.negotiated());
                    session = Some(s);
                    target_key = Some(v);
                })
            }
            Phase::Push => push(m, session.as_deref_mut().expect("connected"), &*backend, target, signatures, wait_ns),
            Phase::Checks => checks(m, session.as_deref_mut().expect("connected"), wait_ns).map(|n| rec.mismatches = n),
            Phase::Report => report(session.as_deref_mut().expect("connected"), target_key.as_deref_mut().expect("a key"), &name, wait_ns),
        };
        let other = if k == last && outcome.is_ok() { latency::burn(times.manager_cpu_ns) } else { 0 };
        rec.phases.push((start, clock::monotonic_ns()));
        rec.waits.push(wait_ns);
        rec.cpu.push(clock::thread_cpu_ns().saturating_sub(cpu_start));
        rec.other_cpu_ns += other;
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
pub(super) fn connect(m: &Management, agent: usize, name: &str, target: usize) -> Result<(Box<dyn Session>, Box<dyn Verifier>), String> {
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
/// `wait_ns`: the latency model's wait, after the items are sent and before the answer.
pub(super) fn push(m: &Management, s: &mut dyn Session, backend: &dyn Backend, target: usize, signatures: &[Vec<u8>],
                   wait_ns: u64) -> Result<(), String> {
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
    latency::wait(wait_ns);
    match recv(s, 1)?[0] {
        op::OK => Ok(()),
        op::ERROR => Err(format!("the target refused the push: {}", String::from_utf8_lossy(&recv_field(s, 4096)?))),
        other => Err(format!("unexpected answer {:?} to the push", other as char)),
    }
}

/// `checks`: ask for every file's digest and compare with the baseline; returns the mismatches.
/// `wait_ns`: the latency model's wait, after the request and before the answer.
pub(super) fn checks(m: &Management, s: &mut dyn Session, wait_ns: u64) -> Result<usize, String> {
    let mut out = vec![op::CHECKS];
    put_u32(&mut out, m.baseline.len());
    send(s, &out)?;
    latency::wait(wait_ns);
    let len = m.spec.digest.output_len();
    let answer = recv(s, len * m.baseline.len())?;
    Ok(answer.chunks(len).zip(&m.baseline).filter(|(got, want)| got != &want.as_slice()).count())
}

/// `report`: ask for the target's signed result and verify it with its certificate's key.
/// `wait_ns`: the latency model's wait, after the request and before the answer.
pub(super) fn report(s: &mut dyn Session, key: &mut dyn Verifier, name: &str, wait_ns: u64) -> Result<(), String> {
    send(s, &[op::REPORT])?;
    latency::wait(wait_ns);
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
    let done = SliceDone {
        kind: "done".into(),
        records: records.iter().map(Record::to_wire).collect(),
        cpu_ns: (cpu1.0 + cpu1.1).saturating_sub(cpu0.0 + cpu0.1),
        timeline: Some(sampler.stop()),
        timeline_start_ns: Some(sampler_t0),
        peak_rss_bytes: sampler::peak_rss_bytes(),
        max_fds: Some(fds.stop() as u64),
        pid: Some(std::process::id()),
        pinned_cpu: pinned,
    };
    link.say(serde_json::to_value(done).unwrap_or_default());
    0
}

pub(super) fn decode_list(v: &Value) -> Vec<Vec<u8>> {
    v.as_array()
        .map(|a| a.iter().map(|s| base64::engine::general_purpose::STANDARD.decode(s.as_str().unwrap_or("")).unwrap_or_default()).collect())
        .unwrap_or_default()
}

/// A slice's [`Management`] from its configuration line.
pub(super) fn management(config: &Value) -> Result<Management, String> {
    let params = config["params"].as_object().cloned().unwrap_or_default();
    let backend = config["backend"].as_str().unwrap_or("").to_string();
    // (The coordinator checked the request, common parameters included, before it started us.)
    let spec = parse(&backend, &params)?;
    let targets = config["targets"].as_u64().ok_or("the configuration names no number of targets")? as usize;
    let b64 = |k: &str| base64::engine::general_purpose::STANDARD.decode(config[k].as_str().unwrap_or("")).map_err(|e| format!("{k}: {e}"));
    let id = Identity { cert_chain_der: vec![b64("management_der")?], key_pkcs8_der: tls::pool_key(spec.p.cert, MANAGEMENT_KEY).to_vec(),
                        ca_der: b64("ca_der")?, kind: spec.p.cert, signing: None };
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
pub(super) struct SliceProcess {
    pub(super) child: Child,
    pub(super) stdin: ChildStdin,
    pub(super) stdout: BufReader<ChildStdout>,
    pub(super) index: usize,
}

impl SliceProcess {
    pub(super) fn start(config: &Value, index: usize) -> Result<SliceProcess, String> {
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
    pub(super) fn answer(&mut self) -> Result<Value, String> {
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

    pub(super) fn tell(&mut self, v: &Value) -> Result<(), String> {
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
