//! The protocol decoder's promises that matter end to end, checked on the real worker binary
//! through its stdin and stdout (the in-process property tests are in src/protocol_fuzz.rs):
//! a `run` before `hello` is refused and the worker goes on; a 100 MB line is refused with one
//! error while the worker's memory stays far below the line's size; the end of input inside a
//! line (after a line that is not UTF-8) gets one error each and a clean exit; a device backend
//! whose token cannot be opened is refused as `device_unavailable`, and the worker goes on.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const HELLO: &str = r#"{"type":"hello","protocol":1}"#;

fn start() -> Child {
    Command::new(env!("CARGO_BIN_EXE_cryptoperf-worker"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the worker binary starts")
}

/// The next answer line, as JSON.
fn answer(out: &mut BufReader<ChildStdout>) -> Value {
    let mut line = String::new();
    out.read_line(&mut line).expect("the worker's stdout is readable");
    assert!(line.ends_with('\n'), "expected an answer line, got {line:?} (end of output?)");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {line}"))
}

/// Wait for the worker to exit, at most `limit`; its exit status.
fn exit_status(child: &mut Child, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().expect("the worker exited (was not killed)");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("the worker did not exit within {limit:?} of the end of its input");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The worker's peak resident memory so far (`VmHWM` in /proc), in bytes.
fn peak_rss(child: &Child) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).expect("/proc/PID/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kib * 1024
}

#[test]
fn a_run_before_hello_is_refused_and_the_worker_goes_on() {
    let mut child = start();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, r#"{{"type":"run","id":"early","backend":"mock","op":"sha256","seconds":0.01,"warmup_s":0}}"#).unwrap();
    let refused = answer(&mut out);
    assert_eq!((refused["type"].as_str(), refused["code"].as_str()), (Some("error"), Some("bad_request")), "{refused}");
    assert_eq!(refused["message"], "the first request must be hello");
    assert_eq!(refused["id"], "early");
    writeln!(stdin, "{HELLO}").unwrap();
    let hello = answer(&mut out);
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["limits"]["max_request_bytes"], 1 << 20);
    writeln!(stdin, r#"{{"type":"bye"}}"#).unwrap();
    drop(stdin);
    assert_eq!(exit_status(&mut child, Duration::from_secs(30)), 0);
}

/// 100 MB without a newline: the worker discards it as it arrives (peak memory far below
/// 100 MB while the line is still open), then, at the end of input, answers one error naming
/// the line's length and exits 0.
#[test]
fn a_100_mb_line_without_newline_is_refused_in_bounded_memory() {
    const FLOOD: usize = 100_000_000;
    let mut child = start();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, "{HELLO}").unwrap();
    assert_eq!(answer(&mut out)["type"], "hello");
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..FLOOD / chunk.len() {
        stdin.write_all(&chunk).unwrap();
    }
    stdin.write_all(&chunk[..FLOOD % chunk.len()]).unwrap();
    stdin.flush().unwrap();
    // write_all has returned: the worker has read all of the line but what the pipe's buffer
    // holds (64 KiB by default on Linux).
    let peak = peak_rss(&child);
    eprintln!("worker peak RSS with a 100 MB line open: {:.1} MiB", peak as f64 / (1 << 20) as f64);
    assert!(peak < 64 << 20, "the worker's peak memory was {peak} bytes while reading a 100 MB line");
    drop(stdin); // end of input in the middle of the line
    let refused = answer(&mut out);
    assert_eq!(refused["code"], "bad_request", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains(&format!("request line of {FLOOD} bytes is longer than the limit of 1048576 bytes")), "{message}");
    assert_eq!(exit_status(&mut child, Duration::from_secs(30)), 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(rest, "", "nothing after the one error");
}

/// A line that is not UTF-8, then the end of input inside a request: one error each, then a
/// clean exit.
#[test]
fn bad_bytes_and_the_end_of_input_mid_line_get_one_error_each() {
    let mut child = start();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    stdin.write_all(format!("{HELLO}\n").as_bytes()).unwrap();
    stdin.write_all(b"{\"type\":\"run\",\"id\":\"\xff\"}\n").unwrap();
    stdin.write_all(br#"{"type":"run","id":"cut","backend":"mock","op":"sha2"#).unwrap();
    drop(stdin);
    assert_eq!(answer(&mut out)["type"], "hello");
    let not_utf8 = answer(&mut out);
    assert!(not_utf8["message"].as_str().unwrap().starts_with("request is not UTF-8"), "{not_utf8}");
    let cut = answer(&mut out);
    assert!(cut["message"].as_str().unwrap().starts_with("request is not JSON: EOF while parsing"), "{cut}");
    assert_eq!(exit_status(&mut child, Duration::from_secs(30)), 0);
}

/// A `pkcs11` request in a worker whose environment names no PKCS#11 module is refused as
/// `device_unavailable`, in one line naming the variable to set; the worker goes on answering.
#[test]
fn a_token_that_cannot_be_opened_is_device_unavailable() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cryptoperf-worker"))
        .env_remove("CRYPTOPERF_PKCS11_MODULE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the worker binary starts");
    let mut input = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    writeln!(input, "{HELLO}").unwrap();
    assert_eq!(answer(&mut out)["type"], "hello");
    writeln!(input, r#"{{"type":"run","id":"t","backend":"pkcs11","op":"sha256","params":{{}}}}"#).unwrap();
    let refused = answer(&mut out);
    assert_eq!(refused["type"], "error");
    assert_eq!(refused["code"], "device_unavailable");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("CRYPTOPERF_PKCS11_MODULE"), "{message}");
    writeln!(input, "{HELLO}").unwrap();
    assert_eq!(answer(&mut out)["type"], "hello", "the worker goes on after the refusal");
    writeln!(input, r#"{{"type":"bye"}}"#).unwrap();
    drop(input);
    assert_eq!(exit_status(&mut child, Duration::from_secs(10)), 0);
}
