//! Property tests of the protocol decoder: whatever bytes arrive on stdin — malformed or
//! truncated JSON, bytes that are not UTF-8, lines past [`MAX_REQUEST_BYTES`], deep nesting,
//! huge numbers, wrong types in every field, unknown types, requests out of order, and real
//! requests mutated byte by byte or field by field — every non-blank line gets exactly one JSON
//! answer line (an `error` with a documented code, or the answer its request asks for), and
//! `serve` never panics, never hangs and holds at most one bounded line.
//!
//! The conversations run through [`serve_with`], the worker's own loop (line reader, decoder,
//! state, answer writer), with [`Dry`] actions: a request that passes every check is answered
//! without being measured, so thousands of inputs take seconds. Each conversation runs on a
//! thread of its own under a watchdog ([`WATCHDOG`]), so a hang fails the property instead of
//! the test run. The answers are checked against [`expect_answers`], the protocol as
//! docs/worker-protocol.md states it.
//!
//! Case counts: [`DEFAULT_CASES`] per property in `cargo test` (a few seconds in a debug
//! build); `PROPTEST_CASES=N` runs N per property instead (docs/reliability.md, "Fuzzing the
//! worker's protocol decoder", has the longer run and its command). Each property prints how
//! many inputs it served and in how long (`cargo test fuzz -- --nocapture`).

use super::*;
use proptest::prelude::*;
use proptest::sample::select;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

/// Cases per property when `PROPTEST_CASES` is not set: keeps the whole module to a few
/// seconds in a debug `cargo test` on 2 cores.
const DEFAULT_CASES: u32 = 1000;

/// Longest one conversation may take before it counts as a hang. Each is a few KiB (or one
/// bounded line) and is never measured: milliseconds at most, even in a debug build.
const WATCHDOG: Duration = Duration::from_secs(20);

/// The proptest configuration: `PROPTEST_CASES` cases when set, else [`DEFAULT_CASES`].
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

/// Conversations served by this test process (printed with each property's count).
static SERVED: AtomicU64 = AtomicU64::new(0);

/// [`Actions`] that answer without measuring: `hello` without the machine's capabilities,
/// `run` and `check` with `status: "dry"` and the request's `id` (the checked case exists,
/// which is all the decoder decides).
struct Dry;

impl Actions for Dry {
    fn hello(&mut self, detail: bool) -> Value {
        json!({"type": "hello", "protocol": PROTOCOL_VERSION, "detail": detail})
    }
    fn run(&mut self, case: Case) -> Value {
        json!({"type": "result", "id": case.id, "backend": case.backend_name, "op": case.op_name, "status": "dry"})
    }
    fn check(&mut self, case: Case) -> Value {
        json!({"type": "checked", "id": case.id, "backend": case.backend_name, "op": case.op_name, "status": "dry"})
    }
}

/// What one conversation produced.
#[derive(Debug)]
struct Outcome {
    status: i32,
    answers: Vec<Value>,
}

/// Serve `input` with [`Dry`] on a thread of its own. Panics (failing the property, with the
/// reason) if `serve_with` panics, returns an I/O error, runs past [`WATCHDOG`], or writes
/// anything but whole lines of one JSON object each.
fn serve_dry(input: Vec<u8>) -> Outcome {
    SERVED.fetch_add(1, Ordering::Relaxed);
    let (done, finished) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let mut out = Vec::new();
        let status = serve_with(&input[..], &mut out, false, &mut Dry);
        let _ = done.send(());
        (status, out)
    });
    if let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(WATCHDOG) {
        panic!("serve did not finish within {WATCHDOG:?}: a hang");
    }
    let (status, out) = match worker.join() {
        Ok(r) => r,
        Err(payload) => {
            let why = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("serve panicked: {why}");
        }
    };
    let status = status.expect("serving from memory into memory cannot fail on I/O");
    assert!(out.is_empty() || out.ends_with(b"\n"), "the last answer is not a whole line");
    let text = String::from_utf8(out).expect("answers are UTF-8");
    let answers = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {l}"));
            assert!(v.is_object(), "answer is not a JSON object: {l}");
            v
        })
        .collect();
    Outcome { status, answers }
}

/// The codes an `error` may carry (docs/worker-protocol.md, "error").
const CODES: [&str; 5] = ["bad_request", "unknown_backend", "unknown_op", "bad_params", "protocol_mismatch"];

/// `answer` is an `error` with `code` (any documented code if None) and a one-line message
/// for a person.
fn assert_error(answer: &Value, code: Option<&str>, context: &str) {
    assert_eq!(answer["type"], "error", "{context}: {answer}");
    let got = answer["code"].as_str().unwrap_or_else(|| panic!("{context}: error without a code: {answer}"));
    match code {
        Some(c) => assert_eq!(got, c, "{context}: {answer}"),
        None => assert!(CODES.contains(&got), "{context}: undocumented code: {answer}"),
    }
    let message = answer["message"].as_str().unwrap_or_else(|| panic!("{context}: no message: {answer}"));
    assert!(!message.trim().is_empty(), "{context}: empty message: {answer}");
    assert!(!message.chars().any(char::is_control), "{context}: message not one plain line: {answer}");
    assert!(answer.get("id").is_some(), "{context}: error without its id field: {answer}");
}

/// Check `outcome` against the protocol for `input`: the lines the worker reads are the
/// `\n`-separated pieces (the last one without its `\n` included); a line past
/// [`MAX_REQUEST_BYTES`], not UTF-8, not a JSON object with a string `type`, or any request but
/// `hello` before `hello` is answered, gets an `error`; a blank line nothing; `hello` for
/// another protocol one `protocol_mismatch` and the end (status 2); `bye` after `hello` the end
/// (status 0) with no answer; `run` a `result` or an `error`, `check` a `checked` or an `error`,
/// each with the request's string `id`; another type an `error`. Nothing is answered twice and
/// nothing more after the end.
fn expect_answers(input: &[u8], outcome: &Outcome) {
    let mut lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|last| last.is_empty()) {
        lines.pop(); // what follows the last `\n` (or an empty input)
    }
    let mut answers = outcome.answers.iter();
    let mut greeted = false;
    let show = |line: &[u8]| String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
    for line in lines {
        let context = show(line);
        if line.len() > MAX_REQUEST_BYTES {
            let a = answers.next().unwrap_or_else(|| panic!("no answer to an oversized line"));
            assert_error(a, Some("bad_request"), "oversized line");
            assert!(a["message"].as_str().unwrap().contains("longer than the limit"), "{a}");
            continue;
        }
        let Ok(text) = std::str::from_utf8(line) else {
            let a = answers.next().unwrap_or_else(|| panic!("no answer to non-UTF-8 line {context}"));
            assert_error(a, Some("bad_request"), &context);
            assert!(a["message"].as_str().unwrap().contains("not UTF-8"), "{a}");
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        let request = serde_json::from_str::<Value>(text).ok().and_then(|v| v.as_object().cloned());
        let kind = request.as_ref().and_then(|r| r.get("type")).and_then(Value::as_str);
        if greeted && kind == Some("bye") {
            assert!(answers.next().is_none(), "{context}: bye was answered, or answers followed it");
            assert_eq!(outcome.status, 0, "{context}");
            return;
        }
        let a = answers.next().unwrap_or_else(|| panic!("no answer to {context}"));
        let (Some(request), Some(kind)) = (request.as_ref(), kind) else {
            assert_error(a, Some("bad_request"), &context);
            assert_eq!(a["id"], Value::Null, "{context}: {a}");
            continue;
        };
        let id = request.get("id").and_then(Value::as_str);
        match kind {
            "hello" => {
                if request.get("protocol").and_then(Value::as_u64) != Some(PROTOCOL_VERSION) {
                    assert_error(a, Some("protocol_mismatch"), &context);
                    assert!(answers.next().is_none(), "{context}: answers after a protocol mismatch");
                    assert_eq!(outcome.status, EXIT_PROTOCOL_MISMATCH, "{context}");
                    return;
                }
                match request.get("detail") {
                    None | Some(Value::Null | Value::Bool(_)) => {
                        assert_eq!(a["type"], "hello", "{context}: {a}");
                        let detail = request.get("detail").and_then(Value::as_bool).unwrap_or(false);
                        assert_eq!(a["detail"], detail, "{context}");
                        greeted = true;
                    }
                    Some(_) => assert_error(a, Some("bad_request"), &context),
                }
            }
            _ if !greeted => {
                assert_error(a, Some("bad_request"), &context);
                assert_eq!(a["message"], "the first request must be hello", "{context}");
                assert_eq!(a["id"].as_str(), id, "{context}: {a}");
            }
            "run" | "check" => {
                let ok_type = if kind == "run" { "result" } else { "checked" };
                if a["type"] != ok_type {
                    assert_error(a, None, &context);
                    assert_ne!(a["code"], "protocol_mismatch", "{context}");
                } else {
                    assert_eq!(a["status"], "dry", "{context}: {a}");
                    // (An accepted request without an id is answered with an empty one.)
                    assert_eq!(a["id"].as_str(), Some(id.unwrap_or("")), "{context}: {a}");
                    // An accepted request names a known backend and operation.
                    assert_eq!(a["backend"], request["backend"], "{context}");
                    assert_eq!(a["op"], request["op"], "{context}");
                }
                if a["type"] == "error" {
                    assert_eq!(a["id"].as_str(), id, "{context}: the id is echoed: {a}");
                }
            }
            _ => {
                assert_error(a, Some("bad_request"), &context);
                assert!(a["message"].as_str().unwrap().starts_with("unknown request type"), "{context}: {a}");
            }
        }
    }
    assert!(answers.next().is_none(), "more answers than requests: {:?}", outcome.answers);
    assert_eq!(outcome.status, 0);
}

// ---- what to send ---------------------------------------------------------------------------

const HELLO: &str = r#"{"type":"hello","protocol":1}"#;

/// Every top-level field a request may carry.
const REQUEST_FIELDS: [&str; 13] = [
    "type", "id", "protocol", "detail", "backend", "op", "params", "threads", "warmup_s", "seconds", "batch",
    "cpu_mask", "cpu_vector_unmasked",
];

/// Strings worth trying in any field: empty, NaN-like, infinite, huge, negative zero, look-alike
/// names, the mock backend's crash and hang scripts (never run here: the decoder only checks
/// them), control characters, paths, and loads and forms at and past their bounds.
const TRICKY: &[&str] = &[
    "", " ", "NaN", "nan", "-NaN", "inf", "-inf", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "-0", "0x10",
    "18446744073709551616", "-1", "1.5", "null", "true", "\u{0}", "a\u{0}b", "\u{feff}", "\u{202e}", "é", "日本",
    "\\", "\"", "\n", "../../../../etc/passwd", "/", "/dev/null", "/proc/self", "mock", "mock:", "mock:2", "mock:0",
    "mock:-1", "mock:NaN", "mock:inf", "mock:1e308", "mock:crash", "mock:hang", "MOCK", "openssl ", "sha256\n",
    "closed:0", "closed:1", "closed:1@0", "closed:1@NaN", "closed:1@1e-300", "closed:99999999999999999999",
    "open:0", "open:1e-300", "open:NaN", "open:inf", "open:10/0", "open:10/1025", "targets:0", "targets:1",
    "targets:18446744073709551616", "mixed:0", "mixed:50", "mixed:100", "read", "write", "0x1:0x2",
    "0xffffffffffffffff:0xffffffffffffffff", "0x10000000000000000:0x1", "0x:0x", "::", "connect,push",
    "connect,connect", "1,2,3", "127.0.0.1", "::1", "0.0.0.0", "999.1.1.1",
];

/// Numbers worth trying where a number is expected: bounds and one past, zero, negative
/// zero, fractions, the extremes of f64.
const TRICKY_NUMBERS: &[f64] = &[
    0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 0.01, 1024.0, 1025.0, 600.0, 600.5, 3600.0, 3601.0, 65535.0, 65536.0,
    1048576.0, 1048577.0, 67108864.0, 67108865.0, 1e15, 1.8446744073709552e19, 1e308, -1e308, f64::MIN_POSITIVE, 5e-324,
];

/// Every name the worker knows: backends, operations, workloads, CPU masks, parameter names
/// and their announced values (from `hello`'s own tables).
fn names() -> Vec<String> {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(all_names).clone()
}

fn all_names() -> Vec<String> {
    let mut v: Vec<String> = backends::NAMES.iter().map(|s| s.to_string()).collect();
    v.extend(ALL_OPS.iter().copied().chain(workloads::names()).map(|s| s.to_string()));
    v.extend(CPU_MASKS.iter().map(|m| m.name.to_string()));
    v.extend(param_keys());
    for values in param_values().as_object().into_iter().flat_map(|m| m.values()) {
        v.extend(values.as_array().into_iter().flatten().map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string)));
    }
    v.sort();
    v.dedup();
    v
}

/// Every `params` key of every operation and workload.
fn param_keys() -> Vec<String> {
    let mut v: Vec<String> = ops::PARAM_NAMES.iter().map(|s| s.to_string()).collect();
    for w in workloads::names() {
        v.extend(workloads::param_names(w).into_iter().map(str::to_string));
    }
    v.sort();
    v.dedup();
    v
}

fn tricky_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => select(TRICKY).prop_map(str::to_string),
        3 => select(names()),
        2 => any::<String>(),
        1 => (1usize..20_000, any::<char>()).prop_map(|(n, c)| c.to_string().repeat(n)),
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => select(TRICKY_NUMBERS).prop_map(|f| json!(f)),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        2 => (0u64..70_000).prop_map(Value::from),
        1 => any::<f64>().prop_filter_map("JSON numbers are finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
    ]
}

/// Any JSON value: scalars of every kind (the tricky ones often), arrays and objects nested a
/// few levels (deeper nesting has a property of its own), keyed by request and parameter names.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        tricky_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..5).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    let mut known: Vec<String> = REQUEST_FIELDS.iter().map(|s| s.to_string()).collect();
    known.extend(param_keys());
    prop_oneof![4 => select(known), 1 => any::<String>()]
}

/// A value for request field `field`: mostly of the right kind (so the checks behind the type
/// check are reached), sometimes anything.
fn value_for(field: &str) -> BoxedStrategy<Value> {
    let plausible: BoxedStrategy<Value> = match field {
        "type" => select(vec!["hello", "run", "check", "bye", "launch", "HELLO", ""]).prop_map(Value::from).boxed(),
        "protocol" => prop_oneof![Just(json!(1)), Just(json!(1.0)), Just(json!("1")), number()].boxed(),
        "detail" => any::<bool>().prop_map(Value::from).boxed(),
        "backend" => select(vec!["openssl", "aws-lc", "ring", "rustcrypto", "mock", "mock:2", "mock:crash", "nosuch"])
            .prop_map(Value::from)
            .boxed(),
        "op" => select(ALL_OPS.iter().copied().chain(workloads::names()).collect::<Vec<_>>()).prop_map(Value::from).boxed(),
        "params" => params().boxed(),
        "threads" | "batch" | "warmup_s" | "seconds" => number().boxed(),
        "cpu_mask" => select(CPU_MASKS.iter().map(|m| m.name).collect::<Vec<_>>()).prop_map(Value::from).boxed(),
        "id" | "cpu_vector_unmasked" => tricky_string().prop_map(Value::from).boxed(),
        _ => param_value().boxed(),
    };
    prop_oneof![3 => plausible, 1 => json_value()].boxed()
}

/// A parameter's value: one the worker announces for some parameter, a number, a tricky string
/// or anything.
fn param_value() -> impl Strategy<Value = Value> {
    let announced: Vec<Value> = param_values()
        .as_object()
        .map(|m| m.values().flat_map(|v| v.as_array().cloned().unwrap_or_default()).collect())
        .unwrap_or_default();
    prop_oneof![2 => select(announced), 2 => number(), 1 => tricky_string().prop_map(Value::from), 1 => json_value()]
}

/// A `params` object: parameter names with [`param_value`]s.
fn params() -> impl Strategy<Value = Value> {
    prop::collection::vec((select(param_keys()), param_value()), 0..5).prop_map(|kv| Value::Object(kv.into_iter().collect()))
}

/// A request built field by field: a `type` (usually a known one) and up to 8 other fields.
fn request() -> impl Strategy<Value = Value> {
    let field = select(REQUEST_FIELDS.to_vec()).prop_flat_map(|f| value_for(f).prop_map(move |v| (f, v)));
    (value_for("type"), prop::collection::vec(field, 0..8)).prop_map(|(kind, fields)| {
        let mut m = Map::new();
        m.insert("type".into(), kind);
        for (k, v) in fields {
            m.insert(k.into(), v);
        }
        Value::Object(m)
    })
}

/// Valid requests, one per operation and workload (run and check) and one of each other kind:
/// every one is accepted after `hello` (`the_corpus_is_valid`), so their mutations probe the
/// checks behind a well-formed request.
fn corpus() -> Vec<String> {
    let mut lines = vec![HELLO.to_string(), r#"{"type":"hello","protocol":1,"detail":true}"#.to_string()];
    let backends = ["mock", "openssl", "aws-lc", "ring", "rustcrypto"];
    let op_params = op_params();
    for (i, name) in ALL_OPS.iter().enumerate() {
        let entry = &op_params[*name];
        let mut params = Map::new();
        for p in entry["params"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            let value = match p {
                "size_bytes" => entry["default_size_bytes"].clone(),
                "digest" => entry["default_digest"].clone(),
                _ => entry["default_padding"].clone(),
            };
            params.insert(p.to_string(), value);
        }
        let kind = if i % 2 == 0 { "run" } else { "check" };
        let request = json!({"type": kind, "id": format!("{kind}-{name}"), "backend": backends[i % backends.len()],
                             "op": name, "params": params, "threads": 1 + i % 3, "warmup_s": 0, "seconds": 0.01, "batch": null});
        lines.push(request.to_string());
    }
    for name in workloads::names() {
        let mut params = op_params[name]["defaults"].as_object().cloned().unwrap_or_default();
        if op_params[name]["needs_dir"] == true {
            params.insert("dir".into(), std::env::temp_dir().to_string_lossy().into_owned().into());
        }
        for kind in ["run", "check"] {
            let request = json!({"type": kind, "id": format!("{kind}-{name}"), "backend": "aws-lc", "op": name,
                                 "params": params, "warmup_s": 0.1, "seconds": 1});
            lines.push(request.to_string());
        }
    }
    lines.push(
        r#"{"type":"run","id":"mask","backend":"mock","op":"sha256","cpu_mask":"baseline","cpu_vector_unmasked":"0xfffa3203078bffff:0x405fc6f1bf07ab"}"#
            .to_string(),
    );
    lines.push(r#"{"type":"bye"}"#.to_string());
    lines
}

/// Bytes JSON gives a meaning to, inserted more often than others.
const SIGNIFICANT: &[u8] = b"{}[]\":,\\ 0123456789e-.+ntf\n\r\t\xff\xc3\x80";

/// One byte-level edit; positions are taken modulo the line's length.
#[derive(Clone, Debug)]
enum Edit {
    Flip(usize, u8),
    Replace(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
    Repeat(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let byte = prop_oneof![select(SIGNIFICANT), any::<u8>()];
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(i, bit)| Edit::Flip(i, 1 << bit)),
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Edit::Replace(i, b)),
        (any::<usize>(), byte).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Edit::Repeat(i, n)),
    ]
}

fn apply(line: &mut Vec<u8>, edit: &Edit) {
    if line.is_empty() {
        return;
    }
    let len = line.len();
    let at = |i: usize| i % len;
    match *edit {
        Edit::Flip(i, bit) => {
            let i = at(i);
            line[i] ^= bit;
        }
        Edit::Replace(i, b) => {
            let i = at(i);
            line[i] = b;
        }
        Edit::Insert(i, b) => line.insert(at(i), b),
        Edit::Delete(i) => {
            line.remove(at(i));
        }
        Edit::Truncate(i) => line.truncate(at(i)),
        Edit::Repeat(i, n) => {
            let i = at(i);
            let piece: Vec<u8> = line[i..(i + n).min(line.len())].to_vec();
            line.splice(i..i, piece).for_each(drop);
        }
    }
}

/// One field-level change to a request: set (a known or random key) or remove a field, at the
/// top level or in `params`.
#[derive(Clone, Debug)]
enum Change {
    Set { in_params: bool, key: String, value: Value },
    Remove { in_params: bool, index: usize },
}

fn change() -> impl Strategy<Value = Change> {
    let set = |in_params: bool, key: String, value: Value| Change::Set { in_params, key, value };
    prop_oneof![
        // a request field, a parameter (each with a value of its kind, mostly), anything anywhere
        3 => select(REQUEST_FIELDS.to_vec())
            .prop_flat_map(move |key| value_for(key).prop_map(move |value| set(false, key.to_string(), value))),
        3 => select(param_keys()).prop_flat_map(move |key| param_value().prop_map(move |value| set(true, key.clone(), value))),
        1 => (any::<bool>(), key(), json_value()).prop_map(move |(in_params, key, value)| set(in_params, key, value)),
        1 => (any::<bool>(), any::<usize>()).prop_map(|(in_params, index)| Change::Remove { in_params, index }),
    ]
}

fn change_request(request: &mut Value, change: &Change) {
    let in_params = match change {
        Change::Set { in_params, .. } | Change::Remove { in_params, .. } => *in_params,
    };
    let Value::Object(top) = request else { return };
    let map = if in_params {
        match top.entry("params").or_insert_with(|| json!({})) {
            Value::Object(p) => p,
            _ => return,
        }
    } else {
        top
    };
    match change {
        Change::Set { key, value, .. } => {
            map.insert(key.clone(), value.clone());
        }
        Change::Remove { index, .. } => {
            if let Some(key) = map.keys().nth(index % map.len().max(1)).cloned() {
                map.remove(&key);
            }
        }
    }
}

/// A JSON text nested `depth` levels deep, in one of three shapes, around `core`.
fn nested(depth: usize, shape: u8, core: &str) -> String {
    let (open, close) = match shape % 3 {
        0 => ("[", "]"),
        1 => (r#"{"a":"#, "}"),
        _ => (r#"[{"params":"#, "}]"),
    };
    format!("{}{core}{}", open.repeat(depth), close.repeat(depth))
}

/// Join request lines with `\n`; with `cut`, end the input inside the last line (EOF mid-line).
fn conversation(lines: &[Vec<u8>], newline_at_end: bool, cut: Option<usize>) -> Vec<u8> {
    let mut input = lines.join(&b'\n');
    if let (Some(cut), Some(last)) = (cut, lines.last()) {
        if !last.is_empty() {
            let keep = input.len() - last.len() + cut % last.len();
            input.truncate(keep);
            return input;
        }
    }
    if newline_at_end && !lines.is_empty() {
        input.push(b'\n');
    }
    input
}

fn greeted(line: Vec<u8>) -> Vec<u8> {
    let mut input = format!("{HELLO}\n").into_bytes();
    input.extend(line);
    input.push(b'\n');
    input
}

// ---- properties -----------------------------------------------------------------------------

/// Run `property` on `cases()` inputs drawn from `strategy` (shrinking a failure to a minimal
/// input, which the panic message shows), then print how many inputs it served and how long
/// it took.
///
/// Holds the crate's CPU test lock: these keep a CPU busy for seconds, which tests that
/// measure this process's CPU use (`measure::sampler`) must not see.
fn fuzz<S: Strategy>(name: &str, strategy: S, property: impl Fn(S::Value)) {
    let _cpu = crate::measure::cpu_test_lock();
    let config = ProptestConfig { failure_persistence: None, ..config() };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let (start, count) = (Instant::now(), AtomicU64::new(0));
    let result = runner.run(&strategy, |input| {
        count.fetch_add(1, Ordering::Relaxed);
        property(input);
        Ok(())
    });
    eprintln!(
        "decoder fuzz: {name}: {} inputs in {:.1} s ({} conversations served by this process so far)",
        count.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64(),
        SERVED.load(Ordering::Relaxed)
    );
    if let Err(e) = result {
        panic!("decoder fuzz: {name}: {e}");
    }
}

/// Serve `input` and check the answers against the protocol; count in `accepted` the runs
/// and checks that passed every check (answered `dry`).
fn serve_and_check(input: Vec<u8>, accepted: &AtomicU64) {
    let outcome = serve_dry(input.clone());
    expect_answers(&input, &outcome);
    let dry = outcome.answers.iter().filter(|a| a["status"] == "dry").count();
    accepted.fetch_add(dry as u64, Ordering::Relaxed);
}

/// Print how many runs and checks a property had accepted; that count.
fn report_accepted(name: &str, accepted: &AtomicU64) -> u64 {
    let got = accepted.load(Ordering::Relaxed);
    eprintln!("decoder fuzz: {name}: {got} runs and checks accepted");
    got
}

/// The generator reaches past the checks: at least `per_mille` ‰ of the inputs had a run or
/// check accepted (a generator that only produced refusals would prove little). The bounds are
/// a quarter or less of what 1000 cases give (the seed is new each run); below 200 cases the
/// count is only printed.
fn assert_reaches(name: &str, accepted: &AtomicU64, per_mille: u64) {
    let (got, cases) = (report_accepted(name, accepted), u64::from(config().cases));
    if cases >= 200 {
        assert!(got * 1000 >= cases * per_mille, "{name}: only {got} accepted runs/checks in {cases} inputs");
    }
}

/// Arbitrary bytes, with or without a `hello` first.
#[test]
fn any_bytes_get_one_answer_per_line() {
    let accepted = AtomicU64::new(0);
    fuzz("any bytes", (any::<bool>(), prop::collection::vec(any::<u8>(), 0..1024)), |(greet, bytes)| {
        let mut input = if greet { format!("{HELLO}\n").into_bytes() } else { vec![] };
        input.extend(bytes);
        serve_and_check(input, &accepted);
    });
    report_accepted("any bytes", &accepted);
}

/// Requests built field by field (wrong types in every field, unknown types and fields,
/// NaN-like strings, bounds), several per conversation, the last one possibly cut off by the
/// end of input.
#[test]
fn generated_requests_get_one_answer_each() {
    let accepted = AtomicU64::new(0);
    let strategy = (
        any::<bool>(),
        prop::collection::vec(request(), 1..6),
        any::<bool>(),
        proptest::option::weighted(0.2, any::<usize>()),
    );
    fuzz("generated requests", strategy, |(greet, requests, newline_at_end, cut)| {
        let mut lines: Vec<Vec<u8>> = if greet { vec![HELLO.as_bytes().to_vec()] } else { vec![] };
        lines.extend(requests.iter().map(|r| r.to_string().into_bytes()));
        serve_and_check(conversation(&lines, newline_at_end, cut), &accepted);
    });
    report_accepted("generated requests", &accepted);
}

/// Valid requests with 1–8 byte-level edits (flipped bits, inserted JSON punctuation,
/// deletions, truncation, repeated pieces).
#[test]
fn mutated_bytes_of_valid_requests_get_one_answer() {
    let accepted = AtomicU64::new(0);
    fuzz("mutated bytes", (select(corpus()), prop::collection::vec(edit(), 1..8)), |(line, edits)| {
        let mut line = line.into_bytes();
        for e in &edits {
            apply(&mut line, e);
        }
        serve_and_check(greeted(line), &accepted);
    });
    assert_reaches("mutated bytes", &accepted, 2);
}

/// Valid requests with 1–4 fields set to other values (of the right kind or any) or removed,
/// at the top level or in `params`.
#[test]
fn mutated_fields_of_valid_requests_get_one_answer() {
    let accepted = AtomicU64::new(0);
    fuzz("mutated fields", (select(corpus()), prop::collection::vec(change(), 1..4)), |(line, changes)| {
        let mut request: Value = serde_json::from_str(&line).unwrap();
        for c in &changes {
            change_request(&mut request, c);
        }
        serve_and_check(greeted(request.to_string().into_bytes()), &accepted);
    });
    assert_reaches("mutated fields", &accepted, 30);
}

/// Numbers as JSON text no `Value` holds: hundreds of digits, exponents past f64's range,
/// `-0`, fractions with long tails, in every numeric field and parameter.
#[test]
fn huge_and_odd_numbers_get_one_answer() {
    let accepted = AtomicU64::new(0);
    let fields = vec![
        "threads", "seconds", "warmup_s", "batch", "protocol", "id", "size_bytes", "port", "stall_ms", "block_bytes",
        "file_bytes", "rsa_bits", "items", "cap", "record_bytes",
    ];
    let strategy = (select(corpus()), select(fields), "[1-9][0-9]{0,400}", 0u8..8);
    fuzz("huge numbers", strategy, |(template, field, digits, form)| {
        let raw = match form {
            0 => digits.clone(),
            1 => format!("-{digits}"),
            2 => format!("{digits}e{digits}"),
            3 => format!("1e-{digits}"),
            4 => format!("0.{digits}"),
            5 => "-0".to_string(),
            6 => format!("{digits}.{digits}E+{}", digits.len()),
            _ => "1e400".to_string(),
        };
        // The field goes in params for parameters, at the top level otherwise; the text is
        // spliced in after serialising, as no JSON value holds it.
        let mut request: Value = serde_json::from_str(&template).unwrap();
        let top = request.as_object_mut().unwrap();
        let target = if REQUEST_FIELDS.contains(&field) { Some(top) } else {
            top.entry("params").or_insert_with(|| json!({})).as_object_mut()
        };
        if let Some(m) = target {
            m.insert(field.to_string(), json!("@NUMBER@"));
        }
        let line = request.to_string().replacen("\"@NUMBER@\"", &raw, 1);
        serve_and_check(greeted(line.into_bytes()), &accepted);
    });
    assert_reaches("huge numbers", &accepted, 5);
}

/// Nesting from none to thousands of levels, at the top level, as `params`, or as `id`
/// (serde_json refuses past 128 levels: one error, no stack overflow).
#[test]
fn deep_nesting_gets_one_answer() {
    let accepted = AtomicU64::new(0);
    fuzz("deep nesting", (0usize..5_000, 0u8..3, 0u8..3), |(depth, shape, place)| {
        let line = match place {
            0 => nested(depth, shape, "1"),
            1 => format!(r#"{{"type":"run","id":"deep","backend":"mock","op":"sha256","params":{}}}"#, nested(depth, shape, "{}")),
            _ => format!(r#"{{"type":"check","id":{},"backend":"mock","op":"sha256"}}"#, nested(depth, shape, "\"x\"")),
        };
        serve_and_check(greeted(line.into_bytes()), &accepted);
    });
    report_accepted("deep nesting", &accepted);
}

/// Conversations in any order: `run`, `check` or `bye` before `hello`, two hellos, a hello for
/// another protocol in the middle (nothing is answered after it), requests after errors, blank
/// lines, CRLF endings, the end of input inside the last line.
#[test]
fn requests_in_any_order_get_the_protocols_answers() {
    let accepted = AtomicU64::new(0);
    let specials: Vec<String> = [
        r#"{"type":"hello","protocol":2}"#,
        r#"{"type":"hello"}"#,
        r#"{"type":"hello","protocol":"1"}"#,
        r#"{"type":"hello","protocol":1,"detail":"yes"}"#,
        r#"{"type":"bye"}"#,
        "",
        "   ",
        "not json",
        r#"{"type":"launch","id":"x"}"#,
    ]
    .map(str::to_string)
    .to_vec();
    let line = prop_oneof![4 => select(corpus()), 1 => select(specials), 1 => request().prop_map(|r| r.to_string())];
    let strategy = (
        prop::collection::vec(line, 0..12),
        any::<bool>(),
        any::<bool>(),
        proptest::option::weighted(0.2, any::<usize>()),
    );
    fuzz("any order", strategy, |(lines, crlf, newline_at_end, cut)| {
        let lines: Vec<Vec<u8>> = lines.into_iter().map(|l| if crlf { format!("{l}\r") } else { l }.into_bytes()).collect();
        serve_and_check(conversation(&lines, newline_at_end, cut), &accepted);
    });
    assert_reaches("any order", &accepted, 40);
}

/// The bounded line reader against the plain split of its input: whatever the limit and
/// however the input arrives in pieces, each line within the limit comes back whole, each
/// longer one as TooLong with its length, and the buffer never holds more than the limit.
#[test]
fn the_line_reader_holds_at_most_the_limit() {
    let strategy = (
        prop::collection::vec(prop_oneof![4 => any::<u8>(), 1 => Just(b'\n')], 0..1024),
        0usize..64,
        prop::collection::vec(1usize..40, 1..8),
    );
    fuzz("line reader", strategy, |(input, max, pieces)| {
        let mut reader = std::io::BufReader::with_capacity(16, Pieces { data: &input, sizes: &pieces, next: 0 });
        let mut expected: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        if expected.last().is_some_and(|l| l.is_empty()) {
            expected.pop();
        }
        let mut line = Vec::new();
        for want in expected {
            let got = read_line(&mut reader, &mut line, max).unwrap();
            assert!(line.len() <= max);
            if want.len() > max {
                assert_eq!(got, Line::TooLong { bytes: want.len() as u64 });
            } else {
                assert_eq!(got, Line::Complete);
                assert_eq!(&line[..], want);
            }
        }
        assert_eq!(read_line(&mut reader, &mut line, max).unwrap(), Line::End);
        assert_eq!(read_line(&mut reader, &mut line, max).unwrap(), Line::End);
    });
}

/// A reader that hands out `data` in pieces of the given sizes, in turn (and reports an
/// interruption before each piece, which the reader must retry).
struct Pieces<'a> {
    data: &'a [u8],
    sizes: &'a [usize],
    next: usize,
}

impl std::io::Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.next += 1;
        if self.next % 2 == 1 && !self.data.is_empty() {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let n = self.sizes[self.next % self.sizes.len()].min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// `bytes` bytes of `byte` with no `\n`, then `tail`: a line of any length without holding it.
struct Flood {
    left: u64,
    byte: u8,
    tail: std::io::Cursor<Vec<u8>>,
}

impl std::io::Read for Flood {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return self.tail.read(buf);
        }
        let n = buf.len().min(self.left as usize);
        buf[..n].fill(self.byte);
        self.left -= n as u64;
        Ok(n)
    }
}

// ---- the cases that matter most, stated once --------------------------------------------------

/// The corpus the mutations start from is valid: after `hello`, every run and check in it is
/// accepted (answered, not refused), so mutations reach the checks behind a good request.
#[test]
fn the_corpus_is_valid() {
    let _cpu = crate::measure::cpu_test_lock();
    for line in corpus() {
        let input = greeted(line.clone().into_bytes());
        let outcome = serve_dry(input.clone());
        expect_answers(&input, &outcome);
        let last = outcome.answers.last().unwrap();
        assert_ne!(last["type"], "error", "{line}: {last}");
    }
}

/// A 100 MB line without a newline: one error naming its length, then the worker reads on
/// (and answers the hello after it); the buffer never holds more than the limit.
#[test]
fn a_100_mb_line_is_refused_in_bounded_memory() {
    let _cpu = crate::measure::cpu_test_lock();
    const FLOOD: u64 = 100_000_000;
    let flood = |tail: &str| Flood { left: FLOOD, byte: b'x', tail: std::io::Cursor::new(tail.as_bytes().to_vec()) };
    let mut reader = std::io::BufReader::with_capacity(1 << 16, flood("\n"));
    let mut line = Vec::new();
    assert_eq!(read_line(&mut reader, &mut line, MAX_REQUEST_BYTES).unwrap(), Line::TooLong { bytes: FLOOD });
    assert!(line.capacity() <= 2 * MAX_REQUEST_BYTES, "the reader held {} bytes", line.capacity());
    assert_eq!(read_line(&mut reader, &mut line, MAX_REQUEST_BYTES).unwrap(), Line::End);

    // Through serve: the flood, then hello; and the flood at the end of input (EOF mid-line).
    for (tail, answers) in [(format!("\n{HELLO}\n"), 2), (String::new(), 1)] {
        let reader = std::io::BufReader::with_capacity(1 << 16, flood(&tail));
        let mut out = Vec::new();
        assert_eq!(serve_with(reader, &mut out, false, &mut Dry).unwrap(), 0);
        let got: Vec<Value> = out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect();
        assert_eq!(got.len(), answers, "{got:?}");
        assert_error(&got[0], Some("bad_request"), "flood");
        assert!(got[0]["message"].as_str().unwrap().contains("request line of 100000000 bytes is longer than the limit of 1048576"), "{}", got[0]);
        if answers == 2 {
            assert_eq!(got[1]["type"], "hello");
        }
    }
}

/// The limit is exact: a hello padded with spaces to MAX_REQUEST_BYTES is served, one byte more
/// is refused; a line of MAX_REQUEST_BYTES `[` (nesting far past serde_json's 128) is one error.
#[test]
fn the_line_limit_is_exact() {
    let _cpu = crate::measure::cpu_test_lock();
    let padded = |len: usize| format!("{HELLO}{}", " ".repeat(len - HELLO.len())).into_bytes();
    let outcome = serve_dry([padded(MAX_REQUEST_BYTES), b"\n".to_vec()].concat());
    assert_eq!(outcome.answers[0]["type"], "hello");
    let input = [padded(MAX_REQUEST_BYTES + 1), b"\n".to_vec(), HELLO.as_bytes().to_vec()].concat();
    let outcome = serve_dry(input.clone());
    expect_answers(&input, &outcome);
    assert_error(&outcome.answers[0], Some("bad_request"), "limit + 1");
    assert_eq!(outcome.answers[1]["type"], "hello");
    let input = greeted(vec![b'['; MAX_REQUEST_BYTES]);
    let outcome = serve_dry(input.clone());
    expect_answers(&input, &outcome);
    assert!(outcome.answers[1]["message"].as_str().unwrap().contains("recursion limit"), "{}", outcome.answers[1]);
}

/// Out of order, stated once: run, check and bye before hello are refused (with their id) and
/// hello still works after them; a second hello is answered again; after a protocol mismatch
/// nothing is read; a hello whose detail is not a boolean is refused without greeting.
#[test]
fn out_of_order_requests_are_refused_and_the_worker_goes_on() {
    let _cpu = crate::measure::cpu_test_lock();
    let run = r#"{"type":"run","id":"early","backend":"mock","op":"sha256"}"#;
    let input = [
        run,
        r#"{"type":"check","id":"early-check","backend":"mock","op":"sha256"}"#,
        r#"{"type":"bye"}"#,
        r#"{"type":"hello","protocol":1,"detail":"yes"}"#,
        run,
        HELLO,
        HELLO,
        run,
        r#"{"type":"hello","protocol":2}"#,
        run,
    ]
    .join("\n");
    let outcome = serve_dry(input.clone().into_bytes());
    expect_answers(input.as_bytes(), &outcome);
    let kinds: Vec<_> = outcome.answers.iter().map(|a| a["code"].as_str().or(a["type"].as_str()).unwrap()).collect();
    assert_eq!(kinds, ["bad_request", "bad_request", "bad_request", "bad_request", "bad_request", "hello", "hello", "result", "protocol_mismatch"]);
    assert_eq!(outcome.answers[0]["id"], "early");
    assert_eq!(outcome.answers[1]["id"], "early-check");
    assert!(outcome.answers[3]["message"].as_str().unwrap().contains("detail must be true or false"));
    assert!(outcome.answers[8]["message"].as_str().unwrap().contains("asked for 2"));
    assert_eq!(outcome.status, EXIT_PROTOCOL_MISMATCH);
}

/// Bytes that are not UTF-8 get an error naming where, and the worker reads on; so does a
/// request cut short by the end of input; a control character quoted from a request is escaped
/// in the message, which stays one line.
#[test]
fn non_utf8_and_truncated_lines_get_one_error_each() {
    let _cpu = crate::measure::cpu_test_lock();
    let mut input = format!("{HELLO}\n").into_bytes();
    input.extend(b"{\"type\":\"run\",\"id\":\"\xff\xfe\"}\n");
    input.extend(br#"{"type":"run","id":"t","backend":"mo"#);
    let outcome = serve_dry(input.clone());
    expect_answers(&input, &outcome);
    assert_eq!(outcome.answers.len(), 3);
    assert!(outcome.answers[1]["message"].as_str().unwrap().contains("not UTF-8: invalid bytes at offset 20"), "{}", outcome.answers[1]);
    assert!(outcome.answers[2]["message"].as_str().unwrap().contains("not JSON: EOF while parsing"), "{}", outcome.answers[2]);
    let outcome = serve_dry(greeted(br#"{"type":"ru\n\u001b[31m"}"#.to_vec()));
    assert_eq!(outcome.answers[1]["message"], "unknown request type 'ru\\n\\u{1b}[31m'; known: hello, run, check, bye");
}
