//! The management side's requests to a target and their framing, over a TLS session.

use crate::workloads::tls::Session;
use super::spec::*;

/// Write `buf` as application data, in [`CHUNK`]s.
pub(super) fn send(s: &mut dyn Session, buf: &[u8]) -> Result<(), String> {
    for chunk in buf.chunks(CHUNK) {
        s.write_all(chunk)?;
    }
    Ok(())
}

/// Read exactly `n` bytes of application data.
pub(super) fn recv(s: &mut dyn Session, n: usize) -> Result<Vec<u8>, String> {
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

pub(super) fn recv_u32(s: &mut dyn Session) -> Result<u32, String> {
    let b = recv(s, 4)?;
    Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

pub(super) fn put_u32(out: &mut Vec<u8>, v: usize) {
    out.extend_from_slice(&(v as u32).to_be_bytes());
}

/// Read one length-prefixed (u32) field of at most `max` bytes.
pub(super) fn recv_field(s: &mut dyn Session, max: usize) -> Result<Vec<u8>, String> {
    let n = recv_u32(s)? as usize;
    if n > max {
        return Err(format!("a field of {n} bytes, more than the {max} expected"));
    }
    recv(s, n)
}

/// The requests the management server sends after the handshake (one byte each, then the
/// payload): the target's index first, then one per phase, then the end.
pub(super) mod op {
    pub const TARGET: u8 = b'T';
    pub const PUSH: u8 = b'P';
    pub const CHECKS: u8 = b'C';
    pub const REPORT: u8 = b'R';
    pub const QUIT: u8 = b'Q';
    pub const OK: u8 = b'K';
    pub const ERROR: u8 = b'E';
}
