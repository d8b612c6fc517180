//! Protocol v1: JSON lines on stdin/stdout (docs/worker-protocol.md). Requests are checked
//! fully before anything runs; every problem becomes an `error` message a person can act on.

use crate::backends::{self, Backend, BackendError};
use crate::cpu::{self, CapVector, CpuInfo, CpuMask, MaskProblem, CPU_MASKS};
use crate::kat;
use crate::measure::{self, Plan};
use crate::result::{MaskFields, Measured, RunResult, Status};
use crate::workloads;
use crate::ops::prepare::{bytes_per_op, prepare};
use crate::ops::{self, DigestAlg, Op, Params, RawParams, RsaPadding, ALL_OPS};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::io::{BufRead, Write};
use std::time::Duration;

/// The protocol version this worker speaks.
pub const PROTOCOL_VERSION: u64 = 1;
/// Exit status after a protocol mismatch.
pub const EXIT_PROTOCOL_MISMATCH: i32 = 2;

/// Limits on a `run` request, checked by `parse_run` and announced in `hello`'s `limits` (with
/// `ops::MAX_SIZE` and `measure::MAX_BATCH`, also checked where they are defined).
pub const MAX_THREADS: usize = 1024;
pub const MAX_SECONDS: f64 = 3600.0;
pub const MAX_WARMUP_S: f64 = 600.0;

/// A request the worker refuses, with the protocol's error `code` and a sentence for a person.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    pub code: &'static str,
    pub message: String,
}

fn refuse(code: &'static str, message: impl Into<String>) -> RequestError {
    RequestError { code, message: message.into() }
}

/// The fields of a `run` request (docs/worker-protocol.md, "run").
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunRequest {
    #[serde(default)]
    id: String,
    backend: String,
    op: String,
    /// Checked against the operation ([`RawParams`]) or the workload (`workloads::parse`).
    #[serde(default)]
    params: Map<String, Value>,
    #[serde(default = "one")]
    threads: usize,
    #[serde(default = "default_warmup_s")]
    warmup_s: f64,
    #[serde(default = "default_seconds")]
    seconds: f64,
    #[serde(default)]
    batch: Option<u64>,
    #[serde(default)]
    cpu_mask: Option<String>,
    /// `0x<word0>:0x<word1>`: the vector this backend's library reported in a worker started
    /// without `OPENSSL_ia32cap`, which the library's vector under `cpu_mask` must match.
    #[serde(default)]
    cpu_vector_unmasked: Option<String>,
}

fn one() -> usize {
    1
}
fn default_warmup_s() -> f64 {
    0.2
}
fn default_seconds() -> f64 {
    1.0
}

/// What a `run` request measures: a primitive operation or a workload.
enum What {
    Op { op: Op, params: Params },
    Workload(Box<workloads::WorkloadCase>),
}

impl Case {
    /// The resolved parameters of a primitive operation (tests).
    #[cfg(test)]
    fn op_params(self) -> Params {
        match self.what {
            What::Op { params, .. } => params,
            What::Workload(_) => panic!("a workload has no operation parameters"),
        }
    }
}

/// A `run` request after every check: ready to execute.
struct Case {
    id: String,
    backend_name: String,
    backend: Box<dyn Backend>,
    op_name: String,
    what: What,
    plan: Plan,
    /// The CPU capability mask the orchestrator started this worker with, to verify.
    cpu_mask: Option<&'static CpuMask>,
    /// The library's vector without the variable, to verify the mask's vector against.
    cpu_vector_unmasked: Option<CapVector>,
}

/// The longest request line the worker reads, in bytes (the `\n` not counted); announced in
/// `hello`'s `limits` as `max_request_bytes`. A longer line is not decoded: its bytes are
/// discarded as they arrive, never held, and it is answered with one `bad_request` error, so a
/// runaway or hostile writer cannot make the worker hold more than this much of one line.
/// Real requests are a few hundred bytes.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Serve requests until `bye` or end of input. Returns the process exit status: 0 after `bye`
/// or end of input, [`EXIT_PROTOCOL_MISMATCH`] after a `hello` for another protocol.
///
/// Every non-blank line gets exactly one answer line (except `bye`, which ends the worker):
/// lines longer than [`MAX_REQUEST_BYTES`], not UTF-8, not JSON or not a valid request get an
/// `error` and the worker reads on. A last line without its `\n` is served like any other.
/// Errors: only reading the input or writing the output failing (e.g. a broken pipe).
pub fn serve(input: impl BufRead, output: impl Write) -> std::io::Result<i32> {
    let cpu = CpuInfo::read();
    let tsc = cpu.tsc;
    serve_with(input, output, tsc, &mut Measure { cpu })
}

/// What [`serve_with`] does with a request that passed every check: answer `hello`, measure a
/// `run`, answer a `check`. The worker's own is [`Measure`]; the decoder's property tests use
/// one that answers without measuring, so they exercise everything else `serve` does.
trait Actions {
    fn hello(&mut self, detail: bool) -> Value;
    fn run(&mut self, case: Case) -> Value;
    fn check(&mut self, case: Case) -> Value;
}

/// The worker's [`Actions`]: the real `hello`, `run` and `check`.
struct Measure {
    cpu: CpuInfo,
}

impl Actions for Measure {
    fn hello(&mut self, detail: bool) -> Value {
        hello(&self.cpu, detail)
    }
    fn run(&mut self, case: Case) -> Value {
        run(case)
    }
    fn check(&mut self, case: Case) -> Value {
        check(case)
    }
}

/// [`serve`] with the accepted requests handed to `actions`; `tsc` is whether this CPU has a
/// time-stamp counter (recorded in every run's plan).
fn serve_with(
    mut input: impl BufRead,
    mut output: impl Write,
    tsc: bool,
    actions: &mut impl Actions,
) -> std::io::Result<i32> {
    let mut session = Session { greeted: false, tsc };
    let mut line = Vec::new();
    loop {
        let step = match read_line(&mut input, &mut line, MAX_REQUEST_BYTES)? {
            Line::End => return Ok(0),
            Line::TooLong { bytes } => Step::Reply(error_message(None, &too_long(bytes))),
            Line::Complete => session.decode(&line),
        };
        let answer = match step {
            Step::Nothing => continue,
            Step::Reply(message) => message,
            Step::Hello { detail } => actions.hello(detail),
            Step::Run(case) => actions.run(*case),
            Step::Check(case) => actions.check(*case),
            Step::End { message, status } => {
                if let Some(m) = message {
                    send(&mut output, m)?;
                }
                return Ok(status);
            }
        };
        send(&mut output, answer)?;
    }
}

fn too_long(bytes: u64) -> RequestError {
    refuse(
        "bad_request",
        format!(
            "request line of {bytes} bytes is longer than the limit of {MAX_REQUEST_BYTES} bytes \
             (hello's limits.max_request_bytes); it was skipped"
        ),
    )
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A line of at most the limit's bytes is in the buffer (without its `\n`; the last line of
    /// the input may have had none).
    Complete,
    /// A line of `bytes` bytes, more than the limit, was read past and discarded.
    TooLong { bytes: u64 },
    /// End of input, nothing pending.
    End,
}

/// Read one `\n`-terminated line into `line` (cleared first), holding at most `max` bytes of
/// it: the bytes of a longer line are consumed and dropped up to its `\n` (or the end of input),
/// so memory stays within `max` plus the reader's own buffer whatever the input.
/// Errors: the reader's (an interrupted read is retried).
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> std::io::Result<Line> {
    line.clear();
    let mut seen: u64 = 0;
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(match seen {
                0 => Line::End,
                n if n > max as u64 => Line::TooLong { bytes: n },
                _ => Line::Complete,
            });
        }
        let (part, newline) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], true),
            None => (chunk, false),
        };
        let n = part.len();
        if seen + n as u64 <= max as u64 {
            line.extend_from_slice(part);
        }
        seen += n as u64;
        input.consume(n + usize::from(newline));
        if newline {
            if seen > max as u64 {
                line.clear();
                return Ok(Line::TooLong { bytes: seen });
            }
            return Ok(Line::Complete);
        }
    }
}

/// The protocol state of one conversation: whether `hello` was answered.
struct Session {
    greeted: bool,
    tsc: bool,
}

/// What one request line asks for, decided before anything runs.
enum Step {
    /// A blank line: no answer.
    Nothing,
    /// Answer with this message (an `error`), then read on.
    Reply(Value),
    /// Answer `hello` (with every backend's support for every operation if `detail`).
    Hello { detail: bool },
    /// Measure this checked case.
    Run(Box<Case>),
    /// Say whether this checked case is supported, without measuring.
    Check(Box<Case>),
    /// Send `message` if any, then end with `status` (`bye`; a protocol mismatch).
    End { message: Option<Value>, status: i32 },
}

impl Session {
    /// Decode and check one request line (without its `\n`), updating the state; never panics,
    /// whatever the bytes (the property tests in protocol_fuzz.rs hold it to that).
    fn decode(&mut self, line: &[u8]) -> Step {
        let text = match std::str::from_utf8(line) {
            Ok(text) => text,
            Err(e) => {
                let e = refuse(
                    "bad_request",
                    format!("request is not UTF-8: invalid bytes at offset {}", e.valid_up_to()),
                );
                return Step::Reply(error_message(None, &e));
            }
        };
        if text.trim().is_empty() {
            return Step::Nothing;
        }
        let (kind, body) = match split_type(text) {
            Ok(parts) => parts,
            Err(e) => return Step::Reply(error_message(None, &e)),
        };
        let id = body.get("id").and_then(Value::as_str).map(str::to_owned);
        let error = |e: RequestError| Step::Reply(error_message(id.as_deref(), &e));
        match (kind.as_str(), self.greeted) {
            ("hello", _) => {
                let wanted = body.get("protocol");
                if wanted.and_then(Value::as_u64) != Some(PROTOCOL_VERSION) {
                    let e = refuse(
                        "protocol_mismatch",
                        format!(
                            "this worker speaks protocol {PROTOCOL_VERSION}, the orchestrator \
                             asked for {}; install matching versions of cryptoperf and its worker \
                             (`pip install .` builds both)",
                            wanted.map_or("none".to_string(), |v| clip(&v.to_string()))
                        ),
                    );
                    return Step::End { message: Some(error_message(None, &e)), status: EXIT_PROTOCOL_MISMATCH };
                }
                let detail = match body.get("detail") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(other) => {
                        let e = refuse("bad_request", format!("hello: detail must be true or false, got {}", clip(&other.to_string())));
                        return error(e);
                    }
                };
                self.greeted = true;
                Step::Hello { detail }
            }
            (_, false) => error(refuse("bad_request", "the first request must be hello")),
            ("run", true) => match parse_run(body, self.tsc).and_then(ready_to_run) {
                Ok(case) => Step::Run(Box::new(case)),
                Err(e) => error(e),
            },
            // A workload's combination, checked without measuring (docs/worker-protocol.md,
            // "check"): the orchestrator asks before a study's first repetition.
            ("check", true) => match parse_run(body, self.tsc) {
                Ok(case) => Step::Check(Box::new(case)),
                Err(e) => error(e),
            },
            ("bye", true) => Step::End { message: None, status: 0 },
            (other, true) => error(refuse(
                "bad_request",
                format!("unknown request type '{}'; known: hello, run, check, bye", clip(other)),
            )),
        }
    }
}

/// `text` cut to its first 100 characters (with `…` when cut), to quote a value from a request
/// in a message.
fn clip(text: &str) -> String {
    match text.char_indices().nth(100) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// Write one message as one line and flush, so the orchestrator sees it at once.
fn send(output: &mut impl Write, message: Value) -> std::io::Result<()> {
    serde_json::to_writer(&mut *output, &message)?;
    output.write_all(b"\n")?;
    output.flush()
}

/// Split a request line into its `type` and the remaining fields.
fn split_type(line: &str) -> Result<(String, Map<String, Value>), RequestError> {
    let value: Value = serde_json::from_str(line)
        .map_err(|e| refuse("bad_request", format!("request is not JSON: {e}")))?;
    let Value::Object(mut map) = value else {
        return Err(refuse("bad_request", "request is not a JSON object"));
    };
    match map.remove("type") {
        Some(Value::String(kind)) => Ok((kind, map)),
        _ => Err(refuse("bad_request", "request has no string field \"type\"")),
    }
}

/// The `error` message for `e`; its text is kept to one line ([`one_line`]) whatever it quotes
/// from the request.
fn error_message(id: Option<&str>, e: &RequestError) -> Value {
    json!({"type": "error", "id": id, "code": e.code, "message": one_line(&e.message)})
}

/// `text` with its control characters escaped (a newline as `\n`, ESC as `\u{1b}`), so a
/// message quoting a value from a request (`unknown suite '…'`) stays one line when a person's
/// terminal or a log shows it.
fn one_line(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// The `hello` response; with `detail`, every backend's support for every operation (this
/// prepares each case once, so it takes a moment: the orchestrator asks for it only once).
fn hello(cpu: &CpuInfo, detail: bool) -> Value {
    let backends: Vec<Value> = backends::all_names()
        .filter_map(backends::by_name)
        .map(|b| {
            let info = b.info();
            // In the FIPS worker, a library without FIPS mode here supports nothing.
            let refused = crate::fips::unavailable(info.backend);
            let mut entry = serde_json::to_value(&info).expect("LibraryInfo serialises");
            entry["capabilities"] = b.capabilities().to_json();
            // A backend that reaches a device says which kind (the orchestrator sets it up).
            if backends::DEVICES.contains(&info.backend) {
                entry["device"] = json!(info.backend);
            }
            if detail {
                entry["ops"] = ALL_OPS
                    .iter()
                    .map(|name| support(&*b, name, refused.as_deref()))
                    .chain(workloads::names().into_iter().map(|name| workload_support(info.backend, name, refused.as_deref())))
                    .collect();
            }
            entry
        })
        .collect();
    json!({
        "type": "hello",
        "protocol": PROTOCOL_VERSION,
        "worker_version": env!("CARGO_PKG_VERSION"),
        "build": crate::fips::BUILD,
        "cpu": cpu,
        // A profiler under control (`perf record --control`) is told the measured window's
        // edges through the FIFOs these variables name (measure::profile).
        "profile_control": {"ctl_env": crate::measure::profile::CTL_ENV, "ack_env": crate::measure::profile::ACK_ENV},
        "cpu_masks": CPU_MASKS
            .iter()
            .map(|m| json!({
                "name": m.name,
                "openssl_ia32cap": m.env_value(),
                "clears": m.flags,
                "description": m.description,
            }))
            .collect::<Vec<_>>(),
        "backends": backends,
        "ops": ALL_OPS.iter().copied().chain(workloads::names()).collect::<Vec<_>>(),
        "limits": limits(),
        "op_params": op_params(),
        "param_values": param_values(),
    })
}

/// `hello`'s `limits`: the largest values `parse_run` and `Params::resolve` accept, from the
/// constants they check, the longest request line `serve` reads, and a workload level's limits
/// (`max_concurrency`, `open_threads`, `max_targets`).
fn limits() -> Value {
    let mut v = json!({
        "max_threads": MAX_THREADS,
        "max_seconds": MAX_SECONDS,
        "max_warmup_s": MAX_WARMUP_S,
        "max_size_bytes": ops::MAX_SIZE,
        "max_batch": measure::MAX_BATCH,
        "max_request_bytes": MAX_REQUEST_BYTES,
    });
    for (name, limit) in workloads::base::limits() {
        v[name] = limit.into();
    }
    v
}

/// `hello`'s `op_params`: per operation, the `params` fields it takes and the defaults
/// `Params::resolve` fills in (from the same `Op` methods it uses).
fn op_params() -> Value {
    let entries = ALL_OPS.iter().map(|name| {
        let op = Op::parse(name).expect("ALL_OPS parse");
        let mut entry = json!({"params": op.param_names(), "default_size_bytes": op.default_size()});
        if let Some(d) = op.default_digest() {
            entry["default_digest"] = d.name().into();
        }
        if let Some(p) = op.default_padding() {
            entry["default_padding"] = p.name().into();
        }
        entry["fips"] = crate::fips::hello_entry(op);
        (name.to_string(), entry)
    });
    let workloads = workloads::names().into_iter().map(|name| (name.to_string(), workloads::op_params(name)));
    Value::Object(entries.chain(workloads).collect())
}

/// `hello`'s `param_values`: the values `digest` and `padding` may take.
fn param_values() -> Value {
    let mut v = json!({
        "digest": DigestAlg::ALL.map(DigestAlg::name),
        "padding": RsaPadding::ALL.map(RsaPadding::name),
    });
    if let Value::Object(m) = &mut v {
        m.extend(workloads::param_values());
    }
    v
}

/// Whether `backend` runs the workload `name` at all (which combinations of its parameters it
/// lacks is said per request, as `unsupported` with the reason).
fn workload_support(backend: &str, name: &str, refused: Option<&str>) -> Value {
    if let Some(r) = refused {
        return json!({"op": name, "status": "unsupported", "reason": r});
    }
    match workloads::parse(name, backend, &Map::new()) {
        Ok(_) => json!({"op": name, "status": "supported"}),
        Err(r) => json!({"op": name, "status": "unsupported", "reason": r}),
    }
}

/// Whether `backend` can prepare the operation `name` with default parameters; `refused`, the
/// reason the whole backend cannot run in this build (`fips::unavailable`), answers for it.
fn support(backend: &dyn Backend, name: &str, refused: Option<&str>) -> Value {
    if let Some(r) = refused {
        return json!({"op": name, "status": "unsupported", "reason": r});
    }
    let op = Op::parse(name).expect("ALL_OPS parse");
    let params = Params::resolve(op, &RawParams::default()).expect("defaults resolve");
    match prepare(backend, op, &params) {
        Ok(_) => json!({"op": name, "status": "supported"}),
        Err(BackendError::Unsupported(r)) => json!({"op": name, "status": "unsupported", "reason": r}),
        Err(BackendError::Failed(r)) => json!({"op": name, "status": "error", "reason": r}),
    }
}

/// Check every field of a `run` request.
fn parse_run(body: Map<String, Value>, tsc: bool) -> Result<Case, RequestError> {
    let req: RunRequest = serde_json::from_value(Value::Object(body))
        .map_err(|e| refuse("bad_request", format!("run request: {e}")))?;
    let backend = backends::by_name(&req.backend).ok_or_else(|| {
        refuse(
            "unknown_backend",
            format!("unknown backend '{}'; known: {}", req.backend, backends::all_names().collect::<Vec<_>>().join(", ")),
        )
    })?;
    // A device (a PKCS#11 token) is opened, and logged in to, before anything else: a missing
    // module or a wrong PIN is the whole study's problem, not this case's (the orchestrator
    // stops at the first such answer rather than try the PIN again).
    backend.open().map_err(|e| refuse("device_unavailable", format!("{}: {e}", req.backend)))?;
    let what = if workloads::is_workload(&req.op) {
        if req.threads != 1 || req.batch.is_some() {
            return Err(refuse(
                "bad_params",
                format!("{}: a workload takes its concurrency from params.load (closed:N, open:RATE), not threads or batch", req.op),
            ));
        }
        let case = workloads::parse(&req.op, &req.backend, &req.params)
            .map_err(|e| refuse("bad_params", format!("{}: {e}", req.op)))?;
        What::Workload(Box::new(case))
    } else {
        let op = Op::parse(&req.op).ok_or_else(|| {
            let known: Vec<&str> = ALL_OPS.iter().copied().chain(workloads::names()).collect();
            refuse("unknown_op", format!("unknown operation '{}'; known: {}", req.op, known.join(", ")))
        })?;
        let raw: RawParams = serde_json::from_value(Value::Object(req.params.clone()))
            .map_err(|e| refuse("bad_params", format!("{}: params: {e}", req.op)))?;
        let params = Params::resolve(op, &raw).map_err(|e| refuse("bad_params", format!("{}: {e}", req.op)))?;
        What::Op { op, params }
    };
    if !(1..=MAX_THREADS).contains(&req.threads) {
        return Err(refuse("bad_params", format!("threads must be 1..={MAX_THREADS}, got {}", req.threads)));
    }
    if !(req.seconds > 0.0 && req.seconds <= MAX_SECONDS) {
        return Err(refuse("bad_params", format!("seconds must be in (0, {MAX_SECONDS}], got {}", req.seconds)));
    }
    if !(0.0..=MAX_WARMUP_S).contains(&req.warmup_s) {
        return Err(refuse("bad_params", format!("warmup_s must be in [0, {MAX_WARMUP_S}], got {}", req.warmup_s)));
    }
    if let Some(k) = req.batch {
        if !(1..=measure::MAX_BATCH).contains(&k) {
            return Err(refuse("bad_params", format!("batch must be 1..={}, got {k}", measure::MAX_BATCH)));
        }
    }
    let cpu_mask = match req.cpu_mask.as_deref() {
        None => None,
        Some(name) => Some(CpuMask::by_name(name).ok_or_else(|| {
            let known: Vec<_> = CPU_MASKS.iter().map(|m| m.name).collect();
            refuse(
                "bad_params",
                format!("unknown cpu_mask '{name}'; known: {}, or several but baseline joined by '+'", known.join(", ")),
            )
        })?),
    };
    let cpu_vector_unmasked = match req.cpu_vector_unmasked.as_deref() {
        None => None,
        Some(_) if cpu_mask.is_none() => {
            return Err(refuse(
                "bad_params",
                "cpu_vector_unmasked is checked against a cpu_mask's vector; give cpu_mask too",
            ))
        }
        Some(text) => Some(CapVector::parse_hex(text).ok_or_else(|| {
            refuse(
                "bad_params",
                format!(
                    "cpu_vector_unmasked must be '0x<word0>:0x<word1>' (hex, as hello's \
                     backends[].capabilities.openssl_ia32cap), got '{text}'"
                ),
            )
        })?),
    };
    Ok(Case {
        id: req.id,
        cpu_mask,
        cpu_vector_unmasked,
        backend_name: req.backend,
        backend,
        op_name: req.op,
        what,
        plan: Plan {
            warmup: Duration::from_secs_f64(req.warmup_s),
            budget: Duration::from_secs_f64(req.seconds),
            threads: req.threads,
            batch: req.batch,
            tsc,
        },
    })
}

/// A checked case that a `run` (not a `check`) can start: a workload's required parameters are
/// there (storage's `dir`), else `bad_params` with one line.
fn ready_to_run(case: Case) -> Result<Case, RequestError> {
    if let What::Workload(w) = &case.what {
        workloads::ready_to_run(w).map_err(|e| refuse("bad_params", format!("{}: {e}", case.op_name)))?;
    }
    Ok(case)
}

/// Validate, then measure, a case; the `result` message in every outcome.
fn run(case: Case) -> Value {
    let info = case.backend.info();
    let params = match &case.what {
        What::Op { params, .. } => match serde_json::to_value(params).expect("Params serialise") {
            Value::Object(m) => m,
            _ => Map::new(),
        },
        What::Workload(w) => w.raw.clone(),
    };
    let result = RunResult::new(case.id.clone(), case.backend_name.clone(), case.op_name.clone(), &info, params, case.plan.threads);
    // The capability mask: recorded in every result, and verified before anything is checked
    // or timed when the request names one (docs/worker-protocol.md, "CPU capability masks").
    // In the FIPS worker, a library without FIPS mode here is never measured as FIPS.
    if let Some(r) = crate::fips::unavailable(info.backend) {
        return result.ended(Status::Unsupported, r).to_json();
    }
    let (mut result, problem) = masked(result, &case, &info.library);
    if let Some((status, reason)) = problem {
        return result.ended(status, reason).to_json();
    }
    let (op, params) = match &case.what {
        What::Op { op, params } => (*op, params),
        What::Workload(w) => return w.fill(workloads::run(w, &*case.backend, case.plan.warmup, case.plan.budget), result).to_json(),
    };
    let (fips_approved, fips_reason) = crate::fips::run_fields(info.backend, info.fips, op, params);
    result.fips_approved = Some(fips_approved);
    result.fips_reason = fips_reason;
    let validation = match kat::validate(&*case.backend, op, params) {
        Ok(v) => v,
        Err(BackendError::Unsupported(r)) => return result.ended(Status::Unsupported, r).to_json(),
        Err(BackendError::Failed(e)) => return result.ended(Status::Invalid, format!("validation could not run: {e}")).to_json(),
    };
    let failure = validation.failure();
    result.validation = Some(validation.into());
    if let Some(why) = failure {
        return result.ended(Status::Invalid, why).to_json();
    }
    let backend = &*case.backend;
    let companion = backend.companion();
    match measure::measure(|| prepare(backend, op, params), case.plan, companion.as_ref()) {
        Ok(m) => {
            result.measured = Some(Measured::of(&m, bytes_per_op(op, params)));
            result.to_json()
        }
        Err(BackendError::Unsupported(r)) => result.ended(Status::Unsupported, r).to_json(),
        Err(BackendError::Failed(e)) => result.ended(Status::Invalid, format!("operation failed while measured: {e}")).to_json(),
    }
}

/// `result` with the case's CPU mask and the library's capabilities, and, when the request
/// names a mask, the problem if it is not applied (`unsupported`: the library has no runtime
/// mask; `invalid`: the mask is not in force).
fn masked(mut result: RunResult, case: &Case, library: &str) -> (RunResult, Option<(Status, String)>) {
    let caps = case.backend.capabilities();
    let mut mask = MaskFields { cpu_mask: case.cpu_mask.map(|m| m.name.to_string()), capabilities: caps.to_json(), cpu_mask_cleared: None };
    let mut problem = None;
    if let Some(m) = case.cpu_mask {
        if let cpu::Capabilities::Vector { vector, .. } = &caps {
            mask.cpu_mask_cleared = Some(mask_cleared(m, vector).into_iter().map(str::to_string).collect());
        }
        let env = std::env::var(cpu::MASK_ENV).ok();
        problem = match cpu::check_mask(m, library, &caps, env.as_deref(), case.cpu_vector_unmasked.as_ref()) {
            Ok(()) => None,
            Err(MaskProblem::NotMaskable(r)) => Some((Status::Unsupported, r)),
            Err(MaskProblem::NotApplied(r)) => Some((Status::Invalid, r)),
        };
    }
    result.mask = Some(mask);
    (result, problem)
}

/// The `check` answer: `{"type":"checked", id, backend, op, status, reason}` — `supported`, or
/// `unsupported` with the reason, for a workload's combination (its implementations configured
/// as asked, nothing run); a primitive operation is `supported` when its backend prepares it.
/// A supported workload adds `planned_wait_s`, the seconds a run waits by design (a job's
/// latency model), and a job `planned_work_s`, a rough estimate of its own work's, for the
/// orchestrator's time estimate.
fn check(case: Case) -> Value {
    let mut answer = json!({"type": "checked", "id": case.id, "backend": case.backend_name, "op": case.op_name});
    let info = case.backend.info();
    let verdict = if let Some(r) = crate::fips::unavailable(info.backend) {
        Err(r)
    } else {
        match &case.what {
            What::Workload(w) => workloads::check(w, &*case.backend),
            What::Op { op, params } => match prepare(&*case.backend, *op, params) {
                Err(BackendError::Unsupported(r)) => Err(r),
                _ => Ok(()),
            },
        }
    };
    match verdict {
        Ok(()) => {
            answer["status"] = "supported".into();
            if let What::Workload(w) = &case.what {
                let planned = workloads::planned(w);
                answer["planned_wait_s"] = planned.wait_s.into();
                if let Some(s) = planned.work_s {
                    answer["planned_work_s"] = s.into();
                }
            }
        }
        Err(r) => {
            answer["status"] = "unsupported".into();
            answer["reason"] = r.into();
        }
    }
    answer
}

/// The flags `mask` took away here: present in the CPU (CPUID) and absent from the vector the
/// library uses. Empty for a mask whose extensions this CPU lacks anyway.
fn mask_cleared(mask: &CpuMask, library: &CapVector) -> Vec<&'static str> {
    let Some(hw) = CapVector::from_cpuid() else { return vec![] };
    mask.flags.iter().copied().filter(|f| hw.has(f) && !library.has(f)).collect()
}

/// The decoder's property tests (proptest): every input gets one answer, no panic, no hang.
#[cfg(test)]
#[path = "protocol_fuzz.rs"]
mod fuzz;

/// The loop's unit tests: whole conversations through `serve`.
#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
