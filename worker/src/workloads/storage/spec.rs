//! `storage`'s request: its parameters, their values and defaults, checked into a [`Spec`].

use crate::workloads::base::{choice, number, object, strings, text};
use crate::backends::XtsBits;
use crate::ops::AeadAlg;
use serde_json::{json, Map, Value};
use std::path::PathBuf;

/// The workload's name in a `run` request's `op`.
pub const NAME: &str = "storage";
/// This workload's own parameters (`hello`'s `op_params`, before the common `load`).
pub const PARAMS: [&str; 10] =
    ["scheme", "pattern", "direction", "block_bytes", "file_bytes", "direct", "fsync", "cache", "layer", "dir"];
/// Parameters a request must give (`dir`: the orchestrator passes a private directory).
pub const REQUIRED: [&str; 1] = ["dir"];
/// Bytes per sector: the unit of encryption, of the tweak and of alignment.
pub const SECTOR: usize = 4096;
/// I/O size when not given: 64 KiB.
pub const DEFAULT_BLOCK: u64 = 64 << 10;
/// Largest I/O: 16 MiB.
pub const MAX_BLOCK: u64 = 16 << 20;
/// File size when not given: 64 MiB.
pub const DEFAULT_FILE: u64 = 64 << 20;
/// Largest file: 64 GiB.
pub const MAX_FILE: u64 = 64 << 30;
/// Bytes per sector in the GCM tags file: nonce 12 ‖ tag 16 ‖ 4 zero bytes.
pub const TAG_SLOT: usize = 32;
/// Preparation writes (and the cached copy reads) this many bytes at a time.
pub(super) const CHUNK: usize = 1 << 20;
/// LUKS2 data offset used on dm-crypt, in bytes (`--offset` 32768 × 512).
pub(super) const LUKS_DATA_OFFSET: u64 = 16 << 20;

/// The encryption of the sectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Clear,
    Aes128Xts,
    Aes256Xts,
    Aes256Gcm,
}

impl Scheme {
    pub const ALL: [Scheme; 4] = [Scheme::Clear, Scheme::Aes128Xts, Scheme::Aes256Xts, Scheme::Aes256Gcm];

    pub fn name(self) -> &'static str {
        match self {
            Scheme::Clear => "clear",
            Scheme::Aes128Xts => "aes-128-xts",
            Scheme::Aes256Xts => "aes-256-xts",
            Scheme::Aes256Gcm => "aes-256-gcm",
        }
    }

    pub fn parse(s: &str) -> Option<Scheme> {
        Scheme::ALL.into_iter().find(|x| x.name() == s)
    }

    /// The XTS key size of an XTS scheme.
    pub fn xts(self) -> Option<XtsBits> {
        match self {
            Scheme::Aes128Xts => Some(XtsBits::Aes128),
            Scheme::Aes256Xts => Some(XtsBits::Aes256),
            _ => None,
        }
    }

    /// Bytes of key the scheme takes (0 for clear).
    pub(super) fn key_len(self) -> usize {
        match self {
            Scheme::Clear => 0,
            Scheme::Aes256Gcm => AeadAlg::Aes256Gcm.key_len(),
            x => x.xts().map_or(0, XtsBits::key_len),
        }
    }
}

/// Which block each I/O touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Sequential,
    Random,
}

/// Reads, writes, or a mix (`read_pct` % reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
    Mixed(u32),
}

impl Direction {
    /// `read`, `write`, `mixed:N` (N = % reads, 1..=99).
    pub fn parse(s: &str) -> Option<Direction> {
        match s {
            "read" => Some(Direction::Read),
            "write" => Some(Direction::Write),
            _ => {
                let n: u32 = s.strip_prefix("mixed:")?.trim().parse().ok()?;
                (1..=99).contains(&n).then_some(Direction::Mixed(n))
            }
        }
    }

    pub fn name(self) -> String {
        match self {
            Direction::Read => "read".into(),
            Direction::Write => "write".into(),
            Direction::Mixed(n) => format!("mixed:{n}"),
        }
    }

    /// % of I/Os that read.
    pub fn read_pct(self) -> u32 {
        match self {
            Direction::Read => 100,
            Direction::Write => 0,
            Direction::Mixed(n) => n,
        }
    }
}

/// When written data is flushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    None,
    End,
    Each,
}

/// Whether the window starts with the file out of the page cache or reads a cached copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cache {
    Cold,
    Cached,
}

/// Where the encryption happens: in this process, or in the kernel's dm-crypt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    Userspace,
    DmCrypt,
}

pub(super) const SCHEMES: [&str; 4] = ["clear", "aes-128-xts", "aes-256-xts", "aes-256-gcm"];
pub(super) const BOOLS: [&str; 2] = ["false", "true"];
/// The enumerated parameters: each value's name, the default first (as in [`defaults`]).
pub(super) const PATTERNS: [(&str, Pattern); 2] = [("sequential", Pattern::Sequential), ("random", Pattern::Random)];
pub(super) const FSYNCS: [(&str, Fsync); 3] = [("none", Fsync::None), ("end", Fsync::End), ("each", Fsync::Each)];
pub(super) const CACHES: [(&str, Cache); 2] = [("cold", Cache::Cold), ("cached", Cache::Cached)];
pub(super) const LAYERS: [(&str, Layer); 2] = [("userspace", Layer::Userspace), ("dm-crypt", Layer::DmCrypt)];

/// The names of an enumerated parameter's values, in order.
pub(super) fn names<T>(table: &[(&'static str, T)]) -> Vec<&'static str> {
    table.iter().map(|(n, _)| *n).collect()
}

/// The name of `value` in `table` ("?" if absent, which the tables rule out).
pub(super) fn name_of<T: PartialEq>(table: &[(&'static str, T)], value: T) -> &'static str {
    table.iter().find(|(_, v)| *v == value).map_or("?", |(n, _)| *n)
}

/// One enumerated parameter from `params` (default: the table's first value); errors name the
/// values it takes.
pub(super) fn enumerated<T: Copy>(params: &Map<String, Value>, key: &str, table: &[(&'static str, T)]) -> Result<T, String> {
    let given = text(params, key, table[0].0)?;
    choice(key, &given, |s| table.iter().find(|(n, _)| *n == s).map(|(_, v)| *v), &names(table))
}

/// The values a parameter takes when not given (`dir` has none: it is required).
pub fn defaults() -> Map<String, Value> {
    object(json!({"scheme": "clear", "pattern": "sequential", "direction": "read", "block_bytes": DEFAULT_BLOCK,
                  "file_bytes": DEFAULT_FILE, "direct": "false", "fsync": "none", "cache": "cold",
                  "layer": "userspace", "load": "closed:1"}))
}

/// The enumerated parameters' values, for `hello`'s `param_values` (`direction` is not listed:
/// `mixed:N` is a form, not a list).
pub fn param_values() -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("scheme", strings(&SCHEMES)),
        ("pattern", strings(&names(&PATTERNS))),
        ("direct", strings(&BOOLS)),
        ("fsync", strings(&names(&FSYNCS))),
        ("cache", strings(&names(&CACHES))),
        ("layer", strings(&names(&LAYERS))),
    ]
}

/// A checked `storage` request.
#[derive(Clone, Debug)]
pub struct Spec {
    pub scheme: Scheme,
    pub pattern: Pattern,
    pub direction: Direction,
    pub block_bytes: usize,
    pub file_bytes: u64,
    pub direct: bool,
    pub fsync: Fsync,
    pub cache: Cache,
    pub layer: Layer,
    /// Where the files go; required to run (`check` needs none).
    pub dir: Option<PathBuf>,
}

/// Check a request's own parameters (the load level is checked against the spec, and against
/// the file by [`check_threads`]). `dir`, when given, must be an existing, writable directory
/// (checked without writing); a request to run needs one (the spec's `required`).
///
/// Errors: one line naming the parameter and what it accepts.
pub fn parse(params: &Map<String, Value>) -> Result<Spec, String> {
    let scheme = choice("scheme", &text(params, "scheme", "clear")?, Scheme::parse, &SCHEMES)?;
    let pattern = enumerated(params, "pattern", &PATTERNS)?;
    let direction = text(params, "direction", "read")?;
    let direction = Direction::parse(&direction).ok_or_else(|| {
        format!("unknown direction '{direction}'; known: read, write, mixed:N (N = % of I/Os that read, 1..99)")
    })?;
    let block_bytes = number(params, "block_bytes", DEFAULT_BLOCK, SECTOR as u64..=MAX_BLOCK)?;
    if block_bytes % SECTOR as u64 != 0 {
        return Err(format!("block_bytes must be a multiple of {SECTOR} (whole sectors), got {block_bytes}"));
    }
    let file_bytes = number(params, "file_bytes", DEFAULT_FILE, SECTOR as u64..=MAX_FILE)?;
    if file_bytes % block_bytes != 0 || file_bytes < block_bytes {
        return Err(format!(
            "file_bytes must be a whole number of blocks (a multiple of block_bytes = {block_bytes}), got {file_bytes}"
        ));
    }
    let direct = match text(params, "direct", "false")?.to_ascii_lowercase().as_str() {
        "true" => true,
        "false" => false,
        other => return Err(format!("direct must be true or false, got '{other}'")),
    };
    let fsync = enumerated(params, "fsync", &FSYNCS)?;
    let cache = enumerated(params, "cache", &CACHES)?;
    let layer = enumerated(params, "layer", &LAYERS)?;
    if cache == Cache::Cached && direction != Direction::Read {
        return Err(format!(
            "cache = cached applies to direction = read only (a write goes through the layer to the file), got direction = {}",
            direction.name()
        ));
    }
    if cache == Cache::Cached && direct {
        return Err("direct = true bypasses the page cache that cache = cached reads from: choose one".into());
    }
    let dir = match params.get("dir") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(check_dir(d)?),
        Some(other) => return Err(format!("dir must be a directory's path, got {other}")),
    };
    Ok(Spec {
        scheme,
        pattern,
        direction,
        block_bytes: block_bytes as usize,
        file_bytes,
        direct,
        fsync,
        cache,
        layer,
        dir,
    })
}

/// `dir` must exist, be a directory and be writable (`access(W_OK | X_OK)`: nothing written).
pub(super) fn check_dir(d: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(d);
    match std::fs::metadata(&p) {
        Err(e) => return Err(format!("dir '{d}' cannot be used: {e}")),
        Ok(m) if !m.is_dir() => return Err(format!("dir '{d}' is not a directory")),
        Ok(_) => {}
    }
    let c = std::ffi::CString::new(d).map_err(|_| format!("dir '{d}' holds a NUL byte"))?;
    // SAFETY: `c` is a valid NUL-terminated path; access only reads it.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(format!("dir '{d}' is not writable: {}", std::io::Error::last_os_error()));
    }
    Ok(p)
}

/// Each load thread owns a region of the file: `file_bytes` ≥ threads × `block_bytes`.
pub fn check_threads(spec: &Spec, threads: usize) -> Result<(), String> {
    let need = threads as u64 * spec.block_bytes as u64;
    if spec.file_bytes < need {
        return Err(format!(
            "file_bytes ({}) must be at least threads × block_bytes = {threads} × {} = {need}: each load thread owns a region of the file",
            spec.file_bytes, spec.block_bytes
        ));
    }
    Ok(())
}

pub(super) const DM_GCM: &str = "aes-256-gcm on the dm-crypt layer needs dm-integrity (cryptsetup --integrity aead), which this workload does not set up: dm-crypt runs clear and the XTS schemes";
