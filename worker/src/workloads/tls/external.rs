//! A TLS server this worker did not start (`tls-handshake` with `connect` + `ca_file`): where it
//! is, what to trust, what a transaction does with it, and whose CPU is the server's.
//!
//! The orchestrator starts such a server for a study (a `server` command on the operation) and
//! passes its process (`server_pid`, or `server_cgroup` where it put the server in a cgroup v2
//! of its own): the tree's CPU is then read at the window's start and end
//! ([`crate::measure::proctree`]), so `server.cpu_ns` is the server's over exactly the window.
//! `request` adds an HTTP/1.1 `GET` of that path after the handshake (`Connection: close`),
//! whose response must be `200`, as a web server's transaction is.

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde_json::{Map, Value};

use super::{ClientStack, Negotiated};
use crate::measure::proctree::TreeSource;

/// The parameters of a run against an external server.
#[derive(Clone, Debug)]
pub struct External {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The CA certificate (PEM) its certificate chains to: the only one trusted.
    pub ca_file: PathBuf,
    /// Whose CPU is the server's (`server_pid` or `server_cgroup`); `None`: not read.
    pub cpu: Option<TreeSource>,
    /// `request`: the path of a `GET` after each handshake; `None`: handshake only.
    pub request: Option<String>,
}

fn text(params: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(format!("{key} must be a string, got {other}")),
    }
}

/// The external server of a request, `None` without `connect`. Errors (one line): `connect`
/// without `ca_file` or the other way round, an address that is not `IP:PORT`, a `server_pid`
/// that is not a number, both `server_pid` and `server_cgroup`, a `request` that is not a path,
/// or any of them without `connect`.
pub fn parse(params: &Map<String, Value>) -> Result<Option<External>, String> {
    let (connect, ca_file) = (text(params, "connect")?, text(params, "ca_file")?);
    let (pid, cgroup, request) = (text(params, "server_pid")?, text(params, "server_cgroup")?, text(params, "request")?);
    let (addr, ca_file) = match (connect, ca_file) {
        (None, None) => {
            if let Some(k) = [("server_pid", &pid), ("server_cgroup", &cgroup), ("request", &request)]
                .iter()
                .find_map(|(k, v)| v.is_some().then_some(*k))
            {
                return Err(format!("{k} goes with connect: the server whose address it belongs to"));
            }
            return Ok(None);
        }
        (Some(a), Some(c)) => (a, c),
        _ => return Err("connect and ca_file go together: the server to measure against, and the CA certificate (PEM) to trust".into()),
    };
    let addr = addr.parse().map_err(|_| format!("connect must be IP:PORT, got '{addr}'"))?;
    let cpu = TreeSource::from_params(pid.as_deref(), cgroup.as_deref())?;
    if let Some(path) = &request {
        if !path.starts_with('/') || path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("request must be a path starting with '/' and without spaces, got '{path}'"));
        }
    }
    Ok(Some(External { addr, ca_file: PathBuf::from(ca_file), cpu, request }))
}

/// One transaction against `ext`: connect, full or resumed handshake, the `GET` if asked (its
/// response read to the end and its status checked), close — `openssl s_time -new` without or
/// with `-www`. Returns the client's view of the negotiation.
pub fn transaction(client: &dyn ClientStack, ext: &External) -> Result<Negotiated, String> {
    let stream = std::net::TcpStream::connect(ext.addr).map_err(|e| format!("connect {}: {e}", ext.addr))?;
    let _ = stream.set_nodelay(true);
    let mut session = client.connect(Box::new(stream))?;
    while !session.handshake()? {}
    let n = session.negotiated();
    if let Some(path) = &ext.request {
        let get = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        session.write_all(get.as_bytes())?;
        let mut response = Vec::with_capacity(1024);
        let mut buf = [0u8; 16384];
        loop {
            match session.read(&mut buf) {
                Ok(Some(0)) => break,
                Ok(Some(k)) => response.extend_from_slice(&buf[..k]),
                Ok(None) => continue,
                // A server closing after its response without close_notify ends it too.
                Err(_) if !response.is_empty() => break,
                Err(e) => return Err(format!("GET {path}: {e}")),
            }
        }
        status_ok(path, &response)?;
    }
    session.close();
    Ok(n)
}

/// `Ok` when `response` starts with an HTTP/1.x 200 status line.
fn status_ok(path: &str, response: &[u8]) -> Result<(), String> {
    let mut first = String::new();
    let _ = (&response[..response.len().min(200)]).read_to_string(&mut first);
    let line = first.lines().next().unwrap_or("");
    match line.split_whitespace().nth(1) {
        Some("200") if line.starts_with("HTTP/1.") => Ok(()),
        _ => Err(format!("GET {path}: the server answered '{line}', not 200")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn parses_what_goes_together_and_refuses_the_rest_in_one_line() {
        assert!(parse(&params(serde_json::json!({}))).unwrap().is_none());
        let e = parse(&params(serde_json::json!({"connect": "127.0.0.1:4433", "ca_file": "/x/ca.pem",
                                                   "server_pid": "1234", "request": "/index.html"})))
            .unwrap()
            .unwrap();
        assert_eq!(e.addr.to_string(), "127.0.0.1:4433");
        assert_eq!(e.cpu, Some(TreeSource::Proc(1234)));
        assert_eq!(e.request.as_deref(), Some("/index.html"));
        for (bad, word) in [
            (serde_json::json!({"connect": "127.0.0.1:1"}), "go together"),
            (serde_json::json!({"connect": "localhost", "ca_file": "c"}), "IP:PORT"),
            (serde_json::json!({"connect": "127.0.0.1:1", "ca_file": "c", "server_pid": "x"}), "process id"),
            (serde_json::json!({"connect": "127.0.0.1:1", "ca_file": "c", "server_pid": 5, "server_cgroup": "/s"}), "not both"),
            (serde_json::json!({"connect": "127.0.0.1:1", "ca_file": "c", "request": "index.html"}), "starting with '/'"),
            (serde_json::json!({"server_pid": 5}), "goes with connect"),
        ] {
            let why = parse(&params(bad.clone())).unwrap_err();
            assert!(why.contains(word) && !why.contains('\n'), "{bad}: {why}");
        }
    }

    #[test]
    fn only_a_200_is_a_good_response() {
        assert!(status_ok("/", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").is_ok());
        let e = status_ok("/x", b"HTTP/1.1 404 Not Found\r\n\r\n").unwrap_err();
        assert!(e.contains("404 Not Found"), "{e}");
        assert!(status_ok("/", b"").is_err());
    }
}
