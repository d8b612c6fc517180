//! TLS handshakes through complete TLS stacks: rustls 0.23 over its aws-lc-rs provider and over
//! its ring provider ([`rustls_stack`]), and OpenSSL through the `openssl` crate
//! ([`openssl_stack`]).
//!
//! Everything a handshake needs is made here, in memory: the server [`Identity`] (a CA and a leaf
//! signed by it, never written to disk), the client and server configurations ([`client`],
//! [`server`]), and a non-blocking in-memory byte pipe ([`memory_pair`]) so one thread can run
//! both sides of a connection ([`transaction_in_memory`]) and time each side's CPU separately.
//! Over TCP, [`transaction_client`] and [`transaction_server`] run the two halves of the same
//! transaction in different threads or processes.
//!
//! The client offers exactly one version, one cipher suite and one key-exchange group (those of
//! [`TlsParams`]), so what is negotiated is forced; [`Negotiated::mismatch`] says when a
//! handshake nevertheless ended with something else. A combination a library lacks is
//! [`BackendError::Unsupported`] with the reason, decided when the configuration is built,
//! never a silent fallback.

#![warn(missing_docs)]

pub mod backend_key;
pub mod external;
mod identity;
pub mod openssl_stack;
mod params;
pub mod rustls_stack;

pub use identity::*;
pub use params::*;

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::backends::BackendError;

/// One side of one TLS connection over some byte stream ([`Transport`]).
///
/// Over a non-blocking in-memory transport, calls return as soon as the transport has no more
/// bytes to read ("would block"); over a blocking socket they wait for the peer.
pub trait Session: Send {
    /// Drive the handshake as far as the transport allows: `Ok(true)` complete, `Ok(false)` it
    /// needs bytes the peer has not sent yet (non-blocking transports only). `Err` is the
    /// library's error (an alert is sent to the peer where the library does so).
    fn handshake(&mut self) -> Result<bool, String>;
    /// Send `buf` as application data (all of it, flushed to the transport).
    fn write_all(&mut self, buf: &[u8]) -> Result<(), String>;
    /// Read application data into `buf`: `Ok(Some(n))` with `n > 0` bytes read; `Ok(Some(0))`
    /// the peer closed the connection cleanly (close_notify); `Ok(None)` no application data
    /// yet and the transport would block (non-blocking transports only; records processed on
    /// the way, e.g. TLS 1.3 session tickets, are consumed). `Err`: a TLS or transport error,
    /// including the peer closing without close_notify.
    fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, String>;
    /// What the handshake negotiated, as this side sees it (meaningful once
    /// [`Session::handshake`] returned `Ok(true)`).
    fn negotiated(&self) -> Negotiated;
    /// The peer's end-entity certificate (DER) once the handshake presented one: a server's
    /// always, a client's in mutual TLS; `None` before or without one.
    fn peer_certificate(&self) -> Option<Vec<u8>>;
    /// Send close_notify, best effort (errors are ignored).
    fn close(&mut self);
}

/// A TLS server configuration of one stack, from which connections are accepted.
pub trait ServerStack: Send + Sync {
    /// Start the server side of a connection over `transport` (no bytes are exchanged yet; the
    /// handshake runs in [`Session::handshake`]).
    fn accept(&self, transport: Box<dyn Transport>) -> Result<Box<dyn Session>, String>;
    /// Whether this configuration runs only FIPS-approved cryptography in a FIPS module (rustls:
    /// `ServerConfig::fips()`; OpenSSL: its FIPS provider is loaded and the default).
    fn fips(&self) -> bool;
}

/// A TLS client configuration of one stack, from which connections to the server "localhost"
/// (or, with [`ClientStack::connect_to`], to a server of another name) are made.
pub trait ClientStack: Send + Sync {
    /// Start the client side of a connection over `transport` (no bytes are exchanged yet; the
    /// handshake runs in [`Session::handshake`]). With resumption on, the session offered is
    /// the newest one the stack's cache received.
    fn connect(&self, transport: Box<dyn Transport>) -> Result<Box<dyn Session>, String> {
        self.connect_to(transport, "localhost")
    }
    /// As [`ClientStack::connect`], to the server named `server_name`: the name sent in SNI and
    /// the one the server's certificate must carry (a DNS name).
    fn connect_to(&self, transport: Box<dyn Transport>, server_name: &str) -> Result<Box<dyn Session>, String>;
    /// As [`ServerStack::fips`], for the client configuration.
    fn fips(&self) -> bool;
}

/// A byte stream a TLS session runs over: a [`TcpStream`] or a [`MemStream`].
pub trait Transport: Read + Write + Send {}
impl Transport for TcpStream {}
impl Transport for MemStream {}

/// The server configuration of `stack` for `p`, presenting `id`.
///
/// `Err(BackendError::Unsupported(reason))` for a combination the library lacks (ring has no
/// ML-KEM; OpenSSL before 3.5 has no X25519MLKEM768; X25519MLKEM768 is TLS 1.3-only;
/// what rustls's FIPS provider does not approve, in the FIPS build; …); `Err(Failed)` when the
/// library rejects the configuration otherwise (e.g. the key).
pub fn server(stack: Stack, id: &Identity, p: &TlsParams) -> Result<Arc<dyn ServerStack>, BackendError> {
    p.check_common()?;
    if id.kind != p.cert {
        return Err(BackendError::Failed(format!(
            "the identity is {}, the parameters ask for {}",
            id.kind.name(),
            p.cert.name()
        )));
    }
    match stack {
        Stack::RustlsAwsLc => rustls_stack::server(rustls_stack::Provider::AwsLc, id, p),
        Stack::RustlsRing => rustls_stack::server(rustls_stack::Provider::Ring, id, p),
        Stack::OpenSsl => openssl_stack::server(id, p),
    }
}

/// The client configuration of `stack` for `p`: it trusts `id.ca_der` only, verifies the
/// server name "localhost", and offers only `p.version`, `p.suite` and `p.group`. With
/// `p.resume` it keeps a session cache across [`ClientStack::connect`] calls.
///
/// Errors as for [`server`].
pub fn client(stack: Stack, id: &Identity, p: &TlsParams) -> Result<Arc<dyn ClientStack>, BackendError> {
    p.check_common()?;
    match stack {
        Stack::RustlsAwsLc => rustls_stack::client(rustls_stack::Provider::AwsLc, id, p),
        Stack::RustlsRing => rustls_stack::client(rustls_stack::Provider::Ring, id, p),
        Stack::OpenSsl => openssl_stack::client(id, p),
    }
}

/// One server identity of a [`mutual_server`]: the DNS name a client asks for in SNI, the
/// certificate chain presented for it (leaf first, DER) and which key of the pool
/// ([`pool_key`], of the configuration's certificate kind) the leaf is over.
#[derive(Clone, Debug)]
pub struct NamedIdentity {
    /// A DNS name, e.g. `t00042.fleet.test`; the leaf's subject alternative name.
    pub name: String,
    /// The certificate chain, leaf first (DER).
    pub chain_der: Vec<Vec<u8>>,
    /// The leaf's key: index into the pool of `p.cert`'s kind.
    pub key_index: usize,
}

/// A mutual-TLS server configuration of `stack` for `p` that hosts many identities on one
/// listener: to each client it presents the identity its SNI names among `identities` (keys of
/// the pool, of kind `p.cert`), and it requires a client certificate issued by the CA
/// `client_ca_der` (DER). A client that names no identity here, sends no certificate or one the
/// CA did not issue fails the handshake. No sessions are resumed (no tickets, no cache).
///
/// Errors as for [`server`]; `Failed` for an identity whose certificate does not carry its name.
pub fn mutual_server(stack: Stack, client_ca_der: &[u8], identities: &[NamedIdentity], p: &TlsParams)
    -> Result<Arc<dyn ServerStack>, BackendError> {
    p.check_common()?;
    match stack {
        Stack::RustlsAwsLc => rustls_stack::mutual_server(rustls_stack::Provider::AwsLc, client_ca_der, identities, p),
        Stack::RustlsRing => rustls_stack::mutual_server(rustls_stack::Provider::Ring, client_ca_der, identities, p),
        Stack::OpenSsl => openssl_stack::mutual_server(client_ca_der, identities, p),
    }
}

/// A mutual-TLS client configuration of `stack` for `p`: it presents `id`'s certificate chain
/// and key when the server asks for one, trusts `id.ca_der` only, and verifies the name given to
/// [`ClientStack::connect_to`]. No sessions are resumed.
///
/// Errors as for [`client`].
pub fn mutual_client(stack: Stack, id: &Identity, p: &TlsParams) -> Result<Arc<dyn ClientStack>, BackendError> {
    p.check_common()?;
    let p = TlsParams { resume: false, ..*p };
    match stack {
        Stack::RustlsAwsLc => rustls_stack::mutual_client(rustls_stack::Provider::AwsLc, id, &p),
        Stack::RustlsRing => rustls_stack::mutual_client(rustls_stack::Provider::Ring, id, &p),
        Stack::OpenSsl => openssl_stack::mutual_client(id, &p),
    }
}

/// One direction of a [`memory_pair`]: bytes and whether the writing end is gone.
#[derive(Default)]
struct Pipe {
    bytes: Mutex<VecDeque<u8>>,
    closed: AtomicBool,
}

/// One end of an in-memory, non-blocking, unbounded byte pipe pair ([`memory_pair`]).
/// Writes never block; reading an empty pipe is `io::ErrorKind::WouldBlock`, or `Ok(0)` once
/// the other end has been dropped.
pub struct MemStream {
    incoming: Arc<Pipe>,
    outgoing: Arc<Pipe>,
}

/// Two connected [`MemStream`]s: bytes written to one are read from the other.
pub fn memory_pair() -> (MemStream, MemStream) {
    let a = Arc::new(Pipe::default());
    let b = Arc::new(Pipe::default());
    (
        MemStream { incoming: a.clone(), outgoing: b.clone() },
        MemStream { incoming: b, outgoing: a },
    )
}

impl Read for MemStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut bytes = self.incoming.bytes.lock().unwrap_or_else(|e| e.into_inner());
        if bytes.is_empty() {
            return if self.incoming.closed.load(Ordering::Acquire) {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = bytes.len().min(buf.len());
        for (dst, src) in buf.iter_mut().zip(bytes.drain(..n)) {
            *dst = src;
        }
        Ok(n)
    }
}

impl Write for MemStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.outgoing.bytes.lock().unwrap_or_else(|e| e.into_inner()).extend(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for MemStream {
    fn drop(&mut self) {
        self.outgoing.closed.store(true, Ordering::Release);
    }
}

/// CPU time this thread has used, in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Run `f`, adding the thread CPU time it took to `acc` (nanoseconds).
fn timed<T>(acc: &mut u64, f: impl FnOnce() -> T) -> T {
    let start = thread_cpu_ns();
    let out = f();
    *acc += thread_cpu_ns().saturating_sub(start);
    out
}

/// The outcome of [`transaction_in_memory`].
#[derive(Clone, Debug)]
pub struct MemoryOutcome {
    /// What the client saw negotiated.
    pub negotiated: Negotiated,
    /// Thread CPU time of all the client's calls (connect, handshake, write, read, close), ns.
    pub client_cpu_ns: u64,
    /// Thread CPU time of all the server's calls (accept, handshake, read, write, close), ns.
    pub server_cpu_ns: u64,
}

/// Most handshake rounds (client call + server call) [`transaction_in_memory`] allows.
const MAX_ROUNDS: usize = 16;

/// One full transaction in this thread over a [`memory_pair`]: client connect and server
/// accept; both handshakes driven alternately until complete; the client writes a 1-byte
/// request, the server reads it and writes a 1-byte response, the client reads it (so a TLS 1.3
/// client also receives the session tickets sent before it); both send close_notify.
///
/// Returns what the client saw negotiated and each side's thread CPU time (summed around each
/// of its calls). `Err` says which side failed and where, with the library's error.
pub fn transaction_in_memory(client: &dyn ClientStack, server: &dyn ServerStack) -> Result<MemoryOutcome, String> {
    let (client_end, server_end) = memory_pair();
    let (mut client_ns, mut server_ns) = (0u64, 0u64);
    let mut c = timed(&mut client_ns, || client.connect(Box::new(client_end))).map_err(|e| format!("client connect: {e}"))?;
    let mut s = timed(&mut server_ns, || server.accept(Box::new(server_end))).map_err(|e| format!("server accept: {e}"))?;
    let (mut c_done, mut s_done) = (false, false);
    for _ in 0..MAX_ROUNDS {
        if !c_done {
            c_done = timed(&mut client_ns, || c.handshake()).map_err(|e| format!("client handshake: {e}"))?;
        }
        if !s_done {
            s_done = timed(&mut server_ns, || s.handshake()).map_err(|e| format!("server handshake: {e}"))?;
        }
        if c_done && s_done {
            break;
        }
    }
    if !(c_done && s_done) {
        return Err(format!(
            "handshake incomplete after {MAX_ROUNDS} rounds (client done: {c_done}, server done: {s_done})"
        ));
    }
    timed(&mut client_ns, || c.write_all(b"?")).map_err(|e| format!("client write: {e}"))?;
    let mut byte = [0u8; 1];
    match timed(&mut server_ns, || s.read(&mut byte)) {
        Ok(Some(1)) => {}
        other => return Err(format!("server read of the request: {other:?}")),
    }
    timed(&mut server_ns, || s.write_all(b"!")).map_err(|e| format!("server write: {e}"))?;
    match timed(&mut client_ns, || c.read(&mut byte)) {
        Ok(Some(1)) => {}
        other => return Err(format!("client read of the response: {other:?}")),
    }
    let negotiated = c.negotiated();
    timed(&mut client_ns, || c.close());
    timed(&mut server_ns, || s.close());
    Ok(MemoryOutcome { negotiated, client_cpu_ns: client_ns, server_cpu_ns: server_ns })
}

/// Read exactly one byte of application data over a blocking transport.
fn read_one(session: &mut dyn Session, what: &str) -> Result<(), String> {
    let mut byte = [0u8; 1];
    match session.read(&mut byte) {
        Ok(Some(1)) => Ok(()),
        Ok(Some(_)) => Err(format!("the peer closed the connection before its {what}")),
        Ok(None) => Err(format!("no {what} (would block on a blocking socket)")),
        Err(e) => Err(format!("reading the {what}: {e}")),
    }
}

/// The client side of one transaction over TCP: connect to `addr` (blocking, TCP_NODELAY),
/// handshake, write a 1-byte request, read the 1-byte response, close. Returns what the client
/// saw negotiated; `Err` says which step failed.
pub fn transaction_client(client: &dyn ClientStack, addr: SocketAddr) -> Result<Negotiated, String> {
    let stream = TcpStream::connect(addr).map_err(|e| format!("connecting to {addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
    let mut session = client.connect(Box::new(stream))?;
    if !session.handshake().map_err(|e| format!("client handshake: {e}"))? {
        return Err("client handshake would block on a blocking socket".into());
    }
    session.write_all(b"?").map_err(|e| format!("client write: {e}"))?;
    read_one(session.as_mut(), "response")?;
    let negotiated = session.negotiated();
    session.close();
    Ok(negotiated)
}

/// The server side of one transaction on an accepted TCP connection (set blocking and
/// TCP_NODELAY here): handshake, read the 1-byte request, write a 1-byte response, close.
/// Returns what the server saw negotiated; `Err` says which step failed.
pub fn transaction_server(server: &dyn ServerStack, stream: TcpStream) -> Result<Negotiated, String> {
    stream.set_nonblocking(false).map_err(|e| format!("blocking mode: {e}"))?;
    stream.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
    let mut session = server.accept(Box::new(stream))?;
    if !session.handshake().map_err(|e| format!("server handshake: {e}"))? {
        return Err("server handshake would block on a blocking socket".into());
    }
    read_one(session.as_mut(), "request")?;
    session.write_all(b"!").map_err(|e| format!("server write: {e}"))?;
    let negotiated = session.negotiated();
    session.close();
    Ok(negotiated)
}

#[cfg(test)]
mod tests;
