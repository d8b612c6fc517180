//! The server's counters of a socket workload cover exactly the measured window: run through the
//! real worker binary (its server side is a second process of the same binary, which a unit
//! test's binary cannot be), `server.transactions` must be about the client's window `ops`, not
//! (warm-up + window) / window times it as when the counters were read before the warm-up.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// Send `requests` to a fresh worker, one per line, and return its answers.
fn converse(requests: &[&str]) -> Vec<Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cryptoperf-worker"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the worker binary starts");
    let mut stdin = child.stdin.take().unwrap();
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
    }
    drop(stdin);
    let out = BufReader::new(child.stdout.take().unwrap());
    let answers = out.lines().map(|l| serde_json::from_str(&l.unwrap()).unwrap()).collect();
    assert!(child.wait().unwrap().success());
    answers
}

/// The warm-up is as long as the window: counters read before the warm-up would make
/// `server.transactions / ops` about 2; read at the window's start, about 1. The bound is
/// structural (a few transactions in flight at either edge), not a speed. The group is P-256, which
/// the FIPS build (`--features fips`, where X25519 is not approved) runs too.
#[test]
fn server_counters_are_the_windows_own() {
    for (workload, params) in [
        ("tls-handshake", r#"{"load":"closed:1","group":"p256"}"#),
        ("tls-bulk", r#"{"load":"closed:1","group":"p256","size_bytes":65536}"#),
    ] {
        let run = format!(
            r#"{{"type":"run","id":"w","backend":"aws-lc","op":"{workload}","params":{params},"warmup_s":0.4,"seconds":0.4}}"#
        );
        let out = converse(&[r#"{"type":"hello","protocol":1}"#, &run]);
        let r = &out[1];
        assert_eq!(r["status"], "ok", "{workload}: {r}");
        assert_eq!(r["server"]["window"], true, "{workload}");
        let ops = r["ops"].as_u64().unwrap() as f64;
        let served = r["server"]["transactions"].as_u64().unwrap() as f64;
        assert!(ops >= 20.0, "{workload}: too few transactions to compare ({ops})");
        let ratio = served / ops;
        assert!((0.85..=1.15).contains(&ratio), "{workload}: server transactions {served} vs client ops {ops} (ratio {ratio:.2})");
        assert!(r["server"]["cpu_ns"].as_u64().unwrap() > 0, "{workload}");
    }
}
