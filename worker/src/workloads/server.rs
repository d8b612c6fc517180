//! The server side of a socket-mode workload, in a worker process of its own.
//!
//! The client's worker starts `cryptoperf-worker --serve-workload` (the same binary, so the
//! same build, libraries and `OPENSSL_ia32cap`), writes one JSON line — the workload, backend,
//! `params` of the run request, server threads and the CPU to pin to — and reads one line back:
//! `{"type":"listening","address":…,"port":…,"setup":{…}}` (`setup` is the workload's: e.g. the
//! CA certificate a TLS client must trust, never a private key) or `{"type":"error",…}`. Then
//! it sends `stats` (answered with the process's CPU time and transactions so far) and `stop`
//! (answered with the same plus the CPU timeline, its start, the process's peak RSS and the most
//! descriptors it held open; the process then exits). A run with several server processes
//! (`fleet-job`'s agents) tells each what it is in the configuration's `side`.
//!
//! Keys stay in the server process's memory; nothing is written to disk. The listener binds the
//! request's address, loopback unless the request named another.

use super::base::{pin_to, Common, ParentLink, Params, Stall, StartError, WorkloadCase};
use crate::result::{Timeline, Validation};
use crate::measure::clock;
use crate::measure::sampler::{process_cpu_ns, Sampler};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};


/// The command-line flag that makes a worker a workload server.
pub const FLAG: &str = "--serve-workload";

/// The server's counters at one moment.
#[derive(Clone, Debug, Default)]
pub struct ServerStats {
    /// Process CPU time (user + system), ns.
    pub cpu_ns: u64,
    pub transactions: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// With `stop` only: the CPU timeline (`measure::sampler`).
    pub timeline: Option<Timeline>,
    /// With `stop` only: when the timeline's sampler started (`CLOCK_MONOTONIC` ns, the clock
    /// every process shares), the process's peak resident set size in bytes, and the most
    /// descriptors it held open at once (`measure::sampler::FdWatch`).
    pub timeline_start_ns: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
    pub max_fds: Option<usize>,
    /// The CPU of the server's backend's own process so far (a token's daemon,
    /// `Backend::companion`), ns; `None` without one.
    pub device_cpu_ns: Option<u64>,
    /// Why that process's CPU could not be read (it is gone); `None` when read or absent.
    pub device_cpu_error: Option<String>,
}

/// A running server process; killed when dropped.
pub struct ServerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Where it listens.
    pub addr: SocketAddr,
    /// The workload's setup fields from the server (`ServerSide::setup`).
    pub setup: Value,
    /// The CPU it pinned itself to, if any.
    pub pinned_cpu: Option<usize>,
}

impl ServerProcess {
    /// Start the server for `workload` on `backend` with the run request's `params`, `threads`
    /// serving threads, pinned to `pin_cpu` when given. Waits until it listens.
    pub fn start(workload: &str, backend: &str, params: &serde_json::Map<String, Value>, threads: usize, pin_cpu: Option<usize>) -> Result<ServerProcess, StartError> {
        Self::start_side(workload, backend, params, threads, pin_cpu, Value::Null)
    }

    /// [`ServerProcess::start`], with `side`: what this server process is among several of one
    /// run (`fleet-job`'s agents: its index, the job's targets and CA certificate), handed to
    /// the workload's server side as it is.
    pub fn start_side(workload: &str, backend: &str, params: &serde_json::Map<String, Value>, threads: usize,
                      pin_cpu: Option<usize>, side: Value) -> Result<ServerProcess, StartError> {
        let failed = |m: String| StartError::new("failed", m);
        let exe = std::env::current_exe().map_err(|e| failed(format!("cannot find the worker binary: {e}")))?;
        let mut child = Command::new(exe)
            .arg(FLAG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| failed(format!("cannot start the server process: {e}")))?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let config = json!({"workload": workload, "backend": backend, "params": params, "threads": threads, "pin_cpu": pin_cpu,
                            "side": side});
        let mut line = String::new();
        let sent = writeln!(stdin, "{config}").and_then(|_| stdin.flush());
        if sent.is_err() || stdout.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            let _ = child.wait();
            return Err(failed("the server process exited before listening (its stderr is above)".into()));
        }
        let answer: Value = serde_json::from_str(&line).unwrap_or_default();
        if answer["type"] != "listening" {
            let _ = child.kill();
            let _ = child.wait();
            return Err(StartError {
                code: answer["code"].as_str().unwrap_or("failed").to_string(),
                message: answer["message"].as_str().unwrap_or("the server sent no answer").to_string(),
                validation: serde_json::from_value(answer["fields"]["validation"].clone()).unwrap_or_default(),
            });
        }
        let addr = format!("{}:{}", answer["address"].as_str().unwrap_or(""), answer["port"])
            .parse()
            .map_err(|_| failed(format!("server answered an unusable address: {answer}")))?;
        Ok(ServerProcess {
            child,
            stdin,
            stdout,
            addr,
            setup: answer["setup"].clone(),
            pinned_cpu: answer["pinned_cpu"].as_u64().map(|c| c as usize),
        })
    }

    fn ask(&mut self, command: &str) -> Result<ServerStats, String> {
        writeln!(self.stdin, "{command}").and_then(|_| self.stdin.flush()).map_err(|e| format!("server process gone: {e}"))?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line).unwrap_or(0) == 0 {
            return Err("the server process exited (its stderr is above)".into());
        }
        let v: Value = serde_json::from_str(&line).map_err(|e| format!("server sent '{line}': {e}"))?;
        Ok(ServerStats {
            cpu_ns: v["cpu_ns"].as_u64().unwrap_or(0),
            transactions: v["transactions"].as_u64().unwrap_or(0),
            errors: v["errors"].as_u64().unwrap_or(0),
            first_error: v["first_error"].as_str().map(str::to_owned),
            timeline: serde_json::from_value(v["timeline"].clone()).unwrap_or_default(),
            timeline_start_ns: v["timeline_start_ns"].as_u64(),
            peak_rss_bytes: v["peak_rss_bytes"].as_u64(),
            max_fds: v["max_fds"].as_u64().map(|n| n as usize),
            device_cpu_ns: v["device_cpu_ns"].as_u64(),
            device_cpu_error: v["device_cpu_error"].as_str().map(str::to_owned),
        })
    }

    /// The server process's id.
    pub fn pid(&self) -> Option<u32> {
        Some(self.child.id())
    }

    /// The server's counters now.
    pub fn stats(&mut self) -> Result<ServerStats, String> {
        self.ask("stats")
    }

    /// Stop the server: its final counters and CPU timeline.
    pub fn stop(mut self) -> Result<ServerStats, String> {
        let s = self.ask("stop");
        let _ = self.child.wait();
        s
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Bind `address:port`; a port in use is `port_in_use` with one line.
pub fn bind(common: &Common) -> Result<TcpListener, StartError> {
    let addr = SocketAddr::new(common.address, common.port);
    TcpListener::bind(addr).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            StartError::new("port_in_use", format!("cannot listen on {addr}: the port is in use; choose another port or leave it out (0 = any free port)"))
        } else {
            StartError::new("failed", format!("cannot listen on {addr}: {e}"))
        }
    })
}

/// Wait while the injected stall is on: `pause_ms` at the start of every `every_ms` since `t0`.
fn stall_gate(stall: Option<Stall>, t0: u64) {
    if let Some(s) = stall {
        let every = s.every_ms * 1_000_000;
        let pause = s.pause_ms * 1_000_000;
        let phase = (clock::monotonic_ns() - t0) % every;
        if phase < pause {
            std::thread::sleep(std::time::Duration::from_nanos(pause - phase));
        }
    }
}

/// The `--serve-workload` process: read the configuration, check its request with `parse` (the
/// registry's), build the workload's server side, listen, serve, answer `stats` and `stop`.
/// Returns the exit status.
pub fn child_main(parse: impl Fn(&str, &str, &Params) -> Result<WorkloadCase, String>) -> i32 {
    let mut link = ParentLink::open();
    let Some(config) = link.message() else { return 1 };
    let refuse = |code: &str, message: String, validation: Option<Validation>| {
        json!({"type": "error", "code": code, "message": message, "fields": {"validation": validation}})
    };
    let pinned = config["pin_cpu"].as_u64().and_then(|c| pin_to(c as usize));
    // A backend whose work runs in a daemon (the server key on a token behind one): its CPU is
    // read with the server's own.
    let companion = crate::backends::by_name(config["backend"].as_str().unwrap_or("")).and_then(|b| b.companion());
    let params = config["params"].as_object().cloned().unwrap_or_default();
    let (workload, backend) = (config["workload"].as_str().unwrap_or(""), config["backend"].as_str().unwrap_or(""));
    let case = match parse(workload, backend, &params) {
        Ok(c) => c,
        Err(e) => {
            link.say(refuse("bad_params", e, None));
            return 2;
        }
    };
    let side = case.workload.server_request(&case, &config["side"]);
    let side = match side.and_then(|side| bind(&case.common).map(|l| (side, l))) {
        Ok(s) => s,
        Err(e) => {
            link.say(refuse(&e.code, e.message, e.validation));
            return 2;
        }
    };
    let (side, listener) = side;
    let local = listener.local_addr().expect("a bound listener has an address");
    let sampler = Sampler::start();
    let sampler_t0 = clock::monotonic_ns();
    let fds = crate::measure::sampler::FdWatch::start();
    let served = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error: Arc<Mutex<Option<String>>> = Arc::default();
    let t0 = clock::monotonic_ns();
    let threads = config["threads"].as_u64().unwrap_or(1).clamp(1, crate::measure::load::MAX_CONCURRENCY as u64);
    let listener = Arc::new(listener);
    // Every serving thread prepares its state (thread_init) before the server says it listens.
    let ready = Arc::new(std::sync::Barrier::new(threads as usize + 1));
    for _ in 0..threads {
        let (listener, handler, served, errors, first_error) =
            (listener.clone(), side.handler.clone(), served.clone(), errors.clone(), first_error.clone());
        let stall = case.common.stall;
        let (init, ready) = (side.thread_init.clone(), ready.clone());
        std::thread::spawn(move || {
            if let Some(init) = init {
                init();
            }
            ready.wait();
            loop {
                let Ok((stream, _)) = listener.accept() else { continue };
                let _ = stream.set_nodelay(true);
                stall_gate(stall, t0);
                match handler(stream, &served) {
                    Ok(()) => {}
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        first_error.lock().unwrap().get_or_insert(e);
                    }
                }
            }
        });
    }
    ready.wait();
    link.say(json!({"type": "listening", "address": local.ip().to_string(), "port": local.port(), "setup": side.setup, "pinned_cpu": pinned}));
    let stats = || {
        let (u, s) = process_cpu_ns();
        json!({
            "cpu_ns": u + s,
            "transactions": served.load(Ordering::Relaxed),
            "errors": errors.load(Ordering::Relaxed),
            "first_error": first_error.lock().unwrap().clone(),
            // a daemon that cannot be read (gone) is said, not left out of the server's CPU
            "device_cpu_ns": companion.as_ref().and_then(|c| c.read().ok()).map(|t| t.cpu_ns),
            "device_cpu_error": companion.as_ref().and_then(|c| c.read().err().map(|e| format!("{} ({})", e, c.name()))),
        })
    };
    while let Some(line) = link.line() {
        match line.trim() {
            "stats" => link.say(stats()),
            "stop" => break,
            _ => {}
        }
    }
    let mut last = stats();
    last["timeline"] = serde_json::to_value(sampler.stop()).unwrap_or_default();
    last["timeline_start_ns"] = sampler_t0.into();
    last["peak_rss_bytes"] = crate::measure::sampler::peak_rss_bytes().into();
    last["max_fds"] = fds.stop().into();
    link.say(last);
    // Serving threads may be blocked in accept(): leave without joining them.
    std::process::exit(0)
}
