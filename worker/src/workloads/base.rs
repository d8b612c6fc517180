//! What every workload builds on: the [`Workload`] trait a workload implements (one file per
//! workload, one line in `workloads::WORKLOADS`), the spec it announces in `hello`
//! ([`WorkloadSpec`]), the checked request ([`WorkloadCase`]) with the parameters all workloads
//! share ([`Common`]), how a run ends ([`Finish`]), a server side's parts ([`ServerSide`]), and
//! the helpers the workload files share (parameter readers, CPU pinning, a helper process's
//! line to its parent). It knows no workload by name.

use crate::backends::Backend;
use crate::result::{Level, Measured, RunResult, Status, Validation, WorkloadDetail, WorkloadResult};
use crate::measure::load::{Load, MAX_CONCURRENCY, MAX_TARGETS, OPEN_THREADS};
use serde::Serialize;
use serde_json::{Map, Value};
use std::any::Any;
use std::net::{IpAddr, TcpStream};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// A request's `params`, as given.
pub type Params = Map<String, Value>;

/// One workload: its name, what it announces in `hello` ([`WorkloadSpec`]: parameters, level
/// kinds, modes, sizing), how it checks a request's own parameters into its
/// [`Workload::Request`], whether this worker can run that request ([`Workload::check`]), how it
/// runs it, and — for a workload with a server in its own process — that server's side.
///
/// The parameters every workload shares (load level, mode, address, port, stall) are checked
/// before [`Workload::parse`], against the spec ([`parse_with`]).
pub trait Workload: Sync + 'static {
    /// A request of this workload, its own parameters checked.
    type Request: Send + Sync + 'static;

    /// The name a `run` request gives as its `op` (`tls-handshake`).
    const NAME: &'static str;

    /// What `hello` announces about this workload (`op_params[name]`).
    fn spec(&self) -> WorkloadSpec;

    /// Check the request's own parameters (`params` holds the common ones too, already checked
    /// into `common`). Errors: one line naming the parameter and what it accepts.
    fn parse(&self, backend: &str, params: &Params, common: &Common) -> Result<Self::Request, String>;

    /// Whether `backend` (and this host) can run `request` at all, measuring nothing and writing
    /// nothing: `Err(reason)` for a combination the library or the host lacks.
    fn check(&self, request: &Self::Request, backend: &dyn Backend) -> Result<(), String>;

    /// Validate, then measure `request` at the case's load level for `warmup` + `budget` (a job
    /// runs to its end instead).
    fn run(&self, request: &Self::Request, case: &WorkloadCase, backend: &dyn Backend, warmup: Duration, budget: Duration) -> Finish;

    /// What a run of `request` plans to take, for the orchestrator's time estimate (`check`'s
    /// `planned_wait_s` and `planned_work_s`). By default no wait and no estimate of its work.
    fn planned(&self, request: &Self::Request, common: &Common) -> Planned {
        let _ = (request, common);
        Planned::default()
    }

    /// The server side, built in its own process (`workloads::server`); `side` is what the
    /// client told this server process about its part (`null` for a workload with one server).
    /// Errors: a [`StartError`]; by default this workload has no server.
    fn server_side(&self, request: &Self::Request, case: &WorkloadCase, side: &Value) -> Result<ServerSide, StartError> {
        let _ = (request, side);
        Err(StartError::new("bad_params", format!("{} has no server", case.name)))
    }
}

/// [`Workload`] with its request type erased, so the registry can hold every workload in one
/// slice (implemented for every `Workload`; a request reaches only the workload that parsed it).
pub trait DynWorkload: Sync {
    fn name(&self) -> &'static str;
    fn spec(&self) -> WorkloadSpec;
    fn parse_request(&self, backend: &str, params: &Params, common: &Common) -> Result<Box<dyn Any + Send + Sync>, String>;
    fn check_request(&self, case: &WorkloadCase, backend: &dyn Backend) -> Result<(), String>;
    fn planned_request(&self, case: &WorkloadCase) -> Planned;
    fn run_request(&self, case: &WorkloadCase, backend: &dyn Backend, warmup: Duration, budget: Duration) -> Finish;
    fn server_request(&self, case: &WorkloadCase, side: &Value) -> Result<ServerSide, StartError>;
}

impl<W: Workload> DynWorkload for W {
    fn name(&self) -> &'static str {
        W::NAME
    }
    fn spec(&self) -> WorkloadSpec {
        Workload::spec(self)
    }
    fn parse_request(&self, backend: &str, params: &Params, common: &Common) -> Result<Box<dyn Any + Send + Sync>, String> {
        Ok(Box::new(self.parse(backend, params, common)?))
    }
    fn check_request(&self, case: &WorkloadCase, backend: &dyn Backend) -> Result<(), String> {
        self.check(own(case), backend)
    }
    fn planned_request(&self, case: &WorkloadCase) -> Planned {
        self.planned(own(case), &case.common)
    }
    fn run_request(&self, case: &WorkloadCase, backend: &dyn Backend, warmup: Duration, budget: Duration) -> Finish {
        self.run(own(case), case, backend, warmup, budget)
    }
    fn server_request(&self, case: &WorkloadCase, side: &Value) -> Result<ServerSide, StartError> {
        self.server_side(own(case), case, side)
    }
}

/// The request of `case`, which its own workload parsed (so it is of that workload's type).
fn own<T: 'static>(case: &WorkloadCase) -> &T {
    case.request::<T>().expect("a case reaches the workload that parsed it")
}

// ---- the spec announced in hello ------------------------------------------------------------

/// A kind of load level (`hello`'s `levels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LevelKind {
    /// `closed:N`, `closed:N@RATE`.
    Closed,
    /// `open:RATE`, `open:RATE/THREADS`.
    Open,
    /// `open:100MB/s`: an open level given in bytes per second, turned into `open:RATE` by the
    /// orchestrator with the spec's `bytes_per_tx_param`.
    OpenBytes,
    /// `targets:N`: a job over N targets.
    Targets,
}

impl LevelKind {
    /// The kind of a parsed level (`open:RATE` is `Open`: the worker never sees a byte rate).
    pub fn of(load: &Load) -> LevelKind {
        match load {
            Load::Closed { .. } => LevelKind::Closed,
            Load::Open { .. } => LevelKind::Open,
            Load::Targets { .. } => LevelKind::Targets,
        }
    }

    /// How a level of this kind is spelt.
    pub fn syntax(self) -> &'static str {
        match self {
            LevelKind::Closed => "closed:N",
            LevelKind::Open => "open:RATE",
            LevelKind::OpenBytes => "open:BYTES/s",
            LevelKind::Targets => "targets:N",
        }
    }
}

/// What one transaction is, for figure names and verdict texts (`handshake`, `handshakes`).
#[derive(Clone, Debug, Serialize)]
pub struct TransactionName {
    pub one: &'static str,
    pub many: &'static str,
}

/// Resident bytes of one repetition's processes, estimated (docs/worker-protocol.md, "hello"):
/// `base_bytes` + `socket_bytes` (socket mode) + connections × (`per_connection_bytes` (twice in
/// socket mode with a server) + Σ param × k over `per_connection_param`) + targets ×
/// `per_target_bytes` + Σ param × bytes over `per_param_bytes` + Σ a × b × bytes over
/// `per_param_product_bytes`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MemorySizing {
    pub base_bytes: u64,
    pub socket_bytes: u64,
    pub per_connection_bytes: u64,
    pub per_connection_param: Map<String, Value>,
    pub per_target_bytes: u64,
    pub per_param_bytes: Map<String, Value>,
    pub per_param_product_bytes: Vec<(&'static str, &'static str, u64)>,
}

/// Estimates for a preflight check: the bytes a result takes (fixed, per second of window, per
/// target) and the memory of a repetition.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Sizing {
    pub result_bytes: u64,
    pub result_bytes_per_s: u64,
    pub result_bytes_per_target: u64,
    pub memory: MemorySizing,
}

/// Measured with the release worker (peak RSS a fleet job reports per process: a worker 11-13
/// MiB; a slice 12.2 MiB at cap 1, 22.4 MiB at cap 100; an agent 13.5 MiB at 5 targets, 15.2 MiB
/// at 500; a coordinator 11.4 MiB at 10 targets, 13.2 MiB at 1000), with a margin: a worker
/// process's resident memory (libraries, tables, one measuring thread).
pub const PROCESS_BYTES: u64 = 32 << 20;
/// Each further thread: its stack as used and its state (a connection's buffers, a histogram).
pub const THREAD_BYTES: u64 = 256 << 10;
/// A workload result's fixed part (histogram, server side); TLS results measured 3.7 KB at a
/// 0.3 s window and 7.3 KB at 2 s, storage 4.4 KB.
pub const RESULT_BYTES: u64 = 16 << 10;
/// ... and its CPU timelines, per second of window.
pub const RESULT_BYTES_PER_S: u64 = 2 << 10;

impl Sizing {
    /// A workload measured over a window: one process (a second one in socket mode when it has a
    /// server), a thread per connection.
    pub fn windowed(server: bool) -> Sizing {
        Sizing {
            result_bytes: RESULT_BYTES,
            result_bytes_per_s: RESULT_BYTES_PER_S,
            result_bytes_per_target: 0,
            memory: MemorySizing {
                base_bytes: PROCESS_BYTES,
                socket_bytes: if server { PROCESS_BYTES } else { 0 },
                per_connection_bytes: THREAD_BYTES,
                ..MemorySizing::default()
            },
        }
    }
}

/// What a workload announces in `hello`'s `op_params[name]` (beside `params`, `workload: true`
/// and `default_size_bytes`, which are derived from it): docs/worker-protocol.md, "hello".
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadSpec {
    /// Its own parameters, in order (`params` lists them, then the common ones it takes).
    #[serde(skip)]
    pub own_params: &'static [&'static str],
    /// The common parameters it takes, of [`COMMON_PARAMS`].
    #[serde(skip)]
    pub common_params: &'static [&'static str],
    /// The enumerated parameters' values (merged into `hello`'s `param_values`).
    #[serde(skip)]
    pub param_values: Vec<(&'static str, Vec<String>)>,
    /// Each parameter's value when not given (`load` and `mode` included).
    pub defaults: Map<String, Value>,
    /// Parameters without a default that a `run` must give (`check` needs none).
    pub required: &'static [&'static str],
    /// `fleet-job`: each job kind's phases and sizes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_kinds: Option<Value>,
    pub levels: &'static [LevelKind],
    pub bytes_per_tx_param: Option<&'static str>,
    /// Values of the `mode` parameter; empty when the workload takes none.
    pub modes: &'static [Mode],
    pub default_mode: Mode,
    /// Runs a server side in its own process in socket mode.
    pub server: bool,
    /// Can load a server under test that the orchestrator starts (the parameters it passes);
    /// absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_under_test: Option<ServerUnderTest>,
    /// Parameters naming a file the worker reads: a study gives each as a path relative to its
    /// own directory, which the orchestrator resolves before it sends the request.
    pub file_params: &'static [&'static str],
    /// Parameters whose product is the connections one process of a job may hold at once (a
    /// descriptor each): the orchestrator checks `ulimit -n` against it. Empty: its levels say.
    pub connection_params: &'static [&'static str],
    /// A run needs a private work directory in `params["dir"]`.
    pub needs_dir: bool,
    /// The parameter giving the bytes a request writes to that directory.
    pub file_bytes_param: Option<&'static str>,
    /// A run is a fixed job over `targets:N`, not a time window.
    pub job: bool,
    /// A job's calibration level (null: calibrate at the cell's own level).
    pub calibration_load: Option<&'static str>,
    /// A job whose parts may run on several machines (`fleet-job`'s slices); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
    pub transaction: TransactionName,
    pub sizing: Sizing,
}

/// What a run plans to take, in wall-clock seconds, for the orchestrator's time estimate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Planned {
    /// Spent waiting by design: a latency model's network round trips and target work, not the
    /// measured cryptography.
    pub wait_s: f64,
    /// A rough estimate of a job's own work (set-up and cryptography) on a 2-CPU host; None:
    /// the orchestrator's own rule of thumb.
    pub work_s: Option<f64>,
}

/// How a workload loads a server under test the orchestrator started for a repetition
/// (`hello`'s `server_under_test`): the parameters through which the orchestrator passes the
/// server's address (`127.0.0.1:PORT`), the CA certificate that signed its certificate, its
/// process id and its cgroup (for its CPU over the measuring window). A server that is not a
/// TLS server, or whose client is a daemon of its own, also asks for:
///
/// - `dir_param`: the server's private directory (removed with the server, also when the
///   orchestrator is killed), where the workload may keep its own peer's files;
/// - `client_cert_param`, `client_key_param`: a client certificate (PEM) from the same CA, of
///   the same key kind as the server's, and its key (PKCS #8 PEM) — for a protocol whose
///   client authenticates too (IKEv2);
/// - `ready_file`: the server is ready when this file exists in its directory (its start
///   script writes it), instead of when a TLS handshake with its port verifies.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerUnderTest {
    pub connect_param: &'static str,
    pub ca_file_param: &'static str,
    pub pid_param: &'static str,
    pub cgroup_param: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir_param: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cert_param: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_key_param: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_file: Option<&'static str>,
}

/// How a job spreads over machines (`hello`'s `spread`; docs/worker-protocol.md, "Slices on
/// several machines"): a run with `count_param` = k runs as k sub-jobs, the j-th the same
/// request with `index_param` = j and `start_param` = one wall-clock instant (ns since the Unix
/// epoch) for all, each on its own machine; the worker run with `merge_flag` merges their k
/// results (stdin, one a line) into the job's one result. `setup_ms_pointer` is where in a
/// sub-job's result (a JSON pointer) its setup time before the job is, in ms, for the caller
/// that waits for every part to be ready.
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    pub count_param: &'static str,
    pub index_param: &'static str,
    pub start_param: &'static str,
    pub merge_flag: &'static str,
    pub setup_ms_pointer: &'static str,
}

impl WorkloadSpec {
    /// The spec of a workload measured over a time window at closed and open levels, in `modes`
    /// (the first the default; with a server in its own process when socket mode is among
    /// them), with no required parameter, work directory or job; a transaction is
    /// `transaction`. A workload gives its parameters over it
    /// (`WorkloadSpec { own_params, .., ..WorkloadSpec::windowed(..) }`). Panics: `modes` empty.
    pub fn windowed(modes: &'static [Mode], transaction: TransactionName) -> WorkloadSpec {
        let server = modes.contains(&Mode::Socket);
        WorkloadSpec {
            own_params: &[],
            common_params: &[],
            param_values: vec![],
            defaults: Map::new(),
            required: &[],
            job_kinds: None,
            levels: &[LevelKind::Closed, LevelKind::Open],
            bytes_per_tx_param: None,
            modes,
            default_mode: modes[0],
            server,
            server_under_test: None,
            file_params: &[],
            connection_params: &[],
            needs_dir: false,
            file_bytes_param: None,
            job: false,
            calibration_load: None,
            spread: None,
            transaction,
            sizing: Sizing::windowed(server),
        }
    }
}

/// `defaults` from a JSON object literal (`json!({...})`); empty for anything else.
pub fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

// ---- the checked request ---------------------------------------------------------------------

/// Parameters the workloads share, beside their own: the load level, the mode, where the server
/// listens, and a stall to inject into the server (for testing the latency method). Which of
/// them a workload takes is its spec's `common_params`.
pub const COMMON_PARAMS: [&str; 6] = ["load", "mode", "address", "port", "stall_ms", "stall_every_ms"];

/// Where the two sides run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Server in its own worker process, clients in this one, over loopback TCP.
    Socket,
    /// Both sides in one thread exchanging records through memory: no sockets, no kernel; the
    /// protocol's own CPU cost, the floor under the socket figure.
    Memory,
    /// File I/O (`storage`, its only mode; not a value of the `mode` parameter, which storage
    /// does not take).
    File,
}

impl Mode {
    /// The values the `mode` parameter may name.
    pub const PARAMETER: [Mode; 2] = [Mode::Socket, Mode::Memory];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Socket => "socket",
            Mode::Memory => "memory",
            Mode::File => "file",
        }
    }
}

/// A pause injected into the server: `pause_ms` at the start of every `every_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    pub pause_ms: u64,
    pub every_ms: u64,
}

/// The parameters every workload shares, checked.
#[derive(Clone, Debug)]
pub struct Common {
    pub load: Load,
    pub mode: Mode,
    /// Listening address: loopback unless the request names another explicitly.
    pub address: IpAddr,
    /// Listening port; 0 = one the kernel picks.
    pub port: u16,
    pub stall: Option<Stall>,
}

/// A checked workload request.
pub struct WorkloadCase {
    /// The workload that parsed it (and runs it).
    pub workload: &'static dyn DynWorkload,
    pub name: &'static str,
    pub common: Common,
    /// The request's `params` as given (the server process parses them again).
    pub raw: Params,
    pub backend_name: String,
    /// The workload's own [`Workload::Request`].
    request: Box<dyn Any + Send + Sync>,
}

impl WorkloadCase {
    /// The workload's own request, if it is a `T`.
    pub fn request<T: 'static>(&self) -> Option<&T> {
        self.request.downcast_ref()
    }
}

/// How a workload run ended: `ok` with what was measured, or `unsupported` / `invalid` with
/// the reason (and the validation, when it was learnt before).
pub enum Finish {
    Ok(Outcome),
    Unsupported(String, Option<Validation>),
    Invalid(String, Option<Validation>),
}

/// What a workload measured: the window (or job), its validation, and its own part.
pub struct Outcome {
    pub measured: Measured,
    pub validation: Option<Validation>,
    pub detail: WorkloadDetail,
}

impl WorkloadCase {
    /// The result's workload part: this case's name, level and mode, and `detail`.
    pub fn result(&self, detail: WorkloadDetail) -> WorkloadResult {
        WorkloadResult { workload: self.name.into(), load: Level::from(&self.common.load), mode: self.common.mode.name().into(), detail }
    }

    /// `result` filled with how this case's run ended: the status and reason, the validation,
    /// and when it was measured, the measurement and the workload's part.
    pub fn fill(&self, finish: Finish, mut result: RunResult) -> RunResult {
        match finish {
            Finish::Ok(o) => {
                result.validation = o.validation;
                result.measured = Some(o.measured);
                result.workload = Some(self.result(o.detail));
                result.status = Status::Ok;
                result
            }
            Finish::Unsupported(reason, validation) => RunResult { validation, ..result }.ended(Status::Unsupported, reason),
            Finish::Invalid(reason, validation) => RunResult { validation, ..result }.ended(Status::Invalid, reason),
        }
    }

    /// The `result` a run of this case that ended `finish` answers, as JSON (the library's
    /// fields left empty): what the workloads' tests read.
    #[cfg(test)]
    pub fn answer_json(&self, finish: Finish) -> Value {
        let info = crate::backends::LibraryInfo { backend: "test", library: String::new(), library_version: String::new(), fips: false, fips_provider: None };
        let result = RunResult::new(String::new(), self.backend_name.clone(), self.name.into(), &info, self.raw.clone(), 1);
        self.fill(finish, result).to_json()
    }
}

/// Check a request for `workload`: the common parameters against its spec (every key known, the
/// level of a kind it takes, the mode one of its modes), then its own ([`Workload::parse`]).
///
/// Errors: one line naming the parameter and what it accepts.
pub fn parse_with(workload: &'static dyn DynWorkload, backend: &str, params: &Params) -> Result<WorkloadCase, String> {
    let name = workload.name();
    let spec = workload.spec();
    let accepted: Vec<&str> = spec.own_params.iter().chain(spec.common_params).copied().collect();
    if let Some(k) = params.keys().find(|k| !accepted.contains(&k.as_str())) {
        return Err(format!("unknown parameter '{k}' for {name}; it takes: {}", accepted.join(", ")));
    }
    let common = parse_common(name, &spec, params)?;
    let request = workload.parse_request(backend, params, &common)?;
    Ok(WorkloadCase { workload, name, common, raw: params.clone(), request, backend_name: backend.to_string() })
}

/// The common parameters of a request, checked against `spec`. (A workload that does not take
/// a common parameter never sees it: it was refused as unknown, and its default applies.)
fn parse_common(name: &str, spec: &WorkloadSpec, params: &Params) -> Result<Common, String> {
    let default_mode = spec.default_mode.name();
    let mode = match text(params, "mode", default_mode)?.as_str() {
        m if m == default_mode => spec.default_mode,
        m => match Mode::PARAMETER.into_iter().find(|x| x.name() == m) {
            Some(x) if spec.modes.contains(&x) => x,
            Some(_) => {
                let modes: Vec<&str> = spec.modes.iter().map(|m| m.name()).collect();
                return Err(format!("{name} runs in {} mode only: mode must be {}", modes.join(" or "), modes.join(" or ")));
            }
            None => return Err(format!("unknown mode '{m}'; known: socket, memory")),
        },
    };
    let default_load = spec.defaults.get("load").and_then(Value::as_str).unwrap_or("closed:1");
    let load = Load::parse(&text(params, "load", default_load)?)?;
    let kind = LevelKind::of(&load);
    if !spec.levels.contains(&kind) {
        return Err(match spec.levels {
            [LevelKind::Targets] => format!("{name}'s level is a number of targets: load = targets:N"),
            levels => {
                let takes: Vec<&str> = levels.iter().filter(|k| **k != LevelKind::OpenBytes).map(|k| k.syntax()).collect();
                format!("a {} level is not {name}'s; it takes {}", kind.syntax(), takes.join(" or "))
            }
        });
    }
    let address: IpAddr = text(params, "address", "127.0.0.1")?
        .parse()
        .map_err(|_| format!("address must be an IP address, got {}", params["address"]))?;
    let port = number(params, "port", 0, 0..=65535)? as u16;
    let pause_ms = number(params, "stall_ms", 0, 0..=60_000)?;
    let every_ms = number(params, "stall_every_ms", 1000, 1..=3_600_000)?;
    if pause_ms >= every_ms {
        return Err(format!("stall_ms ({pause_ms}) must be shorter than stall_every_ms ({every_ms})"));
    }
    let stall = (pause_ms > 0).then_some(Stall { pause_ms, every_ms });
    if mode == Mode::Memory && (stall.is_some() || params.contains_key("port") || params.contains_key("address")) {
        return Err("port, address and stall_ms apply to mode = socket only (memory mode has no server process)".into());
    }
    Ok(Common { load, mode, address, port, stall })
}

/// What a request to *run* (not to `check`) needs beyond [`parse_with`]: `Err(one line)` when a
/// parameter its spec lists as `required` is missing (storage's `dir`).
pub fn ready_to_run(case: &WorkloadCase) -> Result<(), String> {
    let spec = case.workload.spec();
    match spec.required.iter().find(|p| case.raw.get(**p).is_none_or(Value::is_null)) {
        Some(p) => Err(format!(
            "{p} is required to run (it has no default{})",
            if spec.needs_dir && *p == "dir" { ": the directory to create the files in; the orchestrator passes a private one per repetition" } else { "" }
        )),
        None => Ok(()),
    }
}

/// Whether this worker can run `case` at all, without running it ([`Workload::check`]).
pub fn check(case: &WorkloadCase, backend: &dyn Backend) -> Result<(), String> {
    case.workload.check_request(case, backend)
}

/// What a run of `case` plans to take ([`Workload::planned`]).
pub fn planned(case: &WorkloadCase) -> Planned {
    case.workload.planned_request(case)
}

/// Run a checked case on `backend` (its library's capability checks already done): validate,
/// then measure at the case's load for `warmup` + `budget` ([`Workload::run`]).
pub fn run(case: &WorkloadCase, backend: &dyn Backend, warmup: Duration, budget: Duration) -> Finish {
    // A socket workload pins this thread (and the load threads it starts) to one CPU; the
    // next request in this process starts from the affinity it had before.
    let saved = affinity();
    let finish = case.workload.run_request(case, backend, warmup, budget);
    if let Some(set) = saved {
        // SAFETY: restoring a set sched_getaffinity filled, on the calling thread.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    }
    finish
}

/// The limits of a workload request's level, for `hello`'s `limits`.
pub fn limits() -> [(&'static str, usize); 3] {
    [("max_concurrency", MAX_CONCURRENCY), ("open_threads", OPEN_THREADS), ("max_targets", MAX_TARGETS)]
}

// ---- a server side ----------------------------------------------------------------------------

/// What a workload's server side does with one accepted connection: serve it, adding 1 to
/// `served` as each transaction on it completes (so the counter read at a window's edge is
/// current even on a connection that outlives the window, as `tls-bulk`'s do).
pub type Handler = Arc<dyn Fn(TcpStream, &AtomicU64) -> Result<(), String> + Send + Sync>;

/// A workload's server side, ready to listen: the connection handler (counting the
/// transactions it serves) and the `setup` fields the client needs.
pub struct ServerSide {
    pub handler: Handler,
    pub setup: Value,
    /// Run once by every serving thread before the server says it listens: per-thread state a
    /// handler would otherwise make at its first connection, inside a measurement (`fleet-job`'s
    /// agents: a signer per key). `None`: nothing to prepare.
    pub thread_init: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// Why the server could not start: `code` as in the protocol's errors (`port_in_use`,
/// `unsupported`, `invalid`, `failed`) and one line.
#[derive(Debug)]
pub struct StartError {
    pub code: String,
    pub message: String,
    /// The validation the server made before failing (TLS: its cross-checks), if any.
    pub validation: Option<Validation>,
}

impl StartError {
    /// An error with no validation learnt.
    pub fn new(code: &str, message: String) -> StartError {
        StartError { code: code.into(), message, validation: None }
    }

    /// The run's answer for a server that did not start: `unsupported` or `invalid` (naming
    /// `who`, e.g. `server`, for a failure that is not the case's own).
    pub fn finish(self, who: &str) -> Finish {
        match self.code.as_str() {
            "unsupported" => Finish::Unsupported(self.message, self.validation),
            "invalid" => Finish::Invalid(self.message, self.validation),
            _ => Finish::Invalid(format!("{who}: {}", self.message), self.validation),
        }
    }
}

// ---- helpers the workload files share -----------------------------------------------------------

/// Read a string parameter (numbers accepted and spelt as text), or `default`.
pub(crate) fn text(params: &Params, key: &str, default: &str) -> Result<String, String> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(default.to_string()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(Value::Bool(b)) => Ok(b.to_string()),
        Some(other) => Err(format!("{key} must be a string, got {other}")),
    }
}

/// Read a whole-number parameter (a number or its decimal text) within `range`, or `default`.
pub(crate) fn number(params: &Params, key: &str, default: u64, range: std::ops::RangeInclusive<u64>) -> Result<u64, String> {
    let v = match params.get(key) {
        None | Some(Value::Null) => return Ok(default),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    v.filter(|n| range.contains(n)).ok_or_else(|| {
        format!("{key} must be a whole number in {}..={}, got {}", range.start(), range.end(), params[key])
    })
}

/// Parse one enumerated value with `parse`, naming the known ones when it fails.
pub(crate) fn choice<T>(key: &str, value: &str, parse: impl Fn(&str) -> Option<T>, known: &[&str]) -> Result<T, String> {
    parse(value).ok_or_else(|| format!("unknown {key} '{value}'; known: {}", known.join(", ")))
}

/// `names` as owned strings (a spec's `param_values`).
pub fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// A helper process's line channel to the worker that started it (a workload's server process,
/// a fleet job's slice): requests one per line on stdin, answers one JSON value per line on
/// stdout, each flushed at once.
pub struct ParentLink {
    lines: std::io::Lines<std::io::StdinLock<'static>>,
    out: std::io::StdoutLock<'static>,
}

impl ParentLink {
    /// Lock this process's stdin and stdout for the channel.
    pub fn open() -> Self {
        use std::io::BufRead;
        Self { lines: std::io::stdin().lock().lines(), out: std::io::stdout().lock() }
    }

    /// The next line, or None at the end of input or a read error (the parent is gone).
    pub fn line(&mut self) -> Option<String> {
        self.lines.next()?.ok()
    }

    /// The next line as JSON (`Value::Null` when it is not JSON), or None as for [`line`](Self::line).
    pub fn message(&mut self) -> Option<Value> {
        self.line().map(|l| serde_json::from_str(&l).unwrap_or_default())
    }

    /// Send `v` as one line; a parent that stopped reading is not an error here (it is gone).
    pub fn say(&mut self, v: Value) {
        use std::io::Write;
        let _ = writeln!(self.out, "{v}");
        let _ = self.out.flush();
    }
}

/// Pin the calling thread (and the threads it starts afterwards) to one CPU. Returns the CPU,
/// or `None` where it cannot (a host with one CPU, or the call failed).
pub fn pin_to(cpu: usize) -> Option<usize> {
    // SAFETY: cpu_set_t is plain data; CPU_SET only writes inside it; sched_setaffinity(0, …)
    // applies to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        (libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0).then_some(cpu)
    }
}

/// The calling thread's affinity mask, or None where it cannot be read.
fn affinity() -> Option<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0).then_some(set)
    }
}

/// The CPUs this thread may run on (its affinity mask), in order.
pub fn allowed_cpus() -> Vec<usize> {
    match affinity() {
        // SAFETY: CPU_ISSET only reads inside the set.
        Some(set) => (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect(),
        None => vec![],
    }
}

