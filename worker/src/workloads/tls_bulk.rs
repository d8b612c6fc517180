//! `tls-bulk`: stream application data over established TLS connections. Each client thread
//! (one per connection of the load level) connects and handshakes once, before the window; one
//! transaction then sends `size_bytes` of data and waits for the receiver's one-byte
//! acknowledgement. The client is the sender, the server the receiver: the result's `cpu_ns`
//! is the sender's CPU, `server.cpu_ns` the receiver's, so CPU ns per byte is reported for each
//! side. `record_bytes` caps the TLS record's plaintext (the maximum fragment length; default
//! the library's, 16 KiB).

use super::base::{number, object, Common, Finish, Mode, Outcome, Params, ServerSide, StartError,
                  TransactionName, Workload, WorkloadCase, WorkloadSpec, COMMON_PARAMS};
use crate::result::{Measured, TlsResult, WorkloadDetail};
use super::tls::{self, Session, Transport};
use super::tls_handshake::{self, Spec as TlsSpec};
use crate::backends::{Backend, BackendError};
use crate::measure::load::TxnFn;
use serde_json::{json, Map, Value};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const NAME: &str = "tls-bulk";
/// This workload's own parameters.
pub const PARAMS: [&str; 6] = ["tls_version", "cert", "group", "suite", "size_bytes", "record_bytes"];
/// Bytes sent per transaction when not given: 1 MiB.
pub const DEFAULT_SIZE: u64 = 1 << 20;
/// Largest transfer per transaction: 64 MiB (the primitives' message limit).
pub const MAX_SIZE: u64 = 64 << 20;
/// Application writes are made in chunks of this many bytes.
const CHUNK: usize = 64 << 10;

/// The values a parameter takes when not given.
pub fn defaults() -> Map<String, Value> {
    object(json!({"tls_version": "1.3", "cert": "ecdsa-p256", "group": "x25519", "suite": "aes-128-gcm",
                  "size_bytes": DEFAULT_SIZE, "load": "closed:1", "mode": "socket"}))
}

/// The `tls-bulk` workload.
pub struct TlsBulk;

impl Workload for TlsBulk {
    type Request = Spec;

    const NAME: &'static str = NAME;

    fn spec(&self) -> WorkloadSpec {
        WorkloadSpec {
            own_params: &PARAMS,
            common_params: &COMMON_PARAMS,
            param_values: tls_handshake::tls_param_values().into_iter().filter(|(p, _)| PARAMS.contains(p)).collect(),
            defaults: defaults(),
            bytes_per_tx_param: Some("size_bytes"),
            ..WorkloadSpec::windowed(&[Mode::Socket], TransactionName { one: "transfer", many: "transfers" })
        }
    }

    fn parse(&self, backend: &str, params: &Params, _: &Common) -> Result<Spec, String> {
        parse(backend, params)
    }

    fn check(&self, spec: &Spec, _: &dyn Backend) -> Result<(), String> {
        tls_handshake::check(&spec.tls)
    }

    fn run(&self, spec: &Spec, case: &WorkloadCase, _: &dyn Backend, warmup: Duration, budget: Duration) -> Finish {
        run(case, spec, warmup, budget)
    }

    fn server_side(&self, spec: &Spec, _: &WorkloadCase, _: &Value) -> Result<ServerSide, StartError> {
        server_side(spec)
    }
}

/// A checked `tls-bulk` request.
#[derive(Clone, Debug)]
pub struct Spec {
    pub tls: TlsSpec,
    /// Bytes sent per transaction.
    pub size_bytes: u64,
}

/// Parse the request's parameters (the TLS ones as `tls-handshake`'s, without `session`).
pub fn parse(backend: &str, params: &Map<String, Value>) -> Result<Spec, String> {
    let mut tls_spec = tls_handshake::parse(backend, params)?;
    let record = number(params, "record_bytes", 0, 0..=16384)?;
    if record != 0 && record < 512 {
        return Err(format!("record_bytes must be 512..=16384 (TLS's maximum fragment lengths), got {record}"));
    }
    tls_spec.p.record_bytes = (record != 0).then_some(record as usize);
    let size_bytes = number(params, "size_bytes", DEFAULT_SIZE, 1..=MAX_SIZE)?;
    Ok(Spec { tls: tls_spec, size_bytes })
}

/// Read exactly `n` bytes of application data (discarded); Err at end of stream.
fn drain(session: &mut dyn Session, mut n: u64, buf: &mut [u8]) -> Result<(), String> {
    while n > 0 {
        let want = buf.len().min(n as usize);
        match session.read(&mut buf[..want])? {
            Some(0) => return Err("connection closed mid-transfer".into()),
            Some(got) => n -= got as u64,
            None => {} // not on a blocking socket: try again
        }
    }
    Ok(())
}

/// The receiving side: per connection, handshake, then for each transaction read `size_bytes`
/// and acknowledge with one byte, until the sender closes.
pub fn server_side(spec: &Spec) -> Result<ServerSide, StartError> {
    let (id, server) = tls_handshake::make_server(&spec.tls)?;
    let setup = tls_handshake::server_setup(&spec.tls, &id)?;
    let size = spec.size_bytes;
    let handler = Arc::new(move |stream: TcpStream, served: &AtomicU64| -> Result<(), String> {
        let mut s = server.accept(Box::new(stream) as Box<dyn Transport>)?;
        while !s.handshake()? {}
        let mut buf = vec![0u8; CHUNK];
        loop {
            // A clean close between transactions ends the connection.
            let mut first = [0u8; 1];
            match s.read(&mut first) {
                Ok(Some(0)) | Err(_) => return Ok(()),
                Ok(None) => continue,
                Ok(Some(_)) => {}
            }
            drain(&mut *s, size - 1, &mut buf)?;
            s.write_all(&[1])?;
            served.fetch_add(1, Ordering::Relaxed);
        }
    });
    Ok(ServerSide { handler, setup, thread_init: None })
}

/// Run `tls-bulk`: one connection per client thread, `size_bytes` per transaction.
pub fn run(case: &WorkloadCase, spec: &Spec, warmup: Duration, budget: Duration) -> Finish {
    let load = case.common.load;
    let (server, client, checks, placement, _trust) = match tls_handshake::start_socket(case, &spec.tls, load.threads()) {
        Ok(s) => s,
        Err(f) => return f,
    };
    let addr = server.addr;
    let size = spec.size_bytes;
    let connect = |client: &Arc<dyn tls::ClientStack>| -> Result<Box<dyn Session>, String> {
        let stream = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let mut s = client.connect(Box::new(stream) as Box<dyn Transport>)?;
        while !s.handshake()? {}
        Ok(s)
    };
    // Validation: one connection must negotiate what was asked and carry one transfer.
    let negotiated = match connect(&client).and_then(|mut s| {
        let n = s.negotiated();
        send_one(&mut *s, size)?;
        s.close();
        Ok(n)
    }) {
        Ok(n) => n,
        Err(e) => return Finish::Invalid(format!("transfer failed: {e}"), None),
    };
    if let Some(why) = negotiated.mismatch(&spec.tls.p) {
        return Finish::Invalid(format!("negotiated differs from the request: {why}"), None);
    }
    let make = || {
        let mut session = connect(&client).map_err(BackendError::Failed)?;
        Ok(Box::new(move || send_one(&mut *session, size).map_err(BackendError::Failed)) as TxnFn)
    };
    let mut w = match tls_handshake::socket_window(server, make, load, warmup, budget, "transfer") {
        Ok(w) => w,
        Err(f) => return f,
    };
    w.server.errors = Some(w.errors);
    Finish::Ok(Outcome {
        measured: Measured::of_load(&w.lm, size as usize),
        validation: Some(tls_handshake::validation("not applicable (a protocol workload)", checks, "pass")),
        detail: WorkloadDetail::Tls(TlsResult {
            negotiated,
            negotiated_counts: None,
            server: w.server,
            client_side_cpu_ns: None,
            client_timeline: w.client_timeline,
            placement,
        }),
    })
}

/// One transaction on an established session: send `size` bytes, wait for the one-byte ack.
fn send_one(s: &mut dyn Session, size: u64) -> Result<(), String> {
    static DATA: [u8; CHUNK] = [0x5a; CHUNK];
    let mut left = size;
    while left > 0 {
        let n = (left as usize).min(CHUNK);
        s.write_all(&DATA[..n])?;
        left -= n as u64;
    }
    let mut ack = [0u8; 1];
    loop {
        match s.read(&mut ack)? {
            Some(1) => return Ok(()),
            None => continue,
            _ => return Err("the receiver closed before acknowledging".into()),
        }
    }
}
